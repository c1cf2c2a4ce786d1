"""Step 5 of ``diagnose``, partial gangs: do partially started gangs hold resources without
progress? (FIELD-NOTES §7)

Owns finding the gangs with pods bound while siblings are Pending, the Volcano/coscheduling
PodGroups running fewer than minMember (``partial_gangs``), the pairs of them that deadlock (each
one's pending pods fit only if the other released its pods), and the step built from them
(``partial_gangs_step``). Does not render text. Pure: no I/O. Units: GPUs are device counts.
"""

from __future__ import annotations

from shlex import quote as _q

import numpy as np

from ..engine.evaluate import EngineOptions
from ..engine.fixes import NON_GANG_OWNERS, GangView
from ..engine.model import GangRequest
from ..engine.snapshot import GPU, ClusterSnapshot
from .report import SAMPLES, PartialGangsStep

__all__ = ["partial_gangs", "partial_gangs_step"]


def partial_gangs(snap: ClusterSnapshot, options: EngineOptions | None = None, limit: int = 50) -> list[dict]:
    """Gangs with pods bound while siblings are Pending (holding resources without progress),
    and Volcano/coscheduling PodGroups running fewer than minMember. Sorted by GPUs held, desc."""
    options = options or EngineOptions()
    pending_keys = {p.gang for p in snap.pending_pods if p.gang}
    groups: dict[str, dict] = {}
    if pending_keys:
        for p in snap.pods:
            k = p.gang
            if k not in pending_keys or p.owner_kind in NON_GANG_OWNERS:
                continue
            g = groups.setdefault(k, {"gang": k, "bound": 0, "pending": 0, "gpus_held": 0, "gpus_pending": 0, "nodes": set(), "priority": p.priority})
            gpus = sum(v for r, v in p.requests.items() if options.is_gpu(r))
            if p.node_name:
                g["bound"] += 1
                g["gpus_held"] += gpus
                g["nodes"].add(p.node_name)
            else:
                g["pending"] += 1
                g["gpus_pending"] += gpus
    out = []
    for g in groups.values():
        if g["bound"] and g["pending"]:
            g["nodes"] = sorted(g["nodes"])[:SAMPLES]
            out.append(g)
    for (ns, name), pg in snap.volcano.pod_groups.items():
        key = f"PodGroup/{ns}/{name}"
        if key in groups:
            continue
        if 0 < pg.running < pg.min_member:
            out.append({"gang": key, "bound": pg.running, "pending": pg.min_member - pg.running, "gpus_held": None,
                        "gpus_pending": None, "nodes": [], "priority": None})
    out.sort(key=lambda g: (-(g["gpus_held"] or 0), g["gang"]))
    return out[:limit]


def _deadlocks(snap: ClusterSnapshot, partial: list[dict], options: EngineOptions) -> list[list[str]]:
    """Pairs of partial gangs where each one's pending pods fit only if the other released its pods."""
    gpu = GPU if GPU in snap.col else None
    if gpu is None or len(partial) < 2:
        return []
    c = snap.col[gpu]
    usable = np.array([n.ready is not False and not n.unschedulable for n in snap.nodes], dtype=bool)
    free = np.maximum(snap.free[:, c], 0)
    held: dict[str, np.ndarray] = {}
    pend: dict[str, list[int]] = {}
    keys = [g["gang"] for g in partial[:20] if g.get("gpus_pending")]
    kset = set(keys)
    for p in snap.pods:
        if p.gang in kset:
            v = int(p.requests.get(gpu, 0))
            if p.node_name:
                arr = held.setdefault(p.gang, np.zeros(len(snap.nodes), dtype=np.int64))
                arr[snap.node_index[p.node_name]] += v
            elif v:
                pend.setdefault(p.gang, []).append(v)

    def fits(avail: np.ndarray, reqs: list[int]) -> bool:
        a = np.sort(avail[usable])[::-1].copy()
        for r in sorted(reqs, reverse=True):
            j = int(np.argmax(a >= r)) if len(a) else 0
            if not len(a) or a[j] < r:
                return False
            a[j] -= r
        return True

    out = []
    for x in range(len(keys)):
        for y in range(x + 1, len(keys)):
            a, b = keys[x], keys[y]
            if a not in pend or b not in pend:
                continue
            if fits(free, pend[a]) or fits(free, pend[b]):
                continue
            if fits(free + held.get(b, 0), pend[a]) and fits(free + held.get(a, 0), pend[b]):
                out.append([a, b])
    return out


def partial_gangs_step(snap: ClusterSnapshot, gang: GangRequest, view: GangView, options: EngineOptions) -> PartialGangsStep:
    """Step 5: the partial gangs (first 10), the deadlocked pairs and the gang's own bound /
    pending pods; blocking on a deadlock or when the gang is short of nodes."""
    partial = partial_gangs(snap, options)
    dead = _deadlocks(snap, partial, options)
    facts = {"partial_gangs": partial[:10], "partial_gangs_total": len(partial), "deadlocks": dead,
             "own_bound": len(view.own_bound), "own_pending": len(view.own_pending)}
    cmd = "kubectl get pods -A --field-selector status.phase=Pending -o wide && kubectl get podgroups -A"
    if view.own_bound or view.own_pending:
        cmd = f"kubectl -n {_q(gang.namespace)} get pods -o wide | grep {_q(gang.name)}"
    if not partial:
        meaning, status = "No gang holds resources with part of its pods while the rest wait.", "ok"
    else:
        held = sum(g["gpus_held"] or 0 for g in partial)
        parts = [f"{g['gang']} ({g['bound']} bound, {g['pending']} pending" + (f", {g['gpus_held']} GPUs held)" if g["gpus_held"] is not None else ")")
                 for g in partial[:SAMPLES]]
        meaning = f"{len(partial)} partial gang(s) hold {held} GPUs without progress: " + "; ".join(parts) + "."
        if dead:
            meaning += " Deadlock: " + "; ".join(f"{a} and {b} each wait for the other's GPUs" for a, b in dead[:SAMPLES]) + " — evict one whole."
        status = "blocking" if dead or view.deficit > 0 else "info"
    return PartialGangsStep(question="Do partially started gangs hold resources without progress?",
                            command=cmd, meaning=meaning, status=status, **facts)
