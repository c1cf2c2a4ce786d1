"""The diagnose package's rooms (#14): the report model and its JSON form, the steps called one
by one, the two renderers of one model, and the CLI's seam (webhook.diagnose.diagnose)."""

from __future__ import annotations

import json

import pytest

from builders import GPU, gang, node, pod, pod_set, snapshot
from webhook.adapters import adapt
from webhook.demo import DEMO_NOW, demo_snapshot
from webhook.diagnose import DiagnosisReport, diagnose, diagnose_report, render_diagnosis, render_diagnosis_json
from webhook.diagnose.analyze import fit_step, nodes_step, verdict_line
from webhook.diagnose.device_plugin import device_plugin_step
from webhook.diagnose.partial_gangs import partial_gangs_step
from webhook.diagnose.quota import quota_step
from webhook.diagnose.report import ABSENT, STEP_TYPES, FitStep, QuotaStep, Step
from webhook.dump import load_documents
from webhook.engine.evaluate import EngineOptions, evaluate
from webhook.engine.fixes import gang_view
from webhook.engine.model import VolcanoQueue, VolcanoState

EXAMPLE = "examples/pytorchjob-64x8.yaml"


def _demo_gang():
    return adapt(load_documents(EXAMPLE)[1][0])


def _parts(snap, g):
    opts = EngineOptions()
    d = evaluate(snap, g, opts, now=0.0)
    return d, gang_view(snap, g, d, opts), opts


def _fragmented():
    # 3 nodes of 8 GPUs, 4 in use on n2: 20 free, a 3 × 8 gang has room for 2 pods (n0, n1).
    nodes = [node("n0"), node("n1"), node("n2")]
    return snapshot(nodes, [pod("busy", "n2", gpu=4)]), gang(pod_set("w", 3, gpu=8), kind="Job", name="train")


# ---------------------------------------------------------------- the model and its JSON form


def test_the_model_is_the_json_document_and_reads_back():
    snap, g = demo_snapshot(), _demo_gang()
    rep = diagnose_report(snap, g, DEMO_NOW)
    # The demo shows a Karpenter NodePool: its report has the optional autoscaler step, after nodes.
    assert [type(s) for s in rep.steps if type(s) in STEP_TYPES.values()] == list(STEP_TYPES.values())
    assert [s.name for s in rep.steps] == ["quota", "fit", "nodes", "autoscaler", "device-plugin", "partial-gangs"]
    doc = rep.to_dict()
    assert doc == diagnose(snap, g, DEMO_NOW)
    assert list(doc) == ["gang", "cluster", "now", "decision", "steps", "verdict", "fixes"]
    back = DiagnosisReport.from_dict(json.loads(json.dumps(doc, default=str)))
    assert back == rep and back.to_dict() == doc
    fit = rep.step("fit")
    assert isinstance(fit, FitStep) and fit.deficit == doc["steps"][1]["findings"]["deficit"] > 0


def test_an_absent_fact_is_left_out_and_none_is_kept():
    # No queue: the quota step's findings carry only system (None), not the Kueue/Volcano keys.
    snap, g = _fragmented()
    d, view, _ = _parts(snap, g)
    q = quota_step(snap, g, d, view)
    assert q.system is None and q.has("system") and not q.has("cluster_queue") and q.cluster_queue is ABSENT
    assert q.findings() == {"system": None}
    assert q.get("ahead_total", 7) == 7 and not ABSENT
    kueue = QuotaStep(command="c", meaning="m", status="ok", system="kueue", cluster_queue=None)
    assert kueue.findings() == {"system": "kueue", "cluster_queue": None}
    assert Step.from_dict(kueue.to_dict()) == kueue


def test_text_renders_the_model_and_its_json_alike():
    rep = diagnose_report(demo_snapshot(), _demo_gang(), DEMO_NOW)
    text = render_diagnosis(rep)
    assert text == render_diagnosis(rep.to_dict())
    assert text.splitlines()[2] == "1. quota [ok] — Can the gang's queue ever hold it, and can it now?"
    assert f"Verdict: {rep.verdict}" in text


def test_json_renders_one_report_as_an_object_and_several_as_a_list():
    snap, g = _fragmented()
    rep = diagnose_report(snap, g, 0.0)
    one = json.loads(render_diagnosis_json([rep]))
    assert one["gang"]["name"] == "train" and one == json.loads(json.dumps(rep.to_dict()))
    two = json.loads(render_diagnosis_json([rep, rep.to_dict()]))
    assert isinstance(two, list) and [r["verdict"] for r in two] == [rep.verdict] * 2


# ---------------------------------------------------------------- the steps one by one


def test_fit_step_counts_stranded_gpus():
    snap, g = _fragmented()
    d, view, opts = _parts(snap, g)
    s = fit_step(snap, g, d, view, opts)
    assert (s.nodes_total, s.nodes_fit_now, s.pods_needed, s.pods_placeable_now, s.deficit) == (3, 2, 3, 2, 1)
    assert (s.gpus_free_cluster, s.gpus_free_eligible, s.gpus_stranded, s.stranded_ratio, s.gpus_needed) == (20, 20, 4, 0.2, 24)
    assert s.status == "blocking" and s.meaning.startswith("Not enough free: 20 nvidia.com/gpu free on eligible nodes, 24 needed")


def test_fit_step_of_a_gang_without_pods_has_no_facts():
    snap, _ = _fragmented()
    g = gang(kind="Job", name="empty")
    d, view, opts = _parts(snap, g)
    s = fit_step(snap, g, d, view, opts)
    assert s.findings() == {} and s.meaning == "The gang has no pods to place." and s.command == "kubectl get nodes"


def test_nodes_step_names_the_reasons_and_samples():
    nodes = [node("ok"), node("c0", unschedulable=True), node("c1", unschedulable=True)]
    snap = snapshot(nodes)
    g = gang(pod_set("w", 3, gpu=8), kind="Job", name="train")
    d, view, _ = _parts(snap, g)
    s = nodes_step(snap, g, d, view)
    assert s.reasons == {"node(s) were unschedulable": 2} and s.samples["node(s) were unschedulable"] == ["c0", "c1"]
    assert s.status == "blocking" and "2 × 'node(s) were unschedulable' (e.g. c0, c1)" in s.meaning


def test_device_plugin_step_points_at_the_plugin_pod():
    nodes = [node("n0"), node("d0", alloc_gpu=0)]
    pods = [pod("nvidia-device-plugin-d0", "d0", ns="gpu-operator", owner_kind="DaemonSet")]
    snap = snapshot(nodes, pods)
    g = gang(pod_set("w", 2, gpu=8), kind="Job", name="train")
    d, view, opts = _parts(snap, g)
    s = device_plugin_step(snap, view, opts)
    assert (s.nodes_with_problems, s.eligible_nodes_with_problems, s.nodes[0]["node"]) == (1, 1, "d0")
    assert s.status == "blocking" and "kubectl -n gpu-operator get pods -o wide --field-selector spec.nodeName=d0" in s.command
    assert s.meaning.startswith(f"d0: {GPU} capacity 8, allocatable 0: plugin lost registration")


def test_partial_gangs_step_names_a_gang_holding_gpus():
    # Job a holds n0's 8 GPUs with one pod while its second waits; the gang diagnosed fits on n1.
    k = "Job/default/a"
    snap = snapshot([node("n0"), node("n1")], [pod("a-0", "n0", gpu=8, gang=k), pod("a-1", "", gpu=8, gang=k, phase="Pending")])
    g = gang(pod_set("w", 1, gpu=8), kind="Job", name="train")
    d, view, opts = _parts(snap, g)
    s = partial_gangs_step(snap, g, view, opts)
    assert (s.partial_gangs_total, s.deadlocks, s.own_bound, s.own_pending) == (1, [], 0, 0)
    assert s.partial_gangs[0] == {"gang": k, "bound": 1, "pending": 1, "gpus_held": 8, "gpus_pending": 8, "nodes": ["n0"], "priority": 0}
    assert s.status == "info" and s.meaning == "1 partial gang(s) hold 8 GPUs without progress: Job/default/a (1 bound, 1 pending, 8 GPUs held)."


def test_quota_step_of_a_volcano_queue():
    snap, g = _fragmented()
    snap = snapshot(list(snap.nodes), list(snap.pods), volcano=VolcanoState(queues={"research": VolcanoQueue(
        "research", capability={GPU: 16})}))
    g = gang(pod_set("w", 3, gpu=8), kind="Job", name="train", volcano_queue="research")
    d, view, _ = _parts(snap, g)
    s = quota_step(snap, g, d, view)
    assert (s.system, s.queue, s.capability) == ("volcano", "research", {GPU: 16})
    assert not s.has("local_queue") and s.status == "blocking" and s.meaning.startswith("It can never be admitted by this queue")
    assert s.command == "kubectl get queue research -o yaml && kubectl get podgroups -A -o wide"


def test_verdict_line_names_what_blocks_it():
    snap, g = _fragmented()
    d, view, opts = _parts(snap, g)
    steps = [fit_step(snap, g, d, view, opts)]
    assert verdict_line(g, d, view, steps) == "Job default/train: Waits — capacity: 1 of 3 pods have no room now."


# ---------------------------------------------------------------- the CLI's seam


def test_the_cli_diagnoses_through_the_packages_diagnose(monkeypatch, capsys):
    # bench/diagnose.py wraps webhook.diagnose.diagnose to time the CLI's diagnosis: the CLI
    # must call the package's attribute, not a name bound at import.
    import webhook.diagnose as wd
    from webhook.cli import main

    calls = []
    real = wd.diagnose

    def wrapped(*a, **kw):
        calls.append(a[1].name)
        return real(*a, **kw)

    monkeypatch.setattr(wd, "diagnose", wrapped)
    assert main(["diagnose", EXAMPLE, "--cluster", "demo", "-o", "json"]) == 0
    assert calls == ["llama-70b-pretrain"]
    assert json.loads(capsys.readouterr().out)["gang"]["found"] == f"manifest {EXAMPLE}"


@pytest.mark.parametrize("name", list(STEP_TYPES))
def test_every_step_reads_back_from_the_demo_json(name):
    doc = diagnose(demo_snapshot(), _demo_gang(), DEMO_NOW)
    s = next(x for x in doc["steps"] if x["name"] == name)
    step = Step.from_dict(s)
    assert type(step) is STEP_TYPES[name] and step.to_dict() == s
