"""v1 Pods → ``BoundPod``: the rules, one pod at a time.

Owns: ``pod_from_k8s`` (requests, priority, gang and owner, queue, times, host ports, run-time
limits, labels, health), the Pod → gang keys and label names it reads, ``pod_health``,
``pod_is_terminal`` and ``TERMINAL_PODS_KEY``, and the small per-field readers the fast reader
(``pod_reader``) shares with it (``host_ports``, ``owner_of``, ``gang_of``, ``deadline_seconds``,
``runtime_limit``, ``positive_seconds``). Does not own effective requests (``podspec``), the
PriorityClass rule (``priority``), the memoised reader for many pods (``pod_reader``: a change
here needs the same change there; ``tests/test_dump_fast.py`` compares the two) nor which pods a
snapshot keeps (``snapshot_builder``).

Units: requests in scheduler units (cpu millicores, memory bytes, counts otherwise); times in
seconds since the epoch; deadlines and limits in seconds. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.model import EMPTY, BoundPod, HostPort, frozen_map
from .errors import AdapterError
from .meta import object_name, object_namespace, object_ref, parse_time, signed_int, str_map
from .podspec import as_int, effective_requests, get_path, list_of, mapping
from .priority import class_priority

__all__ = [
    "pod_from_k8s",
    "pod_health",
    "pod_is_terminal",
    "TERMINAL_PODS_KEY",
    "GANG_ANNOTATION_VOLCANO",
    "GANG_LABEL_COSCHEDULING",
    "GANG_LABEL_KUEUE",
    "QUEUE_LABEL",
    "MAX_EXEC_TIME_LABEL",
    "EXPECTED_RUNTIME_ANNOTATION",
]

#: Pod → gang keys, checked in this order (Volcano annotation, coscheduling label, Kueue label).
GANG_ANNOTATION_VOLCANO = "scheduling.k8s.io/group-name"
GANG_LABEL_COSCHEDULING = "scheduling.x-k8s.io/pod-group"
GANG_LABEL_KUEUE = "kueue.x-k8s.io/pod-group-name"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue's maximum execution time of a workload, seconds (label on the Job or plain pod).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
#: gangcheck's own annotation: the user's upper bound on the pod's run time, seconds.
EXPECTED_RUNTIME_ANNOTATION = "gangcheck.io/expected-runtime-seconds"

#: ``skipped`` key under which build_snapshot counts Succeeded/Failed pods.
TERMINAL_PODS_KEY = "Pod (Succeeded/Failed)"

_INT64_MAX = 2**63 - 1


def pod_is_terminal(obj: Mapping) -> bool:
    """True for a Pod in phase Succeeded or Failed: it holds no resources on its node
    (kube-scheduler and the kubelet's admission ignore such pods)."""
    return get_path(obj, "status.phase") in ("Succeeded", "Failed")


def host_ports(spec: Mapping) -> tuple[HostPort, ...]:
    """The hostPort entries of a pod spec's init containers and containers (entries with a
    zero or missing hostPort are not host ports); protocol defaults to TCP.

    Raises:
        AdapterError: a container list or ports list that is not a list, a hostPort that is
            not an integer.
    """
    ports = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(list_of(spec.get(group), f"spec.{group}")):
            if not isinstance(c, Mapping):
                continue
            for j, p in enumerate(list_of(c.get("ports"), f"spec.{group}[{i}].ports")):
                if isinstance(p, Mapping) and p.get("hostPort"):
                    port = signed_int(p["hostPort"], f"spec.{group}[{i}].ports[{j}].hostPort")
                    ports.append(HostPort(port, str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "")))
    return tuple(ports)


def owner_of(refs: Any) -> tuple[str, str, tuple[Any, Any] | None]:
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


def gang_of(ns: str, group: Any, controller: tuple[Any, Any] | None) -> str:
    """The gang key: ``PodGroup/ns/<group>`` when a gang annotation or label names a group, else
    ``Kind/ns/name`` of the controller reference, else ""."""
    if group:
        return f"PodGroup/{ns}/{group}"
    if controller is not None:
        return f"{controller[0]}/{ns}/{controller[1]}"
    return ""


def _gang_and_owner(obj: Mapping, ns: str) -> tuple[str, str, str]:
    """(gang key, owner kind, owner name) of a Pod dict (see ``pod_from_k8s``)."""
    meta = mapping(obj.get("metadata"), "metadata")
    annotations = mapping(meta.get("annotations"), "metadata.annotations")
    labels = mapping(meta.get("labels"), "metadata.labels")
    owner_kind, owner_name, controller = owner_of(meta.get("ownerReferences"))
    group = (
        annotations.get(GANG_ANNOTATION_VOLCANO)
        or labels.get(GANG_LABEL_COSCHEDULING)
        or labels.get(GANG_LABEL_KUEUE)
    )
    return gang_of(ns, group, controller), owner_kind, owner_name


def positive_seconds(value: Any) -> float | None:
    """A positive number of seconds from a label or annotation value, else None (lenient)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        v = float(str(value).strip())
    except ValueError:
        return None
    return v if v > 0 and v == v and v != float("inf") else None


def deadline_seconds(value: Any) -> float | None:
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


def runtime_limit(deadline_s: float | None, max_exec: Any, expected: Any) -> float | None:
    """The smallest of activeDeadlineSeconds (already seconds), Kueue's max-exec-time label and
    gangcheck's expected-runtime annotation (lenient: a value that is not a positive number is
    ignored), None when none is set."""
    limit = deadline_s
    for v in (max_exec, expected):
        if v is not None:
            s = positive_seconds(v)
            if s is not None and (limit is None or s < limit):
                limit = s
    return limit


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
    ``build_snapshot`` reads pods through ``pod_reader._PodReader``, a memoised equivalent of
    this function for plain dicts: a change here needs the same change there.

    Raises:
        AdapterError: no metadata.name, unreadable requests, a bad time or integer field.
    """
    try:
        name = object_name(obj)
        ns = object_namespace(obj)
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        labels = mapping(get_path(obj, "metadata.labels"), "metadata.labels")
        requests = effective_requests(spec, "spec")
        if spec.get("priority") is not None:
            priority = signed_int(spec.get("priority"), "spec.priority")
        elif spec.get("priorityClassName"):
            priority = class_priority(str(spec["priorityClassName"]), priority_classes or {}, default_priority)
        else:
            priority = default_priority
        gang, owner_kind, owner_name = _gang_and_owner(obj, ns)
        deadline_s = deadline_seconds(spec.get("activeDeadlineSeconds"))
        annotations = mapping(get_path(obj, "metadata.annotations"), "metadata.annotations")
        restarts, ready = pod_health(status)
        limits = [v for v in (deadline_s, positive_seconds(labels.get(MAX_EXEC_TIME_LABEL)),
                              positive_seconds(annotations.get(EXPECTED_RUNTIME_ANNOTATION))) if v is not None]
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
            host_ports=host_ports(spec),
            runtime_limit_s=min(limits) if limits else None,
            labels=frozen_map(str_map(labels, "metadata.labels")) if labels else EMPTY,
            restarts=restarts,
            ready=ready,
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
