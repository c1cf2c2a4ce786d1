"""ClusterSnapshot: an immutable, column-oriented view of the cluster for fast checks.

Per-node resources live in int64 matrices (rows = nodes, columns = resource names) so a fit
test over 20k nodes is a handful of vectorised comparisons instead of a Python loop. Nodes that
share labels (less per-node labels such as kubernetes.io/hostname), taints, cordon and Ready
state share a *static class*: the scheduler's label/taint filters are evaluated once per class.

Pure: the caller (adapters, the cache) builds ``Node``/``BoundPod`` values and hands them in.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections import Counter
from types import MappingProxyType
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from .model import (
    EMPTY,
    BoundPod,
    DisruptionBudget,
    KueueState,
    TopologyState,
    Node,
    Resources,
    Taint,
    VolcanoState,
)
from .autoscale.model import AutoscalingState
from .quantity import MAX_QUANTITY

__all__ = ["ClusterSnapshot", "NodeClass", "PER_NODE_LABELS", "BASE_RESOURCES", "DEFAULT_MAX_PODS"]

#: Labels whose value differs on every node; left out of the static class key.
PER_NODE_LABELS = frozenset({"kubernetes.io/hostname"})
#: Resources reserved by the system rather than backed by devices: their allocatable below
#: capacity is normal and permanent. For every other resource (devices) allocatable below
#: capacity is an unhealthy device, repairable (FIELD-NOTES §1, §4).
BASE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
#: kubelet's default maxPods, used when a node does not report allocatable pods.
DEFAULT_MAX_PODS = 110
#: Derived results a snapshot keeps for reuse (per distinct pod shape and constraints).
MEMO_SIZE = 256
GPU = "nvidia.com/gpu"
#: Label set by NVIDIA GPU feature discovery: the GPUs physically on the node.
GPU_COUNT_LABEL = "nvidia.com/gpu.count"


#: MIG slices per GPU for the uniform ``all-<profile>`` layouts of nvidia-mig-parted's default
#: config (A100/H100: seven 1g, three 2g, two 3g, one 4g, one 7g slice per GPU).
MIG_SLICES_PER_GPU = {"1g": 7, "2g": 3, "3g": 2, "4g": 1, "7g": 1}
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


def expected_mig_slices(labels: Mapping[str, str]) -> tuple[str, int] | None:
    """(resource, slices) a node should advertise for a uniform MIG layout, else None.

    ``nvidia.com/mig.config=all-1g.10gb`` on a node with ``nvidia.com/gpu.count=1`` →
    ("nvidia.com/mig-1g.10gb", 7). Only the ``all-<profile>`` layouts are understood.
    """
    config = labels.get(MIG_CONFIG_LABEL, "")
    if not config.startswith("all-") or config in ("all-disabled", "all-enabled", "all-balanced"):
        return None
    profile = config[4:]
    per_gpu = MIG_SLICES_PER_GPU.get(profile.split(".", 1)[0])
    if per_gpu is None:
        return None
    gpus = label_gpu_count(labels)
    gpus = 1 if gpus is None or gpus * per_gpu > MAX_QUANTITY else gpus
    return f"nvidia.com/mig-{profile}", per_gpu * gpus


def label_gpu_count(labels: Mapping[str, str]) -> int | None:
    """GPUs the ``nvidia.com/gpu.count`` label reports (a device count), or None when the label
    is absent or no node could have that many: not ASCII digits (a label value is ASCII; ``²``
    passes ``str.isdigit`` but not ``int``) or above the largest quantity (2**63 − 1) the
    snapshot's int64 columns hold. A label ignored reads as a node without it: nothing repairable
    beyond what the node advertises — never more capacity than it states, never a crash."""
    count = labels.get(GPU_COUNT_LABEL)
    if not isinstance(count, str) or not (count.isascii() and count.isdigit()) or len(count) > 19:
        return None
    n = int(count)
    return n if n <= MAX_QUANTITY else None


def _classify(items, keep) -> tuple[np.ndarray, tuple["NodeClass", ...]]:
    """Group nodes (or classes) by (labels whose key passes ``keep``, taints, cordon, Ready).

    Returns (class id per item as int32, one ``NodeClass`` per class in first-seen order).
    """
    ids: dict[tuple, int] = {}
    reps: list[NodeClass] = []
    out = np.zeros(len(items), dtype=np.int32)
    for i, n in enumerate(items):
        labels = tuple(sorted((k, v) for k, v in n.labels.items() if keep(k)))
        key = (labels, n.taints, n.unschedulable, n.ready)
        cid = ids.get(key)
        if cid is None:
            cid = ids[key] = len(reps)
            reps.append(NodeClass(MappingProxyType(dict(labels)), n.taints, n.unschedulable, n.ready))
        out[i] = cid
    return out, tuple(reps)


@dataclass(frozen=True, slots=True)
class NodeClass:
    """Nodes that look the same to the label and taint filters."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool | None


class ClusterSnapshot:
    """An immutable view of nodes, their bound pods and the queue objects.

    Attributes:
        nodes: tuple of ``Node`` (row i of every matrix is ``nodes[i]``).
        pods: non-terminal pods (bound and Pending).
        resources: column names; ``col[name]`` the column index.
        alloc, cap, used: int64 arrays [nodes × resources]: allocatable, capacity and Σ requests
            of pods bound to each node (column ``pods`` counts pods), scheduler units.
        free: ``alloc - used`` (may be negative when allocatable dropped under running pods).
        ever_alloc: what each node could offer once repaired: capacity for device resources whose
            allocatable is below it (or the ``nvidia.com/gpu.count`` label when the device plugin
            advertises fewer GPUs), allocatable otherwise.
        node_class: int array [nodes], index into ``classes``.
        kueue, volcano, priority_classes: queue state and PriorityClass values.
        topology: Kueue / KAI Topology objects and Volcano HyperNodes (``TopologyState``).
        autoscaling: what node autoscalers could add (``autoscale.AutoscalingState``; empty when none).
        skipped: kind → count of objects in the source the engine does not use.
        source: where it came from (a path, "demo", "live").
        as_of: the time (epoch seconds) the state describes when it is not "now" (the demo's
            fixed clock); None for live data and dumps (callers use the current time).

    Build with the constructor; never mutate. ``node_used`` lets a cache that already tracks
    per-node requests skip re-summing pods.
    """

    def __init__(
        self,
        nodes: Iterable[Node],
        pods: Iterable[BoundPod] = (),
        *,
        kueue: KueueState | None = None,
        volcano: VolcanoState | None = None,
        priority_classes: Mapping[str, int] | None = None,
        skipped: Mapping[str, int] | None = None,
        source: str = "",
        node_used: Mapping[str, Resources] | None = None,
        extra_resources: Iterable[str] = (),
        as_of: float | None = None,
        disruption_budgets: Iterable[DisruptionBudget] = (),
        autoscaling: AutoscalingState | None = None,
        topology: TopologyState | None = None,
    ) -> None:
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.pods: tuple[BoundPod, ...] = tuple(pods)
        #: PodDisruptionBudgets (policy/v1); the fixes count the ones an eviction would violate.
        self.disruption_budgets: tuple[DisruptionBudget, ...] = tuple(disruption_budgets)
        #: What node autoscalers could add (Karpenter NodePools, cluster-autoscaler node groups).
        self.autoscaling = autoscaling if autoscaling is not None else AutoscalingState()
        self.kueue = kueue or KueueState()
        #: Kueue and KAI Topology objects, Volcano HyperNodes (``TopologyState``).
        self.topology = topology if topology is not None else TopologyState()
        self.volcano = volcano or VolcanoState()
        self.priority_classes = MappingProxyType(dict(priority_classes or {}))
        self.skipped = MappingProxyType(dict(skipped or {}))
        self.source = source
        self.as_of = as_of
        self.node_index: dict[str, int] = {n.name: i for i, n in enumerate(self.nodes)}

        names = _node_resource_names(self.nodes, extra_resources)
        mig_expected, labelled_gpus = _repairable_devices(self.nodes, names)
        by_node, shapes = _pods_by_node(self.pods, names)
        self.resources: tuple[str, ...] = tuple(names)
        self.col: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.pods_by_node: Mapping[str, tuple[BoundPod, ...]] = MappingProxyType(
            {k: tuple(v) for k, v in by_node.items()}
        )
        alloc, cap, used = _resource_matrices(self.nodes, self.col, by_node, shapes, node_used)
        self.alloc, self.cap, self.used = alloc, cap, used
        #: Nodes that report neither capacity nor allocatable yet (a kubelet that has not posted
        #: status): what they hold is unknown, so no bound may count them as empty.
        self.unknown_capacity = np.fromiter(
            (not n.capacity and not n.allocatable for n in self.nodes), dtype=bool, count=len(self.nodes))
        self.free = alloc - used
        self.device_cols = np.array([r not in BASE_RESOURCES for r in self.resources], dtype=bool)
        self.ever_alloc = _ever_alloc(alloc, cap, self.device_cols, self.col, labelled_gpus, mig_expected)
        for m in (self.alloc, self.cap, self.used, self.free, self.ever_alloc):
            m.setflags(write=False)

        node_class, reps = _classify(self.nodes, lambda k: k not in PER_NODE_LABELS)
        node_class.setflags(write=False)
        self.node_class = node_class
        self.classes: tuple[NodeClass, ...] = reps
        self._projections: dict[frozenset[str], tuple[np.ndarray, tuple[NodeClass, ...]]] = {}
        self._positions: dict[str, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
        self._structures: dict[tuple, object] = {}
        #: Results derived from this snapshot alone (per pod shape), reused by later checks:
        #: admission streams repeat a few shapes. Read-only values; bounded (see ``remember``).
        self._memo: dict[tuple, object] = {}
        #: Pods not bound to a node (Pending), kept apart so checks never rescan every pod.
        self.pending_pods: tuple[BoundPod, ...] = tuple(p for p in self.pods if not p.node_name)
        #: True when some node's MIG layout is being changed (nvidia.com/mig.config.state).
        self.mig_reconfiguring: bool = any(
            k.labels.get("nvidia.com/mig.config.state") in ("pending", "rebooting") for k in self.classes
        )

    # ------------------------------------------------------------------ helpers
    def projected_classes(self, keys: frozenset[str]) -> tuple[np.ndarray, tuple[NodeClass, ...]]:
        """Static classes that keep only the label ``keys`` a rule reads (plus taints, cordon,
        Ready): far fewer classes than ``classes`` when nodes differ in unrelated labels
        (racks, zones). Cached per key set; returns (class id per node, class representatives).
        """
        hit = self._projections.get(keys)
        if hit is not None:
            return hit
        of_class, reps = _classify(self.classes, keys.__contains__)
        per_node = of_class[self.node_class] if len(self.nodes) else np.zeros(0, dtype=np.int32)
        per_node.setflags(write=False)
        result = (per_node, reps)
        if len(self._projections) < 256:
            self._projections[keys] = result
        return result

    def label_positions(self, key: str) -> tuple[np.ndarray, Mapping[str, np.ndarray]]:
        """Where a per-node label (``PER_NODE_LABELS``: one value per node, e.g. the hostname)
        sits: (bool [nodes] True where the node has ``key``, value → ascending node indices).
        Built once per key on first use; a structure of the snapshot, kept apart from the
        per-shape memo. Read-only arrays."""
        hit = self._positions.get(key)
        if hit is not None:
            return hit
        has = np.zeros(len(self.nodes), dtype=bool)
        where: dict[str, list[int]] = {}
        for i, n in enumerate(self.nodes):
            v = n.labels.get(key)
            if v is not None:
                has[i] = True
                where.setdefault(v, []).append(i)
        has.setflags(write=False)
        pos = {v: np.array(ix, dtype=np.int64) for v, ix in where.items()}
        for a in pos.values():
            a.setflags(write=False)
        result = (has, pos)
        if len(self._positions) < 16:
            self._positions[key] = result
        return result

    def structure(self, key: tuple, build: Callable[[], object]) -> object:
        """A structure derived from this snapshot's nodes alone (a domain index per topology
        level, …), built by ``build()`` on first use and kept for the snapshot's life, apart from
        the per-shape memo (``recall``/``remember``), so "cold" checks reuse it as they reuse
        ``label_positions``. At most 64 are kept (later ones are rebuilt on each call)."""
        hit = self._structures.get(key)
        if hit is None:
            hit = build()
            if len(self._structures) < 64:
                self._structures[key] = hit
        return hit

    def recall(self, key: tuple) -> object | None:
        """A result ``remember``-ed for ``key`` on this snapshot, or None."""
        return self._memo.get(key)

    def remember(self, key: tuple, value: object) -> object:
        """Keep a result derived from this snapshot alone; at most ``MEMO_SIZE`` are kept (the
        oldest half is dropped past that). Returns ``value``."""
        if len(self._memo) >= MEMO_SIZE:
            for k in list(self._memo)[: MEMO_SIZE // 2]:
                self._memo.pop(k, None)
        self._memo[key] = value
        return value

    def column(self, resource: str) -> int | None:
        """Column index of ``resource`` or None when no node or pod mentions it."""
        return self.col.get(resource)

    def node_free(self, name: str) -> dict[str, int]:
        """Free resources on one node (allocatable − requested), scheduler units."""
        i = self.node_index[name]
        return {r: int(self.free[i, j]) for j, r in enumerate(self.resources) if self.alloc[i, j] or self.used[i, j]}

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"ClusterSnapshot({len(self.nodes)} nodes, {len(self.pods)} pods, source={self.source!r})"


# ---------------------------------------------------------------------- the constructor's steps


def _node_resource_names(nodes: tuple[Node, ...], extra_resources: Iterable[str]) -> dict[str, None]:
    """Column names in order (an insertion-ordered dict): cpu, memory, pods, then every resource
    a node's allocatable or capacity names (first seen first), then ``extra_resources``."""
    names: dict[str, None] = {"cpu": None, "memory": None, "pods": None}
    for n in nodes:
        for r in n.allocatable:
            names.setdefault(r, None)
        for r in n.capacity:
            names.setdefault(r, None)
    for r in extra_resources:
        names.setdefault(r, None)
    return names


def _repairable_devices(nodes: tuple[Node, ...], names: dict[str, None]) -> tuple[dict[int, tuple[str, int]], dict[int, int]]:
    """Devices a node should have but does not advertise (repairable, FIELD-NOTES §4):
    (node index → (MIG resource, slices) its ``nvidia.com/mig.config`` layout promises beyond its
    capacity, node index → GPUs its ``nvidia.com/gpu.count`` label reports beyond its capacity,
    not on nodes in mixed MIG mode). Adds the resources named to ``names``."""
    labelled_gpus: dict[int, int] = {}
    mig_expected: dict[int, tuple[str, int]] = {}
    for i, n in enumerate(nodes):
        exp = expected_mig_slices(n.labels)
        if exp is not None and exp[1] > n.capacity.get(exp[0], 0):
            mig_expected[i] = exp
            names.setdefault(exp[0], None)
    for i, n in enumerate(nodes):
        count = label_gpu_count(n.labels)
        mig_mixed = n.labels.get("nvidia.com/mig.strategy") == "mixed" and n.labels.get(
            MIG_CONFIG_LABEL, "all-disabled") != "all-disabled"
        if count is not None and count > n.capacity.get(GPU, 0) and not mig_mixed:
            labelled_gpus[i] = count
            names.setdefault(GPU, None)
    return mig_expected, labelled_gpus


def _pods_by_node(pods: tuple[BoundPod, ...], names: dict[str, None]) -> tuple[dict[str, list[BoundPod]], dict[int, Resources]]:
    """(node name → its bound pods in order, id → each distinct request map of a bound pod: pods
    of one shape share one). Adds every resource a bound pod requests to ``names``."""
    by_node: dict[str, list[BoundPod]] = {}
    shapes: dict[int, Resources] = {}
    for p in pods:
        node = p.node_name
        if node:
            here = by_node.get(node)
            if here is None:
                by_node[node] = [p]
            else:
                here.append(p)
            shapes[id(p.requests)] = p.requests
    for req in shapes.values():
        for r in req:
            names.setdefault(r, None)
    return by_node, shapes


def _resource_matrices(nodes: tuple[Node, ...], col: dict[str, int], by_node: dict[str, list[BoundPod]],
                       shapes: dict[int, Resources], node_used: Mapping[str, Resources] | None,
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(allocatable, capacity, used): int64 [nodes × columns]. A node that reports no pods gets
    ``DEFAULT_MAX_PODS`` (capacity: its allocatable); ``used`` is ``node_used`` when given, else
    Σ requests of the node's bound pods (column ``pods`` counts them)."""
    n_nodes, n_res = len(nodes), len(col)
    alloc = np.zeros((n_nodes, n_res), dtype=np.int64)
    cap = np.zeros((n_nodes, n_res), dtype=np.int64)
    used = np.zeros((n_nodes, n_res), dtype=np.int64)
    pods_col = col["pods"]
    for i, n in enumerate(nodes):
        row = alloc[i]
        for r, v in n.allocatable.items():
            row[col[r]] = v
        crow = cap[i]
        for r, v in n.capacity.items():
            crow[col[r]] = v
        if "pods" not in n.allocatable:
            row[pods_col] = DEFAULT_MAX_PODS
        if "pods" not in n.capacity:
            crow[pods_col] = row[pods_col]
        if node_used is not None:
            urow = used[i]
            for r, v in node_used.get(n.name, EMPTY).items():
                if r in col:
                    urow[col[r]] = v
        else:
            here = by_node.get(n.name)
            if here:
                _sum_requests(used, i, here, shapes, col, n_res, pods_col)
    return alloc, cap, used


def _sum_requests(used: np.ndarray, i: int, here: list[BoundPod], shapes: dict[int, Resources], col: dict[str, int],
                  n_res: int, pods_col: int) -> None:
    """Row ``i`` of ``used``: Σ requests of the pods ``here`` (column ``pods`` counts them)."""
    acc = [0] * n_res  # Python ints first: one row assignment instead of an item update per request
    for rid, k in Counter([id(p.requests) for p in here]).items():  # once per shared request map
        for r, v in shapes[rid].items():
            acc[col[r]] += v * k
    acc[pods_col] += len(here)
    if max(acc) < 2**63 and min(acc) >= 0:
        used[i] = acc
    else:  # past int64 (nonsense amounts): numpy's own arithmetic, as it always was
        urow = used[i]
        for p in here:
            for r, v in p.requests.items():
                urow[col[r]] += v
            urow[pods_col] += 1


def _ever_alloc(alloc: np.ndarray, cap: np.ndarray, device_cols: np.ndarray, col: dict[str, int],
                labelled_gpus: dict[int, int], mig_expected: dict[int, tuple[str, int]]) -> np.ndarray:
    """What each node could offer once repaired: capacity for device columns whose allocatable
    is below it, allocatable otherwise, raised to the GPUs and MIG slices ``_repairable_devices``
    found (int64 [nodes × columns])."""
    ever = np.where(device_cols[None, :], np.maximum(alloc, cap), alloc)
    for i, count in labelled_gpus.items():
        # GPU feature discovery says the node has GPUs the device plugin does not advertise:
        # the plugin is down (FIELD-NOTES §4), a repairable state.
        ever[i, col[GPU]] = max(int(ever[i, col[GPU]]), count)
    for i, (r, count) in mig_expected.items():
        # nvidia.com/mig.config names a layout the node advertises fewer slices of: the MIG
        # manager or the device plugin is behind (FIELD-NOTES §4), a repairable state.
        ever[i, col[r]] = max(int(ever[i, col[r]]), count)
    return ever
