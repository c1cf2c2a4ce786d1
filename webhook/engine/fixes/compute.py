"""``compute_fixes``: every applicable fix for a gang that Waits, ranked (``rank_fixes``).

Zero-displacement fixes first (repair broken nodes, release orphan reservations, borrow or
raise quota, change a selector, relax a required topology, shrink the gang, wait, widen a NodePool or tolerate its taint,
raise an autoscaler's limit, add nodes), then fixes that displace running work
(``consolidation``). Owns which fixes are tried and the four simple ones built
here (change-selector, shrink, wait, add-nodes); the others come from their modules.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..decision import NEVER_FITS, Decision
from ..filters import Constraints, filter_nodes
from ..fit import pods_per_node
from ..model import GangRequest, PodSet
from ..snapshot import ClusterSnapshot
from .commands import _q, _resource_of
from .consolidation import _displacing_fix
from .quota_fixes import _quota_fixes
from .ranking import Fix, rank_fixes
from .repair import _repair_fix
from .scale_fixes import SCALE_CODES, scale_fixes
from .topology_fixes import relax_fix, topology_fixes
from .units import SYSTEM_PRIORITY
from .view import GangView, gang_view, is_gpu_name

__all__ = ["compute_fixes"]


_LASTING_OWNERS = frozenset({"DaemonSet", "Node"})


def _lasting_free(snap: ClusterSnapshot, view: GangView) -> np.ndarray:
    """Free resources [nodes × resources] of each node the main pod set may use now once every
    pod on it that can end has ended: allocatable minus the gang's own bound pods (they wait
    for their siblings and end only with the gang), DaemonSet/mirror pods and pods at system
    priority. Scheduler units; other nodes' rows are their allocatable (not read)."""
    out = snap.alloc.copy()
    pods_col = snap.col.get("pods")
    own = {(p.namespace, p.name) for p in view.own_bound}
    for i in np.flatnonzero(view.now_masks[view.main]).tolist():
        for p in snap.pods_by_node.get(snap.nodes[i].name, ()):
            if (p.owner_kind in _LASTING_OWNERS or p.priority >= SYSTEM_PRIORITY
                    or (p.namespace, p.name) in own):
                for r, v in p.requests.items():
                    c = snap.col.get(r)
                    if c is not None:
                        out[i, c] -= v
                if pods_col is not None:
                    out[i, pods_col] -= 1
    return out


def compute_fixes(
    snap: ClusterSnapshot,
    gang: GangRequest,
    decision: Decision,
    now: float | None = None,
    options: Any = None,
    *,
    expected_wait_s: float | None = None,
    view: GangView | None = None,
) -> list[Fix]:
    """Every applicable fix for ``gang`` on ``snap``, ranked (``rank_fixes``).

    Args:
        decision: ``evaluate(snap, gang, options)`` — its findings drive the quota fixes.
        now: epoch seconds, for GPU-hours lost and ``expected_start``; None → hours 0.
        expected_wait_s: when known (from a wait model), the wait fix's start = now + it.

    Returns:
        [] for a gang that Fits or NeverFits (nothing to fix by displacement; a NeverFits gang
        must change itself — see the decision's message), except the autoscaler fixes
        (``scale_fixes``) for a NeverFits that only the autoscalers' limits or requirements
        stand behind (``SCALE_CODES``) and relax-topology for a NeverFits a required topology
        rule proves (TopologyPlacementFailed); else the ranked fixes, the topology ones
        (``topology_fixes``: relax-topology, the closest domain freed) included.
    """
    if decision.verdict == NEVER_FITS:
        if any(f.code == "TopologyPlacementFailed" and f.severity == NEVER_FITS for f in decision.findings):
            # Only the required topology stands behind the proof: relaxing it is the change.
            relax = relax_fix(snap, gang, decision, view or gang_view(snap, gang, decision, options))
            return [relax] if relax is not None else []
        if not any(f.code in SCALE_CODES for f in decision.findings):
            return []
        # Only the autoscalers' configuration stands behind the proof: raising a limit or
        # widening a pool changes it (#16); nothing else is offered.
        view = view or gang_view(snap, gang, decision, options)
        return rank_fixes(scale_fixes(snap, gang, decision, view, options))
    view = view or gang_view(snap, gang, decision, options)
    fixes: list[Fix] = []
    fixes.extend(_quota_fixes(snap, gang, decision))
    if not view.pod_sets or decision.verdict == "Fits":
        return rank_fixes(fixes)
    if view.deficit > 0:
        rep, repaired_names, repaired_mask = _repair_fix(snap, gang, view, options)
        if rep is not None:
            fixes.append(rep)
        for fix in (_selector_fix(snap, view), _shrink_fix(gang, view, options), _wait_fix(snap, view, now, expected_wait_s),
                    _add_nodes_fix(snap, view)):
            if fix is not None:
                fixes.append(fix)
        fixes.extend(scale_fixes(snap, gang, decision, view, options))
        fixes.extend(_displacing_fixes(snap, gang, view, now, options, rep, repaired_names, repaired_mask))
    fixes.extend(topology_fixes(snap, gang, decision, view, now, options))
    return rank_fixes(fixes)


def _selector_fix(snap: ClusterSnapshot, view: GangView) -> Fix | None:
    """change-selector: the main shape without the gang's node selector / required affinity, when
    more of its pods fit now without them."""
    main = view.main
    ps, sh = view.pod_sets[main], view.shapes[main]
    if not (ps.node_selector or ps.required_affinity):
        return None
    free_ps = PodSet(ps.name, ps.count, ps.requests, tolerations=ps.tolerations, max_per_node=ps.max_per_node)
    m = filter_nodes(snap, Constraints(free_ps), ever=False).mask
    k = int(np.where(m, pods_per_node(snap.free, sh, ps.max_per_node), 0).sum())
    if k <= view.placeable:
        return None
    sel = ", ".join(f"{a}={b}" for a, b in ps.node_selector.items()) or "its required node affinity"
    return Fix("change-selector",
               f"drop or widen the node selector ({sel}): {k} pod(s) of the shape fit now without it (vs {view.placeable})",
               sufficient=k >= view.need, frees_nodes=int(np.count_nonzero(np.where(m, pods_per_node(snap.free, sh, ps.max_per_node), 0)))
               - int(np.count_nonzero(view.k_now[main])))


def _shrink_fix(gang: GangRequest, view: GangView, options: Any) -> Fix | None:
    """shrink: the gang cut to the pods of the main shape that fit now (only when some do)."""
    ps = view.pod_sets[view.main]
    if not 0 < view.placeable < view.need:
        return None
    total_now = view.placeable + len([p for p in view.own_bound if dict(p.requests) == dict(ps.requests)])
    shape_txt = ", ".join(f"{v} {r}" for r, v in sorted(ps.requests.items()) if is_gpu_name(r, options)) or "its shape"
    return Fix("shrink",
               f"shrink the gang to {total_now} pod(s) of {shape_txt} (the most that fit now; "
               f"{view.need + len(view.own_bound)} requested) — only if the job can run smaller",
               sufficient=True, frees_nodes=0,
               commands=[f"kubectl -n {_q(gang.namespace)} edit {_resource_of(gang)} {_q(gang.name)}"
                         f"   # replicas / parallelism / minAvailable → {total_now}"])


def _wait_fix(snap: ClusterSnapshot, view: GangView, now: float | None, expected_wait_s: float | None) -> Fix | None:
    """wait: running work on eligible nodes ends — never the gang's own bound pods (they wait for
    their siblings), DaemonSet or system pods (they never end); offered when the gang fits then.
    ``expected_start`` = now + ``expected_wait_s`` (epoch seconds) when both are known."""
    main = view.main
    ps, sh = view.pod_sets[main], view.shapes[main]
    full = np.where(view.now_masks[main], pods_per_node(_lasting_free(snap, view), sh, ps.max_per_node), 0)
    if not (int(full.sum()) >= view.need and int(full.sum()) > view.placeable):
        return None
    start = None if (expected_wait_s is None or now is None) else now + expected_wait_s
    return Fix("wait",
               "wait for running work on eligible nodes to finish" + ("" if start is None else f" (expected in {expected_wait_s / 3600:.1f} h)"),
               expected_start=start, sufficient=True)


def _add_nodes_fix(snap: ClusterSnapshot, view: GangView) -> Fix:
    """add-nodes: the deficit over the pods of the main shape the best eligible node takes
    (nodes named after the first eligible one that takes any)."""
    main = view.main
    ps, sh = view.pod_sets[main], view.shapes[main]
    per_node = max(1, int(pods_per_node(snap.ever_alloc[view.ever_masks[main]], sh, ps.max_per_node).max(initial=0)) or 1)
    add = math.ceil(view.deficit / per_node)
    like = next((snap.nodes[int(i)].name for i in np.flatnonzero(view.ever_masks[main] & (pods_per_node(snap.ever_alloc, sh, ps.max_per_node) > 0))[:1]), None)
    return Fix("add-nodes", f"add {add} node(s)" + (f" like {like}" if like else "") + f" ({per_node} pod(s) each)",
               frees_nodes=add, sufficient=True)


def _displacing_fixes(snap: ClusterSnapshot, gang: GangRequest, view: GangView, now: float | None, options: Any,
                      rep: Fix | None, repaired_names: list[str], repaired_mask: np.ndarray) -> list[Fix]:
    """The displacing fixes, in order: consolidate (any victim), preempt lower-priority work (when
    its victims differ), and repair-then-evict when the repair alone is not enough. The victim
    units of a node and each unit are worked out once for all three (one memo)."""
    out: list[Fix] = []
    memo: dict = {}
    cons = _displacing_fix(snap, gang, view, now, options, action_hint="any", memo=memo)
    if cons is not None:
        out.append(cons)
    if view.priority:
        low = _displacing_fix(snap, gang, view, now, options, action_hint="lower-priority", max_priority=view.priority, memo=memo)
        if low is not None and (cons is None or {(v.namespace, v.name) for v in low.victims} != {(v.namespace, v.name) for v in cons.victims}):
            low.action = "preempt" if low.action == "move" else low.action
            out.append(low)
    if rep is not None and not rep.sufficient:
        combo = _displacing_fix(snap, gang, view, now, options, action_hint="any",
                                repaired=repaired_names, extra_mask=repaired_mask, memo=memo)
        if combo is not None:
            out.append(combo)
    return out
