"""Helpers shared by the workload adapters: object identity, metadata, and ``GangRequest`` assembly.

Every adapter module (batch, jobset, kubeflow, volcano, lws, ray, kueue_pods, coscheduling)
reads metadata the same way (see :func:`build_gang`):

* namespace defaults to ``"default"``; the name is ``metadata.name``, or
  ``metadata.generateName + "<generated>"`` when the API server has not named it yet;
* ``queue_name`` (Kueue LocalQueue) from the label ``kueue.x-k8s.io/queue-name``, falling back to
  the older annotation of the same name (Kueue's ``jobframework.QueueName``);
* ``priority_class``: the Kueue WorkloadPriorityClass label ``kueue.x-k8s.io/priority-class``
  wins over the pod templates' ``priorityClassName`` (Kueue's ``ExtractPriority`` order);
* ``volcano_queue``: the adapter's own value (``spec.queue`` for Volcano kinds) or the
  ``volcano.sh/queue-name`` / ``scheduling.volcano.sh/queue-name`` label or annotation that
  KubeRay, LWS and Kubeflow use to hand a queue to Volcano.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..engine.model import Finding, GangRequest, PodSet, frozen_map
from .podspec import as_int, get_path, list_of, mapping, resource_map

__all__ = [
    "QUEUE_NAME",
    "PRIORITY_CLASS",
    "VOLCANO_QUEUE_KEYS",
    "split_api_version",
    "describe",
    "mapping",
    "list_of",
    "string_map",
    "build_gang",
    "template_priority",
    "count_field",
    "pod_group_pod_set",
]

QUEUE_NAME = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
VOLCANO_QUEUE_KEYS = ("volcano.sh/queue-name", "scheduling.volcano.sh/queue-name")


def split_api_version(api_version: Any) -> tuple[str, str]:
    """``"batch/v1"`` → ``("batch", "v1")``; ``"v1"`` (core) → ``("", "v1")``; non-strings → ``("", "")``."""
    if not isinstance(api_version, str):
        return "", ""
    if "/" in api_version:
        group, version = api_version.rsplit("/", 1)
        return group, version
    return "", api_version


def _name(obj: Mapping) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = meta.get("name")
    if isinstance(name, str) and name:
        return name
    gen = meta.get("generateName")
    if isinstance(gen, str) and gen:
        return gen + "<generated>"
    return "<unnamed>"


def _namespace(obj: Mapping) -> str:
    ns = get_path(obj, "metadata.namespace")
    return ns if isinstance(ns, str) and ns else "default"


def describe(obj: Any) -> str:
    """``"Kind namespace/name"`` for error messages (``"PyTorchJob llm/train"``)."""
    if not isinstance(obj, Mapping):
        return "<not an object>"
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "<no kind>"
    return f"{kind} {_namespace(obj)}/{_name(obj)}"


def string_map(value: Any, field: str) -> dict[str, str]:
    """Labels or annotations as ``{str: str}`` (values stringified, nulls dropped).

    Raises:
        AdapterError: not a mapping.
    """
    return {str(k): str(v) for k, v in mapping(value, field).items() if v is not None}


def count_field(value: Any, field: str, default: int | None = None) -> int:
    """A replica-like count (``as_int`` with ``minimum=0``). Raises ``AdapterError`` when not an integer ≥ 0."""
    return as_int(value, field, default=default, minimum=0)


def template_priority(templates: Iterable[Any]) -> str | None:
    """The first non-empty ``spec.priorityClassName`` among PodTemplateSpec dicts (None when none)."""
    for t in templates:
        pc = get_path(t, "spec.priorityClassName")
        if isinstance(pc, str) and pc:
            return pc
    return None


def build_gang(
    obj: Mapping,
    pod_sets: Iterable[PodSet],
    *,
    findings: Iterable[Finding] = (),
    templates: Iterable[Any] = (),
    volcano_queue: str | None = None,
    priority_class: str | None = None,
    name: str | None = None,
) -> GangRequest:
    """Assemble a ``GangRequest`` from a workload object and its pod sets.

    Args:
        obj: the workload as a dict (``apiVersion``, ``kind``, ``metadata``, ``spec``).
        pod_sets: one ``PodSet`` per role, counts in pods.
        findings: the adapter's own lints (InvalidGang, MinAvailableBelowTasks, …).
        templates: PodTemplateSpec dicts searched for ``priorityClassName``.
        volcano_queue: the Volcano queue when the kind names one (``spec.queue``); otherwise
            taken from the ``volcano.sh/queue-name`` label/annotation when present.
        priority_class: an explicit priority class (e.g. Kubeflow schedulingPolicy.priorityClass),
            used when the Kueue priority label is absent, before the templates.
        name: the gang name (default: the object's name, see module doc).

    Raises:
        AdapterError: labels or annotations that are not mappings.
    """
    meta = mapping(obj.get("metadata"), "metadata")
    labels = string_map(meta.get("labels"), "metadata.labels")
    annotations = string_map(meta.get("annotations"), "metadata.annotations")
    queue = labels.get(QUEUE_NAME) or annotations.get(QUEUE_NAME) or None
    prio = labels.get(PRIORITY_CLASS) or priority_class or template_priority(templates)
    if volcano_queue is None:
        for key in VOLCANO_QUEUE_KEYS:
            volcano_queue = labels.get(key) or annotations.get(key)
            if volcano_queue:
                break
        else:
            volcano_queue = None
    return GangRequest(
        kind=str(obj.get("kind") or ""),
        name=name or _name(obj),
        namespace=_namespace(obj),
        pod_sets=tuple(pod_sets),
        api_version=str(obj.get("apiVersion") or ""),
        queue_name=queue,
        volcano_queue=volcano_queue or None,
        priority_class=prio or None,
        findings=tuple(findings),
        labels=frozen_map(labels),
        annotations=frozen_map(annotations),
    )


def pod_group_pod_set(spec: Mapping, field: str = "spec") -> PodSet:
    """The members of a PodGroup (Volcano or scheduler-plugins) as one pod set ``"members"``.

    A PodGroup carries no pod template, only ``minMember`` (pods, Go zero value 0 when absent)
    and ``minResources`` (the total the group needs). Shape: count = minMember, per-pod requests
    = minResources / minMember per resource, rounded up (cpu millicores, memory bytes, counts),
    so that count × request ≥ minResources. minMember 0 → count 0, no requests.

    The per-pod shape is an assumption (minMember counts only the pods that must start together;
    the members may differ and may tolerate any taint): ``exact_shape`` is False, so it is never
    proof of NeverFits, and ``stated_total`` carries minResources itself, which quota and gang
    totals use (issue #17 item 3).

    Raises:
        AdapterError: minMember not an integer ≥ 0, or a minResources value that is not a quantity.
    """
    members = count_field(spec.get("minMember"), f"{field}.minMember", default=0)
    total = resource_map(spec.get("minResources"), f"{field}.minResources")
    per_pod = {r: -(-v // members) for r, v in total.items() if v > 0} if members else {}
    stated = {r: v for r, v in total.items() if v > 0}
    return PodSet(name="members", count=members, requests=frozen_map(per_pod), exact_shape=False,
                  stated_total=frozen_map(stated) if members else None)
