"""The per-domain gauges (#13): gangcheck_gpu_whole_free_nodes / gangcheck_gpus_stranded by GPU product
and top-level topology domain, their bound, their policy knob, and a scrape of the demo."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from builders import node, pod, snapshot
from topology_clusters import BLOCK, RACK
from webhook.demo import demo_snapshot
from webhook.engine.model import TopologyState
from webhook.policy import PolicyError, parse_policy
from webhook.server import create_app
from webhook.server.metrics import MAX_DOMAINS, gpu_domains, metrics_topology_key
from webhook.sources import StaticSource


# ---------------------------------------------------------------- gauges


def test_gauges_bound_the_domains_and_keep_every_node():
    # 60 racks of one node each, rack k with k % 3 GPUs in use: 50 keep their name, 10 are "other"
    nodes = [node(f"n{k:02d}", labels={RACK: f"r{k:02d}", "nvidia.com/gpu.product": "H100"}) for k in range(60)]
    nodes.append(node("lone", labels={"nvidia.com/gpu.product": "H100"}))
    pods = [pod(f"p{k}", f"n{k:02d}", gpu=2 * (k % 3)) for k in range(60) if k % 3]
    rep = gpu_domains(snapshot(nodes, pods), RACK)
    domains = {d for _, d in rep["series"]}
    assert len(domains) == MAX_DOMAINS + 2 and {"other", "none"} <= domains
    whole = sum(w for w, _ in rep["series"].values())
    stranded = sum(s for _, s in rep["series"].values())
    assert whole == 20 + 1 and stranded == sum(8 - 2 * (k % 3) for k in range(60) if k % 3)
    assert rep["series"][("H100", "none")] == (1, 0)
    # racks sorted by GPU nodes (all 1) then name: r00..r49 keep theirs
    assert ("H100", "r49") in rep["series"] and ("H100", "r50") not in rep["series"]
    assert rep["series"][("H100", "other")] == (sum(1 for k in range(50, 60) if k % 3 == 0),
                                                sum(8 - 2 * (k % 3) for k in range(50, 60) if k % 3))


def test_gauge_domain_key_policy_then_topology_then_none():
    topo = snapshot([node("a")], topology=TopologyState(kueue={"b": ("x/zone",), "a": (BLOCK, RACK)}))
    assert metrics_topology_key(topo) == BLOCK  # the first Topology by name, its top level
    assert metrics_topology_key(topo, parse_policy("metricsTopologyLevel: x/zone")) == "x/zone"
    assert metrics_topology_key(snapshot([node("a")])) is None
    assert gpu_domains(snapshot([node("a", labels={"nvidia.com/gpu.product": "H100"})]), None)["series"] == {("H100", "all"): (1, 0)}


@pytest.mark.parametrize("text,needle", [
    ("metricsTopologyLevel: 'a b'", "expected a node label key such as 'topology.example.com/block', got 'a b'"),
    ("metricsTopologyLevel: ''", "expected a node label key"),
    ("metricsTopologyLevel: 3", "metricsTopologyLevel: Input should be a valid string"),
])
def test_policy_knob_refuses_what_is_no_label_key(text, needle):
    with pytest.raises(PolicyError) as e:
        parse_policy(text)
    assert needle in str(e.value) and e.value.code == "invalid_field"


def test_demo_scrape_whole_free_nodes_and_stranded_per_block():
    app = create_app(StaticSource(demo_snapshot(), "demo"), parse_policy(f"metricsTopologyLevel: {BLOCK}"))
    with TestClient(app) as c:
        text = c.get("/metrics").text
    got = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in ("gangcheck_gpu_whole_free_nodes", "gangcheck_gpus_stranded"):
                got[(s.name, s.labels["product"], s.labels["domain"])] = s.value
    hbm3, nvl = "NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL"
    assert {k[2]: v for k, v in got.items() if k[0] == "gangcheck_gpu_whole_free_nodes" and k[1] == hbm3} == {
        "block-0": 3, "block-1": 2, "block-2": 4, "block-3": 3}
    # the 48 NVL nodes are the highest-numbered half-used ones: all in block-3, 4 GPUs free each
    assert got[("gangcheck_gpus_stranded", nvl, "block-3")] == 192 and got[("gangcheck_gpu_whole_free_nodes", nvl, "block-3")] == 0
    assert sum(v for k, v in got.items() if k[0] == "gangcheck_gpus_stranded") == 1200
