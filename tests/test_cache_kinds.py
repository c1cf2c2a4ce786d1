"""The cache package's separately callable steps: the kinds table, the snapshot's assembly, the
informer's error mapping and event application, the backoff, and the pod interner.

No network: a LiveCache is built with a placeholder client and never started.
"""

from __future__ import annotations

import random

import pytest

from webhook.adapters.cluster import pod_from_k8s
from webhook.cache import DEFAULT_RESOURCES, POD_FIELD_SELECTOR, CacheError, LiveCache, ResourceSpec
from webhook.cache.informer import _FAILED, Informer, _Gone, _NotInstalled, backoff_delay, obj_key
from webhook.cache.kinds import KINDS, LIST_SLOTS, MAP_SLOTS, _Informer, _policy_changed, _priority_classes_changed, kind_of, policy_resource
from webhook.cache.pods import PodInterner
from webhook.engine.model import PodGroupState

KUEUE = ("v1beta1", "v1beta2")


def test_default_resources_are_the_tables_resource_column_in_the_documented_order():
    # What the cache (and `gangcheck dump`) reads, exactly as before the split.
    assert DEFAULT_RESOURCES == (
        ResourceSpec("priorityclasses", "PriorityClass", "scheduling.k8s.io", ("v1",), "priorityclasses"),
        ResourceSpec("nodes", "Node", "", ("v1",), "nodes"),
        ResourceSpec("pods", "Pod", "", ("v1",), "pods", field_selector="status.phase!=Succeeded,status.phase!=Failed"),
        ResourceSpec("kueue.resourceflavors", "ResourceFlavor", "kueue.x-k8s.io", KUEUE, "resourceflavors", optional=True),
        ResourceSpec("kueue.clusterqueues", "ClusterQueue", "kueue.x-k8s.io", KUEUE, "clusterqueues", optional=True),
        ResourceSpec("kueue.localqueues", "LocalQueue", "kueue.x-k8s.io", KUEUE, "localqueues", optional=True),
        ResourceSpec("kueue.cohorts", "Cohort", "kueue.x-k8s.io", ("v1beta1", "v1beta2", "v1alpha1"), "cohorts", optional=True),
        ResourceSpec("kueue.workloads", "Workload", "kueue.x-k8s.io", KUEUE, "workloads", optional=True),
        ResourceSpec("poddisruptionbudgets", "PodDisruptionBudget", "policy", ("v1",), "poddisruptionbudgets"),
        ResourceSpec("volcano.queues", "Queue", "scheduling.volcano.sh", ("v1beta1",), "queues", optional=True),
        ResourceSpec("volcano.podgroups", "VolcanoPodGroup", "scheduling.volcano.sh", ("v1beta1",), "podgroups", optional=True),
        ResourceSpec("coscheduling.podgroups", "CoschedPodGroup", "scheduling.x-k8s.io", ("v1alpha1",), "podgroups", optional=True),
        ResourceSpec("karpenter.nodepools", "NodePool", "karpenter.sh", ("v1",), "nodepools", optional=True),
        ResourceSpec("karpenter.nodeclaims", "NodeClaim", "karpenter.sh", ("v1",), "nodeclaims", optional=True),
        ResourceSpec("autoscaling.provisioningrequests", "ProvisioningRequest", "autoscaling.x-k8s.io", ("v1",),
                     "provisioningrequests", optional=True),
        ResourceSpec("autoscaler.status", "AutoscalerStatusConfigMap", "", ("v1",), "configmaps", namespace="kube-system",
                     field_selector="metadata.name=cluster-autoscaler-status", optional=True),
        ResourceSpec("kueue.topologies", "Topology", "kueue.x-k8s.io", KUEUE, "topologies", optional=True),
        ResourceSpec("kai.topologies", "KAITopology", "kai.scheduler", ("v1alpha1",), "topologies", optional=True),
        ResourceSpec("volcano.hypernodes", "HyperNode", "topology.volcano.sh", ("v1alpha1",), "hypernodes", optional=True),
    )
    assert POD_FIELD_SELECTOR == DEFAULT_RESOURCES[2].field_selector


def test_every_row_feeds_a_known_slot_and_only_pods_wait_and_count_usage():
    for k in KINDS:
        assert k.slot is None or k.slot in LIST_SLOTS + MAP_SLOTS, k.resource.name
    assert [k.resource.kind for k in KINDS if k.slot is None] == ["PriorityClass", "PolicyConfigMap"]
    assert [k.resource.kind for k in KINDS if k.node_usage] == ["Pod"]
    assert kind_of("Pod").waits_for == ("priorityclasses",)
    assert [k.resource.kind for k in KINDS if k.rank] == ["VolcanoPodGroup"]
    assert kind_of("Bogus") is None


def test_policy_resource_watches_one_configmap_in_its_namespace():
    spec = policy_resource("gangcheck-system", "gangcheck-policy")
    assert spec == ResourceSpec("policy", "PolicyConfigMap", "", ("v1",), "configmaps", namespace="gangcheck-system",
                                field_selector="metadata.name=gangcheck-policy")
    assert spec.path("v1") == "/api/v1/namespaces/gangcheck-system/configmaps"
    assert "policy" not in {s.name for s in DEFAULT_RESOURCES}


def test_each_kind_projects_with_its_key():
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team"}, "spec": {"resourceGroups": []}}
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ml"}, "spec": {"clusterQueue": "team"}}
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 900, "globalDefault": True}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "namespace": "ns"}, "data": {"mode": 1}}
    key, v = kind_of("ClusterQueue").project(None, cq)
    assert key == "team" and v.name == "team"
    key, v = kind_of("LocalQueue").project(None, lq)
    assert key == ("ml", "lq") and v.cluster_queue == "team"
    assert kind_of("PriorityClass").project(None, pc) == ("high", (900, True))
    assert kind_of("PolicyConfigMap").project(None, cm) == (("ns", "p"), {"mode": "1"})


def _cache() -> LiveCache:
    return LiveCache(object(), freeze_gc=False)  # never started: no request is made


def _pg(ns, name, *, min_member, api_group):
    return PodGroupState(namespace=ns, name=name, min_member=min_member, api_group=api_group)


def test_a_volcano_pod_group_wins_over_a_coscheduling_one_and_keys_keep_their_order():
    cache = _cache()
    volcano, cosched = cache._informers["volcano.podgroups"], cache._informers["coscheduling.podgroups"]
    assert cache._slots["volcano.pod_groups"] == [cosched, volcano]          # merge order: rank, then table
    volcano.store = {("ml", "same"): _pg("ml", "same", min_member=3, api_group="scheduling.volcano.sh"),
                     ("ml", "v"): _pg("ml", "v", min_member=1, api_group="scheduling.volcano.sh")}
    cosched.store = {("ml", "c"): _pg("ml", "c", min_member=2, api_group="scheduling.x-k8s.io"),
                     ("ml", "same"): _pg("ml", "same", min_member=5, api_group="scheduling.x-k8s.io")}
    groups = cache._build().volcano.pod_groups
    assert list(groups) == [("ml", "c"), ("ml", "same"), ("ml", "v")]
    assert groups[("ml", "same")].min_member == 3 and groups[("ml", "same")].api_group == "scheduling.volcano.sh"


def test_build_places_each_store_in_its_slot_and_priority_classes_from_the_values():
    cache = _cache()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}}}
    nodes = cache._informers["nodes"]
    cache._replace(nodes, dict([kind_of("Node").project(nodes, node)]))
    pcs = cache._informers["priorityclasses"]
    cache._replace(pcs, {"high": (900, False), "low": (5, True), "lower": (1, True)})
    snap = cache._build()
    assert [n.name for n in snap.nodes] == ["n1"] and snap.pods == ()
    assert dict(snap.priority_classes) == {"high": 900, "low": 5, "lower": 1}
    assert cache._pc_default == 1                                            # the lowest of two defaults
    assert len(snap.kueue.cluster_queues) == 0 and snap.disruption_budgets == ()


def test_pod_usage_follows_replace_and_apply():
    cache = _cache()
    pods = cache._informers["pods"]
    from scripted_apiserver import make_pod  # tests/ is on sys.path (conftest.py)
    a = pods._convert(make_pod("a", node="n1", gpus=2))
    b = pods._convert(make_pod("b", node="n1", gpus=1))
    cache._replace(pods, dict([a]))
    assert cache.node_used("n1")["nvidia.com/gpu"] == 2 and cache.node_used("n1")["pods"] == 1
    cache._apply(pods, [b, (a[0], None)])                                    # b added, a deleted
    assert cache.node_used("n1")["nvidia.com/gpu"] == 1 and cache.node_used("n1")["pods"] == 1
    assert list(pods.store) == [("team-a", "b")]


def test_policy_changes_are_reported_once_each_and_the_absent_one_once():
    seen = []

    class C:
        _policy_data, _policy_reported, on_policy = None, False, staticmethod(seen.append)

    c = C()
    _policy_changed(c, {})
    _policy_changed(c, {})
    _policy_changed(c, {("ns", "p"): {"mode": "warn"}})
    _policy_changed(c, {("ns", "p"): {"mode": "warn"}})
    _policy_changed(c, {})
    assert seen == [None, {"mode": "warn"}, None]


def test_priority_class_values_and_no_default():
    class C:
        pass

    c = C()
    _priority_classes_changed(c, {"a": (3, False)})
    assert c._pc_values == {"a": 3} and c._pc_default == 0


class _Resp:
    def __init__(self, status, body=b""):
        self.status, self._body, self.released = status, body, False

    def read(self, n):
        return self._body[:n]

    def release_conn(self):
        self.released = True


@pytest.mark.parametrize("status,cls", [(410, _Gone), (404, _NotInstalled), (500, CacheError)])
def test_error_maps_the_status_and_quotes_its_message(status, cls):
    resp = _Resp(status, b'{"kind":"Status","code":%d,"message":"too old resource version"}' % status)
    err = Informer._error(resp, "list /api/v1/pods")
    assert type(err) is cls and err.status == status and resp.released
    assert str(err) == f"list /api/v1/pods: HTTP {status}: too old resource version"
    assert str(Informer._error(_Resp(502, b"<html>bad gateway"), "watch x")) == "watch x: HTTP 502: <html>bad gateway"


def test_apply_lines_applies_events_up_to_a_410_and_advances_the_resource_version():
    applied = []

    class C:
        def _apply(self, inf, ops):
            applied.extend(ops)

    inf = _Informer(C(), ResourceSpec("nodes", "Node", "", ("v1",), "nodes"))
    node = b'{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","resourceVersion":"7"},"status":{"allocatable":{"cpu":"4"}}}'
    lines = [b'{"type":"ADDED","object":' + node + b"}",
             b'{"type":"BOOKMARK","object":{"kind":"Node","metadata":{"resourceVersion":"9"}}}',
             b'{"type":"DELETED","object":{"kind":"Node","metadata":{"name":"old","resourceVersion":"10"}}}',
             b'{"type":"ERROR","object":{"kind":"Status","code":410,"message":"gone"}}',
             b'{"type":"ADDED","object":{"kind":"Node","metadata":{"name":"never","resourceVersion":"11"}}}']
    with pytest.raises(_Gone, match="ERROR event 410: gone"):
        inf.apply_lines(lines)
    assert [(k, None if v is None else v.name) for k, v in applied] == [("n1", "n1"), ("old", None)]
    assert inf.rv == "10" and inf.events == 2


def test_an_unknown_kind_is_a_counted_conversion_error():
    inf = _Informer(object(), ResourceSpec("x", "Bogus", "example.com", ("v1",), "bogus"))
    assert inf.kind is None and inf.waits_for == ()
    assert inf._converted({"metadata": {"name": "a"}}, "skipping") is _FAILED and inf.convert_errors == 1


def test_backoff_doubles_to_its_cap_with_jitter():
    random.seed(7)
    for failures in range(1, 40):
        full = min(30.0, 0.8 * 2 ** (failures - 1))
        d = backoff_delay(failures, 0.8, 30.0)
        assert full * 0.5 <= d <= full
    assert backoff_delay(1, 0.8, 30.0) <= 0.8 and backoff_delay(10, 0.8, 30.0) >= 15.0


def test_interner_shares_equal_requests_and_labels_and_keeps_values():
    from scripted_apiserver import make_pod

    interner = PodInterner()
    a, b = pod_from_k8s(make_pod("a", node="n1")), pod_from_k8s(make_pod("b", node="n2"))
    assert a.requests is not b.requests
    ca, cb = interner.compact(a), interner.compact(b)
    assert ca == a and cb == b
    assert ca.requests is cb.requests and ca.labels is cb.labels


def test_obj_key_is_namespace_and_name_or_name():
    assert obj_key({"metadata": {"name": "n", "namespace": "ns"}}) == ("ns", "n")
    assert obj_key({"metadata": {"name": "n"}}) == "n" and obj_key({}) == ""
