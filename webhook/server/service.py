"""The admission service: one object that owns what answering an AdmissionReview needs.

:class:`AdmissionService` holds the snapshot source, the policy provider, the decision cache and
the wait cache (``decision_cache.DecisionCache``, per snapshot), the in-flight map of
expected-wait estimates, the worker pool running the engine, the count of checks submitted and
not finished, the metrics (``metrics.Metrics``, in the service's registry) and the rate-limited
logs. An admission is its named steps, each a method:

1. :meth:`AdmissionService.decode` — body bytes and Content-Type → ``admission.ReviewRequest``
   (:meth:`read_review` reads the bounded body first), or :class:`body.BadRequest` (4xx);
2. :meth:`gate` — policy in force, skip rules, source ready and fresh (else fail open);
   :meth:`read_gang` — the object's gang (a field it cannot read: fail open);
3. look up (``DecisionCache.get``) or :meth:`evaluate` in a worker within ``time_budget``
   seconds; :meth:`with_wait` attaches the expected wait within ``wait_budget`` seconds;
4. :meth:`respond` — the AdmissionReview (``admission.validate_response`` / ``mutate_response``);
5. :meth:`record` — request counter, latency histogram (seconds), denials by reason, one decision
   log line.

:meth:`admit` runs them for one HTTP request and **fails open** on anything that raises: never a
500. The service does not own HTTP routing (``app.py``), the body's byte-level rules (``body.py``),
what the answer says (``admission.py``) nor the verdict (``engine``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import inspect
import logging
import time
from typing import Any, Callable

from fastapi import Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry

from .. import admission as adm
from ..adapters import AdapterError
from ..decision_log import DECISION_LOGGER, RateLimiter, decision_line, decision_record
from ..engine.evaluate import evaluate, expected_wait
from ..policy_reload import as_policy_provider
from ..sources import SnapshotSource
from .body import DEFAULT_BODY_TIMEOUT, BadRequest, BodyIncomplete, content_type_problem, decode_json, one_line, read_body
from .decision_cache import DecisionCache
from .metrics import Metrics, StateCollector, reason_label

__all__ = ["AdmissionService", "FailOpen", "DEFAULT_TIME_BUDGET", "Answer"]

log = logging.getLogger("gangcheck.server")

#: Seconds a check may take before the webhook fails open (the webhook configurations give the
#: API server 5 s; this leaves room for the network and TLS).
DEFAULT_TIME_BUDGET = 2.0

_JSON = "application/json"

#: (AdmissionReview dict, verdict label, outcome label, fail-open reason label or None).
Answer = tuple[dict, str, str, "str | None"]


class FailOpen(Exception):
    """Admit without a check: ``reason`` is the ``gangcheck_webhook_fail_open_total`` label
    (policy_invalid, not_ready, stale, bad_object, overloaded, timeout), ``message`` the
    warning's text after "gangcheck skipped the feasibility check: "."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


class AdmissionService:
    """Owns the caches, the in-flight estimates, the executor and the metrics; see the module.

    Args (as ``create_app``'s, which passes them through): ``source``, ``policy`` (anything
    ``policy_reload.as_policy_provider`` takes), ``registry`` (a fresh one by default),
    ``time_budget`` / ``wait_budget`` / ``body_timeout`` seconds, ``clock`` (Unix seconds),
    ``max_body_bytes``, ``workers`` (threads), ``decision_cache`` (entries; 0 turns both caches
    off), ``traceback_interval`` seconds; ``evaluate`` / ``expected_wait``: the engine's entry
    points (``engine.evaluate``'s by default).

    Attributes: ``source``, ``policy``, ``metrics``, ``executor``, ``decisions`` and ``waits``
    (``DecisionCache``), ``max_pending`` (checks submitted and not finished before new ones
    fail open as overloaded: 16 per worker). Event-loop state (the pending count, the in-flight
    map) is touched from the loop's thread only.
    """

    def __init__(self, source: SnapshotSource, policy: Any = None, *, registry: CollectorRegistry | None = None,
                 time_budget: float = DEFAULT_TIME_BUDGET, clock: Callable[[], float] = time.time,
                 max_body_bytes: int = adm.MAX_BODY_BYTES, workers: int = 4, decision_cache: int = 256,
                 wait_budget: float = 0.05, body_timeout: float = DEFAULT_BODY_TIMEOUT,
                 traceback_interval: float = 60.0, evaluate: Callable = evaluate,
                 expected_wait: Callable = expected_wait) -> None:
        self.source = source
        self.policy = as_policy_provider(policy)
        registry = registry or CollectorRegistry()
        self.metrics = Metrics(registry)
        registry.register(StateCollector(source, self.policy))
        self.decisions = DecisionCache(decision_cache)
        self.waits = DecisionCache(decision_cache)  # expected waits per gang on the current snapshot
        self._inflight: dict[str, Any] = {}  # gang key → estimate being computed
        self._pending = 0  # evaluations submitted and not finished (event-loop thread only)
        self.max_pending = max(1, workers) * 16
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers),
                                                              thread_name_prefix="gangcheck-check")
        self.time_budget, self.wait_budget, self.clock = time_budget, wait_budget, clock
        self.max_body_bytes, self.body_timeout = max_body_bytes, body_timeout
        self._engine_evaluate, self._engine_expected_wait = evaluate, expected_wait
        self._decision_log = logging.getLogger(DECISION_LOGGER)
        self._tracebacks, self._bad_requests = RateLimiter(traceback_interval), RateLimiter(traceback_interval)

    # ------------------------------------------------------------ lifespan

    async def start(self) -> None:
        """Start the source if it has ``start()`` (sync or async)."""
        start = getattr(self.source, "start", None)
        if callable(start):
            r = start()
            if inspect.isawaitable(r):
                await r

    async def stop(self) -> None:
        """Stop the source if it has ``stop()`` (a failure is logged) and drop queued checks."""
        stop = getattr(self.source, "stop", None)
        if callable(stop):
            try:
                r = stop()
                if inspect.isawaitable(r):
                    await r
            except Exception:  # pragma: no cover
                log.exception("stopping the snapshot source failed")
        self.executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ one request

    async def admit(self, request: Request, endpoint: str) -> Response:
        """Answer one POST to ``endpoint`` ("validate" or "mutate"): 4xx text/plain for a body
        that is not an AdmissionReview, else 200 with the review. Counts it in flight meanwhile."""
        t0 = time.perf_counter()
        verdict, outcome = "none", "error"
        self.metrics.in_flight.labels(endpoint).inc()
        req: adm.ReviewRequest | None = None
        note: dict[str, Any] = {}
        try:
            try:
                req = await self.read_review(request)
            except BadRequest as exc:
                outcome = "bad_request"
                return self.bad_request(exc)
            except Exception as exc:  # client went away mid-body, etc.
                outcome = "bad_request"
                return Response(one_line(f"could not read the request body: {type(exc).__name__}") + "\n",
                                status_code=400, media_type="text/plain", headers={"connection": "close"})
            review, verdict, outcome = await self.answer(req, endpoint, note)
            return Response(adm.review_bytes(review), media_type=_JSON)
        finally:
            elapsed = time.perf_counter() - t0
            self.metrics.in_flight.labels(endpoint).dec()
            self.record(endpoint, req, verdict, outcome, elapsed, note)

    async def read_review(self, request: Request) -> adm.ReviewRequest:
        """The request's body, read within ``body_timeout`` and ``max_body_bytes``, decoded.

        The body is read (bounded) before a wrong Content-Type is refused, so the 415 leaves
        the keep-alive connection usable.

        Raises:
            BadRequest: see :func:`body.read_body` and :meth:`decode`.
        """
        body = await read_body(request, self.max_body_bytes, self.body_timeout)
        return self.decode(body, request.headers.get("content-type"))

    @staticmethod
    def decode(body: bytes, content_type: str | None) -> adm.ReviewRequest:
        """Body bytes and the Content-Type header → the AdmissionReview's request.

        Raises:
            BadRequest: 415 for a Content-Type other than JSON in UTF-8; 400 for a body that is
                not strict JSON (:func:`body.decode_json`) or not an AdmissionReview v1 (the
                field and what was expected, from ``admission.parse_review``).
        """
        problem = content_type_problem(content_type)
        if problem is not None:
            raise BadRequest(problem, 415)
        doc = decode_json(body)
        try:
            return adm.parse_review(doc)
        except adm.BadReview as exc:
            raise BadRequest(str(exc)) from None

    def bad_request(self, exc: BadRequest) -> Response:
        """The 4xx answer: the reason on one line, text/plain; ``connection: close`` when the body
        was not read to its end. One log line per status and ``traceback_interval``."""
        status = getattr(exc, "status", 400)
        headers = {"connection": "close"} if isinstance(exc, BodyIncomplete) else None
        ok, suppressed = self._bad_requests.allow(str(status))
        if ok:
            more = f" ({suppressed} more since the last one logged)" if suppressed else ""
            log.warning("HTTP %d: %s%s", status, one_line(str(exc), 200), more)
        return Response(one_line(str(exc)) + "\n", status_code=status, media_type="text/plain", headers=headers)

    async def answer(self, req: adm.ReviewRequest, endpoint: str, note: dict) -> tuple[dict, str, str]:
        """(review, verdict, outcome) for a decoded request: :meth:`decide`, and an internal
        error (anything it raises) fails open with its type named. A fail-open reason is counted
        and put in ``note`` (the decision log's extras)."""
        verdict = "none"
        reason_key: str | None = None
        try:
            review, verdict, outcome, reason_key = await self.decide(req, endpoint == "mutate", note)
        except Exception as exc:
            ok, suppressed = self._tracebacks.allow(type(exc).__name__)
            if ok:
                more = f" ({suppressed} more {type(exc).__name__} since the last traceback)" if suppressed else ""
                log.error("internal error while checking %s, admitted without a check%s", req.uid, more, exc_info=exc)
            review = adm.fail_open_response(req.uid, f"internal error ({type(exc).__name__})")
            outcome, reason_key = "fail_open", "internal_error"
            note["error"] = type(exc).__name__
        if reason_key:
            self.metrics.fail_open.labels(endpoint, reason_key).inc()
            note["fail_open"] = reason_key
        return review, verdict, outcome

    async def decide(self, req: adm.ReviewRequest, mutate: bool, note: dict) -> Answer:
        """The answer for a decoded request: gate, gang, cached or evaluated decision, expected
        wait, response. ``note`` gets the decision log's extras (skip code, reasons)."""
        try:
            pol = self.gate(req, mutate, note)
            gang = self.read_gang(req) if pol is not None else None
            if gang is None:
                return adm.allowed_response(req.uid), "none", "skipped", None
            snap = self.source.snapshot()  # the current immutable view: no API call, never blocks
            options = pol.engine_options()
            key = self.decisions.key(gang, options, pol.annotation_prefix)
            decision = self.decisions.get(snap, key)
            if decision is None:
                decision = await self.evaluate(snap, gang, options)
                self.decisions.put(snap, key, decision)
        except FailOpen as fo:
            return adm.fail_open_response(req.uid, fo.message), "none", "fail_open", fo.reason
        if decision.verdict == "Waits" and decision.expected_wait is None and self.wait_budget > 0:
            decision = await self.with_wait(snap, gang, options, key, decision)
        note["reasons"] = list(decision.reasons)
        return self.respond(req, decision, pol, mutate)

    def gate(self, req: adm.ReviewRequest, mutate: bool, note: dict):
        """The policy in force when the request is to be checked; None when a skip rule admits
        it unchanged (counted by reason, the code in ``note["skip"]``).

        Raises:
            FailOpen: no valid policy (policy_invalid), source not synced (not_ready), data
                older than the policy's ``stale_after_seconds`` (stale).
        """
        pol = self.policy.current()
        if pol is None:
            raise FailOpen("policy_invalid", "no valid policy loaded")
        skipped = adm.skip(req, pol)
        if skipped is not None:
            self.metrics.skipped.labels("mutate" if mutate else "validate", skipped[0]).inc()
            note["skip"] = skipped[0]
            return None
        if not self.source.ready:
            raise FailOpen("not_ready", "cluster cache not synced yet")
        age = float(self.source.age_seconds())
        if age > pol.stale_after_seconds:
            raise FailOpen("stale", f"cluster data is stale ({age:.0f}s old, limit {pol.stale_after_seconds:.0f}s)")
        return pol

    @staticmethod
    def read_gang(req: adm.ReviewRequest):
        """The request object's gang (``admission.gang_of``), None for an object that is not one.

        Raises:
            FailOpen: bad_object, the field and detail first (the warning is cut at 120
                characters; the object is the request's own).
        """
        try:
            return adm.gang_of(req)
        except AdapterError as exc:
            what = f"{exc.field}: {exc.detail}" if exc.field else exc.detail
            raise FailOpen("bad_object", f"could not read the object: {what}") from None

    async def evaluate(self, snap, gang, options):
        """The engine's decision, computed in a worker within ``time_budget`` seconds.

        The engine runs in a worker thread so the event loop keeps serving and the time budget
        can be enforced. A check past its budget keeps its thread until it ends; when too many
        are queued, fail open at once instead of queueing more.

        Raises:
            FailOpen: ``max_pending`` checks unfinished (overloaded); past the budget (timeout).
        """
        if self._pending >= self.max_pending:
            raise FailOpen("overloaded", "too many checks in progress")
        self._pending += 1
        fut = asyncio.get_running_loop().run_in_executor(self.executor, self._engine_evaluate, snap, gang, options)
        fut.add_done_callback(self._finished)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout=self.time_budget)
        except asyncio.TimeoutError:
            raise FailOpen("timeout", f"check exceeded its {self.time_budget:g}s time budget") from None

    def _finished(self, _fut) -> None:
        """A check ended (in time or not): one fewer pending."""
        self._pending -= 1

    async def with_wait(self, snap, gang, options, key: str, decision):
        """Attach the expected wait: from the cache, or computed in a worker within
        ``wait_budget`` seconds; past it the estimate finishes in the background for the
        next request of the same gang and this answer says "unknown"."""
        est = self.waits.get(snap, key)
        if est is None:
            fut = self._inflight.get(key)
            if fut is None:
                # One estimate at a time: on a large cluster it takes long enough to slow the
                # checks sharing the interpreter, and a later request will pick it up.
                if self._pending >= self.max_pending or self._inflight:
                    return decision
                fut = self._start_estimate(snap, gang, options, key, decision)
            try:
                est = await asyncio.wait_for(asyncio.shield(fut), timeout=self.wait_budget)
            except (asyncio.TimeoutError, Exception):  # an estimate is never worth a failed admission
                return decision
        return dataclasses.replace(decision, expected_wait=est) if est else decision

    def _start_estimate(self, snap, gang, options, key: str, decision):
        """Submit the expected-wait estimate for ``key``; when it ends it leaves the in-flight
        map and a result that is not None goes to the wait cache."""
        flavors = (decision.quota or {}).get("flavors")
        now = snap.as_of if snap.as_of is not None else self.clock()
        self._pending += 1
        scale_up = next((f.data for f in decision.findings if f.code == "NeedsScaleUp"), None)
        estimate = functools.partial(self._engine_expected_wait, snap, gang, now, options, flavors,
                                     history=getattr(self.source, "history", None),
                                     **({"scale_up": scale_up} if scale_up is not None else {}))
        fut = asyncio.get_running_loop().run_in_executor(self.executor, estimate)
        self._inflight[key] = fut

        def done(f, k=key, s=snap):
            self._pending -= 1
            self._inflight.pop(k, None)
            if not f.cancelled() and f.exception() is None and f.result() is not None:
                self.waits.put(s, k, f.result())

        fut.add_done_callback(done)
        return fut

    def respond(self, req: adm.ReviewRequest, decision, pol, mutate: bool) -> Answer:
        """The AdmissionReview for ``decision``: /mutate's patch (``checked-at`` from ``clock``)
        or /validate's verdict under ``pol``; outcome "allowed" or "denied"."""
        if mutate:
            resp = adm.mutate_response(req.uid, req.obj, decision, pol, self.clock())
        else:
            resp = adm.validate_response(req.uid, decision, pol, operation=req.operation)
        return resp, decision.verdict, ("allowed" if resp["response"]["allowed"] else "denied"), None

    def record(self, endpoint: str, req: adm.ReviewRequest | None, verdict: str, outcome: str,
               elapsed: float, note: dict) -> None:
        """Count the request and its latency (``elapsed`` seconds) by endpoint, verdict and
        outcome; one decision log line when the request was readable. Never raises for the log."""
        self.metrics.requests.labels(endpoint, verdict, outcome).inc()
        self.metrics.latency.labels(endpoint, verdict, outcome).observe(elapsed)
        if outcome == "denied":
            self.metrics.denials.labels(endpoint, reason_label(note.get("reasons"))).inc()
        if req is None or not self._decision_log.isEnabledFor(logging.INFO):
            return
        try:
            self._decision_log.info(decision_line(decision_record(endpoint, req, verdict, outcome, elapsed, note)))
        except Exception:  # pragma: no cover - the log never breaks an answer
            pass
