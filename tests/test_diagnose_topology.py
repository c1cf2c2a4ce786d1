"""diagnose's topology step (#13): per domain of a required level, the pods that fit now and ever,
the closest domains first — on the demo's racks and blocks and against a node-by-node count."""

from __future__ import annotations

import json
import random

import numpy as np
import yaml

import pytest

from builders import GPU, gang, node, pod, pod_set, snapshot
from topology_clusters import BLOCK, RACK, random_cluster
from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.demo import DEMO_NOW, demo_objects, demo_snapshot
from webhook.diagnose import diagnose
from webhook.diagnose.by_domain import domain_fragmentation
from webhook.diagnose.render_text import render_diagnosis
from webhook.diagnose.report import DiagnosisReport
from webhook.engine.model import TopologyRequest, TopologyState


# ---------------------------------------------------------------- diagnose's topology step


def rack_job(pods: int, level: str = RACK) -> dict:
    return yaml.safe_load(f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: rack-{pods}x8, namespace: llm, labels: {{kueue.x-k8s.io/queue-name: llm-queue}}}}
spec:
  parallelism: {pods}
  completions: {pods}
  completionMode: Indexed
  template:
    metadata:
      annotations: {{kueue.x-k8s.io/podset-required-topology: {level}}}
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: registry.example.com/train:2025.05
        resources:
          requests: {{nvidia.com/gpu: "8", cpu: "96", memory: 1000Gi}}
          limits: {{nvidia.com/gpu: "8", memory: 1000Gi}}
""")


def topology_step(rep: dict) -> dict:
    return next(s for s in rep["steps"] if s["name"] == "topology")


def test_demo_8_pods_in_one_rack_wait():
    rep = diagnose(demo_snapshot(), adapt(rack_job(8)), DEMO_NOW)
    s = topology_step(rep)
    assert [x["name"] for x in rep["steps"]][:3] == ["quota", "fit", "topology"]
    f = s["findings"]
    assert (f["pods_needed"], f["domains_total"], f["domains_fit_ever"], f["domains_fit_now"]) == (8, 12, 12, 0)
    assert (f["best_domain"], f["best_domain_pods_now"], f["best_domain_pods_ever"]) == ("block-0/rack-02", 2, 32)
    assert (f["pods_fit_now_cluster"], f["nodes_fit_now_cluster"]) == (12, 12)
    assert [d["domain"] for d in f["domains"]] == ["block-0/rack-02", "block-2/rack-07", "block-2/rack-08", "block-3/rack-10", "block-0/rack-01"]
    assert f["topology"] == "default" and f["level"] == RACK and f["source"] == "kueue"
    assert s["status"] == "blocking"
    assert s["command"] == f"kubectl get nodes -l nvidia.com/gpu.family=hopper -L topology.example.com/block -L {RACK}"
    assert s["meaning"].startswith("12 pods of this shape fit in the cluster now (12 nodes), but no rack has room for all 8: "
                                   "the closest, block-0/rack-02, has room for 2 now (32 when empty); 12 racks could hold it")
    assert "topology: no rack has room for all 8 pods of main now (closest block-0/rack-02: 2)" in rep["verdict"]
    # text and JSON carry the same step
    text = render_diagnosis(DiagnosisReport.from_dict(json.loads(json.dumps(rep))))
    assert "3. topology [BLOCKING] — Is there one rack (topology.example.com/rack) with room for all 8 pods of main?" in text
    assert "   found:   block-0/rack-02: room for 2 of 8 now on 2 nodes, 32 when empty on 32 nodes" in text


def test_demo_40_pods_in_one_rack_never_fit_and_block_level_waits():
    s = topology_step(diagnose(demo_snapshot(), adapt(rack_job(40)), DEMO_NOW))
    f = s["findings"]
    assert (f["domains_fit_ever"], f["domains_fit_now"], f["best_domain_pods_ever"]) == (0, 0, 32)
    assert s["status"] == "blocking" and s["meaning"].startswith("No rack can ever hold the 40 pods of main: the largest")
    assert "relaxing required to preferred topology" in s["meaning"]
    b = topology_step(diagnose(demo_snapshot(), adapt(rack_job(40, BLOCK)), DEMO_NOW))["findings"]
    assert (b["domains_total"], b["domains_fit_ever"], b["domains_fit_now"]) == (4, 4, 0)
    assert (b["best_domain"], b["best_domain_pods_now"], b["best_domain_pods_ever"]) == ("block-2", 4, 96)


def test_demo_with_the_topology_read_names_racks_under_their_block():
    # What the cluster readers give once they read Kueue Topology objects (the adapters' part of #13).
    base = build_snapshot(demo_objects(), source="demo", as_of=DEMO_NOW)
    snap = type(base)(base.nodes, base.pods, kueue=base.kueue, volcano=base.volcano, priority_classes=base.priority_classes,
                      source="demo", as_of=DEMO_NOW,
                      topology=TopologyState(kueue={"default": (BLOCK, RACK, "kubernetes.io/hostname")}))
    f = topology_step(diagnose(snap, adapt(rack_job(8)), DEMO_NOW))["findings"]
    assert f["keys"] == [BLOCK, RACK] and f["best_domain"] == "block-0/rack-02" and f["best_domain_pods_now"] == 2
    rep = domain_fragmentation(snap, RACK)
    assert rep["topology"] == "default" and rep["domains"][0]["domain"] == "block-2/rack-07"


def test_no_step_without_a_required_level_and_step_ok_when_a_domain_has_room():
    nodes = [node(f"a{i}", labels={RACK: "ra"}) for i in range(3)] + [node(f"b{i}", labels={RACK: "rb"}) for i in range(2)]
    snap = snapshot(nodes, [pod("x", "a0", gpu=8)])
    plain = diagnose(snap, gang(pod_set("w", 2, gpu=8)))
    assert "topology" not in [s["name"] for s in plain["steps"]]
    preferred = diagnose(snap, gang(pod_set("w", 2, gpu=8, preferred_topology=RACK)))
    assert "topology" not in [s["name"] for s in preferred["steps"]]
    s = topology_step(diagnose(snap, gang(pod_set("w", 2, gpu=8, required_topology=RACK))))
    assert s["status"] == "ok" and s["findings"]["domains_fit_now"] == 2 and s["findings"]["best_domain"] == "ra"
    assert s["command"] == f"kubectl get nodes -L {RACK}"


def test_step_says_so_when_no_node_carries_the_level():
    s = topology_step(diagnose(snapshot([node("a")]), gang(pod_set("w", 1, gpu=8, required_topology=RACK))))
    assert s["status"] == "blocking" and s["findings"]["domains_total"] == 0 and s["findings"]["best_domain"] is None
    assert s["meaning"].startswith(f"No node carries the label {RACK}: there is no rack to place the 1 pods of w in")


@pytest.mark.parametrize("seed", range(30))
def test_step_pods_per_domain_agree_with_a_node_by_node_count(seed):
    rng = random.Random(1000 + seed)
    snap = random_cluster(rng, topology=seed % 2 == 0)
    per_pod = rng.choice((1, 2, 4, 8))
    need = rng.randint(1, 12)
    ps = pod_set("w", need, gpu=per_pod, tolerations=())
    ps = type(ps)(**{**{k: getattr(ps, k) for k in ps.__slots__},
                     "topology": TopologyRequest(source="kueue", mode="required", level=RACK,
                                                 levels=(BLOCK, RACK) if seed % 2 == 0 else ())})
    s = topology_step(diagnose(snap, gang(ps)))
    keys = (BLOCK, RACK) if seed % 2 == 0 else (RACK,)
    used = {}
    for p in snap.pods:
        used[p.node_name] = used.get(p.node_name, 0) + p.requests.get(GPU, 0)
    now, ever = {}, {}
    for n in snap.nodes:
        if not n.capacity.get(GPU) or any(k not in n.labels for k in keys):
            continue
        name = "/".join(n.labels[k] for k in keys)
        ok_now = n.ready is not False and not n.unschedulable
        now[name] = now.get(name, 0) + (max(n.allocatable[GPU] - used.get(n.name, 0), 0) // per_pod if ok_now else 0)
        ever[name] = ever.get(name, 0) + n.capacity[GPU] // per_pod  # repaired: the lost plugin's GPUs count
    f = s["findings"]
    assert f["domains_total"] == len(ever)
    assert f["domains_fit_ever"] == sum(v >= need for v in ever.values())
    assert f["domains_fit_now"] == sum(v >= need for v in now.values())
    for d in f["domains"]:
        assert (d["pods_now"], d["pods_ever"]) == (now[d["domain"]], ever[d["domain"]])
    assert s["status"] == ("ok" if f["domains_fit_now"] else "blocking")
    if f["domains_fit_ever"]:  # the closest can hold it when empty, and no domain able to has more room now
        assert f["best_domain_pods_ever"] >= need
        assert min(f["best_domain_pods_now"], need) == max(min(now[k], need) for k in ever if ever[k] >= need)
    assert np.all(np.diff([-int(d["pods_ever"] >= need) for d in f["domains"]]) >= 0)
