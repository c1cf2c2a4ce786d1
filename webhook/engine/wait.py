"""Expected wait of a gang that cannot start now: a reservation sweep plus a p50/p90 band.

Two estimates, both in seconds from ``now`` (FIELD-NOTES §5):

* **earliest_start_s** — Slurm's ``squeue --start`` rule for whole-node gangs. Every eligible
  node frees its capacity for the gang's main pod shape when the pods holding it hit their
  declared limits (start + limit). Gangs ahead of ours (higher priority, or earlier in the
  same queue) reserve the earliest-free whole nodes first and hold them for their own limit;
  ours starts when the remaining capacity covers all its pods — the K-th earliest free node
  for whole-node pods — and not before the last gang ahead has started. An upper bound with
  respect to running work (jobs end early), not with respect to later higher-priority arrivals.
* **p50_s / p90_s** — the wait by which the gang has started with probability 0.5 / 0.9, every
  end being a random variable (``_Law``):

  - a running gang's remaining run time is its *conditional remaining lifetime given its
    age*, from the runs ``RuntimeHistory`` learned for its (queue, owner kind). With a limit
    L: the run/limit ratios of finished runs with a limit (weighted towards similar limits),
    scaled to L — nothing outlives L, and runs that reached their limit are a point mass at
    it. Without a limit: the run times of finished runs without one. Gangs still running
    (the snapshot) are censored runs of the same cohort (Kaplan–Meier), so a young history
    that has seen only short runs end does not read as "all runs are short". Both laws are
    smoothed by a logistic kernel in log-time (Silverman's bandwidth) and conditioned on
    T > age. With too little history a known limit falls back to the log-uniform prior
    (``LifetimeModel``: a job of age a has median total √(a·L)); with neither, the end is
    unknown;
  - gangs ahead reserve whole nodes in queue order, as in the limit sweep, and hold them for
    a run time drawn from the same learned law at age 0;
  - gangs of higher priority submitted later pass ours and same-priority gangs ahead of it
    (FIFO with priority): a Poisson stream at the rate ``RuntimeHistory`` observed over the
    last ``LifetimeModel.arrival_window_s``, sizes, queues and limits bootstrapped from it.

  Without gangs ahead or later arrivals the band is exact under independence: nodes held by
  the same gangs free together (one unit), different gangs end independently, so the freed
  capacity is a sum of independent weighted steps — a Poisson-binomial tail when every node
  holds one pod of the shape — computed by a truncated DP, O(units · D) per time point, and
  searched on t by k-ary bisection vectorised over t. Otherwise the sweep is replayed on
  ``LifetimeModel.samples`` joint draws (stratified per gang, a fixed seed: the answer is a
  function of the inputs) and p50/p90 are the empirical quantiles of our start, never below
  the DP's answer without them (a gang ahead never makes ours start earlier).

Bounds: no allocation or loop follows the pod count the gang states (up to int32). A gang
larger than the eligible nodes could ever hold is answered "not within the horizon" at once;
the DP runs only while units × (pods still needed + 1) and its states stay under fixed budgets
(``_DP_MAX_CELLS``, ``_DP_MAX_STATES``), the joint draws (cost: draws × nodes) give the band
beyond them.

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
from .model import TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE, BoundPod, GangRequest, PodSet
from .snapshot import ClusterSnapshot

__all__ = [
    "AheadGang",
    "GangArrival",
    "LifetimeModel",
    "RuntimeHistory",
    "WaitEstimate",
    "estimate_wait",
    "gang_priority",
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
#: Seed of the joint draws: the same inputs give the same estimate.
_SEED = 0x6A7C5EED
#: A run within 0.1 % of its limit reached it (was killed at it, or was sized to it).
_AT_LIMIT = 0.999
#: Logistic scale with the standard deviation of a Gaussian kernel of bandwidth 1.
_LOGISTIC = math.sqrt(3.0) / math.pi
#: Smallest kernel bandwidth in log-time (a factor of ~1.05).
_MIN_BANDWIDTH = 0.05
#: The exact band's DP costs units × (pods still needed + 1) cells per time point and holds
#: (pods still needed + 1) × time points floats. The pods needed are the gang's stated count,
#: so past these budgets the band comes from the joint draws (``_simulate``, whose cost follows
#: the nodes, not the pods) instead: 5,000 busy units × a 64-pod gang stays exact.
_DP_MAX_CELLS = 1 << 19
_DP_MAX_STATES = 1 << 15


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
        priority: its priority. A later arrival of higher priority passes it only when this is
            at most ours (a same-priority gang earlier in the queue); None counts as higher.
    """

    name: str
    nodes: int
    limit_s: float | None = None
    queue: str = ""
    owner_kind: str = ""
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class GangArrival:
    """A gang submitted in the observed window (``RuntimeHistory.arrivals``).

    Attributes: ``gang`` its key; ``t`` its first pod's creation, epoch seconds; ``priority``;
    ``pods`` recorded; ``requests`` one pod's requests (scheduler units); ``queue`` /
    ``owner_kind`` its runtime key; ``limit_s`` its run-time limit in seconds (None: none).
    """

    gang: str
    t: float
    priority: int
    pods: int
    requests: Mapping[str, int]
    queue: str = ""
    owner_kind: str = ""
    limit_s: float | None = None


@dataclass(frozen=True)
class LifetimeModel:
    """How long running and queued jobs run (seconds): the knobs of the learned law.

    * ``floor_s``, ``limit_mass`` — the prior for a job with a known limit L when its (queue,
      owner kind) has fewer than ``min_history`` finished runs with a limit: total lifetime
      T = L with probability ``limit_mass`` (killed at its limit, or sized to it), else
      log-uniform on [min(floor_s, L), L]; conditioned on T > age, so a job of age a ≥ floor_s
      with ``limit_mass`` 0 has median total √(a·L) (FIELD-NOTES §5). Past its limit a job
      ends at once.
    * ``min_history`` — finished runs of a key needed before they are trusted (counted among
      runs with a limit for a job with one, among runs without — else all runs — for a job
      without).
    * ``limit_width`` — how alike two limits must be for one run's ratio run/limit to inform
      another: weight exp(−|ln(L_i / L)| / limit_width); 0.5 gives a limit twice as long
      weight e^−1.4 ≈ 0.25 (users round limits to a few values, and the rounding shapes the
      ratio).
    * ``bandwidth_scale`` — multiplies Silverman's rule of thumb (0.9 · min(sd, IQR/1.34) ·
      n^−1/5) for the log-time kernel.
    * ``samples`` — joint draws when gangs ahead or later arrivals make the band a simulation
      (fewer on large pools: at most 2^18 node-draws, at least 64).
    * ``arrival_window_s`` — the window over which the rate of higher-priority arrivals is
      measured; ``min_arrival_span_s`` — the observation needed before they are modelled.

    Chosen on ``bench/wait_accuracy.py --seed 1`` (calibration); the report uses ``--seed 0``.
    """

    floor_s: float = 600.0
    limit_mass: float = 0.1
    min_history: int = 20
    limit_width: float = 0.5
    bandwidth_scale: float = 1.0
    samples: int = 512
    arrival_window_s: float = 7 * 86400.0
    min_arrival_span_s: float = 86400.0

    def residual_cdf(self, age_s: float, limit_s: float, t: np.ndarray) -> np.ndarray:
        """Prior: P(the job ends within ``t`` more seconds | it has run ``age_s`` of at most ``limit_s``)."""
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

    def residual_quantile(self, age_s: float, limit_s: float, q: float | np.ndarray) -> float | np.ndarray:
        """Prior: remaining run time (s) by which the job has ended with probability ``q``
        (closed form of ``residual_cdf`` = q; the limit once the point mass is reached).
        ``q`` may be an array (then so is the answer)."""
        qa = np.asarray(q, dtype=float)
        a = max(0.0, age_s)
        L = float(limit_s)
        lo = min(self.floor_s, L)
        m = self.limit_mass
        if a >= L:
            out = np.zeros_like(qa)
        elif L <= lo or m >= 1:
            out = np.full_like(qa, L - a)
        else:
            span = math.log(L / lo)
            a_eff = max(a, lo)
            surv = m + (1 - m) * (math.log(L) - math.log(a_eff)) / span
            x = a_eff * np.exp(qa * surv * span / (1 - m))
            out = np.maximum(0.0, np.minimum(x, L) - a)
        return float(out) if np.ndim(q) == 0 else out

    def residual_median(self, age_s: float, limit_s: float) -> float:
        """Prior: median remaining run time in seconds (``residual_quantile`` at 0.5)."""
        return self.residual_quantile(age_s, limit_s, 0.5)


DEFAULT_MODEL = LifetimeModel()


class RuntimeHistory:
    """What the cluster did lately: finished runs per (queue, owner kind), and gang arrivals.
    Bounded memory; pure (no clock: every time is the caller's); a lock makes feeding from a
    watch thread while an admission reads safe.

    Runs: each key keeps a ring of its last ``per_key`` (run time, limit, finish time) triples
    in seconds (the limit NaN when the run had none, the finish NaN when not given); at most
    ``max_keys`` keys, the least recently fed evicted first — at most ``max_keys × per_key ×
    24`` bytes of samples. The cache calls ``add(queue, owner_kind, finish − start, limit,
    finish)`` once per gang that finishes. ``observe_from`` says since when the record is
    complete, so the estimator can pair the runs that started since with those still running.

    Arrivals: ``add_arrival`` records pods as they are created, per gang (at most
    ``max_arrivals`` gangs, the oldest dropped first); ``arrivals`` gives the gangs submitted
    in a window and how long the record covers, from which the estimator takes the rate of
    higher-priority arrivals. The cache calls it for every pod it sees created lately.
    """

    def __init__(self, per_key: int = 256, max_keys: int = 512, max_arrivals: int = 4096) -> None:
        if per_key < 1 or max_keys < 1 or max_arrivals < 1:
            raise ValueError("per_key, max_keys and max_arrivals must be ≥ 1")
        self.per_key = per_key
        self.max_keys = max_keys
        self.max_arrivals = max_arrivals
        self._rings: OrderedDict[tuple[str, str], list] = OrderedDict()  # key → [runs, limits, finishes, n_seen]
        self._sorted: dict[tuple[str, str], np.ndarray] = {}
        self._triples: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # gang → [first t, priority, pods, requests, queue, owner kind, limit]; members seen
        self._gangs: OrderedDict[str, list] = OrderedDict()
        self._members: OrderedDict[str, None] = OrderedDict()
        self._observed_from: float | None = None
        self._arrivals_from = -math.inf   # gangs before it may have been dropped
        self._lock = threading.Lock()

    # ------------------------------------------------------------ runs

    def add(self, queue: str, owner_kind: str, runtime_s: float, limit_s: float | None = None,
            finished_at: float | None = None) -> None:
        """Record one finished run of ``runtime_s`` seconds (ignored unless finite and > 0),
        which ran under a limit of ``limit_s`` seconds (None, or not finite and > 0: none) and
        ended at epoch ``finished_at`` (None: unknown)."""
        if not (runtime_s > 0 and math.isfinite(runtime_s)):
            return
        lim = float(limit_s) if limit_s is not None and limit_s > 0 and math.isfinite(limit_s) else math.nan
        fin = float(finished_at) if finished_at is not None and math.isfinite(finished_at) else math.nan
        key = (queue or "", owner_kind or "")
        with self._lock:
            ring = self._rings.get(key)
            if ring is None:
                if len(self._rings) >= self.max_keys:
                    old, _ = self._rings.popitem(last=False)
                    self._sorted.pop(old, None)
                    self._triples.pop(old, None)
                ring = self._rings[key] = [np.empty(self.per_key), np.empty(self.per_key), np.empty(self.per_key), 0]
            else:
                self._rings.move_to_end(key)
            runs, lims, fins, n = ring
            runs[n % self.per_key] = runtime_s
            lims[n % self.per_key] = lim
            fins[n % self.per_key] = fin
            ring[3] = n + 1
            self._sorted.pop(key, None)
            self._triples.pop(key, None)

    def samples(self, queue: str, owner_kind: str) -> np.ndarray:
        """The kept run times of a key, sorted ascending (seconds; empty when none)."""
        key = (queue or "", owner_kind or "")
        with self._lock:
            hit = self._sorted.get(key)
            if hit is not None:
                return hit
            ring = self._rings.get(key)
            if ring is None:
                return np.empty(0)
            out = np.sort(ring[0][: min(ring[3], self.per_key)])
            out.setflags(write=False)
            self._sorted[key] = out
            return out

    def runs(self, queue: str, owner_kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kept runs of a key as three read-only arrays of equal length, in no particular
        order: run times (s), their limits (s, NaN for a run without one) and finish times
        (epoch s, NaN when not given)."""
        key = (queue or "", owner_kind or "")
        with self._lock:
            hit = self._triples.get(key)
            if hit is not None:
                return hit
            ring = self._rings.get(key)
            if ring is None:
                return np.empty(0), np.empty(0), np.empty(0)
            n = min(ring[3], self.per_key)
            out = tuple(a[:n].copy() for a in ring[:3])
            for a in out:
                a.setflags(write=False)
            self._triples[key] = out
            return out

    def complete_from(self, queue: str, owner_kind: str) -> float:
        """Epoch seconds since which every run of the key that finished is kept: the oldest
        kept finish once the ring has dropped runs, else ``observe_from``'s time (−inf when
        neither is known)."""
        key = (queue or "", owner_kind or "")
        with self._lock:
            ring = self._rings.get(key)
            if ring is not None and ring[3] > self.per_key:
                fins = ring[2]
                return -math.inf if np.isnan(fins).any() else float(fins.min())
            return -math.inf if self._observed_from is None else self._observed_from

    def count(self, queue: str, owner_kind: str) -> int:
        """Runs kept for a key (≤ ``per_key``)."""
        return len(self.samples(queue, owner_kind))

    def percentile(self, queue: str, owner_kind: str, q: float) -> float | None:
        """The ``q``-th percentile (0–100) of a key's run times in seconds, None without samples."""
        s = self.samples(queue, owner_kind)
        return float(np.percentile(s, q)) if len(s) else None

    def keys(self) -> list[tuple[str, str]]:
        """Keys kept, least recently fed first."""
        with self._lock:
            return list(self._rings)

    @property
    def nbytes(self) -> int:
        """Bytes held by run sample arrays (the bounded part of the memory)."""
        with self._lock:
            return sum(r[0].nbytes + r[1].nbytes + r[2].nbytes for r in self._rings.values())

    def __len__(self) -> int:
        return len(self._rings)

    # ------------------------------------------------------------ arrivals

    def observe_from(self, t: float) -> None:
        """Say that the record is complete from epoch ``t`` on (when the recorder started): every
        run that finished and every arrival since is fed. The arrival rate's window never
        reaches before it (without it, the first arrival's time counts), and the runs that
        started since are paired with those still running (``complete_from``)."""
        with self._lock:
            self._observed_from = float(t)

    def add_arrival(self, member: str, gang: str, t: float, priority: int, requests: Mapping[str, int],
                    queue: str = "", owner_kind: str = "", limit_s: float | None = None, pods: int = 1) -> None:
        """Record that ``pods`` pod(s) of gang ``gang`` (one pod's ``requests``, kept by
        reference: pass an immutable mapping) were created at epoch ``t``. ``member`` names
        them uniquely (a pod's uid): recording a member seen lately again does nothing. Kept:
        the last ``max_arrivals`` gangs and ``8 × max_arrivals`` members."""
        if not math.isfinite(t) or pods < 1:
            return
        with self._lock:
            if member in self._members:
                return
            self._members[member] = None
            if len(self._members) > 8 * self.max_arrivals:
                self._members.popitem(last=False)
            key = gang or member
            g = self._gangs.get(key)
            if g is None:
                if len(self._gangs) >= self.max_arrivals:
                    _, old = self._gangs.popitem(last=False)
                    self._arrivals_from = max(self._arrivals_from, old[0])
                self._gangs[key] = [float(t), int(priority), int(pods), requests, queue or "", owner_kind or "", limit_s]
            else:
                g[0] = min(g[0], float(t))
                g[1] = max(g[1], int(priority))
                g[2] += int(pods)

    def arrivals(self, now: float, window_s: float) -> tuple[float, list[GangArrival]]:
        """Gangs whose first recorded pod was created in (``now`` − window, ``now``], and the
        span in seconds the record covers within that window (0 when nothing was recorded):
        ``len(gangs) / span`` is an arrival rate per second. The record starts at
        ``observe_from`` (else at its first arrival) and after any gang it dropped."""
        with self._lock:
            if not self._gangs:
                return 0.0, []
            first = min(g[0] for g in self._gangs.values()) if self._observed_from is None else self._observed_from
            lo = max(now - window_s, first, self._arrivals_from)
            out = [GangArrival(k, g[0], g[1], g[2], g[3], g[4], g[5], g[6])
                   for k, g in self._gangs.items() if lo < g[0] <= now]
        return max(0.0, now - lo), out


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
    blocked_by: str | None = None
    repair: tuple[tuple[str, int], ...] = ()
    pods_max: int | None = None

    def text(self) -> str:
        """One line for warnings and annotations, e.g.
        "expected wait p50 5h40m, p90 9h (end times known for 72% of blocking pods)", or when
        running work can never free enough (``blocked_by``) what must happen instead:
        "waits for repair: 8 cordoned node(s) must be uncordoned; running work alone never
        frees enough (at most 12 of 64 pods)"."""
        if self.blocked_by is not None:
            return self.blocker_text()
        share = f"end times known for {int(round(self.known_share * 100))}% of blocking pods"
        if self.unknown:
            return f"expected wait unknown ({share})"
        if self.p50_s == 0 and self.p90_s == 0:
            return "expected wait 0 (fits now)"
        far = ">" + format_duration(self.horizon_s)
        p50 = far if self.p50_s is None else format_duration(self.p50_s)
        p90 = far if self.p90_s is None else format_duration(self.p90_s)
        return f"expected wait p50 {p50}, p90 {p90} ({share})"

    def blocker_text(self) -> str:
        """What the gang waits for when running work ending is not enough (``blocked_by``):
        "repair" — the repairs, most nodes first —, or "capacity" (nothing repairable helps)."""
        most = f"at most {self.pods_max} of {self.pods_needed} pods"
        if self.blocked_by == "repair":
            return (f"waits for repair: {', '.join(_repair_phrase(k, n) for k, n in self.repair)}; "
                    f"running work alone never frees enough ({most})")
        return f"waits for capacity: running work alone never frees enough on the nodes it may use ({most})"

    def as_dict(self) -> dict:
        """JSON-ready: seconds rounded to whole seconds, the share to 4 decimals, the text;
        ``blocked_by`` ("repair", "capacity" or None), ``repair`` ({problem: nodes}: "cordoned",
        "not_ready", "devices", "taint KEY=VALUE:EFFECT") and ``pods_max`` (pods of the main
        shape that fit once all running work that can end has ended) when it is set."""
        r = lambda v: None if v is None else int(round(v))
        out = {
            "earliest_start_s": r(self.earliest_start_s),
            "p50_s": r(self.p50_s),
            "p90_s": r(self.p90_s),
            "known_share": round(self.known_share, 4),
            "unknown": self.unknown,
            "blocking_pods": self.blocking_pods,
            "pods_needed": self.pods_needed,
            "text": self.text(),
        }
        if self.blocked_by is not None:
            out["blocked_by"] = self.blocked_by
            out["repair"] = dict(self.repair)
            out["pods_max"] = self.pods_max
        return out


def _repair_phrase(problem: str, nodes: int) -> str:
    """One repair, e.g. "8 cordoned node(s) must be uncordoned"."""
    if problem == "cordoned":
        return f"{nodes} cordoned node(s) must be uncordoned"
    if problem == "not_ready":
        return f"{nodes} NotReady node(s) must become Ready"
    if problem == "devices":
        return f"{nodes} node(s) must advertise their devices again (device plugin)"
    return f"{nodes} node(s) must lose the {problem}"


#: Taints the control plane sets for a cordon or a NotReady/unreachable node: said as such.
_CONDITION_TAINTS = frozenset({TAINT_UNSCHEDULABLE, TAINT_NOT_READY, TAINT_UNREACHABLE})


def repair_needs(snap: ClusterSnapshot, ps: PodSet, shape: Shape, eligible: np.ndarray,
                 ever: np.ndarray) -> tuple[tuple[str, int], ...]:
    """What must be repaired for more of ``ps``'s pods to fit: per problem, the nodes that
    would then take a pod of ``shape`` and cannot now — ``ever`` (repaired) but not
    ``eligible`` (now), or eligible with devices not all allocatable. Problems: "cordoned",
    "not_ready" (Ready=False or the not-ready/unreachable taint), "devices" (device
    allocatable below what is installed, ``ClusterSnapshot.ever_alloc``), "taint K=V:EFFECT"
    (any other taint the pod does not tolerate: a transient one, as the filters skip for
    "ever"). A node with several problems counts under each. Most nodes first, then by name."""
    mpn = ps.max_per_node
    k_ever = pods_per_node(snap.ever_alloc, shape, mpn)
    k_alloc = pods_per_node(snap.alloc, shape, mpn)
    counts: dict[str, int] = {}

    def add(k: str) -> None:
        counts[k] = counts.get(k, 0) + 1

    for i in np.flatnonzero(ever & ~eligible & (k_ever > 0)).tolist():
        n = snap.nodes[i]
        if n.unschedulable:
            add("cordoned")
        if n.ready is False or any(t.key in (TAINT_NOT_READY, TAINT_UNREACHABLE) for t in n.taints):
            add("not_ready")
        for t in n.taints:
            if (t.key not in _CONDITION_TAINTS and t.effect in ("NoSchedule", "NoExecute")
                    and not any(tol.tolerates(t) for tol in ps.tolerations)):
                add(f"taint {t.key}{'=' + t.value if t.value else ''}:{t.effect}")
        if k_ever[i] > k_alloc[i]:
            add("devices")
    devices_now = int(np.count_nonzero(eligible & (k_ever > k_alloc)))
    if devices_now:
        counts["devices"] = counts.get("devices", 0) + devices_now
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _bound_by_gang(snap: ClusterSnapshot) -> Mapping[str, list[BoundPod]]:
    """Bound pods with a gang key, by gang key; built once per snapshot and kept on it."""
    key = ("wait.bound_by_gang",)
    hit = snap.recall(key)
    if hit is None:
        by: dict[str, list[BoundPod]] = {}
        for p in snap.pods:
            if p.gang and p.node_name:
                by.setdefault(p.gang, []).append(p)
        hit = snap.remember(key, by)
    return hit  # type: ignore[return-value]


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
    median: float | None = None  # median remaining run time, s (inf when unknown); lazily
    age: float = 0.0             # s run so far
    law: _Law | None = None


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


# ---------------------------------------------------------------- lifetime laws


class _Law:
    """The law of one job's total run time T (seconds), asked about at an age a (given T > a).

    Forms: ``"mix"`` — P(T > x) = pm + Σ w_i σ((c_i − ln x)/s) for x below the cap L, 0 from
    L on (no cap: pm = 0): logistic kernels in log-time at the learned runs (c_i = ln t_i), a
    point mass pm at L for runs that reached their limit; ``"prior"`` — ``LifetimeModel``'s
    log-uniform law under the limit L; ``"unknown"`` — the end is not known (never frees).
    """

    __slots__ = ("form", "cap", "c", "logw", "s", "log_pm", "model")

    def __init__(self, form: str, cap: float | None = None, c: np.ndarray | None = None,
                 logw: np.ndarray | None = None, s: float = 1.0, log_pm: float = -math.inf,
                 model: LifetimeModel | None = None) -> None:
        self.form = form
        self.cap = cap
        self.c = np.empty(0) if c is None else c
        self.logw = np.empty(0) if logw is None else logw
        self.s = s
        self.log_pm = log_pm
        self.model = model

    @property
    def known(self) -> bool:
        return self.form != "unknown"

    def _log_surv(self, x: np.ndarray) -> np.ndarray:
        """ln P(T > x) for the mixture, array over x (seconds)."""
        x = np.asarray(x, dtype=float)
        if len(self.c):
            z = (np.log(np.maximum(x, 1e-9))[..., None] - self.c) / self.s
            out = np.logaddexp.reduce(self.logw - np.logaddexp(0.0, z), axis=-1)
        else:
            out = np.full(x.shape, -math.inf)
        if self.cap is not None:
            out = np.where(x >= self.cap, -math.inf, np.logaddexp(out, self.log_pm))
        return out

    def cdf(self, age: float, t: np.ndarray) -> np.ndarray:
        """P(T ≤ age + t | T > age): the job has ended within ``t`` more seconds, array over t."""
        t = np.asarray(t, dtype=float)
        if self.form == "unknown":
            return np.zeros_like(t)
        if self.form == "prior":
            return self.model.residual_cdf(age, self.cap, t)
        a = max(0.0, age)
        la = float(self._log_surv(np.array([a]))[0])
        if la == -math.inf:
            return np.ones_like(t)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.clip(1.0 - np.exp(self._log_surv(a + t) - la), 0.0, 1.0)

    def sample(self, age: float, u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
        """Remaining run times (s) given T > age, one per pair of uniforms (inverse CDF: ``u1``
        picks the kernel by its weight given T > age, ``u2`` the point in its truncated tail).
        inf when unknown."""
        if self.form == "unknown":
            return np.full(len(u1), math.inf)
        a = max(0.0, age)
        if self.form == "prior":
            return self.model.residual_quantile(a, self.cap, u1)
        if self.cap is not None and a >= self.cap:
            return np.zeros(len(u1))
        lx = math.log(max(a, 1e-9))
        lg = -np.logaddexp(0.0, (lx - self.c) / self.s)        # ln P(kernel i > age)
        parts = np.append(self.logw + lg, self.log_pm if self.cap is not None else -math.inf)
        top = parts.max()
        if top == -math.inf:
            return np.full(len(u1), math.inf)
        cum = np.cumsum(np.exp(parts - top))
        k = np.minimum(np.searchsorted(cum / cum[-1], u1, side="right"), len(parts) - 1)
        out = np.full(len(u1), math.inf if self.cap is None else self.cap)
        comp = k < len(self.c)
        kk = k[comp]
        with np.errstate(divide="ignore"):
            log_tail = lg[kk] + np.log1p(-np.minimum(u2[comp], 1 - 1e-12))   # ln(1 − F) at the draw
            log_head = np.log1p(-np.exp(log_tail))                             # ln F at the draw
            x = np.exp(self.c[kk] + self.s * (log_head - log_tail))
        out[comp] = x if self.cap is None else np.minimum(x, self.cap)
        return np.maximum(out - a, 0.0)

    def median(self, age: float) -> float:
        """Median remaining run time (s) given T > age (inf when unknown); for ordering ends."""
        if self.form == "unknown":
            return math.inf
        if self.form == "prior":
            return self.model.residual_median(age, self.cap)
        ts = _MEDIAN_GRID
        c = self.cdf(age, ts)
        j = int(np.searchsorted(c, 0.5))
        if j >= len(ts):
            return math.inf
        if j == 0:
            return float(ts[0])
        lo, hi = c[j - 1], c[j]
        f = 0.0 if hi <= lo else (0.5 - lo) / (hi - lo)
        return float(ts[j - 1] * (ts[j] / ts[j - 1]) ** f)


_UNKNOWN = _Law("unknown")
_MEDIAN_GRID = np.geomspace(1.0, 1e9, 181)


def _bandwidth(logs: np.ndarray) -> float:
    """Silverman's rule of thumb on log-times: 0.9 · min(sd, IQR/1.34) · n^−1/5."""
    n = len(logs)
    if n < 2:
        return 0.5
    sd = float(np.std(logs))
    q75, q25 = np.percentile(logs, [75, 25])
    iqr = float(q75 - q25) / 1.34
    spread = min(sd, iqr) if iqr > 0 else sd
    return max(0.9 * spread * n ** -0.2, _MIN_BANDWIDTH)


def _kaplan_meier(ev: np.ndarray, w_ev: np.ndarray, cens: np.ndarray, w_cens: np.ndarray) -> tuple[np.ndarray, float]:
    """Weighted Kaplan–Meier: the probability mass at each event value ``ev`` (weights
    ``w_ev``) when ``cens`` (weights ``w_cens``) are right-censored values (still running at
    that age), and the mass left beyond the last event. Events sort before censored values
    at a tie. Without censored values the masses are the normalised weights."""
    if not len(cens):
        tot = float(w_ev.sum())
        return w_ev / tot, 0.0
    vals = np.concatenate([ev, cens])
    wts = np.concatenate([w_ev, w_cens])
    is_ev = np.concatenate([np.ones(len(ev), dtype=bool), np.zeros(len(cens), dtype=bool)])
    order = np.lexsort((~is_ev, vals))
    wts_o, is_ev_o = wts[order], is_ev[order]
    at_risk = np.cumsum(wts_o[::-1])[::-1]
    h = np.where(is_ev_o, wts_o / np.maximum(at_risk, 1e-300), 0.0)
    surv_after = np.cumprod(1.0 - h)
    surv_before = np.concatenate([[1.0], surv_after[:-1]])
    mass = np.empty(len(vals))
    mass[order] = surv_before * h
    return mass[: len(ev)], float(surv_after[-1])


_CENSORED = "censored"
_NOW = "now"


def _running_ages(snap: ClusterSnapshot, now: float) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """Per (queue, owner kind): the ages (s) and limits (s, NaN: none) of the gangs running
    now — runs not finished yet, right-censored observations for the learned laws. The start
    times are remembered on the snapshot (one pass over its pods per snapshot)."""
    starts = snap.recall(("wait.running_starts",))
    if starts is None:
        by: dict[str, list] = {}
        for p in snap.pods:
            if not p.node_name or p.start_time is None or p.owner_kind in PERMANENT_OWNERS:
                continue
            key = p.gang or f"Pod/{p.namespace}/{p.name}"
            lim = _limit_of(p)
            g = by.get(key)
            if g is None:
                by[key] = [p.queue, p.owner_kind, p.start_time, lim]
            else:
                g[2] = min(g[2], p.start_time)
                g[3] = None if g[3] is None or lim is None else max(g[3], lim)
        per: dict[tuple[str, str], tuple[list, list]] = {}
        for queue, kind, start, lim in by.values():
            t, lims = per.setdefault((queue, kind), ([], []))
            t.append(start)
            lims.append(math.nan if lim is None else lim)
        starts = snap.remember(("wait.running_starts",), {k: (np.array(a), np.array(b)) for k, (a, b) in per.items()})
    return {k: (np.maximum(0.0, now - t), lims) for k, (t, lims) in starts.items()}


def _law_for(history: RuntimeHistory | None, model: LifetimeModel, queue: str, owner_kind: str,
             limit_s: float | None, memo: dict) -> _Law:
    """The law of a job of (queue, owner kind) under limit ``limit_s`` (None: none) — see
    ``_Law`` and the module doc. Memoised in ``memo`` for one estimate.

    ``memo[_CENSORED]`` (``_running_ages``, at ``memo[_NOW]``) adds the runs still going as
    censored observations (Kaplan–Meier) — on one cohort, the runs that started since the
    history is complete (``RuntimeHistory.complete_from``): finished ones are in the
    history, the others are running. So a young history, which has only seen the short runs
    end, is not read as "all runs are short", and an old one does not count the long runs
    twice."""
    key = (queue, owner_kind, limit_s)
    hit = memo.get(key)
    if hit is not None:
        return hit
    law = None
    if history is not None:
        runs, lims, fins = history.runs(queue, owner_kind)
        since = history.complete_from(queue, owner_kind)
        cohort = ~(fins - runs < since - 1.0)          # started since (NaN: unknown, kept)
        runs, lims = runs[cohort], lims[cohort]
        has = np.isfinite(lims)
        c_age, c_lim = memo.get(_CENSORED, {}).get((queue, owner_kind), (np.empty(0), np.empty(0)))
        if len(c_age) and math.isfinite(since):
            keep = c_age <= memo.get(_NOW, math.inf) - since + 1.0
            c_age, c_lim = c_age[keep], c_lim[keep]
        c_has = np.isfinite(c_lim)
        if limit_s is not None:
            if int(has.sum()) >= model.min_history:
                r, lim = runs[has], lims[has]
                ratio = np.minimum(r / lim, 1.0)
                at_limit = ratio >= _AT_LIMIT
                near = lambda x: np.exp(-np.abs(np.log(x / limit_s)) / model.limit_width)  # noqa: E731
                cl = c_lim[c_has]
                mass, left = _kaplan_meier(ratio, near(lim), np.minimum(c_age[c_has] / cl, 1.0), near(cl))
                lr = np.log(ratio[~at_limit])
                pm = float(mass[at_limit].sum()) + left   # still running after every end: by L
                with np.errstate(divide="ignore"):
                    law = _Law("mix", cap=float(limit_s), c=lr + math.log(limit_s), logw=np.log(mass[~at_limit]),
                               s=_bandwidth(lr) * model.bandwidth_scale * _LOGISTIC,
                               log_pm=math.log(pm) if pm > 0 else -math.inf)
        else:
            own = int((~has).sum()) >= model.min_history
            use = runs[~has] if own else runs
            if len(use) >= model.min_history:
                cens = c_age[~c_has] if own else c_age
                cens = cens[cens > 0]
                mass, left = _kaplan_meier(use, np.ones(len(use)), cens, np.ones(len(cens)))
                c = use
                if left > 0:   # still running after every end: their ages carry the rest (Efron)
                    tail = cens[cens >= use.max()]
                    c = np.concatenate([use, tail])
                    mass = np.concatenate([mass, np.full(len(tail), left / len(tail))])
                lx = np.log(c)
                with np.errstate(divide="ignore"):
                    law = _Law("mix", c=lx, logw=np.log(mass), s=_bandwidth(np.log(use)) * model.bandwidth_scale * _LOGISTIC)
    if law is None:
        law = _Law("prior", cap=float(limit_s), model=model) if limit_s is not None else _UNKNOWN
    memo[key] = law
    return law


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
    priority: int | None = None,
    ever: np.ndarray | None = None,
) -> WaitEstimate:
    """Expected wait of ``gang`` on ``snap`` at time ``now`` (epoch seconds); see the module doc.

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
    ps, need_pods = _main_pod_set(gang)
    if ps is None:
        return WaitEstimate(0.0, 0.0, 0.0, 1.0, False, horizon_s=horizon_s)
    shape = shape_of(snap, ps.requests)
    if shape.missing or not len(snap.nodes):
        return WaitEstimate(None, None, None, 0.0, True, pods_needed=need_pods, horizon_s=horizon_s)
    mpn = ps.max_per_node
    if eligible is None:
        eligible = filter_nodes(snap, Constraints(ps), ever=False).mask
    own_key = gang.key
    own_placed = sum(1 for p in _bound_by_gang(snap).get(own_key, ()) if dict(p.requests) == dict(ps.requests))
    need_pods = max(0, need_pods - own_placed)
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
        removable = [p for p in pods if p.owner_kind not in PERMANENT_OWNERS and p.gang != own_key]
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

    memo: dict = {_CENSORED: _running_ages(snap, now), _NOW: now} if history is not None else {}
    for g in groups:
        g.age = max(0.0, now - g.start)
        g.law = _law_for(history, model, g.queue, g.owner_kind,
                         None if g.limit_end is None else g.limit_end - g.start, memo)
        g.known = g.law.known
        blocking += g.pods
        known_blocking += g.pods if g.known else 0
    known_share = known_blocking / blocking if blocking else 1.0

    def median_of(gid: int) -> float:
        g = groups[gid]
        if g.median is None:
            g.median = g.law.median(g.age)
        return g.median

    # Order each busy node's groups by median end; compress to rising capacity levels.
    # pool: one entry per useful node: (chain of group ids, steps (prefix length, capacity),
    # capacity now, full capacity, unit key — None for a node with nothing to wait for).
    pool: list[tuple[tuple[int, ...], tuple[tuple[int, int], ...], int, int, tuple | None]] = [
        ((), (), c, c, None) for c in idle_caps]
    for row, gids, reqs, c0 in node_chain:
        order = sorted(range(len(gids)), key=lambda j: (median_of(gids[j]), gids[j])) if len(gids) > 1 else [0]
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
    pods_max = sum(full for _, _, _, full, _ in pool)   # once all work that can end has ended
    if pods_max < need_pods:
        if ever is None:
            ever = filter_nodes(snap, Constraints(ps), ever=True).mask
        needs = repair_needs(snap, ps, shape, eligible, ever)
        return WaitEstimate(None, None, None, known_share, True, blocking, need_pods, fits_now, horizon_s,
                            blocked_by="repair" if needs else "capacity", repair=needs, pods_max=pods_max)
    unknown = blocking > 0 and known_share < 0.5
    if unknown:
        return WaitEstimate(earliest_s, None, None, known_share, True, blocking, need_pods, fits_now, horizon_s)
    # Bound (issue #17 item 2): the DP below holds ``need − base`` + 1 states per time point,
    # so its cost must not follow a pod count the object merely states (a Kueue pod group's
    # total-count annotation, up to int32). More pods than the eligible nodes hold when every
    # pod that can leave has left never start on them, whatever the draws: the answer is the
    # one the band would reach (no p50/p90 within the horizon) without building it. Past this
    # line ``need_pods ≤ Σ full``, a figure of the nodes (each at most its allocatable pods).
    if need_pods > sum(full for _, _, _, full, _ in pool):
        return WaitEstimate(earliest_s, None, None, known_share, False, blocking, need_pods, fits_now, horizon_s, True)

    # Without gangs ahead or later arrivals: the exact band (DP over independent units).
    plain_base = sum(full for _, _, _, full, key in pool if key is None)
    plain_mult: dict[tuple, int] = {}
    for *_, key in pool:
        if key is not None:
            plain_mult[key] = plain_mult.get(key, 0) + 1
    plain_units = [_Unit(units[key].chain, units[key].steps, units[key].c0, m) for key, m in plain_mult.items()]

    def tail_at(ts: np.ndarray) -> np.ndarray:
        cdf = {gid: groups[gid].law.cdf(groups[gid].age, ts) for u in plain_units for gid in u.chain}
        return _tail(plain_units, [_levels(u, cdf, ts) for u in plain_units], plain_base, need_pods, len(ts))

    states = need_pods - plain_base + 1
    exact = states <= _DP_MAX_STATES and states * max(1, len(plain_units)) <= _DP_MAX_CELLS
    if exact:
        (p50, p90), _ = _search(tail_at, horizon_s, (0.5, 0.9))
    else:  # too many pods for the DP: the draws below give the band (0 is no floor)
        p50 = p90 = 0.0

    stream = None
    if history is not None and priority is not None:
        stream = _arrival_stream(snap, gang, history, model, now, priority, eligible, memo)
    if ahead or stream is not None or not exact:
        # With them: the sweep on joint draws; a gang ahead or an arrival never makes ours
        # start earlier, so the DP's answer is a floor.
        ahead_laws = [_law_for(history, model, a.queue, a.owner_kind, a.limit_s, memo) for a in ahead]
        starts = _simulate(groups, pool, ahead, ahead_laws, stream, priority, need_pods, horizon_s, model)
        q50, q90 = _quantiles(starts, horizon_s, (0.5, 0.9))
        p50 = None if p50 is None or q50 is None else max(p50, q50)
        p90 = None if p90 is None or q90 is None else max(p90, q90)
    if p50 is not None and p90 is not None:
        p90 = max(p90, p50)
    return WaitEstimate(earliest_s, p50, p90, known_share, False, blocking, need_pods, fits_now, horizon_s,
                        p50 is None or p90 is None)


@dataclass
class _Stream:
    """Later higher-priority arrivals: a Poisson stream of ``rate`` gangs per second, each a
    bootstrap draw of an observed one (``nodes`` whole nodes of our pool, run-time law
    ``laws[law_idx]``)."""

    rate: float
    nodes: np.ndarray
    law_idx: np.ndarray
    laws: list


def _arrival_stream(snap: ClusterSnapshot, gang: GangRequest, history: RuntimeHistory, model: LifetimeModel,
                    now: float, priority: int, eligible: np.ndarray, memo: dict) -> _Stream | None:
    """The stream of gangs of priority above ``priority`` asking for the main pod set's device,
    as observed over ``model.arrival_window_s`` (None when observed for less than
    ``model.min_arrival_span_s``, or none arrived). Each takes ⌈pods ÷ pods-per-empty-node⌉
    eligible whole nodes, as in ``gangs_ahead``; gangs that fit on none never compete."""
    span, arrivals = history.arrivals(now, model.arrival_window_s)
    if span < model.min_arrival_span_s or not arrivals:
        return None
    ps, _ = _main_pod_set(gang)
    devs = [r for r, v in ps.requests.items() if v and any(h in r for h in _GPU_HINTS)]
    alloc = snap.alloc[eligible]
    per_of: dict[tuple, int] = {}
    nodes: list[int] = []
    law_idx: list[int] = []
    laws: list[_Law] = []
    pos: dict[int, int] = {}
    for a in arrivals:
        if a.priority <= priority or a.gang == gang.key:
            continue
        if devs and not any(a.requests.get(r, 0) for r in devs):
            continue
        rk = tuple(sorted(a.requests.items()))
        per = per_of.get(rk)
        if per is None:
            pp = pods_per_node(alloc, shape_of(snap, a.requests))
            pp = pp[pp > 0]
            per = per_of[rk] = int(np.median(pp)) if len(pp) else 0
        if per == 0:
            continue
        law = _law_for(history, model, a.queue, a.owner_kind, a.limit_s, memo)
        j = pos.setdefault(id(law), len(laws))
        if j == len(laws):
            laws.append(law)
        nodes.append(-(-a.pods // per))
        law_idx.append(j)
    if not nodes:
        return None
    return _Stream(len(nodes) / span, np.array(nodes, dtype=np.int64), np.array(law_idx, dtype=np.int64), laws)


def _stratified(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniforms, one in each of n equal strata, in random order."""
    return (rng.permutation(n) + rng.random(n)) / n


def _quantiles(starts: np.ndarray, horizon_s: float, qs: tuple[float, ...]) -> list[float | None]:
    """Empirical quantiles (the smallest draw with F ≥ q); None beyond the horizon."""
    s = np.sort(starts)
    n = len(s)
    out: list[float | None] = []
    for q in qs:
        v = float(s[min(n - 1, max(0, math.ceil(q * n - 1e-9) - 1))])
        out.append(None if v > horizon_s else v)
    return out


def _simulate(groups: list[_Group], pool: list, ahead: Sequence[AheadGang], ahead_laws: list[_Law],
              stream: _Stream | None, priority: int | None, need: int, horizon_s: float,
              model: LifetimeModel) -> np.ndarray:
    """Our start (s from now, inf beyond the horizon) in each of S joint draws of every end.

    Per draw: running groups end at a draw of their conditional law; each pool node frees its
    capacity levels as its chain of groups ends and is *fully* free when the last one has; in
    queue order each gang ahead takes the ``nodes`` fully-free-earliest nodes (not before the
    gang before it started: FIFO) and gives them back a run time later (its law at age 0);
    ours starts when the capacity of the nodes not taken plus the nodes given back covers its
    pods. Later higher-priority arrivals (``stream``) come as a Poisson process and take nodes
    the same way, ahead of every not-yet-started gang they pass (ours, and gangs ahead whose
    priority is at most ours)."""
    P = len(pool)
    S = int(max(64, min(model.samples, (1 << 18) // max(1, P))))
    if P == 0:                                 # no eligible node can ever hold a pod of ours
        return np.full(S, math.inf)
    rng = np.random.default_rng(_SEED)
    ng = len(groups)
    G = np.zeros((S, ng + 1))                  # last column: "no group" (ends at 0)
    for j, g in enumerate(groups):
        G[:, j] = g.law.sample(g.age, _stratified(rng, S), _stratified(rng, S))

    lmax = max([len(ch) for ch, *_ in pool] + [1])
    chains = np.full((P, lmax), ng, dtype=np.int64)
    full = np.empty(P, dtype=np.int64)
    last_pos = np.full(P, -1, dtype=np.int64)
    ev_k: list[int] = []
    ev_pos: list[int] = []
    ev_inc: list[int] = []
    for k, (chain, steps, c0, f, _) in enumerate(pool):
        chains[k, :len(chain)] = chain
        full[k] = f
        if c0:
            ev_k.append(k)
            ev_pos.append(-1)
            ev_inc.append(c0)
        level = c0
        for length, c in steps:
            ev_k.append(k)
            ev_pos.append(length - 1)
            ev_inc.append(c - level)
            level = c
        if steps:
            last_pos[k] = steps[-1][0] - 1
    ends = np.maximum.accumulate(G[:, chains], axis=2)      # (S, P, lmax): chain prefix ends
    ek = np.array(ev_k, dtype=np.int64)
    ep = np.array(ev_pos, dtype=np.int64)
    inc = np.concatenate([np.array(ev_inc, dtype=np.int64), full])
    times = np.where(ep >= 0, ends[:, ek, np.maximum(ep, 0)], 0.0)                       # (S, E)
    avail = np.where(last_pos >= 0, ends[:, np.arange(P), np.maximum(last_pos, 0)], 0.0)  # (S, P)
    del ends

    ar = np.arange(S)
    cols = np.broadcast_to(np.arange(P), (S, P))
    touched = np.zeros((S, P), dtype=bool)
    prev = np.zeros(S)
    result = np.full(S, math.inf)
    # The common case — every node frees all it can hold at once, and all hold the same number
    # of our pods (whole-node pods on one node type) — needs no node identities: each draw's
    # free times are kept sorted, a reservation takes the first ``n`` and puts their return
    # time back, and ours starts at the ⌈need ÷ c⌉-th.
    uniform = P > 0 and len(set(full.tolist())) == 1 and all(
        (not steps and c0 == f) or (c0 == 0 and len(steps) == 1) for _, steps, c0, f, _ in pool)
    if uniform:
        avail = np.sort(avail, axis=1)                 # a fresh array: sorted in place below
        need_nodes = -(-need // int(full[0]))

    def kth_free(n: int) -> np.ndarray:
        """When the n-th fully free node is free (per draw); n ≤ P."""
        return avail[:, n - 1] if uniform else np.partition(avail, n - 1, axis=1)[:, n - 1]

    def reserve(sizes: np.ndarray, start_min: np.ndarray, runs: np.ndarray, mask: np.ndarray) -> None:
        """Draws in ``mask``: a gang of ``sizes`` whole nodes starts at the later of
        ``start_min`` and its nodes being free, and holds them for ``runs``."""
        nonlocal avail, touched, prev
        fit = sizes <= P                       # a gang larger than the pool does not take it
        n = np.clip(sizes, 1, P)
        if uniform:
            kth = avail[ar, n - 1]
        else:
            order = np.argsort(avail, axis=1, kind="stable")
            kth = np.take_along_axis(avail, order, axis=1)[ar, n - 1]
        st = np.where(fit, np.maximum(start_min, kth), start_min)
        rows = mask & fit
        back = st + runs
        if uniform:
            # The first n free times are taken; their return time goes back in, rows re-sorted.
            n0 = int(n[0])
            if rows.all() and (n == n0).all():
                avail[:, :n0] = back[:, None]
            else:
                avail = np.where((cols < n[:, None]) & rows[:, None], back[:, None], avail)
            avail.sort(axis=1)
        else:
            rank = np.empty_like(order)
            np.put_along_axis(rank, order, cols, axis=1)
            sel = (rank < n[:, None]) & rows[:, None]
            avail = np.where(sel, back[:, None], avail)
            touched |= sel
        prev = np.where(mask, st, prev)

    def our_start() -> np.ndarray:
        if uniform:
            t = avail[:, need_nodes - 1] if need_nodes <= P else np.full(S, math.inf)
            return np.maximum(t, prev)
        t = np.concatenate([np.where(touched[:, ek], math.inf, times), np.where(touched, avail, math.inf)], axis=1)
        order = np.argsort(t, axis=1, kind="stable")
        ok = np.cumsum(inc[order], axis=1) >= need
        idx = ok.argmax(axis=1)
        first = np.take_along_axis(t, order[ar, idx][:, None], axis=1)[:, 0]
        return np.maximum(np.where(ok[ar, idx], first, math.inf), prev)

    tau = np.empty((S, 0))
    j_nodes = np.empty((S, 0), dtype=np.int64)
    j_runs = np.empty((S, 0))

    def more_arrivals(n: int = 16) -> None:
        nonlocal tau, j_nodes, j_runs
        last = tau[:, -1] if tau.shape[1] else np.zeros(S)
        t_new = last[:, None] + np.cumsum(rng.exponential(1.0 / stream.rate, size=(S, n)), axis=1)
        pick = rng.integers(0, len(stream.nodes), size=(S, n))
        li = stream.law_idx[pick]
        r_new = np.empty((S, n))
        for j, law in enumerate(stream.laws):
            m = li == j
            c = int(m.sum())
            if c:
                r_new[m] = law.sample(0.0, rng.random(c), rng.random(c))
        tau = np.concatenate([tau, t_new], axis=1)
        j_nodes = np.concatenate([j_nodes, stream.nodes[pick]], axis=1)
        j_runs = np.concatenate([j_runs, r_new], axis=1)

    items = [(a.nodes, law.sample(0.0, _stratified(rng, S), _stratified(rng, S)),
              stream is not None and a.priority is not None and priority is not None and a.priority <= priority)
             for a, law in zip(ahead, ahead_laws)]
    items.append((0, None, stream is not None))
    done = np.zeros(S, dtype=bool)             # our start is past the horizon already
    nxt = np.zeros(S, dtype=np.int64)          # next later arrival, per draw
    for n_a, runs_a, passable in items:
        pending = ~done
        while pending.any():
            if runs_a is None:
                sc = our_start()
            elif n_a <= P:
                sc = np.maximum(prev, kth_free(n_a))
            else:
                sc = prev.copy()
            over = pending & (sc > horizon_s)
            done |= over
            pending &= ~over
            jump = np.zeros(S, dtype=bool)
            if passable and pending.any():
                while (pending & (nxt >= tau.shape[1])).any():
                    more_arrivals()
                k = np.minimum(nxt, tau.shape[1] - 1)
                tk = tau[ar, k]
                jump = pending & (tk < sc)
                if jump.any():
                    reserve(j_nodes[ar, k], np.maximum(prev, tk), j_runs[ar, k], jump)
                    nxt = nxt + jump
            go = pending & ~jump
            if go.any():
                if runs_a is None:
                    result = np.where(go, sc, result)
                else:
                    reserve(np.full(S, n_a, dtype=np.int64), prev, runs_a, go)
            pending &= ~go
    return result


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

    ``priority`` defaults to ``gang_priority(snap, gang)``. Each gang reserves ⌈pods ÷ pods-per-empty-node⌉ whole nodes among
    ``eligible`` (default: the main pod set's filters); its limit is the largest limit of its
    pods (None when any has none). Earlier same-priority gangs of the same queue are not
    included: pending pods carry no creation time in the snapshot.
    """
    ps, _ = _main_pod_set(gang)
    if ps is None:
        return ()
    if priority is None:
        priority = gang_priority(snap, gang)
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
        prio = max(p.priority for p in pods)
        out.append((-prio, key, AheadGang(key, nodes, lim, pods[0].queue, pods[0].owner_kind, prio)))
    out.sort(key=lambda x: (x[0], x[1]))
    return tuple(a for *_, a in out)


def gang_priority(snap: ClusterSnapshot, gang: GangRequest) -> int:
    """The priority of ``gang``: the value of its ``priority_class`` in ``snap.priority_classes``
    (0 when unset or unknown) — what the scheduler orders pending gangs by."""
    return int(snap.priority_classes.get(gang.priority_class or "", 0))
