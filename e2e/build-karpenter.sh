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
cache_root="${GANGCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangcheck}"
out="$cache_root/karpenter-$version"
mkdir -p "$out"

log() { printf '[karpenter %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

command -v go >/dev/null 2>&1 || { log "ERROR: 'go' is not on PATH; cannot build karpenter-kwok"; exit 2; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
export GOFLAGS="${GOFLAGS:-} -trimpath -buildvcs=false"
ldflags='-s -w'

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
  start=$SECONDS logf="$(mktemp)"
  ( cd "$mod" && go build -v -ldflags="$ldflags" -o "$out/.karpenter-kwok.tmp" sigs.k8s.io/karpenter/kwok ) >"$logf" 2>&1 &
  pid=$!
  # go build -v prints one package per line as it compiles it: a heartbeat with the count.
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && log "karpenter-kwok: $(( SECONDS - start ))s, $(wc -l <"$logf") packages compiled so far"
  done
  if ! wait "$pid"; then
    log "karpenter-kwok: FAILED after $(( SECONDS - start ))s; last output:"; tail -n 40 "$logf" >&2; rm -f "$logf"; exit 1
  fi
  log "karpenter-kwok: done in $(( SECONDS - start ))s ($(wc -l <"$logf") packages)"; rm -f "$logf"
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
