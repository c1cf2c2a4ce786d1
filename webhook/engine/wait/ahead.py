"""Gangs that start before ours: ``AheadGang``, ``gangs_ahead`` and ``gang_priority``.

Owns who is ahead in the queue as the scheduler orders it — FIFO with priority, pending gangs
of strictly higher priority asking for the main pod set's device — and how many whole nodes
each reserves (Slurm reservations are whole nodes). What a gang ahead does to our wait is
``sweep``'s and ``simulate``'s.

Units: seconds (limits), whole nodes (reservations); priorities as PriorityClass values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..filters import Constraints, filter_nodes
from ..model import BoundPod, GangRequest
from ..snapshot import ClusterSnapshot
from .inputs import device_resources, limit_of, main_pod_set, median_per_node

__all__ = ["AheadGang", "gangs_ahead", "gang_priority"]


@dataclass(frozen=True, slots=True)
class AheadGang:
    """A pending gang that starts before ours (higher priority, or earlier in the same queue).

    Attributes:
        name: its key, for messages ("Kind/namespace/name").
        nodes: whole nodes it reserves (Slurm reservations are whole nodes).
        limit_s: its run-time limit in seconds (activeDeadlineSeconds, Kueue maximum execution
            time, the runtime annotation), None when unknown.
        queue / owner_kind: the key its runtime is learned under in ``RuntimeHistory``.
        priority: its priority. A later arrival of higher priority passes it only when this is
            at most ours (a same-priority gang earlier in the queue); None counts as higher.
    """

    name: str
    nodes: int
    limit_s: float | None = None
    queue: str = ""
    owner_kind: str = ""
    priority: int | None = None


def gangs_ahead(
    snap: ClusterSnapshot,
    gang: GangRequest,
    priority: int | None = None,
    *,
    eligible: np.ndarray | None = None,
) -> tuple[AheadGang, ...]:
    """Pending gangs in ``snap`` that start before ``gang``: strictly higher priority, asking
    for the main pod set's device resource, ordered by priority (highest first).

    ``priority`` defaults to ``gang_priority(snap, gang)``. Each gang reserves ⌈pods ÷
    pods-per-empty-node⌉ whole nodes among ``eligible`` (default: the main pod set's
    filters); its limit is the largest limit of its pods (None when any has none). Earlier same-priority gangs of the same queue are not
    included: pending pods carry no creation time in the snapshot.
    """
    ps, _ = main_pod_set(gang)
    if ps is None:
        return ()
    if priority is None:
        priority = gang_priority(snap, gang)
    devs = device_resources(ps)
    if eligible is None:
        eligible = filter_nodes(snap, Constraints(ps), ever=False).mask
    by: dict[str, list[BoundPod]] = {}
    for p in snap.pending_pods:
        if p.priority <= priority or p.gang == gang.key:
            continue
        if devs and not any(p.requests.get(r, 0) for r in devs):
            continue
        by.setdefault(p.gang or f"Pod/{p.namespace}/{p.name}", []).append(p)
    out = []
    for key, pods in by.items():
        per = median_per_node(snap, snap.alloc[eligible], pods[0].requests)
        if not per:
            continue
        nodes = -(-len(pods) // per)
        lims = [limit_of(p) for p in pods]
        lim = None if any(x is None for x in lims) else max(lims)
        prio = max(p.priority for p in pods)
        out.append((-prio, key, AheadGang(key, nodes, lim, pods[0].queue, pods[0].owner_kind, prio)))
    out.sort(key=lambda x: (x[0], x[1]))
    return tuple(a for *_, a in out)


def gang_priority(snap: ClusterSnapshot, gang: GangRequest) -> int:
    """The priority of ``gang``: the value of its ``priority_class`` in ``snap.priority_classes``
    (0 when unset or unknown) — what the scheduler orders pending gangs by."""
    return int(snap.priority_classes.get(gang.priority_class or "", 0))
