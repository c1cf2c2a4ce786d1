"""What one victim search works out once about its units (``_Prep``): the units of each candidate
node, each unit's one node and row there, their packed costs, and — on regular input — the
vectorised per-node scan (pods when emptied, cheapest-first orders, first bundles).

Owns the per-call preparation and the fast paths' preconditions; not the searches that read it
(``search``, ``state``). Rows are ints in the shape's column order; the scan works in int64
only where sums stay exact, else in Python ints (the same numbers).
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from .costs import _Gain
from .units import Unit, _unit_pack


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
