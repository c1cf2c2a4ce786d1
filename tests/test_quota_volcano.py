"""Volcano deserved share (issue #17 item 24): the proportion plugin's water-filling over the queues
with demand, and the capacity plugin's spec.deserved.

Regression cases first (each was a false ExceedsDeservedShare on the weight split over every
queue), then property tests of ``proportion_deserved`` and of the verdict against a discretised
brute force: scan the water level λ on a fine grid, each queue taking min(request, capability,
λ × weight), and keep the highest level the cluster can pay for.
"""

from __future__ import annotations

from hypothesis import assume, given, settings, strategies as st

from builders import GPU, gang, node, pod_set, snapshot
from webhook.engine.evaluate import evaluate
from webhook.engine.model import PodGroupState, VolcanoQueue, VolcanoState
from webhook.engine.quota import QueueDemand, evaluate_volcano, proportion_deserved


def pg(name: str, queue: str, gpus: int, phase: str = "Pending", running: int = 0) -> tuple:
    return ("default", name), PodGroupState("default", name, queue, 1, {GPU: gpus}, phase, running)


def share(res):
    return next((f for f in res.findings if f.code == "ExceedsDeservedShare"), None)


def test_competitors_without_demand_take_no_share():
    # Three equal queues, 3 GPUs, nothing else asks: queue B deserves all it asks for (2).
    vol = VolcanoState(queues={q: VolcanoQueue(q) for q in ("A", "B", "C")})
    d = evaluate(snapshot([node("n1", gpu=3)], volcano=vol), gang(pod_set("t", 1, gpu=2), kind="Job", volcano_queue="B"))
    assert "ExceedsDeservedShare" not in d.reasons and d.verdict == "Fits"


def test_share_a_small_competitor_leaves_is_refilled():
    # 8 GPUs; C asks 1, so B (asking 6) gets 4 + the 3 C leaves = 7 ≥ 6.
    vol = VolcanoState(queues={q: VolcanoQueue(q) for q in ("A", "B", "C")}, pod_groups=dict([pg("c", "C", 1)]))
    res = evaluate_volcano(gang(pod_set("t", 1, gpu=6), kind="Job", volcano_queue="B"), vol, {GPU: 8})
    assert share(res) is None


def test_share_still_binds_when_competitors_ask_for_more():
    # C05 with a bigger cluster: 8 GPUs, C asks 6 → B (asking 6) deserves 4.
    vol = VolcanoState(queues={q: VolcanoQueue(q) for q in ("A", "B", "C")}, pod_groups=dict([pg("c", "C", 6)]))
    f = share(evaluate_volcano(gang(pod_set("t", 1, gpu=6), kind="Job", volcano_queue="B"), vol, {GPU: 8}))
    assert f is not None and f.severity == "Waits" and f.data["deserved"] == 4.0 and f.data["competing_queues"] == ["C"]


def test_weights_and_running_work_count():
    # B weight 3, C weight 1; C runs 6 (allocated); 8 GPUs; B asks 6 → B deserves 6 (3/4 of 8), not flagged.
    vol = VolcanoState(queues={"B": VolcanoQueue("B", weight=3), "C": VolcanoQueue("C", allocated={GPU: 6})},
                       pod_groups=dict([pg("c", "C", 6, "Running", 1)]))
    assert share(evaluate_volcano(gang(pod_set("t", 1, gpu=6), kind="Job", volcano_queue="B"), vol, {GPU: 8})) is None
    # equal weights: 4 < 6 → flagged
    vol = VolcanoState(queues={"B": VolcanoQueue("B"), "C": VolcanoQueue("C", allocated={GPU: 6})}, pod_groups=vol.pod_groups)
    assert share(evaluate_volcano(gang(pod_set("t", 1, gpu=6), kind="Job", volcano_queue="B"), vol, {GPU: 8})).data["deserved"] == 4.0


def test_spec_deserved_is_the_capacity_plugins_soft_share_not_a_wait():
    vol = VolcanoState(queues={"B": VolcanoQueue("B", deserved={GPU: 2}), "C": VolcanoQueue("C", deserved={GPU: 6})},
                       pod_groups=dict([pg("c", "C", 6)]))
    d = evaluate(snapshot([node("n1", gpu=8)], volcano=vol), gang(pod_set("t", 1, gpu=4), kind="Job", volcano_queue="B"))
    f = next(f for f in d.findings if f.code == "ExceedsDeservedShare")
    assert f.severity == "Info" and f.data["deserved"] == 2 and f.data["plugin"] == "capacity"
    assert d.verdict == "Fits"


def test_the_gangs_own_podgroup_is_not_counted_twice():
    vol = VolcanoState(queues={q: VolcanoQueue(q) for q in ("B", "C")},
                       pod_groups=dict([pg("g", "B", 4), pg("c", "C", 4)]))
    # B: the gang (4) only, C: 4; 8 GPUs → 4 each, fits exactly
    assert share(evaluate_volcano(gang(pod_set("t", 1, gpu=4), kind="Job", name="g", volcano_queue="B"), vol, {GPU: 8})) is None


# ---------------------------------------------------------------- properties against a discretised brute force


def brute_water(total: float, queues: list[tuple[int, float, float]], step: float = 1e-4) -> list[float]:
    """(weight, request, capability) per queue → the fill at the highest level λ on a grid of ``step``
    whose total fits in ``total``."""
    top = max((min(r, c) / w for w, r, c in queues), default=0.0)
    best = [0.0] * len(queues)
    n = int(top / step) + 2
    for i in range(n + 1):
        lam = i * step
        fill = [min(r, c, lam * w) for w, r, c in queues]
        if sum(fill) <= total + 1e-9:
            best = fill
        else:
            break
    return best


queue_st = st.tuples(st.integers(1, 4), st.integers(0, 12), st.one_of(st.just(10**6), st.integers(0, 12)))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 24), st.lists(queue_st, min_size=1, max_size=5))
def test_proportion_water_filling_matches_brute_force(total, queues):
    qs = [QueueDemand(f"q{i}", w, {GPU: r}, {} if c == 10**6 else {GPU: c}) for i, (w, r, c) in enumerate(queues)]
    got = proportion_deserved({GPU: total}, qs)
    want = brute_water(total, [(w, r, c) for w, r, c in queues])
    for q, v in zip(qs, want):
        assert abs(got[q.name][GPU] - v) <= 5e-3, (got, want)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 24), st.lists(st.tuples(st.integers(1, 3), st.lists(st.tuples(st.integers(1, 6), st.sampled_from(
    ["Pending", "Inqueue", "Running", "Completed"])), max_size=3)), min_size=1, max_size=4), st.integers(1, 12), st.data())
def test_deserved_share_verdict_matches_brute_force(total, queues, ask, data):
    mine = data.draw(st.integers(0, len(queues) - 1))
    pgs, vq = {}, {}
    demand = []
    for i, (w, groups) in enumerate(queues):
        vq[f"q{i}"] = VolcanoQueue(f"q{i}", weight=w)
        d = ask if i == mine else 0
        for j, (g, phase) in enumerate(groups):
            key, p = pg(f"pg{i}-{j}", f"q{i}", g, phase, 1 if phase == "Running" else 0)
            pgs[key] = p
            if phase != "Completed":
                d += g
        demand.append((w, float(d), float("inf")))
    res = evaluate_volcano(gang(pod_set("t", 1, gpu=ask), kind="Job", name="me", volcano_queue=f"q{mine}"),
                           VolcanoState(queues=vq, pod_groups=pgs), {GPU: total})
    want = brute_water(total, [(w, r, c) for w, r, c in demand if r > 0] if True else [])
    with_demand = [i for i, (_, r, _) in enumerate(demand) if r > 0]
    deserved = want[with_demand.index(mine)]
    # the allocate action's check: what the queue holds (its Running groups) + the gang ≤ its share
    held = sum(g for g, phase in queues[mine][1] if phase == "Running")
    assume(abs(ask + held - deserved) > 0.01)
    assert (share(res) is not None) == (ask + held > deserved)


# ---------------------------------------------------------------- enqueue (issue #11: Volcano as referee)


def test_inqueue_podgroups_reserve_cpu_of_the_capability():
    # proportion.go's enqueue check adds the queue's Inqueue PodGroups' unallocated cpu/memory to
    # its allocated: capability 8 CPUs, an Inqueue group holding 6 → a gang of 4 waits.
    vol = VolcanoState(queues={"B": VolcanoQueue("B", capability={"cpu": 8000})},
                       pod_groups={("default", "held"): PodGroupState("default", "held", "B", 1, {"cpu": 6000}, "Inqueue")})
    res = evaluate_volcano(gang(pod_set("t", 2, cpu=2), kind="Job", volcano_queue="B"), vol, {})
    f = next(f for f in res.findings if f.code == "WaitingForQuota")
    assert f.severity == "Waits" and f.data["more_needed"] == 2000
    # a Pending group reserves nothing; an Inqueue group of another queue is not this queue's
    for pgs in ({("default", "held"): PodGroupState("default", "held", "B", 1, {"cpu": 6000}, "Pending")},
                {("default", "held"): PodGroupState("default", "held", "C", 1, {"cpu": 6000}, "Inqueue")}):
        vol2 = VolcanoState(queues={"B": VolcanoQueue("B", capability={"cpu": 8000}), "C": VolcanoQueue("C")}, pod_groups=pgs)
        assert "WaitingForQuota" not in [f.code for f in evaluate_volcano(
            gang(pod_set("t", 2, cpu=2), kind="Job", volcano_queue="B"), vol2, {}).findings]


def test_inqueue_podgroups_do_not_reserve_gpus_of_the_capability():
    # util.GetInqueueResource adds a scalar's unit value to milli-unit sums: 4 GPUs reserve 4
    # milli-GPUs, below Volcano's tolerance — counting them would be a Waits Volcano does not have.
    vol = VolcanoState(queues={"B": VolcanoQueue("B", capability={GPU: 4})},
                       pod_groups={("default", "held"): PodGroupState("default", "held", "B", 1, {GPU: 4}, "Inqueue")})
    res = evaluate_volcano(gang(pod_set("t", 1, gpu=4), kind="Job", volcano_queue="B"), vol, {})
    assert "WaitingForQuota" not in [f.code for f in res.findings]


def test_overcommit_refuses_to_enqueue_past_idle_times_factor():
    from webhook.engine.quota import ClusterUsage
    # 8 GPUs, 6 in use: idle = 1.2 × 8 − 6 = 3.6 → a gang of 4 is not enqueued (Waits, never NeverFits)
    vol = VolcanoState(queues={"B": VolcanoQueue("B")})
    g = gang(pod_set("t", 2, gpu=2), kind="Job", volcano_queue="B")
    f = next(f for f in evaluate_volcano(g, vol, {GPU: 8}, ClusterUsage({GPU: 8}, {GPU: 6})).findings if f.code == "ClusterOverused")
    assert f.severity == "Waits" and f.data["plugin"] == "overcommit"
    # 5 in use: idle 4.6 ≥ 4 → enqueued
    assert "ClusterOverused" not in [f.code for f in evaluate_volcano(g, vol, {GPU: 8}, ClusterUsage({GPU: 8}, {GPU: 5})).findings]
    # an Inqueue PodGroup anywhere in the cluster counts its whole minimum: 5 in use + 1 Inqueue → 5 > 4.6
    vol = VolcanoState(queues={"B": VolcanoQueue("B"), "C": VolcanoQueue("C")},
                       pod_groups={("default", "c"): PodGroupState("default", "c", "C", 1, {GPU: 1}, "Inqueue")})
    assert "ClusterOverused" in [f.code for f in evaluate_volcano(g, vol, {GPU: 8}, ClusterUsage({GPU: 8}, {GPU: 5})).findings]


def test_overcommit_through_evaluate_counts_ready_nodes_only():
    from builders import pod
    # two 4-GPU nodes, one NotReady; 4 GPUs busy on the Ready one: idle = 1.2 × 4 − 4 = 0.8 < 1
    n1, n2 = node("n1", gpu=4), node("n2", gpu=4, ready=False)
    d = evaluate(snapshot([n1, n2], [pod("busy", "n1", gpu=4)], volcano=VolcanoState(queues={"B": VolcanoQueue("B")})),
                 gang(pod_set("t", 1, gpu=1), kind="Job", volcano_queue="B"))
    assert "ClusterOverused" in d.reasons and d.verdict == "Waits"


def test_other_queues_guarantees_cap_the_real_capability():
    from webhook.engine.quota import ClusterUsage
    # e2e referee config 5: 4 GPUs, queue C guarantees 2 → queue B's real capability is 2
    # (proportion.go realCapability = total − Σ guarantee + own): a gang of 3 is not enqueued.
    vol = VolcanoState(queues={"B": VolcanoQueue("B", deserved={GPU: 2}), "C": VolcanoQueue("C", guarantee={GPU: 2})})
    g = gang(pod_set("t", 3, gpu=1), kind="Job", volcano_queue="B")
    f = next(f for f in evaluate_volcano(g, vol, {GPU: 4}, ClusterUsage({GPU: 4}, {})).findings if f.code == "WaitingForQuota")
    assert f.severity == "Waits" and f.data["real_capability"] == 2
    # its own guarantee counts for it; without guarantees elsewhere nothing is said
    vol = VolcanoState(queues={"B": VolcanoQueue("B", guarantee={GPU: 2}), "C": VolcanoQueue("C", guarantee={GPU: 1})})
    assert "WaitingForQuota" not in [f.code for f in evaluate_volcano(g, vol, {GPU: 4}, ClusterUsage({GPU: 4}, {})).findings]
    vol = VolcanoState(queues={"B": VolcanoQueue("B"), "C": VolcanoQueue("C")})
    assert "WaitingForQuota" not in [f.code for f in evaluate_volcano(g, vol, {GPU: 4}, ClusterUsage({GPU: 4}, {})).findings]


def test_inqueue_reserve_counts_against_the_cluster_total_too():
    from webhook.engine.quota import ClusterUsage
    # e2e referee configs 43/81: 64 CPUs, an Inqueue PodGroup of the queue reserves 64 → a gang
    # of 4 CPUs is not enqueued (realCapability = total when nothing is guaranteed).
    vol = VolcanoState(queues={"B": VolcanoQueue("B", capability={GPU: 6})},
                       pod_groups={("default", "stuck"): PodGroupState("default", "stuck", "B", 1, {"cpu": 64000, GPU: 2}, "Inqueue")})
    g = gang(pod_set("t", 1, cpu=4), kind="Job", volcano_queue="B")
    f = next(f for f in evaluate_volcano(g, vol, {}, ClusterUsage({"cpu": 64000}, {})).findings if f.code == "WaitingForQuota")
    assert f.data["real_capability"] == 64000 and f.data["more_needed"] == 4000


def test_root_and_parent_queues_are_not_competitors():
    # e2e referee config 57: the root queue's status.allocated sums its children; it holds no
    # job, so it takes no share: 8 GPUs between A (asking 4) and C (running 2, 4 more pending) →
    # A deserves 4 (counting root as a third queue left A 3).
    vol = VolcanoState(queues={"root": VolcanoQueue("root", allocated={GPU: 2}), "A": VolcanoQueue("A", guarantee={GPU: 2}),
                               "C": VolcanoQueue("C", allocated={GPU: 2}), "P": VolcanoQueue("P", allocated={GPU: 2}),
                               "D": VolcanoQueue("D", parent="P")},
                       pod_groups=dict([pg("c", "C", 2, "Running", 1), pg("c2", "C", 4)]))
    assert share(evaluate_volcano(gang(pod_set("t", 1, gpu=4), kind="Job", volcano_queue="A"), vol, {GPU: 8})) is None


def test_what_the_queue_holds_counts_against_its_share():
    # e2e referee config 13: 8 GPUs; A guarantees 4 (holds 2), B holds 2 and asks 4 more, C (weight 2)
    # holds 1 and asks 4 more. Water-filling: A 4 (its guarantee), B 2, C 4 → B's share 2; B
    # already holds 2, so a gang of 2 more cannot be allocated (allocated + task ≤ deserved).
    vol = VolcanoState(queues={"A": VolcanoQueue("A", guarantee={GPU: 4}), "B": VolcanoQueue("B", capability={GPU: 4}),
                               "C": VolcanoQueue("C", weight=2)},
                       pod_groups=dict([pg("a", "A", 2, "Running", 2), pg("b", "B", 2, "Running", 1), pg("b2", "B", 4),
                                        pg("c", "C", 1, "Running", 1), pg("c2", "C", 4)]))
    f = share(evaluate_volcano(gang(pod_set("t", 2, gpu=1), kind="Job", volcano_queue="B"), vol, {GPU: 8}))
    assert f is not None and f.severity == "Waits" and f.data["deserved"] == 2.0 and f.data["held"] == 2
