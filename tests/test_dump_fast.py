"""The fast JSON dump reader (webhook.dump, msgspec projections) and the memoised pod reader
(webhook.adapters.cluster._PodReader) give exactly what the general reader and pod_from_k8s
give: the same snapshot, the same objects, the same errors."""

from __future__ import annotations

import copy
import gc
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest

from webhook.adapters.cluster import _PodReader, build_snapshot, pod_from_k8s
from webhook.adapters.errors import AdapterError
from webhook.adapters.projection import PodStruct
from webhook.demo import DEMO_NOW, demo_objects
from webhook.diagnose import find_gang
from webhook.dump import DumpError, LazyObject, load_cluster, load_cluster_and_objects, load_objects
from webhook.engine.snapshot import ClusterSnapshot
import webhook.dump as dump_module


# ---------------------------------------------------------------- helpers


def state(snap: ClusterSnapshot) -> dict:
    """Everything a snapshot holds, comparable with ==."""
    return {
        "nodes": snap.nodes,
        "pods": snap.pods,
        "resources": snap.resources,
        "alloc": snap.alloc.tolist(),
        "cap": snap.cap.tolist(),
        "used": snap.used.tolist(),
        "ever": snap.ever_alloc.tolist(),
        "kueue": snap.kueue,
        "volcano": snap.volcano,
        "priority_classes": dict(snap.priority_classes),
        "skipped": dict(snap.skipped),
        "source": snap.source,
        "classes": snap.classes,
        "node_class": snap.node_class.tolist(),
    }


@pytest.fixture
def general_only(monkeypatch):
    """Make load_cluster use the general reader for every file."""

    def refuse(*_a, **_k):
        raise dump_module._General

    def use():
        monkeypatch.setattr(dump_module, "_read_json_fast", refuse)

    return use


def both(path, general_only) -> tuple[ClusterSnapshot, ClusterSnapshot]:
    """(load_cluster through the fast reader, through the general one); every .json file of
    ``path`` that is one JSON value must have been taken by the fast reader."""
    files = [path] if str(path).endswith(".json") else sorted(str(p) for p in Path(path).rglob("*.json"))
    for f in files:
        text = Path(f).read_text()
        try:
            json.loads(text)
        except json.JSONDecodeError:
            continue  # several concatenated values: the general reader's
        dump_module._read_json_fast(Path(f), False)  # raises _General if it would fall back
    fast = load_cluster(path)
    general_only()
    return fast, load_cluster(path)


def error_of(fn, *args):
    with pytest.raises((DumpError, AdapterError)) as e:
        fn(*args)
    return type(e.value), str(e.value)


def pod(name: str, node: str = "n1", ns: str | None = "team-a", **extra) -> dict:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "x"}, "ownerReferences": [
                         {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u", "controller": True}]},
        "spec": {"nodeName": node, "schedulerName": "default-scheduler",
                 "containers": [{"name": "c", "image": "img:1", "env": [{"name": "A", "value": "b"}],
                                 "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "4"},
                                               "limits": {"nvidia.com/gpu": "4"}}}],
                 "tolerations": [{"operator": "Exists"}]},
        "status": {"phase": "Running", "startTime": "2026-01-12T09:00:00Z", "podIP": "10.0.0.1",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }
    if ns is not None:
        obj["metadata"]["namespace"] = ns
    return _edit(obj, extra)


_DELETE = object()


def _edit(obj: dict, extra: dict) -> dict:
    """Set (or with ``_DELETE`` remove) nested fields named like ``status__phase``."""
    for path, value in extra.items():
        cur = obj
        keys = path.split("__")
        for k in keys[:-1]:
            cur = cur.setdefault(k, {})
        if value is _DELETE:
            cur.pop(keys[-1], None)
        else:
            cur[keys[-1]] = value
    return obj


def node(name: str, gpu: str = "8", **extra) -> dict:
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.count": "8"},
                     "annotations": {"a": "b"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], "providerID": "x"},
        "status": {"capacity": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"},
                   "allocatable": {"cpu": "95", "memory": "1000Gi", "nvidia.com/gpu": gpu, "pods": "110"},
                   "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                   "nodeInfo": {"kubeletVersion": "v1.31"}},
    }
    return _edit(obj, extra)


def odd_items() -> list[dict]:
    """A small cluster with the odd inputs a real dump can hold."""
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        node("n1"),
        node("n2", gpu="7", spec__unschedulable=True),
        node("n3", status=_DELETE),                                        # no status at all
        node("n4", status__allocatable=_DELETE),                           # allocatable defaults to capacity
        pod("a"),
        pod("b", status=_DELETE),                                          # a pod with no status
        pod("c", ns=None),                                                 # no namespace → default
        pod("d", node="", status__phase="Pending"),                        # unbound
        pod("e", status__phase="Succeeded"),                               # terminal: skipped
        pod("f", status__phase="Failed"),
        pod("g", spec__priorityClassName="high", metadata__labels={"kueue.x-k8s.io/queue-name": "lq",
                                                                   "kueue.x-k8s.io/max-exec-time-seconds": "3600"}),
        pod("h", spec__priority=7, spec__activeDeadlineSeconds=600,
            metadata__annotations={"gangcheck.io/expected-runtime-seconds": "120", "scheduling.k8s.io/group-name": "pg"}),
        pod("i", spec__initContainers=[{"name": "side", "restartPolicy": "Always",
                                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                                       {"name": "init", "resources": {"requests": {"cpu": "8"}}}],
            spec__overhead={"cpu": "100m"}),
        pod("j", spec__containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                                    "resources": {"requests": {"cpu": "1"}}}]),
        pod("k", spec__containers=[{"name": "c", "resources": {"requests": {"cpu": 2, "memory": "1Gi"}}}]),  # a number
        pod("l", metadata__labels={"flag": True}),                          # a label that is not a string
        pod("m", spec__resources={"requests": {"cpu": "4", "memory": "2Gi"}}),   # pod-level requests
        pod("n", metadata__ownerReferences=[{"kind": "ReplicaSet", "name": "rs-1"}]),
        pod("a", node="n2"),                                                # duplicate: the later one wins
        pod("spec-less", spec=_DELETE, status=_DELETE),
        pod("é-unicode", metadata__annotations={"note": "naïve – “quoted” 日本"}),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "x"}, "spec": {"ports": [1]}},
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
        {"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "not-core"}},   # a Pod of another group: skipped
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team-a"},
         "spec": {"clusterQueue": "cq"}},
    ]


def write(tmp_path, name: str, doc) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    return str(p)


# ---------------------------------------------------------------- same snapshot


def test_demo_cluster_as_a_json_dump_reads_the_same_both_ways(tmp_path, general_only):
    path = write(tmp_path, "demo.json", {"apiVersion": "v1", "kind": "List", "items": demo_objects()})
    fast, general = both(path, general_only)
    assert state(fast) == state(general)
    ref = build_snapshot(demo_objects(), source=path)
    assert state(fast) == state(ref)
    assert len(fast.nodes) == 403 and len(fast.pods) == len(ref.pods) == 384


def test_odd_items_read_the_same_both_ways(tmp_path, general_only):
    path = write(tmp_path, "odd.json", {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": odd_items()})
    fast, general = both(path, general_only)
    assert state(fast) == state(general)
    pods = {p.name: p for p in fast.pods}
    assert "e" not in pods and "f" not in pods and fast.skipped["Pod (Succeeded/Failed)"] == 2
    assert pods["a"].node_name == "n2"                               # the duplicate replaced the first
    assert pods["b"].phase == "Pending" and pods["b"].start_time is None
    assert pods["c"].namespace == "default"
    assert pods["g"].priority == 1000 and pods["g"].queue == "lq" and pods["g"].runtime_limit_s == 3600.0
    assert pods["h"].priority == 7 and pods["h"].runtime_limit_s == 120.0 and pods["h"].gang == "PodGroup/team-a/pg"
    # max(2 + 0.5 sidecar, 0.5 sidecar + 8 init) + 0.1 overhead cores; 8Gi + 1Gi sidecar
    assert dict(pods["i"].requests) == {"cpu": 8600, "memory": 9 * 1024**3, "nvidia.com/gpu": 4}
    assert pods["j"].host_ports[0].port == 8080
    assert dict(pods["k"].requests) == {"cpu": 2000, "memory": 1024**3}
    assert dict(pods["l"].labels) == {"flag": "True"}
    assert dict(pods["m"].requests)["cpu"] == 4000
    assert pods["n"].owner_kind == "ReplicaSet" and pods["n"].gang == ""
    assert dict(pods["spec-less"].requests) == {}
    assert dict(fast.skipped) == {"Pod (Succeeded/Failed)": 2, "Service": 1, "Widget": 1, "Pod": 1}
    assert fast.node_free("n2")["nvidia.com/gpu"] == 7 - 4           # pod "a" moved to n2
    assert [n.name for n in fast.nodes] == ["n1", "n2", "n3", "n4"]


def test_typed_list_single_object_and_several_files(tmp_path, general_only):
    items = odd_items()
    nodes = [copy.deepcopy(o) for o in items if o["kind"] == "Node"]
    for n in nodes:
        del n["kind"], n["apiVersion"]                                  # a raw API list: items untyped
    pods_ = [copy.deepcopy(o) for o in items if o["kind"] == "Pod" and o["apiVersion"] == "v1"]
    for p in pods_[:3]:
        del p["kind"]                                                   # untyped, apiVersion kept
    d = tmp_path / "dump"
    d.mkdir()
    write(d, "a-nodes.json", {"apiVersion": "v1", "kind": "NodeList", "items": nodes})
    write(d, "b-pods.json", {"apiVersion": "v1", "kind": "PodList", "items": pods_})
    write(d, "c-pod.json", pod("single", node="n3"))                    # one object, not a list
    (d / "d-two.json").write_text(json.dumps(pod("cat1")) + "\n" + json.dumps(pod("cat2")))   # concatenated values
    (d / "e-pc.yaml").write_text("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n")
    write(d, "f-empty-list.json", {"apiVersion": "v1", "kind": "List", "items": None})
    fast, general = both(str(d), general_only)
    assert state(fast) == state(general)
    assert {"single", "cat1", "cat2", "a"} <= {p.name for p in fast.pods}
    assert len(fast.nodes) == 4 and fast.priority_classes == {"high": 1000}


def test_objects_for_lookups_equal_load_objects(tmp_path):
    path = write(tmp_path, "odd.json", {"apiVersion": "v1", "kind": "List", "items": odd_items()})
    snap, objs = load_cluster_and_objects(path)
    full = load_objects(path)
    assert len(objs) == len(full)
    lazy = [o for o in objs if isinstance(o, LazyObject)]
    assert len(lazy) == sum(1 for o in full if o["kind"] in ("Pod", "Node"))
    assert all(o._full is None for o in lazy)                           # nothing decoded yet
    assert [(o["kind"], o["apiVersion"]) for o in objs] == [(o["kind"], o["apiVersion"]) for o in full]
    assert all(o._full is None for o in lazy)                           # kind and apiVersion need no decoding
    assert [o.ref for o in lazy] == [((o["metadata"].get("namespace") or "default"), o["metadata"]["name"])
                                      for o in full if o["kind"] in ("Pod", "Node")]
    assert objs == full and [dict(o) for o in objs] == full
    assert state(snap) == state(load_cluster(path))


def test_untyped_item_lazy_object_takes_the_list_kind(tmp_path):
    n = node("n1")
    del n["kind"], n["apiVersion"]
    path = write(tmp_path, "nodes.json", {"apiVersion": "v1", "kind": "NodeList", "items": [n]})
    _, objs = load_cluster_and_objects(path)
    assert isinstance(objs[0], LazyObject) and dict(objs[0]) == load_objects(path)[0]
    assert objs[0]["kind"] == "Node" and objs[0]["apiVersion"] == "v1" and objs[0]["status"]["capacity"]["cpu"] == "96"


def test_find_gang_from_lazily_read_pods_matches_full_objects(tmp_path):
    items = [node("n1"), node("n2")] + [pod(f"train-{i}", node=f"n{1 + i % 2}") for i in range(4)]
    path = write(tmp_path, "dump.json", {"apiVersion": "v1", "kind": "List", "items": items})
    snap, objs = load_cluster_and_objects(path)
    full = load_objects(path)
    g1, how1 = find_gang("job/train", "team-a", snap, objs)
    g2, how2 = find_gang("job/train", "team-a", snap, full)
    assert (g1, how1) == (g2, how2) and g1.pods == 4
    assert g1.pod_sets[0].tolerations                                   # restored from the raw pod spec
    # A Pod named directly is looked up among the objects (here: not a pod group, so not found).
    assert outcome(find_gang, "pod/train-1", "team-a", snap, objs) == outcome(find_gang, "pod/train-1", "team-a", snap, full)
    assert outcome(find_gang, "pod/train-1", "team-a", snap, objs)[0] == "TargetNotFound"


def outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001 - comparing what both paths do
        return type(exc).__name__, str(exc)


# ---------------------------------------------------------------- same errors


@pytest.mark.parametrize(
    "doc",
    [
        [pod("a")],                                                       # a JSON array
        {"apiVersion": "v1", "kind": "List", "items": [pod("a"), 5]},     # an item that is not an object
        {"apiVersion": "v1", "kind": "List", "items": [{"metadata": {"name": "x"}}]},   # no kind in an untyped List
        {"apiVersion": "v1", "kind": "List", "items": {"a": 1}},          # items not a list
        {"kind": "List", "items": []},                                    # no apiVersion
        "just a string",
    ],
)
def test_bad_documents_give_the_same_dump_error(tmp_path, general_only, doc):
    path = write(tmp_path, "bad.json", doc)
    fast = error_of(load_cluster, path)
    general_only()
    assert error_of(load_cluster, path) == fast
    assert fast[0] is DumpError and fast[1].startswith(f"{path}: document 1")


@pytest.mark.parametrize(
    "item,detail",
    [
        (pod("x", metadata__name=5), "metadata.name"),
        (pod("x", spec__containers={"c": 1}), "spec.containers"),
        (pod("x", spec__containers=[{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]), "spec.containers[0].resources.requests.cpu"),
        (pod("x", status__startTime="yesterday"), "status.startTime"),
        (pod("x", spec__priority="high"), "spec.priority"),
        (pod("x", metadata__ownerReferences={"kind": "Job"}), "metadata.ownerReferences"),
        (node("x", status__capacity={"cpu": "many"}), "status.capacity.cpu"),
    ],
)
def test_bad_objects_give_the_same_adapter_error(tmp_path, general_only, item, detail):
    path = write(tmp_path, "bad.json", {"apiVersion": "v1", "kind": "List", "items": [node("n0"), item]})
    fast = error_of(load_cluster, path)
    general_only()
    assert error_of(load_cluster, path) == fast
    assert fast[0] is AdapterError and fast[1].startswith(f"{path}: document 1, item 2: ") and detail in fast[1]


def test_syntax_error_and_invalid_utf8_give_the_same_errors(tmp_path, general_only):
    bad = tmp_path / "bad.json"
    bad.write_text('{"apiVersion": "v1", "kind": "List", "items": [\n  {"kind": }\n]}')
    latin = tmp_path / "latin.json"
    latin.write_bytes(json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod("a")]}).replace("team-a", "t\udce9").encode("utf-8", "surrogateescape"))
    fast = [error_of(load_cluster, str(bad)), error_of(load_cluster, str(latin))]
    general_only()
    assert [error_of(load_cluster, str(bad)), error_of(load_cluster, str(latin))] == fast
    assert "line 2" in fast[0][1] and "not UTF-8" in fast[1][1]


def test_error_in_a_later_file_names_that_file(tmp_path, general_only):
    d = tmp_path / "dump"
    d.mkdir()
    write(d, "a.json", {"apiVersion": "v1", "kind": "List", "items": [node("n1"), pod("p")]})
    (d / "b.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n2}\n---\napiVersion: v1\nkind: Node\nmetadata: {}\n")
    fast = error_of(load_cluster, str(d))
    general_only()
    assert error_of(load_cluster, str(d)) == fast
    assert fast[1].startswith(f"{d / 'b.yaml'}: document 2: Node <unnamed>: metadata.name")


def test_load_restores_the_collector_state(tmp_path):
    path = write(tmp_path, "odd.json", {"apiVersion": "v1", "kind": "List", "items": odd_items()})
    assert gc.isenabled()
    load_cluster(path)
    assert gc.isenabled()
    gc.disable()
    try:
        load_cluster(path)
        assert not gc.isenabled()
    finally:
        gc.enable()


# ---------------------------------------------------------------- the memoised pod reader


def test_pod_reader_equals_pod_from_k8s_field_by_field():
    pcs = {"high": 1000}
    objs = [o for o in odd_items() if o["kind"] == "Pod"] + [o for o in demo_objects() if o["kind"] == "Pod"][:400]
    objs += [pod("bool-port", spec__containers=[{"name": "c", "ports": [{"hostPort": True}]}]),
             pod("str-prio", spec__priority="5"), pod("none-labels", metadata__labels=None),
             pod("dt", status__startTime=""), pod("ports-str", spec__containers=[{"name": "c", "ports": [{"hostPort": "81"}]}])]
    read = _PodReader(pcs, 5)
    for o in objs:
        try:
            want = pod_from_k8s(o, pcs, 5)
        except AdapterError as exc:
            with pytest.raises(AdapterError) as got:
                read(o)
            assert str(got.value) == str(exc)
            continue
        got = read(o)
        fields = want.__struct_fields__
        assert got == want and {f: (type(getattr(got, f)), getattr(got, f)) for f in fields} == {f: (type(getattr(want, f)), getattr(want, f)) for f in fields}
    assert len(read._shapes) < len(objs)                                 # shapes were shared



def _as_struct(obj: dict, item_kind: str = "", api: str = "v1"):
    """``obj`` as the JSON dump reader hands it to build_snapshot: a PodStruct (or a dict)."""
    return dump_module._decode_item(msgspec.Raw(json.dumps(obj).encode()), item_kind, api)[0]


STRUCT_ODD_PODS = [
    pod("esc", metadata__annotations={"x": "a\\b", "scheduling.k8s.io/group-name": "pg-esc"}),  # a backslash
    pod("ann-list", metadata__annotations=["a"]),                        # annotations not a mapping
    pod("ann-null", metadata__annotations=None),
    pod("ann-num-group", metadata__annotations={"scheduling.k8s.io/group-name": 5}),
    pod("labels-list", metadata__labels=["a"]),
    pod("labels-none-value", metadata__labels={"a": None}),
    pod("owner-dict", metadata__ownerReferences={"kind": "Job"}),
    pod("owner-two", metadata__ownerReferences=[{"kind": "Job", "name": "j"}, {"kind": "RS", "name": "r", "controller": True}]),
    pod("owner-no-name", metadata__ownerReferences=[{"kind": "Job", "controller": True}]),
    pod("restarts", status__containerStatuses=[{"restartCount": 3}, {"restartCount": 2, "name": "b"}, {}],
        status__conditions=[{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]),
    pod("restarts-str", status__containerStatuses=[{"restartCount": "3"}]),
    pod("not-ready", status__conditions=[{"type": "Ready", "status": "False"}]),
    pod("two-containers", spec__containers=[{"name": "a", "resources": {"requests": {"cpu": "1"}}},
                                            {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]),
    pod("null-containers", spec__containers=None),
    pod("init-null-res", spec__initContainers=[{"name": "i", "resources": None}]),
    pod("deadline-0", spec__activeDeadlineSeconds=0),
    pod("deadline-float", spec__activeDeadlineSeconds=5.0),
    pod("prio-bool", spec__priority=True),
    pod("pcn-unknown", spec__priorityClassName="nope"),
    pod("pcn-system", spec__priorityClassName="system-node-critical"),
    pod("runtime-bad", metadata__annotations={"gangcheck.io/expected-runtime-seconds": "soon"},
        metadata__labels={"kueue.x-k8s.io/max-exec-time-seconds": "-5"}),
    pod("empty-name", metadata__name=""),
    pod("ns-empty", metadata__namespace=""),
    pod("status-list", status=[1]),
    pod("port-bool", spec__containers=[{"name": "c", "ports": [{"hostPort": True}]}]),
]


def test_struct_pod_reader_equals_pod_from_k8s_field_by_field():
    pcs = {"high": 1000}
    objs = [o for o in odd_items() if o["kind"] == "Pod"] + [o for o in demo_objects() if o["kind"] == "Pod"][:400]
    objs += STRUCT_ODD_PODS
    read = _PodReader(pcs, 5)
    structs = 0
    for o in objs:
        p = _as_struct(o)
        if type(p) is not PodStruct:
            continue  # a field of an unexpected type: read as a dict (compared in the tests above)
        structs += 1
        try:
            want = pod_from_k8s(o, pcs, 5)
        except AdapterError as exc:
            with pytest.raises(AdapterError) as got:
                read.projected(p)
            assert str(got.value) == str(exc)
            continue
        got = read.projected(p)
        fields = want.__struct_fields__
        assert {f: (type(getattr(got, f)), getattr(got, f)) for f in fields} == {f: (type(getattr(want, f)), getattr(want, f)) for f in fields}
    assert structs > 400                                                  # the struct path was exercised
    assert len(read._raw_shapes) < structs / 4                            # shapes were shared


def test_struct_pod_reader_takes_plain_pods_without_the_fallback(monkeypatch):
    import webhook.adapters.pod_reader as cluster_module

    def no_fallback(*_a, **_k):
        raise AssertionError("pod_from_k8s called")

    monkeypatch.setattr(cluster_module, "pod_from_k8s", no_fallback)
    read = _PodReader()
    pods = [o for o in demo_objects() if o["kind"] == "Pod"][:50] + [STRUCT_ODD_PODS[0], STRUCT_ODD_PODS[9]]
    got = [read.projected(_as_struct(o)) for o in pods]
    assert got[-2].gang == "PodGroup/team-a/pg-esc"                     # found through the generic decoding
    assert (got[-1].restarts, got[-1].ready) == (5, True)
    second = read.projected(_as_struct(STRUCT_ODD_PODS[9]))
    assert second.labels == got[-1].labels and second.labels is got[-1].labels   # equal label sets share one map


def test_struct_path_reads_escaped_annotation_keys(tmp_path, general_only):
    # "\/" is a legal JSON escape of "/": the raw bytes then do not contain the key as written.
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("n1"), pod("a", metadata__annotations={"scheduling.k8s.io/group-name": "pg"})]})
    text = text.replace("scheduling.k8s.io/group-name", "scheduling.k8s.io\\/group-name")
    path = tmp_path / "esc.json"
    path.write_text(text)
    fast, general = both(str(path), general_only)
    assert state(fast) == state(general) and fast.pods[0].gang == "PodGroup/team-a/pg"


def test_typed_pod_list_items_take_the_list_kind_on_the_struct_path(tmp_path, general_only):
    items = [{k: v for k, v in pod(n).items() if k not in ("kind", "apiVersion")} for n in ("a", "b")]
    items.append({k: v for k, v in pod("bad", status__startTime="yesterday").items() if k != "kind"})
    path = write(tmp_path, "pods.json", {"apiVersion": "v1", "kind": "PodList", "items": items[:2]})
    fast, general = both(path, general_only)
    assert state(fast) == state(general) and [p.name for p in fast.pods] == ["a", "b"]
    bad = write(tmp_path, "bad.json", {"apiVersion": "v1", "kind": "PodList", "items": items})
    err = error_of(load_cluster, bad)
    general_only()
    assert error_of(load_cluster, bad) == err and "Pod team-a/bad" in err[1] and "status.startTime" in err[1]


def test_pod_reader_never_confuses_equal_looking_quantities():
    # 1, 1.0 and True hash alike: only string quantities are memoised.
    read = _PodReader()
    a = read(pod("a", spec__containers=[{"name": "c", "resources": {"requests": {"cpu": "1"}}}]))
    b = read(pod("b", spec__containers=[{"name": "c", "resources": {"requests": {"cpu": 1}}}]))
    assert dict(a.requests) == dict(b.requests) == {"cpu": 1000}
    with pytest.raises(AdapterError, match="cpu"):
        read(pod("c", spec__containers=[{"name": "c", "resources": {"requests": {"cpu": True}}}]))
    assert dict(read(pod("d", metadata__labels={"x": 1})).labels) == {"x": "1"}
    assert dict(read(pod("e", metadata__labels={"x": True})).labels) == {"x": "True"}


def test_snapshot_matrices_from_demo_dump_are_int64_and_match(tmp_path):
    path = write(tmp_path, "demo.json", {"apiVersion": "v1", "kind": "List", "items": demo_objects(DEMO_NOW)})
    snap = load_cluster(path)
    assert snap.used.dtype == np.int64 and int(snap.used[:, snap.col["nvidia.com/gpu"]].sum()) > 0


# ---------------------------------------------------------------- parallel reading (forked workers)


@pytest.fixture
def parallel(monkeypatch):
    """Read every list in parallel: 3 processes, however small the list."""
    monkeypatch.setattr(dump_module, "PARALLEL_MIN_ITEMS", 1)
    monkeypatch.setenv(dump_module.WORKERS_ENV, "3")
    assert dump_module._workers(10) == 3                                  # the fork path is really taken
    forks = []
    real = dump_module._Forked.__init__

    def counting(self, *a, **k):
        forks.append(a[-1])
        real(self, *a, **k)

    monkeypatch.setattr(dump_module._Forked, "__init__", counting)
    return forks


def big_odd_dump(tmp_path) -> str:
    items = odd_items() + demo_objects() + STRUCT_ODD_PODS[2:4] + [pod(f"x{i}", spec__priorityClassName="high") for i in range(40)]
    items.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "late"}, "value": 77})
    items += [pod(f"late{i}", spec__priorityClassName="late") for i in range(5)]   # a class defined in another share
    return write(tmp_path, "big.json", {"apiVersion": "v1", "kind": "List", "items": items})


def test_parallel_read_equals_sequential_and_general(tmp_path, general_only, parallel, monkeypatch):
    path = big_odd_dump(tmp_path)
    snap, objects = load_cluster_and_objects(path)
    assert parallel == [3]
    monkeypatch.setenv(dump_module.WORKERS_ENV, "1")
    seq, seq_objects = load_cluster_and_objects(path)
    assert state(snap) == state(seq)
    assert [dict(o) for o in objects] == [dict(o) for o in seq_objects]
    assert [getattr(o, "ref", None) for o in objects] == [getattr(o, "ref", None) for o in seq_objects]
    pods = {p.name: p for p in snap.pods}
    assert pods["x0"].priority == 1000 and pods["late4"].priority == 77 and pods["h"].priority == 7
    general_only()
    assert state(snap) == state(load_cluster(path))


def test_parallel_typed_pod_list(tmp_path, general_only, parallel):
    items = [{k: v for k, v in pod(f"p{i}").items() if k != "kind"} for i in range(30)]
    path = write(tmp_path, "pods.json", {"apiVersion": "v1", "kind": "PodList", "items": items})
    snap, objects = load_cluster_and_objects(path)
    assert len(snap.pods) == 30 and {o["kind"] for o in objects} == {"Pod"} and objects[-1].ref == ("team-a", "p29")
    general_only()
    assert state(snap) == state(load_cluster(path))


def test_parallel_read_reports_errors_as_sequential(tmp_path, parallel, monkeypatch):
    items = [node("n0")] + [pod(f"p{i}") for i in range(20)] + [pod("bad", status__startTime="yesterday")] + [pod("q")]
    path = write(tmp_path, "bad.json", {"apiVersion": "v1", "kind": "List", "items": items})
    err = error_of(load_cluster, path)
    assert parallel == [3]
    monkeypatch.setenv(dump_module.WORKERS_ENV, "1")
    assert error_of(load_cluster, path) == err
    assert err[0] is AdapterError and err[1].startswith(f"{path}: document 1, item 22: Pod team-a/bad")


@pytest.mark.parametrize("failure", ["raise", "garbage", "exit"])
def test_a_failed_worker_costs_time_never_a_result(tmp_path, parallel, monkeypatch, failure):
    import os

    def broken(*_a, **_k):
        if failure == "raise":
            raise RuntimeError("worker broke")
        if failure == "exit":
            os._exit(3)
        return b"\x93not a payload"

    path = big_odd_dump(tmp_path)
    monkeypatch.setattr(dump_module, "_convert_share", broken)
    snap = load_cluster(path)
    monkeypatch.setenv(dump_module.WORKERS_ENV, "1")
    assert parallel == [3] and state(snap) == state(load_cluster(path))


def test_workers_only_for_large_lists_and_without_other_threads(monkeypatch):
    import threading

    monkeypatch.setenv(dump_module.WORKERS_ENV, "4")
    assert dump_module._workers(dump_module.PARALLEL_MIN_ITEMS - 1) == 1
    assert dump_module._workers(dump_module.PARALLEL_MIN_ITEMS) == 4
    monkeypatch.setenv(dump_module.WORKERS_ENV, "lots")
    assert dump_module._workers(10**6) == 1
    monkeypatch.setenv(dump_module.WORKERS_ENV, "4")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert dump_module._workers(10**6) == 1                         # forking a threaded process is unsafe
    finally:
        stop.set()
        t.join()
