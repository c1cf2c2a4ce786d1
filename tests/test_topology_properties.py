"""Topology rules (webhook.engine.topology) against brute force on small clusters with blocks and
racks, issue #13: a NeverFits always has no valid placement on the repaired empty cluster; a
Fits comes with a placement that respects every domain rule and today's free resources.

The brute force and the rule checker below are written from the requests' meaning (label values,
the HyperNodes this file builds), not from the engine's DomainIndex: every placement of every
pod set over its eligible nodes (``ever_mask``) is enumerated, resources checked per node on
``ever_alloc`` (requested columns, kube-scheduler's NodeResourcesFit).
Plus the field cases C38 / C40 (handed.md) with Kueue TAS, and the resolution rules.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from builders import GPU, gang, node, pod, pod_set, snapshot, taint
from webhook.engine.evaluate import evaluate
from webhook.engine.model import (FlavorQuotas, HyperNode, HyperNodeMember, KueueState, LocalQueue, ResourceFlavor,
                                  ResourceGroup, ResourceQuota, TopologyRequest, TopologyState, ClusterQueue)
from webhook.engine.options import EngineOptions
from webhook.engine.podsets import evaluate_pod_set

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BLOCK, RACK, HOST = "block", "rack", "kubernetes.io/hostname"


# ----------------------------------------------------------------------------- instances


@st.composite
def clusters(draw):
    n = draw(st.integers(2, 6))
    nodes, pods = [], []
    for i in range(n):
        labels = {BLOCK: f"b{i // 3}"}
        if draw(st.integers(0, 5)):  # now and then a node without a rack label
            labels[RACK] = f"r{draw(st.integers(0, 2))}"
        gpu = draw(st.sampled_from([0, 4, 8, 8]))
        bad = draw(st.sampled_from(["", "", "", "cordon", "notready", "taint"]))
        nodes.append(node(f"n{i}", gpu=gpu, cpu=64, labels=labels, unschedulable=bad == "cordon",
                          ready=bad != "notready", taints=[taint("maint", "x")] if bad == "taint" else None))
        used = draw(st.sampled_from([0, 0, 2, 4, 8]))
        if used and gpu >= used:
            pods.append(pod(f"p{i}", f"n{i}", gpu=used))
    return nodes, pods


def _topology(draw, count: int, group: str | None):
    kind = draw(st.sampled_from(["required", "required", "preferred", "unconstrained", "slices", "slices-in", "exclusive",
                                 "volcano", "volcano-soft", "none"]))
    level = draw(st.sampled_from([RACK, BLOCK, HOST]))
    divisors = [d for d in (1, 2, 3, 4) if count % d == 0]
    if kind == "required":
        return TopologyRequest("kueue", "required", level=level, group=group)
    if kind == "preferred":
        return TopologyRequest("kueue", "preferred", level=level)
    if kind == "unconstrained":
        return TopologyRequest("kueue", "unconstrained")
    if kind in ("slices", "slices-in"):
        return TopologyRequest("kueue", "required" if kind == "slices-in" else "unconstrained",
                               level=BLOCK if kind == "slices-in" else None, slice_level=draw(st.sampled_from([RACK, HOST])),
                               slice_size=draw(st.sampled_from(divisors)))
    if kind == "exclusive":
        return TopologyRequest("jobset", "required", level=draw(st.sampled_from([RACK, BLOCK])), exclusive=True,
                               unit_size=draw(st.sampled_from(divisors)))
    if kind in ("volcano", "volcano-soft"):
        return TopologyRequest("volcano", "required" if kind == "volcano" else "preferred",
                               highest_tier=draw(st.sampled_from([1, 2])))
    return None


@st.composite
def gangs(draw):
    k = draw(st.integers(1, 2))
    group = "g" if draw(st.booleans()) else None
    sets = []
    volcano = None
    for j in range(k):
        count = draw(st.integers(1, 4))
        t = _topology(draw, count, group)
        if t is not None and t.source == "volcano":  # one Volcano request per Job, on every task
            volcano = volcano or t
            t = volcano
        sets.append(pod_set(f"s{j}", count, gpu=draw(st.sampled_from([2, 4, 8])), cpu=draw(st.sampled_from([1, 16, 40])),
                            topology=t))
    if volcano is not None:
        sets = [s if s.topology is not None and s.topology.source == "volcano" else
                pod_set(s.name, s.count, gpu=s.requests.get(GPU, 0), cpu=s.requests["cpu"] / 1000, topology=volcano)
                for s in sets]
    return gang(*sets, kind="PyTorchJob")


def _hypernodes(nodes) -> dict[str, HyperNode]:
    """Tier 1: one HyperNode per (block, rack) listing its nodes by exact name; tier 2: one per
    block whose members are its racks by regex; nodes without a rack sit in their block by label."""
    racks: dict[tuple[str, str], list[str]] = {}
    for n in nodes:
        if RACK in n.labels:
            racks.setdefault((n.labels[BLOCK], n.labels[RACK]), []).append(n.name)
    out = {}
    for (b, r), names in racks.items():
        out[f"{b}-{r}"] = HyperNode(f"{b}-{r}", 1, tuple(HyperNodeMember("Node", exact=x) for x in names))
    for b in {n.labels[BLOCK] for n in nodes}:
        out[f"sw-{b}"] = HyperNode(f"sw-{b}", 2, (HyperNodeMember("HyperNode", regex=f"^{b}-"),
                                                   HyperNodeMember("Node", labels=((BLOCK, b),))))
    return out


def _volcano_domain(n, tier: int) -> str | None:
    """The allowed HyperNode a node is in, from how ``_hypernodes`` built them."""
    if tier >= 2:
        return f"sw-{n.labels[BLOCK]}"
    return f"{n.labels[BLOCK]}-{n.labels[RACK]}" if RACK in n.labels else None


# ----------------------------------------------------------------------------- the rules, from labels


def _dom(n, level: str) -> str | None:
    return n.labels.get(level)


def rule_errors(nodes, g, placement: dict[str, dict[int, int]]) -> list[str]:
    """What ``placement`` (pod set name → {node index: pods}) breaks among the gang's hard rules."""
    errs = []
    groups: dict[str, set] = {}
    excl_owner: dict[tuple, str] = {}
    for ps in g.pod_sets:
        t = ps.topology
        got = placement.get(ps.name, {})
        if sum(got.values()) != ps.count:
            errs.append(f"{ps.name}: {sum(got.values())} of {ps.count} pods")
        if t is None:
            continue
        used = [i for i, c in got.items() if c]
        if t.source == "volcano":
            if t.mode == "required":
                key = ("volcano",)
                doms = {_volcano_domain(nodes[i], t.highest_tier) for i in used}
                groups.setdefault(key, set()).update(doms)
            continue
        if t.exclusive:
            per: dict[str | None, int] = {}
            for i in used:
                d = _dom(nodes[i], t.level)
                per[d] = per.get(d, 0) + got[i]
            for d, v in per.items():
                if d is None or v != t.unit_size:
                    errs.append(f"{ps.name}: {v} pods in {t.level} {d}, unit {t.unit_size}")
                elif (t.level, d) in excl_owner:
                    errs.append(f"{ps.name}: {t.level} {d} already holds a unit of {excl_owner[(t.level, d)]}")
                else:
                    excl_owner[(t.level, d)] = ps.name
            continue
        if t.mode == "required" and t.level:
            doms = {_dom(nodes[i], t.level) for i in used}
            if t.group:
                groups.setdefault(("group", t.group, t.level), set()).update(doms)
            elif None in doms or len(doms) > 1:
                errs.append(f"{ps.name}: spans {t.level} {doms}")
        if t.slice_level and t.slice_size:
            per = {}
            for i in used:
                d = _dom(nodes[i], t.slice_level)
                per[d] = per.get(d, 0) + got[i]
            if None in per or any(v % t.slice_size for v in per.values()):
                errs.append(f"{ps.name}: slices of {t.slice_size} per {t.slice_level}: {per}")
    for key, doms in groups.items():
        if None in doms or len(doms) > 1:
            errs.append(f"{key}: spans {doms}")
    return errs


def _fits(avail_row, loads) -> bool:
    return all(v <= 0 or v <= a for v, a in zip(loads, avail_row))


def brute_placements(snap, g, view: str):
    """Every placement (pod set name → {node: pods}) whose per-node loads fit ``ever_alloc`` /
    ``free`` on the nodes each pod set's filters pass; yields them lazily."""
    opts = EngineOptions()
    evs = [evaluate_pod_set(snap, ps, None, None, opts) for ps in g.pod_sets]
    avail = snap.ever_alloc if view == "ever" else snap.free
    per_set = []
    for ev in evs:
        k = ev.k_ever if view == "ever" else ev.k_now
        idx = [int(i) for i in np.flatnonzero(k)]
        opts_ = []
        for combo in itertools.product(*[range(int(k[i]) + 1) for i in idx]):
            if sum(combo) == ev.ps.count:
                opts_.append({i: c for i, c in zip(idx, combo) if c})
        per_set.append(opts_)
    for choice in itertools.product(*per_set):
        load = np.zeros_like(avail)
        for ev, pl in zip(evs, choice):
            for i, c in pl.items():
                load[i, ev.shape.cols] += ev.shape.vals * c
        if all(_fits(avail[i], load[i]) for i in range(len(snap.nodes)) if load[i].any()):
            yield {ev.ps.name: pl for ev, pl in zip(evs, choice)}


def _snap(nodes, pods):
    return snapshot(nodes, pods, topology=TopologyState(hypernodes=_hypernodes(nodes)))


@PROPS
@given(clusters(), gangs())
def test_never_fits_has_no_valid_placement_and_fits_places_validly(cl, g):
    nodes, pods = cl
    snap = _snap(nodes, pods)
    d = evaluate(snap, g)
    event(d.verdict)
    if d.verdict == "NeverFits":
        for pl in brute_placements(snap, g, "ever"):
            assert rule_errors(nodes, g, pl), (d.message, pl)
    if d.verdict == "Fits":
        assert d.placement["when"] == "now"
        pl = {name: {snap.node_index[n]: c for n, c in rows} for name, rows in d.placement["pod_sets"].items()}
        assert not rule_errors(nodes, g, pl), (d.placement, rule_errors(nodes, g, pl))
        # The placement fits today's free resources, on nodes each pod set may use now.
        evs = {ps.name: evaluate_pod_set(snap, ps, None, None, EngineOptions()) for ps in g.pod_sets}
        load = np.zeros_like(snap.free)
        for name, rows in pl.items():
            ev = evs[name]
            for i, c in rows.items():
                assert ev.now_mask[i]
                load[i, ev.shape.cols] += ev.shape.vals * c
        for i in range(len(nodes)):
            if load[i].any():
                assert _fits(snap.free[i], load[i])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), gangs())
def test_a_valid_placement_now_is_never_a_denial(cl, g):
    """The converse direction of soundness, on today's view: when brute force finds a valid
    placement now, the engine never says NeverFits (and a single pod set alone is found)."""
    nodes, pods = cl
    snap = _snap(nodes, pods)
    valid = next((pl for pl in brute_placements(snap, g, "now") if not rule_errors(nodes, g, pl)), None)
    d = evaluate(snap, g)
    if valid is not None:
        event("valid now")
        assert d.verdict != "NeverFits", d.message


# ----------------------------------------------------------------------------- fixed cases


def _racks(n_racks: int, per_rack: int, **kw):
    return [node(f"r{r}-n{i}", labels={BLOCK: f"b{r // 2}", RACK: f"r{r}"}, **kw) for r in range(n_racks) for i in range(per_rack)]


def test_required_rack_never_fits_names_the_level_and_the_numbers():
    snap = snapshot(_racks(4, 4))
    g = gang(pod_set("worker", 5, gpu=8, topology=TopologyRequest("kueue", "required", level=RACK)), kind="PyTorchJob")
    d = evaluate(snap, g)
    assert d.verdict == "NeverFits" and d.reasons == ["TopologyPlacementFailed"]
    f = d.findings[0]
    assert (f.data["level"], f.data["domains"], f.data["needed_pods"], f.data["best_domain_pods"], f.data["when"]) == \
        (RACK, 4, 5, 4, "ever")
    assert "no rack domain has more than 4 of the 5 nodes" in f.message


def test_required_rack_waits_with_numbers_first_not_fragmented():
    nodes = _racks(3, 4)
    # Each rack has one busy node: 3 free nodes per rack, 9 free in all, 4 needed in one rack.
    pods = [pod(f"p{r}", f"r{r}-n0", gpu=8) for r in range(3)]
    g = gang(pod_set("worker", 4, gpu=8, topology=TopologyRequest("kueue", "required", level=RACK)), kind="PyTorchJob")
    d = evaluate(snapshot(nodes, pods), g)
    assert d.verdict == "Waits" and d.reasons[0] == "TopologyPlacementFailed"
    assert "Fragmented" not in d.reasons
    f = next(f for f in d.findings if f.code == "TopologyPlacementFailed")
    assert f.message.startswith("72 nvidia.com/gpu free and 9 whole node(s) free, but no rack domain has more than 3 of the 4")
    assert (f.data["best_domain_nodes_free"], f.data["deficit_pods"], f.data["whole_nodes_free"]) == (3, 1, 9)
    assert d.topology["worker"]["deficit_nodes"] == 1 and d.topology["worker"]["best_domain"] == "r0"
    assert d.placement["when"] == "ever"


def test_group_shares_one_domain():
    snap = snapshot(_racks(2, 3))
    t = TopologyRequest("kueue", "required", level=RACK, group="leader-workers")
    g = gang(pod_set("leader", 1, gpu=8, topology=t), pod_set("workers", 3, gpu=8, topology=t), kind="PyTorchJob")
    d = evaluate(snap, g)  # 4 whole nodes in one rack of 3: never
    assert d.verdict == "NeverFits" and d.findings[0].data["pod_sets"] == ["leader", "workers"]
    g = gang(pod_set("leader", 1, gpu=8, topology=t), pod_set("workers", 2, gpu=8, topology=t), kind="PyTorchJob")
    d = evaluate(snap, g)
    assert d.verdict == "Fits"
    racks = {n.split("-")[0] for rows in d.placement["pod_sets"].values() for n, _ in rows}
    assert len(racks) == 1


def test_exclusive_hall_condition_over_pod_sets():
    # Racks 0,1 have 8-GPU nodes, rack 2 only 4-GPU nodes: a unit of 8-GPU pods fits racks 0, 1.
    nodes = _racks(2, 2) + [node(f"r2-n{i}", gpu=4, labels={BLOCK: "b1", RACK: "r2"}) for i in range(4)]
    big = TopologyRequest("jobset", "required", level=RACK, exclusive=True, unit_size=2)
    g = gang(pod_set("a", 2, gpu=8, topology=big), pod_set("b", 4, gpu=8, topology=big), kind="JobSet")
    d = evaluate(snapshot(nodes), g)  # 3 units of 8-GPU pods, 2 racks can take one: never
    assert d.verdict == "NeverFits"
    f = d.findings[0]
    assert (f.data["units_needed"], f.data["units_possible"], f.data["rule"]) == (3, 2, "exclusive")
    g = gang(pod_set("a", 2, gpu=4, topology=big), pod_set("b", 4, gpu=8, topology=big), kind="JobSet")
    d = evaluate(snapshot(nodes), g)
    assert d.verdict == "Fits"
    rack_of = {"a": set(), "b": set()}
    for name, rows in d.placement["pod_sets"].items():
        rack_of[name] |= {n.split("-")[0] for n, _ in rows}
    assert rack_of["a"] == {"r2"} and len(rack_of["b"]) == 2 and not rack_of["a"] & rack_of["b"]


def test_slices_inside_a_block():
    snap = snapshot(_racks(4, 3))  # blocks b0 = racks 0,1; b1 = racks 2,3; 3 nodes each
    t = TopologyRequest("kueue", "required", level=BLOCK, slice_level=RACK, slice_size=2)
    d = evaluate(snap, gang(pod_set("w", 6, gpu=8, topology=t), kind="PyTorchJob"))
    assert d.verdict == "NeverFits"  # a block's racks hold 1 + 1 whole slices of 2, not 3
    d = evaluate(snap, gang(pod_set("w", 4, gpu=8, topology=t), kind="PyTorchJob"))
    assert d.verdict == "Fits"


def test_preferred_and_unconstrained_never_deny():
    snap = snapshot(_racks(2, 2))
    for t in (TopologyRequest("kueue", "preferred", level=RACK), TopologyRequest("kueue", "unconstrained")):
        d = evaluate(snap, gang(pod_set("w", 4, gpu=8, topology=t), kind="PyTorchJob"))
        assert d.verdict == "Fits", t
        assert d.topology["w"]["mode"] == t.mode


def test_kueue_level_resolved_through_the_flavor_topology():
    # rack "r0" exists in both blocks: with the Topology's levels (block, rack) they are two racks.
    nodes = [node(f"{b}-n{i}", labels={BLOCK: b, RACK: "r0"}) for b in ("b0", "b1") for i in range(2)]
    fq = (FlavorQuotas("tas", {GPU: ResourceQuota(10**6), "cpu": ResourceQuota(10**9), "memory": ResourceQuota(2**60)}),)
    kq = KueueState(flavors={"tas": ResourceFlavor("tas", topology_name="default")},
                    cluster_queues={"cq": ClusterQueue("cq", (ResourceGroup((GPU, "cpu", "memory"), fq),))},
                    local_queues={("default", "lq"): LocalQueue("default", "lq", "cq")})
    g = gang(pod_set("w", 3, gpu=8, topology=TopologyRequest("kueue", "required", level=RACK)), kind="PyTorchJob", queue="lq")
    d = evaluate(snapshot(nodes, kueue=kq, topology=TopologyState(kueue={"default": (BLOCK, RACK, HOST)})), g)
    assert d.verdict == "NeverFits" and d.findings[0].data["best_domain"] in ("b0/r0", "b1/r0")
    d = evaluate(snapshot(nodes, kueue=kq), g)  # no Topology known: the rack label alone, 4 nodes in "r0"
    assert d.verdict == "Fits"
    # A level that is not in the flavor's Topology: Kueue keeps it pending; a warning, never a denial.
    g = gang(pod_set("w", 3, gpu=8, topology=TopologyRequest("kueue", "required", level="zone")), kind="PyTorchJob", queue="lq")
    d = evaluate(snapshot(nodes, kueue=kq, topology=TopologyState(kueue={"default": (BLOCK, RACK, HOST)})), g)
    assert d.verdict == "Waits" and "TopologyLevelNotFound" in d.reasons


def test_volcano_hard_mode_one_hypernode_and_overlap_is_no_proof():
    nodes = _racks(2, 2)
    hn = _hypernodes(nodes)
    t = TopologyRequest("volcano", "required", highest_tier=1)
    g = gang(pod_set("a", 2, gpu=8, topology=t), pod_set("b", 1, gpu=8, topology=t), kind="Job")
    d = evaluate(snapshot(nodes, topology=TopologyState(hypernodes=hn)), gang(*g.pod_sets, kind="PyTorchJob"))
    assert d.verdict == "NeverFits" and d.findings[0].data["level"] == "HyperNode tier ≤ 1"
    t2 = TopologyRequest("volcano", "required", highest_tier=2)
    g2 = gang(pod_set("a", 2, gpu=8, topology=t2), pod_set("b", 1, gpu=8, topology=t2), kind="PyTorchJob")
    assert evaluate(snapshot(nodes, topology=TopologyState(hypernodes=hn)), g2).verdict == "Fits"
    # Two tier-1 HyperNodes sharing a node: no partition, no proof.
    hn2 = dict(hn, extra=HyperNode("extra", 1, (HyperNodeMember("Node", exact="r0-n0"), HyperNodeMember("Node", exact="r1-n0"))))
    d = evaluate(snapshot(nodes, topology=TopologyState(hypernodes=hn2)), gang(*g.pod_sets, kind="PyTorchJob"))
    assert d.verdict == "Waits" and "TopologyUnresolved" in d.reasons
    # highestTierName resolves through the HyperNodes' tierName; an unknown name is no constraint.
    hn3 = {k: HyperNode(v.name, v.tier, v.members, "rack" if v.tier == 1 else "spine") for k, v in hn.items()}
    tn = TopologyRequest("volcano", "required", highest_tier_name="rack")
    g3 = gang(pod_set("a", 3, gpu=8, topology=tn), kind="PyTorchJob")
    assert evaluate(snapshot(nodes, topology=TopologyState(hypernodes=hn3)), g3).verdict == "NeverFits"
    g4 = gang(pod_set("a", 3, gpu=8, topology=TopologyRequest("volcano", "required", highest_tier_name="nope")), kind="PyTorchJob")
    assert evaluate(snapshot(nodes, topology=TopologyState(hypernodes=hn3)), g4).verdict == "Fits"


def _tas_kueue(nominal: int) -> KueueState:
    fq = (FlavorQuotas("tas", {GPU: ResourceQuota(nominal), "cpu": ResourceQuota(10**9), "memory": ResourceQuota(2**60)}),)
    return KueueState(flavors={"tas": ResourceFlavor("tas", topology_name="default")},
                      cluster_queues={"cq": ClusterQueue("cq", (ResourceGroup((GPU, "cpu", "memory"), fq),))},
                      local_queues={("default", "lq"): LocalQueue("default", "lq", "cq")})


def test_c38_tas_does_not_count_a_tainted_node():
    """C38 (kubernetes-sigs/kueue#6868): hostname-level TAS; n3 tainted maintenance=true:NoSchedule; 3 × 8 GPUs,
    quota 24. Usable capacity excludes n3: NeverFits for a permanent taint, Waits for a transient one."""
    nodes = [node("n1"), node("n2"), node("n3", taints=[taint("maintenance", "true")])]
    topo = TopologyState(kueue={"default": (HOST,)})
    g = gang(pod_set("t", 3, gpu=8, topology=TopologyRequest("kueue", "unconstrained")), kind="Job", queue="lq")
    d = evaluate(snapshot(nodes, kueue=_tas_kueue(24), topology=topo), g)
    assert d.verdict == "NeverFits" and d.reasons == ["ExceedsClusterCapacity"]
    assert d.nodes["samples"]["node(s) had untolerated taint(s)"] == ["n3"]
    d = evaluate(snapshot(nodes, kueue=_tas_kueue(24), topology=topo), g, EngineOptions(transient_taints=frozenset({"maintenance"})))
    assert d.verdict == "Waits" and "NodesTransientlyTainted" in d.reasons
    # Required at hostname level: all three pods on one host, never, whatever the taint.
    g = gang(pod_set("t", 3, gpu=8, topology=TopologyRequest("kueue", "required", level=HOST)), kind="Job", queue="lq")
    d = evaluate(snapshot(nodes, kueue=_tas_kueue(24), topology=topo), g, EngineOptions(transient_taints=frozenset({"maintenance"})))
    assert d.verdict == "NeverFits" and "TopologyPlacementFailed" in d.reasons


def test_c40_tas_with_a_notready_node_waits():
    """C40 (kubernetes-sigs/kueue#3401): n3 NotReady; 3 × 8 GPUs under TAS: usable 16 < 24 now, Waits on n3."""
    nodes = [node("n1", labels={RACK: "r1"}), node("n2", labels={RACK: "r1"}), node("n3", ready=False, labels={RACK: "r1"})]
    topo = TopologyState(kueue={"default": (RACK, HOST)})
    g = gang(pod_set("t", 3, gpu=8, topology=TopologyRequest("kueue", "required", level=RACK)), kind="Job", queue="lq")
    d = evaluate(snapshot(nodes, kueue=_tas_kueue(24), topology=topo), g)
    assert d.verdict == "Waits" and "NodesNotReady" in d.reasons and "TopologyPlacementFailed" in d.reasons
    f = next(f for f in d.findings if f.code == "TopologyPlacementFailed")
    assert (f.data["when"], f.data["best_domain"], f.data["best_domain_pods"], f.data["needed_pods"]) == ("now", "r1", 2, 3)


# ----------------------------------------------------------------------------- fixes at domain level


def test_fixes_relax_the_topology_and_free_the_closest_domain():
    from webhook.engine.fixes import compute_fixes

    nodes = _racks(3, 4)
    # Rack r0 has one busy node (a low-priority pod), r1 two, r2 three: r0 is the closest to 4 free nodes.
    pods = [pod(f"p{r}-{i}", f"r{r}-n{i}", gpu=8, ns=f"team-{r}", priority=0) for r in range(3) for i in range(r + 1)]
    t = TopologyRequest("kueue", "required", level=RACK)
    g = gang(pod_set("worker", 4, gpu=8, topology=t), kind="PyTorchJob")
    snap = snapshot(nodes, pods)
    d = evaluate(snap, g)
    assert d.verdict == "Waits" and d.findings[0].data["best_domain"] == "r0"
    fixes = compute_fixes(snap, g, d, now=0.0)
    relax = next(f for f in fixes if f.action == "relax-topology")
    assert relax.sufficient and relax.displaced_pods == 0
    assert "cross the links between domains" in relax.summary.replace("crosses", "cross") and "slower" in relax.summary
    dom = next(f for f in fixes if "domain r0" in f.summary)
    assert [v.node for v in dom.victims] == ["r0-n0"] and dom.sufficient
    assert fixes.index(relax) < fixes.index(dom)  # no displacement first
    # A NeverFits that only the rule proves: relaxing it is the one fix.
    g5 = gang(pod_set("worker", 5, gpu=8, topology=t), kind="PyTorchJob")
    d5 = evaluate(snapshot(nodes), g5)
    assert d5.verdict == "NeverFits"
    assert [f.action for f in compute_fixes(snapshot(nodes), g5, d5)] == ["relax-topology"]


def test_lws_group_leader_and_workers_share_their_domain():
    # One LWS group (leader 1 pod + 3 workers) per rack of 4 nodes; 2 racks: 2 groups fit, 3 never.
    nodes = _racks(2, 4)
    for groups, verdict in ((2, "Fits"), (3, "NeverFits")):
        t = TopologyRequest("lws", "required", level=RACK, exclusive=True, unit_size=1)
        tw = TopologyRequest("lws", "required", level=RACK, exclusive=True, unit_size=3)
        g = gang(pod_set("leader", groups, gpu=8, topology=t), pod_set("worker", 3 * groups, gpu=8, topology=tw),
                 kind="LeaderWorkerSet")
        d = evaluate(snapshot(nodes), g)
        assert d.verdict == verdict, d.message
        if verdict == "Fits":
            rack = lambda name: name.split("-")[0]
            lead = sorted(rack(n) for n, _ in d.placement["pod_sets"]["leader"])
            work = sorted({rack(n) for n, _ in d.placement["pod_sets"]["worker"]})
            assert lead == ["r0", "r1"] and work == ["r0", "r1"]
    # One group in one rack of exactly 4 nodes: leader and workers together, never two racks.
    t = TopologyRequest("lws", "required", level=RACK, exclusive=True, unit_size=1)
    tw = TopologyRequest("lws", "required", level=RACK, exclusive=True, unit_size=3)
    d = evaluate(snapshot(_racks(1, 4)), gang(pod_set("leader", 1, gpu=8, topology=t), pod_set("worker", 3, gpu=8, topology=tw),
                                               kind="LeaderWorkerSet"))
    assert d.verdict == "Fits"


def test_jobset_exclusive_now_skips_racks_holding_another_jobsets_child_job():
    nodes = _racks(3, 2)
    other = pod("other-0", "r0-n0", gpu=1, labels={"jobset.sigs.k8s.io/job-key": "abc"}, gang="JobSet/default/other")
    t = TopologyRequest("jobset", "required", level=RACK, exclusive=True, unit_size=2)
    g = gang(pod_set("w", 4, gpu=4, topology=t), kind="JobSet")
    d = evaluate(snapshot(nodes, [other]), g)
    assert d.verdict == "Fits"
    assert {n.split("-")[0] for n, _ in d.placement["pod_sets"]["w"]} == {"r1", "r2"}
    g = gang(pod_set("w", 6, gpu=4, topology=t), kind="JobSet")
    d = evaluate(snapshot(nodes, [other]), g)  # 3 child Jobs, r0 taken by another JobSet's: wait, not never
    assert d.verdict == "Waits" and "TopologyPlacementFailed" in d.reasons
