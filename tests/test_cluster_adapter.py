"""Cluster objects → ClusterSnapshot (webhook.adapters.cluster)."""

from __future__ import annotations

import pytest

from webhook.adapters.cluster import (
    TERMINAL_PODS_KEY,
    build_snapshot,
    cluster_queue_from_k8s,
    cohort_from_k8s,
    local_queue_from_k8s,
    node_from_k8s,
    parse_time,
    pod_from_k8s,
    pod_group_from_k8s,
    resource_flavor_from_k8s,
    volcano_queue_from_k8s,
)
from webhook.adapters.errors import AdapterError
from webhook.engine.model import HostPort, ResourceQuota, Taint, Toleration

GI = 2**30
MI = 2**20


def k8s_node(name="n1", *, ready="True", gpu_cap="8", gpu_alloc="8", taints=None, unschedulable=None, **extra):
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "kubernetes.io/hostname": name},
                     "annotations": {"note": "x"}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "208", "memory": "2048Gi", "pods": "110", "nvidia.com/gpu": gpu_cap},
            "allocatable": {"cpu": "191500m", "memory": "2000Gi", "pods": "110", "nvidia.com/gpu": gpu_alloc},
            "conditions": [{"type": "MemoryPressure", "status": "False"}] + ([{"type": "Ready", "status": ready}] if ready else []),
        },
    }
    if taints is not None:
        obj["spec"]["taints"] = taints
    if unschedulable is not None:
        obj["spec"]["unschedulable"] = unschedulable
    obj.update(extra)
    return obj


def k8s_pod(name="p1", ns="ns1", *, node="n1", phase="Running", gpu="4", **spec_extra):
    spec = {"nodeName": node, "containers": [{"name": "main", "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": gpu}}}]}
    spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec,
            "status": {"phase": phase, "startTime": "2025-06-01T10:00:00Z"}}


# ---------------------------------------------------------------- Node


def test_node_fields():
    n = node_from_k8s(k8s_node(taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, {"key": "dedicated", "value": "llm", "effect": "NoExecute"}]))
    assert n.name == "n1"
    assert n.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert n.annotations == {"note": "x"}
    assert n.taints == (Taint("nvidia.com/gpu", "", "NoSchedule"), Taint("dedicated", "llm", "NoExecute"))
    assert n.unschedulable is False and n.ready is True
    assert dict(n.capacity) == {"cpu": 208000, "memory": 2048 * GI, "pods": 110, "nvidia.com/gpu": 8}
    assert dict(n.allocatable) == {"cpu": 191500, "memory": 2000 * GI, "pods": 110, "nvidia.com/gpu": 8}


@pytest.mark.parametrize("status,expected", [("True", True), ("False", False), ("Unknown", None), (None, None)])
def test_node_ready_condition(status, expected):
    assert node_from_k8s(k8s_node(ready=status)).ready is expected


def test_node_cordoned_and_device_plugin_down():
    n = node_from_k8s(k8s_node(unschedulable=True, gpu_alloc="0", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]))
    assert n.unschedulable is True
    assert n.capacity["nvidia.com/gpu"] == 8 and n.allocatable["nvidia.com/gpu"] == 0
    assert n.taints == (Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"),)


def test_node_allocatable_defaults_to_capacity():
    obj = k8s_node()
    del obj["status"]["allocatable"]
    n = node_from_k8s(obj)
    assert dict(n.allocatable) == dict(n.capacity)


def test_node_without_name_is_an_error():
    obj = k8s_node()
    del obj["metadata"]["name"]
    with pytest.raises(AdapterError) as e:
        node_from_k8s(obj)
    assert e.value.field == "metadata.name"
    assert "Node" in str(e.value) and "metadata.name" in str(e.value)


def test_node_bad_quantity_names_field():
    obj = k8s_node(gpu_alloc="lots")
    with pytest.raises(AdapterError) as e:
        node_from_k8s(obj)
    assert e.value.obj == "Node n1"
    assert e.value.field == "status.allocatable.nvidia.com/gpu"
    assert "'lots'" in str(e.value)


def test_node_bad_taint_effect():
    with pytest.raises(AdapterError) as e:
        node_from_k8s(k8s_node(taints=[{"key": "a", "effect": "Sometimes"}]))
    assert e.value.field == "spec.taints[0].effect"


# ---------------------------------------------------------------- Pod


def test_pod_fields():
    obj = k8s_pod(priority=500, activeDeadlineSeconds=7200)
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "llm-queue"}
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "controller": True}]
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 9000}]
    p = pod_from_k8s(obj)
    assert (p.namespace, p.name, p.node_name, p.phase) == ("ns1", "p1", "n1", "Running")
    assert dict(p.requests) == {"cpu": 8000, "memory": 64 * GI, "nvidia.com/gpu": 4}
    assert p.priority == 500
    assert p.gang == "Job/ns1/train" and (p.owner_kind, p.owner_name) == ("Job", "train")
    assert p.queue == "llm-queue"
    assert p.start_time == 1748772000.0  # 2025-06-01T10:00:00Z
    assert p.deadline_s == 7200.0
    assert p.host_ports == (HostPort(9000, "TCP", ""),)


def test_pod_sidecar_init_and_overhead():
    # FIELD-NOTES §1 example: trainer + sidecar + init + overhead → {91.25 cpu, 902.1Gi, 8 gpu}
    obj = k8s_pod()
    obj["spec"]["containers"] = [{"name": "trainer", "resources": {"requests": {"cpu": "90", "memory": "900Gi"}, "limits": {"nvidia.com/gpu": "8"}}}]
    obj["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
        {"name": "init", "resources": {"requests": {"cpu": "4", "memory": "16Gi"}}},
    ]
    obj["spec"]["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    p = pod_from_k8s(obj)
    assert dict(p.requests) == {"cpu": 91250, "memory": 902 * GI + 120 * MI, "nvidia.com/gpu": 8}


@pytest.mark.parametrize(
    "meta,gang",
    [
        ({"annotations": {"scheduling.k8s.io/group-name": "pg-volcano"}}, "PodGroup/ns1/pg-volcano"),
        ({"labels": {"scheduling.x-k8s.io/pod-group": "pg-cosched"}}, "PodGroup/ns1/pg-cosched"),
        ({"labels": {"kueue.x-k8s.io/pod-group-name": "pg-kueue"}}, "PodGroup/ns1/pg-kueue"),
        ({"ownerReferences": [{"kind": "PyTorchJob", "name": "pt", "controller": True}]}, "PyTorchJob/ns1/pt"),
        ({"ownerReferences": [{"kind": "Job", "name": "not-controller"}]}, ""),
        ({}, ""),
    ],
)
def test_pod_gang_key(meta, gang):
    obj = k8s_pod()
    obj["metadata"].update(meta)
    assert pod_from_k8s(obj).gang == gang


def test_pod_priority_from_class_and_default():
    obj = k8s_pod(priorityClassName="high")
    assert pod_from_k8s(obj, {"high": 10000}).priority == 10000
    assert pod_from_k8s(obj, {}, default_priority=7).priority == 7  # unknown class
    assert pod_from_k8s(k8s_pod(priorityClassName="system-node-critical")).priority == 2000001000
    assert pod_from_k8s(k8s_pod(), {"high": 10000}, default_priority=3).priority == 3
    assert pod_from_k8s(k8s_pod(priority=5, priorityClassName="high"), {"high": 10000}).priority == 5


def test_pod_pending_unbound_and_bad_time():
    obj = k8s_pod(node=None, phase="Pending")
    obj["status"] = {"phase": "Pending"}
    p = pod_from_k8s(obj)
    assert p.node_name == "" and p.phase == "Pending" and p.start_time is None
    bad = k8s_pod()
    bad["status"]["startTime"] = "yesterday"
    with pytest.raises(AdapterError) as e:
        pod_from_k8s(bad)
    assert e.value.field == "status.startTime" and e.value.obj == "Pod ns1/p1"


def test_pod_bad_request_names_container_field():
    obj = k8s_pod(gpu="lots")
    with pytest.raises(AdapterError) as e:
        pod_from_k8s(obj)
    assert e.value.field == "spec.containers[0].resources.limits.nvidia.com/gpu"
    assert str(e.value).startswith("Pod ns1/p1: spec.containers[0]")


def test_parse_time_forms():
    assert parse_time("1970-01-01T00:01:00Z", "f") == 60.0
    assert parse_time("1970-01-01T01:00:00+01:00", "f") == 0.0
    assert parse_time(None, "f") is None


# ---------------------------------------------------------------- Kueue

CQ_V1BETA1 = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": {"name": "team-llm"},
    "spec": {
        "cohort": "research",
        "queueingStrategy": "StrictFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
        "stopPolicy": "Hold",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {"name": "h100", "resources": [
                        {"name": "cpu", "nominalQuota": "12288"},
                        {"name": "memory", "nominalQuota": "128000Gi", "lendingLimit": "1000Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": 512, "borrowingLimit": "0"},
                    ]},
                    {"name": "a100", "resources": [
                        {"name": "cpu", "nominalQuota": "100"},
                        {"name": "memory", "nominalQuota": "1Ti"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "64", "borrowingLimit": "16"},
                    ]},
                ],
            }
        ],
    },
    "status": {
        "flavorsReservation": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "128", "borrowed": "0"}, {"name": "cpu", "total": "1500m"}]}],
        "flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "64"}]}],
        "pendingWorkloads": 3,
        "admittedWorkloads": 2,
    },
}


def test_cluster_queue_v1beta1():
    cq = cluster_queue_from_k8s(CQ_V1BETA1)
    assert cq.name == "team-llm" and cq.cohort == "research"
    assert cq.queueing_strategy == "StrictFIFO" and cq.stop_policy == "Hold"
    assert dict(cq.preemption) == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                   "borrowWithinCohort": "LowerPriority", "borrowWithinCohort.maxPriorityThreshold": "100"}
    (rg,) = cq.resource_groups
    assert rg.covered_resources == ("cpu", "memory", "nvidia.com/gpu")
    h100, a100 = rg.flavors
    assert (h100.name, a100.name) == ("h100", "a100")
    assert h100.resources["nvidia.com/gpu"] == ResourceQuota(512, 0, None)
    assert h100.resources["cpu"] == ResourceQuota(12288000, None, None)
    assert h100.resources["memory"] == ResourceQuota(128000 * GI, None, 1000 * GI)
    assert a100.resources["nvidia.com/gpu"] == ResourceQuota(64, 16, None)
    # flavorsReservation wins over flavorsUsage
    assert dict(cq.usage) == {("h100", "nvidia.com/gpu"): 128, ("h100", "cpu"): 1500}
    assert (cq.pending_workloads, cq.admitted_workloads) == (3, 2)


def test_cluster_queue_v1beta2_and_usage_fallback():
    spec = {k: v for k, v in CQ_V1BETA1["spec"].items() if k not in ("cohort", "queueingStrategy", "preemption", "stopPolicy")}
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-b"},
        "spec": {**spec, "cohortName": "research"},
        "status": {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "64"}]}]},
    }
    cq = cluster_queue_from_k8s(obj)
    assert cq.cohort == "research"
    assert dict(cq.usage) == {("h100", "nvidia.com/gpu"): 64}
    assert cq.queueing_strategy == "BestEffortFIFO" and cq.stop_policy == "None"
    assert cq.preemption["withinClusterQueue"] == "Never" and cq.preemption["reclaimWithinCohort"] == "Never"
    assert cq.resource_groups[0].flavors[0].resources["nvidia.com/gpu"].nominal == 512


def test_cluster_queue_without_cohort():
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "solo"}, "spec": {}}
    cq = cluster_queue_from_k8s(obj)
    assert cq.cohort is None and cq.resource_groups == () and dict(cq.usage) == {}


def test_cluster_queue_bad_quota_names_field():
    import copy

    obj = copy.deepcopy(CQ_V1BETA1)
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "lots"
    with pytest.raises(AdapterError) as e:
        cluster_queue_from_k8s(obj)
    assert e.value.obj == "ClusterQueue team-llm"
    assert e.value.field == "spec.resourceGroups[0].flavors[0].resources[2].nominalQuota"


def test_resource_flavor_local_queue_cohort():
    rf = resource_flavor_from_k8s({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                 "nodeTaints": [{"key": "gpu", "value": "h100", "effect": "NoSchedule"}],
                 "tolerations": [{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}],
                 "topologyName": "default"}})
    assert dict(rf.node_labels) == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert rf.node_taints == (Taint("gpu", "h100", "NoSchedule"),)
    assert rf.tolerations == (Toleration("gpu", "Equal", "h100", "NoSchedule"),)
    assert rf.topology_name == "default"
    lq = local_queue_from_k8s({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                               "metadata": {"name": "llm-queue", "namespace": "llm"}, "spec": {"clusterQueue": "team-llm"}})
    assert (lq.namespace, lq.name, lq.cluster_queue) == ("llm", "llm-queue", "team-llm")
    with pytest.raises(AdapterError) as e:
        local_queue_from_k8s({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "x"}, "spec": {}})
    assert e.value.field == "spec.clusterQueue" and e.value.obj == "LocalQueue x/q"
    co1 = cohort_from_k8s({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "research"},
                           "spec": {"parent": "org", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                                                        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "64"}]}]}]}})
    assert co1.parent == "org" and co1.resource_groups[0].flavors[0].resources["nvidia.com/gpu"].nominal == 64
    co2 = cohort_from_k8s({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "research"}, "spec": {"parentName": "org2"}})
    assert co2.parent == "org2" and co2.resource_groups == ()


# ---------------------------------------------------------------- Volcano / coscheduling


def test_volcano_queue():
    q = volcano_queue_from_k8s({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"},
        "spec": {"weight": 4, "reclaimable": False, "capability": {"nvidia.com/gpu": "256", "cpu": "1000"},
                 "deserved": {"nvidia.com/gpu": "128"}, "guarantee": {"resource": {"nvidia.com/gpu": "32"}}, "parent": "root"},
        "status": {"state": "Closed", "allocated": {"nvidia.com/gpu": "40", "memory": "1Ti"}}})
    assert dict(q.capability) == {"nvidia.com/gpu": 256, "cpu": 1000000}
    assert dict(q.deserved) == {"nvidia.com/gpu": 128}
    assert dict(q.guarantee) == {"nvidia.com/gpu": 32}
    assert (q.weight, q.reclaimable, q.state, q.parent) == (4, False, "Closed", "root")
    assert dict(q.allocated) == {"nvidia.com/gpu": 40, "memory": 2**40}
    d = volcano_queue_from_k8s({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}})
    assert (d.weight, d.reclaimable, d.state, dict(d.capability)) == (1, True, "Open", {})


def test_pod_groups_both_apis():
    v = pod_group_from_k8s({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "llm"},
        "spec": {"queue": "research", "minMember": 64, "minResources": {"nvidia.com/gpu": "512"}},
        "status": {"phase": "Inqueue", "running": 3}})
    assert (v.namespace, v.name, v.queue, v.min_member, v.phase, v.running, v.api_group) == ("llm", "pg", "research", 64, "Inqueue", 3, "scheduling.volcano.sh")
    assert dict(v.min_resources) == {"nvidia.com/gpu": 512}
    c = pod_group_from_k8s({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "pg2", "namespace": "llm"},
        "spec": {"minMember": 8}, "status": {"phase": "Pending"}})
    assert (c.queue, c.min_member, c.api_group, c.running) == ("", 8, "scheduling.x-k8s.io", 0)
    with pytest.raises(AdapterError) as e:
        pod_group_from_k8s({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "llm"},
                            "spec": {"minMember": "eight"}})
    assert e.value.field == "spec.minMember"


# ---------------------------------------------------------------- build_snapshot


def test_build_snapshot_mixed_objects():
    objs = [
        k8s_node("n1"),
        k8s_node("n2", ready="False", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
        {"apiVersion": "v1", "kind": "List", "items": [k8s_pod("a", priorityClassName="high"), k8s_pod("b", node="n1")]},
        k8s_pod("done", phase="Succeeded"),
        k8s_pod("failed", phase="Failed"),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10000},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "normal"}, "value": 100, "globalDefault": True},
        CQ_V1BETA1,
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ns1"}, "spec": {"clusterQueue": "team-llm"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "h100"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns1"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}, "spec": {"capability": {"nvidia.com/gpu": "256"}}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ns1"}, "spec": {"minMember": 2}},
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"}},
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e2"}},
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e3"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
    ]
    s = build_snapshot(objs, source="dump.yaml")
    assert s.source == "dump.yaml"
    assert [n.name for n in s.nodes] == ["n1", "n2"]
    assert [n.ready for n in s.nodes] == [True, False]
    assert sorted(p.name for p in s.pods) == ["a", "b"]
    prio = {p.name: p.priority for p in s.pods}
    assert prio == {"a": 10000, "b": 100}  # class resolved although it came later; globalDefault
    assert dict(s.priority_classes) == {"high": 10000, "normal": 100}
    assert dict(s.skipped) == {"Event": 3, "Service": 1, "Deployment": 1, TERMINAL_PODS_KEY: 2}
    wl = s.kueue.workloads[("ns1", "w")]  # a bare Workload: no pod sets, no conditions
    assert (wl.pods, dict(wl.requests), wl.state, wl.queue_name) == (0, {}, "Pending", "")
    assert set(s.kueue.cluster_queues) == {"team-llm"}
    assert set(s.kueue.local_queues) == {("ns1", "q")}
    assert set(s.kueue.flavors) == {"h100"}
    assert s.volcano.queues["research"].capability == {"nvidia.com/gpu": 256}
    assert s.volcano.pod_groups[("ns1", "pg")].min_member == 2
    # both running pods are on n1: 8 GPUs used, none free; n2 untouched
    gpu = s.col["nvidia.com/gpu"]
    assert int(s.free[s.node_index["n1"], gpu]) == 0
    assert int(s.free[s.node_index["n2"], gpu]) == 8
    assert int(s.used[s.node_index["n1"], s.col["pods"]]) == 2


def test_build_snapshot_error_names_source_object_field_and_position():
    objs = [k8s_node("ok"), k8s_node("bad", gpu_cap="lots")]
    with pytest.raises(AdapterError) as e:
        build_snapshot(objs, source="dump.yaml")
    assert str(e.value) == "dump.yaml: Node bad: status.capacity.nvidia.com/gpu: expected a quantity such as '8' or '500m', got 'lots'"
    assert e.value.position == 1
    with pytest.raises(AdapterError) as e2:
        build_snapshot([k8s_node(), ["not", "an", "object"]])
    assert "expected a Kubernetes object" in str(e2.value)


def test_build_snapshot_typed_list_items_without_kind():
    node = k8s_node("n9")
    del node["kind"], node["apiVersion"]
    s = build_snapshot([{"apiVersion": "v1", "kind": "NodeList", "items": [node]}])
    assert [n.name for n in s.nodes] == ["n9"]
