"""What a set of victim units costs and gains: ``set_cost`` (the lexicographic cost of ``Fix.cost``
over a set of units, PDB violations counted over their union) and ``_Gain`` (pods of the shape
gained on the candidate nodes as units are evicted).

Owns the arithmetic every search shares; not the searches themselves (``search``, ``local``,
``bundles``). Rows are ints in the shape's column order; a node's pods of the shape are
min over columns of free // per-pod request (negative free counts as 0), capped at
``max_per_node`` when given.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from .ranking import _NEG_INF
from .units import Unit

__all__ = ["set_cost"]


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
    """``set_cost(units, chosen)`` from the units' ``_unit_pack``: the same sums, in the same order.

    Kept as its own loop rather than ``set_cost`` over the packs: building the packs per call
    made ``set_cost`` 5.4 → 7.8 µs a call (50k random subsets of 800 units), and it is the exact
    search's and the bundles' sort key. ``tests/test_fixes_equiv.py::test_pack_cost_is_set_cost``
    keeps the two equal."""
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
