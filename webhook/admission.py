"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out: pure functions, no I/O, no clock.

The server decodes the HTTP body, calls :func:`parse_review`, decides whether the object is
checked at all (:func:`skip_reason`), turns it into a ``GangRequest`` (:func:`gang_of`), runs the
engine and hands the ``Decision`` to :func:`validate_response` (POST /validate) or
:func:`mutate_response` (POST /mutate). Everything the API server reads comes from here:

- ``allowed: false`` with ``status {code: 403, message}`` only for a NeverFits in enforce mode
  (the API server shows ``admission webhook "<name>" denied the request: <message>``);
- ``warnings``: each ≤120 characters (a longer one split at clause boundaries), no control
  characters, duplicates merged, at most
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
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .adapters import ADAPTERS, adapt, is_supported
from .adapters.common import split_api_version
from .engine.decision import FITS, NEVER_FITS, WAITS, Decision
from .engine.model import GangRequest
from .engine.text import plural
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
    "skip",
    "skip_reason",
    "controller_owner",
    "replace_lone_surrogates",
    "may_hold_surrogates",
    "review_bytes",
    "gang_of",
    "clean_warnings",
    "Outcome",
    "admission_outcome",
    "validate_response",
    "mutate_response",
    "allowed_response",
    "fail_open_response",
    "annotations_for",
    "annotation_patch",
    "plural",
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

    Lone UTF-16 surrogates (``"\\ud800"`` escapes, which JSON allows and UTF-8 cannot carry) in
    the strings read here become U+FFFD, as Go's ``encoding/json`` decodes them; the server
    also replaces them in the whole body (:func:`replace_lone_surrogates`) before this.

    Args:
        doc: the decoded JSON value.

    Raises:
        BadReview: not an object, apiVersion is not ``admission.k8s.io/v1``, kind is not
            ``AdmissionReview``, ``request`` missing or not an object, ``request.uid`` missing or
            empty, ``request.uid``/``operation``/``namespace``/``name`` not strings,
            ``request.kind`` not an object, or ``request.object`` present but not an object,
            its ``apiVersion``/``kind`` not strings or its ``metadata`` not an object. The
            message is one line and names the field.
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
    if uid is not None and not isinstance(uid, str):
        raise BadReview(f"request.uid must be a string, got {_json_type(uid)}")
    if not uid:
        raise BadReview("AdmissionReview request.uid is missing or empty")
    for field in ("operation", "namespace", "name"):
        v = req.get(field)
        if v is not None and not isinstance(v, str):
            raise BadReview(f"request.{field} must be a string, got {_json_type(v)}")
    if req.get("kind") is not None and not isinstance(req.get("kind"), dict):
        raise BadReview(f"request.kind must be an object {{group, version, kind}}, got {_json_type(req.get('kind'))}")
    obj = req.get("object")
    if obj is not None:
        if not isinstance(obj, dict):
            raise BadReview(f"request.object must be an object, got {_json_type(obj)}")
        for field in ("apiVersion", "kind"):
            v = obj.get(field)
            if v is not None and not isinstance(v, str):
                raise BadReview(f"request.object.{field} must be a string, got {_json_type(v)}")
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise BadReview(f"request.object.metadata must be an object, got {_json_type(meta)}")
    kind = req.get("kind") or {}
    namespace = _unsurrogate(req.get("namespace") or "")
    name = _unsurrogate(req.get("name") or "")
    if obj is not None:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and namespace and not meta.get("namespace"):
            obj = dict(obj)
            obj["metadata"] = dict(meta, namespace=namespace)
    operation = req.get("operation") or ""
    return ReviewRequest(_unsurrogate(uid), operation.upper(), namespace, name, kind, obj, bool(req.get("dryRun")))


#: A lone (unpaired) UTF-16 surrogate code point; a pair is decoded by ``json`` into one character.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: A ``\\uD800``–``\\uDFFF`` escape in raw JSON bytes (may also match an escaped backslash
#: followed by "uD8..": a false positive only costs a walk over the document).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _unsurrogate(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (what Go's encoding/json decodes it to)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def may_hold_surrogates(body: bytes) -> bool:
    """True when the raw JSON ``body`` contains a ``\\uD800``–``\\uDFFF`` escape (so its decoded
    strings may hold lone surrogates). Cheap: one regex scan of the bytes."""
    return _SURROGATE_ESCAPE.search(body) is not None


def replace_lone_surrogates(value: Any) -> Any:
    """A copy of a decoded JSON ``value`` whose strings (keys too) have no lone surrogate: each
    becomes U+FFFD, as Go's encoding/json (the API server's decoder) does.

    Raises:
        RecursionError: nesting deeper than the interpreter's recursion limit (the caller
            answers 400, as for a body the JSON decoder refuses).
    """
    if isinstance(value, str):
        return _unsurrogate(value)
    if isinstance(value, dict):
        return {_unsurrogate(k): replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_lone_surrogates(v) for v in value]
    return value


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number"
    )


def _short_repr(v: Any) -> str:
    if isinstance(v, (dict, list)):
        text = _json_type(v)  # never echo a structure (size, depth)
    else:
        text = json.dumps(v) if not isinstance(v, str) else repr(_clean_text(v))
    return text if len(text) <= 60 else text[:57] + "..."


#: Skip codes of :func:`skip` (the ``reason`` label of ``gangcheck_webhook_skipped_total``).
SKIP_OPERATION = "operation"
SKIP_NO_OBJECT = "no_object"
SKIP_EXEMPT_NAMESPACE = "exempt_namespace"
SKIP_UNSUPPORTED_KIND = "unsupported_kind"
SKIP_OWNED = "owned_by_checked_kind"
SKIP_CODES = (SKIP_OPERATION, SKIP_NO_OBJECT, SKIP_EXEMPT_NAMESPACE, SKIP_UNSUPPORTED_KIND, SKIP_OWNED)


def controller_owner(obj: Mapping) -> str | None:
    """``"Kind name"`` of ``obj``'s controller ownerReference when that owner is a kind gangcheck
    checks (any version of a group/kind in ``adapters.ADAPTERS``), else None. Never raises.

    A JobSet's child Jobs, a RayJob's RayCluster, a batch Job's or a PyTorchJob's Pods were
    created by a controller from an object the webhook already checked as one gang; checked
    again on their own they are parts of that gang mistaken for gangs (a child Job of a
    64-replica JobSet denied for its own share). Kueue manages only the top-level object for
    the same reason: ``IsOwnerManagedByKueueForObject`` in kueue
    pkg/controller/jobframework/integrationmanager.go skips an object whose controller
    (``metav1.GetControllerOf``: the ownerReference with ``controller: true``) is an integrated
    kind. gangcheck matches group and kind but not the version: a false pass-through costs a
    missed check, a false denial is the worst outcome.
    """
    meta = _meta(obj)
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue
        kind = ref.get("kind")
        group, _version = split_api_version(ref.get("apiVersion"))
        if isinstance(kind, str) and (group, kind) in ADAPTERS:
            name = ref.get("name")
            return f"{kind} {_clean_text(name) if isinstance(name, str) else '(unnamed)'}"
        return None  # one controller at most (the API server enforces it)
    return None


def skip(req: ReviewRequest, policy: Policy) -> tuple[str, str] | None:
    """``(code, reason)`` when this request is admitted unchanged without a check, or None.

    Skipped, in this order: operations other than CREATE/UPDATE (DELETE, CONNECT:
    :data:`SKIP_OPERATION`), no ``request.object`` (:data:`SKIP_NO_OBJECT`), namespaces in
    ``policy.exempt_namespaces`` (:data:`SKIP_EXEMPT_NAMESPACE`), objects whose apiVersion/kind
    gangcheck has no adapter for (``adapters.is_supported``; :data:`SKIP_UNSUPPORTED_KIND`), and
    objects whose controller ownerReference is a kind gangcheck checks (:func:`controller_owner`;
    :data:`SKIP_OWNED`). Never raises, whatever the object holds.
    """
    if req.operation not in CHECKED_OPERATIONS:
        return SKIP_OPERATION, f"operation {req.operation or '(none)'} is not checked"
    obj = req.obj
    if not isinstance(obj, Mapping):
        return SKIP_NO_OBJECT, "request has no object"
    ns = req.namespace or _meta(obj).get("namespace") or ""
    if isinstance(ns, str) and ns in policy.exempt_namespaces:
        return SKIP_EXEMPT_NAMESPACE, f"namespace {ns} is exempt"
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not (isinstance(api_version, str) and isinstance(kind, str) and is_supported(obj)):
        what = _truncate(f"{_clean_text(api_version)}/{_clean_text(kind)}", 80)
        return SKIP_UNSUPPORTED_KIND, f"{what} is not a kind gangcheck checks"
    owner = controller_owner(obj)
    if owner is not None:
        return SKIP_OWNED, f"created by {owner}, which gangcheck checks as the gang"
    return None


def skip_reason(req: ReviewRequest, policy: Policy) -> str | None:
    """The reason text of :func:`skip` (None when the request is checked). Never raises."""
    s = skip(req, policy)
    return None if s is None else s[1]


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
    runs of whitespace collapse to one space, lone surrogates become U+FFFD (so the text can
    always be encoded as UTF-8)."""
    return " ".join(_unsurrogate(str(text)).translate(_CONTROL).split())


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


#: Where a long warning may be split, best first: after a sentence, a clause, a list item.
_BREAKS = (". ", "; ", ": ", ", ", " (", " ")
#: A long warning becomes at most this many lines (the last one cut with "…").
MAX_WARNING_PARTS = 3
#: The mark that starts the continuation of a split warning.
CONTINUED = "… "


def _split_warning(text: str, limit: int = MAX_WARNING_CHARS, parts: int = MAX_WARNING_PARTS) -> list[str]:
    """``text`` as lines of at most ``limit`` characters, split after the last sentence,
    clause or list boundary that fits (continuations start with "… "), at most ``parts``
    lines; only the last may be cut with "…". Nothing is dropped from a text ≤ ``limit``."""
    out: list[str] = []
    rest = text
    while len(rest) > limit and len(out) < parts - 1:
        cut = -1
        for sep in _BREAKS:
            i = rest.rfind(sep, limit // 3, limit - (len(sep) - 1))
            if i > 0:
                cut = i + (1 if sep[0] in ".;:," else 0)
                break
        if cut <= 0:
            cut = limit - 1
        out.append(rest[:cut].rstrip())
        rest = CONTINUED + rest[cut:].lstrip()
    out.append(_truncate(rest, limit))
    return out


def clean_warnings(warnings: list[str], *, limit: int = MAX_WARNINGS) -> list[str]:
    """Make warnings safe to return to the API server (FIELD-NOTES §8), keeping their order.

    Each: control characters replaced (a newline would make the API server drop it),
    whitespace collapsed; one longer than 120 characters is split into up to
    :data:`MAX_WARNING_PARTS` lines at sentence/clause boundaries (continuations start with
    "… "; only the last part may be cut with "…"), so numbers and advice at its end survive;
    empty ones dropped; duplicates (after cleaning) merged; at most ``limit`` lines kept and
    at most 4,096 UTF-8 bytes in total (later ones, the less important, are dropped first).
    """
    out: list[str] = []
    seen: set[str] = set()
    total = 0
    for w in warnings:
        for text in _split_warning(_clean_text(w)) if _clean_text(w) else ():
            if text in seen:
                continue
            size = len(text.encode("utf-8"))
            if total + size > MAX_WARNINGS_BYTES or len(out) >= limit:
                return out
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


def _denial_warnings(decision: Decision) -> list[str]:
    """A NeverFits that is admitted (warn mode, UPDATE) as warnings, most useful part first:
    the verdict with the finding's code and what to change ("ask for at most 64 pods of 8
    nvidia.com/gpu, …"), then the finding with its numbers, then what else explains it.
    The object's own kind and name (the message's head) are left out: the user just sent it."""
    message = _clean_text(decision.message)
    finding = next((f for f in decision.findings if getattr(f, "severity", None) == NEVER_FITS), None)
    code = getattr(finding, "code", "") or (decision.reasons[0] if decision.reasons else "NeverFits")
    detail = _clean_text(getattr(finding, "message", "") or "")
    at = message.find(detail) if detail else -1
    if at < 0:  # a message not built around its finding: the text after "can never start: "
        head, sep, body = message.partition(" can never start: ")
        return [f"would be denied ({code}): " + (body if sep else message)]
    after = message[at + len(detail):].lstrip(". ").strip()
    hint, sep, also = after.partition(". ")
    hint = hint.rstrip(".")
    out = []
    if hint:
        out.append(f"would be denied ({code}): {hint[:1].lower() + hint[1:]}")
        out.append(detail)
    else:
        out.append(f"would be denied ({code}): {detail}")
    if also.strip():
        out.append(also.strip())
    return out


def _decision_warnings(decision: Decision, policy: Policy) -> list[str]:
    """Warnings for an admitted request, most important first (before cleaning)."""
    if policy.mode == "audit":
        return []
    out: list[str] = []
    if decision.verdict == NEVER_FITS:
        return _denial_warnings(decision)
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


def review_bytes(review: Mapping) -> bytes:
    """``review`` as compact UTF-8 JSON, the body of every 200 answer. Never raises on text: a
    string that UTF-8 cannot carry (a lone surrogate that slipped through) makes the whole
    document ASCII-escaped (``\\ud800``, valid JSON, decoded by the API server as U+FFFD)."""
    try:
        return json.dumps(review, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(review, separators=(",", ":"), ensure_ascii=True).encode("ascii")


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


@dataclass(frozen=True)
class Outcome:
    """What admission does with one checked decision: the webhook's answer and ``gangcheck check``'s.

    ``allowed``: False only for a NeverFits on CREATE in enforce mode. ``message``: the denial
    message (< 1 KiB, one line) when denied, else None. ``warnings``: what the API server shows
    (cleaned by :func:`clean_warnings`; empty when denied or in audit mode).
    """

    allowed: bool
    message: str | None
    warnings: tuple[str, ...]


def admission_outcome(decision: Decision, policy: Policy, *, operation: str = "CREATE") -> Outcome:
    """The one decision rule of admission, shared by POST /validate and ``gangcheck check``:
    deny only a NeverFits on CREATE in enforce mode; otherwise admit with the warnings of
    :func:`validate_response`'s doc (none in audit mode)."""
    if decision.verdict == NEVER_FITS and policy.mode == "enforce" and operation != "UPDATE":
        return Outcome(False, _deny_message(decision), ())
    return Outcome(True, None, tuple(clean_warnings(_decision_warnings(decision, policy))))


def validate_response(uid: str, decision: Decision, policy: Policy, *, operation: str = "CREATE") -> dict:
    """The AdmissionReview answering POST /validate for a checked gang.

    - enforce mode and NeverFits on CREATE: ``allowed: false``, ``status {code: 403, message}``
      with ``Decision.message`` (what was asked, the limit and its numbers, what to change;
      < 1 KiB, one line).
    - NeverFits on UPDATE (the object already exists; denying could block finalizer removal)
      and in warn mode: admitted, the first warning ``would be denied (<Code>): <what to
      change>``, then the finding with its numbers (:func:`_denial_warnings`).
    - audit mode: admitted, no warnings.
    - otherwise admitted with the engine's warnings (Waits findings, most important first),
      plus a fragmentation warning when a Waits gang's stranded/free GPU ratio ≥
      ``policy.warn_fragmentation_ratio`` and an expected-wait warning past
      ``policy.warn_expected_wait_seconds`` when the engine gives a wait.
    ``auditAnnotations``: ``verdict`` and ``reasons``.
    """
    audit = {"verdict": decision.verdict, "reasons": ",".join(decision.reasons) or "none"}
    out = admission_outcome(decision, policy, operation=operation)
    if not out.allowed:
        return review_envelope({
            "uid": uid,
            "allowed": False,
            "status": {"code": 403, "message": out.message},
            "auditAnnotations": audit,
        })
    resp: dict[str, Any] = {"uid": uid, "allowed": True, "auditAnnotations": audit}
    if out.warnings:
        resp["warnings"] = list(out.warnings)
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
    - ``nodes-fit-now``: nodes that can host a pod of the main pod shape now, and the pods of
      that shape needed: ``12 nodes can take a pod now; 40 pods needed``
    - ``fragmentation``: ``ratio 0.93: 1200/1296 free nvidia.com/gpu stranded for 8-GPU pods,
      deficit 28`` or ``none`` (no GPUs requested)
    - ``expected-wait``: ``0s`` for Fits, ``never`` for NeverFits, the engine's estimate when it
      provides one; when running work can never free enough, what the gang waits for instead
      (``waits for repair: 8 cordoned node(s) must be uncordoned; …``); else ``unknown``
    - ``scale-up``: only when the gang needs new nodes (NeedsScaleUp): ``61 pod(s) need new
      nodes: NodePool gpu-h100 61 node(s)`` (pods where the new nodes' shape is unknown)
    - ``topology``: only for a gang with a topology request (Decision.topology), per pod set:
      ``worker: best topology.example.com/rack domain now r2 takes 3 of 4 pods, deficit 1 pod (1 node)``
      (pod sets joined by ``; ``)
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
    out = {
        p + "verdict": decision.verdict,
        p + "reasons": ",".join(decision.reasons) or "none",
        p + "nodes-fit-now": f"{plural(nodes.get('fit_now', 0), 'node')} can take a pod now; {plural(needed, 'pod')} needed",
        p + "fragmentation": frag_text,
        p + "expected-wait": wait,
        p + "checked-at": rfc3339(now),
    }
    scale = _scale_up_text(decision)
    if scale:
        out[p + "scale-up"] = scale
    topo = _topology_text(decision)
    if topo:
        out[p + "topology"] = topo
    return out


def _topology_text(decision: Decision) -> str | None:
    """The ``topology`` annotation from ``Decision.topology`` (see ``annotations_for``), or None."""
    parts = []
    for name, row in (getattr(decision, "topology", None) or {}).items():
        if not isinstance(row, dict) or row.get("best_domain") is None:
            continue
        deficit = int(row.get("deficit_pods") or 0)
        nodes = int(row.get("deficit_nodes") or 0)
        parts.append(f"{name}: best {row.get('level')} domain now {row['best_domain']} takes {row.get('best_domain_pods')} "
                     f"of {row.get('needed_pods')} pods, deficit {plural(deficit, 'pod')} ({plural(nodes, 'node')})")
    return "; ".join(parts) or None


def _scale_up_text(decision: Decision) -> str | None:
    """``61 pod(s) need new nodes: NodePool gpu-h100 61 node(s)`` from a NeedsScaleUp finding, else None."""
    f = next((f for f in decision.findings if f.code == "NeedsScaleUp"), None)
    if f is None:
        return None
    d = f.data
    pools = [f"{row.get('kind')} {row.get('name')} "
             + (f"{row['nodes_needed']} node(s)" if row.get("nodes_needed") is not None else f"{row.get('pods')} pod(s)")
             for row in d.get("pools") or []]
    return f"{d.get('pods_missing', 0)} pod(s) need new nodes: " + (", ".join(pools) if pools else "no autoscaler has room")


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
    raw = review_bytes(patch)
    return review_envelope({
        "uid": uid,
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(raw).decode("ascii"),
    })

