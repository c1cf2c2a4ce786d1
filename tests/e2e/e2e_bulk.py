"""Many objects into a real kube-apiserver, fast: persistent HTTPS connections in a thread pool.

kubectl costs ~0.1–0.2 s a process here and sends one request per object; a 5,000-node cluster
with ~30 bound pods per node is ~155,000 objects. ``Bulk`` keeps one keep-alive connection per
worker thread (``http.client``), authenticates with the kubeconfig's client certificate, and
POSTs JSON. Errors are collected, never swallowed: ``create`` raises with the first few.

Used by tests/e2e/test_e2e_ratio.py (the kube-scheduler ratio, issue #11).
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable


class Bulk:
    """``kubeconfig``: a file written by ``e2e_controlplane.write_kubeconfig`` (JSON, a client
    certificate and key by path). ``threads``: concurrent connections."""

    def __init__(self, kubeconfig: Path, threads: int = 8) -> None:
        cfg = json.loads(Path(kubeconfig).read_text())
        cl, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        self.url = urllib.parse.urlsplit(cl["server"])
        self.ctx = ssl.create_default_context(cafile=cl["certificate-authority"])
        self.ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self.threads = threads
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.url.hostname, self.url.port, context=self.ctx, timeout=60)
            self._local.conn = c
        return c

    def request(self, method: str, path: str, body: dict | None = None, ctype: str = "application/json") -> tuple[int, bytes]:
        """One request on this thread's connection (reconnects once if the server closed it)."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (0, 1):
            c = self._conn()
            try:
                c.request(method, path, body=data, headers={"Content-Type": ctype} if data else {})
                r = c.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                c.close()
                self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def create(self, items: Iterable[tuple[str, dict]], what: str = "objects") -> float:
        """POST each ``(collection path, object)``; returns the seconds it took. Raises
        AssertionError naming the first failures (status and message) if any request failed."""
        errors: list[str] = []
        lock = threading.Lock()

        def one(item: tuple[str, dict]) -> None:
            path, obj = item
            status, body = self.request("POST", path, obj)
            if status >= 300:
                with lock:
                    if len(errors) < 5:
                        errors.append(f"{status} {path} {obj.get('metadata', {}).get('name')}: {body[:300]!r}")
                    else:
                        errors.append("")

        t0 = time.monotonic()
        with ThreadPoolExecutor(self.threads) as pool:
            for _ in pool.map(one, items, chunksize=64):
                pass
        if errors:
            raise AssertionError(f"{len(errors)} of the {what} were refused; first: " + "; ".join(e for e in errors if e))
        return time.monotonic() - t0

    def list_all(self, path: str, api_version: str, kind: str, page: int = 5000) -> list[dict]:
        """Every item of a collection, paged with ``limit``/``continue``, ``apiVersion`` and
        ``kind`` set on each (a list response leaves them out of its items)."""
        out: list[dict] = []
        token = ""
        while True:
            q = f"?limit={page}" + (f"&continue={urllib.parse.quote(token)}" if token else "")
            status, body = self.request("GET", path + q)
            if status != 200:
                raise AssertionError(f"GET {path}: {status} {body[:300]!r}")
            doc = json.loads(body)
            for i in doc.get("items") or []:
                i.setdefault("apiVersion", api_version)
                i.setdefault("kind", kind)
                out.append(i)
            token = (doc.get("metadata") or {}).get("continue") or ""
            if not token:
                return out
