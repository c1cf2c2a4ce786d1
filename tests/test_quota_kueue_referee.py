"""Kueue rules the e2e Kueue referee (tests/e2e/test_e2e_kueue.py, the real Kueue v0.17.0) found
gangcheck's quota layer to differ on; each test failed before its fix."""

from __future__ import annotations

from builders import GPU, gang, pod_set
from webhook.engine.model import (
    ClusterQueue,
    FlavorQuotas,
    KueueState,
    LocalQueue,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from webhook.engine.quota import evaluate_kueue

TEAM = "example.com/team"
POOL = "example.com/pool"


def two_flavors(nominal_a: int, nominal_b: int) -> KueueState:
    """Flavor a has the team label, flavor b does not; one ClusterQueue lists a, then b."""
    flavors = {"a": ResourceFlavor("a", node_labels={POOL: "a", TEAM: "x"}), "b": ResourceFlavor("b", node_labels={POOL: "b"})}
    groups = (ResourceGroup((GPU,), (FlavorQuotas("a", {GPU: ResourceQuota(nominal_a)}),
                                     FlavorQuotas("b", {GPU: ResourceQuota(nominal_b)}))),)
    return KueueState(flavors=flavors, cluster_queues={"cq": ClusterQueue("cq", groups)},
                      local_queues={("default", "lq"): LocalQueue("default", "lq", "cq")})


def codes(res) -> list[str]:
    return [f.code for f in res.findings]


def test_selector_key_of_the_group_that_a_flavor_lacks_does_not_match_it():
    # kueue pkg/scheduler/flavorassigner/flavorassigner.go flavorSelector keeps the pod's
    # nodeSelector keys that any flavor of the resource group labels (ResourceGroup.LabelKeys,
    # pkg/cache/scheduler/clusterqueue.go updateLabelKeys) and matches them against the flavor's
    # nodeLabels as a node's labels: flavor b has no team label, so team=x never matches it.
    # Kueue admits this pod set in a (8 GPUs), never in b.
    k = two_flavors(8, 64)
    res = evaluate_kueue(gang(pod_set("w", 2, gpu=8, selector={TEAM: "x"}), queue="lq"), k)
    assert "ExceedsMaxQuota" in codes(res), res.findings  # 16 > a's 8; b is not a candidate
    assert [f.name for f in res.candidate_flavors["w"]] == ["a"]


def test_selector_value_no_flavor_has_matches_nothing():
    k = two_flavors(8, 64)
    res = evaluate_kueue(gang(pod_set("w", 1, gpu=1, selector={TEAM: "y"}), queue="lq"), k)
    assert "NoMatchingFlavor" in codes(res), res.findings


def test_selector_key_no_flavor_labels_is_ignored():
    k = two_flavors(8, 64)
    res = evaluate_kueue(gang(pod_set("w", 2, gpu=8, selector={"example.com/other": "z"}), queue="lq"), k)
    assert codes(res) == [], res.findings  # b holds it: 16 <= 64


def test_required_affinity_on_a_group_label_key_narrows_flavors():
    # The same rule for required node affinity: expressions on keys outside LabelKeys are
    # dropped, a term left empty matches every flavor.
    k = two_flavors(8, 64)
    term = NodeSelectorTerm((NodeSelectorRequirement(TEAM, "In", ("x",)),))
    res = evaluate_kueue(gang(pod_set("w", 2, gpu=8, required_affinity=(term,)), queue="lq"), k)
    assert "ExceedsMaxQuota" in codes(res), res.findings
    other = NodeSelectorTerm((NodeSelectorRequirement("example.com/other", "In", ("z",)),))
    res = evaluate_kueue(gang(pod_set("w", 2, gpu=8, required_affinity=(other,)), queue="lq"), k)
    assert codes(res) == [], res.findings


def two_groups(cpu_cores: int, gpus: int) -> KueueState:
    """One ClusterQueue with two resource groups: cpu in flavor c, GPUs in flavor g (a flavor
    belongs to one group of a ClusterQueue)."""
    flavors = {"c": ResourceFlavor("c", node_labels={POOL: "c"}), "g": ResourceFlavor("g", node_labels={POOL: "g"})}
    groups = (ResourceGroup(("cpu",), (FlavorQuotas("c", {"cpu": ResourceQuota(cpu_cores * 1000)}),)),
              ResourceGroup((GPU,), (FlavorQuotas("g", {GPU: ResourceQuota(gpus)}),)))
    return KueueState(flavors=flavors, cluster_queues={"cq": ClusterQueue("cq", groups)},
                      local_queues={("default", "lq"): LocalQueue("default", "lq", "cq")})


def test_each_resource_group_gets_its_own_flavor():
    # kueue flavorassigner.go assignFlavors / findFlavorForPodSets: a flavor per resource
    # group (RGByResource), so cpu comes from c and GPUs from g. Before: the flavors of both
    # groups were intersected (none in common) and the pod set matched no flavor.
    res = evaluate_kueue(gang(pod_set("w", 2, gpu=2, cpu=1), queue="lq"), two_groups(8, 8))
    assert codes(res) == [], res.findings
    assert res.report["flavors"] == {"w": "g"}
    assert sorted(f.name for f in res.candidate_flavors["w"]) == ["c", "g"]


def test_each_resource_group_has_its_own_maximum():
    res = evaluate_kueue(gang(pod_set("w", 2, gpu=8, cpu=1), queue="lq"), two_groups(8, 8))
    f = next(f for f in res.findings if f.code == "ExceedsMaxQuota")
    assert f.data["flavor"] == "g" and f.data["resource"] == GPU and f.data["maximum"] == 8
    res = evaluate_kueue(gang(pod_set("w", 2, gpu=1, cpu=5), queue="lq"), two_groups(8, 8))
    f = next(f for f in res.findings if f.code == "ExceedsMaxQuota")
    assert f.data["flavor"] == "c" and f.data["resource"] == "cpu"
