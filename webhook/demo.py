"""The embedded demo cluster: a 403-node GPU cluster where "free GPUs" do not mean a gang fits.

Built by code, deterministically (a fixed-seed ``random.Random`` decides which H100 node plays
which part; all times are offsets from a reference time ``now``, ``DEMO_NOW`` by default), and
emitted as Kubernetes object dicts so it goes through ``build_snapshot`` exactly as a
``kubectl get -o yaml`` dump would (``--cluster demo``).

Layout (node names ``h100-000``..``h100-383``, ``cpu-00``..``cpu-15``, ``cp-0``..``cp-2``):

============  =====  ===========================================================
part          nodes  state
============  =====  ===========================================================
half          300    one 4-GPU pod of team-vision (120) / team-speech (100) / team-rec (80)
full8          44    one 8-GPU pod of the team-vision PyTorchJob ``vision-pretrain``
full4x2        16    two 4-GPU pods of the team-rec Job ``rec-ranker-large``
free           12    empty, schedulable
cordoned        8    spec.unschedulable + node.kubernetes.io/unschedulable:NoSchedule, empty
notready        3    Ready=False + node.kubernetes.io/not-ready NoSchedule/NoExecute, empty
plugin-down     1    nvidia.com/gpu capacity 8, allocatable 0 (device plugin lost), empty
============  =====  ===========================================================

plus 16 CPU-only nodes (8 run a ``feature-store`` pod) and 3 tainted control-plane nodes.
Every H100 node carries the GPU feature discovery labels ``nvidia.com/gpu.family=hopper`` and
``nvidia.com/gpu.product``: ``NVIDIA-H100-80GB-HBM3``, except the 48 highest-numbered half-used
nodes, which are ``NVIDIA-H100-NVL`` — a gang selecting the NVL product has only 48 nodes it
could ever run on (the 12 free nodes are all HBM3).

Topology: the H100 nodes sit in 12 racks of 32 (``topology.example.com/rack``: ``rack-00`` ..
``rack-11``, node ``h100-NNN`` in rack NNN // 32) under 4 blocks of 3 racks
(``topology.example.com/block``: ``block-0`` .. ``block-3``); blocks 0–1 are zone-a, 2–3 zone-b.
The parts are drawn over the whole cluster, so the 12 free nodes are scattered: no rack holds more
than 2 of them (rack-02, rack-07, rack-08 and rack-10 hold 2, four other racks 1; the blocks 3, 2,
4 and 3) — a gang asking for 8 whole nodes in one rack (Kueue ``podset-required-topology``) waits although 12 whole
nodes are free, and one asking for more than 32 nodes in one rack can never start. Kueue has the
objects of a TopologyAwareScheduling cluster: Topology ``default`` (kueue.x-k8s.io/v1beta2, the
storage version since Kueue v0.16; levels block, rack, ``kubernetes.io/hostname``) and the ``h100``
flavor's ``spec.topologyName: default``.

Kueue: flavors ``h100`` (nodeLabels ``nvidia.com/gpu.family: hopper``, so all 384 H100 nodes)
and ``cpu-only``; ClusterQueues ``team-llm`` (512 H100 GPUs nominal, borrowingLimit 0, nothing
in use) and ``team-vision`` (every other tenant) in cohort
``research``; LocalQueue ``llm/llm-queue`` → team-llm. Volcano queues ``research`` (capability
256 GPUs) and ``default``. Karpenter NodePool ``b200`` (B200 nodes on demand, none yet; limit 128
GPUs; its nodes tainted ``dedicated=b200:NoSchedule``, so only gangs that tolerate it may use them). A few objects the engine skips (Namespaces, a Service, Events, two
Succeeded pods).
"""

from __future__ import annotations

import copy
import random
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from .adapters.cluster import build_snapshot
from .engine.snapshot import ClusterSnapshot

__all__ = [
    "DEMO_NOW",
    "DEMO_SEED",
    "GPU_FAMILY",
    "GPU_PRODUCT",
    "GPU_PRODUCT_NVL",
    "NVL_COUNT",
    "BLOCK_LABEL",
    "RACK_LABEL",
    "TOPOLOGY_NAME",
    "TOPOLOGY_LEVELS",
    "NODES_PER_RACK",
    "RACKS_PER_BLOCK",
    "ZONE_LABEL",
    "demo_objects",
    "demo_snapshot",
    "demo_layout",
    "demo_description",
]

#: Reference time of the demo (2025-06-02T12:00:00Z): pod start times lie before it and
#: activeDeadlineSeconds run out after it. Evaluate expected waits against this "now".
DEMO_NOW = datetime(2025, 6, 2, 12, 0, 0, tzinfo=timezone.utc).timestamp()
DEMO_SEED = 20250602
GPU = "nvidia.com/gpu"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
#: The product label of the NVL_COUNT H100 nodes drawn from the half-used part (see module doc).
GPU_PRODUCT_NVL = "NVIDIA-H100-NVL"
NVL_COUNT = 48
#: GFD's nvidia.com/gpu.family label on every H100 node; ResourceFlavor h100 selects on it.
GPU_FAMILY = "hopper"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.example.com/rack"
BLOCK_LABEL = "topology.example.com/block"
#: The Kueue Topology of the H100 flavor and its levels, top → bottom (spec.levels[].nodeLabel).
TOPOLOGY_NAME = "default"
TOPOLOGY_LEVELS = (BLOCK_LABEL, RACK_LABEL, "kubernetes.io/hostname")
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
CPU_INSTANCE = "cpu-64c-256g"
NODES_PER_RACK = 32
RACKS_PER_BLOCK = 3
RACKS = 12
H100_COUNT = RACKS * NODES_PER_RACK  # 384

#: How many H100 nodes play each part, in the order they are drawn from the shuffled list.
PARTS = (
    ("half", 300),
    ("full8", 44),
    ("full4x2", 16),
    ("free", 12),
    ("cordoned", 8),
    ("notready", 3),
    ("plugin-down", 1),
)

# Tenant 4-GPU pod shapes (cpu cores, memory Gi) and the jobs they run on half-used nodes:
# (namespace, local queue, priority class, cpu, memory Gi, pods, pods per job)
TENANTS = (
    ("team-vision", "vision-queue", "research-normal", 64, 480, 120, 8),
    ("team-speech", "speech-queue", "research-normal", 48, 384, 100, 4),
    ("team-rec", "rec-queue", "batch-low", 88, 900, 80, 16),
)
PRIORITY_CLASSES = (
    ("research-high", 10000, "Long pre-training runs."),
    ("research-normal", 1000, "Default for research jobs."),
    ("batch-low", 100, "Preemptible batch and recommendation training."),
)
PRIORITY = {name: value for name, value, _ in PRIORITY_CLASSES}


def _ts(t: float) -> str:
    """Epoch seconds → RFC 3339 (metav1.Time, UTC, second precision)."""
    return datetime.fromtimestamp(round(t), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gi(n: int) -> str:
    return f"{n}Gi"


# ---------------------------------------------------------------- nodes


def _node(name: str, labels: dict, capacity: dict, allocatable: dict, *, now: float, taints=(), unschedulable=False, ready="True") -> dict:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **labels}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    reason = {"True": "KubeletReady", "False": "KubeletNotReady", "Unknown": "NodeStatusUnknown"}[ready]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": _ts(now - 90 * 86400)},
        "spec": spec,
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(allocatable),
            "conditions": [
                {"type": "Ready", "status": ready, "reason": reason, "lastTransitionTime": _ts(now - (3600 if ready != "True" else 86400))}
            ],
        },
    }


def _h100_labels(i: int, product: str = GPU_PRODUCT) -> dict:
    rack = i // NODES_PER_RACK
    block = rack // RACKS_PER_BLOCK
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.family": GPU_FAMILY,
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": "8",
        INSTANCE_LABEL: "gpu-h100-8x",
        ZONE_LABEL: "zone-a" if block < 2 else "zone-b",
        BLOCK_LABEL: f"block-{block}",
        RACK_LABEL: f"rack-{rack:02d}",
    }


H100_CAPACITY = {"cpu": "208", "memory": "2048Gi", "pods": "110", GPU: "8"}
H100_ALLOCATABLE = {"cpu": "192", "memory": "2000Gi", "pods": "110", GPU: "8"}


# ---------------------------------------------------------------- pods


def _pod(
    namespace: str,
    name: str,
    node: str,
    *,
    cpu: str,
    memory: str,
    gpu: int,
    owner: tuple[str, str, str],
    start: float,
    priority_class: str | None,
    queue: str | None = None,
    deadline_s: int | None = None,
    labels: dict | None = None,
    phase: str = "Running",
    image: str = "registry.example.com/train:2025.05",
) -> dict:
    api, kind, owner_name = owner
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}
    if gpu:
        resources["requests"][GPU] = str(gpu)
        resources["limits"][GPU] = str(gpu)
    meta_labels = dict(labels or {})
    if queue:
        meta_labels["kueue.x-k8s.io/queue-name"] = queue
    spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Never" if kind != "ReplicaSet" else "Always",
        "schedulerName": "default-scheduler",
        "containers": [{"name": "main", "image": image, "resources": resources}],
    }
    if gpu:
        spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    if priority_class:
        spec["priorityClassName"] = priority_class
        spec["priority"] = PRIORITY[priority_class]
    if deadline_s is not None:
        spec["activeDeadlineSeconds"] = deadline_s
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": meta_labels,
            "creationTimestamp": _ts(start - 30),
            "ownerReferences": [
                {"apiVersion": api, "kind": kind, "name": owner_name, "uid": f"uid-{namespace}-{owner_name}", "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "spec": spec,
        "status": {"phase": phase, "startTime": _ts(start)},
    }


def _layout(rng: random.Random) -> dict[str, list[int]]:
    order = list(range(H100_COUNT))
    rng.shuffle(order)
    out: dict[str, list[int]] = {}
    at = 0
    for part, n in PARTS:
        out[part] = sorted(order[at : at + n])
        at += n
    assert at == H100_COUNT
    return out


def _build(now: float) -> tuple[list[dict], dict[str, tuple[str, ...]]]:
    """The demo's objects in order (H100 nodes, CPU and control-plane nodes, pods,
    PriorityClasses, Kueue, Volcano, skipped kinds) and the H100 node names per part.

    One ``random.Random(DEMO_SEED)`` is drawn from in a fixed order: the layout, then the
    tenants' pods; every other step is deterministic.
    """
    rng = random.Random(DEMO_SEED)
    layout = _layout(rng)
    usage = _QueueUsage()
    objs = _h100_nodes(layout, now)
    pods = _tenant_pods(rng, layout, now, usage) + _full_node_pods(layout, now, usage)
    objs += _cpu_nodes(now)
    objs += pods + _cpu_pods(now)
    objs += _priority_classes()
    objs += _kueue_objects(usage)
    objs += _volcano_objects()
    objs += _autoscaling_objects()
    objs += _skipped_objects(layout, now)
    names = {part: tuple(f"h100-{i:03d}" for i in idx) for part, idx in layout.items()}
    return objs, names


class _QueueUsage:
    """What ClusterQueue team-vision holds, summed from the pods it admits: cpu cores, memory
    Gi, GPUs, and admitted workloads (jobs)."""

    def __init__(self) -> None:
        self.cpu = self.memory_gi = self.gpu = self.admitted = 0

    def add(self, cpu: int, memory_gi: int, gpu: int) -> None:
        """One pod's requests."""
        self.cpu += cpu
        self.memory_gi += memory_gi
        self.gpu += gpu


def _h100_nodes(layout: dict[str, list[int]], now: float) -> list[dict]:
    """The H100 nodes in name order, each in its part's state; the NVL_COUNT highest-numbered
    half-used nodes are H100 NVL."""
    role = {i: part for part, idx in layout.items() for i in idx}
    nvl = set(layout["half"][-NVL_COUNT:])
    out = []
    for i in range(H100_COUNT):
        name = f"h100-{i:03d}"
        part = role[i]
        labels = _h100_labels(i, GPU_PRODUCT_NVL if i in nvl else GPU_PRODUCT)
        if part == "cordoned":
            out.append(_node(name, labels, H100_CAPACITY, H100_ALLOCATABLE, now=now, unschedulable=True,
                             taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": _ts(now - 7200)}]))
        elif part == "notready":
            out.append(_node(name, labels, H100_CAPACITY, H100_ALLOCATABLE, now=now, ready="False",
                             taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "timeAdded": _ts(now - 3600)},
                                     {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": _ts(now - 3600)}]))
        elif part == "plugin-down":
            out.append(_node(name, labels, H100_CAPACITY, {**H100_ALLOCATABLE, GPU: "0"}, now=now))
        else:
            out.append(_node(name, labels, H100_CAPACITY, H100_ALLOCATABLE, now=now))
    return out


def _tenant_pods(rng: random.Random, layout: dict[str, list[int]], now: float, usage: _QueueUsage) -> list[dict]:
    """The tenants' 4-GPU jobs on the half-used nodes (one pod per node, nodes shuffled): ages
    and deadlines drawn from ``rng``; about two jobs in three set a deadline not yet run out."""
    half = [f"h100-{i:03d}" for i in layout["half"]]
    rng.shuffle(half)
    pods = []
    at = 0
    for ns, queue, pc, cpu, mem, n_pods, per_job in TENANTS:
        short = ns.split("-", 1)[1]
        for j in range(n_pods // per_job):
            job = f"{short}-train-{j:02d}"
            age_h = round(rng.uniform(0.5, 40.0), 2)
            deadline_h = rng.choice((None, 24, 48, 72))
            while deadline_h is not None and deadline_h <= age_h + 0.25:
                deadline_h += 24
            start = now - age_h * 3600
            for k in range(per_job):
                node = half[at]
                at += 1
                pods.append(_pod(ns, f"{job}-{k}", node, cpu=str(cpu), memory=_gi(mem), gpu=4,
                                 owner=("batch/v1", "Job", job), start=start, priority_class=pc, queue=queue,
                                 deadline_s=None if deadline_h is None else deadline_h * 3600,
                                 labels={"batch.kubernetes.io/job-name": job, "batch.kubernetes.io/job-completion-index": str(k)}))
                usage.add(cpu, mem, 4)
            usage.admitted += 1
    assert at == len(half)
    return pods


def _full_node_pods(layout: dict[str, list[int]], now: float, usage: _QueueUsage) -> list[dict]:
    """The full nodes: a 44-pod 8-GPU PyTorchJob (one master, workers), and a 32-pod 4-GPU Job
    two to a node."""
    pods = []
    start = now - 20 * 3600
    for k, i in enumerate(layout["full8"]):
        role_name = "master" if k == 0 else "worker"
        idx = 0 if k == 0 else k - 1
        pods.append(_pod("team-vision", f"vision-pretrain-{role_name}-{idx}", f"h100-{i:03d}", cpu="180", memory=_gi(1800), gpu=8,
                         owner=("kubeflow.org/v1", "PyTorchJob", "vision-pretrain"), start=start, priority_class="research-high",
                         queue="vision-queue", deadline_s=24 * 3600,
                         labels={"training.kubeflow.org/job-name": "vision-pretrain", "training.kubeflow.org/replica-type": role_name,
                                 "training.kubeflow.org/replica-index": str(idx)}))
        usage.add(180, 1800, 8)
    usage.admitted += 1
    start = now - 5 * 3600
    k = 0
    for i in layout["full4x2"]:
        for _ in range(2):
            pods.append(_pod("team-rec", f"rec-ranker-large-{k}", f"h100-{i:03d}", cpu="88", memory=_gi(900), gpu=4,
                             owner=("batch/v1", "Job", "rec-ranker-large"), start=start, priority_class="batch-low",
                             queue="rec-queue", deadline_s=12 * 3600,
                             labels={"batch.kubernetes.io/job-name": "rec-ranker-large", "batch.kubernetes.io/job-completion-index": str(k)}))
            usage.add(88, 900, 4)
            k += 1
    usage.admitted += 1
    return pods


def _cpu_nodes(now: float) -> list[dict]:
    """16 CPU-only nodes over two zones and 3 tainted control-plane nodes."""
    out = []
    for c in range(16):
        name = f"cpu-{c:02d}"
        out.append(_node(name, {INSTANCE_LABEL: CPU_INSTANCE, ZONE_LABEL: "zone-a" if c % 2 == 0 else "zone-b"},
                         {"cpu": "64", "memory": "256Gi", "pods": "110"}, {"cpu": "64", "memory": "256Gi", "pods": "110"}, now=now))
    for c in range(3):
        out.append(_node(f"cp-{c}", {"node-role.kubernetes.io/control-plane": "", INSTANCE_LABEL: "cp-16c-64g", ZONE_LABEL: "zone-a"},
                         {"cpu": "16", "memory": "64Gi", "pods": "110"}, {"cpu": "16", "memory": "64Gi", "pods": "110"}, now=now,
                         taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]))
    return out


def _cpu_pods(now: float) -> list[dict]:
    """A feature-store pod on eight CPU nodes, and two Succeeded data-prep pods the engine skips."""
    pods = []
    for r in range(8):
        pods.append(_pod("data", f"feature-store-7d9f8c6b5-{r}", f"cpu-{r:02d}", cpu="16", memory=_gi(64), gpu=0,
                         owner=("apps/v1", "ReplicaSet", "feature-store-7d9f8c6b5"), start=now - 9 * 86400, priority_class=None,
                         labels={"app": "feature-store"}, image="registry.example.com/feature-store:3.2"))
    for r in range(2):  # finished: the engine skips them
        pods.append(_pod("llm", f"data-prep-{r}", f"cpu-{8 + r:02d}", cpu="8", memory=_gi(32), gpu=0,
                         owner=("batch/v1", "Job", "data-prep"), start=now - 6 * 3600, priority_class="research-normal",
                         queue="llm-queue", labels={"batch.kubernetes.io/job-name": "data-prep"}, phase="Succeeded",
                         image="registry.example.com/data-prep:1.0"))
    return pods


def _priority_classes() -> list[dict]:
    """The PriorityClasses of ``PRIORITY_CLASSES``."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority", "description": desc}
            for name, value, desc in PRIORITY_CLASSES]


_KUEUE = "kueue.x-k8s.io/v1beta1"
#: Topology's storage version since Kueue v0.16 (apis/kueue/v1beta2/topology_types.go,
#: +kubebuilder:storageversion; v1beta1 is deprecated there).
_KUEUE_TOPOLOGY = "kueue.x-k8s.io/v1beta2"


def _kueue_objects(usage: _QueueUsage) -> list[dict]:
    """Topology ``default`` (block → rack → hostname), ResourceFlavors h100 (TAS: topologyName
    default) and cpu-only, ClusterQueues team-llm (nothing in use) and team-vision (holding
    ``usage``) in cohort research, and the tenants' LocalQueues."""
    objs = [
        {"apiVersion": _KUEUE_TOPOLOGY, "kind": "Topology", "metadata": {"name": TOPOLOGY_NAME},
         "spec": {"levels": [{"nodeLabel": key} for key in TOPOLOGY_LEVELS]}},
        {"apiVersion": _KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
         "spec": {"nodeLabels": {"nvidia.com/gpu.family": GPU_FAMILY}, "topologyName": TOPOLOGY_NAME}},
        {"apiVersion": _KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "cpu-only"},
         "spec": {"nodeLabels": {INSTANCE_LABEL: CPU_INSTANCE}}},
    ]
    objs.append(_cluster_queue("team-llm", ("12288", "128000Gi", "512"), "0", {
        "flavorsReservation": _flavor_usage(0, 0, 0), "flavorsUsage": _flavor_usage(0, 0, 0),
        "pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}))
    objs.append(_cluster_queue("team-vision", ("36000", "320000Gi", "2048"), None, {
        "flavorsReservation": _flavor_usage(usage.cpu, usage.memory_gi, usage.gpu),
        "flavorsUsage": _flavor_usage(usage.cpu, usage.memory_gi, usage.gpu),
        "pendingWorkloads": 0, "reservingWorkloads": usage.admitted, "admittedWorkloads": usage.admitted}))
    for ns, lq, cq in (("llm", "llm-queue", "team-llm"), ("team-vision", "vision-queue", "team-vision"),
                       ("team-speech", "speech-queue", "team-vision"), ("team-rec", "rec-queue", "team-vision")):
        objs.append({"apiVersion": _KUEUE, "kind": "LocalQueue", "metadata": {"name": lq, "namespace": ns},
                     "spec": {"clusterQueue": cq}})
    return objs


def _flavor_usage(cpu: int, mem_gi: int, gpu: int) -> list[dict]:
    """A ClusterQueue's status.flavorsUsage / flavorsReservation: ``cpu`` cores, ``mem_gi`` Gi
    and ``gpu`` GPUs in flavor h100, nothing in cpu-only, nothing borrowed."""
    return [
        {"name": "h100", "resources": [{"name": "cpu", "total": str(cpu), "borrowed": "0"},
                                       {"name": "memory", "total": _gi(mem_gi), "borrowed": "0"},
                                       {"name": GPU, "total": str(gpu), "borrowed": "0"}]},
        {"name": "cpu-only", "resources": [{"name": "cpu", "total": "0", "borrowed": "0"},
                                           {"name": "memory", "total": "0", "borrowed": "0"},
                                           {"name": GPU, "total": "0", "borrowed": "0"}]},
    ]


def _cluster_queue(name: str, h100: tuple[str, str, str], gpu_borrowing: str | None, status: dict) -> dict:
    """A ClusterQueue in cohort research: ``h100`` = (cpu, memory, GPU) nominal quotas of flavor
    h100 (GPU borrowingLimit ``gpu_borrowing`` when set), fixed cpu-only quotas, ``status``."""
    gpu_quota: dict[str, Any] = {"name": GPU, "nominalQuota": h100[2]}
    if gpu_borrowing is not None:
        gpu_quota["borrowingLimit"] = gpu_borrowing
    return {
        "apiVersion": _KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {
            "cohort": "research",
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "stopPolicy": "None",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                           "borrowWithinCohort": {"policy": "Never"}},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [
                    {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": h100[0]},
                                                   {"name": "memory", "nominalQuota": h100[1]}, gpu_quota]},
                    {"name": "cpu-only", "resources": [{"name": "cpu", "nominalQuota": "512"},
                                                       {"name": "memory", "nominalQuota": "2048Gi"},
                                                       {"name": GPU, "nominalQuota": "0"}]},
                ],
            }],
        },
        "status": status,
    }


def _volcano_objects() -> list[dict]:
    """Volcano queues default and research (capability 256 GPUs, nothing allocated)."""
    vv = "scheduling.volcano.sh/v1beta1"
    return [
        {"apiVersion": vv, "kind": "Queue", "metadata": {"name": "default"},
         "spec": {"weight": 1, "reclaimable": True}, "status": {"state": "Open"}},
        {"apiVersion": vv, "kind": "Queue", "metadata": {"name": "research"},
         "spec": {"weight": 1, "reclaimable": True, "capability": {GPU: "256"}},
         "status": {"state": "Open", "allocated": {"cpu": "0", "memory": "0", GPU: "0"}}},
    ]


def _autoscaling_objects() -> list[dict]:
    """Karpenter NodePool ``b200``: B200 nodes on demand (none exist yet), limit 128 GPUs, tainted
    ``dedicated=b200:NoSchedule`` — a gang tolerating it and selecting
    ``nvidia.com/gpu.product=NVIDIA-B200`` needs new nodes (NeedsScaleUp), one asking for more
    than 128 of them can never start (ExceedsScaleUpLimits)."""
    return [{
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "b200"},
        "spec": {
            "weight": 10,
            "template": {
                "metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-B200", "nvidia.com/gpu.family": "blackwell"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p6-b200.48xlarge"]},
                    ],
                    "taints": [{"key": "dedicated", "value": "b200", "effect": "NoSchedule"}],
                },
            },
            "limits": {GPU: "128"},
        },
        "status": {"resources": {"cpu": "0", "memory": "0", GPU: "0", "nodes": "0"}},
    }]


def _skipped_objects(layout: dict[str, list[int]], now: float) -> list[dict]:
    """Objects the engine does not use (counted in ``snapshot.skipped``): Namespaces, a Service,
    a NodeNotReady Event per NotReady node."""
    objs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}}
                        for ns in ("llm", "team-vision", "team-speech", "team-rec", "data")]
    objs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "feature-store", "namespace": "data"},
                 "spec": {"selector": {"app": "feature-store"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}})
    for i in layout["notready"]:
        name = f"h100-{i:03d}"
        objs.append({"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.17f3a", "namespace": "default"},
                     "involvedObject": {"kind": "Node", "name": name}, "reason": "NodeNotReady", "type": "Normal",
                     "message": f"Node {name} status is now: NodeNotReady", "lastTimestamp": _ts(now - 3600)})
    return objs


@lru_cache(maxsize=4)
def _cached(now: float) -> tuple[tuple[dict, ...], dict[str, tuple[str, ...]]]:
    objs, names = _build(now)
    return tuple(objs), names


def demo_objects(now: float = DEMO_NOW) -> list[dict]:
    """The demo cluster as Kubernetes object dicts (Nodes, Pods, PriorityClasses, Kueue,
    Volcano and a few objects the engine skips), deterministic for a given ``now``.

    Args:
        now: reference time in epoch seconds; pod start times lie before it, deadlines after.
            Default ``DEMO_NOW`` (2025-06-02T12:00:00Z); pass ``time.time()`` to get a demo
            whose expected waits are relative to the real clock.

    Returns:
        A deep copy of the cached objects (the caller may mutate it; ~25 ms).
    """
    return copy.deepcopy(list(_cached(float(now))[0]))


def demo_layout(now: float = DEMO_NOW) -> dict[str, tuple[str, ...]]:
    """H100 node names per part: half, full8, full4x2, free, cordoned, notready, plugin-down."""
    return dict(_cached(float(now))[1])


@lru_cache(maxsize=4)
def _snapshot(now: float) -> ClusterSnapshot:
    return build_snapshot(_cached(now)[0], source="demo", as_of=now)


def demo_snapshot(now: float = DEMO_NOW) -> ClusterSnapshot:
    """The demo cluster as a ``ClusterSnapshot`` (``source == "demo"``), built once per ``now``
    through ``build_snapshot`` and cached (snapshots are immutable)."""
    return _snapshot(float(now))


def demo_description() -> str:
    """Five lines summarising the demo scenario, for CLI output."""
    return (
        "Demo cluster: 384 H100 nodes (8 GPUs each; 48 of them H100 NVL) in 12 racks of 32 (4 blocks of 3 racks),\n"
        "16 CPU-only and 3 control-plane nodes. 300 H100 nodes (the 48 NVL among them) run one 4-GPU pod of\n"
        "team-vision/speech/rec, 60 are full, 12 free (no rack holds more than 2 of them);\n"
        "8 are cordoned, 3 NotReady and 1 has its device plugin down (capacity 8, allocatable 0).\n"
        "Kueue team-llm (llm/llm-queue): 512 H100 GPUs nominal, no borrowing; Volcano queue research: 256."
    )
