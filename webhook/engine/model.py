"""The engine's input model: what a cluster is and what a gang asks for.

Everything here is a frozen dataclass (``BoundPod``: a frozen ``msgspec.Struct``, for speed) built
from plain values; adapters (``webhook.adapters``)
translate Kubernetes objects into it. Resource amounts are ``Resources`` mappings from a
resource name to an int in scheduler units: cpu in millicores, memory and storage in bytes,
``pods`` and extended resources (``nvidia.com/gpu``) as counts (see ``quantity.py``).

No I/O, no clock, no Kubernetes client, no pydantic (DESIGN.md, layer "engine").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
from types import MappingProxyType
from collections.abc import Mapping

__all__ = [
    "Resources",
    "KueueWorkload",
    "LabelSelector",
    "DisruptionBudget",
    "Taint",
    "Toleration",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "HostPort",
    "Node",
    "BoundPod",
    "PodSet",
    "GangRequest",
    "Finding",
    "DEFAULT_TRANSIENT_TAINTS",
    "ResourceQuota",
    "FlavorQuotas",
    "ResourceGroup",
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "KueueState",
    "VolcanoQueue",
    "PodGroupState",
    "VolcanoState",
    "TopologyRequest",
    "HyperNode",
    "HyperNodeMember",
    "TopologyState",
    "TOPOLOGY_REQUIRED",
    "TOPOLOGY_PREFERRED",
    "TOPOLOGY_UNCONSTRAINED",
    "TOPOLOGY_KUEUE",
    "TOPOLOGY_JOBSET",
    "TOPOLOGY_LWS",
    "TOPOLOGY_VOLCANO",
    "TOPOLOGY_KAI",
    "EMPTY",
    "frozen_map",
    "add_resources",
    "scale_resources",
]

Resources = Mapping[str, int]
EMPTY: Resources = MappingProxyType({})

# Taint keys kube-scheduler and the node lifecycle controller use (k8s.io/api/core/v1 well_known_taints.go).
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
#: Taints that repair themselves (cordon ends, node becomes Ready): never grounds for NeverFits.
REPAIRABLE_TAINTS = frozenset({TAINT_UNSCHEDULABLE, TAINT_NOT_READY, TAINT_UNREACHABLE})

#: Taints a Kubernetes component, cloud provider, autoscaler or GPU operator sets and clears by
#: itself: key or shell pattern → who sets it (the upstream source). Like cordon, they are never
#: grounds for a NeverFits; they are the shipped default of the policy's ``transientTaints``,
#: which an admin's entries extend (never replace).
DEFAULT_TRANSIENT_TAINTS: Mapping[str, str] = MappingProxyType({
    # node lifecycle controller / kubelet condition taints (TaintNodesByCondition): not-ready,
    # unreachable, unschedulable, memory-/disk-/pid-pressure, network-unavailable, and the
    # admin's out-of-service (k8s.io/api/core/v1 well_known_taints.go)
    "node.kubernetes.io/*": "Kubernetes node lifecycle controller and kubelet (k8s.io/api/core/v1 well_known_taints.go)",
    # uninitialized (until the cloud-controller-manager initializes the node) and shutdown
    # (k8s.io/cloud-provider api/well_known_taints.go, controllers/nodelifecycle)
    "node.cloudprovider.kubernetes.io/*": "cloud-controller-manager (k8s.io/cloud-provider api/well_known_taints.go)",
    # cluster-autoscaler utils/taints/taints.go: scale-down marks, and the startup/status taints
    # it is told to ignore because a daemon removes them once the node is ready
    "ToBeDeletedByClusterAutoscaler": "cluster-autoscaler scale-down (cluster-autoscaler/utils/taints/taints.go)",
    "DeletionCandidateOfClusterAutoscaler": "cluster-autoscaler soft scale-down mark (cluster-autoscaler/utils/taints/taints.go)",
    "ignore-taint.cluster-autoscaler.kubernetes.io/*": "startup taints cluster-autoscaler ignores (cluster-autoscaler/utils/taints/taints.go)",
    "startup-taint.cluster-autoscaler.kubernetes.io/*": "startup taints cluster-autoscaler ignores (cluster-autoscaler/utils/taints/taints.go)",
    "status-taint.cluster-autoscaler.kubernetes.io/*": "status taints cluster-autoscaler ignores (cluster-autoscaler/utils/taints/taints.go)",
    # Karpenter pkg/apis/v1/taints.go: disruption (drain before consolidation/expiry) and
    # registration; v1beta1's karpenter.sh/disruption
    "karpenter.sh/disrupted": "Karpenter disruption (karpenter pkg/apis/v1/taints.go)",
    "karpenter.sh/disruption": "Karpenter v1beta1 disruption (karpenter pkg/apis/v1beta1/taints.go)",
    "karpenter.sh/unregistered": "Karpenter node registration (karpenter pkg/apis/v1/taints.go)",
    # NVIDIA GPU operator driver upgrades (NVIDIA/k8s-operator-libs pkg/upgrade): the upgrade
    # controller walks nodes through the nvidia.com/gpu-driver-upgrade-state label and cordons
    # them (already repairable); deployments that keep tolerant pods off an upgrading node
    # taint it nvidia.com/gpu-driver-upgrade*. GPU health remediation (NVSentinel) cordons too,
    # with admin-configured taint keys: add those to transientTaints.
    "nvidia.com/gpu-driver-upgrade*": "NVIDIA GPU operator driver upgrade (NVIDIA/k8s-operator-libs pkg/upgrade)",
    # the CNI agent's startup taint, removed once it runs on the node (cilium pkg/defaults)
    "node.cilium.io/agent-not-ready": "Cilium agent startup (cilium pkg/defaults AgentNotReadyNodeTaint)",
})


def _empty():
    return field(default_factory=lambda: EMPTY)


def frozen_map(d: Mapping | None) -> Mapping:
    """A read-only copy of ``d`` (``None`` → empty)."""
    if not d:
        return EMPTY
    return MappingProxyType(dict(d))


def add_resources(a: Resources, b: Resources) -> dict[str, int]:
    """Element-wise sum of two resource maps."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def scale_resources(a: Resources, n: int) -> dict[str, int]:
    """``a`` multiplied by ``n`` (pods)."""
    return {k: v * n for k, v in a.items()}


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (core/v1 Taint). ``effect`` is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (core/v1 Toleration).

    ``operator`` is "Equal" (default) or "Exists"; an empty ``key`` with Exists tolerates every
    taint; an empty ``effect`` matches every effect. Matching mirrors
    ``Toleration.ToleratesTaint`` in k8s.io/api/core/v1/toleration.go.
    """

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """True when this toleration matches ``taint`` (key, effect, value per operator)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if not self.key:  # Equal with empty key is invalid upstream; it matches nothing here
            return False
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` entry: operator In, NotIn, Exists, DoesNotExist, Gt or Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Evaluate against a node's labels, as k8s.io/component-helpers nodeaffinity does."""
        op = self.operator
        has = self.key in labels
        if op == "In":
            return has and labels[self.key] in self.values
        if op == "NotIn":
            return not has or labels[self.key] not in self.values
        if op == "Exists":
            return has
        if op == "DoesNotExist":
            return not has
        if op in ("Gt", "Lt"):
            if not has or len(self.values) != 1:
                return False
            try:
                left, right = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A required node-affinity term: all expressions must hold (AND).

    ``match_fields`` supports the only field Kubernetes allows, ``metadata.name``.
    An empty term matches nothing (upstream: "a null or empty term matches no objects").
    """

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        if not all(r.matches(labels) for r in self.match_expressions):
            return False
        fields = {"metadata.name": name}
        return all(r.matches(fields) for r in self.match_fields)

    def label_keys(self) -> set[str]:
        return {r.key for r in self.match_expressions}


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container hostPort a pod asks for; two pods with the same one cannot share a node."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class Node:
    """A node as the scheduler sees it.

    Attributes:
        capacity / allocatable: scheduler units (see module doc). Device allocatable below
            capacity means unhealthy devices (FIELD-NOTES §1, §4).
        ready: the Ready condition (None when the node reports none).
        unschedulable: ``spec.unschedulable`` (cordon).
    """

    name: str
    labels: Mapping[str, str] = _empty()
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool | None = True
    capacity: Resources = _empty()
    allocatable: Resources = _empty()
    annotations: Mapping[str, str] = _empty()


class BoundPod(msgspec.Struct, frozen=True, gc=False):
    """A non-terminal pod: bound to ``node_name``, or Pending when ``node_name`` is empty.

    Immutable like the dataclasses here, but a ``msgspec.Struct``: a cluster holds 100k+ of
    these, and building one costs ~0.3 µs instead of a frozen dataclass's ~4.5 µs (17
    ``object.__setattr__`` calls), ~0.65 s of a 147k-pod dump's load; ``gc=False`` keeps them
    out of the cyclic collector's walks (they hold only strings, numbers, tuples and read-only
    maps, so they can never be part of a cycle). Copy with changes by
    ``msgspec.structs.replace``.

    ``requests`` is the pod's effective request (FIELD-NOTES §1) in scheduler units;
    ``gang`` names the gang it belongs to ("Kind/namespace/name"), "" when none is known.
    ``start_time`` is seconds since the epoch (None when unknown); ``deadline_s`` the pod's
    activeDeadlineSeconds or an equivalent limit in seconds. ``runtime_limit_s`` is the
    tightest declared bound on the pod's run time in seconds, counted from ``start_time``: the
    smallest of activeDeadlineSeconds, Kueue's maximum execution time (label
    kueue.x-k8s.io/max-exec-time-seconds) and the annotation
    gangcheck.io/expected-runtime-seconds (None when none is set); the expected-wait
    estimator (``engine.wait``) reads it, falling back to ``deadline_s``. ``labels``: the pod's
    labels (PodDisruptionBudget selectors read them); ``restarts``: Σ restartCount over
    status.containerStatuses; ``ready``: the Ready condition (None when the status has none) —
    diagnose shows both for device-plugin pods.
    """

    namespace: str
    name: str
    node_name: str = ""
    requests: Resources = EMPTY
    priority: int = 0
    gang: str = ""
    owner_kind: str = ""
    owner_name: str = ""
    queue: str = ""
    phase: str = "Running"
    start_time: float | None = None
    deadline_s: float | None = None
    host_ports: tuple[HostPort, ...] = ()
    runtime_limit_s: float | None = None
    labels: Mapping[str, str] = EMPTY
    restarts: int = 0
    ready: bool | None = None


#: ``TopologyRequest.mode`` values.
TOPOLOGY_REQUIRED = "required"
TOPOLOGY_PREFERRED = "preferred"
TOPOLOGY_UNCONSTRAINED = "unconstrained"

#: ``TopologyRequest.source`` values: which system enforces the constraint.
TOPOLOGY_KUEUE = "kueue"        # Kueue TopologyAwareScheduling (podset-*-topology annotations)
TOPOLOGY_JOBSET = "jobset"      # alpha.jobset.sigs.k8s.io/exclusive-topology
TOPOLOGY_LWS = "lws"            # leaderworkerset.sigs.k8s.io/(subgroup-)exclusive-topology
TOPOLOGY_VOLCANO = "volcano"    # Volcano Job spec.networkTopology over HyperNodes
TOPOLOGY_KAI = "kai"            # kai.scheduler/topology-{required,preferred}-placement


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Where a pod set's pods must (or would like to) sit in the cluster's topology.

    Attributes:
        source: the system that enforces it (``TOPOLOGY_KUEUE`` … ``TOPOLOGY_KAI``).
        mode: ``TOPOLOGY_REQUIRED`` (every pod of the set — or of its ``group`` — in one domain
            of ``level``: a proof of NeverFits when no domain could ever hold them),
            ``TOPOLOGY_PREFERRED`` (one domain if possible, else spread: never a denial) or
            ``TOPOLOGY_UNCONSTRAINED`` (placed by the topology-aware scheduler, no locality).
        level: node label key of the level (e.g. ``topology.example.com/rack``,
            ``kubernetes.io/hostname``); None for Volcano (its domains are HyperNodes) and for
            unconstrained requests.
        topology_name: the Topology object the levels come from (Kueue: the ResourceFlavor's
            ``topologyName``, resolved by the engine; KAI: ``kai.scheduler/topology``), or None.
        levels: that Topology's levels top → bottom as node label keys, when the adapter knew
            them; a domain of ``level`` is then identified by the values of every level from the
            top down to ``level`` (Kueue's domain ID, tas_flavor_snapshot.go), not by
            ``level``'s value alone. Empty: the domain is the value of ``level`` alone.
        slice_level / slice_size: Kueue ``podset-slice-required-topology`` and
            ``podset-slice-size``: the pods split into slices of ``slice_size`` pods, each slice
            in one domain of ``slice_level`` (and all of them inside one ``level`` domain when a
            required level is set too). None when no slices are requested.
        group: Kueue ``podset-group-name``: pod sets of one gang with the same group share one
            domain of ``level``; None = the pod set has a domain of its own.
        exclusive: JobSet / LWS exclusive topology: the pod set's pods come in units of
            ``unit_size`` pods (a child Job, an LWS group or subgroup); each unit sits in one
            domain of ``level`` and no two units (of this gang, any pod set) share a domain.
        unit_size: pods per exclusive unit (None when not ``exclusive``).
        highest_tier: Volcano ``networkTopology.highestTierAllowed``: the gang must sit inside
            one HyperNode of tier ≤ this (hard mode); None when not set.
        highest_tier_name: Volcano ``networkTopology.highestTierName`` (a tier's name), None when
            not set.
        field: where the request was read (for messages: ``metadata.annotations[...]``).
    """

    source: str
    mode: str
    level: str | None = None
    topology_name: str | None = None
    levels: tuple[str, ...] = ()
    slice_level: str | None = None
    slice_size: int | None = None
    group: str | None = None
    exclusive: bool = False
    unit_size: int | None = None
    highest_tier: int | None = None
    highest_tier_name: str | None = None
    field: str = ""


@dataclass(frozen=True, slots=True)
class PodSet:
    """Pods of one shape inside a gang (a role: master, worker, launcher, a Volcano task…).

    Attributes:
        count: pods of this set that must start together (the gang minimum for this role).
        replicas: pods of this set that will exist (``>= count``).
        requests: effective request per pod, scheduler units (FIELD-NOTES §1).
        node_selector / required_affinity: ``spec.nodeSelector`` and the ORed terms of
            ``requiredDuringSchedulingIgnoredDuringExecution``.
        max_per_node: at most this many pods of the set on one node (required pod
            anti-affinity on kubernetes.io/hostname against itself, or host ports); None = no cap.
        topology: the pod set's placement over topology domains (``TopologyRequest``: Kueue
            TAS, JobSet / LeaderWorkerSet exclusive topology, Volcano network topology, KAI),
            None when none is requested. ``required_topology`` / ``preferred_topology`` read it.
        exact_shape: False when the per-pod request and constraints are an estimate (a
            PodGroup's minResources spread over minMember; a Kueue pod group seen one pod at a
            time): per-node bounds, searches and node filters then cannot prove NeverFits; only
            totals over every node can.
        stated_total: the pod set's total request as the object states it (a PodGroup's
            minResources), when ``count × requests`` is only an estimate of it (rounded up);
            None = ``count × requests``. Quota and gang totals use it.
        runtime_class: ``spec.runtimeClassName`` ("" when none). The API server's RuntimeClass
            admission plugin adds that RuntimeClass's tolerations to the pod, which gangcheck
            does not see: a taint then never proves NeverFits.
    """

    name: str
    count: int
    requests: Resources
    replicas: int | None = None
    node_selector: Mapping[str, str] = _empty()
    required_affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_name: str = ""
    host_ports: tuple[HostPort, ...] = ()
    max_per_node: int | None = None
    topology: "TopologyRequest | None" = None
    exact_shape: bool = True
    runtime_class: str = ""
    stated_total: Resources | None = None

    def total_replicas(self) -> int:
        return self.count if self.replicas is None else self.replicas

    @property
    def required_topology(self) -> str | None:
        """The label key of a required level (all pods of the set in one domain of it), or None.

        None too for an exclusive request whose unit is smaller than the set (a JobSet pod set of
        several child Jobs: each child Job in a domain of its own, not all of them in one —
        reading the level here would deny what fits); ``topology`` has the whole request."""
        t = self.topology
        if t is None or t.mode != TOPOLOGY_REQUIRED or not t.level:
            return None
        if t.exclusive and t.unit_size is not None and t.unit_size < self.count:
            return None
        return t.level

    @property
    def preferred_topology(self) -> str | None:
        """The label key of a preferred level (one domain if possible; never a denial), or None."""
        t = self.topology
        return t.level if t is not None and t.mode == TOPOLOGY_PREFERRED and t.level else None


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the engine or an adapter found.

    ``code`` is UpperCamelCase (Kueue's where one exists: ExceedsMaxQuota, WaitingForQuota).
    ``severity`` is "NeverFits" (a proof that the gang can never start), "Waits" (blocks it now),
    or "Info" (worth telling; blocks nothing). ``data`` carries the numbers behind the message.
    """

    code: str
    severity: str
    message: str
    data: Mapping[str, object] = _empty()


@dataclass(frozen=True, slots=True)
class GangRequest:
    """A gang: pods that must all start together, grouped into pod sets.

    ``queue_name`` is the Kueue LocalQueue (label kueue.x-k8s.io/queue-name), ``volcano_queue``
    the Volcano queue; ``findings`` carries the adapter's own lints (InvalidGang, …).
    ``groups``: how many such gangs the workload creates, each starting on its own (a
    LeaderWorkerSet's replicas); the pod sets describe one group.
    ``exact_total``: False when the gang's totals are assumed rather than known (a Kueue pod
    group seen one pod at a time): quota and capacity bounds then cannot prove NeverFits.
    ``all_or_nothing``: True when something places the pods all at once or not at all (a gang
    scheduler's group, Kueue TopologyAwareScheduling, the Workload API's gang policy, or a kind
    whose pods cannot run without each other); False for pods scheduled one by one (a plain
    batch Job): only what no single pod could ever do is then a NeverFits, and more pods than
    the cluster can hold at once is a warning. Quota still applies to the whole object where a
    queue (Kueue) admits it whole. ``gang_basis`` says why, in words (for messages and docs).
    """

    kind: str
    name: str
    namespace: str
    pod_sets: tuple[PodSet, ...]
    api_version: str = ""
    queue_name: str | None = None
    volcano_queue: str | None = None
    priority_class: str | None = None
    findings: tuple[Finding, ...] = ()
    labels: Mapping[str, str] = _empty()
    annotations: Mapping[str, str] = _empty()
    groups: int = 1
    exact_total: bool = True
    all_or_nothing: bool = True
    gang_basis: str = ""

    @property
    def pods(self) -> int:
        """Pods that must start together (Σ over pod sets of ``count``)."""
        return sum(ps.count for ps in self.pod_sets)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    def total_requests(self) -> dict[str, int]:
        """Σ count × per-pod request over pod sets (a pod set's ``stated_total`` where set), scheduler units."""
        out: dict[str, int] = {}
        for ps in self.pod_sets:
            if ps.stated_total is not None:
                for r, v in ps.stated_total.items():
                    out[r] = out.get(r, 0) + v
                continue
            for r, v in ps.requests.items():
                out[r] = out.get(r, 0) + v * ps.count
        return out


# ---------------------------------------------------------------- Kueue


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One ``resources[]`` entry of a flavor in a ClusterQueue (or Cohort) resource group.

    ``borrowing_limit`` / ``lending_limit`` None mean "absent" (unbounded, Kueue semantics).
    """

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    """``flavors[]`` entry of a resource group: flavor name → per-resource quota."""

    name: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """``spec.resourceGroups[]``: the resources it covers and its flavors, tried in order."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    """A Kueue ResourceFlavor: which nodes it means (nodeLabels, nodeTaints) and the
    tolerations Kueue adds to pods admitted with it."""

    name: str
    node_labels: Mapping[str, str] = _empty()
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    """A Kueue ClusterQueue.

    ``usage`` maps (flavor, resource) to the quota reserved now (status.flavorsReservation,
    falling back to status.flavorsUsage), scheduler units.
    """

    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    usage: Mapping[tuple[str, str], int] = _empty()
    queueing_strategy: str = "BestEffortFIFO"
    preemption: Mapping[str, str] = _empty()
    stop_policy: str = "None"
    pending_workloads: int = 0
    admitted_workloads: int = 0


@dataclass(frozen=True, slots=True)
class LocalQueue:
    """A Kueue LocalQueue (namespaced) pointing at a ClusterQueue."""

    namespace: str
    name: str
    cluster_queue: str


@dataclass(frozen=True, slots=True)
class Cohort:
    """A Kueue Cohort object: its own quota (spec.resourceGroups, with nominalQuota /
    borrowingLimit / lendingLimit as in a ClusterQueue) and its parent (v1beta1 / v1beta2
    spec.parentName, v1alpha1 spec.parent). A cohort that a ClusterQueue or Cohort names but no
    object defines exists in Kueue with no quota of its own (``engine.quota.kueue``)."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class KueueWorkload:
    """A Kueue Workload (kueue.x-k8s.io v1beta1/v1beta2): one gang as Kueue queues it.

    A Job that Kueue manages stays suspended, with no pods, until its Workload is admitted, so
    the Workloads are the only record of the gangs waiting in a ClusterQueue.

    * ``queue_name``: spec.queueName (a LocalQueue in ``namespace``); ``cluster_queue``:
      status.admission.clusterQueue once quota is reserved, else "" (resolve it through the
      LocalQueue);
    * ``priority``: spec.priority (the resolved WorkloadPriorityClass or PriorityClass value);
    * ``created``: metadata.creationTimestamp, epoch seconds (Kueue orders a ClusterQueue's
      pending Workloads by priority, then creation time);
    * ``pods`` and ``requests``: Σ over spec.podSets of count and count × the pod's effective
      request (scheduler units: GPUs, millicores, bytes);
    * ``state``: "Pending", "QuotaReserved", "Admitted", "Finished" or "Inactive", from
      spec.active and the conditions Finished / Admitted / QuotaReserved (status "True");
    * ``message``: the newest condition message Kueue wrote (e.g. "couldn't assign flavors to pod
      set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 64 more needed");
    * ``owner``: the controller ownerReference as "Kind/name" ("" when none).
    """

    namespace: str
    name: str
    queue_name: str = ""
    cluster_queue: str = ""
    priority: int = 0
    created: float | None = None
    pods: int = 0
    requests: Resources = _empty()
    state: str = "Pending"
    message: str = ""
    owner: str = ""

    def belongs_to(self, kind: str, namespace: str, name: str) -> bool:
        """True when this is the Workload of the gang ``kind`` ``namespace/name``: its controller
        owner is that object, or — for a Kueue pod group (plain Pods, gang kind Pod or
        PodGroup), whose Workload Kueue names after the group and the Pods own — its name."""
        if self.namespace != namespace or not name:
            return False
        okind, _, oname = self.owner.partition("/")
        if oname == name and (not kind or okind.lower() == kind.lower()):
            return True
        return kind in ("Pod", "PodGroup") and self.name == name

    @property
    def holds_quota(self) -> bool:
        """True while the Workload's quota is reserved (QuotaReserved or Admitted, not Finished)."""
        return self.state in ("QuotaReserved", "Admitted")


@dataclass(frozen=True, slots=True)
class KueueState:
    """Kueue's objects, keyed by name ((namespace, name) for LocalQueues and Workloads)."""

    flavors: Mapping[str, ResourceFlavor] = _empty()
    cluster_queues: Mapping[str, ClusterQueue] = _empty()
    local_queues: Mapping[tuple[str, str], LocalQueue] = _empty()
    cohorts: Mapping[str, Cohort] = _empty()
    workloads: Mapping[tuple[str, str], KueueWorkload] = _empty()

    def cluster_queue_of(self, wl: KueueWorkload) -> str:
        """The ClusterQueue ``wl`` is queued in: its admission's, else its LocalQueue's ("" when unknown)."""
        if wl.cluster_queue:
            return wl.cluster_queue
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        return lq.cluster_queue if lq is not None else ""


# ---------------------------------------------------------------- Volcano


@dataclass(frozen=True, slots=True)
class VolcanoQueue:
    """A Volcano Queue (scheduling.volcano.sh/v1beta1): capability is the hard cap.

    Resource maps in scheduler units; an absent capability entry means unbounded.
    ``allocated`` is status.allocated when the controller publishes it.
    """

    name: str
    capability: Resources = _empty()
    deserved: Resources = _empty()
    guarantee: Resources = _empty()
    weight: int = 1
    state: str = "Open"
    reclaimable: bool = True
    allocated: Resources = _empty()
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class PodGroupState:
    """A PodGroup as stored (Volcano or scheduler-plugins): reserve and progress."""

    namespace: str
    name: str
    queue: str = ""
    min_member: int = 0
    min_resources: Resources = _empty()
    phase: str = ""
    running: int = 0
    api_group: str = "scheduling.volcano.sh"


@dataclass(frozen=True, slots=True)
class VolcanoState:
    """Volcano Queues by name and PodGroups by (namespace, name)."""

    queues: Mapping[str, VolcanoQueue] = _empty()
    pod_groups: Mapping[tuple[str, str], PodGroupState] = _empty()


# ---------------------------------------------------------------- topology objects


@dataclass(frozen=True, slots=True)
class HyperNodeMember:
    """One ``spec.members[]`` entry of a Volcano HyperNode (topology.volcano.sh/v1alpha1).

    ``kind``: "Node" or "HyperNode". Exactly one selector is set: ``exact`` (a name),
    ``regex`` (a Go RE2 pattern; Volcano matches it with ``regexp.MatchString``, i.e. anywhere in
    the name unless anchored, pkg/scheduler/api/hyper_node_info.go ``GetMembers``), or ``labels``
    / ``expressions`` (the labelMatch selector's matchLabels pairs and matchExpressions
    ``(key, operator, values)`` as in ``LabelSelector``, all of them must hold; Node members only)."""

    kind: str
    exact: str | None = None
    regex: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class HyperNode:
    """A Volcano HyperNode: a network domain of ``tier`` (1 = the closest) whose members are nodes
    or lower-tier HyperNodes. ``tier_name``: ``spec.tierName`` when set."""

    name: str
    tier: int
    members: tuple[HyperNodeMember, ...] = ()
    tier_name: str | None = None


@dataclass(frozen=True, slots=True)
class TopologyState:
    """The cluster's topology objects.

    Attributes:
        kueue: Kueue Topology name (kueue.x-k8s.io v1beta1/v1beta2) → its levels' node label
            keys, top → bottom (``spec.levels[].nodeLabel``).
        kai: KAI Topology name (kai.scheduler/v1alpha1 Topology) → its levels' node label keys,
            top → bottom.
        hypernodes: Volcano HyperNodes by name.
    """

    kueue: Mapping[str, tuple[str, ...]] = _empty()
    kai: Mapping[str, tuple[str, ...]] = _empty()
    hypernodes: Mapping[str, HyperNode] = _empty()


# ---------------------------------------------------------------- PodDisruptionBudgets


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: ``match_labels`` pairs and ``expressions`` (key, operator, values)
    with operators In, NotIn, Exists, DoesNotExist. An empty selector matches every label set."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` satisfy every requirement (Kubernetes' selector semantics)."""
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        for k, op, values in self.expressions:
            has = k in labels
            if op == "In" and not (has and labels[k] in values):
                return False
            if op == "NotIn" and has and labels[k] in values:
                return False
            if op == "Exists" and not has:
                return False
            if op == "DoesNotExist" and has:
                return False
        return True


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget (policy/v1).

    ``selector`` None selects no pod (a null selector); an empty ``LabelSelector`` selects every
    pod of ``namespace`` (policy/v1). ``min_available`` / ``max_unavailable``: an int (pods) or a
    percentage string ("50%"), None when unset. ``disruptions_allowed``: status.disruptionsAllowed
    as the disruption controller computed it, None when the object carries no status (then
    ``engine.fixes.disruptions_allowed`` derives it from the spec and the pods it selects).
    """

    namespace: str
    name: str
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    disruptions_allowed: int | None = None
