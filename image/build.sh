#!/usr/bin/env bash
# `make image`: build gangcheck's container image without a Docker daemon or a registry — the
# same image ../Dockerfile builds, from the same pinned lists:
#
#   layer 1  Debian bookworm (mmdebstrap --variant=minbase) + image/debian-packages.txt,
#            dpkg-excludes.cfg, rootfs-setup.sh (user 65532)        cached by those files
#   layer 2  the runtime dependencies: image/requirements.lock      cached by the lock too
#   layer 3  gangcheck's wheel (built from this tree) and /usr/local/bin/gangcheck
#
# written as an OCI image with umoci; then the archive, an OCI layout tar (index.json, with the
# name containerd reads) that also carries Docker's manifest.json, so `ctr image import`,
# `docker load` and `kind load image-archive` all accept it (see oci_archive.py).
# Last two lines of stdout: the image reference (gangcheck:<version of pyproject.toml>) and the
# archive's path.
#
# Needs root (mmdebstrap's root mode, chroot, root-owned files in the layers), mmdebstrap and
# umoci (Debian packages: installed here with apt-get when missing), Debian's package mirror and
# PyPI. Env: PY (python with pip, default python3: it builds the wheel and installs the wheels for
# the image's platform), GANGCHECK_CACHE (cache root), GANGCHECK_IMAGE_OUT (output directory,
# default build/image), GANGCHECK_REBUILD=1 (ignore the cached layers).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
PY="${PY:-python3}"
cache_root="${GANGCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangcheck}"
cache="$cache_root/image"
out="${GANGCHECK_IMAGE_OUT:-$root/build/image}"
started=$SECONDS
log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 2; }

# ---------------------------------------------------------------- tools
if [ "$(id -u)" != 0 ]; then
  die "make image needs root (mmdebstrap --mode=root, chroot, root-owned files in the layers).
  Run it as root, or build with the Dockerfile: docker build -t gangcheck:<version> ."
fi
missing=()
for tool in mmdebstrap umoci; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get: install the Debian packages mmdebstrap and umoci"
  log "installing ${missing[*]} (apt-get)"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap umoci >&2 \
    || die "apt-get install mmdebstrap umoci failed"
fi
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip (set PY=... or run make install first)"

version="$("$PY" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$root/pyproject.toml")"
ref="gangcheck:$version"
case "$(uname -m)" in
  x86_64) arch=amd64 pyarch=x86_64 ;;
  aarch64|arm64) arch=arm64 pyarch=aarch64 ;;
  *) die "unsupported machine $(uname -m) (amd64 and arm64 are)" ;;
esac
# Wheels for the image's Python (bookworm's CPython 3.11, glibc 2.36), whatever python runs pip.
platforms=""
for minor in $(seq 36 -1 17); do platforms+=" --platform manylinux_2_${minor}_$pyarch"; done
export PIP="$PY -m pip"
export PIP_TARGET_ARGS="--implementation cp --python-version 3.11 --abi cp311 $platforms --platform manylinux2014_$pyarch --platform linux_$pyarch"
site=/usr/local/lib/python3.11/dist-packages

# A fixed time for the image's metadata and layers: the commit's, else 0 (reproducible).
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"
export SOURCE_DATE_EPOCH
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"

hash_of() { cat "$@" | sha256sum | cut -c1-16; }
# The recipe's own text is part of each key: a changed step rebuilds its layer.
debian_key="$(hash_of "$here/debian-packages.txt" "$here/dpkg-excludes.cfg" "$here/rootfs-setup.sh" <(echo "$arch"; sed -n '/^# ---- layer 1/,/^# ---- end 1/p' "$0"))"
python_key="$(hash_of <(echo "$debian_key") "$here/requirements.lock" "$here/build-requirements.lock" "$here/install-python.sh" <(sed -n '/^# ---- layer 2/,/^# ---- end 2/p' "$0"))"
[ "${GANGCHECK_REBUILD:-}" = 1 ] && rm -rf "$cache/debian-$debian_key" "$cache/python-$python_key"
mkdir -p "$cache" "$out"
exec 9>"$cache/.lock"
flock 9  # one build at a time per cache (layer 3 borrows the cached root filesystem)
work="$(mktemp -d "$cache/work.XXXXXX")"
trap 'rm -rf "$work"' EXIT

copy_layout() {  # copy_layout FROM TO: blobs are content-addressed and never rewritten: hard links
  mkdir -p "$2"
  cp -al "$1/blobs" "$2/blobs"
  cp "$1/index.json" "$1/oci-layout" "$2/"
}
compile_in() {  # compile_in ROOTFS DIR: install-python.sh compile, with the image's own python3
  cp "$here/install-python.sh" "$1/tmp/install-python.sh"
  chroot "$1" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin sh /tmp/install-python.sh compile "$2"
  rm -f "$1/tmp/install-python.sh"
}

# ---- layer 1: Debian
if [ ! -f "$cache/debian-$debian_key/index.json" ]; then
  log "layer 1: Debian bookworm minbase + $(grep -cv '^\s*\(#\|$\)' "$here/debian-packages.txt") packages (mmdebstrap)"
  packages="$(grep -v '^\s*\(#\|$\)' "$here/debian-packages.txt" | paste -sd, -)"
  debian_rootfs() {  # $1 = the --include list
    mmdebstrap --quiet --mode=root --variant=minbase --format=tar --skip=output/dev \
      --include="$1" --dpkgopt="$here/dpkg-excludes.cfg" \
      --customize-hook="sh '$here/rootfs-setup.sh' \"\$1\"" \
      --customize-hook="chroot \"\$1\" dpkg-query -W -f '\${Package}=\${Version}\n' > '$work/debian-manifest.txt'" \
      bookworm "$work/debian.tar" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main" >&2
  }
  # Debian serves only the newest version of a package: once a security update replaces a pinned
  # one, the pinned build fails. Then build with the versions served now (the manifest next to the
  # archive records them) and say so loudly, unless GANGCHECK_IMAGE_STRICT_PINS=1.
  if ! debian_rootfs "$packages"; then
    [ "${GANGCHECK_IMAGE_STRICT_PINS:-0}" = 1 ] \
      && die "mmdebstrap failed (a version in image/debian-packages.txt Debian no longer serves? run: make lock)"
    log "WARNING: a version pinned in image/debian-packages.txt is not served any more; building with the current ones (see debian-manifest.txt; run: make lock)"
    debian_rootfs "$(printf '%s' "$packages" | tr ',' '\n' | sed 's/=.*//' | paste -sd, -)" \
      || die "mmdebstrap failed with the current versions too (see above)"
  fi
  # An empty /dev heads the layer (the runtime mounts its own there): no device nodes in the image.
  mkdir -p "$work/empty/dev"
  tar --create --file "$work/layer1.tar" --no-recursion --numeric-owner --owner=0 --group=0 \
    --mtime="@$SOURCE_DATE_EPOCH" -C "$work/empty" ./dev
  tar --concatenate --file "$work/layer1.tar" "$work/debian.tar"
  umoci init --layout "$work/debian"
  umoci new --image "$work/debian:$version"
  umoci raw add-layer --image "$work/debian:$version" --history.created "$created" \
    --history.created_by "mmdebstrap --variant=minbase bookworm + image/debian-packages.txt" "$work/layer1.tar"
  mv "$work/debian-manifest.txt" "$work/debian/"
  rm -f "$work/debian.tar" "$work/layer1.tar"
  rm -rf "$cache/debian-$debian_key"; mv "$work/debian" "$cache/debian-$debian_key"
else
  log "layer 1: cached ($cache/debian-$debian_key)"
fi
# ---- end 1

# ---- layer 2: Python dependencies
# The cache keeps this stage's unpacked root filesystem too: layer 3 is byte-compiled in it.
if [ ! -f "$cache/python-$python_key/index.json" ] || [ ! -x "$cache/python-$python_key/rootfs/usr/bin/python3" ]; then
  log "layer 2: $(grep -c '^[a-z0-9]' "$here/requirements.lock") Python packages from image/requirements.lock"
  copy_layout "$cache/debian-$debian_key" "$work/python"
  umoci unpack --image "$work/python:$version" "$work/bundle" >&2
  sh "$here/install-python.sh" deps "$work/bundle/rootfs$site"
  compile_in "$work/bundle/rootfs" "$site"
  umoci repack --image "$work/python:$version" --history.created "$created" \
    --history.created_by "image/install-python.sh deps (image/requirements.lock)" "$work/bundle" >&2
  mv "$work/bundle/rootfs" "$work/python/rootfs"
  rm -rf "$work/bundle"
  cp "$cache/debian-$debian_key/debian-manifest.txt" "$work/python/"
  rm -rf "$cache/python-$python_key"; mv "$work/python" "$cache/python-$python_key"
else
  log "layer 2: cached ($cache/python-$python_key)"
fi
# ---- end 2

# ---- layer 3: gangcheck
log "layer 3: gangcheck $version (wheel from $root)"
# From a copy of exactly what the Dockerfile copies: an in-tree build would reuse build/lib,
# where a module deleted since the last build would live on.
mkdir -p "$work/src"
cp "$root/pyproject.toml" "$root/README.md" "$work/src/"
cp -r "$root/webhook" "$work/src/webhook"
find "$work/src/webhook" -name __pycache__ -prune -exec rm -rf {} +
sh "$here/install-python.sh" wheel "$work/src" "$work/dist"
wheel="$(ls "$work/dist"/gangcheck-"$version"-*.whl)"
# Layer 3 is a directory inserted at / (no unpack/repack of the whole root filesystem): the
# wheel's files and the entrypoint, byte-compiled by the image's python3 in the cached layer-2
# root filesystem (at their final path, then taken back out of it).
stage="$work/stage"
sh "$here/install-python.sh" app "$wheel" "$stage$site"
install -D -m 0755 "$here/gangcheck" "$stage/usr/local/bin/gangcheck"
scratch="$cache/python-$python_key/rootfs"
rm -rf "$scratch$site/webhook"
cp -a "$stage$site/webhook" "$scratch$site/webhook"
compile_in "$scratch" "$site/webhook"
rm -rf "$stage$site/webhook"
mv "$scratch$site/webhook" "$stage$site/webhook"
copy_layout "$cache/python-$python_key" "$work/layout"
umoci insert --image "$work/layout:$version" --history.created "$created" \
  --history.created_by "image/install-python.sh app $(basename "$wheel")" "$stage" / >&2
umoci config --image "$work/layout:$version" --created "$created" --author "gangcheck" \
  --history.created "$created" --history.created_by "image/build.sh: config" \
  --os linux --architecture "$arch" \
  --config.user 65532:65532 --config.workingdir / \
  --config.entrypoint gangcheck --config.cmd serve --config.cmd --cluster --config.cmd live \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 --config.env HOME=/home/nonroot \
  --config.exposedports 8443/tcp \
  --config.label "org.opencontainers.image.title=gangcheck" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0"
umoci gc --layout "$work/layout"

# Layers of other keys (older locks, other branches) go after a week unused.
touch "$cache/debian-$debian_key" "$cache/python-$python_key"
find "$cache" -mindepth 1 -maxdepth 1 \( -name 'debian-*' -o -name 'python-*' \) -mtime +7 -exec rm -rf {} +

archive="$out/gangcheck-$version.oci.tar"
"$PY" "$here/oci_archive.py" "$work/layout" "$ref" "$archive.tmp"
mv "$archive.tmp" "$archive"
cp "$cache/python-$python_key/debian-manifest.txt" "$out/debian-manifest.txt"
log "done in $((SECONDS - started)) s: $(du -m "$archive" | cut -f1) MB archive"
echo "$ref"
echo "$archive"
