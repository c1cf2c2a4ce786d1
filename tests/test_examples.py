"""The examples/ manifests against the embedded demo cluster: verdicts, reasons and golden output.

Goldens live in tests/golden/: ``<example>.json`` is the ``gangcheck check --output json``
document, ``pytorchjob-64x8.txt`` the text output. They are compared byte for byte; after an
intended change to the output, regenerate them with

    GANGCHECK_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/test_examples.py

and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from webhook.adapters import adapt
from webhook.cli import main
from webhook.dump import load_cluster, load_documents
from webhook.engine.evaluate import evaluate
from webhook.policy import load_policy

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
GPU = "nvidia.com/gpu"

#: example file → (verdict, first reason code or None, exit code of `gangcheck check`)
EXPECTED = {
    # 12 wholly free nodes, 64 whole-node pods: free GPUs abound (1296), whole nodes do not.
    "pytorchjob-64x8.yaml": ("Waits", "Fragmented", 0),
    # 640 GPUs > team-llm's 512 nominal with borrowingLimit 0.
    "pytorchjob-80x8.yaml": ("NeverFits", "ExceedsMaxQuota", 1),
    # only 48 nodes carry NVIDIA-H100-NVL; 64 pods of 8 GPUs need 64 nodes.
    "jobset-64-nvl.yaml": ("NeverFits", "ExceedsClusterCapacity", 1),
    "jobset-16-b200.yaml": ("Waits", "NeedsScaleUp", 0),
    # 8 whole nodes of 12 free; 64 GPUs of 512 quota.
    "job-8x8.yaml": ("Fits", None, 0),
    # 4 × 8-GPU workers on free nodes, a CPU-only launcher anywhere in the h100 flavor.
    "mpijob.yaml": ("Fits", None, 0),
    # 32 × 4-GPU pods fit beside the tenants' 4-GPU pods; 128 ≤ queue research's 256.
    "volcano-job.yaml": ("Fits", None, 0),
    # each group is 2 × 8-GPU pods, placed independently: 2 of 12 free nodes.
    "leaderworkerset.yaml": ("Fits", None, 0),
    # 8 × 4-GPU workers + CPU head + submitter.
    "rayjob.yaml": ("Fits", None, 0),
    # 16 × 8-GPU workers, 12 whole nodes free.
    "raycluster.yaml": ("Waits", "Fragmented", 0),
    # 4 pods × 8 GPUs.
    "kueue-pod-group.yaml": ("Fits", None, 0),
    # 8 members × 4 GPUs (32 GPUs / minMember 8).
    "podgroup-coscheduling.yaml": ("Fits", None, 0),
    # 320 GPUs > queue research's capability 256.
    "podgroup-volcano.yaml": ("NeverFits", "ExceedsMaxQuota", 1),
    # Topology (#13): Kueue TAS, 8 whole-node pods required in one rack; a rack holds 32 when
    # empty, none has 8 whole free nodes now.
    "jobset-tas-rack.yaml": ("Waits", "TopologyPlacementFailed", 0),
    # JobSet exclusive topology: 4 child Jobs of 4 whole-node pods, each in a rack of its own.
    "jobset-exclusive-rack.yaml": ("Waits", "TopologyPlacementFailed", 0),
    # Volcano networkTopology hard, highestTierAllowed 1: 16 × 4-GPU pods in one tier-1 HyperNode;
    # the demo holds no HyperNode, so the constraint is told, never a denial.
    "volcano-job-network-topology.yaml": ("Waits", "TopologyUnresolved", 0),
}

GOLDEN_JSON = ("pytorchjob-64x8", "pytorchjob-80x8", "jobset-64-nvl", "job-8x8")


def check_golden(name: str, actual: str) -> None:
    """Compare ``actual`` with tests/golden/<name> exactly; with GANGCHECK_UPDATE_GOLDEN=1 set,
    (re)write the golden instead."""
    path = GOLDEN / name
    if os.environ.get("GANGCHECK_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; create it with GANGCHECK_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from the golden; if intended, regenerate with GANGCHECK_UPDATE_GOLDEN=1"


@pytest.fixture(scope="module")
def demo():
    return load_cluster("demo")


@pytest.fixture(scope="module")
def options():
    return load_policy(None).engine_options()


def decide(snap, options, name: str):
    source, objs = load_documents(EXAMPLES / name)
    gangs = [adapt(o, source=source) for o in objs]
    assert len(gangs) == 1 and gangs[0] is not None, f"{name}: expected exactly one gang"
    return evaluate(snap, gangs[0], options)


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(ROOT)
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_example_has_an_expectation():
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_verdict_and_reason(demo, options, name):
    verdict, reason, _ = EXPECTED[name]
    d = decide(demo, options, name)
    assert d.verdict == verdict, d.message
    assert (d.reasons[0] if d.reasons else None) == reason, (d.reasons, d.message)
    if verdict == "Fits":
        assert_valid_placement(demo, d)


def assert_valid_placement(snap, d) -> None:
    """Every pod of every pod set placed on a node whose free resources now hold all it gets."""
    sets = {ps["name"]: ps for ps in d.gang["pod_sets"]}
    placed = (d.placement or {}).get("pod_sets") or {}
    assert (d.placement or {}).get("when") == "now"
    load: dict[str, dict[str, int]] = {}
    for name, ps in sets.items():
        rows = placed.get(name, [])
        assert sum(k for _, k in rows) == ps["count"], (name, rows)
        for node, k in rows:
            per = load.setdefault(node, {})
            for r, v in ps["requests"].items():
                per[r] = per.get(r, 0) + k * v
    for node, per in load.items():
        i = snap.node_index[node]
        for r, v in per.items():
            if v:
                assert r in snap.col and int(snap.free[i, snap.col[r]]) >= v, (node, r, v)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_exit_code(capsys, monkeypatch, name):
    code, out, err = run_cli(capsys, monkeypatch, "check", f"examples/{name}", "--cluster", "demo", "--output", "json")
    assert err == ""
    doc = json.loads(out)
    assert code == EXPECTED[name][2]
    assert doc["verdict"] == EXPECTED[name][0]
    assert doc["allowed"] is (EXPECTED[name][0] != "NeverFits")


@pytest.mark.parametrize("stem", GOLDEN_JSON)
def test_golden_json(capsys, monkeypatch, stem):
    code, out, err = run_cli(capsys, monkeypatch, "check", f"examples/{stem}.yaml", "--cluster", "demo", "--output", "json")
    assert code == EXPECTED[f"{stem}.yaml"][2] and err == ""
    check_golden(f"{stem}.json", out)


def test_golden_text_pytorchjob_64x8(capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "check", "examples/pytorchjob-64x8.yaml", "--cluster", "demo")
    assert code == 0 and err == ""
    check_golden("pytorchjob-64x8.txt", out)


# -- the figures the issue and the README promise, independent of the golden bytes


def test_pytorchjob_64x8_is_fragmented_not_short(demo, options):
    d = decide(demo, options, "pytorchjob-64x8.yaml")
    f = d.fragmentation
    assert f["free"] >= 512  # free GPUs abound on schedulable nodes …
    assert f["nodes_fit_now"] == 12 and f["pods_needed"] == 64 and f["deficit"] == 52  # … whole nodes do not
    assert d.nodes["fit_ever"] == 384
    assert d.quota["cluster_queue"] == "team-llm"


def test_pytorchjob_80x8_quota_figures(demo, options):
    d = decide(demo, options, "pytorchjob-80x8.yaml")
    gpu = d.quota["limits"]["h100"][GPU]
    assert d.quota["request"][GPU] == 640 and gpu["maximum"] == 512
    assert "640" in d.message and "512" in d.message


def test_jobset_nvl_capacity_figures(demo, options):
    d = decide(demo, options, "jobset-64-nvl.yaml")
    assert d.gang["pods"] == 64
    assert d.nodes["fit_ever"] == 48 and d.nodes["fit_now"] == 0
    assert d.quota in (None, {}) or not d.quota.get("cluster_queue")  # not under Kueue


def test_readme_table_matches_expectations():
    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`?([\w.-]+\.yaml)`?\s*\|\s*\*{0,2}(Fits|Waits|NeverFits)\*{0,2}(?:\s*\(([A-Za-z]+)\))?\s*\|", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    assert rows == {name: (v, r) for name, (v, r, _) in EXPECTED.items()}
    assert "gangcheck check examples/<file> --cluster demo" in text
