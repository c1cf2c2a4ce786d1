"""Integration tests: the webhook app over real HTTPS on 127.0.0.1 with certificates from
webhook.certs, uvicorn in a background thread, httpx verifying against the generated CA.
No timing assertions: waits have generous deadlines and only gate on observed state."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from webhook import certs
from webhook.dump import load_cluster
from webhook.policy_reload import PolicyReloader
from webhook.server import LATENCY_BUCKETS, WebhookServer, create_app
from webhook.sources import StaticSource

from test_admission import apply_patch, job, review

FIXED_NOW = 1748865600.0  # 2025-06-02T12:00:00Z


@pytest.fixture(scope="module")
def certdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    bundle = certs.generate("gangcheck", "gangcheck-system", d)
    assert base64.b64decode(bundle) == (d / "ca.crt").read_bytes()
    return d


@pytest.fixture(scope="module")
def demo():
    return load_cluster("demo")


def client_ctx(ca: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    return ctx


@contextmanager
def running(app, certdir: Path, **kw):
    srv = WebhookServer(app, "127.0.0.1", 0, certdir / "tls.crt", certdir / "tls.key", **kw).start()
    try:
        with httpx.Client(verify=client_ctx(certdir / "ca.crt"), base_url=f"https://127.0.0.1:{srv.port}", timeout=30) as c:
            yield srv, c
    finally:
        srv.stop()


def wait_for(pred, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def post(c: httpx.Client, path: str, doc) -> dict:
    r = c.post(path, content=json.dumps(doc), headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    return r.json()


class BrokenSource:
    """A source whose snapshot() raises (an engine-path exception)."""

    ready = True

    def snapshot(self):
        raise RuntimeError("boom: snapshot exploded")

    def age_seconds(self):
        return 0.0

    def status(self):
        return {"kind": "broken"}


class FakeSource:
    def __init__(self, snap, ready=True, age=0.0):
        self.snap, self._ready, self.age = snap, ready, age

    @property
    def ready(self):
        return self._ready

    def snapshot(self):
        return self.snap

    def age_seconds(self):
        return self.age

    def status(self):
        return {"informers": {"nodes": {"synced": self._ready, "objects": 3, "last_event_age_seconds": self.age, "restarts": 2}}}


# ---------------------------------------------------------------- the demo jobs


@pytest.fixture(scope="module")
def demo_server(certdir, demo):
    app = create_app(StaticSource(demo, "demo"), None, clock=lambda: FIXED_NOW)
    with running(app, certdir) as (srv, c):
        yield app, c


def test_deny_never_fits(demo_server):
    app, c = demo_server
    out = post(c, "/validate", review(job(80, queue="llm-queue"), uid="deny-1"))
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    r = out["response"]
    assert r["uid"] == "deny-1"
    assert r["allowed"] is False
    assert r["status"]["code"] == 403
    assert "request 640 > maximum capacity (512)" in r["status"]["message"]
    assert "Ask for at most 64 pods of 8 nvidia.com/gpu" in r["status"]["message"]


def test_fits_and_waits(demo_server):
    app, c = demo_server
    fits = post(c, "/validate", review(job(4), uid="fits"))["response"]
    assert fits == {"uid": "fits", "allowed": True, "auditAnnotations": {"verdict": "Fits", "reasons": "none"}}
    waits = post(c, "/validate", review(job(40), uid="waits"))["response"]
    assert waits["allowed"] is True
    assert waits["warnings"][0] == "fragmented: 1296 nvidia.com/gpu free, but only 12 node(s) can take a pod of 8 now; 40 needed"
    assert "fragmentation 93%: 1200 of 1296 free nvidia.com/gpu are on nodes too full for a pod of 8" in waits["warnings"]
    assert all(len(w) <= 120 for w in waits["warnings"])


def test_mutate_patch(demo_server):
    app, c = demo_server
    obj = job(40, annotations={"owner": "alice"})
    r = post(c, "/mutate", review(obj, uid="m-1"))["response"]
    assert r["uid"] == "m-1" and r["allowed"] is True and r["patchType"] == "JSONPatch"
    out = apply_patch(obj, json.loads(base64.b64decode(r["patch"])))
    ann = out["metadata"]["annotations"]
    assert ann["owner"] == "alice"
    assert ann["gangcheck.io/verdict"] == "Waits"
    assert ann["gangcheck.io/nodes-fit-now"] == "12 nodes can take a pod now; 40 pods needed"
    assert ann["gangcheck.io/checked-at"] == "2025-06-02T12:00:00Z"
    # The estimate (1h32m) arrives within the wait budget or is still being computed.
    assert ann["gangcheck.io/expected-wait"] in ("unknown", "1h32m")
    # Without annotations: one op adding the whole map. Validating the mutated object reuses the decision.
    bare = job(40)
    r2 = post(c, "/mutate", review(bare, uid="m-2"))["response"]
    patch = json.loads(base64.b64decode(r2["patch"]))
    assert [p["path"] for p in patch] == ["/metadata/annotations"]
    hits = app.state.decision_cache.hits
    v = post(c, "/validate", review(apply_patch(bare, patch), uid="m-3"))["response"]
    assert v["auditAnnotations"]["verdict"] == "Waits"
    assert app.state.decision_cache.hits == hits + 1


def test_skipped_requests_admitted_unchanged(demo_server):
    app, c = demo_server
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "llm"}}
    big = job(80, queue="llm-queue")
    for doc in (review(cm, uid="s"), review(big, uid="s", op="DELETE"), review(job(80, ns="kube-system"), uid="s")):
        for path in ("/validate", "/mutate"):
            assert post(c, path, doc)["response"] == {"uid": "s", "allowed": True}
    plain_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "llm"},
                 "spec": {"containers": [{"name": "c", "image": "x"}]}}
    assert post(c, "/validate", review(plain_pod, uid="pod"))["response"] == {"uid": "pod", "allowed": True}


def test_malformed_object_fails_open(demo_server):
    app, c = demo_server
    bad = job(4)
    bad["spec"]["parallelism"] = "eight"
    r = post(c, "/validate", review(bad, uid="bad-obj"))["response"]
    assert r["allowed"] is True and len(r["warnings"]) == 1
    assert r["warnings"][0].startswith("gangcheck skipped the feasibility check: could not read the object")


@pytest.mark.parametrize(
    "body, needle",
    [
        (b"{not json", "body is not valid JSON"),
        (b"", "body is not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "a"}}).encode(),
         "expected apiVersion admission.k8s.io/v1 kind AdmissionReview"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "expected apiVersion admission.k8s.io/v1"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}).encode(),
         "request.uid is missing"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(), "no request object"),
        (b"\xff\xfe\x00garbage", "body is not valid JSON"),
    ],
)
def test_bad_input_400(demo_server, body, needle):
    app, c = demo_server
    for path in ("/validate", "/mutate"):
        r = c.post(path, content=body)
        assert r.status_code == 400
        assert needle in r.text
        assert r.text.count("\n") == 1 and r.text.endswith("\n")


def test_body_too_large_400(demo_server):
    app, c = demo_server
    doc = review(job(4), uid="big")
    doc["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * (3 * 1024 * 1024)}
    r = c.post("/validate", content=json.dumps(doc))
    assert r.status_code == 400 and "exceeds the 3145728-byte limit" in r.text

    def chunks():  # no Content-Length: the limit applies while streaming
        for _ in range(4):
            yield b" " * (1024 * 1024)

    r = c.post("/validate", content=chunks())
    assert r.status_code == 400 and "exceeds the 3145728-byte limit" in r.text
    # The server is still healthy afterwards.
    assert c.get("/healthz").json() == {"ok": True}


def test_health_ready_metrics(demo_server):
    app, c = demo_server
    post(c, "/validate", review(job(4), uid="metric"))
    ready = c.get("/readyz")
    assert ready.status_code == 200
    d = ready.json()
    assert d["ready"] is True and d["source"]["nodes"] == 403 and d["policy"]["valid"] is True
    text = c.get("/metrics").text
    assert 'gangcheck_webhook_requests_total{endpoint="validate",outcome="allowed",verdict="Fits"}' in text
    assert f'gangcheck_webhook_latency_seconds_bucket{{endpoint="validate",le="{LATENCY_BUCKETS[0]}",outcome="allowed",verdict="Fits"}}' in text
    assert 'le="0.0005"' in text
    assert 'gangcheck_informer_objects{informer="nodes"} 403.0' in text
    assert 'gangcheck_informer_synced{informer="pods"} 1.0' in text
    assert "gangcheck_cache_ready 1.0" in text
    assert "gangcheck_policy_reloads_total 0.0" in text
    assert "_created" not in text


# ---------------------------------------------------------------- fail open


def metric_value(text: str, prefix: str) -> float:
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_fail_open_not_ready_and_stale(certdir, demo):
    src = FakeSource(demo, ready=False)
    app = create_app(src, None)
    with running(app, certdir) as (srv, c):
        for path in ("/validate", "/mutate"):
            r = post(c, path, review(job(80, queue="llm-queue"), uid="nr"))["response"]
            assert r == {"uid": "nr", "allowed": True,
                         "warnings": ["gangcheck skipped the feasibility check: cluster cache not synced yet"]}
        rz = c.get("/readyz")
        assert rz.status_code == 503 and rz.json()["source_ready"] is False
        src._ready, src.age = True, 500.0
        r = post(c, "/validate", review(job(80, queue="llm-queue"), uid="st"))["response"]
        assert r["allowed"] is True
        assert r["warnings"] == ["gangcheck skipped the feasibility check: cluster data is stale (500s old, limit 120s)"]
        rz = c.get("/readyz")
        assert rz.status_code == 200 and rz.json()["stale"] is True
        m = c.get("/metrics").text
        assert metric_value(m, 'gangcheck_webhook_fail_open_total{endpoint="validate",reason="not_ready"}') == 1.0
        assert metric_value(m, 'gangcheck_webhook_fail_open_total{endpoint="mutate",reason="not_ready"}') == 1.0
        assert metric_value(m, 'gangcheck_webhook_fail_open_total{endpoint="validate",reason="stale"}') == 1.0
        assert metric_value(m, 'gangcheck_informer_watch_restarts_total{informer="nodes"}') == 2.0
        # Fresh data again → the denial is back.
        src.age = 1.0
        assert post(c, "/validate", review(job(80, queue="llm-queue"), uid="ok"))["response"]["allowed"] is False


def test_fail_open_internal_error(certdir):
    app = create_app(BrokenSource(), None)
    with running(app, certdir) as (srv, c):
        r = post(c, "/validate", review(job(80, queue="llm-queue"), uid="err"))["response"]
        assert r == {"uid": "err", "allowed": True,
                     "warnings": ["gangcheck skipped the feasibility check: internal error (RuntimeError)"]}
        m = c.get("/metrics").text
        assert metric_value(m, 'gangcheck_webhook_fail_open_total{endpoint="validate",reason="internal_error"}') == 1.0
        assert metric_value(m, 'gangcheck_webhook_requests_total{endpoint="validate",outcome="fail_open",verdict="none"}') == 1.0


def test_fail_open_time_budget(certdir, demo, monkeypatch):
    import webhook.server as server_mod

    release = threading.Event()
    real = server_mod.evaluate

    def slow_evaluate(*a, **kw):
        release.wait(30)
        return real(*a, **kw)

    monkeypatch.setattr(server_mod, "evaluate", slow_evaluate)
    app = create_app(StaticSource(demo), None, time_budget=0.2)
    try:
        with running(app, certdir) as (srv, c):
            r = post(c, "/validate", review(job(80, queue="llm-queue"), uid="slow"))["response"]
            assert r == {"uid": "slow", "allowed": True,
                         "warnings": ["gangcheck skipped the feasibility check: check exceeded its 0.2s time budget"]}
            release.set()
            m = c.get("/metrics").text
            assert metric_value(m, 'gangcheck_webhook_fail_open_total{endpoint="validate",reason="timeout"}') == 1.0
    finally:
        release.set()


def test_status_raising_is_503_not_500(certdir, demo):
    class BadStatus(FakeSource):
        def status(self):
            raise ValueError("nope")

    app = create_app(BadStatus(demo), None)
    with running(app, certdir) as (srv, c):
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["source"]["error"] == "ValueError"  # no text by default
        r = c.get("/readyz?verbose=1")  # from loopback: the detail
        assert r.status_code == 503 and "nope" in r.json()["source"]["error"]
        assert c.get("/metrics").status_code == 200


# ---------------------------------------------------------------- certificate rotation


def served_cert_der(port: int, ca: Path) -> bytes:
    ctx = client_ctx(ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            return t.getpeercert(binary_form=True)


def test_cert_rotation_mid_traffic(tmp_path, demo):
    d = tmp_path / "certs"
    certs.generate("gangcheck", "gangcheck-system", d)
    app = create_app(StaticSource(demo), None)
    with running(app, d, cert_poll_interval=0.1) as (srv, c):
        first = served_cert_der(srv.port, d / "ca.crt")
        assert first == x509.load_pem_x509_certificate((d / "tls.crt").read_bytes()).public_bytes(
            __import__("cryptography.hazmat.primitives.serialization", fromlist=["Encoding"]).Encoding.DER)
        results: list[int] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def traffic():
            # New connections every few requests, so handshakes happen across the swap.
            while not stop.is_set():
                try:
                    with httpx.Client(verify=client_ctx(d / "ca.crt"), base_url=f"https://127.0.0.1:{srv.port}", timeout=30) as tc:
                        for i in range(5):
                            r = tc.post("/validate", content=json.dumps(review(job(80, queue="llm-queue"), uid=f"t{i}")))
                            results.append(r.status_code)
                except BaseException as exc:  # noqa: BLE001 - recorded and asserted below
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=traffic) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: len(results) >= 10, what="traffic before rotation")
            certs.generate("gangcheck", "gangcheck-system", d, reuse_ca=True)  # same CA, new serving cert
            new = x509.load_pem_x509_certificate((d / "tls.crt").read_bytes())
            wait_for(lambda: srv.cert_reloads >= 1, what="certificate reload")
            served = served_cert_der(srv.port, d / "ca.crt")
            assert x509.load_der_x509_certificate(served).serial_number == new.serial_number
            assert served != first
            n = len(results)
            wait_for(lambda: len(results) >= n + 10, what="traffic after rotation")
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        assert not errors, errors
        assert set(results) == {200}
        assert "gangcheck_tls_certificate_reloads_total 1.0" in c.get("/metrics").text
        # Old keep-alive connection of the test client still works too.
        assert c.get("/healthz").status_code == 200


def test_cert_reload_bad_pair_keeps_old(tmp_path, demo):
    d = tmp_path / "certs"
    certs.generate("gangcheck", "gangcheck-system", d)
    app = create_app(StaticSource(demo), None)
    with running(app, d, cert_poll_interval=0.1) as (srv, c):
        first = served_cert_der(srv.port, d / "ca.crt")
        (d / "tls.key").write_text("not a key\n")
        wait_for(lambda: srv.cert_reload_failures >= 1, what="failed reload")
        assert served_cert_der(srv.port, d / "ca.crt") == first
        assert c.get("/healthz").status_code == 200


# ---------------------------------------------------------------- policy reload


def test_policy_reload(tmp_path, certdir, demo):
    pf = tmp_path / "policy.yaml"
    pf.write_text("mode: enforce\n")
    reloader = PolicyReloader(pf, interval=3600)  # driven by check() below, deterministic
    app = create_app(StaticSource(demo), reloader)
    big = review(job(80, queue="llm-queue"), uid="p")
    with running(app, certdir) as (srv, c):
        assert post(c, "/validate", big)["response"]["allowed"] is False
        pf.write_text("mode: warn\nannotationPrefix: example.com/\n")
        assert reloader.check() == "reloaded"
        r = post(c, "/validate", big)["response"]
        assert r["allowed"] is True and r["warnings"][0].startswith("would be denied (ExceedsMaxQuota): ask for at most 64 pods")
        m = post(c, "/mutate", big)["response"]
        assert "example.com~1verdict" not in base64.b64decode(m["patch"]).decode()  # whole map added
        assert json.loads(base64.b64decode(m["patch"]))[0]["value"]["example.com/verdict"] == "NeverFits"
        # Invalid → last good (warn) kept, reported in /readyz and metrics.
        pf.write_text("mode: sometimes\n")
        assert reloader.check() == "failed"
        assert post(c, "/validate", big)["response"]["allowed"] is True
        rz = c.get("/readyz")
        assert rz.status_code == 200
        pol = rz.json()["policy"]
        assert pol["valid"] is False and pol["in_force"] is True and pol["mode"] == "warn"
        assert pol["problem"] == "invalid_field" and "error" not in pol and str(pf) not in rz.text
        pol = c.get("/readyz?verbose=1").json()["policy"]
        assert pol["error"] == f"{pf}: mode: Input should be 'enforce', 'warn' or 'audit'"
        text = c.get("/metrics").text
        assert "gangcheck_policy_reloads_total 1.0" in text
        assert "gangcheck_policy_reload_failures_total 1.0" in text
        assert "gangcheck_policy_valid 0.0" in text
        # Fixed → valid again.
        pf.write_text("mode: enforce\n")
        assert reloader.check() == "reloaded"
        assert post(c, "/validate", big)["response"]["allowed"] is False
        assert c.get("/readyz").json()["policy"]["valid"] is True


def test_policy_invalid_from_start_fails_open(tmp_path, certdir, demo):
    pf = tmp_path / "policy.yaml"
    pf.write_text("mode: [\n")
    reloader = PolicyReloader(pf)
    assert reloader.current() is None and reloader.failures == 1
    app = create_app(StaticSource(demo), reloader)
    with running(app, certdir) as (srv, c):
        r = post(c, "/validate", review(job(80, queue="llm-queue"), uid="np"))["response"]
        assert r == {"uid": "np", "allowed": True, "warnings": ["gangcheck skipped the feasibility check: no valid policy loaded"]}
        rz = c.get("/readyz")
        assert rz.status_code == 503 and rz.json()["policy"]["problem"] == "invalid_yaml"
        rz = c.get("/readyz?verbose=1")
        assert rz.status_code == 503 and "not valid YAML" in rz.json()["policy"]["error"]


def test_policy_reloader_thread(tmp_path):
    pf = tmp_path / "policy.yaml"
    pf.write_text("mode: enforce\n")
    seen = []
    r = PolicyReloader(pf, interval=0.05, on_change=lambda what, rl: seen.append(what)).start()
    try:
        pf.write_text("mode: audit\n")
        wait_for(lambda: r.current().mode == "audit", what="reload by the polling thread")
        assert seen == ["reloaded"] and r.reloads == 1
    finally:
        r.stop()


def test_policy_update_text_and_missing_file(tmp_path):
    r = PolicyReloader(None)
    assert r.current().mode == "enforce" and r.valid
    assert r.update_text("mode: warn\n") == "reloaded" and r.current().mode == "warn"
    assert r.update_text("mode: warn\n") == "unchanged"
    assert r.update_text("staleAfterSeconds: -1\n") == "failed"
    assert r.current().mode == "warn" and r.status()["valid"] is False and "staleAfterSeconds" in r.error
    # The ConfigMap disappearing keeps the last good policy (issue #17 item 4); {} is the default.
    assert r.update_text(None) == "failed" and r.current().mode == "warn" and r.problem == "missing"
    assert r.update_text("{}") == "reloaded" and r.current().mode == "enforce" and r.valid
    pf = tmp_path / "p.yaml"
    pf.write_text("mode: audit\n")
    f = PolicyReloader(pf)
    pf.unlink()
    assert f.check() == "failed" and f.current().mode == "audit" and "cannot read policy file" in f.error
    assert f.check() == "unchanged" and f.failures == 1
    pf.write_text("mode: audit\n")
    assert f.check() == "reloaded" and f.valid


EXAMPLE_REVIEWS = sorted((Path(__file__).resolve().parent.parent / "examples" / "admission").glob("*.json"))
# The demo jobs' expected outcomes (examples/*.yaml headers say the verdict on the demo cluster).
EXPECTED_DENIED = {"jobset-64-nvl.json", "podgroup-volcano.json", "pytorchjob-80x8.json"}


@pytest.mark.skipif(not EXAMPLE_REVIEWS, reason="examples/admission not generated")
def test_example_reviews(demo_server):
    app, c = demo_server
    denied = set()
    for f in EXAMPLE_REVIEWS:
        doc = json.loads(f.read_text())
        uid = doc["request"]["uid"]
        v = post(c, "/validate", doc)["response"]
        assert v["uid"] == uid
        if not v["allowed"]:
            denied.add(f.name)
            assert v["status"]["code"] == 403 and len(v["status"]["message"].encode()) < 1024
        else:
            assert all(len(w) <= 120 for w in v.get("warnings", []))
        m = post(c, "/mutate", doc)["response"]
        assert m["allowed"] is True and m["uid"] == uid
        out = apply_patch(doc["request"]["object"], json.loads(base64.b64decode(m["patch"])))
        verdict = out["metadata"]["annotations"]["gangcheck.io/verdict"]
        assert (verdict == "NeverFits") == (not v["allowed"])
        assert v["auditAnnotations"]["verdict"] == verdict
    assert denied == EXPECTED_DENIED


def test_certs_files_and_sans(tmp_path, capsys):
    import ipaddress
    import stat

    from cryptography.x509.oid import ExtendedKeyUsageOID

    assert certs.main(["--service", "gc", "--namespace", "ops", "--out", str(tmp_path / "c")]) == 0
    bundle = capsys.readouterr().out.strip()
    d = tmp_path / "c"
    assert base64.b64decode(bundle) == (d / "ca.crt").read_bytes()
    assert {p.name for p in d.iterdir()} == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert stat.S_IMODE((d / "tls.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((d / "ca.key").stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate((d / "tls.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["gc", "gc.ops", "gc.ops.svc", "gc.ops.svc.cluster.local", "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.issuer == ca.subject
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ExtendedKeyUsageOID.SERVER_AUTH in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    cert.verify_directly_issued_by(ca)
    # --reuse-ca: new serving certificate, same CA (the caBundle stays valid).
    again = certs.generate("gc", "ops", d, reuse_ca=True)
    assert again == bundle
    assert x509.load_pem_x509_certificate((d / "tls.crt").read_bytes()).serial_number != cert.serial_number
    assert certs.main(["--out", "/proc/no/such/dir"]) == 1


def test_expected_wait_annotation_for_a_waiting_gang(demo_server):
    """The estimate runs in a worker within a small budget; a later request of the same gang
    gets it from the cache. The demo's clock (as_of) makes the figure deterministic."""
    app, c = demo_server
    doc = review(job(40), uid="wait-1")
    deadline = time.monotonic() + 20
    while True:
        r = post(c, "/mutate", doc)["response"]
        patch = json.loads(base64.b64decode(r["patch"]))
        ann = patch[0]["value"] if patch[0]["path"] == "/metadata/annotations" else {p["path"]: p["value"] for p in patch}
        wait = next(v for k, v in ann.items() if k.endswith("expected-wait"))
        if wait != "unknown" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert wait == "1h32m"
    v = post(c, "/validate", doc)["response"]
    assert "expected wait p50 1h32m, p90 3h23m (end times known for 90% of blocking pods)" in v["warnings"]
