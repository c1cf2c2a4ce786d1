"""The exact victim choice when every unit sits on one node (``node_local_victims``): a knapsack
over nodes (FIELD-NOTES §7: node-local victims make the choice per node independent), with the
pods each PodDisruptionBudget loses carried in its state.

Owns that exact path and its limits (``NODE_LOCAL_SUBSETS``, ``NODE_LOCAL_BUDGET_WORK``); the
greedy takes over beyond them (``search``).
"""

from __future__ import annotations

import itertools
from typing import Sequence

from .costs import _Gain, set_cost
from .units import Unit

__all__ = ["NODE_LOCAL_SUBSETS", "NODE_LOCAL_BUDGET_WORK", "node_local_victims"]


NODE_LOCAL_SUBSETS = 10
#: With PodDisruptionBudgets, the node-local search falls back to the greedy when its knapsack
#: would hold more than this many states (pods gained × pods evicted per budget, see below)
#: summed over the nodes.
NODE_LOCAL_BUDGET_WORK = 200_000


def node_local_victims(units: Sequence[Unit], g: "_Gain", need: int, *, on_node: dict[int, list[int]] | None = None) -> list[int] | None:
    """Exact victims when every unit sits on one node (FIELD-NOTES §7: node-local victims make
    the choice per node independent).

    Per node, every subset of its units gives a gain (pods of the shape freed there) and a
    cost; a knapsack over nodes (state: pods gained, capped at ``need``) minimises
    (Σ PDB violations, Σ pods, Σ GPUs, Σ GPU-hours) for each ceiling on victim priority, and the
    ceiling with the least overall lexicographic cost (``set_cost``) wins. Exact when one tenant
    is involved; with several, tenants are counted after the fact. Returns sorted unit indices,
    or None when a node carries more than ``NODE_LOCAL_SUBSETS`` units (then use the greedy).

    PodDisruptionBudgets (``Unit.budgets``) tie nodes together — a budget's allowance is shared
    by the pods it selects on every node — so the state also carries the pods evicted per budget
    (each capped at its allowance + 1: past that the budget is violated whatever follows) and a
    final state's violations are counted from it, once per budget; still exact. None as well
    when that knapsack would exceed ``NODE_LOCAL_BUDGET_WORK`` states.

    ``on_node``: candidate node → indices of the units with a row there (index order), when the
    caller has it (``_Prep.on_node``).
    """
    if on_node is None:
        on_node = {}
        for ui, u in enumerate(units):
            for n in u.use:
                if n in g.avail:
                    on_node.setdefault(n, []).append(ui)
    if any(len(v) > NODE_LOCAL_SUBSETS for v in on_node.values()):
        return None
    # Budgets touched: position in the footprint tuple, and the cap (allowance + 1) of each.
    allowed: dict[int, int] = {}
    for u in units:
        for bi, _, a in u.budgets:
            allowed[bi] = a
    bis = sorted(allowed)
    pos = {bi: j for j, bi in enumerate(bis)}
    caps = tuple(allowed[bi] + 1 for bi in bis)
    zero = (0,) * len(bis)
    if bis:
        states = need + 1
        for c in caps:
            states *= c + 1
        if states * len(on_node) > NODE_LOCAL_BUDGET_WORK:
            return None

    def footprint(combo: Sequence[int]) -> tuple[int, ...]:
        if not bis:
            return zero
        fp = list(zero)
        for i in combo:
            for bi, n, _ in units[i].budgets:
                j = pos[bi]
                fp[j] = min(caps[j], fp[j] + n)
        return tuple(fp)

    best, best_cost = None, None
    for ceiling in sorted({u.priority for u in units}):
        # (pods gained, pods evicted per budget) → ((Σ pdb, Σ pods, Σ GPUs, Σ hours), units)
        dp: dict[tuple[int, tuple[int, ...]], tuple[tuple, tuple[int, ...]]] = {(0, zero): ((0, 0, 0, 0.0), ())}
        for n, uis in on_node.items():
            allowed_units = [ui for ui in uis if units[ui].priority <= ceiling]
            options: dict[tuple[int, tuple[int, ...]], tuple[tuple, tuple[int, ...]]] = {}
            for size in range(1, len(allowed_units) + 1):
                for combo in itertools.combinations(allowed_units, size):
                    gain = min(g.of(units, combo), need)
                    if gain <= 0:
                        continue
                    c = (sum(units[i].pdb for i in combo), sum(len(units[i].pods) for i in combo),
                         sum(units[i].gpus for i in combo), round(sum(units[i].hours for i in combo), 6))
                    key = (gain, footprint(combo))
                    if key not in options or c < options[key][0]:
                        options[key] = (c, combo)
            nxt = dict(dp)
            for (have, fp), (cost, chosen) in dp.items():
                for (gain, fp2), (c, combo) in options.items():
                    key = (min(need, have + gain), tuple(min(m, x + y) for m, x, y in zip(caps, fp, fp2)) if bis else zero)
                    nc = tuple(a + b for a, b in zip(cost, c))
                    if key not in nxt or nc < nxt[key][0]:
                        nxt[key] = (nc, chosen + combo)
            dp = nxt
        done = None
        for (have, fp), (cost, chosen) in dp.items():
            if have != need:
                continue
            full = (cost[0] + sum(1 for m, x in zip(caps, fp) if x >= m),) + cost[1:]
            if done is None or full < done[0]:
                done = (full, chosen)
        if done is not None:
            chosen = sorted(done[1])
            cost = set_cost(units, chosen)
            if best_cost is None or cost < best_cost:
                best, best_cost = chosen, cost
    return best if best is not None else None
