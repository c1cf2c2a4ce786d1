"""Queue quota: Kueue ClusterQueues and Volcano Queues.

Kueue (FIELD-NOTES §3, kueue pkg/scheduler/flavorassigner): a pod set's resources in one
resource group take one flavor, tried in order. The most a ClusterQueue can ever get from a
flavor is ``nominalQuota + borrowing ceiling`` where the ceiling is ``borrowingLimit`` bounded by
what the cohort can lend (Σ of the other members' lendingLimit, or nominalQuota when absent,
plus the Cohort object's own quota); outside a cohort it is 0. A cohort with a parent may lend
more than we can see, so its ceiling counts as unbounded unless borrowingLimit is set (a
possible false "never" is worse than a missed one).

Volcano (FIELD-NOTES §3): ``Queue.spec.capability`` is a hard cap; a gang whose minimum exceeds
it can never run in that queue.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from .model import (
    ClusterQueue,
    Finding,
    GangRequest,
    PodSet,
    ResourceFlavor,
    ResourceQuota,
    VolcanoQueue,
    add_resources,
)
from .quantity import format_quantity

__all__ = ["FlavorLimit", "QuotaResult", "evaluate_kueue", "evaluate_volcano", "INF"]

INF = math.inf
NEVER, WAITS, INFO = "NeverFits", "Waits", "Info"
#: Flavor assignments tried before giving up on a proof (then the gang is not called NeverFits).
MAX_FLAVOR_COMBINATIONS = 4096


@dataclass
class FlavorLimit:
    """Limits of one (flavor, resource) for a ClusterQueue; ``maximum`` may be ``INF``."""

    nominal: int
    borrowing_limit: int | None
    maximum: float
    usage: int
    available_now: float


@dataclass
class QuotaResult:
    """What the quota layer found.

    ``candidate_flavors``: pod-set name → flavors that could ever hold it (Kueue), used to
    narrow nodes; empty when quota does not narrow nodes. ``report`` is JSON-ready.
    """

    system: str
    queue: str
    findings: list[Finding] = field(default_factory=list)
    candidate_flavors: dict[str, list[ResourceFlavor]] = field(default_factory=dict)
    report: dict = field(default_factory=dict)


def _fmt(resource: str, v: float) -> str:
    return "unlimited" if v == INF else format_quantity(resource, int(v))


def _pod_set_request(ps: PodSet) -> dict[str, int]:
    """The pod set's total request: what the object states (``stated_total``, a PodGroup's
    minResources) where set, never the rounded-up estimate count × per-pod shape."""
    if ps.stated_total is not None:
        return {r: v for r, v in ps.stated_total.items() if v > 0}
    return {r: v * ps.count for r, v in ps.requests.items() if v > 0}


def _flavor_matches(ps: PodSet, flavor: ResourceFlavor | None) -> bool:
    """Kueue's flavor/pod compatibility: selector keys agree and flavor taints are tolerated."""
    if flavor is None:
        return True
    for k, v in flavor.node_labels.items():
        if k in ps.node_selector and ps.node_selector[k] != v:
            return False
    tolerations = ps.tolerations + flavor.tolerations
    for t in flavor.node_taints:
        if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in tolerations):
            return False
    return True


def _cohort_lendable(cq: ClusterQueue, others: list[ClusterQueue], cohort_quota: dict, flavor: str, resource: str) -> tuple[float, float]:
    """(what the cohort can ever lend to ``cq``, what it can lend now) for one flavor/resource."""
    ever = float(cohort_quota.get((flavor, resource), 0))
    now = ever
    for o in others:
        q = _quota(o, flavor, resource)
        if q is None:
            continue
        lendable = q.nominal if q.lending_limit is None else min(q.lending_limit, q.nominal)
        ever += lendable
        used = o.usage.get((flavor, resource), 0)
        # A member first uses its own non-lendable part, then the lendable part.
        own_guaranteed = q.nominal - lendable
        now += max(0, lendable - max(0, used - own_guaranteed))
    return ever, now


def _quota(cq: ClusterQueue, flavor: str, resource: str) -> ResourceQuota | None:
    for g in cq.resource_groups:
        if resource in g.covered_resources:
            for f in g.flavors:
                if f.name == flavor:
                    return f.resources.get(resource, ResourceQuota(0))
    return None


def _group_for(cq: ClusterQueue, resource: str):
    for g in cq.resource_groups:
        if resource in g.covered_resources:
            return g
    return None


def evaluate_kueue(gang: GangRequest, kueue, reserved=None) -> QuotaResult:
    """Check a Kueue-managed gang against its ClusterQueue.

    Args:
        gang: with ``queue_name`` set (label kueue.x-k8s.io/queue-name).
        kueue: a ``KueueState``.
        reserved: the gang's own ``KueueWorkload`` when it already holds quota (the caller
            looks it up); in the gang's ClusterQueue it yields an Info finding QuotaReserved
            and no quota check, since the ClusterQueue's usage already counts it.

    Returns:
        A ``QuotaResult`` with findings ExceedsMaxQuota (NeverFits), WaitingForQuota (Waits),
        LocalQueueNotFound / ClusterQueueNotFound / ResourceNotCovered / NoMatchingFlavor /
        ClusterQueueStopped (Waits), and the limits per resource in ``report``.
    """
    lq_key = (gang.namespace, gang.queue_name or "")
    res = QuotaResult("kueue", f"{gang.namespace}/{gang.queue_name}")
    lq = kueue.local_queues.get(lq_key)
    if lq is None:
        res.findings.append(Finding("LocalQueueNotFound", WAITS,
            f"LocalQueue {gang.queue_name} not found in namespace {gang.namespace}; Kueue holds the workload until it exists"))
        return res
    cq = kueue.cluster_queues.get(lq.cluster_queue)
    res.report = {"local_queue": lq.name, "cluster_queue": lq.cluster_queue}
    if cq is None:
        res.findings.append(Finding("ClusterQueueNotFound", WAITS,
            f"ClusterQueue {lq.cluster_queue} (from LocalQueue {lq.name}) not found"))
        return res
    own = reserved if reserved is not None and kueue.cluster_queue_of(reserved) == cq.name else None
    if own is not None:
        # The gang's own Workload already holds its quota (QuotaReserved/Admitted): the
        # ClusterQueue's usage includes it, and quota is not what holds it back.
        res.report.update({"request": {r: v for r, v in gang.total_requests().items() if v}, "cohort": cq.cohort, "limits": {},
                           "workload": f"{own.namespace}/{own.name}", "workload_state": own.state})
        res.findings.append(Finding("QuotaReserved", "Info",
            f"Workload {own.namespace}/{own.name} already holds its quota in ClusterQueue {cq.name} ({own.state}); "
            "quota is not what holds it back"))
        return res
    if cq.stop_policy not in ("", "None"):
        res.findings.append(Finding("ClusterQueueStopped", WAITS,
            f"ClusterQueue {cq.name} has stopPolicy {cq.stop_policy}: nothing is admitted until it is lifted"))
    others = [o for o in kueue.cluster_queues.values() if cq.cohort and o.cohort == cq.cohort and o.name != cq.name]
    cohort_obj = kueue.cohorts.get(cq.cohort) if cq.cohort else None
    cohort_quota: dict[tuple[str, str], int] = {}
    if cohort_obj is not None:
        for g in cohort_obj.resource_groups:
            for f in g.flavors:
                for r, q in f.resources.items():
                    cohort_quota[(f.name, r)] = q.nominal
    parent_unknown = cohort_obj is not None and cohort_obj.parent is not None

    def limit(flavor: str, resource: str) -> FlavorLimit:
        q = _quota(cq, flavor, resource) or ResourceQuota(0)
        usage = cq.usage.get((flavor, resource), 0)
        if not cq.cohort:
            ceiling_ever = ceiling_now = 0.0
        else:
            lend_ever, lend_now = _cohort_lendable(cq, others, cohort_quota, flavor, resource)
            if parent_unknown:
                lend_ever = lend_now = INF
            bl = INF if q.borrowing_limit is None else q.borrowing_limit
            ceiling_ever = min(bl, lend_ever)
            borrowed_now = max(0, usage - q.nominal)
            ceiling_now = max(0.0, min(bl - borrowed_now, lend_now))
        own_free = max(0, q.nominal - usage)
        return FlavorLimit(q.nominal, q.borrowing_limit, q.nominal + ceiling_ever, usage, own_free + ceiling_now)

    # Per pod set: candidate flavors (in order) of the group covering its resources.
    candidates: dict[str, list[str]] = {}
    blocked = False
    for ps in gang.pod_sets:
        req = _pod_set_request(ps)
        groups = {}
        for r in req:
            if r == "pods":
                continue
            g = _group_for(cq, r)
            if g is None:
                res.findings.append(Finding("ResourceNotCovered", WAITS,
                    f"ClusterQueue {cq.name} does not declare {r}; Kueue does not admit the workload unless its configuration excludes {r}",
                    {"resource": r, "cluster_queue": cq.name}))
                blocked = True
                continue
            groups[id(g)] = g
        names: list[str] | None = None
        for g in groups.values():
            fl = [f.name for f in g.flavors if _flavor_matches(ps, kueue.flavors.get(f.name))]
            names = fl if names is None else [n for n in names if n in fl]
        if names is None:
            names = []
        if groups and not names:
            res.findings.append(Finding("NoMatchingFlavor", WAITS,
                f"pod set {ps.name}: no flavor of ClusterQueue {cq.name} matches its node selector and tolerations"))
            blocked = True
        candidates[ps.name] = names
    requests = {ps.name: _pod_set_request(ps) for ps in gang.pod_sets}
    total = gang.total_requests()
    res.report.update({"request": {r: v for r, v in total.items() if v}, "cohort": cq.cohort})
    if blocked or not gang.pod_sets:
        res.report["limits"] = {}
        return res

    def covered(ps_name):
        return [r for r in requests[ps_name] if r != "pods" and _group_for(cq, r) is not None]

    # Only pod sets asking for something the ClusterQueue covers take part in flavor assignment.
    quota_sets = [ps for ps in gang.pod_sets if covered(ps.name)]
    if not quota_sets:
        res.report["limits"] = {}
        return res
    # A flavor whose maximum cannot hold the pod set alone is never assigned to it.
    all_candidates = candidates
    candidates = {
        name: [f for f in fl if all(requests[name][r] <= limit(f, r).maximum for r in covered(name))]
        for name, fl in all_candidates.items()
    }
    # Ever: does any assignment of flavors to pod sets stay within every maximum?
    combos = itertools.product(*(candidates[ps.name] for ps in quota_sets))
    best_ever = None
    searched_all = True
    for i, combo in enumerate(combos):
        if i >= MAX_FLAVOR_COMBINATIONS:
            searched_all = False
            break
        per: dict[tuple[str, str], int] = {}
        for ps, fname in zip(quota_sets, combo):
            for r in covered(ps.name):
                per[(fname, r)] = per.get((fname, r), 0) + requests[ps.name][r]
        if all(v <= limit(f, r).maximum for (f, r), v in per.items()):
            best_ever = dict(zip((ps.name for ps in quota_sets), combo))
            break
    limits_report = {}
    for ps in quota_sets:
        for f in candidates[ps.name] or all_candidates[ps.name][:1]:
            for r in covered(ps.name):
                lim = limit(f, r)
                limits_report.setdefault(f, {})[r] = {
                    "nominal": lim.nominal,
                    "borrowing_limit": lim.borrowing_limit,
                    "maximum": None if lim.maximum == INF else int(lim.maximum),
                    "usage": lim.usage,
                    "available_now": None if lim.available_now == INF else int(lim.available_now),
                }
    res.report["limits"] = limits_report
    if best_ever is None and searched_all:
        # Report the resource that overflows in the first flavor of the first pod set.
        worst = None
        agg: dict[tuple[str, str], int] = {}
        for ps in quota_sets:
            f = (candidates[ps.name] or all_candidates[ps.name])[0]
            for r in covered(ps.name):
                agg[(f, r)] = agg.get((f, r), 0) + requests[ps.name][r]
        for (f, r), v in agg.items():
            lim = limit(f, r)
            if v > lim.maximum and (worst is None or v - lim.maximum > worst[3]):
                worst = (f, r, v, v - lim.maximum, lim)
        if worst is None:  # every flavor fits alone but no combination does
            f, r = next(iter(agg))
            worst = (f, r, agg[(f, r)], 0, limit(f, r))
        f, r, v, _, lim = worst
        bl = "unlimited" if lim.borrowing_limit is None else _fmt(r, lim.borrowing_limit)
        # A gang whose totals are assumed (a Kueue pod group seen one pod at a time) proves nothing.
        res.findings.append(Finding("ExceedsMaxQuota", NEVER if gang.exact_total else WAITS,
            f"insufficient quota for {r} in flavor {f}, request {_fmt(r, v)} > maximum capacity ({_fmt(r, lim.maximum)}): "
            f"ClusterQueue {cq.name} allows at most {_fmt(r, lim.maximum)} (nominal {_fmt(r, lim.nominal)} + borrowing {bl if cq.cohort else '0, no cohort'})",
            {"resource": r, "flavor": f, "request": v, "maximum": None if lim.maximum == INF else int(lim.maximum),
             "nominal": lim.nominal, "borrowing_limit": lim.borrowing_limit, "cluster_queue": cq.name}))
        # Kueue places the pods only on nodes of a flavor that matches the pod set, so the node
        # view keeps those flavors' nodeLabels even when quota fails (issue #17 item 17: the
        # same pod shape must show the same eligible nodes whether quota holds or not).
        res.candidate_flavors = {ps.name: [kueue.flavors.get(f) or ResourceFlavor(f) for f in all_candidates[ps.name]]
                                 for ps in quota_sets if all_candidates[ps.name]}
        return res
    res.candidate_flavors = {ps.name: [kueue.flavors.get(f) or ResourceFlavor(f) for f in candidates[ps.name]] for ps in quota_sets}
    # Now: Kueue's greedy, flavors in order per pod set.
    taken: dict[tuple[str, str], int] = {}
    assignment: dict[str, str] = {}
    shortfall = None
    for ps in quota_sets:
        chosen = None
        for f in candidates[ps.name]:
            if all(taken.get((f, r), 0) + requests[ps.name][r] <= limit(f, r).available_now for r in covered(ps.name)):
                chosen = f
                break
        if chosen is None:
            f = (best_ever or {}).get(ps.name) or candidates[ps.name][0]
            for r in covered(ps.name):
                need = taken.get((f, r), 0) + requests[ps.name][r] - limit(f, r).available_now
                if need > 0 and (shortfall is None or need > shortfall[2]):
                    shortfall = (f, r, need)
            chosen = f
        assignment[ps.name] = chosen
        for r in covered(ps.name):
            taken[(chosen, r)] = taken.get((chosen, r), 0) + requests[ps.name][r]
    res.report["flavors"] = assignment
    if shortfall is not None:
        f, r, need = shortfall
        res.findings.append(Finding("WaitingForQuota", WAITS,
            f"insufficient unused quota for {r} in flavor {f}, {_fmt(r, need)} more needed",
            {"resource": r, "flavor": f, "more_needed": int(need), "cluster_queue": cq.name}))
    return res


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
                f"exceeds queue capability for {r}: {_fmt(r, v)} > {_fmt(r, cap)} (Volcano queue {name})",
                {"resource": r, "request": v, "maximum": cap, "queue": name}))
    if any(f.severity == NEVER for f in res.findings):
        return res
    for r, v in need.items():
        cap = q.capability.get(r)
        used = q.allocated.get(r, 0)
        if cap is not None and used + v > cap:
            res.findings.append(Finding("WaitingForQuota", WAITS,
                f"insufficient unused quota for {r} in Volcano queue {name}: {_fmt(r, used)} of {_fmt(r, cap)} allocated, "
                f"{_fmt(r, used + v - cap)} more needed", {"resource": r, "more_needed": used + v - cap, "queue": name}))
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
                f"gang minimum {_fmt(r, v)} {r} exceeds queue {name}'s deserved share ({deserved:g}); it may starve while other queues are active",
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


def lint_quota_vs_capacity(cq: ClusterQueue, flavor: str, resource: str, nominal: int, physical: int) -> Finding | None:
    """QuotaExceedsCapacity (Info): a ClusterQueue promises more of a device than its flavor's nodes have."""
    if nominal > physical:
        return Finding("QuotaExceedsCapacity", INFO,
            f"ClusterQueue {cq.name} quota {nominal} {resource} in flavor {flavor} > {physical} on the nodes that flavor selects",
            {"cluster_queue": cq.name, "flavor": flavor, "resource": resource, "nominal": nominal, "physical": physical})
    return None


