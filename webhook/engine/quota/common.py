"""What the quota layer returns, shared by the Kueue and Volcano modules: ``QuotaResult``, the
severities, ``INF`` (no limit) and ``fmt`` (a quantity in its usual unit). Owns no rule."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..model import Finding, ResourceFlavor
from ..quantity import format_quantity

__all__ = ["INF", "NEVER", "WAITS", "INFO", "QuotaResult", "fmt"]

INF = math.inf
NEVER, WAITS, INFO = "NeverFits", "Waits", "Info"


@dataclass
class QuotaResult:
    """What the quota layer found.

    ``candidate_flavors``: pod-set name → flavors that could ever hold it (Kueue), used to
    narrow nodes; empty when quota does not narrow nodes. ``report`` is JSON-ready.
    """

    system: str
    queue: str
    findings: list[Finding] = field(default_factory=list)
    candidate_flavors: dict[str, list[ResourceFlavor]] = field(default_factory=dict)
    report: dict = field(default_factory=dict)


def fmt(resource: str, v: float) -> str:
    """A quantity in the resource's usual unit; "unlimited" for ``INF``."""
    return "unlimited" if v == INF else format_quantity(resource, int(v))
