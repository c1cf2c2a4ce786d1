"""Readers of node autoscalers' objects (issue #16): Karpenter NodePools and NodeClaims,
cluster-autoscaler's status ConfigMap in both documented formats, ProvisioningRequests, their
assembly with the Nodes into ``AutoscalingState``, and ``build_snapshot`` end to end.

Fixtures are written here in the formats upstream documents (karpenter pkg/apis/v1,
cluster-autoscaler clusterstate/api/types.go and clusterstate/api/utils.go
``GetReadableString``); /work/shared/upstream holds no Karpenter or cluster-autoscaler examples.
"""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import pytest

from webhook.adapters.autoscaling_objects import (
    ca_status_from_k8s,
    nodeclaim_from_k8s,
    nodepool_from_k8s,
    nodepool_or_unreadable,
    provisioning_request_from_k8s,
    read_requirements,
)
from webhook.adapters.autoscaling_state import MAX_SAMPLES, autoscaling_state, node_group_of
from webhook.adapters.ca_status import parse_ca_status
from webhook.adapters.errors import AdapterError
from webhook.adapters.nodes import node_from_k8s
from webhook.adapters.snapshot_builder import build_snapshot
from webhook.engine.autoscale.model import NODE_GROUP, NODEPOOL, NODES_LIMIT
from webhook.engine.model import NodeSelectorRequirement as Req
from webhook.engine.model import Taint

GPU = "nvidia.com/gpu"
GiB = 1 << 30
UPSTREAM = Path("/work/shared/upstream")


def nodepool(name="gpu-h100", **spec_extra) -> dict:
    """A karpenter.sh/v1 NodePool as in Karpenter's docs (requirements, labels, taints, limits)."""
    spec = {
        "template": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"], "minValues": 1},
                    {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gte", "values": ["8"]},
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
                    {"key": "spot-only", "operator": "DoesNotExist"},
                    {"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["arm64"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lte", "values": ["192"]},
                    {"key": "karpenter.k8s.aws/instance-memory", "operator": "Lt", "values": ["4000000"]},
                ],
                "taints": [{"key": GPU, "value": "true", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "example.com/initializing", "effect": "NoExecute"}],
            },
        },
        "limits": {"cpu": "1000", "memory": "4000Gi", GPU: "512", "nodes": "64"},
        "weight": 50,
        **spec_extra,
    }
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def nodeclaim(name, pool="gpu-h100", *, node="", ready=None, created="2025-06-01T10:00:00Z",
              ready_at="2025-06-01T10:03:20Z", gpus="8", deleting=False) -> dict:
    conditions = []
    if ready is not None:
        conditions = [{"type": "Launched", "status": "True", "lastTransitionTime": created},
                      {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_at}]
    meta = {"name": name, "labels": {"karpenter.sh/nodepool": pool}, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2025-06-01T11:00:00Z"
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
            "spec": {"nodeClassRef": {"name": "default"}, "requirements": []},
            "status": {"nodeName": node, "capacity": {"cpu": "192", "memory": "2000Gi", GPU: gpus, "pods": "110"},
                       "conditions": conditions}}


def node(name, labels=None, *, gpus="8", ready=True, taints=None, cpu="192") -> dict:
    cap = {"cpu": cpu, "memory": "2000Gi", GPU: gpus, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {"capacity": cap, "allocatable": dict(cap),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def configmap(text, name="cluster-autoscaler-status", namespace="kube-system") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"status": text}}


#: The YAML status of cluster-autoscaler ≥ 1.30 (clusterstate/api/types.go ClusterAutoscalerStatus).
CA_YAML = textwrap.dedent("""\
    time: 2025-06-01 10:00:00.123456789 +0000 UTC
    autoscalerStatus: Running
    clusterWide:
      health:
        status: Healthy
        nodeCounts:
          registered: {total: 5, ready: 5, notStarted: 0}
          longUnregistered: 0
          unregistered: 0
        lastProbeTime: "2025-06-01T10:00:00Z"
      scaleUp: {status: NoActivity}
      scaleDown: {status: NoCandidates}
    nodeGroups:
    - name: https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroups/gke-prod-a100-1a2b3c4d-grp
      health:
        status: Healthy
        nodeCounts:
          registered: {total: 2, ready: 2, notStarted: 0, beingDeleted: 0, unready: {total: 0, resourceUnready: 0}}
          longUnregistered: 0
          unregistered: 1
        cloudProviderTarget: 3
        minSize: 0
        maxSize: 16
        lastProbeTime: "2025-06-01T10:00:00Z"
        lastTransitionTime: "2025-06-01T09:00:00Z"
      scaleUp: {status: InProgress}
      scaleDown: {status: NoCandidates, candidates: 0}
    - name: eks-ng-gpu-a1b2c3d4-0e1f-2a3b-4c5d-6e7f8a9b0c1d
      health:
        status: Healthy
        nodeCounts:
          registered: {total: 0, ready: 0, notStarted: 0}
          longUnregistered: 0
          unregistered: 0
        cloudProviderTarget: 0
        minSize: 0
        maxSize: 8
      scaleUp:
        status: Backoff
        backoffInfo: {errorCode: QUOTA_EXCEEDED, errorMessage: "quota exceeded"}
      scaleDown: {status: NoCandidates}
    """)

#: The text status of cluster-autoscaler before 1.30: WriteStatusConfigMap's prefix, then
#: GetReadableString (clusterstate/api/utils.go: per condition "%-12v %v (message)" and its two
#: time lines) with clusterstate.go's Health messages.
def _legacy_condition(kind: str, status: str, message: str) -> str:
    times = "             LastProbeTime:      2023-05-02 08:14:59.9 +0000 UTC\n" \
            "             LastTransitionTime: 2023-05-01 10:00:00.1 +0000 UTC\n"
    return f"  {kind + ':':<12} {status} ({message})\n" + "".join("  " + line + "\n" for line in times.splitlines())


CA_LEGACY = (
    "Cluster-autoscaler status at 2023-05-02 08:15:00.123456789 +0000 UTC:\n"
    "Cluster-wide:\n"
    + _legacy_condition("Health", "Healthy", "ready=4 unready=0 notStarted=0 longNotStarted=0 registered=4 longUnregistered=0")
    + _legacy_condition("ScaleUp", "NoActivity", "ready=4 registered=4")
    + _legacy_condition("ScaleDown", "NoCandidates", "candidates=0")
    + "\nNodeGroups:\n"
    + "  Name:        aks-gpupool-12345678-vmss\n"
    + _legacy_condition("Health", "Healthy", "ready=2 unready=0 notStarted=1 longNotStarted=0 registered=3 "
                                             "longUnregistered=0 cloudProviderTarget=4 (minSize=1, maxSize=10)")
    + _legacy_condition("ScaleUp", "InProgress", "ready=2 cloudProviderTarget=4")
    + _legacy_condition("ScaleDown", "NoCandidates", "candidates=0")
    + "\n  Name:        cpu-group\n"
    + _legacy_condition("Health", "Healthy", "ready=1 unready=0 notStarted=0 longNotStarted=0 registered=1 "
                                             "longUnregistered=0 cloudProviderTarget=1 (minSize=1, maxSize=1)")
    + "\n"
)


# ---------------------------------------------------------------- NodePool


def test_nodepool_reads_every_operator_labels_taints_limits_and_weight():
    p = nodepool_from_k8s(nodepool())
    assert p.name == "gpu-h100" and p.weight == 50 and p.replicas is None
    assert p.requirements[:4] == (
        Req("karpenter.sh/capacity-type", "In", ("on-demand",)),
        Req("karpenter.k8s.aws/instance-family", "In", ("p5",)),   # minValues ignored
        Req("karpenter.k8s.aws/instance-gpu-count", "Gte", ("8",)),
        Req("karpenter.k8s.aws/instance-generation", "Gt", ("4",)),
    )
    assert [r.operator for r in p.requirements] == ["In", "In", "Gte", "Gt", "DoesNotExist", "NotIn", "Exists", "Lte", "Lt"]
    assert p.labels == {"team": "ml", "karpenter.sh/nodepool": "gpu-h100", "karpenter.sh/registered": "true",
                        "karpenter.sh/initialized": "true", "karpenter.k8s.aws/ec2nodeclass": "default"}
    assert p.taints == (Taint(GPU, "true", "NoSchedule"),)
    assert p.startup_taints == (Taint("example.com/initializing", "", "NoExecute"),)
    # the same units as Node allocatable: millicores, bytes, counts; `nodes` is a node count
    assert p.limits == {"cpu": 1_000_000, "memory": 4000 * GiB, GPU: 512, NODES_LIMIT: 64}
    assert p.status_resources is None


def test_nodepool_partial_is_read_with_defaults():
    p = nodepool_from_k8s({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "bare"},
                           "spec": {"template": {"spec": {"requirements": []}}}})
    assert (p.requirements, p.taints, p.startup_taints, p.limits, p.weight) == ((), (), (), {}, 0)
    assert p.labels == {"karpenter.sh/nodepool": "bare", "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"}
    static = nodepool_from_k8s(nodepool(replicas=3, weight=None,
                                        limits={"nodes": "3"}) | {"status": {"resources": {"cpu": "8", "nodes": "1"}}})
    assert static.replicas == 3 and static.weight == 0 and static.status_resources == {"cpu": 8000, "nodes": 1}


@pytest.mark.parametrize("mutate, field, expected", [
    (lambda o: o["spec"]["template"]["spec"]["requirements"][0].update(operator="Near"),
     "spec.template.spec.requirements[0].operator", "expected one of In, NotIn"),
    (lambda o: o["spec"]["template"]["spec"]["requirements"][0].update(values=[]),
     "spec.template.spec.requirements[0].values", "at least one value"),
    (lambda o: o["spec"]["template"]["spec"]["requirements"][2].update(values=["eight"]),
     "spec.template.spec.requirements[2].values[0]", "expected an integer"),
    (lambda o: o["spec"]["template"]["spec"]["requirements"][2].update(values=["1", "2"]),
     "spec.template.spec.requirements[2].values", "exactly one integer"),
    (lambda o: o["spec"]["template"]["spec"]["requirements"][4].update(values=["x"]),
     "spec.template.spec.requirements[4].values", "expected no values"),
    (lambda o: o["spec"]["template"]["spec"]["requirements"][1].pop("key"),
     "spec.template.spec.requirements[1].key", "non-empty label key"),
    (lambda o: o["spec"]["template"]["spec"].update(requirements={"a": 1}),
     "spec.template.spec.requirements", "expected a list"),
    (lambda o: o["spec"]["limits"].update(cpu="lots"), "spec.limits.cpu", ""),
    (lambda o: o["spec"].update(weight=101), "spec.weight", "101"),
    (lambda o: o["spec"].update(weight="heavy"), "spec.weight", "heavy"),
    (lambda o: o["spec"]["template"]["spec"]["taints"][0].update(effect="Sometimes"),
     "spec.template.spec.taints[0].effect", "NoSchedule, PreferNoSchedule or NoExecute"),
    (lambda o: o["spec"]["template"]["metadata"].update(labels=["team"]), "spec.template.metadata.labels", "mapping"),
    (lambda o: o["metadata"].pop("name"), "metadata.name", "non-empty string"),
    (lambda o: o["spec"]["template"]["spec"].update(nodeClassRef="default"), "spec.template.spec.nodeClassRef", "mapping"),
    (lambda o: o["spec"].update(template=[]), "spec.template", "mapping"),
    (lambda o: o.update(status={"resources": {GPU: "half"}}), f"status.resources.{GPU}", ""),
])
def test_nodepool_bad_input_names_the_field(mutate, field, expected):
    obj = nodepool()
    mutate(obj)
    with pytest.raises(AdapterError) as err:
        nodepool_from_k8s(obj)
    assert err.value.field == field
    assert expected in err.value.detail
    assert str(err.value).startswith("NodePool ")


def test_nodepool_or_unreadable_keeps_the_name_and_why():
    obj = nodepool()
    obj["spec"]["weight"] = 500
    p = nodepool_or_unreadable(obj)
    assert p.name == "gpu-h100" and "spec.weight" in p.error and p.requirements == ()
    assert nodepool_or_unreadable(nodepool()).error == ""
    with pytest.raises(AdapterError, match="metadata.name"):
        nodepool_or_unreadable({"kind": "NodePool", "metadata": {}, "spec": {"weight": 500}})
    (src,) = autoscaling_state([], [p]).sources
    assert (src.requirements, src.taints, dict(src.limits), src.max_new_nodes) == (None, None, {}, None)


def test_read_requirements_keeps_values_as_strings():
    assert read_requirements([{"key": "k", "operator": "In", "values": [1, "b"]}], "r") == (Req("k", "In", ("1", "b")),)


# ---------------------------------------------------------------- NodeClaim


def test_nodeclaim_reads_pool_node_capacity_and_provisioning_time():
    c = nodeclaim_from_k8s(nodeclaim("gpu-h100-abcde", node="ip-10-0-0-1", ready=True))
    assert (c.name, c.nodepool, c.node_name, c.ready, c.deleting) == ("gpu-h100-abcde", "gpu-h100", "ip-10-0-0-1", True, False)
    assert c.capacity == {"cpu": 192_000, "memory": 2000 * GiB, GPU: 8, "pods": 110}
    assert c.provisioning_s == 200.0
    pending = nodeclaim_from_k8s(nodeclaim("x", ready=False))
    assert pending.ready is False and pending.provisioning_s is None and pending.node_name == ""
    launched = nodeclaim_from_k8s(nodeclaim("y"))  # no conditions yet
    assert launched.ready is False and launched.ready_at is None
    assert nodeclaim_from_k8s(nodeclaim("z", deleting=True)).deleting is True


@pytest.mark.parametrize("mutate, field", [
    (lambda o: o["metadata"].update(creationTimestamp="yesterday"), "metadata.creationTimestamp"),
    (lambda o: o["status"]["conditions"].append({"type": "Ready", "status": "True", "lastTransitionTime": 5}),
     "status.conditions[0].lastTransitionTime"),
    (lambda o: o["status"]["capacity"].update(cpu="many"), "status.capacity.cpu"),
    (lambda o: o["status"].update(nodeName=7), "status.nodeName"),
    (lambda o: o["status"].update(conditions="Ready"), "status.conditions"),
])
def test_nodeclaim_bad_input_names_the_field(mutate, field):
    obj = nodeclaim("c")
    mutate(obj)
    if field.endswith("lastTransitionTime"):
        obj["status"]["conditions"] = obj["status"]["conditions"][-1:]
    with pytest.raises(AdapterError) as err:
        nodeclaim_from_k8s(obj)
    assert err.value.field == field and err.value.obj == "NodeClaim c"


# ---------------------------------------------------------------- cluster-autoscaler status


def test_ca_status_yaml_format():
    st = parse_ca_status(CA_YAML)
    assert st.format == "yaml" and st.note == ""
    a100, eks = st.groups
    assert a100.name.endswith("/instanceGroups/gke-prod-a100-1a2b3c4d-grp")
    assert (a100.target, a100.min_size, a100.max_size, a100.ready, a100.pending, a100.health) == (3, 0, 16, 2, 1, "Healthy")
    assert (eks.name, eks.target, eks.max_size, eks.pending) == ("eks-ng-gpu-a1b2c3d4-0e1f-2a3b-4c5d-6e7f8a9b0c1d", 0, 8, 0)


def test_ca_status_legacy_text_format():
    st = parse_ca_status(CA_LEGACY)
    assert st.format == "legacy" and st.note == ""
    aks, cpu = st.groups
    assert (aks.name, aks.target, aks.min_size, aks.max_size, aks.ready, aks.health) == (
        "aks-gpupool-12345678-vmss", 4, 1, 10, 2, "Healthy")
    assert aks.pending == 1 + (4 - 3)  # notStarted + asked for and not registered
    assert (cpu.name, cpu.target, cpu.max_size) == ("cpu-group", 1, 1)


def test_ca_status_legacy_without_node_groups_and_the_initializing_text():
    st = parse_ca_status("Cluster-autoscaler status at 2023-05-02 08:15:00 +0000 UTC:\nCluster-wide:\n  Health:      Healthy (ready=1)\n")
    assert st.format == "legacy" and st.groups == () and st.note == ""
    init = parse_ca_status("Cluster-autoscaler status at 2023-05-02 08:15:00 +0000 UTC:\nInitializing")
    assert init.groups == () and "initializing" in init.note


@pytest.mark.parametrize("text, words", [
    ("", "no status text"),
    (None, "no status text"),
    ("just some words", "format not understood"),
    ("{{{ not yaml", "format not understood"),
    ("[" * 20000, "format not understood"),                       # nested too deeply: a note, not a RecursionError
    ("x" * (1 << 20) + "y", "not read (more than 1,048,576)"),     # more than a ConfigMap holds
    ("- a\n- b\n", "format not understood"),
    ("nodeGroups: 7\n", "nodeGroups: expected a list"),
    ("nodeGroups:\n- name: g\n  health: {cloudProviderTarget: 1, minSize: 0}\n", "nodeGroups[0].health.maxSize"),
    ("nodeGroups:\n- health: {cloudProviderTarget: 1, minSize: 0, maxSize: 3}\n", "nodeGroups[0].name"),
    ("NodeGroups:\n  Name:        g\n  Health:      Healthy (ready=1)\n", "no cloudProviderTarget"),
    ("NodeGroups:\n  Name:        g\n", "no Health line"),
])
def test_ca_status_not_understood_is_a_note_never_an_error(text, words):
    st = parse_ca_status(text)
    assert words in st.note
    assert st.groups == ()


def test_ca_status_keeps_the_readable_groups_when_one_is_bad():
    text = CA_YAML.replace("    maxSize: 8\n", "    maxSize: eight\n")
    st = parse_ca_status(text)
    assert [g.name for g in st.groups] == [parse_ca_status(CA_YAML).groups[0].name]
    assert "nodeGroups[1].health.maxSize" in st.note


def test_ca_status_configmap_with_data_that_is_not_a_map_is_a_note():
    assert "data: expected a map" in ca_status_from_k8s({"metadata": {}, "data": ["x"]}).status.note
    assert ca_status_from_k8s(configmap(CA_YAML)).origin == "kube-system/cluster-autoscaler-status"


# ---------------------------------------------------------------- ProvisioningRequest


def provreq(**status) -> dict:
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": "job-big-1", "namespace": "ml",
                         "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "name": "job-big"}]},
            "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": "ppt-a"}, "count": 4}, {"podTemplateRef": {"name": "ppt-b"}, "count": 60}]},
            "status": status}


def test_provisioning_request_reads_class_pods_state_and_owner():
    pr = provisioning_request_from_k8s(provreq(conditions=[
        {"type": "Accepted", "status": "True", "message": "accepted"},
        {"type": "Provisioned", "status": "False", "message": "waiting"},
        {"type": "Failed", "status": "True", "message": "out of stock in us-east-1a"},
    ]))
    assert (pr.namespace, pr.name, pr.pods, pr.owner) == ("ml", "job-big-1", 64, "Workload/job-big")
    assert pr.class_name == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert (pr.state, pr.message) == ("Failed", "out of stock in us-east-1a")
    bare = provisioning_request_from_k8s({"kind": "ProvisioningRequest", "metadata": {"name": "p"}})
    assert (bare.namespace, bare.pods, bare.state, bare.owner, bare.class_name) == ("default", 0, "", "", "")


@pytest.mark.parametrize("mutate, field", [
    (lambda o: o["spec"]["podSets"][1].update(count=-1), "spec.podSets[1].count"),
    (lambda o: o["spec"]["podSets"][0].update(count="four"), "spec.podSets[0].count"),
    (lambda o: o["spec"].update(podSets={"count": 1}), "spec.podSets"),
    (lambda o: o["status"].update(conditions={"type": "Failed"}), "status.conditions"),
])
def test_provisioning_request_bad_input_names_the_field(mutate, field):
    obj = provreq()
    mutate(obj)
    with pytest.raises(AdapterError) as err:
        provisioning_request_from_k8s(obj)
    assert err.value.field == field and err.value.obj == "ProvisioningRequest ml/job-big-1"


# ---------------------------------------------------------------- the state


def _nodes(*objs):
    return [node_from_k8s(o) for o in objs]


def test_nodepool_source_in_use_falls_back_to_its_nodes_and_unregistered_claims():
    nodes = _nodes(node("a", {"karpenter.sh/nodepool": "gpu-h100"}), node("b", {"karpenter.sh/nodepool": "gpu-h100"}),
                   node("other", {"karpenter.sh/nodepool": "cpu"}), node("c", {"karpenter.sh/nodepool": "gpu-h100"}, ready=False))
    claims = [nodeclaim_from_k8s(c) for c in (
        nodeclaim("ca", node="a", ready=True), nodeclaim("cb", node="b", ready=True),
        nodeclaim("cc", node="c", ready=False),            # registered, its node not Ready: pending, counted as a node
        nodeclaim("cd", ready=False, gpus="4"),            # not registered yet: pending, its capacity counted
        nodeclaim("ce", ready=False, deleting=True),       # going away: neither
        nodeclaim("cpu-1", pool="cpu", node="other", ready=True))]
    st = autoscaling_state(nodes, [nodepool_from_k8s(nodepool())], claims)
    (src,) = st.sources
    assert (src.kind, src.name, src.nodes, src.pending, src.weight) == (NODEPOOL, "gpu-h100", 3, 2, 50)
    assert src.in_use[GPU] == 8 * 3 + 4 and src.in_use[NODES_LIMIT] == 4
    assert src.in_use["cpu"] == 4 * 192_000
    assert src.remaining(GPU) == 512 - 28 and src.remaining("ephemeral-storage") is None
    assert src.node_shape is None  # Karpenter's instance types live in the cloud provider
    assert src.typical_shape == {"cpu": 192_000, "memory": 2000 * GiB, GPU: 8, "pods": 110}
    assert src.labels["team"] == "ml" and src.labels["karpenter.sh/nodepool"] == "gpu-h100" and src.taints == (Taint(GPU, "true", "NoSchedule"),)
    assert src.max_new_nodes is None and src.origin == "NodePool gpu-h100"
    # provisioning samples: the Ready claims, newest last (both 200 s here)
    assert st.provisioning_samples_s == (200.0, 200.0, 200.0)


def test_nodepool_status_resources_win_and_static_pools_cap_new_nodes():
    obj = nodepool(replicas=4) | {"status": {"resources": {GPU: "40", "nodes": "5"}}}
    nodes = _nodes(*(node(f"n{i}", {"karpenter.sh/nodepool": "gpu-h100"}) for i in range(3)))
    (src,) = autoscaling_state(nodes, [nodepool_from_k8s(obj)], [nodeclaim_from_k8s(nodeclaim("p", ready=False))]).sources
    assert src.in_use == {GPU: 40, NODES_LIMIT: 5}
    assert src.max_new_nodes == 0  # 3 nodes + 1 pending = its 4 replicas


def test_typical_shape_only_when_all_nodes_agree():
    nodes = _nodes(node("a", {"karpenter.sh/nodepool": "gpu-h100"}), node("b", {"karpenter.sh/nodepool": "gpu-h100"}, cpu="96"))
    (src,) = autoscaling_state(nodes, [nodepool_from_k8s(nodepool())]).sources
    assert src.typical_shape is None and src.nodes == 2


def test_provisioning_samples_keep_the_newest_256_newest_last():
    claims = []
    for i in range(300):
        claims.append(nodeclaim_from_k8s(nodeclaim(f"c{i}", ready=True, created=f"2025-06-01T10:{i // 60:02d}:{i % 60:02d}Z",
                                                   ready_at=f"2025-06-01T12:{i // 60:02d}:{i % 60:02d}Z")))
    claims[0] = nodeclaim_from_k8s(nodeclaim("late", ready=True, created="2025-06-01T10:00:00Z", ready_at="2025-06-02T00:00:00Z"))
    st = autoscaling_state([], [], claims)
    assert len(st.provisioning_samples_s) == MAX_SAMPLES
    assert st.provisioning_samples_s[-1] == 14 * 3600.0  # the claim that became Ready last
    assert st.provisioning_samples_s[0] == 7200.0


GKE_GROUP = "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroups/gke-prod-a100-1a2b3c4d-grp"


def test_node_group_template_from_its_nodes_gke_and_eks():
    gke = {"cloud.google.com/gke-nodepool": "a100", "topology.kubernetes.io/zone": "us-central1-a", "team": "ml"}
    nodes = _nodes(node("g1", gke, taints=[{"key": GPU, "value": "present", "effect": "NoSchedule"},
                                           {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
                   node("g2", {**gke, "team": "ml", "extra": "only-here"},
                        taints=[{"key": GPU, "value": "present", "effect": "NoSchedule"}]),
                   node("unrelated", {"cloud.google.com/gke-nodepool": "cpu"}))
    st = autoscaling_state(nodes, ca_status=ca_status_from_k8s(configmap(CA_YAML)))
    a100, eks = st.sources
    assert a100.kind == NODE_GROUP and a100.name == GKE_GROUP
    assert a100.max_new_nodes == 16 - 3 and a100.nodes == 2 and a100.pending == 1
    # labels both nodes carry with the same value, hostname left out
    assert a100.requirements == (Req("cloud.google.com/gke-nodepool", "In", ("a100",)), Req("team", "In", ("ml",)),
                                 Req("topology.kubernetes.io/zone", "In", ("us-central1-a",)))
    assert a100.taints == (Taint(GPU, "present", "NoSchedule"),)  # shared; the cordon taint is not a template's
    assert a100.node_shape == {"cpu": 192_000, "memory": 2000 * GiB, GPU: 8, "pods": 110}
    assert a100.origin == f"kube-system/cluster-autoscaler-status node group {GKE_GROUP}"
    # scaled to zero: nothing of its template is visible, so it may match anything
    assert (eks.requirements, eks.taints, eks.node_shape, eks.max_new_nodes, eks.nodes) == (None, None, None, 8, 0)
    assert st.notes == ()


def test_node_group_membership_per_provider():
    def n(labels):
        return node_from_k8s(node("x", labels))
    assert node_group_of("eks-ng-gpu-a1b2c3d4-0e1f-2a3b-4c5d-6e7f8a9b0c1d", n({"eks.amazonaws.com/nodegroup": "ng-gpu"}))
    assert not node_group_of("eks-ng-gpu-a1b2c3d4-0e1f-2a3b-4c5d-6e7f8a9b0c1d", n({"eks.amazonaws.com/nodegroup": "ng"}))
    assert node_group_of("aks-gpupool-12345678-vmss", n({"kubernetes.azure.com/agentpool": "gpupool"}))
    assert node_group_of("aks-gpupool-12345678-vmss", n({"agentpool": "gpupool"}))
    assert not node_group_of("aks-gpupool-12345678-vmss", n({"agentpool": "gpu"}))
    assert node_group_of("plain-group", n({"eks.amazonaws.com/nodegroup": "plain-group"}))
    assert not node_group_of("plain-group", n({"team": "plain-group"}))  # not a node-group label
    assert not node_group_of(GKE_GROUP, n({"cloud.google.com/gke-nodepool": "a10"}))


def test_node_group_whose_name_maps_to_two_pools_has_an_unknown_template():
    group = "gke-c-a-b-1a2b3c4d-grp"  # pool "b" of cluster "c-a", or pool "a-b" of cluster "c"
    nodes = _nodes(node("n1", {"cloud.google.com/gke-nodepool": "b"}), node("n2", {"cloud.google.com/gke-nodepool": "a-b"}))
    text = f"nodeGroups:\n- name: {group}\n  health: {{cloudProviderTarget: 2, minSize: 0, maxSize: 4}}\n"
    st = autoscaling_state(nodes, ca_status=ca_status_from_k8s(configmap(text)))
    (src,) = st.sources
    assert (src.requirements, src.taints, src.node_shape) == (None, None, None)
    assert "could not be told apart" in st.notes[0]


def test_node_group_shape_unknown_when_an_extended_resource_reads_zero_or_nodes_differ():
    aks = {"kubernetes.azure.com/agentpool": "gpupool", "agentpool": "gpupool"}
    st = autoscaling_state(_nodes(node("a", aks), node("b", aks, gpus="0")),
                           ca_status=ca_status_from_k8s(configmap(CA_LEGACY)))
    src = st.sources[0]
    assert src.name == "aks-gpupool-12345678-vmss" and src.node_shape is None and src.requirements is not None
    assert src.max_new_nodes == 6
    st = autoscaling_state(_nodes(node("a", aks, gpus="0")), ca_status=ca_status_from_k8s(configmap(CA_LEGACY)))
    assert st.sources[0].node_shape is None  # a device plugin not registered yet (FIELD-NOTES §1)
    st = autoscaling_state(_nodes(node("a", aks), node("b", aks, ready=False)), ca_status=ca_status_from_k8s(configmap(CA_LEGACY)))
    assert st.sources[0].node_shape == {"cpu": 192_000, "memory": 2000 * GiB, GPU: 8, "pods": 110}  # from the Ready one


def test_state_notes_a_status_not_understood_and_a_nodepool_named_like_a_group():
    st = autoscaling_state([], [nodepool_from_k8s(nodepool("cpu-group"))],
                           ca_status=ca_status_from_k8s(configmap(CA_LEGACY)))
    assert [s.name for s in st.sources] == ["cpu-group", "aks-gpupool-12345678-vmss"]
    assert [s.kind for s in st.sources] == [NODEPOOL, NODE_GROUP]
    assert "has the name of a NodePool" in st.notes[0]
    st = autoscaling_state([], ca_status=ca_status_from_k8s(configmap("??")))
    assert st.sources == () and "format not understood" in st.notes[0]


# ---------------------------------------------------------------- build_snapshot end to end


def cluster_objects() -> list[dict]:
    pool_nodes = [node(f"gpu-{i}", {"karpenter.sh/nodepool": "gpu-h100"}) for i in range(3)]
    return [
        *pool_nodes,
        node("g1", {"cloud.google.com/gke-nodepool": "a100"}),
        nodepool(),
        nodepool("cpu") | {"spec": {"template": {"spec": {"requirements": []}}, "limits": {"cpu": "100"}}},
        *(nodeclaim(f"c{i}", node=f"gpu-{i}", ready=True) for i in range(3)),
        nodeclaim("c3", ready=False),
        configmap(CA_YAML),
        configmap("not the autoscaler's", name="other"),
        configmap(CA_LEGACY, namespace="default"),  # same name, another namespace: not the status
        provreq(conditions=[{"type": "Provisioned", "status": "True", "message": "ok"}]),
    ]


def test_build_snapshot_fills_autoscaling():
    snap = build_snapshot(cluster_objects(), source="t.yaml")
    st = snap.autoscaling
    assert [(s.kind, s.name) for s in st.sources] == [
        (NODEPOOL, "cpu"), (NODEPOOL, "gpu-h100"), (NODE_GROUP, GKE_GROUP), (NODE_GROUP, "eks-ng-gpu-a1b2c3d4-0e1f-2a3b-4c5d-6e7f8a9b0c1d")]
    gpu = st.sources[1]
    assert gpu.nodes == 3 and gpu.pending == 1 and gpu.in_use[GPU] == 32 and gpu.in_use[NODES_LIMIT] == 4
    assert st.sources[2].requirements == (Req("cloud.google.com/gke-nodepool", "In", ("a100",)),)
    assert st.provisioning_samples_s == (200.0, 200.0, 200.0)
    (pr,) = st.provisioning_requests
    assert (pr.name, pr.state, pr.pods) == ("job-big-1", "Provisioned", 64)
    assert snap.skipped == {"ConfigMap": 2}
    assert len(snap.nodes) == 4


def test_build_snapshot_without_autoscalers_is_empty_and_a_bad_nodepool_names_source_and_object():
    snap = build_snapshot([node("n")])
    assert snap.autoscaling.sources == () and snap.autoscaling.notes == () and not snap.autoscaling
    bad = nodepool()
    bad["spec"]["limits"]["nvidia.com/gpu"] = "0.5"
    with pytest.raises(AdapterError) as err:
        build_snapshot([node("n"), bad], source="cluster.yaml")
    assert str(err.value).startswith("cluster.yaml: NodePool gpu-h100: spec.limits.nvidia.com/gpu:")
    assert err.value.position == 1


def test_build_snapshot_keeps_a_note_only_state():
    snap = build_snapshot([configmap("garbage")])
    assert snap.autoscaling.sources == () and "format not understood" in snap.autoscaling.notes[0]


def test_build_snapshot_later_nodepool_replaces_earlier():
    later = copy.deepcopy(nodepool())
    later["spec"]["weight"] = 7
    snap = build_snapshot([nodepool(), later])
    assert [s.weight for s in snap.autoscaling.sources] == [7]


def test_upstream_examples_have_no_karpenter_or_autoscaler_objects_to_read():
    if not UPSTREAM.exists():
        pytest.skip("/work/shared/upstream is not on this machine")
    found = [p for p in UPSTREAM.rglob("*.yaml") if "karpenter" in p.name.lower() or "cluster-autoscaler" in p.name.lower()]
    if not found:
        pytest.skip("/work/shared/upstream holds no Karpenter or cluster-autoscaler examples; fixtures above stand in")
    for p in found:  # should some be added, each must read
        build_snapshot([d for d in __import__("yaml").safe_load_all(p.read_text()) if isinstance(d, dict)], source=str(p))
