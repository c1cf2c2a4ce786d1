"""evaluate(snapshot, gang) → Decision: quota, then whole-node capacity ever and now.

The verdict contract (DESIGN.md):
  * NeverFits only with a proof: a quota maximum exceeded, or a sound capacity bound on the
    *repaired, empty* cluster (per pod set: Σ over eligible nodes of pods that fit one empty
    node < pods needed; for the gang: Σ requests > Σ capacity of nodes any pod set may use).
  * Fits only with a concrete placement on today's free resources (``fit.place``).
  * Waits otherwise, with the findings that explain why (and PlacementUnproven when neither
    a proof nor a placement was found).

This module is the driver and the placement step; each other step has a module of its own:
``options`` (``EngineOptions``), ``quota_check`` (which queue system, the quota lint),
``podsets`` (each pod set's eligible nodes and pods per node, memoised per shape), ``proofs``
(the capacity bounds that prove NeverFits), ``explain`` (why it waits, the message),
``node_report`` (the node view and fragmentation figures), ``autoscale.review`` (a capacity
NeverFits only with a proof over what node autoscalers could add too). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .autoscale.review import scale_up_review
from .autoscale.sources import effective_sources
from .decision import FITS, NEVER_FITS, WAITS, Decision
from .explain import (competition_findings, decision_message, group_findings, head_of_line_finding, now_findings,
                      short_warning, sort_findings)
from .fit import FOUND, NONE, SEARCH_BUDGET, Demand, place, search
from .model import Finding, GangRequest
from .node_report import fragmentation, node_report
from .options import DEFAULT_GPU_RESOURCES, EngineOptions, all_or_nothing
from .podsets import PodSetEval, constraints_of, evaluate_pod_set, fmt_req, main_gpu, primary_pod_set, same_shape_pods
from .proofs import capacity_proofs, no_packing_finding, topology_proofs, unprovable
from .quota_check import lint_quota, quota_step
from .snapshot import ClusterSnapshot
from .topology import (GangTopology, bounds, construct, decision_topology, exclusive_now, resolve_gang, rule_finding,
                       violations)
from .wait import RuntimeHistory, estimate_wait, gang_priority, gangs_ahead
from .wait.provisioning import scale_up_wait

__all__ = ["EngineOptions", "evaluate", "expected_wait", "DEFAULT_GPU_RESOURCES"]


def evaluate(
    snap: ClusterSnapshot,
    gang: GangRequest,
    options: EngineOptions | None = None,
    *,
    now: float | None = None,
    history: RuntimeHistory | None = None,
) -> Decision:
    """Decide whether ``gang`` can start now, later, or never on ``snap``.

    Args:
        snap: the cluster (``ClusterSnapshot``), never modified.
        gang: the gang (``GangRequest``) as an adapter built it.
        options: policy knobs; defaults match the default policy.
        now: the current time, epoch seconds. When given, a Waits verdict carries an expected
            wait (``wait.estimate_wait``: limit-based earliest start and a p50/p90 band); the
            engine itself has no clock.
        history: what the cluster did lately (``wait.RuntimeHistory``): run times learned per
            (queue, owner kind) and gang arrivals, for the expected wait.

    Returns:
        A ``Decision``. "Doesn't fit" is a Decision, never an exception.
    """
    options = options or EngineOptions()
    findings: list[Finding] = list(gang.findings)
    pod_sets = [ps for ps in gang.pod_sets if ps.count > 0]

    quota = quota_step(snap, gang, options)
    if quota is not None:
        findings.extend(quota.findings)
        lint_quota(snap, quota, options, findings)
    flavors_now = (quota.report.get("flavors") or {}) if quota else {}
    evals = [
        evaluate_pod_set(snap, ps, (quota.candidate_flavors.get(ps.name) if quota else None), flavors_now.get(ps.name), options)
        for ps in pod_sets
    ]
    first_capacity = len(findings)
    topo = resolve_gang(snap, [ev.ps for ev in evals], quota.candidate_flavors if quota else None) if evals else None
    if topo is not None:
        findings.extend(topo.findings)
    if not snap.nodes:
        findings.append(Finding("NoNodes", WAITS, "the cluster data holds no nodes; capacity not checked"))
    elif evals:
        capacity_proofs(snap, gang, evals, options, findings)
        if topo is not None and topo.hard and not any(f.severity == NEVER_FITS for f in findings):
            topology_proofs(snap, gang, evals, topo, options, findings)
    never = any(f.severity == NEVER_FITS for f in findings)
    placed_now, placement = None, {}
    if evals and not never and snap.nodes:
        placed_now, placement, never = _placement_step(snap, gang, evals, options, findings, topo)
    sources = effective_sources(snap, options) if evals else ()
    if sources:
        def cons():
            return [constraints_of(ev.ps, quota.candidate_flavors.get(ev.ps.name) if quota else None, options) for ev in evals]
        never = scale_up_review(snap, gang, evals, sources, cons, options, findings, first_capacity, placed_now is not None)
    if evals and not never:
        group_findings(gang, evals, findings)
        competition_findings(snap, gang, evals, options, findings)
    hol = head_of_line_finding(snap, quota)
    if hol is not None:
        findings.append(hol)
    verdict = _verdict(never, findings, bool(evals) and placed_now is None)
    reasons = sort_findings(findings)

    main = primary_pod_set(pod_sets, options) if pod_sets else None
    main_ev = next((e for e in evals if e.ps is main), None)
    nodes = node_report(snap, main_ev) if main_ev else {"total": len(snap.nodes), "eligible": 0, "fit_now": 0, "fit_ever": 0, "reasons": {}, "summary": ""}
    frag = fragmentation(snap, main_ev, options, same_shape_pods(pod_sets, main)) if main_ev else None
    topology = decision_topology(evals, topo) if topo is not None and snap.nodes else None
    if frag is not None and topology and main is not None and topo.hard:
        # Under a required topology the main pod set's deficit is its best domain's, not the
        # cluster's: "deficit 0" while no domain can hold the pods would hide the cause.
        row = topology.get(main.name) or {}
        if isinstance(row.get("deficit_pods"), int) and row["deficit_pods"] > frag["deficit"]:
            frag = dict(frag, deficit=row["deficit_pods"], deficit_level=row.get("level"))
    message = decision_message(gang, verdict, findings, nodes, frag)
    warnings = [short_warning(f.message) for f in findings if f.severity in (WAITS, "Info")]
    expected = None
    if now is not None and verdict == WAITS and main_ev is not None and placed_now is None:
        if snap.nodes:
            expected = _expected_wait(snap, gang, now, main_ev.now_mask, history, main_ev.ever_mask)
        scale = next((f for f in findings if f.code == "NeedsScaleUp"), None)
        if scale is not None:  # new nodes: the wait is their provisioning time, unless running work ends sooner
            expected = scale_up_wait(snap, options, expected, scale.data)
    return Decision(verdict, reasons, message, warnings, findings, _gang_info(gang, options), nodes,
                    quota.report if quota else None, frag, placement, expected, topology)


def _verdict(never: bool, findings: list[Finding], unplaced: bool) -> str:
    """NeverFits with a proof; Waits when a finding waits or no placement now was found; else Fits."""
    if never:
        return NEVER_FITS
    if any(f.severity == WAITS for f in findings) or unplaced:
        return WAITS
    return FITS


def _gang_info(gang: GangRequest, options: EngineOptions) -> dict[str, Any]:
    """The Decision's ``gang``: kind, name, namespace, pods, queue, per-pod requests of each pod set."""
    return {
        "kind": gang.kind,
        "api_version": gang.api_version,
        "name": gang.name,
        "namespace": gang.namespace,
        "pods": gang.pods,
        "queue": gang.queue_name or gang.volcano_queue,
        "pod_sets": [
            {"name": ps.name, "count": ps.count, "replicas": ps.total_replicas(), "requests": dict(ps.requests),
             "requests_text": fmt_req(ps.requests, options)}
            for ps in gang.pod_sets
        ],
        "total_requests": gang.total_requests(),
    }


def _demands(evals: list[PodSetEval], options: EngineOptions, key: str) -> list[Demand]:
    """The pod sets as ``fit`` demands (named by index) on the "ever" or the "now" view; the
    weight orders the greedy pass: GPUs, then cpu, then memory per pod, earlier sets first."""
    out = []
    for i, ev in enumerate(evals):
        g = main_gpu(ev.ps, options)
        weight = (ev.ps.requests.get(g, 0) if g else 0, ev.ps.requests.get("cpu", 0), ev.ps.requests.get("memory", 0), -i)
        mask, k = (ev.ever_mask, ev.k_ever) if key == "ever" else (ev.now_mask, ev.k_now)
        out.append(Demand(str(i), ev.shape, ev.ps.count, mask, ev.ps.max_per_node, weight, k))
    return out


def _placement_step(snap: ClusterSnapshot, gang: GangRequest, evals: list[PodSetEval], options: EngineOptions,
                    findings: list[Finding], topo: GangTopology | None = None) -> tuple[dict | None, dict[str, Any], bool]:
    """Look for a placement now and on the repaired empty cluster: greedy first, then the
    exhaustive search. Adds ExceedsClusterCapacity (a failed exhaustive search that proves it),
    PlacementUnproven, the topology finding now (TopologyPlacementFailed, Waits) and the now
    findings when nothing fits now. Under topology rules (``topo`` with a hard rule) every
    placement is built domain by domain (``topology.construct``) or checked
    (``topology.violations``); the exhaustive search keeps only the "all pods in one domain"
    part of the rules (a relaxation: its "none" stays a proof).

    Returns (placement now by demand index or None, the Decision's ``placement``, NeverFits proved).
    """
    never = False
    placement: dict[str, Any] = {}
    hard = topo is not None and topo.hard
    now_demands = _demands(evals, options, "now")
    counts = [ev.ps.count for ev in evals]
    now_checks = None
    if hard:
        now_ks = exclusive_now(snap, topo, gang.key, [ev.k_now for ev in evals])
        now_demands = [d if k is d.k else Demand(d.name, d.shape, d.count, d.mask & (k > 0), d.max_per_node, d.weight, k)
                       for d, k in zip(now_demands, now_ks)]
        now_checks = bounds(topo, now_ks, counts, snap.free, [ev.shape for ev in evals])
        placed_now = construct(snap.free, now_demands, topo, now_checks)
    else:
        placed_now = place(snap.free, now_demands)
    # A placement now is one on the repaired empty cluster too (free ≤ ever_alloc and the
    # now filters are stricter), so the second search runs only when the first fails.
    if placed_now is not None:
        ever_place = placed_now
    elif hard:
        ever_place = construct(snap.ever_alloc, _demands(evals, options, "ever"), topo)
    else:
        ever_place = place(snap.ever_alloc, _demands(evals, options, "ever"))
    domains, groups = _search_topology(topo) if hard else (None, None)

    def valid(found):
        return found if found is None or not hard or not violations(found, topo, counts) else None

    # The greedy passes prove nothing when they fail: an exhaustive search, bounded by
    # SEARCH_BUDGET steps shared by its "ever" and "now" runs, settles small instances
    # (fit.search: at most SEARCH_MAX_PODS pods over SEARCH_MAX_CLASSES node classes).
    # Only an all-or-nothing gang is proved NeverFits by a failed search (pods scheduled one by
    # one start as they fit: ParallelismExceedsCapacity covers them).
    gang_whole = all_or_nothing(gang, options)
    why, budget = None, SEARCH_BUDGET
    if ever_place is None and gang_whole:
        found = search(snap.ever_alloc, _demands(evals, options, "ever"), topology=domains, groups=groups, budget=budget)
        budget -= found.steps
        if found.status == FOUND:
            ever_place = valid(found.placement)
            if ever_place is None:
                why = "the placements found break a slice or exclusive-topology rule"
        elif found.status == NONE:
            why = unprovable(snap, gang, evals)
            if why is None:
                findings.append(no_packing_finding(snap, gang, evals, options, found.steps))
                never = True
        else:
            why = f"too large for the exhaustive search ({SEARCH_BUDGET} steps)"
    if not never and placed_now is None and budget > 0:
        found_now = search(snap.free, now_demands, topology=domains, groups=groups, budget=budget)
        if found_now.status == FOUND and valid(found_now.placement) is not None:
            placed_now = found_now.placement
            ever_place = ever_place or placed_now
    if not never and ever_place is None and placed_now is None and gang_whole:
        findings.append(Finding("PlacementUnproven", WAITS,
            f"no proof that the gang can never fit, and no placement found on the empty cluster ({why or 'no placement found'}); "
            "admitted, placement unproven", {"why": why or ""}))
    chosen = placed_now if placed_now is not None else ever_place
    if chosen is not None and not never:
        placement = {
            "when": "now" if placed_now is not None else "ever",
            "pod_sets": {evals[int(k)].ps.name: [[snap.nodes[n].name, c] for n, c in v] for k, v in chosen.items()},
        }
    if placed_now is None and not never:
        if now_checks is not None:
            failed = next((c for c in now_checks if not c.ok), None)
            if failed is not None:
                findings.append(rule_finding(snap, evals, failed, "now", WAITS, options))
        now_findings(snap, gang, evals, options, findings)
    return placed_now, placement, never


def _search_topology(topo: GangTopology) -> tuple[dict[str, np.ndarray], dict[str, object]]:
    """``fit.search``'s ``topology`` and ``groups`` from the hard Whole rules: each member's pods
    in one domain, a rule's members in the same one (slices and exclusivity left out: the
    search is then more permissive, and a "none" is still a proof)."""
    domains: dict[str, np.ndarray] = {}
    groups: dict[str, object] = {}
    for i, w in enumerate(topo.whole):
        if not w.hard:
            continue
        for m in w.members:
            if str(m) in domains:
                continue
            domains[str(m)] = w.domains.ids
            if len(w.members) > 1:
                groups[str(m)] = i
    return domains, groups


def _expected_wait(snap, gang, now, eligible, history, ever=None) -> dict[str, Any]:
    """``estimate_wait`` for the gang on the ``eligible`` nodes, with the gangs ahead of it."""
    prio = gang_priority(snap, gang)
    est = estimate_wait(snap, gang, now, history=history, ahead=gangs_ahead(snap, gang, prio, eligible=eligible),
                        eligible=eligible, priority=prio, ever=ever)
    return est.as_dict()


def expected_wait(
    snap: ClusterSnapshot,
    gang: GangRequest,
    now: float,
    options: EngineOptions | None = None,
    flavors: Mapping[str, str] | None = None,
    *,
    history: RuntimeHistory | None = None,
    scale_up: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The expected wait of ``gang`` (``WaitEstimate.as_dict()``, seconds) on its main pod set's
    eligible nodes now, or None when the gang has no pods. For callers that decided first and
    estimate later (the webhook computes it off the request's critical path). ``flavors`` is
    the Decision's ``quota["flavors"]`` (pod set → Kueue flavor assigned now); ``history`` as
    for ``evaluate``; ``scale_up``: the Decision's NeedsScaleUp finding data, when it has one
    (the wait then includes node provisioning, ``wait.scale_up_wait``). Gangs ahead and this
    gang's priority come from ``snap``.
    """
    options = options or EngineOptions()
    pod_sets = [ps for ps in gang.pod_sets if ps.count > 0]
    if not pod_sets:
        return None
    main = primary_pod_set(pod_sets, options)
    name = (flavors or {}).get(main.name)
    flavor = snap.kueue.flavors.get(name) if name else None
    ev = evaluate_pod_set(snap, main, [flavor] if flavor else None, name, options)
    expected = _expected_wait(snap, gang, now, ev.now_mask, history, ev.ever_mask) if snap.nodes else None
    return scale_up_wait(snap, options, expected, scale_up) if scale_up is not None else expected
