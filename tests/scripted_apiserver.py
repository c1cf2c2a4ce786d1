"""A scripted Kubernetes list/watch HTTP server on loopback, for the live cache's tests and bench.

It implements just enough of the API server's list/watch contract for an informer:

* ``GET /api/v1/<plural>``, ``/api/v1/namespaces/<ns>/<plural>``, ``/apis/<group>/<version>/<plural>``
  (and the namespaced form): a list with ``limit``/``continue`` paging over a consistent snapshot
  taken at the first page (like etcd-backed paging); every page carries the snapshot's
  ``metadata.resourceVersion``; the last page has no ``continue``.
* ``?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=N``: a chunked stream of
  JSON lines ``{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}`` replaying every
  event after RV, then live ones. An RV older than the retained history gets the API server's
  answer: an ``ERROR`` event whose object is ``{"kind": "Status", "code": 410, "reason": "Expired"}``.
* ``fieldSelector`` (``a.b=v`` / ``a.b!=v``, comma = AND) on lists and watches, with the watch
  cache's translation: an object that stops matching is sent as ``DELETED`` (a pod whose phase
  becomes Succeeded under ``status.phase!=Succeeded``), one that starts matching as ``ADDED``.
* ``404`` (a ``Status`` with code 404) for every path of an API group marked not installed, as
  for a CRD that does not exist; ``fail_next`` scripts error answers (500, 429, …).

Use it in-process (``ScriptedAPIServer().start()``; push objects with ``upsert``/``delete``) or as
a subprocess (``python tests/scripted_apiserver.py --nodes 5000 --pods 150000``; prints
``PORT <n>`` then serves; admin endpoints under ``/_admin/``) so a benchmark can measure the
client's memory without the server's. Bound to 127.0.0.1 only; bounded history, connection count
and request size; ``stop()`` ends every stream and joins the serving thread.
"""

from __future__ import annotations

import argparse
import base64
import json
import select
import socket
import sys
import threading
import time
from collections import OrderedDict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "ScriptedAPIServer",
    "Resource",
    "RESOURCES",
    "make_node",
    "make_pod",
    "make_cluster_queue",
    "populate",
    "encode",
]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode(obj: Any) -> bytes:
    """Compact JSON bytes of ``obj`` (what the API server writes)."""
    return _dumps(obj).encode()


class Resource:
    """One REST resource served: ``group`` ("" = core), ``version``, ``plural``, ``kind``."""

    __slots__ = ("group", "version", "plural", "kind", "namespaced")

    def __init__(self, group: str, version: str, plural: str, kind: str, namespaced: bool) -> None:
        self.group, self.version, self.plural, self.kind, self.namespaced = group, version, plural, kind, namespaced

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """``"<group>/<plural>"`` (``"/pods"`` for core): how the server files the collection."""
        return f"{self.group}/{self.plural}"


#: The resources the live cache reads, at the versions the scripted server serves by default.
RESOURCES: dict[str, Resource] = {
    r.key: r
    for r in (
        Resource("", "v1", "nodes", "Node", False),
        Resource("", "v1", "pods", "Pod", True),
        Resource("", "v1", "configmaps", "ConfigMap", True),
        Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
        Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
        Resource("kueue.x-k8s.io", "v1beta1", "resourceflavors", "ResourceFlavor", False),
        Resource("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", False),
        Resource("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue", True),
        Resource("kueue.x-k8s.io", "v1beta1", "cohorts", "Cohort", False),
        Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True),
        Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False),
        Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True),
        Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True),
        Resource("karpenter.sh", "v1", "nodepools", "NodePool", False),
        Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", False),
        Resource("autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest", True),
        Resource("kueue.x-k8s.io", "v1beta1", "topologies", "Topology", False),
        Resource("kai.scheduler", "v1alpha1", "topologies", "Topology", False),
        Resource("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", False),
    )
}

_FIELD_PATHS = ("metadata.name", "metadata.namespace", "status.phase", "spec.nodeName")


def _fields(obj: Mapping) -> dict[str, str]:
    out = {}
    for path in _FIELD_PATHS:
        cur: Any = obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, Mapping) else None
        out[path] = "" if cur is None else str(cur)
    return out


def _parse_selector(text: str) -> list[tuple[str, bool, str]]:
    """``"a=b,c!=d"`` → ``[(a, True, b), (c, False, d)]`` (True = equality)."""
    out = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            out.append((k.strip(), False, v.strip()))
        else:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            out.append((k.strip(), True, v.strip()))
    return out


def _matches(selector: list[tuple[str, bool, str]], fields: Mapping[str, str] | None) -> bool:
    if fields is None:
        return False
    for k, eq, v in selector:
        if (fields.get(k, "") == v) != eq:
            return False
    return True


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}


class _Entry:
    __slots__ = ("rv", "data", "fields", "ns")

    def __init__(self, rv: int, data: bytes, fields: dict[str, str], ns: str) -> None:
        self.rv, self.data, self.fields, self.ns = rv, data, fields, ns


class _Event:
    __slots__ = ("rv", "type", "coll", "data", "new_fields", "old_fields", "ns")

    def __init__(self, rv, type_, coll, data, new_fields, old_fields, ns) -> None:
        self.rv, self.type, self.coll, self.data = rv, type_, coll, data
        self.new_fields, self.old_fields, self.ns = new_fields, old_fields, ns


class _Watcher:
    __slots__ = ("coll", "selector", "bookmarks", "ns", "closed", "expired", "control")

    def __init__(self, coll: str, selector, bookmarks: bool, ns: str) -> None:
        self.coll, self.selector, self.bookmarks, self.ns = coll, selector, bookmarks, ns
        self.closed = False
        self.expired = False
        self.control: list[bytes] = []  # bookmark lines queued for this watcher


class ScriptedAPIServer:
    """A list/watch API server driven by the test.

    Args:
        page_limit_max: the largest page the server returns whatever ``limit`` asks.
        history: watch events retained (older resourceVersions get 410 Gone).
        max_connections: concurrent connections accepted; more are closed at once.

    State changes (``upsert``, ``delete``, ``bookmark``, ``expire``…) are thread-safe and take
    effect for lists at once and for open watches within milliseconds. Resource versions are one
    global counter, as etcd's revision is.
    """

    def __init__(self, *, page_limit_max: int = 500, history: int = 200_000, max_connections: int = 64) -> None:
        self.page_limit_max = page_limit_max
        self.max_connections = max_connections
        self._lock = threading.Condition()
        self._rv = 1
        self._colls: dict[str, OrderedDict[str, _Entry]] = {k: OrderedDict() for k in RESOURCES}
        self._history: deque[_Event] = deque(maxlen=history)
        self._compacted: dict[str, int] = {}  # coll → watches from an rv below this get 410
        self._watchers: set[_Watcher] = set()
        self._snapshots: OrderedDict[str, tuple[int, list[bytes]]] = OrderedDict()
        self._snap_seq = 0
        self.not_installed: set[str] = set()  # API groups answered with 404
        self.served_versions: dict[str, set[str]] = {}  # group → versions served (default: RESOURCES')
        self._failures: list[tuple[int, str]] = []  # (status, path substring) for the next requests
        self.requests: list[str] = []  # "GET <path>?<query>" of every request, bounded
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._stopping = False

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "ScriptedAPIServer":
        """Bind 127.0.0.1 on a free port and serve in a daemon thread; returns self."""
        server = self

        class Handler(_Handler):
            owner = server

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.request_queue_size = 64
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-apiserver", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """End every watch stream, close every connection and join the serving thread."""
        with self._lock:
            self._stopping = True
            for w in self._watchers:
                w.closed = True
            self._lock.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        self.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> "ScriptedAPIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def drop_connections(self) -> None:
        """Close every open connection (watches end without a final event, like a network cut).

        The sockets are shut down *before* the streams are woken, all under the lock: a stream
        woken first could still end cleanly (terminal chunk), and its client could send the
        next request on the still-open keep-alive connection, to be served as a new watch that
        the cut never reached (an orphan stream, counted by ``watchers()``)."""
        with self._lock:
            for c in list(self._conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            for w in self._watchers:
                w.closed = True
            self._lock.notify_all()

    # ------------------------------------------------------------ scripting
    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self._lock:
            return self._rv

    def _coll(self, obj: Mapping) -> str:
        api = str(obj.get("apiVersion") or "v1")
        group = api.split("/", 1)[0] if "/" in api else ""
        kind = obj.get("kind")
        for key, r in RESOURCES.items():
            if r.group == group and r.kind == kind:
                return key
        raise KeyError(f"no resource for {api} {kind}")

    @staticmethod
    def _key(obj: Mapping) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or ""
        return ns, f"{ns}/{meta['name']}" if ns else meta["name"]

    def upsert(self, obj: dict, *, silent: bool = False) -> int:
        """Create or replace ``obj`` (kind/apiVersion pick the collection); returns its new RV.

        Sets ``metadata.resourceVersion``. Watchers get ADDED or MODIFIED (translated through their
        field selector). ``silent=True`` changes state without an event in the history, as if
        the event had been compacted away: only a re-list sees it.
        """
        with self._lock:
            return self._upsert_locked(obj, silent)

    def _upsert_locked(self, obj: dict, silent: bool) -> int:
        coll = self._coll(obj)
        ns, key = self._key(obj)
        self._rv += 1
        rv = self._rv
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        data = encode(obj)
        fields = _fields(obj)
        store = self._colls[coll]
        old = store.get(key)
        store[key] = _Entry(rv, data, fields, ns)
        if not silent:
            self._history.append(_Event(rv, "MODIFIED" if old else "ADDED", coll, data, fields, old.fields if old else None, ns))
            self._lock.notify_all()
        return rv

    def upsert_many(self, objs: Iterable[dict]) -> int:
        """``upsert`` each object under one lock (watchers are woken once); returns the last RV."""
        with self._lock:
            rv = self._rv
            for obj in objs:
                rv = self._upsert_locked(obj, False)
            return rv

    def load(self, objs: Iterable[dict]) -> int:
        """Initial state: store ``objs`` without history events (a list sees them, a watch from an
        older RV does not). Returns the RV after loading."""
        with self._lock:
            for obj in objs:
                self._upsert_locked(obj, True)
            return self._rv

    def load_encoded(self, coll: str, items: Iterable[tuple[str, str, bytes, dict]]) -> None:
        """Bulk initial state from pre-encoded objects ``(namespace, key, json, fields)``.

        The JSON's own ``metadata.resourceVersion`` is not rewritten; used by the benchmark to
        load 500k pods quickly. ``fields`` holds the selector fields (``_FIELD_PATHS``)."""
        with self._lock:
            store = self._colls[coll]
            for ns, key, data, fields in items:
                self._rv += 1
                store[key] = _Entry(self._rv, data, fields, ns)

    def delete(self, obj_or_kind: Mapping | str, name: str = "", namespace: str = "") -> int:
        """Delete an object (pass the object, or ``(collection key, name, namespace)``); watchers
        whose selector matched it get DELETED carrying its last state with a new RV."""
        with self._lock:
            if isinstance(obj_or_kind, Mapping):
                coll = self._coll(obj_or_kind)
                ns, key = self._key(obj_or_kind)
            else:
                coll, ns = obj_or_kind, namespace
                key = f"{namespace}/{name}" if namespace else name
            old = self._colls[coll].pop(key)
            self._rv += 1
            obj = json.loads(old.data)
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self._history.append(_Event(self._rv, "DELETED", coll, encode(obj), None, old.fields, ns))
            self._lock.notify_all()
            return self._rv

    def get(self, coll: str, name: str, namespace: str = "") -> dict | None:
        """The stored object (decoded), or None."""
        with self._lock:
            e = self._colls[coll].get(f"{namespace}/{name}" if namespace else name)
            return None if e is None else json.loads(e.data)

    def count(self, coll: str) -> int:
        """Objects stored in a collection."""
        with self._lock:
            return len(self._colls[coll])

    def bookmark(self, coll: str | None = None) -> int:
        """Send a BOOKMARK at the current RV to the open watches (of ``coll``, or all) that asked
        for bookmarks; returns that RV."""
        with self._lock:
            self._rv += 1  # the cluster moved on elsewhere
            rv = self._rv
            for w in self._watchers:
                if w.bookmarks and (coll is None or w.coll == coll):
                    r = RESOURCES[w.coll]
                    w.control.append(encode({"type": "BOOKMARK", "object": {"kind": r.kind, "apiVersion": r.api_version, "metadata": {"resourceVersion": str(rv)}}}) + b"\n")
            self._lock.notify_all()
            return rv

    def compact(self, coll: str | None = None, *, notify: bool = False) -> int:
        """Forget history up to the current RV (for ``coll`` or every collection): a later watch
        from an older RV gets 410 Gone. ``notify=True`` also sends the ERROR 410 event to open
        watches and ends them (what etcd compaction does to a lagging watch). Returns the RV."""
        with self._lock:
            rv = self._rv
            for c in [coll] if coll else list(self._colls):
                self._compacted[c] = rv
            self._snapshots.clear()  # continue tokens expire too
            if notify:
                for w in self._watchers:
                    if coll is None or w.coll == coll:
                        w.expired = True
            self._lock.notify_all()
            return rv

    def expire(self, coll: str | None = None) -> int:
        """``compact(coll, notify=True)``: every watch of ``coll`` gets ERROR 410 and must re-list."""
        return self.compact(coll, notify=True)

    def fail_next(self, n: int = 1, status: int = 500, path_contains: str = "") -> None:
        """Answer the next ``n`` requests whose path contains ``path_contains`` with ``status``."""
        with self._lock:
            self._failures.extend([(status, path_contains)] * n)

    def clear_failures(self) -> None:
        """Forget scripted failures not yet served."""
        with self._lock:
            self._failures.clear()

    def watchers(self, coll: str | None = None) -> int:
        """Open watch streams (of ``coll``)."""
        with self._lock:
            return sum(1 for w in self._watchers if coll is None or w.coll == coll)

    # ------------------------------------------------------------ serving internals
    def _take_failure(self, path: str) -> int | None:
        with self._lock:
            for i, (status, sub) in enumerate(self._failures):
                if sub in path:
                    del self._failures[i]
                    return status
        return None

    def _resolve(self, path: str) -> tuple[str | None, str, int, str]:
        """path → (collection key, namespace filter, HTTP status, message)."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None, "", 404, "the server could not find the requested resource"
        if group in self.not_installed:
            return None, "", 404, "the server could not find the requested resource"
        ns = ""
        if len(rest) == 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if len(rest) != 1:
            return None, "", 404, "the server could not find the requested resource"
        key = f"{group}/{rest[0]}"
        r = RESOURCES.get(key)
        if r is None:
            return None, "", 404, "the server could not find the requested resource"
        versions = self.served_versions.get(group, {r.version})
        if version not in versions:
            return None, "", 404, "the server could not find the requested resource"
        return key, ns, 200, ""

    def _list_page(self, coll: str, ns: str, selector, limit: int, cont: str) -> tuple[int, bytes]:
        with self._lock:
            if cont:
                try:
                    token = json.loads(base64.urlsafe_b64decode(cont.encode()))
                    snap = self._snapshots.get(token["id"])
                    offset = int(token["offset"])
                except (ValueError, KeyError, TypeError):
                    return 400, encode(_status(400, "BadRequest", "invalid continue token"))
                if snap is None:
                    return 410, encode(_status(410, "Expired", "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."))
                rv, items = snap
            else:
                rv = self._rv
                items = [e.data for e in self._colls[coll].values() if (not ns or e.ns == ns) and (not selector or _matches(selector, e.fields))]
                offset = 0
                self._snap_seq += 1
                token = {"id": str(self._snap_seq)}
                if limit and len(items) > limit:
                    self._snapshots[token["id"]] = (rv, items)
                    while len(self._snapshots) > 16:
                        self._snapshots.popitem(last=False)
            page = items[offset : offset + limit] if limit else items[offset:]
            nxt = offset + len(page)
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if limit and nxt < len(items):
                meta["continue"] = base64.urlsafe_b64encode(encode({"id": token["id"], "offset": nxt})).decode()
                meta["remainingItemCount"] = len(items) - nxt
            elif cont:
                self._snapshots.pop(token["id"], None)
        r = RESOURCES[coll]
        head = encode({"kind": f"{r.kind}List", "apiVersion": r.api_version, "metadata": meta})[:-1]
        return 200, head + b',"items":[' + b",".join(page) + b"]}"

    def _translate(self, w: _Watcher, ev: _Event) -> bytes | None:
        if ev.coll != w.coll or (w.ns and ev.ns != w.ns):
            return None
        sel = w.selector
        if ev.type == "DELETED":
            t = "DELETED" if (not sel or _matches(sel, ev.old_fields)) else None
        elif not sel:
            t = ev.type
        else:
            was, now = _matches(sel, ev.old_fields), _matches(sel, ev.new_fields)
            t = ("MODIFIED" if was else "ADDED") if now else ("DELETED" if was else None)
        if t is None:
            return None
        return b'{"type":"' + t.encode() + b'","object":' + ev.data + b"}\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: ScriptedAPIServer
    MAX_BODY = 1 << 20
    PEER_CHECK_S = 0.1  # how often an idle watch stream checks that its client is still there

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without NODELAY each response waits on
        # the client's delayed ACK (~40 ms), which would dominate a paged list
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        o = self.owner
        with o._lock:
            too_many = len(o._conns) >= o.max_connections or o._stopping
            if not too_many:
                o._conns.add(self.connection)
        if too_many:
            self.close_connection = True
            self.connection.close()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.owner._lock:
                self.owner._conns.discard(self.connection)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # admin endpoints (subprocess mode)
        n = int(self.headers.get("Content-Length") or 0)
        if n > self.MAX_BODY:
            self._send(413, b"{}")
            self.close_connection = True
            return
        body = json.loads(self.rfile.read(n) or b"{}")
        path = urlsplit(self.path).path
        admin = getattr(self.owner, "admin", None)
        if not path.startswith("/_admin/") or admin is None:
            self._send(404, encode(_status(404, "NotFound", "no such endpoint")))
            return
        try:
            out = admin(path[len("/_admin/") :], body)
        except Exception as exc:  # report to the caller, keep serving
            self._send(500, encode({"error": repr(exc)}))
            return
        self._send(200, encode(out))

    def do_GET(self) -> None:
        o = self.owner
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        if len(o.requests) < 10_000:
            o.requests.append(f"GET {url.path}?{url.query}")
        failure = o._take_failure(url.path)
        if failure is not None:
            self._send(failure, encode(_status(failure, "InternalError" if failure >= 500 else "TooManyRequests", "scripted failure")))
            return
        coll, ns, status, msg = o._resolve(url.path)
        if coll is None:
            self._send(status, encode(_status(status, "NotFound", msg)))
            return
        selector = _parse_selector(q.get("fieldSelector", ""))
        if q.get("watch") in ("1", "true"):
            self._watch(coll, ns, selector, q)
            return
        try:
            limit = min(int(q.get("limit") or 0), o.page_limit_max) or o.page_limit_max
        except ValueError:
            self._send(400, encode(_status(400, "BadRequest", "bad limit")))
            return
        status, body = o._list_page(coll, ns, selector, limit, q.get("continue", ""))
        self._send(status, body)

    def _peer_gone(self) -> bool:
        """True once the client's end of a streaming connection is closed or broken.

        During a watch the client sends nothing (HTTP/1.1, no pipelining), so a readable socket
        means EOF or an error; an idle stream would otherwise notice only on its next write."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch(self, coll: str, ns: str, selector, q: Mapping[str, str]) -> None:
        o = self.owner
        try:
            since = int(q.get("resourceVersion") or 0)
        except ValueError:
            self._send(400, encode(_status(400, "BadRequest", "bad resourceVersion")))
            return
        timeout = float(q.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        w = _Watcher(coll, selector, q.get("allowWatchBookmarks") in ("true", "1"), ns)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        with o._lock:
            o._watchers.add(w)
            compacted = o._compacted.get(coll, 0)
            oldest = o._history[0].rv if o._history else o._rv + 1
            too_old = since < compacted or (since and since < oldest - 1 and o._history.maxlen and len(o._history) == o._history.maxlen)
        try:
            if too_old:
                w.expired = True
            cursor = since
            while True:
                with o._lock:
                    while not (w.closed or w.expired or w.control or (o._history and o._history[-1].rv > cursor)):
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        o._lock.wait(min(left, self.PEER_CHECK_S))
                        if self._peer_gone():
                            # the client went away (closed, reset, or the socket was cut):
                            # end the stream as the API server does, instead of holding a
                            # dead watcher until timeoutSeconds
                            w.closed = True
                            self.close_connection = True
                    if w.expired:
                        out = [encode({"type": "ERROR", "object": _status(410, "Expired", "too old resource version")}) + b"\n"]
                        done = True
                    else:
                        out = []
                        # events after cursor: history is ordered by rv; scan from the end back
                        pending = []
                        for ev in reversed(o._history):
                            if ev.rv <= cursor:
                                break
                            pending.append(ev)
                        for ev in reversed(pending):
                            line = o._translate(w, ev)
                            if line is not None:
                                out.append(line)
                            cursor = ev.rv
                        out.extend(w.control)
                        w.control.clear()
                        done = w.closed or time.monotonic() >= deadline
                if out:
                    # a few MB per write at most, like the API server's flushes
                    buf: list[bytes] = []
                    size = 0
                    for line in out:
                        buf.append(line)
                        size += len(line)
                        if size >= 1 << 20:
                            self._chunk(b"".join(buf))
                            buf, size = [], 0
                    if buf:
                        self._chunk(b"".join(buf))
                    self.wfile.flush()
                if done:
                    break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            with o._lock:
                o._watchers.discard(w)


# ---------------------------------------------------------------- object factories

GPU = "nvidia.com/gpu"


def make_node(name: str, *, gpus: int = 8, cpu: str = "96", memory: str = "1024Gi", unschedulable: bool = False, labels: Mapping[str, str] | None = None) -> dict:
    """A v1 Node as a kubelet reports it (labels, capacity/allocatable, conditions, images…)."""
    cap = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "1Ti"}
    if gpus:
        cap[GPU] = str(gpus)
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "p5.48xlarge" if gpus else "m6i.8xlarge",
                "topology.kubernetes.io/zone": f"zone-{hash(name) % 3}",
                **({"nvidia.com/gpu.product": "H100", "nvidia.com/gpu.count": str(gpus)} if gpus else {}),
                **(labels or {}),
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"providerID": f"aws:///zone/{name}"},
        "status": {
            "capacity": cap,
            "allocatable": dict(cap),
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.31.0", "containerRuntimeVersion": "containerd://1.7.0", "osImage": "Ubuntu 22.04"},
            "images": [{"names": [f"registry.example.com/img-{i}:v1"], "sizeBytes": 1000000 * i} for i in range(1, 6)],
        },
    }
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


def make_pod(name: str, namespace: str = "team-a", *, node: str = "", gpus: int = 1, cpu: str = "8", memory: str = "64Gi", phase: str = "Running", job: str = "job-0") -> dict:
    """A v1 Pod of a training job, roughly as large as a real one (~3 KB of JSON)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": {"app": job, "training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker", "kueue.x-k8s.io/queue-name": "team-a"},
            "annotations": {"kubectl.kubernetes.io/default-container": "main"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job, "uid": f"uid-{job}", "controller": True, "blockOwnerDeletion": True}],
            "creationTimestamp": "2025-06-01T10:00:00Z",
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/train:v1.2.3",
                    "command": ["torchrun", "--nnodes=8", "train.py"],
                    "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(8)],
                    "resources": {"requests": {"cpu": cpu, "memory": memory, **({GPU: str(gpus)} if gpus else {})}, "limits": {"memory": memory, **({GPU: str(gpus)} if gpus else {})}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "priority": 0,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": GPU, "operator": "Exists", "effect": "NoSchedule"},
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}, {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}],
        },
        "status": {"phase": phase, "qosClass": "Burstable"},
    }
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"]["startTime"] = "2025-06-01T10:01:00Z"
        pod["status"]["podIP"] = "10.1.2.3"
        pod["status"]["conditions"] = [{"type": t, "status": "True", "lastTransitionTime": "2025-06-01T10:01:00Z"} for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
    return pod


def make_cluster_queue(name: str, gpus: int, *, cohort: str = "", version: str = "v1beta1") -> dict:
    """A Kueue ClusterQueue with one resource group (cpu, memory, nvidia.com/gpu) and flavor ``default``."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "10000"}, {"name": "memory", "nominalQuota": "100Ti"}, {"name": GPU, "nominalQuota": str(gpus)}]}],
            }
        ],
    }
    if cohort:
        spec["cohort" if version == "v1beta1" else "cohortName"] = cohort
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def populate(server: ScriptedAPIServer, nodes: int, pods: int, *, gpus_per_node: int = 8) -> None:
    """Load ``nodes`` GPU nodes and ``pods`` bound pods (round-robin; ``gpus_per_node`` one-GPU
    pods per node, the rest CPU pods) fast.

    Objects are encoded once from a template with only names changed, so 500k pods load in
    seconds. Pods are named ``w-<i>`` in namespace ``team-<i % 20>``, job ``job-<i // 64>``.
    """
    tmpl_node = encode(make_node("NODE")).replace(b'"resourceVersion"', b"")
    node_items = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        data = tmpl_node.replace(b"NODE", name.encode())
        node_items.append(("", name, data, {"metadata.name": name, "metadata.namespace": "", "status.phase": "", "spec.nodeName": ""}))
    server.load_encoded("/nodes", node_items)
    tmpl_pod = encode(make_pod("PODNAME", "PODNS", node="PODNODE", job="PODJOB"))
    pod_items = []
    tmpl_cpu_pod = encode(make_pod("PODNAME", "PODNS", node="PODNODE", job="PODJOB", gpus=0, cpu="500m", memory="1Gi"))
    for i in range(pods):
        name, ns, node, job = f"w-{i:06d}", f"team-{i % 20:02d}", f"node-{i % max(nodes, 1):05d}", f"job-{i // 64:05d}"
        # the first gpus_per_node pods of each node hold one GPU each; the rest are CPU pods
        data = (tmpl_pod if i // max(nodes, 1) < gpus_per_node else tmpl_cpu_pod).replace(b"PODNAME", name.encode()).replace(b"PODNS", ns.encode()).replace(b"PODNODE", node.encode()).replace(b"PODJOB", job.encode())
        pod_items.append((ns, f"{ns}/{name}", data, {"metadata.name": name, "metadata.namespace": ns, "status.phase": "Running", "spec.nodeName": node}))
    server.load_encoded("/pods", pod_items)


# ---------------------------------------------------------------- subprocess mode


def _admin(server: ScriptedAPIServer, nodes: int) -> Callable[[str, dict], dict]:
    prepared: list[dict] = []

    def admin(op: str, body: dict) -> dict:
        if op == "rv":
            return {"rv": server.resource_version}
        if op == "prepare_burst":
            # n pod events: 1/3 MODIFIED (rebind), 1/3 ADDED (new pods), 1/3 DELETED (the new ones)
            n = int(body.get("n", 30000))
            prepared.clear()
            third = n // 3
            for i in range(third):
                prepared.append(("upsert", make_pod(f"w-{i:06d}", f"team-{i % 20:02d}", node=f"node-{(i + 1) % max(nodes, 1):05d}", job=f"job-{i // 64:05d}")))
            for i in range(third):
                prepared.append(("upsert", make_pod(f"burst-{i:06d}", "burst", node=f"node-{i % max(nodes, 1):05d}", job="burst")))
            for i in range(n - 2 * third):
                prepared.append(("delete", ("/pods", f"burst-{i % max(third, 1):06d}", "burst")))
            return {"prepared": len(prepared)}
        if op == "release_burst":
            with server._lock:
                for what, arg in prepared:
                    if what == "upsert":
                        server._upsert_locked(arg, False)
                    elif server.get("/pods", arg[1], arg[2]) is not None:
                        server.delete(*arg)
                rv = server._rv
                server._lock.notify_all()
            n = len(prepared)
            prepared.clear()
            return {"released": n, "rv": rv}
        raise ValueError(f"unknown admin op {op}")

    return admin


def main(argv: list[str] | None = None) -> int:
    """Serve a populated scripted API server until stdin closes (subprocess mode)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--not-installed", action="append", default=["kueue.x-k8s.io", "scheduling.volcano.sh", "scheduling.x-k8s.io"])
    args = ap.parse_args(argv)
    server = ScriptedAPIServer(history=1_000_000)
    server.not_installed = set(args.not_installed)
    populate(server, args.nodes, args.pods)
    server.admin = _admin(server, args.nodes)  # type: ignore[attr-defined]
    server.start()
    print(f"PORT {server.port}", flush=True)
    try:
        sys.stdin.read()  # the parent closes our stdin to stop us
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
