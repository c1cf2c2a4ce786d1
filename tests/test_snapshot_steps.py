"""The named steps of the cluster-state readers (webhook.adapters.snapshot_builder, priority,
meta, kueue_objects), each called on its own."""

from __future__ import annotations

import pytest

from webhook.adapters.errors import AdapterError
from webhook.adapters.kueue_objects import _named_entries
from webhook.adapters.meta import bool_field, object_name, object_namespace, signed_int, str_map
from webhook.adapters.pod_reader import _PodReader
from webhook.adapters.pods import TERMINAL_PODS_KEY
from webhook.adapters.priority import SYSTEM_PRIORITY_CLASSES, class_priority
from webhook.adapters.snapshot_builder import _READERS, _Contents, _flatten, _read_priority_classes


def pc(name, value, default=None):
    obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    if default is not None:
        obj["globalDefault"] = default
    return obj


def node(name, gpus="8"):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": gpus}}}


def test_class_priority_prefers_the_clusters_class_then_the_system_class_then_the_default():
    classes = {"training": 1000, "system-node-critical": 5}
    assert class_priority("training", classes, 7) == 1000
    assert class_priority("system-node-critical", classes, 7) == 5                 # a class of that name wins
    assert class_priority("system-cluster-critical", classes, 7) == SYSTEM_PRIORITY_CLASSES["system-cluster-critical"] == 2000000000
    assert class_priority("nope", classes, 7) == 7


def test_priority_classes_are_read_before_anything_else_and_the_last_default_wins():
    items = list(_flatten([node("n1"), pc("low", 10, True), {"kind": "List", "items": [pc("high", 100, True)]}, pc("mid", 50)]))
    assert [pos for pos, _ in items] == [0, 1, 2, 3]
    assert _read_priority_classes(items, "dump.yaml") == ({"low": 10, "high": 100, "mid": 50}, 100)


def test_the_first_step_reports_a_non_mapping_before_a_bad_object_earlier_in_the_list():
    items = list(_flatten([node("n1", gpus="eight"), pc("ok", 1), 42]))
    with pytest.raises(AdapterError) as err:
        _read_priority_classes(items, "dump.yaml")
    assert str(err.value) == "dump.yaml: expected a Kubernetes object (a mapping), got int"
    assert err.value.position == 2


def test_the_first_step_names_a_bad_priority_class_and_its_position():
    with pytest.raises(AdapterError) as err:
        _read_priority_classes(list(_flatten([node("n1"), pc("p", "high")])), "s")
    assert str(err.value) == "s: PriorityClass p: value: expected an integer, got 'high'"
    assert err.value.position == 1


def test_contents_keep_the_last_object_of_a_key_and_count_what_they_skip():
    contents = _Contents(_PodReader({"training": 1000}))
    for obj in [
        node("n1", "4"), node("n2"), node("n1", "8"),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
         "spec": {"priorityClassName": "training", "nodeName": "n1"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "done"}, "status": {"phase": "Succeeded"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "a"}},
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "a"},
         "spec": {"minMember": 3}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
        {"apiVersion": "v1", "metadata": {"name": "kindless"}},
        pc("training", 1000),
    ]:
        contents.add(obj)
    nodes = contents.collections["nodes"]
    assert list(nodes) == ["n1", "n2"]                                   # first position, last value
    assert nodes["n1"].allocatable["nvidia.com/gpu"] == 8
    ((key, pod),) = contents.pods.items()
    assert key == ("a", "p") and pod.priority == 1000 and pod.node_name == "n1"
    ((pg_key, pg),) = contents.collections["pod_groups"].items()
    assert pg_key == ("a", "g") and (pg.api_group, pg.min_member) == ("scheduling.x-k8s.io", 3)
    assert contents.skipped == {TERMINAL_PODS_KEY: 1, "Service": 1, "<no kind>": 1}
    snap = contents.snapshot({"training": 1000}, "src", 12.5)
    assert [n.name for n in snap.nodes] == ["n1", "n2"] and (snap.source, snap.as_of) == ("src", 12.5)
    assert dict(snap.volcano.pod_groups) == {("a", "g"): pg}


def test_every_reader_in_the_table_fills_a_collection_the_snapshot_reads():
    used = {"nodes", "flavors", "cluster_queues", "local_queues", "cohorts", "workloads", "volcano_queues", "pod_groups", "budgets",
            "nodepools", "nodeclaims", "provisioning_requests", "ca_status",   # these four: snapshot.autoscaling
            "kueue_topologies", "kai_topologies", "hypernodes"}                # these three: snapshot.topology
    assert {collection for _, collection, _ in _READERS.values()} == used
    assert ("", "Pod") not in _READERS and ("scheduling.k8s.io", "PriorityClass") not in _READERS   # their own steps


def test_named_entries_are_read_in_order_and_name_the_entry_without_a_name():
    value = [{"name": "a", "x": 1}, {"name": "b"}]
    assert list(_named_entries(value, "spec.flavors", "flavor")) == [("spec.flavors[0]", value[0], "a"), ("spec.flavors[1]", value[1], "b")]
    entries = _named_entries([{"name": "a"}, {"name": ""}], "spec.flavors", "flavor")
    assert next(entries)[2] == "a"                                       # lazily: the bad entry is reached second
    with pytest.raises(AdapterError, match=r"^spec\.flavors\[1\]\.name: expected a flavor name$"):
        next(entries)


def test_meta_readers_name_the_field_and_what_was_expected():
    assert object_name({"metadata": {"name": "x"}}) == "x"
    assert object_namespace({"metadata": {}}) == "default" and object_namespace({"metadata": {"namespace": ""}}, "kube") == "kube"
    assert str_map({"a": None, "b": 3}, "metadata.labels") == {"a": "", "b": "3"}
    assert (bool_field("TRUE", "f", False), bool_field(None, "f", True)) == (True, True)
    assert signed_int("-12", "spec.priority") == -12
    for call, message in [
        (lambda: object_name({"metadata": {"name": ""}}), "metadata.name: expected a non-empty string"),
        (lambda: object_namespace({"metadata": {"namespace": 3}}), "metadata.namespace: expected a string, got int"),
        (lambda: bool_field("yes", "spec.unschedulable", False), "spec.unschedulable: expected true or false, got 'yes'"),
        (lambda: signed_int(True, "spec.priority"), "spec.priority: expected an integer, got True"),
        (lambda: signed_int("1.5", "value"), "value: expected an integer, got '1.5'"),
    ]:
        with pytest.raises(AdapterError) as err:
            call()
        assert str(err.value) == message
