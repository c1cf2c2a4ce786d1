"""The small CLI items of #17 item 22: --shape validation, serve's certificate hint, certs --days,
--now (RFC 3339; a dump's own time by default), "1 pod", cluster-scoped names, the Volcano Job's
label, help descriptions. (nodes-fit-now: tests/test_admission.py; a garbage KUBECONFIG:
tests/test_cli_dump.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import build_parser, main
from webhook.cli_args import dump_time, parse_time
from webhook.dump import load_cluster

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, err: str) -> None:
    assert code == 2, err
    assert err.startswith("gangcheck: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


# ---------------------------------------------------------------- fragmentation --shape


def test_shape_equals_dashdash_is_a_clean_error(capsys):
    code, out, err = run(capsys, "fragmentation", "--cluster", "demo", "--shape=--")
    one_line_error(code, err)
    assert "--shape" in err and "AMOUNTxRESOURCE" in err and out == ""


@pytest.mark.parametrize("shape,needle", [
    ("8xfoo", "asks for no GPU resource"),
    ("8xcpu", "asks for no GPU resource"),
    ("0xnvidia.com/gpu", "asks for 0 nvidia.com/gpu"),
    ("8x@@", "is not a resource name"),
    ("abcxnvidia.com/gpu", "expected a quantity"),
])
def test_shapes_that_would_report_nonsense_are_refused(capsys, shape, needle):
    code, out, err = run(capsys, "fragmentation", "--cluster", "demo", "--shape", shape)
    one_line_error(code, err)
    assert needle in err and repr(shape) in err and out == ""


def test_a_gpu_shape_with_cpu_still_works(capsys):
    code, out, _ = run(capsys, "fragmentation", "--cluster", "demo", "--shape", "4xnvidia.com/gpu,48xcpu", "-o", "json")
    assert code == 0
    assert json.loads(out)["shape"] == {"nvidia.com/gpu": 4, "cpu": 48000}


# ---------------------------------------------------------------- serve and certs


def test_serve_missing_certificate_never_suggests_writing_to_root(capsys, tmp_path):
    code, _, err = run(capsys, "serve", "--tls-cert", "/nonexist", "--tls-key", "/nonexist.key", "--port", "1")
    one_line_error(code, err)
    assert "--tls-cert /nonexist: no such file" in err
    assert "--out /`" not in err and "--out / " not in err
    assert "gangcheck certs --out DIR" in err and "--tls-cert DIR/tls.crt --tls-key DIR/tls.key" in err


def test_serve_missing_default_certificate_suggests_its_directory(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "serve", "--port", "1")
    one_line_error(code, err)
    assert "--tls-cert certs/tls.crt: no such file; create it with `gangcheck certs --out certs`" in err


@pytest.mark.parametrize("days", ["-5", "0", "3651", "ten"])
def test_certs_days_out_of_range(capsys, tmp_path, days):
    with pytest.raises(SystemExit) as exc:
        main(["certs", "--days", days, "--out", str(tmp_path / "c")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --days: expected" in err
    assert "not valid after" not in err.lower()  # the library's own text stays out
    assert not (tmp_path / "c").exists()


def test_certs_days_one_works(capsys, tmp_path):
    assert main(["certs", "--days", "1", "--out", str(tmp_path / "c")]) == 0
    assert (tmp_path / "c" / "tls.crt").is_file()


def test_generate_refuses_days_below_one(tmp_path):
    from webhook.certs import generate

    with pytest.raises(ValueError, match="days: expected a whole number of days from 1"):
        generate(out_dir=tmp_path, days=0)


# ---------------------------------------------------------------- --now


@pytest.mark.parametrize("text,expected", [
    ("1748865600", 1748865600.0),
    ("1748865600.5", 1748865600.5),
    ("2025-06-02T12:00:00Z", 1748865600.0),
    ("2025-06-02T14:00:00+02:00", 1748865600.0),
    ("2025-06-02T12:00:00", 1748865600.0),  # no offset: UTC
    ("2025-06-02T12:00:00.250Z", 1748865600.25),
])
def test_parse_time(text, expected):
    assert parse_time(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "", "nan", "-1", "2025-13-01T00:00:00Z", "inf"])
def test_parse_time_rejects(text):
    with pytest.raises(ValueError):
        parse_time(text)


def test_now_accepts_rfc3339_on_the_command_line(capsys):
    code, out, _ = run(capsys, "diagnose", EXAMPLES / "pytorchjob-64x8.yaml", "--cluster", "demo", "-o", "json",
                       "--now", "2025-06-02T12:00:00Z")
    assert code == 0 and json.loads(out)["now"] == 1748865600.0
    with pytest.raises(SystemExit):
        main(["diagnose", str(EXAMPLES / "pytorchjob-64x8.yaml"), "--cluster", "demo", "--now", "yesterday"])
    assert "expected an RFC 3339 time" in capsys.readouterr().err


@pytest.fixture
def dump_file(tmp_path) -> Path:
    """The demo's objects as a dump file: pods started up to the demo's time, read years later."""
    from webhook.demo import demo_objects

    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(demo_objects())}))
    return path


def test_a_dump_is_evaluated_at_its_newest_timestamp_not_the_clock(capsys, dump_file):
    newest = dump_time(load_cluster(dump_file))
    assert newest is not None and newest < parse_time("2026-01-01T00:00:00Z")
    code, out, err = run(capsys, "diagnose", EXAMPLES / "pytorchjob-64x8.yaml", "--cluster", dump_file, "-o", "json")
    assert code == 0
    assert json.loads(out)["now"] == newest
    assert "no --now given: using the dump's newest timestamp" in err
    code, out, err = run(capsys, "check", EXAMPLES / "pytorchjob-64x8.yaml", "--cluster", dump_file, "-o", "json")
    assert code == 0 and json.loads(out)["now"] == newest
    assert "dump's newest timestamp" in err
    # with --now, that time and no note
    code, out, err = run(capsys, "check", EXAMPLES / "pytorchjob-64x8.yaml", "--cluster", dump_file, "-o", "json",
                         "--now", "2025-06-02T12:00:00Z")
    assert json.loads(out)["now"] == 1748865600.0 and "newest timestamp" not in err


def test_gpu_hours_lost_are_not_inflated_by_reading_an_old_dump(capsys, dump_file):
    # the same dump read with --now at its own time and without --now: the same report
    newest = dump_time(load_cluster(dump_file))
    code, at_dump, _ = run(capsys, "diagnose", EXAMPLES / "pytorchjob-64x8.yaml", "--cluster", dump_file, "-o", "json")
    code2, explicit, _ = run(capsys, "diagnose", EXAMPLES / "pytorchjob-64x8.yaml", "--cluster", dump_file, "-o", "json",
                             "--now", str(newest))
    assert code == code2 == 0
    assert json.loads(at_dump)["fixes"] == json.loads(explicit)["fixes"]


# ---------------------------------------------------------------- wording


def test_one_pod_is_one_pod(capsys, tmp_path):
    pod = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "solo", "namespace": "llm"},
           "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "m", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump(pod))
    code, out, _ = run(capsys, "check", f, "--cluster", "demo")
    assert code == 0
    assert "1 pods" not in out
    assert "  gang        1 pod: " in out and "(1 pod)" in out


def test_cluster_scoped_objects_have_no_namespace_in_messages(capsys, tmp_path):
    f = tmp_path / "node.yaml"
    f.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: p1-a}\n")
    code, _, err = run(capsys, "check", f, "--cluster", "demo")
    one_line_error(code, err)
    assert "Node p1-a:" in err and "default/p1-a" not in err


def test_a_volcano_job_is_shown_as_a_volcano_job(capsys):
    code, out, _ = run(capsys, "check", EXAMPLES / "volcano-job.yaml", "--cluster", "demo")
    assert code == 0
    assert out.startswith("Volcano Job llm/bert-large-sweep: Fits")
    assert "message     Volcano Job llm/bert-large-sweep (32 pods) fits now" in out
    code, out, _ = run(capsys, "diagnose", EXAMPLES / "volcano-job.yaml", "--cluster", "demo")
    assert "Why is Volcano Job llm/bert-large-sweep (32 pods) not running?" in out
    code, out, _ = run(capsys, "check", EXAMPLES / "job-8x8.yaml", "--cluster", "demo")
    assert out.startswith("Job llm/eval-sweep-8x8: Fits")  # a batch/v1 Job stays a Job


@pytest.mark.parametrize("command,needle", [
    ("serve", "admission webhook over TLS"),
    ("fragmentation", "stranded on nodes that cannot take"),
    ("dump", "List every resource gangcheck reads"),
])
def test_every_command_has_a_description(command, needle):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    help_text = " ".join(sub.choices[command].format_help().split())
    assert needle in help_text
    for action in sub.choices[command]._actions:
        assert action.help, (command, action.dest)
