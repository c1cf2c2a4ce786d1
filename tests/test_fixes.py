"""Fixes ranked by displacement (webhook.engine.fixes): the field cases with a "Fix ranking",
and a property test of the victim choice against brute force on small clusters."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from builders import GPU, gang, node, pod, pod_set, snapshot
from webhook.engine.evaluate import evaluate
from webhook.engine.fixes import (
    Unit,
    brute_force_victims,
    choose_victims,
    compute_fixes,
    set_cost,
    victim_units,
)
from webhook.engine.fit import shape_of
from webhook.engine.model import (
    ClusterQueue,
    FlavorQuotas,
    KueueState,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)


def kueue(nominal: int, usage: int = 0) -> KueueState:
    fq = (FlavorQuotas("default", {GPU: ResourceQuota(nominal), "cpu": ResourceQuota(10**9), "memory": ResourceQuota(2**60)}),)
    cq = ClusterQueue("cq", (ResourceGroup((GPU, "cpu", "memory"), fq),), usage={("default", GPU): usage})
    return KueueState(flavors={"default": ResourceFlavor("default")}, cluster_queues={"cq": cq},
                      local_queues={("default", "lq"): LocalQueue("default", "lq", "cq")})


def fixes_for(snap, g, now=None):
    return compute_fixes(snap, g, evaluate(snap, g), now)


def first(fixes, *actions):
    return next(f for f in fixes if f.action in actions)


def test_c02_preempt_job1_one_workload_three_pods_four_gpus():
    j1 = dict(gang="MPIJob/default/job1", priority=1, start_time=0.0)
    snap = snapshot([node("n1", gpu=4)], [pod("job1-launcher", "n1", cpu=1, **j1), pod("job1-w0", "n1", gpu=2, **j1),
                                          pod("job1-w1", "n1", gpu=2, **j1)],
                    kueue=kueue(8, usage=4), priority_classes={"prod": 1000, "dev": 1})
    g = gang(pod_set("Launcher", 1, cpu=1), pod_set("Worker", 2, gpu=2), kind="MPIJob", name="job2", queue="lq", priority_class="prod")
    fx = fixes_for(snap, g, now=7200.0)
    p = first(fx, "preempt")
    assert (p.displaced_pods, p.displaced_gpus, p.tenants, p.max_victim_priority) == (3, 4, ["default"], 1)
    assert {v.unit for v in p.victims} == {"MPIJob/default/job1"}          # one workload, whole
    assert p.gpu_hours_lost == 8.0 and p.sufficient                       # 4 GPUs × 2 h
    lower = first(fx, "lower-quota")                                      # the case's fix (2): displacement 0
    assert lower.displaced_pods == 0 and "from 8 to the 4" in lower.summary
    assert fx.index(lower) < fx.index(p)                                  # zero displacement ranks first


def test_c11_move_one_1gpu_pod():
    rs = dict(owner_kind="ReplicaSet", owner_name="web-5d8f")   # a controller recreates them
    snap = snapshot([node("n1"), node("n2"), node("n3")], [pod("a", "n1", gpu=1, **rs), pod("b", "n2", gpu=1, **rs)])
    g = gang(pod_set("Master", 1, gpu=8), pod_set("Worker", 1, gpu=8), kind="PyTorchJob")
    fx = fixes_for(snap, g)
    m = first(fx, "move", "preempt")
    assert m.action == "move"                                  # the 1-GPU pod re-fits on the other 7-free node
    assert (m.displaced_pods, m.displaced_gpus, m.frees_nodes) == (1, 1, 1)
    assert [f.displaced_pods for f in fx] == sorted(f.displaced_pods for f in fx)


def test_c14_evict_the_partial_gang_whole():
    nodes = [node(f"n{i}", gpu=1) for i in range(4)]
    pods = []
    for gname in ("a", "b"):
        k = f"Job/default/{gname}"
        pods += [pod(f"{gname}-0", "n0" if gname == "a" else "n2", gpu=1, gang=k, start_time=0.0),
                 pod(f"{gname}-1", "n1" if gname == "a" else "n3", gpu=1, gang=k, start_time=0.0),
                 pod(f"{gname}-2", "", gpu=1, gang=k, phase="Pending"), pod(f"{gname}-3", "", gpu=1, gang=k, phase="Pending")]
    g = gang(pod_set("t", 4, gpu=1, max_per_node=1), kind="Job", name="b")
    fx = fixes_for(snapshot(nodes, pods), g, now=3600.0)
    p = first(fx, "move", "preempt")
    assert {v.name for v in p.victims} == {"a-0", "a-1"}       # whole gang a, never b's own pods
    assert (p.displaced_pods, p.displaced_gpus, p.gpu_hours_lost) == (2, 2, 0.0)   # partial: no progress lost
    assert "partial gang" in p.summary


def test_c14_spanning_gang_never_evicted_in_part():
    # One node to free; gang a spans n0 and n1: evicting only a-0 is not allowed, b-0 (alone on n2) is cheaper.
    nodes = [node(f"n{i}", gpu=1) for i in range(3)]
    pods = [pod("a-0", "n0", gpu=1, gang="Job/default/a"), pod("a-1", "n1", gpu=1, gang="Job/default/a"), pod("b-0", "n2", gpu=1)]
    fx = fixes_for(snapshot(nodes, pods), gang(pod_set("t", 1, gpu=1), kind="Job", name="c"))
    p = first(fx, "move", "preempt")
    assert [v.name for v in p.victims] == ["b-0"]


def test_c28_repair_first_with_zero_displacement():
    fx = fixes_for(snapshot([node("gpu-01", gpu=16, alloc_gpu=0)]), gang(pod_set("t", 1, gpu=1), kind="Job"))
    assert fx[0].action == "repair" and fx[0].displaced_pods == 0 and fx[0].sufficient
    assert fx[0].nodes == ["gpu-01"]


def test_c32_repair_a_before_evicting_b():
    snap = snapshot([node("A", gpu=8, alloc_gpu=7), node("B", gpu=8)], [pod("p", "B", gpu=2)])
    fx = fixes_for(snap, gang(pod_set("t", 1, gpu=8), kind="Job"))
    assert fx[0].action == "repair" and fx[0].nodes == ["A"] and fx[0].cost()[3] == 0
    ev = first(fx, "move", "preempt")
    assert ev.displaced_pods == 1 and [v.name for v in ev.victims] == ["p"]
    assert fx.index(fx[0]) < fx.index(ev)


def test_c42_preempt_lower_priority_a():
    snap = snapshot([node("n1")], [pod("a", "n1", gpu=4, priority=100)], priority_classes={"high": 1000})
    fx = fixes_for(snap, gang(pod_set("t", 1, gpu=8), kind="Job", name="b", priority_class="high"))
    p = first(fx, "preempt")
    assert (p.displaced_pods, p.displaced_gpus, p.max_victim_priority) == (1, 4, 100)


def test_fits_and_never_fits_have_no_displacing_fixes():
    snap = snapshot([node("n1")])
    assert not [f for f in fixes_for(snap, gang(pod_set("t", 1, gpu=8), kind="Job")) if f.displaced_pods]
    assert fixes_for(snap, gang(pod_set("t", 2, gpu=8), kind="Job")) == []


def test_demo_64x8_ranked_zero_displacement_first_then_lowest_priority_victims():
    from webhook.adapters import adapt
    from webhook.demo import DEMO_NOW, demo_snapshot
    from webhook.dump import load_documents

    snap = demo_snapshot()
    g = adapt(load_documents("examples/pytorchjob-64x8.yaml")[1][0])
    fx = fixes_for(snap, g, now=DEMO_NOW)
    costs = [f.cost() for f in fx]
    assert costs == sorted(costs)
    assert fx[0].action == "repair" and fx[0].frees_nodes == 12 and not fx[0].sufficient
    disp = [f for f in fx if f.displaced_pods]
    assert disp and all(f.max_victim_priority == 100 for f in disp)       # batch-low only
    assert all(len({v.unit for v in f.victims}) * 16 == f.displaced_pods for f in disp)  # whole 16-pod jobs


# ---------------------------------------------------------------- property: greedy vs brute force


@st.composite
def small_cluster(draw):
    n_nodes = draw(st.integers(2, 5))
    gpus = 4
    units = []
    free = {}
    used = {i: 0 for i in range(n_nodes)}
    n_units = draw(st.integers(1, 7))
    for u in range(n_units):
        span = draw(st.lists(st.integers(0, n_nodes - 1), min_size=1, max_size=3, unique=True))
        use = {}
        for n in span:
            room = gpus - used[n]
            if room <= 0:
                continue
            g = draw(st.integers(1, room))
            used[n] += g
            use[n] = (1, g)
        if not use:
            continue
        prio = draw(st.sampled_from([0, 10, 100]))
        ns = draw(st.sampled_from(["t1", "t2"]))
        pods = tuple(pod(f"u{u}-{n}", f"n{n}", gpu=g, ns=ns, priority=prio) for n, (_, g) in use.items())
        hours = float(draw(st.integers(0, 5)))
        units.append(Unit(f"G/{ns}/u{u}", pods, use, prio, frozenset([ns]), sum(g for _, g in use.values()), hours))
    for i in range(n_nodes):
        free[i] = (110 - sum(1 for u in units if i in u.use), gpus - used[i])
    per_pod = draw(st.sampled_from([1, 2, 4]))
    need = draw(st.integers(1, n_nodes))
    return units, free, (1, per_pod), need


@settings(max_examples=400, deadline=None)
@given(small_cluster())
def test_greedy_victims_match_brute_force_on_small_clusters(case):
    units, avail, vals, need = case
    exact = brute_force_victims(units, avail, vals, need)
    greedy = choose_victims(units, avail, vals, need, exact_limit=0)
    assert (exact is None) == (greedy is None)
    if exact is None:
        return
    from webhook.engine.fixes import _Gain

    g = _Gain(avail, vals, None)
    assert g.of(units, greedy) >= need                                   # valid: whole units, enough pods
    ce, cg = set_cost(units, exact), set_cost(units, greedy)
    assert cg >= ce
    assert cg[:2] == ce[:2]                                              # same PDB count and top victim priority
    if all(u.node_local for u in units) and len({t for u in units for t in u.tenants}) == 1:
        assert cg[:4] == ce[:4]                                          # node-local: exact up to pods
        # (GPUs and GPU-hours are tie-breakers the greedy path may miss; ≤ EXACT_UNITS units are solved exactly)
    else:
        assert cg[3] <= 2 * ce[3] + 1                                    # spanning gangs: pods within 2× + 1


def test_victim_units_skip_daemonsets_system_pods_and_own_pods():
    snap = snapshot([node("n1")], [pod("ds", "n1", gpu=1, owner_kind="DaemonSet", owner_name="dp"),
                                   pod("sys", "n1", gpu=1, priority=2_000_000_000),
                                   pod("mine", "n1", gpu=1, gang="Job/default/g"),
                                   pod("other", "n1", gpu=1)])
    g = gang(pod_set("t", 1, gpu=8), kind="Job", name="g")
    us = victim_units(snap, g, shape_of(snap, {GPU: 8}), [0], None)
    assert [u.key for u in us] == ["Pod/default/other"]


# ---------------------------------------------------------------- the greedy, pinned
# choose_victims on seeded instances past EXACT_UNITS, against the victims the implementation
# chose before its data structures were reworked for speed (per-node running rows, cached unit
# costs, vectorised prefix bundles): the choice itself must not move. Spanning units (the greedy
# with exhaustive per-node bundles) and dense node-local nodes (> NODE_LOCAL_SUBSETS units, the
# greedy with cheapest-first bundles).

import random  # noqa: E402

from webhook.engine.fixes import _Gain, _gaining_alone, _node_bundle  # noqa: E402

PINNED_SPANNING = {
    0: [1, 8, 11, 21, 60], 1: [0, 1, 6, 8, 10, 13, 14, 19, 21, 43, 44, 50, 56, 65, 66, 69],
    2: [1, 2, 4, 10, 12, 17, 24, 26, 27, 37, 40], 3: [0, 4, 35],
    4: [0, 2, 3, 4, 6, 9, 12, 21, 23, 24, 25, 26, 30, 31, 35, 40, 42, 47, 48],
    5: [4, 5, 8, 9, 11, 13, 14, 21, 27, 28, 32, 49, 51, 54],
    6: [0, 1, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 18, 19, 20, 27, 30, 35],
    7: [2, 3, 5, 6, 11, 16, 17, 27, 32, 39, 45, 47],
    8: [2, 5, 7, 10, 11, 16, 18, 19, 22, 23, 24, 29, 30, 31, 34, 36, 39, 51, 52, 54],
    9: [4, 27, 29, 30, 47], 10: [1, 2, 4, 8, 11, 12, 14, 15, 18, 21, 22, 33], 11: [0, 17, 24, 27, 39, 44, 49],
}
PINNED_DENSE = {
    0: [4, 9, 10, 11, 18, 22, 29, 32, 34, 36, 37, 41, 42, 43, 44, 45, 48, 61, 62, 64, 65, 71, 72, 74, 75, 76, 87, 92, 94, 95],
    1: [2, 4, 8, 10, 12, 14, 17, 19, 21, 24, 27, 28, 29, 30, 32, 36, 39, 41],
    2: [16, 17, 18, 23, 24, 90, 95, 98],
    3: [16, 24, 27, 32, 34, 35, 61, 63, 69, 70, 74, 76, 80, 82, 84, 87, 88, 90],
    4: [0, 6, 8, 90, 94],
    5: [0, 5, 7, 12, 14, 17, 20, 23, 31, 33, 37, 38, 39, 40, 41, 50, 53, 55, 58, 60, 64, 66, 69, 71, 74, 76, 81, 82, 88, 91, 95, 97],
}


def spanning_instance(seed: int):
    rng = random.Random(seed)
    n_nodes = rng.randint(6, 14)
    used = {i: 0 for i in range(n_nodes)}
    units = []
    for u in range(rng.randint(40, 90)):
        span = {rng.randrange(n_nodes)}
        if rng.random() < 0.25:
            span.add(rng.randrange(n_nodes))
        use = {}
        for n in sorted(span):
            g = min(rng.choice([0, 0, 1, 2, 4]), 8 - used[n])
            used[n] += g
            use[n] = (1, rng.choice([1, 2, 8, 16]), g)
        tenants = frozenset(rng.sample(["t1", "t2", "t3"], rng.randint(1, 2)))
        units.append(Unit(f"G/u{u}", (None,) * len(use), use, rng.choice([0, 100, 1000]), tenants,
                          sum(x[2] for x in use.values()), rng.choice([0.0, 0.5, 2.25, 7.0]), rng.choice([0, 0, 0, 1])))
    avail = {i: (110 - sum(1 for u in units if i in u.use), 96 - rng.randint(0, 90), 8 - used[i]) for i in range(n_nodes)}
    return units, avail, (1, 8, 8), rng.randint(2, n_nodes), rng.choice([None, 1])


def dense_instance(seed: int):
    rng = random.Random(1000 + seed)
    n_nodes = rng.randint(4, 9)
    units, avail = [], {}
    for n in range(n_nodes):
        used = cpu = 0
        for j in range(rng.randint(11, 16)):
            g = min(rng.choice([0, 0, 0, 1, 2]), 8 - used)
            c = rng.choice([1, 2, 4, 8])
            used += g
            cpu += c
            units.append(Unit(f"Pod/t/p{n}-{j}", (None,), {n: (1, c, g)}, rng.choice([0, 0, 100, 1000]),
                              frozenset([rng.choice(["t1", "t2"])]), g, rng.choice([0.0, 1.5, 3.0]), 0))
        avail[n] = (110 - 16, 96 - cpu, 8 - used)
    return units, avail, (1, 8, 8), rng.randint(1, n_nodes), None


def test_greedy_victims_pinned_on_spanning_units():
    for seed, want in PINNED_SPANNING.items():
        units, avail, vals, need, mpn = spanning_instance(seed)
        assert choose_victims(units, avail, vals, need, mpn) == want, seed


def test_greedy_victims_pinned_on_dense_node_local_units():
    for seed, want in PINNED_DENSE.items():
        units, avail, vals, need, mpn = dense_instance(seed)
        assert all(u.node_local for u in units)
        assert choose_victims(units, avail, vals, need, mpn) == want, seed


def test_vectorised_helpers_match_their_python_definitions():
    huge = 2**60  # past the int64 guard: the Python path must give the same answers
    for seed in range(6):
        units, avail, vals, need, mpn = dense_instance(seed)
        for scale in (1, huge):
            av = {n: (a[0], a[1] * scale, a[2]) for n, a in avail.items()}
            us = [Unit(u.key, u.pods, {n: (r[0], r[1] * scale, r[2]) for n, r in u.use.items()}, u.priority, u.tenants, u.gpus, u.hours)
                  for u in units]
            g = _Gain(av, (1, 8 * scale, 8), mpn)
            alone = [ui for ui, u in enumerate(us)
                     if sum(g.k([x + y for x, y in zip(av[n], use)]) - g.base[n] for n, use in u.use.items() if n in av) > 0]
            assert _gaining_alone(us, g) == alone
            for n in av:
                uis = [ui for ui, u in enumerate(us) if n in u.use]
                order = sorted(uis, key=lambda ui: set_cost(us, [ui]))
                row, want = list(av[n]), None
                for i, ui in enumerate(order):
                    row = [x + y for x, y in zip(row, us[ui].use[n])]
                    if g.k(row) > g.base[n]:
                        want = order[: i + 1]
                        break
                assert _node_bundle(us, uis, n, g) == want


def test_victim_units_memo_gives_the_same_units():
    nodes = [node(f"n{i}") for i in range(4)]
    pods = [pod(f"p{i}", f"n{i % 4}", gpu=1 + i % 3, gang="Job/default/j1" if i % 5 == 0 else "", priority=i % 3 * 100,
                start_time=0.0) for i in range(20)]
    snap = snapshot(nodes, pods)
    g = gang(pod_set("t", 2, gpu=8), kind="Job", name="mine")
    sh = shape_of(snap, {GPU: 8})
    memo: dict = {}
    for cand, mp in (([0, 1], None), ([0, 1, 2, 3], None), ([2, 3], 100), ([0, 1, 2, 3], 200)):
        fresh = victim_units(snap, g, sh, cand, 3600.0, max_priority=mp)
        assert victim_units(snap, g, sh, cand, 3600.0, max_priority=mp, memo=memo) == fresh
        assert fresh and all(mp is None or u.priority < mp for u in fresh)
    j1 = next(u for u in victim_units(snap, g, sh, [0], 3600.0) if u.key == "Job/default/j1")
    assert {p.name for p in j1.pods} == {"p0", "p5", "p10", "p15"} and j1.hours == j1.gpus  # 1 h each, whole gang


def test_diagnose_leaves_the_collector_as_it_found_it():
    import gc

    from webhook.demo import DEMO_NOW, demo_snapshot
    from webhook.diagnose import diagnose

    snap = demo_snapshot()
    g = gang(pod_set("t", 40, gpu=8), kind="Job", name="big")
    assert gc.isenabled()
    rep = diagnose(snap, g, DEMO_NOW)
    assert gc.isenabled() and rep["decision"]["verdict"] in ("Waits", "Fits", "NeverFits")
    gc.disable()
    try:
        diagnose(snap, g, DEMO_NOW)
        assert not gc.isenabled()
    finally:
        gc.enable()


# ---------------------------------------------------------------- issue #17 item 14: safe to paste as printed

REBIND = "   # once the evicted pods are gone: then the gang's pods bind here (a cordoned node takes none)"
CORDON = "   # first: keeps the evicted pods' replacements off these nodes"


def test_move_cordons_the_freed_nodes_first_and_uncordons_them_after():
    # Without the cordon the deleted pod's replacement is free to land on n1 again.
    rs = dict(owner_kind="ReplicaSet", owner_name="web-5d8f")
    snap = snapshot([node("n1"), node("n2"), node("n3")], [pod("a", "n1", gpu=1, **rs), pod("b", "n2", gpu=1, **rs)])
    m = first(fixes_for(snap, gang(pod_set("Master", 1, gpu=8), pod_set("Worker", 1, gpu=8), kind="PyTorchJob")), "move")
    assert m.commands == [
        "kubectl cordon n1" + CORDON,
        "kubectl -n default delete pod a   # their controllers recreate them on the other nodes",
        "kubectl uncordon n1" + REBIND,
    ]
    assert "cordon the freed nodes first, uncordon them once the evicted pods are gone" in m.summary


def test_deleting_a_pod_without_a_controller_is_never_a_move():
    # Nothing recreates a bare pod: deleting it throws it away, whatever room is left elsewhere.
    snap = snapshot([node("n1"), node("n2"), node("n3")], [pod("a", "n1", gpu=1), pod("b", "n2", gpu=1)])
    fx = fixes_for(snap, gang(pod_set("Master", 1, gpu=8), pod_set("Worker", 1, gpu=8), kind="PyTorchJob"))
    assert not [f for f in fx if f.action == "move"]
    p = first(fx, "preempt")
    assert p.commands[1] == "kubectl -n default delete pod a   # pods with a controller come back Pending; pods without one are gone"


def test_preempting_four_jobs_suspends_all_four():
    # Four lower-priority Jobs, one per node: every one is named (no cut at three), each
    # suspended whole (its controller would recreate deleted pods).
    nodes = [node(f"n{i}") for i in range(4)]
    pods = [pod(f"j{i}-0", f"n{i}", gpu=8, ns="team", gang=f"Job/team/j{i}", priority=1) for i in range(4)]
    snap = snapshot(nodes, pods, priority_classes={"high": 1000})
    p = first(fixes_for(snap, gang(pod_set("w", 4, gpu=8), kind="Job", name="big", priority_class="high")), "preempt")
    suspend = "--type=merge -p '{\"spec\":{\"suspend\":true}}'"
    assert p.commands == (["kubectl cordon n0 n1 n2 n3" + CORDON]
                          + [f"kubectl -n team patch jobs.batch j{i} {suspend}   # suspends Job j{i}: its pods leave, "
                             "none is recreated until it is resumed" for i in range(4)]
                          + ["kubectl uncordon n0 n1 n2 n3" + REBIND])


def test_preempting_kueue_work_deactivates_its_workload_and_kubeflow_jobs_suspend_their_run_policy():
    from webhook.engine.model import KueueWorkload

    nodes = [node("n0"), node("n1")]
    pods = [pod("q-0", "n0", gpu=8, ns="team", gang="Job/team/q", priority=1, queue="lq"),
            pod("pt-worker-0", "n1", gpu=8, ns="team", gang="PyTorchJob/team/pt", priority=1)]
    wl = KueueWorkload("team", "job-q-1a2b3", queue_name="lq", owner="Job/q")
    k = kueue(64)
    k = KueueState(flavors=k.flavors, cluster_queues=k.cluster_queues, local_queues=k.local_queues,
                   workloads={("team", wl.name): wl})
    snap = snapshot(nodes, pods, priority_classes={"high": 1000}, kueue=k)
    p = first(fixes_for(snap, gang(pod_set("w", 2, gpu=8), kind="Job", name="big", priority_class="high")), "preempt")
    assert p.commands[1:3] == [
        "kubectl -n team patch workloads.kueue.x-k8s.io job-q-1a2b3 --type=merge -p '{\"spec\":{\"active\":false}}'"
        "   # Kueue evicts Job q whole and keeps it queued, inactive",
        "kubectl -n team patch pytorchjobs.kubeflow.org pt --type=merge -p '{\"spec\":{\"runPolicy\":{\"suspend\":true}}}'"
        "   # suspends PyTorchJob pt: its pods leave, none is recreated until it is resumed",
    ]


def test_repair_names_every_notready_and_cordoned_node():
    # 1 free + 3 NotReady + 8 cordoned nodes for a 12-pod gang: every node is in a command.
    nodes = ([node("ok")] + [node(f"nr{i}", ready=False) for i in range(3)]
             + [node(f"c{i}", unschedulable=True) for i in range(8)])
    rep = first(fixes_for(snapshot(nodes), gang(pod_set("w", 12, gpu=8), kind="Job")), "repair")
    assert rep.sufficient
    assert rep.commands == [
        "kubectl describe node nr0 nr1 nr2   # NotReady: repair kubelet/containerd on each node; see its conditions",
        "kubectl uncordon c0 c1 c2 c3 c4 c5 c6 c7   # once their maintenance is over",
    ]
    assert rep.summary == ("repair 11 node(s) — 3 NotReady (nr0, nr1, nr2); 8 cordoned (c0, c1, c2 and 5 more): "
                           "11 more pod(s) fit")


def test_repair_restarts_the_device_plugin_pod_it_finds_on_the_node():
    snap = snapshot([node("A", alloc_gpu=6), node("B", alloc_gpu=0)],
                    [pod("nvidia-device-plugin-daemonset-x1", "A", ns="gpu-operator", owner_kind="DaemonSet")])
    rep = first(fixes_for(snap, gang(pod_set("w", 2, gpu=8), kind="Job")), "repair")
    assert rep.commands == [
        "kubectl -n gpu-operator delete pod nvidia-device-plugin-daemonset-x1   # restart the device plugin on A",
        "kubectl delete pod -A -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName=B   # restart its device plugin",
    ]


def test_no_wait_fix_when_the_only_running_work_is_the_gangs_own_pods():
    # 2 of 3 pods bound on the only two schedulable nodes: they never finish (they wait for
    # the third), so "wait for running work" would wait forever; uncordoning c is the fix.
    own = dict(gang="Job/default/train", start_time=0.0)
    snap = snapshot([node("a"), node("b"), node("c", unschedulable=True)],
                    [pod("train-0", "a", gpu=8, **own), pod("train-1", "b", gpu=8, **own)])
    fx = fixes_for(snap, gang(pod_set("w", 3, gpu=8), kind="Job", name="train"), now=3600.0)
    assert [f.action for f in fx if f.action == "wait"] == []
    assert first(fx, "repair").commands == ["kubectl uncordon c   # once their maintenance is over"]
    assert not [f for f in fx if f.displaced_pods]                       # its own pods are never victims


def test_orphan_podgroups_all_deleted_one_command_per_namespace():
    from webhook.engine.model import PodGroupState, VolcanoQueue, VolcanoState

    orphans = {(ns, f"pg-{i}"): PodGroupState(ns, f"pg-{i}", "default", 1, {GPU: 1}, "Inqueue", 0)
               for ns in ("a", "b") for i in range(7)}
    snap = snapshot([node("n1", gpu=4)], volcano=VolcanoState(
        queues={"default": VolcanoQueue("default", capability={GPU: 4}, allocated={GPU: 4})}, pod_groups=orphans))
    fx = fixes_for(snap, gang(pod_set("t", 1, gpu=1), kind="Job", volcano_queue="default"))
    rel = first(fx, "release-reservations")
    assert rel.commands == ["kubectl -n a delete podgroup " + " ".join(f"pg-{i}" for i in range(7)),
                            "kubectl -n b delete podgroup " + " ".join(f"pg-{i}" for i in range(7))]


@st.composite
def _own_and_daemon_cluster(draw):
    nodes, pods = [], []
    per = draw(st.sampled_from([2, 4, 8]))
    for i in range(draw(st.integers(1, 5))):
        nodes.append(node(f"n{i}", unschedulable=draw(st.booleans())))
        used = 0
        for j in range(draw(st.integers(0, 3))):
            who = draw(st.sampled_from(["work", "daemon", "own"]))
            g = per if who == "own" else draw(st.integers(1, 8))
            if used + g > 8:
                break
            used += g
            kw = {"owner_kind": "DaemonSet"} if who == "daemon" else {"gang": "Job/default/train"} if who == "own" else {}
            pods.append(pod(f"p{i}-{j}", f"n{i}", gpu=g, start_time=0.0, **kw))
    return nodes, pods, per, draw(st.integers(1, 8))


@settings(max_examples=200, deadline=None)
@given(_own_and_daemon_cluster())
def test_wait_fix_offered_exactly_when_work_that_ends_frees_enough(case):
    nodes, pods, per, count = case
    snap = snapshot(nodes, pods)
    g = gang(pod_set("w", count, gpu=per), kind="Job", name="train")
    d = evaluate(snap, g)
    if d.verdict != "Waits":
        return
    waits = [f for f in compute_fixes(snap, g, d, 3600.0) if f.action == "wait"]
    # Brute force: schedulable nodes' GPUs once every pod but DaemonSet and own pods has ended.
    need = max(0, count - sum(1 for p in pods if p.gang))
    room = placeable = 0
    for n in nodes:
        if n.unschedulable:
            continue
        mine = [p for p in pods if p.node_name == n.name]
        room += (8 - sum(p.requests["nvidia.com/gpu"] for p in mine if p.owner_kind == "DaemonSet" or p.gang)) // per
        placeable += (8 - sum(p.requests["nvidia.com/gpu"] for p in mine)) // per
    assert bool(waits) == (room >= need and room > placeable and placeable < need), (room, placeable, need)


def test_commands_quote_names_a_shell_would_split():
    # Names come from the cluster data; a hand-made dump can hold any string. Plain Kubernetes
    # names print as they are (above); others are quoted so the command stays one command.
    snap = snapshot([node("ok"), node("c d;reboot", unschedulable=True)])
    rep = first(fixes_for(snap, gang(pod_set("w", 2, gpu=8), kind="Job")), "repair")
    assert rep.commands == ["kubectl uncordon 'c d;reboot'   # once their maintenance is over"]


def test_shrink_edits_the_gangs_own_kind_by_group():
    # "kubectl edit job" is batch/v1's Job; a Volcano Job needs its group named.
    snap = snapshot([node("n1"), node("n2")], [pod("busy", "n2", gpu=4)])
    for api, want in (("batch.volcano.sh/v1alpha1", "job.batch.volcano.sh"), ("batch/v1", "job.batch"), ("", "job")):
        g = gang(pod_set("w", 2, gpu=8), kind="Job", name="train", api_version=api)
        s = first(fixes_for(snap, g), "shrink")
        assert s.commands == [f"kubectl -n default edit {want} train   # replicas / parallelism / minAvailable → 1"]
