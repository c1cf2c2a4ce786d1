"""The webhook server: FastAPI app (``create_app``) and a TLS uvicorn runner (``WebhookServer``, ``serve``).

Endpoints:

- ``POST /validate``, ``POST /mutate``: AdmissionReview ``admission.k8s.io/v1`` in and out. Bodies
  that are not strict JSON (UTF-8 only; no NaN/Infinity; :func:`decode_json`), not an
  AdmissionReview v1 (``admission.parse_review``: a field of the wrong type is named), lack
  ``request.uid`` or exceed 3 MiB get HTTP 400 with a one-line ``text/plain`` reason; a
  Content-Type other than ``application/json`` gets 415; a body not received within
  ``body_timeout`` 408 (headers: ``WebhookServer``'s bounds, 408/431). Everything else gets
  HTTP 200 with an AdmissionReview: never a 500. The check reads ``source.snapshot()`` (no API call), runs in a worker thread under
  a time budget, and **fails open** (allowed + one warning + ``gangcheck_webhook_fail_open_total``)
  when the source is not ready, its data is older than ``policy.stale_after_seconds``, no valid
  policy was ever loaded, the check runs past its budget, or anything raises.
- ``GET /healthz``: 200 while the process serves.
- ``GET /readyz``: 200 when the source is ready (every informer synced) and a valid policy is in
  force, else 503; JSON detail: states, counts and codes (source informers, policy validity and
  the code of a rejected version's problem, data age). ``?verbose=1`` from a loopback address
  adds the names and texts (policy path and parser error, source name, informer errors).
- One JSON line per decision on the logger ``gangcheck.decision`` (``decision_log``).
- ``GET /metrics``: Prometheus text.

The API server's TLS client sees the certificate from ``--tls-cert``/``--tls-key``;
``WebhookServer`` polls a hash of both files and calls ``load_cert_chain`` on the live
``SSLContext`` (uvicorn's ``config.ssl``) from the event loop, so new handshakes get the new
certificate while established connections and in-flight requests continue.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import dataclasses
import hashlib
import inspect
import ipaddress
import json
import logging
import math
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, disable_created_metrics, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from . import admission as adm
from .adapters import AdapterError
from .http_protocol import DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_HEADER_BYTES
from .decision_log import DECISION_LOGGER, RateLimiter, decision_line, decision_record
from .engine.evaluate import evaluate, expected_wait
from .policy_reload import PolicyReloader, as_policy_provider
from .sources import SnapshotSource, StaticSource

__all__ = ["create_app", "WebhookServer", "serve", "make_source", "LATENCY_BUCKETS", "DEFAULT_TIME_BUDGET"]

log = logging.getLogger("gangcheck.server")
disable_created_metrics()  # no *_created series: they double the scrape for nothing

#: Latency histogram buckets in seconds, from 0.5 ms.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: Seconds a check may take before the webhook fails open (the webhook configurations give the
#: API server 5 s; this leaves room for the network and TLS).
DEFAULT_TIME_BUDGET = 2.0
#: Seconds to receive a request body after its headers (the API server itself gives up on the
#: whole call after the webhook's timeoutSeconds, 5 s in manifests/).
DEFAULT_BODY_TIMEOUT = 5.0

_JSON = "application/json"


class _DecisionCache:
    """Decisions for recently seen gangs on the current snapshot (LRU, thread-safe).

    The API server sends the same object to /mutate and then /validate (and retries after a
    timeout): the second evaluation is a lookup. Keyed by the gang (minus the annotations
    gangcheck itself adds) and the engine options; emptied whenever ``source.snapshot()``
    returns a different snapshot object, so a decision never outlives the data it was made on.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._snap: Any = None
        self._entries: "dict[str, Any]" = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(gang, options, prefix: str) -> str:
        ann = getattr(gang, "annotations", None) or {}
        if any(k.startswith(prefix) for k in ann):
            try:
                kept = {k: v for k, v in ann.items() if not k.startswith(prefix)}
                gang = dataclasses.replace(gang, annotations=type(ann)(kept) if isinstance(ann, MappingProxyType) else kept)
            except (TypeError, ValueError):  # pragma: no cover
                pass
        return repr(options) + "|" + repr(gang)

    def get(self, snap, key: str):
        if self.size <= 0:
            return None
        with self._lock:
            if snap is not self._snap:
                self._snap, self._entries = snap, {}
                return None
            d = self._entries.pop(key, None)
            if d is not None:
                self._entries[key] = d  # most recently used last
                self.hits += 1
            else:
                self.misses += 1
            return d

    def put(self, snap, key: str, decision) -> None:
        if self.size <= 0:
            return
        with self._lock:
            if snap is not self._snap:
                self._snap, self._entries = snap, {}
            self._entries[key] = decision
            while len(self._entries) > self.size:
                self._entries.pop(next(iter(self._entries)))


class _BadRequest(Exception):
    """An HTTP 4xx (400 unless ``status`` says otherwise) with a one-line reason."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class _Metrics:
    """The app's Prometheus metrics, in their own registry (several apps may live in one process)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "gangcheck_webhook_requests", "Admission requests by endpoint, verdict and outcome.",
            ["endpoint", "verdict", "outcome"], registry=registry,
        )
        self.latency = Histogram(
            "gangcheck_webhook_latency_seconds", "Admission request latency (body read to response), seconds.",
            ["endpoint", "verdict", "outcome"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.in_flight = Gauge(
            "gangcheck_webhook_requests_in_flight", "Admission requests being handled.", ["endpoint"], registry=registry,
        )
        self.fail_open = Counter(
            "gangcheck_webhook_fail_open", "Requests admitted without a check, by reason.",
            ["endpoint", "reason"], registry=registry,
        )
        self.skipped = Counter(
            "gangcheck_webhook_skipped", "Requests admitted unchanged without a check, by endpoint and reason "
            "(operation, no_object, exempt_namespace, unsupported_kind, owned_by_checked_kind).",
            ["endpoint", "reason"], registry=registry,
        )
        self.cert_reloads = Counter(
            "gangcheck_tls_certificate_reloads", "Serving certificate reloads.", registry=registry,
        )
        self.cert_reload_failures = Counter(
            "gangcheck_tls_certificate_reload_failures", "Serving certificate reloads that failed (old one kept).",
            registry=registry,
        )


class _StateCollector:
    """Scrape-time metrics read from the source and the policy provider."""

    def __init__(self, source: SnapshotSource, policy) -> None:
        self.source, self.policy = source, policy

    def collect(self):
        reloads = CounterMetricFamily("gangcheck_policy_reloads", "Policy reloads applied.")
        failures = CounterMetricFamily("gangcheck_policy_reload_failures", "Policy versions rejected as invalid.")
        valid = GaugeMetricFamily("gangcheck_policy_valid", "1 when the latest policy version is valid.")
        problem = GaugeMetricFamily(
            "gangcheck_policy_problem",
            "1 for the code of the latest policy version's problem while the last good policy stays in force "
            "(empty, invalid_yaml, not_a_mapping, invalid_field, not_utf8, unreadable, missing).",
            labels=["problem"],
        )
        try:
            st = self.policy.status()
            reloads.add_metric([], float(st.get("reloads") or 0))
            failures.add_metric([], float(st.get("failures") or 0))
            valid.add_metric([], 1.0 if st.get("valid") else 0.0)
            if st.get("problem"):
                problem.add_metric([str(st["problem"])], 1.0)
        except Exception:  # pragma: no cover - metrics never break a scrape
            pass
        yield reloads
        yield failures
        yield valid
        yield problem

        ready = GaugeMetricFamily("gangcheck_cache_ready", "1 when every informer has synced.")
        age = GaugeMetricFamily("gangcheck_cache_age_seconds", "Seconds since the cluster view was last known current.")
        objects = GaugeMetricFamily("gangcheck_informer_objects", "Objects held per informer.", labels=["informer"])
        synced = GaugeMetricFamily("gangcheck_informer_synced", "1 when the informer has synced.", labels=["informer"])
        last = GaugeMetricFamily("gangcheck_informer_last_event_age_seconds", "Seconds since the informer's last event or bookmark.", labels=["informer"])
        restarts = CounterMetricFamily("gangcheck_informer_watch_restarts", "Watch restarts per informer.", labels=["informer"])
        installed = GaugeMetricFamily("gangcheck_informer_installed", "1 when the informer's API (CRD) is served.", labels=["informer"])
        relists = CounterMetricFamily("gangcheck_informer_relists", "Full re-lists per informer (410 Gone etc.).", labels=["informer"])
        errors = CounterMetricFamily("gangcheck_informer_errors", "List/watch errors per informer.", labels=["informer"])
        try:
            ready.add_metric([], 1.0 if self.source.ready else 0.0)
            age.add_metric([], float(self.source.age_seconds()))
            for name, info in _informers(self.source.status()):
                if info.get("objects") is not None:
                    objects.add_metric([name], float(info["objects"]))
                if info.get("synced") is not None:
                    synced.add_metric([name], 1.0 if info["synced"] else 0.0)
                la = _first(info, "last_event_age_s", "last_event_age_seconds", "last_event_age")
                if la is not None:
                    last.add_metric([name], float(la))
                rs = _first(info, "watch_restarts", "restarts")
                if rs is not None:
                    restarts.add_metric([name], float(rs))
                if info.get("installed") is not None:
                    installed.add_metric([name], 1.0 if info["installed"] else 0.0)
                for fam, k in ((relists, "relists"), (errors, "errors")):
                    v = _first(info, k)
                    if v is not None:
                        fam.add_metric([name], float(v))
        except Exception:  # pragma: no cover
            pass
        yield from (ready, age, objects, synced, last, restarts, installed, relists, errors)


def _first(d: dict, *keys):
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
    return None


def _informers(status: Any):
    """(name, info) pairs from a source status: ``{"informers": {name: {...}}}`` or a list of
    ``{"name": ...}``; a static source's ``{"nodes": N, "pods": M}`` becomes two synced informers."""
    if not isinstance(status, dict):
        return []
    inf = status.get("informers")
    if isinstance(inf, dict):
        return [(str(k), v) for k, v in inf.items() if isinstance(v, dict)]
    if isinstance(inf, list):
        return [(str(v.get("name") or v.get("resource") or i), v) for i, v in enumerate(inf) if isinstance(v, dict)]
    out = []
    for k in ("nodes", "pods"):
        if isinstance(status.get(k), int):
            out.append((k, {"objects": status[k], "synced": bool(status.get("synced", True))}))
    return out


class _BodyIncomplete(_BadRequest):
    """A 4xx sent before the whole body was read: the connection is closed after it."""



#: After a read deadline passes, data that already arrived (a pause: SIGSTOP, CPU throttling;
#: the event loop runs its timers before it reads sockets) is still read as long as each chunk
#: comes within this many seconds, up to twice the deadline in all.
READ_GRACE_SECONDS = 0.1


async def _read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, at most ``limit`` bytes, read within ``timeout`` seconds.

    Raises:
        _BodyIncomplete: 400 for a Content-Length or body over ``limit`` or an invalid
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
            raise _BodyIncomplete("invalid Content-Length header") from None
        if n > limit:
            raise _BodyIncomplete(f"request body of {n} bytes exceeds the {limit}-byte limit")
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
                raise _BodyIncomplete(f"request body not received within {timeout:g}s", 408)
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
            raise _BodyIncomplete("client disconnected before sending the whole body")
        chunk = message.get("body") or b""
        size += len(chunk)
        if size > limit:
            raise _BodyIncomplete(f"request body exceeds the {limit}-byte limit")
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        if hard is not None:
            deadline = min(loop.time() + READ_GRACE_SECONDS, hard)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    v = float(text)
    if v in (math.inf, -math.inf):
        raise ValueError(f"number {_one_line(text, 40)} is out of range for a 64-bit float")
    return v


def _content_type_problem(value: str | None) -> str | None:
    """Why a Content-Type is refused (HTTP 415), or None. Absent, or ``application/json``
    (parameters allowed; a ``charset`` must be ``utf-8``) are accepted: the API server sends
    ``application/json``, and JSON exchanged between systems is UTF-8 (RFC 8259 §8.1)."""
    if value is None:
        return None
    mtype, _, params = value.partition(";")
    mtype = mtype.strip().lower()
    if mtype != "application/json":
        return f"Content-Type {_one_line(value, 60)!r} is not supported; send application/json"
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return f"charset {_one_line(val.strip(), 30)!r} is not supported; send application/json in UTF-8"
    return None


def decode_json(body: bytes) -> Any:
    """Decode an AdmissionReview body as strict JSON.

    UTF-8 only (no byte order mark, no UTF-16/32 detection as ``json.loads`` of bytes would
    do), no ``NaN``/``Infinity`` literals, no number beyond a 64-bit float, and lone UTF-16
    surrogate escapes replaced by U+FFFD (``admission.replace_lone_surrogates``), as Go's
    encoding/json in the API server decodes them.

    Raises:
        _BadRequest: "body is not valid JSON: <why>", one line.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadRequest(f"body is not valid JSON: not UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise _BadRequest("body is not valid JSON: starts with a byte order mark")
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        if adm.may_hold_surrogates(body):
            doc = adm.replace_lone_surrogates(doc)
    except RecursionError:
        raise _BadRequest("body is not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise _BadRequest(f"body is not valid JSON: {exc}") from None
    return doc


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


def _is_loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def create_app(
    source: SnapshotSource,
    policy_provider: Any = None,
    *,
    time_budget: float = DEFAULT_TIME_BUDGET,
    clock: Callable[[], float] = time.time,
    max_body_bytes: int = adm.MAX_BODY_BYTES,
    workers: int = 4,
    registry: CollectorRegistry | None = None,
    decision_cache: int = 256,
    wait_budget: float = 0.05,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    traceback_interval: float = 60.0,
) -> FastAPI:
    """Build the webhook's FastAPI app.

    Args:
        source: where snapshots come from (``StaticSource`` or the live cache). If it has
            ``start()``/``stop()`` (sync or async) the app's lifespan calls them.
        policy_provider: a ``Policy``, None (default policy), a ``PolicyReloader`` /
            ``StaticPolicy``, or a zero-argument callable returning a ``Policy``. Read on every
            request, so a reload applies to the next request.
        time_budget: seconds a check may run before the webhook fails open.
        clock: Unix seconds for ``checked-at`` annotations (tests pass a fixed clock).
        max_body_bytes: larger bodies are rejected with 400 (default 3 MiB).
        workers: threads running checks (the event loop never runs the engine).
        registry: Prometheus registry (a fresh one by default); ``app.state.metrics.registry``.
        decision_cache: how many recent decisions to keep for the current snapshot (0: off);
            /mutate then /validate of one object evaluates once.
        wait_budget: seconds a Waits answer waits for its expected-wait estimate (computed in
            a worker, cached per gang and snapshot); past it the answer says "unknown" and the
            estimate finishes in the background for the next request. 0 turns estimates off.
        body_timeout: seconds to receive a request body once its headers are in; past it
            the answer is 408 (headers are bounded by ``WebhookServer(header_timeout=)``).
        traceback_interval: at most one traceback per exception type (and one line per 4xx
            status) is logged in this many seconds; the decision line is always logged.

    Returns:
        The app; ``app.state.metrics`` holds the metric objects, ``app.state.source`` and
        ``app.state.policy`` the inputs.
    """
    policy = as_policy_provider(policy_provider)
    registry = registry or CollectorRegistry()
    metrics = _Metrics(registry)
    registry.register(_StateCollector(source, policy))
    cache = _DecisionCache(decision_cache)
    waits = _DecisionCache(decision_cache)  # expected waits per gang on the current snapshot
    inflight: dict[str, Any] = {}  # gang key → estimate being computed
    pending = [0]  # evaluations submitted and not finished (event-loop thread only)
    max_pending = max(1, workers) * 16
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="gangcheck-check")
    decisions = logging.getLogger(DECISION_LOGGER)
    tracebacks, bad_requests = RateLimiter(traceback_interval), RateLimiter(traceback_interval)

    def _decision_log(endpoint: str, req: adm.ReviewRequest, verdict: str, outcome: str, elapsed: float, note: dict) -> None:
        if not decisions.isEnabledFor(logging.INFO):
            return
        try:
            decisions.info(decision_line(decision_record(endpoint, req, verdict, outcome, elapsed, note)))
        except Exception:  # pragma: no cover - the log never breaks an answer
            pass

    def _traceback_log(exc: BaseException, uid: str) -> None:
        ok, suppressed = tracebacks.allow(type(exc).__name__)
        if ok:
            more = f" ({suppressed} more {type(exc).__name__} since the last traceback)" if suppressed else ""
            log.error("internal error while checking %s, admitted without a check%s", uid, more, exc_info=exc)

    def _bad_request_log(status: int, text: str) -> None:
        ok, suppressed = bad_requests.allow(str(status))
        if ok:
            more = f" ({suppressed} more since the last one logged)" if suppressed else ""
            log.warning("HTTP %d: %s%s", status, _one_line(text, 200), more)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        start = getattr(source, "start", None)
        if callable(start):
            r = start()
            if inspect.isawaitable(r):
                await r
        try:
            yield
        finally:
            stop = getattr(source, "stop", None)
            if callable(stop):
                try:
                    r = stop()
                    if inspect.isawaitable(r):
                        await r
                except Exception:  # pragma: no cover
                    log.exception("stopping the snapshot source failed")
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="gangcheck", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.metrics = metrics
    app.state.source = source
    app.state.policy = policy
    app.state.executor = executor
    app.state.decision_cache = cache

    async def _admit(request: Request, endpoint: str) -> Response:
        t0 = time.perf_counter()
        verdict, outcome = "none", "error"
        metrics.in_flight.labels(endpoint).inc()
        req: adm.ReviewRequest | None = None
        note: dict[str, Any] = {}
        try:
            try:
                # The body is read (bounded) before a wrong Content-Type is refused, so the 415
                # leaves the keep-alive connection usable.
                body = await _read_body(request, max_body_bytes, body_timeout)
                problem = _content_type_problem(request.headers.get("content-type"))
                if problem is not None:
                    raise _BadRequest(problem, 415)
                doc = decode_json(body)
                try:
                    req = adm.parse_review(doc)
                except adm.BadReview as exc:
                    raise _BadRequest(str(exc)) from None
            except _BadRequest as exc:
                outcome = "bad_request"
                status = getattr(exc, "status", 400)
                headers = {"connection": "close"} if isinstance(exc, _BodyIncomplete) else None
                _bad_request_log(status, str(exc))
                return Response(_one_line(str(exc)) + "\n", status_code=status, media_type="text/plain", headers=headers)
            except Exception as exc:  # client went away mid-body, etc.
                outcome = "bad_request"
                return Response(_one_line(f"could not read the request body: {type(exc).__name__}") + "\n",
                                status_code=400, media_type="text/plain", headers={"connection": "close"})

            reason_key: str | None = None
            try:
                review, verdict, outcome, reason_key = await _decide(req, endpoint == "mutate", note)
            except Exception as exc:
                _traceback_log(exc, req.uid)
                review = adm.fail_open_response(req.uid, f"internal error ({type(exc).__name__})")
                outcome, reason_key = "fail_open", "internal_error"
                note["error"] = type(exc).__name__
            if reason_key:
                metrics.fail_open.labels(endpoint, reason_key).inc()
                note["fail_open"] = reason_key
            return Response(adm.review_bytes(review), media_type=_JSON)
        finally:
            elapsed = time.perf_counter() - t0
            metrics.in_flight.labels(endpoint).dec()
            metrics.requests.labels(endpoint, verdict, outcome).inc()
            metrics.latency.labels(endpoint, verdict, outcome).observe(elapsed)
            if req is not None:
                _decision_log(endpoint, req, verdict, outcome, elapsed, note)

    async def _with_wait(snap, gang, options, key: str, decision):
        """Attach the expected wait: from the cache, or computed in a worker within
        ``wait_budget`` seconds; past it the estimate finishes in the background for the
        next request of the same gang and this answer says "unknown"."""
        est = waits.get(snap, key)
        if est is None:
            fut = inflight.get(key)
            if fut is None:
                # One estimate at a time: on a large cluster it takes long enough to slow the
                # checks sharing the interpreter, and a later request will pick it up.
                if pending[0] >= max_pending or inflight:
                    return decision
                flavors = (decision.quota or {}).get("flavors")
                now = snap.as_of if snap.as_of is not None else clock()
                pending[0] += 1
                estimate = functools.partial(expected_wait, snap, gang, now, options, flavors,
                                             history=getattr(source, "history", None))
                fut = asyncio.get_running_loop().run_in_executor(executor, estimate)
                inflight[key] = fut

                def done(f, k=key, s=snap):
                    pending[0] -= 1
                    inflight.pop(k, None)
                    if not f.cancelled() and f.exception() is None and f.result() is not None:
                        waits.put(s, k, f.result())

                fut.add_done_callback(done)
            try:
                est = await asyncio.wait_for(asyncio.shield(fut), timeout=wait_budget)
            except (asyncio.TimeoutError, Exception):  # an estimate is never worth a failed admission
                return decision
        return dataclasses.replace(decision, expected_wait=est) if est else decision

    async def _decide(req: adm.ReviewRequest, mutate: bool, note: dict) -> tuple[dict, str, str, str | None]:
        """(review, verdict, outcome, fail-open reason); ``note`` gets the decision log's extras."""
        pol = policy.current()
        if pol is None:
            return adm.fail_open_response(req.uid, "no valid policy loaded"), "none", "fail_open", "policy_invalid"
        skipped = adm.skip(req, pol)
        if skipped is not None:
            metrics.skipped.labels("mutate" if mutate else "validate", skipped[0]).inc()
            note["skip"] = skipped[0]
            return adm.allowed_response(req.uid), "none", "skipped", None
        if not source.ready:
            return adm.fail_open_response(req.uid, "cluster cache not synced yet"), "none", "fail_open", "not_ready"
        age = float(source.age_seconds())
        if age > pol.stale_after_seconds:
            return (
                adm.fail_open_response(req.uid, f"cluster data is stale ({age:.0f}s old, limit {pol.stale_after_seconds:.0f}s)"),
                "none", "fail_open", "stale",
            )
        try:
            gang = adm.gang_of(req)
        except AdapterError as exc:
            # Field and detail first: the warning is cut at 120 characters (the object is the request's own).
            what = f"{exc.field}: {exc.detail}" if exc.field else exc.detail
            return adm.fail_open_response(req.uid, f"could not read the object: {what}"), "none", "fail_open", "bad_object"
        if gang is None:
            return adm.allowed_response(req.uid), "none", "skipped", None
        snap = source.snapshot()  # the current immutable view: no API call, never blocks
        options = pol.engine_options()
        key = cache.key(gang, options, pol.annotation_prefix)
        decision = cache.get(snap, key)
        if decision is None:
            # The engine runs in a worker thread so the event loop keeps serving and the
            # time budget can be enforced. A check past its budget keeps its thread until it
            # ends; when too many are queued, fail open at once instead of queueing more.
            if pending[0] >= max_pending:
                return adm.fail_open_response(req.uid, "too many checks in progress"), "none", "fail_open", "overloaded"
            pending[0] += 1
            fut = asyncio.get_running_loop().run_in_executor(executor, evaluate, snap, gang, options)
            fut.add_done_callback(lambda _f: pending.__setitem__(0, pending[0] - 1))
            try:
                decision = await asyncio.wait_for(asyncio.shield(fut), timeout=time_budget)
            except asyncio.TimeoutError:
                return (
                    adm.fail_open_response(req.uid, f"check exceeded its {time_budget:g}s time budget"),
                    "none", "fail_open", "timeout",
                )
            cache.put(snap, key, decision)
        if decision.verdict == "Waits" and decision.expected_wait is None and wait_budget > 0:
            decision = await _with_wait(snap, gang, options, key, decision)
        note["reasons"] = list(decision.reasons)
        if mutate:
            resp = adm.mutate_response(req.uid, req.obj, decision, pol, clock())
        else:
            resp = adm.validate_response(req.uid, decision, pol, operation=req.operation)
        return resp, decision.verdict, ("allowed" if resp["response"]["allowed"] else "denied"), None

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        return await _admit(request, "validate")

    @app.post("/mutate")
    async def mutate(request: Request) -> Response:
        return await _admit(request, "mutate")

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"ok":true}', media_type=_JSON)

    @app.get("/readyz")
    async def readyz(request: Request) -> Response:
        # Anyone who reaches the Service can read /readyz: by default it holds states, counts
        # and codes only. ``?verbose=1`` from loopback (kubectl port-forward, exec) adds what
        # names files and hosts or quotes a parser: the policy's path and error text, the
        # source's name and its informers' last errors.
        verbose = request.query_params.get("verbose") not in (None, "", "0", "false") and _is_loopback(request)
        detail: dict[str, Any] = {}
        try:
            src_ready = bool(source.ready)
            st = source.status()
            detail["source"] = st if verbose else _public_source_status(st)
            detail["age_seconds"] = round(float(source.age_seconds()), 3)
        except Exception as exc:
            src_ready = False
            detail["source"] = {"error": _one_line(f"{type(exc).__name__}: {exc}") if verbose else type(exc).__name__}
        pol_status = policy.status()
        detail["policy"] = pol_status if verbose else _public_policy_status(pol_status)
        cur = policy.current()
        pol_ok = cur is not None
        if cur is not None and "age_seconds" in detail:
            detail["stale"] = detail["age_seconds"] > cur.stale_after_seconds
        ready = src_ready and pol_ok
        detail["ready"] = ready
        detail["source_ready"] = src_ready
        return Response(json.dumps(detail, default=str).encode(), status_code=200 if ready else 503, media_type=_JSON)

    @app.get("/metrics")
    async def prom() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


# ---------------------------------------------------------------- TLS runner


def _digest(*paths: str | Path) -> bytes | None:
    h = hashlib.sha256()
    try:
        for p in paths:
            h.update(Path(p).read_bytes())
            h.update(b"\0")
    except OSError:
        return None
    return h.digest()


class WebhookServer:
    """uvicorn over TLS for ``app``, with live certificate reload.

    ``start()`` runs it in a background thread (tests, benchmarks) and returns once it listens;
    ``run()`` runs it in the calling thread until SIGINT/SIGTERM (``gangcheck serve``); ``stop()``
    asks it to finish (in-flight requests complete) and joins the thread.

    Every ``cert_poll_interval`` seconds a task on the server's event loop hashes
    ``certfile`` + ``keyfile``; when the bytes changed it calls ``load_cert_chain`` on the live
    ``SSLContext`` (``config.ssl``): new TLS handshakes present the new certificate, open
    connections keep theirs. A pair that does not load (e.g. key and certificate written a
    moment apart) keeps the old one and is retried on the next poll.

    Connections: headers must arrive within ``header_timeout`` seconds of the connection's
    start or of a request's first byte and fit in ``max_header_bytes`` (else 408 / 431 and
    close; the body is bounded by ``create_app(body_timeout=)``); an idle keep-alive
    connection is closed after ``keep_alive_timeout`` seconds, but never while a request is
    already waiting in its socket (after a pause of the process: see ``http_protocol``).
    No ``server`` response header.

    Attributes: ``port`` (the bound port, also when 0 was asked), ``cert_reloads``,
    ``cert_reload_failures``.
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 8443, certfile: str | Path = "certs/tls.crt",
                 keyfile: str | Path = "certs/tls.key", *, cert_poll_interval: float = 2.0,
                 log_level: str = "warning", access_log: bool = False,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
                 keep_alive_timeout: float = 5.0) -> None:
        import uvicorn

        from .http_protocol import protocol_class

        self.app = app
        self.host, self.port = host, port
        self.certfile, self.keyfile = str(certfile), str(keyfile)
        self.cert_poll_interval = cert_poll_interval
        self.cert_reloads = 0
        self.cert_reload_failures = 0
        self.config = uvicorn.Config(
            app, host=host, port=port, ssl_certfile=self.certfile, ssl_keyfile=self.keyfile,
            log_level=log_level, access_log=access_log, lifespan="on", timeout_graceful_shutdown=5,
            # httptools with bounded header reads and pause-proof close timers (http_protocol.py);
            # no "server: uvicorn" header (it names the stack to anyone who connects).
            http=protocol_class(header_timeout=header_timeout, max_header_bytes=max_header_bytes),
            timeout_keep_alive=keep_alive_timeout, server_header=False,
        )
        self.server = uvicorn.Server(self.config)
        # A client can make uvicorn log a line per bad request ("Invalid HTTP request
        # received."): one per message and minute is enough.
        from .decision_log import RateLimitFilter

        err = logging.getLogger("uvicorn.error")
        if not any(isinstance(f, RateLimitFilter) for f in err.filters):
            err.addFilter(RateLimitFilter())
        self._thread: threading.Thread | None = None
        self._digest = _digest(self.certfile, self.keyfile)
        self._error: BaseException | None = None

    def _metrics(self):
        return getattr(getattr(self.app, "state", None), "metrics", None)

    def reload_certificate(self) -> bool:
        """Load cert/key into the live SSLContext if the files changed; True when reloaded.

        Must run on the server's event loop thread (the poller does). Never raises.
        """
        d = _digest(self.certfile, self.keyfile)
        if d is None or d == self._digest or self.config.ssl is None:
            return False
        m = self._metrics()
        try:
            self.config.ssl.load_cert_chain(self.certfile, self.keyfile)
        except Exception as exc:
            self.cert_reload_failures += 1
            if m:
                m.cert_reload_failures.inc()
            log.warning("could not load the new serving certificate (keeping the old one): %s", exc)
            return False
        self._digest = d
        self.cert_reloads += 1
        if m:
            m.cert_reloads.inc()
        log.info("serving certificate reloaded from %s", self.certfile)
        return True

    async def _poll_certs(self) -> None:
        while True:
            await asyncio.sleep(self.cert_poll_interval)
            self.reload_certificate()

    async def _main(self) -> None:
        if not self.config.loaded:
            self.config.load()  # builds config.ssl, the SSLContext every handshake uses
        poller = asyncio.create_task(self._poll_certs())
        try:
            await self.server.serve()
        finally:
            poller.cancel()

    def _run_loop(self) -> None:
        # uvicorn's loop choice ("auto": uvloop when installed), as uvicorn.Server.run would.
        factory = None
        get = getattr(self.config, "get_loop_factory", None)
        if callable(get):
            try:
                factory = get()
            except Exception:  # pragma: no cover - fall back to the default asyncio loop
                factory = None
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(self._main())

    def run(self) -> None:
        """Serve in this thread until a signal or ``stop()``."""
        self._run_loop()

    def _thread_main(self) -> None:
        try:
            self._run_loop()
        except BaseException as exc:  # pragma: no cover - reported by start()
            self._error = exc

    def start(self, timeout: float = 20.0) -> "WebhookServer":
        """Serve in a daemon thread; return once listening (``port`` is then the bound port).

        Raises:
            RuntimeError: the server did not start within ``timeout`` seconds (e.g. port in use).
        """
        self._thread = threading.Thread(target=self._thread_main, name="gangcheck-uvicorn", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if self._error is not None or not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"webhook server did not start on {self.host}:{self.port}: {self._error!r}")
            time.sleep(0.01)
        for s in getattr(self.server, "servers", []) or []:
            for sock in s.sockets:
                self.port = sock.getsockname()[1]
                break
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to exit (graceful: in-flight requests finish) and join its thread."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> "WebhookServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def make_source(cluster: str, *, on_policy: Callable[[dict | None], None] | None = None,
                policy_configmap: tuple[str, str] = ("gangcheck-system", "gangcheck-policy")) -> SnapshotSource:
    """``demo`` or a dump path → ``StaticSource``; ``live`` → ``webhook.cache.LiveCache`` (in-cluster
    config or KUBECONFIG; started and stopped by the app's lifespan).

    With ``on_policy`` (live only), the cache also watches the ConfigMap ``policy_configmap``
    (namespace, name) and calls ``on_policy(data)`` with its ``data`` (None when deleted).

    Raises:
        DumpError / AdapterError: the dump cannot be read.
    """
    if cluster == "live":
        from .cache import LiveCache

        if on_policy is not None:
            return LiveCache(policy_configmap=policy_configmap, on_policy=on_policy)
        return LiveCache()
    from .dump import load_cluster

    return StaticSource(load_cluster(cluster), name=cluster)


def serve(cluster: str = "demo", policy_path: str | None = None, host: str = "127.0.0.1", port: int = 8443,
          cert: str = "certs/tls.crt", key: str = "certs/tls.key", *, source: SnapshotSource | None = None,
          policy_poll_interval: float = 2.0, cert_poll_interval: float = 2.0, log_level: str = "info") -> int:
    """``gangcheck serve``: run the webhook over TLS until SIGINT/SIGTERM; returns an exit code.

    Args:
        cluster: ``demo``, a dump file/directory, or ``live`` (ignored when ``source`` is given).
        policy_path: policy YAML polled for changes. None → the default policy, and with
            ``cluster="live"`` the ConfigMap gangcheck-policy (key policy.yaml) in
            gangcheck-system, watched by the cache, applied live.
        host, port: where to listen.
        cert, key: PEM serving certificate and key (``gangcheck certs`` writes them); reloaded
            live when the files change.
        source: a ready-made ``SnapshotSource`` (e.g. a live cache built by the CLI).

    Raises:
        PolicyError: never (an invalid initial policy makes /readyz 503 and admission fail open).
        FileNotFoundError: ``cert`` or ``key`` missing (the message says to run ``gangcheck certs``).
    """
    for f in (cert, key):
        if not Path(f).is_file():
            raise FileNotFoundError(f"{f}: no such file; create certificates with `gangcheck certs --out {Path(f).parent}`")
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from .decision_log import configure as log_decisions_to

    log_decisions_to(None)  # one JSON line per decision on stdout; everything else on stderr
    reloader = PolicyReloader(policy_path, interval=policy_poll_interval)
    if source is not None:
        src = source
    elif cluster == "live" and policy_path is None:
        src = make_source(cluster, on_policy=lambda data: reloader.update_text((data or {}).get("policy.yaml")))
    else:
        src = make_source(cluster)
    if reloader.error:
        log.error("policy: %s", reloader.error)
    reloader.start()
    app = create_app(src, reloader)
    log.info("gangcheck webhook on https://%s:%d (cluster %s, policy %s)", host, port, cluster, policy_path or "default")
    try:
        WebhookServer(app, host, port, cert, key, cert_poll_interval=cert_poll_interval, log_level="warning").run()
    finally:
        reloader.stop()
    return 0
