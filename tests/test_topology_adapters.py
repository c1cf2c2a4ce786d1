"""Workload topology requests (webhook.adapters.topology): every field each system reads, and every
error — what the upstream webhook refuses is an InvalidTopologyRequest finding naming the field,
bad input an AdapterError naming the field, never a traceback.

Small fixtures of our own (upstream examples: tests/test_upstream_topology.py).
"""

from __future__ import annotations

import copy
import json

import pytest

from webhook.adapters import AdapterError, adapt
from webhook.adapters.topology import label_name_error
from webhook.engine.model import Toleration, TopologyRequest

QUEUE = {"kueue.x-k8s.io/queue-name": "team"}
RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
K = "kueue.x-k8s.io/"


def _template(annotations=None, scheduler=None, gpu=8):
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": str(gpu)}}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    t = {"spec": spec}
    if annotations is not None:
        t["metadata"] = {"annotations": annotations}
    return t


def job(annotations=None, labels=QUEUE, parallelism=4, top=None, scheduler=None):
    meta = {"name": "j", "namespace": "ml", "labels": dict(labels or {})}
    if top:
        meta["annotations"] = top
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": _template(annotations, scheduler)}}


def jobset(*rjs, labels=QUEUE, annotations=None):
    meta = {"name": "js", "namespace": "ml", "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
            "spec": {"replicatedJobs": list(rjs)}}


def rj(name, replicas=2, parallelism=4, pod_annotations=None, job_annotations=None):
    t = {"spec": {"parallelism": parallelism, "completions": parallelism, "template": _template(pod_annotations)}}
    if job_annotations is not None:
        t["metadata"] = {"annotations": job_annotations}
    return {"name": name, "replicas": replicas, "template": t}


def lws(size=4, replicas=3, annotations=None, policy=None, labels=None, worker_ann=None, leader_ann=None):
    lwt = {"size": size, "workerTemplate": _template(worker_ann)}
    if leader_ann is not None:
        lwt["leaderTemplate"] = _template(leader_ann)
    if policy is not None:
        lwt["subGroupPolicy"] = policy
    meta = {"name": "l", "namespace": "ml", "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
            "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt}}


def vcjob(network=None):
    spec = {"minAvailable": 4, "tasks": [{"name": "w", "replicas": 4, "template": _template()}]}
    if network is not None:
        spec["networkTopology"] = network
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v", "namespace": "ml"}, "spec": spec}


def codes(gang):
    return [(f.code, f.severity) for f in gang.findings]


def invalid(gang):
    return [f for f in gang.findings if f.code == "InvalidTopologyRequest"]


# ---------------------------------------------------------------- label keys


@pytest.mark.parametrize("key", ["kubernetes.io/hostname", RACK, "rack", "cloud.google.com/gke-nodepool", "a.b/c_d-e.f"])
def test_label_keys_kueue_accepts(key):
    assert label_name_error(key) is None


@pytest.mark.parametrize("key", ["", "/rack", "Rack.Example/x", "rack!", "-rack", "a/" + "x" * 64, "x" * 254 + "/r", "a/b/c"])
def test_label_keys_kueue_refuses(key):
    assert label_name_error(key).startswith("must be a label key")


# ---------------------------------------------------------------- Kueue


@pytest.mark.parametrize("key,mode,level", [
    ("podset-required-topology", "required", RACK),
    ("podset-preferred-topology", "preferred", RACK),
    ("podset-unconstrained-topology", "unconstrained", None),
])
def test_kueue_modes(key, mode, level):
    g = adapt(job({K + key: RACK if level else "true"}))
    (ps,) = g.pod_sets
    assert ps.topology == TopologyRequest(source="kueue", mode=mode, level=level,
                                          field=f"spec.template.metadata.annotations[{K}{key}]")
    assert g.findings == ()
    assert g.all_or_nothing  # Kueue TAS places every pod at once


def test_kueue_required_with_slices_and_only_slices():
    g = adapt(job({K + "podset-required-topology": BLOCK, K + "podset-slice-required-topology": RACK,
                   K + "podset-slice-size": "2"}))
    t = g.pod_sets[0].topology
    assert (t.mode, t.level, t.slice_level, t.slice_size) == ("required", BLOCK, RACK, 2)
    g = adapt(job({K + "podset-slice-required-topology": RACK, K + "podset-slice-size": "4"}))
    t = g.pod_sets[0].topology
    assert (t.mode, t.level, t.slice_level, t.slice_size) == ("unconstrained", None, RACK, 4)
    assert g.all_or_nothing


def test_kueue_multi_layer_slices_read_their_first_layer():
    layers = json.dumps([{"topology": BLOCK, "size": 4}, {"topology": RACK, "size": 2}])
    g = adapt(job({K + "podset-required-topology": "topology.example.com/zone",
                   K + "podset-slice-required-topology-constraints": layers}))
    t = g.pod_sets[0].topology
    assert (t.level, t.slice_level, t.slice_size) == ("topology.example.com/zone", BLOCK, 4)
    assert g.findings == ()


@pytest.mark.parametrize("ann,field_key,words", [
    ({"podset-required-topology": RACK, "podset-preferred-topology": RACK}, "podset-required-topology", "more than one"),
    ({"podset-preferred-topology": RACK, "podset-unconstrained-topology": "true"}, "podset-preferred-topology", "more than one"),
    ({"podset-required-topology": "Rack!"}, "podset-required-topology", "must be a label key"),
    ({"podset-preferred-topology": ""}, "podset-preferred-topology", "must be a label key"),
    ({"podset-unconstrained-topology": "yes"}, "podset-unconstrained-topology", "must be a boolean value"),
    ({"podset-slice-required-topology": RACK}, "podset-slice-size", "must be set when"),
    ({"podset-required-topology": BLOCK, "podset-slice-size": "2"}, "podset-slice-size", "may not be set when"),
    ({"podset-slice-required-topology": RACK, "podset-slice-size": "four"}, "podset-slice-size", "numeric"),
    ({"podset-slice-required-topology": RACK, "podset-slice-size": "0"}, "podset-slice-size", "greater than or equal to 1"),
    ({"podset-slice-required-topology": RACK, "podset-slice-size": "99999999999"}, "podset-slice-size", "numeric"),
    ({"podset-slice-required-topology": RACK, "podset-slice-size": "5"}, "podset-slice-size", "count 4"),
    ({"podset-required-topology": RACK, "podset-group-name": "42"}, "podset-group-name", "must not be a number"),
    ({"podset-group-name": "g"}, "podset-group-name", "neither"),
    ({"podset-required-topology": BLOCK, "podset-slice-required-topology": RACK, "podset-slice-size": "2",
      "podset-group-name": "g"}, "podset-group-name", "may not be set when"),
    ({"podset-slice-required-topology-constraints": "not json"}, "podset-slice-required-topology-constraints", "valid JSON"),
    ({"podset-slice-required-topology-constraints": "[]"}, "podset-slice-required-topology-constraints", "between 1 and 3"),
    ({"podset-slice-required-topology-constraints": json.dumps([{"topology": RACK, "size": 1}] * 4)},
     "podset-slice-required-topology-constraints", "between 1 and 3"),
    ({"podset-slice-required-topology-constraints": json.dumps([{"topology": BLOCK, "size": 4}, {"topology": RACK, "size": 3}])},
     "podset-slice-required-topology-constraints", "evenly divide"),
    ({"podset-slice-required-topology-constraints": json.dumps([{"topology": RACK, "size": 2}, {"topology": RACK, "size": 1}])},
     "podset-slice-required-topology-constraints", "duplicated"),
    ({"podset-slice-required-topology-constraints": json.dumps([{"topology": RACK, "size": "2"}])},
     "podset-slice-required-topology-constraints", "size"),
    ({"podset-slice-required-topology-constraints": json.dumps([{"topology": RACK, "size": 8}])},
     "podset-slice-required-topology-constraints", "count 4"),
    ({"podset-slice-required-topology-constraints": json.dumps([{"topology": RACK, "size": 2}]),
      "podset-slice-required-topology": RACK, "podset-slice-size": "2"},
     "podset-slice-required-topology-constraints", "may not be set when"),
])
def test_kueue_refuses_with_a_finding_naming_the_annotation(ann, field_key, words):
    g = adapt(job({K + k: v for k, v in ann.items()}))
    found = invalid(g)
    assert found and all(f.severity == "NeverFits" for f in found)
    assert any(f.data["field"] == f"spec.template.metadata.annotations[{K}{field_key}]" and words in f.message for f in found), \
        [f.message for f in found]
    assert found[0].data["source"] == "kueue" and "Kueue's webhook refuses" in found[0].message
    assert g.pod_sets[0].topology is None  # nothing half-read is modelled


def test_kueue_without_a_queue_label_is_not_enforced_and_never_a_denial():
    g = adapt(job({K + "podset-required-topology": RACK}, labels={}))
    assert g.pod_sets[0].topology is None
    assert codes(g) == [("TopologyNotEnforced", "Info")]
    assert g.findings[0].data["fields"] == [f"spec.template.metadata.annotations[{K}podset-required-topology]"]
    g = adapt(job({K + "podset-required-topology": RACK, K + "podset-preferred-topology": RACK}, labels={}))
    assert codes(g) == [("TopologyNotEnforced", "Info")]


@pytest.mark.parametrize("value", [4, True, ["rack"], {"a": 1}])
def test_kueue_annotation_that_is_not_a_string_is_an_adapter_error(value):
    with pytest.raises(AdapterError) as err:
        adapt(job({K + "podset-slice-size": value, K + "podset-slice-required-topology": RACK}), source="j.yaml")
    assert f"spec.template.metadata.annotations[{K}podset-slice-size]: expected a string" in str(err.value)
    assert str(err.value).startswith("j.yaml: Job ml/j: ")


def test_kueue_group_of_two_pod_sets_one_with_one_pod_is_valid():
    ann = {K + "podset-required-topology": RACK, K + "podset-group-name": "g"}
    g = adapt(jobset(rj("leader", 1, 1, ann), rj("workers", 1, 4, ann)))
    assert [(p.name, p.count, p.topology.group) for p in g.pod_sets] == [("leader", 1, "g"), ("workers", 4, "g")]
    assert invalid(g) == []


@pytest.mark.parametrize("sets,words", [
    ([("a", 1, 1, RACK)], "has 1 pod set(s) (a)"),
    ([("a", 1, 1, RACK), ("b", 1, 1, RACK), ("c", 1, 1, RACK)], "has 3 pod set(s)"),
    ([("a", 2, 2, RACK), ("b", 1, 4, RACK)], "must have 1 pod, got 4 (a) and 4 (b)"),
    ([("a", 1, 1, RACK), ("b", 1, 4, BLOCK)], "same required or preferred level"),
])
def test_kueue_group_kueue_refuses(sets, words):
    rjs = [rj(n, r, p, {K + "podset-required-topology": lvl, K + "podset-group-name": "g"}) for n, r, p, lvl in sets]
    g = adapt(jobset(*rjs))
    (f,) = invalid(g)
    assert words in f.message and f.severity == "NeverFits"
    assert f.data["field"] == f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{K}podset-group-name]"


def test_kueue_group_on_a_job_is_not_a_group_check():
    # Kueue's Job webhook does not call ValidatePodSetGroupingTopology: one pod set with a group is fine
    g = adapt(job({K + "podset-required-topology": RACK, K + "podset-group-name": "g"}))
    assert g.pod_sets[0].topology.group == "g" and invalid(g) == []


def test_kueue_on_lws_templates_and_pods():
    ann = {K + "podset-preferred-topology": RACK}
    g = adapt(lws(size=3, replicas=2, labels=QUEUE, worker_ann=ann, leader_ann=ann))
    assert [(p.name, p.topology.mode, p.topology.level) for p in g.pod_sets] == [("leader", "preferred", RACK),
                                                                                ("worker", "preferred", RACK)]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ml", "labels": {**QUEUE, "kueue.x-k8s.io/pod-group-name": "pg"},
                        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2", K + "podset-required-topology": RACK}},
           "spec": _template()["spec"]}
    g = adapt(pod)
    assert g.pod_sets[0].topology.level == RACK and g.pod_sets[0].topology.field == f"<pod>.metadata.annotations[{K}podset-required-topology]"


# ---------------------------------------------------------------- JobSet


def test_jobset_exclusive_on_the_jobset_and_a_replicated_job_wins():
    js = jobset(rj("a", 3, 2), rj("b", 2, 4, job_annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": BLOCK}),
                labels={}, annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": RACK})
    g = adapt(js)
    a, b = (p.topology for p in g.pod_sets)
    assert a == TopologyRequest(source="jobset", mode="required", level=RACK, exclusive=True, unit_size=2,
                                field="metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]")
    assert b == TopologyRequest(source="jobset", mode="required", level=BLOCK, exclusive=True, unit_size=4,
                                field="spec.replicatedJobs[1].template.metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]")
    assert g.findings == ()
    assert all(Toleration("alpha.jobset.sigs.k8s.io/no-schedule", "Exists", "", "NoSchedule") not in p.tolerations
               for p in g.pod_sets)


def test_jobset_node_selector_strategy_tolerates_the_no_schedule_taint():
    g = adapt(jobset(rj("a"), labels={}, annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": RACK,
                                                      "alpha.jobset.sigs.k8s.io/node-selector": "true"}))
    (ps,) = g.pod_sets
    assert ps.topology.exclusive and ps.topology.level == RACK
    assert Toleration("alpha.jobset.sigs.k8s.io/no-schedule", "Exists", "", "NoSchedule") in ps.tolerations


@pytest.mark.parametrize("key", ["", "Rack!"])
def test_jobset_exclusive_key_the_api_server_refuses_for_the_pods(key):
    g = adapt(jobset(rj("a"), labels={}, annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": key}))
    (f,) = invalid(g)
    assert f.severity == "NeverFits" and f.data["field"] == "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]"
    assert "topologyKey" in f.message and g.pod_sets[0].topology is None


def test_jobset_exclusive_and_kueue_tas_keep_kueue_and_say_so():
    g = adapt(jobset(rj("a", pod_annotations={K + "podset-required-topology": BLOCK}),
                     annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": RACK}))
    assert g.pod_sets[0].topology.source == "kueue"
    assert codes(g) == [("TopologyNotEnforced", "Info")] and g.findings[0].data["source"] == "jobset"


def test_jobset_exclusive_not_a_string():
    with pytest.raises(AdapterError, match=r"metadata.annotations\[alpha.jobset.sigs.k8s.io/exclusive-topology\]: expected a string"):
        adapt(jobset(rj("a"), annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": 7}))


# ---------------------------------------------------------------- LeaderWorkerSet


def test_lws_exclusive_per_group_on_both_pod_sets():
    g = adapt(lws(annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": RACK}))
    assert {(p.topology.level, p.topology.unit_size, p.topology.exclusive) for p in g.pod_sets} == {(RACK, 4, True)}


def test_lws_empty_exclusive_value_is_no_request():
    g = adapt(lws(annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": ""}))
    assert all(p.topology is None for p in g.pod_sets) and invalid(g) == []


@pytest.mark.parametrize("ptype,size,sub,leader,worker", [
    ("LeaderWorker", 4, 2, 2, 2),      # (0 1) (2 3): the leader in the first subgroup
    (None, 8, 4, 4, 4),                # the default type is LeaderWorker
    ("LeaderExcluded", 5, 2, None, 2),  # the leader in no subgroup
])
def test_lws_subgroup_exclusive(ptype, size, sub, leader, worker):
    policy = {"subGroupSize": sub, **({"subGroupPolicyType": ptype} if ptype else {})}
    g = adapt(lws(size=size, policy=policy, annotations={"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": RACK}))
    got = {p.name: (p.topology.unit_size if p.topology else None) for p in g.pod_sets}
    assert got == {"leader": leader, "worker": worker}
    assert invalid(g) == []


def test_lws_uneven_subgroups_are_not_enforced():
    g = adapt(lws(size=5, policy={"subGroupSize": 2}, annotations={"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": RACK}))
    assert all(p.topology is None for p in g.pod_sets)
    assert ("TopologyNotEnforced", "Info") in codes(g)


def test_lws_group_and_subgroup_exclusive_keep_the_group():
    g = adapt(lws(size=4, policy={"subGroupSize": 2}, annotations={
        "leaderworkerset.sigs.k8s.io/exclusive-topology": BLOCK, "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": RACK}))
    assert {(p.topology.level, p.topology.unit_size) for p in g.pod_sets} == {(BLOCK, 4)}
    assert codes(g).count(("TopologyNotEnforced", "Info")) == 2  # one per pod set the subgroup request is not checked on


def test_lws_subgroup_exclusive_without_a_policy_is_refused():
    g = adapt(lws(annotations={"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": RACK}))
    (f,) = invalid(g)
    assert f.data["field"] == "metadata.annotations[leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology]"
    assert "subGroupSize" in f.message and f.severity == "NeverFits"


def test_lws_bad_exclusive_key_is_refused():
    g = adapt(lws(annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": "/rack"}))
    (f,) = invalid(g)
    assert "topologyKey" in f.message


@pytest.mark.parametrize("policy,field,words", [
    ({"subGroupSize": 9}, "subGroupSize", "from 1 to the group size 4"),
    ({"subGroupSize": 0}, "subGroupSize", "from 1 to the group size 4"),
    ({"subGroupSize": "two"}, "subGroupSize", "expected an integer"),
    ({}, "subGroupSize", "missing"),
    ({"subGroupSize": 2, "subGroupPolicyType": "Both"}, "subGroupPolicyType", "LeaderWorker or LeaderExcluded"),
    ("x", "", "expected a mapping"),
])
def test_lws_subgroup_policy_errors_name_the_field(policy, field, words):
    with pytest.raises(AdapterError) as err:
        adapt(lws(policy=policy))
    where = "spec.leaderWorkerTemplate.subGroupPolicy" + (f".{field}" if field else "")
    assert f"{where}: " in str(err.value) and words in str(err.value)


# ---------------------------------------------------------------- Volcano


@pytest.mark.parametrize("network,mode,tier,name", [
    ({"mode": "hard", "highestTierAllowed": 2}, "required", 2, None),
    ({"highestTierAllowed": 1}, "required", 1, None),          # mode defaults to hard
    ({"mode": "soft"}, "preferred", None, None),
    ({"mode": "hard", "highestTierName": "spine"}, "required", None, "spine"),
])
def test_volcano_network_topology(network, mode, tier, name):
    g = adapt(vcjob(network))
    (ps,) = g.pod_sets
    assert ps.topology == TopologyRequest(source="volcano", mode=mode, highest_tier=tier, highest_tier_name=name,
                                          field="spec.networkTopology")


def test_volcano_both_tier_limits_are_refused():
    g = adapt(vcjob({"mode": "hard", "highestTierAllowed": 2, "highestTierName": "spine"}))
    (f,) = invalid(g)
    assert f.data["field"] == "spec.networkTopology" and "simultaneously" in f.message and f.severity == "NeverFits"
    assert g.pod_sets[0].topology is None


@pytest.mark.parametrize("network,field", [
    ({"mode": "strict"}, "spec.networkTopology.mode"),
    ({"highestTierAllowed": "2"}, "spec.networkTopology.highestTierAllowed"),
    ({"highestTierAllowed": -1}, "spec.networkTopology.highestTierAllowed"),
    ({"highestTierAllowed": True}, "spec.networkTopology.highestTierAllowed"),
    ({"highestTierName": 3}, "spec.networkTopology.highestTierName"),
    ("hard", "spec.networkTopology"),
])
def test_volcano_network_topology_errors_name_the_field(network, field):
    with pytest.raises(AdapterError) as err:
        adapt(vcjob(network), source="v.yaml")
    assert f"v.yaml: Job ml/v: {field}: expected" in str(err.value)


def test_volcano_podgroup_network_topology():
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ml"},
          "spec": {"minMember": 4, "minResources": {"nvidia.com/gpu": "32"}, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}
    (ps,) = adapt(pg).pod_sets
    assert (ps.topology.source, ps.topology.mode, ps.topology.highest_tier) == ("volcano", "required", 1)


# ---------------------------------------------------------------- KAI


def test_kai_required_wins_over_preferred_and_names_the_topology():
    top = {"kai.scheduler/topology": "cluster-topology", "kai.scheduler/topology-required-placement": BLOCK,
           "kai.scheduler/topology-preferred-placement": RACK}
    g = adapt(job(labels={}, top=top, scheduler="kai-scheduler"))
    assert g.pod_sets[0].topology == TopologyRequest(source="kai", mode="required", level=BLOCK, topology_name="cluster-topology",
                                                     field="metadata.annotations[kai.scheduler/topology-required-placement]")
    g = adapt(job(labels={}, top={"kai.scheduler/topology-preferred-placement": RACK}, scheduler="kai-scheduler"))
    assert (g.pod_sets[0].topology.mode, g.pod_sets[0].topology.topology_name) == ("preferred", None)


def test_kai_annotations_on_pods_kai_does_not_schedule():
    g = adapt(job(labels={}, top={"kai.scheduler/topology-required-placement": RACK}))
    assert g.pod_sets[0].topology is None
    assert codes(g) == [("TopologyNotEnforced", "Info")] and "kai-scheduler" in g.findings[0].message


# ---------------------------------------------------------------- end to end


def test_an_invalid_request_is_a_denial_that_names_the_annotation():
    from webhook.engine.evaluate import evaluate
    from tests.builders import node, snapshot
    snap = snapshot([node(f"n{i}", gpu=8, labels={RACK: f"r{i // 2}"}) for i in range(8)])
    d = evaluate(snap, adapt(job({K + "podset-required-topology": RACK, K + "podset-preferred-topology": RACK})))
    assert d.verdict == "NeverFits"
    assert d.reasons[0] == "InvalidTopologyRequest"
    assert "podset-required-topology" in d.message


def test_adapting_does_not_change_the_object():
    obj = jobset(rj("a", pod_annotations={K + "podset-required-topology": RACK}),
                 annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": RACK, "alpha.jobset.sigs.k8s.io/node-selector": ""})
    before = copy.deepcopy(obj)
    adapt(obj)
    assert obj == before


def test_required_topology_is_not_one_domain_for_several_exclusive_child_jobs():
    # JobSet: 3 child Jobs of 2 pods, each in a rack of its own — not all 6 pods in one rack
    g = adapt(jobset(rj("a", 3, 2), labels={}, annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": RACK}))
    assert g.pod_sets[0].required_topology is None and g.pod_sets[0].topology.level == RACK
    # one child Job: its pods do share one rack
    g = adapt(jobset(rj("a", 1, 2), labels={}, annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": RACK}))
    assert g.pod_sets[0].required_topology == RACK
    # an LWS gang is one group: every pod set of it in one domain
    g = adapt(lws(annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": RACK}))
    assert [p.required_topology for p in g.pod_sets] == [RACK, RACK]
    assert adapt(job({K + "podset-required-topology": RACK})).pod_sets[0].required_topology == RACK


def test_kueue_annotations_on_a_kind_kueue_does_not_manage():
    obj = vcjob()
    obj["metadata"]["labels"] = dict(QUEUE)
    obj["spec"]["tasks"][0]["template"]["metadata"] = {"annotations": {K + "podset-required-topology": RACK}}
    g = adapt(obj)
    assert g.pod_sets[0].topology is None
    assert codes(g) == [("TopologyNotEnforced", "Info")] and "Kueue does not manage Volcano Jobs" in g.findings[0].message
    # and its own network topology still applies
    obj["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    g = adapt(obj)
    assert g.pod_sets[0].topology.source == "volcano" and codes(g) == [("TopologyNotEnforced", "Info")]
    # a Kueue annotation Kueue would refuse, on a kind it does not manage: never a denial
    obj["spec"]["tasks"][0]["template"]["metadata"]["annotations"][K + "podset-preferred-topology"] = RACK
    g = adapt(obj)
    assert all(sev == "Info" for _, sev in codes(g)) and g.pod_sets[0].topology.source == "volcano"


def test_slice_size_against_a_pod_set_of_no_pods_proves_nothing():
    g = adapt(job({K + "podset-slice-required-topology": RACK, K + "podset-slice-size": "5"}, parallelism=0))
    assert invalid(g) == [] and g.pod_sets[0].topology.slice_size == 5
