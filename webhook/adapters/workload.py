"""Kueue Workloads (kueue.x-k8s.io v1beta1 / v1beta2) → ``KueueWorkload``.

Kueue keeps a Job it manages suspended — no pods — until the Job's Workload is admitted, so the
gangs waiting in a ClusterQueue are visible only as Workloads. ``gangcheck diagnose`` lists the
ones ahead of a gang and what the admitted ones hold; the expected-wait estimator counts the
pending ones ahead.
"""

from __future__ import annotations

from collections.abc import Mapping
from ..engine.model import KueueWorkload, frozen_map
from .meta import object_name, object_namespace, object_ref, parse_time, signed_int
from .errors import AdapterError
from .podspec import as_int, effective_requests, get_path, list_of, mapping

__all__ = ["workload_from_k8s", "MAX_COUNT"]

#: spec.podSets[].count is an int32 in the Workload CRD.
MAX_COUNT = 2**31 - 1

#: Kueue's Workload conditions, in the order that decides the state (the first "True" wins).
_STATES = (("Finished", "Finished"), ("Admitted", "Admitted"), ("QuotaReserved", "QuotaReserved"))


def _owner(meta: Mapping) -> str:
    refs = [r for r in list_of(meta.get("ownerReferences"), "metadata.ownerReferences") if isinstance(r, Mapping)]
    ref = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    if ref is None or not ref.get("kind") or not ref.get("name"):
        return ""
    return f"{ref['kind']}/{ref['name']}"


def _state_and_message(spec: Mapping, status: Mapping) -> tuple[str, str]:
    conds = [c for c in list_of(status.get("conditions"), "status.conditions") if isinstance(c, Mapping)]
    by_type = {str(c.get("type") or ""): c for c in conds}
    state = "Pending"
    for ctype, name in _STATES:
        c = by_type.get(ctype)
        if c is not None and str(c.get("status")) == "True":
            state = name
            break
    if state == "Pending" and spec.get("active") is False:
        state = "Inactive"
    # The newest message Kueue wrote (lastTransitionTime is RFC 3339, so text order is time order).
    newest = max((c for c in conds if c.get("message")), key=lambda c: str(c.get("lastTransitionTime") or ""), default=None)
    return state, " ".join(str(newest.get("message")).split()) if newest is not None else ""


def workload_from_k8s(obj: Mapping) -> KueueWorkload:
    """A Kueue Workload → ``KueueWorkload`` (see its docstring for each field's source).

    ``requests`` are Σ count × effective request of spec.podSets[].template.spec (FIELD-NOTES
    §1 rules, as for a Pod); a pod set without a template counts its pods with no request. For a
    Workload holding quota, a pod set's count is its admission's podSetAssignments[].count when
    given (partial admission).

    Raises:
        AdapterError: no metadata.name, a pod set whose count is not an integer in [0, 2³¹−1],
            a template that is not a mapping, unreadable requests, a bad time, a
            status.admission.clusterQueue that is not a name; names the Workload and the field.
    """
    try:
        name = object_name(obj)
        ns = object_namespace(obj)
        meta = mapping(obj.get("metadata"), "metadata")
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        sets: list[tuple[str, int, dict[str, int]]] = []
        for i, ps in enumerate(list_of(spec.get("podSets"), "spec.podSets")):
            field = f"spec.podSets[{i}]"
            ps = mapping(ps, field)
            count = as_int(ps.get("count", 1), f"{field}.count", minimum=0)
            if count > MAX_COUNT:
                raise AdapterError(f"expected at most {MAX_COUNT} (int32), got {count}", field=f"{field}.count")
            template = mapping(ps.get("template"), f"{field}.template")
            tspec = template.get("spec")
            per_pod = {} if tspec is None else effective_requests(mapping(tspec, f"{field}.template.spec"), f"{field}.template.spec")
            sets.append((str(ps.get("name") or ""), count, per_pod))
        priority = signed_int(spec["priority"], "spec.priority") if spec.get("priority") is not None else 0
        state, message = _state_and_message(spec, status)
        admission = mapping(status.get("admission"), "status.admission")
        cq = admission.get("clusterQueue")
        if cq is not None and not isinstance(cq, str):
            raise AdapterError(f"expected the name of a ClusterQueue, got {cq!r}", field="status.admission.clusterQueue")
        # Partial admission: Kueue may admit fewer pods than spec.podSets[].count asks for;
        # what a reserved Workload holds is its admission's podSetAssignments[].count.
        admitted: dict[str, int] = {}
        if state in ("QuotaReserved", "Admitted"):
            for j, a in enumerate(list_of(admission.get("podSetAssignments"), "status.admission.podSetAssignments")):
                a = mapping(a, f"status.admission.podSetAssignments[{j}]")
                if a.get("count") is not None:
                    admitted[str(a.get("name") or "")] = as_int(a.get("count"), f"status.admission.podSetAssignments[{j}].count")
        pods = 0
        total: dict[str, int] = {}
        for ps_name, count, per_pod in sets:
            count = admitted.get(ps_name, count)
            pods += count
            for r, v in per_pod.items():
                total[r] = total.get(r, 0) + v * count
        return KueueWorkload(
            namespace=ns,
            name=name,
            queue_name=str(spec.get("queueName") or ""),
            cluster_queue=str(cq) if isinstance(cq, str) and state in ("QuotaReserved", "Admitted", "Finished") else "",
            priority=priority,
            created=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            pods=pods,
            requests=frozen_map(total),
            state=state,
            message=message,
            owner=_owner(meta),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
