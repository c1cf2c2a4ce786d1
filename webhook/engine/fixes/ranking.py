"""The fix values and their order: ``Victim``, ``Fix``, ``ACTION_RANK``, ``rank_fixes``.

Owns what a fix *is* (the JSON-ready values ``diagnose`` and the CLI print) and how fixes are
compared; not how they are found (``consolidation``, ``repair``, ``quota_fixes``, ``compute``).

Cost of a fix (``Fix.cost``), compared in this order (lexicographic):
  1. PodDisruptionBudget violations (``budgets.pdb_violations``: over the union of the victims,
     never summed per unit),
  2. highest victim priority (-inf without victims),
  3. tenants (namespaces) touched,
  4. pods displaced, 5. GPUs displaced,
  6. GPU-hours of work lost (hours, rounded to 6 decimals for the comparison).
Then the action's rank (``ACTION_RANK``: zero-displacement actions first), then fixes that
suffice alone first. Pure values: no snapshot, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["ACTION_RANK", "Victim", "Fix", "rank_fixes"]


ACTION_RANK = {
    "repair": 0, "release-reservations": 1, "lower-quota": 2, "borrow-quota": 3, "raise-quota": 4,
    "change-selector": 5, "relax-topology": 5.5, "shrink": 6, "wait": 7,
    # the autoscalers' (#16): they evict no one, but a widened pool or a raised limit adds nodes (cost)
    "widen-nodepool": 8, "tolerate-taint": 9, "raise-scale-limit": 10,
    "add-nodes": 11,
    "repair+move": 12, "move": 13, "repair+preempt": 14, "preempt": 15, "evict-partial": 16,
}
_NEG_INF = float("-inf")


@dataclass(frozen=True)
class Victim:
    """One pod a fix displaces: ``unit`` is the gang it is evicted with (or the pod itself)."""

    namespace: str
    name: str
    node: str
    unit: str
    priority: int
    gpus: int
    gpu_hours: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"namespace": self.namespace, "name": self.name, "node": self.node, "unit": self.unit,
                "priority": self.priority, "gpus": self.gpus, "gpu_hours": round(self.gpu_hours, 2)}


@dataclass
class Fix:
    """One way to get the gang started, with what it costs others and what it buys.

    Attributes:
        action: repair, release-reservations, lower-quota, borrow-quota, raise-quota,
            change-selector, relax-topology, shrink, wait, widen-nodepool, tolerate-taint, raise-scale-limit,
            add-nodes, move, preempt, repair+move, repair+preempt.
        summary: one sentence a person acts on.
        displaced_pods / displaced_gpus: running pods and GPUs the fix evicts.
        tenants: namespaces whose pods are evicted (sorted).
        pdb_violations: PodDisruptionBudgets the evictions would violate (0 without PDB data).
        max_victim_priority: highest priority among victims, None without victims.
        gpu_hours_lost: GPU-hours of running work thrown away (hours, 2 decimals).
        frees_nodes: nodes the fix makes able to host one of the gang's pods.
        expected_start: epoch seconds when the gang could start, None when unknown.
        sufficient: True when this fix alone lets the whole gang start.
        victims: the displaced pods. nodes: the nodes freed or repaired.
        commands: kubectl commands that carry the fix out (or show what to change).
    """

    action: str
    summary: str
    displaced_pods: int = 0
    displaced_gpus: int = 0
    tenants: list[str] = field(default_factory=list)
    pdb_violations: int = 0
    max_victim_priority: int | None = None
    gpu_hours_lost: float = 0.0
    frees_nodes: int = 0
    expected_start: float | None = None
    sufficient: bool = False
    victims: list[Victim] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def cost(self) -> tuple:
        """The displacement cost, compared lexicographically (see the module doc)."""
        prio = _NEG_INF if self.max_victim_priority is None else self.max_victim_priority
        return (self.pdb_violations, prio, len(self.tenants), self.displaced_pods, self.displaced_gpus,
                round(self.gpu_hours_lost, 6))

    def rank_key(self) -> tuple:
        """Sort key: cost, then the action's rank, then fixes that suffice alone first."""
        return (self.cost(), ACTION_RANK.get(self.action, 99), not self.sufficient)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (victims and nodes capped at 50; ``victims_total`` / ``nodes_total``
        give the full counts; ``commands`` are all of them)."""
        return {
            "action": self.action,
            "summary": self.summary,
            "displaced_pods": self.displaced_pods,
            "displaced_gpus": self.displaced_gpus,
            "tenants": list(self.tenants),
            "pdb_violations": self.pdb_violations,
            "max_victim_priority": self.max_victim_priority,
            "gpu_hours_lost": round(self.gpu_hours_lost, 2),
            "frees_nodes": self.frees_nodes,
            "expected_start": self.expected_start,
            "sufficient": self.sufficient,
            "victims": [v.to_dict() for v in self.victims[:50]],
            "victims_total": len(self.victims),
            "nodes": list(self.nodes[:50]),
            "nodes_total": len(self.nodes),
            "commands": list(self.commands),
        }


def rank_fixes(fixes: Iterable[Fix]) -> list[Fix]:
    """Fixes in ranked order: zero displacement first, then by ``Fix.rank_key``; stable."""
    return sorted(fixes, key=Fix.rank_key)
