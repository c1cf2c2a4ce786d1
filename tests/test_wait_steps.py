"""The named steps of the expected wait (webhook/engine/wait/), each on its own: the node
scan and the pool, the limit sweep, the exact band's DP and search, Kaplan–Meier, and the
joint-draw replay — the last three against brute force.

Exact values for the sweep come from FIELD-NOTES §5 (busy nodes free at [0.5, 2, 3, 7, 9, 20]
h, K=3 → 3 h; a 2-node, 10 h gang ahead → 9 h).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.engine.fit import shape_of
from webhook.engine.wait import AheadGang, LifetimeModel, RuntimeHistory
from webhook.engine.wait.band import levels, quantiles, search, tail
from webhook.engine.wait.inputs import main_pod_set, median_per_node
from webhook.engine.wait.laws import UNKNOWN
from webhook.engine.wait.learn import kaplan_meier, law_for, law_memo
from webhook.engine.wait.pool import Unit, assign_laws, build_pool, scan_nodes
from webhook.engine.wait.simulate import _Nodes, _replay
from webhook.engine.wait.sweep import earliest_start, sweep

try:
    from .builders import gang, node, pod, pod_set, snapshot
except ImportError:
    from builders import gang, node, pod, pod_set, snapshot

H = 3600.0
NOW = 1_750_000_000.0
ENDS_H = [0.5, 2, 3, 7, 9, 20]


def _pool_of(snap, g, history=None):
    """scan → laws → pool for gang ``g`` on every node of ``snap``."""
    ps, _ = main_pod_set(g)
    shape = shape_of(snap, ps.requests)
    eligible = np.ones(len(snap.nodes), dtype=bool)
    scan = scan_nodes(snap, ps, shape, eligible, g.key, NOW)
    memo = law_memo(snap, NOW, history)
    blocking, share = assign_laws(scan.groups, history, LifetimeModel(), NOW, memo)
    pool, units = build_pool(scan)
    return scan, pool, units, blocking, share


def _busy(ends_h):
    nodes = [node(f"n{i}") for i in range(len(ends_h))]
    pods = [pod(f"p{i}", f"n{i}", gpu=8, gang=f"Job/default/j{i}", owner_kind="Job", start_time=NOW - H,
                runtime_limit_s=(1 + e) * H) for i, e in enumerate(ends_h)]
    return snapshot(nodes, pods)


# ------------------------------------------------------------------ scan and pool


def test_scan_groups_the_pods_that_block_and_skips_those_that_never_end():
    # n0: two 4-GPU pods of two gangs (limits 1 h and 5 h) and a DaemonSet pod; n1: one pod
    # of the gang itself (never ends for it); n2: empty.
    pods = [pod("a", "n0", gpu=4, gang="Job/default/a", owner_kind="Job", start_time=NOW, runtime_limit_s=5 * H),
            pod("b", "n0", gpu=4, gang="Job/default/b", owner_kind="Job", start_time=NOW, runtime_limit_s=H),
            pod("ds", "n0", cpu=1, owner_kind="DaemonSet"),
            pod("own", "n1", gpu=8, gang="JobSet/default/g", owner_kind="Job", start_time=NOW, runtime_limit_s=H)]
    snap = snapshot([node("n0"), node("n1"), node("n2")], pods)
    scan, pool, units, blocking, share = _pool_of(snap, gang(pod_set("w", 3, gpu=4)))
    assert [(g.queue, g.owner_kind, g.pods, g.limit_end) for g in scan.groups] == [
        ("", "Job", 1, NOW + 5 * H), ("", "Job", 1, NOW + H)]
    assert (blocking, share, scan.fits_now) == (2, 1.0, 2)      # n2 holds two 4-GPU pods now
    assert scan.idle_caps == [2]                                # n1 is held for good: not idle
    # n0's chain in median-end order: b (1 h) then a (5 h); each frees one pod's room.
    assert pool == [((), (), 2, 2, None), ((1, 0), ((1, 1), (2, 2)), 0, 2, ((1, 0), ((1, 1), (2, 2)), 0))]
    assert list(units.values()) == [Unit((1, 0), ((1, 1), (2, 2)), 0)]


def test_the_limit_sweep_of_the_field_notes():
    snap = _busy(ENDS_H)
    scan, pool, *_ = _pool_of(snap, gang(pod_set("w", 3, gpu=8)))
    assert earliest_start(scan.groups, pool, [], 3, NOW, None) == pytest.approx(3 * H)
    ahead = [AheadGang("hi", 2, 10 * H)]
    assert earliest_start(scan.groups, pool, ahead, 3, NOW, None) == pytest.approx(9 * H)
    # The gang ahead starts when the 2nd node frees (2 h) and holds the two first ones.
    ours, starts, owner = sweep(pool, ahead, 3, [e * H for e in ENDS_H], [10 * H])
    assert ours == pytest.approx(9 * H) and starts == [pytest.approx(2 * H)]
    assert owner == [0, 0, -1, -1, -1, -1]
    # A gang larger than the pool never takes it; one without a limit holds its nodes for good.
    assert sweep(pool, [AheadGang("big", 7, H)], 3, [e * H for e in ENDS_H], [H])[:2] == (3 * H, [0.0])
    assert earliest_start(scan.groups, pool, [AheadGang("x", 4, None)], 3, NOW, None) is None


def test_median_per_node_counts_the_nodes_that_hold_one():
    snap = snapshot([node("a", gpu=8), node("b", gpu=4), node("c", gpu=0), node("d", gpu=8)])
    assert median_per_node(snap, snap.alloc, {"nvidia.com/gpu": 4}) == 2         # 2, 1, 2: median 2
    assert median_per_node(snap, snap.alloc, {"nvidia.com/gpu": 16}) == 0


# ------------------------------------------------------------------ the exact band


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.lists(st.integers(1, 3), min_size=1, max_size=3),
                          st.integers(1, 2), st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3)),
                min_size=1, max_size=4),
       st.integers(0, 3), st.integers(1, 12))
def test_tail_is_the_brute_force_capacity_tail(spec, base, need):
    # Units with capacity levels reached with nested probabilities; P(Σ capacity ≥ need)
    # by enumerating every unit's level.
    units, probs = [], []
    for c0, rises, mult, ps in spec:
        caps, c = [], c0
        for r in rises:
            c += r
            caps.append(c)
        steps = tuple((j + 1, cap) for j, cap in enumerate(caps))
        reach = np.cumprod(sorted(ps, reverse=True)[: len(steps)])      # P(level ≥ j), falling
        units.append(Unit(tuple(range(len(steps))), steps, c0, mult))
        probs.append([np.ones(1)] + [np.array([p]) for p in reach])
    want = 0.0
    for lv in itertools.product(*[range(len(p)) for p in probs]):
        pr, have = 1.0, base
        for u, p, j in zip(units, probs, lv):
            pr *= p[j][0] - (p[j + 1][0] if j + 1 < len(p) else 0.0)
            have += u.mult * ([u.c0] + [c for _, c in u.steps])[j]
        want += pr if have >= need else 0.0
    assert tail(units, probs, base, need, 1)[0] == pytest.approx(want, abs=1e-12)


def test_levels_multiply_the_chain_prefix():
    u = Unit((4, 7), ((1, 1), (2, 3)), 0, 1)
    ts = np.array([1.0, 2.0])
    cdf = {4: np.array([0.5, 1.0]), 7: np.array([0.2, 0.4])}
    got = levels(u, cdf, ts)
    assert [x.tolist() for x in got] == [[1.0, 1.0], [0.5, 1.0], [pytest.approx(0.1), pytest.approx(0.4)]]


def test_search_finds_the_quantiles_of_a_known_law():
    tau = 3 * H
    (p50, p90), beyond = search(lambda t: 1 - np.exp(-np.asarray(t) / tau), 30 * 86400.0, (0.5, 0.9))
    assert not beyond
    assert p50 == pytest.approx(tau * math.log(2), rel=5e-3) and p90 == pytest.approx(tau * math.log(10), rel=5e-3)
    # Never reached within the horizon: None and "beyond"; reached at 0: 0.
    assert search(lambda t: np.full(len(t), 0.3), 100.0, (0.5,)) == ([None], True)
    assert search(lambda t: np.ones(len(t)), 100.0, (0.5, 0.9)) == ([0.0, 0.0], False)


def test_quantiles_are_the_smallest_draw_with_enough_mass():
    starts = np.array([5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert quantiles(starts, 100.0, (0.5, 0.9)) == [5.0, 9.0]
    assert quantiles(starts, 8.5, (0.5, 0.9)) == [5.0, None]


# ------------------------------------------------------------------ Kaplan–Meier


def _km_reference(ev, cens):
    """Textbook product-limit estimator with unit weights: the mass at each event value (ties
    share their step equally) and the survival left after the last event."""
    times = sorted(set(ev))
    surv, mass_at = 1.0, {}
    for t in times:
        d = sum(1 for e in ev if e == t)
        at_risk = sum(1 for e in ev if e >= t) + sum(1 for c in cens if c >= t)
        drop = surv * d / at_risk
        mass_at[t] = drop / d
        surv -= drop
    return [mass_at[e] for e in ev], surv


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=8), st.lists(st.integers(1, 30), max_size=6))
def test_kaplan_meier_matches_the_product_limit_estimator(ev, cens):
    mass, left = kaplan_meier(np.array(ev, float), np.ones(len(ev)), np.array(cens, float), np.ones(len(cens)))
    want, want_left = _km_reference(ev, cens)
    assert mass.tolist() == pytest.approx(want, abs=1e-12)
    assert left == pytest.approx(want_left, abs=1e-12)
    assert mass.sum() + left == pytest.approx(1.0)


def test_law_for_falls_back_and_memoises():
    h = RuntimeHistory()
    memo: dict = {}
    assert law_for(h, LifetimeModel(), "q", "Job", None, memo) is UNKNOWN      # no runs, no limit
    prior = law_for(h, LifetimeModel(), "q", "Job", 4 * H, memo)
    assert prior.form == "prior" and prior.cap == 4 * H
    assert law_for(h, LifetimeModel(), "q", "Job", 4 * H, memo) is prior        # memoised per key
    for _ in range(20):
        h.add("q", "Job", 2 * H)
    learned = law_for(h, LifetimeModel(), "q", "Job", None, {})
    assert learned.form == "mix" and learned.median(0.0) == pytest.approx(2 * H, rel=0.02)


# ------------------------------------------------------------------ the joint-draw replay


@st.composite
def _replay_case(draw):
    """A pool of busy nodes (own groups, 1–3 capacity steps, some capacity now) plus idle
    nodes of one capacity, drawn group ends, gangs ahead with drawn run times."""
    uniform = draw(st.booleans())
    pool, ng = [], 0
    full_u = draw(st.integers(1, 3))
    for _ in range(draw(st.integers(1, 5))):
        if uniform:
            chain, steps, c0, full = (ng,), ((1, full_u),), 0, full_u
            ng += 1
        else:
            n_steps = draw(st.integers(1, 3))
            c0 = draw(st.integers(0, 1))
            caps = list(itertools.accumulate([c0] + [draw(st.integers(1, 2)) for _ in range(n_steps)]))[1:]
            chain = tuple(range(ng, ng + n_steps))
            steps = tuple((j + 1, c) for j, c in enumerate(caps))
            full = caps[-1]
            ng += n_steps
        pool.append((chain, steps, c0, full, (chain, steps, c0)))
    idle_cap = full_u if uniform else draw(st.integers(1, 3))
    pool += [((), (), idle_cap, idle_cap, None)] * draw(st.integers(0, 2))
    S = 6
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    G = np.zeros((S, ng + 1))
    G[:, :ng] = rng.uniform(0.1, 100.0, size=(S, ng))
    ahead = [(draw(st.integers(1, len(pool) + 1)), rng.uniform(0.1, 50.0, size=S))
             for _ in range(draw(st.integers(0, 3)))]
    need = draw(st.integers(1, sum(p[3] for p in pool)))
    return pool, G, ahead, need


def _fifo_plan(pool, ends, ahead, need):
    """Brute force of the plan ``sweep`` and ``_replay`` state, one draw: every pool node's
    capacity events from its chain (a level is reached when every group of its prefix has
    ended), then the gangs ahead in queue order, each starting at the first moment (not before
    the one before it) when ``n`` whole nodes are fully free, taking the ``n`` free earliest —
    of nodes free at the same moment the first in pool order, as Slurm's node selection walks
    its node table in index order — and holding them ``run`` s; ours at the first moment (not
    before the last gang ahead) when the capacity of the nodes never taken plus the nodes
    given back covers ``need``. Times are scanned over every candidate moment."""
    P = len(pool)
    cap_events = []
    for chain, steps, c0, _, _ in pool:
        ev, level = ([(0.0, c0)] if c0 else []), c0
        for length, c in steps:
            ev.append((max(ends[g] for g in chain[:length]), c - level))
            level = c
        cap_events.append(ev)
    free = [max((t for t, _ in ev), default=math.inf) for ev in cap_events]
    held = [False] * P
    prev = 0.0
    for n, run in ahead:
        if n > P:
            continue
        moments = sorted({prev, *free})
        start = next((t for t in moments if t >= prev and sum(f <= t for f in free) >= n), math.inf)
        for k in sorted(range(P), key=lambda k: (free[k], k))[:n]:
            free[k], held[k] = start + run, True
        prev = start
    events = [e for k in range(P) if not held[k] for e in cap_events[k]]
    events += [(free[k], pool[k][3]) for k in range(P) if held[k]]
    for t in sorted({prev, *(t for t, _ in events)}):
        if t >= prev and sum(c for u, c in events if u <= t) >= need:
            return t
    return math.inf


def test_a_tie_in_free_times_goes_to_the_first_pool_node():
    # The counterexample hypothesis found (draw 0 of it): four busy nodes, one group each,
    # freeing 1, 1, 1 and 2 pods of ours at 63.7, 27.1, 4.19 and 1.75 s, and an idle 1-pod
    # node; gangs ahead of 1, 2 and 3 whole nodes running 30.8, 34.5 and 24.3 s; ours needs 2.
    # The 1-node gang takes the idle node at 0 (back at 30.8); the 2-node gang takes n3 and n2
    # at 4.19 and gives both back at 38.65 — a tie; the 3-node gang takes n1 (27.1), the idle
    # node (30.8) and, of n2 and n3, n2 (first in pool order) at 38.65; n3's 2 pods are free
    # then: ours starts at 38.65. The sweep used to break the tie by np.argpartition's order
    # (undefined), took n3 and found 63.0 (n0 and the 3-node gang's nodes coming back).
    pool = [((0,), ((1, 1),), 0, 1, ((0,), ((1, 1),), 0)),
            ((1,), ((1, 1),), 0, 1, ((1,), ((1, 1),), 0)),
            ((2,), ((1, 1),), 0, 1, ((2,), ((1, 1),), 0)),
            ((3,), ((1, 2),), 0, 2, ((3,), ((1, 2),), 0)),
            ((), (), 1, 1, None)]
    ends = [63.73247256, 27.05169271, 4.19325504, 1.75111079, 0.0]
    runs = [30.80771706, 34.45349186, 24.34318441]
    ahead = list(zip([1, 2, 3], runs))
    want = 4.19325504 + 34.45349186
    assert _fifo_plan(pool, ends, ahead, 2) == pytest.approx(want)
    ours, starts, owner = sweep(pool, [AheadGang(f"a{k}", n) for k, (n, _) in enumerate(ahead)], 2, ends, runs)
    assert ours == pytest.approx(want)
    assert starts == [0.0, pytest.approx(4.19325504), pytest.approx(want)]
    assert owner == [-1, 2, 2, 1, 2]
    got = _replay([(n, np.array([r]), False) for n, r in ahead] + [(0, None, False)],
                  _Nodes(pool, np.array([ends]), 2), None, math.inf)
    assert got.tolist() == [pytest.approx(want)]


@settings(max_examples=150, deadline=None)
@given(_replay_case())
def test_the_limit_sweep_is_the_brute_force_fifo_plan(case):
    pool, G, ahead, need = case
    gangs = [AheadGang(f"a{k}", n) for k, (n, _) in enumerate(ahead)]
    for s in range(G.shape[0]):
        runs = [r[s] for _, r in ahead]
        want = _fifo_plan(pool, G[s].tolist(), [(n, r) for (n, _), r in zip(ahead, runs)], need)
        assert sweep(pool, gangs, need, G[s].tolist(), runs)[0] == pytest.approx(want), s


@settings(max_examples=150, deadline=None)
@given(_replay_case())
def test_the_vectorised_replay_is_the_limit_sweep_on_each_draw(case):
    # Without later arrivals, each draw of the replay is Slurm's sweep run on that draw's ends.
    pool, G, ahead, need = case
    nodes = _Nodes(pool, G, need)
    items = [(n, runs, False) for n, runs in ahead] + [(0, None, False)]
    got = _replay(items, nodes, None, math.inf)
    gangs = [AheadGang(f"a{k}", n) for k, (n, _) in enumerate(ahead)]
    for s in range(G.shape[0]):
        want, _, _ = sweep(pool, gangs, need, G[s].tolist(), [runs[s] for _, runs in ahead])
        assert got[s] == pytest.approx(want), s


def test_replay_stops_past_the_horizon():
    pool = [((0,), ((1, 1),), 0, 1, ((0,), ((1, 1),), 0))]
    G = np.array([[5.0, 0.0], [50.0, 0.0]])
    got = _replay([(0, None, False)], _Nodes(pool, G, 1), None, 10.0)
    assert got.tolist() == [5.0, math.inf]
