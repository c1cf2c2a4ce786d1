"""Fixes at topology-domain level for a gang a required topology rule blocks (TopologyPlacementFailed).

* ``relax-topology`` (no displacement): turn the required level into a preferred one (Kueue
  ``podset-required-topology`` → ``podset-preferred-topology``; KAI
  ``topology-required-placement`` → ``topology-preferred-placement``; Volcano
  ``networkTopology.mode: hard`` → ``soft``). Said plainly what it costs: the pods may then
  spread over several domains, so their traffic crosses the links between domains and
  collectives (all-reduce) may run slower. ``sufficient`` when the gang fits now without the rule.
* the domain closest to fitting (the finding's ``best_domain``) and what would free it: the
  existing victim search (``consolidation._displacing_fix``) on a view whose node masks are
  restricted to that domain's nodes, so every victim runs there and the gang then fits inside it.

Reads the finding's data (``topology.report``): ``level``, ``level_keys``, ``best_domain``,
``source``, ``rule``, ``pod_sets``. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..fit import place
from ..model import GangRequest
from ..snapshot import ClusterSnapshot
from ..topology import label_domains
from .commands import _q, _resource_of
from .consolidation import _displacing_fix, _gang_demands
from .ranking import Fix
from .view import GangView

__all__ = ["topology_fixes", "relax_fix"]

_RELAX = {
    "kueue": "kueue.x-k8s.io/podset-required-topology → kueue.x-k8s.io/podset-preferred-topology on the pod template",
    "kai": "kai.scheduler/topology-required-placement → kai.scheduler/topology-preferred-placement",
    "volcano": "spec.networkTopology.mode: hard → soft",
}


def _finding(decision) -> Any:
    return next((f for f in decision.findings if f.code == "TopologyPlacementFailed"
                 and f.data.get("mode") == "required" and f.data.get("rule") in ("whole", "slices")), None)


def relax_fix(snap: ClusterSnapshot, gang: GangRequest, decision, view: GangView | None) -> Fix | None:
    """relax-topology for the first blocking Whole/slice rule of a source that has a preferred
    mode (Kueue, KAI, Volcano), else None."""
    f = _finding(decision)
    if f is None or f.data.get("source") not in _RELAX:
        return None
    level = f.data.get("level")
    fits_now = view is not None and place(snap.free, _gang_demands(view)) is not None
    cost = (f"its pods may then spread over several {level} domains: their traffic crosses the links between domains, "
            "so collectives (all-reduce) may run slower")
    return Fix("relax-topology",
               f"relax the required topology to preferred ({_RELAX[f.data['source']]}): {cost}"
               + ("; the gang fits now without the rule" if fits_now else ""),
               sufficient=fits_now,
               commands=[f"kubectl -n {_q(gang.namespace)} edit {_resource_of(gang)} {_q(gang.name)}"
                         f"   # {_RELAX[f.data['source']]}"])


def _domain_mask(snap: ClusterSnapshot, keys, name) -> np.ndarray | None:
    if not keys or name is None:
        return None
    dom = label_domains(snap, tuple(keys))
    try:
        d = dom.names.index(name)
    except ValueError:
        return None
    return dom.ids == d


def domain_fix(snap: ClusterSnapshot, gang: GangRequest, decision, view: GangView, now, options) -> Fix | None:
    """What would free the domain closest to fitting: the victim search restricted to its nodes
    (a "whole" rule read from labels; Volcano HyperNodes and exclusivity are left out)."""
    f = _finding(decision)
    if f is None or f.data.get("rule") != "whole" or f.data.get("when") != "now":
        return None
    inside = _domain_mask(snap, f.data.get("level_keys"), f.data.get("best_domain"))
    if inside is None:
        return None
    members = {i for i, ps in enumerate(view.pod_sets) if ps.name in set(f.data.get("pod_sets") or ())}
    now_masks = [m & inside if i in members else m for i, m in enumerate(view.now_masks)]
    k_now = [np.where(inside, k, 0) if i in members else k for i, k in enumerate(view.k_now)]
    restricted = replace(view, now_masks=now_masks, k_now=k_now,
                         placeable=int(k_now[view.main].sum()) if view.main in members else view.placeable)
    if restricted.deficit <= 0:
        return None
    fix = _displacing_fix(snap, gang, restricted, now, options, action_hint="any")
    if fix is None:
        return None
    fix.summary = f"in {f.data.get('level')} domain {f.data['best_domain']} (the closest to fitting): {fix.summary}"
    return fix


def topology_fixes(snap: ClusterSnapshot, gang: GangRequest, decision, view: GangView | None, now, options) -> list[Fix]:
    """relax-topology and the closest domain's displacing fix, when a required rule blocks."""
    out = []
    relax = relax_fix(snap, gang, decision, view)
    if relax is not None:
        out.append(relax)
    if view is not None and view.pod_sets:
        dom = domain_fix(snap, gang, decision, view, now, options)
        if dom is not None:
            out.append(dom)
    return out
