"""uvicorn over TLS with live certificate reload: :class:`WebhookServer`.

Owns the serving loop (a background thread for tests and benchmarks, or the calling thread for
``gangcheck serve``), the bounded header reads (``http_protocol``), and the certificate poller:
the API server's TLS client sees the certificate from ``--tls-cert``/``--tls-key``; a hash of both
files is polled and ``load_cert_chain`` is called on the live ``SSLContext`` (uvicorn's
``config.ssl``) from the event loop, so new handshakes get the new certificate while established
connections and in-flight requests continue; and SIGTERM drains before the graceful shutdown
(:data:`DRAIN_SECONDS`). Times are seconds, sizes bytes. Does not own the app
(``app.create_app``) nor the process setup (``launch.serve``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import signal
import threading
import time
from pathlib import Path

from ..http_protocol import DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_HEADER_BYTES

__all__ = ["WebhookServer", "DRAIN_SECONDS"]

log = logging.getLogger("gangcheck.server")

#: Seconds the server keeps accepting and answering after SIGTERM, every answer with
#: ``Connection: close``, before uvicorn's graceful shutdown. Kubernetes sends SIGTERM as it
#: removes the pod from the Service's endpoints; kube-proxy and the API server's endpoint view
#: follow a moment later, and the API server keeps reusing its pooled keep-alive connections to
#: the old pod. Closing the listener and idle connections at once (uvicorn's own SIGTERM) made
#: those calls fail (``connection refused``, ``EOF``: fail-opens under failurePolicy Ignore;
#: tests/node/test_node_ops.py). One second over the keep-alive timeout: by the end every
#: connection open at SIGTERM was either used (and closed by its client after the answer) or
#: idle long enough to be closed by the keep-alive timer as on any day. Well inside the pod's
#: terminationGracePeriodSeconds (30 s) with the graceful shutdown's 5 s.
DRAIN_SECONDS = 6.0


def _draining_server(config, drain_seconds: float):
    """A ``uvicorn.Server`` whose first SIGTERM starts a drain of ``drain_seconds`` (see
    :data:`DRAIN_SECONDS`) instead of exiting; a second SIGTERM, or SIGINT, exits at once."""
    import uvicorn

    class _DrainingServer(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:  # runs in the main thread (signal handler)
            if sig == signal.SIGTERM and drain_seconds > 0 and not self.should_exit and \
                    not getattr(self.server_state, "draining", False):
                self.drain(drain_seconds, sig)
                return
            super().handle_exit(sig, frame)

        def drain(self, seconds: float, sig: int) -> None:
            """Answer everything with ``Connection: close`` for ``seconds``, then exit as on ``sig``."""
            self.server_state.draining = True  # read by http_protocol for every request
            log.info("SIGTERM: draining for %.1fs, then shutting down", seconds)
            # uvicorn's main loop polls should_exit every 0.1 s: setting it from a timer is enough
            t = threading.Timer(seconds, uvicorn.Server.handle_exit, (self, sig, None))
            t.daemon = True
            t.start()

    return _DrainingServer(config)


def _digest(*paths: str | Path) -> bytes | None:
    """SHA-256 of the files' bytes in order, or None when one cannot be read."""
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

    SIGTERM (``run()`` in the main thread) drains for ``drain_seconds`` (:data:`DRAIN_SECONDS`;
    0: exit at once): new connections are still accepted, every answer carries
    ``Connection: close``, then the graceful shutdown; a second SIGTERM or SIGINT exits at once.

    Attributes: ``port`` (the bound port, also when 0 was asked), ``cert_reloads``,
    ``cert_reload_failures``.
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 8443, certfile: str | Path = "certs/tls.crt",
                 keyfile: str | Path = "certs/tls.key", *, cert_poll_interval: float = 2.0,
                 log_level: str = "warning", access_log: bool = False,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
                 keep_alive_timeout: float = 5.0, drain_seconds: float = DRAIN_SECONDS) -> None:
        import uvicorn

        from ..http_protocol import protocol_class

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
        self.server = _draining_server(self.config, drain_seconds)
        # A client can make uvicorn log a line per bad request ("Invalid HTTP request
        # received."): one per message and minute is enough.
        from ..decision_log import RateLimitFilter

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
