"""v1 Pod in a Kueue pod group → ``GangRequest``.

Kueue's plain-pod integration (``pkg/controller/jobs/pod``): pods labelled
``kueue.x-k8s.io/pod-group-name`` with the annotation ``kueue.x-k8s.io/pod-group-total-count``
form one workload of that many pods, and each pod arrives as its own admission request. The
adapter sees one pod, so it assumes every member has this pod's shape. A Pod outside a group is
not a gang.
"""

from __future__ import annotations

from collections.abc import Mapping

from dataclasses import replace

from ..engine.model import Finding, GangRequest
from .common import build_gang, count_field, mapping, string_map
from .errors import AdapterError
from .podspec import pod_set_from_template

__all__ = ["GROUP_NAME", "GROUP_TOTAL_COUNT", "adapt_pod"]

GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"


def adapt_pod(obj: Mapping) -> GangRequest | None:
    """A grouped Pod as a gang of total-count pods named after the group.

    Shape: one pod set ``"pods"``, count = the total-count annotation, per-pod requests = this
    pod's effective request; name = the group name. Adds an Info finding ``PodGroupShapeAssumed``
    (the other members' shapes are not known here). Returns None for a Pod without the
    group-name label.

    Raises:
        AdapterError: a group without the total-count annotation (Kueue's webhook requires it),
            a count that is not an integer ≥ 1, a pod without containers, bad quantities.
    """
    meta = mapping(obj.get("metadata"), "metadata")
    labels = string_map(meta.get("labels"), "metadata.labels")
    group = labels.get(GROUP_NAME)
    if not group:
        return None
    annotations = string_map(meta.get("annotations"), "metadata.annotations")
    field = f"metadata.annotations[{GROUP_TOTAL_COUNT}]"
    if annotations.get(GROUP_TOTAL_COUNT) is None:
        raise AdapterError("expected the pod group's total pod count, the annotation is missing", field=field)
    total = count_field(annotations[GROUP_TOTAL_COUNT], field)
    if total < 1:
        raise AdapterError(f"expected an integer ≥ 1, got {total}", field=field)
    template = {"metadata": meta, "spec": obj.get("spec")}
    try:
        pod_set = pod_set_from_template("pods", template, total, field="<pod>")
    except AdapterError as err:  # a Pod's fields are top-level: "<pod>.spec.x" → "spec.x"
        err.field = err.field.replace("<pod>.", "", 1)
        raise err.within() from None
    finding = Finding(
        "PodGroupShapeAssumed",
        "Info",
        f"pod group {group!r}: {total} pods assumed to have this pod's shape",
        {"group": group, "totalCount": total},
    )
    # Only this pod is known: the others may have other shapes (a launcher and its workers),
    # so neither the per-pod shape nor the totals can prove that the group never fits.
    pod_set = replace(pod_set, exact_shape=False)
    gang = build_gang(obj, [pod_set], findings=[finding], templates=[template], name=group)
    return replace(gang, exact_total=False)
