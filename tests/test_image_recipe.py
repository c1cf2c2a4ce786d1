"""The image's two recipes (#12): the Dockerfile users build with and ``make image``
(image/build.sh, no Docker daemon) read the SAME pinned lists and run the same steps, so they
cannot drift; the lists are pinned (Python: ``==`` and hashes; Debian: ``name=version``) and hold
no compiler; the Deployment names the tag ``make image`` produces; the archive has the shape
``ctr image import`` / ``docker load`` / ``kind load image-archive`` read (image/oci_archive.py,
on a small synthetic layout). Fast and hermetic: building the real image is tests/image/."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
IMAGE = ROOT / "image"
LISTS = ["image/debian-packages.txt", "image/requirements.lock", "image/build-requirements.lock"]
STEPS = ["image/rootfs-setup.sh", "image/install-python.sh", "image/dpkg-excludes.cfg", "image/gangcheck"]
COMPILERS = {"gcc", "g++", "cpp", "clang", "build-essential", "binutils", "make", "python3-dev",
             "libpython3.11-dev", "python3.11-dev", "python3-pip", "python3-setuptools", "python3-wheel"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _requirements(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) of a pip-compile/uv lock file; every entry must be ``==`` pinned."""
    text = re.sub(r"\\\n", " ", path.read_text())
    reqs = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z0-9._-]+)==([^\s;]+)\s*(?:;[^-]*)?(.*)$", line)
        assert m, f"{path.name}: not an exact pin: {line[:80]}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", m.group(3))
        reqs[m.group(1).lower().replace("_", "-")] = (m.group(2), hashes)
    return reqs


def _name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0].lower().replace("_", "-")


# ---------------------------------------------------------------- one source of truth


def test_the_dockerfile_reads_the_same_pinned_lists_and_steps():
    copied = set()
    runs = []
    for word, args in _dockerfile():
        if word == "COPY" and "--from=" not in args:
            parts = [p for p in shlex.split(args) if not p.startswith("--")]
            copied.update(parts[:-1])
        if word == "RUN":
            runs.append(args)
    for path in LISTS + STEPS:
        assert path in copied, f"the Dockerfile does not COPY {path}"
    run = " && ".join(runs)
    # the Debian list drives apt-get; the Python steps are install-python.sh's, as in build.sh
    assert re.search(r"debian-packages\.txt\s*\|\s*xargs .*apt-get install", run)
    for step in ("install-python.sh deps", "install-python.sh wheel", "install-python.sh app",
                 "install-python.sh compile", "rootfs-setup.sh /"):
        assert step in run, f"the Dockerfile does not run {step}"


def test_make_image_reads_the_same_pinned_lists_and_steps():
    build = (IMAGE / "build.sh").read_text()
    for path in LISTS + STEPS:
        assert f'"$here/{Path(path).name}"' in build, f"image/build.sh does not read {path}"
    install = (IMAGE / "install-python.sh").read_text()
    # the locks are installed with hashes required, binary wheels only
    assert install.count("--require-hashes --only-binary=:all:") == 2
    assert '"$here/requirements.lock"' in install and '"$here/build-requirements.lock"' in install


def test_both_recipes_configure_the_same_user_entrypoint_and_cmd():
    df = dict((w, a) for w, a in _dockerfile() if w in ("USER", "ENTRYPOINT", "CMD"))
    assert df["USER"] == "65532:65532"
    assert json.loads(df["ENTRYPOINT"]) == ["gangcheck"]
    assert json.loads(df["CMD"]) == ["serve", "--cluster", "live"]
    build = re.sub(r"\\\n", " ", (IMAGE / "build.sh").read_text())
    assert "--config.user 65532:65532" in build
    assert re.findall(r"--config\.entrypoint (\S+)", build) == ["gangcheck"]
    assert re.findall(r"--config\.cmd (\S+)", build) == ["serve", "--cluster", "live"]
    envs = set(re.findall(r"--config\.env (\S+)", build))
    df_env = next(a for w, a in _dockerfile() if w == "ENV")
    assert set(df_env.split()) <= envs  # every ENV of the Dockerfile is in make image's config


def test_dockerignore_lets_every_copied_path_through():
    ignore = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert ignore[0] == "*"
    allowed = [line[1:].rstrip("/") for line in ignore if line.startswith("!")]
    for word, args in _dockerfile():
        if word == "COPY" and "--from=" not in args:
            for src in [p for p in shlex.split(args) if not p.startswith("--")][:-1]:
                assert any(src == a or src.startswith(a + "/") for a in allowed), f"{src} is ignored by .dockerignore"


# ---------------------------------------------------------------- the lists are pinned


def test_the_python_lock_pins_every_dependency_with_hashes():
    lock = _requirements(IMAGE / "requirements.lock")
    for spec in _project()["project"]["dependencies"]:
        assert _name(spec) in lock, f"{spec} is not in image/requirements.lock: run make lock"
    for name, (version, hashes) in lock.items():
        assert hashes, f"{name}=={version} has no --hash"
    assert not {"pip", "setuptools", "wheel", "pytest", "hypothesis"} & set(lock)


def test_the_build_lock_covers_the_build_system():
    lock = _requirements(IMAGE / "build-requirements.lock")
    for spec in _project()["build-system"]["requires"]:
        assert _name(spec) in lock, f"{spec} ([build-system] requires) is not in image/build-requirements.lock"
    assert all(hashes for _, hashes in lock.values())
    # setuptools>=77 (pyproject's requirement) is what the lock pins
    assert int(lock["setuptools"][0].split(".")[0]) >= 77


def test_the_debian_list_is_pinned_and_has_no_compiler():
    lines = [line for line in (IMAGE / "debian-packages.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines
    names = []
    for line in lines:
        assert re.fullmatch(r"[a-z0-9][a-z0-9.+-]+=[0-9][A-Za-z0-9.+~:-]*", line), f"not name=version: {line}"
        names.append(line.split("=")[0])
    assert "python3" in names
    assert not set(names) & COMPILERS


# ---------------------------------------------------------------- the Deployment's image


def test_the_deployment_names_the_tag_make_image_produces():
    version = _project()["project"]["version"]
    dep = yaml.safe_load((ROOT / "manifests" / "base" / "deployment.yaml").read_text())
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"gangcheck:{version}"
    assert 'ref="gangcheck:$version"' in (IMAGE / "build.sh").read_text()
    sc = dep["spec"]["template"]["spec"]["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"]) == (65532, 65532)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


# ---------------------------------------------------------------- the archive's shape


@pytest.fixture(scope="module")
def oci_archive():
    spec = importlib.util.spec_from_file_location("oci_archive", IMAGE / "oci_archive.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _blob(layout: Path, data: bytes) -> dict:
    d = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / d).write_bytes(data)
    return {"digest": f"sha256:{d}", "size": len(data)}


@pytest.mark.parametrize("ref, normalized", [
    ("gangcheck:0.1.0", "docker.io/library/gangcheck:0.1.0"),
    ("gangcheck", "docker.io/library/gangcheck:latest"),
    ("me/gangcheck:1", "docker.io/me/gangcheck:1"),
    ("ghcr.io/me/gangcheck:1", "ghcr.io/me/gangcheck:1"),
    ("localhost:5000/gangcheck:2", "localhost:5000/gangcheck:2"),
    ("localhost/gangcheck:2", "localhost/gangcheck:2"),
])
def test_references_are_normalized_as_docker_does(oci_archive, ref, normalized):
    assert oci_archive.normalize(ref) == normalized


def test_the_archive_is_an_oci_layout_with_dockers_manifest(oci_archive, tmp_path, monkeypatch):
    layout = tmp_path / "layout"
    layer = _blob(layout, b"layer-bytes")
    config = _blob(layout, json.dumps({"architecture": "amd64", "os": "linux"}).encode())
    manifest = _blob(layout, json.dumps({"schemaVersion": 2, "config": config, "layers": [layer]}).encode())
    other = _blob(layout, b"{}")
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {**manifest, "mediaType": "application/vnd.oci.image.manifest.v1+json",
         "annotations": {"org.opencontainers.image.ref.name": "0.1.0"}},
        {**other, "annotations": {"org.opencontainers.image.ref.name": "old"}}]}))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    out = tmp_path / "a.tar"
    oci_archive.write(layout, "gangcheck:0.1.0", out)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        assert names[:3] == ["oci-layout", "index.json", "manifest.json"]
        assert {m.uid for m in tar.getmembers()} == {0} and {m.mtime for m in tar.getmembers()} == {1700000000}
        index = json.load(tar.extractfile("index.json"))
        docker = json.load(tar.extractfile("manifest.json"))
    (desc,) = index["manifests"]
    assert desc["digest"] == manifest["digest"]
    assert desc["annotations"] == {"io.containerd.image.name": "docker.io/library/gangcheck:0.1.0",
                                   "org.opencontainers.image.ref.name": "0.1.0"}
    assert docker == [{"Config": "blobs/sha256/" + config["digest"][7:], "RepoTags": ["gangcheck:0.1.0"],
                       "Layers": ["blobs/sha256/" + layer["digest"][7:]]}]
    for path in [docker[0]["Config"], *docker[0]["Layers"]]:
        assert path in names
    again = tmp_path / "b.tar"
    oci_archive.write(layout, "gangcheck:0.1.0", again)
    assert again.read_bytes() == out.read_bytes()  # reproducible


def test_the_archive_refuses_a_layout_without_the_tag_or_with_a_bad_blob(oci_archive, tmp_path):
    layout = tmp_path / "layout"
    manifest = _blob(layout, b'{"config": {"digest": "sha256:00"}, "layers": []}')
    (layout / "index.json").write_text(json.dumps({"manifests": [
        {**manifest, "annotations": {"org.opencontainers.image.ref.name": "0.2.0"}}]}))
    with pytest.raises(SystemExit, match="0 manifests tagged '0.1.0'"):
        oci_archive.finish(layout, "gangcheck:0.1.0")
    (layout / "blobs" / "sha256" / manifest["digest"][7:]).write_bytes(b"tampered")
    with pytest.raises(SystemExit, match="does not match its digest"):
        oci_archive.finish(layout, "gangcheck:0.2.0")


def _kubectl() -> str | None:
    found = shutil.which("kubectl")
    if found:
        return found
    cache = Path(os.environ.get("GANGCHECK_CACHE", Path.home() / ".cache" / "gangcheck"))
    built = sorted(cache.glob("*/bin/kubectl"))  # the e2e tier's (make controlplane)
    return str(built[-1]) if built else None


def test_a_kustomize_images_override_changes_only_the_reference(tmp_path):
    """The README's overlay: `images:` repoints the Deployment at a registry, nothing else moves."""
    kubectl = _kubectl()
    if kubectl is None:
        pytest.skip("no kubectl on PATH or in the e2e cache (make controlplane builds one)")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(ROOT / "manifests", overlay)],
        "images": [{"name": "gangcheck", "newName": "registry.example.com/platform/gangcheck", "newTag": "9.9.9"}]}))

    def render(path):
        out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return list(yaml.safe_load_all(out.stdout))

    base, over = render(ROOT / "manifests"), render(overlay)
    image = [c["image"] for d in over if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]["containers"]]
    assert image == ["registry.example.com/platform/gangcheck:9.9.9"]
    for d in over:
        if d["kind"] == "Deployment":
            d["spec"]["template"]["spec"]["containers"][0]["image"] = f"gangcheck:{_project()['project']['version']}"
    assert over == base
