"""Queue quota: Kueue ClusterQueues and Volcano Queues (FIELD-NOTES §3), one module per system.

The package's public face; what each module owns:

* ``common`` — what the quota layer returns (``QuotaResult``) and the severities it uses;
* ``kueue`` — Kueue's cohort tree of resource nodes and its limits (``CohortTree``,
  ``kueue_limits``; kueue pkg/cache/scheduler resource_node.go, cohort.go, clusterqueue.go);
* ``kueue_admit`` — a gang against its ClusterQueue (``evaluate_kueue``: flavor candidates,
  assignment ever and now; kueue pkg/scheduler/flavorassigner) and the quota-versus-hardware
  lint (``lint_quota_vs_capacity``);
* ``volcano`` — Volcano's capability and deserved share (``evaluate_volcano``; the proportion
  plugin's water-filling and the capacity plugin's spec.deserved, volcano
  pkg/scheduler/plugins/proportion and capacity).

A later queue system (KAI's queues) gets a module of its own here and returns a ``QuotaResult``
too. Pure: no I/O; the engine's ``evaluate`` decides which system a gang uses.
"""

from __future__ import annotations

from .common import INF, QuotaResult
from .kueue import CohortTree, FlavorLimit, Why, kueue_limits
from .kueue_admit import MAX_FLAVOR_COMBINATIONS, evaluate_kueue, lint_quota_vs_capacity
from .volcano import ClusterUsage, QueueDemand, evaluate_volcano, proportion_deserved, queue_demands

__all__ = ["ClusterUsage", "FlavorLimit", "QuotaResult", "evaluate_kueue", "evaluate_volcano", "INF", "CohortTree", "Why", "kueue_limits",
           "MAX_FLAVOR_COMBINATIONS", "QueueDemand", "proportion_deserved", "queue_demands", "lint_quota_vs_capacity"]
