# Shared by e2e/build.sh and e2e/build-karpenter.sh (sourced, not run): the cache root, the Go
# environment, logging and a `go build` with a heartbeat.
# Before sourcing, set log_tag (the log prefix: "controlplane", "karpenter").

cache_root="${GANGCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangcheck}"

log() { printf '[%s %s] %s\n' "$log_tag" "$(date +%H:%M:%S)" "$*" >&2; }

command -v go >/dev/null 2>&1 || { log "ERROR: 'go' is not on PATH; cannot build"; exit 2; }

# Let the go command fetch a toolchain if a module needs a newer one than the local Go.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
export GOFLAGS="${GOFLAGS:-} -trimpath -buildvcs=false"
ldflags='-s -w'

# go build -v prints one package per line as it compiles it; show a heartbeat with the count.
run_build() {  # $1 = label, $2 = module dir, rest = go build args
  local label="$1" dir="$2"; shift 2
  local start=$SECONDS logf; logf="$(mktemp)"
  ( cd "$dir" && go build -v "$@" ) >"$logf" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && log "$label: $(( SECONDS - start ))s, $(wc -l <"$logf") packages compiled so far"
  done
  if ! wait "$pid"; then
    log "$label: FAILED after $(( SECONDS - start ))s; last output:"; tail -n 40 "$logf" >&2; rm -f "$logf"; exit 1
  fi
  log "$label: done in $(( SECONDS - start ))s ($(wc -l <"$logf") packages)"; rm -f "$logf"
}
