"""The victim search's shortcuts give the answers of its plain paths (webhook.engine.fixes).

``choose_victims`` takes fast paths on regular input (``_Prep``: per-node running sums, summed
bundles, nodes that can gain nothing more left alone, results reused through a memo);
``victim_units`` builds units of one pod from the node scan and makes them on first access.
Each is checked here against the path it stands in for, on seeded instances: same victims,
same units — not merely as good ones.
"""

from __future__ import annotations

import random

import numpy as np

import webhook.engine.fixes as fixes_mod
from webhook.engine.fixes import prep as fixes_prep, units as fixes_units
from builders import GPU, gang, node, pod, pod_set, snapshot
from webhook.engine.fit import shape_of
from webhook.engine.fixes import Unit, choose_victims, compute_fixes, own_pod, victim_units
from webhook.engine.evaluate import evaluate
from webhook.engine.model import DisruptionBudget, LabelSelector


def _instance(seed: int, huge: bool = False):
    """Units on 2–30 nodes: one-node and spanning, 0–400 of them (dense nodes past the exact
    per-node limits), optional budgets, widths 2–4, a per-node cap sometimes."""
    rng = random.Random(seed)
    n_nodes = rng.randint(2, 30)
    width = rng.choice([2, 3, 4])
    gpus = rng.choice([4, 8])
    scale = 2**61 if huge else 1
    used = {i: [0] * width for i in range(n_nodes)}
    span = rng.choice([0.0, 0.0, 0.1, 0.3])
    budgets = rng.random() < 0.35
    allowed = [rng.randint(0, 3) for _ in range(rng.randint(1, 4))]
    units = []
    for u in range(rng.randint(1, rng.choice([12, 80, 400]))):
        nodes = {rng.randrange(n_nodes)}
        while rng.random() < span and len(nodes) < n_nodes:
            nodes.add(rng.randrange(n_nodes))
        use = {}
        for n in sorted(nodes):
            g = min(rng.choice([0, 0, 1, 2, 4, 8]), gpus - used[n][1])
            row = [1, g] + [rng.choice([0, 1, 2, 5, 10]) * scale for _ in range(width - 2)]
            for j in range(width):
                used[n][j] += row[j]
            use[n] = tuple(row)
        pods = len(use) if rng.random() < 0.7 else len(use) + rng.randint(0, 2)
        hits = ()
        if budgets:
            hits = tuple((bi, k, a) for bi, a in enumerate(allowed) if rng.random() < 0.3 and (k := rng.randint(1, pods)))
        units.append(Unit(f"G/u{u:03d}", (None,) * pods, use, rng.choice([0, 0, 10, 100, 1000]),
                          frozenset(rng.sample(["t1", "t2", "t3"], rng.choice([1, 1, 1, 2]))), sum(r[1] for r in use.values()),
                          rng.choice([0.0, 0.1, 1 / 3, 2.25, 7.0, 1e-7, 123.456789]), rng.choice([0, 0, 0, 0, 1]), False, hits))
    total = {i: [110, gpus] + [rng.choice([20, 40, 100]) * scale for _ in range(width - 2)] for i in range(n_nodes)}
    avail = {i: tuple(t - x - (rng.randint(0, 3) if j else 0) for j, (t, x) in enumerate(zip(total[i], used[i])))
             for i in range(n_nodes) if rng.random() < 0.9}
    vals = [1, rng.choice([1, 2, 4, 8])] + [rng.choice([1, 5, 10, 20]) * scale for _ in range(width - 2)]
    need = rng.randint(1, max(1, n_nodes * rng.choice([1, 2])))
    return units, avail, vals, need, rng.choice([None, None, 1, 2])


def _plain(monkeypatch, *args, **kw):
    with monkeypatch.context() as m:
        m.setattr(fixes_prep, "_FAST_PATHS", False)
        return choose_victims(*args, **kw)


def test_fast_paths_choose_the_victims_the_plain_paths_choose(monkeypatch):
    compared = dense = 0
    for seed in range(120):
        units, avail, vals, need, mpn = _instance(seed, huge=seed % 10 == 9)
        want = _plain(monkeypatch, units, avail, vals, need, mpn, exact_limit=0)
        assert choose_victims(units, avail, vals, need, mpn, exact_limit=0) == want, seed
        compared += want is not None
        per_node: dict[int, int] = {}
        for u in units:
            for n in u.use:
                per_node[n] = per_node.get(n, 0) + 1
        dense += want is not None and max(per_node.values()) > 10  # cheapest-first bundles, vectorised
    assert compared > 30 and dense > 10


def test_search_memo_reuses_only_what_still_holds(monkeypatch):
    # compute_fixes passes one memo to its searches: a later one with other free rows, other
    # nodes or fewer units must answer as if alone.
    for seed in range(40):
        rng = random.Random(10_000 + seed)
        units, avail, vals, need, mpn = _instance(10_000 + seed)
        avail2 = dict(avail)
        for n in rng.sample(sorted(avail2), min(2, len(avail2))):
            avail2[n] = tuple(x + rng.choice([0, 1, 2]) for x in avail2[n])
        if avail2 and rng.random() < 0.5:
            avail2.pop(rng.choice(sorted(avail2)))
        units2 = [u for u in units if rng.random() < 0.97]
        memo: dict = {}
        for us, av in ((units, avail), (units2, avail2), (units, avail)):
            want = _plain(monkeypatch, us, av, vals, need, mpn)
            assert choose_victims(us, av, vals, need, mpn, memo=memo) == want, seed


def _cluster():
    """Nodes with one-pod units, gangs on one and on several nodes, a partial gang, DaemonSet and
    system pods, the gang's own pods, and budgets selecting some of them."""
    nodes = [node(f"n{i}", gpu=8) for i in range(6)]
    pods = []
    for i in range(6):
        pods.append(pod(f"ds-{i}", f"n{i}", cpu=0.1, owner_kind="DaemonSet", owner_name="ds", priority=2_000_001_000))
        pods.append(pod(f"web-{i}", f"n{i}", cpu=1, mem_gi=1, owner_kind="ReplicaSet", owner_name="web-1",
                        gang="ReplicaSet/default/web-1", labels={"app": "web"}, start_time=100.0 * i))
        pods.append(pod(f"solo-{i}", f"n{i}", gpu=1 + i % 3, priority=100 * (i % 3), start_time=50.0, ns="team-b",
                        labels={"app": "solo"}))
        pods.append(pod(f"sys-{i}", f"n{i}", gpu=1, priority=2_000_000_000))
    pods += [pod(f"span-{w}", f"n{w}", gpu=2, gang="Job/default/span", owner_kind="Job", owner_name="span", start_time=0.0,
                 labels={"app": "train"}) for w in range(3)]
    pods += [pod("local-0", "n4", gpu=2, gang="Job/default/local", owner_kind="Job", owner_name="local", start_time=10.0)]
    pods += [pod("part-0", "n5", gpu=2, gang="Job/default/part", owner_kind="Job", owner_name="part", start_time=0.0),
             pod("part-1", "", gpu=2, gang="Job/default/part", owner_kind="Job", owner_name="part", phase="Pending")]
    pods += [pod("mine-0", "n3", gpu=2, gang="Job/default/g", owner_kind="Job", owner_name="g")]
    budgets = [DisruptionBudget("default", "web", LabelSelector((("app", "web"),)), max_unavailable=1),
               DisruptionBudget("default", "train", LabelSelector((("app", "train"),)), disruptions_allowed=1),
               DisruptionBudget("team-b", "all", LabelSelector(), min_available="50%")]
    return nodes, pods, budgets


def test_one_pod_units_match_the_general_path(monkeypatch):
    nodes, pods, budgets = _cluster()
    g = gang(pod_set("t", 2, gpu=8), kind="Job", name="g")
    for extra in ({}, {"disruption_budgets": budgets}):
        snap = snapshot(nodes, pods, **extra)
        sh = shape_of(snap, {GPU: 8, "cpu": 1000})
        for mp in (None, 150):
            fast = victim_units(snap, g, sh, range(6), 3600.0, max_priority=mp)
            with monkeypatch.context() as m:
                # As if two pods shared a name: every unit of one pod goes the general way.
                real = fixes_mod._pod_indexes
                m.setattr(fixes_units, "_pod_indexes", lambda s: (real(s)[0], False))
                slow = victim_units(snap, g, sh, range(6), 3600.0, max_priority=mp)
            assert fast == slow and len(fast) > 5
            assert [u.__dict__["_search_pack"] for u in fast] == [
                fixes_mod._pack(u.pods, u.use, u.priority, u.tenants, u.gpus, u.hours, u.pdb, u.budgets) for u in fast]


def test_units_made_on_access_are_the_units():
    nodes, pods, budgets = _cluster()
    snap = snapshot(nodes, pods, disruption_budgets=budgets)
    g = gang(pod_set("t", 2, gpu=8), kind="Job", name="g")
    sh = shape_of(snap, {GPU: 8})
    memo: dict = {}
    lazy, packs = fixes_mod._victim_units(snap, g, sh, range(6), 3600.0, None, None, None, memo)
    assert len(lazy) == len(packs) and lazy[1:3] == [lazy[1], lazy[2]] and lazy[-1] is lazy[len(lazy) - 1]
    again = victim_units(snap, g, sh, range(6), 3600.0, memo=memo)
    assert all(a is b for a, b in zip(again, lazy)) and again == victim_units(snap, g, sh, range(6), 3600.0)


def test_own_test_is_own_pod():
    kinds = [("", "", ""), ("Job/default/g", "Job", "g"), ("job/DEFAULT/G", "Job", "x"), ("PodGroup/default/g", "", ""),
             ("Job/default/other", "Job", "g"), ("", "ReplicaSet", "g"), ("", "ReplicaSet", "h")]
    for name in ("g", ""):
        g = gang(pod_set("t", 1, gpu=1), kind="Job", name=name)
        test = fixes_mod._own_test(g)
        for key, kind, owner in kinds:
            p = pod("p", "n0", gang=key, owner_kind=kind, owner_name=owner)
            assert test(p) == own_pod(g, p), (name, key, kind, owner)


def test_budget_members_index_matches_a_scan():
    rng = random.Random(7)
    pods = [pod(f"p{i}", "n0", ns=rng.choice(["a", "b"]), labels={k: rng.choice("xyz") for k in rng.sample("klm", rng.randint(0, 3))})
            for i in range(200)]
    sels = [LabelSelector((("k", "x"),)), LabelSelector((("k", "x"), ("l", "y"))), LabelSelector(),
            LabelSelector((), (("m", "In", ("x", "z")),)), LabelSelector((("l", "z"),), (("k", "NotIn", ("x",)),)), None]
    budgets = [DisruptionBudget(ns, f"b{i}", sel) for i, sel in enumerate(sels) for ns in ("a", "b")]
    snap = snapshot([node("n0")], pods, disruption_budgets=budgets)
    want = tuple(frozenset() if b.selector is None else
                 frozenset((p.namespace, p.name) for p in pods if p.namespace == b.namespace and b.selector.matches(p.labels))
                 for b in budgets)
    assert fixes_mod.budget_members(snap) == want


def test_apply_placement_subtracts_each_node_once():
    nodes, pods, _ = _cluster()
    snap = snapshot(nodes, pods)
    g = gang(pod_set("a", 3, gpu=2, cpu=1), pod_set("b", 2, gpu=1), kind="Job", name="g")
    view = fixes_mod.gang_view(snap, g, evaluate(snap, g))
    after = snap.free.copy()
    placement = {"0": [(0, 1), (2, 2)], "1": [(2, 1), (4, 1)]}
    got, taken = fixes_mod._apply_placement(after, view, placement)
    want = after.copy()
    for k, chosen in placement.items():
        sh = view.shapes[int(k)]
        for n, cnt in chosen:
            want[n, sh.cols] -= sh.vals * cnt
    assert np.array_equal(got, want) and taken.tolist() == [True, False, True, False, True, False]


def test_compute_fixes_is_the_same_on_the_plain_paths(monkeypatch):
    rng = random.Random(3)
    nodes = [node(f"n{i}", gpu=8, unschedulable=i == 0) for i in range(24)]
    pods = []
    for i in range(1, 24):
        for j in range(rng.randint(8, 14)):
            pods.append(pod(f"cpu-{i}-{j}", f"n{i}", cpu=rng.choice([0.5, 1, 2]), mem_gi=rng.choice([1, 4]), ns=rng.choice(["a", "b"]),
                            owner_kind="ReplicaSet", owner_name=f"rs-{j}", start_time=0.0))
        free = 8
        while free > 0 and rng.random() < 0.8:
            x = min(free, rng.choice([1, 2, 4, 8]))
            free -= x
            pods.append(pod(f"gpu-{i}-{free}", f"n{i}", gpu=x, cpu=x, ns=rng.choice(["a", "b"]), priority=rng.choice([0, 100, 1000]),
                            start_time=rng.choice([0.0, 1800.0])))
    snap = snapshot(nodes, pods)
    g = gang(pod_set("t", 18, gpu=8, cpu=8), kind="Job", name="big", priority_class="high")
    snap = snapshot(nodes, pods, priority_classes={"high": 500})
    d = evaluate(snap, g)
    assert d.verdict == "Waits"
    fast = [f.to_dict() for f in compute_fixes(snap, g, d, 7200.0)]
    with monkeypatch.context() as m:
        m.setattr(fixes_prep, "_FAST_PATHS", False)
        plain = [f.to_dict() for f in compute_fixes(snap, g, d, 7200.0)]
    assert fast == plain and any(f["displaced_pods"] for f in fast)


def test_prep_node_results_and_bundle_sums_match_their_definitions():
    checked = 0
    for seed in range(60):
        units, avail, vals, need, mpn = _instance(20_000 + seed, huge=seed % 10 == 9)
        g = fixes_mod._Gain(avail, vals, mpn)
        prep = fixes_mod._Prep(units, g)
        prep.scan()
        if not prep.regular:
            continue
        for n, uis in prep.on_node.items():
            row = list(avail[n])
            for ui in uis:
                row = [x + y for x, y in zip(row, units[ui].use[n])]
            assert prep.top[n] == g.k(row)                                  # every unit on n evicted
            order = prep.orders.get(n)
            if order is None:
                continue
            assert order == sorted(uis, key=lambda ui: fixes_mod.set_cost(units, [ui]))
            assert order[: prep.first[n] + 1] == (fixes_mod._node_bundle(units, uis, n, g) or [])
            for size in (2, len(order)):
                c = frozenset(order[:size])
                info = prep.bundle(c)
                if any(prep.one[ui] != n for ui in c):
                    assert info is False
                    continue
                us = [units[ui] for ui in c]
                assert info == (n, tuple(map(sum, zip(*[u.use[n] for u in us]))), sum(u.pdb for u in us), max(u.priority for u in us),
                                sum(len(u.pods) for u in us), sum(u.gpus for u in us), frozenset().union(*[u.tenants for u in us]),
                                any(u.budgets for u in us))
        seeded = 0
        for n, e in prep.entries.items():  # first bundles summed by the scan, vectorised
            if e[8] is not None:
                us = [units[ui] for ui in prep.orders[n][: prep.first[n] + 1]]
                assert e[8] == (n, tuple(map(sum, zip(*[u.use[n] for u in us]))), sum(u.pdb for u in us), max(u.priority for u in us),
                                sum(len(u.pods) for u in us), sum(u.gpus for u in us), frozenset().union(*[u.tenants for u in us]),
                                any(u.budgets for u in us))
                seeded += 1
        checked += seeded
        alone = [ui for ui, u in enumerate(units)
                 if sum(g.k([x + y for x, y in zip(avail[n], r)]) - g.base[n] for n, r in u.use.items() if n in avail) > 0]
        assert prep.gaining in (None, alone)                                  # None: amounts past int64
        assert prep.total == g.of(units, range(len(units)))
    assert checked > 10


def test_pack_cost_is_set_cost():
    for seed in range(30):
        units, *_ = _instance(30_000 + seed)
        packs = [fixes_mod._unit_pack(u) for u in units]
        rng = random.Random(seed)
        for _ in range(40):
            combo = rng.sample(range(len(units)), rng.randint(0, min(len(units), 12)))
            assert fixes_mod._pack_cost(packs, combo) == fixes_mod.set_cost(units, combo)
