"""The cluster's topology objects (webhook.adapters.topology_objects) → ClusterSnapshot.topology:
from a dump (build_snapshot), from the live cache (the KINDS rows), and through `gangcheck dump`.
Every field, and every error naming its field."""

from __future__ import annotations

import json

import pytest

from webhook.adapters import AdapterError
from webhook.adapters.cluster import build_snapshot, hypernode_from_k8s, topology_levels_from_k8s
from webhook.cache.kinds import assemble_snapshot, kind_of
from webhook.engine.model import HyperNode, HyperNodeMember

BLOCK, RACK, HOST = "topology.example.com/block", "topology.example.com/rack", "kubernetes.io/hostname"


def kueue_topology(name="default", levels=(BLOCK, RACK, HOST), version="v1beta2"):
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": lv} for lv in levels]}}


def kai_topology(name="cluster-topology", levels=(BLOCK, RACK)):
    return {**kueue_topology(name, levels), "apiVersion": "kai.scheduler/v1alpha1"}


def hypernode(name, tier, *members, tier_name=None):
    spec = {"tier": tier, "members": list(members)}
    if tier_name is not None:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name}, "spec": spec}


def member(kind="Node", **selector):
    return {"type": kind, "selector": selector}


def test_topologies_and_hypernodes_into_the_snapshot():
    objs = [kueue_topology(), kueue_topology("two", (RACK, HOST), "v1beta1"), kai_topology(),
            hypernode("s0", 1, member(exactMatch={"name": "n0"}), member(regexMatch={"pattern": "^gpu-r0-"}),
                      member(labelMatch={"matchLabels": {RACK: "r0"},
                                         "matchExpressions": [{"key": BLOCK, "operator": "In", "values": ["b0"]}]})),
            hypernode("spine", 2, member("HyperNode", exactMatch={"name": "s0"}), member("HyperNode", regexMatch={"pattern": "s[1-3]"}),
                      tier_name="spine")]
    snap = build_snapshot(objs, source="t")
    assert dict(snap.topology.kueue) == {"default": (BLOCK, RACK, HOST), "two": (RACK, HOST)}
    assert dict(snap.topology.kai) == {"cluster-topology": (BLOCK, RACK)}
    assert snap.topology.hypernodes["s0"] == HyperNode("s0", 1, (
        HyperNodeMember("Node", exact="n0"), HyperNodeMember("Node", regex="^gpu-r0-"),
        HyperNodeMember("Node", labels=((RACK, "r0"),), expressions=((BLOCK, "In", ("b0",)),))))
    assert snap.topology.hypernodes["spine"] == HyperNode("spine", 2, (
        HyperNodeMember("HyperNode", exact="s0"), HyperNodeMember("HyperNode", regex="s[1-3]")), tier_name="spine")
    assert "Topology" not in snap.skipped and "HyperNode" not in snap.skipped


def test_members_that_select_nothing_in_volcano_are_left_out():
    hn = hypernode_from_k8s(hypernode("h", 0, member(labelMatch={}), member("HyperNode", labelMatch={"matchLabels": {RACK: "r"}}),
                                      member(exactMatch={"name": "n1"})))
    assert hn.members == (HyperNodeMember("Node", exact="n1"),) and hn.tier == 0 and hn.tier_name is None


def test_a_later_topology_replaces_an_earlier_one_of_that_name():
    snap = build_snapshot([kueue_topology(levels=(RACK,)), kueue_topology(levels=(BLOCK, RACK))])
    assert dict(snap.topology.kueue) == {"default": (BLOCK, RACK)}


@pytest.mark.parametrize("spec,field,words", [
    (None, "spec", "the field is missing"),
    ({}, "spec.levels", "missing"),
    ({"levels": []}, "spec.levels", "non-empty list"),
    ({"levels": "rack"}, "spec.levels", "expected a list"),
    ({"levels": [{"nodeLabel": RACK}] * 2}, "spec.levels[1].nodeLabel", "duplicated"),
    ({"levels": [{"nodeLabel": ""}]}, "spec.levels[0].nodeLabel", "non-empty node label"),
    ({"levels": [{"nodeLabel": 3}]}, "spec.levels[0].nodeLabel", "non-empty node label"),
    ({"levels": ["rack"]}, "spec.levels[0]", "expected a mapping"),
    ({"levels": [{"nodeLabel": HOST}, {"nodeLabel": RACK}]}, "spec.levels[0].nodeLabel", "only be the lowest"),
    ({"levels": [{"nodeLabel": f"l{i}"} for i in range(17)]}, "spec.levels", "at most 16"),
])
def test_topology_errors_name_the_field(spec, field, words):
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"}}
    if spec is not None:
        obj["spec"] = spec
    with pytest.raises(AdapterError) as err:
        build_snapshot([obj], source="dump.json")
    msg = str(err.value)
    assert msg.startswith("dump.json: Topology t: ") and f"{field}: " in msg and words in msg, msg
    assert err.value.position == 0


@pytest.mark.parametrize("spec,field,words", [
    ({"members": []}, "spec.tier", "missing"),
    ({"tier": -1}, "spec.tier", "from 0 to 2147483647"),
    ({"tier": "one"}, "spec.tier", "expected an integer"),
    ({"tier": 1, "tierName": 5}, "spec.tierName", "expected a string"),
    ({"tier": 1, "members": {}}, "spec.members", "expected a list"),
    ({"tier": 1, "members": [member("Switch", exactMatch={"name": "a"})]}, "spec.members[0].type", "Node or HyperNode"),
    ({"tier": 1, "members": [{"type": "Node"}]}, "spec.members[0].selector", "missing"),
    ({"tier": 1, "members": [member()]}, "spec.members[0].selector", "exactly one of"),
    ({"tier": 1, "members": [member(exactMatch={"name": "a"}, regexMatch={"pattern": "a"})]}, "spec.members[0].selector", "got 2"),
    ({"tier": 1, "members": [member(exactMatch={"name": ""})]}, "spec.members[0].selector.exactMatch.name", "non-empty"),
    ({"tier": 1, "members": [member(regexMatch={"pattern": "(["})]}, "spec.members[0].selector.regexMatch.pattern", "not a regular expression"),
    ({"tier": 1, "members": [member(regexMatch={"pattern": "a" * 2000})]}, "spec.members[0].selector.regexMatch.pattern", "at most 1024"),
    ({"tier": 1, "members": [member(labelMatch={"matchExpressions": [{"key": RACK, "operator": "Near"}]})]},
     "spec.members[0].selector.labelMatch.matchExpressions[0].operator", "expected one of In, NotIn"),
    ({"tier": 1, "members": [member(labelMatch={"matchExpressions": [{"key": RACK, "operator": "In"}]})]},
     "spec.members[0].selector.labelMatch.matchExpressions[0].values", "needs at least one value"),
    ({"tier": 1, "members": [member(labelMatch={"matchLabels": ["r"]})]}, "spec.members[0].selector.labelMatch.matchLabels", "mapping"),
])
def test_hypernode_errors_name_the_field(spec, field, words):
    obj = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "h"}, "spec": spec}
    with pytest.raises(AdapterError) as err:
        hypernode_from_k8s(obj)
    msg = str(err.value)
    assert msg.startswith("HyperNode h: ") and f"{field}: " in msg and words in msg, msg


def test_nameless_objects():
    with pytest.raises(AdapterError, match="metadata.name: expected a non-empty string"):
        topology_levels_from_k8s({"kind": "Topology", "spec": {"levels": [{"nodeLabel": RACK}]}})
    with pytest.raises(AdapterError, match="metadata.name: expected a non-empty string"):
        hypernode_from_k8s({"kind": "HyperNode", "metadata": {"name": 7}, "spec": {"tier": 1}})


def test_the_cache_rows_project_and_assemble_topology():
    key, levels = kind_of("Topology").project(None, kueue_topology())
    assert (key, levels) == ("default", (BLOCK, RACK, HOST))
    assert kind_of("KAITopology").project(None, kai_topology()) == ("cluster-topology", (BLOCK, RACK))
    key, hn = kind_of("HyperNode").project(None, hypernode("s0", 1, member(exactMatch={"name": "n0"})))
    assert key == "s0" and hn.members == (HyperNodeMember("Node", exact="n0"),)
    snap = assemble_snapshot({"topology.kueue": {"default": levels}, "topology.kai": {"cluster-topology": (BLOCK,)},
                              "topology.hypernodes": {"s0": hn}}, priority_classes={}, node_used={}, source="live")
    assert dict(snap.topology.kueue) == {"default": (BLOCK, RACK, HOST)}
    assert dict(snap.topology.kai) == {"cluster-topology": (BLOCK,)}
    assert snap.topology.hypernodes["s0"] is hn
    assert kind_of("Topology").resource.optional and kind_of("HyperNode").resource.group == "topology.volcano.sh"


def test_gangcheck_dump_writes_and_reads_back_the_topology_objects(tmp_path, capsys, monkeypatch):
    from test_cli_dump import kubeconfig, populate  # noqa: F401  (the dump tests' scripted cluster)

    from scripted_apiserver import ScriptedAPIServer
    from webhook.cli import main
    from webhook.dump import load_cluster

    srv = ScriptedAPIServer().start()
    try:
        srv.not_installed = {"scheduling.volcano.sh", "scheduling.x-k8s.io"}
        srv.load([{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "default"},
                   "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}},
                  kai_topology(), hypernode("s0", 1, member(exactMatch={"name": "n0"}))])
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", srv.url)))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        out = tmp_path / "dump.json"
        assert main(["dump", "-o", str(out)]) == 0, capsys.readouterr().err
    finally:
        srv.stop()
    kinds = sorted((i["apiVersion"], i["kind"]) for i in json.loads(out.read_text())["items"])
    assert kinds == [("kai.scheduler/v1alpha1", "Topology"), ("kueue.x-k8s.io/v1beta1", "Topology"),
                     ("topology.volcano.sh/v1alpha1", "HyperNode")]
    snap = load_cluster(out)
    assert dict(snap.topology.kueue) == {"default": (BLOCK, RACK)}
    assert dict(snap.topology.kai) == {"cluster-topology": (BLOCK, RACK)}
    assert set(snap.topology.hypernodes) == {"s0"}


def test_the_live_cache_lists_and_watches_the_topology_objects():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_cache import WAIT, wait_for  # noqa: F401
    from scripted_apiserver import ScriptedAPIServer, make_node
    from kubernetes import client
    from webhook.cache import LiveCache

    srv = ScriptedAPIServer().start()
    cache = None
    try:
        srv.load([make_node("n0"), kueue_topology(version="v1beta1"), kai_topology(),
                  hypernode("s0", 1, member(exactMatch={"name": "n0"}))])
        cfg = client.Configuration()
        cfg.host = srv.url
        cache = LiveCache(client.ApiClient(cfg), backoff_base_s=0.02, backoff_max_s=0.2, rebuild_interval_s=0.05,
                          freeze_gc=False, crd_recheck_s=3600).start()
        assert cache.wait_ready(WAIT)
        snap = cache.snapshot()
        assert dict(snap.topology.kueue) == {"default": (BLOCK, RACK, HOST)}
        assert dict(snap.topology.kai) == {"cluster-topology": (BLOCK, RACK)}
        assert set(snap.topology.hypernodes) == {"s0"}
        st = cache.status()["informers"]
        assert st["kueue.topologies"]["objects"] == 1 and st["volcano.hypernodes"]["objects"] == 1
        # a watched change reaches the snapshot
        srv.upsert(hypernode("s1", 2, member("HyperNode", exactMatch={"name": "s0"})))
        wait_for(lambda: "s1" in cache.snapshot().topology.hypernodes, what="HyperNode s1 in the snapshot")
        assert cache.snapshot().topology.hypernodes["s1"].tier == 2
    finally:
        if cache is not None:
            cache.stop()
        srv.stop()
