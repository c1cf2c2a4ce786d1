"""Autoscaled clusters: NeverFits only with a proof over what the autoscalers could add (#16).

The property, against brute force on small clusters: whenever gangcheck answers NeverFits on a
cluster with scale-up sources, no way of adding nodes within the sources' limits and size caps
(and of removing the pools' idle nodes, as Karpenter's consolidation may) lets the gang fit the
repaired, empty cluster. New nodes of a source of unknown shape are drawn from a family of
shapes that includes very large ones, so "unknown" is exercised as "any size".

Plus unit cases with the numbers users read (NeedsScaleUp, NoMatchingScaleUp,
ExceedsScaleUpLimits), the Karpenter requirement rules (pkg/scheduling/requirements.go), the
limit arithmetic, and the policy's pools.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.engine.autoscale import AutoscalingPolicy, AutoscalingState, PolicyPool, ScaleUpSource
from webhook.engine.autoscale.bounds import nodes_for, pods_room, resource_room
from webhook.engine.autoscale.match import mismatch, mismatches
from webhook.engine.autoscale.sources import ASSUMED, effective_sources
from webhook.engine.evaluate import evaluate
from webhook.engine.filters import Constraints
from webhook.engine.model import GangRequest, Node, NodeSelectorRequirement as Req, NodeSelectorTerm, PodSet, Taint, Toleration
from webhook.engine.options import EngineOptions
from webhook.engine.snapshot import ClusterSnapshot

GPU = "nvidia.com/gpu"
POOL = "karpenter.sh/nodepool"


def alloc(gpu: int, cpu: int) -> dict[str, int]:
    return {"cpu": cpu, "memory": 64 * 2**30, GPU: gpu, "pods": 110}


def mk_node(i: int, gpu: int, cpu: int, labels: dict, taints=()) -> Node:
    a = alloc(gpu, cpu)
    return Node(f"n{i}", labels=dict(labels), taints=tuple(taints), capacity=a, allocatable=a)


# ------------------------------------------------------------------ brute force

#: Shapes a new node of unknown shape may take: small to very large.
UNKNOWN_SHAPES = ((1, 2000), (8, 16000), (16, 64000), (64, 256000))


def _pod_may_use(ps: PodSet, labels: dict, taints) -> bool:
    if any(labels.get(k) != v for k, v in ps.node_selector.items()):
        return False
    for t in taints:
        if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in ps.tolerations):
            return False
    return True


def _fits(pod_sets: list[PodSet], nodes: list[tuple[dict, dict, tuple]]) -> bool:
    """Exhaustive: can every pod of every pod set be placed on ``nodes`` (free=alloc, labels, taints)?"""
    pods = [ps for ps in pod_sets for _ in range(ps.count)]
    free = [dict(a) for a, _, _ in nodes]

    def place(i: int) -> bool:
        if i == len(pods):
            return True
        ps = pods[i]
        tried = set()
        for j, (a, labels, taints) in enumerate(nodes):
            key = (tuple(sorted(free[j].items())), tuple(sorted(labels.items())), taints)
            if key in tried or not _pod_may_use(ps, labels, taints):
                continue
            tried.add(key)
            if all(free[j].get(r, 0) >= v for r, v in ps.requests.items()):
                for r, v in ps.requests.items():
                    free[j][r] -= v
                ok = place(i + 1)
                for r, v in ps.requests.items():
                    free[j][r] += v
                if ok:
                    return True
        return False

    return place(0)


def _source_nodes(src: ScaleUpSource, existing: list[Node]) -> list[list[tuple[dict, dict, tuple]]]:
    """Every set of nodes ``src``'s pool could consist of (kept existing nodes + new ones) within
    its limits and size cap."""
    mine = [n for n in existing if n.labels.get(POOL) == src.name]
    labels = {**src.labels, POOL: src.name}
    taints = tuple(src.taints or ())
    shapes = [(src.node_shape[GPU], src.node_shape["cpu"])] if src.node_shape is not None else list(UNKNOWN_SHAPES)
    cap_nodes = None if src.max_new_nodes is None else src.max_new_nodes + src.nodes
    out = []
    for keep in itertools.product((False, True), repeat=len(mine)):
        kept = [n for n, k in zip(mine, keep) if k]
        for n_new in range(0, 4):
            if cap_nodes is not None and len(kept) + n_new > cap_nodes:
                break
            for combo in itertools.combinations_with_replacement(shapes, n_new):
                total_gpu = sum(n.capacity[GPU] for n in kept) + sum(g for g, _ in combo)
                total_cpu = sum(n.capacity["cpu"] for n in kept) + sum(c for _, c in combo)
                # Limits stop launches, not the nodes that already exist.
                if n_new and GPU in src.limits and total_gpu > src.limits[GPU]:
                    continue
                if n_new and "cpu" in src.limits and total_cpu > src.limits["cpu"]:
                    continue
                out.append([(dict(n.allocatable), dict(n.labels), n.taints) for n in kept]
                           + [(alloc(g, c), labels, taints) for g, c in combo])
    return out


def brute_force_can_fit(existing: list[Node], sources: list[ScaleUpSource], pod_sets: list[PodSet]) -> bool:
    others = [(dict(n.allocatable), dict(n.labels), n.taints) for n in existing
              if n.labels.get(POOL) not in {s.name for s in sources}]
    for choice in itertools.product(*[_source_nodes(s, existing) for s in sources]):
        nodes = others + [x for group in choice for x in group]
        if _fits(pod_sets, nodes):
            return True
    return False


# ------------------------------------------------------------------ strategies

LABELS = st.sampled_from([{}, {"gpu": "h100"}, {"gpu": "a100"}])
TAINTS = st.sampled_from([(), (Taint("dedicated", "ml"),)])


@st.composite
def clusters(draw):
    n_sources = draw(st.integers(1, 2))
    sources = []
    for s in range(n_sources):
        name = f"pool{s}"
        limit_gpu = draw(st.sampled_from([None, 0, 4, 8, 16, 32]))
        limit_cpu = draw(st.sampled_from([None, 8000, 64000]))
        shape = draw(st.sampled_from([None, (8, 16000), (2, 8000)]))
        sources.append(dict(name=name, labels=draw(LABELS), taints=draw(TAINTS), limit_gpu=limit_gpu,
                            limit_cpu=limit_cpu, shape=shape, max_new=draw(st.sampled_from([None, 0, 1, 2]))))
    existing = []
    for i in range(draw(st.integers(0, 3))):
        owner = draw(st.sampled_from([None] + [s["name"] for s in sources]))
        gpu, cpu = draw(st.sampled_from([(0, 4000), (4, 8000), (8, 16000)]))
        labels = dict(draw(LABELS))
        if owner is not None:
            src = next(s for s in sources if s["name"] == owner)
            labels = {**src["labels"], POOL: owner}
        existing.append(mk_node(i, gpu, cpu, labels))
    built = []
    for s in sources:
        mine = [n for n in existing if n.labels.get(POOL) == s["name"]]
        limits = {}
        if s["limit_gpu"] is not None:
            limits[GPU] = s["limit_gpu"]
        if s["limit_cpu"] is not None:
            limits["cpu"] = s["limit_cpu"]
        in_use = {GPU: sum(n.capacity[GPU] for n in mine), "cpu": sum(n.capacity["cpu"] for n in mine)}
        built.append(ScaleUpSource(
            s["name"], labels=s["labels"], taints=s["taints"], limits=limits, in_use=in_use,
            max_new_nodes=s["max_new"], node_shape=None if s["shape"] is None else alloc(*s["shape"]), nodes=len(mine)))
    pod_sets = []
    for j in range(draw(st.integers(1, 2))):
        gpu = draw(st.sampled_from([0, 1, 4, 8, 16]))
        cpu = draw(st.sampled_from([1000, 4000, 12000]))
        pod_sets.append(PodSet(f"ps{j}", draw(st.integers(1, 3)), {"cpu": cpu, GPU: gpu} if gpu else {"cpu": cpu},
                               node_selector=draw(LABELS),
                               tolerations=draw(st.sampled_from([(), (Toleration("dedicated", "Equal", "ml"),)]))))
    return existing, built, pod_sets


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_never_fits_with_autoscalers_only_when_no_scale_up_could_fit_the_gang(c):
    existing, sources, pod_sets = c
    snap = ClusterSnapshot(existing, autoscaling=AutoscalingState(sources=tuple(sources)))
    gang = GangRequest("JobSet", "g", "ns", tuple(pod_sets))
    d = evaluate(snap, gang, EngineOptions(extended_resource_toleration=False))
    if d.verdict == "NeverFits":
        assert not brute_force_can_fit(existing, sources, pod_sets), (d.reasons, d.message)


# ------------------------------------------------------------------ the numbers users read

H100 = {"nvidia.com/gpu.product": "H100"}
NODE8 = alloc(8, 96000)


def h100_cluster(source: ScaleUpSource | None, n: int = 3) -> ClusterSnapshot:
    nodes = [Node(f"n{i}", labels={**H100, POOL: "gpu-h100"}, capacity=NODE8, allocatable=NODE8) for i in range(n)]
    return ClusterSnapshot(nodes, autoscaling=AutoscalingState(sources=(source,) if source else ()))


def train(count: int = 64, **kw) -> GangRequest:
    return GangRequest("JobSet", "train", "ml", (PodSet("worker", count, {"cpu": 8000, GPU: 8}, node_selector=H100, **kw),))


GPU_POOL = ScaleUpSource("gpu-h100", requirements=(Req("nvidia.com/gpu.product", "In", ("H100",)),),
                         limits={GPU: 512}, in_use={GPU: 24}, nodes=3)


def test_the_seed_case_a_64_node_gang_on_a_3_node_pool_waits_for_a_scale_up_instead_of_being_denied():
    assert evaluate(h100_cluster(None), train()).verdict == "NeverFits"
    d = evaluate(h100_cluster(GPU_POOL), train())
    assert d.verdict == "Waits" and d.reasons[0] == "NeedsScaleUp"
    f = next(f for f in d.findings if f.code == "NeedsScaleUp")
    assert f.data["eligible_nodes"] == 3 and f.data["pods_missing"] == 61
    row = f.data["pools"][0]
    assert (row["name"], row["pods"], row["nodes_needed"], row["remaining"]) == ("gpu-h100", 61, None, {GPU: 488})
    assert "3 eligible node(s) exist" in d.message and "limit 512 nvidia.com/gpu, 24 in use" in d.message
    # The denied finding is still told, as a Waits on the existing nodes.
    cap = next(f for f in d.findings if f.code == "ExceedsClusterCapacity")
    assert cap.severity == "Waits" and cap.data["scale_up"] is True


def test_a_known_node_shape_gives_the_node_count():
    opts = EngineOptions(autoscaling=AutoscalingPolicy(pools=(PolicyPool("gpu-h100", node_shape=NODE8),)))
    d = evaluate(h100_cluster(GPU_POOL), train(), opts)
    row = next(f for f in d.findings if f.code == "NeedsScaleUp").data["pools"][0]
    assert row["nodes_needed"] == 61 and "61 more node(s) needed from NodePool gpu-h100" in d.message


def test_limits_that_cannot_cover_the_gang_even_fully_used_are_a_proof():
    small = ScaleUpSource("gpu-h100", requirements=(Req("nvidia.com/gpu.product", "In", ("H100",)),),
                          limits={GPU: 256}, in_use={GPU: 24}, nodes=3)
    d = evaluate(h100_cluster(small), train())
    assert d.verdict == "NeverFits" and d.reasons[0] == "ExceedsScaleUpLimits"
    f = d.findings[0]
    # 3 existing nodes hold 3 pods; the whole limit (256 GPUs, its idle nodes replaced) 32 more.
    assert f.data["pods_possible"] == 35 and f.data["pods_needed"] == 64


def test_limits_taken_by_idle_nodes_are_no_proof_consolidation_may_free_them():
    # 60 of the 64 GPUs are held by the pool's idle 1-GPU nodes; a 16-GPU pod fits no node now,
    # but Karpenter may replace the idle nodes by one larger node.
    one = alloc(1, 4000)
    nodes = [Node(f"s{i}", labels={**H100, POOL: "p"}, capacity=one, allocatable=one) for i in range(60)]
    src = ScaleUpSource("p", labels=H100, limits={GPU: 64}, in_use={GPU: 60}, nodes=60)
    snap = ClusterSnapshot(nodes, autoscaling=AutoscalingState(sources=(src,)))
    d = evaluate(snap, GangRequest("Job", "big", "ml", (PodSet("w", 1, {"cpu": 1000, GPU: 16}, node_selector=H100),)))
    assert d.verdict == "Waits" and "NeedsScaleUp" in d.reasons


def test_no_matching_pool_keeps_the_proof_and_names_the_requirement():
    a100 = ScaleUpSource("a100", requirements=(Req("nvidia.com/gpu.product", "In", ("A100",)),))
    d = evaluate(h100_cluster(a100), train())
    assert d.verdict == "NeverFits" and d.reasons[:2] == ["ExceedsClusterCapacity", "NoMatchingScaleUp"]
    assert "nvidia.com/gpu.product In [H100] not in nvidia.com/gpu.product In [A100]" in d.message


def test_a_gang_that_fits_now_gets_no_scale_up_finding():
    d = evaluate(h100_cluster(GPU_POOL), train(count=2))
    assert d.verdict == "Fits" and "NeedsScaleUp" not in d.reasons


def test_assume_scale_up_lifts_every_capacity_proof_but_not_quota():
    opts = EngineOptions(autoscaling=AutoscalingPolicy(assume_scale_up=True))
    d = evaluate(h100_cluster(None), train(), opts)
    assert d.verdict == "Waits" and d.findings[0].code == "NeedsScaleUp"
    assert d.findings[0].data["pools"][0]["name"] == ASSUMED


def test_autoscaling_disabled_in_the_policy_ignores_the_cluster_s_pools():
    opts = EngineOptions(autoscaling=AutoscalingPolicy(enabled=False))
    assert evaluate(h100_cluster(GPU_POOL), train(), opts).verdict == "NeverFits"


# ------------------------------------------------------------------ Karpenter's requirement rules

def cons(**kw) -> Constraints:
    return Constraints(PodSet("w", 1, {"cpu": 1000}, **kw))


def test_custom_labels_must_be_defined_by_the_pool_well_known_ones_need_not():
    pool = ScaleUpSource("p", requirements=())
    assert mismatch(pool, cons(node_selector={"team": "ml"})) == 'label "team" does not have known values'
    assert mismatch(pool, cons(node_selector={"topology.kubernetes.io/zone": "z1"})) is None
    assert mismatch(pool, cons(node_selector={"karpenter.k8s.aws/instance-gpu-count": "8"})) is None
    # NotIn / DoesNotExist on an undefined custom label need nothing.
    t = NodeSelectorTerm((Req("team", "NotIn", ("x",)),))
    assert mismatch(pool, cons(required_affinity=(t,))) is None


def test_gt_lt_bounds_intersect_as_karpenter_canonicalises_them():
    pool = ScaleUpSource("p", requirements=(Req("gpus", "Gt", ("4",)),))
    assert mismatch(pool, cons(node_selector={"gpus": "8"})) is None
    assert mismatch(pool, cons(node_selector={"gpus": "4"})) is not None
    lt = NodeSelectorTerm((Req("gpus", "Lt", ("6",)),))
    assert mismatch(pool, cons(required_affinity=(lt,))) is None           # 5 is in both
    lt5 = NodeSelectorTerm((Req("gpus", "Lt", ("5",)),))
    assert mismatch(pool, cons(required_affinity=(lt5,))) is not None      # ≥5 and ≤4: empty


def test_any_node_affinity_term_may_match_and_pinned_pods_never_do():
    pool = ScaleUpSource("p", labels={"gpu": "h100"})
    bad = NodeSelectorTerm((Req("gpu", "In", ("a100",)),))
    good = NodeSelectorTerm((Req("gpu", "In", ("h100", "a100")),))
    assert mismatch(pool, cons(required_affinity=(bad, good))) is None
    assert mismatch(pool, cons(required_affinity=(bad,))) is not None
    assert "new name" in mismatch(pool, cons(node_name="n1"))
    assert "new name" in mismatch(pool, cons(node_selector={"kubernetes.io/hostname": "n1"}))


def test_taints_must_be_tolerated_startup_taints_need_not_be():
    t = Taint("dedicated", "ml")
    pool = ScaleUpSource("p", taints=(t,), startup_taints=(Taint("node.cilium.io/agent-not-ready", "true"),))
    assert mismatches(pool, cons()) == ("taint dedicated=ml:NoSchedule is not tolerated",)
    assert mismatches(pool, cons(tolerations=(Toleration("dedicated", "Equal", "ml"),))) == ()


def test_unknown_requirements_match_anything_but_a_pinned_node():
    group = ScaleUpSource("ng", kind="NodeGroup", requirements=None, taints=None)
    assert mismatch(group, cons(node_selector={"team": "ml"})) is None
    assert mismatch(group, cons(node_name="n1")) is not None


# ------------------------------------------------------------------ limit arithmetic

def test_pods_room_now_and_ever():
    src = ScaleUpSource("p", limits={GPU: 64}, in_use={GPU: 40}, nodes=5)
    assert pods_room(src, {GPU: 8}, None) == 3           # 24 left now
    assert pods_room(src, {GPU: 8}, None, ever=True) == 8  # the whole limit
    assert pods_room(src, {"cpu": 1000}, None) is None      # cpu unlimited, shape unknown
    capped = ScaleUpSource("p", max_new_nodes=2, nodes=1)
    assert pods_room(capped, {"cpu": 1000}, 1) == 2 and pods_room(capped, {"cpu": 1000}, 1, ever=True) == 3
    shaped = ScaleUpSource("p", limits={GPU: 64}, in_use={GPU: 40}, node_shape=alloc(8, 16000))
    assert pods_room(shaped, {GPU: 4, "cpu": 4000}, None) == 3 * 2      # 3 nodes × 2 pods
    assert nodes_for(shaped, {GPU: 4, "cpu": 4000}, None, 5) == 3
    assert pods_room(shaped, {GPU: 16}, None) == 0                       # larger than a node
    assert resource_room(shaped, GPU) == 24 and resource_room(shaped, "cpu") == 3 * 16000


def test_policy_pools_apply_by_name_or_stand_alone():
    snap = ClusterSnapshot([mk_node(0, 8, 16000, {"pool": "spot"})], autoscaling=AutoscalingState(
        sources=(ScaleUpSource("gpu", nodes=2, weight=10),)))
    opts = EngineOptions(autoscaling=AutoscalingPolicy(pools=(
        PolicyPool("gpu", max_nodes=5, node_shape=NODE8), PolicyPool("spot", labels={"pool": "spot"}, max_nodes=4))))
    out = effective_sources(snap, opts)
    assert [s.name for s in out] == ["gpu", "spot"]                    # weight first
    assert out[0].max_new_nodes == 3 and out[0].node_shape == NODE8
    assert out[1].kind == "PolicyPool" and out[1].nodes == 1 and out[1].max_new_nodes == 3


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_adding_autoscalers_never_turns_an_admitted_gang_into_a_denial(c):
    # Monotone: what the autoscalers could add only widens what may run; an empty state is no
    # autoscaler at all.
    existing, sources, pod_sets = c
    gang = GangRequest("JobSet", "g", "ns", tuple(pod_sets))
    without = evaluate(ClusterSnapshot(existing), gang)
    empty = evaluate(ClusterSnapshot(existing, autoscaling=AutoscalingState()), gang)
    assert (empty.verdict, empty.reasons, empty.message) == (without.verdict, without.reasons, without.message)
    for k in range(1, len(sources) + 1):
        with_ = evaluate(ClusterSnapshot(existing, autoscaling=AutoscalingState(sources=tuple(sources[:k]))), gang)
        if with_.verdict == "NeverFits":
            assert without.verdict == "NeverFits", (with_.reasons, without.reasons)


def test_a_pod_set_no_source_matches_is_told_as_no_match_even_when_another_pod_set_matches():
    # The launcher may use the CPU pool; the 8-GPU workers match no pool and 3 nodes hold 3.
    cpu_pool = ScaleUpSource("cpu", labels={"role": "cpu"})
    nodes = [Node(f"n{i}", labels=H100, capacity=NODE8, allocatable=NODE8) for i in range(3)]
    snap = ClusterSnapshot(nodes, autoscaling=AutoscalingState(sources=(cpu_pool,)))
    gang = GangRequest("MPIJob", "m", "ml", (PodSet("launcher", 1, {"cpu": 1000}),
                                              PodSet("worker", 8, {"cpu": 8000, GPU: 8}, node_selector=H100)))
    d = evaluate(snap, gang)
    assert d.verdict == "NeverFits" and d.reasons[:2] == ["ExceedsClusterCapacity", "NoMatchingScaleUp"]
    f = next(f for f in d.findings if f.code == "NoMatchingScaleUp")
    assert f.data["pod_set"] == "worker" and f.data["pods_possible"] == 3 and f.data["pods_needed"] == 8
    assert "no autoscaler can add a node it may use" in d.message


def test_sources_in_karpenter_s_order_weight_then_name_descending():
    # karpenter pkg/utils/nodepool/nodepool.go OrderByWeight: equal weights, later name first.
    snap = ClusterSnapshot([], autoscaling=AutoscalingState(sources=(
        ScaleUpSource("a"), ScaleUpSource("c"), ScaleUpSource("b", weight=5), ScaleUpSource("d"))))
    assert [s.name for s in effective_sources(snap, EngineOptions())] == ["b", "d", "c", "a"]


def test_a_cluster_scaled_to_zero_needs_new_nodes_first():
    # No node at all: NeedsScaleUp is required, and told before NoNodes.
    d = evaluate(ClusterSnapshot([], autoscaling=AutoscalingState(sources=(GPU_POOL,))), train(count=4))
    assert d.verdict == "Waits" and d.reasons[0] == "NeedsScaleUp"
    f = d.findings[0]
    assert f.data["required"] is True and f.data["eligible_nodes"] == 0 and f.data["pods_missing"] == 4
