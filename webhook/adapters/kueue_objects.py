"""Kueue's cluster-state objects → engine values: ResourceFlavor, ClusterQueue, LocalQueue, Cohort.

Owns: reading kueue.x-k8s.io v1beta1 / v1beta2 (v1alpha1 Cohort) objects — resource groups and
their quotas (nominalQuota, borrowingLimit, lendingLimit), a ClusterQueue's usage (quota
reserved, else usage), preemption policy with Kueue's defaults, the cohort tree's edges.
Does not own Workloads (``workload``), the Kueue pod-group gang adapter (``kueue_pods``) nor
quota arithmetic (``webhook.engine.quota``).

Quotas and usage are scheduler units (cpu millicores, memory bytes, counts otherwise); an
absent limit is None, Kueue's "unbounded". Pure: no I/O.
Upstream: kubernetes-sigs/kueue apis/kueue/v1beta1/clusterqueue_types.go (field defaults).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..engine.model import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, ResourceFlavor, ResourceGroup, ResourceQuota, frozen_map
from .errors import AdapterError
from .meta import object_name, object_namespace, object_ref, quantity, str_map
from .nodes import read_taints, read_tolerations
from .podspec import as_int, get_path, list_of, mapping

__all__ = ["resource_flavor_from_k8s", "cluster_queue_from_k8s", "local_queue_from_k8s", "cohort_from_k8s"]


def resource_flavor_from_k8s(obj: Mapping) -> ResourceFlavor:
    """A Kueue ResourceFlavor (v1beta1/v1beta2) → ``ResourceFlavor``: spec.nodeLabels,
    spec.nodeTaints, spec.tolerations, spec.topologyName.

    Raises:
        AdapterError: no name, malformed taints or tolerations.
    """
    try:
        name = object_name(obj)
        spec = mapping(obj.get("spec"), "spec")
        topo = spec.get("topologyName")
        return ResourceFlavor(
            name=name,
            node_labels=frozen_map(str_map(spec.get("nodeLabels"), "spec.nodeLabels")),
            node_taints=read_taints(spec.get("nodeTaints"), "spec.nodeTaints"),
            tolerations=read_tolerations(spec.get("tolerations"), "spec.tolerations"),
            topology_name=str(topo) if topo else None,
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def _named_entries(value: Any, field: str, what: str) -> Iterator[tuple[str, Mapping, str]]:
    """(field path, entry, name) of each entry of a list of named mappings (``flavors[]``,
    ``resources[]``), read lazily in order.

    Raises:
        AdapterError: not a list, an entry that is not a mapping, or one without a non-empty
            string name ("expected a <what> name").
    """
    for i, entry in enumerate(list_of(value, field)):
        entry_field = f"{field}[{i}]"
        entry = mapping(entry, entry_field)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise AdapterError(f"expected a {what} name", field=f"{entry_field}.name")
        yield entry_field, entry, name


def _resource_groups(value: Any, field: str) -> tuple[ResourceGroup, ...]:
    """spec.resourceGroups[] (ClusterQueue or Cohort) → ``ResourceGroup``s: coveredResources and,
    per flavor, each resource's nominalQuota (absent → 0), borrowingLimit and lendingLimit
    (absent → None, unbounded), in scheduler units.

    Raises:
        AdapterError: a group, flavor or resource that is not a mapping, a missing flavor or
            resource name, a quota that is not a quantity.
    """
    groups = []
    for g, rg in enumerate(list_of(value, field)):
        gf = f"{field}[{g}]"
        rg = mapping(rg, gf)
        covered = tuple(str(r) for r in list_of(rg.get("coveredResources"), f"{gf}.coveredResources"))
        flavors = []
        for ff, fq, fname in _named_entries(rg.get("flavors"), f"{gf}.flavors", "flavor"):
            quotas: dict[str, ResourceQuota] = {}
            for rf, rq, rname in _named_entries(fq.get("resources"), f"{ff}.resources", "resource"):
                nominal = rq.get("nominalQuota")
                bl, ll = rq.get("borrowingLimit"), rq.get("lendingLimit")
                quotas[rname] = ResourceQuota(
                    nominal=0 if nominal is None else quantity(rname, nominal, f"{rf}.nominalQuota"),
                    borrowing_limit=None if bl is None else quantity(rname, bl, f"{rf}.borrowingLimit"),
                    lending_limit=None if ll is None else quantity(rname, ll, f"{rf}.lendingLimit"),
                )
            flavors.append(FlavorQuotas(fname, frozen_map(quotas)))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def _flavor_usage(value: Any, field: str) -> dict[tuple[str, str], int]:
    """status.flavorsReservation / flavorsUsage ``[{name: flavor, resources: [{name, total}]}]``
    → ``{(flavor, resource): total}`` in scheduler units (absent total → 0).

    Raises:
        AdapterError: an entry that is not a mapping, a total that is not a quantity.
    """
    usage: dict[tuple[str, str], int] = {}
    for f, fu in enumerate(list_of(value, field)):
        ff = f"{field}[{f}]"
        fu = mapping(fu, ff)
        fname = str(fu.get("name") or "")
        for r, ru in enumerate(list_of(fu.get("resources"), f"{ff}.resources")):
            ru = mapping(ru, f"{ff}.resources[{r}]")
            rname = str(ru.get("name") or "")
            total = ru.get("total")
            usage[(fname, rname)] = 0 if total is None else quantity(rname, total, f"{ff}.resources[{r}].total")
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
        name = object_name(obj)
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
        name = object_name(obj)
        cq = get_path(obj, "spec.clusterQueue")
        if not isinstance(cq, str) or not cq:
            raise AdapterError("expected the name of a ClusterQueue", field="spec.clusterQueue")
        return LocalQueue(object_namespace(obj), name, cq)
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def cohort_from_k8s(obj: Mapping) -> Cohort:
    """A Kueue Cohort (v1alpha1/v1beta1 spec.parent, v1beta2 spec.parentName) → ``Cohort``
    with its own spec.resourceGroups.

    Raises:
        AdapterError: no name, malformed resource groups.
    """
    try:
        name = object_name(obj)
        spec = mapping(obj.get("spec"), "spec")
        parent = spec.get("parentName") or spec.get("parent")
        return Cohort(
            name=name,
            parent=str(parent) if parent else None,
            resource_groups=_resource_groups(spec.get("resourceGroups"), "spec.resourceGroups"),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
