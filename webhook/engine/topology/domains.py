"""The domain index of a topology level: which domain each node is in, built once per snapshot.

A domain of a level is identified by the values of the level's node label and of every level
above it (Kueue's domain ID: pkg/cache/scheduler/tas_flavor_snapshot.go joins the values of the
levels from the top down, so "rack-1" in block a and "rack-1" in block b are two racks). A node
missing one of those labels is in no domain of the level (id −1): no topology-aware scheduler
places a pod of a required level there.

Built from the snapshot's static node classes (a class's nodes share every non-per-node label),
so a 20,000-node cluster with 625 racks costs one pass over its classes; a per-node label
(``kubernetes.io/hostname``) makes every node its own domain. Cached per key tuple with
``ClusterSnapshot.structure``: a "cold" check (per-shape memo emptied) reuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..snapshot import PER_NODE_LABELS, ClusterSnapshot

__all__ = ["DomainIndex", "label_domains", "level_keys"]


@dataclass(frozen=True, slots=True, eq=False)
class DomainIndex:
    """Domains of one level.

    Attributes:
        keys: the node label keys that identify a domain, top → the level itself.
        ids: int64 [nodes]: the domain of each node, −1 when the node lacks one of ``keys``.
            Read-only.
        values: domain id → the label values along ``keys``.
        names: domain id → its display name: the level's value, prefixed by the values above it
            when the level has parents ("block-a/rack-1").
    """

    keys: tuple[str, ...]
    ids: np.ndarray
    values: tuple[tuple[str, ...], ...]
    names: tuple[str, ...]
    #: Node indices sorted by domain (nodes in none first) and where each domain starts in that
    #: order: ``sums`` is then one gather and one ``np.add.reduceat``. Derived in __post_init__.
    order: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    starts: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        order = np.argsort(self.ids, kind="stable")
        starts = np.searchsorted(self.ids[order], np.arange(len(self.values), dtype=np.int64))
        for a in (order, starts):
            a.setflags(write=False)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "starts", starts)

    @property
    def count(self) -> int:
        """Number of domains (nodes in none are not counted)."""
        return len(self.values)

    @property
    def level(self) -> str:
        """The level's own label key (the last of ``keys``)."""
        return self.keys[-1]

    def sums(self, per_node: np.ndarray) -> np.ndarray:
        """Σ of ``per_node`` (a [nodes] or [nodes × k] array) over each domain's nodes: shape
        [domains] or [domains × k]; nodes in no domain are left out. Integer input gives int64."""
        vals = np.asarray(per_node)
        dtype = np.int64 if vals.dtype.kind in "biu" else np.float64
        if self.count == 0:
            return np.zeros((0,) + vals.shape[1:], dtype=dtype)
        # Every domain has a node, so the starts are strictly increasing; nodes in no domain sort
        # first and fall before starts[0].
        return np.add.reduceat(vals[self.order].astype(dtype, copy=False), self.starts, axis=0)

    def nodes_of(self, domain: int) -> np.ndarray:
        """Ascending node indices of ``domain``."""
        return np.flatnonzero(self.ids == domain)

    def domain_of(self, node: int) -> int:
        """The domain of node ``node`` (−1: none)."""
        return int(self.ids[node])


def level_keys(level: str, levels: Sequence[str] = ()) -> tuple[str, ...]:
    """The label keys identifying a domain of ``level``: ``levels`` (a Topology's, top → bottom)
    up to and including ``level``, or ``(level,)`` when ``level`` is not among them."""
    levels = tuple(levels)
    if level in levels:
        return levels[: levels.index(level) + 1]
    return (level,)


def label_domains(snap: ClusterSnapshot, keys: Sequence[str]) -> DomainIndex:
    """The ``DomainIndex`` of the level whose domains are identified by label ``keys`` (top →
    the level; see ``level_keys``). Cached on ``snap`` per key tuple.

    Raises ValueError when ``keys`` is empty."""
    keys = tuple(keys)
    if not keys:
        raise ValueError("a topology level needs at least one node label key")
    return snap.structure(("topology.label_domains", keys), lambda: _build(snap, keys))  # type: ignore[return-value]


def _build(snap: ClusterSnapshot, keys: tuple[str, ...]) -> DomainIndex:
    n = len(snap.nodes)
    seen: dict[tuple[str, ...], int] = {}
    if any(k in PER_NODE_LABELS for k in keys):
        # Per-node labels are left out of the static classes: read every node.
        ids = np.full(n, -1, dtype=np.int64)
        for i, node in enumerate(snap.nodes):
            labels = node.labels
            vals = tuple(labels.get(k) for k in keys)
            if None not in vals:
                ids[i] = seen.setdefault(vals, len(seen))  # type: ignore[arg-type]
    else:
        of_class, reps = snap.projected_classes(frozenset(keys))
        per_class = np.full(len(reps), -1, dtype=np.int64)
        for c, rep in enumerate(reps):
            vals = tuple(rep.labels.get(k) for k in keys)
            if None not in vals:
                per_class[c] = seen.setdefault(vals, len(seen))  # type: ignore[arg-type]
        raw = per_class[of_class] if n else np.zeros(0, dtype=np.int64)
        # Domain ids in first-node order, whatever order the classes came in.
        mapping = _first_seen_order(raw, len(seen))
        ids = np.where(raw >= 0, mapping[np.maximum(raw, 0)], -1).astype(np.int64) if len(seen) else raw.astype(np.int64)
        seen = {vals: int(mapping[d]) for vals, d in seen.items()}
    ids.setflags(write=False)
    values = [()] * len(seen)
    for vals, d in seen.items():
        values[d] = vals
    names = tuple("/".join(v) for v in values)
    return DomainIndex(keys, ids, tuple(values), names)


def _first_seen_order(ids: np.ndarray, count: int) -> np.ndarray:
    """old domain id → new id, numbering the ``count`` domains in the order their first node
    appears in ``ids`` (−1 entries ignored; every domain has a node)."""
    inside = ids[ids >= 0]
    olds, first = np.unique(inside, return_index=True)
    mapping = np.full(count, -1, dtype=np.int64)
    mapping[olds[np.argsort(first, kind="stable")]] = np.arange(len(olds), dtype=np.int64)
    return mapping
