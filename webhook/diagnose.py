"""``gangcheck diagnose`` and ``gangcheck fragmentation``: why a gang is Pending, in the order an
expert isolates it, and what to do about it (FIELD-NOTES §4–§7).

Steps of ``diagnose`` (each: name, question, the kubectl command a person would run, what
gangcheck found — numbers —, and what it means):

1. quota — the gang's queue: nominal, borrowing limit, usage, the request; ever / now; the
   workloads ahead of it and orphan reservations.
2. fit — eligible nodes, nodes that can take one pod now, the deficit, free vs stranded GPUs.
3. nodes — per-node reasons in kube-scheduler's wording with sample node names.
4. device-plugin — capacity vs allocatable, GPU-labelled nodes without a GPU resource, MIG
   slices vs layout, stale zero-valued resources, allocatable below what pods hold, and the
   device-plugin pod on each such node.
5. partial-gangs — gangs with pods bound while siblings are Pending; pairs that deadlock.

Then a one-line verdict and the fixes ranked by displacement (``webhook.engine.fixes``).

``diagnose()`` and ``fragmentation()`` are pure (no I/O, no clock: ``now`` is an argument);
``cmd_diagnose`` / ``cmd_fragmentation`` do the I/O for the CLI.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .engine.decision import FITS, NEVER_FITS, Decision
from .engine.evaluate import EngineOptions, evaluate
from .engine.text import plural
from .engine.filters import Constraints, filter_nodes
from .engine.fit import pods_per_node, shape_of
from .engine.fixes import GangView, NON_GANG_OWNERS, compute_fixes, gang_view, own_pod
from .engine.model import BoundPod, GangRequest, KueueWorkload, PodSet, Toleration
from .engine.quantity import format_quantity, parse_quantity
from .engine.snapshot import GPU, GPU_COUNT_LABEL, ClusterSnapshot, expected_mig_slices
from .gcpause import gc_paused

__all__ = [
    "diagnose",
    "render_diagnosis",
    "fragmentation",
    "render_fragmentation",
    "parse_shape",
    "gang_from_pods",
    "find_gang",
    "cmd_diagnose",
    "cmd_fragmentation",
    "add_commands",
    "DEVICE_PLUGIN_NAMESPACES",
]

#: Namespaces where the NVIDIA device plugin DaemonSet usually runs.
DEVICE_PLUGIN_NAMESPACES = ("gpu-operator", "nvidia-device-plugin", "kube-system", "nvidia-gpu-operator")
GPU_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.count", "nvidia.com/gpu.product")
SAMPLES = 3
#: Commands of one fix shown in the text; past it the last line says how to list all of them.
COMMANDS_SHOWN = 12


def _q(x: str) -> str:
    return shlex.quote(x)


def _fmt(r: str, v: int) -> str:
    return f"{format_quantity(r, int(v))} {r}"


def _gpu_cols(snap: ClusterSnapshot, options: EngineOptions) -> list[tuple[str, int]]:
    return [(r, snap.col[r]) for r in snap.resources if options.is_gpu(r)]


# ---------------------------------------------------------------- step 1: quota


def _step_quota(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView) -> dict:
    q = d.quota or {}
    codes = {f.code: f for f in d.findings}
    findings: dict[str, Any] = {}
    ns = gang.namespace
    if q.get("cluster_queue") or gang.queue_name:
        cq_name = q.get("cluster_queue", "")
        cmd = f"kubectl -n {_q(ns)} get localqueue {_q(gang.queue_name or '')} -o wide && kubectl get clusterqueue {_q(cq_name or '<cq>')} -o yaml"
        findings["system"] = "kueue"
        findings["local_queue"] = f"{ns}/{gang.queue_name}"
        findings["cluster_queue"] = cq_name or None
        findings["request"] = q.get("request", {})
        assigned = set((q.get("flavors") or {}).values())
        lim_out = {}
        for flavor, per in (q.get("limits") or {}).items():
            if assigned and flavor not in assigned:
                continue
            lim_out[flavor] = per
        findings["limits"] = lim_out
        cq = snap.kueue.cluster_queues.get(cq_name)
        if cq is not None:
            findings["pending_workloads"] = cq.pending_workloads
            findings["admitted_workloads"] = cq.admitted_workloads
            findings["queueing_strategy"] = cq.queueing_strategy
            findings["preemption"] = dict(cq.preemption)
        # pending gangs ahead of this one in the same ClusterQueue
        queues = {lq.name for (lns, _), lq in snap.kueue.local_queues.items() if lq.cluster_queue == cq_name} if cq_name else set()
        ahead: dict[str, dict] = {}
        for p in snap.pending_pods:
            if p.queue and p.queue in queues and not own_pod(gang, p) and p.priority >= view.priority:
                k = p.gang or f"Pod/{p.namespace}/{p.name}"
                a = ahead.setdefault(k, {"pods": 0, "gpus": 0, "priority": p.priority})
                a["pods"] += 1
                a["gpus"] += sum(v for r, v in p.requests.items() if r == GPU or r.startswith("nvidia.com/mig-"))
        findings["ahead"] = dict(sorted(ahead.items())[:10])
        findings["ahead_total"] = len(ahead)
        if cq_name and any(snap.kueue.cluster_queue_of(w) == cq_name for w in snap.kueue.workloads.values()):
            # Kueue keeps a Workload for every gang it queues (a suspended Job has no pods):
            # the Workloads are the queue, in Kueue's order; pods would count groups twice.
            cmd += " && kubectl get workloads -A -o wide"
            findings.update(kueue_workloads(snap, gang, cq_name, view.priority))
            findings["ahead"] = {k: {"pods": w["pods"], "gpus": w["gpus"], "priority": w["priority"]}
                                 for k, w in findings["workloads_ahead"].items()}
            findings["ahead_total"] = findings["workloads_ahead_total"]
    elif q.get("queue") or gang.volcano_queue is not None:
        name = q.get("queue") or gang.volcano_queue or "default"
        cmd = f"kubectl get queue {_q(name)} -o yaml && kubectl get podgroups -A -o wide"
        findings.update({"system": "volcano", "queue": name, "request": q.get("request", {}),
                         "capability": q.get("capability", {}), "allocated": q.get("allocated", {}), "state": q.get("state")})
    else:
        cmd = f"kubectl -n {_q(ns)} get resourcequota"
        findings["system"] = None
    orphan = codes.get("OrphanPodGroups")
    if orphan is not None:
        findings["orphan_pod_groups"] = list(orphan.data.get("pod_groups", []))
        findings["orphan_reserved"] = dict(orphan.data.get("reserved", {}))
    never = codes.get("ExceedsMaxQuota")
    waiting = codes.get("WaitingForQuota")
    other = [f for f in d.findings if f.code in ("LocalQueueNotFound", "ClusterQueueNotFound", "ResourceNotCovered",
                                                 "NoMatchingFlavor", "ClusterQueueStopped", "QueueNotFound", "QueueClosed",
                                                 "ExceedsDeservedShare", "HeadOfLineBlocking", "KueueNotInSnapshot", "QuotaReserved",
                                                 "CohortHasCycle", "CohortTooDeep")]
    if findings.get("system") is None:
        meaning, status = "The gang names no Kueue or Volcano queue: quota does not hold it back.", "ok"
    elif never is not None:
        meaning, status = f"It can never be admitted by this queue: {never.message}.", "blocking"
    elif waiting is not None:
        meaning, status = f"It fits the queue's maximum but not now: {waiting.message}.", "blocking"
        if orphan is not None:
            meaning += f" {len(findings['orphan_pod_groups'])} PodGroup(s) reserve quota with no running pod: the usage is not real."
    elif other:
        meaning, status = " ".join(f.message.rstrip(".") + "." for f in other), ("blocking" if any(f.severity == "Waits" for f in other) else "info")
    else:
        meaning, status = "Quota is not the problem: the request fits the queue's limits now.", "ok"
        if orphan is not None:
            meaning += f" Note: {len(findings['orphan_pod_groups'])} orphan PodGroup(s) reserve quota."
    if findings.get("ahead_total"):
        meaning += f" {findings['ahead_total']} pending gang(s) are queued ahead of it in the same ClusterQueue."
    if findings.get("holding"):
        h = findings["holding"]
        meaning += (f" Admitted workloads hold {h['gpus']} GPU(s) of this ClusterQueue's quota"
                    f" ({h['workloads']} workload(s), {h['pods']} pod(s)).")
    own = findings.get("own_workload")
    if own and own.get("message") and own.get("state") in ("Pending", "Inactive"):
        meaning += f" Kueue says of Workload {own['name']}: \"{own['message']}\""
        if own.get("state") == "Inactive":
            meaning += " (spec.active is false: Kueue will not consider it until it is reactivated)"
        meaning += "."
    return {"name": "quota", "question": "Can the gang's queue ever hold it, and can it now?", "command": cmd,
            "findings": findings, "meaning": meaning, "status": status}


def _gpus(requests) -> int:
    return int(sum(v for r, v in requests.items() if r == GPU or r.startswith("nvidia.com/mig-") or r == "amd.com/gpu"))


def kueue_workloads(snap: ClusterSnapshot, gang: GangRequest, cq_name: str, priority: int) -> dict[str, Any]:
    """What Kueue's Workloads say about ClusterQueue ``cq_name`` (Kueue orders pending Workloads
    by priority, then creation time; BestEffortFIFO and StrictFIFO alike):

    * ``own_workload``: the gang's own Workload (``name``, ``state``, ``message``), or None when
      the gang has not been submitted;
    * ``workloads_ahead``: pending Workloads queued before it — higher priority, or equal
      priority and created earlier (all equal-priority ones when the gang has no Workload yet;
      the priority compared is its Workload's, else ``priority``, the pods' priority)
      — as ``{"Workload/ns/name": {"owner", "pods", "gpus", "priority", "created"}}``, at most
      10, in queue order;
    * ``holding``: the admitted (quota-reserved) Workloads: ``{"workloads", "pods", "gpus",
      "top": [{"workload", "owner", "pods", "gpus", "priority"}]}`` (top 5 by GPUs).

    GPUs are Σ count × request of nvidia.com/gpu, amd.com/gpu and MIG slices. Pure.
    """
    own = None
    mine, theirs = [], []
    for wl in snap.kueue.workloads.values():
        if snap.kueue.cluster_queue_of(wl) != cq_name:
            continue
        if wl.belongs_to(gang.kind, gang.namespace, gang.name):
            own = wl
            continue
        (mine if wl.holds_quota else theirs).append(wl)
    created = own.created if own is not None else None
    if own is not None:
        priority = own.priority  # Kueue orders by the Workload's priority (WorkloadPriorityClass or the pods')

    def before(wl: KueueWorkload) -> bool:
        if wl.state != "Pending":
            return False
        if wl.priority != priority:
            return wl.priority > priority
        return created is None or wl.created is None or wl.created < created

    ahead = sorted((w for w in theirs if before(w)), key=lambda w: (-w.priority, w.created or 0.0, w.namespace, w.name))
    out: dict[str, Any] = {
        "own_workload": ({"name": f"{own.namespace}/{own.name}", "state": own.state, "message": own.message}
                         if own is not None else None),
        "workloads_ahead": {f"Workload/{w.namespace}/{w.name}": {"owner": w.owner, "pods": w.pods, "gpus": _gpus(w.requests),
                                                                 "priority": w.priority, "created": w.created} for w in ahead[:10]},
        "workloads_ahead_total": len(ahead),
    }
    if mine:
        top = sorted(mine, key=lambda w: (-_gpus(w.requests), w.namespace, w.name))[:5]
        out["holding"] = {
            "workloads": len(mine), "pods": sum(w.pods for w in mine), "gpus": sum(_gpus(w.requests) for w in mine),
            "top": [{"workload": f"{w.namespace}/{w.name}", "owner": w.owner, "pods": w.pods, "gpus": _gpus(w.requests),
                     "priority": w.priority} for w in top],
        }
    return out


# ---------------------------------------------------------------- step 2: fit


def _step_fit(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView, options: EngineOptions) -> dict:
    if not view.pod_sets:
        return {"name": "fit", "question": "Do enough nodes have room for one pod each?", "command": "kubectl get nodes",
                "findings": {}, "meaning": "The gang has no pods to place.", "status": "ok"}
    ps = view.pod_sets[view.main]
    mask = view.now_masks[view.main]
    k = view.k_now[view.main]
    gpu = view.gpu
    f: dict[str, Any] = {
        "pod_set": ps.name,
        "per_pod": {r: int(v) for r, v in ps.requests.items() if v},
        "pods_needed": view.need,
        "own_pods_bound": len(view.own_bound),
        "nodes_total": len(snap.nodes),
        "nodes_eligible_now": int(mask.sum()),
        "nodes_eligible_ever": int(view.ever_masks[view.main].sum()),
        "nodes_fit_now": int(np.count_nonzero(k)),
        "pods_placeable_now": view.placeable,
        "deficit": view.deficit,
    }
    sel = " ".join(f"-l {_q(f'{a}={b}')}" for a, b in ps.node_selector.items())
    cmd = f"kubectl get nodes {sel} -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu".replace("  ", " ")
    meaning = ""
    if gpu is not None and gpu in snap.col:
        c = snap.col[gpu]
        free = np.maximum(snap.free[:, c], 0)
        f["gpu_resource"] = gpu
        f["gpus_free_cluster"] = int(free.sum())
        f["gpus_free_eligible"] = int(free[mask].sum())
        stranded = int(free[mask & (k == 0)].sum())
        f["gpus_stranded"] = stranded
        f["stranded_ratio"] = round(stranded / f["gpus_free_eligible"], 4) if f["gpus_free_eligible"] else 0.0
        need_gpus = int(ps.requests.get(gpu, 0)) * view.need
        f["gpus_needed"] = need_gpus
        cmd = (f"kubectl describe nodes {sel} | grep -E '^Name:|{gpu}'").replace("  ", " ")
        if view.deficit == 0:
            meaning = f"{view.placeable} pod(s) of this shape fit on free resources now; {view.need} needed — fit is not the blocker."
        elif f["gpus_free_eligible"] >= need_gpus:
            meaning = (f"Free GPUs and a pending gang are not a contradiction here: {f['gpus_free_eligible']} {gpu} are free on eligible "
                       f"nodes (≥ the {need_gpus} needed), but only {f['nodes_fit_now']} node(s) have room for one "
                       f"{format_quantity(gpu, int(ps.requests.get(gpu, 0)))}-GPU pod now; {stranded} free GPUs "
                       f"({f['stranded_ratio'] * 100:.1f}%) sit on nodes that cannot take one. {view.deficit} pod(s) have no node.")
        else:
            meaning = (f"Not enough free: {f['gpus_free_eligible']} {gpu} free on eligible nodes, {need_gpus} needed; "
                       f"{view.placeable} of {view.need} pods fit now ({view.deficit} short).")
    else:
        meaning = (f"{view.placeable} of {view.need} pods fit now" + (f"; {view.deficit} short." if view.deficit else "."))
    status = "ok" if view.deficit == 0 else "blocking"
    if d.verdict == NEVER_FITS:
        nf = next((x for x in d.findings if x.severity == NEVER_FITS), None)
        if nf is not None and nf.code != "ExceedsMaxQuota":
            meaning = f"It can never fit: {nf.message}."
            status = "blocking"
    return {"name": "fit", "question": "How many nodes can take one of its pods now, and how many does it need?",
            "command": cmd, "findings": f, "meaning": meaning, "status": status}


# ---------------------------------------------------------------- step 3: per-node reasons


def _step_nodes(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView) -> dict:
    n = d.nodes or {}
    if view.own_pending:
        cmd = f"kubectl -n {_q(gang.namespace)} describe pod {_q(view.own_pending[0].name)} | sed -n '/Events:/,$p'"
    else:
        cmd = f"kubectl -n {_q(gang.namespace)} get events --field-selector reason=FailedScheduling"
    reasons = dict(n.get("reasons") or {})
    samples = {r: list(v) for r, v in (n.get("samples") or {}).items()}
    f = {"summary": n.get("summary", ""), "reasons": reasons, "samples": samples}
    if not reasons:
        meaning = "Every node passes the scheduler's filters for this pod shape."
    else:
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = [f"{c} × '{r}' (e.g. {', '.join(samples.get(r, [])[:2])})" for r, c in top[:3]]
        meaning = "kube-scheduler would say: " + (n.get("summary") or "") + " Biggest: " + "; ".join(parts) + "."
    return {"name": "nodes", "question": "Why does each node refuse a pod (kube-scheduler's wording)?", "command": cmd,
            "findings": f, "meaning": meaning, "status": "info" if not reasons else ("ok" if view.deficit == 0 else "blocking")}


# ---------------------------------------------------------------- step 4: device plugin


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
    gcols = _gpu_cols(snap, options)
    out: dict[int, dict] = {}
    gpu_names = {r for r in snap.resources if options.is_gpu(r)}  # every resource any node advertises

    def entry(i: int) -> dict:
        e = out.get(i)
        if e is None:
            e = out[i] = {"node": snap.nodes[i].name, "problems": [], "capacity": {}, "allocatable": {}, "allocated": {}}
        return e

    if gcols:
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
    bound, unbound = _plugin_pods(snap)
    result = []
    no_plugin = []
    for i in sorted(out, key=lambda i: snap.nodes[i].name):
        e = out[i]
        pods = bound.get(e["node"], [])
        e["plugin_pods"] = [{"namespace": p.namespace, "name": p.name, "phase": p.phase, "restarts": p.restarts, "ready": p.ready}
                            for p in pods]
        if not pods:
            no_plugin.append(e)
        result.append(e)
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


def _step_device_plugin(snap: ClusterSnapshot, view: GangView, options: EngineOptions) -> dict:
    items = device_plugin_findings(snap, options)
    relevant = []
    if view.pod_sets:
        ever = view.ever_masks[view.main]
        relevant = [e for e in items if ever[snap.node_index[e["node"]]]]
    show = relevant or items
    f: dict[str, Any] = {"nodes_with_problems": len(items), "eligible_nodes_with_problems": len(relevant), "nodes": show[:10]}
    if not items:
        cmd = "kubectl get nodes -o custom-columns=NAME:.metadata.name,CAP:.status.capacity.nvidia\\.com/gpu,ALLOC:.status.allocatable.nvidia\\.com/gpu"
        return {"name": "device-plugin", "question": "Does one node's device plugin hide GPUs?", "command": cmd,
                "findings": f, "meaning": "Every GPU node advertises all of its devices as allocatable.", "status": "ok"}
    first = show[0]["node"]
    pods = show[0].get("plugin_pods") or []
    ns = pods[0]["namespace"] if pods else "gpu-operator"
    cmd = (f"kubectl get node {_q(first)} -o jsonpath='{{.status.capacity}}{{\"\\n\"}}{{.status.allocatable}}{{\"\\n\"}}' && "
           f"kubectl -n {_q(ns)} get pods -o wide --field-selector spec.nodeName={_q(first)}")
    lines = []
    for e in show[:SAMPLES]:
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
        elif e.get("unbound_plugin_pods"):
            pod_txt = f"no device-plugin pod bound on {e['node']}; {e['unbound_plugin_pods']} plugin pod(s) Pending unscheduled"
        else:
            pod_txt = (f"no device-plugin pod on {e['node']} in the snapshot — run: kubectl get pods -A -o wide "
                       f"--field-selector spec.nodeName={e['node']} | grep -i device-plugin")
        lines.append(f"{e['node']}: {'; '.join(e['problems'])}; {pod_txt}")
    meaning = " | ".join(lines)
    if len(show) > SAMPLES:
        meaning += f" | … and {len(show) - SAMPLES} more node(s)"
    status = "blocking" if relevant and view.deficit > 0 else "info"
    return {"name": "device-plugin", "question": "Does one node's device plugin hide GPUs?", "command": cmd,
            "findings": f, "meaning": meaning, "status": status}


# ---------------------------------------------------------------- step 5: partial gangs


def partial_gangs(snap: ClusterSnapshot, options: EngineOptions | None = None, limit: int = 50) -> list[dict]:
    """Gangs with pods bound while siblings are Pending (holding resources without progress),
    and Volcano/coscheduling PodGroups running fewer than minMember. Sorted by GPUs held, desc."""
    options = options or EngineOptions()
    pending_keys = {p.gang for p in snap.pending_pods if p.gang}
    groups: dict[str, dict] = {}
    if pending_keys:
        for p in snap.pods:
            k = p.gang
            if k not in pending_keys or p.owner_kind in NON_GANG_OWNERS:
                continue
            g = groups.setdefault(k, {"gang": k, "bound": 0, "pending": 0, "gpus_held": 0, "gpus_pending": 0, "nodes": set(), "priority": p.priority})
            gpus = sum(v for r, v in p.requests.items() if options.is_gpu(r))
            if p.node_name:
                g["bound"] += 1
                g["gpus_held"] += gpus
                g["nodes"].add(p.node_name)
            else:
                g["pending"] += 1
                g["gpus_pending"] += gpus
    out = []
    for g in groups.values():
        if g["bound"] and g["pending"]:
            g["nodes"] = sorted(g["nodes"])[:SAMPLES]
            out.append(g)
    for (ns, name), pg in snap.volcano.pod_groups.items():
        key = f"PodGroup/{ns}/{name}"
        if key in groups:
            continue
        if 0 < pg.running < pg.min_member:
            out.append({"gang": key, "bound": pg.running, "pending": pg.min_member - pg.running, "gpus_held": None,
                        "gpus_pending": None, "nodes": [], "priority": None})
    out.sort(key=lambda g: (-(g["gpus_held"] or 0), g["gang"]))
    return out[:limit]


def _deadlocks(snap: ClusterSnapshot, partial: list[dict], options: EngineOptions) -> list[list[str]]:
    """Pairs of partial gangs where each one's pending pods fit only if the other released its pods."""
    gpu = GPU if GPU in snap.col else None
    if gpu is None or len(partial) < 2:
        return []
    c = snap.col[gpu]
    usable = np.array([n.ready is not False and not n.unschedulable for n in snap.nodes], dtype=bool)
    free = np.maximum(snap.free[:, c], 0)
    held: dict[str, np.ndarray] = {}
    pend: dict[str, list[int]] = {}
    keys = [g["gang"] for g in partial[:20] if g.get("gpus_pending")]
    kset = set(keys)
    for p in snap.pods:
        if p.gang in kset:
            v = int(p.requests.get(gpu, 0))
            if p.node_name:
                arr = held.setdefault(p.gang, np.zeros(len(snap.nodes), dtype=np.int64))
                arr[snap.node_index[p.node_name]] += v
            elif v:
                pend.setdefault(p.gang, []).append(v)

    def fits(avail: np.ndarray, reqs: list[int]) -> bool:
        a = np.sort(avail[usable])[::-1].copy()
        for r in sorted(reqs, reverse=True):
            j = int(np.argmax(a >= r)) if len(a) else 0
            if not len(a) or a[j] < r:
                return False
            a[j] -= r
        return True

    out = []
    for x in range(len(keys)):
        for y in range(x + 1, len(keys)):
            a, b = keys[x], keys[y]
            if a not in pend or b not in pend:
                continue
            if fits(free, pend[a]) or fits(free, pend[b]):
                continue
            if fits(free + held.get(b, 0), pend[a]) and fits(free + held.get(a, 0), pend[b]):
                out.append([a, b])
    return out


def _step_partial(snap: ClusterSnapshot, gang: GangRequest, view: GangView, options: EngineOptions) -> dict:
    partial = partial_gangs(snap, options)
    dead = _deadlocks(snap, partial, options)
    f = {"partial_gangs": partial[:10], "partial_gangs_total": len(partial), "deadlocks": dead,
         "own_bound": len(view.own_bound), "own_pending": len(view.own_pending)}
    cmd = "kubectl get pods -A --field-selector status.phase=Pending -o wide && kubectl get podgroups -A"
    if view.own_bound or view.own_pending:
        cmd = f"kubectl -n {_q(gang.namespace)} get pods -o wide | grep {_q(gang.name)}"
    if not partial:
        meaning, status = "No gang holds resources with part of its pods while the rest wait.", "ok"
    else:
        held = sum(g["gpus_held"] or 0 for g in partial)
        parts = [f"{g['gang']} ({g['bound']} bound, {g['pending']} pending" + (f", {g['gpus_held']} GPUs held)" if g["gpus_held"] is not None else ")")
                 for g in partial[:SAMPLES]]
        meaning = f"{len(partial)} partial gang(s) hold {held} GPUs without progress: " + "; ".join(parts) + "."
        if dead:
            meaning += " Deadlock: " + "; ".join(f"{a} and {b} each wait for the other's GPUs" for a, b in dead[:SAMPLES]) + " — evict one whole."
        status = "blocking" if dead or view.deficit > 0 else "info"
    return {"name": "partial-gangs", "question": "Do partially started gangs hold resources without progress?",
            "command": cmd, "findings": f, "meaning": meaning, "status": status}


# ---------------------------------------------------------------- diagnose


def _verdict_line(gang: GangRequest, d: Decision, view: GangView, steps: list[dict]) -> str:
    who = f"{gang.kind} {gang.namespace}/{gang.name}"
    if view.pod_sets and view.need == 0 and view.own_bound:
        return f"{who}: Running — all {plural(len(view.own_bound), 'pod')} are bound."
    if d.verdict == FITS:
        return f"{who}: Fits — it can start now; nothing on the cluster side blocks it."
    if d.verdict == NEVER_FITS:
        return f"{who}: NeverFits — {d.message.split(': ', 1)[-1]}"
    blockers = [s["name"] for s in steps if s["status"] == "blocking"]
    fit = next((s for s in steps if s["name"] == "fit"), None)
    bits = []
    if "quota" in blockers:
        bits.append("quota in use")
    if fit is not None and view.deficit:
        ff = fit["findings"]
        if ff.get("gpus_free_eligible", 0) >= ff.get("gpus_needed", 1 << 62):
            bits.append(f"fragmentation: {ff['gpus_free_eligible']} GPUs free but only {ff['nodes_fit_now']} node(s) fit a pod, "
                        f"{view.deficit} of {view.need} pods have no node")
        else:
            bits.append(f"capacity: {view.deficit} of {view.need} pods have no room now")
    if "device-plugin" in blockers:
        n = next(s for s in steps if s["name"] == "device-plugin")["findings"]["eligible_nodes_with_problems"]
        bits.append(f"{n} node(s) with device-plugin problems")
    if "partial-gangs" in blockers:
        bits.append("partial gangs hold GPUs")
    w = d.expected_wait or {}
    if w.get("blocked_by"):  # what it waits for instead of running work, as check and the webhook say
        bits.append(w["text"])
    return f"{who}: Waits — " + ("; ".join(bits) if bits else d.message) + "."


def diagnose(snap: ClusterSnapshot, gang: GangRequest, now: float | None = None, options: EngineOptions | None = None,
             *, decision: Decision | None = None, expected_wait_s: float | None = None) -> dict:
    """The isolation order for one gang, as a JSON-ready dict.

    Args:
        snap: the cluster. gang: the gang (from a manifest, a dump object or its pods).
        now: epoch seconds (GPU-hours lost, expected start); None → hours are 0.
        options: engine options. decision: a precomputed ``evaluate(snap, gang, options)``.
        expected_wait_s: the wait model's estimate, copied into the wait fix; by default the
            p50 of the decision's own expected wait (evaluated at ``now``).

    Returns:
        ``{"gang", "cluster", "now", "decision": {verdict, reasons, message}, "steps": [{name,
        question, command, findings, meaning, status}], "verdict": one line, "fixes": [...]}``,
        fixes in ranked order (``webhook.engine.fixes``). No I/O; the cyclic garbage
        collector is paused while it runs (``webhook.gcpause``).
    """
    with gc_paused():  # a large gang's fixes allocate ~10⁵ small objects next to a big snapshot
        return _diagnose(snap, gang, now, options or EngineOptions(), decision, expected_wait_s)


def _diagnose(snap: ClusterSnapshot, gang: GangRequest, now: float | None, options: EngineOptions,
              decision: Decision | None, expected_wait_s: float | None) -> dict:
    d = decision or evaluate(snap, gang, options, now=now)
    if expected_wait_s is None and d.expected_wait and not d.expected_wait.get("unknown"):
        expected_wait_s = d.expected_wait.get("p50_s")
    view = gang_view(snap, gang, d, options)
    steps = [
        _step_quota(snap, gang, d, view),
        _step_fit(snap, gang, d, view, options),
        _step_nodes(snap, gang, d, view),
        _step_device_plugin(snap, view, options),
        _step_partial(snap, gang, view, options),
    ]
    running = bool(view.pod_sets) and view.need == 0 and bool(view.own_bound)
    fixes = [] if running else compute_fixes(snap, gang, d, now, options, expected_wait_s=expected_wait_s, view=view)
    return {
        "gang": {"kind": gang.kind, "api_version": gang.api_version, "namespace": gang.namespace, "name": gang.name, "pods": gang.pods,
                 "queue": gang.queue_name or gang.volcano_queue, "priority": view.priority,
                 "pod_sets": [{"name": ps.name, "count": ps.count, "requests": dict(ps.requests)} for ps in gang.pod_sets]},
        "cluster": {"source": snap.source, "nodes": len(snap.nodes), "pods": len(snap.pods)},
        "now": now,
        "decision": {"verdict": "Running" if running else d.verdict, "reasons": list(d.reasons), "message": d.message},
        "steps": steps,
        "verdict": _verdict_line(gang, d, view, steps),
        "fixes": [f.to_dict() for f in fixes],
    }


def _findings_lines(step: dict) -> list[str]:
    f = step["findings"]
    name = step["name"]
    out: list[str] = []
    if name == "quota":
        if f.get("system") == "kueue":
            out.append(f"LocalQueue {f.get('local_queue')} → ClusterQueue {f.get('cluster_queue')}")
            req = f.get("request") or {}
            for flavor, per in (f.get("limits") or {}).items():
                for r, lim in per.items():
                    mx = "unlimited" if lim["maximum"] is None else format_quantity(r, lim["maximum"])
                    bl = "none" if lim["borrowing_limit"] is None else format_quantity(r, lim["borrowing_limit"])
                    out.append(f"{flavor} {r}: request {format_quantity(r, req.get(r, 0))}, nominal {format_quantity(r, lim['nominal'])}, "
                               f"borrowing limit {bl}, max {mx}, in use {format_quantity(r, lim['usage'])}")
            if "pending_workloads" in f:
                seen = "Workloads" if "workloads_ahead" in f else "Pending pods"
                out.append(f"workloads: {f['admitted_workloads']} admitted, {f['pending_workloads']} pending "
                           f"({f.get('queueing_strategy')}); gangs ahead seen as {seen}: {f.get('ahead_total', len(f.get('ahead') or {}))}")
            own = f.get("own_workload")
            if own:
                out.append(f"own Workload {own['name']}: {own['state']}" + (f" — {own['message']}" if own.get("message") else ""))
            for k, w in list((f.get("workloads_ahead") or {}).items())[:5]:
                made = "" if w.get("created") is None else ", created " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(w["created"]))
                out.append(f"ahead: {k} ({w['owner'] or 'no owner'}): {w['pods']} pods, {w['gpus']} GPUs, priority {w['priority']}{made}")
            if f.get("workloads_ahead_total", 0) > 5:
                out.append(f"… {f['workloads_ahead_total'] - 5} more Workload(s) ahead")
            h = f.get("holding")
            if h:
                out.append(f"holding quota: {h['workloads']} admitted Workload(s), {h['pods']} pods, {h['gpus']} GPUs; largest: "
                           + ", ".join(f"{t['workload']} ({t['gpus']} GPUs, priority {t['priority']})" for t in h["top"][:3]))
        elif f.get("system") == "volcano":
            out.append(f"Volcano queue {f.get('queue')} ({f.get('state') or 'Open'}): capability "
                       + (", ".join(_fmt(r, v) for r, v in (f.get("capability") or {}).items()) or "none")
                       + "; allocated " + (", ".join(_fmt(r, v) for r, v in (f.get("allocated") or {}).items()) or "nothing")
                       + "; request " + (", ".join(_fmt(r, v) for r, v in (f.get("request") or {}).items()) or "nothing"))
        else:
            out.append("no queue")
        if f.get("orphan_pod_groups"):
            out.append(f"orphan PodGroups ({len(f['orphan_pod_groups'])}): " + ", ".join(f["orphan_pod_groups"][:10]))
    elif name == "fit":
        if f:
            out.append(f"{f['nodes_total']} nodes, {f['nodes_eligible_now']} eligible now ({f['nodes_eligible_ever']} ever), "
                       f"{f['nodes_fit_now']} can take a {f['pod_set']} pod now")
            out.append(f"pods: {f['pods_needed']} needed, {f['pods_placeable_now']} placeable now, deficit {f['deficit']}"
                       + (f" ({f['own_pods_bound']} of its pods already bound)" if f.get("own_pods_bound") else ""))
            if "gpu_resource" in f:
                out.append(f"{f['gpu_resource']}: {f['gpus_free_cluster']} free in the cluster, {f['gpus_free_eligible']} on eligible nodes, "
                           f"{f['gpus_stranded']} stranded ({f['stranded_ratio'] * 100:.1f}%), {f['gpus_needed']} needed")
    elif name == "nodes":
        if f.get("summary"):
            out.append(f["summary"])
        for r, c in sorted((f.get("reasons") or {}).items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"{c:>6}  {r}  e.g. {', '.join((f.get('samples') or {}).get(r, [])[:SAMPLES])}")
    elif name == "device-plugin":
        out.append(f"{f['nodes_with_problems']} node(s) with device-plugin signals, {f['eligible_nodes_with_problems']} of them eligible for this gang")
        for e in f.get("nodes", [])[:5]:
            pods = ", ".join(f"{p['namespace']}/{p['name']} {p['phase']}" + ("" if p.get("bound", True) else " (unbound)")
                             + (" not ready" if p.get("ready") is False else "")
                             + (f" {p['restarts']} restart(s)" if p.get("restarts") else "")
                             for p in e.get("plugin_pods", [])) or "no plugin pod in the snapshot"
            out.append(f"{e['node']}: {'; '.join(e['problems'])} [plugin: {pods}]")
    elif name == "partial-gangs":
        out.append(f"{f['partial_gangs_total']} partial gang(s); deadlocked pairs: {len(f['deadlocks'])}")
        for g in f.get("partial_gangs", [])[:5]:
            held = "" if g["gpus_held"] is None else f", {g['gpus_held']} GPUs held"
            out.append(f"{g['gang']}: {g['bound']} bound, {g['pending']} pending{held}")
    return out


def render_diagnosis(report: dict) -> str:
    """Plain text of a ``diagnose`` report: steps (question, $ command, found, means), the
    verdict line and the ranked fixes with their costs."""
    g = report["gang"]
    c = report["cluster"]
    from .cli_args import kind_label

    lines = [f"Why is {kind_label(g['kind'], g.get('api_version'))} {g['namespace']}/{g['name']} ({plural(g['pods'], 'pod')}) not running?  "
             f"cluster: {c['source'] or 'dump'} ({plural(c['nodes'], 'node')}, {plural(c['pods'], 'pod')})", ""]
    mark = {"ok": "ok", "blocking": "BLOCKING", "info": "info"}
    for i, s in enumerate(report["steps"], 1):
        lines.append(f"{i}. {s['name']} [{mark.get(s['status'], s['status'])}] — {s['question']}")
        lines.append(f"   $ {s['command']}")
        for ln in _findings_lines(s):
            lines.append(f"   found: {ln}")
        lines.append(f"   means: {s['meaning']}")
        lines.append("")
    lines.append(f"Verdict: {report['verdict']}")
    fixes = report["fixes"]
    if fixes:
        lines.append("")
        lines.append("Fixes, least displacement first:")
        for i, f in enumerate(fixes, 1):
            cost = "no displacement" if not f["displaced_pods"] else (
                f"displaces {f['displaced_pods']} pod(s) / {f['displaced_gpus']} GPU(s) of {len(f['tenants'])} tenant(s) "
                f"({', '.join(f['tenants'][:4])}), top priority {f['max_victim_priority']}, {f['gpu_hours_lost']:.1f} GPU-h lost, "
                f"{f['pdb_violations']} PDB violation(s)")
            buys = []
            if f["frees_nodes"]:
                buys.append(f"{f['frees_nodes']} node(s)")
            if f["expected_start"] is not None:
                buys.append(f"start at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(f['expected_start']))}")
            buys.append("enough alone" if f["sufficient"] else "not enough alone")
            lines.append(f"{i:>2}. [{f['action']}] {f['summary']}")
            lines.append(f"      cost: {cost}; buys: {', '.join(buys)}")
            cmds = f["commands"]
            shown = cmds if len(cmds) <= COMMANDS_SHOWN else cmds[:COMMANDS_SHOWN - 1]
            for cmd in shown:
                lines.append(f"      $ {cmd}")
            if len(shown) < len(cmds):
                lines.append(f"      … and {len(cmds) - len(shown)} more command(s), every one in order: "
                             f"{_json_invocation(report)} | jq -r '.fixes[{i - 1}].commands[]'")
    return "\n".join(lines)


def _json_invocation(report: dict) -> str:
    """The command that prints ``report`` as JSON (``report["invocation"]``, set by the CLI),
    for pointing at the parts the text leaves out."""
    inv = report.get("invocation")
    if inv:
        return inv
    g = report["gang"]
    return f"gangcheck diagnose {_q(g['kind'].lower() + '/' + g['name'])} -n {_q(g['namespace'])} --cluster CLUSTER -o json"


# ---------------------------------------------------------------- fragmentation


#: A resource name as Kubernetes writes one: an optional DNS prefix and "/", then a name.
_RESOURCE_NAME = re.compile(r"^(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def parse_shape(text: str, options: EngineOptions | None = None) -> dict[str, int]:
    """``"8xnvidia.com/gpu"`` or ``"8xnvidia.com/gpu,96xcpu,1000Gixmemory"`` → per-pod request
    in scheduler units.

    Raises:
        ValueError: text that is not ``AMOUNTxRESOURCE[,...]`` (also an empty value, as argparse
            hands ``--shape=--`` over), an amount that is not a quantity, a resource name that
            is not one, or — with ``options`` — a shape that asks for no GPU resource (the
            report is about GPUs: without one every free GPU would read as stranded) or for 0 GPUs.
    """
    example = "e.g. 8xnvidia.com/gpu or 4xnvidia.com/gpu,48xcpu"
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"--shape: expected AMOUNTxRESOURCE[,AMOUNTxRESOURCE…], {example}; got an empty value")
    out: dict[str, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        amount, sep, resource = part.partition("x")
        if not sep or not resource or not amount:
            raise ValueError(f"--shape {text!r}: expected AMOUNTxRESOURCE, {example}")
        if not _RESOURCE_NAME.match(resource):
            raise ValueError(f"--shape {text!r}: {resource!r} is not a resource name, {example}")
        try:
            out[resource] = parse_quantity(resource, amount)
        except ValueError as exc:
            raise ValueError(f"--shape {text!r}: {exc}") from None
    if not out:
        raise ValueError(f"--shape {text!r}: empty, {example}")
    if options is not None:
        gpus = [r for r in out if options.is_gpu(r)]
        if not gpus:
            raise ValueError(f"--shape {text!r}: asks for no GPU resource ({', '.join(options.gpu_resources)}); "
                             f"fragmentation is measured in GPUs per pod, {example}")
        if not any(out[r] > 0 for r in gpus):
            raise ValueError(f"--shape {text!r}: asks for 0 {gpus[0]}; give at least 1, {example}")
    return out


def fragmentation(snap: ClusterSnapshot, shape: Mapping[str, int], options: EngineOptions | None = None) -> dict:
    """Cluster-wide fragmentation for one pod shape (FIELD-NOTES §6), JSON-ready.

    Nodes considered: every node advertising (or labelled with) the shape's GPU resource.
    Eligible: passes the scheduler's filters now for a pod of the shape tolerating the
    ``nvidia.com/gpu`` taint (no selector). Returns the histogram of nodes by free GPUs
    (0..max), whole free nodes per ``nvidia.com/gpu.product``, free and stranded GPUs with the
    ratio, the largest gang of the shape placeable now, and per node GPUs in use (heatmap).
    """
    options = options or EngineOptions()
    gpu = next((r for r in shape if options.is_gpu(r)), GPU)
    ps = PodSet("probe", 1, dict(shape), tolerations=(Toleration(key=gpu, operator="Exists"),))
    mask_now = filter_nodes(snap, Constraints(ps), ever=False).mask
    sh = shape_of(snap, shape)
    k_now = np.where(mask_now, pods_per_node(snap.free, sh), 0)
    c = snap.col.get(gpu)
    if c is None:
        return {"shape": dict(shape), "resource": gpu, "gpu_nodes": 0, "histogram": {}, "whole_free_by_product": {},
                "free": 0, "stranded": 0, "ratio": 0.0, "largest_gang": 0, "nodes_fit": 0, "heatmap": []}
    alloc = snap.alloc[:, c]
    ever = snap.ever_alloc[:, c]
    gpu_nodes = (ever > 0)
    free = np.maximum(snap.free[:, c], 0)
    used = snap.used[:, c]
    top = int(ever.max(initial=0))
    hist = {str(i): 0 for i in range(top + 1)}
    for v in free[gpu_nodes & mask_now].tolist():
        hist[str(min(v, top))] = hist.get(str(min(v, top)), 0) + 1
    whole: dict[str, int] = {}
    whole_mask = gpu_nodes & mask_now & (used == 0) & (free >= alloc) & (alloc > 0)
    for i in np.flatnonzero(gpu_nodes & mask_now).tolist():
        prod = snap.nodes[i].labels.get("nvidia.com/gpu.product", "unknown")
        whole.setdefault(prod, 0)
        if whole_mask[i]:
            whole[prod] += 1
    free_total = int(free[gpu_nodes & mask_now].sum())
    stranded = int(free[gpu_nodes & mask_now & (k_now == 0)].sum())
    heat = []
    for i in np.flatnonzero(gpu_nodes).tolist():
        n = snap.nodes[i]
        state = "ok" if mask_now[i] else ("cordoned" if n.unschedulable else "notready" if n.ready is False else "excluded")
        if ever[i] > alloc[i]:
            state = "devices"
        heat.append({"node": n.name, "used": int(used[i]), "allocatable": int(alloc[i]), "installed": int(ever[i]), "state": state,
                     "product": n.labels.get("nvidia.com/gpu.product", "")})
    return {
        "shape": dict(shape),
        "resource": gpu,
        "gpu_nodes": int(gpu_nodes.sum()),
        "eligible_nodes": int((gpu_nodes & mask_now).sum()),
        "histogram": hist,
        "whole_free_by_product": dict(sorted(whole.items())),
        "free": free_total,
        "stranded": stranded,
        "ratio": round(stranded / free_total, 4) if free_total else 0.0,
        "nodes_fit": int(np.count_nonzero(k_now)),
        "largest_gang": int(k_now.sum()),
        "heatmap": heat,
    }


_HEAT_CHARS = "0123456789"


def render_fragmentation(rep: dict, *, color: bool = False, width: int = 64) -> str:
    """Text of a ``fragmentation`` report. ``color`` renders the heatmap with rich (ANSI);
    otherwise plain: one character per node = GPUs in use (``#`` ≥ 10), ``c`` cordoned,
    ``n`` NotReady, ``d`` devices missing, ``x`` excluded by taints."""
    shape = ", ".join(_fmt(r, v) for r, v in rep["shape"].items())
    lines = [f"Fragmentation for pods of {shape} ({rep['resource']}): {rep['gpu_nodes']} GPU nodes, {rep['eligible_nodes'] if 'eligible_nodes' in rep else 0} schedulable now"]
    lines.append("nodes by free GPUs:")
    hist = rep["histogram"]
    most = max(hist.values(), default=0) or 1
    for k, v in hist.items():
        bar = "█" * max(1 if v else 0, round(30 * v / most))
        lines.append(f"  {k:>2} free  {v:>6}  {bar}")
    lines.append("whole free nodes by product: " + (", ".join(f"{p} {n}" for p, n in rep["whole_free_by_product"].items()) or "none"))
    lines.append(f"free {rep['free']} {rep['resource']}, stranded {rep['stranded']} ({rep['ratio'] * 100:.1f}%) on nodes that cannot take one pod")
    lines.append(f"largest gang of this shape placeable now: {rep['largest_gang']} pod(s) on {rep['nodes_fit']} node(s)")
    lines.append("")
    lines.append("GPUs in use per node (0–9 in use, # ≥10, c cordoned, n NotReady, d devices missing, x excluded):")
    cells = []
    for h in rep["heatmap"]:
        st = h["state"]
        ch = {"cordoned": "c", "notready": "n", "devices": "d", "excluded": "x"}.get(st)
        if ch is None:
            ch = _HEAT_CHARS[h["used"]] if h["used"] < 10 else "#"
        cells.append((ch, h))
    if not color:
        for i in range(0, len(cells), width):
            lines.append("  " + "".join(ch for ch, _ in cells[i:i + width]))
        return "\n".join(lines)
    from io import StringIO

    from rich.console import Console
    from rich.text import Text

    buf = StringIO()
    con = Console(file=buf, force_terminal=True, color_system="truecolor", width=width + 4)
    for i in range(0, len(cells), width):
        t = Text("  ")
        for ch, h in cells[i:i + width]:
            if h["state"] != "ok":
                t.append(ch, style="bold red")
                continue
            frac = h["used"] / max(1, h["installed"])
            style = "green" if frac == 0 else "yellow" if frac < 0.5 else "dark_orange" if frac < 1 else "grey50"
            t.append("█", style=style)
        con.print(t)
    legend = "  █ green free, yellow <50% used, orange partly used, grey full; red letters: c n d x as above"
    return "\n".join(lines) + "\n" + buf.getvalue().rstrip("\n") + "\n" + legend


# ---------------------------------------------------------------- finding a gang for KIND/NAME


def _pods_of(snap: ClusterSnapshot, kind: str, name: str, namespace: str) -> list[BoundPod]:
    kl = kind.lower()
    out = []
    for p in snap.pods:
        if p.namespace != namespace:
            continue
        gk, _, rest = p.gang.partition("/")
        gname = rest.rsplit("/", 1)[-1] if rest else ""
        if (gk.lower() == kl and gname == name) or (p.owner_kind.lower() == kl and p.owner_name == name) or (gname == name and gk == "PodGroup"):
            out.append(p)
    return out


def gang_from_pods(kind: str, name: str, namespace: str, pods: Sequence[BoundPod], raw: Mapping[tuple[str, str], Mapping] | None = None) -> GangRequest:
    """Reconstruct a gang from its pods: one pod set per distinct request (and spec, when the raw
    pod objects are given through ``raw`` keyed by (namespace, name), which restores selectors,
    tolerations and affinity). Count = pods in the set."""
    from .adapters.podspec import pod_set_from_template

    groups: dict[tuple, list[BoundPod]] = {}
    for p in pods:
        groups.setdefault(tuple(sorted(p.requests.items())), []).append(p)
    sets = []
    for i, (key, members) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1]))):
        label = f"pods-{i}"
        obj = (raw or {}).get((members[0].namespace, members[0].name))
        if obj is not None:
            spec = dict(obj.get("spec") or {})
            spec.pop("nodeName", None)
            ps = pod_set_from_template(label, {"metadata": {"labels": (obj.get("metadata") or {}).get("labels") or {}}, "spec": spec}, len(members))
            ps = PodSet(ps.name, len(members), dict(key), node_selector=ps.node_selector, required_affinity=ps.required_affinity,
                        tolerations=ps.tolerations, host_ports=ps.host_ports, max_per_node=ps.max_per_node)
        else:
            ps = PodSet(label, len(members), dict(key), tolerations=(Toleration(operator="Exists"),))
        sets.append(ps)
    queue = next((p.queue for p in pods if p.queue), None)
    return GangRequest(kind=kind, name=name, namespace=namespace, pod_sets=tuple(sets), queue_name=queue)


def _ref(obj: Mapping) -> tuple[str, Any]:
    """(metadata.namespace or "default", metadata.name), without decoding a ``LazyObject``."""
    ref = getattr(obj, "ref", None)
    if ref is not None:
        return ref
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "default", meta.get("name"))


class TargetNotFound(LookupError):
    """KIND/NAME names nothing gangcheck can find in the cluster data; the message says where it looked."""


def find_gang(target: str, namespace: str, snap: ClusterSnapshot, objects: Sequence[Mapping] | None = None) -> tuple[GangRequest, str]:
    """Resolve ``KIND/NAME`` in ``namespace``: a workload object in ``objects`` (the dump), else the
    pods in ``snap`` whose gang key or owner is that workload. Returns (gang, how it was found).

    Raises:
        TargetNotFound: neither is there (the message lists what was searched).
        ValueError: ``target`` is not KIND/NAME.
    """
    from .adapters import adapt

    kind, sep, name = target.partition("/")
    if not sep or not kind or not name:
        raise ValueError(f"{target!r}: expected KIND/NAME (e.g. pytorchjob/llama-70b-pretrain) or a manifest file")
    kl = kind.lower().rstrip("s") if kind.lower() not in ("jobs",) else "job"
    aliases = {"pytorchjob": "pytorchjob", "pytorchjobs": "pytorchjob", "job": "job", "vcjob": "job", "lws": "leaderworkerset"}
    kl = aliases.get(kind.lower(), kl)
    for obj in objects or ():
        if str(obj.get("kind", "")).lower() == kl and _ref(obj) == (namespace, name):
            gang = adapt(dict(obj), source="dump")
            if gang is not None:
                return gang, f"{obj.get('kind')} object in the cluster data"
    pods = _pods_of(snap, kl, name, namespace)
    if pods:
        canonical = next((p.gang.split("/", 1)[0] for p in pods if p.gang.lower().startswith(kl + "/")), kind)
        raw = None
        if objects:
            want = {(p.namespace, p.name) for p in pods}
            raw = {}
            for o in objects:
                if o.get("kind") == "Pod":
                    k = _ref(o)
                    if k in want:
                        raw[k] = o  # the last one of a name, as in the dump
        return gang_from_pods(canonical, name, namespace, pods, raw), f"reconstructed from its {len(pods)} pod(s) in the cluster data"
    same_ns = sorted({p.gang for p in snap.pods if p.namespace == namespace and p.gang})[:8]
    raise TargetNotFound(
        f"{kind}/{name} not found in namespace {namespace}: no such workload object in the cluster data and no pod whose "
        f"gang or owner is {kind}/{name}. "
        + (f"Gangs seen in {namespace}: {', '.join(same_ns)}. " if same_ns else f"No pods with a gang in {namespace}. ")
        + "For a gang not yet submitted, pass its manifest file instead of KIND/NAME.")


# ---------------------------------------------------------------- CLI


def add_commands(sub) -> None:
    """Register ``diagnose`` and ``fragmentation`` on an argparse subparsers object."""
    from .cli_args import time_arg

    d = sub.add_parser("diagnose", help="why a gang is pending, step by step, and fixes ranked by displacement",
                       description="Isolate why a gang cannot start: quota → fit → per-node reasons → device plugin → partial "
                                   "gangs; then the verdict and the fixes ranked by what they cost other tenants.")
    d.add_argument("target", metavar="KIND/NAME|FILE", help="a workload (e.g. pytorchjob/llama-70b-pretrain) or a manifest file")
    d.add_argument("-n", "--namespace", default=None, help="namespace of KIND/NAME (default: default)")
    d.add_argument("--cluster", required=True, metavar="PATH|demo|live", help="cluster dump, 'demo', or 'live' (kubeconfig)")
    d.add_argument("--policy", metavar="FILE", help="policy YAML (resource names, transient taints)")
    d.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format (default text)")
    d.add_argument("--skip-unsupported", action="store_true",
                   help="in a manifest file, skip documents of kinds gangcheck does not check instead of failing with exit 2")
    d.add_argument("--now", type=time_arg, default=None, metavar="TIME",
                   help="reference time: RFC 3339 (2025-06-02T12:00:00Z) or epoch seconds (default: a dump's newest "
                        "timestamp, said on stderr; the demo's own time; the clock for live)")
    d.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the live cache to sync (default 120)")
    f = sub.add_parser("fragmentation", help="free GPUs by node, stranded GPUs and a heatmap for one pod shape",
                       description="For one pod shape (--shape, e.g. 8xnvidia.com/gpu): the nodes by free GPUs, the "
                                   "whole free nodes per GPU product, the free GPUs stranded on nodes that cannot take "
                                   "one such pod, the largest gang of that shape placeable now, and a heatmap of GPUs "
                                   "in use per node. Nodes count when they pass the scheduler's filters now for such "
                                   "a pod (cordoned, NotReady, tainted nodes are marked).",
                       epilog="Exit codes: 0 report written, 2 bad input (shape, policy, cluster).")
    f.add_argument("--cluster", required=True, metavar="PATH|demo|live", help="cluster dump, 'demo', or 'live' (kubeconfig)")
    f.add_argument("--shape", default="8xnvidia.com/gpu",
                   help="per-pod request, AMOUNTxRESOURCE[,…] with a GPU resource: 8xnvidia.com/gpu (default) or 4xnvidia.com/gpu,48xcpu")
    f.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format (default text)")
    f.add_argument("--policy", metavar="FILE", help="policy YAML (gpuResources, transientTaints)")
    f.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the live cache to sync (default 120)")


def _load(spec: str, timeout: float, lookups: bool = True) -> tuple[ClusterSnapshot, list[Mapping] | None]:
    """The snapshot and, for a dump or the demo when ``lookups``, the raw objects (for workload
    lookups; None otherwise)."""
    if spec == "live":
        from .cache import LiveCache
        from .cli_args import live_api_client

        cache = LiveCache(live_api_client()).start()  # LiveConfigError names a bad kubeconfig
        t0 = time.monotonic()
        try:
            while not cache.wait_ready(1.0):
                el = time.monotonic() - t0
                print(f"gangcheck: syncing live cache… {el:.0f}s", file=sys.stderr)
                if el >= timeout:
                    raise TimeoutError(f"live cache not synced after {timeout:.0f}s (status: {json.dumps(cache.status())[:400]})")
            print(f"gangcheck: live cache synced in {time.monotonic() - t0:.1f}s", file=sys.stderr)
            return cache.snapshot(), None
        finally:
            cache.stop()
            cache.api_client.close()
    if spec == "demo":
        from .demo import demo_objects, demo_snapshot

        return demo_snapshot(), demo_objects()
    from .dump import load_cluster, load_cluster_and_objects

    if not lookups:  # a manifest names the gang: no lookup objects to keep
        return load_cluster(spec), None
    # Read once: the snapshot and the workload lookup share it (JSON dumps through the fast
    # reader; their Pods and Nodes are decoded in full only when a lookup needs them).
    return load_cluster_and_objects(spec)


def _require_nodes(snap: ClusterSnapshot, cluster: str) -> None:
    """Raise ValueError when the cluster data holds no Node: every answer would be about an
    empty cluster (as ``gangcheck check`` refuses it)."""
    if not snap.nodes:
        raise ValueError(f"{cluster}: the cluster data holds no Node objects "
                         "(dump them with `kubectl get nodes,pods,... -A -o json`)")


def _options(policy_path: str | None) -> EngineOptions:
    if policy_path is None:  # the default policy's options, without importing pydantic (~0.15 s)
        return EngineOptions()
    from .policy import load_policy

    return load_policy(policy_path).engine_options()


def cmd_diagnose(args) -> int:
    """``gangcheck diagnose``: exit 0 on a report, 2 for bad input or a target not found.

    A manifest file (or directory) with several gangs gets one report per gang, in document
    order — as ``gangcheck check`` checks each gang: text reports one after another, each under
    a header "gang K of N"; JSON a list of reports (one report, not a list, for one gang).
    Documents that are no gang are skipped with a note (text; JSON: ``notes`` in a lone report,
    else on stderr); a kind gangcheck does not check is an error unless ``--skip-unsupported``,
    as for ``check``."""
    import os

    from .adapters.errors import AdapterError
    from .cli_args import LiveConfigError, reference_time
    from .dump import DumpError, load_documents

    notes: list[str] = []
    try:
        options = _options(getattr(args, "policy", None))
        manifest = os.path.exists(args.target)
        snap, objects = _load(args.cluster, args.timeout, lookups=not manifest)
        _require_nodes(snap, args.cluster)
        if manifest:
            from .cli import _gangs

            source, docs = load_documents(args.target)
            from .policy import Policy

            # A diagnosis is no admission: a gang in an exempt namespace is diagnosed all the same.
            items, notes = _gangs(source, docs, bool(getattr(args, "skip_unsupported", False)),
                                  Policy(exemptNamespaces=[]))
            gangs = []
            for item in items:
                if isinstance(item, tuple):  # the webhook would pass it unchanged (e.g. a controller's child)
                    obj, reason = item
                    notes.append(f"skipped {obj.get('kind')} {(obj.get('metadata') or {}).get('name', '')}: {reason}")
                else:
                    gangs.append(item)
            if not gangs:
                raise ValueError(f"{args.target}: no gang workload found" + (f" ({'; '.join(notes)})" if notes else ""))
            found = [(g, f"manifest {args.target}") for g in gangs]
        else:
            found = [find_gang(args.target, args.namespace or "default", snap, objects)]
    except (DumpError, AdapterError, ValueError, TargetNotFound, TimeoutError, OSError, LiveConfigError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # kubeconfig missing for live, policy errors
        print(f"gangcheck: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    now = args.now
    if now is None and args.cluster == "demo":
        from .demo import DEMO_NOW

        now = DEMO_NOW
    now, time_note = reference_time(snap, args.cluster, now, time.time())
    if time_note:  # a dump read days later must not count those days as GPU-hours lost
        print(f"gangcheck: {time_note}", file=sys.stderr)
    base = ["gangcheck", "diagnose", args.target]
    if args.namespace and not manifest:
        base += ["-n", args.namespace]
    base += ["--cluster", args.cluster]
    if getattr(args, "skip_unsupported", False):
        base.append("--skip-unsupported")
    if getattr(args, "policy", None):
        base += ["--policy", args.policy]
    if args.now is not None:
        base += ["--now", repr(args.now)]
    invocation = " ".join(_q(x) for x in base + ["-o", "json"])
    reports = []
    for k, (gang, how) in enumerate(found):
        report = diagnose(snap, gang, now, options)
        report["gang"]["found"] = how
        report["invocation"] = invocation if len(found) == 1 else f"{invocation} | jq '.[{k}]'"
        reports.append(report)
    if args.output == "json":
        if len(reports) == 1 and notes:
            reports[0]["notes"] = notes
        elif notes:
            for note in notes:
                print(f"gangcheck: note: {note}", file=sys.stderr)
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2, default=str))
    else:
        for k, report in enumerate(reports):
            if len(reports) > 1:
                g = report["gang"]
                if k:
                    print()
                print(f"=== gang {k + 1} of {len(reports)}: {g['kind']} {g['namespace']}/{g['name']} ===")
            print(f"({report['gang']['found']})")
            print(render_diagnosis(report))
        for note in notes:
            print(f"note: {note}")
    return 0


def cmd_fragmentation(args) -> int:
    """``gangcheck fragmentation``: exit 0, or 2 for bad input."""
    from .adapters.errors import AdapterError
    from .cli_args import LiveConfigError
    from .dump import DumpError

    try:
        options = _options(getattr(args, "policy", None))
        shape = parse_shape(args.shape, options)
        snap, _ = _load(args.cluster, args.timeout)
        _require_nodes(snap, args.cluster)
    except (DumpError, AdapterError, ValueError, TimeoutError, OSError, LiveConfigError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"gangcheck: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    rep = fragmentation(snap, shape, options)
    if args.output == "json":
        print(json.dumps(rep, indent=2))
    else:
        print(render_fragmentation(rep, color=sys.stdout.isatty()))
    return 0
