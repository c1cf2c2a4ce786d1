#!/usr/bin/env bash
# Build Kueue's manager for the e2e tier's Kueue quota referee (idempotent).
#
#   kueue    from sigs.k8s.io/kueue/cmd/kueue   (e2e/kueue/go.mod)
#   crds/    Kueue's CRDs copied from that module (config/components/crd/bases: ClusterQueue,
#            LocalQueue, Cohort, ResourceFlavor, Workload, Topology, ...), applied server-side by
#            tests/e2e/e2e_kueue.py (the Workload CRD is too large for client-side apply)
#
# Into ${GANGCHECK_CACHE:-~/.cache/gangcheck}/kueue-<version>/, reused when present and built by
# the same recipe (RECIPE: a hash of e2e/kueue/go.mod, go.sum and the build flags). Prints that
# directory as the last line of stdout. Called by e2e/build.sh. A cold build takes ~4.5 min on
# two cores and adds ~1.75 GB to the Go build cache.
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1 (ignore an existing build).
#
# Another Kueue version: change `require sigs.k8s.io/kueue` in e2e/kueue/go.mod and run
# `go mod tidy` there; the cache directory is per version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/kueue"
version="$(awk '$1=="require" && $2=="sigs.k8s.io/kueue" {print $3}' "$mod/go.mod")"
log_tag=kueue
source "$here/build-lib.sh"
out="$cache_root/kueue-$version"
mkdir -p "$out"

recipe="$( { cat "$mod/go.mod" "$mod/go.sum"; echo "$ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
rebuild="${GANGCHECK_REBUILD:-0}"
if [[ -f "$out/RECIPE" && "$(cat "$out/RECIPE")" != "$recipe" ]]; then
  log "the build recipe changed since kueue was built: rebuilding"
  rebuild=1
fi

if [[ "$rebuild" != 1 && -x "$out/kueue" && -f "$out/RECIPE" && -d "$out/crds" ]]; then
  log "reusing kueue $version in $out"
else
  # The CRDs of exactly the module that is built (read-only in the module cache: copy, then
  # chmod), first: the whole e2e tier installs them (tests/e2e/conftest.py), so they are there
  # even if the build below fails.
  ( cd "$mod" && go mod download sigs.k8s.io/kueue )
  src="$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
  rm -rf "$out/crds.tmp" && mkdir -p "$out/crds.tmp"
  cp "$src"/config/components/crd/bases/*.yaml "$out/crds.tmp/"
  chmod u+w "$out"/crds.tmp/*.yaml
  rm -rf "$out/crds" && mv "$out/crds.tmp" "$out/crds"
  log "building kueue $version into $out (a cold build takes ~4.5 minutes on a small machine)"
  run_build "kueue $version" "$mod" -ldflags="$ldflags" -o "$out/.kueue.tmp" sigs.k8s.io/kueue/cmd/kueue
  mv -f "$out/.kueue.tmp" "$out/kueue"
  echo "$recipe" >"$out/RECIPE"
fi
echo "kueue $version" >"$out/VERSIONS"
( cd "$out" && ls -l kueue | awk '{printf "[kueue] %-15s %6.1f MB\n", $9, $5/1048576}'
  echo "[kueue] crds: $(ls crds | tr '\n' ' ')" ) >&2
echo "$out"
