#!/usr/bin/env bash
# Fetch the CRDs of the add-ons the overlays under manifests/overlays/ target, for the e2e tier's
# overlay validation (tests/e2e/test_e2e_overlays.py) — idempotent, nothing is built.
#
#   cert-manager-<v>/         cert-manager.io Certificate, Issuer, ... (deploy/crds/*.yaml of
#                             github.com/cert-manager/cert-manager; plain CRDs, not Helm templates)
#   prometheus-operator-<v>/  monitoring.coreos.com PodMonitor, ServiceMonitor, ...
#                             (example/prometheus-operator-crd/*.yaml of
#                             github.com/prometheus-operator/prometheus-operator)
#
# Both come from the Go module proxy (`go mod download`: the module zips, checked against the
# checksum database), copied into ${GANGCHECK_CACHE:-~/.cache/gangcheck}/addon-crds/ and reused
# when present. Nothing upstream is committed to this repository. Prints the two CRD directories
# (cert-manager's, then prometheus-operator's) as the last two lines of stdout.
# Env: GANGCHECK_CACHE (cache root), GANGCHECK_REBUILD=1 (fetch again).
#
# Other versions: change the two lines below. The proxy serves the root prometheus-operator
# module only up to v0.85.0 (later releases publish only sub-modules such as pkg/apis/monitoring,
# whose zips carry no CRD YAML).
set -euo pipefail

CERT_MANAGER_VERSION=v1.21.2
PROMETHEUS_OPERATOR_VERSION=v0.85.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_tag=addon-crds
source "$here/build-lib.sh"
out="$cache_root/addon-crds"
mkdir -p "$out"

# fetch MODULE VERSION DEST SUBDIR: copy SUBDIR/*.yaml of MODULE@VERSION's zip into $out/DEST.
fetch() {
  local module="$1" version="$2" dest="$out/$3" sub="$4" dir tmp
  if [[ "${GANGCHECK_REBUILD:-0}" != 1 && -f "$dest/VERSION" && "$(cat "$dest/VERSION")" == "$module $version" ]]; then
    log "reusing $module $version CRDs in $dest"; return
  fi
  log "downloading $module@$version from the module proxy"
  # Outside any module (no go.mod in the working directory): a plain download of one zip.
  dir="$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
         | awk -F'"' '$2=="Dir" {print $4}')"
  [[ -n "$dir" && -d "$dir/$sub" ]] || { log "ERROR: $module@$version has no $sub"; exit 1; }
  tmp="$(mktemp -d "$out/.tmp.XXXX")"
  cp "$dir/$sub"/*.yaml "$tmp/"
  chmod u+w "$tmp"/*.yaml  # the module cache is read-only
  rm -f "$tmp/kustomization.yaml"
  echo "$module $version" >"$tmp/VERSION"
  rm -rf "$dest"; mv "$tmp" "$dest"
}

fetch github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION" "cert-manager-$CERT_MANAGER_VERSION" deploy/crds
fetch github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" \
      "prometheus-operator-$PROMETHEUS_OPERATOR_VERSION" example/prometheus-operator-crd
for d in "$out/cert-manager-$CERT_MANAGER_VERSION" "$out/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"; do
  echo "[addon-crds] $(basename "$d"): $(cd "$d" && ls *.yaml | tr '\n' ' ')" >&2
  echo "$d"
done
