"""gangcheck fragmentation --by LEVEL (#13): whole free nodes and stranded GPUs per topology domain,
checked against a node-by-node count on small random clusters and against the demo's racks."""

from __future__ import annotations

import json
import random

import pytest

from builders import GPU, node, snapshot
from topology_clusters import BLOCK, RACK, naive, random_cluster
from webhook.cli import main
from webhook.diagnose.by_domain import UnknownLevel, domain_fragmentation, resolve_level
from webhook.engine.model import TopologyState


@pytest.mark.parametrize("seed", range(40))
def test_by_domain_agrees_with_a_node_by_node_count(seed):
    rng = random.Random(seed)
    topology = seed % 2 == 1
    snap = random_cluster(rng, topology)
    rep = domain_fragmentation(snap, RACK, {GPU: 1}, top=100)
    keys = (BLOCK, RACK) if topology else (RACK,)
    assert rep["keys"] == list(keys) and rep["topology"] == ("default" if topology else None)
    want = naive(snap, keys)
    got = {d["domain"]: {k: d[k] for k in ("nodes", "eligible", "whole_free", "free", "stranded")} for d in rep["domains"]}
    assert got == want
    assert rep["domains_total"] == len(want)
    assert rep["total"] == {k: sum(r[k] for r in want.values()) for k in ("nodes", "eligible", "whole_free", "free", "stranded")}
    # most whole free nodes first, then most free GPUs, then by name
    order = [(-d["whole_free"], -d["free"], d["domain"]) for d in rep["domains"]]
    assert order == sorted(order)
    # the GPU nodes without a rack label are reported apart, not lost
    lacking = sum(1 for n in snap.nodes if n.capacity.get(GPU) and RACK not in n.labels)
    assert rep["outside"]["nodes"] == lacking


def test_a_rack_name_in_two_blocks_is_two_racks_under_a_topology():
    nodes = [node("a", labels={BLOCK: "b0", RACK: "r1"}), node("b", labels={BLOCK: "b1", RACK: "r1"})]
    flat = domain_fragmentation(snapshot(nodes), RACK)
    assert [(d["domain"], d["whole_free"]) for d in flat["domains"]] == [("r1", 2)]
    topo = snapshot(nodes, topology=TopologyState(kueue={"default": (BLOCK, RACK)}))
    rep = domain_fragmentation(topo, RACK)
    assert [(d["domain"], d["values"], d["whole_free"]) for d in rep["domains"]] == [
        ("b0/r1", ["b0", "r1"], 1), ("b1/r1", ["b1", "r1"], 1)]


def test_unknown_level_names_the_key_and_the_topology_levels():
    snap = snapshot([node("a", labels={RACK: "r0"})], topology=TopologyState(kueue={"default": (BLOCK, RACK)}))
    with pytest.raises(UnknownLevel, match=r"--by example.com/row: no node carries the label 'example.com/row'; "
                                           r"the Kueue Topology levels are topology.example.com/block, topology.example.com/rack"):
        resolve_level(snap, "example.com/row")
    # a Topology level no node carries yet is a level all the same (its domains are then none)
    rep = domain_fragmentation(snap, BLOCK)
    assert rep["keys"] == [BLOCK] and rep["domains_total"] == 0 and rep["outside"]["nodes"] == 1
    with pytest.raises(UnknownLevel, match="no Kueue Topology"):
        resolve_level(snapshot([node("a")]), "example.com/row")
    with pytest.raises(UnknownLevel, match="empty value"):
        resolve_level(snap, " ")
    with pytest.raises(ValueError, match="--top"):
        domain_fragmentation(snap, RACK, top=0)


# ---------------------------------------------------------------- the demo's racks, by CLI


def test_cli_demo_racks_json(capsys):
    assert main(["fragmentation", "--cluster", "demo", "--by", RACK, "-o", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["domains_total"] == 12 and rep["shown"] == 12 and rep["resource"] == GPU
    assert rep["total"] == {"nodes": 384, "eligible": 373, "whole_free": 12, "free": 1296, "stranded": 1200}
    assert [d["whole_free"] for d in rep["domains"]] == [2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0]
    assert rep["domains"][0] == {"domain": "block-2/rack-07", "values": ["block-2", "rack-07"], "nodes": 32, "eligible": 32,
                                 "whole_free": 2, "free": 128, "stranded": 112}
    assert rep["outside"]["nodes"] == 0


def test_cli_demo_blocks_text_top(capsys):
    assert main(["fragmentation", "--cluster", "demo", "--by", BLOCK, "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Fragmentation by {BLOCK} (Kueue Topology default: {BLOCK}), nvidia.com/gpu; eligible = schedulable now for a pod of 8 nvidia.com/gpu:"
    assert out[1].split() == ["domain", "nodes", "eligible", "whole", "free", "free", "GPUs", "stranded", "GPUs"]
    assert out[2].split() == ["block-2", "96", "96", "4", "352", "320"]
    assert out[3].split() == ["block-0", "96", "93", "3", "332", "308"]
    assert out[4].strip() == "… 2 more domains (--top N shows more)"
    assert out[5].split() == ["total", "384", "373", "12", "1296", "1200", "(4", "domains)"]


@pytest.mark.parametrize("argv,needle", [
    (["--by", "example.com/row"], "--by example.com/row: no node carries the label 'example.com/row'"),
    (["--top", "3"], "--top N: only with --by LEVEL"),
])
def test_cli_bad_by_arguments_exit_2(capsys, argv, needle):
    assert main(["fragmentation", "--cluster", "demo", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_cli_top_must_be_positive(capsys):
    with pytest.raises(SystemExit) as e:
        main(["fragmentation", "--cluster", "demo", "--by", RACK, "--top", "0"])
    assert e.value.code == 2 and "expected a whole number ≥ 1, got '0'" in capsys.readouterr().err
