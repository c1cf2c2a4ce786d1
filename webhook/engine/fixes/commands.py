"""kubectl commands that carry a fix out: evictions (``_eviction_commands``: a Kueue Workload
deactivated, a job suspended by its kind's field (``SUSPEND``), or pods deleted), PodGroup
deletions, and the shell quoting they all use (``_q``, ``_qs``).

Owns the command text and its sources; not which pods to evict (``search``) nor the fixes'
summaries (``consolidation``, ``repair``, ``quota_fixes``). No I/O: commands are strings.
"""

from __future__ import annotations

import shlex
from typing import Iterable, Mapping, Sequence

from ..model import GangRequest
from ..snapshot import ClusterSnapshot
from .ranking import Victim
from .units import Unit

__all__ = ["SUSPEND"]


#: that suspends it — the controller then deletes its pods and creates none until resumed.
#: Sources: batch/v1 Job and JobSet ``spec.suspend`` (kubernetes/api batch/v1 JobSpec,
#: kubernetes-sigs/jobset api jobset_types.go); KubeRay RayJob ``spec.suspend`` (ray-operator
#: apis/ray/v1 rayjob_types.go); Kubeflow Trainer TrainJob ``spec.suspend``; Kubeflow training
#: operator jobs and MPIJob v2beta1 ``spec.runPolicy.suspend`` (kubeflow/training-operator
#: pkg/apis/kubeflow.org/v1 common_types.go RunPolicy, kubeflow/mpi-operator v2beta1 RunPolicy).
#: Other kinds (PodGroups, Volcano Jobs, RayClusters, LeaderWorkerSets) have no such field:
#: their pods are deleted, whole.
SUSPEND: Mapping[str, tuple[str, str]] = {
    "Job": ("jobs.batch", '{"spec":{"suspend":true}}'),
    "JobSet": ("jobsets.jobset.x-k8s.io", '{"spec":{"suspend":true}}'),
    "RayJob": ("rayjobs.ray.io", '{"spec":{"suspend":true}}'),
    "TrainJob": ("trainjobs.trainer.kubeflow.org", '{"spec":{"suspend":true}}'),
    **{k: (f"{k.lower()}s.kubeflow.org", '{"spec":{"runPolicy":{"suspend":true}}}')
       for k in ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")},
}


#: The merge patch that deactivates a Kueue Workload (kueue apis/kueue/v1beta1 workload_types.go: spec.active).
_DEACTIVATE = '{"spec":{"active":false}}'


def _kueue_workload(snap: ClusterSnapshot, kind: str, ns: str, name: str):
    """The Kueue Workload of the gang ``kind`` ``ns/name`` in ``snap`` (``KueueWorkload.belongs_to``),
    None when none is there; the Workloads are indexed once per snapshot."""
    key = ("fixes.workloads_by_owner",)
    index = snap.recall(key)
    if index is None:
        index = {}
        for wl in snap.kueue.workloads.values():
            okind, _, oname = wl.owner.partition("/")
            index.setdefault((wl.namespace, okind.lower(), oname), wl)
            index.setdefault((wl.namespace, "\0name", wl.name), wl)
        index = snap.remember(key, index)
    hit = index.get((ns, kind.lower(), name))  # type: ignore[union-attr]
    if hit is None and kind in ("Pod", "PodGroup"):
        hit = index.get((ns, "\0name", name))  # type: ignore[union-attr]
    return hit


def _eviction_commands(snap: ClusterSnapshot, units: Sequence[Unit], chosen: Sequence[int], victims: Sequence[Victim],
                       verb: str) -> list[str]:
    """What evicts the chosen units, every pod of them named: for a move, ``delete pod`` (their
    controllers recreate them; one command per namespace); for a preemption, a gang whose
    controller can be told to stop is stopped whole — a Kueue Workload deactivated
    (``spec.active: false``: Kueue evicts it and keeps it queued; suspending a job Kueue admitted
    would be undone by Kueue), else the kind's suspend field (``SUSPEND``) — and every other pod
    is deleted."""
    by_unit: dict[str, list[Victim]] = {}
    for v in victims:
        by_unit.setdefault(v.unit, []).append(v)
    stop: list[str] = []
    delete: dict[str, list[str]] = {}
    queued_units = {units[i].key for i in chosen if any(p.queue for p in units[i].pods)}
    for k in sorted({units[i].key for i in chosen}):
        pods = by_unit.get(k, [])
        kind, ns, name = (k.split("/", 2) + ["", ""])[:3]
        if verb != "move" and kind != "Pod" and name:
            queued = k in queued_units
            wl = _kueue_workload(snap, kind, ns, name) if snap.kueue.workloads else None
            if wl is not None:
                stop.append(f"kubectl -n {_q(ns)} patch workloads.kueue.x-k8s.io {_q(wl.name)} --type=merge -p "
                            f"'{_DEACTIVATE}'   # Kueue evicts {kind} {name} whole and keeps it queued, inactive")
                continue
            if kind in SUSPEND and not queued:
                res, patch = SUSPEND[kind]
                stop.append(f"kubectl -n {_q(ns)} patch {res} {_q(name)} --type=merge -p '{patch}'"
                            f"   # suspends {kind} {name}: its pods leave, none is recreated until it is resumed")
                continue
        for v in pods:
            delete.setdefault(v.namespace, []).append(v.name)
    out = list(stop)
    why = ("   # their controllers recreate them on the other nodes" if verb == "move"
           else "   # pods with a controller come back Pending; pods without one are gone")
    for ns in sorted(delete):
        out.append(f"kubectl -n {_q(ns)} delete pod " + _qs(delete[ns]) + why)
    return out

def _resource_of(gang: GangRequest) -> str:
    """How kubectl names the gang's object unambiguously: ``kind.group`` (``job.batch``,
    ``job.batch.volcano.sh``, ``pytorchjob.kubeflow.org``), the kind alone for the core group."""
    group = gang.api_version.rpartition("/")[0] if gang.api_version and "/" in gang.api_version else ""
    return f"{gang.kind.lower()}.{group}" if group else gang.kind.lower()


def _q(word: str) -> str:
    """``word`` quoted for a POSIX shell (unchanged when it is a plain Kubernetes name)."""
    return shlex.quote(word)


def _qs(words: Iterable[str]) -> str:
    """``words`` quoted and joined by spaces (``_q``)."""
    return " ".join(map(shlex.quote, words))


def _sample(names: Sequence[str], k: int = 3) -> str:
    """The first ``k`` names, and how many more ("a, b, c and 5 more")."""
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")

def _delete_podgroups(pgs: Sequence[str]) -> list[str]:
    """``kubectl delete podgroup`` for every "namespace/name" of ``pgs``, one command per namespace."""
    by: dict[str, list[str]] = {}
    for p in pgs:
        ns, _, name = p.partition("/")
        by.setdefault(ns, []).append(name)
    return [f"kubectl -n {_q(ns)} delete podgroup " + _qs(names) for ns, names in sorted(by.items())]
