"""Resource fit: how many pods of a shape each node can take, and a gang placement.

Mirrors kube-scheduler's NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go):
a node fails for resource r when ``request_r > allocatable_r - requested_r`` (only resources the
pod requests are checked), and for pod count when ``pods + 1 > allocatable pods``.
Every pod takes one slot of the ``pods`` column.

Arrays: ``avail`` is int64 [nodes × resources] in the snapshot's column order (free now, or
``ever_alloc`` for the empty cluster). Pure and vectorised with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .filters import R_TOO_MANY_PODS, insufficient
from .model import Resources
from .snapshot import ClusterSnapshot

__all__ = ["Shape", "shape_of", "pods_per_node", "resource_reasons", "Demand", "place"]


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
