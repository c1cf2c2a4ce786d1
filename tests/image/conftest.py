"""The image tier (#12): build the real image with image/build.sh (``make image``'s recipe) and
check it from the outside — its configuration, the root filesystem it unpacks to, and gangcheck
run in that root filesystem read-only as uid 65532.

It runs when the tools are here: root, mmdebstrap, umoci, unshare and chroot (Debian:
``apt-get install mmdebstrap umoci``; ``make image`` installs them itself). Otherwise every test
of the tier is skipped with the reason, and the end of the run says so in a banner;
``GANGCHECK_REQUIRE_IMAGE=1`` turns that skip into a failure. The build reuses the layers cached
under ~/.cache/gangcheck/image, keyed by the hashes of the pinned lists (cold ~4 min, warm well
under a minute); ``GANGCHECK_SKIP_IMAGE=1`` skips the tier on purpose (said in the banner too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from image_tier import SKIP_KEY, missing_tools, skip_banner, unavailable  # noqa: E402

ROOT = HERE.parents[1]


def pytest_configure(config):
    config.addinivalue_line("markers", "image: builds the container image (tests/image; needs root, mmdebstrap, umoci)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.image)


@pytest.fixture(scope="session")
def built(request, tmp_path_factory):
    """(reference, archive path) from image/build.sh, its layers cached by the lock hashes."""
    reason = missing_tools()
    if reason:
        unavailable(request.config, reason)
    out = tmp_path_factory.mktemp("image-out")
    env = {**os.environ, "PY": sys.executable, "GANGCHECK_IMAGE_OUT": str(out)}
    proc = subprocess.run(["bash", str(ROOT / "image" / "build.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"image/build.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    ref, archive = proc.stdout.strip().splitlines()[-2:]
    sys.stderr.write(proc.stderr)
    return ref, Path(archive)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    reason = config.stash.get(SKIP_KEY, None)
    if reason:
        skip_banner(terminalreporter, [
            ("IMAGE TIER SKIPPED: the container image was NOT built or run in this run.", True),
            (f"why: {reason}", True),
            ("fix: as root, apt-get install mmdebstrap umoci containerd runc (make image installs the", False),
            ("     first two itself); GANGCHECK_REQUIRE_IMAGE=1 makes this fatal.", False)])
