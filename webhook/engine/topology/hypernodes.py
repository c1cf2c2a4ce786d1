"""Volcano HyperNodes as topology domains: the node set of each HyperNode, and the allowed ones.

A HyperNode (topology.volcano.sh/v1alpha1) of ``tier`` holds nodes and lower-tier HyperNodes
(``spec.members``). Members are selected by exact name, by a regular expression or by node
labels (volcano pkg/util/hypernode/member_selector.go ``GetMembers``: an exact name is taken as
is; a regex is Go's ``regexp.MatchString`` — a match *anywhere* in the name, not anchored; a
label selector matches node labels). A Job in hard mode with ``highestTierAllowed`` t (or a
``highestTierName`` the session translates to a tier: pkg/scheduler/framework/session.go
``translateHighestTierNameToAllowed``) must sit inside one HyperNode of tier ≤ t
(pkg/scheduler/api/job_info.go ``IsHardTopologyMode``; without a tier there is no constraint).

``allowed_domains`` gives the maximal allowed HyperNodes as a ``DomainIndex`` when they are
disjoint (the usual tree); overlapping ones give None, and the engine then proves nothing.
A regex Python's ``re`` cannot compile gives None too. Cached per tier on the snapshot
(``ClusterSnapshot.structure``). Pure: no I/O, no clock.
"""

from __future__ import annotations

import re

import numpy as np

from ..model import HyperNode
from ..snapshot import ClusterSnapshot
from .domains import DomainIndex

__all__ = ["HYPERNODE_KEY", "hypernode_tier", "hypernode_nodes", "allowed_domains"]

#: The pseudo label key a HyperNode ``DomainIndex`` carries in ``keys`` (HyperNodes are not labels).
HYPERNODE_KEY = "topology.volcano.sh/hypernode"


class _BadPattern(Exception):
    pass


def hypernode_tier(snap: ClusterSnapshot, highest_tier: int | None, highest_tier_name: str | None) -> int | None:
    """The highest allowed tier: ``highest_tier`` when set, else the tier of the HyperNodes whose
    ``tierName`` is ``highest_tier_name`` (None when no HyperNode has that name: Volcano then
    skips the translation and the Job has no hard constraint)."""
    if highest_tier is not None:
        return highest_tier
    if highest_tier_name:
        tiers = {h.tier for h in snap.topology.hypernodes.values() if h.tier_name == highest_tier_name}
        if len(tiers) == 1:
            return tiers.pop()
    return None


def hypernode_nodes(snap: ClusterSnapshot) -> dict[str, np.ndarray] | None:
    """HyperNode name → bool [nodes] of the nodes under it (nested HyperNodes resolved, cycles
    cut), or None when a member's regex cannot be compiled. Cached on ``snap``."""
    def build():
        try:
            return _resolve_all(snap)
        except _BadPattern:
            return None
    return snap.structure(("topology.hypernode_nodes",), build)  # type: ignore[return-value]


def _resolve_all(snap: ClusterSnapshot) -> dict[str, np.ndarray]:
    hns = snap.topology.hypernodes
    n = len(snap.nodes)
    names = [nd.name for nd in snap.nodes]
    direct: dict[str, np.ndarray] = {}
    children: dict[str, set[str]] = {}
    for h in hns.values():
        mask = np.zeros(n, dtype=bool)
        kids: set[str] = set()
        for m in h.members:
            if m.kind == "HyperNode":
                kids |= _match_names(m, list(hns))
            else:
                if m.exact is not None:
                    i = snap.node_index.get(m.exact)
                    if i is not None:
                        mask[i] = True
                elif m.regex is not None:
                    rx = _compile(m.regex)
                    mask |= np.fromiter((rx.search(x) is not None for x in names), dtype=bool, count=n)
                elif m.labels:
                    want = dict(m.labels)
                    mask |= np.fromiter((all(nd.labels.get(k) == v for k, v in want.items()) for nd in snap.nodes),
                                        dtype=bool, count=n)
        direct[h.name] = mask
        children[h.name] = kids - {h.name}
    out: dict[str, np.ndarray] = {}

    def full(name: str, stack: frozenset[str]) -> np.ndarray:
        got = out.get(name)
        if got is not None:
            return got
        mask = direct[name].copy()
        for k in children.get(name, ()):
            if k in direct and k not in stack:
                mask |= full(k, stack | {name})
        mask.setflags(write=False)
        out[name] = mask
        return mask

    for name in hns:
        full(name, frozenset())
    return out


def _compile(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise _BadPattern(str(e)) from e


def _match_names(m, names: list[str]) -> set[str]:
    if m.exact is not None:
        return {m.exact}
    if m.regex is not None:
        rx = _compile(m.regex)
        return {x for x in names if rx.search(x) is not None}
    return set()


def allowed_domains(snap: ClusterSnapshot, tier: int) -> DomainIndex | None:
    """The maximal HyperNodes of tier ≤ ``tier`` as a ``DomainIndex`` (names: HyperNode names,
    keys: ``(HYPERNODE_KEY,)``), or None when two of them share a node (no partition: no proof)
    or a regex cannot be compiled. Nodes under no allowed HyperNode are in no domain (−1)."""
    return snap.structure(("topology.hypernode_domains", tier), lambda: _allowed(snap, tier))  # type: ignore[return-value]


def _allowed(snap: ClusterSnapshot, tier: int) -> DomainIndex | None:
    sets = hypernode_nodes(snap)
    if sets is None:
        return None
    hns: dict[str, HyperNode] = dict(snap.topology.hypernodes)
    cands = sorted((h for h in hns.values() if h.tier <= tier and sets[h.name].any()), key=lambda h: (-h.tier, h.name))
    counts = {h.name: int(np.count_nonzero(sets[h.name])) for h in cands}
    kept: list[HyperNode] = []
    for h in sorted(cands, key=lambda h: (-counts[h.name], -h.tier, h.name)):
        m = sets[h.name]
        if any(not (m & ~sets[k.name]).any() for k in kept):
            continue  # inside a kept (larger or equal) HyperNode: never a better choice
        kept.append(h)
    ids = np.full(len(snap.nodes), -1, dtype=np.int64)
    for d, h in enumerate(kept):
        m = sets[h.name]
        if (ids[m] >= 0).any():
            return None
        ids[m] = d
    ids.setflags(write=False)
    return DomainIndex((HYPERNODE_KEY,), ids, tuple((h.name,) for h in kept), tuple(h.name for h in kept))
