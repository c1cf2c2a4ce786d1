"""Issue #17 hardening of the webhook server, over real HTTPS on 127.0.0.1: lone surrogates
(item 1), torn policy writes (4), a paused process (5), NaN/Infinity (6), read bounds (7),
malformed reviews (8, review level), what /readyz and headers give away (9), controller-created
objects (18) and the decision log (21). No timing assertions: pauses and timeouts are inputs,
every assertion is on an answer."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from webhook import certs
from webhook.decision_log import DECISION_LOGGER, RateLimiter, decision_line
from webhook.dump import load_cluster
from webhook.policy import PolicyError, parse_policy
from webhook.policy_reload import PolicyReloader
from webhook.server import WebhookServer, create_app
from webhook.sources import StaticSource

from test_admission import job, review
from test_server import client_ctx, metric_value, post, running

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def certdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    certs.generate("gangcheck", "gangcheck-system", d)
    return d


@pytest.fixture(scope="module")
def demo():
    return load_cluster("demo")


@pytest.fixture(scope="module")
def srv(certdir, demo):
    app = create_app(StaticSource(demo, "demo"), None, clock=lambda: 0.0, body_timeout=0.5)
    with running(app, certdir, header_timeout=0.5) as (s, c):
        yield app, s, c


# ---------------------------------------------------------------- raw HTTP/1.1 over TLS


def tls(port: int, ca: Path) -> ssl.SSLSocket:
    ctx = client_ctx(ca)
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30), server_hostname="localhost")
    s.settimeout(30)
    return s


def request_bytes(body: bytes, path: str = "/validate", extra: bytes = b"") -> bytes:
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def read_response(s: ssl.SSLSocket) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one response; status 0 when the server closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return 0, {}, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    n = int(headers.get("content-length", "0"))
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


def closed(s: ssl.SSLSocket) -> bool:
    try:
        return s.recv(1) == b""
    except (ssl.SSLError, ConnectionError):
        return True


# ---------------------------------------------------------------- item 1: lone surrogates


def test_lone_surrogate_uid_answered_on_the_same_connection(srv, certdir):
    app, s, c = srv
    conn = tls(s.port, certdir / "ca.crt")
    try:
        for path in ("/validate", "/mutate"):
            raw = json.dumps(review(job(80, queue="llm-queue", name="t-\ud800"), uid="u-\ud800")).encode()
            assert b"\\ud800" in raw  # json.dumps escapes it: valid JSON text
            conn.sendall(request_bytes(raw, path))
            status, headers, body = read_response(conn)
            assert status == 200, body
            out = json.loads(body.decode("utf-8"))
            assert out["response"]["uid"] == "u-\ufffd"
            if path == "/validate":
                assert out["response"]["allowed"] is False and "t-\ufffd" in out["response"]["status"]["message"]
        # keep-alive survived both
        conn.sendall(request_bytes(json.dumps(review(job(1, 1), uid="after")).encode()))
        assert json.loads(read_response(conn)[2])["response"]["uid"] == "after"
    finally:
        conn.close()
    assert metric_value(c.get("/metrics").text, 'gangcheck_webhook_fail_open_total{endpoint="validate",reason="internal_error"}') == 0.0


# ---------------------------------------------------------------- items 6, 8, 9: what is not JSON / not a review


@pytest.mark.parametrize(
    "body, needle",
    [
        (b'{"apiVersion": NaN}', "NaN is not a JSON value"),
        (b'{"a": Infinity}', "Infinity is not a JSON value"),
        (b'{"a": -Infinity}', "-Infinity is not a JSON value"),
        (b'{"a": 1e400}', "out of range"),
        ('{"a": 1}'.encode("utf-16"), "not UTF-8"),
        (b'\xef\xbb\xbf{"a": 1}', "byte order mark"),
        (b"[" * 100000 + b"]" * 100000, "body is not valid JSON"),
    ],
)
def test_not_json_is_400(srv, body, needle):
    app, s, c = srv
    r = c.post("/validate", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert needle in r.text and r.text.count("\n") == 1


def test_nan_inside_a_review_is_400(srv):
    app, s, c = srv
    doc = review(job(4), uid="nan")
    raw = json.dumps(doc).replace('"parallelism": 4', '"parallelism": NaN').encode()
    assert b"NaN" in raw
    r = c.post("/validate", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "NaN is not a JSON value" in r.text


@pytest.mark.parametrize("mutation, needle", [
    (lambda d: d["request"]["object"].__setitem__("kind", ["Job"]), "request.object.kind must be a string"),
    (lambda d: d["request"]["object"].__setitem__("kind", {"k": "Job"}), "request.object.kind must be a string"),
    (lambda d: d["request"].__setitem__("uid", 5), "request.uid must be a string"),
])
def test_malformed_review_is_400_not_a_fail_open(srv, mutation, needle):
    app, s, c = srv
    doc = review(job(4), uid="mal")
    mutation(doc)
    r = c.post("/validate", content=json.dumps(doc), headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and needle in r.text


@pytest.mark.parametrize("ctype, status", [
    ("application/json", 200), ("application/json; charset=utf-8", 200), ("Application/JSON;charset=UTF-8", 200),
    (None, 200),
    ("application/json; charset=utf-16", 415), ("text/plain", 415), ("application/x-www-form-urlencoded", 415),
])
def test_content_type(srv, ctype, status):
    app, s, c = srv
    headers = {"Content-Type": ctype} if ctype else {}
    r = c.post("/validate", content=json.dumps(review(job(1, 1), uid="ct")), headers=headers)
    if ctype is None:
        assert "content-type" not in {k.lower() for k in r.request.headers}
    assert r.status_code == status, r.text
    if status == 415:
        assert "application/json" in r.text


def test_no_server_header_and_quiet_readyz(certdir, demo, tmp_path):
    pf = tmp_path / "secret-dir" / "policy.yaml"
    pf.parent.mkdir()
    pf.write_text("mode: warn\n")
    rl = PolicyReloader(pf, interval=3600)
    app = create_app(StaticSource(demo, str(tmp_path / "dump-name.yaml")), rl)
    with running(app, certdir) as (s, c):
        r = c.get("/healthz")
        assert "server" not in r.headers
        r = post(c, "/validate", review(job(1, 1), uid="h"))
        pf.write_text("mode: [\n")
        assert rl.check() == "failed"
        rz = c.get("/readyz")
        assert "server" not in rz.headers
        assert str(tmp_path) not in rz.text and "not valid YAML" not in rz.text
        body = rz.json()
        assert body["policy"] == {"source_kind": "file", "valid": False, "in_force": True, "problem": "invalid_yaml",
                                  "mode": "warn", "reloads": 0, "failures": 1, "loaded_at": body["policy"]["loaded_at"]}
        assert body["source"]["kind"] == "static" and "source" not in body["source"]
        full = c.get("/readyz?verbose=1").json()  # loopback only
        assert full["policy"]["source"] == str(pf) and "not valid YAML" in full["policy"]["error"]


# ---------------------------------------------------------------- item 7: read bounds


def test_slow_headers_get_408_and_close(srv, certdir):
    app, s, c = srv
    conn = tls(s.port, certdir / "ca.crt")
    try:
        conn.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        status, headers, body = read_response(conn)
        assert status == 408 and b"request headers not received within 0.5s" in body
        assert closed(conn)
    finally:
        conn.close()


def test_silent_connection_is_closed(srv, certdir):
    app, s, c = srv
    conn = tls(s.port, certdir / "ca.crt")
    try:
        assert closed(conn)  # no byte sent: closed without a response
    finally:
        conn.close()


def test_slow_body_and_huge_chunk_get_408(srv, certdir):
    app, s, c = srv
    for head, part in (
        (b"Content-Length: 1000\r\n", b'{"apiVersion"'),  # body stops short
        (b"Transfer-Encoding: chunked\r\n", b"ffffffffffffffff\r\nxx"),  # a chunk of 2^64-1 bytes
    ):
        conn = tls(s.port, certdir / "ca.crt")
        try:
            conn.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + head + b"\r\n" + part)
            status, headers, body = read_response(conn)
            assert status == 408 and b"request body not received within 0.5s" in body
            assert headers.get("connection") == "close"
            assert closed(conn)
        finally:
            conn.close()
    assert c.get("/healthz").status_code == 200


def test_oversized_headers_get_431(srv, certdir):
    app, s, c = srv
    conn = tls(s.port, certdir / "ca.crt")
    try:
        conn.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        try:
            for _ in range(40):
                conn.sendall(b"a" * 8192)
        except (ssl.SSLError, ConnectionError):
            pass  # the server may close while we still write
        status, headers, body = read_response(conn)
        assert status == 431
    finally:
        conn.close()


def test_keep_alive_request_after_a_long_body_still_served(srv, certdir):
    # A body larger than the header limit, in one request, with more requests on the connection.
    app, s, c = srv
    conn = tls(s.port, certdir / "ca.crt")
    try:
        doc = review(job(2), uid="big-body")
        doc["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * 200_000}
        for uid in ("big-body", "next"):
            doc["request"]["uid"] = uid
            conn.sendall(request_bytes(json.dumps(doc).encode()))
            status, _, body = read_response(conn)
            assert status == 200 and json.loads(body)["response"]["uid"] == uid
    finally:
        conn.close()


# ---------------------------------------------------------------- item 5: a paused process

SERVER_SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from webhook.dump import load_cluster
from webhook.server import WebhookServer, create_app
from webhook.sources import StaticSource
app = create_app(StaticSource(load_cluster("demo"), "demo"), None, body_timeout={ka})
srv = WebhookServer(app, "127.0.0.1", 0, {crt!r}, {key!r}, header_timeout={ka})
srv.config.timeout_keep_alive = {ka}  # read by each connection's protocol
srv.start()
print(srv.port, flush=True)
sys.stdin.read()
srv.stop()
"""


def test_requests_sent_during_a_pause_are_answered(certdir):
    """SIGSTOP the server for longer than its keep-alive, header and body timeouts while
    requests arrive on idle keep-alive connections, a new connection is opened and a body is
    completed: after SIGCONT every one is answered. Before the fix the keep-alive timer fired
    first and closed the connections."""
    ka, pause = 1.0, 2.5
    script = SERVER_SCRIPT.format(root=str(ROOT), crt=str(certdir / "tls.crt"), key=str(certdir / "tls.key"), ka=ka)
    p = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        ca = certdir / "ca.crt"
        conns = [tls(port, ca) for _ in range(5)]
        for i, conn in enumerate(conns):
            conn.sendall(request_bytes(json.dumps(review(job(1, 1), uid=f"warm-{i}")).encode()))
            assert read_response(conn)[0] == 200
        slow = request_bytes(json.dumps(review(job(1, 1), uid="body")).encode())
        conns[4].sendall(slow[:-20])  # headers and most of the body: the server is reading it
        time.sleep(0.5)  # idle for part of the keep-alive timeout
        os.kill(p.pid, signal.SIGSTOP)
        try:
            conns[0].sendall(request_bytes(json.dumps(review(job(1, 1), uid="early")).encode()))
            late_conn: list = []
            t = threading.Thread(target=lambda: late_conn.append(tls(port, ca)))  # handshake completes after SIGCONT
            t.start()
            time.sleep(pause)  # the keep-alive timers are due now
            conns[1].sendall(request_bytes(json.dumps(review(job(1, 1), uid="late")).encode()))
            conns[2].sendall(request_bytes(json.dumps(review(job(80, queue="llm-queue"), uid="deny")).encode()))
            conns[4].sendall(slow[-20:])  # the body's end, after its deadline (in server time)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        answers = {}
        for conn in conns[:3] + conns[4:]:
            status, _, body = read_response(conn)
            assert status == 200, body
            r = json.loads(body)["response"]
            answers[r["uid"]] = r["allowed"]
        assert answers == {"early": True, "late": True, "deny": False, "body": True}
        t.join(30)
        late_conn[0].sendall(request_bytes(json.dumps(review(job(1, 1), uid="new")).encode()))
        assert json.loads(read_response(late_conn[0])[2])["response"]["uid"] == "new"
        # The idle fourth connection is still closed by the keep-alive timeout, as before.
        assert closed(conns[3])
        for conn in conns + late_conn:
            conn.close()
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.stdin.close()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


# ---------------------------------------------------------------- item 4: torn policy writes


@pytest.mark.parametrize("text", ["", "   \n\t\n", "~\n", "null\n", "# only a comment\n# another\n", "---\n"])
def test_empty_documents_are_not_a_policy(text):
    with pytest.raises(PolicyError) as exc:
        parse_policy(text, "p.yaml")
    assert exc.value.code == "empty" and "p.yaml" in str(exc.value) and "{}" in str(exc.value)


def test_braces_are_the_default_policy():
    assert parse_policy("{}\n").mode == "enforce"
    assert parse_policy("{}  # defaults\n").model_dump() == parse_policy("mode: enforce\n").model_dump()


@pytest.mark.parametrize("torn", ["", "  \n", "~", "# mode: warn\n"])
def test_torn_write_keeps_warn_mode(tmp_path, certdir, demo, torn):
    pf = tmp_path / "policy.yaml"
    pf.write_text("mode: warn\n")
    rl = PolicyReloader(pf, interval=3600)
    app = create_app(StaticSource(demo), rl)
    big = review(job(80, queue="llm-queue"), uid="torn")
    with running(app, certdir) as (s, c):
        assert post(c, "/validate", big)["response"]["allowed"] is True
        pf.write_text(torn)
        assert rl.check() == "failed"
        r = post(c, "/validate", big)["response"]
        assert r["allowed"] is True and r["warnings"][0].startswith("would be denied")
        rz = c.get("/readyz")
        assert rz.status_code == 200
        assert rz.json()["policy"] | {} == rz.json()["policy"]
        pol = rz.json()["policy"]
        assert (pol["valid"], pol["in_force"], pol["mode"], pol["problem"]) == (False, True, "warn", "empty")
        text = c.get("/metrics").text
        assert metric_value(text, "gangcheck_policy_valid") == 0.0
        assert metric_value(text, 'gangcheck_policy_problem{problem="empty"}') == 1.0


def test_configmap_torn_and_deleted_keeps_last_good():
    rl = PolicyReloader(None)
    assert rl.update_text(None) == "unchanged" and rl.current().mode == "enforce" and rl.valid  # never had one
    assert rl.update_text("mode: warn\n") == "reloaded"
    for torn in ("", "\n", "~", "# x"):
        assert rl.update_text(torn) == "failed" and rl.current().mode == "warn" and rl.problem == "empty"
    assert rl.update_text(None) == "failed" and rl.current().mode == "warn" and rl.problem == "missing"
    assert rl.status()["source_kind"] == "configmap"
    assert rl.update_text("mode: warn\n") == "reloaded" and rl.valid and rl.problem is None


def test_binary_policy_file_is_not_utf8(tmp_path):
    pf = tmp_path / "p.yaml"
    pf.write_text("mode: audit\n")
    rl = PolicyReloader(pf)
    pf.write_bytes(b"mode: warn\n\xff\xfe")
    assert rl.check() == "failed" and rl.problem == "not_utf8" and rl.current().mode == "audit"


# ---------------------------------------------------------------- item 18: controller-created objects


def test_child_objects_pass_and_are_counted(srv):
    app, s, c = srv
    child = job(80, queue="llm-queue", name="big-workers-0")
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "big", "uid": "1", "controller": True}]
    for path in ("/validate", "/mutate"):
        assert post(c, path, review(child, uid="child"))["response"] == {"uid": "child", "allowed": True}
    text = c.get("/metrics").text
    assert metric_value(text, 'gangcheck_webhook_skipped_total{endpoint="validate",reason="owned_by_checked_kind"}') >= 1.0
    assert metric_value(text, 'gangcheck_webhook_skipped_total{endpoint="mutate",reason="owned_by_checked_kind"}') >= 1.0
    # the same Job without the owner is checked (and denied)
    del child["metadata"]["ownerReferences"]
    assert post(c, "/validate", review(child, uid="alone"))["response"]["allowed"] is False


# ---------------------------------------------------------------- item 21: the decision log


def test_one_json_line_per_decision(srv, caplog):
    app, s, c = srv
    caplog.set_level(logging.INFO, logger=DECISION_LOGGER)
    big = job(80, queue="llm-queue", name="evil\nname\"}")
    big["metadata"]["annotations"] = {"secret": "do-not-log"}
    post(c, "/validate", review(big, uid="d-1"))
    post(c, "/validate", review(job(1, 1), uid="d-2", op="DELETE"))
    lines = [r.getMessage() for r in caplog.records if r.name == DECISION_LOGGER]
    assert len(lines) == 2 and all("\n" not in l for l in lines)
    d1, d2 = (json.loads(l) for l in lines)
    assert {k: d1[k] for k in ("uid", "endpoint", "operation", "apiVersion", "kind", "namespace", "name", "verdict", "outcome")} == {
        "uid": "d-1", "endpoint": "validate", "operation": "CREATE", "apiVersion": "batch/v1", "kind": "Job",
        "namespace": "llm", "name": "evil\nname\"}", "verdict": "NeverFits", "outcome": "denied"}
    assert d1["reasons"] and all(re.fullmatch(r"[A-Z][A-Za-z]+", x) for x in d1["reasons"])
    assert isinstance(d1["ms"], float) and d1["dry_run"] is False and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", d1["ts"])
    assert "do-not-log" not in lines[0] and "nvidia.com/gpu" not in lines[0]
    assert d2["outcome"] == "skipped" and d2["skip"] == "operation" and d2["verdict"] == "none"


def test_fail_open_tracebacks_rate_limited(certdir, demo, caplog):
    class Boom:
        ready = True

        def snapshot(self):
            raise RuntimeError("boom")

        def age_seconds(self):
            return 0.0

        def status(self):
            return {}

    app = create_app(Boom(), None, traceback_interval=3600)
    caplog.set_level(logging.INFO)
    with running(app, certdir) as (s, c):
        for i in range(5):
            r = post(c, "/validate", review(job(4), uid=f"b{i}"))["response"]
            assert r["allowed"] is True and "internal error (RuntimeError)" in r["warnings"][0]
    tracebacks = [r for r in caplog.records if r.name == "gangcheck.server" and r.exc_info]
    decisions = [json.loads(r.getMessage()) for r in caplog.records if r.name == DECISION_LOGGER]
    assert len(tracebacks) == 1
    assert [d["fail_open"] for d in decisions] == ["internal_error"] * 5
    assert {d["error"] for d in decisions} == {"RuntimeError"}


def test_rate_limiter_counts_what_it_left_out():
    now = [0.0]
    rl = RateLimiter(10.0, clock=lambda: now[0])
    assert rl.allow("a") == (True, 0)
    assert rl.allow("a") == (False, 0) and rl.allow("a") == (False, 0)
    assert rl.allow("b") == (True, 0)
    now[0] = 10.0
    assert rl.allow("a") == (True, 2)


def test_decision_line_is_ascii_and_one_line():
    line = decision_line({"name": "a\nb\u2028\ud800", "uid": "x"})
    assert line.isascii() and "\n" not in line and json.loads(line)["name"] == "a\nb\u2028\ud800"


def test_configure_writes_bare_json_lines():
    import io

    from webhook.decision_log import configure

    buf = io.StringIO()
    logger = configure(buf)
    try:
        logger.info(decision_line({"uid": "x", "outcome": "denied"}))
        assert buf.getvalue() == '{"uid":"x","outcome":"denied"}\n'
        assert logger.propagate is False
    finally:  # leave the logger as pytest's caplog expects it
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.propagate = True


def test_uvicorn_bad_request_lines_rate_limited(srv, certdir, caplog):
    app, s, c = srv
    caplog.set_level(logging.WARNING, logger="uvicorn.error")
    for _ in range(5):
        conn = tls(s.port, certdir / "ca.crt")
        try:
            conn.sendall(b"\x00\x01 not http\r\n\r\n")
            assert read_response(conn)[0] == 400
        finally:
            conn.close()
    invalid = [r for r in caplog.records if r.name == "uvicorn.error" and "Invalid HTTP request" in r.getMessage()]
    assert len(invalid) <= 1


def test_rate_limit_filter_says_how_many_it_dropped():
    from webhook.decision_log import RateLimitFilter

    now = [0.0]
    f = RateLimitFilter(60.0, clock=lambda: now[0])
    rec = lambda: logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, "Invalid %s", ("x",), None)
    assert f.filter(rec()) and not f.filter(rec()) and not f.filter(rec())
    now[0] = 61.0
    r = rec()
    assert f.filter(r) and r.getMessage() == "Invalid x (2 more like it since the last one logged)"
