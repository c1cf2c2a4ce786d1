"""Fixes for a gang that Waits, ranked by what they cost other tenants (FIELD-NOTES §7).

Zero-displacement fixes come first (repair broken nodes, release orphan reservations, borrow or
raise quota, change a selector, shrink the gang, wait, add nodes), then fixes that displace
running work: *consolidate* (move the pods off the cheapest nodes — called "move" only when the
victims re-fit on the remaining nodes, else "preempt") and *preempt lower-priority work*.

Cost of a displacing fix, compared in this order (lexicographic):
  1. PodDisruptionBudget violations: budgets (``snap.disruption_budgets``) whose selected pods
     the fix evicts more of than the budget's disruptionsAllowed (``pdb_violations``), counted
     over the union of the victims — never summed per unit: four units that each take the one
     disruption a budget allows violate it once, together,
  2. highest victim priority,
  3. tenants (namespaces) touched,
  4. pods displaced, 5. GPUs displaced,
  6. GPU-hours of work lost: GPUs × (now − pod start) for each victim pod; 0 for pods of a
     partial gang (bound while siblings are Pending: no progress is being made).

Victims: pods of a gang that spans nodes (``BoundPod.gang`` naming a workload, not a
ReplicaSet/StatefulSet/DaemonSet) are evicted whole, never in part; DaemonSet pods and pods at
system priority (≥ 2,000,000,000) are never victims; the gang's own pods are never victims.
Choosing victims is a minimum k-union problem: exact enumeration up to ``EXACT_UNITS`` victim
units, otherwise greedy by marginal cost (per-node bundles and whole units as candidates) plus
a drop/swap local search. When every unit is node-local, the greedy takes the D cheapest nodes.

Pure: no I/O, no clock (``now`` is an argument).
"""

from __future__ import annotations

import collections.abc
import functools
import heapq
import itertools
import math
import operator
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .decision import NEVER_FITS, Decision
from .filters import Constraints, filter_nodes
from .fit import Demand, Shape, pods_per_node, place, shape_of
from .model import BoundPod, DisruptionBudget, GangRequest, PodSet, ResourceFlavor
from .snapshot import ClusterSnapshot

__all__ = [
    "Victim",
    "Fix",
    "Unit",
    "GangView",
    "gang_view",
    "victim_units",
    "choose_victims",
    "brute_force_victims",
    "rank_fixes",
    "compute_fixes",
    "broken_nodes",
    "own_pod",
    "set_cost",
    "NON_GANG_OWNERS",
    "SYSTEM_PRIORITY",
    "EXACT_UNITS",
    "node_local_victims",
    "budget_members",
    "disruptions_allowed",
    "pdb_violations",
]

#: Owner kinds whose pods are interchangeable replicas, not gang members: one may be evicted alone.
NON_GANG_OWNERS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Node", "ReplicationController"})
#: Pods at or above this priority (system-cluster-critical, system-node-critical) are never victims.
SYSTEM_PRIORITY = 2_000_000_000
#: Victim choice is exact (enumeration of every subset) up to this many candidate units.
EXACT_UNITS = 12
#: When the greedy's victims include pods a PodDisruptionBudget selects, its extra passes (each
#: about as costly as the first) run up to this many candidate units.
BUDGET_PASS_UNITS = 2000
#: Rank of each action among fixes of equal displacement cost (lower first).
ACTION_RANK = {
    "repair": 0, "release-reservations": 1, "lower-quota": 2, "borrow-quota": 3, "raise-quota": 4,
    "change-selector": 5, "shrink": 6, "wait": 7, "add-nodes": 8,
    "repair+move": 9, "move": 10, "repair+preempt": 11, "preempt": 12, "evict-partial": 13,
}
_NEG_INF = float("-inf")


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class Victim:
    """One pod a fix displaces: ``unit`` is the gang it is evicted with (or the pod itself)."""

    namespace: str
    name: str
    node: str
    unit: str
    priority: int
    gpus: int
    gpu_hours: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"namespace": self.namespace, "name": self.name, "node": self.node, "unit": self.unit,
                "priority": self.priority, "gpus": self.gpus, "gpu_hours": round(self.gpu_hours, 2)}


@dataclass
class Fix:
    """One way to get the gang started, with what it costs others and what it buys.

    Attributes:
        action: repair, release-reservations, lower-quota, borrow-quota, raise-quota,
            change-selector, shrink, wait, add-nodes, move, preempt, repair+move, repair+preempt.
        summary: one sentence a person acts on.
        displaced_pods / displaced_gpus: running pods and GPUs the fix evicts.
        tenants: namespaces whose pods are evicted (sorted).
        pdb_violations: PodDisruptionBudgets the evictions would violate (0 without PDB data).
        max_victim_priority: highest priority among victims, None without victims.
        gpu_hours_lost: GPU-hours of running work thrown away (hours, 2 decimals).
        frees_nodes: nodes the fix makes able to host one of the gang's pods.
        expected_start: epoch seconds when the gang could start, None when unknown.
        sufficient: True when this fix alone lets the whole gang start.
        victims: the displaced pods. nodes: the nodes freed or repaired.
        commands: kubectl commands that carry the fix out (or show what to change).
    """

    action: str
    summary: str
    displaced_pods: int = 0
    displaced_gpus: int = 0
    tenants: list[str] = field(default_factory=list)
    pdb_violations: int = 0
    max_victim_priority: int | None = None
    gpu_hours_lost: float = 0.0
    frees_nodes: int = 0
    expected_start: float | None = None
    sufficient: bool = False
    victims: list[Victim] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def cost(self) -> tuple:
        """The displacement cost, compared lexicographically (see the module doc)."""
        prio = _NEG_INF if self.max_victim_priority is None else self.max_victim_priority
        return (self.pdb_violations, prio, len(self.tenants), self.displaced_pods, self.displaced_gpus,
                round(self.gpu_hours_lost, 6))

    def rank_key(self) -> tuple:
        """Sort key: cost, then the action's rank, then fixes that suffice alone first."""
        return (self.cost(), ACTION_RANK.get(self.action, 99), not self.sufficient)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (victims and nodes capped at 50; ``victims_total`` / ``nodes_total``
        give the full counts; ``commands`` are all of them)."""
        return {
            "action": self.action,
            "summary": self.summary,
            "displaced_pods": self.displaced_pods,
            "displaced_gpus": self.displaced_gpus,
            "tenants": list(self.tenants),
            "pdb_violations": self.pdb_violations,
            "max_victim_priority": self.max_victim_priority,
            "gpu_hours_lost": round(self.gpu_hours_lost, 2),
            "frees_nodes": self.frees_nodes,
            "expected_start": self.expected_start,
            "sufficient": self.sufficient,
            "victims": [v.to_dict() for v in self.victims[:50]],
            "victims_total": len(self.victims),
            "nodes": list(self.nodes[:50]),
            "nodes_total": len(self.nodes),
            "commands": list(self.commands),
        }


def rank_fixes(fixes: Iterable[Fix]) -> list[Fix]:
    """Fixes in ranked order: zero displacement first, then by ``Fix.rank_key``; stable."""
    return sorted(fixes, key=Fix.rank_key)


# ---------------------------------------------------------------- the gang's view of the cluster


@dataclass
class GangView:
    """Per pod set: the nodes it may use now/ever and how many of its pods each can take.

    ``main`` is the index of the primary pod set (most GPUs per pod, then most pods);
    ``own_bound`` / ``own_pending``: pods of this gang already in the snapshot.
    ``need`` pods of the main shape still to place; ``placeable`` of them fit on free resources now.
    """

    pod_sets: list[PodSet]
    shapes: list[Shape]
    now_masks: list[np.ndarray]
    ever_masks: list[np.ndarray]
    k_now: list[np.ndarray]
    main: int
    own_bound: list[BoundPod]
    own_pending: list[BoundPod]
    need: int
    placeable: int
    gpu: str | None
    priority: int

    @property
    def deficit(self) -> int:
        """Pods of the main shape that have no place now (≥ 0)."""
        return max(0, self.need - self.placeable)


def is_gpu_name(resource: str, options: Any = None) -> bool:
    """True for accelerator resources (``options.is_gpu`` when given, else the default names)."""
    if options is not None and hasattr(options, "is_gpu"):
        return bool(options.is_gpu(resource))
    return resource in ("nvidia.com/gpu", "amd.com/gpu") or resource.startswith("nvidia.com/mig-")


def own_pod(gang: GangRequest, p: BoundPod) -> bool:
    """True when ``p`` belongs to ``gang`` (gang key, or owner/group name in its namespace)."""
    if p.namespace != gang.namespace:
        return False
    if p.gang and (p.gang == gang.key or p.gang.lower() == gang.key.lower()):
        return True
    tail = p.gang.rsplit("/", 1)[-1] if p.gang else ""
    return bool(gang.name) and (tail == gang.name or p.owner_name == gang.name)


def _own_test(gang: GangRequest) -> Callable[[BoundPod], bool]:
    """``lambda p: own_pod(gang, p)`` for pods of the gang's namespace, with the gang's key and
    name worked out once."""
    key = gang.key
    low = key.lower()
    name = gang.name
    ascii_key = key.isascii()

    def own(p: BoundPod) -> bool:
        g = p.gang
        if g:
            # ASCII case folding keeps lengths: a key of another length cannot match.
            if g == key or ((len(g) == len(key) or not ascii_key or not g.isascii()) and g.lower() == low):
                return True
            # The part after the last "/" is a suffix of g.
            return bool(name) and ((g.endswith(name) and g.rsplit("/", 1)[-1] == name) or p.owner_name == name)
        return bool(name) and p.owner_name == name

    return own


def gang_view(snap: ClusterSnapshot, gang: GangRequest, decision: Decision | None = None, options: Any = None) -> GangView:
    """Masks and per-node pod counts for each pod set, honouring the Kueue flavor the quota
    layer assigned (``decision.quota["flavors"]``). Units as in ``fit``.

    Raises nothing for an empty gang (``need`` is then 0).
    """
    flavors_now = ((decision.quota or {}).get("flavors") or {}) if decision is not None else {}
    transient = getattr(options, "transient_taints", frozenset())
    pod_sets = [ps for ps in gang.pod_sets if ps.count > 0]
    shapes, now_masks, ever_masks, k_now = [], [], [], []
    for ps in pod_sets:
        fname = flavors_now.get(ps.name)
        flavor = snap.kueue.flavors.get(fname) if fname else None
        c = Constraints(ps, flavor.node_labels, flavor.tolerations) if isinstance(flavor, ResourceFlavor) else Constraints(ps)
        now = filter_nodes(snap, c, ever=False).mask
        ever = filter_nodes(snap, c, ever=True, transient=transient).mask
        sh = shape_of(snap, ps.requests)
        shapes.append(sh)
        now_masks.append(now)
        ever_masks.append(ever)
        k_now.append(np.where(now, pods_per_node(snap.free, sh, ps.max_per_node), 0))

    def gpu_of(ps: PodSet) -> int:
        return max((v for r, v in ps.requests.items() if is_gpu_name(r, options)), default=0)

    main = max(range(len(pod_sets)), key=lambda i: (gpu_of(pod_sets[i]), pod_sets[i].count), default=0)
    ns = gang.namespace
    mine = _own_test(gang)
    own = [p for p in snap.pods if p.namespace == ns and mine(p)]
    own_bound = [p for p in own if p.node_name]
    own_pending = [p for p in own if not p.node_name]
    gpu = None
    need = placeable = 0
    if pod_sets:
        ps = pod_sets[main]
        gpu = next((r for r, v in ps.requests.items() if v and is_gpu_name(r, options)), None)
        same = sum(o.count for o in pod_sets if dict(o.requests) == dict(ps.requests))
        bound_same = sum(1 for p in own_bound if dict(p.requests) == dict(ps.requests))
        need = max(0, same - bound_same)
        placeable = int(k_now[main].sum())
    priority = 0
    if gang.priority_class:
        priority = snap.priority_classes.get(gang.priority_class, 0)
    elif own:
        priority = max(p.priority for p in own)
    return GangView(pod_sets, shapes, now_masks, ever_masks, k_now, main, own_bound, own_pending, need, placeable, gpu, priority)


# ---------------------------------------------------------------- victim units


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


# ---------------------------------------------------------------- PodDisruptionBudgets


def budget_members(snap: ClusterSnapshot) -> tuple[frozenset[tuple[str, str]], ...]:
    """Per budget of ``snap.disruption_budgets`` (same order): the (namespace, name) of the pods
    it selects — pods of its namespace, bound or Pending, whose labels match its selector (a
    null selector selects none, an empty one every pod). Kept on the snapshot."""
    key = ("fixes.budget_members",)
    hit = snap.recall(key)
    if hit is None:
        by_ns: dict[str, list[BoundPod]] = {}
        for p in snap.pods:
            by_ns.setdefault(p.namespace, []).append(p)
        # (namespace, label key) → label value → pods of the namespace with it: a selector with
        # matchLabels need only look at the pods carrying its first pair.
        by_label: dict[tuple[str, str], dict[str, list[BoundPod]]] = {}

        def candidates(b: DisruptionBudget) -> Iterable[BoundPod]:
            if not b.selector.match_labels:  # type: ignore[union-attr]
                return by_ns.get(b.namespace, ())
            k, v = b.selector.match_labels[0]  # type: ignore[union-attr]
            values = by_label.get((b.namespace, k))
            if values is None:
                values = by_label[(b.namespace, k)] = {}
                for p in by_ns.get(b.namespace, ()):
                    x = p.labels.get(k)
                    if x is not None:
                        values.setdefault(x, []).append(p)
            return values.get(v, ())

        hit = snap.remember(key, tuple(
            frozenset() if b.selector is None else
            frozenset((p.namespace, p.name) for p in candidates(b) if b.selector.matches(p.labels))
            for b in snap.disruption_budgets))
    return hit  # type: ignore[return-value]


def _scaled(value: int | str, expected: int) -> int:
    """An IntOrString of a budget against ``expected`` pods: an int as it is, ``"N%"`` rounded up
    (the disruption controller's GetScaledValueFromIntOrPercent with roundUp)."""
    if isinstance(value, str):
        pct = int(value.strip().rstrip("%"))
        return (pct * expected + 99) // 100
    return int(value)


def disruptions_allowed(snap: ClusterSnapshot, budget: DisruptionBudget, members: frozenset[tuple[str, str]],
                        pods: Mapping[tuple[str, str], BoundPod] | None = None) -> int:
    """Pods of ``members`` (the pods ``budget`` selects) that may be evicted without violating it:
    ``status.disruptionsAllowed`` when the object carries it, else the disruption controller's
    arithmetic — expected = selected pods, healthy = those bound, Running and not un-Ready, desired healthy =
    minAvailable, or expected − maxUnavailable, or expected when neither is set; allowed =
    max(0, healthy − desired). ``pods``: ``{(p.namespace, p.name): p for p in snap.pods}``, when
    the caller has it (one map for every budget)."""
    if budget.disruptions_allowed is not None:
        return max(0, int(budget.disruptions_allowed))
    expected = len(members)
    if pods is None:
        pods = {(p.namespace, p.name): p for p in snap.pods}
    # Healthy as the disruption controller counts it: Running and Ready (readiness unknown → healthy).
    healthy = sum(1 for k in members if (p := pods.get(k)) is not None and p.node_name and p.phase == "Running"
                  and p.ready is not False)
    if budget.min_available is not None:
        desired = _scaled(budget.min_available, expected)
    elif budget.max_unavailable is not None:
        desired = max(0, expected - _scaled(budget.max_unavailable, expected))
    else:
        desired = expected
    return max(0, healthy - desired)


def _budget_index(snap: ClusterSnapshot) -> tuple[dict[tuple[str, str], list[int]], list[int]]:
    """(pod (namespace, name) → indices of the budgets selecting it, disruptions allowed per
    budget); kept on the snapshot."""
    key = ("fixes.budget_index",)
    hit = snap.recall(key)
    if hit is None:
        members = budget_members(snap)
        of_pod: dict[tuple[str, str], list[int]] = {}
        for bi, m in enumerate(members):
            for k in m:
                of_pod.setdefault(k, []).append(bi)
        pods = {}  # one map for every budget without a status
        if any(b.disruptions_allowed is None for b in snap.disruption_budgets):
            pods = {(p.namespace, p.name): p for p in snap.pods}
        allowed = [disruptions_allowed(snap, b, m, pods) for b, m in zip(snap.disruption_budgets, members)]
        hit = snap.remember(key, (of_pod, allowed))
    return hit  # type: ignore[return-value]


def _budget_hits(snap: ClusterSnapshot, pods: Iterable[BoundPod]) -> tuple[tuple[int, int, int], ...]:
    """``Unit.budgets`` of a unit with these pods: (budget index, pods of them it selects, its
    disruptions allowed) per budget selecting any, by budget index."""
    of_pod, allowed = _budget_index(snap)
    counts: dict[int, int] = {}
    for k in {(p.namespace, p.name) for p in pods}:
        for bi in of_pod.get(k, ()):
            counts[bi] = counts.get(bi, 0) + 1
    return tuple((bi, counts[bi], allowed[bi]) for bi in sorted(counts))


def _violations(units: Sequence[Unit], chosen: Iterable[int]) -> int:
    """PDB violations of evicting the chosen units together: their ``pdb`` summed, plus the
    budgets whose selected pods among all of them exceed the budget's allowance."""
    fixed = 0
    evicted: dict[int, int] | None = None
    allowed: dict[int, int] = {}
    for i in chosen:
        u = units[i]
        fixed += u.pdb
        if u.budgets:
            if evicted is None:
                evicted = {}
            for bi, n, a in u.budgets:
                evicted[bi] = evicted.get(bi, 0) + n
                allowed[bi] = a
    if evicted:
        for bi, n in evicted.items():
            if n > allowed[bi]:
                fixed += 1
    return fixed


def pdb_violations(snap: ClusterSnapshot, pods: Iterable[BoundPod]) -> int:
    """Budgets of ``snap.disruption_budgets`` that evicting all of ``pods`` at once would
    violate: more of their selected pods evicted than they allow (``disruptions_allowed``)."""
    if not snap.disruption_budgets:
        return 0
    of_pod, allowed = _budget_index(snap)
    evicted: dict[int, int] = {}
    for k in {(p.namespace, p.name) for p in pods}:
        for bi in of_pod.get(k, ()):
            evicted[bi] = evicted.get(bi, 0) + 1
    return sum(1 for bi, n in evicted.items() if n > allowed[bi])


# ---------------------------------------------------------------- the k-union search


def set_cost(units: Sequence[Unit], chosen: Iterable[int]) -> tuple:
    """Lexicographic cost of evicting the chosen units (indices): see the module doc.

    PDB violations are those of the whole set: the units' ``pdb`` summed, plus each budget whose
    selected pods among all chosen units exceed its allowance (``Unit.budgets``), counted once.
    """
    chosen = list(chosen)
    if not chosen:
        return (0, _NEG_INF, 0, 0, 0, 0.0)
    tenants: set[str] = set()
    pdb = pods = gpus = 0
    hours = 0.0
    prio = _NEG_INF
    budgeted = False
    for i in chosen:
        u = units[i]
        pdb += u.pdb
        if u.budgets:
            budgeted = True
        prio = max(prio, u.priority)
        tenants |= u.tenants
        pods += len(u.pods)
        gpus += u.gpus
        hours += u.hours
    if budgeted:
        pdb = _violations(units, chosen)
    return (pdb, prio, len(tenants), pods, gpus, round(hours, 6))


def _pack_cost(packs: Sequence[tuple], chosen: Iterable[int]) -> tuple:
    """``set_cost(units, chosen)`` from the units' ``_unit_pack``: the same sums, in the same order."""
    chosen = list(chosen)
    if not chosen:
        return (0, _NEG_INF, 0, 0, 0, 0.0)
    tenants: set[str] = set()
    pdb = pods = gpus = 0
    hours = 0.0
    prio = _NEG_INF
    budgeted = False
    for i in chosen:
        _, names, budgets, p, h, _, _, top, n, g = packs[i]
        pdb += p
        if budgets:
            budgeted = True
        prio = max(prio, top)
        tenants |= names
        pods += n
        gpus += g
        hours += h
    if budgeted:  # _violations, over the packs
        pdb = 0
        evicted: dict[int, int] = {}
        allowed: dict[int, int] = {}
        for i in chosen:
            _, _, budgets, p, *_ = packs[i]
            pdb += p
            for bi, n, a in budgets:
                evicted[bi] = evicted.get(bi, 0) + n
                allowed[bi] = a
        pdb += sum(1 for bi, n in evicted.items() if n > allowed[bi])
    return (pdb, prio, len(tenants), pods, gpus, round(hours, 6))


class _Gain:
    """Pods of the shape gained on each node when units are removed (incremental)."""

    def __init__(self, avail: Mapping[int, tuple[int, ...]], vals: Sequence[int], max_per_node: int | None) -> None:
        self.avail = avail
        self.vals = tuple(int(v) for v in vals)
        self.cap = max_per_node
        self.base = {i: self.k(a) for i, a in avail.items()}

    def k(self, a: Sequence[int]) -> int:
        k = min([(x if x > 0 else 0) // v for x, v in zip(a, self.vals)])
        return min(k, self.cap) if self.cap is not None else k

    def ksum(self, a: Sequence[int], b: Sequence[int]) -> int:
        """``k`` of ``a + b`` (elementwise, as long as the shorter of them and ``vals``)."""
        k = min([(s // v if (s := x + y) > 0 else 0) for x, y, v in zip(a, b, self.vals)])
        return min(k, self.cap) if self.cap is not None else k

    def of(self, units: Sequence[Unit], chosen: Iterable[int]) -> int:
        """Total pods gained on the candidate nodes when ``chosen`` units are evicted."""
        removed: dict[int, list[int]] = {}
        avail, width = self.avail, len(self.vals)
        for ui in chosen:
            for n, use in units[ui].use.items():
                if n not in avail:
                    continue
                row = removed.get(n)
                if row is None:
                    row = removed[n] = [0] * width
                for j, x in enumerate(use):
                    row[j] += x
        total = 0
        for n, row in removed.items():
            a = self.avail[n]
            total += self.k([x + y for x, y in zip(a, row)]) - self.base[n]
        return total


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


#: The search's fast paths (``_Prep.regular``) are on; off, every input takes the plain paths
#: (the same answers: tests compare the two).
_FAST_PATHS = True


class _Prep:
    """What one ``choose_victims`` call works out once about its units on the candidate nodes
    (``g.avail``), for the searches and their fast paths.

    ``on_node``: candidate node → indices of the units with a row there, in index order (the
    map ``node_local_victims`` builds); ``span_on[n]``: those of them with rows on other
    candidate nodes too. ``one[ui]``: the only candidate node unit ``ui`` has a row on (None when
    it has several or none) and ``row1[ui]`` its row there. ``pack[ui]``: its ``_unit_pack``,
    ``fields``: the packs' fields side by side, ``cost[ui]``: ``set_cost(units, [ui])`` (the
    pack's first field), ``hours``: the GPU-hours. ``all_local``: every unit is ``node_local``.

    ``regular``: the shape's amounts are > 0, and every row (the candidate nodes' free rows, the
    units' rows on them) has the shape's width and, for the units, no negative amount. Then a
    node's pods of the shape never fall as units are evicted from it, which the fast paths rely
    on: ``top[n]`` (pods node n holds once every unit on it is evicted) bounds what any set of
    its units can gain (a node whose pods reached it gains nothing more; nor does a bundle there),
    and a bundle of units on one node adds one summed row (``bundle``). Irregular input takes the
    plain paths throughout, with the same answers.

    ``scan`` (vectorised when amounts fit int64 safely): ``top``, ``total`` (pods gained when every
    unit is evicted, ``_Gain.of`` of all), ``gaining`` (``_gaining_alone``), and for nodes with more
    than 10 units their cheapest-first order, its rows and the first prefix that gains a pod
    (the initial per-node bundles) with its ``bundle`` sums; ``entries`` keeps these per node
    (index-free, so a later call on the same memo reuses them for an unchanged node).
    ``_FAST_PATHS`` False turns the fast paths off (tests compare both).
    """

    def __init__(self, units: Sequence[Unit], g: _Gain, packs: Sequence[tuple] | None = None) -> None:
        avail, vals = g.avail, g.vals
        on_node: dict[int, list[int]] = {}
        one: list[int | None] = [None] * len(units)
        row1: list[Any] = [None] * len(units)
        span_on: dict[int, list[int]] = {}
        all_local = True
        get = on_node.get
        self.pack = packs = [_unit_pack(u) for u in units] if packs is None else packs
        # The packs' fields side by side (each pack read once).
        fields = list(zip(*packs)) if packs else [()] * 10
        rows = fields[6]
        for ui, n in enumerate(fields[5]):
            if n is not None:
                if n in avail:
                    lst = get(n)
                    if lst is None:
                        on_node[n] = [ui]
                    else:
                        lst.append(ui)
                    one[ui] = n
                    row1[ui] = rows[ui]
                continue
            use = units[ui].use
            if use:
                all_local = False
            inside = []
            for n, row in use.items():
                if n in avail:
                    lst = get(n)
                    if lst is None:
                        on_node[n] = [ui]
                    else:
                        lst.append(ui)
                    inside.append((n, row))
            if len(inside) == 1:
                one[ui], row1[ui] = inside[0]
            else:
                for n, _ in inside:
                    span_on.setdefault(n, []).append(ui)
        self.units, self.g = units, g
        self.on_node, self.span_on, self.one, self.row1 = on_node, span_on, one, row1
        self.all_local = all_local
        # Settled by ``scan`` (the units' rows are checked there).
        self.regular = _FAST_PATHS and len(vals) > 0 and min(vals) > 0 and all(len(a) == len(vals) for a in avail.values())
        self.fields = fields
        self.cost = list(fields[0])
        # The units' GPU-hours as fresh floats side by side (the same values): summed often.
        self.hours: list[float] = np.array(fields[4], dtype=np.float64).tolist()
        self.top: dict[int, int] | None = None
        self.total: int | None = None
        self.gaining: list[int] | None = None
        self.orders: dict[int, list[int]] = {}
        self.rows: dict[int, np.ndarray] = {}
        self.first: dict[int, int] = {}
        # bundle (frozenset of unit indices) → (node, summed row, Σ pdb, max priority, Σ pods,
        # Σ GPUs, tenants, any budgets) when all its units have rows on that one node only, else False
        self.bundles: dict[frozenset[int], Any] = {}
        self.entries: dict[int, list] = {}  # node → its ``_scan_nodes`` result (regular input)

    def scan(self, memo: dict | None = None) -> None:
        """Settle ``regular``; fill ``top``, ``total``, ``gaining`` and the big nodes' orders (see
        the class doc). ``memo``: see ``choose_victims``; a node whose free row and units (their
        packs: the same objects, or equal ones; the same ones spanning) are those of an earlier
        call reuses its results (they are worked out from the packs alone)."""
        units, g, on_node = self.units, self.g, self.on_node
        avail, span_on = g.avail, self.span_on
        if not self.regular or not on_node:
            self.regular = False
            self.total = g.of(units, range(len(units)))
            return
        cache = memo.setdefault(("search", g.vals, g.cap), {}) if memo is not None else None
        packs = self.pack
        hits: dict[int, list] = {}
        todo = list(on_node)
        if cache:
            todo = []
            for n, uis in on_node.items():
                e = cache.get(n)
                if (e is not None and e[0] == avail[n] and e[1] == tuple(map(packs.__getitem__, uis))
                        and e[2] == tuple(map(packs.__getitem__, span_on.get(n, ())))):
                    hits[n] = e
                else:
                    todo.append(n)
        fresh = self._scan_nodes(todo) if todo else {}
        if fresh is None:
            return  # irregular, or amounts past int64: settled by _scan_nodes
        if cache is not None:
            for n, e in fresh.items():
                cache[n] = e
        top: dict[int, int] = {}
        total = 0
        gaining = set()
        base = g.base
        for n, uis in on_node.items():
            e = hits.get(n) or fresh[n]
            _, _, _, perm, first, t, alone, rows, _ = e
            top[n] = t
            total += t - base[n]
            if perm is not None:
                self.orders[n] = [uis[j] for j in perm]
                self.first[n] = first
                self.rows[n] = rows
            for j in alone:
                gaining.add(uis[j])
        self.top, self.total = top, total
        self.entries = {n: hits.get(n) or fresh[n] for n in on_node}
        # Units gaining alone: one-node units from the node results, the others as _gaining_alone does.
        spanning = {ui for lst in span_on.values() for ui in lst}
        for ui in spanning:
            d = 0
            for n, use in units[ui].use.items():
                if n in avail:
                    d += g.ksum(avail[n], use) - base[n]
            if d > 0:
                gaining.add(ui)
        self.gaining = sorted(gaining)

    def _scan_nodes(self, nodes: list[int]) -> dict[int, list] | None:
        """Per node of ``nodes``: [free row, units' packs, spanning units' packs, cheapest-first
        order (as positions in ``on_node[n]``, nodes with more than 10 units; else None), first
        prefix of it that gains a pod (-1: none), ``top``, positions of its one-node units gaining
        alone, the order's rows (int64), the first bundle's ``bundle`` (set by ``choose_victims``)].
        Vectorised over all the nodes; None (``regular`` and ``total`` settled) when the rows are
        irregular or too large for int64."""
        units, g, on_node = self.units, self.g, self.on_node
        avail, one, row1, span_on, packs = g.avail, self.one, self.row1, self.span_on, self.pack
        width = len(g.vals)
        cost = self.cost
        flat: list[Any] = []
        lens: list[int] = []
        perms: list[list[int] | None] = []
        seqs: list[list[int]] = []
        for n in nodes:
            uis = on_node[n]
            if len(uis) > 10:
                perm = sorted(range(len(uis)), key=[cost[ui] for ui in uis].__getitem__)
                perms.append(perm)
                seq = [uis[j] for j in perm]
            else:
                perms.append(None)
                seq = uis
            seqs.append(seq)
            lens.append(len(uis))
            if n in span_on:
                flat.extend([row1[ui] if one[ui] is not None else units[ui].use[n] for ui in seq])
            else:
                flat.extend(map(row1.__getitem__, seq))
        m = None
        regular = set(map(len, flat)) <= {width}
        if regular:
            try:
                m = np.fromiter(itertools.chain.from_iterable(flat), dtype=np.int64, count=len(flat) * width).reshape(len(flat), width)
                a = np.array([avail[n] for n in nodes], dtype=np.int64).reshape(len(nodes), width)
            except OverflowError:
                m = None
            regular = min(map(min, flat)) >= 0 if m is None else int(m.min()) >= 0
        if not regular:
            self.regular = False
            self.total = g.of(units, range(len(units)))
            return None
        # Running sums over all the rows (≥ 0), plus a free row, stay exact in int64 below these bounds.
        if m is None or (int(m.max()) + 1) * (len(flat) + 1) >= 2**62 or max(-int(a.min()), int(a.max())) >= 2**61:
            self._scan_python()
            return None
        lens_a = np.array(lens, dtype=np.int64)
        ends = np.cumsum(lens_a)
        starts = ends - lens_a
        cs = np.cumsum(m, axis=0)
        before = np.zeros((len(nodes), width), dtype=np.int64)
        before[1:] = cs[ends[:-1] - 1]
        a_rep = np.repeat(a - before, lens_a, axis=0)
        v = np.array(g.vals, dtype=np.int64)
        base = np.array([g.base[n] for n in nodes], dtype=np.int64)
        base_rep = np.repeat(base, lens_a)
        k = (np.maximum(cs + a_rep, 0) // v).min(axis=1)          # each node's prefix sums
        k1 = (np.maximum(m + np.repeat(a, lens_a, axis=0), 0) // v).min(axis=1)   # each row alone
        if g.cap is not None:
            k = np.minimum(k, g.cap)
            k1 = np.minimum(k1, g.cap)
        top = k[ends - 1].tolist()
        gain = np.flatnonzero(k > base_rep)
        seg = np.searchsorted(ends, gain, side="right")           # the node of each gaining prefix
        firsts = {}
        if len(gain):
            first_of = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
            firsts = dict(zip(seg[first_of].tolist(), (gain[first_of] - starts[seg[first_of]]).tolist()))
        alone = (k1 > base_rep).tolist()
        infos = self._first_bundles(nodes, perms, seqs, firsts, starts, cs, before)
        out: dict[int, list] = {}
        pos = 0
        for si, n in enumerate(nodes):
            uis, perm, size = on_node[n], perms[si], lens[si]
            hit = alone[pos:pos + size]
            if perm is None:
                gains = [j for j in range(size) if hit[j] and one[uis[j]] is not None]
            else:
                gains = [j for j, h in zip(perm, hit) if h and one[uis[j]] is not None]
            out[n] = [avail[n], tuple(map(packs.__getitem__, uis)), tuple(map(packs.__getitem__, span_on.get(n, ()))), perm,
                      firsts.get(si, -1), top[si], gains, m[pos:pos + size] if perm is not None else None, infos.get(si)]
            pos += size
        return out

    def _first_bundles(self, nodes: list[int], perms: list, seqs: list[list[int]], firsts: dict[int, int], starts: np.ndarray,
                       cs: np.ndarray, before: np.ndarray) -> dict[int, tuple]:
        """``bundle`` of the first bundle (cheapest-first prefix up to ``firsts``) of each node of
        ``nodes`` (by position) that has an order, two units or more in it and no spanning unit:
        its row from the running sums ``cs``, the rest summed by unit index — the numbers
        ``bundle`` adds up one bundle at a time. {} when a field is not int64 throughout."""
        f = self.fields
        big = [(si, fi) for si, fi in firsts.items() if fi >= 1 and perms[si] is not None and nodes[si] not in self.span_on]
        if not big:
            return {}
        cols = []
        for j in (3, 7, 8, 9):  # pdb, priority, pods, GPUs
            a = np.array(f[j])
            if a.dtype != np.int64:
                return {}
            cols.append(a)
        budgeted = np.fromiter(map(bool, f[2]), dtype=bool, count=len(f[2]))
        if max(max(-int(a.min()), int(a.max())) for a in cols) * (len(f[2]) + 1) >= 2**62:
            return {}
        sis = [si for si, _ in big]
        ends = [fi for _, fi in big]
        idx = np.array([ui for (si, fi) in big for ui in seqs[si][: fi + 1]], dtype=np.intp)  # the bundles' units, one after another
        lens = np.array(ends, dtype=np.int64) + 1
        lo = np.cumsum(lens) - lens
        pdb = np.add.reduceat(cols[0][idx], lo).tolist()
        prio = np.maximum.reduceat(cols[1][idx], lo).tolist()
        pods = np.add.reduceat(cols[2][idx], lo).tolist()
        gpus = np.add.reduceat(cols[3][idx], lo).tolist()
        bud = np.logical_or.reduceat(budgeted[idx], lo).tolist()
        rows = (cs[starts[sis] + np.array(ends, dtype=np.int64)] - before[sis]).tolist()
        names = f[1]
        out = {}
        for b, (si, fi) in enumerate(big):
            out[si] = (nodes[si], tuple(rows[b]), pdb[b], prio[b], pods[b], gpus[b],
                       frozenset().union(*map(names.__getitem__, seqs[si][: fi + 1])), bud[b])
        return out

    def _scan_python(self) -> None:
        """``scan`` for amounts too large for int64: ``top`` and ``total`` in Python ints."""
        units, g = self.units, self.g
        top = {}
        total = 0
        for n, uis in self.on_node.items():
            row = list(g.avail[n])
            for ui in uis:
                use = self.row1[ui] if self.one[ui] is not None else units[ui].use[n]
                for j, x in enumerate(use):
                    row[j] += x
            top[n] = g.k(row)
            total += top[n] - g.base[n]
        self.top, self.total = top, total

    def saturated(self, n: int, k_now: int) -> bool:
        """True when node n (pods of the shape ``k_now`` now) can gain nothing more from its units."""
        top = self.top
        return top is not None and k_now >= top[n]

    def bundle(self, c: frozenset[int]):
        """The summed data of bundle ``c`` when its units all sit on one candidate node only
        (see ``bundles``), else False."""
        info = self.bundles.get(c)
        if info is None:
            info = False
            nodes = set(map(self.one.__getitem__, c))
            if self.regular and len(nodes) == 1 and None not in nodes:
                f = self.fields  # the packs' fields, by unit index
                info = (next(iter(nodes)), tuple(map(sum, zip(*map(self.row1.__getitem__, c)))), sum(map(f[3].__getitem__, c)),
                        max(map(f[7].__getitem__, c)), sum(map(f[8].__getitem__, c)), sum(map(f[9].__getitem__, c)),
                        frozenset().union(*map(f[1].__getitem__, c)), any(map(f[2].__getitem__, c)))
            self.bundles[c] = info
        return info


def brute_force_victims(units: Sequence[Unit], avail: Mapping[int, tuple[int, ...]], vals: Sequence[int], need: int,
                        max_per_node: int | None = None) -> list[int] | None:
    """The exact minimum-cost set of unit indices gaining ≥ ``need`` pods (every subset tried).

    Exponential: for ``len(units) ≤ EXACT_UNITS`` and for tests. None when even evicting every
    unit gains too little. Ties broken by fewer units, then lower indices.
    """
    if need <= 0:
        return []
    g = _Gain(avail, vals, max_per_node)
    best, best_cost = None, None
    n = len(units)
    for size in range(1, n + 1):
        for combo in itertools.combinations(range(n), size):
            c = set_cost(units, combo)
            if best_cost is not None and c >= best_cost:
                continue
            if g.of(units, combo) >= need:
                best, best_cost = list(combo), c
    return best


def choose_victims(units: Sequence[Unit], avail: Mapping[int, tuple[int, ...]], vals: Sequence[int], need: int,
                   max_per_node: int | None = None, *, exact_limit: int = EXACT_UNITS, max_swaps: int = 200,
                   memo: dict | None = None, packs: Sequence[tuple] | None = None) -> list[int] | None:
    """Units (indices) to evict so the candidate nodes gain ≥ ``need`` pods of the shape.

    Args:
        units: candidate victim units (``victim_units``).
        avail: node index → free resources now, in the shape's column order (ints).
        vals: the shape's per-pod request, same order. need: pods to gain.
        exact_limit: at most this many units → exact enumeration (``brute_force_victims``).
        memo: a dict passed to several calls (``compute_fixes`` passes its ``victim_units``
            memo): per-node results (cheapest-first order, first bundle, pods when emptied) are
            reused by a later call for a node with the same free row and the same units there
            (compared by their packs).
        packs: the units' ``_unit_pack``, when the caller has them (``victim_units`` makes them).

    Returns:
        Unit indices (sorted), or None when evicting all of them gains fewer than ``need`` pods.

    Greedy: candidates are single units and, per node, the cheapest bundle of units that frees
    one pod there; each step takes the candidate of least marginal cost per pod gained
    (PDB violations and priority compared as totals/maxima of the set it makes — violations
    counted over the union, ``set_cost`` — the rest per pod gained). Then local search:
    drop units that are not needed, swap one unit for one candidate while the cost falls.
    When the answer evicts pods a PodDisruptionBudget selects, up to three more greedy passes
    (sparing allowances, or free up to the violations already found) run and the cheapest
    answer wins, for up to ``BUDGET_PASS_UNITS`` units; without budgets there is one pass.

    Work: the per-unit and per-node data every pass uses (``_Prep``: unit costs, the units of
    each node, the first per-node bundles, vectorised) is worked out once per call; a node whose
    pods of the shape cannot grow any more (every unit left on it evicted would not add one) is
    not searched again, and a bundle of units on one node is costed from its summed row.
    """
    if need <= 0:
        return []
    if len(units) <= exact_limit:
        best = brute_force_victims(units, avail, vals, need, max_per_node)
        return None if best is None else sorted(best)
    g = _Gain(avail, vals, max_per_node)
    prep = _Prep(units, g, packs)
    if prep.all_local:
        local = node_local_victims(units, g, need, on_node=prep.on_node)
        if local is not None:
            return local
    prep.scan(memo)
    if prep.total < need:  # type: ignore[operator]
        return None
    # Candidates: single units, and per node the cheapest bundle that gains a pod there.
    on_node = prep.on_node
    unit_cost = prep.cost.__getitem__
    top, base = prep.top, g.base

    # Nodes with many units take the cheapest-first bundle: their units in that order and their
    # rows as one int64 matrix are worked out once per node (None: amounts too large for int64).
    prefix_rows: dict[int, tuple[list[int], np.ndarray | None]] = {}

    def node_bundle(n: int, rest: list[int], removed: Sequence[int] | None) -> list[int] | None:
        """``_node_bundle(units, rest, n, g, removed)``; ``rest``: units of ``on_node[n]``, in order."""
        if len(rest) <= 10:
            return _node_bundle(units, rest, n, g, removed, unit_cost=unit_cost)
        hit = prefix_rows.get(n)
        if hit is None:
            order_all = prep.orders.get(n)
            if order_all is None:
                order_all = sorted(on_node[n], key=unit_cost)
                rows = _int64_rows([units[ui].use.get(n, ()) for ui in order_all], g)
            else:
                rows = prep.rows.get(n)
                if rows is None or len(order_all) > 256:
                    rows = _int64_rows([units[ui].use.get(n, ()) for ui in order_all], g)
            hit = prefix_rows[n] = (order_all, rows)
        order_all, rows = hit
        start = list(avail[n]) if removed is None else [x + y for x, y in zip(avail[n], removed)]
        if rows is None or len(start) != len(g.vals) or max(abs(x) for x in start) >= _SAFE_INT:
            return _node_bundle(units, rest, n, g, removed, unit_cost=unit_cost)
        if len(rest) == len(order_all):
            order = order_all
        else:  # sorting is stable: the cheapest-first order of ``rest`` is order_all without the others
            keep = set(rest)
            mask = [ui in keep for ui in order_all]
            order = [ui for ui, m in zip(order_all, mask) if m]
            rows = rows[np.array(mask, dtype=bool)]
        k = (np.maximum(np.cumsum(rows, axis=0) + np.array(start, dtype=np.int64), 0) // np.array(g.vals, dtype=np.int64)).min(axis=1)
        if g.cap is not None:
            k = np.minimum(k, g.cap)
        gain = np.flatnonzero(k > g.k(start))
        return order[: int(gain[0]) + 1] if len(gain) else None

    bundles: dict[int, frozenset[int]] = {}
    for n, uis in on_node.items():
        if len(uis) > 1:
            if top is not None and top[n] <= base[n]:
                continue  # nothing on n gains a pod there
            f = prep.first.get(n)
            if f is not None:  # the scan found the first cheapest-first prefix that gains
                b = prep.orders[n][: f + 1] if f >= 0 else None
            else:
                b = node_bundle(n, uis, None)
            if b and len(b) > 1:
                c = bundles[n] = frozenset(b)
                e = prep.entries.get(n)
                if e is not None:  # its summed data, kept with the node's results (index-free)
                    if e[8] is None:
                        e[8] = prep.bundle(c)
                    else:
                        prep.bundles[c] = e[8]
    bundles0 = bundles
    gaining = prep.gaining if prep.gaining is not None else _gaining_alone(units, g)

    def greedy(avoid: int = 0, slack: int = 0) -> set[int] | None:
        """Lazy greedy then local search. ``avoid`` 1 or 2: rank candidates by the pods they
        evict from budgets not yet violated (per pod gained) right after violations (1) or after
        violations and priority (2), so allowances are kept for where they are needed.
        ``slack``: violations up to this many (known to be reachable) rank as none, so priority
        and the rest decide among them."""
        st = _State(units, g, avail, prep)
        bundles = dict(bundles0)
        chosen = st.chosen
        bundle_of = prep.bundle if prep.regular else None

        def key_of(c: int | frozenset[int]):
            # A candidate is a unit index (a single unit, the common case) or a bundle (frozenset).
            if type(c) is int:
                ui = c
                if ui in chosen:
                    return None
                d = st.delta_one(ui)
                if d <= 0:
                    return None
                nc = st.cost_with_one(ui)
            else:
                extra = c - chosen
                if not extra:
                    return None
                info = bundle_of(c) if bundle_of is not None else False
                if info and len(extra) != len(c):
                    if prep.saturated(info[0], st._k_now(info[0])):
                        return None  # its units left gain nothing on the one node they sit on
                    info = False
                if info:
                    d = st.delta_row(info[0], info[1])
                    if d <= 0:
                        return None
                    nc = st.cost_with(extra) if info[7] else st.cost_with_bundle(extra, info)
                else:
                    d = st.delta_add(extra)
                    if d <= 0:
                        return None
                    nc = st.cost_with(extra)
            eff = max(1, min(d, need - st.gained))
            cur = st.cost()
            if avoid:
                spent = st.budget_pods([c] if type(c) is int else extra) / eff
                head = (nc[0], spent, nc[1]) if avoid == 1 else (nc[0], nc[1], spent)
                return head + ((nc[2] - cur[2]) / eff, (nc[3] - cur[3]) / eff, (nc[4] - cur[4]) / eff, (nc[5] - cur[5]) / eff, -d)
            if slack:
                return (max(nc[0], slack), nc[1], (nc[2] - cur[2]) / eff, (nc[3] - cur[3]) / eff, (nc[4] - cur[4]) / eff,
                        (nc[5] - cur[5]) / eff, -d)
            return (nc[0], nc[1], (nc[2] - cur[2]) / eff, (nc[3] - cur[3]) / eff, (nc[4] - cur[4]) / eff, (nc[5] - cur[5]) / eff, -d)

        # Lazy greedy: keys are re-evaluated when popped; a candidate whose fresh key still beats
        # the next stale key is taken.
        heap: list = []
        seq = itertools.count()
        # A single unit that gains nothing alone has no key: only those that do are keyed at first.
        for c in itertools.chain(gaining, set(bundles.values())):
            k = key_of(c)
            if k is not None:
                heapq.heappush(heap, (k, next(seq), c))
        while st.gained < need:
            best = None
            while heap:
                _, _, c = heapq.heappop(heap)
                k = key_of(c)
                if k is None:
                    continue
                if not heap or k <= heap[0][0]:
                    best = {c} if type(c) is int else c - st.chosen
                    break
                heapq.heappush(heap, (k, next(seq), c))
            if best is None:
                # Stale keys may have dropped candidates whose gain became positive: rescan once.
                for c in itertools.chain(range(len(units)), set(bundles.values())):
                    k = key_of(c)
                    if k is not None:
                        heapq.heappush(heap, (k, next(seq), c))
                if not heap:
                    return None
                continue
            info = None
            if bundle_of is not None and type(c) is not int and len(best) == len(c):
                info = bundle_of(c) or None
            touched = st.add(best, info)
            # A node that can gain nothing more keeps no candidate there but its spanning units
            # (which may still gain elsewhere): the others would get no key.
            for n in touched:
                lst = prep.span_on.get(n, ()) if prep.saturated(n, st.cur_k[n]) else on_node.get(n, ())
                for ui in lst:
                    if ui not in chosen:
                        k = key_of(ui)
                        if k is not None:
                            heapq.heappush(heap, (k, next(seq), ui))
            # Bundles on the nodes that changed are recomputed against their new state.
            for n in touched:
                if prep.saturated(n, st.cur_k[n]):
                    bundles.pop(n, None)
                    continue
                rest = [ui for ui in on_node.get(n, ()) if ui not in chosen]
                b = node_bundle(n, rest, st.removed.get(n)) if len(rest) > 1 else None
                if b and len(b) > 1:
                    bundles[n] = frozenset(b)
                    k = key_of(bundles[n])
                    if k is not None:
                        heapq.heappush(heap, (k, next(seq), bundles[n]))
                else:
                    bundles.pop(n, None)
        def cand_list() -> list[frozenset[int]]:
            return [frozenset([ui]) for ui in range(len(units))] + sorted(set(bundles.values()), key=lambda c: (len(c), sorted(c)))

        return _local_search(units, g, set(st.chosen), need, cand_list, max_swaps, unit_cost=unit_cost, prep=prep)

    found = greedy()
    if found is not None and len(units) <= BUDGET_PASS_UNITS and any(units[ui].budgets for ui in found):
        # The greedy is myopic about budgets: taking a budget's pods early may spend the
        # allowance a later, necessary unit needed; avoiding a violation early (at the price of
        # a higher priority) is wasted when one comes later anyway. When its answer evicts pods
        # a budget selects, passes spending allowances last (before or after priority), and
        # when it violates a budget one free to reach the violations already found, may do
        # better; the lowest ``set_cost`` wins.
        cost = set_cost(units, found)
        for avoid in (1, 2, 0):
            if not avoid and cost[0] == 0:
                break
            other = greedy(avoid=avoid, slack=0 if avoid else cost[0])
            if other is not None:
                oc = set_cost(units, other)
                if oc < cost:
                    found, cost = other, oc
    return None if found is None else sorted(found)


def _gaining_alone(units: Sequence[Unit], g: _Gain) -> list[int]:
    """Indices of the units whose eviction alone gains pods of the shape (nothing evicted yet),
    in index order: ``_State.delta_one(ui) > 0`` for a fresh state, vectorised for the units on
    one candidate node (int64; Python ints for amounts too large for it)."""
    avail, vals = g.avail, g.vals
    width = len(vals)
    local: list[int] = []
    rows: list[tuple[int, ...]] = []
    uses: list[tuple[int, ...]] = []
    bases: list[int] = []
    other: list[int] = []
    for ui, u in enumerate(units):
        use = u.use
        if len(use) == 1:
            (n, row), = use.items()
            if n not in avail:
                continue  # gains nothing on the candidate nodes
            if len(row) == width:
                local.append(ui)
                rows.append(avail[n])
                uses.append(row)
                bases.append(g.base[n])
                continue
        other.append(ui)
    gaining = set()
    if local and width:
        try:
            a = np.array(rows, dtype=np.int64)
            b = np.array(uses, dtype=np.int64)
            v = np.array(vals, dtype=np.int64)
        except OverflowError:
            a = None
        if a is not None and max(abs(int(a.min())), int(a.max()), abs(int(b.min())), int(b.max())) < 2**62:
            k = (np.maximum(a + b, 0) // v).min(axis=1)
            if g.cap is not None:
                k = np.minimum(k, g.cap)
            gaining.update(np.array(local)[k > np.array(bases, dtype=np.int64)].tolist())
        else:
            other.extend(local)
    else:
        other.extend(local)
    for ui in other:
        d = 0
        for n, use in units[ui].use.items():
            if n in avail:
                d += g.k([x + y for x, y in zip(avail[n], use)]) - g.base[n]
        if d > 0:
            gaining.add(ui)
    return sorted(gaining)


#: Units on one node beyond which the node-local search falls back to the greedy.
NODE_LOCAL_SUBSETS = 10
#: With PodDisruptionBudgets, the node-local search falls back to the greedy when its knapsack
#: would hold more than this many states (pods gained × pods evicted per budget, see below)
#: summed over the nodes.
NODE_LOCAL_BUDGET_WORK = 200_000


def node_local_victims(units: Sequence[Unit], g: "_Gain", need: int, *, on_node: dict[int, list[int]] | None = None) -> list[int] | None:
    """Exact victims when every unit sits on one node (FIELD-NOTES §7: node-local victims make
    the choice per node independent).

    Per node, every subset of its units gives a gain (pods of the shape freed there) and a
    cost; a knapsack over nodes (state: pods gained, capped at ``need``) minimises
    (Σ PDB violations, Σ pods, Σ GPUs, Σ GPU-hours) for each ceiling on victim priority, and the
    ceiling with the least overall lexicographic cost (``set_cost``) wins. Exact when one tenant
    is involved; with several, tenants are counted after the fact. Returns sorted unit indices,
    or None when a node carries more than ``NODE_LOCAL_SUBSETS`` units (then use the greedy).

    PodDisruptionBudgets (``Unit.budgets``) tie nodes together — a budget's allowance is shared
    by the pods it selects on every node — so the state also carries the pods evicted per budget
    (each capped at its allowance + 1: past that the budget is violated whatever follows) and a
    final state's violations are counted from it, once per budget; still exact. None as well
    when that knapsack would exceed ``NODE_LOCAL_BUDGET_WORK`` states.

    ``on_node``: candidate node → indices of the units with a row there (index order), when the
    caller has it (``_Prep.on_node``).
    """
    if on_node is None:
        on_node = {}
        for ui, u in enumerate(units):
            for n in u.use:
                if n in g.avail:
                    on_node.setdefault(n, []).append(ui)
    if any(len(v) > NODE_LOCAL_SUBSETS for v in on_node.values()):
        return None
    # Budgets touched: position in the footprint tuple, and the cap (allowance + 1) of each.
    allowed: dict[int, int] = {}
    for u in units:
        for bi, _, a in u.budgets:
            allowed[bi] = a
    bis = sorted(allowed)
    pos = {bi: j for j, bi in enumerate(bis)}
    caps = tuple(allowed[bi] + 1 for bi in bis)
    zero = (0,) * len(bis)
    if bis:
        states = need + 1
        for c in caps:
            states *= c + 1
        if states * len(on_node) > NODE_LOCAL_BUDGET_WORK:
            return None

    def footprint(combo: Sequence[int]) -> tuple[int, ...]:
        if not bis:
            return zero
        fp = list(zero)
        for i in combo:
            for bi, n, _ in units[i].budgets:
                j = pos[bi]
                fp[j] = min(caps[j], fp[j] + n)
        return tuple(fp)

    best, best_cost = None, None
    for ceiling in sorted({u.priority for u in units}):
        # (pods gained, pods evicted per budget) → ((Σ pdb, Σ pods, Σ GPUs, Σ hours), units)
        dp: dict[tuple[int, tuple[int, ...]], tuple[tuple, tuple[int, ...]]] = {(0, zero): ((0, 0, 0, 0.0), ())}
        for n, uis in on_node.items():
            allowed_units = [ui for ui in uis if units[ui].priority <= ceiling]
            options: dict[tuple[int, tuple[int, ...]], tuple[tuple, tuple[int, ...]]] = {}
            for size in range(1, len(allowed_units) + 1):
                for combo in itertools.combinations(allowed_units, size):
                    gain = min(g.of(units, combo), need)
                    if gain <= 0:
                        continue
                    c = (sum(units[i].pdb for i in combo), sum(len(units[i].pods) for i in combo),
                         sum(units[i].gpus for i in combo), round(sum(units[i].hours for i in combo), 6))
                    key = (gain, footprint(combo))
                    if key not in options or c < options[key][0]:
                        options[key] = (c, combo)
            nxt = dict(dp)
            for (have, fp), (cost, chosen) in dp.items():
                for (gain, fp2), (c, combo) in options.items():
                    key = (min(need, have + gain), tuple(min(m, x + y) for m, x, y in zip(caps, fp, fp2)) if bis else zero)
                    nc = tuple(a + b for a, b in zip(cost, c))
                    if key not in nxt or nc < nxt[key][0]:
                        nxt[key] = (nc, chosen + combo)
            dp = nxt
        done = None
        for (have, fp), (cost, chosen) in dp.items():
            if have != need:
                continue
            full = (cost[0] + sum(1 for m, x in zip(caps, fp) if x >= m),) + cost[1:]
            if done is None or full < done[0]:
                done = (full, chosen)
        if done is not None:
            chosen = sorted(done[1])
            cost = set_cost(units, chosen)
            if best_cost is None or cost < best_cost:
                best, best_cost = chosen, cost
    return best if best is not None else None


def _node_bundle(units: Sequence[Unit], uis: list[int], n: int, g: _Gain, removed: Sequence[int] | None = None,
                 unit_cost: Callable[[int], tuple] | None = None) -> list[int] | None:
    """The cheapest units on node ``n`` whose eviction gains one more pod there, given what is
    already ``removed`` from it (exact up to 10 units, else cheapest-first). ``unit_cost``:
    ``set_cost(units, [ui])`` of a unit index, when the caller keeps them."""
    start = list(g.avail[n]) if removed is None else [x + y for x, y in zip(g.avail[n], removed)]
    base = g.k(start)

    def gains(combo) -> bool:
        row = list(start)
        for ui in combo:
            for j, x in enumerate(units[ui].use.get(n, ())):
                row[j] += x
        return g.k(row) > base

    if len(uis) <= 10:
        best = best_cost = None
        for size in range(1, len(uis) + 1):
            for combo in itertools.combinations(uis, size):
                c = set_cost(units, combo)
                if best_cost is not None and c >= best_cost:
                    continue
                if gains(combo):
                    best, best_cost = list(combo), c
        return best
    order = sorted(uis, key=(lambda ui: set_cost(units, [ui])) if unit_cost is None else unit_cost)
    # The shortest prefix of ``order`` that gains a pod: running sums of the rows, in int64 when
    # every amount is well inside its range, else in Python ints (the same numbers).
    uses = [units[ui].use.get(n, ()) for ui in order]
    m = _int64_rows(uses, g) if len(start) == len(g.vals) else None
    if m is not None and uses and max(abs(x) for x in start) < _SAFE_INT:
        k = (np.maximum(np.cumsum(m, axis=0) + np.array(start, dtype=np.int64), 0) // np.array(g.vals, dtype=np.int64)).min(axis=1)
        if g.cap is not None:
            k = np.minimum(k, g.cap)
        hit = np.flatnonzero(k > base)
        return order[: int(hit[0]) + 1] if len(hit) else None
    taken: list[int] = []
    row = list(start)
    for ui, use in zip(order, uses):
        taken.append(ui)
        for j, x in enumerate(use):
            row[j] += x
        if g.k(row) > base:
            return taken
    return None


#: Amounts below this stay exact in int64 when up to 256 of them are added.
_SAFE_INT = 2**54


def _int64_rows(uses: list, g: _Gain) -> np.ndarray | None:
    """``uses`` (rows of the shape's width) as an int64 matrix, or None when a row has another
    width, there are more than 256 of them, an amount is past ``_SAFE_INT`` or the shape has a
    non-positive amount: the Python path handles those."""
    width = len(g.vals)
    if not width or len(uses) > 256 or min(g.vals) <= 0 or any(len(u) != width for u in uses):
        return None
    try:
        m = np.array(uses, dtype=np.int64).reshape(len(uses), width)
    except OverflowError:
        return None
    if len(uses) and max(-int(m.min()), int(m.max())) >= _SAFE_INT:
        return None
    return m


class _State:
    """Chosen units with running totals: removed resources per node, pods gained, cost parts.

    ``cur[n]`` is node n's free row plus what the chosen units free there and ``cur_k[n]`` the
    pods of the shape that fit in it, kept for the nodes touched so far (untouched nodes: the
    ``_Gain``'s ``avail`` and ``base``). ``prep``: the search's ``_Prep``; when its input is
    regular, units with a row on one candidate node and bundles of them take the fast paths
    (one row per node, the same numbers).
    """

    def __init__(self, units: Sequence[Unit], g: _Gain, avail: Mapping[int, tuple[int, ...]], prep: _Prep | None = None) -> None:
        self.units, self.g, self.avail = units, g, avail
        self.fast = prep if prep is not None and prep.regular else None
        self.chosen: set[int] = set()
        self.removed: dict[int, list[int]] = {}
        self.cur: dict[int, list[int]] = {}
        self.cur_k: dict[int, int] = {}
        self.gained = 0
        self.pdb = self.pods = self.gpus = 0
        self.hours = 0.0
        self.prio = _NEG_INF
        self.tenants: set[str] = set()
        # Pods evicted so far per budget index (``Unit.budgets``); ``pdb`` counts each budget
        # once, when its count first exceeds its allowance.
        self.evicted: dict[int, int] = {}

    def _crossed(self, hits: Iterable[tuple[int, int, int]]) -> int:
        """Budgets that ``hits`` (one unit's ``budgets``) push past their allowance."""
        evicted = self.evicted
        v = 0
        for bi, n, a in hits:
            before = evicted.get(bi, 0)
            if before <= a < before + n:
                v += 1
        return v

    def budget_pods(self, extra: Iterable[int]) -> int:
        """Pods of the ``extra`` units selected by budgets the chosen units do not violate yet."""
        evicted, units = self.evicted, self.units
        total = 0
        for ui in extra:
            for bi, n, a in units[ui].budgets:
                if evicted.get(bi, 0) <= a:
                    total += n
        return total

    def _k_now(self, n: int) -> int:
        k = self.cur_k.get(n)
        return self.g.base[n] if k is None else k

    def delta_row(self, n: int, row: Sequence[int]) -> int:
        """Pods gained on candidate node ``n`` if ``row`` more were freed there."""
        c = self.cur.get(n)
        if c is None:
            return self.g.ksum(self.avail[n], row) - self.g.base[n]
        return self.g.ksum(c, row) - self.cur_k[n]

    def delta_one(self, ui: int) -> int:
        """``delta_add([ui])``."""
        f = self.fast
        if f is not None:
            n = f.one[ui]
            if n is not None:
                return self.delta_row(n, f.row1[ui])
        avail, k, cur = self.avail, self.g.k, self.cur
        total = 0
        for n, use in self.units[ui].use.items():
            if n in avail:
                c = cur.get(n)
                if c is None:
                    c = avail[n]
                total += k([x + y for x, y in zip(c, use)]) - self._k_now(n)
        return total

    def delta_add(self, extra: Iterable[int]) -> int:
        """Pods gained if ``extra`` units were added."""
        avail, units = self.avail, self.units
        add: dict[int, list[int]] = {}
        for ui in extra:
            for n, use in units[ui].use.items():
                if n in avail:
                    row = add.get(n)
                    if row is None:
                        add[n] = list(use)
                    else:
                        add[n] = [x + y for x, y in zip(row, use)]
        k, cur = self.g.k, self.cur
        total = 0
        for n, row in add.items():
            c = cur.get(n)
            if c is None:
                c = avail[n]
            total += k([x + y for x, y in zip(c, row)]) - self._k_now(n)
        return total

    def loss_remove(self, ui: int) -> int:
        """Pods lost if unit ``ui`` (chosen) were put back."""
        total = 0
        for n, use in self.units[ui].use.items():
            if n in self.avail:
                c = self.cur.get(n)
                if c is None:
                    c = self.avail[n]
                total += self._k_now(n) - self.g.k([x - y for x, y in zip(c, use)])
        return total

    def cost(self) -> tuple:
        return (self.pdb, self.prio, len(self.tenants), self.pods, self.gpus, round(self.hours, 6))

    def cost_with_one(self, ui: int) -> tuple:
        """``cost_with([ui])``."""
        f = self.fast
        if f is not None:
            _, names, budgets, pdb, hours, _, _, prio, pods, gpus = f.pack[ui]
            tenants = self.tenants
            new_t = sum(1 for t in names if t not in tenants)
            pdb += self.pdb
            if budgets:
                pdb += self._crossed(budgets)
            return (pdb, max(self.prio, prio), len(tenants) + new_t, self.pods + pods, self.gpus + gpus,
                    round(self.hours + hours, 6))
        u = self.units[ui]
        tenants = self.tenants
        new_t = sum(1 for t in u.tenants if t not in tenants)
        pdb = self.pdb + u.pdb
        if u.budgets:
            pdb += self._crossed(u.budgets)
        return (pdb, max(self.prio, u.priority), len(tenants) + new_t, self.pods + len(u.pods),
                self.gpus + u.gpus, round(self.hours + u.hours, 6))

    def cost_with(self, extra: Iterable[int]) -> tuple:
        """Cost of the chosen units plus ``extra`` (not chosen)."""
        pdb, prio, pods, gpus, hours = self.pdb, self.prio, self.pods, self.gpus, self.hours
        new_t = set()
        hits: dict[int, list[int]] | None = None
        for ui in extra:
            u = self.units[ui]
            pdb += u.pdb
            if u.budgets:
                if hits is None:
                    hits = {}
                for bi, n, a in u.budgets:
                    h = hits.get(bi)
                    if h is None:
                        hits[bi] = [n, a]
                    else:
                        h[0] += n
            prio = max(prio, u.priority)
            pods += len(u.pods)
            gpus += u.gpus
            hours += u.hours
            new_t |= {t for t in u.tenants if t not in self.tenants}
        if hits:
            pdb += self._crossed((bi, n, a) for bi, (n, a) in hits.items())
        return (pdb, prio, len(self.tenants) + len(new_t), pods, gpus, round(hours, 6))

    def cost_with_bundle(self, extra: Iterable[int], info: tuple) -> tuple:
        """``cost_with(extra)`` for a bundle without budgets whose sums are ``info``
        (``_Prep.bundle``); GPU-hours are still added one unit at a time, in the same order."""
        _, _, pdb, prio, pods, gpus, tenants, _ = info
        hours = functools.reduce(operator.add, map(self.fast.hours.__getitem__, extra), self.hours)  # type: ignore[union-attr]
        mine = self.tenants
        return (self.pdb + pdb, max(self.prio, prio), len(mine) + sum(1 for t in tenants if t not in mine),
                self.pods + pods, self.gpus + gpus, round(hours, 6))

    def _move(self, n: int, use: Sequence[int], sign: int) -> None:
        r = self.removed.get(n)
        self.removed[n] = [sign * x for x in use] if r is None else [x + sign * y for x, y in zip(r, use)]
        c = self.cur.get(n)
        if c is None:
            c = self.avail[n]
        c = self.cur[n] = [x + sign * y for x, y in zip(c, use)]
        self.cur_k[n] = self.g.k(c)

    def add(self, extra: Iterable[int], info: tuple | None = None, costs: bool = True) -> set[int]:
        """Choose the ``extra`` units; returns the candidate nodes they free resources on.
        ``info``: ``_Prep.bundle`` of them, when they are such a bundle. ``costs``: False to
        leave the cost parts as they are (fast paths only: only the chosen units, the rows and
        the pods gained are kept — what ``drop_unneeded`` reads)."""
        extra = list(extra)
        f = self.fast
        if f is None:
            self.gained += self.delta_add(extra)
            touched: set[int] = set()
            for ui in extra:
                for n, use in self.units[ui].use.items():
                    if n in self.avail:
                        touched.add(n)
                        self._move(n, use, 1)
        else:
            # Rows summed per node first (exact integers): one move per node.
            if info is not None:
                rows = {info[0]: info[1]}
            else:
                rows = {}
                one, row1, avail = f.one, f.row1, self.avail
                for ui in extra:
                    n = one[ui]
                    if n is not None:
                        r = rows.get(n)
                        rows[n] = row1[ui] if r is None else [x + y for x, y in zip(r, row1[ui])]
                        continue
                    for n, use in self.units[ui].use.items():
                        if n in avail:
                            r = rows.get(n)
                            rows[n] = use if r is None else [x + y for x, y in zip(r, use)]
            touched = set()
            for n, row in rows.items():  # added one by one, in order: the set iterates as it did
                touched.add(n)
                k0 = self._k_now(n)
                self._move(n, row, 1)
                self.gained += self.cur_k[n] - k0
        chosen, tenants, evicted = self.chosen, self.tenants, self.evicted
        if not costs and f is not None:
            chosen.update(extra)  # one by one, in order (a list)
            return touched
        if info is not None and not info[7]:
            _, _, pdb, prio, pods, gpus, names, _ = info
            chosen.update(extra)  # one by one, in order (a list)
            self.pdb += pdb
            self.prio = max(self.prio, prio)
            self.pods += pods
            self.gpus += gpus
            self.hours = functools.reduce(operator.add, map(f.hours.__getitem__, extra), self.hours)
            tenants.update(names)
            return touched
        if f is not None:
            pack = f.pack
            for ui in extra:
                _, names, budgets, pdb, hours, _, _, prio, pods, gpus = pack[ui]
                chosen.add(ui)
                self.pdb += pdb
                if budgets:
                    self.pdb += self._crossed(budgets)
                    for bi, n, _ in budgets:
                        evicted[bi] = evicted.get(bi, 0) + n
                self.prio = max(self.prio, prio)
                self.pods += pods
                self.gpus += gpus
                self.hours += hours
                tenants.update(names)
            return touched
        for ui in extra:
            u = self.units[ui]
            chosen.add(ui)
            self.pdb += u.pdb
            if u.budgets:
                self.pdb += self._crossed(u.budgets)
                for bi, n, _ in u.budgets:
                    evicted[bi] = evicted.get(bi, 0) + n
            self.prio = max(self.prio, u.priority)
            self.pods += len(u.pods)
            self.gpus += u.gpus
            self.hours += u.hours
            tenants.update(u.tenants)
        return touched

    def drop(self, ui: int, loss: int) -> None:
        """Put chosen unit ``ui`` back (``loss``: its ``loss_remove``); the cost parts (budget
        counts included) are left as they are (``_local_search`` recomputes the cost of what
        remains)."""
        for n, use in self.units[ui].use.items():
            if n in self.removed:
                self._move(n, use, -1)
        self.gained -= loss
        self.chosen.discard(ui)

    def drop_unneeded(self, order: Iterable[int], need: int) -> None:
        """Put back each unit of ``order`` in turn whose loss leaves ≥ ``need`` pods gained
        (``loss_remove`` then ``drop``). Units with a row on one candidate node take a short
        path that leaves ``removed`` stale (only ``chosen``, ``gained``, ``cur`` and ``cur_k``
        are kept): for the drop phase of the local search, which reads ``chosen`` alone."""
        f = self.fast
        if f is None:
            for ui in order:
                loss = self.loss_remove(ui)
                if self.gained - loss >= need:
                    self.drop(ui, loss)
            return
        one, row1, cur, cur_k, chosen, k = f.one, f.row1, self.cur, self.cur_k, self.chosen, self.g.k
        for ui in order:
            n = one[ui]
            if n is None:
                loss = self.loss_remove(ui)
                if self.gained - loss >= need:
                    self.drop(ui, loss)
                continue
            c = [x - y for x, y in zip(cur[n], row1[ui])]
            k1 = k(c)
            loss = cur_k[n] - k1
            if self.gained - loss >= need:
                cur[n] = c
                cur_k[n] = k1
                self.gained -= loss
                chosen.discard(ui)


def _local_search(units, g: _Gain, chosen: set[int], need: int, cand_list, max_swaps: int,
                  max_cands: int = 2000, max_chosen: int = 64, unit_cost=None, prep: _Prep | None = None) -> set[int]:
    """Drop units that are not needed; then "add one candidate, drop what became redundant"
    (covers 1-for-1 and k-for-1 swaps) while the cost falls; at most ``max_swaps`` moves, and
    only while at most ``max_chosen`` units are chosen (the drop phase always runs).
    ``cand_list``: the candidates (sets of unit indices), or a function returning them (called
    only when the swap phase runs). ``unit_cost``: ``set_cost(units, [ui])`` by unit index, when
    the caller has it. ``prep``: the caller's ``_Prep`` of these units (fast paths)."""
    if unit_cost is None:
        def unit_cost(u: int) -> tuple:
            return set_cost(units, [u])
    if prep is not None:  # the units' pdb and budgets from their packs
        pdb_of, budgets_of = prep.fields[3].__getitem__, prep.fields[2].__getitem__

        def cost_of(sel: Iterable[int]) -> tuple:
            return _pack_cost(prep.pack, sel)
    else:
        def pdb_of(ui: int) -> int:
            return units[ui].pdb

        def budgets_of(ui: int) -> tuple:
            return units[ui].budgets

        def cost_of(sel: Iterable[int]) -> tuple:
            return set_cost(units, sel)

    def drop_order(sel: set[int], keep: frozenset[int]) -> list[int]:
        """Units of ``sel`` not in ``keep``, most costly first. With budgets, a unit's own PDB
        violations are replaced by those its removal from ``sel`` would undo (a budget already
        violated by the others costs nothing more)."""
        if not any(map(budgets_of, sel)):
            return sorted(sel - keep, key=unit_cost, reverse=True)
        total: dict[int, int] = {}
        for ui in sel:
            for bi, n, _ in budgets_of(ui):
                total[bi] = total.get(bi, 0) + n

        def key(ui: int) -> tuple:
            undone = pdb_of(ui) + sum(1 for bi, n, a in budgets_of(ui) if total[bi] > a >= total[bi] - n)
            return (undone,) + unit_cost(ui)[1:]

        return sorted(sel - keep, key=key, reverse=True)

    def drop(sel: set[int], keep: frozenset[int] = frozenset()) -> set[int]:
        st = _State(units, g, g.avail, prep)
        st.add(sel, costs=False)
        st.drop_unneeded(drop_order(sel, keep), need)
        return set(st.chosen)

    chosen = drop(chosen)
    if len(chosen) > max_chosen:
        return chosen
    if callable(cand_list):
        cand_list = cand_list()
    cost = cost_of(chosen)
    moves = 0
    improved = True
    while improved and moves < max_swaps:
        improved = False
        for c in cand_list[:max_cands]:
            if c <= chosen:
                continue
            trial = drop(chosen | c, keep=c)
            tc = cost_of(trial)
            if tc < cost:
                chosen, cost = trial, tc
                improved = True
                moves += 1
                break
    return chosen


# ---------------------------------------------------------------- building the fixes


def _avail_rows(snap: ClusterSnapshot, shape: Shape, nodes: Iterable[int]) -> dict[int, tuple[int, ...]]:
    cols = shape.cols
    return {int(i): tuple(int(x) for x in snap.free[int(i), cols]) for i in nodes}


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


def _cmd_evict(v: Victim) -> str:
    return f"kubectl -n {v.namespace} delete pod {v.name}"


#: How to stop a whole gang, by the kind of its controller (a victim unit's key): the resource
#: kubectl names it by (plural.group, unambiguous next to Volcano's jobs) and the merge patch
#: that suspends it — the controller then deletes its pods and creates none until resumed.
#: Sources: batch/v1 Job and JobSet ``spec.suspend`` (kubernetes/api batch/v1 JobSpec,
#: kubernetes-sigs/jobset api jobset_types.go); KubeRay RayJob ``spec.suspend`` (ray-operator
#: apis/ray/v1 rayjob_types.go); Kubeflow Trainer TrainJob ``spec.suspend``; Kubeflow training
#: operator jobs and MPIJob v2beta1 ``spec.runPolicy.suspend`` (kubeflow/training-operator
#: pkg/apis/kubeflow.org/v1 common_types.go RunPolicy, kubeflow/mpi-operator v2beta1 RunPolicy).
#: Other kinds (PodGroups, Volcano Jobs, RayClusters, LeaderWorkerSets) have no such field:
#: their pods are deleted, whole.
SUSPEND: Mapping[str, tuple[str, str]] = {
    "Job": ("jobs.batch", '{"spec":{"suspend":true}}'),
    "JobSet": ("jobsets.jobset.x-k8s.io", '{"spec":{"suspend":true}}'),
    "RayJob": ("rayjobs.ray.io", '{"spec":{"suspend":true}}'),
    "TrainJob": ("trainjobs.trainer.kubeflow.org", '{"spec":{"suspend":true}}'),
    **{k: (f"{k.lower()}s.kubeflow.org", '{"spec":{"runPolicy":{"suspend":true}}}')
       for k in ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")},
}


#: The merge patch that deactivates a Kueue Workload (kueue apis/kueue/v1beta1 workload_types.go: spec.active).
_DEACTIVATE = '{"spec":{"active":false}}'


def _kueue_workload(snap: ClusterSnapshot, kind: str, ns: str, name: str):
    """The Kueue Workload of the gang ``kind`` ``ns/name`` in ``snap`` (``KueueWorkload.belongs_to``),
    None when none is there; the Workloads are indexed once per snapshot."""
    key = ("fixes.workloads_by_owner",)
    index = snap.recall(key)
    if index is None:
        index = {}
        for wl in snap.kueue.workloads.values():
            okind, _, oname = wl.owner.partition("/")
            index.setdefault((wl.namespace, okind.lower(), oname), wl)
            index.setdefault((wl.namespace, "\0name", wl.name), wl)
        index = snap.remember(key, index)
    hit = index.get((ns, kind.lower(), name))  # type: ignore[union-attr]
    if hit is None and kind in ("Pod", "PodGroup"):
        hit = index.get((ns, "\0name", name))  # type: ignore[union-attr]
    return hit


def _eviction_commands(snap: ClusterSnapshot, units: Sequence[Unit], chosen: Sequence[int], victims: Sequence[Victim],
                       verb: str) -> list[str]:
    """What evicts the chosen units, every pod of them named: for a move, ``delete pod`` (their
    controllers recreate them; one command per namespace); for a preemption, a gang whose
    controller can be told to stop is stopped whole — a Kueue Workload deactivated
    (``spec.active: false``: Kueue evicts it and keeps it queued; suspending a job Kueue admitted
    would be undone by Kueue), else the kind's suspend field (``SUSPEND``) — and every other pod
    is deleted."""
    by_unit: dict[str, list[Victim]] = {}
    for v in victims:
        by_unit.setdefault(v.unit, []).append(v)
    stop: list[str] = []
    delete: dict[str, list[str]] = {}
    queued_units = {units[i].key for i in chosen if any(p.queue for p in units[i].pods)}
    for k in sorted({units[i].key for i in chosen}):
        pods = by_unit.get(k, [])
        kind, ns, name = (k.split("/", 2) + ["", ""])[:3]
        if verb != "move" and kind != "Pod" and name:
            queued = k in queued_units
            wl = _kueue_workload(snap, kind, ns, name) if snap.kueue.workloads else None
            if wl is not None:
                stop.append(f"kubectl -n {_q(ns)} patch workloads.kueue.x-k8s.io {_q(wl.name)} --type=merge -p "
                            f"'{_DEACTIVATE}'   # Kueue evicts {kind} {name} whole and keeps it queued, inactive")
                continue
            if kind in SUSPEND and not queued:
                res, patch = SUSPEND[kind]
                stop.append(f"kubectl -n {_q(ns)} patch {res} {_q(name)} --type=merge -p '{patch}'"
                            f"   # suspends {kind} {name}: its pods leave, none is recreated until it is resumed")
                continue
        for v in pods:
            delete.setdefault(v.namespace, []).append(v.name)
    out = list(stop)
    why = ("   # their controllers recreate them on the other nodes" if verb == "move"
           else "   # pods with a controller come back Pending; pods without one are gone")
    for ns in sorted(delete):
        out.append(f"kubectl -n {_q(ns)} delete pod " + _qs(delete[ns]) + why)
    return out


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


def broken_nodes(snap: ClusterSnapshot) -> dict[str, list[int]]:
    """Repairable nodes by problem: ``cordoned``, ``not_ready``, ``devices`` (device allocatable
    below what the node has installed: capacity, ``nvidia.com/gpu.count`` or the MIG layout)."""
    dev = [snap.col[r] for r in snap.resources if snap.device_cols[snap.col[r]]]
    gap = (snap.ever_alloc[:, dev] > snap.alloc[:, dev]).any(axis=1) if dev else np.zeros(len(snap.nodes), dtype=bool)
    return {
        "cordoned": [i for i, n in enumerate(snap.nodes) if n.unschedulable],
        "not_ready": [i for i, n in enumerate(snap.nodes) if n.ready is False],
        "devices": [int(i) for i in np.flatnonzero(gap)],
    }


def _plugin_pods_on(snap: ClusterSnapshot, node: str) -> list[BoundPod]:
    """Device-plugin pods bound to ``node`` (a pod whose name holds "device-plugin")."""
    return [p for p in snap.pods_by_node.get(node, ()) if "device-plugin" in p.name]


def _repair_parts(snap: ClusterSnapshot, by: Mapping[str, list[str]]) -> tuple[list[str], list[str], list[str]]:
    """(what the repair is, per problem; commands that repair devices and NotReady nodes;
    the cordoned node names to uncordon) for ``by``: problem → node names (``broken_nodes``
    keys). Every node is in a command: one per device-plugin restart, one ``describe`` for all
    NotReady nodes (their kubelet is repaired on the node itself)."""
    parts, cmds = [], []
    if by["devices"]:
        parts.append(f"{len(by['devices'])} with unhealthy or unadvertised devices ({_sample(by['devices'])})")
        for n in by["devices"]:
            pods = _plugin_pods_on(snap, n)
            if pods:
                for p in pods:
                    cmds.append(f"kubectl -n {_q(p.namespace)} delete pod {_q(p.name)}   # restart the device plugin on {n}")
            else:  # the GPU operator's DaemonSet label, in whichever namespace it runs
                cmds.append(f"kubectl delete pod -A -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={_q(n)}"
                            "   # restart its device plugin")
    if by["not_ready"]:
        parts.append(f"{len(by['not_ready'])} NotReady ({_sample(by['not_ready'])})")
        cmds.append("kubectl describe node " + _qs(by["not_ready"])
                    + "   # NotReady: repair kubelet/containerd on each node; see its conditions")
    if by["cordoned"]:
        parts.append(f"{len(by['cordoned'])} cordoned ({_sample(by['cordoned'])})")
    return parts, cmds, list(by["cordoned"])


def _resource_of(gang: GangRequest) -> str:
    """How kubectl names the gang's object unambiguously: ``kind.group`` (``job.batch``,
    ``job.batch.volcano.sh``, ``pytorchjob.kubeflow.org``), the kind alone for the core group."""
    group = gang.api_version.rpartition("/")[0] if gang.api_version and "/" in gang.api_version else ""
    return f"{gang.kind.lower()}.{group}" if group else gang.kind.lower()


def _q(word: str) -> str:
    """``word`` quoted for a POSIX shell (unchanged when it is a plain Kubernetes name)."""
    return shlex.quote(word)


def _qs(words: Iterable[str]) -> str:
    """``words`` quoted and joined by spaces (``_q``)."""
    return " ".join(map(shlex.quote, words))


def _sample(names: Sequence[str], k: int = 3) -> str:
    """The first ``k`` names, and how many more ("a, b, c and 5 more")."""
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def _repair_fix(snap, gang, view: GangView, options) -> tuple[Fix | None, list[str], np.ndarray]:
    """Nodes that could host one of the main pods once uncordoned / Ready / devices healthy.
    Its commands name every such node (``_repair_parts``)."""
    main = view.main
    ps, sh = view.pod_sets[main], view.shapes[main]
    empty = np.zeros(len(snap.nodes), dtype=bool)
    if sh.missing:
        return None, [], empty
    repaired_free = snap.ever_alloc - snap.used
    k_rep = np.where(view.ever_masks[main], pods_per_node(repaired_free, sh, ps.max_per_node), 0)
    broken = broken_nodes(snap)
    is_broken = np.zeros(len(snap.nodes), dtype=bool)
    for idx in broken.values():
        is_broken[idx] = True
    gain_nodes = np.flatnonzero(is_broken & (k_rep > view.k_now[main]))
    if len(gain_nodes) == 0:
        return None, [], empty
    gain = int((k_rep[gain_nodes] - view.k_now[main][gain_nodes]).sum())
    sets = {k: set(v) for k, v in broken.items()}
    names = [snap.nodes[int(i)].name for i in gain_nodes]
    by = {k: [snap.nodes[int(i)].name for i in gain_nodes if int(i) in sets[k]] for k in sets}
    parts, cmds, cordoned = _repair_parts(snap, by)
    if cordoned:
        cmds.append("kubectl uncordon " + _qs(cordoned) + "   # once their maintenance is over")
    mask = empty.copy()
    mask[gain_nodes] = True
    enough = gain >= view.deficit
    fix = Fix(
        action="repair",
        summary=f"repair {len(gain_nodes)} node(s) — " + "; ".join(parts) + f": {gain} more pod(s) fit"
                + ("" if enough else f", {view.deficit - gain} still short"),
        frees_nodes=len(gain_nodes), sufficient=enough, nodes=names, commands=cmds)
    return fix, names, mask


def _delete_podgroups(pgs: Sequence[str]) -> list[str]:
    """``kubectl delete podgroup`` for every "namespace/name" of ``pgs``, one command per namespace."""
    by: dict[str, list[str]] = {}
    for p in pgs:
        ns, _, name = p.partition("/")
        by.setdefault(ns, []).append(name)
    return [f"kubectl -n {_q(ns)} delete podgroup " + _qs(names) for ns, names in sorted(by.items())]


def _quota_fixes(snap, gang, decision: Decision) -> list[Fix]:
    out = []
    for f in decision.findings:
        d = f.data
        if f.code == "WaitingForQuota":
            r, more = d.get("resource"), d.get("more_needed")
            if d.get("cluster_queue"):
                cq = d["cluster_queue"]
                edit = f"kubectl edit clusterqueue {cq}   # spec.resourceGroups[].flavors[].resources[{r}]"
                cohort = d.get("cohort")
                if not cohort:
                    # A ClusterQueue outside any cohort has nothing to borrow from (kueue
                    # resource_node.go: a node without a parent gets its own quota only).
                    out.append(Fix("raise-quota",
                        f"raise ClusterQueue {cq}'s nominalQuota for {r} by {more} (it is in no cohort, so it cannot borrow), "
                        "or wait for its admitted workloads to finish",
                        commands=[f"kubectl get clusterqueue {cq} -o yaml", edit + ".nominalQuota"]))
                elif d.get("binding") == "borrowingLimit" and d.get("binding_object") == f"ClusterQueue/{cq}":
                    out.append(Fix("borrow-quota",
                        f"let ClusterQueue {cq} borrow {more} more {r} from cohort {cohort} (raise its borrowingLimit), or raise its nominalQuota",
                        commands=[f"kubectl get clusterqueue {cq} -o yaml", edit + ".borrowingLimit"]))
                else:
                    # What binds is above the ClusterQueue (the cohort's unused pool or a Cohort's
                    # borrowingLimit): raising its own borrowingLimit would not help.
                    root = d.get("binding_cohort") or cohort
                    out.append(Fix("borrow-quota",
                        f"ClusterQueue {cq} can borrow from cohort {cohort}, but the cohort tree ({root}) has {more} {r} too little unused: "
                        f"raise its nominalQuota, or a cohort member's nominalQuota / lendingLimit, or wait for the other members' workloads",
                        commands=[f"kubectl get clusterqueues -o wide   # cohort {cohort}: who uses what", f"kubectl get clusterqueue {cq} -o yaml",
                                  edit + ".nominalQuota"]))
            elif d.get("queue"):
                q = d["queue"]
                out.append(Fix("raise-quota", f"raise Volcano queue {q}'s capability for {r} by {more}",
                               commands=[f"kubectl get queues.scheduling.volcano.sh {q} -o yaml", f"kubectl edit queues.scheduling.volcano.sh {q}   # spec.capability"]))
        elif f.code == "OrphanPodGroups":
            pgs = list(d.get("pod_groups") or [])
            out.append(Fix("release-reservations",
                f"delete {len(pgs)} orphan PodGroup(s) that reserve queue quota with no running pod: " + _sample(pgs, 5),
                sufficient=True,
                commands=_delete_podgroups(pgs)))
        elif f.code == "ExceedsDeservedShare" and d.get("plugin") == "capacity":
            q = d.get("queue")
            out.append(Fix("raise-quota",
                f"raise Volcano queue {q}'s spec.deserved for {d.get('resource')} to ≥ {d.get('request')} (now {d.get('deserved'):g}) "
                "so its pods are not reclaimed, or give it a guarantee",
                commands=[f"kubectl edit queues.scheduling.volcano.sh {q}   # spec.deserved / spec.guarantee.resource"]))
        elif f.code == "ExceedsDeservedShare":
            q = d.get("queue")
            out.append(Fix("raise-quota",
                f"give Volcano queue {q} a guarantee ≥ {d.get('request')} {d.get('resource')} or a higher weight (deserved {d.get('deserved')})",
                commands=[f"kubectl edit queues.scheduling.volcano.sh {q}   # spec.guarantee.resource / spec.weight"]))
        elif f.code == "QuotaExceedsCapacity":
            cq = d.get("cluster_queue")
            out.append(Fix("lower-quota",
                f"lower ClusterQueue {cq}'s {d.get('resource')} quota in flavor {d.get('flavor')} from {d.get('nominal')} to the "
                f"{d.get('physical')} that exist, so Kueue's own preemption (not kube-scheduler) decides who runs",
                commands=[f"kubectl edit clusterqueue {cq}"]))
    return out


#: Owner kinds whose pods never end on their own (as ``wait.PERMANENT_OWNERS``).
_LASTING_OWNERS = frozenset({"DaemonSet", "Node"})


def _lasting_free(snap: ClusterSnapshot, view: GangView) -> np.ndarray:
    """Free resources [nodes × resources] of each node the main pod set may use now once every
    pod on it that can end has ended: allocatable minus the gang's own bound pods (they wait
    for their siblings and end only with the gang), DaemonSet/mirror pods and pods at system
    priority. Scheduler units; other nodes' rows are their allocatable (not read)."""
    out = snap.alloc.copy()
    pods_col = snap.col.get("pods")
    own = {(p.namespace, p.name) for p in view.own_bound}
    for i in np.flatnonzero(view.now_masks[view.main]).tolist():
        for p in snap.pods_by_node.get(snap.nodes[i].name, ()):
            if (p.owner_kind in _LASTING_OWNERS or p.priority >= SYSTEM_PRIORITY
                    or (p.namespace, p.name) in own):
                for r, v in p.requests.items():
                    c = snap.col.get(r)
                    if c is not None:
                        out[i, c] -= v
                if pods_col is not None:
                    out[i, pods_col] -= 1
    return out


def compute_fixes(
    snap: ClusterSnapshot,
    gang: GangRequest,
    decision: Decision,
    now: float | None = None,
    options: Any = None,
    *,
    expected_wait_s: float | None = None,
    view: GangView | None = None,
) -> list[Fix]:
    """Every applicable fix for ``gang`` on ``snap``, ranked (``rank_fixes``).

    Args:
        decision: ``evaluate(snap, gang, options)`` — its findings drive the quota fixes.
        now: epoch seconds, for GPU-hours lost and ``expected_start``; None → hours 0.
        expected_wait_s: when known (from a wait model), the wait fix's start = now + it.

    Returns:
        [] for a gang that Fits or NeverFits (nothing to fix by displacement; a NeverFits gang
        must change itself — see the decision's message), else the ranked fixes.
    """
    if decision.verdict == NEVER_FITS:
        return []
    view = view or gang_view(snap, gang, decision, options)
    fixes: list[Fix] = []
    fixes.extend(_quota_fixes(snap, gang, decision))
    if not view.pod_sets or decision.verdict == "Fits":
        return rank_fixes(fixes)
    main = view.main
    ps, sh = view.pod_sets[main], view.shapes[main]
    deficit = view.deficit
    repaired_names: list[str] = []
    repaired_mask = np.zeros(len(snap.nodes), dtype=bool)
    if deficit > 0:
        rep, repaired_names, repaired_mask = _repair_fix(snap, gang, view, options)
        if rep is not None:
            fixes.append(rep)
        # change selector: the same shape without the gang's node selector / required affinity
        if ps.node_selector or ps.required_affinity:
            free_ps = PodSet(ps.name, ps.count, ps.requests, tolerations=ps.tolerations, max_per_node=ps.max_per_node)
            m = filter_nodes(snap, Constraints(free_ps), ever=False).mask
            k = int(np.where(m, pods_per_node(snap.free, sh, ps.max_per_node), 0).sum())
            if k > view.placeable:
                sel = ", ".join(f"{a}={b}" for a, b in ps.node_selector.items()) or "its required node affinity"
                fixes.append(Fix("change-selector",
                    f"drop or widen the node selector ({sel}): {k} pod(s) of the shape fit now without it (vs {view.placeable})",
                    sufficient=k >= view.need, frees_nodes=int(np.count_nonzero(np.where(m, pods_per_node(snap.free, sh, ps.max_per_node), 0))) - int(np.count_nonzero(view.k_now[main]))))
        # shrink
        if 0 < view.placeable < view.need:
            total_now = view.placeable + len([p for p in view.own_bound if dict(p.requests) == dict(ps.requests)])
            shape_txt = ", ".join(f"{v} {r}" for r, v in sorted(ps.requests.items()) if is_gpu_name(r, options)) or "its shape"
            fixes.append(Fix("shrink",
                f"shrink the gang to {total_now} pod(s) of {shape_txt} (the most that fit now; "
                f"{view.need + len(view.own_bound)} requested) — only if the job can run smaller",
                sufficient=True, frees_nodes=0,
                commands=[f"kubectl -n {_q(gang.namespace)} edit {_resource_of(gang)} {_q(gang.name)}"
                          f"   # replicas / parallelism / minAvailable → {total_now}"]))
        # wait: running work on eligible nodes ends — never the gang's own bound pods (they wait
        # for their siblings), DaemonSet or system pods (they never end)
        full = np.where(view.now_masks[main], pods_per_node(_lasting_free(snap, view), sh, ps.max_per_node), 0)
        if int(full.sum()) >= view.need and int(full.sum()) > view.placeable:
            start = None if (expected_wait_s is None or now is None) else now + expected_wait_s
            fixes.append(Fix("wait",
                "wait for running work on eligible nodes to finish" + ("" if start is None else f" (expected in {expected_wait_s / 3600:.1f} h)"),
                expected_start=start, sufficient=True))
        # add nodes
        per_node = max(1, int(pods_per_node(snap.ever_alloc[view.ever_masks[main]], sh, ps.max_per_node).max(initial=0)) or 1)
        add = math.ceil(deficit / per_node)
        like = next((snap.nodes[int(i)].name for i in np.flatnonzero(view.ever_masks[main] & (pods_per_node(snap.ever_alloc, sh, ps.max_per_node) > 0))[:1]), None)
        fixes.append(Fix("add-nodes", f"add {add} node(s)" + (f" like {like}" if like else "") + f" ({per_node} pod(s) each)",
                         frees_nodes=add, sufficient=True))
        # displacement: the victim units of a node and each unit are worked out once for all three
        memo: dict = {}
        cons = _displacing_fix(snap, gang, view, now, options, action_hint="any", memo=memo)
        if cons is not None:
            fixes.append(cons)
        if view.priority:
            low = _displacing_fix(snap, gang, view, now, options, action_hint="lower-priority", max_priority=view.priority, memo=memo)
            if low is not None and (cons is None or {(v.namespace, v.name) for v in low.victims} != {(v.namespace, v.name) for v in cons.victims}):
                low.action = "preempt" if low.action == "move" else low.action
                fixes.append(low)
        if rep is not None and not rep.sufficient:
            combo = _displacing_fix(snap, gang, view, now, options, action_hint="any",
                                    repaired=repaired_names, extra_mask=repaired_mask, memo=memo)
            if combo is not None:
                fixes.append(combo)
    return rank_fixes(fixes)
