"""Volcano queue quota: capability (hard cap) and deserved share (``evaluate_volcano``,
``proportion_deserved``, ``queue_demands``). Quantities are scheduler units (GPUs as counts); not
Kueue (``kueue``, ``kueue_admit``).

* ``spec.capability`` is a hard cap (FIELD-NOTES §3): a gang whose minimum exceeds it can never
  run in that queue; allocated + minimum above it waits.
* Deserved share, proportion plugin (volcano v1.15 pkg/scheduler/plugins/proportion/
  proportion.go, OnSessionOpen): only queues with jobs in the session take part; the cluster
  total is handed out by weight in rounds ("water-filling"): each round a queue not yet
  satisfied gets remaining × weight / Σ weights of unsatisfied queues, capped by its real
  capability (total − Σ every queue's guarantee + its own guarantee, and spec.capability) and by
  its request, raised to its guarantee; a queue is satisfied when its request fits or its share
  stopped growing; rounds end when the remainder is (near) empty or stops changing. The
  plugin's allocatable check refuses a task once allocated + request exceeds the share, so a
  gang whose minimum exceeds its queue's share cannot start while the other queues keep their
  demand (Waits, ExceedsDeservedShare).
* Capacity plugin (pkg/scheduler/plugins/capacity/capacity.go, buildQueueAttrs): the share is
  ``spec.deserved`` (capped by the real capability, raised to the guarantee). That plugin
  allocates up to the real capability; deserved only decides what may be reclaimed — so a
  queue that sets spec.deserved gets an Info finding, not a Waits, when the gang exceeds it.

* Enqueue, proportion plugin (proportion.go, the JobEnqueueableFn): a PodGroup is enqueued only
  when its minResources + the queue's allocated + the unallocated minResources of the queue's
  Inqueue PodGroups fit the queue's real capability. Those reserves are what
  ``util.GetInqueueResource`` returns: for cpu and memory the minimum less what the group has
  allocated; for a scalar resource (GPUs) the minimum's *unit* value while the rest of the
  arithmetic is in milli-units, so an Inqueue group's GPUs reserve 1/1000 of their count — below
  the 0.1 tolerance for whole GPUs. The check mirrors that: Inqueue groups reserve cpu and
  memory of the capability, not GPUs (WaitingForQuota, Waits).
* Enqueue, overcommit plugin (pkg/scheduler/plugins/overcommit/overcommit.go; on in Volcano's
  Helm chart configuration, factor 1.2): a PodGroup is enqueued only when its minResources + the
  minResources of every Inqueue PodGroup in the cluster fit ``factor × Σ allocatable of the
  Ready nodes − Σ requests of the pods on them``, on the resources the PodGroup asks for
  (ClusterOverused, Waits: the pods holding the cluster may finish).

Volcano counts scalar resources (GPUs) in milli-units and compares with a 0.1 tolerance
(pkg/scheduler/api/resource_info.go minResource); the loop below does the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..model import Finding, GangRequest, PodGroupState, VolcanoQueue, VolcanoState, add_resources


def _sum(maps) -> dict:
    out: dict = {}
    for m in maps:
        out = add_resources(out, m)
    return out
from .common import INFO, NEVER, WAITS, QuotaResult, fmt

__all__ = ["QueueDemand", "ClusterUsage", "proportion_deserved", "queue_demands", "evaluate_volcano", "MIN_RESOURCE",
           "OVERCOMMIT_FACTOR"]

#: Volcano's comparison tolerance and "empty" threshold, in its units (milli for scalars).
MIN_RESOURCE = 0.1
#: The overcommit plugin's default overcommit-factor (overcommit.go defaultOverCommitFactor), the
#: value of Volcano's Helm chart configuration (it names the plugin with no argument).
OVERCOMMIT_FACTOR = 1.2
#: Rounds of the water-filling loop before giving up (Volcano has no bound; each round either
#: satisfies a queue or shrinks the remainder, so real inputs end in ≤ queues + a few rounds).
MAX_ROUNDS = 10_000


@dataclass
class QueueDemand:
    """One queue in the proportion plugin's session: scheduler units (GPUs as counts).

    ``request``: running + pending demand; ``capability``: spec.capability (absent = unbounded);
    ``guarantee``: spec.guarantee.resource.
    """

    name: str
    weight: int = 1
    request: Mapping[str, float] = field(default_factory=dict)
    capability: Mapping[str, float] = field(default_factory=dict)
    guarantee: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterUsage:
    """What Volcano's session sees of the cluster: ``total`` = Σ allocatable of the Ready nodes
    (framework/session.go ``TotalResource``, from the cache snapshot's Ready nodes), ``used`` =
    Σ requests of the pods bound to them; scheduler units."""

    total: Mapping[str, int] = field(default_factory=dict)
    used: Mapping[str, int] = field(default_factory=dict)


def _le(left: float, right: float) -> bool:
    """Volcano's lessEqualFunc: l < r or |l − r| < minResource."""
    return left < right or abs(left - right) < MIN_RESOURCE


def proportion_deserved(total: Mapping[str, float], queues: list[QueueDemand], total_guarantee: Mapping[str, float] | None = None,
                        milli: bool = True) -> dict[str, dict[str, float]]:
    """The proportion plugin's deserved share of each queue in ``queues``, per resource of ``total``.

    Args:
        total: the cluster's allocatable per resource (scheduler units).
        queues: the queues with jobs in the session (others take no share).
        total_guarantee: Σ spec.guarantee over *all* queues (default: over ``queues``).
        milli: compute in Volcano's milli-units (scalar resources) so its 0.1 tolerance means
            what it means there; results are returned in scheduler units.

    Returns:
        queue name → resource → deserved (float, scheduler units).
    """
    scale = 1000.0 if milli else 1.0
    dims = list(total)
    tg = total_guarantee if total_guarantee is not None else _sum(q.guarantee for q in queues)
    deserved: dict[str, dict[str, float]] = {q.name: {r: 0.0 for r in dims} for q in queues}
    real_cap: dict[str, dict[str, float]] = {}
    req: dict[str, dict[str, float]] = {}
    gua: dict[str, dict[str, float]] = {}
    for q in queues:
        gua[q.name] = {r: float(q.guarantee.get(r, 0)) * scale for r in dims}
        rc = {r: max(0.0, float(total[r]) - float(tg.get(r, 0))) * scale + gua[q.name][r] for r in dims}
        for r in dims:
            if r in q.capability:
                rc[r] = min(rc[r], float(q.capability[r]) * scale)
        real_cap[q.name] = rc
        req[q.name] = {r: float(q.request.get(r, 0)) * scale for r in dims}
    remaining = {r: float(total[r]) * scale for r in dims}
    meet: set[str] = set()
    for _ in range(MAX_ROUNDS):
        total_weight = sum(q.weight for q in queues if q.name not in meet)
        if total_weight == 0:
            break
        old_remaining = dict(remaining)
        inc = {r: 0.0 for r in dims}
        dec = {r: 0.0 for r in dims}
        for q in queues:
            if q.name in meet:
                continue
            old = deserved[q.name]
            new = {}
            for r in dims:
                d = old[r] + remaining[r] * (q.weight / total_weight)
                d = min(d, real_cap[q.name][r])
                d = min(d, req[q.name][r])
                new[r] = max(d, gua[q.name][r])
            deserved[q.name] = new
            if all(_le(req[q.name][r], new[r]) for r in dims) or new == old:
                meet.add(q.name)
            for r in dims:
                if new[r] > old[r]:
                    inc[r] += new[r] - old[r]
                else:
                    dec[r] += old[r] - new[r]
        remaining = {r: max(0.0, remaining[r] + dec[r] - inc[r]) for r in dims}
        if all(v < MIN_RESOURCE for v in remaining.values()) or remaining == old_remaining:
            break
    return {name: {r: v / scale for r, v in d.items()} for name, d in deserved.items()}


_DONE = ("Completed", "Failed")


def _is_own(pg: PodGroupState, gang: GangRequest) -> bool:
    """The gang's own PodGroup: same namespace and its name, or ``<name>-<uid>`` as Volcano's job
    controller names a Job's PodGroup."""
    if pg.namespace != gang.namespace or not gang.name:
        return False
    return pg.name == gang.name or (pg.name.startswith(gang.name + "-") and len(pg.name) - len(gang.name) - 1 == 36)


def queue_demands(volcano: VolcanoState, gang: GangRequest, queue: str, need: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Each queue's demand as the snapshot shows it, plus ``need`` (the gang) in ``queue``.

    Demand = max(status.allocated, Σ minResources of its running PodGroups) + Σ minResources of
    PodGroups still waiting (Pending / Inqueue / Unknown with no running pod); Completed and
    Failed PodGroups and the gang's own PodGroup are left out. A lower bound: pods beyond a
    group's minimum are not in the snapshot, so competitors' demand is never overstated.
    """
    running: dict[str, dict[str, int]] = {}
    waiting: dict[str, dict[str, int]] = {}
    for pg in volcano.pod_groups.values():
        if pg.phase in _DONE or not pg.queue or _is_own(pg, gang):
            continue
        bucket = running if (pg.phase == "Running" or pg.running > 0) else waiting
        bucket[pg.queue] = add_resources(bucket.get(pg.queue, {}), pg.min_resources)
    # A parent queue's status.allocated is its children's (Volcano's root queue, the parent of
    # every queue without spec.parent, carries the whole cluster's): it holds no job of its own,
    # and the proportion plugin shares only among queues with jobs in the session.
    parents = {o.parent for o in volcano.queues.values() if o.parent} | {"root"}
    out: dict[str, dict[str, int]] = {}
    for name in set(volcano.queues) | set(running) | set(waiting) | {queue}:
        q = volcano.queues.get(name)
        alloc = dict(q.allocated) if q is not None and name not in parents else {}
        run = running.get(name, {})
        base = {r: max(alloc.get(r, 0), run.get(r, 0)) for r in set(alloc) | set(run)}
        d = add_resources(base, waiting.get(name, {}))
        if name == queue:
            d = add_resources(d, dict(need))
        d = {r: v for r, v in d.items() if v > 0}
        if d:
            out[name] = d
    return out


def queue_allocated(volcano: VolcanoState, gang: GangRequest, queue: str) -> dict[str, int]:
    """What ``queue`` holds now: max(status.allocated, Σ minResources of its running PodGroups),
    the running part of ``queue_demands`` (the gang's own PodGroup left out)."""
    run: dict[str, int] = {}
    for pg in volcano.pod_groups.values():
        if pg.queue == queue and pg.phase not in _DONE and not _is_own(pg, gang) and (pg.phase == "Running" or pg.running > 0):
            run = add_resources(run, pg.min_resources)
    q = volcano.queues.get(queue)
    alloc = dict(q.allocated) if q is not None else {}
    return {r: max(alloc.get(r, 0), run.get(r, 0)) for r in set(alloc) | set(run)}


def evaluate_volcano(gang: GangRequest, volcano: VolcanoState, cluster_gpus: dict[str, int] | None = None,
                     cluster: ClusterUsage | None = None) -> QuotaResult:
    """Check a gang against its Volcano Queue.

    ExceedsMaxQuota (NeverFits) when the gang minimum exceeds ``spec.capability`` on any
    resource; WaitingForQuota when ``status.allocated`` + minimum exceeds it; QueueNotFound /
    QueueClosed (Waits); ExceedsDeservedShare when the minimum exceeds the queue's deserved
    share on a resource of ``cluster_gpus`` (the cluster's allocatable per GPU resource): Waits
    under the proportion plugin's water-filling over the queues with demand (``queue_demands``),
    Info where the queue sets spec.deserved (capacity plugin); OrphanPodGroups (Info) for
    PodGroups in the queue that reserve resources with no running pod; ClusterOverused (Waits)
    when ``cluster`` is given and the overcommit plugin would not enqueue the gang.
    """
    name = gang.volcano_queue or "default"
    res = QuotaResult("volcano", name)
    q: VolcanoQueue | None = volcano.queues.get(name)
    need = {r: v for r, v in gang.total_requests().items() if v > 0 and r != "pods"}
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
    reserved = _inqueue_reserve(volcano, gang, name)
    for r, v in need.items():
        cap = q.capability.get(r)
        used = q.allocated.get(r, 0) + reserved.get(r, 0)
        if cap is not None and used + v > cap:
            held = (f"{fmt(r, q.allocated.get(r, 0))} allocated and {fmt(r, reserved[r])} reserved by Inqueue PodGroups"
                    if reserved.get(r) else f"{fmt(r, used)}")
            res.findings.append(Finding("WaitingForQuota", WAITS,
                f"insufficient unused quota for {r} in Volcano queue {name}: {held} of {fmt(r, cap)} allocated, "
                f"{fmt(r, used + v - cap)} more needed", {"resource": r, "more_needed": used + v - cap, "queue": name}))
    if cluster is not None:
        _real_capability(res, volcano, q, need, reserved, cluster)
        _overcommit(res, gang, volcano, need, cluster)
    _deserved_share(res, gang, volcano, q, need, cluster_gpus or {})
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


def _inqueue_reserve(volcano: VolcanoState, gang: GangRequest, queue: str) -> dict[str, int]:
    """cpu and memory the queue's Inqueue PodGroups reserve against its capability at enqueue
    (proportion.go ``OnSessionOpen``: ``attr.inqueue`` from ``util.GetInqueueResource``); not
    scalar resources, which that function adds in units to milli-unit sums (see the module
    docstring). A group's allocated part is not known here; an Inqueue group holds none until
    the allocate action binds its whole minimum, and then it turns Running."""
    out: dict[str, int] = {}
    for pg in volcano.pod_groups.values():
        if pg.queue != queue or pg.phase != "Inqueue" or pg.api_group != "scheduling.volcano.sh" or _is_own(pg, gang):
            continue
        out = add_resources(out, {r: v for r, v in pg.min_resources.items() if r in ("cpu", "memory")})
    return out


def _real_capability(res: QuotaResult, volcano: VolcanoState, q: VolcanoQueue, need: Mapping[str, int],
                     reserved: Mapping[str, int], cluster: ClusterUsage) -> None:
    """WaitingForQuota (Waits) when the gang + the queue's allocated + its Inqueue reserve exceed
    the queue's *real* capability: the cluster's total less every queue's guarantee plus its own,
    capped by spec.capability (proportion.go ``OnSessionOpen`` ``realCapability`` and its
    JobEnqueueableFn; capacity.go ``buildQueueAttrs`` computes it the same way). Other queues'
    guarantees hold part of the cluster even while they are idle; the node count (not this) says
    whether the cluster could ever hold the gang, so this is never a NeverFits."""
    others = _sum(o.guarantee for o in volcano.queues.values())
    for r, v in need.items():
        if r in ("cpu", "memory") or r in cluster.total:
            scale = 1.0 if r in ("cpu", "memory") else 1000.0
            real = max(0, cluster.total.get(r, 0) - others.get(r, 0)) + q.guarantee.get(r, 0)
            if r in q.capability:
                real = min(real, q.capability[r])
            held = q.allocated.get(r, 0) + reserved.get(r, 0)
            if any(f.code == "WaitingForQuota" and f.data.get("resource") == r for f in res.findings):
                continue
            # with nothing held and nothing guaranteed elsewhere, only a gang above the whole
            # cluster is refused here, which the node count already tells
            if (others.get(r, 0) - q.guarantee.get(r, 0) > 0 or held > 0) and not _le((held + v) * scale, real * scale):
                res.findings.append(Finding("WaitingForQuota", WAITS,
                    f"Volcano queue {q.name} can hold at most {fmt(r, real)} {r} (the cluster's {fmt(r, cluster.total.get(r, 0))}"
                    + (f" less {fmt(r, others[r] - q.guarantee.get(r, 0))} guaranteed to other queues"
                       if others.get(r, 0) - q.guarantee.get(r, 0) > 0 else "")
                    + f"); {fmt(r, held)} held by it and its Inqueue PodGroups, the gang needs {fmt(r, v)}",
                    {"resource": r, "more_needed": held + v - real, "queue": q.name, "real_capability": real,
                     "guaranteed_elsewhere": others.get(r, 0) - q.guarantee.get(r, 0)}))


def _overcommit(res: QuotaResult, gang: GangRequest, volcano: VolcanoState, need: Mapping[str, int],
                cluster: ClusterUsage) -> None:
    """ClusterOverused (Waits) when the overcommit plugin would refuse to enqueue the gang:
    minResources + Σ minResources of the Inqueue PodGroups > factor × total − used on a resource
    the gang asks for (overcommit.go: ``idleResource``, ``inqueueResource``,
    ``LessEqualWithDimensionAndResourcesName`` on the job's own resources). Compared in
    Volcano's units (milli for scalars) with its 0.1 tolerance."""
    inqueue: dict[str, int] = {}
    for pg in volcano.pod_groups.values():
        if pg.phase == "Inqueue" and pg.api_group == "scheduling.volcano.sh" and not _is_own(pg, gang):
            inqueue = add_resources(inqueue, pg.min_resources)
    for r, v in need.items():
        scale = 1.0 if r in ("cpu", "memory") else 1000.0
        idle = float(cluster.total.get(r, 0)) * scale * OVERCOMMIT_FACTOR - float(cluster.used.get(r, 0)) * scale
        ask = float(inqueue.get(r, 0) + v) * scale
        if not _le(ask, idle):
            res.findings.append(Finding("ClusterOverused", WAITS,
                f"Volcano's overcommit plugin does not enqueue the gang: {fmt(r, v)} {r}"
                + (f" + {fmt(r, inqueue[r])} of Inqueue PodGroups" if inqueue.get(r) else "")
                + f" > {OVERCOMMIT_FACTOR:g} × {fmt(r, cluster.total.get(r, 0))} allocatable − {fmt(r, cluster.used.get(r, 0))} in use;"
                " it is enqueued once pods holding the cluster finish",
                {"resource": r, "request": v, "inqueue": inqueue.get(r, 0), "total": cluster.total.get(r, 0),
                 "used": cluster.used.get(r, 0), "factor": OVERCOMMIT_FACTOR, "plugin": "overcommit"}))
            return


def _deserved_share(res: QuotaResult, gang: GangRequest, volcano: VolcanoState, q: VolcanoQueue, need: dict[str, int],
                    totals: Mapping[str, int]) -> None:
    dims = {r: float(v) for r, v in totals.items() if r in need}
    if not dims:
        return
    total_guarantee = _sum(o.guarantee for o in volcano.queues.values())
    if q.deserved:
        # Capacity plugin: spec.deserved, capped by the real capability, raised to the guarantee.
        for r, v in need.items():
            if r not in dims or r not in q.deserved:
                continue
            real = max(0.0, dims[r] - total_guarantee.get(r, 0)) + q.guarantee.get(r, 0)
            if r in q.capability:
                real = min(real, q.capability[r])
            share = max(min(float(q.deserved[r]), real), float(q.guarantee.get(r, 0)))
            if not _le(v * 1000.0, share * 1000.0):
                res.findings.append(Finding("ExceedsDeservedShare", INFO,
                    f"gang minimum {fmt(r, v)} {r} exceeds queue {q.name}'s deserved {share:g} (spec.deserved): the capacity "
                    "plugin still admits it up to the queue's capability, but its pods beyond the deserved share may be "
                    "reclaimed when other queues need theirs",
                    {"resource": r, "request": v, "deserved": share, "queue": q.name, "plugin": "capacity"}))
        return
    demands = queue_demands(volcano, gang, q.name, need)
    queues = []
    for qname, d in sorted(demands.items()):
        o = volcano.queues.get(qname)
        if o is None:
            continue  # a PodGroup naming a queue that does not exist is not scheduled
        queues.append(QueueDemand(qname, o.weight, d, dict(o.capability), dict(o.guarantee)))
    shares = proportion_deserved(dims, queues, total_guarantee)
    mine = shares.get(q.name, {})
    competitors = [o.name for o in queues if o.name != q.name and any(o.request.get(r, 0) > 0 for r in dims)]
    # The allocate action's check is the queue's allocated + the task ≤ its deserved share
    # (proportion.go ``queueAllocatable``), task by task until the gang's minimum is placed.
    held = queue_allocated(volcano, gang, q.name)
    for r, v in need.items():
        if r not in dims:
            continue
        share = mine.get(r, 0.0)
        h = held.get(r, 0)
        if not _le((h + v) * 1000.0, share * 1000.0):
            others = [c for c in competitors if demands[c].get(r, 0) > 0]
            res.findings.append(Finding("ExceedsDeservedShare", WAITS,
                f"gang minimum {fmt(r, v)} {r}" + (f" + {fmt(r, h)} the queue already holds" if h else "")
                + f" exceeds queue {q.name}'s deserved share ({share:g} of {fmt(r, dims[r])}) while "
                + (f"queue(s) {', '.join(others[:5])}" + (f" and {len(others) - 5} more" if len(others) > 5 else "")
                   + " also ask for it" if others else "the queue's own other jobs ask for it")
                + "; it may starve until their demand falls",
                {"resource": r, "request": v, "held": h, "deserved": share, "queue": q.name, "plugin": "proportion",
                 "competing_queues": others}))
