"""What the cluster did lately: finished runs per (queue, owner kind) and gang arrivals.

Owns ``RuntimeHistory`` (the bounded, thread-safe record the cache feeds from its watches)
and ``GangArrival`` (one gang submitted in a window). It only *keeps* what happened: turning
runs into a run-time law (Kaplan–Meier, kernels) is ``learn``'s; the arrival stream is
``simulate``'s.

Pure: no clock (every time is the caller's, epoch seconds), no I/O. Units: seconds; requests
in scheduler units.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["GangArrival", "RuntimeHistory"]


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
        return self._derived(self._sorted, queue, owner_kind, lambda: np.empty(0), _sorted_runs)

    def runs(self, queue: str, owner_kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kept runs of a key as three read-only arrays of equal length, in no particular
        order: run times (s), their limits (s, NaN for a run without one) and finish times
        (epoch s, NaN when not given)."""
        return self._derived(self._triples, queue, owner_kind, lambda: (np.empty(0), np.empty(0), np.empty(0)),
                             _run_triples)

    def _derived(self, cache: dict, queue: str, owner_kind: str, empty, derive):
        """What ``derive(ring, per_key)`` makes of a key's ring, kept in ``cache`` until the key
        is fed again (``add`` drops it); ``empty()`` for a key with no ring. Under the lock."""
        key = (queue or "", owner_kind or "")
        with self._lock:
            hit = cache.get(key)
            if hit is not None:
                return hit
            ring = self._rings.get(key)
            if ring is None:
                return empty()
            out = cache[key] = derive(ring, self.per_key)
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


def _sorted_runs(ring: list, per_key: int) -> np.ndarray:
    """A ring's kept run times, sorted ascending, read-only (``RuntimeHistory.samples``)."""
    out = np.sort(ring[0][: min(ring[3], per_key)])
    out.setflags(write=False)
    return out


def _run_triples(ring: list, per_key: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ring's kept (run times, limits, finishes), copied, read-only (``RuntimeHistory.runs``)."""
    n = min(ring[3], per_key)
    out = tuple(a[:n].copy() for a in ring[:3])
    for a in out:
        a.setflags(write=False)
    return out
