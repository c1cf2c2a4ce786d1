"""PodDisruptionBudgets: the adapter, the disruption controller's arithmetic, and the fixes'
first cost criterion (FIELD-NOTES §7: PDB violations, then victim priority, tenants, pods…)."""

from __future__ import annotations

import pytest

from builders import gang, node, pod, pod_set, snapshot
from webhook.adapters.cluster import build_snapshot
from webhook.adapters.disruption import disruption_budget_from_k8s, label_selector
from webhook.adapters.errors import AdapterError
from webhook.engine.evaluate import evaluate
from webhook.engine.fixes import budget_members, compute_fixes, disruptions_allowed, pdb_violations
from webhook.engine.model import DisruptionBudget, LabelSelector


def pdb_obj(name="web", ns="default", *, selector=None, min_available=None, max_unavailable=None, allowed=None):
    spec = {"selector": {"matchLabels": {"app": name}} if selector is None else selector}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns}, "spec": spec}
    if allowed is not None:
        obj["status"] = {"disruptionsAllowed": allowed, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
    return obj


def test_selector_semantics():
    sel = label_selector({"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]},
        {"key": "canary", "operator": "DoesNotExist"},
        {"key": "zone", "operator": "NotIn", "values": ["z9"]},
        {"key": "team", "operator": "Exists"}]}, "spec.selector")
    ok = {"app": "web", "tier": "a", "team": "t", "zone": "z1"}
    assert sel.matches(ok)
    assert not sel.matches({**ok, "canary": "1"})
    assert not sel.matches({**ok, "tier": "c"})
    assert not sel.matches({**ok, "zone": "z9"})
    assert not sel.matches({k: v for k, v in ok.items() if k != "team"})
    assert label_selector({}, "s").matches({}) and label_selector(None, "s") is None


@pytest.mark.parametrize("spec,field", [
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}}, "spec.selector.matchExpressions[0].operator"),
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "spec.selector.matchExpressions[0].values"),
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}, "spec.selector.matchExpressions[0].values"),
    ({"selector": {"matchLabels": {"app": 3}}}, "spec.selector.matchLabels.app"),
    ({"selector": {}, "minAvailable": "half"}, "spec.minAvailable"),
    ({"selector": {}, "maxUnavailable": -1}, "spec.maxUnavailable"),
])
def test_bad_budget_names_object_and_field(spec, field):
    obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ns"}, "spec": spec}
    with pytest.raises(AdapterError) as e:
        build_snapshot([obj], source="dump.json")
    assert "PodDisruptionBudget ns/b" in str(e.value) and field in str(e.value) and "dump.json" in str(e.value)


def _web(n_running=3, n_pending=0, labels=None):
    labels = labels or {"app": "web"}
    pods = [pod(f"web-{i}", f"n{i}", cpu=1, labels=labels) for i in range(n_running)]
    pods += [pod(f"web-p{i}", "", cpu=1, labels=labels, phase="Pending") for i in range(n_pending)]
    return snapshot([node(f"n{i}") for i in range(max(n_running, 1))], pods)


@pytest.mark.parametrize("kw,expected", [
    (dict(min_available=2), 1),            # 3 healthy − 2
    (dict(min_available="50%"), 1),        # ceil(1.5) = 2 → 3 − 2
    (dict(max_unavailable=1), 1),          # desired 3 − 1 = 2 → 3 − 2
    (dict(max_unavailable="34%"), 1),      # ceil(1.02) = 2 → desired 1 → 3 − 1 = 2? see below
    (dict(), 0),                           # neither: every selected pod protected
    (dict(min_available=5), 0),            # never negative
    (dict(min_available=1, allowed=0), 0), # status wins over the spec
])
def test_disruptions_allowed(kw, expected):
    snap = _web()
    b = disruption_budget_from_k8s(pdb_obj(**kw))
    members = frozenset(("default", f"web-{i}") for i in range(3))
    got = disruptions_allowed(snap, b, members)
    if kw == dict(max_unavailable="34%"):
        expected = 2  # maxUnavailable ceil(34% of 3) = 2 → desired healthy 1 → 3 − 1
    assert got == expected


def test_pending_selected_pods_count_as_expected_not_healthy():
    snap = _web(n_running=3, n_pending=1)
    b = DisruptionBudget("default", "web", LabelSelector((("app", "web"),)), max_unavailable=1)
    (members,) = budget_members(snapshot(snap.nodes, snap.pods, disruption_budgets=[b]))
    assert len(members) == 4
    assert disruptions_allowed(snap, b, members) == 0  # expected 4, desired 3, healthy 3


def test_violations_count_budgets_exceeded_by_the_whole_eviction():
    base = _web()
    b1 = DisruptionBudget("default", "web", LabelSelector((("app", "web"),)), disruptions_allowed=1)
    b2 = DisruptionBudget("default", "all", LabelSelector(), disruptions_allowed=5)
    b3 = DisruptionBudget("other", "web", LabelSelector((("app", "web"),)), disruptions_allowed=0)  # other namespace
    b4 = DisruptionBudget("default", "none", None, disruptions_allowed=0)  # null selector: selects nothing
    snap = snapshot(base.nodes, base.pods, disruption_budgets=[b1, b2, b3, b4])
    web = list(snap.pods)
    assert pdb_violations(snap, web[:1]) == 0
    assert pdb_violations(snap, web[:2]) == 1  # b1 allows 1
    assert pdb_violations(snap, []) == 0
    assert pdb_violations(snapshot(base.nodes, base.pods), web) == 0  # no budgets


def test_consolidation_avoids_the_node_a_budget_protects():
    # Two 8-GPU nodes, each with one 1-GPU pod; the gang needs one whole node. Evicting either
    # pod costs the same pods/GPUs; the one on n0 is protected by a PDB with no disruptions left.
    nodes = [node("n0"), node("n1")]
    pods = [pod("db-0", "n0", gpu=1, labels={"app": "db"}, start_time=0.0),
            pod("batch-0", "n1", gpu=1, labels={"app": "batch"}, start_time=0.0)]
    budget = DisruptionBudget("default", "db", LabelSelector((("app", "db"),)), disruptions_allowed=0)
    g = gang(pod_set("worker", 1, gpu=8))
    for budgets, victim in (([budget], "batch-0"), ([], None)):
        snap = snapshot(nodes, pods, disruption_budgets=budgets)
        fx = compute_fixes(snap, g, evaluate(snap, g), 3600.0)
        disp = [f for f in fx if f.displaced_pods]
        assert disp, [f.action for f in fx]
        best = disp[0]
        assert best.pdb_violations == 0
        if victim:
            assert [v.name for v in best.victims] == [victim]
            # evicting the protected pod shows up as a violation when it is the only way
            only = snapshot([nodes[0]], [pods[0]], disruption_budgets=budgets)
            fx2 = compute_fixes(only, g, evaluate(only, g), 3600.0)
            assert [f.pdb_violations for f in fx2 if f.displaced_pods][0] == 1


def test_dump_reads_budgets_and_pod_labels():
    objs = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"},
         "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}, "capacity": {"cpu": "8", "memory": "8Gi", "pods": "10"},
                    "conditions": [{"type": "Ready", "status": "True"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
         "spec": {"nodeName": "n0", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Running"}},
        pdb_obj(min_available="100%"),
    ]
    snap = build_snapshot(objs)
    assert dict(snap.pods[0].labels) == {"app": "web"}
    (b,) = snap.disruption_budgets
    assert (b.name, b.min_available, b.disruptions_allowed) == ("web", "100%", None)
    assert pdb_violations(snap, snap.pods) == 1
