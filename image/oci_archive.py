"""Write an OCI image layout (umoci's) as the one archive ``ctr image import``, ``docker load``
and ``kind load image-archive`` all accept.

    python3 image/oci_archive.py LAYOUT_DIR REF OUT.tar     (REF: gangcheck:0.1.0)

The archive is the OCI layout (``oci-layout``, ``index.json``, ``blobs/sha256/…``) plus Docker's
``manifest.json`` pointing at the same blobs — the shape ``docker save`` writes since Docker 25
(moby/moby#44598) and ``ctr image export`` writes:

* containerd (``ctr image import``; ``kind load image-archive`` runs ``ctr --namespace=k8s.io
  images import`` on each node) prefers the OCI layout when ``oci-layout`` is present and names
  the image from the index's ``io.containerd.image.name`` annotation (containerd
  images/archive/importer.go ``ImportIndex``, client/import.go) — so the index carries the
  normalized reference ``docker.io/library/gangcheck:0.1.0``, which is also what the kubelet asks
  the CRI for when a pod names ``gangcheck:0.1.0``;
* Docker's loader reads ``manifest.json`` (``Config``, ``RepoTags``, ``Layers``: paths in the
  archive; gzip layers are decompressed on load), and Docker ≥ 25 also reads the OCI index.

The tar is reproducible: sorted entries, owner 0, mtime ``SOURCE_DATE_EPOCH`` (default 0).
Errors (a layout without the tag, a missing blob) exit 2 with one line naming what is missing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path

ANNOTATION_NAME = "io.containerd.image.name"
ANNOTATION_REF = "org.opencontainers.image.ref.name"


def normalize(ref: str) -> str:
    """Docker's normalization of a short reference: ``gangcheck:0.1.0`` →
    ``docker.io/library/gangcheck:0.1.0``; ``ghcr.io/x/y:1`` stays (distribution/reference's
    ParseNormalizedNamed: the first component is a registry when it has a dot or a port, or is
    ``localhost``)."""
    name, tag = (ref.rsplit(":", 1) if ":" in ref.rsplit("/", 1)[-1] else (ref, "latest"))
    first, _, rest = name.partition("/")
    if not rest:
        name = f"docker.io/library/{name}"
    elif not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name}"
    return f"{name}:{tag}"


def _blob_path(digest: str) -> str:
    algo, _, hexd = digest.partition(":")
    return f"blobs/{algo}/{hexd}"


def finish(layout: Path, ref: str) -> tuple[dict, list[dict]]:
    """The index (only REF's tag, named for containerd) and Docker's manifest.json for LAYOUT."""
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else "latest"
    index = json.loads((layout / "index.json").read_text())
    mine = [m for m in index.get("manifests", []) if m.get("annotations", {}).get(ANNOTATION_REF) == tag]
    if len(mine) != 1:
        raise SystemExit(f"oci_archive: {layout}/index.json has {len(mine)} manifests tagged {tag!r}, expected 1")
    desc = dict(mine[0])
    desc["annotations"] = {ANNOTATION_NAME: normalize(ref), ANNOTATION_REF: tag}
    index["manifests"] = [desc]
    manifest = json.loads(_read_blob(layout, desc["digest"]))
    docker = [{
        "Config": _blob_path(manifest["config"]["digest"]),
        "RepoTags": [ref],
        "Layers": [_blob_path(layer["digest"]) for layer in manifest["layers"]],
    }]
    for path in [docker[0]["Config"], *docker[0]["Layers"]]:
        if not (layout / path).is_file():
            raise SystemExit(f"oci_archive: {layout}/{path} is missing")
    return index, docker


def _read_blob(layout: Path, digest: str) -> bytes:
    data = (layout / _blob_path(digest)).read_bytes()
    algo, _, hexd = digest.partition(":")
    if algo != "sha256" or hashlib.sha256(data).hexdigest() != hexd:
        raise SystemExit(f"oci_archive: blob {digest} does not match its digest")
    return data


def write(layout: Path, ref: str, out: Path) -> None:
    index, docker = finish(layout, ref)
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0") or 0)

    def info(name: str, size: int = 0, is_dir: bool = False) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(name)
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        ti.mtime = mtime
        if is_dir:
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
        else:
            ti.size, ti.mode = size, 0o644
        return ti

    with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name, doc in (("oci-layout", {"imageLayoutVersion": "1.0.0"}), ("index.json", index),
                          ("manifest.json", docker)):
            data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
            tar.addfile(info(name, len(data)), io.BytesIO(data))
        tar.addfile(info("blobs", is_dir=True))
        for algo_dir in sorted((layout / "blobs").iterdir()):
            tar.addfile(info(f"blobs/{algo_dir.name}", is_dir=True))
            for blob in sorted(algo_dir.iterdir()):
                with blob.open("rb") as fh:
                    tar.addfile(info(f"blobs/{algo_dir.name}/{blob.name}", blob.stat().st_size), fh)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: oci_archive.py LAYOUT_DIR REF OUT.tar", file=sys.stderr)
        return 2
    write(Path(argv[0]), argv[1], Path(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
