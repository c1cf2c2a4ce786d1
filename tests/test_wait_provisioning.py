"""Issue #16: the expected wait of a gang that needs new nodes includes node provisioning
(``webhook.engine.wait.provisioning``): learned from NodeClaim launch → Ready times, else what a
source states, else the policy's default; the wait is the provisioning time when the gang can
never fit the existing nodes, the smaller of the two when it could fit them later."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from builders import gang, node, pod, pod_set, snapshot
from webhook.engine.autoscale.model import AutoscalingPolicy, AutoscalingState, ScaleUpSource
from webhook.engine.evaluate import EngineOptions, evaluate, expected_wait
from webhook.engine.wait.provisioning import MIN_SAMPLES, provisioning_estimate, scale_up_wait, with_provisioning

NOW = 1_000_000.0
H100 = ScaleUpSource("gpu-h100", limits={"nvidia.com/gpu": 512}, in_use={"nvidia.com/gpu": 24}, nodes=3)


def _snap(samples=(), sources=(H100,)):
    return snapshot([node("a"), node("b"), node("c")],
                    autoscaling=AutoscalingState(sources=tuple(sources), provisioning_samples_s=tuple(samples)))


# ---------------------------------------------------------------- provisioning_estimate


def test_learned_from_twelve_nodeclaims():
    samples = [240, 250, 260, 270, 280, 290, 300, 310, 320, 330, 600, 900]
    p50, p90, basis = provisioning_estimate(_snap(samples), EngineOptions())
    # smallest sample with F ≥ q: 6th of 12 for p50, ceil(10.8) = 11th for p90
    assert (p50, p90, basis) == (290.0, 600.0, "learned from 12 NodeClaims")


def test_four_samples_are_not_enough_and_bad_ones_do_not_count():
    samples = [100, 100, 100, 100, math.nan, -5.0, math.inf]
    opts = EngineOptions(autoscaling=AutoscalingPolicy(provisioning_s=420.0))
    assert MIN_SAMPLES == 5
    assert provisioning_estimate(_snap(samples), opts) == (420.0, 420.0, "the policy's default")
    assert provisioning_estimate(_snap(samples + [130]), opts) == (100.0, 130.0, "learned from 5 NodeClaims")


def test_a_stated_time_wins_over_the_default_and_the_slowest_pool_counts():
    fast = ScaleUpSource("fast", provisioning_s=120.0)
    slow = ScaleUpSource("slow", kind="NodeGroup", provisioning_s=900.0)
    snap = _snap(sources=(H100, fast, slow))
    assert provisioning_estimate(snap, EngineOptions()) == (900.0, 900.0, "stated for node group slow")
    # Only the sources the gang draws on count when the caller names them.
    assert provisioning_estimate(snap, EngineOptions(), sources=(H100, fast)) == (120.0, 120.0, "stated for NodePool fast")
    assert provisioning_estimate(snap, EngineOptions(), sources=(H100,)) == (300.0, 300.0, "the policy's default")


# ---------------------------------------------------------------- with_provisioning


def test_never_fits_the_existing_nodes_waits_for_provisioning():
    out = with_provisioning(None, 290.0, 600.0, "learned from 12 NodeClaims", pools=("NodePool gpu-h100",))
    assert out["text"] == "new nodes from NodePool gpu-h100: ~5m to Ready, p90 10m (learned from 12 NodeClaims)"
    assert (out["p50_s"], out["p90_s"], out["unknown"], out["blocked_by"]) == (290, 600, False, "scale-up")
    assert out["provisioning"] == {"p50_s": 290, "p90_s": 600, "basis": "learned from 12 NodeClaims",
                                   "pools": ["NodePool gpu-h100"], "chosen": "new-nodes"}
    same = with_provisioning(None, 300.0, 300.0, "the policy's default")
    assert same["text"] == "new nodes: ~5m to Ready (the policy's default)"


def test_a_real_blocked_estimate_becomes_the_provisioning_time():
    # 3 free nodes, a 5 × 8-GPU gang: running work can never free enough (blocked_by capacity).
    snap = _snap()
    # (the estimate over the existing nodes, as the webhook computes it: without an autoscaler
    # the verdict would be NeverFits and carry none)
    w = expected_wait(snap, gang(pod_set("w", 5, gpu=8), kind="Job", name="train"), NOW)
    assert w is not None and w.get("blocked_by") == "capacity" and w["p50_s"] is None
    out = with_provisioning(w, 300.0, 300.0, "the policy's default", pools=("NodePool gpu-h100",))
    assert (out["p50_s"], out["p90_s"], out["blocked_by"], out["pods_max"]) == (300, 300, "scale-up", w["pods_max"])
    assert out["existing_nodes"] == w["text"]
    assert out["text"] == "new nodes from NodePool gpu-h100: ~5m to Ready (the policy's default)"
    assert w["blocked_by"] == "capacity"  # the input is not changed


def test_running_work_that_ends_later_loses_to_provisioning():
    # Two nodes busy for another hour (limit 3600 s, started 600 s ago): the band is ~50 min.
    snap = snapshot([node("a"), node("b")], [pod("x", "a", gpu=8, start_time=NOW - 600, runtime_limit_s=3600.0),
                                             pod("y", "b", gpu=8, start_time=NOW - 600, runtime_limit_s=3600.0)])
    w = evaluate(snap, gang(pod_set("w", 2, gpu=8), kind="Job", name="train"), now=NOW).expected_wait
    assert "blocked_by" not in w and w["p50_s"] > 300
    out = with_provisioning(w, 300.0, 300.0, "learned from 12 NodeClaims", pools=("NodePool gpu-h100",))
    assert (out["p50_s"], out["p90_s"], out["provisioning"]["chosen"]) == (300, 300, "new-nodes")
    assert out["text"] == ("new nodes from NodePool gpu-h100: ~5m to Ready (learned from 12 NodeClaims), "
                           f"sooner than running work ends ({w['text']})")
    # Slower nodes than the work: the wait on running work stands.
    slow = with_provisioning(w, 86400.0, 86400.0, "the policy's default")
    assert (slow["p50_s"], slow["p90_s"], slow["provisioning"]["chosen"]) == (w["p50_s"], w["p90_s"], "existing-nodes")
    assert slow["text"] == f"{w['text']}; sooner than new nodes: ~1d to Ready (the policy's default)"


def test_an_unknown_wait_on_running_work_gets_the_provisioning_time():
    w = {"earliest_start_s": None, "p50_s": None, "p90_s": None, "known_share": 0.1, "unknown": True,
         "blocking_pods": 9, "pods_needed": 4, "text": "expected wait unknown (end times known for 10% of blocking pods)"}
    out = with_provisioning(w, 300.0, 480.0, "the policy's default")
    assert (out["p50_s"], out["p90_s"], out["unknown"], out["earliest_start_s"]) == (300, 480, False, 300)
    assert out["text"] == ("new nodes: ~5m to Ready, p90 8m (the policy's default); when running work ends is unknown "
                           "(expected wait unknown (end times known for 10% of blocking pods))")


_wait = st.one_of(st.none(), st.integers(0, 10**7))


@settings(max_examples=300, deadline=None)
@given(e50=_wait, e90=_wait, p50=st.floats(0, 1e6), spread=st.floats(0, 1e6), unknown=st.booleans(),
       blocked=st.booleans())
def test_the_wait_is_the_sooner_quantile_by_quantile(e50, e90, p50, spread, unknown, blocked):
    if e50 is not None and e90 is not None and e90 < e50:
        e50, e90 = e90, e50
    if e50 is None and e90 is not None:  # p50 beyond the horizon means p90 is too
        e90 = None
    expected = {"earliest_start_s": e50, "p50_s": e50, "p90_s": e90, "known_share": 1.0, "unknown": unknown,
                "blocking_pods": 1, "pods_needed": 1, "text": "t"}
    if blocked:
        expected.update(blocked_by="capacity", repair={}, pods_max=0)
    out = with_provisioning(expected, p50, p50 + spread, "b")
    q50, q90 = int(round(p50)), int(round(p50 + spread))
    # brute force: the candidates the gang could start at, the earliest of each quantile
    never = blocked or unknown
    best50 = min([q50] + ([] if never or e50 is None else [e50]))
    best90 = min([q90] + ([] if never or e90 is None else [e90]))
    assert (out["p50_s"], out["p90_s"]) == (best50, best90)
    assert out["p50_s"] <= out["p90_s"] and out["unknown"] is False
    assert set(expected) - {"blocked_by"} <= set(out)


def test_scale_up_wait_uses_the_pools_the_gang_is_assigned_to():
    slow = ScaleUpSource("slow", provisioning_s=1800.0)
    snap = _snap(sources=(H100, slow))
    data = {"eligible_nodes": 3, "pods_missing": 61, "provisioning_s": 300.0,
            "pools": [{"name": "gpu-h100", "kind": "NodePool", "origin": "", "pods": 61, "nodes_needed": 61, "pods_room": 61,
                       "limits": {}, "in_use": {}, "remaining": {}}], "unmatched": {"slow": "x"}}
    out = scale_up_wait(snap, EngineOptions(), None, data)
    # slow's 30 min is not the gang's: gpu-h100 states none, so the policy default
    assert out["text"] == "new nodes from NodePool gpu-h100: ~5m to Ready (the policy's default)"
    learned = scale_up_wait(_snap([250] * 6, sources=(H100, slow)), EngineOptions(), None, data)
    assert learned["text"] == "new nodes from NodePool gpu-h100: ~4m to Ready (learned from 6 NodeClaims)"
    # a pool the data names that the snapshot does not have: no name, every source counts
    gone = scale_up_wait(snap, EngineOptions(), None, {"pools": [{"name": "x", "kind": "NodePool"}]})
    assert gone["text"] == "new nodes: ~30m to Ready (stated for NodePool slow)"
