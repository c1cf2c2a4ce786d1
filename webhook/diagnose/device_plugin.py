"""Step 4 of ``diagnose``, device plugin: does one node's device plugin hide GPUs? (FIELD-NOTES §4)

Owns the device-plugin signals of every node (``device_plugin_findings``: capacity above
allocatable, allocatable below what pods hold, GPU-labelled nodes advertising no GPU resource, MIG
slices below the layout's, stale zero-valued resources), the device-plugin pod of each such node,
and the step built from them (``device_plugin_step``). Does not render text. Pure: no I/O.
Units: device counts per extended resource (nvidia.com/gpu, MIG slices, amd.com/gpu).
"""

from __future__ import annotations

from collections.abc import Callable
from shlex import quote as _q
from typing import Any

import numpy as np

from ..engine.evaluate import EngineOptions
from ..engine.fixes import GangView
from ..engine.model import BoundPod
from ..engine.snapshot import GPU_COUNT_LABEL, ClusterSnapshot, expected_mig_slices
from .report import SAMPLES, DevicePluginStep

__all__ = ["DEVICE_PLUGIN_NAMESPACES", "device_plugin_findings", "device_plugin_step"]

#: Namespaces where the NVIDIA device plugin DaemonSet usually runs.
DEVICE_PLUGIN_NAMESPACES = ("gpu-operator", "nvidia-device-plugin", "kube-system", "nvidia-gpu-operator")
GPU_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.count", "nvidia.com/gpu.product")
QUESTION = "Does one node's device plugin hide GPUs?"


def _gpu_cols(snap: ClusterSnapshot, options: EngineOptions) -> list[tuple[str, int]]:
    return [(r, snap.col[r]) for r in snap.resources if options.is_gpu(r)]


def _plugin_pods(snap: ClusterSnapshot) -> tuple[dict[str, list[BoundPod]], list[BoundPod]]:
    bound: dict[str, list[BoundPod]] = {}
    unbound: list[BoundPod] = []
    for p in snap.pods:
        if p.namespace in DEVICE_PLUGIN_NAMESPACES and "device-plugin" in p.name:
            if p.node_name:
                bound.setdefault(p.node_name, []).append(p)
            else:
                unbound.append(p)
    return bound, unbound


def device_plugin_findings(snap: ClusterSnapshot, options: EngineOptions | None = None) -> list[dict]:
    """Nodes whose device plugin looks wrong (FIELD-NOTES §4), one dict per node:
    ``{"node", "problems": [text], "capacity": {r: n}, "allocatable": {r: n}, "allocated": {r: n},
    "plugin_pods": [{"namespace", "name", "phase", "restarts", "ready"}]}`` (restarts: Σ container
    restartCount; ready: the Ready condition, None when unknown). Pure; sorted by node name."""
    options = options or EngineOptions()
    out: dict[int, dict] = {}

    def entry(i: int) -> dict:
        e = out.get(i)
        if e is None:
            e = out[i] = {"node": snap.nodes[i].name, "problems": [], "capacity": {}, "allocatable": {}, "allocated": {}}
        return e

    _allocatable_problems(snap, _gpu_cols(snap, options), entry)
    _label_problems(snap, {r for r in snap.resources if options.is_gpu(r)}, entry)  # every GPU resource any node advertises
    return _with_plugin_pods(snap, [out[i] for i in sorted(out, key=lambda i: snap.nodes[i].name)])


def _allocatable_problems(snap: ClusterSnapshot, gcols: list[tuple[str, int]], entry: Callable[[int], dict]) -> None:
    """Per GPU resource: capacity above allocatable (lost registration, unhealthy devices) and
    allocatable below what pods hold; records the three amounts of each such node."""
    if not gcols:
        return
    cols = np.array([c for _, c in gcols])
    cap, alloc, used = snap.cap[:, cols], snap.alloc[:, cols], snap.used[:, cols]
    lost = np.flatnonzero((cap > alloc).any(axis=1) | (used > alloc).any(axis=1))
    for i in lost.tolist():
        e = entry(i)
        for j, (r, c) in enumerate(gcols):
            cv, av, uv = int(cap[i, j]), int(alloc[i, j]), int(used[i, j])
            if cv > av:
                kind = "plugin lost registration or every device unhealthy" if av == 0 else f"{cv - av} unhealthy device(s) (XID?)"
                e["problems"].append(f"{r} capacity {cv}, allocatable {av}: {kind}")
            if uv > av:
                e["problems"].append(f"{r} allocatable {av} < {uv} held by pods: node out of sync, excluded by some schedulers")
            if cv or av or uv:
                e["capacity"][r], e["allocatable"][r], e["allocated"][r] = cv, av, uv


def _label_problems(snap: ClusterSnapshot, gpu_names: set[str], entry: Callable[[int], dict]) -> None:
    """On nodes labelled as GPU nodes: no GPU resource advertised, fewer MIG slices than the
    layout implies, stale zero-valued GPU resources next to non-zero ones."""
    for i, n in enumerate(snap.nodes):
        labels = n.labels
        labelled = labels.get("nvidia.com/gpu.present") == "true" or GPU_COUNT_LABEL in labels or "nvidia.com/gpu.product" in labels
        if not labelled:
            continue
        advertised = {r: v for r, v in n.capacity.items() if r in gpu_names}
        if not any(advertised.values()):
            e = entry(i)
            e["problems"].append("labelled as a GPU node (" + ", ".join(f"{k}={labels[k]}" for k in GPU_LABELS if k in labels)
                                 + ") but advertises no GPU resource: device plugin missing or crashing")
        exp = expected_mig_slices(labels)
        if exp is not None and n.capacity.get(exp[0], 0) < exp[1]:
            e = entry(i)
            state = labels.get("nvidia.com/mig.config.state", "unknown")
            e["problems"].append(f"MIG layout {labels.get('nvidia.com/mig.config')} implies {exp[1]} {exp[0]}, node advertises "
                                 f"{n.capacity.get(exp[0], 0)} (mig.config.state={state})")
        stale = sorted(r for r, v in advertised.items() if v == 0 and any(advertised.values()))
        if stale:
            e = entry(i)
            e["problems"].append("stale zero-valued resource(s) " + ", ".join(stale) + " (harmless to kube-scheduler; "
                                 "some schedulers misread them)")


def _with_plugin_pods(snap: ClusterSnapshot, result: list[dict]) -> list[dict]:
    """Add ``plugin_pods`` to each node entry (the device-plugin pods bound there); Pending
    plugin pods go to the nodes without one when the match is unambiguous, else each such node
    gets ``unbound_plugin_pods`` (their count). Returns ``result``."""
    bound, unbound = _plugin_pods(snap)
    no_plugin = []
    for e in result:
        pods = bound.get(e["node"], [])
        e["plugin_pods"] = [{"namespace": p.namespace, "name": p.name, "phase": p.phase, "restarts": p.restarts, "ready": p.ready}
                            for p in pods]
        if not pods:
            no_plugin.append(e)
    # Unbound (Pending) plugin pods: DaemonSet pods target one node each; match them to nodes without one.
    if unbound and no_plugin:
        if len(no_plugin) == 1 or len(unbound) == 1:
            for e in no_plugin[:len(unbound)] if len(unbound) > 1 else no_plugin[:1]:
                e["plugin_pods"] = [{"namespace": p.namespace, "name": p.name, "phase": p.phase, "restarts": p.restarts, "ready": p.ready,
                                     "bound": False} for p in unbound[:1 if len(no_plugin) > 1 else len(unbound)]]
        else:
            for e in no_plugin:
                e["unbound_plugin_pods"] = len(unbound)
    return result


def device_plugin_step(snap: ClusterSnapshot, view: GangView, options: EngineOptions) -> DevicePluginStep:
    """Step 4: the nodes with device-plugin signals, those the gang could ever use first; blocking
    when one of those is eligible and the gang is short of nodes."""
    items = device_plugin_findings(snap, options)
    relevant = []
    if view.pod_sets:
        ever = view.ever_masks[view.main]
        relevant = [e for e in items if ever[snap.node_index[e["node"]]]]
    show = relevant or items
    facts = {"nodes_with_problems": len(items), "eligible_nodes_with_problems": len(relevant), "nodes": show[:10]}
    if not items:
        cmd = "kubectl get nodes -o custom-columns=NAME:.metadata.name,CAP:.status.capacity.nvidia\\.com/gpu,ALLOC:.status.allocatable.nvidia\\.com/gpu"
        return DevicePluginStep(question=QUESTION, command=cmd, **facts,
                                meaning="Every GPU node advertises all of its devices as allocatable.", status="ok")
    first = show[0]["node"]
    pods = show[0].get("plugin_pods") or []
    ns = pods[0]["namespace"] if pods else "gpu-operator"
    cmd = (f"kubectl get node {_q(first)} -o jsonpath='{{.status.capacity}}{{\"\\n\"}}{{.status.allocatable}}{{\"\\n\"}}' && "
           f"kubectl -n {_q(ns)} get pods -o wide --field-selector spec.nodeName={_q(first)}")
    meaning = " | ".join(f"{e['node']}: {'; '.join(e['problems'])}; {_plugin_pod_text(e)}" for e in show[:SAMPLES])
    if len(show) > SAMPLES:
        meaning += f" | … and {len(show) - SAMPLES} more node(s)"
    status = "blocking" if relevant and view.deficit > 0 else "info"
    return DevicePluginStep(question=QUESTION, command=cmd, meaning=meaning, status=status, **facts)


def _plugin_pod_text(e: dict[str, Any]) -> str:
    """What the device-plugin pod of node entry ``e`` says and what to do about it."""
    pp = e.get("plugin_pods") or []
    if pp:
        p = pp[0]
        where = "on" if p.get("bound", True) else "for"
        pod_txt = f"device-plugin pod {p['namespace']}/{p['name']} is {p['phase']} {where} {e['node']}"
        if p["phase"] != "Running":
            pod_txt += " — get it Running (schedule it with the default scheduler / a system priority class)"
        elif p.get("restarts") or p.get("ready") is False:
            health = ", ".join(x for x in ("not ready" if p.get("ready") is False else "",
                                            f"{p['restarts']} restart(s)" if p.get("restarts") else "") if x)
            pod_txt += (f" but {health} — the plugin is failing: kubectl -n {p['namespace']} logs {p['name']} --previous; "
                        f"restarting it re-registers the devices")
        else:
            pod_txt += f" (restarts/readiness: kubectl -n {p['namespace']} get pod {p['name']}; logs: kubectl -n {p['namespace']} logs {p['name']})"
        return pod_txt
    if e.get("unbound_plugin_pods"):
        return f"no device-plugin pod bound on {e['node']}; {e['unbound_plugin_pods']} plugin pod(s) Pending unscheduled"
    return (f"no device-plugin pod on {e['node']} in the snapshot — run: kubectl get pods -A -o wide "
            f"--field-selector spec.nodeName={e['node']} | grep -i device-plugin")
