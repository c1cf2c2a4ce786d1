"""The victim search's named steps, each against its definition (webhook.engine.fixes.*):
``_index_units`` and ``_Prep._reused`` (prep), ``scan_nodes`` / ``python_tops`` (scan), the two
halves of the running state (``_Rows``, ``_Costs`` in state), and the greedy's steps
(``_Greedy.first_bundles``, ``_Greedy._pop``, ``_budget_passes`` in search). Seeded instances
from test_fixes_equiv; every check compares with a direct computation.
"""

from __future__ import annotations

import heapq
import itertools
import random

from test_fixes_equiv import _instance
from webhook.engine.fixes import Unit
from webhook.engine.fixes.bundles import _node_bundle
from webhook.engine.fixes.costs import _Gain, set_cost
from webhook.engine.fixes.prep import _index_units, _Prep
from webhook.engine.fixes.scan import IRREGULAR, TOO_LARGE, python_tops, scan_nodes
from webhook.engine.fixes.search import _budget_passes, _Greedy
from webhook.engine.fixes.state import _State
from webhook.engine.fixes.units import _unit_pack


def _prepared(seed: int, scan: bool = True):
    """(units, avail, need, g, prep) of instance ``seed``, its ``_Prep`` scanned when ``scan``."""
    units, avail, vals, need, mpn = _instance(seed)
    g = _Gain(avail, vals, mpn)
    prep = _Prep(units, g)
    if scan:
        prep.scan()
    return units, avail, need, g, prep


def _direct_index(units, avail):
    on_node: dict[int, list[int]] = {}
    one, span = [None] * len(units), {}
    for ui, u in enumerate(units):
        inside = [n for n in u.use if n in avail]
        for n in inside:
            on_node.setdefault(n, []).append(ui)
        if len(inside) == 1:
            one[ui] = inside[0]
        for n in inside if len(inside) > 1 else ():
            span.setdefault(n, []).append(ui)
    return on_node, span, one


def test_index_units_is_the_direct_index():
    checked = 0
    for seed in range(80):
        units, avail, *_ = _instance(40_000 + seed)
        packs = [_unit_pack(u) for u in units]
        fields = list(zip(*packs))
        on_node, span_on, one, row1, all_local = _index_units(units, fields, avail)
        want_on, want_span, want_one = _direct_index(units, avail)
        assert (on_node, span_on, one) == (want_on, want_span, want_one), seed
        assert row1 == [None if n is None else units[ui].use[n] for ui, n in enumerate(one)]
        assert all_local == all(len(u.use) <= 1 for u in units)
        checked += bool(span_on)
    assert checked > 10                      # spanning units seen


def test_scan_nodes_top_first_and_alone_per_node():
    seen = 0
    for seed in range(60):
        units, avail, need, g, prep = _prepared(50_000 + seed, scan=False)
        if not prep.regular or not prep.on_node:
            continue
        nodes = sorted(prep.on_node)
        out = scan_nodes(prep, nodes)
        if out in (IRREGULAR, TOO_LARGE):
            continue
        assert python_tops(prep) == ({n: out[n][5] for n in nodes}, sum(out[n][5] - g.base[n] for n in nodes))
        for n in nodes:
            free, packs, span_packs, perm, first, top, alone, rows, _ = out[n]
            uis = prep.on_node[n]
            assert free == avail[n] and packs == tuple(prep.pack[ui] for ui in uis)
            assert span_packs == tuple(prep.pack[ui] for ui in prep.span_on.get(n, ()))
            row = list(avail[n])
            for ui in uis:
                row = [x + y for x, y in zip(row, units[ui].use[n])]
            assert top == g.k(row)
            assert sorted(alone) == [j for j, ui in enumerate(uis) if prep.one[ui] == n
                                     and g.k([x + y for x, y in zip(avail[n], units[ui].use[n])]) > g.base[n]]
            if perm is not None:
                order = [uis[j] for j in perm]
                assert order == sorted(uis, key=lambda ui: set_cost(units, [ui]))
                want = _node_bundle(units, uis, n, g) or []
                assert (order[: first + 1] if first >= 0 else []) == want
                seen += 1
    assert seen > 10


def test_scan_nodes_declines_irregular_and_too_large_rows():
    avail = {0: (10, 8), 1: (10, 8)}
    ok = [Unit("a", (None,), {0: (1, 2)}, 0, frozenset({"t"}), 2, 0.0), Unit("b", (None,), {1: (1, 4)}, 0, frozenset({"t"}), 4, 0.0)]
    neg = ok + [Unit("c", (None,), {0: (1, -1)}, 0, frozenset({"t"}), 0, 0.0)]
    big = [Unit("d", (None,), {0: (1, 2**62)}, 0, frozenset({"t"}), 0, 0.0)] + ok
    g = _Gain(avail, (1, 8), None)
    assert scan_nodes(_Prep(ok, g), [0, 1]) not in (IRREGULAR, TOO_LARGE)
    assert scan_nodes(_Prep(neg, g), [0, 1]) == IRREGULAR
    prep = _Prep(big, g)
    assert scan_nodes(prep, [0, 1]) == TOO_LARGE
    # In Python ints: node 0 once d and a go is (12 pod slots, 2**62 + 10 GPUs) → 12 pods (base 1);
    # node 1 once b goes is (11, 12) → 1 pod of 8 GPUs (base 1). Gained: 11 + 0.
    assert python_tops(prep) == ({0: 12, 1: 1}, 11)


def test_reused_keeps_only_results_whose_node_is_unchanged():
    units, avail, vals, need, mpn = _instance(60_001)
    g = _Gain(avail, vals, mpn)
    first = _Prep(units, g)
    memo: dict = {}
    first.scan(memo)
    assert first.regular
    cache = memo[("search", g.vals, g.cap)]
    again = _Prep(units, _Gain(avail, vals, mpn))
    hits, todo = again._reused(cache)
    assert sorted(hits) == sorted(again.on_node) and todo == []
    changed = next(iter(sorted(again.on_node)))
    avail2 = dict(avail)
    avail2[changed] = tuple(x + 1 for x in avail2[changed])
    other = _Prep(units, _Gain(avail2, vals, mpn))
    hits, todo = other._reused(cache)
    assert todo == [changed] and changed not in hits and len(hits) == len(other.on_node) - 1
    assert _Prep(units, g)._reused(None) == ({}, list(first.on_node))


def test_state_halves_track_gain_and_cost_of_the_chosen_set():
    checked = 0
    for seed in range(40):
        rng = random.Random(seed)
        units, avail, need, g, prep = _prepared(70_000 + seed)
        for fast in (prep, None):
            st = _State(units, g, avail, fast)
            chosen: list[int] = []
            for _ in range(min(6, len(units))):
                extra = rng.sample([ui for ui in range(len(units)) if ui not in chosen], 1)
                after = chosen + extra
                assert st.delta_add(extra) == g.of(units, after) - g.of(units, chosen)
                assert st.delta_one(extra[0]) == st.delta_add(extra)
                assert st.cost_with(extra) == set_cost(units, after) == st.cost_with_one(extra[0])
                st.add(extra)
                chosen = after
                assert st.chosen == set(chosen) and st.gained == g.of(units, chosen)
                assert st.cost() == set_cost(units, chosen)
                checked += 1
            ui = chosen[-1]
            assert st.loss_remove(ui) == g.of(units, chosen) - g.of(units, chosen[:-1])
    assert checked > 200


def test_greedy_first_bundles_and_pop():
    seen = 0
    for seed in range(40):
        units, avail, need, g, prep = _prepared(80_000 + seed)
        if prep.total < need:
            continue
        search = _Greedy(units, g, prep, need, 200)
        for n, uis in prep.on_node.items():
            want = _node_bundle(units, uis, n, g) if len(uis) > 1 and g.base[n] < (prep.top or {n: g.base[n] + 1})[n] else None
            got = search.bundles0.get(n)
            assert got == (frozenset(want) if want and len(want) > 1 else None), (seed, n)
            seen += got is not None
        st = _State(units, g, avail, prep)
        key_of = search.key_fn(st, 0, 0)
        keyed = [(key_of(ui), ui) for ui in search.gaining]
        keyed = [(k, ui) for k, ui in keyed if k is not None]
        if keyed:
            seq = itertools.count()
            heap = [(k, next(seq), ui) for k, ui in keyed]
            heapq.heapify(heap)
            best, c = _Greedy._pop(heap, seq, key_of, st)
            assert best == {c} and (key_of(c), c) == min(keyed, key=lambda kc: (kc[0], search.gaining.index(kc[1])))
        found = search.run()
        assert found is None or g.of(units, found) >= need
    assert seen > 5


def test_budget_passes_never_cost_more_than_the_first_pass():
    compared = 0
    for seed in range(60):
        units, avail, need, g, prep = _prepared(90_000 + seed)
        if not any(u.budgets for u in units):
            continue
        if prep.total < need:
            continue
        search = _Greedy(units, g, prep, need, 200)
        found = search.run()
        if found is None:
            continue
        best = _budget_passes(units, search, found)
        assert g.of(units, best) >= need and set_cost(units, best) <= set_cost(units, found)
        compared += 1
    assert compared > 5
