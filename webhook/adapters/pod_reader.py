"""The memoised fast path of ``pod_from_k8s``, for many Pods at once (dumps and the live cache).

Owns: ``_PodReader`` — plain-dict pods (``__call__``), pods decoded as ``PodStruct`` by the JSON
dump reader and the cache (``projected``), and pods converted before the PriorityClasses are
known (``deferred`` → ``ConvertedPod``, which ``build_snapshot`` resolves) — and its memo keys.
Does not own the rules: every value is ``pods.pod_from_k8s``'s, and anything the fast path does
not recognise as plain JSON goes to ``pod_from_k8s`` itself, so values and error messages are
exactly its own. Keep the two in step: ``tests/test_dump_fast.py`` compares them field by field.

Shapes: memos keyed by hashable views of the input (tuples of str quantities, or raw JSON
bytes for ``PodStruct`` sub-documents); values as ``pod_from_k8s`` returns them (requests in
scheduler units, times in epoch seconds). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ..engine.model import EMPTY, BoundPod, HostPort, frozen_map
from .errors import AdapterError
from .meta import parse_time
from .podspec import effective_requests
from .pods import (
    EXPECTED_RUNTIME_ANNOTATION,
    GANG_ANNOTATION_VOLCANO,
    GANG_LABEL_COSCHEDULING,
    GANG_LABEL_KUEUE,
    MAX_EXEC_TIME_LABEL,
    QUEUE_LABEL,
    deadline_seconds,
    gang_of,
    host_ports,
    owner_of,
    pod_from_k8s,
    pod_health,
    runtime_limit,
)
from .priority import class_priority
from .projection import GENERIC, PodStruct, _PodSpecStruct, _PodStatusStruct, decode_any

__all__ = ["_PodReader", "ConvertedPod"]

_NO_SPEC = _PodSpecStruct()
_NO_STATUS = _PodStatusStruct()
_NO_OWNER: tuple[str, str, None] = ("", "", None)
#: Marks a start time not yet in the memo (None is a memoised value).
_NO_TIME = object()
# Annotation keys the fast path looks for in the raw bytes (exact unless escaped; a backslash
# anywhere sends the annotations through the generic decoder).
_VOLCANO_GROUP_KEY = f'"{GANG_ANNOTATION_VOLCANO}"'.encode()
_RUNTIME_KEY = f'"{EXPECTED_RUNTIME_ANNOTATION}"'.encode()


class _Odd(Exception):
    """Input the fast pod reader does not handle: ``pod_from_k8s`` reads it (or reports it)."""


def _quantities_key(value: Any) -> tuple | None:
    """A hashable key for a ``{resource: quantity}`` map of strings (None for None)."""
    if value is None:
        return None
    if type(value) is not dict:
        raise _Odd
    items = tuple(value.items())
    for k, v in items:
        if type(k) is not str or type(v) is not str:
            raise _Odd
    return items


def _containers_key(value: Any) -> tuple:
    """A hashable key for a container list: everything ``effective_requests`` and
    ``host_ports`` read from it (requests, limits, restartPolicy == Always, host ports)."""
    if value is None:
        return ()
    if type(value) is not list:
        raise _Odd
    out = []
    for c in value:
        if type(c) is not dict:
            raise _Odd
        res = c.get("resources")
        if res is None:
            rk = None
        elif type(res) is dict:
            rk = (_quantities_key(res.get("requests")), _quantities_key(res.get("limits")))
        else:
            raise _Odd
        ports = c.get("ports")
        pk = None
        if ports:
            if type(ports) is not list:
                raise _Odd
            hp = []
            for p in ports:
                if type(p) is not dict:
                    raise _Odd
                if p.get("hostPort"):
                    port, proto, ip = p.get("hostPort"), p.get("protocol"), p.get("hostIP")
                    if type(port) is not int or not (proto is None or type(proto) is str) or not (ip is None or type(ip) is str):
                        raise _Odd
                    hp.append((port, proto, ip))
            pk = tuple(hp) if hp else None
        out.append((rk, c.get("restartPolicy") == "Always", pk))
    return tuple(out)


def _plain_dict(value: Any) -> dict:
    """``value`` when it is a plain dict, ``{}`` for None; anything else is odd (the slow path)."""
    if value is None:
        return {}
    if type(value) is not dict:
        raise _Odd
    return value


class _PodReader:
    """``pod_from_k8s`` for many pods at once, with the per-shape work memoised.

    Pods of one controller share their containers' requests, and a cluster has a few thousand
    distinct shapes among 100k+ pods: effective requests and host ports are computed once per
    distinct (containers, init containers, pod-level requests, overhead) key, start times once
    per distinct string, label maps once per distinct label set (and shared). Anything the fast
    path does not recognise as plain JSON (a non-string quantity or label, a non-list container
    list, a field of an unexpected type, an error) goes to ``pod_from_k8s`` itself, so values and
    error messages are exactly its own. Keep the two in step: ``tests/test_dump_fast.py``
    compares them field by field.
    """

    def __init__(self, priority_classes: Mapping[str, int] | None = None, default_priority: int = 0) -> None:
        self.priority_classes = priority_classes or {}
        self.default_priority = default_priority
        self._shapes: dict[tuple, tuple[Mapping, tuple[HostPort, ...]]] = {}
        self._times: dict[str, float | None] = {}
        self._labels: dict[tuple, Mapping[str, str]] = {}
        # The PodStruct path's memos, keyed by raw JSON bytes.
        self._raw_shapes: dict[tuple, tuple[Mapping, tuple[HostPort, ...]]] = {}
        self._raw_labels: dict[bytes, Mapping[str, str]] = {}
        self._who: dict[tuple, tuple] = {}

    def memo_size(self) -> int:
        """Entries held by the memos (they grow with distinct shapes, label sets, owners and
        start times; a long-lived user replaces the reader past a bound)."""
        return len(self._shapes) + len(self._times) + len(self._labels) + len(self._raw_shapes) + len(self._raw_labels) + len(self._who)

    def __call__(self, obj: Mapping) -> BoundPod:
        """The ``BoundPod`` for a v1 Pod (as ``pod_from_k8s(obj, priority_classes, default_priority)``).

        Raises:
            AdapterError: as ``pod_from_k8s``.
        """
        try:
            return self._fast(obj)
        except (_Odd, AdapterError, TypeError, ValueError):
            return pod_from_k8s(obj, self.priority_classes, self.default_priority)

    def _fast(self, obj: Mapping) -> BoundPod:
        """``pod_from_k8s`` of a plain-JSON Pod dict through the memos; raises ``_Odd`` (or an
        error ``__call__`` hands to ``pod_from_k8s``) for anything else."""
        if type(obj) is not dict:
            raise _Odd
        meta = obj.get("metadata")
        if type(meta) is not dict:
            raise _Odd
        name = meta.get("name")
        if type(name) is not str or not name:
            raise _Odd
        ns = meta.get("namespace")
        if ns is None or ns == "":
            ns = "default"
        elif type(ns) is not str:
            raise _Odd
        spec = _plain_dict(obj.get("spec"))
        status = _plain_dict(obj.get("status"))
        labels = _plain_dict(meta.get("labels"))
        annotations = _plain_dict(meta.get("annotations"))
        pod_res = spec.get("resources")
        if pod_res is None:
            pod_req_key = None
        elif type(pod_res) is dict:
            pod_req_key = _quantities_key(pod_res.get("requests"))
        else:
            raise _Odd
        key = (_containers_key(spec.get("containers")), _containers_key(spec.get("initContainers")),
               pod_req_key, _quantities_key(spec.get("overhead")))
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = (frozen_map(effective_requests(spec, "spec")), host_ports(spec))
        requests, ports = shape
        prio = spec.get("priority")
        if prio is not None and type(prio) is not int:
            raise _Odd
        priority = self._priority(prio, spec.get("priorityClassName"))
        owner_kind, owner_name, controller = owner_of(meta.get("ownerReferences"))
        group = annotations.get(GANG_ANNOTATION_VOLCANO) or labels.get(GANG_LABEL_COSCHEDULING) or labels.get(GANG_LABEL_KUEUE)
        gang = gang_of(ns, group, controller)
        deadline_s = deadline_seconds(spec.get("activeDeadlineSeconds"))
        limit = runtime_limit(deadline_s, labels.get(MAX_EXEC_TIME_LABEL), annotations.get(EXPECTED_RUNTIME_ANNOTATION))
        start = self._start(status.get("startTime"))
        if labels:
            items = tuple(labels.items())
            for k, v in items:
                if type(k) is not str or type(v) is not str:
                    raise _Odd
            label_map = self._labels.get(items)
            if label_map is None:
                label_map = self._labels[items] = frozen_map(labels)
        else:
            label_map = EMPTY
        node_name = spec.get("nodeName")
        queue = labels.get(QUEUE_LABEL)
        phase = status.get("phase")
        restarts, ready = pod_health(status)
        return BoundPod(ns, name, str(node_name or ""), requests, priority, gang, owner_kind, owner_name,
                        str(queue or ""), str(phase or "Pending"), start, deadline_s, ports, limit, label_map,
                        restarts, ready)

    def _priority(self, prio: int | None, class_name: Any) -> int:
        """spec.priority (an int, checked by the caller), else the value of the PriorityClass
        named by spec.priorityClassName, else the default (as ``pod_from_k8s``)."""
        if prio is not None:
            return prio
        if class_name:
            return class_priority(str(class_name), self.priority_classes, self.default_priority)
        return self.default_priority

    def _start(self, st: Any) -> float | None:
        """status.startTime in epoch seconds, parsed once per distinct string."""
        if type(st) is str:
            start = self._times.get(st, _NO_TIME)
            if start is _NO_TIME:
                start = self._times[st] = parse_time(st, "status.startTime")
            return start
        if st is None:
            return None
        raise _Odd

    def projected(self, p: PodStruct) -> BoundPod:
        """The ``BoundPod`` for a Pod decoded as ``PodStruct`` (the JSON dump reader's
        projection); ``p.raw`` holds the object's JSON bytes, and ``p.kind``/``p.apiVersion``
        the kind and apiVersion a typed list gave it.

        Equal to ``pod_from_k8s`` of the object: sub-documents that are only memo keys (labels,
        owner references, each container's resources and ports, pod-level resources, overhead)
        stay raw JSON bytes and are decoded once per distinct value; anything unusual goes to
        ``pod_from_k8s`` on the generic decoding, so values and error messages are its own.

        Raises:
            AdapterError: as ``pod_from_k8s``.
        """
        try:
            return self._from_struct(p)
        except (_Odd, AdapterError, TypeError, ValueError, msgspec.DecodeError):
            obj = decode_any(p.raw)  # as the general reader decodes it (1e400 included)
            if type(obj) is dict and "kind" not in obj:
                obj = {**obj, "kind": p.kind or "Pod", "apiVersion": obj.get("apiVersion", p.apiVersion)}
            return pod_from_k8s(obj, self.priority_classes, self.default_priority)

    def _from_struct(self, p: PodStruct) -> BoundPod:
        """``pod_from_k8s`` of a ``PodStruct`` through the raw-bytes memos (shape, who the pod is,
        start time); raises ``_Odd`` (or an error ``projected`` hands to ``pod_from_k8s``) for
        anything unusual."""
        meta = p.metadata
        if meta is None or not meta.name:
            raise _Odd
        ns = meta.namespace or "default"
        spec = p.spec or _NO_SPEC
        status = p.status or _NO_STATUS
        cs = spec.containers
        if cs is not None and len(cs) == 1 and spec.initContainers is None:  # the common case
            c = cs[0]
            key = (bytes(c.resources), bytes(c.ports) if c.ports else None, c.restartPolicy,
                   bytes(spec.resources) if spec.resources else None, bytes(spec.overhead) if spec.overhead else None)
        else:
            key = (_containers_raw_key(cs), _containers_raw_key(spec.initContainers), bytes(spec.resources), bytes(spec.overhead))
        shape = self._raw_shapes.get(key)
        if shape is None:
            shape = self._raw_shapes[key] = _shape_of_struct(spec)
        # Who the pod is (labels, owner, gang, queue), once per namespace, label set and owner.
        labels, refs = meta.labels, meta.ownerReferences
        key = (ns, bytes(labels) if labels else None, bytes(refs) if refs else None)
        who = self._who.get(key)
        if who is None:
            who = self._who[key] = self._who_of(*key)
        label_map, owner_kind, owner_name, gang, queue, label_limit = who
        runtime_ann = None
        raw = meta.annotations
        if raw:
            text = bytes(raw)
            if text != b"null":
                if text[:1] != b"{":
                    raise _Odd
                if b"\\" in text or _VOLCANO_GROUP_KEY in text or _RUNTIME_KEY in text:
                    annotations = GENERIC.decode(text)
                    group = annotations.get(GANG_ANNOTATION_VOLCANO)
                    if group:
                        gang = f"PodGroup/{ns}/{group}"
                    runtime_ann = annotations.get(EXPECTED_RUNTIME_ANNOTATION)
        deadline = spec.activeDeadlineSeconds
        if deadline is None and runtime_ann is None:
            deadline_s, limit = None, label_limit
        else:
            deadline_s = deadline_seconds(deadline)
            limit = runtime_limit(deadline_s, label_map.get(MAX_EXEC_TIME_LABEL), runtime_ann)
        restarts = 0
        if status.containerStatuses:
            for c in status.containerStatuses:
                n = c.restartCount
                if n is not None and n > 0:
                    restarts += n
        ready = None
        if status.conditions:
            for c in status.conditions:
                if c.type == "Ready":
                    ready = c.status == "True"
        st = status.startTime
        start = self._times.get(st, _NO_TIME) if st is not None else None
        if start is _NO_TIME:
            start = self._start(st)
        prio = spec.priority
        requests, ports = shape
        return BoundPod(ns, meta.name, spec.nodeName or "", requests,
                        prio if prio is not None else self._priority(None, spec.priorityClassName), gang, owner_kind,
                        owner_name, queue, status.phase or "Pending", start, deadline_s, ports, limit, label_map,
                        restarts, ready)

    def _who_of(self, ns: str, labels: bytes | None, refs: bytes | None) -> tuple:
        """(label map, owner kind, owner name, gang unless an annotation names one, queue, the
        max-exec-time label in seconds) from the raw labels and ownerReferences."""
        if labels is None:
            label_map = EMPTY
        else:
            label_map = self._raw_labels.get(labels)
            if label_map is None:
                label_map = self._raw_labels[labels] = _str_labels(GENERIC.decode(labels))
        owner_kind, owner_name, controller = _NO_OWNER if refs is None else owner_of(GENERIC.decode(refs))
        gang = gang_of(ns, label_map.get(GANG_LABEL_COSCHEDULING) or label_map.get(GANG_LABEL_KUEUE), controller)
        return (label_map, owner_kind, owner_name, gang, label_map.get(QUEUE_LABEL) or "",
                runtime_limit(None, label_map.get(MAX_EXEC_TIME_LABEL), None))

    def deferred(self, p: PodStruct) -> ConvertedPod | None:
        """``projected`` for a reader that does not know the PriorityClasses yet (a share of
        a dump read in parallel): the pod with its priority to resolve later when it has no
        spec.priority; None for a terminal pod or anything ``projected`` would hand to
        ``pod_from_k8s`` (read those with ``build_snapshot`` as usual)."""
        status = p.status
        if status is not None and (status.phase == "Succeeded" or status.phase == "Failed"):
            return None
        try:
            pod = self._from_struct(p)
        except (_Odd, AdapterError, TypeError, ValueError, msgspec.DecodeError):
            return None
        spec = p.spec
        if spec is not None and spec.priority is not None:
            return ConvertedPod(pod, False, None)
        return ConvertedPod(pod, True, None if spec is None else spec.priorityClassName)


def _containers_raw_key(cs: Any) -> tuple | None:
    """The memo key of a container list: each container's raw resources and ports, and its
    restartPolicy (None for a missing list)."""
    if cs is None:
        return None
    return tuple([(bytes(c.resources), bytes(c.ports), c.restartPolicy) for c in cs])


class ConvertedPod(msgspec.Struct, gc=False):
    """A v1 Pod converted before the PriorityClasses were known (``_PodReader.deferred``,
    possibly in another process of the JSON dump reader): ``build_snapshot`` resolves its
    priority from spec.priorityClassName (``class_name``) when ``resolve`` is set, as
    ``pod_from_k8s`` would have."""

    pod: BoundPod
    resolve: bool
    class_name: str | None


def _str_labels(labels: Any) -> Mapping[str, str]:
    """A read-only label map from decoded ``metadata.labels`` (EMPTY for null or {}); anything
    but string keys and values is odd (``pod_from_k8s`` then reads the pod)."""
    if labels is None or labels == {}:
        return EMPTY
    if type(labels) is not dict:
        raise _Odd
    for k, v in labels.items():
        if type(k) is not str or type(v) is not str:
            raise _Odd
    return frozen_map(labels)


def _container_dict(c: Any) -> dict:
    """A ``_ContainerStruct`` back as the dict ``effective_requests`` and ``host_ports`` read."""
    out: dict = {}
    if c.resources:
        out["resources"] = GENERIC.decode(c.resources)
    if c.ports:
        out["ports"] = GENERIC.decode(c.ports)
    if c.restartPolicy is not None:
        out["restartPolicy"] = c.restartPolicy
    return out


def _shape_of_struct(spec: Any) -> tuple[Mapping, tuple[HostPort, ...]]:
    """(effective requests, host ports) of a ``PodStruct``'s spec, through the dict readers.

    Raises:
        AdapterError: as ``effective_requests`` / ``host_ports``.
    """
    d: dict = {}
    if spec.containers is not None:
        d["containers"] = [_container_dict(c) for c in spec.containers]
    if spec.initContainers is not None:
        d["initContainers"] = [_container_dict(c) for c in spec.initContainers]
    if spec.overhead:
        d["overhead"] = GENERIC.decode(spec.overhead)
    if spec.resources:
        d["resources"] = GENERIC.decode(spec.resources)
    return frozen_map(effective_requests(d, "spec")), host_ports(d)

