"""Cluster objects (Kubernetes dicts, as ``kubectl get -o yaml`` writes them) → ``ClusterSnapshot``.

Pure: no file I/O (``webhook.dump`` reads files; the cache feeds live objects). Every converter
takes one object as a plain dict and returns one engine value, raising ``AdapterError`` naming
the object ("Kind ns/name") and the field for input it cannot read. Kinds handled:

* ``v1`` Node, Pod; ``scheduling.k8s.io/v1`` PriorityClass;
* ``kueue.x-k8s.io`` (v1beta1, v1beta2; v1alpha1 Cohort) ResourceFlavor, ClusterQueue,
  LocalQueue, Cohort;
* ``scheduling.volcano.sh/v1beta1`` Queue and PodGroup; ``scheduling.x-k8s.io/v1alpha1``
  PodGroup (scheduler-plugins coscheduling).

Anything else is counted in ``ClusterSnapshot.skipped`` by kind, never an error.

Resource amounts are scheduler units (cpu millicores, memory bytes, counts otherwise; see
``webhook.engine.quantity``). The rules mirror what the API server's defaulting and
kube-scheduler do, so a dump of an un-defaulted object still reads the way the cluster sees it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..engine.model import (
    EMPTY,
    DisruptionBudget,
    KueueWorkload,
    BoundPod,
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    HostPort,
    KueueState,
    LocalQueue,
    Node,
    PodGroupState,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    VolcanoQueue,
    VolcanoState,
    frozen_map,
)
from ..engine.quantity import QuantityError, parse_quantity
from ..engine.snapshot import ClusterSnapshot
from .errors import AdapterError
from .projection import GENERIC, PodStruct, _PodSpecStruct, _PodStatusStruct, decode_any
from .podspec import as_int, effective_requests, get_path, list_of, mapping, resource_map

__all__ = [
    "build_snapshot",
    "object_ref",
    "node_from_k8s",
    "pod_from_k8s",
    "pod_is_terminal",
    "priority_class_from_k8s",
    "resource_flavor_from_k8s",
    "cluster_queue_from_k8s",
    "local_queue_from_k8s",
    "cohort_from_k8s",
    "volcano_queue_from_k8s",
    "pod_group_from_k8s",
    "parse_time",
    "SYSTEM_PRIORITY_CLASSES",
    "TERMINAL_PODS_KEY",
]

KUEUE = "kueue.x-k8s.io"
VOLCANO = "scheduling.volcano.sh"
COSCHEDULING = "scheduling.x-k8s.io"
SCHEDULING_K8S = "scheduling.k8s.io"

#: Pod → gang keys, checked in this order (Volcano annotation, coscheduling label, Kueue label).
GANG_ANNOTATION_VOLCANO = "scheduling.k8s.io/group-name"
GANG_LABEL_COSCHEDULING = "scheduling.x-k8s.io/pod-group"
GANG_LABEL_KUEUE = "kueue.x-k8s.io/pod-group-name"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue's maximum execution time of a workload, seconds (label on the Job or plain pod).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
#: gangcheck's own annotation: the user's upper bound on the pod's run time, seconds.
EXPECTED_RUNTIME_ANNOTATION = "gangcheck.io/expected-runtime-seconds"

#: The built-in PriorityClasses every API server creates (pkg/apis/scheduling/types.go).
SYSTEM_PRIORITY_CLASSES: Mapping[str, int] = {
    "system-cluster-critical": 2000000000,
    "system-node-critical": 2000001000,
}

#: ``skipped`` key under which build_snapshot counts Succeeded/Failed pods.
TERMINAL_PODS_KEY = "Pod (Succeeded/Failed)"


# ---------------------------------------------------------------- small helpers


def object_ref(obj: Mapping) -> str:
    """``"Kind ns/name"`` (``"Kind name"`` for cluster-scoped objects), for error messages."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name, ns = meta.get("name"), meta.get("namespace")
    who = f"{ns}/{name}" if ns else str(name or "<unnamed>")
    return f"{kind or '<no kind>'} {who}"


def _str_map(value: Any, field: str) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in mapping(value, field).items()}


def _name(obj: Mapping) -> str:
    name = get_path(obj, "metadata.name")
    if not isinstance(name, str) or not name:
        raise AdapterError("expected a non-empty string", field="metadata.name")
    return name


def _namespace(obj: Mapping, default: str = "default") -> str:
    ns = get_path(obj, "metadata.namespace")
    if ns is None or ns == "":
        return default
    if not isinstance(ns, str):
        raise AdapterError(f"expected a string, got {type(ns).__name__}", field="metadata.namespace")
    return ns


def _quantity(resource: str, value: Any, field: str) -> int:
    try:
        return parse_quantity(resource, value)
    except QuantityError as exc:
        raise AdapterError(str(exc).split(": ", 1)[-1], field=field) from None


def _bool(value: Any, field: str, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise AdapterError(f"expected true or false, got {value!r}", field=field)


def _signed_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise AdapterError(f"expected an integer, got {value!r}", field=field)
    try:
        return int(value)
    except ValueError:
        raise AdapterError(f"expected an integer, got {value!r}", field=field) from None


def parse_time(value: Any, field: str) -> float | None:
    """RFC 3339 timestamp (``"2025-06-01T10:00:00Z"``, metav1.Time) → seconds since the epoch.

    Returns None for a missing value. Raises ``AdapterError`` for text that is not a timestamp.
    A timestamp without a zone is taken as UTC (metav1.Time always serialises in UTC).
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):  # YAML loaders may already decode timestamps
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise AdapterError(f"expected an RFC 3339 time such as 2025-06-01T10:00:00Z, got {value!r}", field=field) from None
    else:
        raise AdapterError(f"expected an RFC 3339 time, got {value!r}", field=field)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _taints(value: Any, field: str) -> tuple[Taint, ...]:
    out = []
    for i, t in enumerate(list_of(value, field)):
        t = mapping(t, f"{field}[{i}]")
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise AdapterError("expected a taint with a non-empty key", field=f"{field}[{i}].key")
        effect = t.get("effect") or "NoSchedule"
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise AdapterError(f"expected NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}", field=f"{field}[{i}].effect")
        out.append(Taint(key, "" if t.get("value") is None else str(t.get("value")), effect))
    return tuple(out)


def _tolerations(value: Any, field: str) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(list_of(value, field)):
        t = mapping(t, f"{field}[{i}]")
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise AdapterError(f"expected operator Equal or Exists, got {op!r}", field=f"{field}[{i}].operator")
        out.append(Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or "")))
    return tuple(out)


# ---------------------------------------------------------------- core/v1


def node_from_k8s(obj: Mapping) -> Node:
    """A v1 Node → ``Node``.

    Reads metadata.labels/annotations, spec.taints, spec.unschedulable, the Ready condition
    (status "True"/"False"/"Unknown" → True/False/None; no Ready condition → None) and
    status.capacity / status.allocatable in scheduler units. A missing allocatable defaults to
    capacity, as the API server's ``SetDefaults_NodeStatus`` does. Zero-valued stale extended
    resources (FIELD-NOTES §1) are kept as 0.

    Raises:
        AdapterError: no metadata.name, a malformed taint, or a quantity that cannot be read.
    """
    try:
        name = _name(obj)
        meta = mapping(obj.get("metadata"), "metadata")
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        capacity = resource_map(status.get("capacity"), "status.capacity")
        if status.get("allocatable") is None:
            allocatable = dict(capacity)
        else:
            allocatable = resource_map(status.get("allocatable"), "status.allocatable")
        ready: bool | None = None
        for i, c in enumerate(list_of(status.get("conditions"), "status.conditions")):
            if isinstance(c, Mapping) and c.get("type") == "Ready":
                s = c.get("status")
                ready = True if s == "True" else False if s == "False" else None
        return Node(
            name=name,
            labels=frozen_map(_str_map(meta.get("labels"), "metadata.labels")),
            annotations=frozen_map(_str_map(meta.get("annotations"), "metadata.annotations")),
            taints=_taints(spec.get("taints"), "spec.taints"),
            unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable", False),
            ready=ready,
            capacity=frozen_map(capacity),
            allocatable=frozen_map(allocatable),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def pod_is_terminal(obj: Mapping) -> bool:
    """True for a Pod in phase Succeeded or Failed: it holds no resources on its node
    (kube-scheduler and the kubelet's admission ignore such pods)."""
    return get_path(obj, "status.phase") in ("Succeeded", "Failed")


def _host_ports(spec: Mapping) -> tuple[HostPort, ...]:
    ports = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(list_of(spec.get(group), f"spec.{group}")):
            if not isinstance(c, Mapping):
                continue
            for j, p in enumerate(list_of(c.get("ports"), f"spec.{group}[{i}].ports")):
                if isinstance(p, Mapping) and p.get("hostPort"):
                    port = _signed_int(p["hostPort"], f"spec.{group}[{i}].ports[{j}].hostPort")
                    ports.append(HostPort(port, str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "")))
    return tuple(ports)


def _owner_of(refs: Any) -> tuple[str, str, tuple[Any, Any] | None]:
    """(owner kind, owner name, (kind, name) of the controller reference or None) of a pod's
    ``metadata.ownerReferences``: the controller reference (``controller: true``), else the
    first reference that is a mapping; the third item is set only when the controller reference
    has both a kind and a name (it then names the pod's gang).

    Raises:
        AdapterError: ``refs`` is neither a list nor None.
    """
    owner_kind = owner_name = ""
    controller = None
    refs = list_of(refs, "metadata.ownerReferences")
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            controller = ref
            break
    first = controller or next((r for r in refs if isinstance(r, Mapping)), None)
    if first is not None:
        owner_kind, owner_name = str(first.get("kind") or ""), str(first.get("name") or "")
    named = None
    if controller is not None and controller.get("kind") and controller.get("name"):
        named = (controller["kind"], controller["name"])
    return owner_kind, owner_name, named


def _gang_of(ns: str, group: Any, controller: tuple[Any, Any] | None) -> str:
    """The gang key: ``PodGroup/ns/<group>`` when a gang annotation or label names a group, else
    ``Kind/ns/name`` of the controller reference, else ""."""
    if group:
        return f"PodGroup/{ns}/{group}"
    if controller is not None:
        return f"{controller[0]}/{ns}/{controller[1]}"
    return ""


def _gang_and_owner(obj: Mapping, ns: str) -> tuple[str, str, str]:
    meta = mapping(obj.get("metadata"), "metadata")
    annotations = mapping(meta.get("annotations"), "metadata.annotations")
    labels = mapping(meta.get("labels"), "metadata.labels")
    owner_kind, owner_name, controller = _owner_of(meta.get("ownerReferences"))
    group = (
        annotations.get(GANG_ANNOTATION_VOLCANO)
        or labels.get(GANG_LABEL_COSCHEDULING)
        or labels.get(GANG_LABEL_KUEUE)
    )
    return _gang_of(ns, group, controller), owner_kind, owner_name


def _seconds(value: Any) -> float | None:
    """A positive number of seconds from a label or annotation value, else None (lenient)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        v = float(str(value).strip())
    except ValueError:
        return None
    return v if v > 0 and v == v and v != float("inf") else None


def pod_health(status: Mapping) -> tuple[int, bool | None]:
    """(Σ restartCount over status.containerStatuses, the Ready condition as a bool or None).

    Lenient: the kubelet writes these fields, and a malformed entry is skipped rather than
    making the pod unreadable (restarts and readiness only inform diagnose's device-plugin step).
    """
    restarts = 0
    cs = status.get("containerStatuses")
    if type(cs) is list:
        for c in cs:
            if type(c) is dict:
                n = c.get("restartCount")
                if type(n) is int and n > 0:
                    restarts += n
    ready = None
    conds = status.get("conditions")
    if type(conds) is list:
        for c in conds:
            if type(c) is dict and c.get("type") == "Ready":
                ready = c.get("status") == "True"
    return restarts, ready


def pod_from_k8s(
    obj: Mapping,
    priority_classes: Mapping[str, int] | None = None,
    default_priority: int = 0,
) -> BoundPod:
    """A v1 Pod → ``BoundPod`` (bound when spec.nodeName is set, Pending otherwise).

    * requests: ``effective_requests(spec)`` (FIELD-NOTES §1: sidecars, init containers,
      overhead, pod-level resources, limits standing in for missing requests).
    * priority: spec.priority; else the value of the PriorityClass named by
      spec.priorityClassName (``priority_classes``, plus the built-in system classes); else
      ``default_priority`` (the globalDefault class) — the Priority admission plugin's rules.
      An unknown class name falls back to ``default_priority``.
    * gang: ``"PodGroup/ns/<group>"`` from annotation scheduling.k8s.io/group-name (Volcano),
      label scheduling.x-k8s.io/pod-group (coscheduling) or kueue.x-k8s.io/pod-group-name
      (Kueue pod groups); else the controller ownerReference as ``"Kind/ns/name"``; else "".
      owner_kind/owner_name come from the controller reference (else the first reference).
    * queue: label kueue.x-k8s.io/queue-name; start_time: status.startTime (epoch seconds);
      deadline_s: spec.activeDeadlineSeconds; host_ports: containers' hostPort entries.
    * runtime_limit_s: the smallest of spec.activeDeadlineSeconds, the label
      kueue.x-k8s.io/max-exec-time-seconds (Kueue's maximumExecutionTimeSeconds) and the
      annotation gangcheck.io/expected-runtime-seconds (a user's declared upper bound), seconds;
      a label or annotation that is not a positive number is ignored (it never makes the pod
      unreadable), None when none is set. Read by the expected-wait estimator.

    Does not filter terminal pods: ``build_snapshot`` skips them (see ``pod_is_terminal``).
    ``build_snapshot`` reads pods through ``_PodReader``, a memoised equivalent of this function
    for plain dicts: a change here needs the same change there.

    Raises:
        AdapterError: no metadata.name, unreadable requests, a bad time or integer field.
    """
    try:
        name = _name(obj)
        ns = _namespace(obj)
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        labels = mapping(get_path(obj, "metadata.labels"), "metadata.labels")
        requests = effective_requests(spec, "spec")
        if spec.get("priority") is not None:
            priority = _signed_int(spec.get("priority"), "spec.priority")
        elif spec.get("priorityClassName"):
            pcn = str(spec["priorityClassName"])
            classes = priority_classes or {}
            priority = classes.get(pcn, SYSTEM_PRIORITY_CLASSES.get(pcn, default_priority))
        else:
            priority = default_priority
        gang, owner_kind, owner_name = _gang_and_owner(obj, ns)
        deadline_s = _deadline_s(spec.get("activeDeadlineSeconds"))
        annotations = mapping(get_path(obj, "metadata.annotations"), "metadata.annotations")
        restarts, ready = pod_health(status)
        limits = [v for v in (deadline_s, _seconds(labels.get(MAX_EXEC_TIME_LABEL)),
                              _seconds(annotations.get(EXPECTED_RUNTIME_ANNOTATION))) if v is not None]
        return BoundPod(
            namespace=ns,
            name=name,
            node_name=str(spec.get("nodeName") or ""),
            requests=frozen_map(requests),
            priority=priority,
            gang=gang,
            owner_kind=owner_kind,
            owner_name=owner_name,
            queue=str(labels.get(QUEUE_LABEL) or ""),
            phase=str(status.get("phase") or "Pending"),
            start_time=parse_time(status.get("startTime"), "status.startTime"),
            deadline_s=deadline_s,
            host_ports=_host_ports(spec),
            runtime_limit_s=min(limits) if limits else None,
            labels=frozen_map(_str_map(labels, "metadata.labels")) if labels else EMPTY,
            restarts=restarts,
            ready=ready,
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


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
    ``_host_ports`` read from it (requests, limits, restartPolicy == Always, host ports)."""
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
            shape = self._shapes[key] = (frozen_map(effective_requests(spec, "spec")), _host_ports(spec))
        requests, host_ports = shape
        prio = spec.get("priority")
        if prio is not None and type(prio) is not int:
            raise _Odd
        priority = self._priority(prio, spec.get("priorityClassName"))
        owner_kind, owner_name, controller = _owner_of(meta.get("ownerReferences"))
        group = annotations.get(GANG_ANNOTATION_VOLCANO) or labels.get(GANG_LABEL_COSCHEDULING) or labels.get(GANG_LABEL_KUEUE)
        gang = _gang_of(ns, group, controller)
        deadline_s = _deadline_s(spec.get("activeDeadlineSeconds"))
        limit = _runtime_limit(deadline_s, labels.get(MAX_EXEC_TIME_LABEL), annotations.get(EXPECTED_RUNTIME_ANNOTATION))
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
                        str(queue or ""), str(phase or "Pending"), start, deadline_s, host_ports, limit, label_map,
                        restarts, ready)


    def _priority(self, prio: int | None, class_name: Any) -> int:
        """spec.priority (an int, checked by the caller), else the value of the PriorityClass
        named by spec.priorityClassName, else the default (as ``pod_from_k8s``)."""
        if prio is not None:
            return prio
        if class_name:
            pcn = str(class_name)
            return self.priority_classes.get(pcn, SYSTEM_PRIORITY_CLASSES.get(pcn, self.default_priority))
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
            deadline_s = _deadline_s(deadline)
            limit = _runtime_limit(deadline_s, label_map.get(MAX_EXEC_TIME_LABEL), runtime_ann)
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
        requests, host_ports = shape
        return BoundPod(ns, meta.name, spec.nodeName or "", requests,
                        prio if prio is not None else self._priority(None, spec.priorityClassName), gang, owner_kind,
                        owner_name, queue, status.phase or "Pending", start, deadline_s, host_ports, limit, label_map,
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
        owner_kind, owner_name, controller = _NO_OWNER if refs is None else _owner_of(GENERIC.decode(refs))
        gang = _gang_of(ns, label_map.get(GANG_LABEL_COSCHEDULING) or label_map.get(GANG_LABEL_KUEUE), controller)
        return (label_map, owner_kind, owner_name, gang, label_map.get(QUEUE_LABEL) or "",
                _runtime_limit(None, label_map.get(MAX_EXEC_TIME_LABEL), None))


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


def _deadline_s(value: Any) -> float | None:
    """spec.activeDeadlineSeconds in seconds (None when unset): an integer from 1 to 2^63 − 1,
    as the API server's validation allows (int64).

    Raises:
        AdapterError: not such an integer.
    """
    if value is None:
        return None
    n = as_int(value, "spec.activeDeadlineSeconds", minimum=1)
    if n > _INT64_MAX:
        raise AdapterError(f"expected an integer ≤ {_INT64_MAX}, got {n}", field="spec.activeDeadlineSeconds")
    return float(n)


_INT64_MAX = 2**63 - 1


def _runtime_limit(deadline_s: float | None, max_exec: Any, expected: Any) -> float | None:
    """The smallest of activeDeadlineSeconds (already seconds), Kueue's max-exec-time label and
    gangcheck's expected-runtime annotation (lenient: a value that is not a positive number is
    ignored), None when none is set."""
    limit = deadline_s
    for v in (max_exec, expected):
        if v is not None:
            s = _seconds(v)
            if s is not None and (limit is None or s < limit):
                limit = s
    return limit


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
    """A ``_ContainerStruct`` back as the dict ``effective_requests`` and ``_host_ports`` read."""
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
        AdapterError: as ``effective_requests`` / ``_host_ports``.
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
    return frozen_map(effective_requests(d, "spec")), _host_ports(d)


_NO_SPEC = _PodSpecStruct()
_NO_STATUS = _PodStatusStruct()
_NO_OWNER: tuple[str, str, None] = ("", "", None)
# Annotation keys the fast path looks for in the raw bytes (exact unless escaped; a backslash
# anywhere sends the annotations through the generic decoder).
_VOLCANO_GROUP_KEY = f'"{GANG_ANNOTATION_VOLCANO}"'.encode()
_RUNTIME_KEY = f'"{EXPECTED_RUNTIME_ANNOTATION}"'.encode()


_NO_TIME = object()


def priority_class_from_k8s(obj: Mapping) -> tuple[str, int, bool]:
    """A scheduling.k8s.io/v1 PriorityClass → ``(name, value, globalDefault)``.

    Raises:
        AdapterError: no name, or a value that is not an integer.
    """
    try:
        name = _name(obj)
        value = obj.get("value")
        if value is None:
            raise AdapterError("expected an integer, the field is missing", field="value")
        return name, _signed_int(value, "value"), _bool(obj.get("globalDefault"), "globalDefault", False)
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


# ---------------------------------------------------------------- Kueue


def resource_flavor_from_k8s(obj: Mapping) -> ResourceFlavor:
    """A Kueue ResourceFlavor (v1beta1/v1beta2) → ``ResourceFlavor``: spec.nodeLabels,
    spec.nodeTaints, spec.tolerations, spec.topologyName.

    Raises:
        AdapterError: no name, malformed taints or tolerations.
    """
    try:
        name = _name(obj)
        spec = mapping(obj.get("spec"), "spec")
        topo = spec.get("topologyName")
        return ResourceFlavor(
            name=name,
            node_labels=frozen_map(_str_map(spec.get("nodeLabels"), "spec.nodeLabels")),
            node_taints=_taints(spec.get("nodeTaints"), "spec.nodeTaints"),
            tolerations=_tolerations(spec.get("tolerations"), "spec.tolerations"),
            topology_name=str(topo) if topo else None,
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def _resource_groups(value: Any, field: str) -> tuple[ResourceGroup, ...]:
    groups = []
    for g, rg in enumerate(list_of(value, field)):
        gf = f"{field}[{g}]"
        rg = mapping(rg, gf)
        covered = tuple(str(r) for r in list_of(rg.get("coveredResources"), f"{gf}.coveredResources"))
        flavors = []
        for f, fq in enumerate(list_of(rg.get("flavors"), f"{gf}.flavors")):
            ff = f"{gf}.flavors[{f}]"
            fq = mapping(fq, ff)
            fname = fq.get("name")
            if not isinstance(fname, str) or not fname:
                raise AdapterError("expected a flavor name", field=f"{ff}.name")
            quotas: dict[str, ResourceQuota] = {}
            for r, rq in enumerate(list_of(fq.get("resources"), f"{ff}.resources")):
                rf = f"{ff}.resources[{r}]"
                rq = mapping(rq, rf)
                rname = rq.get("name")
                if not isinstance(rname, str) or not rname:
                    raise AdapterError("expected a resource name", field=f"{rf}.name")
                nominal = rq.get("nominalQuota")
                bl, ll = rq.get("borrowingLimit"), rq.get("lendingLimit")
                quotas[rname] = ResourceQuota(
                    nominal=0 if nominal is None else _quantity(rname, nominal, f"{rf}.nominalQuota"),
                    borrowing_limit=None if bl is None else _quantity(rname, bl, f"{rf}.borrowingLimit"),
                    lending_limit=None if ll is None else _quantity(rname, ll, f"{rf}.lendingLimit"),
                )
            flavors.append(FlavorQuotas(fname, frozen_map(quotas)))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def _flavor_usage(value: Any, field: str) -> dict[tuple[str, str], int]:
    usage: dict[tuple[str, str], int] = {}
    for f, fu in enumerate(list_of(value, field)):
        ff = f"{field}[{f}]"
        fu = mapping(fu, ff)
        fname = str(fu.get("name") or "")
        for r, ru in enumerate(list_of(fu.get("resources"), f"{ff}.resources")):
            ru = mapping(ru, f"{ff}.resources[{r}]")
            rname = str(ru.get("name") or "")
            total = ru.get("total")
            usage[(fname, rname)] = 0 if total is None else _quantity(rname, total, f"{ff}.resources[{r}].total")
    return usage


def _preemption(value: Any, field: str) -> dict[str, str]:
    """spec.preemption flattened to str → str, with Kueue's defaults (Never) filled in."""
    p = mapping(value, field)
    out = {
        "withinClusterQueue": str(p.get("withinClusterQueue") or "Never"),
        "reclaimWithinCohort": str(p.get("reclaimWithinCohort") or "Never"),
    }
    bwc = mapping(p.get("borrowWithinCohort"), f"{field}.borrowWithinCohort")
    out["borrowWithinCohort"] = str(bwc.get("policy") or "Never")
    if bwc.get("maxPriorityThreshold") is not None:
        out["borrowWithinCohort.maxPriorityThreshold"] = str(bwc["maxPriorityThreshold"])
    return out


def cluster_queue_from_k8s(obj: Mapping) -> ClusterQueue:
    """A Kueue ClusterQueue (v1beta1 or v1beta2) → ``ClusterQueue``.

    Cohort: spec.cohort (v1beta1) or spec.cohortName (v1beta2); None when absent.
    resourceGroups[]: coveredResources, flavors[].resources[] nominalQuota / borrowingLimit /
    lendingLimit (absent limits → None, Kueue's "unbounded"). queueingStrategy (default
    BestEffortFIFO), preemption (flattened; Kueue defaults Never), stopPolicy (default None).
    usage: status.flavorsReservation (quota reserved, what Kueue admits against), falling back
    to status.flavorsUsage: ``[{name: flavor, resources: [{name, total}]}]`` →
    ``{(flavor, resource): total}``. pendingWorkloads / admittedWorkloads from status.

    Raises:
        AdapterError: no name, malformed resource groups or a quota that is not a quantity.
    """
    try:
        name = _name(obj)
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        cohort = spec.get("cohortName") or spec.get("cohort")
        usage_src = status.get("flavorsReservation")
        usage_field = "status.flavorsReservation"
        if not usage_src:
            usage_src, usage_field = status.get("flavorsUsage"), "status.flavorsUsage"
        stop = spec.get("stopPolicy") or "None"
        return ClusterQueue(
            name=name,
            resource_groups=_resource_groups(spec.get("resourceGroups"), "spec.resourceGroups"),
            cohort=str(cohort) if cohort else None,
            usage=frozen_map(_flavor_usage(usage_src, usage_field)),
            queueing_strategy=str(spec.get("queueingStrategy") or "BestEffortFIFO"),
            preemption=frozen_map(_preemption(spec.get("preemption"), "spec.preemption")),
            stop_policy=str(stop),
            pending_workloads=as_int(status.get("pendingWorkloads"), "status.pendingWorkloads", default=0),
            admitted_workloads=as_int(status.get("admittedWorkloads"), "status.admittedWorkloads", default=0),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def local_queue_from_k8s(obj: Mapping) -> LocalQueue:
    """A Kueue LocalQueue → ``LocalQueue(namespace, name, spec.clusterQueue)``.

    Raises:
        AdapterError: no name or no spec.clusterQueue.
    """
    try:
        name = _name(obj)
        cq = get_path(obj, "spec.clusterQueue")
        if not isinstance(cq, str) or not cq:
            raise AdapterError("expected the name of a ClusterQueue", field="spec.clusterQueue")
        return LocalQueue(_namespace(obj), name, cq)
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def cohort_from_k8s(obj: Mapping) -> Cohort:
    """A Kueue Cohort (v1alpha1/v1beta1 spec.parent, v1beta2 spec.parentName) → ``Cohort``
    with its own spec.resourceGroups.

    Raises:
        AdapterError: no name, malformed resource groups.
    """
    try:
        name = _name(obj)
        spec = mapping(obj.get("spec"), "spec")
        parent = spec.get("parentName") or spec.get("parent")
        return Cohort(
            name=name,
            parent=str(parent) if parent else None,
            resource_groups=_resource_groups(spec.get("resourceGroups"), "spec.resourceGroups"),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


# ---------------------------------------------------------------- Volcano / coscheduling


def volcano_queue_from_k8s(obj: Mapping) -> VolcanoQueue:
    """A Volcano Queue (scheduling.volcano.sh/v1beta1) → ``VolcanoQueue``.

    spec.capability (hard cap; absent resource = unbounded), spec.deserved,
    spec.guarantee.resource, spec.weight (default 1), spec.reclaimable (default true),
    status.state (default Open, as the queue controller sets it), status.allocated,
    spec.parent (hierarchical queues).

    Raises:
        AdapterError: no name, a quantity or weight that cannot be read.
    """
    try:
        name = _name(obj)
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        parent = spec.get("parent")
        return VolcanoQueue(
            name=name,
            capability=frozen_map(resource_map(spec.get("capability"), "spec.capability")),
            deserved=frozen_map(resource_map(spec.get("deserved"), "spec.deserved")),
            guarantee=frozen_map(resource_map(get_path(spec, "guarantee.resource"), "spec.guarantee.resource")),
            weight=as_int(spec.get("weight"), "spec.weight", default=1),
            state=str(status.get("state") or "Open"),
            reclaimable=_bool(spec.get("reclaimable"), "spec.reclaimable", True),
            allocated=frozen_map(resource_map(status.get("allocated"), "status.allocated")),
            parent=str(parent) if parent else None,
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def pod_group_from_k8s(obj: Mapping) -> PodGroupState:
    """A PodGroup → ``PodGroupState``: Volcano (scheduling.volcano.sh) or scheduler-plugins
    coscheduling (scheduling.x-k8s.io), recorded in ``api_group``.

    spec.queue (Volcano's default queue is "default"; coscheduling has none → ""),
    spec.minMember (absent → 0, the Go zero value both APIs decode it to), spec.minResources,
    status.phase, status.running.

    Raises:
        AdapterError: no name, a bad minMember or quantity.
    """
    try:
        name = _name(obj)
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        group = str(obj.get("apiVersion") or "").split("/", 1)[0]
        queue = spec.get("queue")
        if not queue and group == VOLCANO:
            queue = "default"
        return PodGroupState(
            namespace=_namespace(obj),
            name=name,
            queue=str(queue or ""),
            min_member=as_int(spec.get("minMember"), "spec.minMember", default=0),
            min_resources=frozen_map(resource_map(spec.get("minResources"), "spec.minResources")),
            phase=str(status.get("phase") or ""),
            running=as_int(status.get("running"), "status.running", default=0),
            api_group=group or VOLCANO,
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


# ---------------------------------------------------------------- the snapshot


def _flatten(objects: Iterable[Any]) -> Iterable[tuple[int, Any]]:
    """Yield (position, object), expanding ``kind: List`` / ``*List`` wrappers."""
    for pos, obj in enumerate(objects):
        if type(obj) is PodStruct or type(obj) is ConvertedPod or type(obj) is BoundPod:  # the JSON dump reader's pods: never a list
            yield pos, obj
        elif isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) and obj["kind"].endswith("List") and isinstance(obj.get("items"), list):
            item_kind = obj["kind"][: -len("List")]
            for item in obj["items"]:
                if isinstance(item, Mapping) and item_kind and "kind" not in item:
                    item = {**item, "kind": item_kind, "apiVersion": obj.get("apiVersion", "")}
                yield pos, item
        else:
            yield pos, obj


def build_snapshot(objects: Iterable[dict], source: str = "", as_of: float | None = None) -> ClusterSnapshot:
    """Turn Kubernetes objects (dicts) into a ``ClusterSnapshot``.

    Args:
        objects: any mix of kinds, in any order (``kind: List`` wrappers are expanded).
            PriorityClasses are read first so a Pod's priorityClassName resolves wherever the
            class appears. A later object with the same kind and name replaces an earlier one.
            The JSON dump reader (``webhook.dump``) may also pass v1 Pods already decoded as
            ``PodStruct``, or converted (``BoundPod``, or ``ConvertedPod`` when the priority is
            still to resolve); they take their place in the order like any other object.
        source: where the objects came from (a path, "demo", "live"); put on the snapshot and
            in error messages.

    Returns:
        A ``ClusterSnapshot``. Pods in phase Succeeded/Failed are left out (they hold nothing,
        as in kube-scheduler) and counted in ``skipped`` under ``TERMINAL_PODS_KEY``; every
        object of a kind the engine does not use is counted in ``skipped`` by kind
        (``{"Event": 3, "Service": 1}``).

    Raises:
        AdapterError: an object that is not a mapping or a known kind that cannot be read;
            the message names ``source``, the object ("Kind ns/name") and the field. The
            attribute ``position`` on the error is the index of the offending object in
            ``objects``, so a caller reading files can name the file and document.
    """
    from .disruption import disruption_budget_from_k8s  # these import this module's helpers
    from .workload import workload_from_k8s

    items = list(_flatten(objects))
    nodes: dict[str, Node] = {}
    pods: dict[tuple[str, str], BoundPod] = {}
    flavors: dict[str, ResourceFlavor] = {}
    cqs: dict[str, ClusterQueue] = {}
    lqs: dict[tuple[str, str], LocalQueue] = {}
    cohorts: dict[str, Cohort] = {}
    vqueues: dict[str, VolcanoQueue] = {}
    pgs: dict[tuple[str, str], PodGroupState] = {}
    workloads: dict[tuple[str, str], KueueWorkload] = {}
    budgets: dict[tuple[str, str], DisruptionBudget] = {}
    priority_classes: dict[str, int] = {}
    skipped: dict[str, int] = {}
    default_priority = 0

    def fail(exc: AdapterError, pos: int) -> AdapterError:
        exc.position = pos  # type: ignore[attr-defined]
        return exc.within(source=source)

    def group_of(obj: Mapping) -> str:
        api = str(obj.get("apiVersion") or "")
        return api.split("/", 1)[0] if "/" in api else ""

    # Pass 1: PriorityClasses (pods refer to them by name), and shape checks.
    for pos, obj in items:
        if type(obj) is PodStruct or type(obj) is ConvertedPod or type(obj) is BoundPod:
            continue
        if not isinstance(obj, Mapping):
            raise fail(AdapterError(f"expected a Kubernetes object (a mapping), got {type(obj).__name__}"), pos)
        if obj.get("kind") == "PriorityClass" and group_of(obj) == SCHEDULING_K8S:
            try:
                name, value, is_default = priority_class_from_k8s(obj)
            except AdapterError as exc:
                raise fail(exc, pos)
            priority_classes[name] = value
            if is_default:
                default_priority = value

    read_pod = _PodReader(priority_classes, default_priority)
    for pos, obj in items:
        if type(obj) is BoundPod:  # a v1 Pod the JSON dump reader converted in full
            pods[(obj.namespace, obj.name)] = obj
            continue
        if type(obj) is ConvertedPod:  # one whose priority is still to resolve
            pod = obj.pod
            if obj.resolve:
                pod = msgspec.structs.replace(pod, priority=read_pod._priority(None, obj.class_name))
            pods[(pod.namespace, pod.name)] = pod
            continue
        if type(obj) is PodStruct:  # a v1 Pod from the JSON dump reader (webhook.dump)
            status = obj.status
            phase = None if status is None else status.phase
            if phase == "Succeeded" or phase == "Failed":  # pod_is_terminal
                skipped[TERMINAL_PODS_KEY] = skipped.get(TERMINAL_PODS_KEY, 0) + 1
                continue
            try:
                pod = read_pod.projected(obj)
            except AdapterError as exc:
                raise fail(exc, pos)
            pods[(pod.namespace, pod.name)] = pod
            continue
        kind = obj.get("kind")
        api = obj.get("apiVersion")
        group = "" if api == "v1" else group_of(obj)
        try:
            if kind == "Pod" and group == "":
                status = obj.get("status")
                phase = status.get("phase") if type(status) is dict else get_path(obj, "status.phase")
                if phase == "Succeeded" or phase == "Failed":  # pod_is_terminal
                    skipped[TERMINAL_PODS_KEY] = skipped.get(TERMINAL_PODS_KEY, 0) + 1
                    continue
                pod = read_pod(obj)
                pods[(pod.namespace, pod.name)] = pod
            elif group == "" and kind == "Node":
                node = node_from_k8s(obj)
                nodes[node.name] = node
            elif group == SCHEDULING_K8S and kind == "PriorityClass":
                pass  # pass 1
            elif group == KUEUE and kind == "ResourceFlavor":
                rf = resource_flavor_from_k8s(obj)
                flavors[rf.name] = rf
            elif group == KUEUE and kind == "ClusterQueue":
                cq = cluster_queue_from_k8s(obj)
                cqs[cq.name] = cq
            elif group == KUEUE and kind == "LocalQueue":
                lq = local_queue_from_k8s(obj)
                lqs[(lq.namespace, lq.name)] = lq
            elif group == KUEUE and kind == "Cohort":
                co = cohort_from_k8s(obj)
                cohorts[co.name] = co
            elif group == VOLCANO and kind == "Queue":
                vq = volcano_queue_from_k8s(obj)
                vqueues[vq.name] = vq
            elif group in (VOLCANO, COSCHEDULING) and kind == "PodGroup":
                pg = pod_group_from_k8s(obj)
                pgs[(pg.namespace, pg.name)] = pg
            elif group == KUEUE and kind == "Workload":
                wl = workload_from_k8s(obj)
                workloads[(wl.namespace, wl.name)] = wl
            elif group == "policy" and kind == "PodDisruptionBudget":
                pdb = disruption_budget_from_k8s(obj)
                budgets[(pdb.namespace, pdb.name)] = pdb
            else:
                key = str(kind) if kind else "<no kind>"
                skipped[key] = skipped.get(key, 0) + 1
        except AdapterError as exc:
            raise fail(exc, pos)

    return ClusterSnapshot(
        nodes.values(),
        pods.values(),
        kueue=KueueState(frozen_map(flavors), frozen_map(cqs), frozen_map(lqs), frozen_map(cohorts), frozen_map(workloads)),
        volcano=VolcanoState(frozen_map(vqueues), frozen_map(pgs)),
        priority_classes=priority_classes,
        skipped=skipped,
        source=source,
        as_of=as_of,
        disruption_budgets=budgets.values(),
    )
