"""The embedded demo cluster (webhook.demo)."""

from __future__ import annotations

import json
from collections import Counter

import yaml

from webhook.adapters.cluster import TERMINAL_PODS_KEY
from webhook.demo import DEMO_NOW, demo_description, demo_layout, demo_objects, demo_snapshot
from webhook.dump import load_cluster
from webhook.engine.model import REPAIRABLE_TAINTS

GPU = "nvidia.com/gpu"
GI = 2**30


def h100_rows(s):
    return [i for i, n in enumerate(s.nodes) if n.name.startswith("h100-")]


def test_node_counts_and_names():
    s = demo_snapshot()
    assert len(s.nodes) == 403
    names = [n.name for n in s.nodes]
    assert names[:2] == ["h100-000", "h100-001"] and "h100-383" in names and "h100-384" not in names
    assert sum(n.startswith("cpu-") for n in names) == 16 and sum(n.startswith("cp-") for n in names) == 3
    gpu_nodes = [n for n in s.nodes if n.capacity.get(GPU)]
    assert len(gpu_nodes) == 384
    assert all(n.labels["nvidia.com/gpu.present"] == "true" and n.labels["nvidia.com/gpu.family"] == "hopper"
               and n.labels["nvidia.com/gpu.count"] == "8" for n in gpu_nodes)
    assert Counter(n.labels["nvidia.com/gpu.product"] for n in gpu_nodes) == {"NVIDIA-H100-80GB-HBM3": 336, "NVIDIA-H100-NVL": 48}
    n = gpu_nodes[0]
    assert dict(n.capacity) == {"cpu": 208000, "memory": 2048 * GI, "pods": 110, GPU: 8}
    assert Counter(n.labels["topology.kubernetes.io/zone"] for n in gpu_nodes) == {"zone-a": 192, "zone-b": 192}
    # 12 racks of 32 under 4 blocks of 3 racks; node h100-NNN in rack NNN // 32, a block inside one zone
    assert Counter(n.labels["topology.example.com/rack"] for n in gpu_nodes) == {f"rack-{r:02d}": 32 for r in range(12)}
    assert all(n.labels["topology.example.com/rack"] == f"rack-{int(n.name[5:]) // 32:02d}" for n in gpu_nodes)
    blocks = {}
    for n in gpu_nodes:
        blocks.setdefault(n.labels["topology.example.com/block"], set()).add(
            (n.labels["topology.example.com/rack"], n.labels["topology.kubernetes.io/zone"]))
    assert {b: len(v) for b, v in blocks.items()} == {"block-0": 3, "block-1": 3, "block-2": 3, "block-3": 3}
    assert all(len({z for _, z in v}) == 1 for v in blocks.values())


def test_free_whole_nodes_are_scattered_over_the_racks():
    # The topology story: 12 whole free nodes, but no rack holds more than 2 of them, so a gang
    # of 8 whole-node pods required in one rack waits.
    layout = demo_layout()
    per_rack = Counter(int(name[5:]) // 32 for name in layout["free"])
    assert sum(per_rack.values()) == 12 and max(per_rack.values()) == 2
    assert sorted(r for r, c in per_rack.items() if c == 2) == [2, 7, 8, 10]
    assert Counter(r // 3 for r in per_rack.elements()) == {0: 3, 1: 2, 2: 4, 3: 3}


def test_kueue_topology_objects():
    objs = demo_objects()
    topo = [o for o in objs if o["kind"] == "Topology"]
    assert topo == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
                     "spec": {"levels": [{"nodeLabel": "topology.example.com/block"}, {"nodeLabel": "topology.example.com/rack"},
                                         {"nodeLabel": "kubernetes.io/hostname"}]}}]
    flavor = next(o for o in objs if o["kind"] == "ResourceFlavor" and o["metadata"]["name"] == "h100")
    assert flavor["spec"]["topologyName"] == "default"
    assert demo_snapshot().kueue.flavors["h100"].topology_name == "default"


def test_free_gpu_histogram():
    s = demo_snapshot()
    g = s.col[GPU]
    hist = Counter(int(s.free[i, g]) for i in h100_rows(s))
    # 300 half used; 60 full + 1 with allocatable 0; 12 free + 8 cordoned + 3 NotReady
    assert hist == {4: 300, 0: 61, 8: 23}
    assert int(s.free[h100_rows(s), g].sum()) == 300 * 4 + 23 * 8


def test_node_states():
    s = demo_snapshot()
    g = s.col[GPU]
    h100 = [s.nodes[i] for i in h100_rows(s)]
    cordoned = [n for n in h100 if n.unschedulable]
    assert len(cordoned) == 8
    assert all(any(t.key == "node.kubernetes.io/unschedulable" and t.effect == "NoSchedule" for t in n.taints) for n in cordoned)
    notready = [n for n in h100 if n.ready is False]
    assert len(notready) == 3
    assert all(any(t.key == "node.kubernetes.io/not-ready" and t.effect == "NoSchedule" for t in n.taints) for n in notready)
    broken = [n for n in h100 if n.allocatable[GPU] < n.capacity[GPU]]
    assert [(n.capacity[GPU], n.allocatable[GPU]) for n in broken] == [(8, 0)]
    # wholly free and schedulable: ready, not cordoned, no taints, nothing bound, 8 GPUs allocatable
    free = [
        n for n in h100
        if n.ready and not n.unschedulable and not n.taints and n.name not in s.pods_by_node and n.allocatable[GPU] == 8
    ]
    assert len(free) == 12
    assert all(int(s.free[s.node_index[n.name], g]) == 8 for n in free)
    layout = demo_layout()
    assert {k: len(v) for k, v in layout.items()} == {
        "half": 300, "full8": 44, "full4x2": 16, "free": 12, "cordoned": 8, "notready": 3, "plugin-down": 1}
    assert sorted(n.name for n in free) == list(layout["free"])
    assert sorted(n.name for n in cordoned) == list(layout["cordoned"])
    assert [n.name for n in broken] == list(layout["plugin-down"])
    # only repairable taints on GPU nodes
    assert {t.key for n in h100 for t in n.taints} <= REPAIRABLE_TAINTS
    cp = [n for n in s.nodes if n.name.startswith("cp-")]
    assert all(n.taints[0].key == "node-role.kubernetes.io/control-plane" and "node-role.kubernetes.io/control-plane" in n.labels for n in cp)
    cpu = [n for n in s.nodes if n.name.startswith("cpu-")]
    assert all(dict(n.allocatable) == {"cpu": 64000, "memory": 256 * GI, "pods": 110} for n in cpu)


def test_nvl_nodes_are_48_half_used_nodes():
    s = demo_snapshot()
    g = s.col[GPU]
    layout = demo_layout()
    nvl = sorted(n.name for n in s.nodes if n.labels.get("nvidia.com/gpu.product") == "NVIDIA-H100-NVL")
    assert len(nvl) == 48
    # drawn from the half-used part (the 48 highest-numbered), so each has 4 GPUs free now
    assert nvl == sorted(layout["half"])[-48:]
    assert all(int(s.free[s.node_index[name], g]) == 4 for name in nvl)
    assert not set(nvl) & set(layout["free"])
    # the h100 flavor still selects every H100 node
    sel = dict(s.kueue.flavors["h100"].node_labels)
    assert sum(all(n.labels.get(k) == v for k, v in sel.items()) for n in s.nodes) == 384


def test_pods_gangs_and_times():
    s = demo_snapshot()
    gpu_pods = [p for p in s.pods if p.requests.get(GPU)]
    assert len(gpu_pods) == 300 + 44 + 32
    assert Counter(p.namespace for p in gpu_pods) == {"team-vision": 120 + 44, "team-speech": 100, "team-rec": 80 + 32}
    assert all(p.start_time is not None and p.start_time < DEMO_NOW for p in gpu_pods)
    with_deadline = [p for p in gpu_pods if p.deadline_s]
    assert 0 < len(with_deadline) < len(gpu_pods)
    assert all(p.start_time + p.deadline_s > DEMO_NOW for p in with_deadline)  # none overdue
    pretrain = [p for p in gpu_pods if p.gang == "PyTorchJob/team-vision/vision-pretrain"]
    assert len(pretrain) == 44 and all(p.requests[GPU] == 8 and p.priority == 10000 for p in pretrain)
    assert len({p.node_name for p in s.pods if p.gang == "Job/team-rec/rec-ranker-large"}) == 16
    assert all(p.queue for p in gpu_pods)
    skipped = dict(s.skipped)
    # The Kueue Topology is skipped until the cluster readers read Topology objects (#13's adapters).
    assert skipped.pop("Topology", 0) + len(s.topology.kueue) == 1
    assert skipped == {"Namespace": 5, "Service": 1, "Event": 3, TERMINAL_PODS_KEY: 2}


def test_queues():
    s = demo_snapshot()
    k = s.kueue
    assert set(k.flavors) == {"h100", "cpu-only"}
    assert dict(k.flavors["h100"].node_labels) == {"nvidia.com/gpu.family": "hopper"}
    llm = k.cluster_queues["team-llm"]
    assert llm.cohort == "research"
    h100 = llm.resource_groups[0].flavors[0]
    assert h100.name == "h100"
    assert h100.resources[GPU].nominal == 512 and h100.resources[GPU].borrowing_limit == 0
    assert llm.usage[("h100", GPU)] == 0
    vision = k.cluster_queues["team-vision"]
    assert vision.cohort == "research"
    used = sum(p.requests.get(GPU, 0) for p in s.pods if p.queue in ("vision-queue", "speech-queue", "rec-queue"))
    assert vision.usage[("h100", GPU)] == used == 1680
    assert k.local_queues[("llm", "llm-queue")].cluster_queue == "team-llm"
    assert s.volcano.queues["research"].capability == {GPU: 256}
    assert dict(s.priority_classes) == {"research-high": 10000, "research-normal": 1000, "batch-low": 100}


def test_deterministic_and_cached():
    a, b = demo_objects(), demo_objects()
    assert a == b and a is not b and a[0] is not b[0]
    assert json.dumps(a, sort_keys=True) == json.dumps(build_objects_fresh(), sort_keys=True)
    assert demo_snapshot() is demo_snapshot()
    later = demo_objects(now=DEMO_NOW + 3600)
    assert later != a and len(later) == len(a)


def build_objects_fresh():
    from webhook.demo import _build

    return _build(DEMO_NOW)[0]


def test_demo_round_trips_through_a_yaml_dump(tmp_path):
    f = tmp_path / "demo.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": demo_objects()}))
    s, d = load_cluster(str(f)), demo_snapshot()
    assert s.nodes == d.nodes and s.pods == d.pods
    assert s.kueue == d.kueue and s.volcano == d.volcano
    assert dict(s.skipped) == dict(d.skipped)


def test_description():
    text = demo_description()
    assert len(text.splitlines()) == 5
    assert "384" in text and "12 racks of 32" in text and "512" in text
