"""The Kueue quota package's steps, each on its own (issue #14): the tree of resource nodes
(``engine.quota.kueue``) and the steps of ``evaluate_kueue`` (``engine.quota.kueue_admit``).

Expected values are worked out by hand from Kueue's rules (kueue pkg/cache/scheduler
resource_node.go; pkg/scheduler/flavorassigner): see each test's comment.
"""

from __future__ import annotations

from builders import GPU, gang, pod_set, toleration
from webhook.engine.model import (
    ClusterQueue, Cohort, FlavorQuotas, KueueState, LocalQueue, ResourceFlavor, ResourceGroup, ResourceQuota, Taint,
)
from webhook.engine.quota import CohortTree, QuotaResult
from webhook.engine.quota.kueue import ResourceNode, _quotas_of, ref
from webhook.engine.quota.kueue_admit import (
    MAX_FLAVOR_COMBINATIONS, _Admission, _assign_ever, _assign_now, _candidate_flavors, _tree_unusable,
)


def groups(*flavors: tuple[str, int], ll: int | None = None) -> tuple[ResourceGroup, ...]:
    return (ResourceGroup((GPU,), tuple(FlavorQuotas(f, {GPU: ResourceQuota(n, None, ll)}) for f, n in flavors)),)


def forest() -> KueueState:
    # root ← mid (quota 4, lends at most 2) ← a, b; c names an undefined cohort "loose".
    cohorts = {"root": Cohort("root"), "mid": Cohort("mid", parent="root", resource_groups=groups(("h100", 4), ll=2))}
    cqs = {
        "a": ClusterQueue("a", groups(("h100", 8)), cohort="mid", usage={("h100", GPU): 10}),
        "b": ClusterQueue("b", groups(("h100", 6)), cohort="mid"),
        "c": ClusterQueue("c", groups(("h100", 2)), cohort="loose"),
        "solo": ClusterQueue("solo", groups(("h100", 3))),
    }
    return KueueState(flavors={"h100": ResourceFlavor("h100")}, cluster_queues=cqs, cohorts=cohorts)


def test_the_tree_has_one_resource_node_per_object_and_implicit_cohorts():
    t = CohortTree(forest())
    assert t.nodes[("co", "mid")] == ResourceNode(("co", "mid"), {("h100", GPU): ResourceQuota(4, None, 2)}, {},
                                                   ("co", "root"), [("cq", "a"), ("cq", "b")])
    assert t.nodes[("co", "root")].children == [("co", "mid")] and t.nodes[("co", "root")].quotas == {}
    # "loose" is named only by ClusterQueue c: a node with no quota of its own, a root.
    assert t.nodes[("co", "loose")] == ResourceNode(("co", "loose"), {}, {}, None, [("cq", "c")])
    assert t.nodes[("cq", "a")].own_usage == {("h100", GPU): 10}
    assert t.root(("cq", "a")) == ("co", "root") and t.root(("cq", "solo")) == ("cq", "solo")
    assert t.depth(("cq", "a")) == 2 and t.height(("co", "root")) == 2


def test_subtree_local_and_usage_follow_kueues_accumulation():
    t, fr = CohortTree(forest()), ("h100", GPU)
    # mid: own 4 + a 8 + b 6 = 18; lendingLimit 2 → local 16, lends 2 to root.
    assert (t.subtree(("co", "mid"), fr), t.local(("co", "mid"), fr), t.lent(("co", "mid"), fr)) == (18, 16, 2)
    assert t.subtree(("co", "root"), fr) == 2
    # a uses 10 (no local quota of its own): mid's usage is 10, all within mid's local 16.
    assert t.usage(("co", "mid"), fr) == 10 and t.usage(("co", "root"), fr) == 0
    assert t.local_available(("co", "mid"), fr) == 6
    # b could ever get everything mid holds plus what root holds: 16 + 2.
    assert t.potential(("cq", "b"), fr)[0] == 18
    # now: mid's unused local 6 + root's 2 free.
    assert t.available(("cq", "b"), fr)[0] == 8


def test_quotas_of_gives_a_covered_resource_a_flavor_leaves_out_quota_zero():
    rg = (ResourceGroup((GPU, "cpu"), (FlavorQuotas("h100", {GPU: ResourceQuota(8)}),)),)
    assert _quotas_of(rg) == {("h100", GPU): ResourceQuota(8), ("h100", "cpu"): ResourceQuota(0)}
    assert ref(("cq", "a")) == "ClusterQueue/a" and ref(("co", "x")) == "Cohort/x" and ref(None) is None


def _admission(cq: ClusterQueue, g, flavors=None, cohorts=None) -> _Admission:
    k = KueueState(flavors=flavors or {}, cluster_queues={cq.name: cq}, local_queues={("default", "lq"): LocalQueue("default", "lq", cq.name)},
                   cohorts=cohorts or {})
    return _Admission(g, k, cq, CohortTree(k), QuotaResult("kueue", "default/lq"))


def test_candidate_flavors_keep_the_queues_order_and_drop_what_the_pod_set_cannot_use():
    cq = ClusterQueue("q", (ResourceGroup((GPU, "cpu"), (
        FlavorQuotas("spot", {GPU: ResourceQuota(8), "cpu": ResourceQuota(10**6)}),
        FlavorQuotas("a100", {GPU: ResourceQuota(8), "cpu": ResourceQuota(10**6)}),
        FlavorQuotas("h100", {GPU: ResourceQuota(8), "cpu": ResourceQuota(10**6)}))),))
    flavors = {"spot": ResourceFlavor("spot", node_taints=(Taint("spot", "", "NoSchedule"),)),
               "a100": ResourceFlavor("a100", {"product": "A100"}), "h100": ResourceFlavor("h100", {"product": "H100"})}
    g = gang(pod_set("w", 2, gpu=4, cpu=1, selector={"product": "H100"}),
             pod_set("x", 1, gpu=1, tolerations=[toleration("spot")]), kind="Job", queue="lq")
    candidates, blocked, _ = _candidate_flavors(_admission(cq, g, flavors))
    # w: spot's taint is not tolerated, a100's label disagrees with the selector; x tolerates spot.
    assert candidates == {"w": ["h100"], "x": ["spot", "a100", "h100"]} and blocked is False


def test_candidate_flavors_block_on_a_resource_no_group_covers():
    cq = ClusterQueue("q", groups(("h100", 8)))
    a = _admission(cq, gang(pod_set("w", 1, gpu=1, cpu=2), kind="Job", queue="lq"))
    candidates, blocked, _ = _candidate_flavors(a)
    assert blocked is True and candidates == {"w": ["h100"]}
    assert [(f.code, f.data["resource"]) for f in a.res.findings] == [("ResourceNotCovered", "cpu")]


def test_assign_ever_takes_the_first_combination_within_every_maximum():
    cq = ClusterQueue("q", groups(("small", 4), ("big", 16)))
    g = gang(pod_set("p", 3, gpu=1), pod_set("r", 2, gpu=1), kind="Job", queue="lq")
    a = _admission(cq, g)
    # (small, small) needs 5 > 4; (small, big) is the next in product order.
    assert _assign_ever(a, list(g.pod_sets), {"p": ["small", "big"], "r": ["small", "big"]}) == ({"p": "small", "r": "big"}, True)
    assert _assign_ever(a, list(g.pod_sets), {"p": [], "r": ["small"]}) == (None, True)


def test_assign_ever_gives_up_past_the_combination_cap():
    cq = ClusterQueue("q", groups(("f", 0)))
    sets = [pod_set(f"s{i}", 1, gpu=1) for i in range(13)]  # 2**13 = 8192 combinations, all over quota
    a = _admission(cq, gang(*sets, kind="Job", queue="lq"))
    assert 2**13 > MAX_FLAVOR_COMBINATIONS
    assert _assign_ever(a, sets, {ps.name: ["f", "f"] for ps in sets}) == (None, False)


def test_assign_now_counts_earlier_pod_sets_in_the_same_flavor():
    cq = ClusterQueue("q", groups(("small", 4), ("big", 16)), usage={("big", GPU): 14})
    g = gang(pod_set("p", 3, gpu=1), pod_set("r", 2, gpu=1), kind="Job", queue="lq")
    a = _admission(cq, g)
    # p takes small (3 ≤ 4); r: small has 1 left, big 2 free → big.
    assert _assign_now(a, list(g.pod_sets), {"p": ["small", "big"], "r": ["small", "big"]}, None) == ({"p": "small", "r": "big"}, None)
    # r asks 3: small 1 left, big 2 free: none fits; it takes its ever flavor and is 1 short there.
    g3 = gang(pod_set("p", 3, gpu=1), pod_set("r", 3, gpu=1), kind="Job", queue="lq")
    a3 = _admission(cq, g3)
    assert _assign_now(a3, list(g3.pod_sets), {"p": ["small", "big"], "r": ["small", "big"]}, {"p": "small", "r": "big"}) == (
        {"p": "small", "r": "big"}, ("big", GPU, 1))


def test_tree_unusable_on_a_cohort_cycle():
    cq = ClusterQueue("q", groups(("h100", 8)), cohort="x")
    a = _admission(cq, gang(pod_set("w", 1, gpu=1), kind="Job", queue="lq"),
                   cohorts={"x": Cohort("x", parent="y"), "y": Cohort("y", parent="x")})
    assert _tree_unusable(a.gang, cq, a.tree, a.res) is True
    assert [f.code for f in a.res.findings] == ["CohortHasCycle"] and a.res.report["limits"] == {}
    ok = _admission(ClusterQueue("q", groups(("h100", 8))), a.gang)
    assert _tree_unusable(ok.gang, ok.cq, ok.tree, ok.res) is False and ok.res.findings == []
