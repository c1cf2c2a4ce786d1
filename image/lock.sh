#!/usr/bin/env bash
# `make lock`: regenerate the image's pinned lists, which ../Dockerfile and build.sh both read.
#
#   image/requirements.lock        gangcheck's runtime dependencies (pyproject.toml), with hashes
#   image/build-requirements.lock  what building its wheel needs (build-requirements.in), with hashes
#   image/debian-packages.txt      the versions of the Debian packages listed there
#
# The Python locks come from uv's `uv pip compile --universal --python-version 3.11`: one
# resolution for every platform the Dockerfile may be built on (amd64, arm64), for the image's
# Python (bookworm's 3.11) whatever Python runs this script, with the hashes of every file of each
# pinned version, as pip's --require-hashes wants. uv is installed (pinned) into a tool virtualenv
# under the cache directory, never into .venv.
# The Debian versions are the candidates of `apt-cache policy` and need a bookworm host with
# bookworm, bookworm-updates and bookworm-security in its sources (after `apt-get update`);
# elsewhere that half is skipped with a message and the file is left as it is.
# Env: GANGCHECK_CACHE (cache root), PYTHON (python3 to create the tool virtualenv).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cache_root="${GANGCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gangcheck}"
uv_version=0.13.9
tools="$cache_root/tools/uv-$uv_version"
log() { printf '[lock] %s\n' "$*" >&2; }

if [ ! -x "$tools/bin/uv" ]; then
  log "installing uv==$uv_version into $tools"
  "${PYTHON:-python3}" -m venv "$tools"
  "$tools/bin/pip" install --quiet --disable-pip-version-check "uv==$uv_version"
fi
uv="$tools/bin/uv"
compile=("$uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes
         --custom-compile-command "make lock")
# The local index mirror (PIP_FIND_LINKS) must not leak into the lock.
unset PIP_FIND_LINKS UV_FIND_LINKS

cd "$root"
"${compile[@]}" pyproject.toml -o image/requirements.lock
"${compile[@]}" image/build-requirements.in -o image/build-requirements.lock
log "wrote image/requirements.lock ($(grep -c '^[a-z0-9]' image/requirements.lock) packages)"
log "wrote image/build-requirements.lock ($(grep -c '^[a-z0-9]' image/build-requirements.lock) packages)"

codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
if [ "$codename" != bookworm ] || ! command -v apt-cache >/dev/null; then
  log "not a Debian bookworm host: image/debian-packages.txt left as it is (edit the versions by hand)"
  exit 0
fi
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
while IFS= read -r line; do
  case "$line" in
    ''|'#'*) printf '%s\n' "$line" ;;
    *)
      name="${line%%=*}"
      candidate="$(apt-cache policy "$name" | awk '$1=="Candidate:" {print $2}')"
      if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
        log "ERROR: apt-cache knows no candidate for $name (run apt-get update?)"; exit 1
      fi
      printf '%s=%s\n' "$name" "$candidate" ;;
  esac
done < image/debian-packages.txt > "$tmp"
cat "$tmp" > image/debian-packages.txt
log "wrote image/debian-packages.txt"
