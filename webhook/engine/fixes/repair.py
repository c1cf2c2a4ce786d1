"""Repair fixes: nodes that could host the gang's main pods once uncordoned, Ready again or with
their devices advertised (``broken_nodes``, ``_repair_fix``), and the commands that repair them
(``_repair_parts``).

Owns the zero-displacement repair fix; a repair followed by evictions is built by
``consolidation``. Counts are pods of the main shape; node sets are snapshot node indices.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..fit import pods_per_node
from ..model import BoundPod
from ..snapshot import ClusterSnapshot
from .commands import _q, _qs, _sample
from .ranking import Fix
from .view import GangView

__all__ = ["broken_nodes"]


def broken_nodes(snap: ClusterSnapshot) -> dict[str, list[int]]:
    """Repairable nodes by problem: ``cordoned``, ``not_ready``, ``devices`` (device allocatable
    below what the node has installed: capacity, ``nvidia.com/gpu.count`` or the MIG layout)."""
    dev = [snap.col[r] for r in snap.resources if snap.device_cols[snap.col[r]]]
    gap = (snap.ever_alloc[:, dev] > snap.alloc[:, dev]).any(axis=1) if dev else np.zeros(len(snap.nodes), dtype=bool)
    return {
        "cordoned": [i for i, n in enumerate(snap.nodes) if n.unschedulable],
        "not_ready": [i for i, n in enumerate(snap.nodes) if n.ready is False],
        "devices": [int(i) for i in np.flatnonzero(gap)],
    }


def _plugin_pods_on(snap: ClusterSnapshot, node: str) -> list[BoundPod]:
    """Device-plugin pods bound to ``node`` (a pod whose name holds "device-plugin")."""
    return [p for p in snap.pods_by_node.get(node, ()) if "device-plugin" in p.name]


def _repair_parts(snap: ClusterSnapshot, by: Mapping[str, list[str]]) -> tuple[list[str], list[str], list[str]]:
    """(what the repair is, per problem; commands that repair devices and NotReady nodes;
    the cordoned node names to uncordon) for ``by``: problem → node names (``broken_nodes``
    keys). Every node is in a command: one per device-plugin restart, one ``describe`` for all
    NotReady nodes (their kubelet is repaired on the node itself)."""
    parts, cmds = [], []
    if by["devices"]:
        parts.append(f"{len(by['devices'])} with unhealthy or unadvertised devices ({_sample(by['devices'])})")
        for n in by["devices"]:
            pods = _plugin_pods_on(snap, n)
            if pods:
                for p in pods:
                    cmds.append(f"kubectl -n {_q(p.namespace)} delete pod {_q(p.name)}   # restart the device plugin on {n}")
            else:  # the GPU operator's DaemonSet label, in whichever namespace it runs
                cmds.append(f"kubectl delete pod -A -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={_q(n)}"
                            "   # restart its device plugin")
    if by["not_ready"]:
        parts.append(f"{len(by['not_ready'])} NotReady ({_sample(by['not_ready'])})")
        cmds.append("kubectl describe node " + _qs(by["not_ready"])
                    + "   # NotReady: repair kubelet/containerd on each node; see its conditions")
    if by["cordoned"]:
        parts.append(f"{len(by['cordoned'])} cordoned ({_sample(by['cordoned'])})")
    return parts, cmds, list(by["cordoned"])

def _repair_fix(snap, gang, view: GangView, options) -> tuple[Fix | None, list[str], np.ndarray]:
    """Nodes that could host one of the main pods once uncordoned / Ready / devices healthy.
    Its commands name every such node (``_repair_parts``)."""
    main = view.main
    ps, sh = view.pod_sets[main], view.shapes[main]
    empty = np.zeros(len(snap.nodes), dtype=bool)
    if sh.missing:
        return None, [], empty
    repaired_free = snap.ever_alloc - snap.used
    k_rep = np.where(view.ever_masks[main], pods_per_node(repaired_free, sh, ps.max_per_node), 0)
    broken = broken_nodes(snap)
    is_broken = np.zeros(len(snap.nodes), dtype=bool)
    for idx in broken.values():
        is_broken[idx] = True
    gain_nodes = np.flatnonzero(is_broken & (k_rep > view.k_now[main]))
    if len(gain_nodes) == 0:
        return None, [], empty
    gain = int((k_rep[gain_nodes] - view.k_now[main][gain_nodes]).sum())
    sets = {k: set(v) for k, v in broken.items()}
    names = [snap.nodes[int(i)].name for i in gain_nodes]
    by = {k: [snap.nodes[int(i)].name for i in gain_nodes if int(i) in sets[k]] for k in sets}
    parts, cmds, cordoned = _repair_parts(snap, by)
    if cordoned:
        cmds.append("kubectl uncordon " + _qs(cordoned) + "   # once their maintenance is over")
    mask = empty.copy()
    mask[gain_nodes] = True
    enough = gain >= view.deficit
    fix = Fix(
        action="repair",
        summary=f"repair {len(gain_nodes)} node(s) — " + "; ".join(parts) + f": {gain} more pod(s) fit"
                + ("" if enough else f", {view.deficit - gain} still short"),
        frees_nodes=len(gain_nodes), sufficient=enough, nodes=names, commands=cmds)
    return fix, names, mask
