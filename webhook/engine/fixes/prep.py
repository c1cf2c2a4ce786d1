"""What one victim search works out once about its units (``_Prep``): the units of each candidate
node, each unit's one node and row there, their packed costs, and — on regular input — the
vectorised per-node scan (pods when emptied, cheapest-first orders, first bundles).

Owns the per-call preparation and the fast paths' preconditions; not the searches that read it
(``search``, ``state``). Rows are ints in the shape's column order; the scan works in int64
only where sums stay exact, else in Python ints (the same numbers).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .costs import _Gain
from .scan import IRREGULAR, TOO_LARGE, python_tops, scan_nodes
from .units import Unit, _unit_pack


_FAST_PATHS = True


def _index_units(units: Sequence[Unit], fields: Sequence[Sequence], avail: Mapping[int, Any]
                 ) -> tuple[dict[int, list[int]], dict[int, list[int]], list[int | None], list[Any], bool]:
    """(``on_node``, ``span_on``, ``one``, ``row1``, ``all_local``) of ``_Prep`` (see its doc) for
    these units on the candidate nodes ``avail`` (node index → free row); ``fields``: the units'
    packs side by side (``fields[5]``: each pack's one node or None, ``fields[6]``: its row)."""
    on_node: dict[int, list[int]] = {}
    one: list[int | None] = [None] * len(units)
    row1: list[Any] = [None] * len(units)
    span_on: dict[int, list[int]] = {}
    all_local = True
    get = on_node.get
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
        for n, row in use.items():  # several nodes, or none: rare
            if n in avail:
                on_node.setdefault(n, []).append(ui)
                inside.append((n, row))
        if len(inside) == 1:
            one[ui], row1[ui] = inside[0]
        else:
            for n, _ in inside:
                span_on.setdefault(n, []).append(ui)
    return on_node, span_on, one, row1, all_local


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
        self.pack = packs = [_unit_pack(u) for u in units] if packs is None else packs
        # The packs' fields side by side (each pack read once).
        fields = list(zip(*packs)) if packs else [()] * 10
        on_node, span_on, one, row1, all_local = _index_units(units, fields, avail)
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
        self.entries: dict[int, list] = {}  # node → its ``scan_nodes`` result (regular input)

    def scan(self, memo: dict | None = None) -> None:
        """Settle ``regular``; fill ``top``, ``total``, ``gaining`` and the big nodes' orders (see
        the class doc). ``memo``: see ``choose_victims``; a node whose free row and units (their
        packs: the same objects, or equal ones; the same ones spanning) are those of an earlier
        call reuses its results (they are worked out from the packs alone)."""
        units, g, on_node = self.units, self.g, self.on_node
        if not self.regular or not on_node:
            self.regular = False
            self.total = g.of(units, range(len(units)))
            return
        cache = memo.setdefault(("search", g.vals, g.cap), {}) if memo is not None else None
        hits, todo = self._reused(cache)
        fresh = scan_nodes(self, todo) if todo else {}
        if fresh is IRREGULAR:
            self.regular = False
            self.total = g.of(units, range(len(units)))
            return
        if fresh is TOO_LARGE:
            self.top, self.total = python_tops(self)
            return
        if cache is not None:
            for n, e in fresh.items():
                cache[n] = e
        self._settle(hits, fresh)

    def _reused(self, cache: dict | None) -> tuple[dict[int, list], list[int]]:
        """(node → its ``scan_nodes`` result kept in ``cache`` by an earlier call, the nodes to
        scan afresh): a kept result holds when the node's free row, its units' packs and its
        spanning units' packs are equal to this call's."""
        on_node, avail, span_on, packs = self.on_node, self.g.avail, self.span_on, self.pack
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
        return hits, todo

    def _settle(self, hits: dict[int, list], fresh: dict[int, list]) -> None:
        """Fill ``top``, ``total``, ``orders``, ``first``, ``rows``, ``entries`` and ``gaining``
        from the per-node results (kept ``hits``, else ``fresh``); spanning units gain alone as
        ``_gaining_alone`` counts it."""
        units, g, on_node, span_on = self.units, self.g, self.on_node, self.span_on
        avail = g.avail
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
