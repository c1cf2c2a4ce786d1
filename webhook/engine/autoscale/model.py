"""The autoscaling model: what node autoscalers could add to a cluster (issue #16).

Owns the shapes the engine reasons over when nodes may be added on demand, and nothing of how
they are read (``webhook.adapters.autoscaling_objects`` builds them from Karpenter NodePools and
NodeClaims, cluster-autoscaler's status ConfigMap and ProvisioningRequests; ``webhook.policy``
adds what a cluster cannot show) or decided (``match``: may a pod land on a node a source adds;
``bounds``: how much a source can add; ``review``: the verdict with autoscaling).

A ``ScaleUpSource`` is one thing that can add nodes: a Karpenter NodePool (karpenter.sh/v1), a
cluster-autoscaler node group, or a node pool the policy declares. What it may add is bounded
only by what is known of it:

* ``node_shape`` None: the shape of a new node is unknown (Karpenter's instance types live in the
  cloud provider, not in the cluster): any size, so physical capacity proves nothing; only the
  limits and ``max_new_nodes`` bound it.
* ``requirements`` / ``taints`` None: the labels / taints of new nodes are unknown (a
  cluster-autoscaler node group scaled to zero whose template the cluster does not show, or the
  policy's ``assumeScaleUp``): it may match any pod.

Units: scheduler units throughout (millicores for cpu, bytes for memory, counts for GPUs and
pods), seconds for times. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..model import NodeSelectorRequirement, Taint

__all__ = ["NODEPOOL", "NODE_GROUP", "POLICY_POOL", "ScaleUpSource", "ProvisioningRequestInfo", "AutoscalingState",
           "AutoscalingPolicy", "PolicyPool", "NODEPOOL_LABEL", "NODES_LIMIT"]

#: ``ScaleUpSource.kind`` values.
NODEPOOL = "NodePool"        # Karpenter karpenter.sh/v1 NodePool
NODE_GROUP = "NodeGroup"     # a cluster-autoscaler node group (its status ConfigMap)
POLICY_POOL = "PolicyPool"   # declared in the policy's ``autoscaling.nodePools``

#: The label Karpenter puts on every node of a NodePool (karpenter pkg/apis/v1/labels.go NodePoolLabelKey).
NODEPOOL_LABEL = "karpenter.sh/nodepool"
#: The pseudo-resource a ``limits`` entry uses for a cap on the number of nodes (Karpenter's
#: ``spec.limits.nodes``; a node group's max size is ``max_new_nodes`` instead).
NODES_LIMIT = "nodes"


def _ro(d: Mapping | None) -> Mapping:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True, slots=True)
class ScaleUpSource:
    """One source of new nodes.

    Attributes:
        name: the NodePool's / node group's / policy pool's name.
        kind: ``NODEPOOL``, ``NODE_GROUP`` or ``POLICY_POOL``.
        requirements: what every new node satisfies, Karpenter-style (the NodePool's
            ``spec.template.spec.requirements`` — operators In, NotIn, Exists, DoesNotExist, Gt,
            Lt, and Karpenter's Gte/Lte); None = unknown (new nodes may carry any labels).
        labels: labels every new node carries (the template's ``metadata.labels``); they act as
            ``In [value]`` requirements.
        taints: taints every new node keeps (the template's ``spec.taints``); None = unknown
            (treated as tolerated: an unknown taint proves nothing).
        startup_taints: taints a new node carries only until it is initialised
            (``spec.startupTaints``): pods need not tolerate them (Karpenter ignores them when
            it simulates scheduling).
        limits: caps on the total *capacity* of the source's nodes, per resource (scheduler
            units; ``NODES_LIMIT`` for a node count); a resource absent here is unlimited.
        in_use: the capacity the source's nodes (and NodeClaims in flight) hold now, per
            resource (``NODES_LIMIT``: their number). ``limits - in_use`` is what new nodes may add.
        max_new_nodes: at most this many more nodes (a node group's max size minus its current
            target, a policy pool's ``maxNodes`` minus its nodes); None = no such cap.
        node_shape: allocatable of one new node (scheduler units, with ``pods``); None = unknown.
        typical_shape: the allocatable of the source's existing nodes, when it has some and
            ``node_shape`` is unknown — for messages only ("61 more at the size of its current
            nodes"), never for a proof.
        weight: Karpenter's ``spec.weight`` (higher is tried first); 0 when unset.
        nodes: nodes the source has now; ``pending``: nodes launched but not Ready yet
            (NodeClaims without a Ready node).
        provisioning_s: seconds from launch to a Ready node for this source (policy or learned);
            None = the cluster-wide default.
        origin: where it was read ("NodePool gpu-h100", "kube-system/cluster-autoscaler-status
            node group ng-a", "policy autoscaling.nodePools[0]"), for messages.
    """

    name: str
    kind: str = NODEPOOL
    requirements: tuple[NodeSelectorRequirement, ...] | None = ()
    labels: Mapping[str, str] = field(default_factory=lambda: _ro(None))
    taints: tuple[Taint, ...] | None = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Mapping[str, int] = field(default_factory=lambda: _ro(None))
    in_use: Mapping[str, int] = field(default_factory=lambda: _ro(None))
    max_new_nodes: int | None = None
    node_shape: Mapping[str, int] | None = None
    typical_shape: Mapping[str, int] | None = None
    weight: int = 0
    nodes: int = 0
    pending: int = 0
    provisioning_s: float | None = None
    origin: str = ""

    def remaining(self, resource: str) -> int | None:
        """What new nodes may still add of ``resource`` under the limits (never below 0); None =
        unlimited."""
        if resource not in self.limits:
            return None
        return max(0, int(self.limits[resource]) - int(self.in_use.get(resource, 0)))

    @property
    def label(self) -> str:
        """"NodePool gpu-h100", "node group ng-a", "policy pool spot" — for messages."""
        word = {NODEPOOL: "NodePool", NODE_GROUP: "node group", POLICY_POOL: "policy pool"}.get(self.kind, self.kind)
        return f"{word} {self.name}"


@dataclass(frozen=True, slots=True)
class ProvisioningRequestInfo:
    """A ProvisioningRequest (autoscaling.x-k8s.io/v1), as diagnose shows it.

    ``class_name``: ``spec.provisioningClassName`` (``check-capacity.autoscaling.x-k8s.io`` only
    checks, ``best-effort-atomic-scale-up.autoscaling.x-k8s.io`` provisions all or nothing);
    ``pods``: Σ ``podSets[].count``; ``state``: the condition that is True among Provisioned,
    Failed, CapacityRevoked, BookingExpired, Accepted ("" when none), ``message`` its message;
    ``owner``: "Kind/name" of the Kueue Workload that made it ("" when none).
    """

    namespace: str
    name: str
    class_name: str = ""
    pods: int = 0
    state: str = ""
    message: str = ""
    owner: str = ""


@dataclass(frozen=True, slots=True)
class AutoscalingState:
    """Everything the cluster shows about node autoscaling (``ClusterSnapshot.autoscaling``).

    ``sources``: the NodePools and node groups; ``provisioning_samples_s``: observed launch →
    Ready times (NodeClaim creation → its node's Ready transition), seconds, newest last, at most
    a few hundred; ``provisioning_requests``; ``notes``: what was read and what was not (a status
    ConfigMap in a format not understood, …), for diagnose.
    """

    sources: tuple[ScaleUpSource, ...] = ()
    provisioning_samples_s: tuple[float, ...] = ()
    provisioning_requests: tuple[ProvisioningRequestInfo, ...] = ()
    notes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.sources or self.provisioning_requests)


@dataclass(frozen=True, slots=True)
class PolicyPool:
    """One entry of the policy's ``autoscaling.nodePools``.

    ``name``: a Karpenter NodePool or node group of that name gets what this entry states
    (``node_shape``, ``max_nodes``, ``provisioning_s``); without such an object, the entry is a
    source of its own (``POLICY_POOL``) whose new nodes carry ``labels`` and ``taints``.
    ``max_nodes``: total nodes it may reach (None = unbounded); ``node_shape``: allocatable of one
    node (scheduler units).
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _ro(None))
    taints: tuple[Taint, ...] = ()
    max_nodes: int | None = None
    node_shape: Mapping[str, int] | None = None
    provisioning_s: float | None = None


@dataclass(frozen=True, slots=True)
class AutoscalingPolicy:
    """The policy's ``autoscaling`` section (``EngineOptions.autoscaling``).

    ``assume_scale_up``: assume some autoscaler may add nodes of any labels and shape (a cluster
    whose autoscaler the cluster does not show, e.g. GKE node auto-provisioning): then no
    physical capacity proves NeverFits, only quota. ``provisioning_s``: the default launch →
    Ready time, seconds, until the cluster has shown some. ``pools``: ``PolicyPool`` entries.
    ``enabled``: False ignores every autoscaler the cluster shows (a cluster whose NodePools are
    not in use).
    """

    enabled: bool = True
    assume_scale_up: bool = False
    provisioning_s: float = 300.0
    pools: tuple[PolicyPool, ...] = ()
