"""What topology rules say to users: TopologyPlacementFailed findings and the Decision's ``topology``.

Numbers first ("1,296 nvidia.com/gpu free and 12 whole nodes free, but no rack has more than 5
of the 8 nodes pod set worker needs"), naming the level; Kueue's reason code
TopologyPlacementFailed (pkg/scheduler/flavorassigner/tas_flavorassigner.go reports a TAS
placement failure under that name).

Finding data (TopologyPlacementFailed; read by ``diagnose``):
    pod_set: the pod set told about (the first member of a group);
    pod_sets: every pod set of the rule (a Kueue group, a Volcano gang, an exclusive pool);
    source: "kueue" | "jobset" | "lws" | "volcano" | "kai";
    mode: "required" (or "preferred" for Volcano soft — never a finding);
    rule: "whole" (all pods in one domain) | "slices" | "exclusive";
    level: the level's label key ("HyperNode tier ≤ 2" for Volcano);
    level_keys: the label keys identifying a domain, top → the level (a Kueue domain ID);
    when: "ever" (the repaired empty cluster: a proof when NeverFits) | "now";
    domains: domains of the level (nodes without its labels are in none);
    domains_fitting: domains that could hold the rule's pods (a unit, for exclusivity);
    needed_pods / needed_nodes: pods the rule needs in one domain (all units, exclusive) and the
        whole nodes that is at the most pods per node one empty eligible node takes;
    best_domain / best_domain_pods / best_domain_nodes_free: the domain holding most of them
        (its name, pods of the rule's shapes it takes, nodes in it that take at least one);
    deficit_pods / deficit_nodes: what the best domain lacks;
    units_needed / units_possible / unit_pods (exclusive): units, the most that distinct domains
        can take (Hall's condition), pods per unit; together: True for LeaderWorkerSet groups
        (a unit is a leader and its workers, over two pod sets);
    slice_size / slice_level (slices);
    gpus_free / whole_nodes_free (when "now"; the main accelerator resource, eligible nodes).

The Decision's ``topology`` (``decision_topology``): pod set name → {source, mode, level,
domains, needed_pods, best_domain, best_domain_pods, best_domain_nodes_free, deficit_pods,
deficit_nodes} on today's free resources, for every pod set with a topology request (a preferred
or unconstrained one too: told, never a denial).
Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..model import TOPOLOGY_UNCONSTRAINED, Finding
from ..podsets import PodSetEval, fmt_req, main_gpu
from ..snapshot import ClusterSnapshot
from .feasible import RuleCheck, domain_sums
from .resolve import Exclusive, GangTopology, Slices

__all__ = ["rule_finding", "decision_topology"]


def _per_node(evals: list[PodSetEval], m: int, when: str) -> int:
    """Most pods of pod set ``m`` one eligible node takes when empty (≥ 1)."""
    return max(1, int(evals[m].k_ever.max()) if len(evals[m].k_ever) else 1)


def _nodes_free(dom, d: int, evals, members, when: str) -> int:
    if d < 0:
        return 0
    inside = dom.ids == d
    any_k = np.zeros(len(dom.ids), dtype=bool)
    for m in members:
        any_k |= (evals[m].k_now if when == "now" else evals[m].k_ever) > 0
    return int(np.count_nonzero(inside & any_k))


def _gpu_figures(snap: ClusterSnapshot, evals, members, options) -> tuple[str | None, int, int]:
    """(the main GPU resource, GPUs free on the members' eligible nodes now, whole nodes free)."""
    gpu = next((main_gpu(evals[m].ps, options) for m in members if main_gpu(evals[m].ps, options)), None)
    if gpu is None or gpu not in snap.col:
        return None, 0, 0
    c = snap.col[gpu]
    mask = np.zeros(len(snap.nodes), dtype=bool)
    for m in members:
        mask |= evals[m].now_mask
    free = snap.free[mask, c]
    alloc = snap.alloc[mask, c]
    return gpu, int(np.maximum(free, 0).sum()), int(np.count_nonzero((alloc > 0) & (free >= alloc)))


def _best(check: RuleCheck) -> tuple[int, int]:
    """(best domain, pods of the rule it takes) — the most pods up to what each member needs."""
    if check.caps.shape[1] == 0:
        return -1, 0
    need = np.array(check.needed, dtype=np.int64)[:, None] if check.kind != "exclusive" else None
    got = np.minimum(check.caps, need).sum(axis=0) if need is not None else check.caps.max(axis=0)
    d = int(np.argmax(got))
    return d, int(got[d])


def rule_finding(snap: ClusterSnapshot, evals: list[PodSetEval], check: RuleCheck, when: str, severity: str,
                 options) -> Finding:
    """The TopologyPlacementFailed finding of a failed bound (``when``: "ever" or "now")."""
    rule = check.rule
    members = _members(rule)
    ps0 = evals[members[0]].ps
    label = f"pod set {ps0.name} ({ps0.count} × {fmt_req(ps0.requests, options)})" if len(members) == 1 else \
        "pod sets " + ", ".join(evals[m].ps.name for m in members)
    dom = rule.domains
    data: dict[str, Any] = {"pod_set": ps0.name, "pod_sets": [evals[m].ps.name for m in members],
                            "source": getattr(rule, "source", None) or (ps0.topology.source if ps0.topology else ""),
                            "mode": "required", "rule": check.kind, "level": rule.level, "level_keys": list(dom.keys),
                            "when": when,
                            "domains": dom.count, "domains_fitting": int(np.count_nonzero(check.fits))}
    even = " even when empty" if when == "ever" else " now"
    prefix = ""
    if when == "now":
        gpu, free, whole = _gpu_figures(snap, evals, members, options)
        if gpu is not None:
            data.update(gpus_free=free, whole_nodes_free=whole)
            prefix = f"{free:,} {gpu} free and {whole:,} whole node(s) free, but "
    if isinstance(rule, Exclusive):
        per = sum(rule.unit) if rule.together else rule.unit[0]
        data.update(units_needed=check.units_needed, units_possible=check.units_possible, unit_pods=per,
                    needed_pods=sum(check.needed), needed_nodes=sum(math.ceil(u * p / _per_node(evals, m, when))
                                                                    for m, u, p in zip(rule.members, rule.units, rule.unit)),
                    together=rule.together)
        d, pods = _best(check)
        data.update(best_domain=dom.names[d] if d >= 0 else None, best_domain_pods=pods,
                    best_domain_nodes_free=_nodes_free(dom, d, evals, members, when),
                    deficit_pods=(check.units_needed - check.units_possible) * per,
                    deficit_nodes=math.ceil((check.units_needed - check.units_possible) * per / _per_node(evals, members[0], when)))
        text = (f"{prefix}{label} needs {check.units_needed} {rule.level} domains of its own, one per unit of {per} pods "
                f"({rule.source} exclusive topology); only {check.units_possible} distinct domains can take one{even} "
                f"(of {dom.count})")
        return Finding("TopologyPlacementFailed", severity, text, data)
    if isinstance(rule, Slices):
        need = ps0.count
        slots = int(((check.caps[0] // rule.size) * rule.size).sum())
        data.update(slice_size=rule.size, slice_level=rule.level, needed_pods=need, best_domain_pods=slots,
                    needed_nodes=math.ceil(need / _per_node(evals, members[0], when)),
                    deficit_pods=max(0, need - slots), best_domain=None, best_domain_nodes_free=0)
        data["deficit_nodes"] = math.ceil(data["deficit_pods"] / _per_node(evals, members[0], when))
        text = (f"{prefix}{label} needs {need // rule.size} slices of {rule.size} pods, each in one {rule.level} domain; "
                f"only {slots // rule.size} whole slices fit{even} (of {dom.count} domains)")
        return Finding("TopologyPlacementFailed", severity, text, data)
    d, pods = _best(check)
    need = sum(check.needed)
    per = _per_node(evals, members[0], when)
    needed_nodes = sum(math.ceil(n / _per_node(evals, m, when)) for m, n in zip(members, check.needed))
    nodes_free = _nodes_free(dom, d, evals, members, when)
    best_name = dom.names[d] if d >= 0 else None
    data.update(needed_pods=need, needed_nodes=needed_nodes, best_domain=best_name, best_domain_pods=pods,
                best_domain_nodes_free=nodes_free, deficit_pods=max(0, need - pods),
                deficit_nodes=math.ceil(max(0, need - pods) / per))
    if dom.count == 0:
        text = f"{prefix}{label} needs one {rule.level} domain, and no node carries that level's labels"
    elif per == 1 and len(members) == 1:
        text = (f"{prefix}no {rule.level} domain has more than {pods} of the {need} nodes {label} needs{even} "
                f"(best: {best_name}; {dom.count} domains)")
    else:
        text = (f"{prefix}no {rule.level} domain can take more than {pods} of the {need} pods {label} needs in one "
                f"domain{even} (best: {best_name}, {nodes_free} node(s) with room; {dom.count} domains)")
    return Finding("TopologyPlacementFailed", severity, text, data)


def _members(rule) -> tuple[int, ...]:
    if isinstance(rule, Slices):
        return (rule.member,)
    return tuple(rule.members)


def decision_topology(evals: list[PodSetEval], gt: GangTopology) -> dict[str, Any] | None:
    """The Decision's ``topology``: per pod set with a topology request, the best domain now and
    its deficit (see the module docstring); None when no pod set has a request."""
    out: dict[str, Any] = {}
    for ev in evals:
        t = ev.ps.topology
        if t is None:
            continue
        out[ev.ps.name] = {"source": t.source, "mode": t.mode, "level": t.level, "domains": None, "needed_pods": ev.ps.count,
                           "best_domain": None, "best_domain_pods": None, "best_domain_nodes_free": None,
                           "deficit_pods": None, "deficit_nodes": None}
    if not out:
        return None
    for w in gt.whole:
        _fill(out, evals, w, w.domains, list(w.members))
    for x in gt.exclusive:
        _fill(out, evals, x, x.domains, list(x.members))
    for s in gt.slices:
        row = out.get(evals[s.member].ps.name)
        if row is not None and row["domains"] is None:
            _fill(out, evals, s, s.domains, [s.member])
    return out


def _fill(out, evals, rule, dom, members) -> None:
    for j, m in enumerate(members):
        ev = evals[m]
        row = out.get(ev.ps.name)
        if row is None:
            continue
        caps = domain_sums(dom, ev.k_now)
        need = rule.unit[j] if isinstance(rule, Exclusive) else ev.ps.count
        d = int(np.argmax(caps)) if len(caps) else -1
        pods = int(min(caps[d], need)) if d >= 0 else 0
        per = _per_node(evals, m, "now")
        row.update(domains=dom.count, level=rule.level, needed_pods=need, best_domain=dom.names[d] if d >= 0 else None,
                   best_domain_pods=pods, best_domain_nodes_free=_nodes_free(dom, d, evals, [m], "now"),
                   deficit_pods=need - pods, deficit_nodes=math.ceil((need - pods) / per))
        if isinstance(rule, Exclusive):
            row.update(units_needed=rule.units[j], units_fitting_now=int(np.count_nonzero(caps >= need)))
        if getattr(rule, "mode", None) == TOPOLOGY_UNCONSTRAINED:
            row["mode"] = TOPOLOGY_UNCONSTRAINED

