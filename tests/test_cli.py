"""`gangcheck check` (webhook.cli): exit codes, the JSON document, stdin, multi-document input,
and bad input (exit 2, a message naming the file, object and field, never a traceback)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FITS = EXAMPLES / "job-8x8.yaml"
WAITS = EXAMPLES / "pytorchjob-64x8.yaml"
NEVER = EXAMPLES / "pytorchjob-80x8.yaml"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def check_json(capsys, job, *extra: str):
    code, out, err = run(capsys, "check", job, "--cluster", "demo", "--output", "json", *extra)
    return code, json.loads(out), err


def assert_bad_input(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2, (code, out, err)
    assert out == ""
    assert err.startswith("gangcheck: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


def small_job(**container) -> dict:
    c = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
         "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "32", "memory": "256Gi"}}}
    c.update(container)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "probe", "namespace": "llm", "labels": {"kueue.x-k8s.io/queue-name": "llm-queue"}},
        "spec": {"parallelism": 2, "completions": 2,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [c]}}},
    }


def write_yaml(path: Path, *docs) -> Path:
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return path


# ---------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("job", "verdict", "code"),
    [(FITS, "Fits", 0), (WAITS, "Waits", 0), (NEVER, "NeverFits", 1)],
    ids=["fits", "waits", "neverfits"],
)
def test_exit_code_follows_verdict_in_enforce_mode(capsys, job, verdict, code):
    rc, doc, err = check_json(capsys, job)
    assert (rc, doc["verdict"], err) == (code, verdict, "")
    assert doc["allowed"] is (verdict != "NeverFits")


def test_text_output_exit_codes(capsys):
    rc, out, _ = run(capsys, "check", NEVER, "--cluster", "demo")
    assert rc == 1 and "NeverFits — denied" in out and "ExceedsMaxQuota" in out
    rc, out, _ = run(capsys, "check", WAITS, "--cluster", "demo")
    assert rc == 0 and "Waits — admitted with warnings" in out and "Fragmented" in out
    assert "/403 nodes are available: " in out


@pytest.mark.parametrize("mode", ["warn", "audit"])
def test_neverfits_is_admitted_outside_enforce_mode(capsys, tmp_path, mode):
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"mode: {mode}\n")
    rc, doc, err = check_json(capsys, NEVER, "--policy", policy)
    assert rc == 0 and err == ""
    assert doc["verdict"] == "NeverFits" and doc["allowed"] is True
    rc, out, _ = run(capsys, "check", NEVER, "--cluster", "demo", "--policy", policy)
    assert rc == 0 and f"NeverFits — admitted ({mode} mode)" in out


def test_explicit_enforce_policy_denies(capsys, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: enforce\n")
    rc, doc, _ = check_json(capsys, NEVER, "--policy", policy)
    assert rc == 1 and doc["allowed"] is False


# ---------------------------------------------------------------- JSON document


def test_json_document_keys(capsys):
    rc, doc, _ = check_json(capsys, WAITS)
    assert rc == 0
    for key in ("verdict", "allowed", "reasons", "message", "warnings", "gang", "nodes", "quota", "fragmentation"):
        assert key in doc, key
    assert doc["verdict"] in ("Fits", "Waits", "NeverFits")
    assert isinstance(doc["allowed"], bool) and isinstance(doc["message"], str) and doc["message"]
    assert isinstance(doc["reasons"], list) and all(isinstance(r, str) for r in doc["reasons"])
    assert isinstance(doc["warnings"], list) and all(isinstance(w, str) for w in doc["warnings"])
    for key in ("total", "eligible", "fit_now", "fit_ever", "reasons", "summary"):
        assert key in doc["nodes"], key
    assert isinstance(doc["nodes"]["reasons"], dict) and doc["nodes"]["summary"].endswith(".")
    g = doc["gang"]
    assert (g["kind"], g["name"], g["namespace"], g["pods"]) == ("PyTorchJob", "llama-70b-pretrain", "llm", 64)
    assert [(ps["name"], ps["count"], ps["requests"]["nvidia.com/gpu"]) for ps in g["pod_sets"]] == [("Master", 1, 8), ("Worker", 63, 8)]
    q = doc["quota"]
    assert q["local_queue"] == "llm-queue" and q["cluster_queue"] == "team-llm"
    assert "limits" in q and "request" in q
    assert q["limits"]["h100"]["nvidia.com/gpu"]["usage"] == 0
    f = doc["fragmentation"]
    for key in ("free", "stranded", "ratio", "deficit"):
        assert key in f, key
    json.dumps(doc)  # plain JSON all the way down


def test_json_without_queue_has_null_quota_or_no_cluster_queue(capsys):
    rc, doc, _ = check_json(capsys, EXAMPLES / "jobset-64-nvl.yaml")
    assert rc == 1 and doc["verdict"] == "NeverFits"
    assert "quota" in doc and not (doc["quota"] or {}).get("cluster_queue")


# ---------------------------------------------------------------- several documents, stdin


def test_multi_document_file_gives_a_json_list(capsys, tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text(FITS.read_text() + "\n---\n" + NEVER.read_text())
    rc, docs, err = check_json(capsys, f)
    assert isinstance(docs, list) and [d["verdict"] for d in docs] == ["Fits", "NeverFits"]
    assert [d["gang"]["name"] for d in docs] == ["eval-sweep-8x8", "llama-405b-pretrain"]
    assert rc == 1 and err == ""  # one denial denies the run


def test_multi_document_all_admitted_exits_0(capsys, tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text(FITS.read_text() + "\n---\n" + WAITS.read_text())
    rc, docs, _ = check_json(capsys, f)
    assert rc == 0 and [d["verdict"] for d in docs] == ["Fits", "Waits"]


def test_single_document_is_an_object_not_a_list(capsys):
    _, doc, _ = check_json(capsys, FITS)
    assert isinstance(doc, dict)


def test_dash_reads_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(FITS.read_text()))
    rc, doc, err = check_json(capsys, "-")
    assert rc == 0 and err == "" and doc["verdict"] == "Fits" and doc["gang"]["name"] == "eval-sweep-8x8"


def test_dash_reads_json_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(yaml.safe_load(NEVER.read_text()))))
    rc, doc, _ = check_json(capsys, "-")
    assert rc == 1 and doc["verdict"] == "NeverFits"


def test_stdin_errors_name_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("kind: [unclosed\n"))
    assert_bad_input(*run(capsys, "check", "-", "--cluster", "demo"), "<stdin>")


# ---------------------------------------------------------------- bad input


def test_missing_job_file(capsys, tmp_path):
    missing = tmp_path / "nope.yaml"
    assert_bad_input(*run(capsys, "check", missing, "--cluster", "demo"), str(missing), "no such file")


def test_unparsable_yaml(capsys, tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: x\n  oops: [\n")
    assert_bad_input(*run(capsys, "check", f, "--cluster", "demo"), str(f), "YAML", "line")


def test_unknown_kind(capsys, tmp_path):
    f = write_yaml(tmp_path / "cm.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "llm"}})
    code, out, err = run(capsys, "check", f, "--cluster", "demo")
    assert_bad_input(code, out, err, str(f), "ConfigMap llm/cfg", "apiVersion/kind", "unsupported kind", "kubeflow.org/v1 PyTorchJob")


def test_unknown_version_of_known_kind(capsys, tmp_path):
    job = small_job()
    job["apiVersion"] = "batch/v2"
    f = write_yaml(tmp_path / "v2.yaml", job)
    assert_bad_input(*run(capsys, "check", f, "--cluster", "demo"), str(f), "Job llm/probe", "apiVersion", "batch/v1")


def test_skip_unsupported_skips_unknown_kinds(capsys, tmp_path):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "llm"}, "data": {"a": "b"}}
    f = write_yaml(tmp_path / "mixed.yaml", cm, yaml.safe_load(FITS.read_text()))
    rc, doc, err = check_json(capsys, f, "--skip-unsupported")
    assert rc == 0 and err == ""
    assert isinstance(doc, dict) and doc["verdict"] == "Fits"  # only the Job is a gang
    rc, out, _ = run(capsys, "check", f, "--cluster", "demo", "--skip-unsupported")
    assert rc == 0 and "note: skipped document 1: v1/ConfigMap" in out


def test_skip_unsupported_with_nothing_left_is_bad_input(capsys, tmp_path):
    f = write_yaml(tmp_path / "cm.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}})
    assert_bad_input(*run(capsys, "check", f, "--cluster", "demo", "--skip-unsupported"), str(f), "no gang workload")


def test_missing_containers(capsys, tmp_path):
    job = small_job()
    del job["spec"]["template"]["spec"]["containers"]
    f = write_yaml(tmp_path / "nocontainers.yaml", job)
    assert_bad_input(*run(capsys, "check", f, "--cluster", "demo"), str(f), "Job llm/probe", "spec.template.spec.containers")


def test_bad_quantity(capsys, tmp_path):
    f = write_yaml(tmp_path / "qty.yaml", small_job(resources={"limits": {"nvidia.com/gpu": "8 GPUs"}}))
    assert_bad_input(
        *run(capsys, "check", f, "--cluster", "demo"),
        str(f), "Job llm/probe", "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu", "8 GPUs",
    )


def test_bad_quantity_names_the_document_in_a_multi_document_file(capsys, tmp_path):
    bad = small_job(resources={"limits": {"nvidia.com/gpu": "8 GPUs"}})
    bad["metadata"]["name"] = "second"
    f = write_yaml(tmp_path / "two.yaml", small_job(), bad)
    assert_bad_input(*run(capsys, "check", f, "--cluster", "demo"), str(f), "Job llm/second", "nvidia.com/gpu")


def test_bad_policy_mode(capsys, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: loud\n")
    assert_bad_input(*run(capsys, "check", FITS, "--cluster", "demo", "--policy", policy), str(policy), "mode", "enforce")


def test_unknown_policy_field(capsys, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: warn\nloudness: 11\n")
    assert_bad_input(*run(capsys, "check", FITS, "--cluster", "demo", "--policy", policy), str(policy), "loudness")


def test_missing_policy_file(capsys, tmp_path):
    policy = tmp_path / "absent.yaml"
    assert_bad_input(*run(capsys, "check", FITS, "--cluster", "demo", "--policy", policy), str(policy))


def test_missing_cluster_dump(capsys, tmp_path):
    dump = tmp_path / "cluster-dump.yaml"
    assert_bad_input(*run(capsys, "check", FITS, "--cluster", dump), str(dump), "no such file")


def test_empty_job_file(capsys, tmp_path):
    f = tmp_path / "empty.yaml"
    f.write_text("# nothing here\n")
    assert_bad_input(*run(capsys, "check", f, "--cluster", "demo"), str(f))


def test_no_subcommand_prints_help_and_exits_2(capsys):
    code = main([])
    out = capsys.readouterr().out
    assert code == 2 and "gangcheck" in out and "check" in out


# ---------------------------------------------------------------- python -m webhook


def test_python_m_webhook_help():
    r = subprocess.run([sys.executable, "-m", "webhook", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "gangcheck" in r.stdout and "check" in r.stdout and "Exit codes" in r.stdout


def test_python_m_webhook_check_help():
    r = subprocess.run([sys.executable, "-m", "webhook", "check", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--cluster" in r.stdout and "--skip-unsupported" in r.stdout


def test_python_m_webhook_bad_input_has_no_traceback(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("kind: [unclosed\n")
    r = subprocess.run([sys.executable, "-m", "webhook", "check", str(f), "--cluster", "demo"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and str(f) in r.stderr
