"""Step 1 of ``diagnose``, quota: can the gang's queue ever hold it, and can it now? (FIELD-NOTES §5)

Owns the quota step's facts and meaning (``quota_step``) and what Kueue's Workloads say about a
ClusterQueue (``kueue_workloads``). Reads the engine's quota findings from the ``Decision``
(``webhook.engine.quota`` decides them); does not render text. Pure: no I/O, no clock.
Units: GPUs are device counts (nvidia.com/gpu, amd.com/gpu and MIG slices summed); other
resources in scheduler units.
"""

from __future__ import annotations

from shlex import quote as _q
from typing import Any

from ..engine.decision import Decision
from ..engine.fixes import GangView, own_pod
from ..engine.model import GangRequest, KueueWorkload
from ..engine.snapshot import GPU, ClusterSnapshot
from .report import QuotaStep

__all__ = ["quota_step", "kueue_workloads"]

QUESTION = "Can the gang's queue ever hold it, and can it now?"

#: Engine findings the quota step states in its meaning when no ExceedsMaxQuota/WaitingForQuota does.
_OTHER_CODES = ("LocalQueueNotFound", "ClusterQueueNotFound", "ResourceNotCovered", "NoMatchingFlavor", "ClusterQueueStopped",
                "QueueNotFound", "QueueClosed", "ExceedsDeservedShare", "ClusterOverused", "HeadOfLineBlocking", "KueueNotInSnapshot",
                "QuotaReserved", "CohortHasCycle", "CohortTooDeep")


def quota_step(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView) -> QuotaStep:
    """The quota step for ``gang`` given the engine's decision ``d``: Kueue, Volcano or no queue."""
    q = d.quota or {}
    findings: dict[str, Any] = {}
    if q.get("cluster_queue") or gang.queue_name:
        cmd = _kueue_facts(snap, gang, view, q, findings)
    elif q.get("queue") or gang.volcano_queue is not None:
        name = q.get("queue") or gang.volcano_queue or "default"
        cmd = f"kubectl get queue {_q(name)} -o yaml && kubectl get podgroups -A -o wide"
        findings.update({"system": "volcano", "queue": name, "request": q.get("request", {}),
                         "capability": q.get("capability", {}), "allocated": q.get("allocated", {}), "state": q.get("state")})
    else:
        cmd = f"kubectl -n {_q(gang.namespace)} get resourcequota"
        findings["system"] = None
    orphan = next((f for f in reversed(d.findings) if f.code == "OrphanPodGroups"), None)
    if orphan is not None:
        findings["orphan_pod_groups"] = list(orphan.data.get("pod_groups", []))
        findings["orphan_reserved"] = dict(orphan.data.get("reserved", {}))
    meaning, status = _quota_meaning(d, findings, orphan is not None)
    return QuotaStep(question=QUESTION, command=cmd, meaning=meaning, status=status, **findings)


def _kueue_facts(snap: ClusterSnapshot, gang: GangRequest, view: GangView, q: dict, findings: dict[str, Any]) -> str:
    """Fill ``findings`` for a Kueue gang (LocalQueue → ClusterQueue, limits of the assigned
    flavors, the queue's counters, the gangs ahead); return the kubectl command."""
    ns = gang.namespace
    cq_name = q.get("cluster_queue", "")
    cmd = (f"kubectl -n {_q(ns)} get localqueue {_q(gang.queue_name or '')} -o wide && "
           f"kubectl get clusterqueue {_q(cq_name or '<cq>')} -o yaml")
    findings["system"] = "kueue"
    findings["local_queue"] = f"{ns}/{gang.queue_name}"
    findings["cluster_queue"] = cq_name or None
    findings["request"] = q.get("request", {})
    assigned = set((q.get("flavors") or {}).values())
    findings["limits"] = {flavor: per for flavor, per in (q.get("limits") or {}).items() if not assigned or flavor in assigned}
    cq = snap.kueue.cluster_queues.get(cq_name)
    if cq is not None:
        findings["pending_workloads"] = cq.pending_workloads
        findings["admitted_workloads"] = cq.admitted_workloads
        findings["queueing_strategy"] = cq.queueing_strategy
        findings["preemption"] = dict(cq.preemption)
    # pending gangs ahead of this one in the same ClusterQueue
    queues = {lq.name for (lns, _), lq in snap.kueue.local_queues.items() if lq.cluster_queue == cq_name} if cq_name else set()
    ahead: dict[str, dict] = {}
    for p in snap.pending_pods:
        if p.queue and p.queue in queues and not own_pod(gang, p) and p.priority >= view.priority:
            k = p.gang or f"Pod/{p.namespace}/{p.name}"
            a = ahead.setdefault(k, {"pods": 0, "gpus": 0, "priority": p.priority})
            a["pods"] += 1
            a["gpus"] += sum(v for r, v in p.requests.items() if r == GPU or r.startswith("nvidia.com/mig-"))
    findings["ahead"] = dict(sorted(ahead.items())[:10])
    findings["ahead_total"] = len(ahead)
    if cq_name and any(snap.kueue.cluster_queue_of(w) == cq_name for w in snap.kueue.workloads.values()):
        # Kueue keeps a Workload for every gang it queues (a suspended Job has no pods):
        # the Workloads are the queue, in Kueue's order; pods would count groups twice.
        cmd += " && kubectl get workloads -A -o wide"
        findings.update(kueue_workloads(snap, gang, cq_name, view.priority))
        findings["ahead"] = {k: {"pods": w["pods"], "gpus": w["gpus"], "priority": w["priority"]}
                             for k, w in findings["workloads_ahead"].items()}
        findings["ahead_total"] = findings["workloads_ahead_total"]
    return cmd


def _quota_meaning(d: Decision, findings: dict[str, Any], orphan: bool) -> tuple[str, str]:
    """(meaning, status) of the quota step from the engine's findings and the facts."""
    codes = {f.code: f for f in d.findings}
    never = codes.get("ExceedsMaxQuota")
    waiting = codes.get("WaitingForQuota")
    other = [f for f in d.findings if f.code in _OTHER_CODES]
    if findings.get("system") is None:
        meaning, status = "The gang names no Kueue or Volcano queue: quota does not hold it back.", "ok"
    elif never is not None:
        meaning, status = f"It can never be admitted by this queue: {never.message}.", "blocking"
    elif waiting is not None:
        meaning, status = f"It fits the queue's maximum but not now: {waiting.message}.", "blocking"
        if orphan:
            meaning += f" {len(findings['orphan_pod_groups'])} PodGroup(s) reserve quota with no running pod: the usage is not real."
    elif other:
        meaning = " ".join(f.message.rstrip(".") + "." for f in other)
        status = "blocking" if any(f.severity == "Waits" for f in other) else "info"
    else:
        meaning, status = "Quota is not the problem: the request fits the queue's limits now.", "ok"
        if orphan:
            meaning += f" Note: {len(findings['orphan_pod_groups'])} orphan PodGroup(s) reserve quota."
    if findings.get("ahead_total"):
        meaning += f" {findings['ahead_total']} pending gang(s) are queued ahead of it in the same ClusterQueue."
    if findings.get("holding"):
        h = findings["holding"]
        meaning += (f" Admitted workloads hold {h['gpus']} GPU(s) of this ClusterQueue's quota"
                    f" ({h['workloads']} workload(s), {h['pods']} pod(s)).")
    own = findings.get("own_workload")
    if own and own.get("message") and own.get("state") in ("Pending", "Inactive"):
        meaning += f" Kueue says of Workload {own['name']}: \"{own['message']}\""
        if own.get("state") == "Inactive":
            meaning += " (spec.active is false: Kueue will not consider it until it is reactivated)"
        meaning += "."
    return meaning, status


def _gpus(requests) -> int:
    return int(sum(v for r, v in requests.items() if r == GPU or r.startswith("nvidia.com/mig-") or r == "amd.com/gpu"))


def kueue_workloads(snap: ClusterSnapshot, gang: GangRequest, cq_name: str, priority: int) -> dict[str, Any]:
    """What Kueue's Workloads say about ClusterQueue ``cq_name`` (Kueue orders pending Workloads
    by priority, then creation time; BestEffortFIFO and StrictFIFO alike):

    * ``own_workload``: the gang's own Workload (``name``, ``state``, ``message``), or None when
      the gang has not been submitted;
    * ``workloads_ahead``: pending Workloads queued before it — higher priority, or equal
      priority and created earlier (all equal-priority ones when the gang has no Workload yet;
      the priority compared is its Workload's, else ``priority``, the pods' priority)
      — as ``{"Workload/ns/name": {"owner", "pods", "gpus", "priority", "created"}}``, at most
      10, in queue order;
    * ``holding``: the admitted (quota-reserved) Workloads: ``{"workloads", "pods", "gpus",
      "top": [{"workload", "owner", "pods", "gpus", "priority"}]}`` (top 5 by GPUs).

    GPUs are Σ count × request of nvidia.com/gpu, amd.com/gpu and MIG slices. Pure.
    """
    own = None
    mine, theirs = [], []
    for wl in snap.kueue.workloads.values():
        if snap.kueue.cluster_queue_of(wl) != cq_name:
            continue
        if wl.belongs_to(gang.kind, gang.namespace, gang.name):
            own = wl
            continue
        (mine if wl.holds_quota else theirs).append(wl)
    created = own.created if own is not None else None
    if own is not None:
        priority = own.priority  # Kueue orders by the Workload's priority (WorkloadPriorityClass or the pods')

    def before(wl: KueueWorkload) -> bool:
        if wl.state != "Pending":
            return False
        if wl.priority != priority:
            return wl.priority > priority
        return created is None or wl.created is None or wl.created < created

    ahead = sorted((w for w in theirs if before(w)), key=lambda w: (-w.priority, w.created or 0.0, w.namespace, w.name))
    out: dict[str, Any] = {
        "own_workload": ({"name": f"{own.namespace}/{own.name}", "state": own.state, "message": own.message}
                         if own is not None else None),
        "workloads_ahead": {f"Workload/{w.namespace}/{w.name}": {"owner": w.owner, "pods": w.pods, "gpus": _gpus(w.requests),
                                                                 "priority": w.priority, "created": w.created} for w in ahead[:10]},
        "workloads_ahead_total": len(ahead),
    }
    if mine:
        top = sorted(mine, key=lambda w: (-_gpus(w.requests), w.namespace, w.name))[:5]
        out["holding"] = {
            "workloads": len(mine), "pods": sum(w.pods for w in mine), "gpus": sum(_gpus(w.requests) for w in mine),
            "top": [{"workload": f"{w.namespace}/{w.name}", "owner": w.owner, "pods": w.pods, "gpus": _gpus(w.requests),
                     "priority": w.priority} for w in top],
        }
    return out


