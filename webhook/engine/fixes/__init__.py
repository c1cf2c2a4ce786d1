"""Fixes for a gang that Waits, ranked by what they cost other tenants (FIELD-NOTES §7).

Zero-displacement fixes come first (repair broken nodes, release orphan reservations, borrow or
raise quota, change a selector, shrink the gang, wait, widen a NodePool, tolerate its taint,
raise an autoscaler's limit, add nodes), then fixes that displace
running work: *consolidate* (move the pods off the cheapest nodes — called "move" only when the
victims re-fit on the remaining nodes, else "preempt") and *preempt lower-priority work*.

Cost of a displacing fix, compared in this order (lexicographic):
  1. PodDisruptionBudget violations: budgets (``snap.disruption_budgets``) whose selected pods
     the fix evicts more of than the budget's disruptionsAllowed (``pdb_violations``), counted
     over the union of the victims — never summed per unit: four units that each take the one
     disruption a budget allows violate it once, together,
  2. highest victim priority,
  3. tenants (namespaces) touched,
  4. pods displaced, 5. GPUs displaced,
  6. GPU-hours of work lost: GPUs × (now − pod start) for each victim pod; 0 for pods of a
     partial gang (bound while siblings are Pending: no progress is being made).

Victims: pods of a gang that spans nodes (``BoundPod.gang`` naming a workload, not a
ReplicaSet/StatefulSet/DaemonSet) are evicted whole, never in part; DaemonSet pods and pods at
system priority (≥ 2,000,000,000) are never victims; the gang's own pods are never victims.
Choosing victims is a minimum k-union problem: exact enumeration up to ``EXACT_UNITS`` victim
units, otherwise greedy by marginal cost (per-node bundles and whole units as candidates) plus
a drop/swap local search. When every unit is node-local, the greedy takes the D cheapest nodes.

Pure: no I/O, no clock (``now`` is an argument).

This package's public face; one concern per module:

- ``ranking``: ``Fix``, ``Victim``, ``ACTION_RANK``, ``rank_fixes`` — the values and their order.
- ``view``: ``GangView``, ``gang_view``, ``own_pod`` — the gang's masks and counts per pod set.
- ``units``: ``Unit``, ``victim_units`` — who may be evicted, and together with whom.
- ``budgets``: ``budget_members``, ``disruptions_allowed``, ``pdb_violations`` — PDB arithmetic.
- ``costs``: ``set_cost``, ``_Gain`` — what a set of units costs and gains.
- ``search`` (driver ``choose_victims``) over ``prep`` (per-call data, fast paths), ``state``
  (running totals), ``bundles`` (per-node candidates), ``local`` (node-local knapsack).
- ``consolidation`` (move / preempt fixes), ``repair``, ``quota_fixes``, ``scale_fixes`` (the
  autoscalers': raise a NodePool's limits, widen its requirements, tolerate its taint),
  ``topology_fixes`` (relax a required topology, free the domain closest to fitting),
  ``commands`` (kubectl).
- ``compute``: ``compute_fixes``, which tries them all and ranks them.

A switch lives in the module that reads it: patch ``webhook.engine.fixes.prep._FAST_PATHS`` or
``webhook.engine.fixes.local.NODE_LOCAL_SUBSETS``, not the name re-exported here.
"""

from __future__ import annotations

# Private names stay on the face too: tests read and patch them through it.
from .budgets import _budget_hits, _budget_index, budget_members, disruptions_allowed, pdb_violations
from .bundles import _gaining_alone, _int64_rows, _node_bundle
from .commands import SUSPEND
from .compute import compute_fixes
from .consolidation import _apply_placement, _consolidation, _displacing_fix
from .costs import _Gain, _pack_cost, _violations, set_cost
from .local import NODE_LOCAL_BUDGET_WORK, NODE_LOCAL_SUBSETS, node_local_victims
from .prep import _FAST_PATHS, _Prep
from .ranking import ACTION_RANK, Fix, Victim, rank_fixes
from .repair import broken_nodes
from .search import BUDGET_PASS_UNITS, EXACT_UNITS, _local_search, brute_force_victims, choose_victims
from .state import _State
from .units import (
    NON_GANG_OWNERS,
    SYSTEM_PRIORITY,
    Unit,
    _pack,
    _pod_indexes,
    _unit_pack,
    _victim_units,
    victim_units,
)
from .view import GangView, _own_test, gang_view, is_gpu_name, own_pod

__all__ = [
    "Victim",
    "Fix",
    "Unit",
    "GangView",
    "gang_view",
    "victim_units",
    "choose_victims",
    "brute_force_victims",
    "rank_fixes",
    "compute_fixes",
    "broken_nodes",
    "own_pod",
    "set_cost",
    "NON_GANG_OWNERS",
    "SYSTEM_PRIORITY",
    "EXACT_UNITS",
    "node_local_victims",
    "budget_members",
    "disruptions_allowed",
    "pdb_violations",
]
