"""The webhook's audit trail: one JSON line per admission decision, and rate-limited tracebacks.

Every request that carried a readable AdmissionReview (checked, skipped, failed open) gives one
line on the logger ``gangcheck.decision`` (``gangcheck serve`` writes it to stdout, nothing
else there; everything else goes to stderr), so an admin can answer "what did gangcheck deny
today" with ``kubectl logs … | jq 'select(.outcome == "denied")'``. A line holds names and
codes only, never object content::

    {"ts": "2025-06-02T12:00:00.123Z", "uid": "…", "endpoint": "validate", "operation": "CREATE",
     "apiVersion": "batch/v1", "kind": "Job", "namespace": "llm", "name": "train",
     "verdict": "NeverFits", "reasons": ["ExceedsClusterCapacity"], "outcome": "denied",
     "ms": 3.2, "dry_run": false}

plus ``"skip": <code>`` for a skipped request (``admission.SKIP_CODES``), ``"fail_open":
<reason>`` (the ``reason`` label of ``gangcheck_webhook_fail_open_total``) and ``"error":
<exception type>`` for an internal error. ``outcome`` is the metrics' outcome label (allowed,
denied, skipped, fail_open). Strings are JSON-escaped (``ensure_ascii``): a name cannot forge a
second line.

:class:`RateLimiter` keeps a failing check from flooding the log: at most one traceback per
exception type and interval; the next one allowed says how many were left out.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

__all__ = ["DECISION_LOGGER", "RateLimiter", "RateLimitFilter", "decision_record", "decision_line", "configure"]

#: The logger the decision lines go to (INFO).
DECISION_LOGGER = "gangcheck.decision"

#: Characters kept of each name/uid (Kubernetes names are ≤ 253; a uid is 36).
_MAX_FIELD = 253


def _s(v: Any) -> str:
    return v[:_MAX_FIELD] if isinstance(v, str) else ""


def decision_record(endpoint: str, req: Any, verdict: str, outcome: str, elapsed_s: float,
                    note: Mapping[str, Any], now: float | None = None) -> dict:
    """The decision line as a dict (see the module docstring for the keys).

    Args:
        endpoint: ``validate`` or ``mutate``.
        req: an ``admission.ReviewRequest`` (uid, operation, namespace, name, obj, dry_run).
        verdict, outcome: the metrics' labels.
        elapsed_s: seconds from the start of the request to the answer.
        note: ``skip`` / ``fail_open`` / ``error`` / ``reasons`` collected while deciding.
        now: Unix seconds of the line's ``ts`` (the wall clock when None).
    """
    obj = req.obj if isinstance(req.obj, Mapping) else {}
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = _s(meta.get("name")) or _s(req.name)
    if not name and isinstance(meta.get("generateName"), str):
        name = _s(meta["generateName"]) + "*"
    ts = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    rec: dict[str, Any] = {
        "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z",
        "uid": _s(req.uid),
        "endpoint": endpoint,
        "operation": _s(req.operation),
        "apiVersion": _s(obj.get("apiVersion")),
        "kind": _s(obj.get("kind")),
        "namespace": _s(meta.get("namespace")) or _s(req.namespace),
        "name": name,
        "verdict": verdict,
        "reasons": [_s(r) for r in note.get("reasons") or ()],
        "outcome": outcome,
        "ms": round(elapsed_s * 1000.0, 2),
        "dry_run": bool(req.dry_run),
    }
    for key in ("skip", "fail_open", "error"):
        if note.get(key):
            rec[key] = _s(note[key])
    return rec


def decision_line(rec: Mapping[str, Any]) -> str:
    """One line of JSON, ASCII only (control characters and lone surrogates escaped)."""
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=True)


class RateLimiter:
    """At most one event per key every ``interval`` seconds.

    ``allow(key)`` → ``(allowed, suppressed)``: ``suppressed`` is how many events of that key
    were refused since the last allowed one (to say so in the allowed one). Thread-safe; the
    clock is an argument for tests.
    """

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic, max_keys: int = 256) -> None:
        self.interval = float(interval)
        self.clock = clock
        self.max_keys = max_keys
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> tuple[bool, int]:
        now = self.clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return False, 0
            if last is None and len(self._last) >= self.max_keys:  # bounded: forget the oldest key
                oldest = min(self._last, key=self._last.__getitem__)
                self._last.pop(oldest, None)
                self._suppressed.pop(oldest, None)
            self._last[key] = now
            return True, self._suppressed.pop(key, 0)


class RateLimitFilter(logging.Filter):
    """A logging filter passing each distinct message (logger + format string) at most once per
    ``interval`` seconds; the next one passed says how many were dropped. For loggers that
    clients can make noisy (uvicorn's "Invalid HTTP request received." per bad request)."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.limiter = RateLimiter(interval, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        ok, suppressed = self.limiter.allow(f"{record.name}|{record.msg}")
        if ok and suppressed:
            record.msg = f"{record.getMessage()} ({suppressed} more like it since the last one logged)"
            record.args = ()
        return ok


def configure(stream=None) -> logging.Logger:
    """Send decision lines, bare (no timestamp prefix, the line has ``ts``), to ``stream``
    (stdout by default) and nowhere else. Idempotent."""
    import sys

    logger = logging.getLogger(DECISION_LOGGER)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    target = stream if stream is not None else sys.stdout
    for h in list(logger.handlers):
        if getattr(h, "_gangcheck_decisions", False):
            logger.removeHandler(h)
    handler = logging.StreamHandler(target)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._gangcheck_decisions = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    return logger
