"""The search's running state (``_State``): the chosen units, what they free per node, the pods
of the shape gained, and the cost parts of ``set_cost`` kept incrementally.

Owns the incremental arithmetic the greedy and the local search share; not the choice of what to
add (``search``). Rows: ints in the shape's column order.
"""

from __future__ import annotations

import functools
import operator
from typing import Iterable, Mapping, Sequence

from .costs import _Gain
from .prep import _Prep
from .ranking import _NEG_INF
from .units import Unit


class _Rows:
    """The rows half of the search state: chosen units, what they free per node, pods gained.

    ``cur[n]`` is node n's free row plus what the chosen units free there and ``cur_k[n]`` the
    pods of the shape that fit in it, kept for the nodes touched so far (untouched nodes: the
    ``_Gain``'s ``avail`` and ``base``); ``removed[n]``: what the chosen units free on n;
    ``gained``: pods of the shape gained over all candidate nodes. ``prep``: the search's
    ``_Prep``; when its input is regular (``fast``), units with a row on one candidate node and
    bundles of them take the fast paths (one row per node, the same numbers).
    """

    def __init__(self, units: Sequence[Unit], g: _Gain, avail: Mapping[int, tuple[int, ...]], prep: _Prep | None = None) -> None:
        self.units, self.g, self.avail = units, g, avail
        self.fast = prep if prep is not None and prep.regular else None
        self.chosen: set[int] = set()
        self.removed: dict[int, list[int]] = {}
        self.cur: dict[int, list[int]] = {}
        self.cur_k: dict[int, int] = {}
        self.gained = 0

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

    def _move(self, n: int, use: Sequence[int], sign: int) -> None:
        r = self.removed.get(n)
        self.removed[n] = [sign * x for x in use] if r is None else [x + sign * y for x, y in zip(r, use)]
        c = self.cur.get(n)
        if c is None:
            c = self.avail[n]
        c = self.cur[n] = [x + sign * y for x, y in zip(c, use)]
        self.cur_k[n] = self.g.k(c)

    def _add_rows(self, extra: list[int], info: tuple | None) -> set[int]:
        """The rows half of ``add``: free what the ``extra`` units use on the candidate nodes,
        update ``removed``, ``cur``, ``cur_k`` and ``gained``; returns the nodes touched."""
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


class _Costs:
    """The cost half of the search state: ``set_cost``'s parts of the chosen units, kept as they
    are added (``pdb``, ``prio``, ``tenants``, ``pods``, ``gpus``, ``hours``, and ``evicted``:
    pods evicted so far per budget index, ``Unit.budgets``; ``pdb`` counts each budget once,
    when its count first exceeds its allowance). A mixin of ``_State``: reads the ``units``,
    ``fast`` and ``chosen`` of ``_Rows``.
    """

    def _init_costs(self) -> None:
        self.pdb = self.pods = self.gpus = 0
        self.hours = 0.0
        self.prio = _NEG_INF
        self.tenants: set[str] = set()
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

    def _add_costs(self, extra: list[int], info: tuple | None) -> None:
        """The cost half of ``add``: choose the ``extra`` units and add their cost parts (a
        bundle's sums ``info`` at once when it has no budgets)."""
        f = self.fast
        chosen, tenants, evicted = self.chosen, self.tenants, self.evicted
        if info is not None and not info[7]:
            _, _, pdb, prio, pods, gpus, names, _ = info
            chosen.update(extra)  # one by one, in order (a list)
            self.pdb += pdb
            self.prio = max(self.prio, prio)
            self.pods += pods
            self.gpus += gpus
            self.hours = functools.reduce(operator.add, map(f.hours.__getitem__, extra), self.hours)
            tenants.update(names)
            return
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
            return
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


class _State(_Rows, _Costs):
    """Chosen units with running totals: removed resources per node, pods gained (``_Rows``),
    cost parts (``_Costs``). ``prep``: the search's ``_Prep`` (fast paths when regular)."""

    def __init__(self, units: Sequence[Unit], g: _Gain, avail: Mapping[int, tuple[int, ...]], prep: _Prep | None = None) -> None:
        _Rows.__init__(self, units, g, avail, prep)
        self._init_costs()

    def add(self, extra: Iterable[int], info: tuple | None = None, costs: bool = True) -> set[int]:
        """Choose the ``extra`` units; returns the candidate nodes they free resources on.
        ``info``: ``_Prep.bundle`` of them, when they are such a bundle. ``costs``: False to
        leave the cost parts as they are (fast paths only: only the chosen units, the rows and
        the pods gained are kept — what ``drop_unneeded`` reads)."""
        extra = list(extra)
        touched = self._add_rows(extra, info)
        if not costs and self.fast is not None:
            self.chosen.update(extra)  # one by one, in order (a list)
            return touched
        self._add_costs(extra, info)
        return touched
