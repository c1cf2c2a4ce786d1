"""Per-node bundles: the cheapest units on one node whose eviction gains one more pod there
(``_node_bundle``), and the units that gain a pod on their own (``_gaining_alone``) — the
greedy's candidates besides single units.

Owns those two candidate generators (exact up to 10 units on a node, cheapest-first beyond);
rows are ints in the shape's column order, summed in int64 only below ``_SAFE_INT``.
"""

from __future__ import annotations

import itertools
from typing import Callable, Sequence

import numpy as np

from .costs import _Gain, set_cost
from .units import Unit


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
