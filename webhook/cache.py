"""LiveCache: list+watch informers feeding an immutable ``ClusterSnapshot`` (a ``SnapshotSource``).

One informer (one thread) per resource, each mirroring client-go's reflector:

1. **List**, paged (``limit=500`` + ``continue``), as a consistent read; a continue token that
   expired (410) restarts the list. The list's ``metadata.resourceVersion`` is where the watch
   starts.
2. **Watch** from that resourceVersion with ``allowWatchBookmarks=true`` and a server-side
   ``timeoutSeconds``; ADDED/MODIFIED/DELETED update the store, BOOKMARK only advances the
   resourceVersion, an ERROR event with code 410 (or HTTP 410) means the resourceVersion was
   compacted away: **re-list**. A stream that ends normally is re-opened from the last
   resourceVersion (a "watch restart"); a failed one is re-opened after an exponential backoff
   with jitter, and a failing list is retried the same way.
3. A resource whose API group is not installed (404 on the list of every version tried, e.g.
   no Kueue or no Volcano CRDs) stays empty, is reported ``installed: false`` and counts as
   synced; the list is retried every ``crd_recheck_s`` in case the CRDs appear.

The store holds only the engine's projection of each object (``webhook.adapters.cluster``
converters: ``Node``, ``BoundPod``, ``ClusterQueue``…), never the decoded dict: JSON bytes are
decoded with msgspec, Pods and Nodes straight into a trimmed ``TypedDict`` projection holding
only the fields the converters read (``webhook.adapters.projection``, shared with the dump
reader). Pods are filtered server-side to non-terminal phases
(``status.phase!=Succeeded,status.phase!=Failed``); a pod that becomes terminal arrives as
DELETED, as the API server's watch cache translates it. Per-node Σ requests are maintained on
every pod event (bind, delete, rebind, request change), so a snapshot does not re-sum pods.

``snapshot()`` returns the last published ``ClusterSnapshot``; a builder thread republishes it
at most every ``rebuild_interval_s`` (0.5 s) when something changed. The admission path never
waits on the network. ``ready`` turns True once every informer has synced and a snapshot of the
synced state is published; then ``gc.freeze()`` moves the long-lived projection out of the
collector's reach (FIELD-NOTES §9).

Only the ``kubernetes`` client's configuration, auth and REST layer are used (in-cluster config
or KUBECONFIG), with ``_preload_content``-style raw responses; no client models are built.
"""

from __future__ import annotations

import gc
import logging
import random
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

import msgspec

from .adapters.cluster import (
    _PodReader,
    cluster_queue_from_k8s,
    cohort_from_k8s,
    local_queue_from_k8s,
    node_from_k8s,
    pod_from_k8s,
    pod_group_from_k8s,
    pod_is_terminal,
    priority_class_from_k8s,
    resource_flavor_from_k8s,
    volcano_queue_from_k8s,
)
from .adapters.disruption import disruption_budget_from_k8s
from .adapters.errors import AdapterError
from .adapters.projection import GENERIC as _GENERIC
from .adapters.projection import decode_list as _decode_list
from .adapters.projection import POD_STRUCT as _POD_STRUCT
from .adapters.projection import decode_any
from .adapters.projection import decode_object as _decode_object
from .adapters.workload import workload_from_k8s
from .engine.model import KueueState, VolcanoState, frozen_map
from .engine.snapshot import ClusterSnapshot
from .engine.wait import RuntimeHistory
from .gcpause import gc_paused

__all__ = ["LiveCache", "ResourceSpec", "DEFAULT_RESOURCES", "POD_FIELD_SELECTOR", "CacheError", "default_api_client"]

log = logging.getLogger("gangcheck.cache")

#: A gang whose run time was learned this recently is not learned again (its other pods).
_LEARN_DEDUP_S = 600.0
_LEARN_DEDUP_KEYS = 4096
#: A pod ending (not Succeeded) within this of its limit was stopped at the limit.
_LIMIT_SLACK_S = 60.0

#: Pods that hold resources: the server-side filter the pod informer lists and watches with.
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
#: A watch that stayed open this long before failing resets the retry backoff (client-go: 2 min).
BACKOFF_RESET_S = 120.0


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
            LocalQueue, Cohort, Queue, VolcanoPodGroup, CoschedPodGroup or PolicyConfigMap.
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


#: What the cache reads (DESIGN.md "Cache"); Kueue tries v1beta1 then v1beta2.
DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = (
    ResourceSpec("priorityclasses", "PriorityClass", "scheduling.k8s.io", ("v1",), "priorityclasses"),
    ResourceSpec("nodes", "Node", "", ("v1",), "nodes"),
    ResourceSpec("pods", "Pod", "", ("v1",), "pods", field_selector=POD_FIELD_SELECTOR),
    ResourceSpec("kueue.resourceflavors", "ResourceFlavor", "kueue.x-k8s.io", ("v1beta1", "v1beta2"), "resourceflavors", optional=True),
    ResourceSpec("kueue.clusterqueues", "ClusterQueue", "kueue.x-k8s.io", ("v1beta1", "v1beta2"), "clusterqueues", optional=True),
    ResourceSpec("kueue.localqueues", "LocalQueue", "kueue.x-k8s.io", ("v1beta1", "v1beta2"), "localqueues", optional=True),
    ResourceSpec("kueue.cohorts", "Cohort", "kueue.x-k8s.io", ("v1beta1", "v1beta2", "v1alpha1"), "cohorts", optional=True),
    ResourceSpec("kueue.workloads", "Workload", "kueue.x-k8s.io", ("v1beta1", "v1beta2"), "workloads", optional=True),
    ResourceSpec("poddisruptionbudgets", "PodDisruptionBudget", "policy", ("v1",), "poddisruptionbudgets"),
    ResourceSpec("volcano.queues", "Queue", "scheduling.volcano.sh", ("v1beta1",), "queues", optional=True),
    ResourceSpec("volcano.podgroups", "VolcanoPodGroup", "scheduling.volcano.sh", ("v1beta1",), "podgroups", optional=True),
    ResourceSpec("coscheduling.podgroups", "CoschedPodGroup", "scheduling.x-k8s.io", ("v1alpha1",), "podgroups", optional=True),
)


# ---------------------------------------------------------------- decoding projections
# Pods and Nodes are decoded straight into the trimmed projections of
# ``webhook.adapters.projection`` (only the fields the cluster converters read; tests/test_cache.py
# checks that converting the projection equals converting the full object).


class _Event(TypedDict, total=False):
    type: str
    object: msgspec.Raw


_EVENT = msgspec.json.Decoder(_Event)


class _PodPage(TypedDict, total=False):
    metadata: dict
    items: list[msgspec.Raw]


#: ``_Informer._converted``'s answer for an object that could not be converted.
_FAILED = object()
#: A pods list page: its items kept as raw JSON for ``_Informer._convert_pods``.
_POD_PAGE = msgspec.json.Decoder(_PodPage)
#: A pod reader's memos (shapes, label sets, owners, start times) are dropped past this many
#: entries: a long-running cache sees every start time and owner the cluster ever had.
_READER_MEMO_LIMIT = 200_000


def _obj_key(obj: Mapping) -> Any:
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


# ---------------------------------------------------------------- the informer


class _Informer:
    """List+watch of one resource in its own thread (see the module doc for the protocol)."""

    def __init__(self, cache: "LiveCache", spec: ResourceSpec) -> None:
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
        self._reader: _PodReader | None = None
        self._reader_pcs: tuple[Any, int] = (None, 0)  # the PriorityClasses it was made for
        self.thread = threading.Thread(target=self._run, name=f"informer-{spec.name}", daemon=True)

    # ---------------------------------------------------------- thread
    def _run(self) -> None:
        cache = self.cache
        stop = cache._stop
        if self.spec.kind == "Pod":
            # Pods resolve priorityClassName through PriorityClasses: let those sync first.
            pcs = cache._informers.get("priorityclasses")
            deadline = time.monotonic() + cache.dependency_wait_s
            while pcs is not None and not stop.is_set() and time.monotonic() < deadline:
                if pcs.synced.wait(0.05):
                    break
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
                self.errors += 1
                if watch_started is not None and time.monotonic() - watch_started >= BACKOFF_RESET_S:
                    self._failures = 0  # the watch had worked for a while: start the backoff over
                self._failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
                delay = cache._backoff(self._failures)
                log.warning("%s: %s; retrying in %.2fs", self.spec.name, self.last_error, delay)
                if stop.wait(delay):
                    break
            finally:
                self.watch_open = False

    def _request(self, query: list[tuple[str, str]], timeout):
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
                    if spec.kind == "Pod":
                        with gc_paused():  # many short-lived objects a page: no collections meanwhile
                            try:
                                page, raw_items = _POD_PAGE.decode(body), True
                            except msgspec.ValidationError:  # odd but valid JSON: read generically
                                page, raw_items = _decode_list("Pod", body), False
                            del body
                            meta = page.get("metadata") or {}
                            rv = str(meta.get("resourceVersion") or "")
                            if raw_items:
                                self._convert_pods(page.get("items") or (), converted)
                            else:
                                for obj in page.get("items") or ():
                                    self._convert_into(obj, converted)
                            del page
                    else:
                        page = _decode_list(spec.kind, body)
                        del body
                        meta = page.get("metadata") or {}
                        rv = str(meta.get("resourceVersion") or "")
                        for obj in page.get("items") or ():
                            self._convert_into(obj, converted)
                        del page
                    cont = str(meta.get("continue") or "")
                    if not cont:
                        return converted, rv
                    if cache._stop.is_set():
                        raise CacheError("stopped")
            except _Gone:
                # The continue token expired mid-list: start over (bounded, then back off).
                restarts += 1
                if restarts > 3:
                    raise CacheError("list continue token kept expiring", 410)

    # ---------------------------------------------------------- watch
    def _watch(self) -> None:
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
                st = _GENERIC.decode(raw) if raw is not None else {}
                code = int(st.get("code") or 0) if isinstance(st, dict) else 0
                msg = f"watch {self.spec.path(self.version)}: ERROR event {code}: {st.get('message', '') if isinstance(st, dict) else st}"
                err = _Gone(msg, 410) if code == 410 else CacheError(msg, code)
                break
            if raw is None or etype not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            obj = _decode_object(kind, raw)
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            n += 1
            if etype == "DELETED":
                ops.append((_obj_key(obj), None))
                if kind == "Pod":
                    self._learn_runtime(obj)
                continue
            kv = self._converted(obj, "keeping the previous state of an object:")
            if kv is _FAILED:
                continue
            ops.append((_obj_key(obj), None) if kv is None else kv)
            if etype == "ADDED" and kind == "Pod" and kv is not None:
                self._note_arrival(kv[1])
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

    def _learn_runtime(self, obj: Mapping) -> None:
        """Feed ``cache.history`` with a gang that finished: its run time = now − status.startTime
        and its limit (activeDeadlineSeconds, Kueue's maximum execution time, the runtime
        annotation), from which the estimator learns how much of their limit runs use.

        A pod reaching Succeeded leaves the watch's field selector and arrives as DELETED at
        once, so the time it is seen stands for its finish time (within the watch's latency).
        A pod that ends otherwise (Failed, or deleted — Kueue evicts at the maximum execution
        time) once it has run its limit was stopped at the limit: a run of exactly the limit
        (the pod projection keeps no status.reason to say DeadlineExceeded). Other failures and
        deletions say nothing about a normal run time. One sample per gang: its pods end
        together and the estimator's laws are per gang (a gang learned within the last
        ``_LEARN_DEDUP_S`` is not learned again).
        """
        phase = (obj.get("status") or {}).get("phase")
        try:
            p = pod_from_k8s(obj)
        except AdapterError:
            return
        if p.start_time is None:
            return
        now = time.time()
        runtime = now - p.start_time
        limit = p.runtime_limit_s if p.runtime_limit_s is not None else p.deadline_s
        if phase != "Succeeded":
            if limit is None or runtime < limit - _LIMIT_SLACK_S:
                return
            runtime = limit
        if runtime <= 0:
            return
        key = p.gang or f"Pod/{p.namespace}/{p.name}"
        learned = self.cache._learned
        with self.cache._learned_lock:
            last = learned.get(key)
            if last is not None and now - last < _LEARN_DEDUP_S:
                return
            learned[key] = now
            learned.move_to_end(key)
            while len(learned) > _LEARN_DEDUP_KEYS:
                learned.popitem(last=False)
        self.cache.history.add(p.queue, p.owner_kind, runtime, limit, now)

    def _note_arrival(self, p) -> None:
        """Feed ``cache.history`` with a pod the watch saw ADDED (created), at the cache's clock:
        gang arrivals, the estimator's rate of later higher-priority submissions. Pods of the
        first LIST and of a relist are not arrivals (the pod projection keeps no
        creationTimestamp to tell when they were created)."""
        limit = p.runtime_limit_s if p.runtime_limit_s is not None else p.deadline_s
        member = f"{p.namespace}/{p.name}"
        self.cache.history.add_arrival(member, p.gang or f"Pod/{member}", time.time(), p.priority, p.requests,
                                       p.queue, p.owner_kind, limit)

    # ---------------------------------------------------------- projection
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

    def _convert_pods(self, raws: Iterable[msgspec.Raw], converted: dict) -> None:
        """A page of listed pods (raw JSON objects) into ``converted``, as ``_convert_into``
        would: through ``PodStruct`` and a memoising ``_PodReader`` (the JSON dump reader's
        path: same values, ~8 µs a pod instead of ~40), generically for anything odd."""
        cache = self.cache
        reader = self._pod_reader()
        compact = cache._compact_pod
        for raw in raws:
            try:
                p = _POD_STRUCT.decode(raw)
            except msgspec.ValidationError:
                self._convert_into(_decode_object("Pod", raw), converted)
                continue
            status = p.status
            if status is not None and (status.phase == "Succeeded" or status.phase == "Failed"):
                self._learn_runtime(decode_any(raw))  # as _convert does for a terminal pod
                continue
            p.kind, p.apiVersion, p.raw = "Pod", "v1", raw
            pod = self._converted(p, "skipping", reader.projected)
            if pod is _FAILED:
                continue
            ns = p.metadata.namespace  # the key as _obj_key makes it (watch events use that)
            converted[(ns, pod.name) if ns else pod.name] = compact(pod)

    def _pod_reader(self) -> _PodReader:
        """The pod reader for the cache's current PriorityClasses (a new one when they changed
        or its memos grew past ``_READER_MEMO_LIMIT`` entries)."""
        cache = self.cache
        r = self._reader
        pcs = (cache._pc_values, cache._pc_default)
        if r is None or self._reader_pcs[0] is not pcs[0] or self._reader_pcs[1] != pcs[1] or r.memo_size() > _READER_MEMO_LIMIT:
            r = self._reader = _PodReader(*pcs)
            self._reader_pcs = pcs
        return r

    def _convert(self, obj: Mapping) -> tuple[Any, Any] | None:
        """(key, projection), or None when the object must not be stored (a terminal pod)."""
        kind = self.spec.kind
        cache = self.cache
        if kind == "Pod":
            if pod_is_terminal(obj):
                self._learn_runtime(obj)
                return None
            return _obj_key(obj), cache._compact_pod(pod_from_k8s(obj, cache._pc_values, cache._pc_default))
        if kind == "Node":
            return _obj_key(obj), node_from_k8s(obj)
        if kind == "PriorityClass":
            name, value, is_default = priority_class_from_k8s(obj)
            return name, (value, is_default)
        if kind == "ResourceFlavor":
            v = resource_flavor_from_k8s(obj)
            return v.name, v
        if kind == "ClusterQueue":
            v = cluster_queue_from_k8s(obj)
            return v.name, v
        if kind == "LocalQueue":
            v = local_queue_from_k8s(obj)
            return (v.namespace, v.name), v
        if kind == "Cohort":
            v = cohort_from_k8s(obj)
            return v.name, v
        if kind == "Queue":
            v = volcano_queue_from_k8s(obj)
            return v.name, v
        if kind == "Workload":
            v = workload_from_k8s(obj)
            return (v.namespace, v.name), v
        if kind == "PodDisruptionBudget":
            v = disruption_budget_from_k8s(obj)
            return (v.namespace, v.name), v
        if kind in ("VolcanoPodGroup", "CoschedPodGroup"):
            v = pod_group_from_k8s(obj)
            return (v.namespace, v.name), v
        if kind == "PolicyConfigMap":
            data = obj.get("data") or {}
            return _obj_key(obj), {str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {}
        raise AdapterError(f"no projection for kind {kind}")

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


# ---------------------------------------------------------------- the cache


class LiveCache:
    """A ``SnapshotSource`` kept current by list+watch informers.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (its configuration gives the host, TLS
            and auth); None → ``default_api_client()`` (in-cluster, else KUBECONFIG).
        resources: the resources to read (default ``DEFAULT_RESOURCES``).
        policy_configmap: ``(namespace, name)`` of the policy ConfigMap to watch, or None.
        on_policy: called from the informer thread with the ConfigMap's ``data`` (dict) when it
            appears or changes, and with None when it is absent after the first sync or deleted.
            Exceptions it raises are logged, never propagated.
        page_size: list page size (``limit``). rebuild_interval_s: minimum seconds between two
            snapshot rebuilds (stretched to twice the last build's duration when that is
            longer, so building never takes more than a third of the time). watch_timeout_s: (lo, hi) range of the server-side watch
            ``timeoutSeconds`` (client-go uses 5–10 min). backoff_base_s / backoff_max_s:
            exponential backoff on errors, with jitter (delay × U(0.5, 1)). crd_recheck_s: how
            often an absent CRD is listed again. freeze_gc: ``gc.freeze()`` after the first sync.

    Call ``start()``, then read ``ready``/``snapshot()``; ``stop()`` ends and joins the threads.
    A silent half-open watch connection is noticed by the socket read timeout (the watch's
    ``timeoutSeconds`` + ``watch_read_slack_s``), after which the watch is re-opened.

    Raises:
        kubernetes.config.ConfigException: no ``api_client`` given and no in-cluster config or
            kubeconfig found.
    """

    def __init__(
        self,
        api_client: Any = None,
        *,
        resources: Iterable[ResourceSpec] = DEFAULT_RESOURCES,
        policy_configmap: tuple[str, str] | None = None,
        on_policy: Callable[[dict | None], None] | None = None,
        page_size: int = 500,
        rebuild_interval_s: float = 0.5,
        watch_timeout_s: tuple[float, float] = (300.0, 600.0),
        watch_read_slack_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        list_timeout_s: float = 120.0,
        backoff_base_s: float = 0.8,
        backoff_max_s: float = 30.0,
        crd_recheck_s: float = 300.0,
        dependency_wait_s: float = 10.0,
        freeze_gc: bool = True,
        source: str = "live",
    ) -> None:
        self._own_client = api_client is None
        self.api_client = api_client if api_client is not None else default_api_client()
        specs = list(resources)
        if policy_configmap is not None:
            ns, name = policy_configmap
            specs.append(ResourceSpec("policy", "PolicyConfigMap", "", ("v1",), "configmaps", namespace=ns, field_selector=f"metadata.name={name}"))
        self.on_policy = on_policy
        self.page_size = page_size
        self.rebuild_interval_s = rebuild_interval_s
        self.watch_timeout_s = watch_timeout_s
        self.watch_read_slack_s = watch_read_slack_s
        self.connect_timeout_s = connect_timeout_s
        self.list_timeout_s = list_timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.crd_recheck_s = crd_recheck_s
        self.dependency_wait_s = dependency_wait_s
        self.freeze_gc = freeze_gc
        self.source = source

        #: What the expected-wait estimator learns from: run times of gangs seen finishing
        #: (Succeeded, or stopped at their limit) per (queue, owner kind), with their limits,
        #: and pods the watch sees created (gang arrivals), from now on. Bounded memory.
        self.history = RuntimeHistory()
        self.history.observe_from(time.time())
        self._learned: OrderedDict[str, float] = OrderedDict()   # gang → when its run time was learned
        self._learned_lock = threading.Lock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._generation = 0
        self._informers: dict[str, _Informer] = {}
        for s in specs:
            self._informers[s.name] = _Informer(self, s)
        self._by_kind: dict[str, list[_Informer]] = {}
        for inf in self._informers.values():
            self._by_kind.setdefault(inf.spec.kind, []).append(inf)
        self._used: dict[str, dict[str, int]] = {}  # node → Σ requests of pods bound to it (+ "pods")
        self._pc_values: dict[str, int] = {}
        self._pc_default = 0
        self._req_memo: dict[tuple, Mapping[str, int]] = {}
        self._label_memo: dict[tuple, Mapping[str, str]] = {}
        self._policy_data: dict | None = None
        self._policy_reported = False
        self._snapshot = ClusterSnapshot((), source=source)
        self._snapshot_time = time.monotonic()
        self._snapshot_generation = -1
        self._ready = False
        self._started = 0.0
        self._sync_seconds: float | None = None
        self._builder = threading.Thread(target=self._build_loop, name="cache-snapshot", daemon=True)
        self.builds = 0
        self.build_errors = 0
        self.last_build_s = 0.0

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "LiveCache":
        """Start every informer and the snapshot builder; returns self (non-blocking)."""
        self._started = time.monotonic()
        for inf in self._informers.values():
            inf.thread.start()
        self._builder.start()
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until ``ready`` (or ``timeout`` seconds); returns ``ready``. Not for the admission path."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready and not self._stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        return self._ready

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every thread: abort open requests, join informers and the builder (≤ ``timeout`` s)."""
        self._stop.set()
        self._changed.set()
        for inf in self._informers.values():
            inf.close()
        deadline = time.monotonic() + timeout
        for inf in self._informers.values():
            if inf.thread.is_alive():
                inf.thread.join(max(0.0, deadline - time.monotonic()))
        if self._builder.is_alive():
            self._builder.join(max(0.0, deadline - time.monotonic()))
        if self._own_client:
            try:
                self.api_client.close()
            except Exception:
                pass

    def __enter__(self) -> "LiveCache":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------ SnapshotSource
    @property
    def ready(self) -> bool:
        """True once every informer has synced and a snapshot of that state is published."""
        return self._ready

    def snapshot(self) -> ClusterSnapshot:
        """The last published snapshot (immutable; never blocks, never calls the API server)."""
        return self._snapshot

    def age_seconds(self) -> float:
        """Seconds the view may lag the cluster: over installed informers, 0 while a watch
        stream is open, else seconds since its last list, event, bookmark or clean stream end.
        Before the first sync: seconds since ``start()``."""
        now = time.monotonic()
        if not self._ready:
            return now - self._started if self._started else 0.0
        worst = 0.0
        for inf in self._informers.values():
            if inf.installed is False or inf.watch_open:
                continue
            worst = max(worst, now - inf.last_contact)
        return worst

    def status(self) -> dict:
        """JSON-ready state for /readyz and /metrics: ready, age, sizes and per informer:
        synced, installed, objects, last event age, watch restarts, relists, errors."""
        now = time.monotonic()
        snap = self._snapshot
        return {
            "source": self.source,
            "kind": "live",
            "ready": self._ready,
            "synced": all(inf.synced.is_set() for inf in self._informers.values()),
            "age_s": round(self.age_seconds(), 3),
            "sync_s": None if self._sync_seconds is None else round(self._sync_seconds, 3),
            "nodes": len(snap.nodes),
            "pods": len(snap.pods),
            "snapshot_age_s": round(now - self._snapshot_time, 3),
            "snapshot_builds": self.builds,
            "snapshot_build_s": round(self.last_build_s, 3),
            "informers": {name: inf.status(now) for name, inf in self._informers.items()},
        }

    # ------------------------------------------------------------ for tests and benchmarks
    def informer_status(self, name: str) -> dict:
        """``status()["informers"][name]``."""
        return self._informers[name].status(time.monotonic())

    def apply_watch_lines(self, name: str, lines: Iterable[bytes]) -> int:
        """Apply watch event lines (``{"type":…,"object":…}`` JSON) to informer ``name`` as if
        they came from its stream: decode, convert, update the store and per-node usage.
        Returns the events applied. Meant for benchmarks of the apply path."""
        return self._informers[name].apply_lines(lines)

    def node_used(self, node: str) -> dict[str, int]:
        """A copy of the incrementally maintained Σ requests of pods bound to ``node``."""
        with self._lock:
            return dict(self._used.get(node, {}))

    # ------------------------------------------------------------ internals
    def _get(self, path: str, query: list[tuple[str, str]], timeout):
        """GET through the kubernetes client's REST layer (auth headers, TLS, proxy); returns
        the raw urllib3 response, body not read."""
        api = self.api_client
        method, url, headers, _body, _post = api.param_serialize(
            "GET", path, query_params=query, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
        )
        return api.call_api(method, url, header_params=headers, _request_timeout=timeout).response

    def _backoff(self, failures: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_base_s * (2 ** min(failures - 1, 30)))
        return delay * random.uniform(0.5, 1.0)

    def _compact_pod(self, pod):
        """Share equal request maps and intern repeated strings (namespace, node, gang…): a
        150k-pod cluster has a few hundred distinct shapes. The pod is not yet shared."""
        req = pod.requests
        key = tuple(req.items())
        shared = self._req_memo.get(key)
        if shared is None:
            if len(self._req_memo) > 100_000:
                self._req_memo.clear()
            shared = self._req_memo[key] = req
        labels = pod.labels
        if labels:  # equal label sets (a DaemonSet's, a ReplicaSet's pods) share one map
            lkey = tuple(labels.items())
            labels = self._label_memo.get(lkey)
            if labels is None:
                if len(self._label_memo) > 100_000:
                    self._label_memo.clear()
                labels = self._label_memo[lkey] = pod.labels
        intern = sys.intern
        return msgspec.structs.replace(  # BoundPod is frozen: a copy with the shared values
            pod, requests=shared, labels=labels, namespace=intern(pod.namespace), node_name=intern(pod.node_name),
            gang=intern(pod.gang), owner_kind=intern(pod.owner_kind), owner_name=intern(pod.owner_name),
            queue=intern(pod.queue), phase=intern(pod.phase))

    @staticmethod
    def _add_used(used: dict[str, dict[str, int]], pod, sign: int) -> None:
        node = pod.node_name
        if not node:
            return
        u = used.get(node)
        if u is None:
            u = used[node] = {"pods": 0}
        for r, v in pod.requests.items():
            u[r] = u.get(r, 0) + sign * v
        u["pods"] = u.get("pods", 0) + sign

    def _apply(self, inf: _Informer, ops: list[tuple[Any, Any]]) -> None:
        """Apply (key, value|None) operations to ``inf``'s store under the lock."""
        store = inf.store
        kind = inf.spec.kind
        with self._lock:
            if kind == "Pod":
                used, add = self._used, self._add_used
                for key, value in ops:
                    old = store.pop(key, None) if value is None else store.get(key)
                    if old is not None:
                        add(used, old, -1)
                    if value is not None:
                        store[key] = value
                        add(used, value, 1)
            else:
                for key, value in ops:
                    if value is None:
                        store.pop(key, None)
                    else:
                        store[key] = value
            self._generation += 1
        self._after_change(inf)

    def _replace(self, inf: _Informer, new: dict) -> None:
        """Swap ``inf``'s whole store (after a list), recomputing per-node usage for pods."""
        with self._lock:
            inf.store = new
            if inf.spec.kind == "Pod":
                used: dict[str, dict[str, int]] = {}
                for pod in new.values():
                    self._add_used(used, pod, 1)
                self._used = used
            self._generation += 1
        self._after_change(inf)

    def _after_change(self, inf: _Informer) -> None:
        kind = inf.spec.kind
        if kind == "PriorityClass":
            values = {name: v for name, (v, _d) in inf.store.items()}
            defaults = [v for v, d in inf.store.values() if d]
            self._pc_values = values
            self._pc_default = min(defaults) if defaults else 0  # the API server allows one; be safe
        elif kind == "PolicyConfigMap":
            data = next(iter(inf.store.values()), None)
            if data != self._policy_data or not self._policy_reported:
                self._policy_data = data
                self._policy_reported = True
                if self.on_policy is not None:
                    try:
                        self.on_policy(None if data is None else dict(data))
                    except Exception:
                        log.exception("policy callback failed")
        self._changed.set()

    def _build(self) -> ClusterSnapshot:
        """Copy the stores under the lock (cheap), build the snapshot outside it."""
        def values(kind: str) -> dict:
            out: dict = {}
            for inf in self._by_kind.get(kind, ()):
                out.update(inf.store)
            return out

        with self._lock:
            gen = self._generation
            nodes = tuple(v for inf in self._by_kind.get("Node", ()) for v in inf.store.values())
            pods = tuple(v for inf in self._by_kind.get("Pod", ()) for v in inf.store.values())
            used = {k: dict(v) for k, v in self._used.items()}
            flavors, cqs, lqs, cohorts = values("ResourceFlavor"), values("ClusterQueue"), values("LocalQueue"), values("Cohort")
            workloads = values("Workload")
            budgets = values("PodDisruptionBudget")
            vqueues = values("Queue")
            pgs = values("CoschedPodGroup")
            pgs.update(values("VolcanoPodGroup"))
            pcs = dict(self._pc_values)
        snap = ClusterSnapshot(
            nodes,
            pods,
            kueue=KueueState(frozen_map(flavors), frozen_map(cqs), frozen_map(lqs), frozen_map(cohorts), frozen_map(workloads)),
            volcano=VolcanoState(frozen_map(vqueues), frozen_map(pgs)),
            priority_classes=pcs,
            source=self.source,
            node_used=used,
            disruption_budgets=budgets.values(),
        )
        self._snapshot_generation = gen
        return snap

    def _build_loop(self) -> None:
        last = 0.0
        while not self._stop.is_set():
            self._changed.wait(1.0)
            if self._stop.is_set():
                break
            if not self._changed.is_set():
                continue
            if not all(inf.synced.is_set() for inf in self._informers.values()):
                # Clear, then look again: an informer sets ``synced`` before ``_changed``, so a
                # sync that completes between the check above and this clear() is seen by the
                # second check. Clearing after a single check lost that wake-up, and the cache
                # then stayed not-ready until some unrelated event arrived (never, if quiet).
                self._changed.clear()
                if not all(inf.synced.is_set() for inf in self._informers.values()):
                    continue
            # at most every rebuild_interval_s, and never more than a third of the time
            # building (a 500k-pod snapshot takes ~0.7 s): events keep most of the GIL
            gap = max(self.rebuild_interval_s, 2.0 * self.last_build_s)
            wait = gap - (time.monotonic() - last)
            if wait > 0 and self._ready and self._stop.wait(wait):
                break
            self._changed.clear()
            try:
                tb = time.perf_counter()
                snap = self._build()
                self.last_build_s = time.perf_counter() - tb
            except Exception:
                self.build_errors += 1
                log.exception("snapshot build failed; keeping the previous snapshot")
                continue
            last = time.monotonic()
            self._snapshot = snap
            self._snapshot_time = last
            self.builds += 1
            if not self._ready:
                self._sync_seconds = last - self._started
                if self.freeze_gc:
                    gc.collect()
                    gc.freeze()
                self._ready = True
                log.info("cache synced in %.2fs: %d nodes, %d pods", self._sync_seconds, len(snap.nodes), len(snap.pods))
