"""``estimate_wait``: the expected wait of a gang that cannot start now, as a driver over the
package's named steps.

Owns the order of the steps and the answers that need no band: the main pod set and the pods
of it still to place (``inputs``), the nodes and the groups holding them (``pool.scan_nodes``),
their laws (``pool.assign_laws``, ``learn``), the pool (``pool.build_pool``), the limit-based
start (``sweep.earliest_start``); then fits now / blocked (``repair``) / unknown, else the
exact band (``band.exact_band``) floored by the joint draws (``simulate``) when gangs ahead,
later arrivals or the DP's budgets call for them. See the package doc for the model.

Pure: no clock (``now`` is an argument, epoch seconds), no I/O. Units: seconds throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..filters import Constraints, filter_nodes
from ..fit import Shape, shape_of
from ..model import GangRequest, PodSet
from ..snapshot import ClusterSnapshot
from .ahead import AheadGang
from .band import exact_band, quantiles
from .history import RuntimeHistory
from .inputs import DEFAULT_HORIZON_S, bound_by_gang, main_pod_set
from .laws import DEFAULT_MODEL, LifetimeModel
from .learn import law_for, law_memo
from .pool import assign_laws, build_pool, scan_nodes
from .repair import repair_needs
from .result import WaitEstimate
from .simulate import arrival_stream, simulate
from .sweep import earliest_start

__all__ = ["estimate_wait"]


def estimate_wait(
    snap: ClusterSnapshot,
    gang: GangRequest,
    now: float,
    *,
    history: RuntimeHistory | None = None,
    ahead: Sequence[AheadGang] = (),
    eligible: np.ndarray | None = None,
    model: LifetimeModel = DEFAULT_MODEL,
    default_limit_s: float | None = None,
    horizon_s: float = DEFAULT_HORIZON_S,
    priority: int | None = None,
    ever: np.ndarray | None = None,
) -> WaitEstimate:
    """Expected wait of ``gang`` on ``snap`` at time ``now`` (epoch seconds); see the package doc.

    The gang's own bound pods (gang key ``gang.key``) count as placed and never end: they wait
    for their siblings. When the eligible nodes cannot hold the pods still to place even once
    every pod that can end has ended, no wait on running work is given: ``blocked_by`` says
    "repair" (with ``repair``: what, ``repair_needs``) or "capacity", ``unknown`` is True.

    Args:
        snap: the cluster; pods' ``start_time`` (epoch s) and ``runtime_limit_s`` (else
            ``deadline_s``) say when they end.
        gang: the gang; its main pod set (largest device request) and the pods of that exact
            shape are placed (other pod sets — a small launcher — are not waited for).
        now: the evaluation time in epoch seconds (the caller's clock; the engine has none).
        history: what the cluster did lately (``RuntimeHistory``): finished runs per (queue,
            owner kind), which give every running or queued gang its run-time law, and gang
            arrivals, which give the rate of later higher-priority arrivals. Optional: without
            it, limits and the ``LifetimeModel`` prior only, and no later arrivals.
        ahead: gangs that start before this one, in the order they start (``gangs_ahead``).
        eligible: bool mask [nodes] of nodes the main pod set may use now (the engine's
            ``now_mask``); default: kube-scheduler's label/taint filters for the pod set.
        model: the lifetime model's knobs (``LifetimeModel``).
        default_limit_s: limit assumed for pods without one in the limit-based sweep only
            (Slurm's partition DefaultTime); None = their end is unknown.
        horizon_s: the longest wait searched for p50/p90.
        priority: this gang's priority (``gang_priority``); later arrivals of strictly higher
            priority pass it. None: later arrivals are not modelled.
        ever: bool mask [nodes] of nodes the main pod set could use once repaired (the
            engine's ``ever_mask``: cordon, NotReady and transient taints skipped); default:
            the filters with ``ever=True``. Read only to say what a blocked gang waits for.

    Returns:
        ``WaitEstimate`` (all zero when the gang fits now and nothing is ahead).
    """
    ps, need_pods = main_pod_set(gang)
    if ps is None:
        return WaitEstimate(0.0, 0.0, 0.0, 1.0, False, horizon_s=horizon_s)
    shape = shape_of(snap, ps.requests)
    if shape.missing or not len(snap.nodes):
        return WaitEstimate(None, None, None, 0.0, True, pods_needed=need_pods, horizon_s=horizon_s)
    if eligible is None:
        eligible = filter_nodes(snap, Constraints(ps), ever=False).mask
    need_pods = max(0, need_pods - _own_placed(snap, gang.key, ps))
    scan = scan_nodes(snap, ps, shape, eligible, gang.key, now)
    memo = law_memo(snap, now, history)
    blocking, known_share = assign_laws(scan.groups, history, model, now, memo)
    pool, units = build_pool(scan)
    ahead = [a for a in ahead if a.nodes > 0]
    earliest_s = earliest_start(scan.groups, pool, ahead, need_pods, now, default_limit_s)
    tally = _Tally(known_share, blocking, need_pods, scan.fits_now, horizon_s)

    if scan.fits_now >= need_pods and not ahead:
        return tally.answer(0.0, 0.0, 0.0, False)
    pods_max = sum(full for _, _, _, full, _ in pool)   # once all work that can end has ended
    # Bound (issue #17 item 2): the DP holds ``need − base`` + 1 states per time point, so its
    # cost must not follow a pod count the object merely states (a Kueue pod group's
    # total-count annotation, up to int32). More pods than the eligible nodes hold when every
    # pod that can leave has left never start on them, whatever the draws: the gang is
    # blocked, answered without building the band. Past this line ``need_pods ≤ Σ full``, a
    # figure of the nodes (each at most its allocatable pods).
    if pods_max < need_pods:
        return _blocked(snap, ps, shape, eligible, ever, pods_max, tally)
    if blocking > 0 and known_share < 0.5:
        return tally.answer(earliest_s, None, None, True)

    # Without gangs ahead or later arrivals: the exact band (DP over independent units).
    p50, p90, exact = exact_band(scan.groups, pool, units, need_pods, horizon_s)
    stream = None
    if history is not None and priority is not None:
        stream = arrival_stream(snap, gang, history, model, now, priority, eligible, memo)
    if ahead or stream is not None or not exact:
        # With them: the sweep on joint draws; a gang ahead or an arrival never makes ours
        # start earlier, so the DP's answer is a floor.
        ahead_laws = [law_for(history, model, a.queue, a.owner_kind, a.limit_s, memo) for a in ahead]
        starts = simulate(scan.groups, pool, ahead, ahead_laws, stream, priority, need_pods, horizon_s, model)
        p50, p90 = _floored((p50, p90), quantiles(starts, horizon_s, (0.5, 0.9)))
    if p50 is not None and p90 is not None:
        p90 = max(p90, p50)
    return tally.answer(earliest_s, p50, p90, False, p50 is None or p90 is None)


@dataclass(frozen=True)
class _Tally:
    """What every answer of one estimate reports beside its times: the share of blocking pods
    whose end is known, the blocking pods, the pods still to place, the pods that fit now,
    and the horizon (s)."""

    known_share: float
    blocking: int
    need_pods: int
    fits_now: int
    horizon_s: float

    def answer(self, earliest_s: float | None, p50_s: float | None, p90_s: float | None, unknown: bool,
               beyond_horizon: bool = False, **blocked) -> WaitEstimate:
        """The ``WaitEstimate`` with these times (s from now) and flags; ``blocked``: its
        ``blocked_by`` / ``repair`` / ``pods_max``."""
        return WaitEstimate(earliest_s, p50_s, p90_s, self.known_share, unknown, self.blocking, self.need_pods,
                            self.fits_now, self.horizon_s, beyond_horizon, **blocked)


def _own_placed(snap: ClusterSnapshot, own_key: str, ps: PodSet) -> int:
    """Pods of the gang ``own_key`` already bound with exactly ``ps``'s requests: placed."""
    return sum(1 for p in bound_by_gang(snap).get(own_key, ()) if dict(p.requests) == dict(ps.requests))


def _blocked(snap: ClusterSnapshot, ps: PodSet, shape: Shape, eligible: np.ndarray, ever: np.ndarray | None,
             pods_max: int, tally: _Tally) -> WaitEstimate:
    """The answer when running work ending never frees enough (at most ``pods_max`` pods of
    the shape): "repair" with what must be repaired (``repair_needs`` between ``eligible``
    and ``ever``, default the filters with ``ever=True``), else "capacity"; no times."""
    if ever is None:
        ever = filter_nodes(snap, Constraints(ps), ever=True).mask
    needs = repair_needs(snap, ps, shape, eligible, ever)
    return tally.answer(None, None, None, True, blocked_by="repair" if needs else "capacity", repair=needs,
                        pods_max=pods_max)


def _floored(band: tuple[float | None, float | None],
             drawn: Sequence[float | None]) -> tuple[float | None, float | None]:
    """The drawn (p50, p90), never below the exact band's (a floor: 0 when the DP did not
    run); None (beyond the horizon) when either is."""
    (p50, p90), (q50, q90) = band, drawn
    p50 = None if p50 is None or q50 is None else max(p50, q50)
    p90 = None if p90 is None or q90 is None else max(p90, q90)
    return p50, p90
