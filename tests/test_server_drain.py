"""SIGTERM drains instead of dropping connections (found by the real-node tier, #12 scenario 6).

Kubernetes sends SIGTERM when a pod is deleted (rollout restart, pod deletion, eviction) at the
same time as it removes the pod from the Service's endpoints; kube-proxy and the API server see
that removal a moment later, and the API server keeps reusing its pooled keep-alive connections
to the old pod. uvicorn's own SIGTERM handling closed the listener and every idle connection at
once: the API server then got ``connect: connection refused`` (a new connection still DNAT'ed to
the old pod) and ``EOF`` (a request written on a pooled connection being closed) — each a call
that only failurePolicy Ignore let through (kube-apiserver log, tests/node/test_node_ops.py).

Now SIGTERM starts a drain (``runner.DRAIN_SECONDS``): the server keeps accepting and answering,
and every answer says ``Connection: close``, so clients drop their pooled connections after
their next request instead of losing it; then it shuts down as before. SIGINT (Ctrl-C) still
stops at once.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from webhook import certs

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    certs.generate("gangcheck", "gangcheck-system", tmp_path)
    port = _free_port()
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--cluster", "demo", "--port", str(port),
                             "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))

    def conn() -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)

    deadline = time.monotonic() + 120
    while True:
        try:
            c = conn()
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                c.close()
                break
        except OSError:
            pass
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        assert time.monotonic() < deadline, "gangcheck serve did not come up"
        time.sleep(0.2)
    try:
        yield proc, conn
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def _get(c: http.client.HTTPSConnection, path: str = "/healthz") -> http.client.HTTPResponse:
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    return r


def test_sigterm_keeps_serving_new_and_pooled_connections_and_asks_clients_to_close(served):
    proc, conn = served
    pooled = conn()
    r = _get(pooled)
    assert r.status == 200 and (r.getheader("connection") or "").lower() != "close"  # keep-alive before

    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # the signal is handled: before this fix the listener and idle connections were closed here
    assert proc.poll() is None, "the server exited at once on SIGTERM"

    # a pooled keep-alive connection, idle when SIGTERM came, is answered, and told to close
    r = _get(pooled)
    assert r.status == 200
    assert r.getheader("connection", "").lower() == "close"

    # a new connection (endpoints not yet updated everywhere) is accepted and answered
    fresh = conn()
    review = json.loads((REPO / "examples" / "admission" / "pytorchjob-80x8.json").read_text())
    fresh.request("POST", "/validate", body=json.dumps(review), headers={"Content-Type": "application/json"})
    r = fresh.getresponse()
    body = json.loads(r.read())
    assert r.status == 200 and body["response"]["allowed"] is False  # still checking, not failing open
    assert r.getheader("connection", "").lower() == "close"

    proc.wait(60)  # then it stops by itself
    assert proc.returncode in (0, -signal.SIGTERM), proc.returncode


def test_sigint_still_stops_at_once(served):
    proc, conn = served
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    with pytest.raises(OSError):
        _get(conn())
