"""The demo's build steps on their own (issue #14): each part of the cluster comes from one step."""

from __future__ import annotations

import random

from webhook.demo import (
    DEMO_NOW, DEMO_SEED, H100_COUNT, NVL_COUNT, PARTS, TENANTS, _full_node_pods, _h100_nodes, _kueue_objects, _layout,
    _QueueUsage, _tenant_pods,
)


def _layout_now():
    rng = random.Random(DEMO_SEED)
    return rng, _layout(rng)


def test_h100_nodes_play_their_parts():
    _, layout = _layout_now()
    nodes = _h100_nodes(layout, DEMO_NOW)
    assert len(nodes) == H100_COUNT and nodes[0]["metadata"]["name"] == "h100-000"
    cordoned = [n for n in nodes if n["spec"].get("unschedulable")]
    assert len(cordoned) == dict(PARTS)["cordoned"] == 8
    not_ready = [n for n in nodes if any(c["type"] == "Ready" and c["status"] == "False" for c in n["status"]["conditions"])]
    assert len(not_ready) == 3
    down = [n for n in nodes if n["status"]["allocatable"]["nvidia.com/gpu"] == "0"]
    assert len(down) == 1 and down[0]["status"]["capacity"]["nvidia.com/gpu"] == "8"
    nvl = [n for n in nodes if n["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-NVL"]
    assert len(nvl) == NVL_COUNT


def test_pods_and_usage_add_up_to_team_visions_status():
    rng, layout = _layout_now()
    usage = _QueueUsage()
    tenants = _tenant_pods(rng, layout, DEMO_NOW, usage)
    assert len(tenants) == sum(t[5] for t in TENANTS) == 300
    # 300 four-GPU tenant pods; 44 eight-GPU PyTorchJob pods; 32 four-GPU rec-ranker-large pods.
    full = _full_node_pods(layout, DEMO_NOW, usage)
    assert len(full) == 44 + 32
    assert usage.gpu == 300 * 4 + 44 * 8 + 32 * 4 == 1680
    # jobs: 120/8 + 100/4 + 80/16 tenant jobs, the PyTorchJob and the rec Job
    assert usage.admitted == 15 + 25 + 5 + 2
    cq = next(o for o in _kueue_objects(usage) if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "team-vision")
    h100 = next(f for f in cq["status"]["flavorsUsage"] if f["name"] == "h100")
    assert {r["name"]: r["total"] for r in h100["resources"]}["nvidia.com/gpu"] == "1680"
    assert cq["status"]["admittedWorkloads"] == 47
