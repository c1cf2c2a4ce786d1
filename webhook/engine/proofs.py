"""NeverFits proofs from capacity bounds, and when a failed search is no proof.

Owns the sound bounds on the *repaired, empty* cluster (DESIGN.md's verdict contract):

* per pod set (``capacity_proofs``): no eligible node (UntoleratedTaint when only taints keep
  it off, else ExceedsClusterCapacity), a resource no eligible node advertises
  (ResourceNotOffered), a pod larger than any eligible node (PodExceedsNodeCapacity), more pods
  than the eligible nodes hold (ExceedsClusterCapacity);
* per topology rule (``topology_proofs``): no domain of the level could hold the pods, fewer
  domains than exclusive units (TopologyPlacementFailed; the rules: ``topology.feasible``);
* per gang: Σ requests above Σ capacity of the nodes any pod set may use (ExceedsClusterCapacity);
* after an exhaustive search found no placement (``fit.search``): ``unprovable`` says why that
  is no proof (assumed shapes, nodes of unknown capacity, MIG in flux), else
  ``no_packing_finding`` is the proof.

Count bounds prove NeverFits only for an all-or-nothing gang (``options.all_or_nothing``);
pods scheduled one by one get ParallelismExceedsCapacity (Waits). A bound is NeverFits only on
exact shapes and nodes whose capacity is known; else the same finding is a Waits. Per-node
reasons use kube-scheduler's wording (TaintToleration, NodeResourcesFit). Not the placement
(``fit``), nor why a feasible gang waits now (``explain``).

Units: scheduler units (millicores, bytes, GPUs as counts). Pure: no I/O, no clock.
"""

from __future__ import annotations

import numpy as np

from .decision import NEVER_FITS, WAITS
from .filters import DEFAULT_TRANSIENT, R_TAINT, FilterResult, filter_nodes, taint_matches
from .model import REPAIRABLE_TAINTS, Finding, GangRequest, PodSet
from .options import EngineOptions, all_or_nothing
from .podsets import PodSetEval, constraints_of, fmt_req, main_gpu, sample_names, stat_of
from .quantity import format_quantity
from .snapshot import ClusterSnapshot
from .topology import GangTopology, bounds, rule_finding

__all__ = ["capacity_proofs", "topology_proofs", "unprovable", "no_packing_finding", "untolerated_taints", "taints_text"]


def capacity_proofs(snap: ClusterSnapshot, gang: GangRequest, evals: list[PodSetEval], options: EngineOptions,
                    findings: list[Finding]) -> None:
    """Add NeverFits findings that capacity bounds prove (per pod set, then gang totals).

    Count bounds (more pods than the eligible nodes hold, one topology domain, the gang's
    totals) prove NeverFits only for an all-or-nothing gang (:func:`all_or_nothing`); for pods
    scheduled one by one they are a ParallelismExceedsCapacity warning, and only what no single
    pod can ever do (no eligible node, a resource no node offers, a pod larger than any node)
    is a NeverFits."""
    gang_whole = all_or_nothing(gang, options)
    for ev in evals:
        if ev.ps.count > 0:
            _pod_set_bounds(snap, ev, gang_whole, options, findings)
    if any(f.severity == NEVER_FITS for f in findings):
        return
    # Gang totals over the union of nodes any pod set may use (a gang's only: pods scheduled one
    # by one need no such total).
    if not gang.exact_total or not gang_whole:
        return
    _gang_total_bound(snap, gang, evals, options, findings)


def _pod_set_bounds(snap: ClusterSnapshot, ev: PodSetEval, gang_whole: bool, options: EngineOptions,
                    findings: list[Finding]) -> None:
    """The bounds of one pod set, the first that fires (NodeCapacityUnknown / MigReconfiguring
    first when they make its bounds Waits instead of NeverFits)."""
    ps = ev.ps
    unknown = snap.unknown_capacity
    # A bound proves NeverFits only on exact shapes and nodes whose capacity is known.
    n_unknown = stat_of(ev, "unknown", lambda: int(np.count_nonzero(unknown & ev.ever_mask)))
    sev = NEVER_FITS if ps.exact_shape and not n_unknown else WAITS
    if sev == WAITS and n_unknown:
        findings.append(Finding("NodeCapacityUnknown", WAITS,
            f"{n_unknown} eligible node(s) report no capacity yet; placement unproven",
            {"nodes": sample_names(snap, np.flatnonzero(unknown & ev.ever_mask))}))
    if snap.mig_reconfiguring and any(r.startswith("nvidia.com/mig-") for r in ps.requests):
        findings.append(Finding("MigReconfiguring", WAITS,
            "a node's MIG layout is being reconfigured (nvidia.com/mig.config.state pending); MIG capacity may change"))
        sev = WAITS
    n_elig = stat_of(ev, "n_elig", lambda: int(np.count_nonzero(ev.ever_mask)))
    cap_ever = stat_of(ev, "cap_ever", lambda: int(ev.k_ever.sum()))
    if n_elig and cap_ever >= ps.count and not ev.shape.missing:
        return  # no per-pod-set bound can fire (the common case): skip the message text
    label = f"pod set {ps.name} ({ps.count} × {fmt_req(ps.requests, options)}{'' if ps.exact_shape else ', an assumed shape'})"
    if n_elig == 0:
        findings.append(_no_eligible_node(snap, ps, label, sev, options))
    elif ev.shape.missing or cap_ever == 0:
        findings.append(_pod_too_large(snap, ev, label, sev))
    elif cap_ever < ps.count and not gang_whole:
        findings.append(Finding("ParallelismExceedsCapacity", WAITS,
            f"{label}: at most {cap_ever} of its {ps.count} pods can run at once, even on the {n_elig} eligible nodes "
            "when empty; its pods are scheduled one by one, so the rest wait for running ones to finish",
            {"pod_set": ps.name, "eligible_nodes": n_elig, "pods_needed": ps.count, "pods_possible": cap_ever}))
    elif cap_ever < ps.count:
        taints = untolerated_taints(snap, [ps], ev.ever_mask, options, resource=main_gpu(ps, options)) if ps.exact_shape else []
        findings.append(Finding("ExceedsClusterCapacity", sev,
            f"{label}: at most {cap_ever} such pods fit on the {n_elig} eligible nodes even when empty; need {ps.count}"
            + (f"; {taints_text(taints, options)}" if taints else ""),
            {"pod_set": ps.name, "eligible_nodes": n_elig, "pods_needed": ps.count, "pods_possible": cap_ever,
             "taints": [{"taint": t, "nodes": n} for t, n in taints]}))


def _no_eligible_node(snap: ClusterSnapshot, ps: PodSet, label: str, sev: str, options: EngineOptions) -> Finding:
    """No node could ever host the pod set: UntoleratedTaint when taints alone keep it off every
    node (the fix is a toleration, not a smaller gang; kube-scheduler's TaintToleration
    wording), else ExceedsClusterCapacity with the "ever" reasons."""
    ever_filter = filter_nodes(snap, constraints_of(ps, None, options)[0], ever=True, transient=options.transient_taints)
    hist = ever_filter.histogram(snap)
    why = _ever_reasons_text(snap, ever_filter, hist) or "no nodes"
    taints = untolerated_taints(snap, [ps], np.zeros(len(snap.nodes), dtype=bool), options)
    only_taints = bool(hist) and set(hist) == {R_TAINT}
    return Finding("UntoleratedTaint" if only_taints else "ExceedsClusterCapacity", sev,
        f"{label}: no node could ever host it ({why})" + (f"; {taints_text(taints, options)}" if taints else ""),
        {"pod_set": ps.name, "eligible_nodes": 0, "pods_needed": ps.count, "pods_possible": 0,
         "taints": [{"taint": t, "nodes": n} for t, n in taints]})


def _pod_too_large(snap: ClusterSnapshot, ev: PodSetEval, label: str, sev: str) -> Finding:
    """No eligible node takes even one pod: ResourceNotOffered when a requested resource is on
    none of them, else PodExceedsNodeCapacity naming each resource short of the request (or the
    combination no single node offers)."""
    ps = ev.ps
    missing = list(ev.shape.missing)
    sub = snap.ever_alloc[ev.ever_mask]
    for c, v, name in zip(ev.shape.cols, ev.shape.vals, ev.shape.names):
        if name != "pods" and not (sub[:, c] > 0).any():
            missing.append(name)
    if missing:
        return Finding("ResourceNotOffered", sev,
            f"{label}: no eligible node advertises {' or '.join(missing)}",
            {"pod_set": ps.name, "resources": missing})
    short = []
    for c, v, name in zip(ev.shape.cols, ev.shape.vals, ev.shape.names):
        largest = int(sub[:, c].max())
        if largest < v:
            short.append((name, int(v), largest))
    if short:
        text = "; ".join(f"no eligible node has ≥{format_quantity(r, v)} {r} (the largest eligible node has {format_quantity(r, m)})"
                         for r, v, m in short)
    else:
        text = "no single node offers " + " and ".join(f"{format_quantity(r, int(v))} {r}" for _, v, r in zip(ev.shape.cols, ev.shape.vals, ev.shape.names) if r != "pods") + " together"
    return Finding("PodExceedsNodeCapacity", sev, f"{label}: {text}",
        {"pod_set": ps.name, "short": [{"resource": r, "request": v, "largest": m} for r, v, m in short]})


def topology_proofs(snap: ClusterSnapshot, gang: GangRequest, evals: list[PodSetEval], topo: GangTopology,
                    options: EngineOptions, findings: list[Finding]) -> None:
    """TopologyPlacementFailed for the first hard topology rule no domain of the repaired empty
    cluster satisfies (``topology.bounds`` on ``k_ever``): NeverFits for an all-or-nothing gang
    of stated shapes on nodes of known capacity (``unprovable`` is None), else Waits. Its data
    keys: ``topology.report``'s docstring."""
    checks = bounds(topo, [ev.k_ever for ev in evals], [ev.ps.count for ev in evals], snap.ever_alloc,
                    [ev.shape for ev in evals])
    failed = next((c for c in checks if not c.ok), None)
    if failed is None:
        return
    sev = NEVER_FITS if all_or_nothing(gang, options) and unprovable(snap, gang, evals) is None else WAITS
    findings.append(rule_finding(snap, evals, failed, "ever", sev, options))


def _gang_total_bound(snap: ClusterSnapshot, gang: GangRequest, evals: list[PodSetEval], options: EngineOptions,
                      findings: list[Finding]) -> None:
    """ExceedsClusterCapacity (NeverFits) when the gang's total of a resource exceeds what the
    nodes any pod set may use hold when empty (nothing when one of them reports no capacity)."""
    union = _gang_nodes(snap, evals)
    if union is None:
        return
    union_mask, sums = union
    for r, v in gang.total_requests().items():
        c = snap.col.get(r)
        if c is None or v <= 0:
            continue
        have = sums[c]
        if v > have:
            outside = ~union_mask
            taints = untolerated_taints(snap, [ev.ps for ev in evals if ev.ps.exact_shape], union_mask, options, resource=r) \
                if outside.any() and all(ev.ps.exact_shape for ev in evals) else []
            findings.append(Finding("ExceedsClusterCapacity", NEVER_FITS,
                f"the gang needs {format_quantity(r, v)} {r} in all; the {int(np.count_nonzero(union_mask))} node(s) it may use "
                f"have {format_quantity(r, have)} even when empty" + (f"; {taints_text(taints, options)}" if taints else ""),
                {"resource": r, "request": v, "capacity": have, "taints": [{"taint": t, "nodes": n} for t, n in taints]}))
            return


def _gang_nodes(snap: ClusterSnapshot, evals: list[PodSetEval]) -> tuple[np.ndarray, list[int | float]] | None:
    """(the nodes any pod set may use, Σ ``ever_alloc`` over them per column), or None when one of
    them reports no capacity. A pod set whose shape is an estimate (a PodGroup: no template, so
    neither selectors nor tolerations are known) may use any node: then every node counts.
    Memoised per shape where one shape decides it."""
    unknown = snap.unknown_capacity
    if any(not ev.ps.exact_shape for ev in evals):
        if unknown.any():
            return None
        union_mask = np.ones(len(snap.nodes), dtype=bool)
        return union_mask, stat_of(evals[0], "all_sums", lambda: _column_sums(snap, union_mask))
    if len(evals) == 1:
        ev = evals[0]
        if stat_of(ev, "unknown", lambda: int(np.count_nonzero(unknown & ev.ever_mask))):
            return None
        return ev.ever_mask, stat_of(ev, "ever_sums", lambda: _column_sums(snap, ev.ever_mask))
    union_mask = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union_mask |= ev.ever_mask
    if (unknown & union_mask).any():
        return None
    return union_mask, _column_sums(snap, union_mask)


def _column_sums(snap: ClusterSnapshot, mask: np.ndarray) -> list[int | float]:
    """Σ ``ever_alloc`` over the nodes in ``mask``, per resource column (inf past 2⁶²: the
    float64 sum is checked first, since an int64 sum of absurd quantities could wrap around)."""
    alloc = snap.ever_alloc
    # Fast path: when no column can reach 2⁶² even over every node (the column maxima are a
    # structure of the snapshot), one integer mat-vec product is exact.
    top = snap.structure(("proofs.ever_alloc_max",), lambda: np.abs(alloc).max(axis=0) if len(alloc) else np.zeros(alloc.shape[1], dtype=np.int64))
    if len(alloc) and float(np.max(top, initial=0)) * len(alloc) < 2.0**62:
        return [int(e) for e in mask.astype(np.int64) @ alloc]
    sub = alloc[mask]
    exact = sub.sum(axis=0)
    approx = sub.sum(axis=0, dtype=np.float64)
    return [int(e) if float(a) < 2.0**62 else float("inf") for e, a in zip(exact, approx)]


#: Taint keys that look like something a component sets and clears by itself (node
#: conditions, cloud providers, autoscalers, GPU health/upgrade): told with a pointer to the
#: policy's ``transientTaints``. A hint for the message only; it never changes a verdict.
_HEALTH_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "karpenter.sh/",
                          "cluster-autoscaler.kubernetes.io/", "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler")


_HEALTH_TAINT_WORDS = ("health", "unhealthy", "pressure", "not-ready", "notready", "unreachable", "maintenance", "drain",
                       "disrupt", "upgrade", "uninitialized", "xid", "degraded")


def _looks_transient(key: str) -> bool:
    low = key.lower()
    return key.startswith(_HEALTH_TAINT_PREFIXES) or any(w in low for w in _HEALTH_TAINT_WORDS)


def untolerated_taints(snap: ClusterSnapshot, pod_sets: list[PodSet], inside: np.ndarray, options: EngineOptions,
                        resource: str | None = None) -> list[tuple[str, int]]:
    """Taints (``key=value:effect``) that keep the pod sets off nodes outside ``inside``, with the
    number of such nodes carrying each, most nodes first; with ``resource``, only nodes that
    offer it. Repairable and transient taints are left out (they never rule a node out ever)."""
    skip = REPAIRABLE_TAINTS | DEFAULT_TRANSIENT | options.transient_taints
    # The tolerations the pod will have: the template's plus what admission adds
    # (ExtendedResourceToleration, when the policy says the API server runs it).
    tolerations = [constraints_of(ps, None, options)[0].tolerations for ps in pod_sets]
    c = snap.col.get(resource) if resource else None
    mask = ~inside
    if c is not None:
        mask &= snap.ever_alloc[:, c] > 0
    # Taints are the same on every node of a class: test each class once, count its nodes.
    per_class = np.bincount(snap.node_class[mask], minlength=len(snap.classes))
    counts: dict[str, int] = {}
    for k in np.flatnonzero(per_class):
        for t in snap.classes[int(k)].taints:
            if t.effect not in ("NoSchedule", "NoExecute") or taint_matches(t.key, skip):
                continue
            if any(not any(tol.tolerates(t) for tol in tols) for tols in tolerations):
                counts[str(t)] = counts.get(str(t), 0) + int(per_class[k])
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def taints_text(taints: list[tuple[str, int]], options: EngineOptions) -> str:
    """"4 node(s) carry the untolerated taint k=v:NoSchedule (…)" for the top taints."""
    parts = [f"{n} node(s) carry the untolerated taint {t}" for t, n in taints[:2]]
    more = f" (+{len(taints) - 2} more taints)" if len(taints) > 2 else ""
    text = "; ".join(parts) + more + ": add a toleration for it to the pod template"
    transient = [t for t, _ in taints[:2] if _looks_transient(t.split("=", 1)[0].split(":", 1)[0])]
    if transient:
        text += (f"; {transient[0]} looks like a taint the system sets and removes by itself: if so, list its key in the "
                 "policy's transientTaints")
    return text


def _ever_reasons_text(snap: ClusterSnapshot, ever_filter: FilterResult, hist: dict[str, int]) -> str:
    """The "ever" reason histogram, saying how many of each reason's nodes are also cordoned or
    NotReady: the node summary (the scheduler's view now, first failing filter) counts those as
    unschedulable / tainted instead, so both add up the same nodes."""
    cordoned: dict[str, int] = {}
    not_ready: dict[str, int] = {}
    for i, n in enumerate(snap.nodes):
        if not (n.unschedulable or n.ready is False):
            continue
        r = ever_filter.node_reason(snap, i)
        if r is None:
            continue
        if n.unschedulable:
            cordoned[r] = cordoned.get(r, 0) + 1
        elif n.ready is False:
            not_ready[r] = not_ready.get(r, 0) + 1
    parts = []
    for r, k in sorted(hist.items(), key=lambda kv: f"{kv[1]} {kv[0]}"):
        extra = [f"{cordoned[r]} of them cordoned"] if r in cordoned else []
        extra += [f"{not_ready[r]} of them NotReady"] if r in not_ready else []
        parts.append(f"{k} {r}" + (f" ({', '.join(extra)})" if extra else ""))
    return ", ".join(parts)


def unprovable(snap: ClusterSnapshot, gang: GangRequest, evals) -> str | None:
    """Why an exhaustive search without a placement on the repaired empty cluster is *no*
    proof, None when it is one: every pod set's shape and the gang's total must be stated by
    the object, every node any pod set may use must report its capacity, and no MIG layout
    may be in flux for MIG requests."""
    if not gang.exact_total or any(not ev.ps.exact_shape for ev in evals):
        return "the gang's pod shapes are assumed, not stated"
    union = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union |= ev.ever_mask
    if (snap.unknown_capacity & union).any():
        return "some eligible nodes report no capacity yet"
    if snap.mig_reconfiguring and any(r.startswith("nvidia.com/mig-") for ev in evals for r in ev.ps.requests):
        return "a MIG layout is being reconfigured"
    return None


def no_packing_finding(snap, gang, evals, options, steps: int) -> Finding:
    """ExceedsClusterCapacity (NeverFits) when no placement of all pod sets together exists."""
    union = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union |= ev.ever_mask
    n = int(np.count_nonzero(union))
    sets = " + ".join(f"{ev.ps.count} × {fmt_req(ev.ps.requests, options)}" for ev in evals)
    topo = any(ev.ps.required_topology for ev in evals)
    return Finding("ExceedsClusterCapacity", NEVER_FITS,
        f"no placement of all {gang.pods} pods ({sets}) exists on the {n} eligible node(s) even when empty"
        + (" within their required topology domains" if topo else "")
        + f" (exhaustive search, {steps} steps): each pod set fits alone, not together",
        {"eligible_nodes": n, "pods_needed": gang.pods, "proof": "exhaustive-search", "search_steps": steps})
