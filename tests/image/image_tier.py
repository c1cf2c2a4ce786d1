"""When the image tier can run, and how it skips (shared by conftest.py and the tests)."""

from __future__ import annotations

import os
import shutil

import pytest

SKIP_KEY = pytest.StashKey[str]()


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def missing_tools() -> str | None:
    """Why the tier cannot run here, or None."""
    if _truthy("GANGCHECK_SKIP_IMAGE"):
        return "GANGCHECK_SKIP_IMAGE=1"
    if os.geteuid() != 0:
        return "not root (mmdebstrap's root mode, chroot and umoci unpack need root)"
    absent = [t for t in ("mmdebstrap", "umoci", "unshare", "chroot", "mount") if shutil.which(t) is None]
    if absent:
        return (f"missing {', '.join(absent)} on PATH (Debian: apt-get install mmdebstrap umoci; "
                "unshare and mount are util-linux's, chroot coreutils' in /usr/sbin)")
    return None


def unavailable(config, reason: str):
    if _truthy("GANGCHECK_REQUIRE_IMAGE"):
        pytest.fail(f"image tier required (GANGCHECK_REQUIRE_IMAGE=1) but unavailable: {reason}", pytrace=False)
    config.stash[SKIP_KEY] = reason
    pytest.skip(f"image tier skipped: {reason}")


def skip_banner(tr, lines: list[tuple[str, bool]]) -> None:
    """A yellow block of (text, bold) lines between two rules of '!' at the end of the run."""
    rule = "!" * 78
    for text, bold in [(rule, True), *lines, (rule, True)]:
        tr.write_line(text, yellow=True, bold=bold)
