"""The verdict with node autoscaling: a capacity NeverFits stands only with a proof over the
nodes that exist *and* every node the scale-up sources could add.

Owns ``scale_up_review``, which ``evaluate`` calls after the capacity proofs and the placement
step, and the findings it adds:

* **NeedsScaleUp** (Waits): the gang does not fit the existing nodes now and some source
  matches it; its data (``scale_up_data``) says how many pods miss, which sources take them,
  how many new nodes that is where the shape is known, and their limits and usage.
* **NoMatchingScaleUp** (NeverFits): a capacity proof holds and no source could add a node any
  pod of a pod set may use (the source's requirement or taint that rules it out is named).
* **ExceedsScaleUpLimits** (NeverFits): a capacity proof holds and the sources' limits or size
  caps, fully used, cannot cover it either.

The augmented bounds (each an upper bound on what the repaired, emptied cluster plus every
source could ever hold; ``bounds`` with ``ever=True``):

* per pod set: no existing node can ever take one pod and no matching source has room for one;
* per pod set, all-or-nothing gangs: Σ pods the existing eligible nodes hold when empty + Σ over
  matching sources of their room < pods needed;
* per gang, all-or-nothing gangs with stated totals: for some resource, Σ requests > Σ capacity
  of the existing nodes any pod set may use + Σ over sources matching any pod set of what they
  can add.

They are proofs only where the existing bounds are (``proofs.unprovable`` is None: stated
shapes, nodes of known capacity, no MIG layout in flux). Any other capacity NeverFits — a
topology domain, an exhaustive search — is about the existing nodes alone and becomes Waits as
soon as a source matches. Quota NeverFits is not touched.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..decision import NEVER_FITS, WAITS
from ..filters import Constraints
from ..model import Finding, GangRequest
from ..options import EngineOptions, all_or_nothing
from ..podsets import PodSetEval, fmt_req, primary_pod_set
from ..proofs import unprovable
from ..quantity import format_quantity
from ..snapshot import ClusterSnapshot
from ..wait.provisioning import provisioning_estimate
from .bounds import nodes_for, pods_room, resource_room
from .match import matches, mismatch
from .model import NODES_LIMIT, ScaleUpSource

__all__ = ["scale_up_review", "scale_up_data", "CODES"]

#: The reason codes this module adds.
CODES = ("NeedsScaleUp", "NoMatchingScaleUp", "ExceedsScaleUpLimits")


def _sum(values: Sequence[int | None]) -> int | None:
    """Σ, None (unbounded) when any term is."""
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _matching(sources, cons: list[Constraints]) -> list[ScaleUpSource]:
    return [s for s in sources if matches(s, cons)]


def _mismatch_by_source(sources: Sequence[ScaleUpSource], c: Constraints) -> dict[str, str]:
    """Source name → the first reason a pod with ``c`` cannot use its nodes ("" when it can)."""
    return {s.name: mismatch(s, c) or "" for s in sources}


def _why_text(sources: Sequence[ScaleUpSource], why: dict[str, str]) -> str:
    """"NodePool a: <reason>; NodePool b: <reason>" for the first four sources."""
    return "; ".join(f"{s.label}: {why[s.name] or 'no match'}" for s in sources[:4])


def _pod_set_proof(ev: PodSetEval, matched: list[ScaleUpSource], sources, cons, whole: bool,
                   options: EngineOptions) -> Finding | None:
    """A NeverFits the sources cannot lift for one pod set, or None."""
    ps = ev.ps
    label = f"pod set {ps.name} ({ps.count} × {fmt_req(ps.requests, options)})"
    rooms = [pods_room(s, ps.requests, ps.max_per_node, ever=True) for s in matched]
    existing_one = bool(ev.k_ever.any())
    if not existing_one and all(r == 0 for r in rooms):
        if not matched:
            why = _mismatch_by_source(sources, cons[0])
            return Finding("NoMatchingScaleUp", NEVER_FITS,
                f"{label}: no existing node can ever host it, and no autoscaler can add one it may use ({_why_text(sources, why)})",
                {"pod_set": ps.name, "sources": why})
        return Finding("ExceedsScaleUpLimits", NEVER_FITS,
            f"{label}: no existing node can ever host it, and the limits of "
            + ", ".join(f"{s.label} ({_limits_text(s)})" for s in matched) + " leave no room for one such pod",
            {"pod_set": ps.name, "sources": {s.name: 0 for s in matched}})
    if not whole:
        return None
    existing = int(ev.k_ever.sum())
    room = _sum(rooms)
    if room is not None and existing + room < ps.count:
        return Finding("ExceedsScaleUpLimits" if matched else "NoMatchingScaleUp", NEVER_FITS,
            f"{label}: the existing nodes hold at most {existing} such pods even when empty, and "
            + (", ".join(f"{s.label} at most {r} more ({_limits_text(s)})" for s, r in zip(matched, rooms)) if matched
               else "no autoscaler can add a node it may use")
            + f"; need {ps.count}",
            {"pod_set": ps.name, "pods_possible": existing + room, "pods_needed": ps.count,
             "sources": {s.name: r for s, r in zip(matched, rooms)}})
    return None


def _gang_total_proof(snap, gang: GangRequest, evals: list[PodSetEval], union_sources: list[ScaleUpSource]) -> Finding | None:
    """ExceedsScaleUpLimits when a resource's total exceeds existing capacity plus what the
    sources matching any pod set could add."""
    union = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union |= ev.ever_mask
    for r, need in gang.total_requests().items():
        if need <= 0:
            continue
        c = snap.col.get(r)
        have = int(snap.ever_alloc[union, c].sum()) if c is not None else 0
        add = _sum([resource_room(s, r, ever=True) for s in union_sources])
        if add is not None and need > have + add:
            return Finding("ExceedsScaleUpLimits", NEVER_FITS,
                f"the gang needs {format_quantity(r, need)} {r} in all; the existing nodes it may use have "
                f"{format_quantity(r, have)} even when empty and the autoscalers can add at most {format_quantity(r, add)}"
                + (" (" + "; ".join(f"{s.label}: {_limits_text(s)}" for s in union_sources) + ")" if union_sources else ""),
                {"resource": r, "request": need, "capacity": have, "scale_up": add})
    return None


def _limits_text(s: ScaleUpSource) -> str:
    """"limit 512 nvidia.com/gpu, 24 in use" — or "no limits" / "max 3 more nodes"."""
    parts = []
    for r, v in sorted(s.limits.items()):
        if r == NODES_LIMIT:
            parts.append(f"limit {v} nodes, {s.in_use.get(r, s.nodes)} in use")
        else:
            parts.append(f"limit {format_quantity(r, int(v))} {r}, {format_quantity(r, int(s.in_use.get(r, 0)))} in use")
    if s.max_new_nodes is not None:
        parts.append(f"at most {s.max_new_nodes} more node(s)")
    return "; ".join(parts) or "no limits"


def scale_up_data(snap: ClusterSnapshot, gang: GangRequest, evals: list[PodSetEval], matched: list[list[ScaleUpSource]],
                  sources: Sequence[ScaleUpSource], cons: list[list[Constraints]], options: EngineOptions,
                  required: bool = False) -> dict:
    """NeedsScaleUp's data (see the module doc and the #16 contract): pods that miss the existing
    nodes now, assigned to the matching sources in order, each as far as its room (now) goes;
    ``required``: the existing nodes can never hold the gang (a capacity proof over them was
    lifted), so it cannot start without new nodes."""
    main = primary_pod_set([ev.ps for ev in evals], options)
    main_ev = next(ev for ev in evals if ev.ps is main)
    pools: dict[str, dict] = {}
    missing_total = 0
    for ev, ms in zip(evals, matched):
        ps = ev.ps
        missing = max(0, ps.count - int(ev.k_now.sum()))
        missing_total += missing
        for s in ms:
            if missing <= 0:
                break
            room = pods_room(s, ps.requests, ps.max_per_node)
            take = missing if room is None else min(room, missing)
            if take <= 0:
                continue
            missing -= take
            row = pools.setdefault(s.name, _pool_row(s, pods_room(s, main.requests, main.max_per_node)))
            row["pods"] += take
            if row["nodes_needed"] is not None:  # pod sets on nodes of their own: Σ of the ceilings
                row["nodes_needed"] += nodes_for(s, ps.requests, ps.max_per_node, take) or 0
    used = {name for ms in matched for name in (s.name for s in ms)}
    return {
        "eligible_nodes": int(np.count_nonzero(main_ev.ever_mask)),
        "pods_missing": missing_total,
        # the same estimate the expected wait uses (learned first, then stated, then the default)
        "provisioning_s": provisioning_estimate(snap, options, sources=[s for s in sources if s.name in pools] or None)[0],
        "pools": list(pools.values()),
        "unmatched": {s.name: mismatch(s, cons[0][0]) or "" for s in sources if s.name not in used},
        "required": required,
    }


def _pool_row(s: ScaleUpSource, room) -> dict:
    return {"name": s.name, "kind": s.kind, "origin": s.origin, "pods": 0, "nodes_needed": 0 if s.node_shape is not None else None,
            "pods_room": room, "limits": {r: int(v) for r, v in s.limits.items()},
            "in_use": {r: int(v) for r, v in s.in_use.items()},
            "remaining": {r: s.remaining(r) for r in s.limits}}


def _needs_message(data: dict) -> str:
    """"3 eligible nodes exist; 61 more needed from NodePool gpu-h100 (limit 512 nvidia.com/gpu, 24 in use)"."""
    head = f"{data['eligible_nodes']} eligible node(s) exist"
    if not data["pools"]:
        return head + f"; {data['pods_missing']} pod(s) do not fit them now and no autoscaler has room for them"
    parts = []
    for row in data["pools"]:
        what = (f"{row['nodes_needed']} more node(s)" if row["nodes_needed"] is not None
                else f"new nodes for {row['pods']} pod(s) (shape of new nodes unknown)")
        word = {"NodePool": "NodePool", "NodeGroup": "node group", "PolicyPool": "policy pool"}.get(row["kind"], row["kind"])
        lim = "; ".join(
            f"limit {format_quantity(r, v)} {r}, {format_quantity(r, row['in_use'].get(r, 0))} in use"
            for r, v in sorted(row["limits"].items()) if r != NODES_LIMIT)
        parts.append(f"{what} needed from {word} {row['name']}" + (f" ({lim})" if lim else ""))
    return head + "; " + "; ".join(parts) + f"; new nodes take ~{int(round(data['provisioning_s']))} s to become Ready"


def scale_up_review(snap: ClusterSnapshot, gang: GangRequest, evals: list[PodSetEval], sources: Sequence[ScaleUpSource],
                    constraints: Callable[[], list[list[Constraints]]], options: EngineOptions, findings: list[Finding],
                    first: int, placed_now: bool) -> bool:
    """Review the capacity findings ``findings[first:]`` against the scale-up sources, in place.

    Args:
        sources: ``sources.effective_sources(snap, options)``, as the caller already has them.
        evals / constraints: each pod set's evaluation, and a callable giving each pod set's
            constraints (one per candidate flavor) — called only when there is something to
            review (a gang placed now with no capacity NeverFits costs nothing here).
        first: index of the first finding the capacity proofs and the placement step added
            (quota findings come before it and are never touched).
        placed_now: the gang has a placement on today's free resources.

    Returns: whether the gang is NeverFits after the review (quota or capacity).
    """
    never_any = any(f.severity == NEVER_FITS for f in findings)
    if not sources or not evals:
        return never_any
    capacity = [i for i in range(first, len(findings)) if findings[i].severity == NEVER_FITS]
    quota_never = any(f.severity == NEVER_FITS for f in findings[:first])
    if not capacity and (placed_now or quota_never):
        return never_any
    cons = constraints()
    matched = [_matching(sources, c) for c in cons]
    if capacity and not any(matched):
        # No source adds a node any pod of the gang may use: the proofs over the existing nodes stand.
        main = next(i for i, ev in enumerate(evals) if ev.ps is primary_pod_set([e.ps for e in evals], options))
        why = _mismatch_by_source(sources, cons[main][0])
        findings.append(Finding("NoMatchingScaleUp", NEVER_FITS,
            f"No autoscaler can add a node this gang's pods may use ({_why_text(sources, why)})", {"sources": why}))
        return True
    if capacity:
        proof = _proof(snap, gang, evals, cons, matched, sources, options)
        if proof is not None:
            findings.append(proof)
            return True
        for i in capacity:
            f = findings[i]
            findings[i] = Finding(f.code, WAITS, f"{f.message} (on the existing nodes; an autoscaler may add more)",
                                  {**f.data, "scale_up": True})
    if quota_never or placed_now or not any(matched):
        return quota_never
    # Required: a capacity proof over the existing nodes was lifted, or there are no nodes at all.
    data = scale_up_data(snap, gang, evals, matched, sources, cons, options, required=bool(capacity) or not snap.nodes)
    findings.append(Finding("NeedsScaleUp", WAITS, _needs_message(data), data))
    return False


def _proof(snap, gang, evals, cons, matched, sources, options) -> Finding | None:
    """The first augmented bound that proves NeverFits, or None."""
    if unprovable(snap, gang, evals) is not None:
        return None
    whole = all_or_nothing(gang, options)
    for ev, c, ms in zip(evals, cons, matched):
        f = _pod_set_proof(ev, ms, sources, c, whole, options)
        if f is not None:
            return f
    if whole and gang.exact_total:
        union_sources = [s for s in sources if any(s in ms for ms in matched)]
        return _gang_total_proof(snap, gang, evals, union_sources)
    return None
