"""Expected wait (webhook/engine/wait/): the reservation sweep, the p50/p90 band, the
lifetime model, RuntimeHistory, and the runtime-limit fields pod_from_k8s fills.

Exact values come from FIELD-NOTES §5 (busy nodes free at [0.5, 2, 3, 7, 9, 20] h, K=3 → 3 h;
with a higher-priority 2-node, 10 h gang ahead → 9 h).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.adapters.cluster import pod_from_k8s
from webhook.engine.wait import (
    AheadGang,
    LifetimeModel,
    RuntimeHistory,
    WaitEstimate,
    estimate_wait,
    format_duration,
    gangs_ahead,
)

try:
    from .builders import gang, node, pod, pod_set, snapshot
except ImportError:
    from builders import gang, node, pod, pod_set, snapshot

H = 3600.0
NOW = 1_750_000_000.0
ENDS_H = [0.5, 2, 3, 7, 9, 20]


def busy_cluster(ends_h, *, age_h: float = 1.0, limits: bool = True, extra_nodes: int = 0, **kw):
    """One 8-GPU node per entry, each held by one whole-node Job pod ending at ``ends_h[i]`` h."""
    nodes = [node(f"n{i}") for i in range(len(ends_h) + extra_nodes)]
    pods = [
        pod(f"p{i}", f"n{i}", gpu=8, gang=f"Job/default/j{i}", owner_kind="Job", queue="q",
            start_time=NOW - age_h * H, runtime_limit_s=(age_h + e) * H if limits else None, **kw)
        for i, e in enumerate(ends_h)
    ]
    return snapshot(nodes, pods)


def whole_node_gang(k: int):
    return gang(pod_set("worker", k, gpu=8))


# ------------------------------------------------------------------ FIELD-NOTES §5


def test_field_notes_example_k_th_earliest_node():
    est = estimate_wait(busy_cluster(ENDS_H), whole_node_gang(3), NOW)
    assert est.earliest_start_s == pytest.approx(3 * H)
    assert est.known_share == 1.0 and not est.unknown
    assert est.blocking_pods == 6 and est.pods_needed == 3 and est.fits_now == 0


def test_field_notes_example_gang_ahead_reserves_first():
    est = estimate_wait(busy_cluster(ENDS_H), whole_node_gang(3), NOW, ahead=[AheadGang("Job/default/hi", 2, 10 * H)])
    assert est.earliest_start_s == pytest.approx(9 * H)


def test_gangs_ahead_start_in_order_and_reuse_returned_nodes():
    # Two nodes free at 1 h and 2 h; a 2-node gang ahead runs 1 h (nodes back at 3 h); a second
    # 2-node gang ahead starts at 3 h, runs 1 h; ours (2 nodes) starts at 4 h.
    ahead = [AheadGang("a", 2, 1 * H), AheadGang("b", 2, 1 * H)]
    est = estimate_wait(busy_cluster([1, 2]), whole_node_gang(2), NOW, ahead=ahead)
    assert est.earliest_start_s == pytest.approx(4 * H)


def test_fits_now_is_zero():
    est = estimate_wait(busy_cluster(ENDS_H, extra_nodes=3), whole_node_gang(3), NOW)
    assert (est.earliest_start_s, est.p50_s, est.p90_s) == (0.0, 0.0, 0.0)
    assert est.fits_now == 3
    assert est.text() == "expected wait 0 (fits now)"


def test_free_nodes_count_towards_k():
    # 1 free node + busy ones: a 3-node gang needs the 2nd earliest busy node (2 h).
    est = estimate_wait(busy_cluster(ENDS_H, extra_nodes=1), whole_node_gang(3), NOW)
    assert est.earliest_start_s == pytest.approx(2 * H)
    assert est.fits_now == 1


# ------------------------------------------------------------------ unknown ends


def test_unknown_when_no_limits():
    est = estimate_wait(busy_cluster(ENDS_H, limits=False), whole_node_gang(3), NOW)
    assert est.unknown and est.known_share == 0.0
    assert est.p50_s is None and est.p90_s is None and est.earliest_start_s is None
    assert est.text() == "expected wait unknown (end times known for 0% of blocking pods)"


def test_default_limit_gives_slurm_style_bound():
    est = estimate_wait(busy_cluster(ENDS_H, limits=False, age_h=1), whole_node_gang(3), NOW, default_limit_s=24 * H)
    assert est.unknown and est.earliest_start_s == pytest.approx(23 * H)


def test_history_makes_unlimited_pods_known():
    hist = RuntimeHistory()
    for r in np.linspace(1.5, 30, 40):
        hist.add("q", "Job", r * H)
    est = estimate_wait(busy_cluster(ENDS_H, limits=False), whole_node_gang(3), NOW, history=hist)
    assert not est.unknown and est.known_share == 1.0
    assert 0 < est.p50_s <= est.p90_s
    # too little history is not trusted
    small = RuntimeHistory()
    for r in (2, 3, 4):
        small.add("q", "Job", r * H)
    assert estimate_wait(busy_cluster(ENDS_H, limits=False), whole_node_gang(3), NOW, history=small).unknown


def test_known_share_counts_blocking_pods():
    snap = busy_cluster(ENDS_H[:4])
    extra = [pod(f"u{i}", f"m{i}", gpu=8, gang=f"Job/default/u{i}", owner_kind="Job", start_time=NOW - H) for i in range(1)]
    snap = snapshot(list(snap.nodes) + [node("m0")], list(snap.pods) + extra)
    est = estimate_wait(snap, whole_node_gang(3), NOW)
    assert est.known_share == pytest.approx(0.8) and not est.unknown
    assert "known for 80% of blocking pods" in est.text()


# ------------------------------------------------------------------ the band


def test_band_is_ordered_and_below_the_limit_bound():
    est = estimate_wait(busy_cluster(ENDS_H), whole_node_gang(3), NOW)
    assert 0 < est.p50_s <= est.p90_s <= est.earliest_start_s + 1
    assert est.text().startswith("expected wait p50 ") and "p90" in est.text()


def test_single_node_median_is_sqrt_age_times_limit():
    model = LifetimeModel(floor_s=60, limit_mass=0.0)
    age, limit = 2 * H, 18 * H
    snap = snapshot([node("n0")], [pod("p", "n0", gpu=8, gang="Job/default/j", owner_kind="Job",
                                       start_time=NOW - age, runtime_limit_s=limit)])
    est = estimate_wait(snap, whole_node_gang(1), NOW, model=model)
    assert est.p50_s == pytest.approx(math.sqrt(age * limit) - age, rel=2e-3)  # median total √(a·L)
    assert est.earliest_start_s == pytest.approx(limit - age)


def test_overdue_pod_frees_now():
    snap = snapshot([node("n0")], [pod("p", "n0", gpu=8, owner_kind="Job", start_time=NOW - 5 * H, runtime_limit_s=H)])
    est = estimate_wait(snap, whole_node_gang(1), NOW)
    assert est.earliest_start_s == 0.0 and est.p50_s == 0.0 and est.p90_s == 0.0


def test_nodes_of_one_gang_free_together():
    # 4 nodes held by ONE gang vs 4 nodes held by 4 gangs with the same limits: needing all 4,
    # one gang frees them at once (its own end), four independent gangs need the last of four.
    one = snapshot([node(f"n{i}") for i in range(4)],
                   [pod(f"p{i}", f"n{i}", gpu=8, gang="Job/default/big", owner_kind="Job",
                        start_time=NOW - H, runtime_limit_s=10 * H) for i in range(4)])
    four = busy_cluster([9, 9, 9, 9])
    a = estimate_wait(one, whole_node_gang(4), NOW)
    b = estimate_wait(four, whole_node_gang(4), NOW)
    assert a.earliest_start_s == b.earliest_start_s == pytest.approx(9 * H)
    assert a.p50_s < b.p50_s


# ------------------------------------------------------------------ shapes


def test_multi_pod_per_node_counts_capacity_freed():
    # Two nodes, each with two 4-GPU pods: ends (1 h, 5 h) and (2 h, 3 h). A 4-GPU pod fits in
    # each freed half: capacity +1 at 1 h, 2 h, 3 h, 5 h.
    nodes = [node("n0"), node("n1")]
    ends = {"n0": (1, 5), "n1": (2, 3)}
    pods = [pod(f"{n}-{k}", n, gpu=4, gang=f"Job/default/{n}{k}", owner_kind="Job", start_time=NOW,
                runtime_limit_s=e * H) for n, es in ends.items() for k, e in enumerate(es)]
    snap = snapshot(nodes, pods)
    for k, want in ((1, 1), (2, 2), (3, 3), (4, 5)):
        est = estimate_wait(snap, gang(pod_set("w", k, gpu=4)), NOW)
        assert est.earliest_start_s == pytest.approx(want * H), k
        assert est.p50_s <= est.p90_s


def test_daemonset_and_small_cpu_pods_do_not_block():
    nodes = [node("n0")]
    pods = [pod("ds", "n0", cpu=1, owner_kind="DaemonSet"),
            pod("side", "n0", cpu=1, owner_kind="ReplicaSet"),          # never ends, but leaves room
            pod("train", "n0", gpu=8, cpu=8, owner_kind="Job", start_time=NOW, runtime_limit_s=2 * H)]
    est = estimate_wait(snapshot(nodes, pods), gang(pod_set("w", 1, gpu=8, cpu=8)), NOW)
    assert est.blocking_pods == 1 and est.known_share == 1.0
    assert est.earliest_start_s == pytest.approx(2 * H)


def test_missing_resource_is_unknown():
    est = estimate_wait(busy_cluster([1]), gang(pod_set("w", 1, **{"mem_gi": 1}), pod_set("x", 1, gpu=0)), NOW)
    assert est.p50_s in (0.0, None)
    est = estimate_wait(busy_cluster([1]), gang(pod_set("w", 1, gpu=8, **{})), NOW)
    assert not est.unknown


# ------------------------------------------------------------------ monotone (hypothesis)


ends_st = st.lists(st.floats(min_value=0.05, max_value=200.0, allow_nan=False), min_size=2, max_size=12)


@settings(max_examples=60, deadline=None)
@given(ends=ends_st, k=st.integers(1, 11), age=st.floats(0.0, 48.0))
def test_more_nodes_needed_never_waits_less(ends, k, age):
    k = min(k, len(ends) - 1)
    snap = busy_cluster(ends, age_h=age)
    a = estimate_wait(snap, whole_node_gang(k), NOW)
    b = estimate_wait(snap, whole_node_gang(k + 1), NOW)
    assert b.earliest_start_s >= a.earliest_start_s - 1e-6
    assert a.earliest_start_s == pytest.approx(sorted(ends)[k - 1] * H)
    tol = 1e-3 * max(1.0, a.p50_s)
    assert b.p50_s >= a.p50_s - tol and b.p90_s >= a.p90_s - 1e-3 * max(1.0, a.p90_s)
    assert a.p50_s <= a.p90_s <= a.earliest_start_s * (1 + 5e-3) + 1   # search precision ~0.2 %


@settings(max_examples=40, deadline=None)
@given(ends=ends_st, k=st.integers(1, 6), ahead_nodes=st.integers(1, 4), ahead_h=st.floats(0.1, 100.0))
def test_a_gang_ahead_never_shortens_the_wait(ends, k, ahead_nodes, ahead_h):
    k = min(k, len(ends))
    snap = busy_cluster(ends)
    a = estimate_wait(snap, whole_node_gang(k), NOW)
    b = estimate_wait(snap, whole_node_gang(k), NOW, ahead=[AheadGang("x", ahead_nodes, ahead_h * H)])
    assert b.earliest_start_s >= a.earliest_start_s - 1e-6
    if b.p50_s is not None:
        assert b.p50_s >= a.p50_s * (1 - 1e-3) - 1 and b.p90_s >= b.p50_s


def test_pure_shift_invariance():
    # No clock: moving every time (starts and now) by the same offset changes nothing.
    a = estimate_wait(busy_cluster(ENDS_H), whole_node_gang(3), NOW)
    nodes = [node(f"n{i}") for i in range(6)]
    pods = [pod(f"p{i}", f"n{i}", gpu=8, gang=f"Job/default/j{i}", owner_kind="Job", queue="q",
                start_time=NOW - H + 1e6, runtime_limit_s=(1 + e) * H) for i, e in enumerate(ENDS_H)]
    b = estimate_wait(snapshot(nodes, pods), whole_node_gang(3), NOW + 1e6)
    assert a.as_dict() == b.as_dict()


# ------------------------------------------------------------------ gangs ahead from the snapshot


def test_gangs_ahead_from_pending_pods():
    snap = busy_cluster(ENDS_H)
    pending = [pod(f"hi-{i}", "", gpu=8, gang="PyTorchJob/default/hi", owner_kind="PyTorchJob", priority=100,
                   phase="Pending", runtime_limit_s=10 * H) for i in range(2)]
    pending += [pod("lo-0", "", gpu=8, gang="Job/default/lo", owner_kind="Job", priority=0, phase="Pending")]
    pending += [pod("cpu-0", "", cpu=1, gang="Job/default/cpu", owner_kind="Job", priority=100, phase="Pending")]
    snap = snapshot(snap.nodes, list(snap.pods) + pending)
    ahead = gangs_ahead(snap, whole_node_gang(3), priority=10)
    assert ahead == (AheadGang("PyTorchJob/default/hi", 2, 10 * H, "", "PyTorchJob", 100),)
    assert estimate_wait(snap, whole_node_gang(3), NOW, ahead=ahead).earliest_start_s == pytest.approx(9 * H)


# ------------------------------------------------------------------ learned laws, gangs ahead, later arrivals


def one_pod(age_h: float, limit_h: float | None = None):
    """One 8-GPU node held by one Job pod of queue "q" that has run ``age_h`` hours."""
    return snapshot([node("n0")], [pod("p0", "n0", gpu=8, gang="Job/default/j0", owner_kind="Job", queue="q",
                                       start_time=NOW - age_h * H,
                                       runtime_limit_s=None if limit_h is None else limit_h * H)])


def history_of(**runs):
    """A RuntimeHistory: ``queue=[(run_h, limit_h or None, count), ...]`` for owner kind Job."""
    h = RuntimeHistory()
    for queue, spec in runs.items():
        for run_h, limit_h, count in spec:
            for _ in range(count):
                h.add(queue, "Job", run_h * H, None if limit_h is None else limit_h * H)
    return h


def test_pod_without_limit_uses_learned_runtimes_given_its_age():
    hist = history_of(q=[(10, None, 30)])                      # every run of the key took 10 h
    est = estimate_wait(one_pod(4), whole_node_gang(1), NOW, history=hist)
    assert not est.unknown and est.known_share == 1.0
    assert est.p50_s == pytest.approx(6 * H, rel=0.02)         # 4 h done, 6 h to go
    assert estimate_wait(one_pod(9), whole_node_gang(1), NOW, history=hist).p50_s == pytest.approx(1 * H, rel=0.05)
    assert estimate_wait(one_pod(4), whole_node_gang(1), NOW).unknown   # no limit, no history


def test_limited_pod_remaining_is_the_learned_ratio_given_its_age_capped_by_its_limit():
    # 24 runs under a 10 h limit took 2 h; 6 were killed at the limit.
    hist = history_of(q=[(2, 10, 24), (10, 10, 6)])
    young = estimate_wait(one_pod(1, limit_h=10), whole_node_gang(1), NOW, history=hist)
    assert young.p50_s == pytest.approx(1 * H, rel=0.05)       # most likely a 2 h run: 1 h left
    assert young.p90_s == pytest.approx(9 * H, rel=5e-3)       # else it runs to its limit
    old = estimate_wait(one_pod(3, limit_h=10), whole_node_gang(1), NOW, history=hist)
    # past the 2 h runs: it is one of those killed at the limit, 7 h from now
    assert old.p50_s == pytest.approx(7 * H, rel=5e-3) and old.p90_s == pytest.approx(7 * H, rel=5e-3)
    assert old.earliest_start_s == pytest.approx(7 * H)
    # without history the log-uniform prior answers (median total √(a·L) with limit_mass 0)
    prior = estimate_wait(one_pod(3, limit_h=10), whole_node_gang(1), NOW)
    assert prior.p50_s < 4 * H


def test_runs_still_going_count_as_censored_observations():
    # The history has seen only 1 h runs end (it is young); 20 gangs of the same key have been
    # running for 30 h. Ours has run 2 h: it is one of the long ones (Kaplan–Meier), not a 1 h
    # run about to end.
    hist = history_of(q=[(1, None, 20)])
    nodes = [node("n0")] + [node(f"m{i}") for i in range(20)]
    pods = [pod("p0", "n0", gpu=8, gang="Job/default/j0", owner_kind="Job", queue="q", start_time=NOW - 2 * H)]
    pods += [pod(f"o{i}", f"m{i}", gpu=8, gang=f"Job/default/o{i}", owner_kind="Job", queue="q",
                 start_time=NOW - 30 * H) for i in range(20)]
    only_n0 = np.array([True] + [False] * 20)
    est = estimate_wait(snapshot(nodes, pods), whole_node_gang(1), NOW, history=hist, eligible=only_n0)
    assert est.p50_s == pytest.approx(28 * H, rel=0.02)
    assert estimate_wait(one_pod(2), whole_node_gang(1), NOW, history=hist).p50_s < 0.5 * H


def test_gang_ahead_reserves_nodes_for_its_learned_run_time():
    hist = history_of(q=[(2, None, 30)], hi=[(3, None, 30)])   # running: 2 h runs; the gang ahead: 3 h
    snap = snapshot([node("n0"), node("n1")],
                    [pod(f"p{i}", f"n{i}", gpu=8, gang=f"Job/default/j{i}", owner_kind="Job", queue="q",
                         start_time=NOW) for i in range(2)])
    alone = estimate_wait(snap, whole_node_gang(1), NOW, history=hist)
    assert alone.p50_s == pytest.approx(2 * H, rel=0.05)
    # A 2-node gang ahead takes both nodes when they free (≈2 h) and holds them 3 h.
    est = estimate_wait(snap, whole_node_gang(1), NOW, history=hist,
                        ahead=[AheadGang("Job/default/hi", 2, None, "hi", "Job", 100)])
    assert est.p50_s == pytest.approx(5 * H, rel=0.05) and 5 * H <= est.p90_s <= 5.5 * H
    assert est.earliest_start_s is None                     # no limits: the Slurm bound is unknown
    # A 1-node gang ahead takes the first node to free; ours gets the other one.
    one = estimate_wait(snap, whole_node_gang(1), NOW, history=hist,
                        ahead=[AheadGang("Job/default/hi", 1, None, "hi", "Job", 100)])
    assert one.p50_s == pytest.approx(2 * H, rel=0.05)


def test_gang_ahead_on_partly_used_nodes_takes_the_first_fully_free_node():
    # Two nodes, each with two 4-GPU pods ending at (1 h, 5 h) and (2 h, 3 h) (learned run
    # times, no limits). Ours needs two 4-GPU pods: alone, the halves freed at 1 h and 2 h.
    # A 1-node gang ahead (1 h) takes n1, fully free first (3 h), and gives it back at 4 h:
    # ours gets n0's half at 1 h and n1's two at 4 h.
    ends = {"n0": (1, 5), "n1": (2, 3)}
    hist = history_of(**{f"q{e}": [(e, None, 30)] for es in ends.values() for e in es}, hi=[(1, None, 30)])
    pods = [pod(f"{n}-{k}", n, gpu=4, gang=f"Job/default/{n}{k}", owner_kind="Job", queue=f"q{e}", start_time=NOW)
            for n, es in ends.items() for k, e in enumerate(es)]
    snap = snapshot([node("n0"), node("n1")], pods)
    alone = estimate_wait(snap, gang(pod_set("w", 2, gpu=4)), NOW, history=hist)
    assert alone.p50_s == pytest.approx(2 * H, rel=0.05)
    est = estimate_wait(snap, gang(pod_set("w", 2, gpu=4)), NOW, history=hist,
                        ahead=[AheadGang("Job/default/hi", 1, None, "hi", "Job", 100)])
    assert est.p50_s == pytest.approx(4 * H, rel=0.05)


def test_later_higher_priority_arrivals_pass_a_lower_priority_gang():
    hist = history_of(q=[(2, None, 30)], hi=[(0.5, None, 30)])
    hist.observe_from(NOW - 2 * 86400)
    for i in range(48):            # a 1-node, 30-minute gang of priority 100 every hour for two days
        hist.add_arrival(f"uid-{i}", f"Job/default/hi{i}", NOW - (i + 0.5) * H, 100, {"nvidia.com/gpu": 8},
                         "hi", "Job")
    base = estimate_wait(one_pod(0), whole_node_gang(1), NOW, history=hist)              # priority unknown
    assert base.p50_s == pytest.approx(2 * H, rel=0.02)
    low = estimate_wait(one_pod(0), whole_node_gang(1), NOW, history=hist, priority=0)
    assert low.p50_s > base.p50_s + H and low.p90_s > low.p50_s
    assert low.as_dict() == estimate_wait(one_pod(0), whole_node_gang(1), NOW, history=hist, priority=0).as_dict()
    high = estimate_wait(one_pod(0), whole_node_gang(1), NOW, history=hist, priority=100)  # none of higher priority
    assert (high.p50_s, high.p90_s) == (base.p50_s, base.p90_s)


def test_runtime_history_runs_and_arrivals():
    h = RuntimeHistory(max_arrivals=2)
    h.add("q", "Job", 3 * H, 10 * H)
    h.add("q", "Job", 5 * H)
    runs, limits, finished = h.runs("q", "Job")
    assert runs.tolist() == [3 * H, 5 * H] and limits[0] == 10 * H and math.isnan(limits[1])
    assert np.isnan(finished).all() and h.complete_from("q", "Job") == -math.inf
    h.observe_from(1000.0)
    h.add_arrival("a-0", "G/a", 2000.0, 5, {"nvidia.com/gpu": 8})
    h.add_arrival("a-1", "G/a", 2010.0, 5, {"nvidia.com/gpu": 8})
    h.add_arrival("a-1", "G/a", 2010.0, 5, {"nvidia.com/gpu": 8})      # the same pod again
    span, got = h.arrivals(3000.0, 86400.0)
    assert span == 2000.0 and [(g.gang, g.t, g.priority, g.pods) for g in got] == [("G/a", 2000.0, 5, 2)]
    h.add_arrival("b-0", "G/b", 2500.0, 0, {})
    h.add_arrival("c-0", "G/c", 2600.0, 0, {})                          # drops G/a (2 gangs kept)
    span, got = h.arrivals(3000.0, 86400.0)
    assert span == 1000.0 and [g.gang for g in got] == ["G/b", "G/c"]   # the record is complete from 2000 on
    span, got = h.arrivals(3000.0, 450.0)
    assert span == 450.0 and [g.gang for g in got] == ["G/c"]


# ------------------------------------------------------------------ lifetime model, history, text


def test_lifetime_model_cdf_and_quantile_agree():
    m = LifetimeModel(floor_s=600, limit_mass=0.1)
    for age, limit in ((0, 4 * H), (2 * H, 24 * H), (30, 3 * H)):
        for q in (0.1, 0.5, 0.85):
            t = m.residual_quantile(age, limit, q)
            at, before = m.residual_cdf(age, limit, np.array([t, t * (1 - 1e-9)]))
            assert at >= q - 1e-9 and before <= q + 1e-9          # the smallest t with cdf ≥ q
        assert m.residual_cdf(age, limit, np.array([limit - age]))[0] == 1.0
    assert m.residual_quantile(5 * H, 4 * H, 0.5) == 0.0


def test_runtime_history_is_bounded():
    h = RuntimeHistory(per_key=16, max_keys=3)
    for i in range(1000):
        h.add("q", "Job", float(i + 1))
    assert h.count("q", "Job") == 16
    assert h.samples("q", "Job").tolist() == [float(i) for i in range(985, 1001)]  # the last 16
    assert h.percentile("q", "Job", 50) == pytest.approx(992.5)
    for k in range(10):
        h.add(f"q{k}", "Job", 5.0)
    assert len(h) == 3 and h.nbytes <= 3 * 16 * 24        # run time, limit and finish per sample
    assert ("q", "Job") not in h.keys()                 # least recently fed evicted
    h.add("x", "Job", float("nan"))
    h.add("x", "Job", -1)
    assert h.count("x", "Job") == 0 and h.percentile("x", "Job", 50) is None


def test_text_formats():
    e = WaitEstimate(9 * H, 5 * H + 40 * 60, 9 * H, 0.72, False)
    assert e.text() == "expected wait p50 5h40m, p90 9h (end times known for 72% of blocking pods)"
    e = WaitEstimate(None, None, None, 0.1, True)
    assert e.text() == "expected wait unknown (end times known for 10% of blocking pods)"
    e = WaitEstimate(None, 3 * 86400 + 2 * H, None, 0.9, False, horizon_s=30 * 86400, beyond_horizon=True)
    assert e.text() == "expected wait p50 3d2h, p90 >30d (end times known for 90% of blocking pods)"
    assert [format_duration(x) for x in (0, 20, 12 * 60, 86400 * 2)] == ["0", "<1m", "12m", "2d"]


# ------------------------------------------------------------------ adapter: runtime_limit_s


def _k8s_pod(labels=None, annotations=None, deadline=None):
    spec = {"nodeName": "n0", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": labels or {}, "annotations": annotations or {}},
            "spec": spec, "status": {"phase": "Running", "startTime": "2025-06-01T10:00:00Z"}}


def test_pod_runtime_limit_from_deadline_kueue_label_and_annotation():
    assert pod_from_k8s(_k8s_pod()).runtime_limit_s is None
    assert pod_from_k8s(_k8s_pod(deadline=7200)).runtime_limit_s == 7200.0
    p = pod_from_k8s(_k8s_pod(labels={"kueue.x-k8s.io/max-exec-time-seconds": "3600"}, deadline=7200))
    assert p.runtime_limit_s == 3600.0 and p.deadline_s == 7200.0
    p = pod_from_k8s(_k8s_pod(annotations={"gangcheck.io/expected-runtime-seconds": "1800"}))
    assert p.runtime_limit_s == 1800.0
    p = pod_from_k8s(_k8s_pod(labels={"kueue.x-k8s.io/max-exec-time-seconds": "soon"},
                              annotations={"gangcheck.io/expected-runtime-seconds": "-5"}))
    assert p.runtime_limit_s is None
