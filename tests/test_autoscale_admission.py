"""What an autoscaled cluster's users meet at admission (#16): a gang needing new nodes is
admitted with the scale-up told in a warning and an annotation, not denied."""

from __future__ import annotations

from datetime import datetime, timezone

from webhook import admission as adm
from webhook.engine.autoscale import AutoscalingPolicy, AutoscalingState, PolicyPool, ScaleUpSource
from webhook.engine.evaluate import evaluate
from webhook.engine.model import GangRequest, Node, NodeSelectorRequirement, PodSet
from webhook.engine.options import EngineOptions
from webhook.engine.snapshot import ClusterSnapshot
from webhook.policy import Policy

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=timezone.utc)
GPU = "nvidia.com/gpu"
NODE8 = {"cpu": 96000, "memory": 2**40, GPU: 8, "pods": 110}
H100 = {"nvidia.com/gpu.product": "H100"}
POOL = ScaleUpSource("gpu-h100", requirements=(NodeSelectorRequirement("nvidia.com/gpu.product", "In", ("H100",)),),
                     limits={GPU: 512}, in_use={GPU: 24}, nodes=3)


def decide(options: EngineOptions | None = None):
    nodes = [Node(f"n{i}", labels={**H100, "karpenter.sh/nodepool": "gpu-h100"}, capacity=NODE8, allocatable=NODE8)
             for i in range(3)]
    snap = ClusterSnapshot(nodes, autoscaling=AutoscalingState(sources=(POOL,)))
    gang = GangRequest("JobSet", "train", "ml", (PodSet("worker", 64, {"cpu": 8000, GPU: 8}, node_selector=H100),))
    return evaluate(snap, gang, options)


def test_a_gang_needing_new_nodes_is_admitted_with_the_scale_up_in_its_warnings_and_annotations():
    d = decide()
    assert d.verdict == "Waits"
    assert any("61 pod(s)" in w and "NodePool gpu-h100" in w for w in d.warnings)
    ann = adm.annotations_for(d, Policy(), NOW)
    assert ann["gangcheck.io/reasons"].split(",")[0] == "NeedsScaleUp"
    assert ann["gangcheck.io/scale-up"] == "61 pod(s) need new nodes: NodePool gpu-h100 61 pod(s)"


def test_with_a_known_node_shape_the_annotation_counts_nodes():
    opts = EngineOptions(autoscaling=AutoscalingPolicy(pools=(PolicyPool("gpu-h100", node_shape={**NODE8, GPU: 4}),)))
    ann = adm.annotations_for(decide(opts), Policy(), NOW)
    # 4-GPU nodes cannot take an 8-GPU pod: no room there, so no node count to give.
    assert ann["gangcheck.io/verdict"] == "NeverFits"
    opts = EngineOptions(autoscaling=AutoscalingPolicy(pools=(PolicyPool("gpu-h100", node_shape=NODE8),)))
    ann = adm.annotations_for(decide(opts), Policy(), NOW)
    assert ann["gangcheck.io/scale-up"] == "61 pod(s) need new nodes: NodePool gpu-h100 61 node(s)"


def test_no_scale_up_annotation_without_autoscalers():
    nodes = [Node("n0", labels=H100, capacity=NODE8, allocatable=NODE8)]
    d = evaluate(ClusterSnapshot(nodes), GangRequest("Job", "j", "ml", (PodSet("w", 1, {GPU: 8}),)))
    assert "gangcheck.io/scale-up" not in adm.annotations_for(d, Policy(), NOW)


def test_the_expected_wait_of_a_gang_needing_new_nodes_is_their_provisioning_time():
    from webhook.engine.evaluate import expected_wait

    now = NOW.timestamp()
    nodes = [Node(f"n{i}", labels={**H100, "karpenter.sh/nodepool": "gpu-h100"}, capacity=NODE8, allocatable=NODE8)
             for i in range(3)]
    snap = ClusterSnapshot(nodes, autoscaling=AutoscalingState(sources=(POOL,), provisioning_samples_s=(60.0,) * 4 + (100.0,) * 4))
    gang = GangRequest("JobSet", "train", "ml", (PodSet("worker", 64, {"cpu": 8000, GPU: 8}, node_selector=H100),))
    d = evaluate(snap, gang, now=now)
    assert d.verdict == "Waits" and d.expected_wait is not None
    # 3 nodes can never hold 64 pods: the wait is the learned launch → Ready time of 8 NodeClaims.
    assert d.expected_wait["blocked_by"] == "scale-up"
    assert 60 <= d.expected_wait["p50_s"] <= 100 and d.expected_wait["p90_s"] == 100
    # The webhook's off-path estimate gives the same when handed the finding's data.
    scale = next(f.data for f in d.findings if f.code == "NeedsScaleUp")
    assert expected_wait(snap, gang, now, scale_up=scale) == d.expected_wait
    ann = adm.annotations_for(d, Policy(), NOW)
    assert ann["gangcheck.io/expected-wait"] != "unknown"
