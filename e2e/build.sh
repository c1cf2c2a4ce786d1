#!/usr/bin/env bash
# Build the local control plane for gangcheck's e2e tier (idempotent).
#
#   kube-apiserver, kube-scheduler, kubectl  from k8s.io/kubernetes   (e2e/go.mod)
#   kubelet, kube-controller-manager,        the same k8s.io/kubernetes (e2e/node/go.mod), for
#   kube-proxy                               the real-node tier (tests/node); own recipe hash
#                                            (RECIPE-node) so adding them rebuilt nothing else
#   etcd                                     from go.etcd.io/etcd/server/v3 (e2e/etcd/go.mod)
#   karpenter-kwok + Karpenter's CRDs        from sigs.k8s.io/karpenter (e2e/karpenter/go.mod;
#                                            e2e/build-karpenter.sh, its own cache directory)
#   vc-scheduler, vc-controller-manager      from volcano.sh/volcano (e2e/volcano/go.mod;
#   + Volcano's CRDs and scheduler config    e2e/build-volcano.sh, its own cache directory)
#   kueue + Kueue's CRDs                     from sigs.k8s.io/kueue (e2e/kueue/go.mod;
#                                            e2e/build-kueue.sh, its own cache directory)
#   helm                                     from helm.sh/helm/v3 (e2e/helm/go.mod;
#                                            e2e/build-helm.sh, its own cache directory)
#
# Binaries go to ${GANGCHECK_CACHE:-~/.cache/gangcheck}/<k8s version>/bin and are reused when
# present. Prints the bin directory as the last line of stdout.
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1 (ignore existing binaries).
#
# Another Kubernetes version: in e2e/go.mod change `require k8s.io/kubernetes` and every
# staging `replace` line (the list is the `=> ./staging/...` block of k8s.io/kubernetes's own
# go.mod; v1.X.Y maps to v0.X.Y), pick a paired etcd in e2e/etcd/go.mod, run `go mod tidy` in
# both directories. The cache directory is per Kubernetes version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_version="$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/go.mod")"
etcd_version="$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")"
log_tag=controlplane
# Kubernetes 1.37 needs go >= 1.26; GOTOOLCHAIN=auto lets the go command fetch one if older.
source "$here/build-lib.sh"
bin="$cache_root/$k8s_version/bin"
mkdir -p "$bin"

# Stamp the Kubernetes version into the binaries (as the upstream build does) so /version and
# `kubectl version` report it instead of v0.0.0-master.
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
k8s_ldflags="$ldflags"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# A change to the wrapper modules or to the build flags invalidates the cached binaries.
recipe="$( { cat "$here/go.mod" "$here/go.sum" "$here/etcd/go.mod" "$here/etcd/go.sum"; echo "$ldflags|$k8s_ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
if [[ -f "$bin/RECIPE" && "$(cat "$bin/RECIPE")" != "$recipe" ]]; then
  log "the build recipe changed since these binaries were built: rebuilding"
  GANGCHECK_REBUILD=1
fi

need_k8s=()
for b in kube-apiserver kube-scheduler kubectl; do
  if [[ "${GANGCHECK_REBUILD:-0}" == 1 || ! -x "$bin/$b" ]]; then need_k8s+=("$b"); fi
done
need_node=()
# The node binaries' recipe (kubelet, kube-controller-manager, kube-proxy): their own wrapper module and the same flags.
node_recipe="$( { cat "$here/node/go.mod" "$here/node/go.sum"; echo "$ldflags|$k8s_ldflags|$GOFLAGS"; } | sha256sum | cut -c1-16)"
node_rebuild="${GANGCHECK_REBUILD:-0}"
if [[ -f "$bin/RECIPE-node" && "$(cat "$bin/RECIPE-node")" != "$node_recipe" ]]; then
  log "the node build recipe changed since the node binaries were built: rebuilding them"
  node_rebuild=1
fi
for b in kubelet kube-controller-manager kube-proxy; do
  if [[ "$node_rebuild" == 1 || ! -x "$bin/$b" ]]; then need_node+=("$b"); fi
done
need_etcd=0
if [[ "${GANGCHECK_REBUILD:-0}" == 1 || ! -x "$bin/etcd" ]]; then need_etcd=1; fi

total_start=$SECONDS
if (( ${#need_k8s[@]} == 0 && ${#need_node[@]} == 0 && need_etcd == 0 )); then
  log "reusing kubernetes $k8s_version + etcd $etcd_version in $bin"
else
  log "building into $bin (kubernetes $k8s_version: ${need_k8s[*]:-} ${need_node[*]:-}; etcd $etcd_version: $([[ $need_etcd == 1 ]] && echo yes || echo no))"
  log "a cold build takes a long while on a small machine; later runs reuse the binaries"
  if (( need_etcd )); then
    tmp="$(mktemp -d "$bin/.etcd.XXXX")"
    run_build "etcd $etcd_version" "$here/etcd" -ldflags="$ldflags" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
    mv -f "$tmp/etcd" "$bin/etcd"; rmdir "$tmp"
  fi
  if (( ${#need_k8s[@]} )); then
    tmp="$(mktemp -d "$bin/.k8s.XXXX")"
    pkgs=(); for b in "${need_k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    run_build "kubernetes $k8s_version (${need_k8s[*]})" "$here" -ldflags="$k8s_ldflags" -o "$tmp/" "${pkgs[@]}"
    for b in "${need_k8s[@]}"; do mv -f "$tmp/$b" "$bin/$b"; done; rmdir "$tmp"
  fi
  if (( ${#need_node[@]} )); then
    tmp="$(mktemp -d "$bin/.node.XXXX")"
    pkgs=(); for b in "${need_node[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    run_build "kubernetes $k8s_version (${need_node[*]})" "$here/node" -ldflags="$k8s_ldflags" -o "$tmp/" "${pkgs[@]}"
    for b in "${need_node[@]}"; do mv -f "$tmp/$b" "$bin/$b"; done; rmdir "$tmp"
  fi
  log "built in $(( SECONDS - total_start ))s"
fi
printf 'kubernetes %s\netcd %s\n' "$k8s_version" "$etcd_version" >"$bin/VERSIONS"
echo "$recipe" >"$bin/RECIPE"
echo "$node_recipe" >"$bin/RECIPE-node"
( cd "$bin" && ls -l etcd kube-apiserver kube-scheduler kubectl kubelet kube-controller-manager kube-proxy | awk '{printf "[controlplane] %-23s %6.1f MB\n", $9, $5/1048576}' ) >&2
# The Karpenter referee (tests/e2e/test_e2e_karpenter.py): its own module, version and cache directory.
# A failed build leaves the rest of the tier running; the referee then skips with the reason (or
# fails under GANGCHECK_REQUIRE_E2E=1).
bash "$here/build-karpenter.sh" >/dev/null || log "WARNING: building karpenter-kwok FAILED (see above): the Karpenter referee will not run"
# The Volcano referee (tests/e2e/test_e2e_volcano.py): the same rule.
bash "$here/build-volcano.sh" >/dev/null || log "WARNING: building Volcano FAILED (see above): the Volcano referee will not run"
# The Kueue quota referee (tests/e2e/test_e2e_kueue.py): the same rule, a failure only warns.
bash "$here/build-kueue.sh" >/dev/null || log "WARNING: building kueue FAILED (see above): the Kueue referee will not run"
# helm, for the chart tests (tests/helm, tests/helm_tool.py): the same rule, a failure only warns.
bash "$here/build-helm.sh" >/dev/null || log "WARNING: building helm FAILED (see above): the Helm chart tests will not run"
# JobSet, LWS and the MPI operator for the controllers referee (tests/e2e/test_e2e_controllers.py): the same rule.
bash "$here/build-controllers.sh" >/dev/null || log "WARNING: building a job controller FAILED (see above): the controllers referee will not run"
echo "$bin"
