"""Lifetime laws: how long a job runs in total, asked about at an age (seconds).

Owns ``LifetimeModel`` (the knobs, and the log-uniform prior under a limit: a job of age a
with limit L has median total √(a·L), FIELD-NOTES §5), ``DEFAULT_MODEL``, and ``Law``, the
three forms a job's law takes — a mixture of logistic kernels in log-time with a point mass
at the limit (learned), the prior, or unknown — with its conditional CDF, inverse-CDF draws
and median given T > age. Learning a mixture from ``RuntimeHistory`` (Kaplan–Meier,
Silverman's bandwidth) is ``learn``'s, not this module's.

Pure numpy; no clock, no I/O. Units: seconds throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["LifetimeModel", "DEFAULT_MODEL", "Law", "UNKNOWN"]


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


class Law:
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
        ts = MEDIAN_GRID
        c = self.cdf(age, ts)
        j = int(np.searchsorted(c, 0.5))
        if j >= len(ts):
            return math.inf
        if j == 0:
            return float(ts[0])
        lo, hi = c[j - 1], c[j]
        f = 0.0 if hi <= lo else (0.5 - lo) / (hi - lo)
        return float(ts[j - 1] * (ts[j] / ts[j - 1]) ** f)


UNKNOWN = Law("unknown")
MEDIAN_GRID = np.geomspace(1.0, 1e9, 181)
