"""Packaging (#17 item 20): the console scripts (``gangcheck``, ``kubectl-gangcheck``), no test
dependencies in a plain install, and the krew plugin (manifest in krew's format, reproducible
archive, the shim it installs). A real ``pip install`` into a fresh virtualenv needs the package
index and minutes: it is checked by hand (see the report), not here."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
KREW = ROOT / "plugins" / "krew"


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_console_scripts_resolve(project):
    scripts = project["scripts"]
    assert scripts == {"gangcheck": "webhook.cli:main", "kubectl-gangcheck": "webhook.cli:kubectl_main"}
    for target in scripts.values():
        module, _, func = target.partition(":")
        assert callable(getattr(importlib.import_module(module), func))


def test_a_plain_install_pulls_no_test_tools(project):
    names = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not names & {"pytest", "hypothesis", "pytest-cov"}
    assert {"pytest", "hypothesis"} <= {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower() for d in project["optional-dependencies"]["test"]}


def test_the_cli_modules_import_no_test_tools():
    code = ("import sys, webhook.cli, webhook.cli_dump, webhook.diagnose; "
            "bad = [m for m in ('pytest', 'hypothesis', '_pytest') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_kubectl_main_runs_the_cli_with_kubectls_arguments(monkeypatch, capsys):
    from webhook.cli import kubectl_main

    monkeypatch.setattr(sys, "argv", ["kubectl-gangcheck", "check", str(ROOT / "examples" / "pytorchjob-80x8.yaml"), "--cluster", "demo"])
    assert kubectl_main() == 1
    assert capsys.readouterr().out.startswith("PyTorchJob llm/llama-405b-pretrain: NeverFits — denied")


# ---------------------------------------------------------------- krew


def test_krew_manifest_has_krews_shape(project):
    m = yaml.safe_load((KREW / "gangcheck.yaml").read_text())
    assert m["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2" and m["kind"] == "Plugin"
    assert m["metadata"]["name"] == "gangcheck" == (KREW / "gangcheck.yaml").stem  # krew: name = file name
    spec = m["spec"]
    assert spec["version"] == "v" + project["version"]  # semver with the 'v' krew requires
    assert spec["shortDescription"] and spec["description"] and spec["homepage"].startswith("https://")
    assert "pipx install gangcheck" in spec["caveats"]
    assert spec["platforms"]
    for p in spec["platforms"]:
        assert p["selector"]["matchExpressions"] or p["selector"]["matchLabels"]
        assert p["uri"].startswith("https://") and p["uri"].endswith(".tar.gz") and f"/{spec['version']}/" in p["uri"]
        assert re.fullmatch(r"[0-9a-f]{64}", p["sha256"])
        assert p["bin"] == "kubectl-gangcheck"
        assert {"from": "kubectl-gangcheck", "to": "."} in p["files"]


def test_krew_archive_is_reproducible_and_matches_the_manifest(tmp_path):
    build = [sys.executable, str(KREW / "build.py")]
    assert subprocess.run(build + ["--check"], cwd=ROOT).returncode == 0
    a = subprocess.run(build + ["--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()[0]
    first = (tmp_path / "kubectl-gangcheck.tar.gz").read_bytes()
    b = subprocess.run(build + ["--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()[0]
    assert a == b and (tmp_path / "kubectl-gangcheck.tar.gz").read_bytes() == first
    assert yaml.safe_load((KREW / "gangcheck.yaml").read_text())["spec"]["platforms"][0]["sha256"] == a


def _shim(tmp_path: Path, path_dirs: list[Path], *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.pathsep.join(str(p) for p in path_dirs), "HOME": str(tmp_path)}
    return subprocess.run(["/bin/sh", str(KREW / "kubectl-gangcheck"), *args], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_krew_shim_runs_gangcheck_with_the_arguments(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "gangcheck"
    fake.write_text('#!/bin/sh\necho "gangcheck called with: $*"\nexit 7\n')
    fake.chmod(0o755)
    r = _shim(tmp_path, [bin_dir, Path("/usr/bin"), Path("/bin")], "check", "job.yaml", "--cluster", "live")
    assert r.returncode == 7 and r.stdout == "gangcheck called with: check job.yaml --cluster live\n"


def test_krew_shim_without_the_package_says_how_to_install(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _shim(tmp_path, [empty], "--help")
    assert r.returncode == 2
    assert "pipx install gangcheck" in r.stderr
