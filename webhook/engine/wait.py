"""Expected wait of a gang that cannot start now: a reservation sweep plus a p50/p90 band.

Two estimates, both in seconds from ``now`` (FIELD-NOTES §5):

* **earliest_start_s** — Slurm's ``squeue --start`` rule for whole-node gangs. Every eligible
  node frees its capacity for the gang's main pod shape when the pods holding it hit their
  declared limits (start + limit). Gangs ahead of ours (higher priority, or earlier in the
  same queue) reserve the earliest-free whole nodes first and hold them for their own limit;
  ours starts when the remaining capacity covers all its pods — the K-th earliest free node
  for whole-node pods — and not before the last gang ahead has started. An upper bound with
  respect to running work (jobs end early), not with respect to later higher-priority arrivals.
* **p50_s / p90_s** — the wait at which ``P(capacity freed ≥ pods needed) ≥ 0.5 / 0.9``.
  Each running gang's end is a random variable from a lifetime model (``LifetimeModel``): with
  a known limit L a job's total lifetime is log-uniform up to L plus a point mass at L (jobs
  killed at their limit), so a job of age a has median total √(a·L); without a limit the
  runtimes learned for its (queue, owner kind) (``RuntimeHistory``) give the law; else its end
  is unknown. Nodes held by the same set of gangs free together (they are one unit), different
  gangs end independently: the freed capacity is a sum of independent weighted steps — a
  Poisson-binomial tail when every node holds one pod of the shape — computed by a truncated
  DP, O(units · D) per time point, and searched on t by k-ary bisection vectorised over t.

Pure: no clock (``now`` is an argument, epoch seconds), no I/O. Units: seconds throughout.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .filters import Constraints, filter_nodes
from .fit import Shape, pods_per_node, shape_of
from .model import BoundPod, GangRequest, PodSet
from .snapshot import ClusterSnapshot

__all__ = [
    "AheadGang",
    "LifetimeModel",
    "RuntimeHistory",
    "WaitEstimate",
    "estimate_wait",
    "gangs_ahead",
    "format_duration",
    "PERMANENT_OWNERS",
    "DEFAULT_MODEL",
]

#: Owner kinds whose pods never end on their own (DaemonSet pods, static mirror pods): the
#: capacity they hold is not coming back, so they never "block" in the wait sense.
PERMANENT_OWNERS = frozenset({"DaemonSet", "Node"})
#: Default search horizon: a wait beyond it is reported as "more than" the horizon.
DEFAULT_HORIZON_S = 30 * 86400.0
_GPU_HINTS = ("nvidia.com/", "amd.com/gpu", "gpu")


# ---------------------------------------------------------------- formatting


def format_duration(seconds: float | None) -> str:
    """Seconds → "0", "<1m", "12m", "5h40m", "9h", "2d3h" (minutes below a day, hours above)."""
    if seconds is None or math.isinf(seconds):
        return "unknown"
    s = max(0.0, float(seconds))
    if s == 0:
        return "0"
    if s < 60:
        return "<1m"
    if s < 86400 - 30:
        m = int(round(s / 60))
        h, m = divmod(m, 60)
        if h == 0:
            return f"{m}m"
        return f"{h}h{m}m" if m else f"{h}h"
    h = int(round(s / 3600))
    d, h = divmod(h, 24)
    return f"{d}d{h}h" if h else f"{d}d"


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class AheadGang:
    """A pending gang that starts before ours (higher priority, or earlier in the same queue).

    Attributes:
        name: its key, for messages ("Kind/namespace/name").
        nodes: whole nodes it reserves (Slurm reservations are whole nodes).
        limit_s: its run-time limit in seconds (activeDeadlineSeconds, Kueue maximum execution
            time, the runtime annotation), None when unknown.
        queue / owner_kind: the key its runtime is learned under in ``RuntimeHistory``.
    """

    name: str
    nodes: int
    limit_s: float | None = None
    queue: str = ""
    owner_kind: str = ""


@dataclass(frozen=True)
class LifetimeModel:
    """How long a running job still runs, given its age and its limit (seconds).

    Known limit L: total lifetime T = L with probability ``limit_mass`` (the job is killed at
    its limit, or was sized to it), else log-uniform on [min(floor_s, L), L]. Conditioned on
    T > age, so a job of age a ≥ floor_s with ``limit_mass`` 0 has median total √(a·L)
    (FIELD-NOTES §5). A job past its limit ends at once.
    Unknown limit: the conditional empirical law of the runtimes in ``RuntimeHistory`` for its
    (queue, owner kind) when at least ``min_history`` are known and some outlived the job's age;
    else unknown (never frees within the horizon, counted in ``WaitEstimate.known_share``).
    ``band_plan_quantile``: for p90, gangs ahead are planned with their run times (and the
    running gangs' ends) at this quantile rather than the median — the spread of their start
    times, which the DP over nodes alone does not carry. Calibrated by bench/wait_accuracy.py.
    """

    floor_s: float = 600.0
    limit_mass: float = 0.1
    min_history: int = 20
    band_plan_quantile: float = 0.65

    def residual_cdf(self, age_s: float, limit_s: float, t: np.ndarray) -> np.ndarray:
        """P(the job ends within ``t`` more seconds | it has run ``age_s`` of at most ``limit_s``)."""
        t = np.asarray(t, dtype=float)
        a = max(0.0, age_s)
        L = float(limit_s)
        if a >= L:
            return np.ones_like(t)
        lo = min(self.floor_s, L)
        q = self.limit_mass
        span = math.log(L / lo) if L > lo else 0.0
        a_eff = max(a, lo)
        if span <= 0:
            return np.where(a + t >= L, 1.0, 0.0)
        surv = q + (1 - q) * (math.log(L) - math.log(a_eff)) / span
        x = np.maximum(a + t, a_eff)
        cont = (1 - q) * (np.log(x) - math.log(a_eff)) / span / surv
        return np.where(a + t >= L, 1.0, np.clip(cont, 0.0, 1.0))

    def residual_quantile(self, age_s: float, limit_s: float, q: float) -> float:
        """Remaining run time (s) by which the job has ended with probability ``q``
        (closed form of ``residual_cdf`` = q; the limit when the point mass is reached)."""
        a = max(0.0, age_s)
        L = float(limit_s)
        if a >= L:
            return 0.0
        lo = min(self.floor_s, L)
        m = self.limit_mass
        if L <= lo or m >= 1:
            return L - a
        span = math.log(L / lo)
        a_eff = max(a, lo)
        surv = m + (1 - m) * (math.log(L) - math.log(a_eff)) / span
        x = a_eff * math.exp(q * surv * span / (1 - m))
        return max(0.0, min(x, L) - a)

    def residual_median(self, age_s: float, limit_s: float) -> float:
        """Median remaining run time in seconds (``residual_quantile`` at 0.5)."""
        return self.residual_quantile(age_s, limit_s, 0.5)


DEFAULT_MODEL = LifetimeModel()


class RuntimeHistory:
    """Observed run times (seconds) of finished pods, per (queue, owner kind); bounded memory.

    Each key keeps a fixed-size ring of its last ``per_key`` runtimes; at most ``max_keys``
    keys are kept, the least recently fed one evicted first, so memory never exceeds
    ``max_keys × per_key × 8`` bytes of samples. Pure (no clock); a lock makes feeding from a
    watch thread while an admission reads safe. The cache feeds it with
    ``add(queue, owner_kind, finish − start)`` for every pod it sees finish.
    """

    def __init__(self, per_key: int = 256, max_keys: int = 512) -> None:
        if per_key < 1 or max_keys < 1:
            raise ValueError("per_key and max_keys must be ≥ 1")
        self.per_key = per_key
        self.max_keys = max_keys
        self._rings: OrderedDict[tuple[str, str], list] = OrderedDict()  # key → [array, n_seen]
        self._sorted: dict[tuple[str, str], np.ndarray] = {}
        self._lock = threading.Lock()

    def add(self, queue: str, owner_kind: str, runtime_s: float) -> None:
        """Record one finished run of ``runtime_s`` seconds (ignored unless finite and > 0)."""
        if not (runtime_s > 0 and math.isfinite(runtime_s)):
            return
        key = (queue or "", owner_kind or "")
        with self._lock:
            ring = self._rings.get(key)
            if ring is None:
                if len(self._rings) >= self.max_keys:
                    old, _ = self._rings.popitem(last=False)
                    self._sorted.pop(old, None)
                ring = self._rings[key] = [np.empty(self.per_key, dtype=np.float64), 0]
            else:
                self._rings.move_to_end(key)
            arr, n = ring
            arr[n % self.per_key] = runtime_s
            ring[1] = n + 1
            self._sorted.pop(key, None)

    def samples(self, queue: str, owner_kind: str) -> np.ndarray:
        """The kept runtimes of a key, sorted ascending (seconds; empty when none)."""
        key = (queue or "", owner_kind or "")
        with self._lock:
            hit = self._sorted.get(key)
            if hit is not None:
                return hit
            ring = self._rings.get(key)
            if ring is None:
                return np.empty(0)
            arr, n = ring
            out = np.sort(arr[: min(n, self.per_key)])
            out.setflags(write=False)
            self._sorted[key] = out
            return out

    def count(self, queue: str, owner_kind: str) -> int:
        """Runtimes kept for a key (≤ ``per_key``)."""
        return len(self.samples(queue, owner_kind))

    def percentile(self, queue: str, owner_kind: str, q: float) -> float | None:
        """The ``q``-th percentile (0–100) of a key's runtimes in seconds, None without samples."""
        s = self.samples(queue, owner_kind)
        return float(np.percentile(s, q)) if len(s) else None

    def keys(self) -> list[tuple[str, str]]:
        """Keys kept, least recently fed first."""
        with self._lock:
            return list(self._rings)

    @property
    def nbytes(self) -> int:
        """Bytes held by sample arrays (the bounded part of the memory)."""
        with self._lock:
            return sum(r[0].nbytes for r in self._rings.values())

    def __len__(self) -> int:
        return len(self._rings)


# ---------------------------------------------------------------- output


@dataclass(frozen=True)
class WaitEstimate:
    """Expected wait of one gang, seconds from ``now``.

    Attributes:
        earliest_start_s: limit-based start (Slurm-style reservation sweep), None when the
            capacity it needs is held by pods with no known end (or never offered).
        p50_s / p90_s: wait at which the gang can start with probability 0.5 / 0.9; None when
            ``unknown`` or beyond ``horizon_s`` (``beyond_horizon`` then says so).
        known_share: share of blocking pods (pods on eligible nodes whose capacity the gang's
            main pod shape needs) whose end is known (limit or learned history); 1.0 when none.
        unknown: True when most blocking pods have no known end: report "unknown", no number.
        blocking_pods: how many pods block; pods_needed: pods of the main shape to place;
        fits_now: pods of the main shape that fit on free capacity now.
        horizon_s: the longest wait searched.
    """

    earliest_start_s: float | None
    p50_s: float | None
    p90_s: float | None
    known_share: float
    unknown: bool
    blocking_pods: int = 0
    pods_needed: int = 0
    fits_now: int = 0
    horizon_s: float = DEFAULT_HORIZON_S
    beyond_horizon: bool = False

    def text(self) -> str:
        """One line for warnings and annotations, e.g.
        "expected wait p50 5h40m, p90 9h (end times known for 72% of blocking pods)"."""
        share = f"end times known for {int(round(self.known_share * 100))}% of blocking pods"
        if self.unknown:
            return f"expected wait unknown ({share})"
        if self.p50_s == 0 and self.p90_s == 0:
            return "expected wait 0 (fits now)"
        far = ">" + format_duration(self.horizon_s)
        p50 = far if self.p50_s is None else format_duration(self.p50_s)
        p90 = far if self.p90_s is None else format_duration(self.p90_s)
        return f"expected wait p50 {p50}, p90 {p90} ({share})"

    def as_dict(self) -> dict:
        """JSON-ready: seconds rounded to whole seconds, the share to 4 decimals, the text."""
        r = lambda v: None if v is None else int(round(v))
        return {
            "earliest_start_s": r(self.earliest_start_s),
            "p50_s": r(self.p50_s),
            "p90_s": r(self.p90_s),
            "known_share": round(self.known_share, 4),
            "unknown": self.unknown,
            "blocking_pods": self.blocking_pods,
            "pods_needed": self.pods_needed,
            "text": self.text(),
        }


# ---------------------------------------------------------------- internals


@dataclass
class _Group:
    """Pods that end together (one gang, or one pod without a gang) as the estimator sees them."""

    start: float                 # earliest start, epoch s
    limit_end: float | None      # latest start + limit, epoch s (None: some pod has no limit)
    queue: str
    owner_kind: str
    pods: int = 0
    known: bool = False
    median: float = math.inf     # median remaining run time, s (inf when unknown)
    hist: np.ndarray | None = None


@dataclass
class _Unit:
    """Nodes that free together: same chain of groups, same capacity levels."""

    chain: tuple[int, ...]             # group ids in end order
    steps: tuple[tuple[int, int], ...]  # (chain prefix length, capacity) for rising levels
    c0: int                            # capacity now
    mult: int = 0                      # nodes in the unit
    fixed_end: float | None = None     # for returning ahead gangs: start offset (s)
    ahead: int = -1                    # index into ahead list when a returning ahead gang


def _main_pod_set(gang: GangRequest) -> tuple[PodSet | None, int]:
    """The pod set with the largest device request (then count, cpu), and the gang's pods of
    exactly its shape (master + workers of one shape count together)."""
    sets = [ps for ps in gang.pod_sets if ps.count > 0]
    if not sets:
        return None, 0

    def dev(ps: PodSet) -> int:
        return max((v for r, v in ps.requests.items() if any(h in r for h in _GPU_HINTS)), default=0)

    main = max(sets, key=lambda ps: (dev(ps), ps.count, ps.requests.get("cpu", 0)))
    same = sum(ps.count for ps in sets if dict(ps.requests) == dict(main.requests))
    return main, same


def _req_vec(p: BoundPod, shape: Shape) -> np.ndarray:
    out = np.zeros(len(shape.names), dtype=np.int64)
    out[0] = 1
    for j, name in enumerate(shape.names[1:], 1):
        out[j] = p.requests.get(name, 0)
    return out


def _cap(avail: np.ndarray, shape: Shape, mpn: int | None) -> np.ndarray:
    """Pods of ``shape`` per row of ``avail`` (already restricted to the shape's columns)."""
    k = np.min(np.maximum(avail, 0) // shape.vals, axis=-1)
    return np.minimum(k, mpn) if mpn is not None else k


def _limit_of(p: BoundPod) -> float | None:
    return p.runtime_limit_s if p.runtime_limit_s is not None else p.deadline_s


def _group_cdf(g: _Group, now: float, model: LifetimeModel, t: np.ndarray) -> np.ndarray:
    """P(group ends within t seconds of now), array over t."""
    if g.limit_end is not None:
        return model.residual_cdf(now - g.start, g.limit_end - g.start, t)
    if g.hist is not None:
        return _hist_residual_cdf(g.hist, now - g.start, t)
    return np.zeros_like(t)


def _hist_residual_cdf(samples: np.ndarray, age: float, t: np.ndarray) -> np.ndarray:
    n = len(samples)
    f_age = np.searchsorted(samples, age, side="right") / n
    alive = 1.0 - f_age
    if alive <= 0:
        return np.zeros_like(t)
    f = np.searchsorted(samples, age + t, side="right") / n
    return np.clip((f - f_age) / alive, 0.0, 1.0)


def _hist_residual_median(samples: np.ndarray, age: float) -> float:
    older = samples[np.searchsorted(samples, age, side="right"):]
    if len(older) == 0:
        return math.inf
    return _sorted_quantile(older, 0.5) - age


def _lifetime(g: _Group, now: float, model: LifetimeModel, history: RuntimeHistory | None) -> None:
    """Fill ``known``/``median``/``hist`` of a group."""
    age = max(0.0, now - g.start)
    if g.limit_end is not None:
        g.known = True
        g.median = model.residual_median(age, g.limit_end - g.start)
        return
    if history is not None:
        s = history.samples(g.queue, g.owner_kind)
        if len(s) >= model.min_history and s[-1] > age:
            g.hist = s
            g.known = True
            g.median = _hist_residual_median(s, age)


def _levels(u: _Unit, cdf: Mapping[int, np.ndarray], ts: np.ndarray) -> list[np.ndarray]:
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


def _tail(units: list[_Unit], probs: list[list[np.ndarray]], base: int, need: int, n_t: int) -> np.ndarray:
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


# ---------------------------------------------------------------- the estimator


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
) -> WaitEstimate:
    """Expected wait of ``gang`` on ``snap`` at time ``now`` (epoch seconds); see the module doc.

    Args:
        snap: the cluster; pods' ``start_time`` (epoch s) and ``runtime_limit_s`` (else
            ``deadline_s``) say when they end.
        gang: the gang; its main pod set (largest device request) and the pods of that exact
            shape are placed (other pod sets — a small launcher — are not waited for).
        now: the evaluation time in epoch seconds (the caller's clock; the engine has none).
        history: learned runtimes for pods without a limit (``RuntimeHistory``), optional.
        ahead: gangs that start before this one, in the order they start (``gangs_ahead``).
        eligible: bool mask [nodes] of nodes the main pod set may use now (the engine's
            ``now_mask``); default: kube-scheduler's label/taint filters for the pod set.
        model: the lifetime model for pods with a known limit.
        default_limit_s: limit assumed for pods without one in the limit-based sweep only
            (Slurm's partition DefaultTime); None = their end is unknown.
        horizon_s: the longest wait searched for p50/p90.

    Returns:
        ``WaitEstimate`` (all zero when the gang fits now and nothing is ahead).
    """
    ps, need_pods = _main_pod_set(gang)
    if ps is None:
        return WaitEstimate(0.0, 0.0, 0.0, 1.0, False, horizon_s=horizon_s)
    shape = shape_of(snap, ps.requests)
    if shape.missing or not len(snap.nodes):
        return WaitEstimate(None, None, None, 0.0, True, pods_needed=need_pods, horizon_s=horizon_s)
    mpn = ps.max_per_node
    if eligible is None:
        eligible = filter_nodes(snap, Constraints(ps), ever=False).mask
    elig_idx = np.flatnonzero(eligible)
    cols = shape.cols
    free_e = snap.free[elig_idx][:, cols]
    k_now = _cap(free_e, shape, mpn)
    k_empty = _cap(snap.alloc[elig_idx][:, cols], shape, mpn)

    groups: list[_Group] = []
    gid_of: dict[str, int] = {}
    units: dict[tuple, _Unit] = {}
    node_chain: list[tuple[int, tuple[int, ...], list[list[int]], int]] = []  # (row, groups, requests, c0)
    base_now = 0          # capacity on nodes with nothing to wait for
    idle_caps: list[int] = []   # their capacities, node by node
    full_caps: list[int] = []
    blocking = known_blocking = 0

    vals = shape.vals.tolist()
    names = shape.names[1:]
    free_rows = free_e.tolist()
    k_now_l, k_empty_l = k_now.tolist(), k_empty.tolist()

    def cap(vec) -> int:
        k = min(max(v, 0) // d for v, d in zip(vec, vals))
        return min(k, mpn) if mpn is not None else k

    for row, i in enumerate(elig_idx.tolist()):
        c0, c_empty = k_now_l[row], k_empty_l[row]
        if c0 >= c_empty or c_empty == 0:
            base_now += c0
            if c0:
                idle_caps.append(c0)
            if c_empty:
                full_caps.append(c_empty)
            continue
        pods = snap.pods_by_node.get(snap.nodes[i].name, ())
        removable = [p for p in pods if p.owner_kind not in PERMANENT_OWNERS]
        vecs = [[1] + [p.requests.get(n, 0) for n in names] for p in removable]
        base = list(free_rows[row])
        for v in vecs:
            base = [x + y for x, y in zip(base, v)]
        k_full = cap(base)
        if k_full <= c0:
            base_now += c0
            if c0:
                idle_caps.append(c0)
            if k_full:
                full_caps.append(k_full)
            continue
        full_caps.append(k_full)
        relevant = [r for r, v in enumerate(vecs) if cap([x - y for x, y in zip(base, v)]) < k_full]
        if not relevant:  # several pods hold it jointly: all of them block
            relevant = list(range(len(removable)))
        node_groups: dict[int, list[int]] = {}
        for r in relevant:
            p = removable[r]
            key = p.gang or f"Pod/{p.namespace}/{p.name}"
            gid = gid_of.get(key)
            start = p.start_time if p.start_time is not None else now
            lim = _limit_of(p)
            end = None if lim is None else start + lim
            if gid is None:
                gid = gid_of[key] = len(groups)
                groups.append(_Group(start, end, p.queue, p.owner_kind))
            else:
                g = groups[gid]
                g.start = min(g.start, start)
                if g.limit_end is not None:
                    g.limit_end = None if end is None else max(g.limit_end, end)
            groups[gid].pods += 1
            acc = node_groups.get(gid)
            node_groups[gid] = vecs[r] if acc is None else [x + y for x, y in zip(acc, vecs[r])]
        node_chain.append((row, tuple(node_groups), [node_groups[g] for g in node_groups], c0))

    for g in groups:
        _lifetime(g, now, model, history)
        blocking += g.pods
        known_blocking += g.pods if g.known else 0
    known_share = known_blocking / blocking if blocking else 1.0

    # Order each busy node's groups by median end; compress to rising capacity levels.
    # pool: one entry per useful node: (chain of group ids, steps (prefix length, capacity),
    # capacity now, full capacity, unit key — None for a node with nothing to wait for).
    pool: list[tuple[tuple[int, ...], tuple[tuple[int, int], ...], int, int, tuple | None]] = [
        ((), (), c, c, None) for c in idle_caps]
    for row, gids, reqs, c0 in node_chain:
        order = sorted(range(len(gids)), key=lambda j: (groups[gids[j]].median, gids[j]))
        chain = tuple(gids[j] for j in order)
        cum = list(free_rows[row])
        steps: list[tuple[int, int]] = []
        last = c0
        for j in range(len(order)):
            cum = [x + y for x, y in zip(cum, reqs[order[j]])]
            c = cap(cum)
            if c > last:
                steps.append((j + 1, c))
                last = c
        key = (chain, tuple(steps), c0)
        pool.append((chain, tuple(steps), c0, last, key))
        if key not in units:
            units[key] = _Unit(chain, tuple(steps), c0)

    fits_now = base_now + sum(c0 for *_, c0 in node_chain)
    ahead = [a for a in ahead if a.nodes > 0]

    def sweep(gtime: list[float], ends: list[float]) -> tuple[float, list[float], list[int]]:
        """Slurm's plan. Group g ends ``gtime[g]`` seconds from now; in queue order each gang
        ahead reserves the ``nodes`` whole nodes that are fully free earliest (not before the
        gang before it starts: FIFO) and holds them for ``ends[a]`` seconds; ours starts when
        the capacity on the other nodes plus the nodes given back covers its pods, and not
        before the last gang ahead. Returns (our start, ahead starts, per pool node the last
        gang ahead holding it or -1)."""
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
            chosen = np.argpartition(avail, a.nodes - 1)[: a.nodes]
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

    def lim_time(g: _Group) -> float:
        if g.limit_end is not None:
            return max(0.0, g.limit_end - now)
        return max(0.0, g.start + default_limit_s - now) if default_limit_s is not None else math.inf

    lim_ends = [(a.limit_s if a.limit_s is not None else (default_limit_s if default_limit_s is not None else math.inf))
                for a in ahead]
    earliest, _, _ = sweep([lim_time(g) for g in groups], lim_ends)
    earliest_s = None if math.isinf(earliest) else float(earliest)

    if fits_now >= need_pods and not ahead:
        return WaitEstimate(0.0, 0.0, 0.0, known_share, False, blocking, need_pods, fits_now, horizon_s)
    unknown = blocking > 0 and known_share < 0.5
    if unknown:
        return WaitEstimate(earliest_s, None, None, known_share, True, blocking, need_pods, fits_now, horizon_s)

    ahead_groups: list[_Group] = []
    for a in ahead:
        g = _Group(now, None if a.limit_s is None else now + a.limit_s, a.queue, a.owner_kind)
        _lifetime(g, now, model, history)
        ahead_groups.append(g)

    plain_base = sum(full for _, _, _, full, key in pool if key is None)
    plain_mult: dict[tuple, int] = {}
    for *_, key in pool:
        if key is not None:
            plain_mult[key] = plain_mult.get(key, 0) + 1
    plain_units = [_Unit(units[key].chain, units[key].steps, units[key].c0, m) for key, m in plain_mult.items()]

    def band(q: float, plan_q: float) -> tuple[float | None, bool]:
        """Smallest wait with P(start) ≥ q. Gangs ahead are placed by the sweep with every end
        at its ``plan_q`` quantile; the nodes they take come back a random time (their
        lifetime law) after their planned start; the other nodes free by the DP's law."""
        owner = [-1] * len(pool)
        starts: list[float] = []
        if ahead:
            _, starts, owner = sweep([g.median if plan_q == 0.5 else _group_quantile(g, now, model, plan_q) for g in groups],
                                     [_fresh_quantile(g, model, plan_q) for g in ahead_groups])
        last_start = max(starts, default=0.0)
        if not math.isfinite(last_start):
            return None, True
        base = 0
        mult: dict[tuple, int] = {}
        back: dict[int, int] = {}
        for k, (_, _, _, full, key) in enumerate(pool):
            if owner[k] >= 0:
                back[owner[k]] = back.get(owner[k], 0) + full
            elif key is None:
                base += full
            else:
                mult[key] = mult.get(key, 0) + 1
        unit_list = [_Unit(units[key].chain, units[key].steps, units[key].c0, m) for key, m in mult.items()]

        def tail_at(ts: np.ndarray) -> np.ndarray:
            cdf = {gid: _group_cdf(groups[gid], now, model, ts) for u in plain_units for gid in u.chain}
            all_units = list(unit_list)
            probs = [_levels(u, cdf, ts) for u in unit_list]
            for a_i, w in back.items():
                s0 = starts[a_i]
                if not ahead_groups[a_i].known:
                    continue
                all_units.append(_Unit((), ((1, w),), 0, 1))
                ret = np.where(ts >= s0, _lifetime_fresh_cdf(ahead_groups[a_i], model, np.maximum(ts - s0, 0.0)), 0.0)
                probs.append([np.ones_like(ts), ret])
            out = _tail(all_units, probs, base, need_pods, len(ts))
            if ahead:  # a gang ahead never makes ours start earlier than without it
                out = np.minimum(out, _tail(plain_units, [_levels(u, cdf, ts) for u in plain_units], plain_base,
                                            need_pods, len(ts)))
            return np.where(ts >= last_start, out, 0.0)

        qs = (q,) if ahead else (0.5, 0.9)  # without gangs ahead the plan plays no part
        ts, beyond = _search(tail_at, horizon_s, qs)
        return ts, beyond

    if ahead:
        (p50,), b50 = band(0.5, 0.5)
        (p90,), b90 = band(0.9, model.band_plan_quantile)
    else:
        (p50, p90), b50 = band(0.5, 0.5)
        b90 = False
    if p50 is not None and p90 is not None:
        p90 = max(p90, p50)
    return WaitEstimate(earliest_s, p50, p90, known_share, False, blocking, need_pods, fits_now, horizon_s, b50 or b90)


def _group_quantile(g: _Group, now: float, model: LifetimeModel, q: float) -> float:
    """Seconds from now until group ``g`` has ended with probability ``q`` (inf when unknown)."""
    age = max(0.0, now - g.start)
    if g.limit_end is not None:
        return model.residual_quantile(age, g.limit_end - g.start, q)
    if g.hist is not None:
        older = g.hist[np.searchsorted(g.hist, age, side="right"):]
        return _sorted_quantile(older, q) - age if len(older) else math.inf
    return math.inf


def _fresh_quantile(g: _Group, model: LifetimeModel, q: float) -> float:
    """Run time of a gang that has not started yet at its ``q`` quantile (inf when unknown)."""
    if g.limit_end is not None:
        return model.residual_quantile(0.0, g.limit_end - g.start, q)
    if g.hist is not None:
        return _sorted_quantile(g.hist, q)
    return math.inf


def _sorted_quantile(sorted_samples: np.ndarray, q: float) -> float:
    """Linear-interpolated quantile of an ascending array (np.quantile's default rule)."""
    n = len(sorted_samples)
    x = q * (n - 1)
    lo = int(x)
    hi = min(lo + 1, n - 1)
    return float(sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (x - lo))


def _lifetime_fresh_cdf(g: _Group, model: LifetimeModel, t: np.ndarray) -> np.ndarray:
    """P(a gang that starts now ends within t seconds)."""
    if g.limit_end is not None:
        return model.residual_cdf(0.0, g.limit_end - g.start, t)
    if g.hist is not None:
        return _hist_residual_cdf(g.hist, 0.0, t)
    return np.zeros_like(t)


def _search(tail_at, horizon_s: float, qs: tuple[float, ...] = (0.5, 0.9), rounds: int = 3, points: int = 24):
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


# ---------------------------------------------------------------- gangs ahead


def gangs_ahead(
    snap: ClusterSnapshot,
    gang: GangRequest,
    priority: int | None = None,
    *,
    eligible: np.ndarray | None = None,
) -> tuple[AheadGang, ...]:
    """Pending gangs in ``snap`` that start before ``gang``: strictly higher priority, asking
    for the main pod set's device resource, ordered by priority (highest first).

    ``priority`` defaults to the value of ``gang.priority_class`` in ``snap.priority_classes``
    (0 when unset). Each gang reserves ⌈pods ÷ pods-per-empty-node⌉ whole nodes among
    ``eligible`` (default: the main pod set's filters); its limit is the largest limit of its
    pods (None when any has none). Earlier same-priority gangs of the same queue are not
    included: pending pods carry no creation time in the snapshot.
    """
    ps, _ = _main_pod_set(gang)
    if ps is None:
        return ()
    if priority is None:
        priority = snap.priority_classes.get(gang.priority_class or "", 0)
    devs = [r for r, v in ps.requests.items() if v and any(h in r for h in _GPU_HINTS)]
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
        sh = shape_of(snap, pods[0].requests)
        per = pods_per_node(snap.alloc[eligible], sh)
        per = per[per > 0]
        if not len(per):
            continue
        nodes = -(-len(pods) // int(np.median(per)))
        lims = [_limit_of(p) for p in pods]
        lim = None if any(x is None for x in lims) else max(lims)
        out.append((-max(p.priority for p in pods), key,
                    AheadGang(key, nodes, lim, pods[0].queue, pods[0].owner_kind)))
    out.sort(key=lambda x: (x[0], x[1]))
    return tuple(a for *_, a in out)
