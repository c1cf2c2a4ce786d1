"""Which kinds the live cache watches and how each is projected: ONE table, ``KINDS``.

Each row (a ``Kind``) says, for one kind: the REST resource listed and watched (its
``ResourceSpec``: informer name, group, versions tried in order, plural, field selector, and
``optional`` — a CRD that may be absent, 404 → empty and reported ``installed: false``), how a
decoded object becomes a store entry (``project``: ``(key, projection)``, from the
``webhook.adapters`` converters), which ``ClusterSnapshot`` field its store feeds (``slot``), and
the few kind-specific steps (informers to wait for, a fast list path, watch hooks, per-node
usage, what a change does to the cache). ``DEFAULT_RESOURCES`` is the table's resource column
(DESIGN.md "Cache"); Kueue tries v1beta1 then v1beta2 (Cohorts also v1alpha1). Node
autoscalers (issue #16): Karpenter NodePools and NodeClaims (karpenter.sh/v1),
ProvisioningRequests (autoscaling.x-k8s.io/v1), all optional, and the one ConfigMap
kube-system/cluster-autoscaler-status; ``assemble_snapshot`` combines them with the Nodes
(``webhook.adapters.autoscaling_state``). Topology (issue #13): Kueue Topologies (v1beta1 then
v1beta2), KAI Topologies (kai.scheduler/v1alpha1), Volcano HyperNodes (topology.volcano.sh/v1alpha1),
all optional → ``ClusterSnapshot.topology``.

Owns also ``_Informer``: the list+watch machinery (``webhook.cache.informer.Informer``) with its
hooks filled from the table (and the Pod steps of ``webhook.cache.pods``), and
``assemble_snapshot``: the slots' stores → a ``ClusterSnapshot``.

Does not own: list/watch/410/backoff (``informer``), the stores' lock, rebuild and staleness
(``webhook.cache.live``), the converters (``webhook.adapters``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..adapters.cluster import (
    cluster_queue_from_k8s,
    cohort_from_k8s,
    hypernode_from_k8s,
    local_queue_from_k8s,
    node_from_k8s,
    pod_group_from_k8s,
    priority_class_from_k8s,
    resource_flavor_from_k8s,
    topology_levels_from_k8s,
    volcano_queue_from_k8s,
)
from ..adapters.autoscaling_objects import (
    AUTOSCALING_X_K8S,
    CA_STATUS_NAME,
    CA_STATUS_NAMESPACE,
    KARPENTER,
    ca_status_from_k8s,
    nodeclaim_from_k8s,
    nodepool_or_unreadable,
    provisioning_request_from_k8s,
)
from ..adapters.autoscaling_state import autoscaling_state
from ..adapters.disruption import disruption_budget_from_k8s
from ..adapters.workload import workload_from_k8s
from ..engine.model import KueueState, TopologyState, VolcanoState, frozen_map
from ..engine.snapshot import ClusterSnapshot
from .informer import Informer, ResourceSpec, obj_key
from .pods import PodSteps

__all__ = ["Kind", "KINDS", "DEFAULT_RESOURCES", "POD_FIELD_SELECTOR", "kind_of", "policy_resource", "assemble_snapshot",
           "LIST_SLOTS", "MAP_SLOTS"]

log = logging.getLogger("gangcheck.cache")

#: Pods that hold resources: the server-side filter the pod informer lists and watches with. A
#: pod that becomes terminal arrives as DELETED (the API server's watch cache translates it).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

#: Slots whose stores are concatenated into a tuple (in store order), and slots whose stores
#: are merged into one map (by ``rank``, then table order: on the same key the later wins).
LIST_SLOTS = ("nodes", "pods")
MAP_SLOTS = ("kueue.flavors", "kueue.cluster_queues", "kueue.local_queues", "kueue.cohorts", "kueue.workloads",
             "volcano.queues", "volcano.pod_groups", "disruption_budgets", "autoscaling.nodepools",
             "autoscaling.nodeclaims", "autoscaling.provisioning_requests", "autoscaling.ca_status",
             "topology.kueue", "topology.kai", "topology.hypernodes")


@dataclass(frozen=True)
class Kind:
    """One row of ``KINDS``.

    Attributes:
        resource: what is listed and watched (``resource.kind`` names the row).
        project: ``(informer, decoded object) → (key, projection)``, or None when the object is
            not stored; raises ``AdapterError`` for an object it cannot read (counted, skipped).
        slot: the ``ClusterSnapshot`` field the store feeds (``LIST_SLOTS``/``MAP_SLOTS``), or
            None when it reaches the snapshot through ``on_change`` (or not at all).
        rank: merge order within a map slot (higher wins on the same key).
        waits_for: informer names whose first sync this kind's informer waits for.
        list_page: ``(informer, body, converted) → metadata``: a list page's own decoder.
        on_added / on_deleted: watch hooks, ``(informer, projection)`` / ``(informer, object)``.
        node_usage: the cache keeps the per-node Σ requests of this store's entries.
        on_change: ``(cache, store)`` after every change to the store (under no lock).
        default: in ``DEFAULT_RESOURCES`` (the policy ConfigMap is watched only when configured).
    """

    resource: ResourceSpec
    project: Callable[[Any, Mapping], tuple[Any, Any] | None]
    slot: str | None
    rank: int = 0
    waits_for: tuple[str, ...] = ()
    list_page: Callable[[Any, bytes, dict], Mapping] | None = None
    on_added: Callable[[Any, Any], None] | None = None
    on_deleted: Callable[[Any, Mapping], None] | None = None
    node_usage: bool = False
    on_change: Callable[[Any, dict], None] | None = None
    default: bool = True


# ---------------------------------------------------------------- projections


def _by_name(convert: Callable[[Mapping], Any]) -> Callable[[Any, Mapping], tuple[Any, Any]]:
    """A projection keyed by the converted value's ``name`` (cluster-scoped kinds)."""
    def project(_inf: Any, obj: Mapping) -> tuple[Any, Any]:
        v = convert(obj)
        return v.name, v
    project.__doc__ = f"(name, {convert.__name__}(obj))"
    return project


def _by_namespace(convert: Callable[[Mapping], Any]) -> Callable[[Any, Mapping], tuple[Any, Any]]:
    """A projection keyed by the converted value's ``(namespace, name)`` (namespaced kinds)."""
    def project(_inf: Any, obj: Mapping) -> tuple[Any, Any]:
        v = convert(obj)
        return (v.namespace, v.name), v
    project.__doc__ = f"((namespace, name), {convert.__name__}(obj))"
    return project


def _topology(_inf: Any, obj: Mapping) -> tuple[str, tuple[str, ...]]:
    """(name, the Topology's levels' node label keys, top → bottom)."""
    return topology_levels_from_k8s(obj)


def _node(_inf: Any, obj: Mapping) -> tuple[Any, Any]:
    """(name, Node)."""
    return obj_key(obj), node_from_k8s(obj)


def _priority_class(_inf: Any, obj: Mapping) -> tuple[str, tuple[int, bool]]:
    """(name, (value, globalDefault))."""
    name, value, is_default = priority_class_from_k8s(obj)
    return name, (value, is_default)


def _policy_data(_inf: Any, obj: Mapping) -> tuple[Any, dict[str, str]]:
    """(key, the ConfigMap's ``data`` as str → str; {} when it is not a mapping)."""
    data = obj.get("data") or {}
    return obj_key(obj), {str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {}


def _ca_status(_inf: Any, obj: Mapping) -> tuple[Any, Any]:
    """(key, ``CAStatusObject``): the status text parsed (never an error, see ``ca_status``)."""
    return obj_key(obj), ca_status_from_k8s(obj)


def _priority_classes_changed(cache: Any, store: dict) -> None:
    """The cache's PriorityClass values (pods' priorityClassName → priority) and the global
    default (the lowest, should there be several: the API server allows one)."""
    values = {name: v for name, (v, _d) in store.items()}
    defaults = [v for v, d in store.values() if d]
    cache._pc_values = values
    cache._pc_default = min(defaults) if defaults else 0  # the API server allows one; be safe


def _policy_changed(cache: Any, store: dict) -> None:
    """Report the policy ConfigMap's data to ``cache.on_policy`` when it appears, changes or
    goes (None), and once after the first sync; a callback error is logged, never raised."""
    data = next(iter(store.values()), None)
    if data != cache._policy_data or not cache._policy_reported:
        cache._policy_data = data
        cache._policy_reported = True
        if cache.on_policy is not None:
            try:
                cache.on_policy(None if data is None else dict(data))
            except Exception:
                log.exception("policy callback failed")


# ---------------------------------------------------------------- the table

_KUEUE = ("v1beta1", "v1beta2")
_R = ResourceSpec

#: Every kind the cache can watch, in informer order (``status()`` lists them so).
KINDS: tuple[Kind, ...] = (
    Kind(_R("priorityclasses", "PriorityClass", "scheduling.k8s.io", ("v1",), "priorityclasses"),
         _priority_class, None, on_change=_priority_classes_changed),
    Kind(_R("nodes", "Node", "", ("v1",), "nodes"), _node, "nodes"),
    # Pods resolve priorityClassName through PriorityClasses: those sync first.
    Kind(_R("pods", "Pod", "", ("v1",), "pods", field_selector=POD_FIELD_SELECTOR), PodSteps._project_pod, "pods",
         waits_for=("priorityclasses",), list_page=PodSteps._list_pod_page, on_added=PodSteps._note_arrival,
         on_deleted=PodSteps._learn_runtime, node_usage=True),
    Kind(_R("kueue.resourceflavors", "ResourceFlavor", "kueue.x-k8s.io", _KUEUE, "resourceflavors", optional=True),
         _by_name(resource_flavor_from_k8s), "kueue.flavors"),
    Kind(_R("kueue.clusterqueues", "ClusterQueue", "kueue.x-k8s.io", _KUEUE, "clusterqueues", optional=True),
         _by_name(cluster_queue_from_k8s), "kueue.cluster_queues"),
    Kind(_R("kueue.localqueues", "LocalQueue", "kueue.x-k8s.io", _KUEUE, "localqueues", optional=True),
         _by_namespace(local_queue_from_k8s), "kueue.local_queues"),
    Kind(_R("kueue.cohorts", "Cohort", "kueue.x-k8s.io", _KUEUE + ("v1alpha1",), "cohorts", optional=True),
         _by_name(cohort_from_k8s), "kueue.cohorts"),
    Kind(_R("kueue.workloads", "Workload", "kueue.x-k8s.io", _KUEUE, "workloads", optional=True),
         _by_namespace(workload_from_k8s), "kueue.workloads"),
    Kind(_R("poddisruptionbudgets", "PodDisruptionBudget", "policy", ("v1",), "poddisruptionbudgets"),
         _by_namespace(disruption_budget_from_k8s), "disruption_budgets"),
    Kind(_R("volcano.queues", "Queue", "scheduling.volcano.sh", ("v1beta1",), "queues", optional=True),
         _by_name(volcano_queue_from_k8s), "volcano.queues"),
    # A Volcano PodGroup wins over a coscheduling one with the same namespace/name (rank 1).
    Kind(_R("volcano.podgroups", "VolcanoPodGroup", "scheduling.volcano.sh", ("v1beta1",), "podgroups", optional=True),
         _by_namespace(pod_group_from_k8s), "volcano.pod_groups", rank=1),
    Kind(_R("coscheduling.podgroups", "CoschedPodGroup", "scheduling.x-k8s.io", ("v1alpha1",), "podgroups", optional=True),
         _by_namespace(pod_group_from_k8s), "volcano.pod_groups"),
    # Node autoscalers (issue #16): Karpenter and ProvisioningRequests are CRDs that may be absent.
    # A NodePool that cannot be read is kept as one that may add any node (never a denial).
    Kind(_R("karpenter.nodepools", "NodePool", KARPENTER, ("v1",), "nodepools", optional=True),
         _by_name(nodepool_or_unreadable), "autoscaling.nodepools"),
    Kind(_R("karpenter.nodeclaims", "NodeClaim", KARPENTER, ("v1",), "nodeclaims", optional=True),
         _by_name(nodeclaim_from_k8s), "autoscaling.nodeclaims"),
    Kind(_R("autoscaling.provisioningrequests", "ProvisioningRequest", AUTOSCALING_X_K8S, ("v1",),
            "provisioningrequests", optional=True),
         _by_namespace(provisioning_request_from_k8s), "autoscaling.provisioning_requests"),
    # cluster-autoscaler's status: one ConfigMap (RBAC: a Role in kube-system for that name only).
    Kind(_R("autoscaler.status", "AutoscalerStatusConfigMap", "", ("v1",), "configmaps", namespace=CA_STATUS_NAMESPACE,
            field_selector=f"metadata.name={CA_STATUS_NAME}", optional=True),
         _ca_status, "autoscaling.ca_status"),
    # Topology objects (issue #13), CRDs that may be absent: Kueue's and KAI's Topologies, Volcano's HyperNodes.
    Kind(_R("kueue.topologies", "Topology", "kueue.x-k8s.io", _KUEUE, "topologies", optional=True),
         _topology, "topology.kueue"),
    Kind(_R("kai.topologies", "KAITopology", "kai.scheduler", ("v1alpha1",), "topologies", optional=True),
         _topology, "topology.kai"),
    Kind(_R("volcano.hypernodes", "HyperNode", "topology.volcano.sh", ("v1alpha1",), "hypernodes", optional=True),
         _by_name(hypernode_from_k8s), "topology.hypernodes"),
    # Only with a policy ConfigMap configured: ``policy_resource(namespace, name)``.
    Kind(_R("policy", "PolicyConfigMap", "", ("v1",), "configmaps"), _policy_data, None, on_change=_policy_changed,
         default=False),
)

#: What the cache reads by default (DESIGN.md "Cache"): the table's resources, in its order.
DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = tuple(k.resource for k in KINDS if k.default)
_BY_KIND: dict[str, Kind] = {k.resource.kind: k for k in KINDS}


def kind_of(kind: str) -> Kind | None:
    """The table's row for a ``ResourceSpec.kind`` (None: a kind with no projection)."""
    return _BY_KIND.get(kind)


def policy_resource(namespace: str, name: str) -> ResourceSpec:
    """The policy ConfigMap's resource: ``configmaps`` in ``namespace``, only ``name``."""
    return dataclasses.replace(_BY_KIND["PolicyConfigMap"].resource, namespace=namespace,
                               field_selector=f"metadata.name={name}")


def assemble_snapshot(stores: Mapping[str, Any], *, priority_classes: Mapping[str, int], node_used: Mapping,
                      source: str) -> ClusterSnapshot:
    """The ``ClusterSnapshot`` of the slots' gathered stores (``LIST_SLOTS``: tuples of
    projections; ``MAP_SLOTS``: key → projection maps; a missing slot is empty)."""
    def m(slot: str) -> Mapping:
        return frozen_map(stores.get(slot))

    return ClusterSnapshot(
        stores.get("nodes", ()),
        stores.get("pods", ()),
        kueue=KueueState(m("kueue.flavors"), m("kueue.cluster_queues"), m("kueue.local_queues"), m("kueue.cohorts"),
                         m("kueue.workloads")),
        volcano=VolcanoState(m("volcano.queues"), m("volcano.pod_groups")),
        priority_classes=priority_classes,
        source=source,
        node_used=node_used,
        disruption_budgets=(stores.get("disruption_budgets") or {}).values(),
        topology=TopologyState(m("topology.kueue"), m("topology.kai"), m("topology.hypernodes")),
        autoscaling=autoscaling_state(stores.get("nodes", ()), m("autoscaling.nodepools").values(),
                                      m("autoscaling.nodeclaims").values(),
                                      next(iter(m("autoscaling.ca_status").values()), None),
                                      m("autoscaling.provisioning_requests").values()),
    )


# ---------------------------------------------------------------- the projecting informer


class _Informer(PodSteps, Informer):
    """An ``Informer`` whose hooks come from its kind's row of ``KINDS`` (``self.kind``; None
    for a kind the table does not know: every object is then a conversion error)."""

    def __init__(self, cache: Any, spec: ResourceSpec) -> None:
        super().__init__(cache, spec)
        self.kind = kind_of(spec.kind)
        if self.kind is not None:
            self.waits_for = self.kind.waits_for
        self._reader = None
        self._reader_pcs = (None, 0)  # the PriorityClasses the pod reader was made for

    def _convert(self, obj: Mapping) -> tuple[Any, Any] | None:
        """The row's ``project``."""
        kind = self.kind
        if kind is None:
            return super()._convert(obj)
        return kind.project(self, obj)

    def _list_page(self, body: bytes, converted: dict) -> Mapping:
        """The row's ``list_page``, else the generic page decode."""
        kind = self.kind
        if kind is not None and kind.list_page is not None:
            return kind.list_page(self, body, converted)
        return super()._list_page(body, converted)

    def _on_added(self, value: Any) -> None:
        """The row's ``on_added``, if any."""
        kind = self.kind
        if kind is not None and kind.on_added is not None:
            kind.on_added(self, value)

    def _on_deleted(self, obj: Mapping) -> None:
        """The row's ``on_deleted``, if any."""
        kind = self.kind
        if kind is not None and kind.on_deleted is not None:
            kind.on_deleted(self, obj)
