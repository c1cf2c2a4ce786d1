"""How the live cache projects Pods: the one kind with a fast list path, interning, and history.

Owns the Pod row's steps of the kinds table (``webhook.cache.kinds``), as ``PodSteps``, a mixin
of the projecting informer (``kinds._Informer``):

- ``_project_pod``: a decoded Pod → ``(key, BoundPod)``; a terminal pod (Succeeded/Failed) is
  not stored but teaches the run-time history.
- ``_list_pod_page``: a list page decoded with its items kept as raw JSON, each read through
  ``PodStruct`` and a memoising ``_PodReader`` (the JSON dump reader's path: same values,
  ~8 µs a pod instead of ~40), generically for anything odd; the collector pauses meanwhile.
- ``_learn_runtime`` / ``_note_arrival``: what the expected-wait estimator (``RuntimeHistory``)
  learns from watch events: run times of finished gangs and arrivals of new pods.

And ``PodInterner``: equal request maps and label sets shared, repeated strings interned, so a
150k-pod cluster's projection holds a few hundred distinct shapes.

Does not own: the pod converters themselves (``webhook.adapters.cluster``), the per-node Σ
requests (``webhook.cache.live``), list/watch (``webhook.cache.informer``).

Units: times are epoch seconds (``time.time()``), run times and limits seconds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

import msgspec

from ..adapters.cluster import _PodReader, pod_from_k8s, pod_is_terminal
from ..adapters.errors import AdapterError
from ..adapters.projection import POD_STRUCT as _POD_STRUCT
from ..adapters.projection import decode_any
from ..adapters.projection import decode_list as _decode_list
from ..adapters.projection import decode_object as _decode_object
from ..gcpause import gc_paused
from .informer import _FAILED, obj_key

__all__ = ["PodSteps", "PodInterner"]

#: A gang whose run time was learned this recently is not learned again (its other pods).
_LEARN_DEDUP_S = 600.0
_LEARN_DEDUP_KEYS = 4096
#: A pod ending (not Succeeded) within this of its limit was stopped at the limit.
_LIMIT_SLACK_S = 60.0
#: A pod reader's memos (shapes, label sets, owners, start times) are dropped past this many
#: entries: a long-running cache sees every start time and owner the cluster ever had.
_READER_MEMO_LIMIT = 200_000
#: Past this many distinct request maps (label sets) the interner's memo starts over.
_INTERN_MEMO_LIMIT = 100_000


class _PodPage(TypedDict, total=False):
    metadata: dict
    items: list[msgspec.Raw]


#: A pods list page: its items kept as raw JSON for ``PodSteps._convert_pods``.
_POD_PAGE = msgspec.json.Decoder(_PodPage)


class PodInterner:
    """Shares equal request maps and label sets between pods and interns their repeated strings
    (namespace, node, gang…). One per cache; its memos start over past ``_INTERN_MEMO_LIMIT``."""

    def __init__(self) -> None:
        self._req_memo: dict[tuple, Mapping[str, int]] = {}
        self._label_memo: dict[tuple, Mapping[str, str]] = {}

    def compact(self, pod):
        """``pod`` (a ``BoundPod`` not yet shared) with its request map and labels replaced by
        the shared equal ones and its strings interned; equal in value to ``pod``."""
        req = pod.requests
        key = tuple(req.items())
        shared = self._req_memo.get(key)
        if shared is None:
            if len(self._req_memo) > _INTERN_MEMO_LIMIT:
                self._req_memo.clear()
            shared = self._req_memo[key] = req
        labels = pod.labels
        if labels:  # equal label sets (a DaemonSet's, a ReplicaSet's pods) share one map
            lkey = tuple(labels.items())
            labels = self._label_memo.get(lkey)
            if labels is None:
                if len(self._label_memo) > _INTERN_MEMO_LIMIT:
                    self._label_memo.clear()
                labels = self._label_memo[lkey] = pod.labels
        intern = sys.intern
        return msgspec.structs.replace(  # BoundPod is frozen: a copy with the shared values
            pod, requests=shared, labels=labels, namespace=intern(pod.namespace), node_name=intern(pod.node_name),
            gang=intern(pod.gang), owner_kind=intern(pod.owner_kind), owner_name=intern(pod.owner_name),
            queue=intern(pod.queue), phase=intern(pod.phase))


class PodSteps:
    """The Pod row's steps, as methods of the projecting informer (``self.cache`` is the
    ``LiveCache``: ``_pc_values``/``_pc_default``, ``_compact_pod``, ``history``, ``_learned``).
    ``_reader`` / ``_reader_pcs`` hold the memoising reader and the PriorityClasses it was made for."""

    cache: Any
    spec: Any
    _reader: _PodReader | None
    _reader_pcs: tuple[Any, int]

    def _project_pod(self, obj: Mapping) -> tuple[Any, Any] | None:
        """(key, BoundPod) of a decoded pod, or None for a terminal one (after learning from it).

        Raises:
            AdapterError: the pod cannot be read (the converter's message names the field).
        """
        cache = self.cache
        if pod_is_terminal(obj):
            self._learn_runtime(obj)
            return None
        return obj_key(obj), cache._compact_pod(pod_from_k8s(obj, cache._pc_values, cache._pc_default))

    def _list_pod_page(self, body: bytes, converted: dict) -> Mapping:
        """One pods list page into ``converted`` (items as raw JSON through ``_convert_pods``;
        a page that is odd but valid JSON generically); returns the page's metadata."""
        with gc_paused():  # many short-lived objects a page: no collections meanwhile
            try:
                page, raw_items = _POD_PAGE.decode(body), True
            except msgspec.ValidationError:  # odd but valid JSON: read generically
                page, raw_items = _decode_list("Pod", body), False
            del body
            meta = page.get("metadata") or {}
            if raw_items:
                self._convert_pods(page.get("items") or (), converted)
            else:
                for obj in page.get("items") or ():
                    self._convert_into(obj, converted)
            del page
        return meta

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
                self._learn_runtime(decode_any(raw))  # as _project_pod does for a terminal pod
                continue
            p.kind, p.apiVersion, p.raw = "Pod", "v1", raw
            pod = self._converted(p, "skipping", reader.projected)
            if pod is _FAILED:
                continue
            ns = p.metadata.namespace  # the key as obj_key makes it (watch events use that)
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
