#!/bin/sh
# The Python half of gangcheck's image, shared by both recipes (../Dockerfile's build stage and
# build.sh). pip runs OUTSIDE the final image and installs into a directory that becomes
# /usr/local/lib/python3.11/dist-packages there (on Debian's sys.path), so the image has no pip,
# no setuptools and no compiler. Every file comes from the hash-pinned locks (--require-hashes,
# binary wheels only: nothing is compiled).
#
#   install-python.sh deps  SITE            the runtime dependencies (requirements.lock)
#   install-python.sh wheel SRC DIST        build gangcheck's wheel from the source tree SRC
#                                           into DIST (build tools from build-requirements.lock)
#   install-python.sh app   WHEEL SITE      gangcheck's wheel itself, and the entrypoint
#   install-python.sh compile SITE...       byte-compile, run with the IMAGE's python3
#
# Env: PIP (default "python3 -m pip"), PIP_TARGET_ARGS (extra arguments for the installs into
# SITE, e.g. --platform/--python-version when the pip that runs is not the image's python).
# The entrypoint /usr/local/bin/gangcheck is image/gangcheck (argument paths are absolute or
# relative to the current directory).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
PIP="${PIP:-python3 -m pip}"
PIP_TARGET_ARGS="${PIP_TARGET_ARGS:-}"
# A local wheel mirror must not stand in for PyPI's files (their hashes are checked anyway).
unset PIP_FIND_LINKS
quiet="--quiet --disable-pip-version-check --no-input"

strip_site() {
  # Console scripts pip wrote for the packages (uvicorn, watchfiles, …) carry the shebang of the
  # pip that ran: not the image's. gangcheck's own entrypoint is image/gangcheck.
  rm -rf "$1/bin"
}

case "${1:-}" in
  deps)
    site="$2"
    # shellcheck disable=SC2086
    $PIP install $quiet --no-deps --require-hashes --only-binary=:all: --no-compile \
      $PIP_TARGET_ARGS --target "$site" -r "$here/requirements.lock"
    strip_site "$site" ;;
  wheel)
    src="$2"; dist="$3"
    tools="$(mktemp -d)"
    # shellcheck disable=SC2086
    $PIP install $quiet --no-deps --require-hashes --only-binary=:all: --no-compile \
      --target "$tools" -r "$here/build-requirements.lock"
    # shellcheck disable=SC2086
    PYTHONPATH="$tools" $PIP wheel $quiet --no-deps --no-build-isolation --wheel-dir "$dist" "$src"
    rm -rf "$tools" ;;
  app)
    wheel="$2"; site="$3"
    # shellcheck disable=SC2086
    $PIP install $quiet --no-deps --no-compile $PIP_TARGET_ARGS --target "$site" "$wheel"
    strip_site "$site" ;;
  compile)
    shift
    # unchecked-hash: the .pyc files do not depend on file times, and Python never rewrites
    # them (the root filesystem is read-only); without them every start would compile the
    # sources again, in memory.
    python3 -m compileall -q --invalidation-mode unchecked-hash "$@" ;;
  *)
    echo "usage: install-python.sh deps SITE | wheel SRC DIST | app WHEEL SITE | compile SITE..." >&2
    exit 2 ;;
esac
