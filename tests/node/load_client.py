"""A load client for the node tier: submits a gang to the real kube-apiserver every ``interval``
seconds and classifies every answer, and the API server's admission-webhook counters around it.

Why not kubectl: a kubectl process per submission costs ~0.1-0.15 s of CPU to start alone on this
2-core VM (``kubectl version --client``, measured), more with discovery and a TLS handshake: it
cannot keep a 100 ms cadence. This client keeps HTTPS keep-alive connections to the API server
(``http.client`` + ``ssl`` with the kubeconfig's admin client certificate) in a few worker threads.

What it submits (``Gang``): a server-side dry-run CREATE (``?dryRun=All``; the webhooks are called,
``sideEffects: None``; nothing is stored) of

* ``never`` — a gang gangcheck must deny (NeverFits in enforce mode): the answer must be HTTP 403
  whose message names gangcheck's validating webhook. An *admission* of it means the check did
  not run: the API server failed open (failurePolicy Ignore) or gangcheck did (stale cache, ...);
* ``checked`` — a gang gangcheck must admit: the answer must be HTTP 201 and the returned object
  must carry gangcheck's mutating-webhook annotation ``gangcheck.io/verdict``; without it the
  mutating call failed open.

Each answer is a :class:`Call` with ``outcome``:

* ``ok`` — as expected, and gangcheck's answer is in it;
* ``unchecked`` — admitted without gangcheck's verdict (a fail-open somewhere);
* ``wrong`` — gangcheck answered, but not as the gang expects (e.g. a policy change let it in);
* ``error`` — an HTTP error other than the expected 403 (e.g. 500, 429), a timeout or a
  connection error to the API server.

A *failed admission* is any call whose outcome is not ``ok`` (``LoadReport.failed``).

Also here: :func:`webhook_counters` — the API server's ``apiserver_admission_webhook_*`` series
(names from k8s.io/apiserver v0.36 ``pkg/admission/metrics/metrics.go``:
``apiserver_admission_webhook_fail_open_count{name,type}``, incremented by the webhook
dispatchers when failurePolicy Ignore swallows a call error;
``apiserver_admission_webhook_rejection_count{name,type,operation,error_type,rejection_code}``,
``error_type`` ``calling_webhook_error`` for a call that failed, ``no_error`` for a webhook's own
denial; ``apiserver_admission_webhook_request_total{name,type,operation,code,rejected}``) from
``GET /metrics``, summed per series for the webhook names given; :func:`counter_delta`.

Times are seconds (``time.monotonic``), relative to the client's start.
"""

from __future__ import annotations

import base64
import collections
import copy
import http.client
import json
import os
import re
import ssl
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import yaml

__all__ = ["ApiClient", "Gang", "Call", "LoadClient", "LoadReport", "webhook_counters", "counter_delta",
           "parse_prometheus", "GANGCHECK_WEBHOOKS"]

#: The webhook names of manifests/base/webhooks.yaml.
GANGCHECK_WEBHOOKS = ("validate.gangcheck.io", "validate-pods.gangcheck.io", "mutate.gangcheck.io",
                      "mutate-pods.gangcheck.io")
VERDICT_ANNOTATION = "gangcheck.io/verdict"


# ---------------------------------------------------------------- the API server, over HTTPS


class ApiClient:
    """HTTPS to a kube-apiserver with a client certificate; one keep-alive connection per thread.

    ``request(method, path, body)`` → ``(status, headers, body bytes)``; status 0 with the error
    text as body when the connection fails or times out (one reconnect for a connection the
    server closed while idle, as a Go client retries). Thread-safe.
    """

    def __init__(self, server: str, ca: str | os.PathLike, cert: str | os.PathLike, key: str | os.PathLike,
                 *, timeout: float = 30.0) -> None:
        if not server.startswith("https://"):
            raise ValueError(f"server: expected an https:// URL, got {server!r}")
        hostport = server[len("https://"):].rstrip("/")
        host, _, port = hostport.rpartition(":")
        self.host, self.port = (host, int(port)) if host else (hostport, 443)
        self.timeout = timeout
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.ctx.load_cert_chain(str(cert), str(key))
        self._local = threading.local()
        self._tmp: tempfile.TemporaryDirectory | None = None

    @classmethod
    def from_kubeconfig(cls, path: str | os.PathLike, **kw) -> "ApiClient":
        """The current context's cluster and user (file paths or ``*-data`` fields)."""
        doc = yaml.safe_load(Path(path).read_text())
        ctx_name = doc.get("current-context")
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        tmp = tempfile.TemporaryDirectory(prefix="gangcheck-load-")

        def file_of(obj: dict, key: str) -> str:
            if obj.get(key):
                return str(obj[key])
            data = obj.get(f"{key}-data")
            if not data:
                raise ValueError(f"{path}: {key} (or {key}-data) missing")
            p = Path(tmp.name) / key
            p.write_bytes(base64.b64decode(data))
            os.chmod(p, 0o600)
            return str(p)

        c = cls(cluster["server"], file_of(cluster, "certificate-authority"), file_of(user, "client-certificate"),
                file_of(user, "client-key"), **kw)
        c._tmp = tmp  # client-key-data etc. live as long as the client
        return c

    def _conn(self) -> http.client.HTTPSConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
            self._local.conn = c
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
        self._local.conn = None

    def request(self, method: str, path: str, body: bytes | dict | None = None,
                headers: dict | None = None) -> tuple[int, http.client.HTTPMessage | None, bytes]:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        hdrs = {"Accept": "application/json", **({"Content-Type": "application/json"} if body is not None else {}),
                **(headers or {})}
        for attempt in (0, 1):
            conn = self._conn()
            reused = conn.sock is not None
            try:
                conn.request(method, path, body=body, headers=hdrs)
                r = conn.getresponse()
                data = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self._drop()
                return r.status, r.headers, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self._drop()
                if attempt == 0 and reused:  # the server closed an idle keep-alive connection
                    continue
                return 0, None, f"{type(exc).__name__}: {exc}".encode()
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                return 0, None, f"{type(exc).__name__}: {exc}".encode()
        raise AssertionError("unreachable")

    def get_json(self, path: str):
        """GET ``path`` → parsed JSON; AssertionError naming the status on anything but 200."""
        status, _, data = self.request("GET", path)
        if status != 200:
            raise AssertionError(f"GET {path}: HTTP {status}: {data[:300]!r}")
        return json.loads(data)

    def get_text(self, path: str) -> str:
        status, _, data = self.request("GET", path, headers={"Accept": "text/plain"})
        if status != 200:
            raise AssertionError(f"GET {path}: HTTP {status}: {data[:300]!r}")
        return data.decode()

    def close(self) -> None:
        self._drop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


# ---------------------------------------------------------------- what is submitted


@dataclass(frozen=True)
class Gang:
    """One object to submit: ``kind`` ``never`` (must be denied by gangcheck) or ``checked``
    (must be admitted with gangcheck's annotation); ``obj`` the manifest (its name gets a
    sequence suffix per call); ``path`` the collection URL, e.g.
    ``/apis/batch/v1/namespaces/NS/jobs``."""

    kind: str
    obj: dict
    path: str

    def __post_init__(self):
        if self.kind not in ("never", "checked"):
            raise ValueError(f"kind: expected 'never' or 'checked', got {self.kind!r}")


@dataclass
class Call:
    """One submission: ``seq``, the gang ``kind``, ``t`` (seconds after the client started, when
    it was sent), ``seconds`` (until the answer), ``status`` (HTTP; 0 = no answer), ``outcome``
    (ok / unchecked / wrong / error), ``detail`` (the message or error, ≤ 300 chars),
    ``warnings`` (the API server's Warning headers)."""

    seq: int
    kind: str
    t: float
    seconds: float
    status: int
    outcome: str
    detail: str
    warnings: tuple[str, ...] = ()


def _warnings(headers) -> tuple[str, ...]:
    if headers is None:
        return ()
    out = []
    for v in headers.get_all("Warning") or []:
        # RFC 7234 warn-code warn-agent "text": 299 - "…"
        _, _, text = v.partition(' "')
        out.append(text[:-1] if text.endswith('"') else v)
    return tuple(out)


def classify(kind: str, status: int, headers, data: bytes) -> tuple[str, str]:
    """(outcome, detail) of one answer; see the module docstring."""
    text = data.decode(errors="replace")
    if status == 0:
        return "error", text[:300]
    try:
        doc = json.loads(text)
    except ValueError:
        doc = {}
    if kind == "never":
        if status == 403:
            msg = str(doc.get("message", ""))
            if 'admission webhook "validate.gangcheck.io" denied the request' in msg:
                return "ok", msg[:300]
            return "wrong", msg[:300]  # denied, but not by gangcheck (e.g. a quota admission plugin)
        if status in (200, 201):
            ann = ((doc.get("metadata") or {}).get("annotations") or {})
            return "unchecked", f"admitted; {VERDICT_ANNOTATION}={ann.get(VERDICT_ANNOTATION)!r}; " + \
                " | ".join(_warnings(headers))[:200]
        return "error", f"HTTP {status}: {str(doc.get('message', text))[:280]}"
    if status in (200, 201):
        ann = ((doc.get("metadata") or {}).get("annotations") or {})
        verdict = ann.get(VERDICT_ANNOTATION)
        if verdict is None:
            return "unchecked", "admitted without gangcheck's annotation"
        return "ok", f"{VERDICT_ANNOTATION}={verdict}"
    if status == 403 and "gangcheck.io" in text:
        return "wrong", str(doc.get("message", text))[:300]
    return "error", f"HTTP {status}: {str(doc.get('message', text))[:280]}"


# ---------------------------------------------------------------- the client


@dataclass
class LoadReport:
    """All calls of one run; ``counts`` by outcome, ``failed`` (calls not ``ok``), ``by_kind``."""

    calls: list[Call] = field(default_factory=list)
    seconds: float = 0.0
    late: int = 0  # ticks that started more than one interval late (the VM was too busy)

    @property
    def counts(self) -> dict[str, int]:
        return dict(collections.Counter(c.outcome for c in self.calls))

    @property
    def failed(self) -> list[Call]:
        return [c for c in self.calls if c.outcome != "ok"]

    def between(self, t0: float, t1: float) -> "LoadReport":
        """The calls sent in [t0, t1] (client seconds)."""
        return LoadReport([c for c in self.calls if t0 <= c.t <= t1], t1 - t0)

    def summary(self) -> str:
        lat = sorted(c.seconds for c in self.calls) or [0.0]
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
        return (f"{len(self.calls)} calls in {self.seconds:.1f}s, outcomes {self.counts}, "
                f"latency p50 {p(0.5) * 1000:.0f} ms p99 {p(0.99) * 1000:.0f} ms max {lat[-1] * 1000:.0f} ms, "
                f"{self.late} late ticks")

    def describe_failures(self, limit: int = 10) -> str:
        return "\n".join(f"  #{c.seq} {c.kind} t={c.t:.2f}s {c.seconds * 1000:.0f}ms HTTP {c.status} {c.outcome}: {c.detail}"
                         for c in self.failed[:limit])


class LoadClient:
    """Submits ``gangs`` in turn, one every ``interval`` seconds on a fixed schedule (a slow
    answer does not delay the next submission: ``workers`` threads send them), until
    ``stop()``. ``mark(name)`` records the client time of an event (``marks``).

    Use as a context manager, or ``start()`` / ``stop()`` (→ :class:`LoadReport`).
    """

    def __init__(self, api: ApiClient, gangs: Iterable[Gang], *, interval: float = 0.1, workers: int = 8,
                 dry_run: bool = True) -> None:
        self.api = api
        self.gangs = list(gangs)
        if not self.gangs:
            raise ValueError("gangs: expected at least one Gang")
        self.interval = interval
        self.dry_run = dry_run
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="gangcheck-load")
        self.report = LoadReport()
        self.marks: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._futures: list = []

    def now(self) -> float:
        return time.monotonic() - self._t0

    def mark(self, name: str) -> float:
        t = self.now()
        self.marks[name] = t
        return t

    def _submit(self, seq: int, gang: Gang, t: float) -> None:
        obj = copy.deepcopy(gang.obj)
        md = obj.setdefault("metadata", {})
        md["name"] = f"{md.get('name', 'load')}-{seq}"
        path = gang.path + ("?dryRun=All" if self.dry_run else "")
        t_send = time.monotonic()
        status, headers, data = self.api.request("POST", path, obj)
        took = time.monotonic() - t_send
        outcome, detail = classify(gang.kind, status, headers, data)
        call = Call(seq, gang.kind, t, took, status, outcome, detail, _warnings(headers))
        with self._lock:
            self.report.calls.append(call)

    def _loop(self) -> None:
        seq = 0
        next_t = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_t:
                self._stop.wait(next_t - now)
                continue
            if now - next_t > self.interval:
                self.report.late += 1
            gang = self.gangs[seq % len(self.gangs)]
            self._futures.append(self.pool.submit(self._submit, seq, gang, next_t - self._t0))
            seq += 1
            next_t += self.interval

    def start(self) -> "LoadClient":
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="gangcheck-load-ticker", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> LoadReport:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for f in self._futures:
            f.result()  # every submission answered (each is bounded by the API client's timeout)
        self.pool.shutdown(wait=True)
        self.report.seconds = self.now()
        self.report.calls.sort(key=lambda c: c.seq)
        return self.report

    def __enter__(self) -> "LoadClient":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------- the API server's counters


_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def parse_prometheus(text: str) -> list[tuple[str, dict, float]]:
    """(sample name as written, labels, value) of every sample in Prometheus text exposition.

    Not ``prometheus_client.parser``: it renames a counter's samples to ``<family>_total``, so
    the API server's ``apiserver_admission_webhook_fail_open_count`` would come back as
    ``..._count_total``. Lines that are not samples (comments, blank) are skipped."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        labels = {k: bytes(v, "utf-8").decode("unicode_escape") for k, v in _LABEL.findall(m.group(2) or "")}
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            continue
    return out


WEBHOOK_SERIES = ("apiserver_admission_webhook_fail_open_count", "apiserver_admission_webhook_rejection_count",
                  "apiserver_admission_webhook_request_total")


def webhook_counters(metrics_text: str, names: Iterable[str] = GANGCHECK_WEBHOOKS) -> dict[tuple, float]:
    """The API server's admission-webhook counters for the webhooks ``names``: a map
    ``(series, (label, value), ...)`` → value, for every sample of :data:`WEBHOOK_SERIES` (labels
    sorted; ``name`` kept). A series never observed is absent (the API server exports no
    zero child)."""
    names = set(names)
    out: dict[tuple, float] = {}
    for name, labels, value in parse_prometheus(metrics_text):
        if name in WEBHOOK_SERIES and labels.get("name") in names:
            out[(name, *sorted(labels.items()))] = value
    return out


def counter_delta(before: dict[tuple, float], after: dict[tuple, float]) -> dict[tuple, float]:
    """``after - before`` per series key, non-zero entries only."""
    keys = set(before) | set(after)
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in keys}
    return {k: v for k, v in d.items() if v}


def total(delta: dict[tuple, float], series: str, **labels: str) -> float:
    """Sum of ``delta`` entries of ``series`` whose labels include ``labels``."""
    s = 0.0
    for k, v in delta.items():
        if k[0] != series:
            continue
        kl = dict(k[1:])
        if all(kl.get(a) == b for a, b in labels.items()):
            s += v
    return s
