"""Inputs a first-time user tried that once crashed, exited with the wrong code, or — worst —
denied a job that could run. Each is pinned here."""

from __future__ import annotations

import io
import json
import sys

import pytest
import yaml

from builders import GPU, node, snapshot
from webhook.adapters import AdapterError, adapt
from webhook.cli import main
from webhook.engine.evaluate import evaluate

EXAMPLES = "examples"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path, name: str, docs) -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(docs) if isinstance(docs, list) else docs)
    return str(p)


def kueue_pod(total: int, gpus: int, name="w-0") -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "llm",
                     "labels": {"kueue.x-k8s.io/queue-name": "llm-queue", "kueue.x-k8s.io/pod-group-name": "grp"},
                     "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(total)}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus), "cpu": "8"}}}]},
    }


def test_kueue_pod_group_with_assumed_shapes_is_never_denied(capsys, tmp_path):
    # 1 CPU-only launcher + 64 × 8-GPU workers = 512 GPUs, exactly team-llm's maximum. Seen from
    # one worker, "65 pods of this shape" would be 520 > 512: an assumption, not a proof.
    f = write(tmp_path, "pg.yaml", [kueue_pod(65, 8)])
    code, out, _ = run(capsys, "check", f, "--cluster", "demo", "--output", "json")
    doc = json.loads(out)
    assert code == 0 and doc["allowed"] is True
    assert doc["verdict"] == "Waits" and "ExceedsMaxQuota" in doc["reasons"]
    # With capacity too: 400 pods of 8 GPUs assumed is more than the 364 GPU nodes, still no denial.
    g = adapt(kueue_pod(400, 8))
    d = evaluate(snapshot([node(f"n{i}") for i in range(4)]), g)
    assert d.verdict == "Waits"


def test_job_with_queue_label_and_no_resources_does_not_crash(capsys, tmp_path):
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "llm", "labels": {"kueue.x-k8s.io/queue-name": "llm-queue"}},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {}}]}}}}
    code, out, err = run(capsys, "check", write(tmp_path, "j.yaml", [job]), "--cluster", "demo")
    assert code == 0 and "Traceback" not in err
    assert "Fits" in out


@pytest.mark.parametrize("quantity", ["0.5", "500m"])
def test_fractional_gpu_quantities_are_bad_input(capsys, tmp_path, quantity):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: quantity}}}]}}}}
    code, _, err = run(capsys, "check", write(tmp_path, "j.yaml", [job]), "--cluster", "demo")
    assert code == 2
    assert "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu" in err
    assert "whole numbers" in err


GPU_FIELD = "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu"


def gpu_job(quantity, resource: str = GPU) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "llm"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {resource: quantity}}}]}}}}


# Issue #17 item 8. The API server stores a quantity past int64 (ParseQuantity keeps any
# exponent, k8s.io/apimachinery resource/quantity.go) and kube-scheduler, whose Value() then
# overflows, counted "1e9999999" GPUs as 0 and bound the pod. "1e9999999" raised
# decimal.Overflow here (a fail-open with a traceback), "1e400" was bad input (admitted).
@pytest.mark.parametrize("quantity", ["1e9999999", "1e400", "9223372036854775808", "1e19", float("inf")])
def test_a_quantity_past_int64_is_denied_naming_the_field_and_the_scheduler(capsys, tmp_path, quantity):
    g = adapt(gpu_job(quantity))
    d = evaluate(snapshot([node("n1")]), g)
    assert d.verdict == "NeverFits" and d.reasons == ["QuantityOverflow"]
    assert f"{GPU_FIELD}: " in d.message
    assert "kube-scheduler would count it as 0" in d.message and "could bind the pod without it" in d.message
    assert dict(g.pod_sets[0].requests) == {}  # counted as the scheduler counts it: not at all
    if isinstance(quantity, str):
        assert f"{GPU_FIELD}: {quantity} overflows the int64" in d.message
        code, out, err = run(capsys, "check", write(tmp_path, "j.yaml", [gpu_job(quantity)]), "--cluster", "demo")
        assert code == 1 and "Traceback" not in err
        assert "QuantityOverflow" in out and GPU_FIELD in out


def test_a_binary_quantity_past_int64_is_capped_by_kubernetes_and_never_fits():
    # "9Ei" > 2^63 - 1: ParseQuantity caps binary-suffixed amounts at maxAllowed (int64 max).
    d = evaluate(snapshot([node("n1")]), adapt(gpu_job("9Ei", "memory")))
    assert d.verdict == "NeverFits" and d.reasons == ["QuantityOverflow"]
    assert "spec.template.spec.containers[0].resources.limits.memory: 9Ei is more than the int64" in d.message
    assert "caps it at 2^63-1" in d.message and "stay Pending" in d.message


def test_quantity_overflow_is_denied_by_the_webhook_not_a_fail_open():
    import asyncio

    import httpx

    from webhook.server import create_app
    from webhook.sources import StaticSource

    app = create_app(StaticSource(snapshot([node("n1")]), "test"), None, clock=lambda: 1_750_000_000.0)
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "q", "operation": "CREATE", "namespace": "llm", "object": gpu_job("1e9999999")}}

    async def post():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gangcheck") as c:
            return await c.post("/validate", json=review)

    try:
        r = asyncio.run(post())
    finally:
        app.state.executor.shutdown(wait=True)  # no worker thread left behind (later tests fork)
    assert r.status_code == 200
    resp = r.json()["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    assert f"{GPU_FIELD}: 1e9999999 overflows" in resp["status"]["message"]
    assert resp["auditAnnotations"] == {"verdict": "NeverFits", "reasons": "QuantityOverflow"}


@pytest.mark.parametrize("quantity, detail", [
    (float("nan"), "expected a quantity such as '8' or '500m', got nan"),          # JSON NaN / YAML .nan
    (float("-inf"), "quantity must not be negative"),
    ("1e4294967296", "exponent out of range"),                                      # the API server reads it mod 2^32
    ("1" * 65, "expected a quantity of at most 64 characters, got 65"),
])
def test_malformed_quantities_are_per_field_adapter_errors(quantity, detail):
    # NaN raised decimal.InvalidOperation (an internal error with a traceback).
    with pytest.raises(AdapterError) as exc:
        adapt(gpu_job(quantity))
    assert exc.value.field == GPU_FIELD and detail in exc.value.detail


def test_nan_quantity_in_yaml_is_exit_2(capsys, tmp_path):
    f = write(tmp_path, "j.yaml", yaml.safe_dump(gpu_job(1.0)).replace("nvidia.com/gpu: 1.0", "nvidia.com/gpu: .nan"))
    code, _, err = run(capsys, "check", f, "--cluster", "demo")
    assert code == 2 and "Traceback" not in err and f"{GPU_FIELD}: expected a quantity" in err


def test_random_bytes_on_stdin_are_bad_input(capsys, monkeypatch):
    class Stdin:
        buffer = io.BytesIO(bytes(range(256)) * 2)

    monkeypatch.setattr(sys, "stdin", Stdin())
    code, _, err = run(capsys, "check", "-", "--cluster", "demo")
    assert code == 2 and "not UTF-8" in err


def test_a_dump_without_nodes_is_bad_input_not_a_denial(capsys, tmp_path):
    dump = write(tmp_path, "dump.yaml", [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                          "spec": {"containers": [{"name": "c"}]}}])
    code, _, err = run(capsys, "check", f"{EXAMPLES}/job-8x8.yaml", "--cluster", dump)
    assert code == 2 and "holds no Node objects" in err
    # The engine itself never denies on an empty cluster (a live cache that sees no nodes).
    d = evaluate(snapshot([]), adapt(yaml.safe_load(open(f"{EXAMPLES}/job-8x8.yaml"))))
    assert d.verdict == "Waits" and d.reasons == ["NoNodes"]


def test_a_node_without_status_is_unknown_capacity_not_proof(capsys, tmp_path):
    n = {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": "new", "labels": {"nvidia.com/gpu.present": "true"}}}
    code, out, _ = run(capsys, "check", f"{EXAMPLES}/job-8x8.yaml", "--cluster", write(tmp_path, "d.yaml", [n]),
                       "--output", "json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "Waits" and "NodeCapacityUnknown" in doc["reasons"]


def test_serve_rejects_an_impossible_port(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--port", "99999"])
    assert exc.value.code == 2
    assert "expected a port from 1 to 65535" in capsys.readouterr().err


def test_quota_hint_when_one_pod_exceeds_the_maximum(capsys, tmp_path):
    job = yaml.safe_load(open(f"{EXAMPLES}/job-8x8.yaml"))
    job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "llm-queue"
    job["metadata"]["namespace"] = "llm"
    for c in job["spec"]["template"]["spec"]["containers"]:
        c["resources"]["limits"][GPU] = c["resources"]["requests"][GPU] = "1024"
    code, out, _ = run(capsys, "check", write(tmp_path, "j.yaml", [job]), "--cluster", "demo")
    assert code == 1
    assert "One pod alone asks for more nvidia.com/gpu than the queue's maximum" in out
    assert "at most 0 pods" not in out


def _gpu_node(labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": labels},
            "status": {"allocatable": {GPU: "0", "cpu": "96", "memory": "1Ti", "pods": "110"},
                       "capacity": {GPU: "0", "cpu": "96", "memory": "1Ti", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize("labels", [
    {"nvidia.com/gpu.count": str(2**70)},                     # past int64: OverflowError in the snapshot
    {"nvidia.com/gpu.count": "²"},                            # str.isdigit() but not int(): ValueError
    {"nvidia.com/gpu.count": str(2**62), "nvidia.com/mig.config": "all-1g.10gb"},   # 7 × 2**62 slices
    {"nvidia.com/gpu.count": "٣", "nvidia.com/mig.config": "all-1g.10gb"},          # a non-ASCII digit
])
def test_a_gpu_count_label_no_node_could_have_is_ignored_not_a_crash(labels):
    # One node's garbage label used to raise out of build_snapshot, so a dump could not be read
    # and the live cache could not build a snapshot at all (every admission failing open).
    from webhook.adapters.cluster import build_snapshot

    snap = build_snapshot([_gpu_node(labels)])
    assert len(snap.nodes) == 1
    # Read as a node without the label: nothing repairable beyond what it advertises.
    assert int(snap.ever_alloc[0].max()) < 2**63 and int(snap.ever_alloc[0, snap.col["cpu"]]) == 96_000


def test_a_plausible_gpu_count_label_still_marks_the_missing_gpus_repairable():
    from webhook.adapters.cluster import build_snapshot

    snap = build_snapshot([_gpu_node({"nvidia.com/gpu.count": "8"})])
    assert int(snap.ever_alloc[0, snap.col[GPU]]) == 8
