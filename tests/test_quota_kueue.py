"""Kueue cohort quota (issue #17 items 23 and 22): the tree of resource nodes.

Regression cases first (each failed on the flat model that preceded the tree), then a property
test of ``webhook.engine.quota`` against an independent brute force: a straightforward
simulation of Kueue's usage bubbling (kueue pkg/cache/scheduler/resource_node.go addUsage) and
its admission constraints, searched over every amount, on random small cohort trees.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from builders import GPU, gang, node, pod_set, snapshot
from webhook.engine.evaluate import evaluate
from webhook.engine.fixes import compute_fixes
from webhook.engine.model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    KueueState,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from webhook.engine.quota import evaluate_kueue, kueue_limits

F = "h100"


def rg(nominal: int, bl: int | None = None, ll: int | None = None) -> tuple[ResourceGroup, ...]:
    return (ResourceGroup((GPU,), (FlavorQuotas(F, {GPU: ResourceQuota(nominal, bl, ll)}),)),)


def cq(name: str, nominal: int, *, cohort: str | None = "research", bl=None, ll=None, usage: int = 0) -> ClusterQueue:
    return ClusterQueue(name, rg(nominal, bl, ll), cohort=cohort, usage={(F, GPU): usage} if usage else {})


def state(*cqs: ClusterQueue, cohorts=()) -> KueueState:
    return KueueState(
        flavors={F: ResourceFlavor(F)},
        cluster_queues={c.name: c for c in cqs},
        local_queues={("default", f"lq-{c.name}"): LocalQueue("default", f"lq-{c.name}", c.name) for c in cqs},
        cohorts={c.name: c for c in cohorts},
    )


def check(kueue: KueueState, queue: str, gpus: int):
    return evaluate_kueue(gang(pod_set("w", 1, gpu=gpus), kind="Job", queue=f"lq-{queue}"), kueue)


def finding(res, code):
    return next((f for f in res.findings if f.code == code), None)


# ---------------------------------------------------------------- item 23: regressions


def test_message_names_the_lending_limit_that_binds_not_the_borrowing_limit():
    # a: 8 + borrowingLimit 24; b lends at most 4 of its 16; c lends its 8. Max for a: 8 + 12 = 20.
    k = state(cq("a", 8, bl=24), cq("b", 16, ll=4), cq("c", 8))
    res = check(k, "a", 24)
    f = finding(res, "ExceedsMaxQuota")
    assert f is not None and f.data["maximum"] == 20
    assert "borrowing 24" not in f.message
    assert "ClusterQueue b" in f.message and "lendingLimit 4" in f.message
    assert f.data["binding"] == "lendingLimit" and f.data["binding_object"] == "ClusterQueue/b"


def test_message_names_the_borrowing_limit_when_it_binds():
    k = state(cq("a", 8, bl=4), cq("b", 16), cq("c", 8))
    f = finding(check(k, "a", 13), "ExceedsMaxQuota")
    assert f is not None and f.data["maximum"] == 12
    assert "borrowingLimit 4" in f.message and f.data["binding"] == "borrowingLimit"


def test_other_members_usage_beyond_their_nominal_leaves_too_little_now():
    # b borrows 12 of c's 16: the cohort (32) has 12 unused; a (nominal 8, unused) can take 12 now... of which
    # its own 8 is part of the pool: Kueue's Available(a) = 32 - 20 = 12 < 16.
    k = state(cq("a", 8), cq("b", 8, usage=20), cq("c", 16))
    res = check(k, "a", 16)
    assert finding(res, "ExceedsMaxQuota") is None
    w = finding(res, "WaitingForQuota")
    assert w is not None and w.data["more_needed"] == 4
    assert "cohort research" in w.message


def test_hierarchical_cohort_quota_is_counted_not_guessed():
    # research (own 16 GPUs, lends at most 8 upward) under org (own 32). team a (8) in research.
    co = (Cohort("research", parent="org", resource_groups=rg(16, ll=8)), Cohort("org", resource_groups=rg(32)))
    k = state(cq("a", 8), cq("x", 0, cohort="org"), cohorts=co)
    lim = kueue_limits(k, "a", F, GPU)
    # potential(a) = local(a) 0 + potential(research) = local(research) (24-8=16) + subtree(org) (32+8+0) = 56
    assert lim.maximum == 56
    assert finding(check(k, "a", 57), "ExceedsMaxQuota") is not None
    assert finding(check(k, "a", 56), "ExceedsMaxQuota") is None


def test_cohort_cycle_is_no_proof():
    co = (Cohort("research", parent="org"), Cohort("org", parent="research"))
    k = state(cq("a", 8), cohorts=co)
    res = check(k, "a", 100)
    assert finding(res, "ExceedsMaxQuota") is None
    assert finding(res, "CohortHasCycle") is not None and finding(res, "CohortHasCycle").severity == "Waits"


def test_no_cohort_message_says_it_cannot_borrow():
    k = state(cq("solo", 8, cohort=None))
    f = finding(check(k, "solo", 9), "ExceedsMaxQuota")
    assert f is not None and f.data["maximum"] == 8 and "no cohort" in f.message


# ---------------------------------------------------------------- item 22: no borrow fix without a cohort


def _fix_summaries(k: KueueState, queue: str, gpus: int) -> list[str]:
    snap = snapshot([node("n1", gpu=8), node("n2", gpu=8)], kueue=k)
    g = gang(pod_set("w", 1, gpu=gpus), kind="Job", queue=f"lq-{queue}")
    d = evaluate(snap, g)
    assert "WaitingForQuota" in d.reasons
    return [(f.action, f.summary) for f in compute_fixes(snap, g, d)]


def test_no_borrow_fix_for_a_cluster_queue_without_cohort():
    fixes = _fix_summaries(state(cq("solo", 8, cohort=None, usage=4)), "solo", 8)
    assert fixes and not any(a == "borrow-quota" or "borrow 4" in s or "from its cohort" in s for a, s in fixes)
    assert any(a == "raise-quota" and "nominalQuota" in s and "by 4" in s for a, s in fixes)


def test_borrow_fix_kept_for_a_cluster_queue_in_a_cohort():
    fixes = _fix_summaries(state(cq("a", 8, usage=4, bl=0), cq("b", 8)), "a", 8)   # its own borrowingLimit 0 binds
    assert any(a == "borrow-quota" and "borrowingLimit" in s and "cohort research" in s for a, s in fixes)
    fixes = _fix_summaries(state(cq("a", 8, usage=4), cq("b", 8, usage=8)), "a", 8)  # the cohort has 4 unused: the pool binds
    assert any(a == "borrow-quota" and "too little unused" in s for a, s in fixes)


# ---------------------------------------------------------------- property: the tree walk against brute force

MAX_Q = 12


def _opt(draw, hi=MAX_Q):
    return draw(st.one_of(st.none(), st.integers(0, hi)))


@st.composite
def trees(draw):
    """Up to 4 Cohorts (random parents, no cycle: a parent has a smaller index) and up to 4 ClusterQueues."""
    n_co = draw(st.integers(1, 4))
    cohorts = []
    for i in range(n_co):
        parent = None if i == 0 or draw(st.booleans()) is False else f"co{draw(st.integers(0, i - 1))}"
        has_quota = draw(st.booleans())
        groups = rg(draw(st.integers(0, MAX_Q)), _opt(draw), _opt(draw)) if has_quota else ()
        if not has_quota and parent is None and draw(st.booleans()):
            continue  # an implicit cohort: named by its children only
        cohorts.append(Cohort(f"co{i}", parent=parent, resource_groups=groups))
    cqs = []
    for j in range(draw(st.integers(1, 4))):
        cohort = draw(st.one_of(st.none(), st.sampled_from([f"co{i}" for i in range(n_co)])))
        cqs.append(cq(f"q{j}", draw(st.integers(0, MAX_Q)), cohort=cohort, bl=_opt(draw), ll=_opt(draw)))
    # implicit cohorts named as parents but never defined are roots with no quota
    return cohorts, cqs


class _Brute:
    """Kueue's quota semantics written out directly: a node's subtree quota is its nominal plus what
    each child lends (min(child subtree, child lendingLimit)); usage is bubbled up by simulation;
    an amount fits when every node on the path keeps usage ≤ subtree + borrowingLimit and the root
    keeps usage ≤ subtree."""

    def __init__(self, cohorts, cqs):
        self.parent, self.nominal, self.bl, self.ll = {}, {}, {}, {}
        names = {c.name for c in cohorts} | {q.cohort for q in cqs if q.cohort} | {c.parent for c in cohorts if c.parent}
        for n in names:
            self.parent[("co", n)] = None
            self.nominal[("co", n)] = 0
            self.bl[("co", n)] = self.ll[("co", n)] = None
        for c in cohorts:
            key = ("co", c.name)
            self.parent[key] = ("co", c.parent) if c.parent else None
            if c.resource_groups:
                q = c.resource_groups[0].flavors[0].resources[GPU]
                self.nominal[key], self.bl[key], self.ll[key] = q.nominal, q.borrowing_limit, q.lending_limit
        for c in cqs:
            key = ("cq", c.name)
            self.parent[key] = ("co", c.cohort) if c.cohort else None
            q = c.resource_groups[0].flavors[0].resources[GPU]
            self.nominal[key], self.bl[key], self.ll[key] = q.nominal, q.borrowing_limit, q.lending_limit
        self.children = {k: [c for c, p in self.parent.items() if p == k] for k in self.parent}

    def subtree(self, k):
        total = self.nominal[k]
        for c in self.children[k]:
            s = self.subtree(c)
            total += s if self.ll[c] is None else min(s, self.ll[c])
        return total

    def local(self, k):
        return 0 if self.ll[k] is None else max(0, self.subtree(k) - self.ll[k])

    def add(self, usage, k, v):
        """Bubble ``v`` up from ``k`` into a copy of ``usage`` (per node), as Kueue's addUsage does."""
        usage = dict(usage)
        while k is not None and v > 0:
            free_local = max(0, self.local(k) - usage.get(k, 0))
            usage[k] = usage.get(k, 0) + v
            v = v - free_local
            k = self.parent[k]
        return usage

    def ok(self, usage, k):
        while k is not None:
            p = self.parent[k]
            if p is None:
                if usage.get(k, 0) > self.subtree(k):
                    return False
            elif self.bl[k] is not None and usage.get(k, 0) > self.subtree(k) + self.bl[k]:
                return False
            k = p
        return True

    def largest(self, usage, k, hi=200):
        best = 0
        for x in range(hi + 1):
            if self.ok(self.add(usage, k, x), k):
                best = x
        return best


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.lists(st.tuples(st.integers(0, 3), st.integers(1, 10)), max_size=6), st.data())
def test_tree_walk_matches_brute_force(tree, admissions, data):
    cohorts, cqs = tree
    brute = _Brute(cohorts, cqs)
    # Admit random workloads the way Kueue would (only when they fit), so the usage is consistent.
    usage: dict = {}
    cq_usage = {c.name: 0 for c in cqs}
    for j, v in admissions:
        if j >= len(cqs):
            continue
        key = ("cq", cqs[j].name)
        after = brute.add(usage, key, v)
        if brute.ok(after, key):
            usage = after
            cq_usage[cqs[j].name] += v
    cqs = [ClusterQueue(c.name, c.resource_groups, cohort=c.cohort, usage={(F, GPU): cq_usage[c.name]}) for c in cqs]
    k = state(*cqs, cohorts=cohorts)
    target = data.draw(st.sampled_from(cqs))
    lim = kueue_limits(k, target.name, F, GPU)
    assert lim.maximum == brute.largest({}, ("cq", target.name))
    assert lim.available_now == brute.largest(usage, ("cq", target.name))
    # and the verdicts: ExceedsMaxQuota iff the request is above the brute-force maximum, WaitingForQuota iff above now
    ask = data.draw(st.integers(1, 40))
    res = check(k, target.name, ask)
    assert (finding(res, "ExceedsMaxQuota") is not None) == (ask > lim.maximum)
    assert (finding(res, "WaitingForQuota") is not None) == (lim.maximum >= ask > lim.available_now)


# ---------------------------------------------------------------- the adapter reads what the tree needs


def test_cohort_objects_v1beta1_and_v1beta2_feed_the_tree():
    from webhook.adapters.cluster import build_snapshot

    def res(name, nominal, **lim):
        out = {"name": name, "nominalQuota": str(nominal)}
        out.update({k: str(v) for k, v in lim.items()})
        return out

    def groups(nominal, **lim):
        return [{"coveredResources": [GPU], "flavors": [{"name": F, "resources": [res(GPU, nominal, **lim)]}]}]

    objs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": F}, "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "a"},
         "spec": {"cohortName": "research", "resourceGroups": groups(8, borrowingLimit=40)}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq-a", "namespace": "default"},
         "spec": {"clusterQueue": "a"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "research"},
         "spec": {"parentName": "org", "resourceGroups": groups(16, lendingLimit=4)}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "org"},
         "spec": {"resourceGroups": groups(32)}},
    ]
    k = build_snapshot(objs).kueue
    assert k.cohorts["research"].parent == "org"
    assert k.cohorts["research"].resource_groups[0].flavors[0].resources[GPU].lending_limit == 4
    # a: local 0 + research: local (24 − 4 = 20) + org subtree (32 + 4) = 56, under a's 8 + 40 = 48 → 48
    assert kueue_limits(k, "a", F, GPU).maximum == 48
    assert kueue_limits(k, "a", F, GPU).why_max.kind == "borrowingLimit"


def test_a_cohort_chain_deeper_than_the_walks_go_is_no_proof_and_no_crash():
    co = [Cohort(f"c{i}", parent=f"c{i + 1}") for i in range(1500)]
    k = state(cq("a", 8, cohort="c0"), cohorts=co)
    res = check(k, "a", 100)
    assert [f.code for f in res.findings] == ["CohortTooDeep"] and res.findings[0].severity == "Info"


def test_diagnose_quota_step_reports_a_cohort_cycle_as_blocking():
    from webhook.diagnose import diagnose

    co = (Cohort("research", parent="org"), Cohort("org", parent="research"))
    snap = snapshot([node("n1", gpu=8)], kueue=state(cq("a", 8), cohorts=co))
    rep = diagnose(snap, gang(pod_set("w", 1, gpu=4), kind="Job", queue="lq-a"), 0.0)
    step = next(s for s in rep["steps"] if s["name"] == "quota")
    assert step["status"] == "blocking" and "cycle" in step["meaning"]
