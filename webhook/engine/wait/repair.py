"""What must be repaired before a blocked gang can start: cordons, NotReady nodes, taints,
device plugins.

Owns ``repair_needs``: when running work ending can never free enough on the nodes the gang
may use now, the per-problem count of nodes that would take a pod of its shape once
repaired. Wording of the repairs is ``result.repair_phrase``'s; the decision that a gang is
blocked is ``estimate``'s.

Shapes: masks are bool arrays [nodes] over ``snap.nodes``. The cordon and NotReady taint
keys are the well-known ones (k8s.io/api/core/v1 well_known_taints.go, as model.py cites).
"""

from __future__ import annotations

import numpy as np

from ..fit import Shape, pods_per_node
from ..model import TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE, PodSet
from ..snapshot import ClusterSnapshot

__all__ = ["repair_needs"]

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
