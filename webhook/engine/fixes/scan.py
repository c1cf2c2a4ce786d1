"""The vectorised per-node scan of a victim search (``scan_nodes``): per candidate node, pods of
the shape once every unit on it is evicted (``top``), the cheapest-first order of its units and
the first prefix of it that gains a pod (the first per-node bundle, its sums by
``first_bundles``), and its one-node units that gain a pod alone.

Owns the int64 arithmetic of the fast paths and its limits: running sums stay exact below 2**62
(``TOO_LARGE`` beyond: ``python_tops`` does it in Python ints); a row of another width or with a
negative amount makes the input ``IRREGULAR`` (the plain paths then run). Reads a ``_Prep``
(``prep``) and changes nothing in it: ``_Prep.scan`` settles what it returns.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

#: ``scan_nodes``'s answers when it has no per-node results (see the module doc).
IRREGULAR = "irregular"
TOO_LARGE = "too-large"


def scan_nodes(prep, nodes: list[int]) -> dict[int, list] | str:
    """Per node of ``nodes``: [free row, units' packs, spanning units' packs, cheapest-first
    order (as positions in ``on_node[n]``, nodes with more than 10 units; else None), first
    prefix of it that gains a pod (-1: none), ``top``, positions of its one-node units gaining
    alone, the order's rows (int64), the first bundle's ``bundle`` (set by ``_Greedy.first_bundles``)].
    Vectorised over all the nodes. ``prep``: the ``_Prep`` (read only). ``IRREGULAR`` when a row
    has another width or a negative amount, ``TOO_LARGE`` when running sums could leave int64."""
    units, g, on_node = prep.units, prep.g, prep.on_node
    avail, one, row1, span_on, packs = g.avail, prep.one, prep.row1, prep.span_on, prep.pack
    width = len(g.vals)
    cost = prep.cost
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
        return IRREGULAR
    # Running sums over all the rows (≥ 0), plus a free row, stay exact in int64 below these bounds.
    if m is None or (int(m.max()) + 1) * (len(flat) + 1) >= 2**62 or max(-int(a.min()), int(a.max())) >= 2**61:
        return TOO_LARGE
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
    infos = first_bundles(prep, nodes, perms, seqs, firsts, starts, cs, before)
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


def first_bundles(prep, nodes: list[int], perms: list, seqs: list[list[int]], firsts: dict[int, int], starts: np.ndarray,
                   cs: np.ndarray, before: np.ndarray) -> dict[int, tuple]:
    """``bundle`` of the first bundle (cheapest-first prefix up to ``firsts``) of each node of
    ``nodes`` (by position) that has an order, two units or more in it and no spanning unit:
    its row from the running sums ``cs``, the rest summed by unit index — the numbers
    ``bundle`` adds up one bundle at a time. {} when a field is not int64 throughout.
    ``prep``: the ``_Prep`` (read only)."""
    f = prep.fields
    big = [(si, fi) for si, fi in firsts.items() if fi >= 1 and perms[si] is not None and nodes[si] not in prep.span_on]
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


def python_tops(prep) -> tuple[dict[int, int], int]:
    """(``top``, ``total``) of ``prep`` (a ``_Prep``, read only) in Python ints, for amounts too
    large for int64."""
    units, g = prep.units, prep.g
    top = {}
    total = 0
    for n, uis in prep.on_node.items():
        row = list(g.avail[n])
        for ui in uis:
            use = prep.row1[ui] if prep.one[ui] is not None else units[ui].use[n]
            for j, x in enumerate(use):
                row[j] += x
        top[n] = g.k(row)
        total += top[n] - g.base[n]
    return top, total
