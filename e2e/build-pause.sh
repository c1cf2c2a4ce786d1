#!/usr/bin/env bash
# Build the real-node tier's pause image locally (no registry): a static Go binary
# (e2e/pause/main.go) as the only file of a one-layer OCI image made with umoci, written as the
# archive `ctr -n k8s.io image import` takes (image/oci_archive.py, the same writer `make image`
# uses). Idempotent: reused while e2e/pause/ is unchanged.
#
# Prints the image reference and the archive path (the last two lines of stdout).
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1, PY (python3 for oci_archive.py).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_tag=pause
source "$here/build-lib.sh"
command -v umoci >/dev/null 2>&1 || { log "ERROR: umoci is not on PATH (Debian: apt-get install umoci)"; exit 2; }
ref="localhost/gangcheck-pause:1"
key="$( { cat "$here/pause/main.go" "$here/pause/go.mod" "$here/../image/oci_archive.py"; echo "$ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
dir="$cache_root/pause"
archive="$dir/pause-$key.oci.tar"
if [[ "${GANGCHECK_REBUILD:-0}" != 1 && -f "$archive" ]]; then
  log "reusing $archive"
else
  mkdir -p "$dir"
  work="$(mktemp -d "$dir/.build.XXXX")"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/rootfs"
  ( cd "$here/pause" && CGO_ENABLED=0 go build -ldflags="$ldflags" -o "$work/rootfs/pause" . )
  created=1970-01-01T00:00:00Z
  umoci init --layout "$work/layout"
  umoci new --image "$work/layout:1"
  umoci insert --image "$work/layout:1" --history.created "$created" "$work/rootfs/pause" /pause >&2
  umoci config --image "$work/layout:1" --created "$created" --os linux --architecture "$(go env GOARCH)" \
    --config.entrypoint /pause --config.user 65535:65535
  umoci gc --layout "$work/layout"
  "${PY:-python3}" "$here/../image/oci_archive.py" "$work/layout" "$ref" "$archive.tmp"
  mv "$archive.tmp" "$archive"
  find "$dir" -maxdepth 1 -name 'pause-*.oci.tar' ! -name "$(basename "$archive")" -delete
  log "built $archive ($(du -k "$archive" | cut -f1) KiB)"
fi
echo "$ref"
echo "$archive"
