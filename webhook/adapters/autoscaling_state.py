"""The autoscalers' objects and the cluster's Nodes → one ``AutoscalingState`` (issue #16).

Owns ``autoscaling_state``: each Karpenter NodePool and each cluster-autoscaler node group
becomes a ``ScaleUpSource`` with what the cluster shows of it (its nodes, NodeClaims in
flight, what it holds against its limits, a node template), plus the observed provisioning
times and the ProvisioningRequests. Does not own reading any one object
(``autoscaling_objects``) nor what the engine concludes (``webhook.engine.autoscale``).

Rules, each as its upstream does it:

* **A NodePool's nodes** are the Nodes labelled ``karpenter.sh/nodepool=<name>`` (karpenter
  pkg/apis/v1/labels.go). ``in_use`` is ``status.resources`` (kept by karpenter
  pkg/controllers/nodepool/counter from pkg/controllers/state/cluster.go
  ``updateNodePoolResources``: Σ capacity of the pool's nodes, and of NodeClaims not yet
  registered, plus ``nodes``); without it the same sum is made here. ``pending``: the pool's
  NodeClaims without a Ready node (not being deleted). A static pool (``spec.replicas``)
  adds no node past its replicas. ``typical_shape``: its nodes' allocatable when all agree.
  A NodePool the live cache could not read (``NodePoolObject.error``) may add any node: its
  requirements and taints are unknown (None) and it has no limits, with a note.
* **Provisioning samples**: a Ready NodeClaim's creationTimestamp → its Ready condition's
  lastTransitionTime, seconds; the newest ``MAX_SAMPLES`` (by Ready time), newest last.
* **A node group** (cluster-autoscaler's status): ``max_new_nodes = max(0, maxSize −
  cloudProviderTarget)``. Its template is taken from the existing nodes of the group, as
  cluster-autoscaler itself builds one from a real node (simulator/node_info_utils.go
  ``createSanitizedNode``: the hostname label is the new node's own, taints are sanitized):
  requirements ``In [value]`` for the labels every such node carries with the same value
  (``PER_NODE_LABELS`` left out), the taints they all carry (system taints that clear
  themselves left out), ``node_shape`` their allocatable when every Ready one agrees and no
  extended resource reads 0 (a device plugin that has not registered yet, FIELD-NOTES §1).
  A node belongs to a group when a provider's node-group label (``NODE_GROUP_LABELS``) names
  it — exactly, or through the provider's group naming. With no node of the group visible
  (scaled to zero, or a name that maps ambiguously), the template is unknown:
  ``requirements``, ``taints`` and ``node_shape`` None (it may match anything).

Pure: no I/O. Units: scheduler units, seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatch

from ..engine.autoscale.model import (
    NODE_GROUP,
    NODEPOOL,
    NODEPOOL_LABEL,
    NODES_LIMIT,
    AutoscalingState,
    ProvisioningRequestInfo,
    ScaleUpSource,
)
from ..engine.model import DEFAULT_TRANSIENT_TAINTS, Node, NodeSelectorRequirement, frozen_map
from .autoscaling_objects import CAStatusObject, NodeClaimObject, NodePoolObject
from .ca_status import NodeGroupSize

__all__ = ["autoscaling_state", "MAX_SAMPLES", "NODE_GROUP_LABELS", "PER_NODE_LABELS", "node_group_of"]

#: Provisioning samples kept (newest last).
MAX_SAMPLES = 256

#: Node labels that name the node group (the cloud's node pool) a node belongs to, and how the
#: provider names the group cluster-autoscaler reports for label value ``v`` (a regex over the
#: last path segment of the group's name; the label value itself always matches):
#: * GKE ``cloud.google.com/gke-nodepool`` (GKE node pool labels); the group is the pool's
#:   managed instance group, ``gke-<cluster>-<pool>-<8 hex>-grp`` (its URL's last segment).
#: * EKS ``eks.amazonaws.com/nodegroup`` (cluster-autoscaler cloudprovider/aws/aws_wrapper.go
#:   sets it on managed node group templates); the group is the Auto Scaling group
#:   ``eks-<nodegroup>-<uuid>``.
#: * AKS ``kubernetes.azure.com/agentpool`` and the older ``agentpool`` (cloudprovider/azure/
#:   azure_template.go agentPoolNodeLabelKey, legacyAgentPoolNodeLabelKey); the group is the
#:   scale set ``aks-<pool>-<digits>-vmss``.
NODE_GROUP_LABELS: tuple[tuple[str, str], ...] = (
    ("cloud.google.com/gke-nodepool", r"gke-.+-{v}-[0-9a-f]{{8}}-grp"),
    ("eks.amazonaws.com/nodegroup", r"eks-{v}-[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}"),
    ("kubernetes.azure.com/agentpool", r"aks-{v}-\d+-vmss"),
    ("agentpool", r"aks-{v}-\d+-vmss"),
)
#: Labels a template node does not pass on: each node's own (cluster-autoscaler gives a new
#: node its own hostname, simulator/node_info_utils.go createSanitizedNode).
PER_NODE_LABELS = frozenset({"kubernetes.io/hostname"})
#: Resources a node always reports (others are extended resources a device plugin adds).
_BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


def _add(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for r, v in amounts.items():
        total[r] = total.get(r, 0) + int(v)


def _agreed_shape(nodes: list[Node]) -> Mapping[str, int] | None:
    """The allocatable every node shares (None when there is none or they differ)."""
    if not nodes:
        return None
    first = nodes[0].allocatable
    if any(n.allocatable is not first and n.allocatable != first for n in nodes[1:]):
        return None
    return frozen_map(first)


def _nodepool_source(pool: NodePoolObject, nodes: list[Node], claims: list[NodeClaimObject],
                     ready_nodes: set[str], node_names: set[str]) -> ScaleUpSource:
    live = [c for c in claims if not c.deleting]
    pending = sum(1 for c in live if c.node_name not in ready_nodes)
    if pool.status_resources is not None:
        in_use = dict(pool.status_resources)
    else:
        in_use = {}
        for n in nodes:
            _add(in_use, n.capacity)
        unregistered = [c for c in live if c.node_name not in node_names]
        for c in unregistered:
            _add(in_use, c.capacity)
        in_use[NODES_LIMIT] = len(nodes) + len(unregistered)
    max_new = None if pool.replicas is None else max(0, pool.replicas - len(nodes) - pending)
    return ScaleUpSource(
        name=pool.name, kind=NODEPOOL, requirements=pool.requirements, labels=frozen_map(pool.labels),
        taints=pool.taints, startup_taints=pool.startup_taints, limits=frozen_map(pool.limits),
        in_use=frozen_map(in_use), max_new_nodes=max_new, node_shape=None, typical_shape=_agreed_shape(nodes),
        weight=pool.weight, nodes=len(nodes), pending=pending, origin=f"NodePool {pool.name}",
    )


_PATTERNS = dict(NODE_GROUP_LABELS)


def _names_group(group: str, key: str, value: str) -> bool:
    """True when node label ``key=value`` (a ``NODE_GROUP_LABELS`` key) names node group ``group``."""
    base = group.rstrip("/").rsplit("/", 1)[-1]
    if value == group or value == base:
        return True
    return value in base and re.fullmatch(_PATTERNS[key].format(v=re.escape(value)), base) is not None


def node_group_of(group: str, node: Node) -> bool:
    """True when a provider label of ``node`` names node group ``group`` (``NODE_GROUP_LABELS``)."""
    return any(node.labels.get(k) and _names_group(group, k, node.labels[k]) for k, _ in NODE_GROUP_LABELS)


def _is_transient(key: str) -> bool:
    return any(fnmatch(key, p) for p in DEFAULT_TRANSIENT_TAINTS)


def _template_shape(nodes: list[Node]) -> Mapping[str, int] | None:
    """A node group's node shape: the Ready nodes' allocatable when all agree and no extended
    resource reads 0; else None (unknown)."""
    ready = [n for n in nodes if n.ready]
    shape = _agreed_shape(ready)
    if shape is None:
        return None
    seen: set[int] = set()
    for n in ready:
        if id(n.capacity) in seen:  # nodes often share one capacity map
            continue
        seen.add(id(n.capacity))
        for r, v in n.capacity.items():
            if r not in _BASE_RESOURCES and not r.startswith("hugepages-") and int(v) == 0:
                return None
    return shape


def _node_group_source(size: NodeGroupSize, nodes: list[Node], origin: str, ambiguous: bool) -> ScaleUpSource:
    requirements: tuple[NodeSelectorRequirement, ...] | None = None
    taints = None
    shape = None
    if nodes and not ambiguous:
        common = {k: v for k, v in nodes[0].labels.items() if k not in PER_NODE_LABELS}
        for n in nodes[1:]:
            common = {k: v for k, v in common.items() if n.labels.get(k) == v}
        requirements = tuple(NodeSelectorRequirement(k, "In", (v,)) for k, v in sorted(common.items()))
        shared = set(t for t in nodes[0].taints if not _is_transient(t.key))
        for n in nodes[1:]:
            shared &= set(n.taints)
        taints = tuple(t for t in nodes[0].taints if t in shared)
        shape = _template_shape(nodes)
    return ScaleUpSource(
        name=size.name, kind=NODE_GROUP, requirements=requirements, taints=taints,
        max_new_nodes=max(0, size.max_size - size.target), node_shape=shape,
        typical_shape=_agreed_shape(nodes), nodes=len(nodes), pending=size.pending,
        origin=f"{origin} node group {size.name}",
    )


def autoscaling_state(
    nodes: Iterable[Node],
    nodepools: Iterable[NodePoolObject] = (),
    nodeclaims: Iterable[NodeClaimObject] = (),
    ca_status: CAStatusObject | None = None,
    provisioning_requests: Iterable[ProvisioningRequestInfo] = (),
) -> AutoscalingState:
    """Everything the cluster shows about node autoscaling (see the module's rules).

    Sources come NodePools first (by name), then node groups in the status's order;
    ``notes`` say what was not read (a status in a format not understood, a node group whose
    nodes could not be told apart).
    """
    nodes = list(nodes)
    pools = sorted(nodepools, key=lambda p: p.name)
    claims = list(nodeclaims)
    requests = tuple(sorted(provisioning_requests, key=lambda r: (r.namespace, r.name)))
    notes: list[str] = []
    sources: list[ScaleUpSource] = []
    if pools:
        ready_nodes = {n.name for n in nodes if n.ready}
        node_names = {n.name for n in nodes}
        by_pool: dict[str, list[Node]] = {}
        for n in nodes:
            p = n.labels.get(NODEPOOL_LABEL)
            if p:
                by_pool.setdefault(p, []).append(n)
        claims_by_pool: dict[str, list[NodeClaimObject]] = {}
        for c in claims:
            claims_by_pool.setdefault(c.nodepool, []).append(c)
        for pool in pools:
            if pool.error:
                notes.append(f"NodePool {pool.name} could not be read ({pool.error}); "
                             "taken as able to add nodes of any labels and shape")
                sources.append(ScaleUpSource(name=pool.name, kind=NODEPOOL, requirements=None, taints=None,
                                             nodes=len(by_pool.get(pool.name, [])), origin=f"NodePool {pool.name}"))
                continue
            sources.append(_nodepool_source(pool, by_pool.get(pool.name, []), claims_by_pool.get(pool.name, []),
                                            ready_nodes, node_names))
    if ca_status is not None:
        st = ca_status.status
        if st.note:
            notes.append(f"{ca_status.origin}: {st.note}")
        pool_names = {s.name for s in sources}
        # nodes by node-group label: a group is matched against the few distinct values, not every node
        by_label: dict[tuple[str, str], list[Node]] = {}
        for n in nodes:
            for k, _ in NODE_GROUP_LABELS:
                v = n.labels.get(k)
                if v:
                    by_label.setdefault((k, v), []).append(n)
        for g in st.groups:
            if g.name in pool_names:
                notes.append(f"{ca_status.origin}: node group {g.name} has the name of a NodePool; the NodePool is used")
                continue
            values = {kv for kv in by_label if _names_group(g.name, *kv)}
            seen: set[str] = set()
            mine = [n for kv in sorted(values) for n in by_label[kv] if not (n.name in seen or seen.add(n.name))]
            ambiguous = len({v for _, v in values}) > 1
            if ambiguous:
                notes.append(f"{ca_status.origin}: node group {g.name}: its nodes could not be told apart "
                             f"({', '.join(sorted(f'{k}={v}' for k, v in values))}); its node template is unknown")
            sources.append(_node_group_source(g, [] if ambiguous else mine, ca_status.origin, ambiguous))
    samples = sorted(((c.ready_at, c.provisioning_s) for c in claims if c.provisioning_s is not None),
                     key=lambda t: t[0])
    return AutoscalingState(
        sources=tuple(sources),
        provisioning_samples_s=tuple(s for _, s in samples[-MAX_SAMPLES:]),
        provisioning_requests=requests,
        notes=tuple(notes),
    )
