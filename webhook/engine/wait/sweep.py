"""The limit-based earliest start: Slurm's reservation sweep over the pool.

Owns ``earliest_start`` (FIELD-NOTES §5): every pod ends at its declared limit (start +
limit; a ``default_limit_s`` for pods without one, Slurm's partition DefaultTime, else
never); gangs ahead reserve, in queue order, the whole nodes that are fully free earliest and
hold them for their own limit; ours starts when the capacity left plus the nodes given back
covers its pods — the K-th earliest free node for whole-node pods — and not before the last
gang ahead started: Slurm's ``squeue --start`` rule for whole-node gangs. An upper bound
with respect to running work (jobs end early), not with respect to later higher-priority
arrivals. The band (``band``, ``simulate``) replays the same sweep on drawn ends instead of
limits.

Units: seconds from ``now`` (epoch seconds, the caller's clock); capacities in pods of the
main shape; pool nodes as ``pool.PoolNode``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .ahead import AheadGang
from .pool import Group, PoolNode

__all__ = ["first_free", "sweep", "earliest_start"]


def first_free(avail: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` (1 ≤ n ≤ len) nodes free earliest in ``avail`` (seconds), the last
    one the n-th to free; of nodes free at the same moment the first ones in pool order.

    The tie rule matters: nodes a reservation took together come back together, and which of
    them the next gang takes decides what is left for ours when their capacities differ.
    Slurm's node selection walks its node table in index order and takes nodes from the front
    of a set of equal weight (SchedMD/slurm src/plugins/select/cons_tres/job_test.c,
    ``_eval_nodes``); pool order is ours. ``np.argpartition`` leaves the order of ties
    undefined, so it is used only for the n-th value. O(len)."""
    kth = np.partition(avail, n - 1)[n - 1]
    before = np.flatnonzero(avail < kth)
    return np.concatenate([before, np.flatnonzero(avail == kth)[: n - len(before)]])


def sweep(pool: Sequence[PoolNode], ahead: Sequence[AheadGang], need_pods: int, gtime: list[float],
          ends: list[float]) -> tuple[float, list[float], list[int]]:
    """Slurm's plan. Group g ends ``gtime[g]`` seconds from now; in queue order each gang
    ahead reserves the ``nodes`` whole nodes that are fully free earliest (``first_free``:
    ties to the first in pool order; not before the gang before it starts: FIFO) and holds
    them for ``ends[a]`` seconds; ours starts when the capacity on the other nodes plus the
    nodes given back covers its ``need_pods`` pods, and not before the last gang ahead. Returns (our start, ahead starts, per pool node the
    last gang ahead holding it or -1); inf when it never starts."""
    node_events: list[list[tuple[float, int]]] = []
    avail = np.empty(len(pool))
    for k, (chain, steps, c0, full, _) in enumerate(pool):
        ev = [(0.0, c0)] if c0 else []
        t, pos, last = 0.0, 0, c0
        for length, c in steps:
            while pos < length:
                t = max(t, gtime[chain[pos]])
                pos += 1
            ev.append((t, c - last))
            last = c
        node_events.append(ev)
        avail[k] = ev[-1][0] if ev else math.inf
    owner = np.full(len(pool), -1, dtype=np.int64)
    starts: list[float] = []
    prev = 0.0
    for a_i, (a, end) in enumerate(zip(ahead, ends)):
        if a.nodes > len(pool):  # cannot run on these nodes: it does not take them
            starts.append(prev)
            continue
        chosen = first_free(avail, a.nodes)
        s0 = max(prev, float(avail[chosen].max()))
        starts.append(s0)
        prev = s0
        avail[chosen] = s0 + end
        owner[chosen] = a_i
    events: list[tuple[float, int]] = []
    for k, ev in enumerate(node_events):
        if owner[k] < 0:
            events.extend(ev)
        else:
            events.append((float(avail[k]), pool[k][3]))
    events.sort()
    have = 0
    t_ours = math.inf
    for t, c in events:
        have += c
        if have >= need_pods:
            t_ours = t
            break
    return max(t_ours, prev), starts, owner.tolist()


def earliest_start(groups: Sequence[Group], pool: Sequence[PoolNode], ahead: Sequence[AheadGang], need_pods: int,
                   now: float, default_limit_s: float | None) -> float | None:
    """Our limit-based start in seconds from ``now`` (``sweep`` with every group ending at its
    limit and every gang ahead holding its nodes for its limit; ``default_limit_s`` for those
    without one); None when it never comes (capacity held by pods with no known end)."""

    def lim_time(g: Group) -> float:
        if g.limit_end is not None:
            return max(0.0, g.limit_end - now)
        return max(0.0, g.start + default_limit_s - now) if default_limit_s is not None else math.inf

    lim_ends = [(a.limit_s if a.limit_s is not None else (default_limit_s if default_limit_s is not None else math.inf))
                for a in ahead]
    earliest, _, _ = sweep(pool, ahead, need_pods, [lim_time(g) for g in groups], lim_ends)
    return None if math.isinf(earliest) else float(earliest)
