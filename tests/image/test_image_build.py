"""The real image (#12), built by image/build.sh — what ``make image`` runs — and checked from
the outside: the archive (OCI index.json AND Docker's manifest.json), the configuration (uid
65532, entrypoint ``gangcheck``, default args ``serve --cluster live``), the root filesystem
(no compiler, no pip, everything byte-compiled), and gangcheck run in that root filesystem
mounted read-only, as uid 65532, with nothing writable at all (not even /tmp): ``--help``, a
check against the demo cluster, and ``serve`` answering /healthz and /readyz over TLS.

The sandbox is a private mount namespace (``unshare --mount``): the unpacked root filesystem
bind-mounted onto itself and remounted read-only, /proc, a /dev holding only /dev/null, the
inputs bind-mounted read-only under /mnt, then ``chroot --userspec=65532:65532`` with the
image's own environment and entrypoint. See conftest.py for when the tier runs."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SITE = "usr/local/lib/python3.11/dist-packages"
BIN_DIRS = ["usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin", "bin", "sbin"]
COMPILER = re.compile(r"^(?:[a-z0-9_]+-linux-gnu-)?(?:gcc|g\+\+|cc|c\+\+|cpp|clang|clang\+\+|tcc|ld|ld\.bfd|ld\.gold"
                      r"|as|make|gfortran|rustc|cargo|go|nasm)(?:-[0-9.]+)?$")
COMPILER_PACKAGES = {"gcc", "g++", "cpp", "clang", "build-essential", "binutils", "make", "python3-dev",
                     "libpython3.11-dev", "python3.11-dev", "python3-pip", "python3-setuptools", "python3-wheel",
                     "libc6-dev", "linux-libc-dev"}


@pytest.fixture(scope="module")
def layout(built, tmp_path_factory):
    d = tmp_path_factory.mktemp("layout")
    with tarfile.open(built[1]) as tar:
        tar.extractall(d, filter="data")
    return d


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()


@pytest.fixture(scope="module")
def config(layout):
    (desc,) = json.loads((layout / "index.json").read_text())["manifests"]
    manifest = json.loads(_blob(layout, desc["digest"]))
    return json.loads(_blob(layout, manifest["config"]["digest"]))


@pytest.fixture(scope="module")
def rootfs(layout, tmp_path_factory):
    r = tmp_path_factory.mktemp("unpacked") / "rootfs"
    # the layers as a runtime applies them (umoci raw unpack: no bundle metadata to compute)
    subprocess.run(["umoci", "raw", "unpack", "--image", f"{layout}:{VERSION}", str(r)], check=True,
                   capture_output=True, timeout=600)
    for d in ("mnt/examples", "mnt/certs"):  # mount points for the inputs (made before the read-only remount)
        (r / d).mkdir(parents=True, exist_ok=True)
    return r


SANDBOX = r"""
set -eu
R="$1"; shift
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount -t tmpfs -o size=64k,mode=755 tmpfs "$R/dev"
touch "$R/dev/null"; mount --bind /dev/null "$R/dev/null"
mount --bind -o ro "$EXAMPLES" "$R/mnt/examples"
mount --bind -o ro "$CERTS" "$R/mnt/certs"
mount -o remount,bind,ro "$R"
exec chroot --userspec=65532:65532 "$R" "$@"
"""


def _sandbox(rootfs: Path, config: dict, argv: list[str], certs: Path):
    """argv run in the read-only root filesystem as 65532 with the image's environment."""
    env = config["config"]["Env"]
    cmd = ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c", SANDBOX, "sandbox",
           str(rootfs), "/usr/bin/env", "-i", *env, *argv]
    host_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "EXAMPLES": str(ROOT / "examples"), "CERTS": str(certs)}
    return cmd, host_env


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    subprocess.run([sys.executable, "-m", "webhook", "certs", "--out", str(d)], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    # a Secret volume with the pod's fsGroup makes them readable to 65532
    d.chmod(0o755)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def run(rootfs, config, certs, argv, timeout=120):
    cmd, env = _sandbox(rootfs, config, argv, certs)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- the archive and the config


def test_the_archive_is_an_oci_layout_and_a_docker_archive(built, layout):
    ref, archive = built
    assert ref == f"gangcheck:{VERSION}"
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"oci-layout", "index.json", "manifest.json"} <= names
    (desc,) = json.loads((layout / "index.json").read_text())["manifests"]
    assert desc["annotations"]["io.containerd.image.name"] == f"docker.io/library/gangcheck:{VERSION}"
    (docker,) = json.loads((layout / "manifest.json").read_text())
    assert docker["RepoTags"] == [ref]
    manifest = json.loads(_blob(layout, desc["digest"]))
    assert docker["Config"] == "blobs/sha256/" + manifest["config"]["digest"].split(":")[1]
    assert docker["Layers"] == ["blobs/sha256/" + layer["digest"].split(":")[1] for layer in manifest["layers"]]
    assert len(docker["Layers"]) == 3  # Debian, Python dependencies, gangcheck
    assert {docker["Config"], *docker["Layers"]} <= names
    sizes = ", ".join(f"{layer['size'] / 1e6:.1f}" for layer in manifest["layers"])
    print(f"\nimage {ref}: archive {archive.stat().st_size / 1e6:.1f} MB (layers {sizes} MB)")


def test_the_config_runs_gangcheck_serve_live_as_65532(config):
    c = config["config"]
    assert c["User"] == "65532:65532"
    assert c["Entrypoint"] == ["gangcheck"]
    assert c["Cmd"] == ["serve", "--cluster", "live"]
    assert config["os"] == "linux" and config["architecture"] in ("amd64", "arm64")
    env = dict(e.split("=", 1) for e in c["Env"])
    assert "/usr/local/bin" in env["PATH"].split(":")
    assert env["HOME"] == "/home/nonroot"


# ---------------------------------------------------------------- the root filesystem


def test_the_rootfs_has_no_compiler_and_no_pip(rootfs):
    found = []
    for d in BIN_DIRS:
        p = rootfs / d
        if p.is_dir() and not p.is_symlink():
            found += [f"/{d}/{f.name}" for f in p.iterdir() if COMPILER.match(f.name)]
    found += [str(p.relative_to(rootfs)) for p in (rootfs / "usr" / "lib").glob("gcc/*/*/cc1*")]
    assert found == []
    installed = {line.split("=")[0] for line in _dpkg(rootfs)}
    assert "python3" in installed and not installed & COMPILER_PACKAGES
    site = rootfs / SITE
    assert (site / "webhook").is_dir() and (site / "numpy").is_dir()
    assert not [n for n in ("pip", "setuptools", "wheel", "_distutils_hack", "bin") if (site / n).exists()]
    assert (rootfs / "usr/local/bin/gangcheck").stat().st_mode & 0o111
    size = sum(f.lstat().st_size for f in rootfs.rglob("*") if f.is_file() and not f.is_symlink())
    print(f"\nunpacked root filesystem: {size / 1e6:.0f} MB ({sum(1 for _ in rootfs.rglob('*'))} entries)")


def test_the_compiler_pattern_knows_the_names_it_must_catch():
    for name in ("gcc", "gcc-12", "x86_64-linux-gnu-gcc-12", "cc", "c++", "cpp-12", "ld", "ld.bfd", "as", "make",
                 "aarch64-linux-gnu-ld", "clang", "rustc"):
        assert COMPILER.match(name), name
    for name in ("python3", "gangcheck", "ldd", "ldconfig", "asn1parse", "cat", "makedev", "gzip"):
        assert not COMPILER.match(name), name


def _dpkg(rootfs: Path) -> list[str]:
    out, name = [], None
    for line in (rootfs / "var/lib/dpkg/status").read_text().splitlines():
        if line.startswith("Package: "):
            name = line.split(": ", 1)[1]
        elif line.startswith("Status: ") and line.endswith(" installed") and name:
            out.append(name + "=")
    return out


def test_every_python_module_is_byte_compiled_unchecked(rootfs):
    """A read-only root filesystem cannot take __pycache__ writes: without these every start
    compiles every module again, in memory."""
    site = rootfs / SITE
    missing, checked = [], 0
    for py in list(site.rglob("*.py")) + list((rootfs / "usr/lib/python3.11").glob("*.py")):
        pyc = py.parent / "__pycache__" / f"{py.stem}.cpython-311.pyc"
        if not pyc.exists():
            missing.append(str(py.relative_to(rootfs)))
            continue
        if site in py.parents:
            flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
            assert flags == 0b01, f"{pyc}: flags {flags:#b}, expected an unchecked hash-based .pyc"
            checked += 1
    assert missing == [] and checked > 1000


# ---------------------------------------------------------------- gangcheck in it, read-only, as 65532


def test_the_sandbox_is_read_only_and_runs_as_65532(rootfs, config, certs):
    r = run(rootfs, config, certs, ["/bin/sh", "-c", "id -u; id -g; touch /tmp/x || echo READONLY; touch /x || echo READONLY"])
    assert r.stdout.split() == ["65532", "65532", "READONLY", "READONLY"], r.stderr


def test_gangcheck_help_and_a_check_against_the_demo_cluster(rootfs, config, certs):
    entry = config["config"]["Entrypoint"]
    r = run(rootfs, config, certs, [*entry, "--help"])
    assert r.returncode == 0, r.stderr
    assert "usage: gangcheck" in r.stdout and "serve" in r.stdout and "check" in r.stdout
    r = run(rootfs, config, certs, [*entry, "check", "/mnt/examples/pytorchjob-80x8.yaml", "--cluster", "demo"])
    assert r.returncode == 1, r.stderr  # 1: denied
    assert r.stdout.startswith("PyTorchJob llm/llama-405b-pretrain: NeverFits — denied"), r.stdout
    assert r.stderr == ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the sandbox we started (its own session), SIGKILL after 20 s."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def test_serve_answers_health_and_readiness_from_the_read_only_rootfs(rootfs, config, certs):
    port = _free_port()
    cmd, env = _sandbox(rootfs, config, [*config["config"]["Entrypoint"], "serve", "--cluster", "demo",
                                         "--host", "127.0.0.1", "--port", str(port),
                                         "--tls-cert", "/mnt/certs/tls.crt", "--tls-key", "/mnt/certs/tls.key"], certs)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.check_hostname = False  # the certificate names the Service, not 127.0.0.1; the CA is checked
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=2) as resp:
                    assert json.loads(resp.read()) == {"ok": True}
                    break
            except (OSError, urllib.error.URLError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    _stop(proc)
                    raise AssertionError(f"serve did not come up (exit {proc.poll()}): {proc.communicate()[1][-3000:]}")
                time.sleep(0.3)
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=5) as resp:
            assert resp.status == 200
    finally:
        _stop(proc)
        _, err = proc.communicate()
    assert "Traceback" not in err, err[-3000:]
