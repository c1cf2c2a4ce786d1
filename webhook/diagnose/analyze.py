"""``diagnose``: why a gang is Pending, in the order an expert isolates it (FIELD-NOTES §4–§7), as
a ``DiagnosisReport`` (``webhook.diagnose.report``); the renderers print it.

Owns the order of the steps and steps 2 (fit) and 3 (per-node reasons), the one-line verdict, and
the call of the fixes; steps 1, 4 and 5 live in ``quota``, ``device_plugin`` and ``partial_gangs``,
the autoscaler step (only on a cluster that shows an autoscaler) in ``autoscaler``.
The fixes are ranked by displacement in ``webhook.engine.fixes``; the verdict and per-node reasons
come from ``webhook.engine.evaluate``. Pure: no I/O, no clock (``now`` is an argument).

Steps (each: name, question, the kubectl command a person would run, what gangcheck found —
numbers —, and what it means):

1. quota — the gang's queue: nominal, borrowing limit, usage, the request; ever / now; the
   workloads ahead of it and orphan reservations.
2. fit — eligible nodes, nodes that can take one pod now, the deficit, free vs stranded GPUs.
   topology — (when a pod set requires one topology domain) per domain of its level, the pods
   that fit now and ever, the closest domains first (``topology``).
3. nodes — per-node reasons in kube-scheduler's wording with sample node names.
   autoscaler — (when the cluster shows one) the NodePools / node groups / policy pools that could
   take the gang, their limits and usage, pending NodeClaims, why the others do not match, the
   gang's ProvisioningRequests, the provisioning time.
4. device-plugin — capacity vs allocatable, GPU-labelled nodes without a GPU resource, MIG
   slices vs layout, stale zero-valued resources, allocatable below what pods hold, and the
   device-plugin pod on each such node.
5. partial-gangs — gangs with pods bound while siblings are Pending; pairs that deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from shlex import quote as _q

import numpy as np

from ..engine.decision import FITS, NEVER_FITS, Decision
from ..engine.evaluate import EngineOptions, evaluate
from ..engine.fixes import GangView, compute_fixes, gang_view
from ..engine.model import GangRequest
from ..engine.quantity import format_quantity
from ..engine.snapshot import ClusterSnapshot
from ..engine.text import plural
from ..gcpause import gc_paused
from .autoscaler import autoscaler_step
from .device_plugin import device_plugin_step
from .partial_gangs import partial_gangs_step
from .quota import quota_step
from .topology import level_word, topology_step
from .report import ClusterSummary, DecisionSummary, DiagnosisReport, FitStep, GangSummary, NodesStep, Step

__all__ = ["diagnose", "diagnose_report", "fit_step", "nodes_step", "verdict_line"]


def diagnose(snap: ClusterSnapshot, gang: GangRequest, now: float | None = None, options: EngineOptions | None = None,
             *, decision: Decision | None = None, expected_wait_s: float | None = None) -> dict:
    """The isolation order for one gang, as a JSON-ready dict (``diagnose_report(...).to_dict()``).

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
        return _analyze(snap, gang, now, options or EngineOptions(), decision, expected_wait_s).to_dict()


def diagnose_report(snap: ClusterSnapshot, gang: GangRequest, now: float | None = None, options: EngineOptions | None = None,
                    *, decision: Decision | None = None, expected_wait_s: float | None = None) -> DiagnosisReport:
    """``diagnose`` as the model (``DiagnosisReport``), for a caller that renders it itself."""
    with gc_paused():
        return _analyze(snap, gang, now, options or EngineOptions(), decision, expected_wait_s)


def _analyze(snap: ClusterSnapshot, gang: GangRequest, now: float | None, options: EngineOptions,
             decision: Decision | None, expected_wait_s: float | None) -> DiagnosisReport:
    """Evaluate (unless given), run the steps, the verdict line and the fixes."""
    d = decision or evaluate(snap, gang, options, now=now)
    if expected_wait_s is None and d.expected_wait and not d.expected_wait.get("unknown"):
        expected_wait_s = d.expected_wait.get("p50_s")
    view = gang_view(snap, gang, d, options)
    scale = autoscaler_step(snap, gang, d, view, options)  # None: the cluster shows no autoscaler
    topo = topology_step(snap, gang, d, view)  # None: no pod set requires one topology domain
    steps = (
        quota_step(snap, gang, d, view),
        fit_step(snap, gang, d, view, options),
        *(() if topo is None else (topo,)),
        nodes_step(snap, gang, d, view),
        *(() if scale is None else (scale,)),
        device_plugin_step(snap, view, options),
        partial_gangs_step(snap, gang, view, options),
    )
    running = bool(view.pod_sets) and view.need == 0 and bool(view.own_bound)
    fixes = [] if running else compute_fixes(snap, gang, d, now, options, expected_wait_s=expected_wait_s, view=view)
    return DiagnosisReport(
        gang=GangSummary(kind=gang.kind, api_version=gang.api_version, namespace=gang.namespace, name=gang.name, pods=gang.pods,
                         queue=gang.queue_name or gang.volcano_queue, priority=view.priority,
                         pod_sets=[{"name": ps.name, "count": ps.count, "requests": dict(ps.requests)} for ps in gang.pod_sets]),
        cluster=ClusterSummary(source=snap.source, nodes=len(snap.nodes), pods=len(snap.pods)),
        now=now,
        decision=DecisionSummary(verdict="Running" if running else d.verdict, reasons=list(d.reasons), message=d.message),
        steps=steps,
        verdict=verdict_line(gang, d, view, steps),
        fixes=tuple(f.to_dict() for f in fixes),
    )


# ---------------------------------------------------------------- step 2: fit


def fit_step(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView, options: EngineOptions) -> FitStep:
    """Step 2: the main pod set's eligible nodes, the nodes that can take one pod now, the
    deficit, and free vs stranded GPUs (free on eligible nodes that cannot take one pod)."""
    if not view.pod_sets:
        return FitStep(question="Do enough nodes have room for one pod each?", command="kubectl get nodes",
                       meaning="The gang has no pods to place.", status="ok")
    ps = view.pod_sets[view.main]
    mask = view.now_masks[view.main]
    k = view.k_now[view.main]
    gpu = view.gpu
    f = dict(
        pod_set=ps.name,
        per_pod={r: int(v) for r, v in ps.requests.items() if v},
        pods_needed=view.need,
        own_pods_bound=len(view.own_bound),
        nodes_total=len(snap.nodes),
        nodes_eligible_now=int(mask.sum()),
        nodes_eligible_ever=int(view.ever_masks[view.main].sum()),
        nodes_fit_now=int(np.count_nonzero(k)),
        pods_placeable_now=view.placeable,
        deficit=view.deficit,
    )
    sel = " ".join(f"-l {_q(f'{a}={b}')}" for a, b in ps.node_selector.items())
    cmd = f"kubectl get nodes {sel} -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu".replace("  ", " ")
    if gpu is not None and gpu in snap.col:
        free = np.maximum(snap.free[:, snap.col[gpu]], 0)
        f["gpu_resource"] = gpu
        f["gpus_free_cluster"] = int(free.sum())
        f["gpus_free_eligible"] = int(free[mask].sum())
        stranded = int(free[mask & (k == 0)].sum())
        f["gpus_stranded"] = stranded
        f["stranded_ratio"] = round(stranded / f["gpus_free_eligible"], 4) if f["gpus_free_eligible"] else 0.0
        f["gpus_needed"] = int(ps.requests.get(gpu, 0)) * view.need
        cmd = (f"kubectl describe nodes {sel} | grep -E '^Name:|{gpu}'").replace("  ", " ")
        meaning = _fit_gpu_meaning(f, view, int(ps.requests.get(gpu, 0)))
    else:
        meaning = (f"{view.placeable} of {view.need} pods fit now" + (f"; {view.deficit} short." if view.deficit else "."))
    status = "ok" if view.deficit == 0 else "blocking"
    if d.verdict == NEVER_FITS:
        nf = next((x for x in d.findings if x.severity == NEVER_FITS), None)
        if nf is not None and nf.code != "ExceedsMaxQuota":
            meaning = f"It can never fit: {nf.message}."
            status = "blocking"
    return FitStep(question="How many nodes can take one of its pods now, and how many does it need?",
                   command=cmd, meaning=meaning, **f, status=status)


def _fit_gpu_meaning(f: dict, view: GangView, per_pod: int) -> str:
    """The fit step's meaning when the pod asks for a GPU resource: fits, fragmented (enough free
    GPUs on eligible nodes, too few nodes with room for a pod), or not enough free."""
    gpu = f["gpu_resource"]
    if view.deficit == 0:
        return f"{view.placeable} pod(s) of this shape fit on free resources now; {view.need} needed — fit is not the blocker."
    if f["gpus_free_eligible"] >= f["gpus_needed"]:
        return (f"Free GPUs and a pending gang are not a contradiction here: {f['gpus_free_eligible']} {gpu} are free on eligible "
                f"nodes (≥ the {f['gpus_needed']} needed), but only {f['nodes_fit_now']} node(s) have room for one "
                f"{format_quantity(gpu, per_pod)}-GPU pod now; {f['gpus_stranded']} free GPUs "
                f"({f['stranded_ratio'] * 100:.1f}%) sit on nodes that cannot take one. {view.deficit} pod(s) have no node.")
    return (f"Not enough free: {f['gpus_free_eligible']} {gpu} free on eligible nodes, {f['gpus_needed']} needed; "
            f"{view.placeable} of {view.need} pods fit now ({view.deficit} short).")


# ---------------------------------------------------------------- step 3: per-node reasons


def nodes_step(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView) -> NodesStep:
    """Step 3: the engine's per-node reasons (kube-scheduler's wording) with sample node names."""
    n = d.nodes or {}
    if view.own_pending:
        cmd = f"kubectl -n {_q(gang.namespace)} describe pod {_q(view.own_pending[0].name)} | sed -n '/Events:/,$p'"
    else:
        cmd = f"kubectl -n {_q(gang.namespace)} get events --field-selector reason=FailedScheduling"
    reasons = dict(n.get("reasons") or {})
    samples = {r: list(v) for r, v in (n.get("samples") or {}).items()}
    if not reasons:
        meaning = "Every node passes the scheduler's filters for this pod shape."
    else:
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = [f"{c} × '{r}' (e.g. {', '.join(samples.get(r, [])[:2])})" for r, c in top[:3]]
        meaning = "kube-scheduler would say: " + (n.get("summary") or "") + " Biggest: " + "; ".join(parts) + "."
    return NodesStep(question="Why does each node refuse a pod (kube-scheduler's wording)?", command=cmd,
                     summary=n.get("summary", ""), reasons=reasons, samples=samples, meaning=meaning,
                     status="info" if not reasons else ("ok" if view.deficit == 0 else "blocking"))


# ---------------------------------------------------------------- the verdict line


def verdict_line(gang: GangRequest, d: Decision, view: GangView, steps: Sequence[Step]) -> str:
    """One line: Running, Fits, NeverFits (the engine's reason) or Waits with what blocks it
    (quota, fragmentation or capacity, device plugins, partial gangs, what it waits for)."""
    who = f"{gang.kind} {gang.namespace}/{gang.name}"
    if view.pod_sets and view.need == 0 and view.own_bound:
        return f"{who}: Running — all {plural(len(view.own_bound), 'pod')} are bound."
    if d.verdict == FITS:
        return f"{who}: Fits — it can start now; nothing on the cluster side blocks it."
    if d.verdict == NEVER_FITS:
        return f"{who}: NeverFits — {d.message.split(': ', 1)[-1]}"
    blockers = [s.name for s in steps if s.status == "blocking"]
    fit = next((s for s in steps if s.name == "fit"), None)
    bits = []
    if "quota" in blockers:
        bits.append("quota in use")
    topo = next((s for s in steps if s.name == "topology"), None)
    if topo is not None and topo.status == "blocking" and topo.get("best_domain"):
        word = level_word(topo.level)
        bits.append(f"topology: no {word} has room for all {topo.pods_needed} pods of {topo.pod_set} now "
                    f"(closest {topo.best_domain}: {topo.best_domain_pods_now})")
    if fit is not None and view.deficit:
        if fit.get("gpus_free_eligible", 0) >= fit.get("gpus_needed", 1 << 62):
            bits.append(f"fragmentation: {fit.gpus_free_eligible} GPUs free but only {fit.nodes_fit_now} node(s) fit a pod, "
                        f"{view.deficit} of {view.need} pods have no node")
        else:
            bits.append(f"capacity: {view.deficit} of {view.need} pods have no room now")
    scale = next((s for s in steps if s.name == "autoscaler"), None)
    if scale is not None and scale.get("summary"):  # what the autoscalers can or cannot add
        bits.append(scale.summary)
    if "device-plugin" in blockers:
        n = next(s for s in steps if s.name == "device-plugin").eligible_nodes_with_problems
        bits.append(f"{n} node(s) with device-plugin problems")
    if "partial-gangs" in blockers:
        bits.append("partial gangs hold GPUs")
    w = d.expected_wait or {}
    told = scale is not None and scale.get("summary") and w.get("blocked_by") == "scale-up"  # new nodes: said above
    if w.get("blocked_by") and not told:  # what it waits for instead of running work, as check and the webhook say
        bits.append(w["text"])
    return f"{who}: Waits — " + ("; ".join(bits) if bits else d.message) + "."
