"""The figures a Decision shows about its main pod set: the node view and fragmentation.

Owns ``node_report`` (the scheduler's view now: how many nodes are available, each failing
filter's node count — kube-scheduler's wording — with sample nodes, pods placeable now and
ever) and ``fragmentation`` (free versus stranded GPUs of the main pod shape), both memoised
per shape on the snapshot. Not the verdict (``proofs``, ``evaluate``).

Units: node and pod counts; GPUs as counts. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .filters import R_PORTS
from .fit import resource_reasons
from .options import EngineOptions
from .podsets import SAMPLES, PodSetEval, main_gpu, sample_names, stat_of
from .snapshot import ClusterSnapshot

__all__ = ["node_report", "fragmentation"]


def node_report(snap: ClusterSnapshot, ev: PodSetEval) -> dict[str, Any]:
    """The per-node view of the main pod set (histogram, samples, summary); memoised per shape."""
    key = ("report",) + ev.key
    hit = snap.recall(key) if ev.key else None
    if hit is None:
        hit = _compute_node_report(snap, ev)
        if ev.key:
            snap.remember(key, hit)
    report = dict(hit, reasons=dict(hit["reasons"]), samples={k: list(v) for k, v in hit["samples"].items()})
    report["pod_set"] = ev.ps.name
    return report


def _compute_node_report(snap: ClusterSnapshot, ev: PodSetEval) -> dict[str, Any]:
    hist = ev.now_filter.histogram(snap)
    samples: dict[str, list[str]] = {}
    filt = ev.now_filter
    if filt.per_node:
        for r, idx in filt.first_failing(SAMPLES).items():
            samples[r] = sample_names(snap, idx)
    else:
        for cid, r in enumerate(filt.reasons):
            if r is not None and len(samples.get(r, ())) < SAMPLES:
                idx = np.flatnonzero(filt.node_class == cid)[:SAMPLES]
                samples.setdefault(r, []).extend(sample_names(snap, idx))
                samples[r] = samples[r][:SAMPLES]
    passing = filt.mask.copy()
    if ev.port_blocked is not None:
        blocked = passing & ev.port_blocked
        if blocked.any():
            hist[R_PORTS] = int(blocked.sum())
            samples[R_PORTS] = sample_names(snap, np.flatnonzero(blocked))
        passing &= ~ev.port_blocked
    res_hist = resource_reasons(snap, snap.free, ev.shape, passing)
    for reason, n in res_hist.items():
        hist[reason] = hist.get(reason, 0) + n
        if reason.startswith("Insufficient "):
            name = reason[len("Insufficient "):]
            c = snap.col.get(name)
            idx = np.flatnonzero(passing & (snap.free[:, c] < ev.ps.requests.get(name, 0))) if c is not None else np.flatnonzero(passing)
        else:
            idx = np.flatnonzero(passing & (snap.free[:, snap.col["pods"]] < 1))
        samples[reason] = sample_names(snap, idx)
    fit_now = int(np.count_nonzero(ev.k_now))
    total = len(snap.nodes)
    parts = sorted(f"{n} {r}" for r, n in hist.items())
    summary = f"{fit_now}/{total} nodes are available" + (": " + ", ".join(parts) if parts else "") + "."
    return {
        "pod_set": ev.ps.name,
        "total": total,
        "eligible": int(np.count_nonzero(ev.now_mask)),
        "eligible_ever": int(np.count_nonzero(ev.ever_mask)),
        "fit_now": fit_now,
        "fit_ever": int(np.count_nonzero(ev.k_ever)),
        "pods_placeable_now": int(ev.k_now.sum()),
        "pods_placeable_ever": int(ev.k_ever.sum()),
        "reasons": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        "samples": samples,
        "summary": summary,
    }


def fragmentation(snap: ClusterSnapshot, ev: PodSetEval, options: EngineOptions, needed: int) -> dict[str, Any] | None:
    """Free versus stranded units of the main pod set's GPU on its eligible nodes now, and the
    deficit for ``needed`` pods of its shape; None when it requests no GPU the cluster knows."""
    g = main_gpu(ev.ps, options)
    if g is None or g not in snap.col:
        return None
    base = stat_of(ev, ("frag", g), lambda: _fragmentation_base(snap, ev, g))
    return dict(base, pods_needed=needed, deficit=max(0, needed - base["pods_placeable_now"]))


def _fragmentation_base(snap: ClusterSnapshot, ev: PodSetEval, g: str) -> dict[str, Any]:
    c = snap.col[g]
    free = np.maximum(snap.free[:, c], 0)
    elig = ev.now_mask
    free_total = int(free[elig].sum())
    stranded = int(free[elig & (ev.k_now == 0)].sum())
    placeable = int(ev.k_now.sum())
    return {
        "resource": g,
        "per_pod": int(ev.ps.requests.get(g, 0)),
        "free": free_total,
        "stranded": stranded,
        "ratio": round(stranded / free_total, 4) if free_total else 0.0,
        "nodes_fit_now": int(np.count_nonzero(ev.k_now)),
        "pods_needed": 0,
        "pods_placeable_now": placeable,
        "deficit": 0,
        "whole_nodes_free": int(np.count_nonzero(elig & (snap.used[:, snap.col["pods"]] == 0) & (free >= snap.alloc[:, c]) & (snap.alloc[:, c] > 0))),
    }
