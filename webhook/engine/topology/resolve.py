"""A gang's topology requests resolved to domain rules over ``DomainIndex``es.

``resolve_gang`` turns each pod set's ``TopologyRequest`` into the rules the engine checks:

* ``Whole``: every pod of ``members`` (one pod set, or every pod set sharing a Kueue
  ``podset-group-name``, or — Volcano hard mode — the whole gang) in one domain of ``domains``;
  ``hard`` False for a preferred / unconstrained / soft request (told, never a denial).
* ``Slices``: the pod set's pods in slices of ``size`` pods, each slice in one domain of
  ``domains`` (Kueue ``podset-slice-required-topology`` + ``podset-slice-size``), inside the
  domain of ``within`` (a ``Whole`` rule's index) when the pod set also has a required level.
* ``Exclusive``: JobSet / LeaderWorkerSet exclusive topology: units of ``unit`` pods, each unit in
  one domain, no two units of the gang (any pod set of the same level) in one domain; for a
  LeaderWorkerSet (``together``) unit j of the leader and of the worker pod set is one group.

Level resolution (the engine's, never the adapter's; ``TopologyRequest.levels`` is ignored):

* Kueue: the level must be one of the levels of the Topology that the pod set's candidate TAS
  ResourceFlavors name (``topologyName``; ``snapshot.topology.kueue``); a domain is then
  identified by the values of the levels from the top down to it (``level_keys``). When the
  flavors name different Topologies, or none is known, the level's label alone (coarser domains:
  every proof stays sound). A level that is in none of the flavors' Topologies: Kueue's flavor
  assignment fails with "no requested topology level: <level>"
  (pkg/cache/scheduler/tas_flavor_snapshot.go, ``findTopologyAssignment``) and the workload stays
  pending — not forever, since a Topology's levels may change while kubernetes.io/hostname stays
  the lowest (apis/kueue/v1beta2/topology_types.go) and ClusterQueues may gain flavors: a
  TopologyLevelNotFound warning (Waits), no proof.
* KAI: the levels of ``snapshot.topology.kai[topology_name]``; an unknown Topology or a level
  not in it: TopologyNotFound (Waits), no proof.
* JobSet / LWS: the level's label alone.
* Volcano: the maximal HyperNodes of tier ≤ ``highest_tier`` (``hypernodes.allowed_domains``);
  soft mode, no tier, or overlapping HyperNodes: no proof.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..decision import WAITS
from ..model import (TOPOLOGY_JOBSET, TOPOLOGY_KAI, TOPOLOGY_KUEUE, TOPOLOGY_LWS, TOPOLOGY_REQUIRED, TOPOLOGY_VOLCANO,
                     Finding, PodSet, ResourceFlavor, TopologyRequest)
from ..snapshot import ClusterSnapshot
from .domains import DomainIndex, label_domains, level_keys
from .hypernodes import allowed_domains, hypernode_tier

__all__ = ["Whole", "Slices", "Exclusive", "GangTopology", "resolve_gang"]


@dataclass(frozen=True)
class Whole:
    """Every pod of the pod sets ``members`` (indices into the evaluated pod sets) in one domain.

    ``level``: what to call the level in text (a label key, "HyperNode tier ≤ 2");
    ``hard``: a required constraint (may deny) vs. a preference (told only)."""

    members: tuple[int, ...]
    domains: DomainIndex
    level: str
    hard: bool = True
    source: str = TOPOLOGY_KUEUE
    mode: str = TOPOLOGY_REQUIRED


@dataclass(frozen=True)
class Slices:
    """Pods of pod set ``member`` in slices of ``size`` pods, each slice in one domain of
    ``domains``; all inside one domain of ``within`` (a ``Whole`` index) when not None."""

    member: int
    domains: DomainIndex
    size: int
    level: str
    within: int | None = None


@dataclass(frozen=True)
class Exclusive:
    """Exclusive topology over ``domains``: pod set ``members[j]`` comes in ``units[j]`` units of
    ``unit[j]`` pods; each unit sits in one domain and no two units (of any member) share one."""

    members: tuple[int, ...]
    unit: tuple[int, ...]
    units: tuple[int, ...]
    domains: DomainIndex
    level: str
    source: str = TOPOLOGY_JOBSET
    #: LeaderWorkerSet: unit j of every member is one group (leader + its workers): they share a
    #: domain, and distinct groups do not (every member has the same number of units).
    together: bool = False


@dataclass
class GangTopology:
    """The gang's rules. ``exact``: every constraint the gang's scheduler enforces is modelled
    (a placement that satisfies the rules is one it could make); False when a request could not
    be resolved (then no placement is a Fits). ``findings``: Waits warnings of the resolution."""

    whole: list[Whole] = field(default_factory=list)
    slices: list[Slices] = field(default_factory=list)
    exclusive: list[Exclusive] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    exact: bool = True

    @property
    def hard(self) -> bool:
        """Any rule that constrains a placement (a required Whole, slices, exclusivity)."""
        return any(w.hard for w in self.whole) or bool(self.slices) or bool(self.exclusive)

    @property
    def any(self) -> bool:
        return bool(self.whole or self.slices or self.exclusive or self.findings)


def resolve_gang(snap: ClusterSnapshot, pod_sets: Sequence[PodSet],
                 flavors: Mapping[str, list[ResourceFlavor]] | None = None) -> GangTopology | None:
    """The rules of ``pod_sets`` (the evaluated pod sets, in order) on ``snap``, or None when no
    pod set has a topology request. ``flavors``: pod-set name → the Kueue flavors the quota step
    considered (``QuotaResult.candidate_flavors``)."""
    if not any(ps.topology is not None for ps in pod_sets):
        return None
    gt = GangTopology()
    groups: dict[tuple, list[int]] = {}
    group_dom: dict[tuple, tuple[DomainIndex, str, TopologyRequest]] = {}
    excl: dict[tuple, list[tuple[int, int, int]]] = {}
    excl_dom: dict[tuple, tuple[DomainIndex, str, str]] = {}
    volcano: list[int] = []
    volcano_req: TopologyRequest | None = None
    for i, ps in enumerate(pod_sets):
        t = ps.topology
        if t is None:
            continue
        if t.source == TOPOLOGY_VOLCANO:
            volcano.append(i)
            volcano_req = volcano_req or t
            continue
        levels = _levels(snap, ps, t, (flavors or {}).get(ps.name), gt)
        if levels is None:
            continue
        if t.exclusive:
            if not t.level or not t.unit_size or t.unit_size <= 0 or ps.count % t.unit_size:
                gt.exact = False
                continue
            dom = label_domains(snap, level_keys(t.level, levels))
            key = (t.source, dom.keys)
            excl.setdefault(key, []).append((i, t.unit_size, ps.count // t.unit_size))
            excl_dom[key] = (dom, t.level, t.source)
            continue
        whole_at = None
        if t.level:
            dom = label_domains(snap, level_keys(t.level, levels))
            hard = t.mode == TOPOLOGY_REQUIRED
            if t.group and hard:
                key = (t.source, t.group, dom.keys)
                groups.setdefault(key, []).append(i)
                group_dom[key] = (dom, t.level, t)
                whole_at = ("group", key)
            else:
                gt.whole.append(Whole((i,), dom, t.level, hard, t.source, t.mode))
                whole_at = ("own", len(gt.whole) - 1) if hard else None
        if t.slice_level and t.slice_size:
            if t.slice_size <= 0 or ps.count % t.slice_size:
                gt.exact = False  # Kueue validates this at creation; nothing to prove here
                continue
            sdom = label_domains(snap, level_keys(t.slice_level, levels))
            gt.slices.append(Slices(i, sdom, t.slice_size, t.slice_level, whole_at))  # type: ignore[arg-type]
    for key, members in groups.items():
        dom, level, t = group_dom[key]
        gt.whole.append(Whole(tuple(members), dom, level, True, t.source, t.mode))
        idx = len(gt.whole) - 1
        gt.slices = [Slices(s.member, s.domains, s.size, s.level, idx) if s.within == ("group", key) else s for s in gt.slices]
    gt.slices = [Slices(s.member, s.domains, s.size, s.level, s.within[1]) if isinstance(s.within, tuple) else s
                 for s in gt.slices]
    for key, rows in excl.items():
        dom, level, source = excl_dom[key]
        if source == TOPOLOGY_LWS and len(rows) > 1:
            # A LeaderWorkerSet group spans its leader and worker pod sets: unit j of each is one
            # group (leaderworkerset.sigs.k8s.io/exclusive-topology puts a group in a domain of its
            # own). Unequal unit counts cannot be paired: each pod set alone (a relaxation), unproven.
            if len({r[2] for r in rows}) == 1:
                gt.exclusive.append(Exclusive(tuple(r[0] for r in rows), tuple(r[1] for r in rows),
                                              tuple(r[2] for r in rows), dom, level, source, together=True))
                continue
            gt.exact = False
            gt.findings.append(Finding("TopologyUnresolved", WAITS,
                "LeaderWorkerSet exclusive topology over pod sets with different group counts: each is checked alone; "
                "placement unproven", {"source": source, "mode": TOPOLOGY_REQUIRED, "level": level}))
            for r in rows:
                gt.exclusive.append(Exclusive((r[0],), (r[1],), (r[2],), dom, level, source))
            continue
        gt.exclusive.append(Exclusive(tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows),
                                      dom, level, source))
    if volcano and volcano_req is not None:
        _volcano(snap, pod_sets, volcano, volcano_req, gt)
    return gt


def _levels(snap: ClusterSnapshot, ps: PodSet, t: TopologyRequest, flavors: list[ResourceFlavor] | None,
            gt: GangTopology) -> tuple[str, ...] | None:
    """The Topology levels a domain of ``t.level`` is read against (() = the label alone), or
    None when the request cannot be resolved (a warning is added)."""
    wanted = [x for x in (t.level, t.slice_level) if x]
    if t.source == TOPOLOGY_KUEUE:
        tops = []
        for f in flavors or ():
            if f.topology_name and f.topology_name in snap.topology.kueue:
                tops.append(tuple(snap.topology.kueue[f.topology_name]))
        if not tops:
            return ()
        fitting = [lv for lv in tops if all(w in lv for w in wanted)]
        if not fitting:
            missing = next(w for w in wanted if not all(w in lv for lv in tops))
            gt.exact = False
            gt.findings.append(Finding("TopologyLevelNotFound", WAITS,
                f"pod set {ps.name}: topology level {missing} is not a level of the Topology "
                f"{', '.join(sorted({f.topology_name for f in flavors or () if f.topology_name}))} of its ResourceFlavor; "
                "Kueue leaves it pending (\"no requested topology level\") until the Topology or the ClusterQueue changes",
                {"pod_set": ps.name, "source": t.source, "mode": t.mode, "level": missing}))
            return None
        return fitting[0] if len(set(fitting)) == 1 else ()
    if t.source == TOPOLOGY_KAI:
        levels = snap.topology.kai.get(t.topology_name or "")
        if levels is None or not all(w in levels for w in wanted):
            gt.exact = False
            what = f"Topology {t.topology_name} is not in the cluster data" if levels is None else \
                f"topology level {next(w for w in wanted if w not in levels)} is not a level of Topology {t.topology_name}"
            gt.findings.append(Finding("TopologyNotFound", WAITS,
                f"pod set {ps.name}: its KAI {what}; its placement is not checked",
                {"pod_set": ps.name, "source": t.source, "mode": t.mode, "level": t.level or ""}))
            return None
        return tuple(levels)
    if t.source in (TOPOLOGY_JOBSET, TOPOLOGY_LWS):
        return ()
    return ()


def _volcano(snap: ClusterSnapshot, pod_sets: Sequence[PodSet], members: list[int], t: TopologyRequest,
             gt: GangTopology) -> None:
    """Volcano hard mode: the whole gang in one allowed HyperNode; soft mode: a preference."""
    if not snap.topology.hypernodes:
        # No HyperNode in the cluster data: they may exist but be unread (no RBAC, a dump taken
        # without them); an assumption is no proof, so the hard mode is told, never a denial.
        if t.mode == TOPOLOGY_REQUIRED:
            gt.findings.append(Finding("TopologyUnresolved", WAITS,
                "the gang must sit in one HyperNode (Volcano networkTopology hard), but the cluster data holds no "
                "HyperNode; its placement is not checked", {"source": t.source, "mode": t.mode, "level": "HyperNode"}))
        return
    tier = hypernode_tier(snap, t.highest_tier, t.highest_tier_name)
    if tier is None:
        return  # no tier: Volcano applies no hard constraint (job_info.go IsHardTopologyMode)
    dom = allowed_domains(snap, tier)
    level = f"HyperNode tier ≤ {tier}"
    if dom is None:
        if t.mode == TOPOLOGY_REQUIRED:
            gt.exact = False
            gt.findings.append(Finding("TopologyUnresolved", WAITS,
                f"the gang must sit in one HyperNode of tier ≤ {tier}, but the allowed HyperNodes overlap (or a member "
                "pattern does not compile); its placement is not checked",
                {"source": t.source, "mode": t.mode, "level": level}))
        return
    gt.whole.append(Whole(tuple(range(len(pod_sets))), dom, level, t.mode == TOPOLOGY_REQUIRED, t.source, t.mode))
