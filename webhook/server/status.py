"""What ``GET /readyz`` says: readiness of the source and the policy, and what of it is public.

Owns :func:`readiness` (the detail dict: states, counts and codes; with ``verbose`` also the
names and texts: policy path and parser error, source name, informer errors) and the redaction
of those statuses for callers that are not on loopback (:func:`is_loopback`). Anyone who reaches
the Service can read /readyz, so by default nothing that names files or hosts or quotes a parser
leaves. Ages are seconds. Does not own the HTTP answer (``app.py``: 200 when ready, else 503).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from fastapi import Request

from ..sources import SnapshotSource
from .body import one_line

__all__ = ["readiness", "is_loopback"]

_PUBLIC_POLICY_KEYS = ("source_kind", "valid", "in_force", "problem", "mode", "reloads", "failures", "loaded_at")


def _public_policy_status(st: Any) -> dict:
    """The policy status without the file path or the error's text (its code stays)."""
    if not isinstance(st, dict):
        return {}
    out = {k: st.get(k) for k in _PUBLIC_POLICY_KEYS if k in st}
    out.setdefault("source_kind", "file" if st.get("source") not in (None, "default", "static") else st.get("source"))
    return out


def _public_value(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float))


def _public_source_status(st: Any) -> dict:
    """The source status with numbers, booleans and ``kind`` only (no names, hosts, errors)."""
    if not isinstance(st, dict):
        return {}
    out: dict[str, Any] = {k: v for k, v in st.items() if _public_value(v)}
    if isinstance(st.get("kind"), str):
        out["kind"] = st["kind"]
    inf = st.get("informers")
    if isinstance(inf, dict):
        out["informers"] = {
            str(name): {k: v for k, v in info.items() if _public_value(v)}
            for name, info in inf.items() if isinstance(info, dict)
        }
    return out


def is_loopback(request: Request) -> bool:
    """True when the client's address is a loopback address (127.0.0.0/8, ::1)."""
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def readiness(source: SnapshotSource, policy: Any, verbose: bool) -> dict[str, Any]:
    """The /readyz detail: ``source`` (its status, redacted unless ``verbose``), ``age_seconds``
    (rounded to ms), ``policy`` (its status, likewise), ``stale`` (age past the policy's
    ``stale_after_seconds``, when both are known), ``ready`` (source ready and a valid policy in
    force) and ``source_ready``. A source whose status raises is not ready; its error is the
    exception's type, or with ``verbose`` its one-line text. Never raises for the source."""
    detail: dict[str, Any] = {}
    try:
        src_ready = bool(source.ready)
        st = source.status()
        detail["source"] = st if verbose else _public_source_status(st)
        detail["age_seconds"] = round(float(source.age_seconds()), 3)
    except Exception as exc:
        src_ready = False
        detail["source"] = {"error": one_line(f"{type(exc).__name__}: {exc}") if verbose else type(exc).__name__}
    pol_status = policy.status()
    detail["policy"] = pol_status if verbose else _public_policy_status(pol_status)
    cur = policy.current()
    pol_ok = cur is not None
    if cur is not None and "age_seconds" in detail:
        detail["stale"] = detail["age_seconds"] > cur.stale_after_seconds
    ready = src_ready and pol_ok
    detail["ready"] = ready
    detail["source_ready"] = src_ready
    return detail
