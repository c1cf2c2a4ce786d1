"""What the wait estimator reads off the gang and its pods: shared by the other modules.

Owns: the owner kinds that never end (``PERMANENT_OWNERS``), the default horizon, the gang's
*main pod set* (the one whose pods are waited for), a pod's declared run-time bound, the
device resources a pod set asks for, and the pods of a shape the median node holds. Not here:
the laws (``laws``, ``learn``), the pool of nodes (``pool``), gangs ahead (``ahead``).

Units: seconds; resource amounts in scheduler units (millicores, bytes, device counts).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..fit import pods_per_node, shape_of
from ..model import BoundPod, GangRequest, PodSet
from ..snapshot import ClusterSnapshot

__all__ = ["PERMANENT_OWNERS", "DEFAULT_HORIZON_S", "GPU_HINTS", "main_pod_set", "device_resources",
           "limit_of", "bound_by_gang", "median_per_node"]

#: Owner kinds whose pods never end on their own (DaemonSet pods, static mirror pods): the
#: capacity they hold is not coming back, so they never "block" in the wait sense.
PERMANENT_OWNERS = frozenset({"DaemonSet", "Node"})
#: Default search horizon: a wait beyond it is reported as "more than" the horizon.
DEFAULT_HORIZON_S = 30 * 86400.0
#: Substrings of a resource name that make it a device (GPU) request.
GPU_HINTS = ("nvidia.com/", "amd.com/gpu", "gpu")


def main_pod_set(gang: GangRequest) -> tuple[PodSet | None, int]:
    """The pod set with the largest device request (then count, cpu), and the gang's pods of
    exactly its shape (master + workers of one shape count together); (None, 0) when the gang
    has no pods."""
    sets = [ps for ps in gang.pod_sets if ps.count > 0]
    if not sets:
        return None, 0

    def dev(ps: PodSet) -> int:
        return max((v for r, v in ps.requests.items() if any(h in r for h in GPU_HINTS)), default=0)

    main = max(sets, key=lambda ps: (dev(ps), ps.count, ps.requests.get("cpu", 0)))
    same = sum(ps.count for ps in sets if dict(ps.requests) == dict(main.requests))
    return main, same


def device_resources(ps: PodSet) -> list[str]:
    """The device (GPU) resources ``ps`` asks a non-zero amount of, in its request order."""
    return [r for r, v in ps.requests.items() if v and any(h in r for h in GPU_HINTS)]


def limit_of(p: BoundPod) -> float | None:
    """The pod's declared bound on its run time in seconds from its start: ``runtime_limit_s``,
    else ``deadline_s`` (activeDeadlineSeconds); None when it has neither."""
    return p.runtime_limit_s if p.runtime_limit_s is not None else p.deadline_s


def median_per_node(snap: ClusterSnapshot, alloc: np.ndarray, requests: Mapping[str, int]) -> int:
    """Pods of one pod's ``requests`` that the median empty node of ``alloc`` (rows of
    ``snap.alloc``) holds, among nodes that hold at least one; 0 when none does. Whole-node
    reservations take ⌈pods ÷ this⌉ nodes."""
    per = pods_per_node(alloc, shape_of(snap, requests))
    per = per[per > 0]
    return int(np.median(per)) if len(per) else 0


def bound_by_gang(snap: ClusterSnapshot) -> Mapping[str, list[BoundPod]]:
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
