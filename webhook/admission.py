"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out: pure functions, no I/O, no clock.

The server decodes the HTTP body, calls :func:`parse_review`, decides whether the object is
checked at all (:func:`skip_reason`), turns it into a ``GangRequest`` (:func:`gang_of`), runs the
engine and hands the ``Decision`` to :func:`validate_response` (POST /validate) or
:func:`mutate_response` (POST /mutate). Everything the API server reads comes from here:

- ``allowed: false`` with ``status {code: 403, message}`` only for a NeverFits in enforce mode
  (the API server shows ``admission webhook "<name>" denied the request: <message>``);
- ``warnings``: each ≤120 characters, no control characters, duplicates merged, at most
  :data:`MAX_WARNINGS`, ≤4,096 bytes in total (the API server truncates past that, FIELD-NOTES §8),
  most important first;
- ``patchType: JSONPatch`` and a base64 RFC 6902 patch adding annotations under the policy's
  prefix (mutate only);
- ``auditAnnotations`` (validate only): verdict and reasons, for the audit log.

The clock is an argument (``now``), so the same inputs always give the same response.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .adapters import adapt, is_supported
from .engine.decision import FITS, NEVER_FITS, WAITS, Decision
from .engine.model import GangRequest
from .engine.wait import format_duration

if TYPE_CHECKING:  # admission only reads a Policy's attributes; no pydantic at import time
    from .policy import Policy

__all__ = [
    "API_VERSION",
    "MAX_BODY_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_WARNING_CHARS",
    "MAX_WARNINGS",
    "MAX_WARNINGS_BYTES",
    "BadReview",
    "ReviewRequest",
    "parse_review",
    "skip_reason",
    "gang_of",
    "clean_warnings",
    "validate_response",
    "mutate_response",
    "allowed_response",
    "fail_open_response",
    "annotations_for",
    "annotation_patch",
    "rfc3339",
    "review_envelope",
]

API_VERSION = "admission.k8s.io/v1"
#: Largest request body accepted (the API server's own limit on an object is 3 MiB).
MAX_BODY_BYTES = 3 * 1024 * 1024
#: A denial message stays under 1 KiB (UTF-8 bytes).
MAX_MESSAGE_BYTES = 1000
#: FIELD-NOTES §8: each warning ≤120 characters; the API server keeps ≤4,096 in total.
MAX_WARNING_CHARS = 120
MAX_WARNINGS_BYTES = 4096
#: "Few" warnings: later (less important) ones are dropped.
MAX_WARNINGS = 6

#: Operations gangcheck checks; DELETE and CONNECT are admitted unchanged.
CHECKED_OPERATIONS = ("CREATE", "UPDATE")


class BadReview(ValueError):
    """The body is not a usable AdmissionReview v1; ``str(err)`` is a one-line reason (HTTP 400)."""


@dataclass(frozen=True)
class ReviewRequest:
    """The parts of ``AdmissionReview.request`` gangcheck reads.

    ``obj`` is ``request.object`` (None for DELETE/CONNECT), with ``metadata.namespace`` filled
    in from ``request.namespace`` when the client left it out (as the API server does before
    storing it); ``kind`` is ``request.kind`` ({group, version, kind}).
    """

    uid: str
    operation: str
    namespace: str
    name: str
    kind: dict
    obj: dict | None
    dry_run: bool


# ------------------------------------------------------------------ decoding


def parse_review(doc: Any) -> ReviewRequest:
    """Check an already JSON-decoded body is an AdmissionReview v1 and extract its request.

    Args:
        doc: the decoded JSON value.

    Raises:
        BadReview: not an object, apiVersion is not ``admission.k8s.io/v1``, kind is not
            ``AdmissionReview``, ``request`` missing or not an object, ``request.uid`` missing or
            empty, or ``request.object`` present but not an object. The message is one line.
    """
    if not isinstance(doc, dict):
        raise BadReview(f"expected a JSON object (an AdmissionReview), got {_json_type(doc)}")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "AdmissionReview":
        raise BadReview(
            f"expected apiVersion {API_VERSION} kind AdmissionReview, got "
            f"apiVersion {_short_repr(doc.get('apiVersion'))} kind {_short_repr(doc.get('kind'))}"
        )
    req = doc.get("request")
    if not isinstance(req, dict):
        raise BadReview("AdmissionReview has no request object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview request.uid is missing or empty")
    obj = req.get("object")
    if obj is not None and not isinstance(obj, dict):
        raise BadReview(f"request.object must be an object, got {_json_type(obj)}")
    kind = req.get("kind") if isinstance(req.get("kind"), dict) else {}
    namespace = req.get("namespace") if isinstance(req.get("namespace"), str) else ""
    name = req.get("name") if isinstance(req.get("name"), str) else ""
    if obj is not None:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and namespace and not meta.get("namespace"):
            obj = dict(obj)
            obj["metadata"] = dict(meta, namespace=namespace)
    operation = req.get("operation") if isinstance(req.get("operation"), str) else ""
    return ReviewRequest(uid, operation.upper(), namespace, name, kind, obj, bool(req.get("dryRun")))


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number"
    )


def _short_repr(v: Any) -> str:
    text = json.dumps(v) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def skip_reason(req: ReviewRequest, policy: Policy) -> str | None:
    """Why this request is admitted unchanged without a check, or None when it is checked.

    Skipped: operations other than CREATE/UPDATE (DELETE, CONNECT), no ``request.object``,
    namespaces in ``policy.exempt_namespaces``, and objects whose apiVersion/kind gangcheck has
    no adapter for (``adapters.is_supported``). Never raises.
    """
    if req.operation not in CHECKED_OPERATIONS:
        return f"operation {req.operation or '(none)'} is not checked"
    if req.obj is None:
        return "request has no object"
    ns = req.namespace or _meta(req.obj).get("namespace") or ""
    if ns in policy.exempt_namespaces:
        return f"namespace {ns} is exempt"
    if not is_supported(req.obj):
        return f"{req.obj.get('apiVersion')}/{req.obj.get('kind')} is not a kind gangcheck checks"
    return None


def gang_of(req: ReviewRequest) -> GangRequest | None:
    """The object of a checked request as a ``GangRequest`` (None: a kind that is not a gang here).

    ``metadata.name`` falls back to ``request.name`` or ``generateName`` so messages name the object.

    Raises:
        AdapterError: a malformed object (the caller admits it with a fail-open warning: the
            API server's own validation is the authority on malformed objects).
    """
    obj = req.obj
    if obj is None:
        return None
    meta = _meta(obj)
    if not meta.get("name"):
        name = req.name or (str(meta.get("generateName") or "") + "<generated>")
        obj = dict(obj)
        obj["metadata"] = dict(meta, name=name)
    return adapt(obj, source="AdmissionReview")


def _meta(obj: Mapping) -> dict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


# ------------------------------------------------------------------ warnings


#: Unicode category Cc (U+0000–U+001F, U+007F–U+009F) and the line/paragraph separators → space.
_CONTROL = {c: " " for c in (*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)}


def _clean_text(text: Any) -> str:
    """One line: control characters (Unicode Cc, line/paragraph separators) become spaces,
    runs of whitespace collapse to one space."""
    return " ".join(str(text).translate(_CONTROL).split())


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def clean_warnings(warnings: list[str], *, limit: int = MAX_WARNINGS) -> list[str]:
    """Make warnings safe to return to the API server (FIELD-NOTES §8), keeping their order.

    Each: control characters replaced (a newline would make the API server drop it),
    whitespace collapsed, cut to 120 characters with "…"; empty ones dropped; duplicates
    (after cleaning) merged; at most ``limit`` kept and at most 4,096 UTF-8 bytes in total
    (later ones, the less important, are dropped first).
    """
    out: list[str] = []
    seen: set[str] = set()
    total = 0
    for w in warnings:
        text = _truncate(_clean_text(w), MAX_WARNING_CHARS)
        if not text or text in seen:
            continue
        size = len(text.encode("utf-8"))
        if total + size > MAX_WARNINGS_BYTES or len(out) >= limit:
            break
        seen.add(text)
        out.append(text)
        total += size
    return out


def _pct(ratio: float) -> str:
    return f"{ratio * 100:.0f}%"


def _fragmentation_warning(decision: Decision, policy: Policy) -> str | None:
    frag = decision.fragmentation
    if not frag or decision.verdict != WAITS:
        return None
    ratio = float(frag.get("ratio") or 0.0)
    if not frag.get("free") or ratio < policy.warn_fragmentation_ratio:
        return None
    return (
        f"fragmentation {_pct(ratio)}: {frag.get('stranded')} of {frag.get('free')} free {frag.get('resource')} "
        f"are on nodes too full for a pod of {frag.get('per_pod')}"
    )


def _wait_seconds(decision: Decision) -> float | None:
    """The expected wait's p50 in seconds (``Decision.expected_wait``), None when unknown."""
    w = getattr(decision, "expected_wait", None)
    if isinstance(w, (int, float)):
        return float(w)
    if isinstance(w, Mapping):
        if w.get("unknown"):
            return None
        for key in ("p50_s", "earliest_start_s"):
            v = w.get(key)
            if isinstance(v, (int, float)):
                return float(v)
    return None


def _wait_blocker(decision: Decision) -> str | None:
    """The expected wait's text when running work can never free enough (its ``blocked_by``:
    "waits for repair: …"), the same words as ``check`` and ``diagnose`` print; else None."""
    w = getattr(decision, "expected_wait", None)
    if isinstance(w, Mapping) and w.get("blocked_by") and isinstance(w.get("text"), str):
        return w["text"]
    return None


def _fmt_duration(seconds: float) -> str:
    """Seconds as "3h28m" — the wait estimator's own rounding, so annotation and text agree."""
    return format_duration(seconds)


def _decision_warnings(decision: Decision, policy: Policy) -> list[str]:
    """Warnings for an admitted request, most important first (before cleaning)."""
    if policy.mode == "audit":
        return []
    out: list[str] = []
    if decision.verdict == NEVER_FITS:
        out.append("would be denied: " + _clean_text(decision.message))
        return out
    engine = list(decision.warnings)
    if engine:
        out.append(engine[0])
    frag = _fragmentation_warning(decision, policy)
    if frag:
        out.append(frag)
    wait = _wait_seconds(decision)
    blocker = _wait_blocker(decision)
    if decision.verdict == WAITS and blocker is not None:
        out.append(blocker)  # no wait on running work: what it waits for instead (repair)
    elif decision.verdict == WAITS and wait is not None and wait >= policy.warn_expected_wait_seconds:
        out.append(str(decision.expected_wait.get("text") or f"expected wait about {_fmt_duration(wait)}"))
    out.extend(engine[1:])
    return out


# ------------------------------------------------------------------ responses


def review_envelope(response: dict) -> dict:
    """Wrap an AdmissionResponse dict in an ``admission.k8s.io/v1`` AdmissionReview."""
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def allowed_response(uid: str, warnings: list[str] | None = None) -> dict:
    """An AdmissionReview admitting the request unchanged (optional warnings, cleaned)."""
    resp: dict[str, Any] = {"uid": uid, "allowed": True}
    w = clean_warnings(list(warnings or []))
    if w:
        resp["warnings"] = w
    return review_envelope(resp)


def fail_open_response(uid: str, reason: str) -> dict:
    """Admit without a check, with exactly ONE warning saying the check was skipped and why.

    Used when the cache is not synced or stale, the policy is unusable, the check ran past its
    time budget, or an internal error happened (never a denial on data gangcheck cannot trust).
    """
    head = "gangcheck skipped the feasibility check: "
    reason = _clean_text(reason) or "unknown error"
    return review_envelope({"uid": uid, "allowed": True, "warnings": [_truncate(head + reason, MAX_WARNING_CHARS)]})


def _deny_message(decision: Decision) -> str:
    msg = _clean_text(decision.message) or "the gang can never start under the current configuration"
    raw = msg.encode("utf-8")
    if len(raw) > MAX_MESSAGE_BYTES:
        msg = raw[: MAX_MESSAGE_BYTES - 3].decode("utf-8", "ignore").rstrip() + "…"
    return msg


def validate_response(uid: str, decision: Decision, policy: Policy, *, operation: str = "CREATE") -> dict:
    """The AdmissionReview answering POST /validate for a checked gang.

    - enforce mode and NeverFits on CREATE: ``allowed: false``, ``status {code: 403, message}``
      with ``Decision.message`` (what was asked, the limit and its numbers, what to change;
      < 1 KiB, one line).
    - NeverFits on UPDATE (the object already exists; denying could block finalizer removal)
      and in warn mode: admitted with the first warning ``would be denied: <message>``.
    - audit mode: admitted, no warnings.
    - otherwise admitted with the engine's warnings (Waits findings, most important first),
      plus a fragmentation warning when a Waits gang's stranded/free GPU ratio ≥
      ``policy.warn_fragmentation_ratio`` and an expected-wait warning past
      ``policy.warn_expected_wait_seconds`` when the engine gives a wait.
    ``auditAnnotations``: ``verdict`` and ``reasons``.
    """
    audit = {"verdict": decision.verdict, "reasons": ",".join(decision.reasons) or "none"}
    if decision.verdict == NEVER_FITS and policy.mode == "enforce" and operation != "UPDATE":
        return review_envelope({
            "uid": uid,
            "allowed": False,
            "status": {"code": 403, "message": _deny_message(decision)},
            "auditAnnotations": audit,
        })
    resp: dict[str, Any] = {"uid": uid, "allowed": True, "auditAnnotations": audit}
    w = clean_warnings(_decision_warnings(decision, policy))
    if w:
        resp["warnings"] = w
    return review_envelope(resp)


def rfc3339(now: datetime | float) -> str:
    """``now`` (an aware datetime, or seconds since the epoch) as RFC 3339 UTC: ``2025-06-02T12:00:00Z``."""
    if not isinstance(now, datetime):
        now = datetime.fromtimestamp(float(now), tz=timezone.utc)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def annotations_for(decision: Decision, policy: Policy, now: datetime | float) -> dict[str, str]:
    """The annotations /mutate adds (keys under ``policy.annotation_prefix``; values strings).

    - ``verdict``: Fits | Waits | NeverFits
    - ``reasons``: finding codes, comma-separated, ``none`` when there are none
    - ``nodes-fit-now``: nodes that can host the main pod shape now / pods of that shape
      needed, e.g. ``12/40``
    - ``fragmentation``: ``ratio 0.93: 1200/1296 free nvidia.com/gpu stranded for 8-GPU pods,
      deficit 28`` or ``none`` (no GPUs requested)
    - ``expected-wait``: ``0s`` for Fits, ``never`` for NeverFits, the engine's estimate when it
      provides one; when running work can never free enough, what the gang waits for instead
      (``waits for repair: 8 cordoned node(s) must be uncordoned; …``); else ``unknown``
    - ``checked-at``: RFC 3339 UTC time ``now``
    """
    p = policy.annotation_prefix
    nodes = decision.nodes or {}
    frag = decision.fragmentation
    needed = frag.get("pods_needed") if frag else None
    if needed is None:
        pod_sets = (decision.gang or {}).get("pod_sets") or []
        main = nodes.get("pod_set")
        needed = next((ps.get("count") for ps in pod_sets if ps.get("name") == main), None)
        if needed is None:
            needed = (decision.gang or {}).get("pods", 0)
    if frag:
        frag_text = (
            f"ratio {float(frag.get('ratio') or 0):.2f}: {frag.get('stranded')}/{frag.get('free')} free "
            f"{frag.get('resource')} stranded for {frag.get('per_pod')}-GPU pods, deficit {frag.get('deficit')}"
        )
    else:
        frag_text = "none"
    if decision.verdict == FITS:
        wait = "0s"
    elif decision.verdict == NEVER_FITS:
        wait = "never"
    else:
        secs = _wait_seconds(decision)
        wait = _wait_blocker(decision) or (_fmt_duration(secs) if secs is not None else "unknown")
    return {
        p + "verdict": decision.verdict,
        p + "reasons": ",".join(decision.reasons) or "none",
        p + "nodes-fit-now": f"{nodes.get('fit_now', 0)}/{needed}",
        p + "fragmentation": frag_text,
        p + "expected-wait": wait,
        p + "checked-at": rfc3339(now),
    }


def _pointer_token(key: str) -> str:
    """RFC 6901: "~" → "~0", then "/" → "~1"."""
    return key.replace("~", "~0").replace("/", "~1")


def annotation_patch(obj: Mapping | None, annotations: Mapping[str, str]) -> list[dict]:
    """An RFC 6902 JSON Patch setting ``annotations`` on ``obj``.

    - no ``metadata`` → one ``add /metadata {annotations}``;
    - no (or null) ``metadata.annotations`` → one ``add /metadata/annotations {…}``;
    - otherwise one ``add /metadata/annotations/<key>`` per key (``add`` replaces an existing
      member), keys escaped per RFC 6901 (``gangcheck.io/verdict`` → ``gangcheck.io~1verdict``).
    """
    ann = {str(k): str(v) for k, v in annotations.items()}
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return [{"op": "add", "path": "/metadata", "value": {"annotations": ann}}]
    if not isinstance(meta.get("annotations"), Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": ann}]
    return [{"op": "add", "path": "/metadata/annotations/" + _pointer_token(k), "value": v} for k, v in ann.items()]


def mutate_response(uid: str, obj: Mapping | None, decision: Decision, policy: Policy, now: datetime | float) -> dict:
    """The AdmissionReview answering POST /mutate: always allowed (the validating webhook denies),
    ``patchType: JSONPatch`` and the base64 patch of :func:`annotation_patch` with
    :func:`annotations_for`. No warnings (the validating webhook gives them; the API server would
    merge duplicates anyway)."""
    patch = annotation_patch(obj, annotations_for(decision, policy, now))
    raw = json.dumps(patch, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return review_envelope({
        "uid": uid,
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(raw).decode("ascii"),
    })

