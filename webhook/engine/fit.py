"""Resource fit: how many pods of a shape each node can take, and a gang placement.

Mirrors kube-scheduler's NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go):
a node fails for resource r when ``request_r > allocatable_r - requested_r`` (only resources the
pod requests are checked), and for pod count when ``pods + 1 > allocatable pods``.
Every pod takes one slot of the ``pods`` column.

Arrays: ``avail`` is int64 [nodes × resources] in the snapshot's column order (free now, or
``ever_alloc`` for the empty cluster). Pure and vectorised with numpy.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .filters import R_TOO_MANY_PODS, insufficient
from .model import Resources
from .snapshot import ClusterSnapshot

__all__ = ["Shape", "shape_of", "pods_per_node", "resource_reasons", "Demand", "place", "search", "SearchResult", "SEARCH_BUDGET"]


@dataclass(frozen=True)
class Shape:
    """A per-pod request as column indices and amounts (the ``pods`` slot included).

    ``missing`` lists requested resources no node of the snapshot knows at all.
    """

    cols: np.ndarray
    vals: np.ndarray
    missing: tuple[str, ...]
    names: tuple[str, ...]


def shape_of(snap: ClusterSnapshot, requests: Resources) -> Shape:
    """Translate a per-pod request (scheduler units) into the snapshot's columns."""
    cols, vals, names, missing = [snap.col["pods"]], [1], ["pods"], []
    for r, v in requests.items():
        if v <= 0 or r == "pods":
            continue
        c = snap.col.get(r)
        if c is None:
            missing.append(r)
            continue
        cols.append(c)
        vals.append(v)
        names.append(r)
    return Shape(np.array(cols, dtype=np.intp), np.array(vals, dtype=np.int64), tuple(missing), tuple(names))


def pods_per_node(avail: np.ndarray, shape: Shape, max_per_node: int | None = None) -> np.ndarray:
    """How many pods of ``shape`` each node can take given ``avail`` (int64 [nodes]).

    0 for every node when the shape asks for a resource no node has.
    """
    if shape.missing or avail.shape[0] == 0:
        return np.zeros(avail.shape[0], dtype=np.int64)
    sub = avail[:, shape.cols]
    k = np.min(np.maximum(sub, 0) // shape.vals, axis=1)
    if max_per_node is not None:
        k = np.minimum(k, max_per_node)
    return k


def resource_reasons(snap: ClusterSnapshot, avail: np.ndarray, shape: Shape, mask: np.ndarray) -> dict[str, int]:
    """NodeResourcesFit reasons over nodes in ``mask``: reason → nodes (a node may count for several).

    Wording: ``Too many pods``, ``Insufficient <resource>``.
    """
    out: dict[str, int] = {}
    if not mask.any():
        return out
    for c, v, name in zip(shape.cols, shape.vals, shape.names):
        n = int(np.count_nonzero((avail[:, c] < v) & mask))
        if n:
            out[R_TOO_MANY_PODS if name == "pods" else insufficient(name)] = n
    for name in shape.missing:
        out[insufficient(name)] = int(mask.sum())
    return out


@dataclass
class Demand:
    """Pods of one pod set to place: ``count`` pods of ``shape`` on nodes in ``mask``.

    ``k`` may carry ``pods_per_node`` already computed on the same ``avail`` (0 outside ``mask``).
    """

    name: str
    shape: Shape
    count: int
    mask: np.ndarray
    max_per_node: int | None = None
    weight: tuple = field(default=())
    k: np.ndarray | None = None


def place(avail: np.ndarray, demands: list[Demand]) -> dict[str, list[tuple[int, int]]] | None:
    """A placement of all demands, or None when the greedy strategies find none.

    Tries largest-first with best fit, then most-constrained-first (fewest eligible nodes)
    with worst fit; a returned placement is valid by construction, None proves nothing.

    Returns:
        pod-set name → [(node index, pods), ...].
    """
    first = _place(avail, sorted(demands, key=lambda d: d.weight, reverse=True), best_fit=True)
    if first is not None or len(demands) < 2:
        return first
    constrained = sorted(demands, key=lambda d: (int(np.count_nonzero(d.mask)), tuple(-w for w in d.weight if isinstance(w, int))))
    return _place(avail, constrained, best_fit=False)


def _place(avail: np.ndarray, order: list[Demand], best_fit: bool) -> dict[str, list[tuple[int, int]]] | None:
    """One greedy pass over ``order``: inside one demand, nodes that can take the fewest pods go
    first (best fit, keeping whole nodes for later demands) or the most (worst fit). The last
    demand takes nodes in index order (nothing comes after it to keep room for).

    Rows changed by earlier demands live in an overlay, so ``avail`` is never copied whole.

    Returns:
        pod-set name → [(node index, pods), ...], or None.
    """
    changed: dict[int, np.ndarray] = {}
    result: dict[str, list[tuple[int, int]]] = {}
    for n, d in enumerate(order):
        if d.count <= 0:
            result[d.name] = []
            continue
        if d.k is not None:
            k = d.k.copy() if changed else d.k
        else:
            k = np.where(d.mask, pods_per_node(avail, d.shape, d.max_per_node), 0)
        for node, row in changed.items():
            if d.mask[node]:
                k[node] = pods_per_node(row[None, :], d.shape, d.max_per_node)[0]
        if int(k.sum()) < d.count:
            return None
        pos = np.flatnonzero(k > 0)
        if n < len(order) - 1:
            pos = pos[np.argsort(k[pos] if best_fit else -k[pos], kind="stable")]
        kp = k[pos]
        cum = np.cumsum(kp)
        upto = int(np.searchsorted(cum, d.count)) + 1  # the first nodes whose pods add up to count
        takes = kp[:upto].copy()
        takes[-1] -= int(cum[upto - 1]) - d.count  # the last node takes only what is left
        chosen = list(zip(pos[:upto].tolist(), takes.tolist()))
        if n < len(order) - 1:  # nothing reads the overlay after the last demand
            for node, t in chosen:
                row = changed.get(node)
                if row is None:
                    row = changed[node] = avail[node].copy()
                row[d.shape.cols] -= d.shape.vals * t
        result[d.name] = chosen
    return result


# ---------------------------------------------------------------------------- exhaustive search

#: Steps the exhaustive search may take (a step: one per-node configuration tried, one
#: configuration enumerated, or one topology-domain combination). Deterministic: the outcome
#: never depends on the machine's speed.
SEARCH_BUDGET = 5_000
#: The search runs only on instances this small (pods to place, distinct node classes): its
#: recursion depth is at most pods + classes.
SEARCH_MAX_PODS = 256
SEARCH_MAX_CLASSES = 256

FOUND, NONE, BUDGET = "found", "none", "budget"


@dataclass
class SearchResult:
    """Outcome of ``search``.

    ``status``: ``"found"`` (``placement`` is valid by construction), ``"none"`` (the search was
    exhaustive: no placement of every demand exists under the given avail, masks, per-node caps
    and topology domains), or ``"budget"`` (too large to settle: proves nothing).
    ``steps``: steps used (see ``SEARCH_BUDGET``).
    """

    status: str
    placement: dict[str, list[tuple[int, int]]] | None
    steps: int


class _OutOfBudget(Exception):
    pass


def search(
    avail: np.ndarray,
    demands: list[Demand],
    *,
    budget: int = SEARCH_BUDGET,
    topology: dict[str, np.ndarray] | None = None,
    groups: dict[str, object] | None = None,
) -> SearchResult:
    """Exhaustive search for a placement of every demand (pods of one demand are interchangeable).

    A complete branch-and-bound over node classes: nodes with the same ``avail`` row (on the
    columns the demands request) and the same eligibility are interchangeable, so each class
    takes a multiset of per-node configurations (pods of each demand on one node, fitting
    ``avail`` together, within each demand's ``max_per_node``), enumerated in a fixed order;
    failed states are memoised; a branch is cut when the remaining classes cannot hold the
    remaining pods per demand or per resource. Only what ``avail``, the masks, ``max_per_node``
    and ``topology`` say is modelled; any constraint left out makes the search more permissive,
    so a ``"none"`` stays a sound proof on the modelled cluster.

    Args:
        avail: int64 [nodes × resources] (``ever_alloc`` for "ever", ``free`` for "now").
        demands: as for ``place``; ``k`` is ignored (recomputed on ``avail``).
        budget: steps allowed before giving up (``"budget"``).
        topology: demand name → int array [nodes] of topology-domain ids (−1: the node has no
            domain; a ``topology.DomainIndex``'s ``ids``): all pods of that demand must sit in one
            domain (Kueue's podset-required-topology, a Volcano HyperNode).
        groups: demand name → a group key: demands of one group (with the same ``topology``
            ids) sit in the same domain (Kueue's podset-group-name; a Volcano gang).

    Returns:
        A ``SearchResult``; placements map demand name → [(node index, pods), ...].
    """
    demands = [d for d in demands if d.count > 0]
    if not demands:
        return SearchResult(FOUND, {}, 0)
    if sum(d.count for d in demands) > SEARCH_MAX_PODS:
        return SearchResult(BUDGET, None, 0)
    topology = topology or {}
    ks = [np.where(d.mask, pods_per_node(avail, d.shape, d.max_per_node), 0) for d in demands]
    choices: list[list[int | None]] = []
    for d, k in zip(demands, ks):
        dom = topology.get(d.name)
        if dom is None:
            choices.append([None])
            continue
        vals = []
        for v in sorted({int(x) for x in np.unique(dom[k > 0])} - {-1}):
            if int(k[dom == v].sum()) >= d.count:
                vals.append(v)
        if not vals:
            return SearchResult(NONE, None, 0)
        choices.append(vals)
    steps = [0]
    try:
        groups = groups or {}
        for combo in itertools.product(*choices):
            _step(steps, budget)  # a skipped combination counts too: the loop stays bounded
            if groups and not _same_group_domain(demands, combo, groups):
                continue
            masks = [k if v is None else np.where(topology[d.name] == v, k, 0) for d, k, v in zip(demands, ks, combo)]
            found = _search_classes(avail, demands, masks, steps, budget)
            if found is not None:
                return SearchResult(FOUND, found, steps[0])
    except _OutOfBudget:
        return SearchResult(BUDGET, None, steps[0])
    return SearchResult(NONE, None, steps[0])


def _same_group_domain(demands, combo, groups) -> bool:
    """Demands of one group chose one domain."""
    seen: dict[object, int | None] = {}
    for d, v in zip(demands, combo):
        g = groups.get(d.name)
        if g is None:
            continue
        if seen.setdefault(g, v) != v:
            return False
    return True


def _step(steps: list[int], budget: int) -> None:
    steps[0] += 1
    if steps[0] > budget:
        raise _OutOfBudget


def _search_classes(avail, demands, ks, steps, budget):
    """One search with fixed per-node capacities ``ks`` (pods of each demand per node, alone).

    Returns demand name → [(node index, pods), ...], or None when no placement exists; raises
    ``_OutOfBudget`` past ``budget`` steps or ``SEARCH_MAX_CLASSES`` classes.
    """
    table = _class_table(avail, demands, ks)
    if table is None:
        return None
    classes, vl, ncol = table
    counts = tuple(d.count for d in demands)
    nd = len(demands)
    C = len(classes)
    suf_k, suf_res = _suffix_bounds(classes, nd, ncol)
    configs: list[list[tuple[int, ...]] | None] = [None] * C

    def configs_of(c: int) -> list[tuple[int, ...]]:
        got = configs[c]
        if got is None:
            got = configs[c] = _node_configs(classes[c], vl, counts, steps, budget)
        return got

    failed: set = set()
    path: list[tuple[int, tuple[int, ...]]] = []

    def feasible_bound(c: int, left: int, r: tuple[int, ...]) -> bool:
        _members, cap, kmax = classes[c]
        nxt = suf_k[c + 1]
        for j in range(nd):
            if r[j] > left * kmax[j] + nxt[j]:
                return False
        res = suf_res[c + 1]
        for i in range(ncol):
            load = 0
            for j in range(nd):
                if r[j]:
                    load += vl[j][i] * r[j]
            if load > left * max(cap[i], 0) + res[i]:
                return False
        return True

    def dfs(c: int, left: int, lo: int, r: tuple[int, ...]) -> bool:
        if not any(r):
            return True
        while c < C and left == 0:
            c += 1
            left = len(classes[c][0]) if c < C else 0
            lo = 0
        if c >= C:
            return False
        if not feasible_bound(c, left, r):
            return False
        key = (c, left, lo, r)
        if key in failed:
            return False
        cfgs = configs_of(c)
        for idx in range(lo, len(cfgs)):
            v = cfgs[idx]
            if not any(v):  # the rest of this class stays empty
                _step(steps, budget)
                if dfs(c + 1, len(classes[c + 1][0]) if c + 1 < C else 0, 0, r):
                    return True
                continue
            if any(a > b for a, b in zip(v, r)):
                continue
            _step(steps, budget)
            path.append((c, v))
            if dfs(c, left - 1, idx, tuple(a - b for a, b in zip(r, v))):
                return True
            path.pop()
        failed.add(key)
        return False

    if not C or not dfs(0, len(classes[0][0]), 0, counts):
        return None
    return _placement_of(path, classes, demands)


def _class_table(avail, demands, ks):
    """The search's node classes, or None when some demand's nodes cannot hold its pods at all.

    Nodes with the same ``avail`` row on the requested columns and the same set of demands they
    can take are interchangeable: one class each, as (member node indices, capacity per column,
    pods of each demand one node takes alone), most constrained classes (fewest demands they can
    take) first, then larger capacity. Returns (classes, per-pod request per demand and column as
    Python ints, number of columns); raises ``_OutOfBudget`` past ``SEARCH_MAX_CLASSES`` classes.
    """
    counts = tuple(d.count for d in demands)
    nd = len(demands)
    kmat = np.stack(ks, axis=1)  # [nodes × demands]
    for j in range(nd):
        if int(kmat[:, j].sum()) < counts[j]:
            return None
    rel = np.flatnonzero((kmat > 0).any(axis=1))
    cols = sorted({int(c) for d in demands for c in d.shape.cols})
    vals = np.zeros((nd, len(cols)), dtype=np.int64)
    for j, d in enumerate(demands):
        for c, v in zip(d.shape.cols, d.shape.vals):
            vals[j, cols.index(int(c))] += int(v)
    rows = np.concatenate([avail[np.ix_(rel, cols)], (kmat[rel] > 0).astype(np.int64)], axis=1)
    uniq, inverse, mult = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    inverse = np.asarray(inverse).reshape(-1)
    if len(uniq) > SEARCH_MAX_CLASSES:
        raise _OutOfBudget
    # Per-step work is on plain Python ints: the arrays here hold a handful of numbers, and
    # numpy's per-call overhead would dominate.
    vl = [[int(x) for x in vals[j]] for j in range(nd)]
    classes = []
    for ci in range(len(uniq)):
        members = rel[inverse == ci]
        cap = [int(x) for x in avail[members[0], cols]]
        kmax = tuple(int(kmat[members[0], j]) for j in range(nd))
        classes.append((members, cap, kmax))
    # Most constrained classes (fewest demands they can take) first, then larger capacity.
    order = sorted(range(len(classes)), key=lambda ci: (sum(1 for x in classes[ci][2] if x), tuple(-x for x in classes[ci][1])))
    return [classes[ci] for ci in order], vl, len(cols)


def _suffix_bounds(classes, nd: int, ncol: int) -> tuple[list[list[int]], list[list[int]]]:
    """What classes c.. can hold together, per demand (pods) and per resource column (capacity):
    the bounds that cut a branch which cannot place the remaining pods."""
    C = len(classes)
    suf_k = [[0] * nd for _ in range(C + 1)]
    suf_res = [[0] * ncol for _ in range(C + 1)]
    for c in range(C - 1, -1, -1):
        members, cap, kmax = classes[c]
        m = len(members)
        suf_k[c] = [suf_k[c + 1][j] + m * kmax[j] for j in range(nd)]
        suf_res[c] = [suf_res[c + 1][i] + m * max(cap[i], 0) for i in range(ncol)]
    return suf_k, suf_res


def _node_configs(cls, vl, counts, steps, budget) -> list[tuple[int, ...]]:
    """Every per-node configuration of a class (pods of each demand on one of its nodes,
    fitting its capacity together, within the pods each demand takes alone and needs), in
    descending lexicographic order: the empty configuration comes last. One step each."""
    _members, cap, kmax = cls
    nd = len(counts)
    out: list[tuple[int, ...]] = []
    cur = [0] * nd

    def rec(j: int, left: list[int]) -> None:
        _step(steps, budget)
        if j == nd:
            out.append(tuple(cur))
            return
        vj = vl[j]
        for x in range(min(kmax[j], counts[j]), -1, -1):
            if x and any(v and v * x > lf for v, lf in zip(vj, left)):
                continue
            cur[j] = x
            rec(j + 1, [lf - v * x for v, lf in zip(vj, left)] if x else left)
        cur[j] = 0

    rec(0, list(cap))
    out.sort(reverse=True)
    return out


def _placement_of(path, classes, demands) -> dict[str, list[tuple[int, int]]]:
    """The placement a successful search's path of (class, configuration) spells: each
    configuration goes to the next unused node of its class."""
    result: dict[str, list[tuple[int, int]]] = {d.name: [] for d in demands}
    used = [0] * len(classes)
    for c, v in path:
        node = int(classes[c][0][used[c]])
        used[c] += 1
        for j, d in enumerate(demands):
            if v[j]:
                result[d.name].append((node, int(v[j])))
    return result
