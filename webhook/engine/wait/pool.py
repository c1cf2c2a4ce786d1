"""The nodes a waiting gang waits on, and the running work that holds them.

Owns the first steps of an estimate: which eligible nodes could hold more pods of the gang's
main shape once running work ends (``scan_nodes``), the *groups* of pods that end together
there (one gang, or one pod without a gang: ``Group``), each group's age and run-time law
(``assign_laws``), and the *pool* (``build_pool``): per useful node its chain of groups in
median-end order and the rising capacity levels each prefix of the chain frees, nodes with
the same chain and levels merged into one ``Unit``. Not here: what the pool's ends add up to
(``sweep``, ``band``, ``simulate``).

A pool node is a tuple (chain of group ids, steps ((chain prefix length, capacity), …),
capacity now, full capacity, unit key — None for a node with nothing to wait for);
capacities are pods of the main shape. DaemonSet and static pods (``PERMANENT_OWNERS``) and
the gang's own bound pods never end. Units: seconds (ages, epoch starts); capacities in pods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..fit import Shape
from ..model import BoundPod, PodSet
from ..snapshot import ClusterSnapshot
from .history import RuntimeHistory
from .inputs import PERMANENT_OWNERS, limit_of
from .laws import Law, LifetimeModel
from .learn import law_for

__all__ = ["Group", "Unit", "PoolNode", "NodeScan", "cap_rows", "capacity_fn", "scan_nodes", "assign_laws",
           "build_pool"]

#: (chain of group ids, steps (prefix length, capacity), capacity now, full capacity, unit key).
PoolNode = tuple[tuple[int, ...], tuple[tuple[int, int], ...], int, int, "tuple | None"]


@dataclass
class Group:
    """Pods that end together (one gang, or one pod without a gang) as the estimator sees them."""

    start: float                 # earliest start, epoch s
    limit_end: float | None      # latest start + limit, epoch s (None: some pod has no limit)
    queue: str
    owner_kind: str
    pods: int = 0
    known: bool = False
    median: float | None = None  # median remaining run time, s (inf when unknown); lazily
    age: float = 0.0             # s run so far
    law: Law | None = None


@dataclass
class Unit:
    """Nodes that free together: same chain of groups, same capacity levels."""

    chain: tuple[int, ...]             # group ids in end order
    steps: tuple[tuple[int, int], ...]  # (chain prefix length, capacity) for rising levels
    c0: int                            # capacity now
    mult: int = 0                      # nodes in the unit


@dataclass
class NodeScan:
    """What ``scan_nodes`` found on the eligible nodes.

    Attributes:
        groups: the groups holding capacity the shape needs, by group id.
        node_chain: per busy node (row in the eligible rows, its group ids in first-seen order,
            each group's summed request vector on the node — [pods, then the shape's
            resources] —, capacity now).
        idle_caps: capacities now of the nodes with nothing to wait for, node by node (> 0).
        free_rows: free resources of every eligible row, restricted to the shape's columns.
        cap: pods of the shape a free-resource vector holds (``capacity_fn``).
        fits_now: pods of the shape that fit on free capacity now.
    """

    groups: list[Group]
    node_chain: list[tuple[int, tuple[int, ...], list[list[int]], int]]
    idle_caps: list[int]
    free_rows: list[list[int]]
    cap: Callable[[list[int]], int]
    fits_now: int


def cap_rows(avail: np.ndarray, shape: Shape, mpn: int | None) -> np.ndarray:
    """Pods of ``shape`` per row of ``avail`` (already restricted to the shape's columns)."""
    k = np.min(np.maximum(avail, 0) // shape.vals, axis=-1)
    return np.minimum(k, mpn) if mpn is not None else k


def capacity_fn(shape: Shape, mpn: int | None) -> Callable[[list[int]], int]:
    """Pods of ``shape`` (at most ``mpn`` per node) one resource vector holds, as a function of
    the vector (a list in the shape's column order): ``cap_rows`` for one row, in plain ints."""
    vals = shape.vals.tolist()

    def cap(vec) -> int:
        k = min(max(v, 0) // d for v, d in zip(vec, vals))
        return min(k, mpn) if mpn is not None else k

    return cap


def scan_nodes(snap: ClusterSnapshot, ps: PodSet, shape: Shape, eligible: np.ndarray, own_key: str,
               now: float) -> NodeScan:
    """Walk the ``eligible`` nodes (bool mask [nodes]): a node whose capacity for ``shape``
    cannot grow (full now, or nothing removable holds it) counts as idle; on the others, the
    pods whose end frees capacity (all removable pods when they hold it only jointly) join
    their group — the gang ``own_key``'s own pods and ``PERMANENT_OWNERS``' never end. A pod
    without a start time started ``now`` (epoch s)."""
    mpn = ps.max_per_node
    elig_idx = np.flatnonzero(eligible)
    cols = shape.cols
    free_e = snap.free[elig_idx][:, cols]
    k_now = cap_rows(free_e, shape, mpn)
    k_empty = cap_rows(snap.alloc[elig_idx][:, cols], shape, mpn)

    groups: list[Group] = []
    gid_of: dict[str, int] = {}
    node_chain: list[tuple[int, tuple[int, ...], list[list[int]], int]] = []  # (row, groups, requests, c0)
    base_now = 0          # capacity on nodes with nothing to wait for
    idle_caps: list[int] = []   # their capacities, node by node

    names = shape.names[1:]
    free_rows = free_e.tolist()
    k_now_l, k_empty_l = k_now.tolist(), k_empty.tolist()
    cap = capacity_fn(shape, mpn)

    for row, i in enumerate(elig_idx.tolist()):
        c0, c_empty = k_now_l[row], k_empty_l[row]
        if c0 >= c_empty or c_empty == 0:
            base_now += c0
            if c0:
                idle_caps.append(c0)
            continue
        pods = snap.pods_by_node.get(snap.nodes[i].name, ())
        removable = [p for p in pods if p.owner_kind not in PERMANENT_OWNERS and p.gang != own_key]
        vecs = [[1] + [p.requests.get(n, 0) for n in names] for p in removable]
        base = list(free_rows[row])
        for v in vecs:
            base = [x + y for x, y in zip(base, v)]
        k_full = cap(base)
        if k_full <= c0:
            base_now += c0
            if c0:
                idle_caps.append(c0)
            continue
        relevant = [r for r, v in enumerate(vecs) if cap([x - y for x, y in zip(base, v)]) < k_full]
        if not relevant:  # several pods hold it jointly: all of them block
            relevant = list(range(len(removable)))
        node_groups = _join_groups([removable[r] for r in relevant], [vecs[r] for r in relevant],
                                   groups, gid_of, now)
        node_chain.append((row, tuple(node_groups), [node_groups[g] for g in node_groups], c0))

    fits_now = base_now + sum(c0 for *_, c0 in node_chain)
    return NodeScan(groups, node_chain, idle_caps, free_rows, cap, fits_now)


def _join_groups(pods: list[BoundPod], vecs: list[list[int]], groups: list[Group], gid_of: dict[str, int],
                 now: float) -> dict[int, list[int]]:
    """Add the blocking ``pods`` of one node (request vectors ``vecs``) to their groups (by
    gang key, else the pod; new groups appended to ``groups``, ``gid_of`` their ids): a
    group starts at its earliest pod's start and ends by its latest start + limit (None once
    one pod has no limit). Returns the node's group ids, first seen first, each with the
    summed request vector of its pods on the node."""
    node_groups: dict[int, list[int]] = {}
    for p, vec in zip(pods, vecs):
        key = p.gang or f"Pod/{p.namespace}/{p.name}"
        gid = gid_of.get(key)
        start = p.start_time if p.start_time is not None else now
        lim = limit_of(p)
        end = None if lim is None else start + lim
        if gid is None:
            gid = gid_of[key] = len(groups)
            groups.append(Group(start, end, p.queue, p.owner_kind))
        else:
            g = groups[gid]
            g.start = min(g.start, start)
            if g.limit_end is not None:
                g.limit_end = None if end is None else max(g.limit_end, end)
        groups[gid].pods += 1
        acc = node_groups.get(gid)
        node_groups[gid] = vec if acc is None else [x + y for x, y in zip(acc, vec)]
    return node_groups


def assign_laws(groups: list[Group], history: RuntimeHistory | None, model: LifetimeModel, now: float,
                memo: dict) -> tuple[int, float]:
    """Give each group its age at ``now`` and its run-time law (``law_for`` under its limit,
    the latest end − earliest start). Returns (blocking pods, the share of them whose end is
    known; 1.0 when none blocks)."""
    blocking = known_blocking = 0
    for g in groups:
        g.age = max(0.0, now - g.start)
        g.law = law_for(history, model, g.queue, g.owner_kind,
                        None if g.limit_end is None else g.limit_end - g.start, memo)
        g.known = g.law.known
        blocking += g.pods
        known_blocking += g.pods if g.known else 0
    return blocking, (known_blocking / blocking if blocking else 1.0)


def build_pool(scan: NodeScan) -> tuple[list[PoolNode], dict[tuple, Unit]]:
    """Order each busy node's groups by median end (then id) and compress the chain to rising
    capacity levels: the pool (idle nodes first, then busy ones in scan order) and its
    distinct units by key (``mult`` 0: counted by the caller). Needs ``assign_laws`` first."""
    groups, cap = scan.groups, scan.cap

    def median_of(gid: int) -> float:
        g = groups[gid]
        if g.median is None:
            g.median = g.law.median(g.age)
        return g.median

    units: dict[tuple, Unit] = {}
    pool: list[PoolNode] = [((), (), c, c, None) for c in scan.idle_caps]
    for row, gids, reqs, c0 in scan.node_chain:
        order = sorted(range(len(gids)), key=lambda j: (median_of(gids[j]), gids[j])) if len(gids) > 1 else [0]
        chain = tuple(gids[j] for j in order)
        cum = list(scan.free_rows[row])
        steps: list[tuple[int, int]] = []
        last = c0
        for j in range(len(order)):
            cum = [x + y for x, y in zip(cum, reqs[order[j]])]
            c = cap(cum)
            if c > last:
                steps.append((j + 1, c))
                last = c
        key = (chain, tuple(steps), c0)
        pool.append((chain, tuple(steps), c0, last, key))
        if key not in units:
            units[key] = Unit(chain, tuple(steps), c0)
    return pool, units
