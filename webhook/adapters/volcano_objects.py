"""Volcano Queues and PodGroups (Volcano's and scheduler-plugins coscheduling's) → engine values.

Owns: ``volcano_queue_from_k8s`` (scheduling.volcano.sh/v1beta1 Queue: capability, deserved,
guarantee, weight, state, reclaimable, allocated, parent) and ``pod_group_from_k8s`` (a PodGroup
of scheduling.volcano.sh/v1beta1 or scheduling.x-k8s.io/v1alpha1 as the cluster holds it: queue,
minMember, minResources, phase, running). Does not own the Volcano Job / PodGroup → gang
adapters (``volcano``, ``coscheduling``) nor queue arithmetic (``webhook.engine.quota``).

Quantities are scheduler units (cpu millicores, memory bytes, counts otherwise); an absent
capability resource is unbounded. Pure: no I/O.
Upstream: volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go (Queue and PodGroup fields).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.model import PodGroupState, VolcanoQueue, frozen_map
from .errors import AdapterError
from .meta import VOLCANO, bool_field, object_name, object_namespace, object_ref
from .podspec import as_int, get_path, mapping, resource_map

__all__ = ["volcano_queue_from_k8s", "pod_group_from_k8s"]


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
        name = object_name(obj)
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
            reclaimable=bool_field(spec.get("reclaimable"), "spec.reclaimable", True),
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
        name = object_name(obj)
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        group = str(obj.get("apiVersion") or "").split("/", 1)[0]
        queue = spec.get("queue")
        if not queue and group == VOLCANO:
            queue = "default"
        return PodGroupState(
            namespace=object_namespace(obj),
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
