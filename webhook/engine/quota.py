"""Queue quota: Kueue ClusterQueues and Volcano Queues (FIELD-NOTES §3).

The rules live in ``quota_kueue`` (the cohort tree of resource nodes, kueue
pkg/cache/scheduler/resource_node.go and pkg/scheduler/flavorassigner) and ``quota_volcano``
(capability; the proportion plugin's water-filling and the capacity plugin's spec.deserved,
volcano pkg/scheduler/plugins/proportion and capacity); this module keeps their public names
importable and holds the quota-versus-hardware lint.
"""

from __future__ import annotations

from .model import ClusterQueue, Finding
from .quota_common import INF, INFO, QuotaResult
from .quota_kueue import MAX_FLAVOR_COMBINATIONS, CohortTree, FlavorLimit, Why, evaluate_kueue, kueue_limits
from .quota_volcano import QueueDemand, evaluate_volcano, proportion_deserved, queue_demands

__all__ = ["FlavorLimit", "QuotaResult", "evaluate_kueue", "evaluate_volcano", "INF", "CohortTree", "Why", "kueue_limits",
           "MAX_FLAVOR_COMBINATIONS", "QueueDemand", "proportion_deserved", "queue_demands", "lint_quota_vs_capacity"]


def lint_quota_vs_capacity(cq: ClusterQueue, flavor: str, resource: str, nominal: int, physical: int) -> Finding | None:
    """QuotaExceedsCapacity (Info): a ClusterQueue promises more of a device than its flavor's nodes have."""
    if nominal > physical:
        return Finding("QuotaExceedsCapacity", INFO,
            f"ClusterQueue {cq.name} quota {nominal} {resource} in flavor {flavor} > {physical} on the nodes that flavor selects",
            {"cluster_queue": cq.name, "flavor": flavor, "resource": resource, "nominal": nominal, "physical": physical})
    return None
