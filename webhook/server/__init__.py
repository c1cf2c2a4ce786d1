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

The package's rooms (this file is only their public face):

- ``service.py`` — ``AdmissionService``: the caches, the in-flight estimates, the worker pool,
  the metrics; an admission's named steps (decode, gate, evaluate, with_wait, respond, record);
- ``app.py`` — ``create_app``: builds the service, mounts the thin routes;
- ``body.py`` — bounded body reads, Content-Type, strict JSON (``decode_json``), the 4xx errors;
- ``decision_cache.py`` — the per-snapshot LRU of decisions and expected waits;
- ``metrics.py`` — the Prometheus metrics and ``LATENCY_BUCKETS``;
- ``status.py`` — the /readyz detail and what of it is public;
- ``runner.py`` — ``WebhookServer``: uvicorn, TLS, certificate reload;
- ``launch.py`` — ``serve`` (``gangcheck serve``) and ``make_source``.
"""

from __future__ import annotations

# ``evaluate`` / ``expected_wait`` are re-exported so ``create_app`` reads them from here when it
# builds an app (tests substitute ``webhook.server.evaluate``).
from ..engine.evaluate import evaluate, expected_wait
from .app import create_app
from .body import DEFAULT_BODY_TIMEOUT, READ_GRACE_SECONDS, decode_json
from .launch import make_source, serve
from .metrics import LATENCY_BUCKETS
from .runner import WebhookServer
from .service import DEFAULT_TIME_BUDGET, AdmissionService

__all__ = ["create_app", "WebhookServer", "serve", "make_source", "LATENCY_BUCKETS", "DEFAULT_TIME_BUDGET",
           "DEFAULT_BODY_TIMEOUT", "READ_GRACE_SECONDS", "decode_json", "AdmissionService", "evaluate",
           "expected_wait"]
