"""Bad files never end a CLI command in a traceback with exit 1 (which scripts read as "denied"),
#17 item 10: every command that reads a file (check JOB, --cluster, --policy; diagnose;
fragmentation; serve's certificate; certs --reuse-ca) exits 2 with one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webhook.cli import main

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "examples" / "job-8x8.yaml"
DEEP = "[" * 1000 + "]" * 1000  # 1,000 nested arrays: RecursionError in msgspec and json


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_names(code: int, err: str, path: Path | str, *needles: str) -> None:
    assert code == 2, err
    assert err.startswith("gangcheck: error: ") and err.count("\n") == 1, err
    assert str(path) in err, err
    assert "Traceback" not in err and "RecursionError" not in err and "UnicodeDecodeError" not in err
    for n in needles:
        assert n in err, err


@pytest.fixture
def files(tmp_path):
    f = {}
    f["nested_json"] = tmp_path / "nested.json"
    f["nested_json"].write_text(DEEP)
    f["deep_object"] = tmp_path / "deep.json"
    f["deep_object"].write_text('{"a":' * 5000 + "1" + "}" * 5000)
    pod = ('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},'
           '"spec":{"containers":[],"x":%s}}' % ("[" * 5000 + "]" * 5000))
    node = '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"allocatable":{"cpu":"4"}}}'
    f["deep_item"] = tmp_path / "dump.json"
    f["deep_item"].write_text('{"apiVersion":"v1","kind":"List","items":[%s,%s]}' % (node, pod))
    f["binary"] = tmp_path / "policy.yaml"
    f["binary"].write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe\xfd" * 8)
    f["nested_yaml"] = tmp_path / "nested-policy.yaml"
    f["nested_yaml"].write_text(DEEP + "\n")
    return f


@pytest.mark.parametrize("which", ["nested_json", "deep_object"])
def test_deeply_nested_job_file(capsys, files, which):
    code, out, err = run(capsys, "check", files[which], "--cluster", "demo")
    assert_names(code, err, files[which], "nested too deeply")
    assert out == ""


@pytest.mark.parametrize("which", ["nested_json", "deep_object", "deep_item"])
def test_deeply_nested_cluster_file(capsys, files, which):
    code, _, err = run(capsys, "check", JOB, "--cluster", files[which])
    assert_names(code, err, files[which], "nested too deeply")


def test_deeply_nested_job_on_stdin(capsys, monkeypatch, files):
    import io
    import sys

    deep = '{"a":' * 5000 + "1" + "}" * 5000  # starts with "{": read as JSON
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(deep.encode())))
    code, _, err = run(capsys, "check", "-", "--cluster", "demo")
    assert_names(code, err, "<stdin>", "nested too deeply")


@pytest.mark.parametrize("cmd", ["check", "diagnose", "fragmentation"])
def test_binary_policy_file(capsys, files, cmd):
    args = {"check": ["check", JOB, "--cluster", "demo"], "diagnose": ["diagnose", JOB, "--cluster", "demo"],
            "fragmentation": ["fragmentation", "--cluster", "demo"]}[cmd]
    code, _, err = run(capsys, *args, "--policy", files["binary"])
    assert_names(code, err, files["binary"], "not UTF-8")


def test_deeply_nested_policy_file(capsys, files):
    code, _, err = run(capsys, "check", JOB, "--cluster", "demo", "--policy", files["nested_yaml"])
    assert_names(code, err, files["nested_yaml"], "nested too deeply")


@pytest.mark.parametrize("cmd", ["diagnose", "fragmentation"])
def test_diagnose_and_fragmentation_name_the_nested_dump(capsys, files, cmd):
    args = ["diagnose", "job/x", "--cluster", files["deep_item"]] if cmd == "diagnose" else ["fragmentation", "--cluster", files["deep_item"]]
    code, _, err = run(capsys, *args)
    assert_names(code, err, files["deep_item"], "nested too deeply")


def test_diagnose_deeply_nested_manifest(capsys, files):
    code, _, err = run(capsys, "diagnose", files["nested_json"], "--cluster", "demo")
    assert_names(code, err, files["nested_json"], "nested too deeply")


def test_serve_with_a_certificate_that_is_not_pem(capsys, tmp_path, files):
    assert main(["certs", "--out", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    code, _, err = run(capsys, "serve", "--tls-cert", files["binary"], "--tls-key", tmp_path / "c" / "tls.key", "--port", "1")
    assert_names(code, err, files["binary"], "not a PEM certificate")


def test_certs_reuse_ca_with_garbage_ca(capsys, tmp_path, files):
    out = tmp_path / "c"
    assert main(["certs", "--out", str(out)]) == 0
    capsys.readouterr()
    (out / "ca.crt").write_bytes(files["binary"].read_bytes())
    code, _, err = run(capsys, "certs", "--reuse-ca", "--out", out)
    assert_names(code, err, out / "ca.crt", "not a PEM certificate")
    other = tmp_path / "other"
    assert main(["certs", "--out", str(other)]) == 0
    capsys.readouterr()
    (out / "ca.crt").write_bytes((other / "ca.crt").read_bytes())  # a CA that is not ca.key's
    code, _, err = run(capsys, "certs", "--reuse-ca", "--out", out)
    assert_names(code, err, out / "ca.key", "is not the key of")


def test_certs_out_is_a_file(capsys, files):
    code, _, err = run(capsys, "certs", "--out", files["binary"])
    assert_names(code, err, files["binary"], "not a directory")


def test_an_unforeseen_error_is_exit_3_never_1(capsys, monkeypatch):
    import webhook.cli as cli

    def boom(args):
        raise KeyError("surprise")

    monkeypatch.setattr(cli, "cmd_check", boom)
    code, _, err = run(capsys, "check", JOB, "--cluster", "demo")
    assert code == 3
    assert err.startswith("gangcheck: internal error: check: KeyError") and "Traceback" not in err


def test_json_output_is_still_json_after_the_fixes(capsys):
    code, out, _ = run(capsys, "check", JOB, "--cluster", "demo", "-o", "json")
    assert code == 0 and json.loads(out)["verdict"] == "Fits"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_in_a_json_dump_are_not_json(capsys, tmp_path, literal):
    f = tmp_path / "dump.json"
    f.write_text('{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node",'
                 '"metadata":{"name":"n"},"status":{"allocatable":{"cpu":%s}}}]}' % literal)
    code, _, err = run(capsys, "check", JOB, "--cluster", f)
    assert_names(code, err, f, f"{literal.lstrip('-')} is not a JSON value")
