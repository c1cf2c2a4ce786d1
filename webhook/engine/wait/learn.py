"""Learning a job's run-time law from what the cluster did: Kaplan–Meier over kernels.

Owns ``law_for``: the ``Law`` of a job of (queue, owner kind) under a limit, from the
finished runs ``RuntimeHistory`` kept and the runs still going in the snapshot
(``running_ages``), which are right-censored observations of the same cohort. With a limit
L: the run/limit ratios of finished runs with a limit, weighted towards similar limits
(``LifetimeModel.limit_width``), scaled to L, runs that reached their limit a point mass at
it. Without one: the run times of finished runs without one (else all runs). Both are
smoothed by a logistic kernel in log-time of Silverman's bandwidth (``bandwidth``). With too
little history a known limit falls back to ``LifetimeModel``'s prior, else the end is
unknown. Not here: the law's forms and arithmetic (``laws``), the record itself (``history``).

Sources: the product-limit (Kaplan–Meier) estimator, here with weights (``kaplan_meier``);
Efron's redistribution of the mass left after the last event to the censored ages beyond
it; Silverman's rule-of-thumb bandwidth (``bandwidth``).

Pure: no clock (``now`` is the caller's, epoch seconds), no I/O. Units: seconds.
"""

from __future__ import annotations

import math

import numpy as np

from ..snapshot import ClusterSnapshot
from .history import RuntimeHistory
from .inputs import PERMANENT_OWNERS, limit_of
from .laws import UNKNOWN, Law, LifetimeModel

__all__ = ["CENSORED", "NOW", "bandwidth", "kaplan_meier", "running_ages", "law_memo", "law_for"]

#: A run within 0.1 % of its limit reached it (was killed at it, or was sized to it).
_AT_LIMIT = 0.999
#: Logistic scale with the standard deviation of a Gaussian kernel of bandwidth 1.
_LOGISTIC = math.sqrt(3.0) / math.pi
#: Smallest kernel bandwidth in log-time (a factor of ~1.05).
_MIN_BANDWIDTH = 0.05
#: Keys of a law memo (``law_memo``) beside the laws: the running gangs, and the time.
CENSORED = "censored"
NOW = "now"


def bandwidth(logs: np.ndarray) -> float:
    """Silverman's rule of thumb on log-times: 0.9 · min(sd, IQR/1.34) · n^−1/5."""
    n = len(logs)
    if n < 2:
        return 0.5
    sd = float(np.std(logs))
    q75, q25 = np.percentile(logs, [75, 25])
    iqr = float(q75 - q25) / 1.34
    spread = min(sd, iqr) if iqr > 0 else sd
    return max(0.9 * spread * n ** -0.2, _MIN_BANDWIDTH)


def kaplan_meier(ev: np.ndarray, w_ev: np.ndarray, cens: np.ndarray, w_cens: np.ndarray) -> tuple[np.ndarray, float]:
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


def running_ages(snap: ClusterSnapshot, now: float) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
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
            lim = limit_of(p)
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


def law_memo(snap: ClusterSnapshot, now: float, history: RuntimeHistory | None) -> dict:
    """A fresh memo for ``law_for`` for one estimate: with a history, the running gangs
    (``memo[CENSORED]``, ``running_ages``) and the time (``memo[NOW]``, epoch s); else empty
    (no censoring without runs to censor)."""
    return {CENSORED: running_ages(snap, now), NOW: now} if history is not None else {}


def law_for(history: RuntimeHistory | None, model: LifetimeModel, queue: str, owner_kind: str,
            limit_s: float | None, memo: dict) -> Law:
    """The law of a job of (queue, owner kind) under limit ``limit_s`` (None: none) — see
    ``Law`` and the module doc. Memoised in ``memo`` (``law_memo``) for one estimate.

    ``memo[CENSORED]`` (``running_ages``, at ``memo[NOW]``) adds the runs still going as
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
        cohort = _cohort(history, queue, owner_kind, memo)
        law = _limited_law(cohort, limit_s, model) if limit_s is not None else _unlimited_law(cohort, model)
    if law is None:
        law = Law("prior", cap=float(limit_s), model=model) if limit_s is not None else UNKNOWN
    memo[key] = law
    return law


def _cohort(history: RuntimeHistory, queue: str, owner_kind: str, memo: dict) -> tuple[np.ndarray, ...]:
    """One cohort of a key, as six arrays: the finished runs that started since the history
    is complete — run times (s), limits (s, NaN: none), ``has`` (a limit) — and the running
    gangs that started since — ages (s), limits (s, NaN: none), ``c_has`` (a limit)."""
    runs, lims, fins = history.runs(queue, owner_kind)
    since = history.complete_from(queue, owner_kind)
    cohort = ~(fins - runs < since - 1.0)          # started since (NaN: unknown, kept)
    runs, lims = runs[cohort], lims[cohort]
    has = np.isfinite(lims)
    c_age, c_lim = memo.get(CENSORED, {}).get((queue, owner_kind), (np.empty(0), np.empty(0)))
    if len(c_age) and math.isfinite(since):
        keep = c_age <= memo.get(NOW, math.inf) - since + 1.0
        c_age, c_lim = c_age[keep], c_lim[keep]
    c_has = np.isfinite(c_lim)
    return runs, lims, has, c_age, c_lim, c_has


def _limited_law(cohort: tuple[np.ndarray, ...], limit_s: float, model: LifetimeModel) -> Law | None:
    """The learned law under a limit of ``limit_s`` seconds: the run/limit ratios of the
    cohort's runs with a limit (weights exp(−|ln(L_i / L)| / ``limit_width``)), the running
    ones censored, scaled to L; the runs at their limit, and the mass still running after
    every end, a point mass at L. None with fewer than ``model.min_history`` such runs."""
    runs, lims, has, c_age, c_lim, c_has = cohort
    if int(has.sum()) < model.min_history:
        return None
    r, lim = runs[has], lims[has]
    ratio = np.minimum(r / lim, 1.0)
    at_limit = ratio >= _AT_LIMIT
    near = lambda x: np.exp(-np.abs(np.log(x / limit_s)) / model.limit_width)  # noqa: E731
    cl = c_lim[c_has]
    mass, left = kaplan_meier(ratio, near(lim), np.minimum(c_age[c_has] / cl, 1.0), near(cl))
    lr = np.log(ratio[~at_limit])
    pm = float(mass[at_limit].sum()) + left   # still running after every end: by L
    with np.errstate(divide="ignore"):
        return Law("mix", cap=float(limit_s), c=lr + math.log(limit_s), logw=np.log(mass[~at_limit]),
                   s=bandwidth(lr) * model.bandwidth_scale * _LOGISTIC,
                   log_pm=math.log(pm) if pm > 0 else -math.inf)


def _unlimited_law(cohort: tuple[np.ndarray, ...], model: LifetimeModel) -> Law | None:
    """The learned law of a job without a limit: the run times of the cohort's runs without
    one (all its runs when fewer than ``model.min_history`` have none), the running ones
    censored; the mass still running after every end goes to their ages beyond the last end
    (Efron). None with fewer than ``model.min_history`` runs."""
    runs, _, has, c_age, _, c_has = cohort
    own = int((~has).sum()) >= model.min_history
    use = runs[~has] if own else runs
    if len(use) < model.min_history:
        return None
    cens = c_age[~c_has] if own else c_age
    cens = cens[cens > 0]
    mass, left = kaplan_meier(use, np.ones(len(use)), cens, np.ones(len(cens)))
    c = use
    if left > 0:   # still running after every end: their ages carry the rest (Efron)
        tail = cens[cens >= use.max()]
        c = np.concatenate([use, tail])
        mass = np.concatenate([mass, np.full(len(tail), left / len(tail))])
    lx = np.log(c)
    with np.errstate(divide="ignore"):
        return Law("mix", c=lx, logw=np.log(mass), s=bandwidth(np.log(use)) * model.bandwidth_scale * _LOGISTIC)
