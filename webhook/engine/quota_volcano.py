"""Volcano queue quota (moved from engine.quota; unchanged rules)."""

from __future__ import annotations

from .model import Finding, GangRequest, VolcanoQueue, add_resources
from .quota_common import INFO, NEVER, WAITS, QuotaResult, fmt

__all__ = ["evaluate_volcano"]


def _gang_minimum(gang: GangRequest) -> dict[str, int]:
    return gang.total_requests()


def evaluate_volcano(gang: GangRequest, volcano, cluster_gpus: dict[str, int] | None = None) -> QuotaResult:
    """Check a gang against its Volcano Queue.

    ExceedsMaxQuota (NeverFits) when the gang minimum exceeds ``spec.capability`` on any
    resource; WaitingForQuota when ``status.allocated`` + minimum exceeds it; QueueNotFound /
    QueueClosed (Waits); ExceedsDeservedShare (Waits) when the minimum exceeds the queue's
    deserved share (explicit ``deserved``, else the weight-proportional share of
    ``cluster_gpus``, Volcano's proportion plugin); OrphanPodGroups (Info) for PodGroups in the
    queue that reserve resources with no running pod.
    """
    name = gang.volcano_queue or "default"
    res = QuotaResult("volcano", name)
    q: VolcanoQueue | None = volcano.queues.get(name)
    need = {r: v for r, v in _gang_minimum(gang).items() if v > 0 and r != "pods"}
    res.report = {"queue": name, "request": need}
    if q is None:
        if volcano.queues:
            res.findings.append(Finding("QueueNotFound", WAITS, f"Volcano queue {name} not found"))
        return res
    res.report.update({"capability": dict(q.capability), "allocated": dict(q.allocated), "state": q.state})
    if q.state not in ("", "Open"):
        res.findings.append(Finding("QueueClosed", WAITS, f"Volcano queue {name} is {q.state}: no new jobs are scheduled"))
    for r, v in need.items():
        cap = q.capability.get(r)
        if cap is not None and v > cap:
            # A gang whose totals are assumed proves nothing.
            res.findings.append(Finding("ExceedsMaxQuota", NEVER if gang.exact_total else WAITS,
                f"exceeds queue capability for {r}: {fmt(r, v)} > {fmt(r, cap)} (Volcano queue {name})",
                {"resource": r, "request": v, "maximum": cap, "queue": name}))
    if any(f.severity == NEVER for f in res.findings):
        return res
    for r, v in need.items():
        cap = q.capability.get(r)
        used = q.allocated.get(r, 0)
        if cap is not None and used + v > cap:
            res.findings.append(Finding("WaitingForQuota", WAITS,
                f"insufficient unused quota for {r} in Volcano queue {name}: {fmt(r, used)} of {fmt(r, cap)} allocated, "
                f"{fmt(r, used + v - cap)} more needed", {"resource": r, "more_needed": used + v - cap, "queue": name}))
    # Deserved share (proportion plugin): a gang larger than the share may starve while other queues are busy.
    # Proportion shares the cluster among queues with demand (PodGroups not yet Completed);
    # without PodGroups in the data every open queue counts.
    open_queues = [o for o in volcano.queues.values() if o.state in ("", "Open")]
    busy = {pg.queue for pg in volcano.pod_groups.values() if pg.phase not in ("Completed", "")} | {name}
    if volcano.pod_groups:
        open_queues = [o for o in open_queues if o.name in busy]
    weights = sum(max(1, o.weight) for o in open_queues) or 1
    for r, v in need.items():
        deserved = q.deserved.get(r)
        if deserved is None and cluster_gpus and r in cluster_gpus and len(open_queues) > 1:
            deserved = cluster_gpus[r] * max(1, q.weight) / weights
        if deserved is not None and v > deserved and q.guarantee.get(r, 0) < v:
            res.findings.append(Finding("ExceedsDeservedShare", WAITS,
                f"gang minimum {fmt(r, v)} {r} exceeds queue {name}'s deserved share ({deserved:g}); it may starve while other queues are active",
                {"resource": r, "request": v, "deserved": deserved, "queue": name}))
    orphans = [pg for pg in volcano.pod_groups.values()
               if pg.queue == name and pg.running == 0 and pg.phase in ("Inqueue", "Running", "Unknown") and pg.min_resources]
    if orphans:
        reserved = {}
        for pg in orphans:
            reserved = add_resources(reserved, pg.min_resources)
        res.findings.append(Finding("OrphanPodGroups", INFO,
            f"{len(orphans)} PodGroup(s) in queue {name} reserve quota with no running pod: "
            + ", ".join(f"{pg.namespace}/{pg.name}" for pg in orphans[:5]),
            {"pod_groups": [f"{pg.namespace}/{pg.name}" for pg in orphans], "reserved": reserved}))
    return res
