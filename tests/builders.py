"""Small builders for engine tests: ``node``, ``pod``, ``pod_set``, ``gang``, ``snapshot``.

Units: cpu is given in cores (→ millicores), memory in GiB (→ bytes), GPUs and pods as counts.
Nodes with ``gpu=0`` advertise no ``nvidia.com/gpu`` at all, like a real CPU node.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from webhook.engine.model import (
    TAINT_NOT_READY,
    TAINT_UNSCHEDULABLE,
    BoundPod,
    TopologyRequest,
    GangRequest,
    Node,
    PodSet,
    Taint,
    Toleration,
)
from webhook.engine.snapshot import ClusterSnapshot

GPU = "nvidia.com/gpu"
GI = 1024**3

__all__ = ["GPU", "GI", "node", "pod", "pod_set", "gang", "snapshot", "taint", "toleration", "resources"]


def _milli(cores: float) -> int:
    return int(round(cores * 1000))


def resources(gpu: int = 0, cpu: float = 0, mem_gi: float = 0, **extra: int) -> dict[str, int]:
    """A resource map in scheduler units; zero amounts are left out."""
    out: dict[str, int] = {}
    if cpu:
        out["cpu"] = _milli(cpu)
    if mem_gi:
        out["memory"] = int(round(mem_gi * GI))
    if gpu:
        out[GPU] = int(gpu)
    for k, v in extra.items():
        if v:
            out[k] = int(v)
    return out


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Taint:
    return Taint(key, value, effect)


def toleration(key: str = "", value: str = "", effect: str = "", operator: str | None = None) -> Toleration:
    """``toleration("k", "v")`` → Equal; ``toleration("k")`` / ``toleration()`` → Exists."""
    if operator is None:
        operator = "Equal" if value else "Exists"
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def _taints(ts: Iterable[Taint | str | tuple] | None) -> list[Taint]:
    out = []
    for t in ts or ():
        if isinstance(t, Taint):
            out.append(t)
        elif isinstance(t, str):
            # "key=value:Effect" or "key:Effect" or "key"
            body, _, effect = t.partition(":")
            key, _, value = body.partition("=")
            out.append(Taint(key, value, effect or "NoSchedule"))
        else:
            out.append(Taint(*t))
    return out


def node(
    name: str,
    gpu: int = 8,
    cpu: float = 96,
    mem_gi: float = 1024,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint | str | tuple] | None = None,
    unschedulable: bool = False,
    ready: bool | None = True,
    alloc_gpu: int | None = None,
    pods: int = 110,
    auto_taints: bool = True,
) -> Node:
    """A node with capacity = allocatable except ``alloc_gpu`` (healthy GPUs, default ``gpu``).

    With ``auto_taints`` a cordoned node gets node.kubernetes.io/unschedulable:NoSchedule and a
    NotReady node node.kubernetes.io/not-ready:NoSchedule, as the control plane adds them.
    """
    cap = resources(gpu=gpu, cpu=cpu, mem_gi=mem_gi, pods=pods)
    alloc = dict(cap)
    if alloc_gpu is not None:
        alloc[GPU] = int(alloc_gpu)
        cap.setdefault(GPU, 0)
        if not cap[GPU]:
            del cap[GPU]
    ts = _taints(taints)
    if auto_taints:
        if unschedulable and not any(t.key == TAINT_UNSCHEDULABLE for t in ts):
            ts.append(Taint(TAINT_UNSCHEDULABLE, "", "NoSchedule"))
        if ready is False and not any(t.key == TAINT_NOT_READY for t in ts):
            ts.append(Taint(TAINT_NOT_READY, "", "NoSchedule"))
    lab = {"kubernetes.io/hostname": name}
    lab.update(labels or {})
    return Node(
        name=name,
        labels=lab,
        taints=tuple(ts),
        unschedulable=unschedulable,
        ready=ready,
        capacity=cap,
        allocatable=alloc,
    )


def pod(name: str, node: str, gpu: int = 0, cpu: float = 0, mem_gi: float = 0, *, ns: str = "default",
        phase: str = "Running", **kw) -> BoundPod:
    """A pod bound to ``node`` ("" = Pending) requesting the given amounts."""
    return BoundPod(namespace=ns, name=name, node_name=node, requests=resources(gpu=gpu, cpu=cpu, mem_gi=mem_gi),
                    phase=phase, **kw)


def pod_set(
    name: str,
    count: int,
    gpu: int = 0,
    cpu: float = 0,
    mem_gi: float = 0,
    *,
    selector: Mapping[str, str] | None = None,
    tolerations: Iterable[Toleration] | None = None,
    **kw,
) -> PodSet:
    """``count`` pods of one shape (per-pod request in cores / GiB / GPUs). ``required_topology=``
    / ``preferred_topology=`` (a label key) stand for a Kueue TAS ``topology=`` request."""
    for key, mode in (("required_topology", "required"), ("preferred_topology", "preferred")):
        level = kw.pop(key, None)
        if level:
            kw["topology"] = TopologyRequest(source="kueue", mode=mode, level=level)
    return PodSet(
        name=name,
        count=count,
        requests=resources(gpu=gpu, cpu=cpu, mem_gi=mem_gi),
        node_selector=dict(selector or {}),
        tolerations=tuple(tolerations or ()),
        **kw,
    )


def gang(*pod_sets: PodSet, kind: str = "JobSet", name: str = "g", namespace: str = "default",
         queue: str | None = None, **kw) -> GangRequest:
    return GangRequest(kind=kind, name=name, namespace=namespace, pod_sets=tuple(pod_sets), queue_name=queue, **kw)


def snapshot(nodes: Iterable[Node], pods: Iterable[BoundPod] = (), **kw) -> ClusterSnapshot:
    return ClusterSnapshot(nodes, pods, source="test", **kw)
