#!/usr/bin/env bash
# Build Volcano's scheduler and controller manager for the e2e tier's Volcano referee (idempotent).
#
#   vc-scheduler            from volcano.sh/volcano/cmd/scheduler           (e2e/volcano/go.mod)
#   vc-controller-manager   from volcano.sh/volcano/cmd/controller-manager
#   crds/                   Volcano's CRDs copied from that module (config/crd/volcano/bases:
#                           scheduling.volcano.sh Queue, PodGroup; batch.volcano.sh Job; ...),
#                           applied server-side by tests/e2e/e2e_volcano.py
#   volcano-scheduler.conf  the scheduler configuration of Volcano's Helm chart in that module
#                           (installer/helm/chart/volcano/config)
#
# Into ${GANGCHECK_CACHE:-~/.cache/gangcheck}/volcano-<version>/, reused when present and built
# by the same recipe (RECIPE: a hash of e2e/volcano/go.mod, go.sum, the shim and the build flags).
# Prints that directory as the last line of stdout. Called by e2e/build.sh.
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1 (ignore an existing build).
#
# volcano.sh/apis: the proxy refuses v1.15.0 (Volcano keeps it in a staging directory the module
# zip lacks); v1.14.0 is served and lacks one constant v1.15.0 uses. This script copies apis
# v1.14.0 from the module cache into e2e/volcano/apis-shim/ (git-ignored) and adds that constant
# (QueueAllocationGateKey, the value Volcano's staging/src/volcano.sh/apis defines); go.mod
# replaces volcano.sh/apis with that directory.
#
# Another Volcano version: change `require volcano.sh/volcano` in e2e/volcano/go.mod, repeat its
# go.mod's replace directives, pick the apis version the proxy serves, and `go mod tidy` there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/volcano"
version="$(awk '($1=="require" && $2=="volcano.sh/volcano") {print $3; exit} $1=="volcano.sh/volcano" && $2 ~ /^v[0-9]/ {print $2; exit}' "$mod/go.mod")"
apis_version="$(awk '$1=="volcano.sh/apis" && $2 ~ /^v[0-9]/ {print $2; exit}' "$mod/go.mod")"
log_tag=volcano
source "$here/build-lib.sh"
out="$cache_root/volcano-$version"
mkdir -p "$out"

shim_const='const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"'
recipe="$( { cat "$mod/go.mod" "$mod/go.sum"; echo "$apis_version|$shim_const|$ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
rebuild="${GANGCHECK_REBUILD:-0}"
if [[ -f "$out/RECIPE" && "$(cat "$out/RECIPE")" != "$recipe" ]]; then
  log "the build recipe changed since Volcano was built: rebuilding"
  rebuild=1
fi

if [[ "$rebuild" != 1 && -x "$out/vc-scheduler" && -x "$out/vc-controller-manager" && -f "$out/RECIPE" ]]; then
  log "reusing volcano $version in $out"
else
  log "building vc-scheduler and vc-controller-manager $version into $out (a cold build takes a few minutes on a small machine)"
  # volcano.sh/apis from the module proxy (outside any module, so go.mod's replace does not apply).
  apis_dir="$(cd / && GOFLAGS= go mod download -json "volcano.sh/apis@$apis_version" | awk -F'"' '$2=="Dir" {print $4}')"
  [[ -d "$apis_dir" ]] || { log "ERROR: could not download volcano.sh/apis@$apis_version"; exit 1; }
  rm -rf "$mod/apis-shim" && cp -r "$apis_dir" "$mod/apis-shim" && chmod -R u+w "$mod/apis-shim"
  printf '%s\n' "// Added by gangcheck's e2e/build-volcano.sh: the one constant volcano.sh/volcano $version" \
    "// uses that volcano.sh/apis $apis_version lacks, with the value Volcano gives it." \
    "package v1beta1" "" "$shim_const" >"$mod/apis-shim/pkg/apis/scheduling/v1beta1/zz_gangcheck_shim.go"
  run_build "vc-scheduler $version" "$mod" -ldflags="$ldflags" -o "$out/.vc-scheduler.tmp" volcano.sh/volcano/cmd/scheduler
  run_build "vc-controller-manager $version" "$mod" -ldflags="$ldflags" -o "$out/.vc-controller-manager.tmp" volcano.sh/volcano/cmd/controller-manager
  mv -f "$out/.vc-scheduler.tmp" "$out/vc-scheduler"
  mv -f "$out/.vc-controller-manager.tmp" "$out/vc-controller-manager"
  echo "$recipe" >"$out/RECIPE"
  rm -rf "$out/crds" "$out/volcano-scheduler.conf"
fi
if [[ ! -d "$out/crds" || ! -f "$out/volcano-scheduler.conf" ]]; then
  # The CRDs and the Helm chart's scheduler configuration of exactly the module that was built
  # (read-only in the module cache: copy, then chmod).
  src="$(cd / && GOFLAGS= go mod download -json "volcano.sh/volcano@$version" | awk -F'"' '$2=="Dir" {print $4}')"
  rm -rf "$out/crds" && mkdir -p "$out/crds"
  cp "$src"/config/crd/volcano/bases/*.yaml "$out/crds/"
  cp "$src"/installer/helm/chart/volcano/config/volcano-scheduler.conf "$out/volcano-scheduler.conf"
  chmod u+w "$out"/crds/*.yaml "$out/volcano-scheduler.conf"
fi
echo "volcano $version (volcano.sh/apis $apis_version + shim)" >"$out/VERSIONS"
( cd "$out" && ls -l vc-scheduler vc-controller-manager | awk '{printf "[volcano] %-22s %6.1f MB\n", $9, $5/1048576}'
  echo "[volcano] crds: $(ls crds | tr '\n' ' ')"; echo "[volcano] scheduler configuration: volcano-scheduler.conf" ) >&2
echo "$out"
