#!/usr/bin/env bash
# Build Karpenter's KWOK cloud provider for the e2e tier's Karpenter referee (idempotent).
#
#   karpenter-kwok   from sigs.k8s.io/karpenter/kwok   (e2e/karpenter/go.mod)
#   crds/            Karpenter's CRDs copied from that module (karpenter.sh NodePool, NodeClaim,
#                    NodeOverlay; autoscaling.x-k8s.io CapacityBuffer; karpenter.kwok.sh
#                    KWOKNodeClass), applied by tests/e2e/e2e_karpenter.py
#
# Into ${GANGCHECK_CACHE:-~/.cache/gangcheck}/karpenter-<version>/, reused when present and
# built by the same recipe (RECIPE: a hash of e2e/karpenter/go.mod, go.sum and the build flags).
# Prints that directory as the last line of stdout. Called by e2e/build.sh.
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1 (ignore an existing build).
#
# Another Karpenter version: change `require sigs.k8s.io/karpenter` in e2e/karpenter/go.mod (its
# `go` line must not exceed the local Go unless GOTOOLCHAIN may fetch one) and run `go mod tidy`
# there; the cache directory is per version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/karpenter"
version="$(awk '$1=="require" && $2=="sigs.k8s.io/karpenter" {print $3}' "$mod/go.mod")"
log_tag=karpenter
source "$here/build-lib.sh"
out="$cache_root/karpenter-$version"
mkdir -p "$out"

recipe="$( { cat "$mod/go.mod" "$mod/go.sum"; echo "$ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
rebuild="${GANGCHECK_REBUILD:-0}"
if [[ -f "$out/RECIPE" && "$(cat "$out/RECIPE")" != "$recipe" ]]; then
  log "the build recipe changed since karpenter-kwok was built: rebuilding"
  rebuild=1
fi

if [[ "$rebuild" != 1 && -x "$out/karpenter-kwok" && -f "$out/RECIPE" && -d "$out/crds" ]]; then
  log "reusing karpenter $version in $out"
else
  log "building karpenter-kwok $version into $out (a cold build takes a few minutes on a small machine)"
  run_build "karpenter-kwok $version" "$mod" -ldflags="$ldflags" -o "$out/.karpenter-kwok.tmp" sigs.k8s.io/karpenter/kwok
  mv -f "$out/.karpenter-kwok.tmp" "$out/karpenter-kwok"
  # The CRDs of exactly the module that was built (read-only in the module cache: copy, then chmod).
  src="$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
  rm -rf "$out/crds" && mkdir -p "$out/crds"
  cp "$src"/pkg/apis/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$out/crds/"
  chmod u+w "$out"/crds/*.yaml
  echo "$recipe" >"$out/RECIPE"
fi
echo "karpenter $version" >"$out/VERSIONS"
( cd "$out" && ls -l karpenter-kwok | awk '{printf "[karpenter] %-15s %6.1f MB\n", $9, $5/1048576}'
  echo "[karpenter] crds: $(ls crds | tr '\n' ' ')" ) >&2
echo "$out"
