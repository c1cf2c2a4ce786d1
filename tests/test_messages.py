"""Messages that say what to change (issue #17 item 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import gang, node, pod_set, snapshot
from webhook.engine.evaluate import evaluate

ROOT = Path(__file__).resolve().parent.parent


def test_untolerated_taint_is_named_with_its_node_count():
    # (not nvidia.com/gpu=present: ExtendedResourceToleration tolerates that one for a GPU pod)
    snap = snapshot([node("a", gpu=8), node("b", gpu=8, taints=["dedicated=train:NoSchedule"]),
                     node("c", gpu=8, taints=["dedicated=train:NoSchedule"])])
    d = evaluate(snap, gang(pod_set("w", 2, gpu=8)))
    assert d.verdict == "NeverFits"
    f = d.findings[0]
    assert "2 node(s) carry the untolerated taint dedicated=train:NoSchedule" in f.message
    assert f.data["taints"] == [{"taint": "dedicated=train:NoSchedule", "nodes": 2}]
    # The gang-total bound names it too.
    d = evaluate(snap, gang(pod_set("w", 1, gpu=8), pod_set("v", 1, gpu=4)))
    f = next(f for f in d.findings if f.severity == "NeverFits")
    assert "the 1 node(s) it may use have 8 even when empty" in f.message
    assert "2 node(s) carry the untolerated taint dedicated=train:NoSchedule" in f.message


def test_taint_only_mismatch_has_its_own_code_and_points_at_transient_taints():
    snap = snapshot([node("a", gpu=8, taints=["gpu-health=unhealthy:NoSchedule"]),
                     node("b", gpu=8, taints=["gpu-health=unhealthy:NoSchedule"])])
    d = evaluate(snap, gang(pod_set("w", 1, gpu=8)))
    assert d.verdict == "NeverFits"
    assert d.reasons == ["UntoleratedTaint"]
    assert "gpu-health=unhealthy:NoSchedule" in d.message and "transientTaints" in d.message
    plain = evaluate(snapshot([node("a", gpu=8, taints=["dedicated=train:NoSchedule"])]), gang(pod_set("w", 1, gpu=8)))
    assert plain.reasons == ["UntoleratedTaint"] and "transientTaints" not in plain.message


def test_ever_reasons_say_which_nodes_are_also_cordoned():
    """The summary counts a cordoned mismatching node as unschedulable (first failing filter);
    the message says it is among the mismatching ones."""
    nodes = [node(f"a{i}", gpu=8, labels={"p": "x"}) for i in range(6)] + [node("c", gpu=8, unschedulable=True, labels={"p": "x"})]
    d = evaluate(snapshot(nodes), gang(pod_set("w", 1, gpu=8, selector={"p": "y"})))
    assert d.nodes["summary"] == "0/7 nodes are available: 1 node(s) were unschedulable, 6 node(s) didn't match Pod's node affinity/selector."
    assert "7 node(s) didn't match Pod's node affinity/selector (1 of them cordoned)" in d.message
    assert d.reasons == ["ExceedsClusterCapacity"]


def test_largest_node_means_the_largest_eligible_node():
    nodes = [node("small", gpu=0, cpu=64, labels={"pool": "a"}), node("big", gpu=0, cpu=128, labels={"pool": "b"})]
    d = evaluate(snapshot(nodes), gang(pod_set("w", 1, cpu=80, selector={"pool": "a"})))
    assert d.verdict == "NeverFits"
    assert "no eligible node has ≥80 cpu (the largest eligible node has 64)" in d.message


def test_same_pod_shape_same_eligible_nodes_whether_quota_holds_or_not():
    """The demo's 64×8 (quota holds) and 80×8 (ExceedsMaxQuota) PyTorchJobs have one pod shape:
    the flavor's nodeLabels narrow the nodes in both."""
    from webhook.adapters import adapt
    from webhook.demo import demo_snapshot
    import yaml

    snap = demo_snapshot()
    out = {}
    for name in ("pytorchjob-64x8", "pytorchjob-80x8"):
        d = evaluate(snap, adapt(yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())))
        out[name] = (d.nodes["eligible"], d.nodes["summary"])
    assert out["pytorchjob-64x8"] == out["pytorchjob-80x8"]
    assert out["pytorchjob-64x8"][0] == 373  # 384 H100 nodes less 8 cordoned and 3 NotReady
