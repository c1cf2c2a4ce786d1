"""Build the krew archive of the ``kubectl gangcheck`` plugin and keep its manifest in step.

    python plugins/krew/build.py [--out DIR]     # writes DIR/kubectl-gangcheck.tar.gz, prints its sha256
    python plugins/krew/build.py --update        # also writes that sha256 and the package version into gangcheck.yaml
    python plugins/krew/build.py --check         # exit 1 when gangcheck.yaml's sha256/version do not match

The archive holds the shim ``kubectl-gangcheck`` (a POSIX sh script that runs the ``gangcheck``
command of the Python package) and nothing else; it is built byte for byte
reproducibly (fixed mtime, owner and mode; gzip without a timestamp), so the sha256 in the
manifest is the archive anyone rebuilds from this commit. Publish the archive at the manifest's
``uri`` (a release asset) before submitting the manifest to a krew index.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import re
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ARCHIVE = "kubectl-gangcheck.tar.gz"
MANIFEST = HERE / "gangcheck.yaml"
SHIM = HERE / "kubectl-gangcheck"


def package_version() -> str:
    """``project.version`` of pyproject.toml."""
    m = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    if not m:
        raise SystemExit("pyproject.toml: no project version")
    return m.group(1)


def archive_bytes() -> bytes:
    """The .tar.gz: ``kubectl-gangcheck`` (mode 0755), reproducible."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        data = SHIM.read_bytes()
        info = tarfile.TarInfo("kubectl-gangcheck")
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=".", help="directory for the archive (default .)")
    p.add_argument("--update", action="store_true", help="write the sha256 and version into gangcheck.yaml")
    p.add_argument("--check", action="store_true", help="only compare gangcheck.yaml with the archive; exit 1 on a mismatch")
    args = p.parse_args(argv)
    data = archive_bytes()
    digest = hashlib.sha256(data).hexdigest()
    version = "v" + package_version()
    text = MANIFEST.read_text()
    if args.check:
        bad = [f"sha256 {s}" for s in re.findall(r"sha256:\s*\"?([0-9a-f]{64}|\S+)\"?", text) if s != digest]
        if f'version: "{version}"' not in text:
            bad.append(f"version (want {version})")
        if bad:
            print(f"{MANIFEST}: out of date ({', '.join(bad)}); run python plugins/krew/build.py --update", file=sys.stderr)
            return 1
        return 0
    out = Path(args.out) / ARCHIVE
    out.write_bytes(data)
    print(f"{digest}  {out}")
    if args.update:
        text = re.sub(r"(sha256:\s*)\"?\S+\"?", rf'\g<1>"{digest}"', text)
        text = re.sub(r'(\n  version:\s*)"[^"]*"', rf'\g<1>"{version}"', text)
        text = re.sub(r"/download/v[^/]+/", f"/download/{version}/", text)
        MANIFEST.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
