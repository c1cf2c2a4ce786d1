"""The archive ``make image`` writes, imported by a real containerd (``ctr -n k8s.io image
import``: the import ``kind load image-archive`` runs on its nodes) and run by runc with the
root filesystem read-only and the image's own user: ``--help``, a check against the demo cluster,
and a write that must fail.

containerd (Debian's package) is started here with a configuration whose root, state and sockets
sit in the test's temporary directory (no systemd on these machines; the CRI plugin is disabled:
``ctr run`` does not need it), and stopped at the end; containerd 1.6's shim keeps sockets and
fifos under /run/containerd, whose empty directories are removed afterwards when the test made
them. ctr 1.6's ``run`` has no ``--user``: the user comes from the image's configuration, which
is what a pod without runAsUser gets too. Needs root, containerd, ctr and runc (Debian:
``apt-get install containerd runc``), else skipped (failed under GANGCHECK_REQUIRE_IMAGE=1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_tier import missing_tools, unavailable  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
NAME = f"docker.io/library/gangcheck:{VERSION}"
RUN_DIR = Path("/run/containerd")


@pytest.fixture(scope="module")
def containerd(request, built, tmp_path_factory):
    reason = missing_tools() or next((f"missing {t} (Debian: apt-get install containerd runc)"
                                      for t in ("containerd", "ctr", "runc") if shutil.which(t) is None), None)
    if reason:
        unavailable(request.config, reason)
    d = tmp_path_factory.mktemp("ctr")
    sock = d / "c.sock"
    (d / "config.toml").write_text(
        "version = 2\n"
        f'root = "{d}/root"\nstate = "{d}/state"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{sock}.ttrpc"\n'
        f'[debug]\n  address = "{d}/debug.sock"\n[metrics]\n  address = ""\n')
    had_run_dir = RUN_DIR.exists()
    log = (d / "containerd.log").open("w")
    proc = subprocess.Popen(["containerd", "--config", str(d / "config.toml")], stdout=log, stderr=log,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline, (d / "containerd.log").read_text()[-3000:]
            time.sleep(0.1)
        yield ["ctr", "--address", str(sock), "--namespace", "k8s.io"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if not had_run_dir and RUN_DIR.is_dir():
            for p in sorted(RUN_DIR.rglob("*"), key=lambda p: len(p.parts), reverse=True) + [RUN_DIR]:
                if p.is_dir() and not any(p.iterdir()):
                    p.rmdir()
    with open("/proc/self/mounts") as fh:
        assert [line for line in fh if str(d) in line] == []  # every snapshot was unmounted


def _ctr(ctr, *args, timeout=180):
    return subprocess.run([*ctr, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def imported(containerd, built):
    r = _ctr(containerd, "image", "import", str(built[1]))
    assert r.returncode == 0, r.stderr
    return containerd


def test_ctr_imports_the_archive_under_the_name_the_kubelet_asks_for(imported):
    r = _ctr(imported, "image", "ls", "-q")
    assert r.returncode == 0, r.stderr
    assert NAME in r.stdout.split()


def _run(ctr, cid, *argv, mounts=()):
    opts = [f"--mount=type=bind,src={src},dst={dst},options=rbind:ro" for src, dst in mounts]
    return _ctr(ctr, "run", "--rm", "--read-only", *opts, NAME, cid, *argv)


def test_runc_runs_it_read_only_as_the_images_user(imported):
    r = _run(imported, "gc-id", "sh", "-c", "id -u; id -g; touch /tmp/x 2>/dev/null || echo READONLY")
    assert r.stdout.split() == ["65532", "65532", "READONLY"], r.stderr


def test_runc_runs_gangcheck_help_and_a_check_against_the_demo_cluster(imported):
    r = _run(imported, "gc-help", "gangcheck", "--help")
    assert r.returncode == 0 and "usage: gangcheck" in r.stdout, r.stderr
    r = _run(imported, "gc-check", "gangcheck", "check", "/mnt/examples/pytorchjob-80x8.yaml", "--cluster", "demo",
             mounts=[(ROOT / "examples", "/mnt/examples")])
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("PyTorchJob llm/llama-405b-pretrain: NeverFits — denied"), r.stdout
