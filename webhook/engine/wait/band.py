"""The exact p50/p90 band: a DP over independent units, searched on t.

Owns the band when no gang is ahead and no later arrival is modelled: nodes held by the same
groups free together (one ``Unit``), different groups end independently, so the capacity
freed by t is a sum of independent weighted steps — a Poisson-binomial tail when every node
holds one pod of the shape — computed by a truncated DP (``tail``), O(units · D) per time
point, and searched on t by k-ary bisection vectorised over t (``search``). It also owns the
empirical quantiles of the joint draws (``quantiles``) that give the band otherwise
(``simulate``).

Bounds: the DP runs only while units × (pods still needed + 1) and its states stay under
``_DP_MAX_CELLS`` and ``_DP_MAX_STATES`` (the pods needed are the gang's stated count, up to
int32); past them ``exact_band`` says so and the joint draws, whose cost follows the nodes,
give the band.

Units: seconds from now; probabilities in [0, 1]; capacities in pods of the main shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .pool import Group, PoolNode, Unit

__all__ = ["levels", "tail", "search", "quantiles", "exact_band"]

#: The exact band's DP costs units × (pods still needed + 1) cells per time point and holds
#: (pods still needed + 1) × time points floats. The pods needed are the gang's stated count,
#: so past these budgets the band comes from the joint draws (``simulate``, whose cost follows
#: the nodes, not the pods) instead: 5,000 busy units × a 64-pod gang stays exact.
_DP_MAX_CELLS = 1 << 19
_DP_MAX_STATES = 1 << 15


def levels(u: Unit, cdf: Mapping[int, np.ndarray], ts: np.ndarray) -> list[np.ndarray]:
    """P(unit ``u`` has reached capacity level j by each t), j = 0..len(steps): the product of
    its groups' end probabilities up to the level's chain prefix (groups end independently)."""
    levels = [np.ones_like(ts)]
    acc = np.ones_like(ts)
    pos = 0
    for length, _ in u.steps:
        while pos < length:
            acc = acc * cdf[u.chain[pos]]
            pos += 1
        levels.append(acc)
    return levels


def tail(units: list[Unit], probs: list[list[np.ndarray]], base: int, need: int, n_t: int) -> np.ndarray:
    """P(Σ capacity ≥ need) for each of n_t time points: DP over units truncated at ``need``."""
    if base >= need:
        return np.ones(n_t)
    D = need - base
    state = np.zeros((n_t, D + 1))
    state[:, 0] = 1.0
    for u, levels in zip(units, probs):
        # levels[j] = P(level ≥ j) for j = 0..len(steps); capacities c0, then steps' caps.
        if len(levels) == 2 and u.c0 == 0:  # one step from nothing: the Poisson-binomial case
            p = levels[1][:, None]
            w = min(D, u.mult * u.steps[0][1])
            moved = state * p
            state = state - moved
            state[:, w:] += moved[:, : D + 1 - w]
            state[:, D] += moved[:, D + 1 - w:].sum(axis=1)
            continue
        caps = [u.c0] + [c for _, c in u.steps]
        new = np.zeros_like(state)
        for j, c in enumerate(caps):
            pj = levels[j] - (levels[j + 1] if j + 1 < len(levels) else 0.0)
            w = min(D, u.mult * c)
            if w == 0:
                new += pj[:, None] * state
            else:
                new[:, w:] += pj[:, None] * state[:, : D + 1 - w]
                new[:, D] += pj * state[:, D + 1 - w:].sum(axis=1)
        state = new
    return state[:, D]


def search(tail_at, horizon_s: float, qs: tuple[float, ...] = (0.5, 0.9), rounds: int = 3, points: int = 24):
    """Smallest t in [0, horizon] with tail(t) ≥ q for each q: k-ary bisection (``points`` per
    round, vectorised over t) on a log grid, then linear refinement inside the bracket."""
    t0 = np.array([0.0, horizon_s])
    v0 = tail_at(t0)
    out: list[float | None] = []
    beyond = False
    lo_hi: list[tuple[float, float] | None] = []
    for q in qs:
        if v0[0] >= q - 1e-12:
            lo_hi.append(None)
            out.append(0.0)
        elif v0[1] < q - 1e-12:
            lo_hi.append(None)
            out.append(None)
            beyond = True
        else:
            lo_hi.append((0.0, horizon_s))
            out.append(math.nan)
    first = True
    for _ in range(rounds):
        todo = [k for k, b in enumerate(lo_hi) if b is not None]
        if not todo:
            break
        grids = []
        for k in todo:
            lo, hi = lo_hi[k]
            if first:
                g = np.geomspace(1.0, hi, points)
            else:
                g = np.linspace(lo, hi, points + 2)[1:-1]
            grids.append(g)
        ts = np.concatenate(grids)
        vals = tail_at(ts)
        for n, k in enumerate(todo):
            g = grids[n]
            v = vals[n * points:(n + 1) * points]
            lo, hi = lo_hi[k]
            idx = np.flatnonzero(v >= qs[k] - 1e-12)
            if len(idx):
                j = int(idx[0])
                hi = float(g[j])
                lo = float(g[j - 1]) if j > 0 else lo
            else:
                lo = float(g[-1])
            lo_hi[k] = (lo, hi)
        first = False
    for k, b in enumerate(lo_hi):
        if b is not None:
            out[k] = b[1]
    return out, beyond


def quantiles(starts: np.ndarray, horizon_s: float, qs: tuple[float, ...]) -> list[float | None]:
    """Empirical quantiles (the smallest draw with F ≥ q); None beyond the horizon."""
    s = np.sort(starts)
    n = len(s)
    out: list[float | None] = []
    for q in qs:
        v = float(s[min(n - 1, max(0, math.ceil(q * n - 1e-9) - 1))])
        out.append(None if v > horizon_s else v)
    return out


def exact_band(groups: Sequence[Group], pool: Sequence[PoolNode], units: Mapping[tuple, Unit], need_pods: int,
               horizon_s: float) -> tuple[float | None, float | None, bool]:
    """The band as if no gang were ahead and none arrived later: (p50, p90, exact). p50/p90
    in seconds from now, None beyond ``horizon_s``; ``exact`` False when the DP would exceed
    its budgets — then p50 = p90 = 0.0 (no floor) and the joint draws must give the band.
    Needs the groups' laws (``pool.assign_laws``)."""
    plain_base = sum(full for _, _, _, full, key in pool if key is None)
    plain_mult: dict[tuple, int] = {}
    for *_, key in pool:
        if key is not None:
            plain_mult[key] = plain_mult.get(key, 0) + 1
    plain_units = [Unit(units[key].chain, units[key].steps, units[key].c0, m) for key, m in plain_mult.items()]

    def tail_at(ts: np.ndarray) -> np.ndarray:
        cdf = {gid: groups[gid].law.cdf(groups[gid].age, ts) for u in plain_units for gid in u.chain}
        return tail(plain_units, [levels(u, cdf, ts) for u in plain_units], plain_base, need_pods, len(ts))

    states = need_pods - plain_base + 1
    exact = states <= _DP_MAX_STATES and states * max(1, len(plain_units)) <= _DP_MAX_CELLS
    if exact:
        (p50, p90), _ = search(tail_at, horizon_s, (0.5, 0.9))
    else:  # too many pods for the DP: the draws give the band (0 is no floor)
        p50 = p90 = 0.0
    return p50, p90, exact
