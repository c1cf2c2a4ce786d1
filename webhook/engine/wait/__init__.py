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
  end being a random variable (``laws.Law``):

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
larger than the eligible nodes could ever hold is answered at once (``blocked_by``: what it
waits for instead); the DP runs only while units × (pods still needed + 1) and its states stay
under fixed budgets (``band._DP_MAX_CELLS``, ``band._DP_MAX_STATES``), the joint draws (cost:
draws × nodes) give the band beyond them.

The package, one concern per module (each module's doc says what it owns):

* ``estimate`` — ``estimate_wait``, a short driver over the named steps below;
* ``inputs`` — the main pod set, a pod's limit, ``PERMANENT_OWNERS``, the default horizon;
* ``history`` — ``RuntimeHistory`` (finished runs, gang arrivals), ``GangArrival``;
* ``laws`` — ``LifetimeModel`` (the knobs and the prior), ``DEFAULT_MODEL``, ``Law``;
* ``learn`` — a job's law from the history: weighted Kaplan–Meier, kernels, censoring;
* ``pool`` — the nodes waited on, the groups holding them, their chains and units;
* ``sweep`` — the limit-based earliest start (Slurm's reservation sweep);
* ``band`` — the exact band (truncated DP, k-ary search) and the draws' quantiles;
* ``simulate`` — the sweep on joint draws with gangs ahead and later arrivals;
* ``ahead`` — ``AheadGang``, ``gangs_ahead``, ``gang_priority``;
* ``repair`` — what a blocked gang waits for (``repair_needs``);
* ``provisioning`` — node provisioning time for a gang that needs new nodes (#16:
  ``provisioning_estimate``, ``with_provisioning``; import it from the module);
* ``result`` — ``WaitEstimate``, its text and JSON form, ``format_duration``.

This module is the package's public face: import from ``webhook.engine.wait`` (``__all__``;
``DEFAULT_HORIZON_S`` and ``repair_needs`` are importable here too, as before the split).
"""

from __future__ import annotations

from .ahead import AheadGang, gang_priority, gangs_ahead
from .estimate import estimate_wait
from .history import GangArrival, RuntimeHistory
from .inputs import DEFAULT_HORIZON_S, PERMANENT_OWNERS  # noqa: F401  (DEFAULT_HORIZON_S: public, unlisted)
from .laws import DEFAULT_MODEL, LifetimeModel
from .repair import repair_needs  # noqa: F401  (public, unlisted, as before the split)
from .result import WaitEstimate, format_duration

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
