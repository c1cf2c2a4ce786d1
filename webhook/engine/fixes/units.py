"""Victim units: the pods evicted together (a gang spanning nodes, or one pod), as ``Unit``, and
the candidate units on a set of nodes (``victim_units``).

Owns who may be a victim (never DaemonSet pods, pods at system priority ≥ 2,000,000,000 or the
gang's own pods; a gang that spans nodes is evicted whole), each unit's resources per node,
priority, tenants, GPUs and GPU-hours lost, and its packed form for the search (``_unit_pack``).
Not which units to take (``search``) nor what a set of them costs (``costs``).

Shapes: ``Unit.use`` maps a node index to ints in the shape's column order (scheduler units;
the pod slot counted once per pod); GPU-hours = GPUs × (now − pod start) / 3600, 0 for pods of
a partial gang (bound while siblings are Pending) or without a start time.
"""

from __future__ import annotations

import collections.abc
import operator
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..fit import Shape
from ..model import BoundPod, GangRequest
from ..snapshot import ClusterSnapshot
from .budgets import _budget_hits
from .ranking import _NEG_INF
from .view import _own_test, is_gpu_name

__all__ = ["NON_GANG_OWNERS", "SYSTEM_PRIORITY", "Unit", "victim_units"]


#: Owner kinds whose pods are interchangeable replicas, not gang members: one may be evicted alone.
NON_GANG_OWNERS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Node", "ReplicationController"})
#: Pods at or above this priority (system-cluster-critical, system-node-critical) are never victims.
SYSTEM_PRIORITY = 2_000_000_000


@dataclass(frozen=True)
class Unit:
    """Pods evicted together: a gang spanning nodes, or one pod.

    ``use``: node index → resources freed on that node, as ints in the shape's column order.
    ``priority``: highest priority of its pods; ``gpus``/``hours``: GPUs and GPU-hours lost.
    ``budgets``: the PodDisruptionBudgets selecting its pods, as (budget index, pods of this
    unit the budget selects, disruptions the budget allows); a set of units violates a budget
    when the pods of the set it selects exceed what it allows (``set_cost``), so violations are
    a property of the set, not a sum over its units. ``pdb``: violations charged to this unit
    on its own and added as they are (a caller's per-unit map, see ``victim_units``; 0 for
    units built from the snapshot's budgets, which are in ``budgets``).
    """

    key: str
    pods: tuple[BoundPod, ...]
    use: Mapping[int, tuple[int, ...]]
    priority: int
    tenants: frozenset[str]
    gpus: int
    hours: float
    pdb: int = 0
    partial: bool = False
    budgets: tuple[tuple[int, int, int], ...] = ()

    @property
    def node_local(self) -> bool:
        """True when every pod of the unit is on one node."""
        return len(self.use) <= 1

    @property
    def solo_pdb(self) -> int:
        """PDB violations if this unit alone were evicted: ``pdb`` plus the budgets whose
        selected pods in it exceed their allowance."""
        v = self.pdb
        for _, n, a in self.budgets:
            if n > a:
                v += 1
        return v


_NON_GANG_PREFIXES = tuple(k + "/" for k in NON_GANG_OWNERS)


def _unit_key(p: BoundPod) -> str:
    if p.gang and p.owner_kind not in NON_GANG_OWNERS and not p.gang.startswith(_NON_GANG_PREFIXES):
        return p.gang
    return f"Pod/{p.namespace}/{p.name}"


_MISSING = object()


def _pod_indexes(snap: ClusterSnapshot) -> tuple[Mapping[str, list[BoundPod]], bool]:
    """(bound pods with a gang key by gang key, in ``snap.pods`` order; True when no two pods
    of the snapshot share a name — then no two share a (namespace, name) either); built once per
    snapshot and kept on it."""
    key = ("fixes.pod_indexes",)
    hit = snap.recall(key)
    if hit is None:
        by_gang: dict[str, list[BoundPod]] = {}
        for p in snap.pods:
            g = p.gang
            if g and p.node_name:
                lst = by_gang.get(g)
                if lst is None:
                    by_gang[g] = [p]
                else:
                    lst.append(p)
        unique = len(set(map(_NAME, snap.pods))) == len(snap.pods)
        hit = snap.remember(key, (by_gang, unique))
    return hit  # type: ignore[return-value]


_NAME = operator.attrgetter("name")


def _pods_by_name(snap: ClusterSnapshot) -> Mapping[tuple[str, str], list[BoundPod]]:
    """Pods by (namespace, name), in ``snap.pods`` order; built once per snapshot (only when
    some pod name is not unique, or a unit key names a pod some other way) and kept on it."""
    key = ("fixes.pods_by_name",)
    hit = snap.recall(key)
    if hit is None:
        by_name: dict[tuple[str, str], list[BoundPod]] = {}
        for p in snap.pods:
            k = (p.namespace, p.name)
            lst = by_name.get(k)
            if lst is None:
                by_name[k] = [p]
            else:
                lst.append(p)
        hit = snap.remember(key, by_name)
    return hit  # type: ignore[return-value]


def victim_units(
    snap: ClusterSnapshot,
    gang: GangRequest,
    shape: Shape,
    nodes: Iterable[int],
    now: float | None,
    *,
    max_priority: int | None = None,
    options: Any = None,
    pdb: Mapping[str, int] | None = None,
    memo: dict | None = None,
) -> list[Unit]:
    """The units whose eviction could help on ``nodes`` (node indices), whole gangs included.

    A unit is a candidate when one of its pods on those nodes requests a resource of ``shape``
    (other than the pod slot, which every pod takes). Units above ``max_priority`` (exclusive
    bound: only priority < max_priority kept when given), DaemonSet pods, system-priority pods and
    the gang's own pods are left out. GPU-hours: GPUs × (now − start) / 3600 per pod, 0 for pods of
    a partial gang or without a start time. ``pdb`` maps a unit key to PDB violations it causes
    (``Unit.pdb``, added per unit); without it each unit carries the budgets of
    ``snap.disruption_budgets`` that select its pods (``Unit.budgets``), and violations are
    counted over the union of the units a fix evicts.

    ``memo``: a dict the caller passes to every call with the same ``snap``, ``gang``,
    ``shape``, ``now``, ``options`` and ``pdb`` (``compute_fixes`` does): the candidate units of
    each node and each unit are then worked out once. Units are sorted by key.
    """
    return list(_victim_units(snap, gang, shape, nodes, now, max_priority, options, pdb, memo)[0])


class _Units(collections.abc.Sequence):
    """The units of a ``_victim_units`` answer, each made on first access from its memo entry
    (see ``_victim_units``): a search reads their ``_unit_pack`` and makes only the few units it
    looks at (the ones it picks, spanning ones), not tens of thousands."""

    __slots__ = ("_entries",)

    def __init__(self, entries: list[list]) -> None:
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self._entries)))]
        e = self._entries[i]
        u = e[0]
        return u if u is not None else _materialize(e)


def _materialize(e: list) -> Unit:
    """The unit of a one-pod memo entry [None, pack, key, pod, partial] (``_solo_entry``); kept in it."""
    _, pack, k, p, partial = e
    node = pack[5]
    u = e[0] = _new_object(Unit)
    u.__dict__.update(key=k, pods=(p,), use={} if node is None else {node: pack[6]}, priority=p.priority, tenants=pack[1],
                      gpus=pack[9], hours=pack[4], pdb=pack[3], partial=partial, budgets=pack[2], _search_pack=pack)
    return u


def _victim_units(snap: ClusterSnapshot, gang: GangRequest, shape: Shape, nodes: Iterable[int], now: float | None,
                  max_priority: int | None, options: Any, pdb: Mapping[str, int] | None,
                  memo: dict | None) -> tuple[Sequence[Unit], list[tuple]]:
    """``victim_units`` (as a ``_Units``: made on access) and the ``_unit_pack`` of each unit.

    The memo keeps, per unit key, None (never a victim) or an entry [unit, pack, …]: units of
    one pod are first kept as [None, pack, key, pod, partial] (``_solo_entry``) and made when
    read; the others are made at once ([unit, pack])."""
    cache: dict = memo if memo is not None else {}
    cols = [int(c) for c in shape.cols]
    names = list(shape.names)
    relevant = [n for n in names if n != "pods"]
    gang_ns = gang.namespace
    own = _own_test(gang)
    node_memo: dict[int, list[str]] = cache.setdefault("nodes", {})
    unit_memo: dict[str, list | None] = cache.setdefault("units", {})  # key → entry (see above)
    per_request: dict = cache.setdefault("per_request", {})
    shared: dict = cache.setdefault("shared", {})  # see _solo_entry
    pending_gangs = cache.get("pending_gangs")
    if pending_gangs is None:
        pending_gangs = cache["pending_gangs"] = {p.gang for p in snap.pending_pods if p.gang}
    indexes = None
    keys: set[str] = set()
    for i in nodes:
        node_keys = node_memo.get(i)
        if node_keys is None:
            found: list[str] = []
            name = snap.nodes[i].name
            at = snap.node_index.get(name)
            for p in snap.pods_by_node.get(name, ()):
                if p.owner_kind == "DaemonSet" or p.priority >= SYSTEM_PRIORITY or (p.namespace == gang_ns and own(p)):
                    continue
                req = p.requests
                hit = per_request.get(id(req))
                if hit is None or hit[0] is not req:
                    hit = _request_row(req, names, relevant, options)
                    per_request[id(req)] = hit
                if not hit[3]:
                    continue
                if p.gang and p.owner_kind not in NON_GANG_OWNERS and not p.gang.startswith(_NON_GANG_PREFIXES):
                    found.append(p.gang)
                    continue
                k = f"Pod/{p.namespace}/{p.name}"
                found.append(k)
                if k not in unit_memo and "/" not in p.namespace:
                    if indexes is None:
                        indexes = _pod_indexes(snap)
                    if indexes[1]:
                        # The one pod of that name (no two pods of the snapshot share a name), bound
                        # here, neither a DaemonSet nor at system priority (skipped above).
                        unit_memo[k] = _solo_entry(snap, k, p, at, now, pending_gangs, hit, pdb, shared)
            node_keys = node_memo[i] = found
        keys.update(node_keys)
    if not keys:
        return _Units([]), []
    entries, packs = [], []
    for k in sorted(keys):
        entry = unit_memo.get(k, _MISSING)
        if entry is _MISSING:
            if indexes is None:
                indexes = _pod_indexes(snap)
            if not k.startswith("Pod/"):
                pods = tuple(p for p in indexes[0].get(k, ()) if _unit_key(p) == k)
            else:  # the pod of that name, on the node the last pod of that name is bound to
                same = _pods_by_name(snap).get(tuple(k.split("/", 2)[1:]), ())  # type: ignore[arg-type]
                node = same[-1].node_name if same else ""
                pods = tuple(p for p in same if p.node_name == node) if node else ()
            unit = _unit_of(snap, k, pods, names, cols, now, pending_gangs, per_request, options, pdb)
            entry = unit_memo[k] = None if unit is None else [unit, unit.__dict__["_search_pack"]]
        if entry is None:
            continue
        if max_priority is not None and entry[1][7] >= max_priority:  # the pack's priority
            continue
        entries.append(entry)
        packs.append(entry[1])
    return _Units(entries), packs


def _request_row(req: Mapping[str, int], names: list[str], relevant: list[str], options: Any) -> tuple:
    """(``req``, its row in the shape's column order — the pod slot counted once —, its GPUs,
    whether it asks for a resource of the shape besides the pod slot): ``victim_units``'s
    ``per_request`` entries, one per requests map."""
    g = 0
    for r, v in req.items():
        if is_gpu_name(r, options):
            g += v
    return (req, tuple([1 if n == "pods" else int(req.get(n, 0)) for n in names]), g, any(req.get(r, 0) for r in relevant))


_new_object = object.__new__


def _make_unit(key: str, pods: tuple[BoundPod, ...], use: Mapping[int, tuple[int, ...]], priority: int, tenants: frozenset[str],
               gpus: int, hours: float, pdb: int, partial: bool, budgets: tuple) -> Unit:
    """``Unit(key, pods, use, priority, tenants, gpus, hours, pdb, partial, budgets)``, built
    without the frozen dataclass's per-field ``__setattr__`` calls (tens of thousands are built
    for a large cluster); equal to it field for field."""
    u = _new_object(Unit)
    u.__dict__.update(key=key, pods=pods, use=use, priority=priority, tenants=tenants, gpus=gpus, hours=hours, pdb=pdb,
                      partial=partial, budgets=budgets, _search_pack=_pack(pods, use, priority, tenants, gpus, hours, pdb, budgets))
    return u


def _solo_entry(snap: ClusterSnapshot, k: str, p: BoundPod, i: int | None, now: float | None, pending_gangs: set[str], hit: tuple,
                pdb: Mapping[str, int] | None, shared: dict) -> list:
    """The memo entry [None, pack, k, p, partial] of ``_unit_of(snap, k, (p,), …)`` for a unit of
    one pod that may be a victim, bound to node ``i`` (``snap.node_index`` of its node): its
    ``_unit_pack``, and what ``_materialize`` makes the unit from. ``hit``: the ``per_request``
    entry of its requests. ``shared``: a dict kept by the caller, where equal values many units
    carry (tenant sets, GPU-hours, costs) are made once and shared."""
    g = hit[2] if i is not None else 0
    partial = k in pending_gangs
    start = p.start_time
    if i is not None and not partial and now is not None and start is not None:
        h = shared.get((g, start))
        if h is None:
            hours = 0.0
            hours += g * max(0.0, now - start) / 3600.0
            h = shared[(g, start)] = (hours, round(0.0 + hours, 6))
        hours, rounded = h
    else:
        hours = rounded = 0.0
    fixed, hits = 0, ()
    solo = 0
    if pdb is not None:
        fixed = solo = pdb.get(k, 0)
    elif snap.disruption_budgets:
        hits = _budget_hits(snap, (p,))
        solo = sum(1 for _, n, a in hits if n > a)
    ns = p.namespace
    tenants = shared.get(ns)
    if tenants is None:
        tenants = shared[ns] = frozenset([ns])
    prio = p.priority
    top = max(_NEG_INF, prio)
    cost = (solo, top, 1, 1, g, rounded)
    cost = shared.setdefault(cost, cost)
    pack = (cost, tenants, hits, fixed, hours, i, None if i is None else hit[1], top, 1, g)
    return [None, pack, k, p, partial]


def _unit_of(snap: ClusterSnapshot, k: str, pods: tuple[BoundPod, ...], names: list[str], cols: list[int], now: float | None,
             pending_gangs: set[str], per_request: dict, options: Any, pdb: Mapping[str, int] | None) -> Unit | None:
    """The ``Unit`` of key ``k`` with these pods; None when it may never be a victim (no pods,
    a system-priority or DaemonSet pod among them). ``per_request``: id of a requests map →
    its ``_request_row``, filled as pods are seen."""
    if not pods:
        return None
    for p in pods:
        if p.priority >= SYSTEM_PRIORITY or p.owner_kind == "DaemonSet":
            return None
    prio = max(p.priority for p in pods)
    use: dict[int, list[int]] = {}
    gpus = 0
    hours = 0.0
    partial = k in pending_gangs
    node_index = snap.node_index
    relevant = [n for n in names if n != "pods"]
    for p in pods:
        i = node_index.get(p.node_name)
        if i is None:
            continue
        req = p.requests
        hit = per_request.get(id(req))
        if hit is None or hit[0] is not req:
            hit = per_request[id(req)] = _request_row(req, names, relevant, options)
        row = use.get(i)
        if row is None:
            use[i] = list(hit[1])
        else:
            use[i] = [x + y for x, y in zip(row, hit[1])]
        g = hit[2]
        gpus += g
        if not partial and now is not None and p.start_time is not None:
            hours += g * max(0.0, now - p.start_time) / 3600.0
    fixed, hits = 0, ()
    if pdb is not None:
        fixed = pdb.get(k, 0)
    elif snap.disruption_budgets:
        hits = _budget_hits(snap, pods)
    return _make_unit(k, pods, {i: tuple(v) for i, v in use.items()}, prio,
                      frozenset([p.namespace for p in pods]), gpus, hours, fixed, partial, hits)


def _pack(pods: tuple, use: Mapping[int, tuple[int, ...]], priority: int, tenants: frozenset[str], gpus: int, hours: float,
          pdb: int, budgets: tuple) -> tuple:
    """``_unit_pack`` of a unit with these fields."""
    solo = pdb
    for _, n, a in budgets:  # Unit.solo_pdb
        if n > a:
            solo += 1
    cost = (solo if budgets else pdb, max(_NEG_INF, priority), len(tenants), len(pods), gpus, round(0.0 + hours, 6))
    if len(use) == 1:
        for node, row in use.items():
            return (cost, tenants, budgets, pdb, hours, node, row, cost[1], cost[3], gpus)
    return (cost, tenants, budgets, pdb, hours, None, None, cost[1], cost[3], gpus)


def _unit_pack(u: Unit) -> tuple:
    """(``set_cost`` of ``u`` alone, tenants, budgets, pdb, hours, node, row, priority, pods,
    GPUs): what the search reads of a unit — node and row: its one node and its row there when
    it has one node, else None; priority as in the cost (``max(-inf, priority)``, the
    priority), pods: how many —, worked out once and kept on it (its fields never change), so
    that a search reads one small tuple per unit instead of the unit's scattered fields
    (``victim_units`` makes it with the unit)."""
    d = u.__dict__
    c = d.get("_search_pack")
    if c is None:
        c = d["_search_pack"] = _pack(u.pods, u.use, u.priority, u.tenants, u.gpus, u.hours, u.pdb, u.budgets)
    return c
