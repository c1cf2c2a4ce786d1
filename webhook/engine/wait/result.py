"""The answer: ``WaitEstimate`` (seconds from now) and the words it is said in.

Owns the estimate's fields, its one-line text for warnings and annotations ("expected wait
p50 5h40m, p90 9h (…)", "waits for repair: …"), its JSON-ready form, and
``format_duration``. It computes nothing about the cluster: the numbers come from
``estimate``, the repairs from ``repair``.

Units: seconds (rounded to whole seconds in ``as_dict``); shares in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .inputs import DEFAULT_HORIZON_S

__all__ = ["WaitEstimate", "format_duration", "repair_phrase"]


def format_duration(seconds: float | None) -> str:
    """Seconds → "0", "<1m", "12m", "5h40m", "9h", "2d3h" (minutes below a day, hours above)."""
    if seconds is None or math.isinf(seconds):
        return "unknown"
    s = max(0.0, float(seconds))
    if s == 0:
        return "0"
    if s < 60:
        return "<1m"
    if s < 86400 - 30:
        m = int(round(s / 60))
        h, m = divmod(m, 60)
        if h == 0:
            return f"{m}m"
        return f"{h}h{m}m" if m else f"{h}h"
    h = int(round(s / 3600))
    d, h = divmod(h, 24)
    return f"{d}d{h}h" if h else f"{d}d"


@dataclass(frozen=True)
class WaitEstimate:
    """Expected wait of one gang, seconds from ``now``.

    Attributes:
        earliest_start_s: limit-based start (Slurm-style reservation sweep), None when the
            capacity it needs is held by pods with no known end (or never offered).
        p50_s / p90_s: wait at which the gang can start with probability 0.5 / 0.9; None when
            ``unknown`` or beyond ``horizon_s`` (``beyond_horizon`` then says so).
        known_share: share of blocking pods (pods on eligible nodes whose capacity the gang's
            main pod shape needs) whose end is known (limit or learned history); 1.0 when none.
        unknown: True when most blocking pods have no known end: report "unknown", no number.
        blocking_pods: how many pods block; pods_needed: pods of the main shape to place;
        fits_now: pods of the main shape that fit on free capacity now.
        horizon_s: the longest wait searched.
    """

    earliest_start_s: float | None
    p50_s: float | None
    p90_s: float | None
    known_share: float
    unknown: bool
    blocking_pods: int = 0
    pods_needed: int = 0
    fits_now: int = 0
    horizon_s: float = DEFAULT_HORIZON_S
    beyond_horizon: bool = False
    blocked_by: str | None = None
    repair: tuple[tuple[str, int], ...] = ()
    pods_max: int | None = None

    def text(self) -> str:
        """One line for warnings and annotations, e.g.
        "expected wait p50 5h40m, p90 9h (end times known for 72% of blocking pods)", or when
        running work can never free enough (``blocked_by``) what must happen instead:
        "waits for repair: 8 cordoned node(s) must be uncordoned; running work alone never
        frees enough (at most 12 of 64 pods)"."""
        if self.blocked_by is not None:
            return self.blocker_text()
        share = f"end times known for {int(round(self.known_share * 100))}% of blocking pods"
        if self.unknown:
            return f"expected wait unknown ({share})"
        if self.p50_s == 0 and self.p90_s == 0:
            return "expected wait 0 (fits now)"
        far = ">" + format_duration(self.horizon_s)
        p50 = far if self.p50_s is None else format_duration(self.p50_s)
        p90 = far if self.p90_s is None else format_duration(self.p90_s)
        return f"expected wait p50 {p50}, p90 {p90} ({share})"

    def blocker_text(self) -> str:
        """What the gang waits for when running work ending is not enough (``blocked_by``):
        "repair" — the repairs, most nodes first —, or "capacity" (nothing repairable helps)."""
        most = f"at most {self.pods_max} of {self.pods_needed} pods"
        if self.blocked_by == "repair":
            return (f"waits for repair: {', '.join(repair_phrase(k, n) for k, n in self.repair)}; "
                    f"running work alone never frees enough ({most})")
        return f"waits for capacity: running work alone never frees enough on the nodes it may use ({most})"

    def as_dict(self) -> dict:
        """JSON-ready: seconds rounded to whole seconds, the share to 4 decimals, the text;
        ``blocked_by`` ("repair", "capacity" or None), ``repair`` ({problem: nodes}: "cordoned",
        "not_ready", "devices", "taint KEY=VALUE:EFFECT") and ``pods_max`` (pods of the main
        shape that fit once all running work that can end has ended) when it is set."""
        r = lambda v: None if v is None else int(round(v))
        out = {
            "earliest_start_s": r(self.earliest_start_s),
            "p50_s": r(self.p50_s),
            "p90_s": r(self.p90_s),
            "known_share": round(self.known_share, 4),
            "unknown": self.unknown,
            "blocking_pods": self.blocking_pods,
            "pods_needed": self.pods_needed,
            "text": self.text(),
        }
        if self.blocked_by is not None:
            out["blocked_by"] = self.blocked_by
            out["repair"] = dict(self.repair)
            out["pods_max"] = self.pods_max
        return out


def repair_phrase(problem: str, nodes: int) -> str:
    """One repair, e.g. "8 cordoned node(s) must be uncordoned"."""
    if problem == "cordoned":
        return f"{nodes} cordoned node(s) must be uncordoned"
    if problem == "not_ready":
        return f"{nodes} NotReady node(s) must become Ready"
    if problem == "devices":
        return f"{nodes} node(s) must advertise their devices again (device plugin)"
    return f"{nodes} node(s) must lose the {problem}"
