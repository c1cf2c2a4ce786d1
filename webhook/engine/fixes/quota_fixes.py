"""Quota fixes, from the decision's quota findings: raise or borrow Kueue quota (ClusterQueue
nominalQuota / borrowingLimit, the cohort tree), lower a quota above physical capacity, raise a
Volcano queue's capability / deserved share, release orphan PodGroups.

Owns the wording and commands of those fixes; not the quota verdict (``engine/quota``).
"""

from __future__ import annotations

from ..decision import Decision
from .commands import _delete_podgroups, _sample
from .ranking import Fix


def _quota_fixes(snap, gang, decision: Decision) -> list[Fix]:
    out = []
    for f in decision.findings:
        d = f.data
        if f.code == "WaitingForQuota":
            r, more = d.get("resource"), d.get("more_needed")
            if d.get("cluster_queue"):
                cq = d["cluster_queue"]
                edit = f"kubectl edit clusterqueue {cq}   # spec.resourceGroups[].flavors[].resources[{r}]"
                cohort = d.get("cohort")
                if not cohort:
                    # A ClusterQueue outside any cohort has nothing to borrow from (kueue
                    # resource_node.go: a node without a parent gets its own quota only).
                    out.append(Fix("raise-quota",
                        f"raise ClusterQueue {cq}'s nominalQuota for {r} by {more} (it is in no cohort, so it cannot borrow), "
                        "or wait for its admitted workloads to finish",
                        commands=[f"kubectl get clusterqueue {cq} -o yaml", edit + ".nominalQuota"]))
                elif d.get("binding") == "borrowingLimit" and d.get("binding_object") == f"ClusterQueue/{cq}":
                    out.append(Fix("borrow-quota",
                        f"let ClusterQueue {cq} borrow {more} more {r} from cohort {cohort} (raise its borrowingLimit), or raise its nominalQuota",
                        commands=[f"kubectl get clusterqueue {cq} -o yaml", edit + ".borrowingLimit"]))
                else:
                    # What binds is above the ClusterQueue (the cohort's unused pool or a Cohort's
                    # borrowingLimit): raising its own borrowingLimit would not help.
                    root = d.get("binding_cohort") or cohort
                    out.append(Fix("borrow-quota",
                        f"ClusterQueue {cq} can borrow from cohort {cohort}, but the cohort tree ({root}) has {more} {r} too little unused: "
                        f"raise its nominalQuota, or a cohort member's nominalQuota / lendingLimit, or wait for the other members' workloads",
                        commands=[f"kubectl get clusterqueues -o wide   # cohort {cohort}: who uses what", f"kubectl get clusterqueue {cq} -o yaml",
                                  edit + ".nominalQuota"]))
            elif d.get("queue"):
                q = d["queue"]
                out.append(Fix("raise-quota", f"raise Volcano queue {q}'s capability for {r} by {more}",
                               commands=[f"kubectl get queues.scheduling.volcano.sh {q} -o yaml", f"kubectl edit queues.scheduling.volcano.sh {q}   # spec.capability"]))
        elif f.code == "OrphanPodGroups":
            pgs = list(d.get("pod_groups") or [])
            out.append(Fix("release-reservations",
                f"delete {len(pgs)} orphan PodGroup(s) that reserve queue quota with no running pod: " + _sample(pgs, 5),
                sufficient=True,
                commands=_delete_podgroups(pgs)))
        elif f.code == "ExceedsDeservedShare" and d.get("plugin") == "capacity":
            q = d.get("queue")
            out.append(Fix("raise-quota",
                f"raise Volcano queue {q}'s spec.deserved for {d.get('resource')} to ≥ {d.get('request')} (now {d.get('deserved'):g}) "
                "so its pods are not reclaimed, or give it a guarantee",
                commands=[f"kubectl edit queues.scheduling.volcano.sh {q}   # spec.deserved / spec.guarantee.resource"]))
        elif f.code == "ExceedsDeservedShare":
            q = d.get("queue")
            out.append(Fix("raise-quota",
                f"give Volcano queue {q} a guarantee ≥ {d.get('request')} {d.get('resource')} or a higher weight (deserved {d.get('deserved')})",
                commands=[f"kubectl edit queues.scheduling.volcano.sh {q}   # spec.guarantee.resource / spec.weight"]))
        elif f.code == "QuotaExceedsCapacity":
            cq = d.get("cluster_queue")
            out.append(Fix("lower-quota",
                f"lower ClusterQueue {cq}'s {d.get('resource')} quota in flavor {d.get('flavor')} from {d.get('nominal')} to the "
                f"{d.get('physical')} that exist, so Kueue's own preemption (not kube-scheduler) decides who runs",
                commands=[f"kubectl edit clusterqueue {cq}"]))
    return out
