"""PodDisruptionBudget arithmetic: which pods a budget selects (``budget_members``), how many it
lets go (``disruptions_allowed``, the disruption controller's arithmetic) and how many budgets
an eviction violates (``pdb_violations``) — the fixes' first cost criterion (FIELD-NOTES §7).

Owns the budgets' numbers, kept on the snapshot (``snap.remember``); not the budgets' parsing
(``adapters/disruption.py``) nor the union-over-a-set counting of the search (``costs``).
Source: kubernetes pkg/controller/disruption/disruption.go (expected / healthy / desired
healthy pods, GetScaledValueFromIntOrPercent rounding up).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..model import BoundPod, DisruptionBudget
from ..snapshot import ClusterSnapshot

__all__ = ["budget_members", "disruptions_allowed", "pdb_violations"]


def budget_members(snap: ClusterSnapshot) -> tuple[frozenset[tuple[str, str]], ...]:
    """Per budget of ``snap.disruption_budgets`` (same order): the (namespace, name) of the pods
    it selects — pods of its namespace, bound or Pending, whose labels match its selector (a
    null selector selects none, an empty one every pod). Kept on the snapshot."""
    key = ("fixes.budget_members",)
    hit = snap.recall(key)
    if hit is None:
        by_ns: dict[str, list[BoundPod]] = {}
        for p in snap.pods:
            by_ns.setdefault(p.namespace, []).append(p)
        # (namespace, label key) → label value → pods of the namespace with it: a selector with
        # matchLabels need only look at the pods carrying its first pair.
        by_label: dict[tuple[str, str], dict[str, list[BoundPod]]] = {}

        def candidates(b: DisruptionBudget) -> Iterable[BoundPod]:
            if not b.selector.match_labels:  # type: ignore[union-attr]
                return by_ns.get(b.namespace, ())
            k, v = b.selector.match_labels[0]  # type: ignore[union-attr]
            values = by_label.get((b.namespace, k))
            if values is None:
                values = by_label[(b.namespace, k)] = {}
                for p in by_ns.get(b.namespace, ()):
                    x = p.labels.get(k)
                    if x is not None:
                        values.setdefault(x, []).append(p)
            return values.get(v, ())

        hit = snap.remember(key, tuple(
            frozenset() if b.selector is None else
            frozenset((p.namespace, p.name) for p in candidates(b) if b.selector.matches(p.labels))
            for b in snap.disruption_budgets))
    return hit  # type: ignore[return-value]


def _scaled(value: int | str, expected: int) -> int:
    """An IntOrString of a budget against ``expected`` pods: an int as it is, ``"N%"`` rounded up
    (the disruption controller's GetScaledValueFromIntOrPercent with roundUp)."""
    if isinstance(value, str):
        pct = int(value.strip().rstrip("%"))
        return (pct * expected + 99) // 100
    return int(value)


def disruptions_allowed(snap: ClusterSnapshot, budget: DisruptionBudget, members: frozenset[tuple[str, str]],
                        pods: Mapping[tuple[str, str], BoundPod] | None = None) -> int:
    """Pods of ``members`` (the pods ``budget`` selects) that may be evicted without violating it:
    ``status.disruptionsAllowed`` when the object carries it, else the disruption controller's
    arithmetic — expected = selected pods, healthy = those bound, Running and not un-Ready, desired healthy =
    minAvailable, or expected − maxUnavailable, or expected when neither is set; allowed =
    max(0, healthy − desired). ``pods``: ``{(p.namespace, p.name): p for p in snap.pods}``, when
    the caller has it (one map for every budget)."""
    if budget.disruptions_allowed is not None:
        return max(0, int(budget.disruptions_allowed))
    expected = len(members)
    if pods is None:
        pods = {(p.namespace, p.name): p for p in snap.pods}
    # Healthy as the disruption controller counts it: Running and Ready (readiness unknown → healthy).
    healthy = sum(1 for k in members if (p := pods.get(k)) is not None and p.node_name and p.phase == "Running"
                  and p.ready is not False)
    if budget.min_available is not None:
        desired = _scaled(budget.min_available, expected)
    elif budget.max_unavailable is not None:
        desired = max(0, expected - _scaled(budget.max_unavailable, expected))
    else:
        desired = expected
    return max(0, healthy - desired)


def _budget_index(snap: ClusterSnapshot) -> tuple[dict[tuple[str, str], list[int]], list[int]]:
    """(pod (namespace, name) → indices of the budgets selecting it, disruptions allowed per
    budget); kept on the snapshot."""
    key = ("fixes.budget_index",)
    hit = snap.recall(key)
    if hit is None:
        members = budget_members(snap)
        of_pod: dict[tuple[str, str], list[int]] = {}
        for bi, m in enumerate(members):
            for k in m:
                of_pod.setdefault(k, []).append(bi)
        pods = {}  # one map for every budget without a status
        if any(b.disruptions_allowed is None for b in snap.disruption_budgets):
            pods = {(p.namespace, p.name): p for p in snap.pods}
        allowed = [disruptions_allowed(snap, b, m, pods) for b, m in zip(snap.disruption_budgets, members)]
        hit = snap.remember(key, (of_pod, allowed))
    return hit  # type: ignore[return-value]


def _budget_hits(snap: ClusterSnapshot, pods: Iterable[BoundPod]) -> tuple[tuple[int, int, int], ...]:
    """``Unit.budgets`` of a unit with these pods: (budget index, pods of them it selects, its
    disruptions allowed) per budget selecting any, by budget index."""
    of_pod, allowed = _budget_index(snap)
    counts: dict[int, int] = {}
    for k in {(p.namespace, p.name) for p in pods}:
        for bi in of_pod.get(k, ()):
            counts[bi] = counts.get(bi, 0) + 1
    return tuple((bi, counts[bi], allowed[bi]) for bi in sorted(counts))

def pdb_violations(snap: ClusterSnapshot, pods: Iterable[BoundPod]) -> int:
    """Budgets of ``snap.disruption_budgets`` that evicting all of ``pods`` at once would
    violate: more of their selected pods evicted than they allow (``disruptions_allowed``)."""
    if not snap.disruption_budgets:
        return 0
    of_pod, allowed = _budget_index(snap)
    evicted: dict[int, int] = {}
    for k in {(p.namespace, p.name) for p in pods}:
        for bi in of_pod.get(k, ()):
            evicted[bi] = evicted.get(bi, 0) + 1
    return sum(1 for bi, n in evicted.items() if n > allowed[bi])
