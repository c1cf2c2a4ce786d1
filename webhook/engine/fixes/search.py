"""Choosing victims: a minimum k-union problem — the least-cost set of units whose eviction gains
``need`` pods of the shape on the candidate nodes.

Exact enumeration up to ``EXACT_UNITS`` units (``brute_force_victims``); the node-local knapsack
when every unit sits on one node (``local``); otherwise a lazy greedy by marginal cost (single
units and per-node bundles as candidates, ``bundles``) plus a drop/swap local search, with extra
passes when PodDisruptionBudgets are involved. ``choose_victims`` is the driver over those
steps. Costs as ``costs.set_cost``; the per-call data in ``prep``, the running state in ``state``.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Iterable, Mapping, Sequence

import numpy as np

from .bundles import _SAFE_INT, _gaining_alone, _int64_rows, _node_bundle
from .costs import _Gain, _pack_cost, set_cost
from .local import node_local_victims
from .prep import _Prep
from .state import _State
from .units import Unit

__all__ = ["EXACT_UNITS", "BUDGET_PASS_UNITS", "brute_force_victims", "choose_victims"]


#: Victim choice is exact (enumeration of every subset) up to this many candidate units.
EXACT_UNITS = 12
#: When the greedy's victims include pods a PodDisruptionBudget selects, its extra passes (each
#: about as costly as the first) run up to this many candidate units.
BUDGET_PASS_UNITS = 2000
#: Rank of each action among fixes of equal displacement cost (lower first).

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

    Steps: exact enumeration for few units; the node-local knapsack (``node_local_victims``)
    when every unit sits on one node; else ``_Prep`` and its scan, then ``_Greedy.run``, then
    ``_budget_passes`` when the answer touches PodDisruptionBudgets.

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
    search = _Greedy(units, g, prep, need, max_swaps)
    found = search.run()
    if found is not None and len(units) <= BUDGET_PASS_UNITS and any(units[ui].budgets for ui in found):
        found = _budget_passes(units, search, found)
    return None if found is None else sorted(found)


def _budget_passes(units: Sequence[Unit], search: "_Greedy", found: set[int]) -> set[int]:
    """The cheapest (``set_cost``) of ``found`` and up to three more greedy passes.

    The greedy is myopic about budgets: taking a budget's pods early may spend the allowance a
    later, necessary unit needed; avoiding a violation early (at the price of a higher priority)
    is wasted when one comes later anyway. When its answer evicts pods a budget selects, passes
    spending allowances last (before or after priority), and when it violates a budget one free
    to reach the violations already found, may do better; the lowest ``set_cost`` wins."""
    cost = set_cost(units, found)
    for avoid in (1, 2, 0):
        if not avoid and cost[0] == 0:
            break
        other = search.run(avoid=avoid, slack=0 if avoid else cost[0])
        if other is not None:
            oc = set_cost(units, other)
            if oc < cost:
                found, cost = other, oc
    return found


class _Greedy:
    """The lazy greedy of one ``choose_victims`` call, over its ``_Prep`` (scanned).

    Candidates: single units (those gaining alone at first: ``gaining``) and, per node, the
    cheapest bundle of units that gains a pod there (``bundles0`` at first, ``node_bundle``
    after each step). ``run`` is one pass, ending in the local search; ``_budget_passes`` runs
    more with other ranking keys (``key_fn``). Rows: ints in the shape's column order.
    """

    def __init__(self, units: Sequence[Unit], g: _Gain, prep: _Prep, need: int, max_swaps: int) -> None:
        self.units, self.g, self.prep, self.need, self.max_swaps = units, g, prep, need, max_swaps
        self.unit_cost = prep.cost.__getitem__
        # Nodes with many units take the cheapest-first bundle: their units in that order and their
        # rows as one int64 matrix are worked out once per node (None: amounts too large for int64).
        self.prefix_rows: dict[int, tuple[list[int], np.ndarray | None]] = {}
        self.bundles0 = self.first_bundles()
        self.gaining = prep.gaining if prep.gaining is not None else _gaining_alone(units, g)

    def node_bundle(self, n: int, rest: list[int], removed: Sequence[int] | None) -> list[int] | None:
        """``_node_bundle(units, rest, n, g, removed)``; ``rest``: units of ``on_node[n]``, in order."""
        units, g, prep, unit_cost = self.units, self.g, self.prep, self.unit_cost
        if len(rest) <= 10:
            return _node_bundle(units, rest, n, g, removed, unit_cost=unit_cost)
        hit = self.prefix_rows.get(n)
        if hit is None:
            order_all = prep.orders.get(n)
            if order_all is None:
                order_all = sorted(prep.on_node[n], key=unit_cost)
                rows = _int64_rows([units[ui].use.get(n, ()) for ui in order_all], g)
            else:
                rows = prep.rows.get(n)
                if rows is None or len(order_all) > 256:
                    rows = _int64_rows([units[ui].use.get(n, ()) for ui in order_all], g)
            hit = self.prefix_rows[n] = (order_all, rows)
        order_all, rows = hit
        avail = g.avail
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

    def first_bundles(self) -> dict[int, frozenset[int]]:
        """Node → its cheapest bundle of two units or more gaining a pod there, nothing evicted
        yet (the scan's first prefix when it found one); each bundle's summed data is kept with
        the node's scan results (``_Prep.entries``, index-free) for later calls."""
        prep, top, base = self.prep, self.prep.top, self.g.base
        bundles: dict[int, frozenset[int]] = {}
        for n, uis in prep.on_node.items():
            if len(uis) > 1:
                if top is not None and top[n] <= base[n]:
                    continue  # nothing on n gains a pod there
                f = prep.first.get(n)
                if f is not None:  # the scan found the first cheapest-first prefix that gains
                    b = prep.orders[n][: f + 1] if f >= 0 else None
                else:
                    b = self.node_bundle(n, uis, None)
                if b and len(b) > 1:
                    c = bundles[n] = frozenset(b)
                    e = prep.entries.get(n)
                    if e is not None:  # its summed data, kept with the node's results (index-free)
                        if e[8] is None:
                            e[8] = prep.bundle(c)
                        else:
                            prep.bundles[c] = e[8]
        return bundles

    def key_fn(self, st: _State, avoid: int, slack: int):
        """The ranking key of a candidate for state ``st`` — a unit index or a bundle (frozenset)
        — or None when it gains nothing now: (violations, priority, then tenants, pods, GPUs and
        GPU-hours added per pod gained, then more pods gained first). ``avoid`` 1 or 2: the pods
        it evicts from budgets not yet violated (per pod gained) rank right after violations (1)
        or after violations and priority (2). ``slack``: violations up to this many rank as none."""
        prep, need = self.prep, self.need
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

        return key_of

    def run(self, avoid: int = 0, slack: int = 0) -> set[int] | None:
        """One pass: lazy greedy then local search (``_local_search``); None when the
        candidates run out short of ``need``. ``avoid``, ``slack``: see ``key_fn``."""
        units, prep, need = self.units, self.prep, self.need
        st = _State(units, self.g, self.g.avail, prep)
        bundles = dict(self.bundles0)
        key_of = self.key_fn(st, avoid, slack)
        # Lazy greedy: keys are re-evaluated when popped; a candidate whose fresh key still beats
        # the next stale key is taken.
        heap: list = []
        seq = itertools.count()
        # A single unit that gains nothing alone has no key: only those that do are keyed at first.
        for c in itertools.chain(self.gaining, set(bundles.values())):
            k = key_of(c)
            if k is not None:
                heapq.heappush(heap, (k, next(seq), c))
        while st.gained < need:
            best, c = self._pop(heap, seq, key_of, st)
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
            if prep.regular and type(c) is not int and len(best) == len(c):
                info = prep.bundle(c) or None
            self._rekey(st, st.add(best, info), bundles, heap, seq, key_of)

        def cand_list() -> list[frozenset[int]]:
            return [frozenset([ui]) for ui in range(len(units))] + sorted(set(bundles.values()), key=lambda c: (len(c), sorted(c)))

        return _local_search(units, self.g, set(st.chosen), need, cand_list, self.max_swaps, unit_cost=self.unit_cost, prep=prep)

    @staticmethod
    def _pop(heap: list, seq, key_of, st: _State):
        """(the units to add, the candidate they come from): the first popped candidate whose
        fresh key still beats the next stale key; (None, None) when the heap runs dry."""
        while heap:
            _, _, c = heapq.heappop(heap)
            k = key_of(c)
            if k is None:
                continue
            if not heap or k <= heap[0][0]:
                return ({c} if type(c) is int else c - st.chosen), c
            heapq.heappush(heap, (k, next(seq), c))
        return None, None

    def _rekey(self, st: _State, touched: set[int], bundles: dict[int, frozenset[int]], heap: list, seq, key_of) -> None:
        """After a step that freed resources on the ``touched`` nodes: key their units again, and
        recompute their bundles against their new state (dropped where nothing more gains)."""
        prep, chosen, on_node = self.prep, st.chosen, self.prep.on_node
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
            b = self.node_bundle(n, rest, st.removed.get(n)) if len(rest) > 1 else None
            if b and len(b) > 1:
                bundles[n] = frozenset(b)
                k = key_of(bundles[n])
                if k is not None:
                    heapq.heappush(heap, (k, next(seq), bundles[n]))
            else:
                bundles.pop(n, None)


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
