"""The exhaustive placement search (``engine.fit.search``) against brute force, and what it
settles in ``evaluate`` (issue #17 item 12: small instances must not stay PlacementUnproven).

The brute force below is written from the model, not from the search: for every choice of a
topology domain per constrained demand, a DP over nodes of the reachable "pods placed so far"
vectors, each node taking any per-demand pod counts that fit its ``avail`` row together
(requested columns only, kube-scheduler's NodeResourcesFit) within its mask and per-node cap.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from builders import gang, node, pod, pod_set, snapshot
from test_engine_properties import _describe, now_free, now_reason, oracle_ever, oracle_now, placement_errors, scenarios
from webhook.engine.evaluate import evaluate
from webhook.engine.fit import BUDGET, FOUND, NONE, Demand, Shape, search

PROPS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RES = 3  # columns: pods, gpu, cpu


def _fits(load, row) -> bool:
    return all(v <= 0 or v <= a for v, a in zip(load, row))


def brute(avail, demands, topology) -> bool:
    """True when a placement of every demand exists (see module doc)."""
    nd = len(demands)
    counts = tuple(d.count for d in demands)
    choices = []
    for d in demands:
        dom = topology.get(d.name)
        choices.append([None] if dom is None else sorted({int(x) for x in dom} - {-1}))
    for combo in itertools.product(*choices):
        reach = {tuple([0] * nd)}
        for i in range(avail.shape[0]):
            ranges = []
            for d, v in zip(demands, combo):
                ok = d.mask[i] and (v is None or topology[d.name][i] == v)
                hi = min(d.count, d.max_per_node if d.max_per_node is not None else d.count) if ok else 0
                ranges.append(range(hi + 1))
            vecs = []
            for vec in itertools.product(*ranges):
                load = [0] * avail.shape[1]
                for x, d in zip(vec, demands):
                    for c, val in zip(d.shape.cols, d.shape.vals):
                        load[c] += int(val) * x
                if _fits(load, avail[i]):
                    vecs.append(vec)
            reach = {tuple(min(a + b, c) for a, b, c in zip(s, v, counts)) for s in reach for v in vecs}
        if counts in reach:
            return True
    return False


def valid(avail, demands, topology, placement) -> list[str]:
    errs = []
    load = np.zeros_like(avail)
    for d in demands:
        entries = placement.get(d.name, [])
        if sum(k for _, k in entries) != d.count:
            errs.append(f"{d.name}: {entries} places {sum(k for _, k in entries)} of {d.count}")
        doms = {int(topology[d.name][n]) for n, _ in entries} if d.name in topology else set()
        if d.name in topology and (len(doms) > 1 or -1 in doms):
            errs.append(f"{d.name}: spans domains {doms}")
        for n, k in entries:
            if not d.mask[n]:
                errs.append(f"{d.name}: node {n} not in its mask")
            if d.max_per_node is not None and k > d.max_per_node:
                errs.append(f"{d.name}: {k} pods on node {n} > cap {d.max_per_node}")
            for c, val in zip(d.shape.cols, d.shape.vals):
                load[n, c] += int(val) * k
    for n in range(avail.shape[0]):
        if not _fits(load[n], avail[n]):
            errs.append(f"node {n}: load {load[n].tolist()} > {avail[n].tolist()}")
    return errs


@st.composite
def instances(draw):
    n = draw(st.integers(1, 6))
    avail = np.array([[draw(st.sampled_from([1, 2, 110])), draw(st.sampled_from([0, 4, 8, 8])),
                       draw(st.sampled_from([-4, 8, 32, 96]))] for _ in range(n)], dtype=np.int64)
    demands, topology = [], {}
    for j in range(draw(st.integers(1, 3))):
        gpu = draw(st.sampled_from([0, 1, 2, 3, 4, 6, 8]))
        cpu = draw(st.sampled_from([0, 1, 8, 24, 48]))
        cols = [0] + ([1] if gpu else []) + ([2] if cpu else [])
        vals = [1] + ([gpu] if gpu else []) + ([cpu] if cpu else [])
        shape = Shape(np.array(cols, dtype=np.intp), np.array(vals, dtype=np.int64), (), tuple(["pods", "gpu", "cpu"][c] for c in cols))
        mask = np.array([draw(st.booleans()) or draw(st.booleans()) for _ in range(n)], dtype=bool)
        name = str(j)
        demands.append(Demand(name, shape, draw(st.integers(1, 5)), mask, draw(st.sampled_from([None, None, 1, 2]))))
        if draw(st.integers(0, 3)) == 0:
            topology[name] = np.array([draw(st.sampled_from([-1, 0, 1])) for _ in range(n)], dtype=np.int64)
    return avail, demands, topology


@PROPS
@given(instances())
def test_search_agrees_with_brute_force(inst):
    avail, demands, topology = inst
    got = search(avail, demands, topology=topology, budget=10**6)
    want = brute(avail, demands, topology)
    event(f"placeable: {want}")
    assert got.status != BUDGET
    assert (got.status == FOUND) == want, (got, avail.tolist(), demands, topology)
    if got.status == FOUND:
        errs = valid(avail, demands, topology, got.placement)
        assert not errs, errs


def test_search_budget_is_counted_in_steps_and_proves_nothing():
    avail = np.array([[110, 8, 96]] * 2, dtype=np.int64)
    shape6 = Shape(np.array([0, 1]), np.array([1, 6]), (), ("pods", "gpu"))
    shape4 = Shape(np.array([0, 1]), np.array([1, 4]), (), ("pods", "gpu"))
    ds = [Demand("0", shape6, 2, np.ones(2, dtype=bool)), Demand("1", shape4, 1, np.ones(2, dtype=bool))]
    full = search(avail, ds)
    assert full.status == NONE and 0 < full.steps
    again = search(avail, ds)
    assert again.steps == full.steps  # deterministic
    cut = search(avail, ds, budget=full.steps - 1)
    assert cut.status == BUDGET and cut.placement is None


# ----------------------------------------------------------------------------- in evaluate


def test_issue_case_two_6_and_one_4_gpu_pods_on_two_8_gpu_nodes_never_fit():
    """Issue #17 item 12: 2 × 6 GPUs + 1 × 4 GPUs on the only two eligible 8-GPU nodes (a third
    is tainted): every bound holds (16 GPUs of 16), the greedy finds nothing, the exhaustive
    search proves there is no placement."""
    snap = snapshot([node("a", gpu=8), node("b", gpu=8), node("c", gpu=8, taints=["dedicated=infer:NoSchedule"])])
    d = evaluate(snap, gang(pod_set("big", 2, gpu=6), pod_set("small", 1, gpu=4)))
    assert d.verdict == "NeverFits"
    assert d.reasons == ["ExceedsClusterCapacity"]
    f = d.findings[0]
    assert f.data["proof"] == "exhaustive-search" and f.data["eligible_nodes"] == 2
    assert "each pod set fits alone, not together" in f.message
    # One GPU less for the small pod: a placement exists, and it is free now.
    ok = evaluate(snap, gang(pod_set("big", 2, gpu=6), pod_set("small", 1, gpu=2)))
    assert ok.verdict == "Fits"


def test_repaired_cluster_only_cordon_and_not_ready_nodes_waits_not_never():
    """The proof is on the repaired empty cluster: cordoned, NotReady nodes and unhealthy GPUs
    count as repaired, so the same gang on such nodes (plus a busy one) waits."""
    nodes = [node("a", gpu=8, unschedulable=True), node("b", gpu=8, ready=False), node("c", gpu=8, alloc_gpu=6)]
    d = evaluate(snapshot(nodes, [pod("x", "c", gpu=6)]), gang(pod_set("big", 2, gpu=6), pod_set("small", 1, gpu=4)))
    assert d.verdict == "Waits"
    assert "PlacementUnproven" not in d.reasons
    assert d.placement["when"] == "ever"


def test_search_proves_fits_now_where_the_greedy_misses():
    """Both greedy passes fill n0 wrongly (found by a random search); the exhaustive search
    finds a placement on today's free resources (s2 and one s0 on the one-pod nodes): Fits."""
    snap = snapshot([node("n0", gpu=4, cpu=32), node("n1", gpu=8, cpu=32, pods=1), node("n2", gpu=4, cpu=8, pods=1)])
    g = gang(pod_set("s0", 3, gpu=1, cpu=8), pod_set("s1", 2, gpu=1, cpu=1), pod_set("s2", 1, gpu=3, cpu=1))
    d = evaluate(snap, g)
    assert d.verdict == "Fits", d.message
    assert d.placement["when"] == "now"
    assert placement_errors(snap, g, d.placement["pod_sets"], lambda n: now_free(n, snap.pods),
                            lambda n, ps: now_reason(n, ps) is None) == []


def test_assumed_shapes_are_not_settled_by_the_search():
    """A Kueue pod group seen one pod at a time: its shape is assumed, so a failed search is
    no proof (PlacementUnproven stays)."""
    from dataclasses import replace

    snap = snapshot([node("a", gpu=8), node("b", gpu=8)])
    g = gang(replace(pod_set("big", 2, gpu=6), exact_shape=False), pod_set("small", 1, gpu=4))
    d = evaluate(snap, g)
    assert d.verdict == "Waits"
    assert "PlacementUnproven" in d.reasons


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_small_instances_are_settled_exactly(case):
    """On the property clusters (≤ 6 nodes, ≤ 3 pod sets of ≤ 6 pods) the verdict is exact:
    NeverFits iff no placement on the repaired empty cluster, Fits iff one now; never
    PlacementUnproven."""
    snap, g = case
    d = evaluate(snap, g)
    ever, now = oracle_ever(snap, g), oracle_now(snap, g)
    assert "PlacementUnproven" not in d.reasons, _describe(snap, g, d)
    assert (d.verdict == "NeverFits") == (ever is None), _describe(snap, g, d)
    if now is not None:
        assert d.verdict == "Fits", _describe(snap, g, d)
