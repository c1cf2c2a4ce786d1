"""v1 Nodes → ``Node``, and the taint and toleration lists Nodes and Kueue ResourceFlavors share.

Owns: ``node_from_k8s`` (labels, annotations, taints, cordon, the Ready condition, capacity and
allocatable) and the readers of ``[]Taint`` / ``[]Toleration`` (``read_taints``,
``read_tolerations``; ``kueue_objects`` reads a ResourceFlavor's nodeTaints and tolerations
with them). Does not own how taints are matched (``webhook.engine``) nor Pods (``pods``).

Resource amounts are scheduler units (cpu millicores, memory bytes, counts otherwise; see
``webhook.engine.quantity``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.model import Node, Taint, Toleration, frozen_map
from .errors import AdapterError
from .meta import bool_field, object_name, object_ref, str_map
from .podspec import list_of, mapping, resource_map

__all__ = ["node_from_k8s", "read_taints", "read_tolerations"]


def read_taints(value: Any, field: str) -> tuple[Taint, ...]:
    """A ``[]Taint`` (Node spec.taints, ResourceFlavor spec.nodeTaints) → ``Taint``s; a missing
    effect is NoSchedule, a null value "".

    Raises:
        AdapterError: not a list, a taint without a key, an effect other than NoSchedule,
            PreferNoSchedule or NoExecute.
    """
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


def read_tolerations(value: Any, field: str) -> tuple[Toleration, ...]:
    """A ``[]Toleration`` → ``Toleration``s; a missing operator is Equal, missing fields "".

    Raises:
        AdapterError: not a list, or an operator other than Equal or Exists.
    """
    out = []
    for i, t in enumerate(list_of(value, field)):
        t = mapping(t, f"{field}[{i}]")
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise AdapterError(f"expected operator Equal or Exists, got {op!r}", field=f"{field}[{i}].operator")
        out.append(Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or "")))
    return tuple(out)


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
        name = object_name(obj)
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
            labels=frozen_map(str_map(meta.get("labels"), "metadata.labels")),
            annotations=frozen_map(str_map(meta.get("annotations"), "metadata.annotations")),
            taints=read_taints(spec.get("taints"), "spec.taints"),
            unschedulable=bool_field(spec.get("unschedulable"), "spec.unschedulable", False),
            ready=ready,
            capacity=frozen_map(capacity),
            allocatable=frozen_map(allocatable),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
