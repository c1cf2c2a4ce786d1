#!/usr/bin/env bash
# Build the job controllers for the e2e tier's controllers referee (idempotent;
# tests/e2e/test_e2e_controllers.py). Each from its own wrapper module, into its own versioned
# cache directory ${GANGCHECK_CACHE:-~/.cache/gangcheck}/<name>-<version>/:
#
#   jobset-<v>/jobset-controller   sigs.k8s.io/jobset (the module's root package main; e2e/jobset/go.mod)
#   jobset-<v>/crds/               config/components/crd/bases of that module
#   lws-<v>/lws-controller         sigs.k8s.io/lws/cmd (e2e/lws/go.mod)
#   lws-<v>/crds/                  config/crd/bases of that module
#   mpi-operator-<v>/mpi-operator-controller  github.com/kubeflow/mpi-operator/cmd/mpi-operator
#                                  (e2e/mpi-operator/go.mod); crds/: manifests/base/kubeflow.org_mpijobs.yaml
#
# A directory is reused when it holds the binary, its CRDs and a RECIPE equal to the hash of its
# wrapper's go.mod, go.sum and the build flags. Prints one line per controller on stdout
# ("<name> <dir>"). Called by e2e/build.sh. A controller that fails to build is logged and the
# others are still built; the exit code is then 1.
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1 (ignore existing builds),
#      GANGCHECK_CONTROLLERS="jobset lws" (build only these).
#
# Another version: change the `require` line in the wrapper's go.mod and run `go mod tidy` there;
# the cache directory is per version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_tag=controllers
source "$here/build-lib.sh"

# name | module | package to build | the CRDs in the module (space-separated: a directory, all its
# *.yaml, or a glob)
CONTROLLERS=(
  "jobset|sigs.k8s.io/jobset|sigs.k8s.io/jobset|config/components/crd/bases"
  "lws|sigs.k8s.io/lws|sigs.k8s.io/lws/cmd|config/crd/bases"
  "mpi-operator|github.com/kubeflow/mpi-operator|github.com/kubeflow/mpi-operator/cmd/mpi-operator|manifests/base/kubeflow.org_*.yaml"
)
only=" ${GANGCHECK_CONTROLLERS:-jobset lws mpi-operator} "

build_one() {  # $1 = name, $2 = module, $3 = package, $4 = CRD directories / globs
  local name="$1" module="$2" pkg="$3" crd_dirs="$4"
  local mod="$here/$name" version out recipe rebuild src d
  version="$(awk -v m="$module" '$1=="require" && $2==m {print $3}' "$mod/go.mod")"
  [[ -n "$version" ]] || { log "ERROR: $mod/go.mod has no 'require $module vX.Y.Z' line"; return 1; }
  out="$cache_root/$name-$version"
  mkdir -p "$out"
  recipe="$( { cat "$mod/go.mod" "$mod/go.sum"; echo "$pkg|$crd_dirs|$ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
  rebuild="${GANGCHECK_REBUILD:-0}"
  if [[ -f "$out/RECIPE" && "$(cat "$out/RECIPE")" != "$recipe" ]]; then
    log "the build recipe of $name changed since it was built: rebuilding"
    rebuild=1
  fi
  if [[ "$rebuild" != 1 && -x "$out/$name-controller" && -f "$out/RECIPE" && -d "$out/crds" ]]; then
    log "reusing $name $version in $out"
  else
    log "building $name-controller $version into $out"
    ( run_build "$name-controller $version" "$mod" -ldflags="$ldflags" -o "$out/.$name-controller.tmp" "$pkg" ) || return 1
    mv -f "$out/.$name-controller.tmp" "$out/$name-controller"
    # The CRDs of exactly the module that was built (read-only in the module cache: copy, then chmod).
    src="$(cd "$mod" && go list -m -f '{{.Dir}}' "$module")"
    rm -rf "$out/crds" && mkdir -p "$out/crds"
    for d in $crd_dirs; do
      if [[ -d "$src/$d" ]]; then cp "$src/$d"/*.yaml "$out/crds/"; else cp "$src"/$d "$out/crds/"; fi
    done
    chmod u+w "$out"/crds/*.yaml
    echo "$recipe" >"$out/RECIPE"
  fi
  echo "$name $version" >"$out/VERSIONS"
  ( cd "$out" && ls -l "$name-controller" | awk -v t="$log_tag" '{printf "[%s] %-22s %6.1f MB\n", t, $9, $5/1048576}'
    echo "[$log_tag] $name crds: $(ls crds | tr '\n' ' ')" ) >&2
  echo "$name $out"
}

rc=0
for c in "${CONTROLLERS[@]}"; do
  IFS='|' read -r name module pkg crds <<<"$c"
  [[ "$only" == *" $name "* ]] || continue
  build_one "$name" "$module" "$pkg" "$crds" || { log "WARNING: building $name FAILED (see above)"; rc=1; }
done
exit "$rc"
