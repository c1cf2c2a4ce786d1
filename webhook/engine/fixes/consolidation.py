"""Displacing fixes: *consolidate* (move pods off the cheapest nodes — "move" only when the
victims re-fit on the remaining nodes, else "preempt") and *preempt lower-priority work*,
optionally after a repair (``_displacing_fix``).

Owns turning a victim choice (``search.choose_victims`` over ``units.victim_units``) into a
``Fix``: the freed nodes, the resources after eviction, whether the gang then fits and whether
the victims re-fit elsewhere, and the commands in the order to run them (cordon, evict,
uncordon). Resources: scheduler units, matrices [nodes × resources] as in the snapshot.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..fit import Demand, place, pods_per_node, shape_of
from ..model import BoundPod
from ..snapshot import ClusterSnapshot
from .budgets import pdb_violations
from .commands import _eviction_commands, _qs
from .costs import _Gain
from .ranking import Fix, Victim
from .repair import _repair_parts, broken_nodes
from .search import choose_victims
from .units import Unit, _victim_units
from .view import GangView, is_gpu_name


def _victims_of(snap: ClusterSnapshot, units: Sequence[Unit], chosen: Sequence[int], now: float | None, options) -> list[Victim]:
    out = []
    for ui in chosen:
        u = units[ui]
        partial = u.partial
        for p in u.pods:
            g = sum(v for r, v in p.requests.items() if is_gpu_name(r, options))
            h = 0.0
            if not partial and now is not None and p.start_time is not None:
                h = g * max(0.0, now - p.start_time) / 3600.0
            out.append(Victim(p.namespace, p.name, p.node_name, u.key, p.priority, g, h))
    return out

def _consolidation(snap, gang, view: GangView, now, options, *, max_priority=None, pdb=None,
                   base: np.ndarray | None = None, extra_mask: np.ndarray | None = None, memo: dict | None = None):
    """Victims for the main pod set on ``base`` (free resources, default ``snap.free``; repaired
    rows when a repair comes first) over the now-eligible nodes (plus ``extra_mask``).
    ``memo``: shared by the calls of one ``compute_fixes`` (see ``victim_units``).

    Returns (units, chosen, freed node indices, avail matrix after eviction) or None.
    """
    main = view.main
    ps, sh = view.pod_sets[main], view.shapes[main]
    if sh.missing:
        return None
    base = snap.free if base is None else base
    mask = view.now_masks[main] if extra_mask is None else (view.now_masks[main] | extra_mask)
    k_base = np.where(mask, pods_per_node(base, sh, ps.max_per_node), 0)
    need = view.need - int(k_base.sum())
    if need <= 0:
        return None
    full = pods_per_node(snap.alloc if extra_mask is None else np.maximum(snap.alloc, snap.ever_alloc), sh, ps.max_per_node)
    cand = np.flatnonzero(mask & (full > k_base))
    if len(cand) == 0:
        return None
    units, packs = _victim_units(snap, gang, sh, cand.tolist(), now, max_priority, options, pdb, memo)
    if not units:
        return None
    avail = dict(zip(cand.tolist(), map(tuple, base[np.ix_(cand, sh.cols)].tolist())))
    chosen = choose_victims(units, avail, sh.vals.tolist(), need, ps.max_per_node, memo=memo, packs=packs)
    if chosen is None:
        return None
    g = _Gain({}, sh.vals.tolist(), ps.max_per_node)  # k only: the nodes' own pods are worked out below
    freed = []
    removed: dict[int, list[int]] = {}
    for ui in chosen:
        for n, use in units[ui].use.items():
            if n in avail:
                row = removed.setdefault(n, [0] * len(g.vals))
                for j, x in enumerate(use):
                    row[j] += x
    for n, row in removed.items():
        if g.k([x + y for x, y in zip(avail[n], row)]) > g.k(avail[n]):
            freed.append(n)
    after = base.copy()
    pods_col = snap.col["pods"]
    rows: list[int] = []
    cols: list[int] = []
    amounts: list[int] = []
    for ui in chosen:
        for p in units[ui].pods:
            i = snap.node_index.get(p.node_name)
            if i is None:
                continue
            for r, v in p.requests.items():
                c = snap.col.get(r)
                if c is not None:
                    rows.append(i)
                    cols.append(c)
                    amounts.append(v)
            rows.append(i)
            cols.append(pods_col)
            amounts.append(1)
    if rows:  # the victims' requests back on their nodes, repeated cells added up
        np.add.at(after, (np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp)), np.array(amounts, dtype=np.int64))
    return units, chosen, sorted(freed), after


def _gang_demands(view: GangView, k_override: np.ndarray | None = None, mask_extra: np.ndarray | None = None) -> list[Demand]:
    out = []
    bound_by_shape: dict[tuple, int] = {}
    for p in view.own_bound:
        key = tuple(sorted(p.requests.items()))
        bound_by_shape[key] = bound_by_shape.get(key, 0) + 1
    for i, ps in enumerate(view.pod_sets):
        key = tuple(sorted(ps.requests.items()))
        already = min(ps.count, bound_by_shape.get(key, 0))
        bound_by_shape[key] = bound_by_shape.get(key, 0) - already
        mask = view.now_masks[i] if mask_extra is None else (view.now_masks[i] | mask_extra & view.ever_masks[i])
        weight = (int(view.shapes[i].vals.max()) if len(view.shapes[i].vals) else 0, ps.count, -i)
        out.append(Demand(str(i), view.shapes[i], ps.count - already, mask, ps.max_per_node, weight))
    return out


def _refits(snap: ClusterSnapshot, after: np.ndarray, placement, victims_units: Sequence[Unit], taken_mask: np.ndarray) -> bool:
    """Do the victims fit on the nodes the gang does not take (ready, schedulable, same taints as
    where they ran)? Their own selectors are not in the snapshot, so this is an estimate."""
    avail = after
    # Victims of the same shape that ran on nodes with the same taints share one demand.
    groups: dict[tuple, int] = {}
    for u in victims_units:
        for p in u.pods:
            i = snap.node_index.get(p.node_name)
            taints = snap.nodes[i].taints if i is not None else ()
            key = (tuple(sorted(p.requests.items())), taints)
            groups[key] = groups.get(key, 0) + 1
    masks: dict[tuple, np.ndarray] = {}
    demands = []
    for (req, taints), count in groups.items():
        ok = masks.get(taints)
        if ok is None:
            ok = masks[taints] = np.fromiter((n.ready is not False and not n.unschedulable and n.taints == taints for n in snap.nodes),
                                             dtype=bool, count=len(snap.nodes)) & ~taken_mask
        demands.append(Demand(f"victims:{len(demands)}", shape_of(snap, dict(req)), count, ok, None, (count,)))
    if not demands:
        return True
    return place(avail, demands) is not None


def _apply_placement(after: np.ndarray, view: GangView, placement) -> tuple[np.ndarray, np.ndarray]:
    avail = after.copy()
    taken = np.zeros(after.shape[0], dtype=bool)
    for k, chosen in placement.items():
        if not chosen:
            continue
        sh = view.shapes[int(k)]
        nodes = np.array([n for n, _ in chosen], dtype=np.intp)
        if len(np.unique(nodes)) < len(nodes):  # a node twice (``place`` never does that): one at a time
            for n, cnt in chosen:
                avail[n, sh.cols] -= sh.vals * cnt
        else:
            counts = np.array([c for _, c in chosen], dtype=np.int64)
            avail[np.ix_(nodes, sh.cols)] -= counts[:, None] * sh.vals[None, :]
        taken[nodes] = True
    return avail, taken

def _recreated(p: BoundPod) -> bool:
    """True when a controller recreates ``p`` once it is deleted (it has an owner or a gang): a
    pod without one is gone, so evicting it is never a "move"."""
    return bool(p.owner_kind or p.gang)


def _displacing_fix(snap, gang, view: GangView, now, options, *, action_hint: str, max_priority=None,
                    repaired: list[str] | None = None, extra_mask: np.ndarray | None = None, memo: dict | None = None) -> Fix | None:
    """A move or preemption that frees nodes for the main pod set (after repairing ``repaired``
    when given). Its commands, in the order to run them: the repairs that attract no pod
    (device plugins, NotReady nodes); ``cordon`` of the nodes to free (else the evicted pods'
    replacements land there again); the evictions (``_eviction_commands``); ``uncordon`` of those
    nodes and of the cordoned repaired ones once the evicted pods are gone — a cordoned node
    admits no new pod, the gang's included (kube-scheduler's NodeUnschedulable filter,
    kubernetes pkg/scheduler/framework/plugins/nodeunschedulable)."""
    base = None
    if repaired:
        base = snap.free.copy()
        rows = np.flatnonzero(extra_mask)
        base[rows] = snap.ever_alloc[rows] - snap.used[rows]
    res = _consolidation(snap, gang, view, now, options, max_priority=max_priority, base=base, extra_mask=extra_mask, memo=memo)
    if res is None:
        return None
    units, chosen, freed, after = res
    victims = _victims_of(snap, units, chosen, now, options)
    placement = place(after, _gang_demands(view, mask_extra=extra_mask))
    sufficient = placement is not None
    moved = False
    if placement is not None and all(_recreated(p) for i in chosen for p in units[i].pods):
        avail2, taken = _apply_placement(after, view, placement)
        # The freed nodes are cordoned while the victims leave: their replacements re-fit elsewhere.
        taken = taken.copy()
        taken[freed] = True
        moved = _refits(snap, avail2, placement, [units[i] for i in chosen], taken)
    verb = "move" if moved else "preempt"
    action = f"repair+{verb}" if repaired else verb
    tenants = sorted({v.namespace for v in victims})
    keys = sorted({units[i].key for i in chosen})
    names = [snap.nodes[i].name for i in freed]
    who = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
    if verb == "move":
        what = f"move {len(victims)} pod(s) of {who} off {len(freed)} node(s); they re-fit elsewhere"
    else:
        what = f"preempt {who} ({len(victims)} pod(s)), freeing {len(freed)} node(s)"
    if any(units[i].partial for i in chosen):
        what += " (partial gang: bound pods hold GPUs while siblings are Pending, no progress lost)"
    if action_hint == "lower-priority":
        what += f" — all below the gang's priority {view.priority}"
    pre: list[str] = []
    later: list[str] = []
    if repaired:
        what = f"repair {len(repaired)} node(s), then " + what
        broken = broken_nodes(snap)
        want = set(repaired)
        by = {k: [snap.nodes[i].name for i in v if snap.nodes[i].name in want] for k, v in broken.items()}
        _, pre, later = _repair_parts(snap, by)
    to_cordon = [n for n in names if not snap.nodes[snap.node_index[n]].unschedulable]
    cmds = list(pre)
    if to_cordon:
        what += "; cordon the freed nodes first, uncordon them once the evicted pods are gone"
        cmds.append("kubectl cordon " + _qs(to_cordon) + "   # first: keeps the evicted pods' replacements off these nodes")
    cmds.extend(_eviction_commands(snap, units, chosen, victims, verb))
    back = to_cordon + [n for n in later if n not in set(to_cordon)]
    if back:
        cmds.append("kubectl uncordon " + _qs(back)
                    + "   # once the evicted pods are gone: then the gang's pods bind here (a cordoned node takes none)")
    return Fix(
        action=action,
        summary=what + ("" if sufficient else "; not enough alone"),
        displaced_pods=len(victims),
        displaced_gpus=sum(v.gpus for v in victims),
        tenants=tenants,
        # Exact over the whole eviction: two units may each fit a budget that both together exceed.
        pdb_violations=pdb_violations(snap, [p for i in chosen for p in units[i].pods]) if snap.disruption_budgets
        else sum(units[i].pdb for i in chosen),
        max_victim_priority=max(v.priority for v in victims) if victims else None,
        gpu_hours_lost=sum(v.gpu_hours for v in victims),
        frees_nodes=len(freed) + (len(repaired) if repaired else 0),
        sufficient=sufficient,
        victims=victims,
        nodes=(list(repaired or []) + names),
        commands=cmds,
    )
