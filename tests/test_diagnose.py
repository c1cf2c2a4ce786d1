"""gangcheck diagnose: the isolation order on the demo's 64 × 8 gang (golden text and JSON) and
the diagnosis-only field cases (C08 orphan PodGroups, C31 device-plugin pod Pending)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from builders import GPU, gang, node, pod, pod_set, snapshot
from webhook.adapters import adapt
from webhook.cli import main
from webhook.demo import DEMO_NOW, demo_snapshot
from webhook.diagnose import diagnose, find_gang, render_diagnosis, TargetNotFound
from webhook.dump import load_documents
from webhook.engine.model import PodGroupState, VolcanoQueue, VolcanoState

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
EXAMPLE = "examples/pytorchjob-64x8.yaml"


def _demo_report():
    g = adapt(load_documents(EXAMPLE)[1][0])
    return diagnose(demo_snapshot(), g, DEMO_NOW)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_demo_64x8_golden_text():
    _golden("diagnose-pytorchjob-64x8.txt", render_diagnosis(_demo_report()) + "\n")


def test_demo_64x8_golden_json():
    _golden("diagnose-pytorchjob-64x8.json", json.dumps(_demo_report(), indent=2, default=str) + "\n")


def test_demo_json_contract():
    rep = _demo_report()
    assert [s["name"] for s in rep["steps"]] == ["quota", "fit", "nodes", "autoscaler", "device-plugin", "partial-gangs"]
    for s in rep["steps"]:
        assert set(s) >= {"name", "command", "findings", "meaning"} and s["command"].startswith("kubectl")
    assert rep["verdict"].startswith("PyTorchJob llm/llama-70b-pretrain: Waits")
    fit = rep["steps"][1]["findings"]
    assert (fit["pods_needed"], fit["pods_placeable_now"], fit["deficit"], fit["gpus_stranded"]) == (64, 12, 52, 1200)
    keys = {"action", "displaced_pods", "displaced_gpus", "tenants", "pdb_violations", "gpu_hours_lost", "frees_nodes", "expected_start", "victims"}
    assert rep["fixes"] and all(keys <= set(f) for f in rep["fixes"])
    costs = [(f["pdb_violations"], -1 if f["max_victim_priority"] is None else f["max_victim_priority"], len(f["tenants"]),
              f["displaced_pods"], f["displaced_gpus"]) for f in rep["fixes"]]
    assert costs == sorted(costs)                             # ranked order
    plugin = next(s for s in rep["steps"] if s["name"] == "device-plugin")
    assert plugin["findings"]["nodes"][0]["node"] == "h100-022"   # the plugin-down node


def test_c31_device_plugin_pod_pending_on_node_x():
    snap = snapshot([node("X", gpu=8, alloc_gpu=0), node("Y", gpu=8)],
                    [pod("train-0", "X", gpu=1), pod("nvidia-device-plugin-daemonset-abcde", "", ns="gpu-operator", phase="Pending",
                                                     owner_kind="DaemonSet", owner_name="nvidia-device-plugin-daemonset")])
    rep = diagnose(snap, gang(pod_set("t", 2, gpu=8), kind="Job"), 0.0)
    step = rep["steps"][3]
    x = next(e for e in step["findings"]["nodes"] if e["node"] == "X")
    assert any("capacity 8, allocatable 0" in p for p in x["problems"])
    assert any("allocatable 0 < 1 held by pods" in p for p in x["problems"])
    assert x["plugin_pods"][0]["phase"] == "Pending"
    assert "device-plugin pod gpu-operator/nvidia-device-plugin-daemonset-abcde is Pending for X" in step["meaning"]
    assert "default scheduler" in step["meaning"]


def test_device_plugin_pod_running_on_node_named_with_commands():
    snap = snapshot([node("A", gpu=8, alloc_gpu=7)], [pod("nvidia-device-plugin-x1", "A", ns="kube-system")])
    rep = diagnose(snap, gang(pod_set("t", 1, gpu=8), kind="Job"), 0.0)
    m = rep["steps"][3]["meaning"]
    assert "1 unhealthy device(s)" in m and "kube-system/nvidia-device-plugin-x1 is Running on A" in m
    assert "kubectl -n kube-system logs nvidia-device-plugin-x1" in m


def test_c08_orphan_podgroups_listed_and_fix_deletes_them():
    orphans = {("default", f"pg-{i}"): PodGroupState("default", f"pg-{i}", "default", 1, {GPU: 1}, "Inqueue", 0) for i in range(4)}
    snap = snapshot([node("n1", gpu=4), node("n2", gpu=4)],
                    volcano=VolcanoState(queues={"default": VolcanoQueue("default", capability={GPU: 4}, allocated={GPU: 4})},
                                         pod_groups=orphans))
    rep = diagnose(snap, gang(pod_set("t", 1, gpu=1), kind="Job", volcano_queue="default"), 0.0)
    q = rep["steps"][0]
    assert q["findings"]["orphan_pod_groups"] == [f"default/pg-{i}" for i in range(4)]
    assert q["status"] == "blocking"
    fix = rep["fixes"][0]
    assert fix["action"] == "release-reservations" and fix["displaced_pods"] == 0
    assert fix["commands"] == ["kubectl -n default delete podgroup pg-0 pg-1 pg-2 pg-3"]
    assert "orphan PodGroups (4): default/pg-0" in render_diagnosis(rep)


def test_c14_partial_gangs_deadlock_reported():
    nodes = [node(f"n{i}", gpu=1) for i in range(4)]
    pods = []
    for gname, bound in (("a", ("n0", "n1")), ("b", ("n2", "n3"))):
        k = f"Job/default/{gname}"
        pods += [pod(f"{gname}-{i}", bn, gpu=1, gang=k) for i, bn in enumerate(bound)]
        pods += [pod(f"{gname}-{i + 2}", "", gpu=1, gang=k, phase="Pending") for i in range(2)]
    rep = diagnose(snapshot(nodes, pods), gang(pod_set("t", 4, gpu=1, max_per_node=1), kind="Job", name="b"), 0.0)
    pg = rep["steps"][4]
    assert pg["findings"]["partial_gangs_total"] == 2
    assert pg["findings"]["deadlocks"] == [["Job/default/a", "Job/default/b"]]
    assert "Deadlock" in pg["meaning"]
    ev = next(f for f in rep["fixes"] if f["displaced_pods"])
    assert {v["name"] for v in ev["victims"]} == {"a-0", "a-1"}


def test_find_gang_from_pods_and_not_found_message():
    snap = demo_snapshot()
    g, how = find_gang("pytorchjob/vision-pretrain", "team-vision", snap)
    assert g.pods == 44 and "reconstructed from its 44 pod(s)" in how
    rep = diagnose(snap, g, DEMO_NOW)
    assert rep["decision"]["verdict"] == "Running" and rep["fixes"] == []
    with pytest.raises(TargetNotFound, match="manifest file"):
        find_gang("job/nope", "llm", snap)


def test_cli_diagnose_json_and_errors(capsys):
    assert main(["diagnose", EXAMPLE, "--cluster", "demo", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] and doc["steps"] and doc["fixes"]
    assert main(["diagnose", "job/nope", "-n", "llm", "--cluster", "demo"]) == 2
    assert "not found in namespace llm" in capsys.readouterr().err
    assert main(["diagnose", "job/rec-ranker-large", "-n", "team-rec", "--cluster", "demo"]) == 0
    assert "Running" in capsys.readouterr().out


def test_device_plugin_pod_crash_looping_shows_restarts_and_readiness():
    snap = snapshot([node("A", gpu=8, alloc_gpu=0)],
                    [pod("nvidia-device-plugin-x1", "A", ns="gpu-operator", restarts=14, ready=False)])
    rep = diagnose(snap, gang(pod_set("t", 1, gpu=8), kind="Job"), 0.0)
    step = rep["steps"][3]
    (entry,) = step["findings"]["nodes"]
    assert entry["plugin_pods"] == [{"namespace": "gpu-operator", "name": "nvidia-device-plugin-x1", "phase": "Running",
                                     "restarts": 14, "ready": False}]
    assert "is Running on A but not ready, 14 restart(s)" in step["meaning"]
    assert "kubectl -n gpu-operator logs nvidia-device-plugin-x1 --previous" in step["meaning"]


def test_pod_health_read_from_a_dump_on_both_reader_paths():
    from webhook.adapters.cluster import _PodReader, pod_from_k8s, pod_health

    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nvidia-device-plugin-x1", "namespace": "gpu-operator"},
           "spec": {"nodeName": "A", "containers": [{"name": "p"}, {"name": "q"}]},
           "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
                      "containerStatuses": [{"name": "p", "restartCount": 9}, {"name": "q", "restartCount": 3}, "junk"]}}
    for p in (pod_from_k8s(obj), _PodReader()(obj)):
        assert (p.restarts, p.ready) == (12, False)
    assert pod_health({}) == (0, None)
    assert pod_health({"containerStatuses": "x", "conditions": [{"type": "Ready", "status": "True"}]}) == (0, True)


def test_default_options_match_the_default_policy_without_pydantic():
    # diagnose without --policy skips pydantic (~0.15 s of a cold start); the options must be
    # the default policy's.
    import subprocess
    import sys

    from webhook.diagnose import _options
    from webhook.policy import load_policy

    assert _options(None) == load_policy(None).engine_options()
    out = subprocess.run([sys.executable, "-c", "import sys, webhook.cli, webhook.diagnose; "
                          "webhook.diagnose._options(None); print('pydantic' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- issue #17 item 14: no silent cut


def test_text_shows_every_command_of_a_fix_or_how_to_list_the_rest():
    # 3 NotReady + 8 cordoned: both commands shown whole (the text used to stop at 3 commands).
    nodes = ([node("ok")] + [node(f"nr{i}", ready=False) for i in range(3)]
             + [node(f"c{i}", unschedulable=True) for i in range(8)])
    text = render_diagnosis(diagnose(snapshot(nodes), gang(pod_set("w", 12, gpu=8), kind="Job", name="g"), 0.0))
    assert "      $ kubectl describe node nr0 nr1 nr2   # NotReady" in text
    assert "      $ kubectl uncordon c0 c1 c2 c3 c4 c5 c6 c7   # once their maintenance is over" in text
    # 14 device plugins to restart: 11 shown, then the command that lists all 14.
    nodes = [node(f"d{i:02}", alloc_gpu=0) for i in range(14)]
    pods = [pod(f"nvidia-device-plugin-{i:02}", f"d{i:02}", ns="gpu-operator", owner_kind="DaemonSet") for i in range(14)]
    rep = diagnose(snapshot(nodes, pods), gang(pod_set("w", 14, gpu=8), kind="Job", name="g"), 0.0)
    assert rep["fixes"][0]["action"] == "repair" and len(rep["fixes"][0]["commands"]) == 14
    lines = render_diagnosis(rep).splitlines()
    at = lines.index("      $ kubectl -n gpu-operator delete pod nvidia-device-plugin-00   # restart the device plugin on d00")
    assert lines[at + 10] == "      $ kubectl -n gpu-operator delete pod nvidia-device-plugin-10   # restart the device plugin on d10"
    assert lines[at + 11] == ("      … and 3 more command(s), every one in order: gangcheck diagnose job/g -n default "
                              "--cluster CLUSTER -o json | jq -r '.fixes[0].commands[]'")


# ---------------------------------------------------------------- issue #17 item 16: every gang of a file


def _two_gang_manifest():
    import yaml

    doc = load_documents(EXAMPLE)[1][0]
    second = json.loads(json.dumps(doc))
    second["metadata"]["name"] = "llama-8b-sft"
    for spec in second["spec"]["pytorchReplicaSpecs"].values():
        spec["replicas"] = 1
    return doc, second, yaml


def test_diagnose_every_gang_of_a_multi_document_file(tmp_path, capsys):
    doc, second, yaml = _two_gang_manifest()
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump_all([doc, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, second]))
    assert main(["diagnose", str(path), "--cluster", "demo", "-o", "json"]) == 2      # as check: a kind it does not check
    assert "unsupported kind v1/ConfigMap" in capsys.readouterr().err
    assert main(["diagnose", str(path), "--cluster", "demo", "--skip-unsupported", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, list) and [r["gang"]["name"] for r in out] == ["llama-70b-pretrain", "llama-8b-sft"]
    assert out[0]["invocation"].endswith("-o json | jq '.[0]'")
    assert main(["diagnose", str(path), "--cluster", "demo", "--skip-unsupported"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("=== gang 1 of 2: PyTorchJob llm/llama-70b-pretrain ===\n(manifest ")
    assert "\n=== gang 2 of 2: PyTorchJob llm/llama-8b-sft ===\n" in text
    assert text.count("Why is PyTorchJob") == 2


def test_diagnose_every_gang_of_a_directory(tmp_path, capsys):
    doc, second, yaml = _two_gang_manifest()
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(second))
    assert main(["diagnose", str(tmp_path), "--cluster", "demo", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(r["gang"]["name"] for r in out) == ["llama-70b-pretrain", "llama-8b-sft"]
    # One gang: one report, not a list (as check).
    assert main(["diagnose", str(tmp_path / "b.yaml"), "--cluster", "demo", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gang"]["name"] == "llama-8b-sft"


def test_verdict_line_says_the_gang_waits_for_repair():
    # Issue #17 item 13: the same words as check's wait line and the webhook's annotation.
    snap = snapshot([node("a"), node("b"), node("c", unschedulable=True), node("d", unschedulable=True)])
    rep = diagnose(snap, gang(pod_set("w", 4, gpu=8), kind="Job", name="train"), 1_000_000.0)
    assert rep["verdict"] == ("Job default/train: Waits — capacity: 2 of 4 pods have no room now; waits for repair: "
                              "2 cordoned node(s) must be uncordoned; running work alone never frees enough "
                              "(at most 2 of 4 pods).")
    assert [f["action"] for f in rep["fixes"]][:1] == ["repair"] and "wait" not in [f["action"] for f in rep["fixes"]]
