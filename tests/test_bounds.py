"""Costs that user input controls are bounded (issue #17 item 2).

A gang states how many pods it wants (a Kueue pod group's total-count annotation, replicas,
parallelism, minMember …, each at most int32 as Kubernetes validates it); no allocation or loop
of one review may follow that number. The bound is asserted structurally: the peak of the
Python and numpy allocations (``tracemalloc``) of one review stays under a generous ceiling
that does not depend on the count, for counts up to 2^31 − 1. Never a time bound (the machine is
shared); the figures are in ``bench/worst_review.py``.
"""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.adapters import adapt
from webhook.engine.evaluate import evaluate, expected_wait
from webhook.engine.fit import pods_per_node, shape_of
from webhook.engine.wait import estimate_wait

try:
    from .builders import GPU, gang, node, pod, pod_set, snapshot
except ImportError:
    from builders import GPU, gang, node, pod, pod_set, snapshot

H = 3600.0
NOW = 1_750_000_000.0
INT32_MAX = 2**31 - 1
#: Generous: the estimate on this 16-node cluster needs well under 1 MiB; 10^6 pods needed ~50 MiB
#: before the bound, 10^9 ~15 GiB.
CEILING = 8 * 2**20


def busy_cluster(n: int = 16):
    """n 8-GPU nodes, each held by one whole-node Job pod with a limit (so the band is computed)."""
    nodes = [node(f"n{i}") for i in range(n)]
    pods = [pod(f"p{i}", f"n{i}", gpu=8, gang=f"Job/default/j{i}", owner_kind="Job", queue="q",
                start_time=NOW - H, runtime_limit_s=(2 + i) * H) for i in range(n)]
    return snapshot(nodes, pods)


def peak_bytes(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def kueue_pod(total: int, gpus: int = 8) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "w-0", "namespace": "llm",
                     "labels": {"kueue.x-k8s.io/pod-group-name": "grp"},
                     "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(total)}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus), "cpu": "8"}}}]},
    }


@pytest.mark.parametrize("count", [10**6, 10**9, INT32_MAX])
def test_wait_estimate_memory_does_not_follow_the_requested_pod_count(count):
    snap = busy_cluster()
    est, peak = peak_bytes(lambda: estimate_wait(snap, gang(pod_set("w", count, gpu=8)), NOW))
    assert peak < CEILING, f"{peak / 2**20:.1f} MiB for {count} pods"
    # 16 nodes hold at most 16 such pods: it never starts on them, and the estimate says what
    # blocks (capacity, nothing repairable) instead of a time (#17 items 2 and 13).
    assert est.p50_s is None and est.p90_s is None and est.blocked_by == "capacity" and est.pods_max == 16
    assert est.earliest_start_s is None and est.pods_needed == count


@pytest.mark.parametrize("count", [10**6, 10**9, INT32_MAX])
def test_one_kueue_pod_review_is_bounded_through_evaluate_and_the_background_estimate(count):
    # The reported attack: a Pod of a Kueue pod group stating a huge total-count is answered
    # (Waits: only this pod's shape is known, so no proof), then the estimate ran.
    snap = busy_cluster()
    g = adapt(kueue_pod(count))

    def review():
        d = evaluate(snap, g, now=NOW)
        return d, expected_wait(snap, g, NOW)

    (d, w), peak = peak_bytes(review)
    assert d.verdict == "Waits"
    assert w is not None and w["p50_s"] is None and w["p90_s"] is None and w["pods_needed"] == count
    assert peak < CEILING, f"{peak / 2**20:.1f} MiB for total-count {count}"


@settings(max_examples=60, deadline=None)
@given(ends=st.lists(st.floats(0.1, 50), min_size=1, max_size=6), free=st.integers(0, 3),
       per_node=st.sampled_from([1, 2, 4, 8]), extra=st.integers(1, 5))
def test_more_pods_than_the_nodes_ever_hold_never_start(ends, free, per_node, extra):
    # Brute force: the most pods of this shape the eligible nodes hold once every pod that can
    # leave has left is the pods-per-node on the empty cluster (nothing here is permanent).
    nodes = [node(f"n{i}") for i in range(len(ends) + free)]
    pods = [pod(f"p{i}", f"n{i}", gpu=8, gang=f"Job/default/j{i}", owner_kind="Job", queue="q",
                start_time=NOW - H, runtime_limit_s=(1 + e) * H) for i, e in enumerate(ends)]
    snap = snapshot(nodes, pods)
    gpu = 8 // per_node
    most = int(pods_per_node(snap.alloc, shape_of(snap, {GPU: gpu})).sum())
    at_most = estimate_wait(snap, gang(pod_set("w", most, gpu=gpu)), NOW)
    beyond = estimate_wait(snap, gang(pod_set("w", most + extra, gpu=gpu)), NOW)
    assert at_most.p90_s is not None and at_most.earliest_start_s is not None  # it does start
    assert beyond.p50_s is None and beyond.p90_s is None and beyond.blocked_by == "capacity"
    assert beyond.pods_max == most
    assert beyond.earliest_start_s is None


def many_pod_cluster(n: int = 64, max_pods: int = 1000):
    """n nodes of ``max_pods`` allocatable pods, each held whole (all 96 cpu) by one Job pod
    with a limit: a pod of 1 millicore fits max_pods − 1 times on each once its Job ends."""
    nodes = [node(f"n{i}", gpu=0, pods=max_pods) for i in range(n)]
    pods = [pod(f"p{i}", f"n{i}", cpu=96, gang=f"Job/default/j{i}", owner_kind="Job", queue="q",
                start_time=NOW - H, runtime_limit_s=(2 + i % 7) * H) for i in range(n)]
    return snapshot(nodes, pods)


def test_band_of_a_gang_the_nodes_can_hold_is_bounded_too():
    # 40,000 one-millicore pods: fewer than the 63,936 the 64 nodes hold, so the gang does start;
    # the exact DP would hold 40,000 states per time point for each of 64 units.
    snap = many_pod_cluster()
    g = gang(pod_set("w", 40_000, cpu=0.001))
    est, peak = peak_bytes(lambda: estimate_wait(snap, g, NOW))
    assert peak < CEILING, f"{peak / 2**20:.1f} MiB"
    assert est.p50_s is not None and est.p90_s is not None and not est.beyond_horizon
    # Every Job ends by its limit (at most 7 h from now): so does the band.
    assert 0 < est.p50_s <= est.p90_s <= 7 * H


def test_the_draws_agree_with_the_exact_band(monkeypatch):
    # Just under the budgets the band is exact; forced onto the draws it must say the same
    # within sampling error.
    from webhook.engine.wait import band as wait

    snap = many_pod_cluster(n=32, max_pods=50)
    g = gang(pod_set("w", 1000, cpu=0.001))
    exact = estimate_wait(snap, g, NOW)
    monkeypatch.setattr(wait, "_DP_MAX_STATES", 1)
    drawn = estimate_wait(snap, g, NOW)
    assert exact.p50_s and drawn.p50_s and exact.p90_s and drawn.p90_s
    assert drawn.p50_s == pytest.approx(exact.p50_s, rel=0.1)
    assert drawn.p90_s == pytest.approx(exact.p90_s, rel=0.1)
    assert drawn.earliest_start_s == exact.earliest_start_s
