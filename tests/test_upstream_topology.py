"""Every upstream example with topology → the TopologyRequest / TopologyState gangcheck reads.

Reads /work/shared/upstream/examples (outside the repository; skipped when absent, as in
tests/test_upstream_examples.py). Nothing from it is copied into the repository: the permanent
fixtures for every field and error are in tests/test_topology_adapters.py and
tests/test_topology_objects.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.engine.model import TopologyRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "upstream" / "examples"

if not EXAMPLES.is_dir():
    pytest.skip(f"upstream examples not present at {EXAMPLES} (only in the project workspace)", allow_module_level=True)


def _docs(rel: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLES / rel).read_text()) if isinstance(d, dict)]


def _gang(rel: str):
    (doc,) = [d for d in _docs(rel) if d.get("kind") in ("JobSet", "LeaderWorkerSet", "RayCluster")]
    return adapt(doc, source=rel)


def test_jobset_exclusive_placement_one_node_pool_per_child_job():
    g = _gang("jobset/exclusive-placement.yaml")
    (ps,) = g.pod_sets
    assert (ps.name, ps.count) == ("workers", 9)
    assert ps.topology == TopologyRequest(
        source="jobset", mode="required", level="cloud.google.com/gke-nodepool", exclusive=True, unit_size=3,
        field="metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]")
    assert g.findings == ()


def test_jobset_tpu_multislice_exclusive_per_slice_with_a_kueue_queue():
    g = _gang("jobset/tpu-v6e-multislice-jax.yaml")
    (ps,) = g.pod_sets
    assert g.queue_name == "multislice-queue"
    assert (ps.count, ps.topology.source, ps.topology.level, ps.topology.exclusive, ps.topology.unit_size) == (
        8, "jobset", "cloud.google.com/gke-nodepool", True, 4)
    assert ps.node_selector["cloud.google.com/gke-tpu-topology"] == "4x4"


def test_lws_exclusive_placement_one_group_of_4_per_node_pool():
    g = _gang("lws/lws-exclusive-placement.yaml")
    assert [(p.name, p.count) for p in g.pod_sets] == [("leader", 1), ("worker", 3)]
    want = TopologyRequest(source="lws", mode="required", level="cloud.google.com/gke-nodepool", exclusive=True,
                           unit_size=4, field="metadata.annotations[leaderworkerset.sigs.k8s.io/exclusive-topology]")
    assert [p.topology for p in g.pod_sets] == [want, want]
    assert g.groups == 3


def test_kueue_lws_tas_leader_and_workers_grouped_in_one_rack():
    g = _gang("kueue/leaderworkerset-tas-gpu.yaml")
    assert g.queue_name == "tas-user-queue"
    got = [(p.name, p.count, p.topology.source, p.topology.mode, p.topology.level, p.topology.group) for p in g.pod_sets]
    assert got == [("leader", 1, "kueue", "required", "cloud.provider.com/topology-rack", "lws-group"),
                   ("worker", 2, "kueue", "required", "cloud.provider.com/topology-rack", "lws-group")]
    assert [f.code for f in g.findings] == ["LeaderWorkerGroups"]  # a valid group: no InvalidTopologyRequest


def test_kueue_jobset_tas_combined_block_with_slices_of_4_per_rack():
    g = _gang("kueue/jobset-tas-combined.yaml")
    (ps,) = g.pod_sets
    t = ps.topology
    assert (ps.count, t.source, t.mode, t.level, t.slice_level, t.slice_size, t.group) == (
        8, "kueue", "required", "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", 4, None)
    assert t.field.endswith("[kueue.x-k8s.io/podset-required-topology]")
    assert g.findings == ()


def test_kueue_setup_tas_gpu_queues_topology_and_flavor():
    snap = build_snapshot(_docs("kueue/setup-tas-gpu-queues.yaml"), source="setup-tas-gpu-queues.yaml")
    assert dict(snap.topology.kueue) == {
        "default": ("cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname")}
    assert snap.kueue.flavors["tas-flavor"].topology_name == "default"
    assert dict(snap.topology.kai) == {} and dict(snap.topology.hypernodes) == {}


@pytest.mark.parametrize("rel", ["lws/lws-vllm-tpu.yaml", "kuberay/raycluster-tpu-v6e-16-multihost.yaml"])
def test_tpu_topology_node_selectors_are_not_topology_requests(rel):
    # cloud.google.com/gke-tpu-topology is a node label the pods select, not a placement request
    g = _gang(rel)
    assert all(p.topology is None for p in g.pod_sets)
    assert any(p.node_selector.get("cloud.google.com/gke-tpu-topology") == "4x4" for p in g.pod_sets)


def test_tpu_multislice_kueue_config_has_no_topology_objects():
    snap = build_snapshot(_docs("jobset/tpu-multislice-kueue-config.yaml"), source="tpu-multislice-kueue-config.yaml")
    assert snap.kueue.flavors["v6e-4x4"].topology_name is None
    assert dict(snap.topology.kueue) == {}
