"""The webhook's FastAPI app: :func:`create_app` builds an ``AdmissionService`` and mounts thin
routes on it.

Routes (each a few lines; the work is the service's or ``status.readiness``'s):

- ``POST /validate``, ``POST /mutate`` → ``AdmissionService.admit``;
- ``GET /healthz`` → ``{"ok":true}``;
- ``GET /readyz`` → ``status.readiness`` as JSON, 200 when ready else 503; ``?verbose=1`` from
  a loopback address adds names and texts;
- ``GET /metrics`` → the service registry's Prometheus text.

The app's lifespan starts and stops the source and the service's worker pool. No docs/OpenAPI
routes. Does not own TLS nor the process (``runner.py``, ``launch.py``).
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import asynccontextmanager
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .. import admission as adm
from ..sources import SnapshotSource
from .body import DEFAULT_BODY_TIMEOUT
from .service import DEFAULT_TIME_BUDGET, AdmissionService
from .status import is_loopback, readiness

__all__ = ["create_app", "mount_routes"]

_JSON = "application/json"


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
        ``app.state.policy`` the inputs, ``app.state.service`` the ``AdmissionService``
        (``app.state.executor`` and ``app.state.decision_cache`` are its pool and cache).
    """
    # The engine's entry points as the package exports them, read now: a test that substitutes
    # ``webhook.server.evaluate`` before building the app gets its substitute called.
    face = sys.modules[__package__]
    service = AdmissionService(
        source, policy_provider, registry=registry, time_budget=time_budget, clock=clock,
        max_body_bytes=max_body_bytes, workers=workers, decision_cache=decision_cache, wait_budget=wait_budget,
        body_timeout=body_timeout, traceback_interval=traceback_interval,
        evaluate=face.evaluate, expected_wait=face.expected_wait,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(title="gangcheck", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.metrics = service.metrics
    app.state.source = source
    app.state.policy = service.policy
    app.state.executor = service.executor
    app.state.decision_cache = service.decisions
    app.state.service = service
    mount_routes(app, service)
    return app


def mount_routes(app: FastAPI, service: AdmissionService) -> None:
    """Mount /validate, /mutate, /healthz, /readyz and /metrics on ``app``, answered by ``service``."""

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        return await service.admit(request, "validate")

    @app.post("/mutate")
    async def mutate(request: Request) -> Response:
        return await service.admit(request, "mutate")

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"ok":true}', media_type=_JSON)

    @app.get("/readyz")
    async def readyz(request: Request) -> Response:
        verbose = request.query_params.get("verbose") not in (None, "", "0", "false") and is_loopback(request)
        detail = readiness(service.source, service.policy, verbose)
        return Response(json.dumps(detail, default=str).encode(), status_code=200 if detail["ready"] else 503,
                        media_type=_JSON)

    @app.get("/metrics")
    async def prom() -> Response:
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)
