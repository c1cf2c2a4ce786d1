#!/usr/bin/env bash
# Build the helm CLI that renders, lints and installs charts/gangcheck (idempotent).
#
#   helm   from helm.sh/helm/v3/cmd/helm   (e2e/helm/go.mod)
#
# Into ${GANGCHECK_CACHE:-~/.cache/gangcheck}/helm-<version>/bin/helm, reused when present and
# built by the same recipe (RECIPE: a hash of e2e/helm/go.mod, go.sum and the build flags).
# Prints the binary's path as the last line of stdout. Called by e2e/build.sh; read by
# tests/helm_tool.py.
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1 (ignore an existing build).
#
# Another helm version: change `require helm.sh/helm/v3` in e2e/helm/go.mod and run
# `go mod tidy` there; the cache directory is per version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/helm"
version="$(awk '$1=="require" && $2=="helm.sh/helm/v3" {print $3}' "$mod/go.mod")"
log_tag=helm
source "$here/build-lib.sh"
out="$cache_root/helm-$version"
mkdir -p "$out/bin"

# Stamp the version as helm's Makefile does (`helm version` and .Capabilities.HelmVersion), and
# the Kubernetes version helm assumes when rendering offline (.Capabilities.KubeVersion): the
# client-go it is built with, v0.X.Y -> 1.X, the Makefile's rule.
client_go="$(awk '$1=="k8s.io/client-go" {print $2}' "$mod/go.mod")"
k8s_minor="$(echo "$client_go" | cut -d. -f2)"
helm_ldflags="$ldflags -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

recipe="$( { cat "$mod/go.mod" "$mod/go.sum"; echo "$helm_ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
rebuild="${GANGCHECK_REBUILD:-0}"
if [[ -f "$out/RECIPE" && "$(cat "$out/RECIPE")" != "$recipe" ]]; then
  log "the build recipe changed since helm was built: rebuilding"
  rebuild=1
fi

if [[ "$rebuild" != 1 && -x "$out/bin/helm" && -f "$out/RECIPE" ]]; then
  log "reusing helm $version in $out"
else
  log "building helm $version into $out (a cold build takes a few minutes on a small machine)"
  run_build "helm $version" "$mod" -ldflags="$helm_ldflags" -o "$out/bin/.helm.tmp" helm.sh/helm/v3/cmd/helm
  mv -f "$out/bin/.helm.tmp" "$out/bin/helm"
  echo "$recipe" >"$out/RECIPE"
fi
echo "helm $version (client-go $client_go)" >"$out/VERSIONS"
ls -l "$out/bin/helm" | awk '{printf "[helm] %-15s %6.1f MB\n", "helm", $5/1048576}' >&2
echo "$out/bin/helm"
