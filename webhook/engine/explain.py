"""Why a gang waits, and what a Decision says: the findings that explain a verdict and its text.

Owns the explanations of a feasible gang that cannot start now (``now_findings``: Fragmented,
InsufficientCapacity, UnhealthyDevices, NodesNotReady, NodesCordoned,
NodesTransientlyTainted), groups (``group_findings``), competition (``competition_findings``),
StrictFIFO head-of-line blocking (``head_of_line_finding``), the order findings are told in
(``ORDER``, ``sort_findings``) and the message and warnings (``decision_message``,
``short_warning``). Never decides a verdict: every finding here is Waits or Info.

Units: GPUs as counts, scheduler units in data. Pure: no I/O, no clock.
"""

from __future__ import annotations

import numpy as np

from .decision import FITS, NEVER_FITS, WAITS
from .filters import DEFAULT_TRANSIENT, taint_matches
from .model import REPAIRABLE_TAINTS, Finding, GangRequest
from .podsets import SAMPLES, PodSetEval, primary_pod_set, same_shape_pods
from .quantity import format_quantity
from .quota import QuotaResult
from .snapshot import ClusterSnapshot
from .text import kind_label, plural

__all__ = ["ORDER", "now_findings", "group_findings", "competition_findings", "head_of_line_finding", "sort_findings",
           "decision_message", "short_warning"]


# Order in which findings are told (most important first).
ORDER = [
    "InvalidGang", "InvalidTopologyRequest", "QuantityOverflow", "ExceedsMaxQuota", "ExceedsScaleUpLimits", "NeedsScaleUp",
    "ResourceNotOffered", "PodExceedsNodeCapacity", "UntoleratedTaint",
    "ExceedsClusterCapacity",
    "TopologyPlacementFailed", "TopologyNotFound", "TopologyLevelNotFound", "TopologyUnresolved",
    "NoMatchingScaleUp", "WaitingForQuota", "LocalQueueNotFound", "ClusterQueueNotFound", "CohortHasCycle", "ResourceNotCovered",
    "NoMatchingFlavor", "ClusterQueueStopped", "QueueNotFound", "QueueClosed", "ExceedsDeservedShare", "ClusterOverused",
    "ParallelismExceedsCapacity", "GroupsExceedCapacity", "Fragmented", "InsufficientCapacity", "UnhealthyDevices",
    "NodesNotReady", "NodesCordoned", "NodesTransientlyTainted", "MigReconfiguring", "NodeCapacityUnknown", "NoNodes",
    "PlacementUnproven",
    # Info findings: told after every reason, in this order.
    "TopologyNotEnforced", "QuotaExceedsCapacity", "CohortTooDeep", "GroupsWait",
]


def now_findings(snap, gang, evals, options, findings) -> None:
    """Explain why a feasible gang cannot start now (Fragmented is left out when a topology rule
    is what blocks it now: a TopologyPlacementFailed finding is already in ``findings``)."""
    topology_blocked = any(f.code == "TopologyPlacementFailed" for f in findings)
    union_now = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union_now |= ev.now_mask
    gpu_need: dict[str, int] = {}
    for ps in gang.pod_sets:
        for r, v in ps.requests.items():
            if options.is_gpu(r) and v:
                gpu_need[r] = gpu_need.get(r, 0) + v * ps.count
    explained = False
    for r, need in gpu_need.items():
        c = snap.col.get(r)
        free = int(np.maximum(snap.free[union_now, c], 0).sum()) if c is not None else 0
        main = primary_pod_set([e.ps for e in evals], options)
        ev = next(e for e in evals if e.ps is main)
        if free >= need and topology_blocked:
            pass  # the domains are the cause (TopologyPlacementFailed says it), not fragmentation
        elif free >= need:
            findings.append(Finding("Fragmented", WAITS,
                f"fragmented: {free} {r} free, but only {int(np.count_nonzero(ev.k_now))} node(s) can take a pod of "
                f"{format_quantity(r, main.requests.get(r, 0))} now; {same_shape_pods([e.ps for e in evals], main)} needed",
                {"resource": r, "free": free, "needed": need, "nodes_fit_now": int(np.count_nonzero(ev.k_now)),
                 "pods_needed": same_shape_pods([e.ps for e in evals], main)}))
        else:
            findings.append(Finding("InsufficientCapacity", WAITS,
                f"needs {need} {r}; {free} free on eligible nodes now",
                {"resource": r, "free": free, "needed": need}))
        explained = True
    if not explained:
        findings.append(Finding("InsufficientCapacity", WAITS,
            "not enough free resources on eligible nodes to place every pod of the gang now"))
    # Nodes that could host pods once repaired.
    could = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        could |= ev.k_ever > 0
    names = lambda idx: [snap.nodes[int(i)].name for i in idx]
    cordoned = [i for i in np.flatnonzero(could) if snap.nodes[int(i)].unschedulable]
    not_ready = [i for i in np.flatnonzero(could) if snap.nodes[int(i)].ready is False]
    dev_cols = [snap.col[r] for r in snap.resources if snap.device_cols[snap.col[r]]]
    unhealthy = []
    if dev_cols:
        gap = (snap.ever_alloc[:, dev_cols] > snap.alloc[:, dev_cols]).any(axis=1)
        unhealthy = list(np.flatnonzero(could & gap))
    if unhealthy:
        details = []
        for i in unhealthy[:SAMPLES]:
            n = snap.nodes[int(i)]
            for r in snap.resources:
                c = snap.col[r]
                if snap.device_cols[c] and snap.ever_alloc[i, c] > snap.alloc[i, c]:
                    details.append(f"{n.name} advertises {int(snap.alloc[i, c])} of {int(snap.ever_alloc[i, c])} {r}")
        more = f" (+{len(unhealthy) - 1} more)" if len(unhealthy) > 1 else ""
        findings.append(Finding("UnhealthyDevices", WAITS,
            f"unhealthy devices: {details[0]}{more}; check its device plugin",
            {"nodes": names(unhealthy), "details": details}))
    if not_ready:
        findings.append(Finding("NodesNotReady", WAITS,
            f"{len(not_ready)} NotReady node(s) could host pods once Ready: {', '.join(names(not_ready[:SAMPLES]))}"
            + (" …" if len(not_ready) > SAMPLES else ""),
            {"nodes": names(not_ready)}))
    if cordoned:
        findings.append(Finding("NodesCordoned", WAITS,
            f"{len(cordoned)} cordoned node(s) could host pods once uncordoned: {', '.join(names(cordoned[:SAMPLES]))}"
            + (" …" if len(cordoned) > SAMPLES else ""),
            {"nodes": names(cordoned)}))
    transient = DEFAULT_TRANSIENT | options.transient_taints
    tainted = [i for i in np.flatnonzero(could)
               if any(t.effect in ("NoSchedule", "NoExecute") and t.key not in REPAIRABLE_TAINTS and taint_matches(t.key, transient)
                      for t in snap.nodes[int(i)].taints)]
    if tainted:
        findings.append(Finding("NodesTransientlyTainted", WAITS,
            f"{len(tainted)} node(s) carry a transient taint: {', '.join(names(tainted[:SAMPLES]))}",
            {"nodes": names(tainted)}))


def group_findings(gang: GangRequest, evals: list[PodSetEval], findings: list[Finding]) -> None:
    """A workload of several independent groups (LeaderWorkerSet): how many fit at once."""
    if gang.groups <= 1:
        return
    ever = min((int(ev.k_ever.sum()) // ev.ps.count for ev in evals if ev.ps.count), default=0)
    now = min((int(ev.k_now.sum()) // ev.ps.count for ev in evals if ev.ps.count), default=0)
    if ever < gang.groups:
        findings.append(Finding("GroupsExceedCapacity", WAITS,
            f"only {ever} of {gang.groups} groups of {gang.pods} pods can run at once even on the empty cluster; "
            "the rest will wait", {"groups": gang.groups, "groups_possible": ever, "groups_now": now}))
    elif now < gang.groups:
        findings.append(Finding("GroupsWait", "Info",
            f"{now} of {gang.groups} groups of {gang.pods} pods fit now; the others wait",
            {"groups": gang.groups, "groups_now": now}))


def competition_findings(snap, gang, evals, options, findings) -> None:
    """Pending pods of other gangs asking for the same GPUs (coscheduling Permit / Volcano
    allocate races, cases C15/C16): warn when together they exceed what is free."""
    gpu = next((r for ps in gang.pod_sets for r in ps.requests if options.is_gpu(r) and ps.requests[r]), None)
    if gpu is None or gpu not in snap.col:
        return
    mine = sum(ps.requests.get(gpu, 0) * ps.count for ps in gang.pod_sets)
    others: dict[str, int] = {}
    for p in snap.pending_pods:
        if p.requests.get(gpu, 0) and p.gang != gang.key and not (
                p.namespace == gang.namespace and gang.name and p.gang.endswith(f"/{gang.namespace}/{gang.name}")):
            key = p.gang or f"Pod/{p.namespace}/{p.name}"
            others[key] = others.get(key, 0) + p.requests[gpu]
    if not others:
        return
    union = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union |= ev.now_mask
    free = int(np.maximum(snap.free[union, snap.col[gpu]], 0).sum())
    pending = sum(others.values())
    if mine + pending > free:
        findings.append(Finding("CompetingPendingGangs", "Info",
            f"{len(others)} other pending gang(s) want {pending} {gpu}; with this one {mine + pending} > {free} free: "
            "they will serialize", {"gangs": sorted(others), "pending": pending, "free": free}))


def short_warning(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters with "…" (an admission warning)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decision_message(gang: GangRequest, verdict: str, findings: list[Finding], nodes: dict, frag: dict | None) -> str:
    """The Decision's message: who, then what denies it (with a hint), that it fits now, or the
    first thing it waits for."""
    who = f"{kind_label(gang.kind, gang.api_version)} {gang.namespace}/{gang.name} ({plural(gang.pods, 'pod')})"
    if verdict == NEVER_FITS:
        f = next(f for f in findings if f.severity == NEVER_FITS)
        also = "".join(f" {g.message}." for g in findings if g.code in _EXPLAINS_DENIAL)
        return f"{who} can never start: {f.message}.{_hint(gang, f)}{also}"
    if verdict == FITS:
        return f"{who} fits now: {nodes.get('fit_now', 0)} node(s) can take its main pod shape."
    blocking = [f for f in findings if f.severity == WAITS]
    head = blocking[0].message if blocking else "waits"
    return f"{who} can start, but not now: {head}."


#: Findings that explain a denial, told after it: adapter lints (e.g. a defaulted minAvailable),
#: and why no autoscaler could add a node the gang may use.
_EXPLAINS_DENIAL = ("MinAvailableDefaulted", "MinAvailableBelowTasks", "GangMinimumBelowReplicas", "NoMatchingScaleUp")


def _hint(gang: GangRequest, f: Finding) -> str:
    d = f.data
    if f.code == "ExceedsMaxQuota" and d.get("maximum") is not None:
        r = d["resource"]
        per = max((ps.requests.get(r, 0) for ps in gang.pod_sets), default=0)
        if per:
            fixed = sum(ps.requests.get(r, 0) * ps.count for ps in gang.pod_sets if ps.requests.get(r, 0) != per)
            n = max(0, (int(d["maximum"]) - fixed) // per)
            if n == 0:
                return f" One pod alone asks for more {r} than the queue's maximum: make each pod smaller, or ask for a larger quota."
            return f" Ask for at most {plural(n, 'pod')} of {format_quantity(r, per)} {r}, or for a larger quota."
        return " Ask for a larger quota."
    if f.code == "ExceedsClusterCapacity" and d.get("proof") == "exhaustive-search":
        return " Make the pods smaller so that pods of different sets can share nodes, or ask for fewer pods."
    if f.code == "ExceedsClusterCapacity" and "pods_possible" in d:
        if d["pods_possible"]:
            return f" Ask for at most {plural(d['pods_possible'], 'pod')} in {d['pod_set']}, or widen its node selector/tolerations."
        return " Change its node selector, affinity or tolerations to match existing nodes."
    if f.code == "PodExceedsNodeCapacity":
        return " Make each pod smaller than the largest node, or add larger nodes."
    if f.code == "ResourceNotOffered":
        return " Request a resource the nodes advertise, or check the device plugin on the nodes meant to offer it."
    if f.code == "TopologyPlacementFailed" and d.get("rule") == "exclusive":
        return (f" Ask for at most {d.get('units_possible')} units, or use a level with more domains"
                " (each unit needs a domain of its own).")
    if f.code == "TopologyPlacementFailed":
        return (f" Ask for at most {plural(d.get('best_domain_pods', 0), 'pod')} in one {d.get('level')} domain, or relax the"
                " required topology to preferred (the pods may then spread over domains: cross-domain traffic,"
                " possibly slower collectives).")
    if f.code == "InvalidGang":
        return " Fix the gang's minimum so it does not exceed the pods that will exist."
    return ""


def head_of_line_finding(snap: ClusterSnapshot, quota: QuotaResult | None) -> Finding | None:
    """HeadOfLineBlocking (Info): the gang's Kueue ClusterQueue is StrictFIFO with workloads
    pending ahead, so the head blocks everything behind it."""
    if quota is None or quota.system != "kueue":
        return None
    cq = snap.kueue.cluster_queues.get(quota.report.get("cluster_queue", ""))
    if cq is None or cq.queueing_strategy != "StrictFIFO" or cq.pending_workloads <= 0:
        return None
    return Finding("HeadOfLineBlocking", "Info",
        f"ClusterQueue {cq.name} is StrictFIFO with {cq.pending_workloads} pending workload(s) ahead; "
        "the head blocks everything behind it, whatever flavor it waits for",
        {"cluster_queue": cq.name, "pending_workloads": cq.pending_workloads})


def _rank(f: Finding) -> float:
    """A finding's place in ``ORDER``. NeedsScaleUp leads only when new nodes are *required* (the
    existing nodes can never hold the gang); when they would only let it start sooner, it is
    told after what keeps it off the existing nodes now (Fragmented, …)."""
    if f.code == "NeedsScaleUp" and f.data.get("required") is False:
        return ORDER.index("NodesTransientlyTainted") + 0.5
    return ORDER.index(f.code) if f.code in ORDER else len(ORDER)


def sort_findings(findings: list[Finding]) -> list[str]:
    """Sort ``findings`` in place — proofs first (the reasons of a denial lead with what denies
    it), then by ``ORDER`` — and return the reasons: NeverFits and Waits codes in that order,
    without duplicates."""
    findings.sort(key=lambda f: (f.severity != NEVER_FITS, _rank(f)))
    reasons: list[str] = []
    for f in findings:
        if f.severity in (NEVER_FITS, WAITS) and f.code not in reasons:
            reasons.append(f.code)
    return reasons
