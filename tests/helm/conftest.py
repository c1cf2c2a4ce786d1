"""The Helm chart tier (charts/gangcheck, #12): the real helm (e2e/build-helm.sh, helm.sh/helm/v3
from the Go module proxy) renders and lints the chart; the real kubectl renders the kustomize
base it is compared with. Fast (no cluster), so it runs with the unit tests.

When helm or kubectl is not built, every test here is skipped with the reason and the end of the
run says so in a banner; ``GANGCHECK_REQUIRE_E2E=1`` turns that skip into a failure, as for the
e2e tier.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import helm_tool  # noqa: E402

_SKIP_KEY = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def tools(request):
    """helm and kubectl are built (else skip loudly, or fail under GANGCHECK_REQUIRE_E2E=1)."""
    reason = helm_tool.missing()
    if reason:
        if os.environ.get("GANGCHECK_REQUIRE_E2E", "").strip().lower() in ("1", "true", "yes", "on"):
            pytest.fail(f"helm tier required (GANGCHECK_REQUIRE_E2E=1) but unavailable: {reason}", pytrace=False)
        request.config.stash[_SKIP_KEY] = reason
        pytest.skip(f"helm tier skipped: {reason}")
    return helm_tool


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    reason = config.stash.get(_SKIP_KEY, None)
    if not reason:
        return
    rule = "!" * 78
    for text in (rule, "HELM TIER SKIPPED: charts/gangcheck was NOT rendered or linted with a real helm.",
                 f"why: {reason}", "GANGCHECK_REQUIRE_E2E=1 makes this fatal.", rule):
        terminalreporter.write_line(text, yellow=True, bold=True)
