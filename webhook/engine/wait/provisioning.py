"""The expected wait of a gang that needs new nodes (issue #16): node provisioning time.

Owns how long new nodes take (``provisioning_estimate``: learned, declared or the policy's
default) and how that time enters a gang's expected wait (``with_provisioning``); not whether
the gang needs new nodes (``engine.autoscale.review``'s NeedsScaleUp) nor the wait on running
work (``estimate``).

A Pending pod that no existing node can take makes a node autoscaler launch nodes at once
(Karpenter's provisioner batches pending pods and launches NodeClaims; cluster-autoscaler scales
a node group up on unschedulable pods), so a gang that needs new nodes starts when they are
Ready — unless running work ends sooner on the nodes that exist:

* the gang can never fit the existing nodes (no estimate over them, or ``blocked_by``: running
  work ending never frees enough): the wait is the provisioning time;
* it could fit them later: the smaller of the two, p50 with p50 and p90 with p90.

A gang that needs *both* the existing nodes freed and new nodes (limits cover only part of it)
waits for the later of the two; the estimate above does not model that split and reads low
for it.

Units: seconds. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..autoscale.model import ScaleUpSource
from ..autoscale.sources import effective_sources
from ..snapshot import ClusterSnapshot
from .band import quantiles
from .result import format_duration

__all__ = ["MIN_SAMPLES", "provisioning_estimate", "with_provisioning", "provisioning_text", "scale_up_wait"]

#: Launch → Ready samples needed before the learned quantiles replace the declared times.
MIN_SAMPLES = 5


def provisioning_estimate(snap: ClusterSnapshot, options: Any, *,
                          sources: Sequence[ScaleUpSource] | None = None) -> tuple[float, float, str]:
    """How long new nodes take to be Ready: ``(p50_s, p90_s, basis)``.

    In this order:

    1. learned: with at least ``MIN_SAMPLES`` finite, non-negative samples in
       ``snap.autoscaling.provisioning_samples_s`` (NodeClaim creation → its node Ready), their
       empirical p50 and p90 (the smallest sample with F ≥ q, as the wait band's draws);
       basis "learned from 12 NodeClaims";
    2. declared: the largest ``provisioning_s`` among ``sources`` (default: the effective
       sources, ``autoscale.sources.effective_sources``) that state one — a gang that draws on
       several pools waits for the slowest; p50 = p90; basis "stated for NodePool gpu-h100";
    3. the policy's default ``options.autoscaling.provisioning_s`` (p50 = p90); basis "the
       policy's default".

    Args:
        snap: the cluster (reads ``snap.autoscaling``). options: ``EngineOptions`` (its
            ``autoscaling``). sources: the sources the gang would draw on, when known.

    Returns:
        seconds ≥ 0, ``p50_s ≤ p90_s``, and one phrase saying where they come from.
    """
    samples = np.array([s for s in snap.autoscaling.provisioning_samples_s if math.isfinite(s) and s >= 0], dtype=float)
    if len(samples) >= MIN_SAMPLES:
        p50, p90 = quantiles(samples, math.inf, (0.5, 0.9))
        return float(p50), float(p90), f"learned from {len(samples)} NodeClaims"
    if sources is None:
        from ..autoscale.sources import effective_sources  # the policy's pools applied

        sources = effective_sources(snap, options)
    stated = [s for s in sources if s.provisioning_s is not None and math.isfinite(s.provisioning_s) and s.provisioning_s >= 0]
    if stated:
        slow = max(stated, key=lambda s: (s.provisioning_s, s.name))
        return float(slow.provisioning_s), float(slow.provisioning_s), f"stated for {slow.label}"
    d = max(0.0, float(options.autoscaling.provisioning_s))
    return d, d, "the policy's default"


def provisioning_text(p50_s: float, p90_s: float, basis: str, pools: Sequence[str] = ()) -> str:
    """"new nodes from NodePool gpu-h100: ~5m to Ready (learned from 12 NodeClaims)"; with a
    spread "~5m to Ready, p90 9m (…)"; ``pools`` are source labels ("NodePool gpu-h100")."""
    where = "new nodes" + (f" from {', '.join(pools)}" if pools else "")
    spread = "" if format_duration(p90_s) == format_duration(p50_s) else f", p90 {format_duration(p90_s)}"
    return f"{where}: ~{format_duration(p50_s)} to Ready{spread} ({basis})"


def with_provisioning(expected: Mapping[str, Any] | None, p50_s: float, p90_s: float, basis: str, *,
                      pools: Sequence[str] = ()) -> dict[str, Any]:
    """A NeedsScaleUp gang's expected wait (``WaitEstimate.as_dict()`` keys) with the
    provisioning time ``p50_s`` / ``p90_s`` (``provisioning_estimate``) taken into account.

    Args:
        expected: the wait over the existing nodes (``WaitEstimate.as_dict()``), or None when
            there is none. basis: where the provisioning time comes from. pools: labels of the
            sources that would add the nodes, for the text.

    Returns:
        a new dict (``expected`` is not changed) with every ``as_dict`` key and
        ``provisioning``: ``{"p50_s", "p90_s", "basis", "pools", "chosen"}`` — ``chosen`` is
        "new-nodes" when the provisioning time is the wait (both quantiles), "existing-nodes"
        when running work ends sooner (both), "mixed" otherwise. When the gang can never fit
        the existing nodes (``expected`` None, or its ``blocked_by`` set) the wait is the
        provisioning time and ``blocked_by`` becomes "scale-up" (what it waits for; the
        earlier blocker's text stays in ``existing_nodes``); when it could fit them later
        (``unknown``, or p50/p90 beyond the horizon count as never sooner) each quantile is the
        smaller of the two. ``unknown`` is then False: the provisioning time is known.
        Seconds are whole seconds.
    """
    p50 = max(0.0, float(p50_s))
    p90 = max(p50, float(p90_s))
    prov_text = provisioning_text(p50, p90, basis, pools)
    prov = {"p50_s": int(round(p50)), "p90_s": int(round(p90)), "basis": basis, "pools": list(pools)}
    if expected is None or expected.get("blocked_by"):
        out: dict[str, Any] = {"earliest_start_s": prov["p50_s"], "p50_s": prov["p50_s"], "p90_s": prov["p90_s"],
                               "known_share": 1.0, "unknown": False, "blocking_pods": 0, "pods_needed": 0}
        if expected is not None:
            out.update({k: expected[k] for k in ("known_share", "blocking_pods", "pods_needed", "repair", "pods_max")
                        if k in expected})
            out["existing_nodes"] = expected.get("text", "")
        out["text"] = prov_text
        out["blocked_by"] = "scale-up"
        out["provisioning"] = {**prov, "chosen": "new-nodes"}
        return out
    out = dict(expected)
    known = not expected.get("unknown")
    e50 = expected.get("p50_s") if known else None
    e90 = expected.get("p90_s") if known else None
    n50 = e50 is None or e50 > prov["p50_s"]
    n90 = e90 is None or e90 > prov["p90_s"]
    out["p50_s"] = prov["p50_s"] if n50 else int(e50)
    out["p90_s"] = prov["p90_s"] if n90 else int(e90)
    es = expected.get("earliest_start_s")
    out["earliest_start_s"] = prov["p50_s"] if es is None else min(int(es), prov["p50_s"])
    out["unknown"] = False
    chosen = "new-nodes" if n50 and n90 else "existing-nodes" if not (n50 or n90) else "mixed"
    was = expected.get("text", "")
    if not known:
        out["text"] = f"{prov_text}; when running work ends is unknown ({was})"
    elif chosen == "new-nodes":
        out["text"] = f"{prov_text}, sooner than running work ends ({was})"
    elif chosen == "existing-nodes":
        out["text"] = f"{was}; sooner than {prov_text}"
    else:
        out["text"] = (f"expected wait p50 {format_duration(out['p50_s'])}, p90 {format_duration(out['p90_s'])}: "
                       f"the sooner of {prov_text} and running work ending ({was})")
    out["provisioning"] = {**prov, "chosen": chosen}
    return out


def scale_up_wait(snap: ClusterSnapshot, options: Any, expected: Mapping[str, Any] | None,
                  needs_scale_up: Mapping[str, Any]) -> dict[str, Any]:
    """``with_provisioning`` for a gang with a NeedsScaleUp finding: ``needs_scale_up`` is its
    ``data`` (``pools``: [{name, kind, ...}], the sources the gang's pods are assigned to); the
    provisioning time is that of those sources (``provisioning_estimate(..., sources=...)``,
    learned first), the text names them. ``expected``: the wait over the existing nodes, or None."""
    wanted = [(p.get("kind"), p.get("name")) for p in needs_scale_up.get("pools") or () if isinstance(p, Mapping)]
    by_key = {(s.kind, s.name): s for s in effective_sources(snap, options)}
    used = [by_key[k] for k in wanted if k in by_key]
    p50, p90, basis = provisioning_estimate(snap, options, sources=used or None)
    return with_provisioning(expected, p50, p90, basis, pools=[s.label for s in used])
