"""The informer machinery: list+watch of one REST resource in its own thread, knowing no kind.

Owns: ``ResourceSpec`` (what to list: group, versions, plural, namespace, field selector,
optional), the request errors (``CacheError``, ``_Gone`` for 410, ``_NotInstalled`` for 404),
the REST GET through the ``kubernetes`` client and the retry backoff, and ``Informer``, which
mirrors client-go's reflector (``k8s.io/client-go/tools/cache/reflector.go``):

1. **List**, paged (``limit`` + ``continue``), as a consistent read; a continue token that
   expired (410) restarts the list (at most 3 times, then a ``CacheError``). The list's
   ``metadata.resourceVersion`` is where the watch starts.
2. **Watch** from that resourceVersion with ``allowWatchBookmarks=true`` and a server-side
   ``timeoutSeconds``; ADDED/MODIFIED/DELETED update the store, BOOKMARK only advances the
   resourceVersion, an ERROR event with code 410 (or HTTP 410) means the resourceVersion was
   compacted away: **re-list**. A stream that ends normally is re-opened from the last
   resourceVersion (a "watch restart"); a failed one is re-opened after an exponential backoff
   with jitter (reset once a watch stayed open ``BACKOFF_RESET_S``, client-go's 2 min), and a
   failing list is retried the same way.
3. A resource whose API group is not installed (404 on the list of every version tried, e.g.
   no Kueue or no Volcano CRDs) stays empty, is reported ``installed: false`` and counts as
   synced when the spec is ``optional``; the list is retried every ``crd_recheck_s``.

Does not own: what an object becomes. ``Informer`` turns objects into store entries only through
its hooks (``_convert``, ``_list_page``, ``_on_added``, ``_on_deleted``, ``waits_for``); the
projecting subclass that fills them from the kinds table is ``webhook.cache.kinds._Informer``.
Nor the store's consumer: the owning cache (``webhook.cache.live.LiveCache``) receives every
change through ``cache._replace(informer, store)`` and ``cache._apply(informer, ops)`` and
supplies the settings (page size, timeouts, ``_stop``, ``_changed``) and the GET.

Shapes: a store maps an object's key (``name``, or ``(namespace, name)`` for namespaced
objects) to its projection; times are monotonic seconds; timeouts are seconds.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import msgspec

from ..adapters.errors import AdapterError
from ..adapters.projection import GENERIC as _GENERIC
from ..adapters.projection import decode_list as _decode_list
from ..adapters.projection import decode_object as _decode_object

__all__ = ["ResourceSpec", "CacheError", "Informer", "BACKOFF_RESET_S", "default_api_client", "rest_get", "backoff_delay",
           "obj_key"]

log = logging.getLogger("gangcheck.cache")

#: A watch that stayed open this long before failing resets the retry backoff (client-go: 2 min).
BACKOFF_RESET_S = 120.0
#: A list whose continue token expires more often than this in a row fails (then backs off).
_LIST_RESTARTS = 3


class CacheError(Exception):
    """A list or watch request that failed; ``status`` is the HTTP status (0 = no response)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class _Gone(CacheError):
    """410 Gone: the resourceVersion (or continue token) was compacted away; re-list."""


class _NotInstalled(CacheError):
    """404 on the resource: its API group/version is not served (CRD not installed)."""


@dataclass(frozen=True)
class ResourceSpec:
    """One resource the cache lists and watches.

    Attributes:
        name: the informer's name in ``status()`` ("nodes", "kueue.clusterqueues", …).
        kind: the projection used: Node, Pod, PriorityClass, ResourceFlavor, ClusterQueue,
            LocalQueue, Cohort, Queue, VolcanoPodGroup, CoschedPodGroup, Topology (Kueue),
            KAITopology, HyperNode or PolicyConfigMap (``webhook.cache.kinds.KINDS``).
        group: API group ("" = core/v1); versions: tried in order until one is served.
        plural: the REST resource; namespace: list within one namespace (None = all).
        field_selector: server-side filter; optional: a CRD that may be absent (404 → empty).
    """

    name: str
    kind: str
    group: str
    versions: tuple[str, ...]
    plural: str
    namespace: str | None = None
    field_selector: str = ""
    optional: bool = False

    def path(self, version: str) -> str:
        """The collection's URL path for ``version``."""
        base = f"/api/{version}" if not self.group else f"/apis/{self.group}/{version}"
        if self.namespace:
            base += f"/namespaces/{self.namespace}"
        return f"{base}/{self.plural}"


class _Event(TypedDict, total=False):
    type: str
    object: msgspec.Raw


_EVENT = msgspec.json.Decoder(_Event)
#: ``Informer._converted``'s answer for an object that could not be converted.
_FAILED = object()


def obj_key(obj: Mapping) -> Any:
    """The store key of a decoded object: ``(namespace, name)``, or ``name`` when cluster-scoped."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    name = meta.get("name") or ""
    return (ns, name) if ns else name


def default_api_client():
    """A ``kubernetes.client.ApiClient`` from in-cluster config, else KUBECONFIG/~/.kube/config.

    Raises:
        kubernetes.config.ConfigException: neither configuration is available.
    """
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException:
        config.load_kube_config(client_configuration=cfg, persist_config=False)
    return client.ApiClient(cfg)


def rest_get(api: Any, path: str, query: list[tuple[str, str]], timeout):
    """GET ``path`` through ``api``'s (a ``kubernetes.client.ApiClient``) REST layer (auth
    headers, TLS, proxy); returns the raw urllib3 response, body not read. ``timeout`` is
    seconds, or (connect, read) seconds."""
    method, url, headers, _body, _post = api.param_serialize(
        "GET", path, query_params=query, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
    )
    return api.call_api(method, url, header_params=headers, _request_timeout=timeout).response


def backoff_delay(failures: int, base_s: float, max_s: float) -> float:
    """Seconds to wait after ``failures`` (≥ 1) failures in a row: ``base_s`` × 2^(failures−1)
    capped at ``max_s``, times a jitter U(0.5, 1)."""
    delay = min(max_s, base_s * (2 ** min(failures - 1, 30)))
    return delay * random.uniform(0.5, 1.0)


class Informer:
    """List+watch of one resource in its own thread (see the module doc for the protocol).

    ``cache`` is the owner (a ``LiveCache``): settings, ``_stop``/``_changed`` events, ``_get``,
    ``_backoff``, and ``_replace``/``_apply`` that receive the store changes. Subclasses fill the
    hooks; this class alone converts nothing (``_convert`` raises ``AdapterError``).
    """

    #: Names of informers (of the same cache) whose first sync this one waits for, at most
    #: ``cache.dependency_wait_s`` seconds, before its first list.
    waits_for: tuple[str, ...] = ()

    def __init__(self, cache: Any, spec: ResourceSpec) -> None:
        self.cache, self.spec = cache, spec
        self.store: dict[Any, Any] = {}
        self.rv = ""
        self.version = spec.versions[0]
        self.synced = threading.Event()
        self.installed: bool | None = None
        self.watch_open = False
        self.last_contact = 0.0  # monotonic: last list, event, bookmark or clean stream end
        self.last_event = 0.0
        self.watch_restarts = 0
        self.relists = 0
        self.lists = 0
        self.errors = 0
        self.convert_errors = 0
        self.events = 0
        self.last_error = ""
        self._failures = 0
        self._resp = None
        self._resp_lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"informer-{spec.name}", daemon=True)

    # ---------------------------------------------------------- hooks (the projection)
    def _convert(self, obj: Mapping) -> tuple[Any, Any] | None:
        """(key, projection) of a decoded object, or None when it must not be stored.

        Raises:
            AdapterError: the object cannot be projected.
        """
        raise AdapterError(f"no projection for kind {self.spec.kind}")

    def _list_page(self, body: bytes, converted: dict) -> Mapping:
        """Convert one list page (JSON bytes) into ``converted``; returns the page's metadata.
        Generic: decode the page (``decode_list``), then ``_convert_into`` each item."""
        page = _decode_list(self.spec.kind, body)
        del body
        meta = page.get("metadata") or {}
        for obj in page.get("items") or ():
            self._convert_into(obj, converted)
        return meta

    def _on_added(self, value: Any) -> None:
        """Called with the projection of each object a watch reports ADDED."""

    def _on_deleted(self, obj: Mapping) -> None:
        """Called with each decoded object a watch reports DELETED (after its delete is queued)."""

    # ---------------------------------------------------------- thread
    def _wait_for_dependencies(self) -> None:
        """Wait (≤ ``cache.dependency_wait_s``) for the informers named in ``waits_for`` to sync."""
        cache = self.cache
        stop = cache._stop
        for name in self.waits_for:
            dep = cache._informers.get(name)
            deadline = time.monotonic() + cache.dependency_wait_s
            while dep is not None and not stop.is_set() and time.monotonic() < deadline:
                if dep.synced.wait(0.05):
                    break

    def _run(self) -> None:
        """The thread: list, then watch until stopped; re-list on 410, back off on errors."""
        cache = self.cache
        stop = cache._stop
        self._wait_for_dependencies()
        need_list = True
        first_watch = True
        while not stop.is_set():
            watch_started: float | None = None
            try:
                if need_list:
                    self._list_and_replace()
                    need_list = False
                    first_watch = True
                    if self.installed is False:
                        if stop.wait(cache.crd_recheck_s):
                            break
                        need_list = True
                        continue
                if not first_watch:
                    self.watch_restarts += 1
                first_watch = False
                watch_started = time.monotonic()
                self._watch()
                self._failures = 0
            except _Gone as exc:
                log.info("%s: %s; re-listing", self.spec.name, exc)
                self.relists += 1
                need_list = True
            except _NotInstalled:
                log.info("%s: resource gone (404); marking not installed", self.spec.name)
                self._mark_not_installed()
                need_list = True
                if stop.wait(cache.crd_recheck_s):
                    break
            except Exception as exc:  # network, HTTP 5xx/429/403, bad JSON: back off and retry
                if stop.is_set():
                    break
                if stop.wait(self._failed(exc, watch_started)):
                    break
            finally:
                self.watch_open = False

    def _failed(self, exc: Exception, watch_started: float | None) -> float:
        """Count a failed list or watch and return the backoff delay (seconds) before retrying;
        a watch that had stayed open ``BACKOFF_RESET_S`` starts the backoff over."""
        self.errors += 1
        if watch_started is not None and time.monotonic() - watch_started >= BACKOFF_RESET_S:
            self._failures = 0  # the watch had worked for a while: start the backoff over
        self._failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:300]
        delay = self.cache._backoff(self._failures)
        log.warning("%s: %s; retrying in %.2fs", self.spec.name, self.last_error, delay)
        return delay

    def _request(self, query: list[tuple[str, str]], timeout):
        """GET the collection with ``query`` through ``cache._get``; the response is kept so
        ``close()`` can abort it (at once when the cache is already stopping)."""
        resp = self.cache._get(self.spec.path(self.version), query, timeout)
        with self._resp_lock:
            self._resp = resp
        if self.cache._stop.is_set():
            self.close()
        return resp

    def close(self) -> None:
        """Abort the request in flight (used by ``LiveCache.stop``)."""
        with self._resp_lock:
            resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:
                pass

    @staticmethod
    def _error(resp, what: str) -> CacheError:
        """The ``CacheError`` for a non-200 response (``_Gone`` on 410, ``_NotInstalled`` on
        404), with the Status ``message`` when the body has one; reads ≤ 64 KiB and releases."""
        try:
            body = resp.read(64 * 1024)
        except Exception:
            body = b""
        finally:
            resp.release_conn()
        message = ""
        try:
            st = _GENERIC.decode(body) if body else {}
            message = str(st.get("message") or "") if isinstance(st, dict) else ""
        except msgspec.DecodeError:
            message = body[:200].decode("utf-8", "replace")
        text = f"{what}: HTTP {resp.status}{': ' + message if message else ''}"
        if resp.status == 410:
            return _Gone(text, 410)
        if resp.status == 404:
            return _NotInstalled(text, 404)
        return CacheError(text, resp.status)

    # ---------------------------------------------------------- list
    def _list_and_replace(self) -> None:
        """List (trying the last served version first, then the others) and replace the store.

        Raises ``CacheError`` (404 included) for a required resource that no version serves; an
        optional one is marked not installed instead."""
        spec, cache = self.spec, self.cache
        versions = [self.version] + [v for v in spec.versions if v != self.version]
        last_404: CacheError | None = None
        for version in versions:
            self.version = version
            try:
                converted, rv = self._list_all()
            except _NotInstalled as exc:
                last_404 = exc
                continue
            self.lists += 1
            cache._replace(self, converted)
            self.rv = rv
            self.installed = True
            self.last_contact = time.monotonic()
            self._failures = 0
            self.synced.set()
            cache._changed.set()
            return
        if not spec.optional:
            raise last_404 or CacheError("not found", 404)
        self._mark_not_installed()

    def _mark_not_installed(self) -> None:
        """An absent optional resource: empty store, ``installed: false``, synced."""
        self.version = self.spec.versions[0]
        self.cache._replace(self, {})
        self.installed = False
        self.rv = ""
        self.synced.set()
        self.cache._changed.set()

    def _list_all(self) -> tuple[dict, str]:
        """Every page, each converted as it arrives (only one page of dicts alive at a time).

        Returns ({key: projection}, list resourceVersion). Raises ``_NotInstalled`` on 404,
        ``CacheError`` on other failures."""
        spec, cache = self.spec, self.cache
        restarts = 0
        while True:
            converted: dict[Any, Any] = {}
            cont = ""
            rv = ""
            try:
                while True:
                    query = [("limit", str(cache.page_size))]
                    if cont:
                        query.append(("continue", cont))
                    if spec.field_selector:
                        query.append(("fieldSelector", spec.field_selector))
                    resp = self._request(query, (cache.connect_timeout_s, cache.list_timeout_s))
                    if resp.status != 200:
                        raise self._error(resp, f"list {spec.path(self.version)}")
                    body = resp.data
                    resp.release_conn()
                    meta = self._list_page(body, converted)
                    del body
                    rv = str(meta.get("resourceVersion") or "")
                    cont = str(meta.get("continue") or "")
                    if not cont:
                        return converted, rv
                    if cache._stop.is_set():
                        raise CacheError("stopped")
            except _Gone:
                # The continue token expired mid-list: start over (bounded, then back off).
                restarts += 1
                if restarts > _LIST_RESTARTS:
                    raise CacheError("list continue token kept expiring", 410)

    # ---------------------------------------------------------- watch
    def _watch(self) -> None:
        """One watch stream from ``rv``: apply its events until it ends (or the cache stops)."""
        spec, cache = self.spec, self.cache
        timeout = int(random.uniform(*cache.watch_timeout_s))
        query = [("watch", "1"), ("resourceVersion", self.rv), ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(timeout))]
        if spec.field_selector:
            query.append(("fieldSelector", spec.field_selector))
        resp = self._request(query, (cache.connect_timeout_s, timeout + cache.watch_read_slack_s))
        if resp.status != 200:
            raise self._error(resp, f"watch {spec.path(self.version)}")
        self.watch_open = True
        self.last_contact = time.monotonic()
        buf = b""
        try:
            chunks = resp.read_chunked() if resp.chunked else iter(lambda: resp.read1(1 << 16), b"")
            for chunk in chunks:
                if buf:
                    chunk = buf + chunk
                lines = chunk.split(b"\n")
                buf = lines.pop()
                if lines:
                    self.apply_lines(lines)
                if cache._stop.is_set():
                    return
            if buf.strip():
                self.apply_lines([buf])
        finally:
            self.watch_open = False
            try:
                resp.release_conn()
            except Exception:
                pass
        self.last_contact = time.monotonic()  # a clean end: we were current until now

    def apply_lines(self, lines: Iterable[bytes]) -> int:
        """Decode and apply watch event lines; returns the events applied.

        Raises ``_Gone`` on an ERROR event with code 410 (after applying the events before it)
        and ``CacheError`` on any other ERROR event.
        """
        kind = self.spec.kind
        ops: list[tuple[Any, Any]] = []  # (key, value or None for delete)
        rv = self.rv
        err: CacheError | None = None
        n = 0
        for line in lines:
            if not line.strip():
                continue
            ev = _EVENT.decode(line)
            etype = ev.get("type")
            raw = ev.get("object")
            if etype == "BOOKMARK":
                meta = (_GENERIC.decode(raw) or {}).get("metadata") or {}
                rv = str(meta.get("resourceVersion") or rv)
                continue
            if etype == "ERROR":
                err = self._error_event(raw)
                break
            if raw is None or etype not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            obj = _decode_object(kind, raw)
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            n += 1
            if etype == "DELETED":
                ops.append((obj_key(obj), None))
                self._on_deleted(obj)
                continue
            kv = self._converted(obj, "keeping the previous state of an object:")
            if kv is _FAILED:
                continue
            ops.append((obj_key(obj), None) if kv is None else kv)
            if etype == "ADDED" and kv is not None:
                self._on_added(kv[1])
        if ops:
            self.cache._apply(self, ops)
        self.rv = rv
        now = time.monotonic()
        self.last_contact = now
        if n:
            self.events += n
            self.last_event = now
        if err is not None:
            raise err
        return n

    def _error_event(self, raw: msgspec.Raw | None) -> CacheError:
        """The error an ERROR watch event stands for: ``_Gone`` when its Status code is 410."""
        st = _GENERIC.decode(raw) if raw is not None else {}
        code = int(st.get("code") or 0) if isinstance(st, dict) else 0
        msg = f"watch {self.spec.path(self.version)}: ERROR event {code}: {st.get('message', '') if isinstance(st, dict) else st}"
        return _Gone(msg, 410) if code == 410 else CacheError(msg, code)

    # ---------------------------------------------------------- conversion
    def _converted(self, obj: Any, doing: str, convert: Callable[[Any], Any] | None = None) -> Any:
        """``(convert or self._convert)(obj)``, or ``_FAILED`` after counting and logging a
        conversion error ("<informer>: <doing> <error>")."""
        try:
            return (convert or self._convert)(obj)
        except AdapterError as exc:
            self.convert_errors += 1
            log.warning("%s: %s %s", self.spec.name, doing, exc)
            return _FAILED

    def _convert_into(self, obj: Mapping, converted: dict) -> None:
        """``converted[key] = projection`` for a listed object (a conversion error is counted
        and logged; the object is skipped)."""
        kv = self._converted(obj, "skipping")
        if kv is not _FAILED and kv is not None:
            converted[kv[0]] = kv[1]

    def status(self, now: float) -> dict:
        """JSON-ready state of this informer."""
        return {
            "synced": self.synced.is_set(),
            "installed": self.installed,
            "version": self.version if self.installed else None,
            "objects": len(self.store),
            "resource_version": self.rv,
            "watch_open": self.watch_open,
            "last_event_age_s": round(now - self.last_event, 3) if self.last_event else None,
            "last_contact_age_s": round(now - self.last_contact, 3) if self.last_contact else None,
            "events": self.events,
            "lists": self.lists,
            "watch_restarts": self.watch_restarts,
            "relists": self.relists,
            "errors": self.errors,
            "convert_errors": self.convert_errors,
            "last_error": self.last_error or None,
        }
