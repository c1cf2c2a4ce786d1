"""The quota step of ``evaluate``: which queue system a gang uses, and the quota lint.

Owns the glue between the snapshot and the quota package (``engine.quota``): a gang with a
Kueue queue label goes to ``evaluate_kueue`` (with its own quota-holding Workload, looked up
once per snapshot), one with a Volcano queue to ``evaluate_volcano`` (with the cluster's GPUs);
``lint_quota`` adds QuotaExceedsCapacity (Info) where a ClusterQueue promises more GPUs than
its flavor's nodes have. Not the quota rules themselves (``engine.quota``).

Units: scheduler units (GPUs as counts). Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .filters import Constraints, filter_nodes
from .model import Finding, GangRequest, PodSet, ResourceFlavor, Toleration
from .options import EngineOptions, all_or_nothing
from .quota import ClusterUsage, QuotaResult, evaluate_kueue, evaluate_volcano, lint_quota_vs_capacity
from .snapshot import ClusterSnapshot

__all__ = ["quota_step", "lint_quota"]


def quota_step(snap: ClusterSnapshot, gang: GangRequest, options: EngineOptions) -> QuotaResult | None:
    """The gang's queue check: ``evaluate_kueue`` for a Kueue queue label (KueueNotInSnapshot,
    Info, when the cluster data has no Kueue objects), ``evaluate_volcano`` for a Volcano queue;
    None when the gang names no queue."""
    if gang.queue_name:
        if not (snap.kueue.cluster_queues or snap.kueue.local_queues):
            q = QuotaResult("kueue", f"{gang.namespace}/{gang.queue_name}")
            q.findings.append(Finding("KueueNotInSnapshot", "Info",
                f"labelled for Kueue LocalQueue {gang.queue_name}, but the cluster data has no Kueue objects; quota not checked"))
            return q
        return evaluate_kueue(gang, snap.kueue, _reserved_workload(snap, gang))
    if gang.volcano_queue is not None:
        gpus = {}
        for r in snap.resources:
            if options.is_gpu(r):
                gpus[r] = int(snap.alloc[:, snap.col[r]].sum())
        if not all_or_nothing(gang, options):
            # Volcano groups such pods on their own (a PodGroup of minMember 1 per pod,
            # pkg/controllers/podgroup): the object's totals are not what its queue admits.
            gang = replace(gang, exact_total=False)
        return evaluate_volcano(gang, snap.volcano, gpus, _volcano_usage(snap))
    return None


def _volcano_usage(snap: ClusterSnapshot) -> ClusterUsage:
    """Σ allocatable and Σ requests of bound pods over the nodes Volcano's session counts (its
    cache snapshot keeps Ready nodes only: pkg/scheduler/cache/cache.go ``Snapshot``); built once
    per snapshot (``ClusterSnapshot.structure``: it does not depend on the gang's shape)."""
    def build() -> ClusterUsage:
        ready = np.fromiter((n.ready is not False for n in snap.nodes), dtype=bool, count=len(snap.nodes))
        total = {r: int(snap.alloc[ready, c].sum()) for r, c in snap.col.items() if r != "pods"}
        used = {r: int(snap.used[ready, c].sum()) for r, c in snap.col.items() if r != "pods"}
        return ClusterUsage(total, used)
    return snap.structure(("volcano-usage",), build)


def _reserved_workload(snap: ClusterSnapshot, gang: GangRequest):
    """The gang's own Kueue Workload when it holds quota (QuotaReserved/Admitted), else None.
    The quota-holding Workloads are indexed by namespace once per snapshot, so a check does
    not rescan every Workload."""
    if not snap.kueue.workloads:
        return None
    index = snap.recall(("kueue-reserved",))
    if index is None:
        by_ns: dict[str, list] = {}
        for w in snap.kueue.workloads.values():
            if w.holds_quota:
                by_ns.setdefault(w.namespace, []).append(w)
        index = snap.remember(("kueue-reserved",), by_ns)
    return next((w for w in index.get(gang.namespace, ()) if w.belongs_to(gang.kind, gang.namespace, gang.name)), None)


#: A pod that tolerates everything: only a flavor's labels narrow the nodes it means.
_ANY_POD = PodSet("lint", 0, {}, tolerations=(Toleration(operator="Exists"),))


def _flavor_capacity(snap: ClusterSnapshot, flavor: ResourceFlavor, resource: str) -> int:
    """Σ ever-allocatable ``resource`` on the nodes a flavor's nodeLabels select; memoised on
    the snapshot (it depends on nothing else, and every check of a Kueue gang asks for it)."""
    key = ("flavor-capacity", flavor.name, tuple(sorted(flavor.node_labels.items())), resource)
    hit = snap.recall(key)
    if hit is None:
        mask = filter_nodes(snap, Constraints(_ANY_POD, flavor.node_labels), ever=True).mask
        hit = snap.remember(key, int(snap.ever_alloc[mask, snap.col[resource]].sum()))
    return int(hit)


def lint_quota(snap: ClusterSnapshot, q: QuotaResult, options: EngineOptions, findings: list[Finding]) -> None:
    """QuotaExceedsCapacity (Info) for each GPU quota of the gang's ClusterQueue above what its
    flavor's nodes hold (``lint_quota_vs_capacity``)."""
    limits = q.report.get("limits") or {}
    cq = snap.kueue.cluster_queues.get(q.report.get("cluster_queue", ""))
    if cq is None:
        return
    for fname, per in limits.items():
        flavor = snap.kueue.flavors.get(fname) or ResourceFlavor(fname)
        for r, lim in per.items():
            if not options.is_gpu(r) or r not in snap.col:
                continue
            f = lint_quota_vs_capacity(cq, fname, r, lim["nominal"], _flavor_capacity(snap, flavor, r))
            if f:
                findings.append(f)
