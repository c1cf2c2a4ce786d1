"""scheduler-plugins coscheduling PodGroup (scheduling.x-k8s.io/v1alpha1) → ``GangRequest``.

The coscheduling plugin holds pods of a group at Permit until ``spec.minMember`` of them can be
placed; ``spec.minResources`` (optional) is the total the group needs, checked at PreFilter.
There is no pod template, so the members are modelled as ``minMember`` equal pods sharing
``minResources`` (``common.pod_group_pod_set``). The group has no queue.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.model import GangRequest
from .common import build_gang, mapping, pod_group_pod_set

__all__ = ["adapt_coscheduling_podgroup"]


def adapt_coscheduling_podgroup(obj: Mapping) -> GangRequest:
    """A coscheduling PodGroup: one pod set ``"members"``, count = minMember, per-pod requests =
    minResources / minMember rounded up (cpu millicores, memory bytes, counts).

    Example: minMember 4, minResources nvidia.com/gpu 32 → 4 pods × 8 GPUs.

    Raises:
        AdapterError: missing spec, minMember not an integer ≥ 0, a bad quantity.
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    return build_gang(obj, [pod_group_pod_set(spec)])
