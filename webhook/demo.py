"""The embedded demo cluster: a 383-node GPU cluster where "free GPUs" do not mean a gang fits.

Built by code, deterministically (a fixed-seed ``random.Random`` decides which H100 node plays
which part; all times are offsets from a reference time ``now``, ``DEMO_NOW`` by default), and
emitted as Kubernetes object dicts so it goes through ``build_snapshot`` exactly as a
``kubectl get -o yaml`` dump would (``--cluster demo``).

Layout (node names ``h100-000``..``h100-363``, ``cpu-00``..``cpu-15``, ``cp-0``..``cp-2``):

============  =====  ===========================================================
part          nodes  state
============  =====  ===========================================================
half          300    one 4-GPU pod of team-vision (120) / team-speech (100) / team-rec (80)
full8          24    one 8-GPU pod of the team-vision PyTorchJob ``vision-pretrain``
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
Kueue: flavors ``h100`` (nodeLabels ``nvidia.com/gpu.family: hopper``, so all 364 H100 nodes)
and ``cpu-only``; ClusterQueues ``team-llm`` (512 H100 GPUs nominal, borrowingLimit 0, nothing
in use) and ``team-vision`` (every other tenant) in cohort
``research``; LocalQueue ``llm/llm-queue`` → team-llm. Volcano queues ``research`` (capability
256 GPUs) and ``default``. A few objects the engine skips (Namespaces, a Service, Events, two
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
    "RACK_LABEL",
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
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
CPU_INSTANCE = "cpu-64c-256g"
H100_COUNT = 364
NODES_PER_RACK = 8

#: How many H100 nodes play each part, in the order they are drawn from the shuffled list.
PARTS = (
    ("half", 300),
    ("full8", 24),
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
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.family": GPU_FAMILY,
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": "8",
        INSTANCE_LABEL: "gpu-h100-8x",
        ZONE_LABEL: "zone-a" if rack < 23 else "zone-b",
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
    rng = random.Random(DEMO_SEED)
    layout = _layout(rng)
    role = {i: part for part, idx in layout.items() for i in idx}
    objs: list[dict] = []
    pods: list[dict] = []
    # usage of ClusterQueue team-vision, built from the pods it holds: resource → amount
    usage = {"cpu": 0, "memory_gi": 0, GPU: 0}
    admitted = 0

    # -- H100 nodes; the NVL_COUNT highest-numbered half-used nodes are H100 NVL
    nvl = set(layout["half"][-NVL_COUNT:])
    for i in range(H100_COUNT):
        name = f"h100-{i:03d}"
        part = role[i]
        labels = _h100_labels(i, GPU_PRODUCT_NVL if i in nvl else GPU_PRODUCT)
        if part == "cordoned":
            objs.append(_node(name, labels, H100_CAPACITY, H100_ALLOCATABLE, now=now, unschedulable=True,
                              taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": _ts(now - 7200)}]))
        elif part == "notready":
            objs.append(_node(name, labels, H100_CAPACITY, H100_ALLOCATABLE, now=now, ready="False",
                              taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "timeAdded": _ts(now - 3600)},
                                      {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": _ts(now - 3600)}]))
        elif part == "plugin-down":
            objs.append(_node(name, labels, H100_CAPACITY, {**H100_ALLOCATABLE, GPU: "0"}, now=now))
        else:
            objs.append(_node(name, labels, H100_CAPACITY, H100_ALLOCATABLE, now=now))

    # -- tenants' 4-GPU jobs on the half-used nodes (one pod per node)
    half = [f"h100-{i:03d}" for i in layout["half"]]
    rng.shuffle(half)
    at = 0
    for ns, queue, pc, cpu, mem, n_pods, per_job in TENANTS:
        short = ns.split("-", 1)[1]
        for j in range(n_pods // per_job):
            job = f"{short}-train-{j:02d}"
            age_h = round(rng.uniform(0.5, 40.0), 2)
            # about two jobs in three set a deadline that has not run out yet
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
                usage["cpu"] += cpu
                usage["memory_gi"] += mem
                usage[GPU] += 4
            admitted += 1
    assert at == len(half)

    # -- full nodes: a 24-pod 8-GPU PyTorchJob, and a 32-pod 4-GPU Job two to a node
    start = now - 20 * 3600
    for k, i in enumerate(layout["full8"]):
        role_name = "master" if k == 0 else "worker"
        idx = 0 if k == 0 else k - 1
        pods.append(_pod("team-vision", f"vision-pretrain-{role_name}-{idx}", f"h100-{i:03d}", cpu="180", memory=_gi(1800), gpu=8,
                         owner=("kubeflow.org/v1", "PyTorchJob", "vision-pretrain"), start=start, priority_class="research-high",
                         queue="vision-queue", deadline_s=24 * 3600,
                         labels={"training.kubeflow.org/job-name": "vision-pretrain", "training.kubeflow.org/replica-type": role_name,
                                 "training.kubeflow.org/replica-index": str(idx)}))
        usage["cpu"] += 180
        usage["memory_gi"] += 1800
        usage[GPU] += 8
    admitted += 1
    start = now - 5 * 3600
    k = 0
    for i in layout["full4x2"]:
        for _ in range(2):
            pods.append(_pod("team-rec", f"rec-ranker-large-{k}", f"h100-{i:03d}", cpu="88", memory=_gi(900), gpu=4,
                             owner=("batch/v1", "Job", "rec-ranker-large"), start=start, priority_class="batch-low",
                             queue="rec-queue", deadline_s=12 * 3600,
                             labels={"batch.kubernetes.io/job-name": "rec-ranker-large", "batch.kubernetes.io/job-completion-index": str(k)}))
            usage["cpu"] += 88
            usage["memory_gi"] += 900
            usage[GPU] += 4
            k += 1
    admitted += 1

    # -- CPU-only and control-plane nodes
    for c in range(16):
        name = f"cpu-{c:02d}"
        objs.append(_node(name, {INSTANCE_LABEL: CPU_INSTANCE, ZONE_LABEL: "zone-a" if c % 2 == 0 else "zone-b"},
                          {"cpu": "64", "memory": "256Gi", "pods": "110"}, {"cpu": "64", "memory": "256Gi", "pods": "110"}, now=now))
    for c in range(3):
        objs.append(_node(f"cp-{c}", {"node-role.kubernetes.io/control-plane": "", INSTANCE_LABEL: "cp-16c-64g", ZONE_LABEL: "zone-a"},
                          {"cpu": "16", "memory": "64Gi", "pods": "110"}, {"cpu": "16", "memory": "64Gi", "pods": "110"}, now=now,
                          taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]))
    for r in range(8):
        pods.append(_pod("data", f"feature-store-7d9f8c6b5-{r}", f"cpu-{r:02d}", cpu="16", memory=_gi(64), gpu=0,
                         owner=("apps/v1", "ReplicaSet", "feature-store-7d9f8c6b5"), start=now - 9 * 86400, priority_class=None,
                         labels={"app": "feature-store"}, image="registry.example.com/feature-store:3.2"))
    for r in range(2):  # finished: the engine skips them
        pods.append(_pod("llm", f"data-prep-{r}", f"cpu-{8 + r:02d}", cpu="8", memory=_gi(32), gpu=0,
                         owner=("batch/v1", "Job", "data-prep"), start=now - 6 * 3600, priority_class="research-normal",
                         queue="llm-queue", labels={"batch.kubernetes.io/job-name": "data-prep"}, phase="Succeeded",
                         image="registry.example.com/data-prep:1.0"))
    objs.extend(pods)

    # -- PriorityClasses
    for name, value, desc in PRIORITY_CLASSES:
        objs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                     "value": value, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority", "description": desc})

    # -- Kueue
    kv = "kueue.x-k8s.io/v1beta1"
    objs.append({"apiVersion": kv, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
                 "spec": {"nodeLabels": {"nvidia.com/gpu.family": GPU_FAMILY}}})
    objs.append({"apiVersion": kv, "kind": "ResourceFlavor", "metadata": {"name": "cpu-only"},
                 "spec": {"nodeLabels": {INSTANCE_LABEL: CPU_INSTANCE}}})

    def flavor_usage(cpu: int, mem_gi: int, gpu: int) -> list[dict]:
        return [
            {"name": "h100", "resources": [{"name": "cpu", "total": str(cpu), "borrowed": "0"},
                                           {"name": "memory", "total": _gi(mem_gi), "borrowed": "0"},
                                           {"name": GPU, "total": str(gpu), "borrowed": "0"}]},
            {"name": "cpu-only", "resources": [{"name": "cpu", "total": "0", "borrowed": "0"},
                                               {"name": "memory", "total": "0", "borrowed": "0"},
                                               {"name": GPU, "total": "0", "borrowed": "0"}]},
        ]

    def cluster_queue(name: str, h100: tuple[str, str, str], gpu_borrowing: str | None, status: dict) -> dict:
        gpu_quota: dict[str, Any] = {"name": GPU, "nominalQuota": h100[2]}
        if gpu_borrowing is not None:
            gpu_quota["borrowingLimit"] = gpu_borrowing
        return {
            "apiVersion": kv, "kind": "ClusterQueue", "metadata": {"name": name},
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

    objs.append(cluster_queue("team-llm", ("12288", "128000Gi", "512"), "0", {
        "flavorsReservation": flavor_usage(0, 0, 0), "flavorsUsage": flavor_usage(0, 0, 0),
        "pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}))
    objs.append(cluster_queue("team-vision", ("36000", "320000Gi", "2048"), None, {
        "flavorsReservation": flavor_usage(usage["cpu"], usage["memory_gi"], usage[GPU]),
        "flavorsUsage": flavor_usage(usage["cpu"], usage["memory_gi"], usage[GPU]),
        "pendingWorkloads": 0, "reservingWorkloads": admitted, "admittedWorkloads": admitted}))
    for ns, lq, cq in (("llm", "llm-queue", "team-llm"), ("team-vision", "vision-queue", "team-vision"),
                       ("team-speech", "speech-queue", "team-vision"), ("team-rec", "rec-queue", "team-vision")):
        objs.append({"apiVersion": kv, "kind": "LocalQueue", "metadata": {"name": lq, "namespace": ns},
                     "spec": {"clusterQueue": cq}})

    # -- Volcano
    vv = "scheduling.volcano.sh/v1beta1"
    objs.append({"apiVersion": vv, "kind": "Queue", "metadata": {"name": "default"},
                 "spec": {"weight": 1, "reclaimable": True}, "status": {"state": "Open"}})
    objs.append({"apiVersion": vv, "kind": "Queue", "metadata": {"name": "research"},
                 "spec": {"weight": 1, "reclaimable": True, "capability": {GPU: "256"}},
                 "status": {"state": "Open", "allocated": {"cpu": "0", "memory": "0", GPU: "0"}}})

    # -- objects the engine does not use (counted in snapshot.skipped)
    for ns in ("llm", "team-vision", "team-speech", "team-rec", "data"):
        objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}})
    objs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "feature-store", "namespace": "data"},
                 "spec": {"selector": {"app": "feature-store"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}})
    for i in layout["notready"]:
        name = f"h100-{i:03d}"
        objs.append({"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.17f3a", "namespace": "default"},
                     "involvedObject": {"kind": "Node", "name": name}, "reason": "NodeNotReady", "type": "Normal",
                     "message": f"Node {name} status is now: NodeNotReady", "lastTimestamp": _ts(now - 3600)})

    names = {part: tuple(f"h100-{i:03d}" for i in idx) for part, idx in layout.items()}
    return objs, names


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
    """Three or four lines summarising the demo scenario, for CLI output."""
    return (
        "Demo cluster: 364 H100 nodes (8 GPUs each; 48 of them H100 NVL), 16 CPU-only and 3 control-plane nodes.\n"
        "300 H100 nodes (the 48 NVL among them) run one 4-GPU pod of team-vision/speech/rec, 40 are full, 12 free;\n"
        "8 are cordoned, 3 NotReady and 1 has its device plugin down (capacity 8, allocatable 0).\n"
        "Kueue team-llm (llm/llm-queue): 512 H100 GPUs nominal, no borrowing; Volcano queue research: 256."
    )
