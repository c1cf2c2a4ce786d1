"""What a fresh-clone trial of the merged #17 work still found (issue #17 items 10 and 4's kin):
exit codes through a closed pipe, numbers too long to convert, unreadable directories, lone
surrogates in printed names, non-finite policy numbers. Each ran into exit 3 or a wrong 0 before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.cli import main
from webhook.policy import PolicyError, parse_policy

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "examples" / "pytorchjob-64x8.yaml"
DENIED = ROOT / "examples" / "pytorchjob-80x8.yaml"


def _cli(*args: str, stdin_closed_early: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "webhook", *args]
    if not stdin_closed_early:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    # `gangcheck … | head -1`: the reader takes one line and goes away.
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=120)
    return subprocess.CompletedProcess(cmd, p.returncode, first.decode(), err.decode())


def test_exit_code_survives_a_reader_that_goes_away():
    r = _cli("check", str(DENIED), "--cluster", "demo", stdin_closed_early=True)
    assert "NeverFits" in r.stdout
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_number_too_long_to_convert_is_bad_input(tmp_path, suffix, capsys):
    doc = yaml.safe_load(JOB.read_text())
    text = json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc)
    text = text.replace("replicas: 63", "replicas: " + "9" * 5001).replace('"replicas": 63', '"replicas": ' + "9" * 5001)
    f = tmp_path / f"job{suffix}"
    f.write_text(text)
    assert main(["check", str(f), "--cluster", "demo"]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and "a number too long to read" in err


def test_a_directory_it_may_not_read_is_bad_input(capsys):
    try:
        os.stat("/proc/1/cwd")
        pytest.skip("needs a directory this process may not read (/proc/1/cwd is readable here)")
    except PermissionError:
        pass
    assert main(["check", str(JOB), "--cluster", "/proc/1"]) == 2
    assert "cannot read the directory" in capsys.readouterr().err


def test_a_lone_surrogate_in_a_name_prints_escaped(tmp_path):
    doc = yaml.safe_load(JOB.read_text())
    doc["metadata"]["name"] = "llama\ud800"
    f = tmp_path / "job.json"
    f.write_text(json.dumps(doc))  # ASCII JSON: the surrogate as a \ud800 escape
    r = _cli("check", str(f), "--cluster", "demo")
    assert r.returncode == 0, r.stderr
    assert "llama\\ud800" in r.stdout


@pytest.mark.parametrize("text", ["staleAfterSeconds: .inf", "staleAfterSeconds: true",
                                  "warnFragmentationRatio: .nan", "warnExpectedWaitSeconds: .inf"])
def test_policy_numbers_must_be_finite_numbers(text):
    # An infinite staleAfterSeconds would switch off failing open on a stale cache.
    with pytest.raises(PolicyError) as e:
        parse_policy(text)
    assert e.value.code == "invalid_field" and text.split(":")[0] in str(e.value)


def test_policy_numbers_still_take_ints_and_floats():
    p = parse_policy("staleAfterSeconds: 60\nwarnFragmentationRatio: 0.5\nwarnExpectedWaitSeconds: 7200")
    assert (p.stale_after_seconds, p.warn_fragmentation_ratio, p.warn_expected_wait_seconds) == (60.0, 0.5, 7200.0)
