"""Reading and decoding an admission request's body: bounded reads, Content-Type, strict JSON.

Owns the 4xx side of a request: :class:`BadRequest` (HTTP 400 unless it says otherwise, a
one-line reason) and :class:`BodyIncomplete` (sent before the whole body was read: the
connection closes after it); :func:`read_body` (at most ``limit`` bytes within ``timeout``
seconds, else 400 / 408), :func:`content_type_problem` (415), :func:`decode_json` (UTF-8 only,
no NaN/Infinity, finite 64-bit floats; lone surrogates as Go's encoding/json decodes them).
Does not own what an AdmissionReview must hold (``admission.parse_review``) nor the answer.
Sizes are bytes, times seconds.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from fastapi import Request

from .. import admission as adm

__all__ = ["BadRequest", "BodyIncomplete", "READ_GRACE_SECONDS", "DEFAULT_BODY_TIMEOUT", "read_body",
           "content_type_problem", "decode_json", "one_line"]


class BadRequest(Exception):
    """An HTTP 4xx (400 unless ``status`` says otherwise) with a one-line reason."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


#: Seconds to receive a request body after its headers (the API server itself gives up on the
#: whole call after the webhook's timeoutSeconds, 5 s in manifests/).
DEFAULT_BODY_TIMEOUT = 5.0
#: After a read deadline passes, data that already arrived (a pause: SIGSTOP, CPU throttling;
#: the event loop runs its timers before it reads sockets) is still read as long as each chunk
#: comes within this many seconds, up to twice the deadline in all.
READ_GRACE_SECONDS = 0.1


class BodyIncomplete(BadRequest):
    """A 4xx sent before the whole body was read: the connection is closed after it."""


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, at most ``limit`` bytes, read within ``timeout`` seconds.

    Raises:
        BodyIncomplete: 400 for a Content-Length or body over ``limit`` or an invalid
            Content-Length; 408 when the body is not complete after ``timeout`` seconds (a
            slow client, a chunk size that never arrives, e.g. 2^64). Past the deadline, what
            already arrived is still read while chunks follow each other within
            :data:`READ_GRACE_SECONDS`, up to twice ``timeout`` (or 1 s after the deadline was
            first seen to have passed, if later): a request the server received during a
            pause is answered, a trickling client is not waited for.
    """
    cl = request.headers.get("content-length")
    if cl is not None:
        try:
            n = int(cl)
        except ValueError:
            raise BodyIncomplete("invalid Content-Length header") from None
        if n > limit:
            raise BodyIncomplete(f"request body of {n} bytes exceeds the {limit}-byte limit")
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + timeout
    hard: float | None = None  # set once the deadline has passed
    chunks, size = [], 0
    receive = request.receive
    while True:
        now = loop.time()
        wait = deadline - now
        if wait <= 0:
            if hard is not None:
                raise BodyIncomplete(f"request body not received within {timeout:g}s", 408)
            # First time past the deadline: look once more at what already arrived (after a
            # pause the loop's timers run before it reads the sockets), then keep reading while
            # chunks follow each other closely, up to twice the timeout or 1 s past this point.
            hard = max(start + 2 * timeout, now + 10 * READ_GRACE_SECONDS)
            deadline = now + READ_GRACE_SECONDS
            continue
        try:
            message = await asyncio.wait_for(receive(), wait)
        except asyncio.TimeoutError:
            continue  # the loop above decides: a look at what arrived, or 408
        if message.get("type") != "http.request":
            raise BodyIncomplete("client disconnected before sending the whole body")
        chunk = message.get("body") or b""
        size += len(chunk)
        if size > limit:
            raise BodyIncomplete(f"request body exceeds the {limit}-byte limit")
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        if hard is not None:
            deadline = min(loop.time() + READ_GRACE_SECONDS, hard)


def _reject_constant(name: str):
    """``json.loads``' parse_constant: NaN, Infinity and -Infinity are not JSON (RFC 8259 §6)."""
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    """``json.loads``' parse_float: a number beyond a 64-bit float is refused, not made infinite."""
    v = float(text)
    if v in (math.inf, -math.inf):
        raise ValueError(f"number {one_line(text, 40)} is out of range for a 64-bit float")
    return v


def content_type_problem(value: str | None) -> str | None:
    """Why a Content-Type is refused (HTTP 415), or None. Absent, or ``application/json``
    (parameters allowed; a ``charset`` must be ``utf-8``) are accepted: the API server sends
    ``application/json``, and JSON exchanged between systems is UTF-8 (RFC 8259 §8.1)."""
    if value is None:
        return None
    mtype, _, params = value.partition(";")
    mtype = mtype.strip().lower()
    if mtype != "application/json":
        return f"Content-Type {one_line(value, 60)!r} is not supported; send application/json"
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return f"charset {one_line(val.strip(), 30)!r} is not supported; send application/json in UTF-8"
    return None


def decode_json(body: bytes) -> Any:
    """Decode an AdmissionReview body as strict JSON.

    UTF-8 only (no byte order mark, no UTF-16/32 detection as ``json.loads`` of bytes would
    do), no ``NaN``/``Infinity`` literals, no number beyond a 64-bit float, and lone UTF-16
    surrogate escapes replaced by U+FFFD (``admission.replace_lone_surrogates``), as Go's
    encoding/json in the API server decodes them.

    Raises:
        BadRequest: "body is not valid JSON: <why>", one line.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: not UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise BadRequest("body is not valid JSON: starts with a byte order mark")
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        if adm.may_hold_surrogates(body):
            doc = adm.replace_lone_surrogates(doc)
    except RecursionError:
        raise BadRequest("body is not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    return doc


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (runs of whitespace become one space), cut to ``limit`` characters
    with "..." at the end when longer."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
