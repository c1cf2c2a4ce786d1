"""Property tests of the engine's verdict contract (DESIGN.md, "Verdicts") on small random clusters.

An independent oracle (written from DESIGN.md / FIELD-NOTES §1, not from the engine) decides by
exhaustive search whether a gang can be placed:
  * on the *repaired, empty* cluster ("ever"): cordon, NotReady and the repairable taints
    (not-ready / unschedulable / unreachable) ignored, device allocatable raised to capacity,
    selectors and permanent taints respected;
  * on the *current* cluster ("now"): kube-scheduler's filters (NodeUnschedulable,
    TaintToleration with the implicit not-ready taint of a NotReady node, NodeAffinity) and
    free = allocatable − Σ requests of bound pods on every resource, pod count included.

Properties:
  1. NeverFits ⇒ no placement ever (a false NeverFits is the worst bug, DESIGN.md).
  2. Fits ⇒ a "now" placement valid on today's cluster; a placement "ever" is valid on the
     repaired empty cluster.
  3. A placement exists now ⇒ the verdict is Fits or Waits (greedy misses must be Waits).
  4. The node summary histogram matches kube-scheduler's per-node reasons and counts up to
     ``nodes["total"]``.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from webhook.engine.evaluate import evaluate
from webhook.engine.model import Taint

try:  # tests/ as a package or as a rootdir-inserted directory
    from .builders import GI, GPU, gang, node, pod, pod_set, snapshot, toleration
except ImportError:
    from builders import GI, GPU, gang, node, pod, pod_set, snapshot, toleration

NOT_READY = "node.kubernetes.io/not-ready"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
UNREACHABLE = "node.kubernetes.io/unreachable"
REPAIRABLE = {NOT_READY, UNSCHEDULABLE, UNREACHABLE}
DEFAULT_MAX_PODS = 110
BASE = {"cpu", "memory", "ephemeral-storage", "pods"}

PRODUCT = "nvidia.com/gpu.product"
PRODUCTS = ("A100", "H100")
PERMANENT_TAINTS = (
    Taint("dedicated", "train", "NoSchedule"),
    Taint("dedicated", "infer", "NoExecute"),
    Taint("gpu-type", "old", "PreferNoSchedule"),  # never filters
)
TOLERATIONS = (
    toleration("dedicated", "train"),                       # Equal, any effect
    toleration("dedicated", "infer", effect="NoExecute"),
    toleration("dedicated"),                                # Exists on the key
    toleration(NOT_READY),                                  # DaemonSet-style
    toleration(UNSCHEDULABLE),
    toleration(),                                           # Exists, empty key: tolerates all
)

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- oracle


def _tolerates(tol, t: Taint) -> bool:
    if tol.effect and tol.effect != t.effect:
        return False
    if tol.operator == "Exists":
        return not tol.key or tol.key == t.key
    return bool(tol.key) and tol.key == t.key and tol.value == t.value


def _taints_ok(taints, tolerations, skip=frozenset()) -> bool:
    for t in taints:
        if t.effect not in ("NoSchedule", "NoExecute") or t.key in skip:
            continue
        if not any(_tolerates(tol, t) for tol in tolerations):
            return False
    return True


def _selector_ok(n, ps) -> bool:
    return all(n.labels.get(k) == v for k, v in ps.node_selector.items())


def now_reason(n, ps) -> str | None:
    """First failing kube-scheduler filter for ``ps`` on ``n`` (None = passes), FIELD-NOTES §1."""
    if n.unschedulable and not any(_tolerates(tol, Taint(UNSCHEDULABLE, "", "NoSchedule")) for tol in ps.tolerations):
        return "node(s) were unschedulable"
    taints = list(n.taints)
    if n.ready is False and not any(t.key == NOT_READY for t in taints):
        taints.append(Taint(NOT_READY, "", "NoSchedule"))
    if not _taints_ok(taints, ps.tolerations):
        return "node(s) had untolerated taint(s)"
    if not _selector_ok(n, ps):
        return "node(s) didn't match Pod's node affinity/selector"
    return None


def ever_eligible(n, ps) -> bool:
    return _taints_ok(n.taints, ps.tolerations, skip=REPAIRABLE) and _selector_ok(n, ps)


def _pods_alloc(n) -> int:
    return n.allocatable.get("pods", DEFAULT_MAX_PODS)


def ever_capacity(n) -> dict[str, int]:
    out = dict(n.allocatable)
    out["pods"] = _pods_alloc(n)
    for r, v in n.capacity.items():
        if r not in BASE and v > out.get(r, 0):
            out[r] = v
    return out


def now_free(n, pods) -> dict[str, int]:
    out = dict(n.allocatable)
    out["pods"] = _pods_alloc(n)
    for p in pods:
        if p.node_name != n.name:
            continue
        out["pods"] -= 1
        for r, v in p.requests.items():
            out[r] = out.get(r, 0) - v
    return out


def _fits(amounts: dict[str, int], avail: dict[str, int]) -> bool:
    """kube-scheduler checks only resources requested (> 0): Σ request ≤ available."""
    return all(v <= 0 or v <= avail.get(r, 0) for r, v in amounts.items())


def _load(vec, pod_sets) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, ps in zip(vec, pod_sets):
        if k:
            out["pods"] = out.get("pods", 0) + k
            for r, v in ps.requests.items():
                out[r] = out.get(r, 0) + v * k
    return out


def brute_force(nodes, pod_sets, avail, eligible):
    """Exhaustive search: a placement of every pod of every pod set, or None.

    ``avail[i]`` is node i's resources, ``eligible(node, ps)`` the filter. Pods of one set are
    interchangeable, so the search runs over per-node count vectors with a DP over nodes
    (reachable "pods placed so far" vectors, saturated at each set's count).
    Returns {pod set name: [[node name, pods], ...]}.
    """
    counts = tuple(ps.count for ps in pod_sets)
    target = counts
    layers = [{tuple(0 for _ in counts): None}]
    for i, n in enumerate(nodes):
        ranges = [range(c + 1) if eligible(n, ps) else range(1) for c, ps in zip(counts, pod_sets)]
        vecs = [v for v in itertools.product(*ranges) if any(v) and _fits(_load(v, pod_sets), avail[i])]
        prev = layers[-1]
        cur = {s: (s, None) for s in prev}
        for s in prev:
            for v in vecs:
                t = tuple(min(a + b, c) for a, b, c in zip(s, v, counts))
                if t not in cur:
                    cur[t] = (s, v)
        layers.append(cur)
        if target in cur:
            break
    if target not in layers[-1]:
        return None
    out: dict[str, list] = {ps.name: [] for ps in pod_sets}
    need = list(counts)
    state = target
    for li in range(len(layers) - 1, 0, -1):
        s, v = layers[li][state]
        if v:
            for j, ps in enumerate(pod_sets):
                k = min(v[j], need[j])
                if k:
                    out[ps.name].append([nodes[li - 1].name, k])
                    need[j] -= k
        state = s
    assert not any(need)
    return out


def placement_errors(snap, g, placement_sets, avail_of, eligible) -> list[str]:
    """Why ``placement_sets`` ({pod set: [[node, pods], ...]}) is not valid, [] when it is."""
    errs = []
    by_name = {n.name: n for n in snap.nodes}
    wanted = {ps.name: ps for ps in g.pod_sets if ps.count > 0}
    if set(placement_sets) != set(wanted):
        errs.append(f"pod sets placed {sorted(placement_sets)} != gang's {sorted(wanted)}")
    load: dict[str, dict[str, int]] = {}
    for name, entries in placement_sets.items():
        ps = wanted.get(name)
        if ps is None:
            continue
        total = 0
        for node_name, k in entries:
            n = by_name.get(node_name)
            if n is None:
                errs.append(f"{name}: unknown node {node_name}")
                continue
            if k <= 0:
                errs.append(f"{name}: {k} pods on {node_name}")
            total += k
            if not eligible(n, ps):
                errs.append(f"{name}: node {node_name} fails the filters ({now_reason(n, ps)})")
            acc = load.setdefault(node_name, {})
            acc["pods"] = acc.get("pods", 0) + k
            for r, v in ps.requests.items():
                acc[r] = acc.get(r, 0) + v * k
        if total != ps.count:
            errs.append(f"{name}: {total} pods placed, needs {ps.count}")
    for node_name, acc in load.items():
        avail = avail_of(by_name[node_name])
        for r, v in acc.items():
            if v > 0 and v > avail.get(r, 0):
                errs.append(f"{node_name}: {r} placed {v} > available {avail.get(r, 0)}")
    return errs


def oracle_ever(snap, g):
    sets = [ps for ps in g.pod_sets if ps.count > 0]
    return brute_force(snap.nodes, sets, [ever_capacity(n) for n in snap.nodes], ever_eligible)


def oracle_now(snap, g):
    sets = [ps for ps in g.pod_sets if ps.count > 0]
    return brute_force(snap.nodes, sets, [now_free(n, snap.pods) for n in snap.nodes],
                       lambda n, ps: now_reason(n, ps) is None)


# ----------------------------------------------------------------------------- strategies


@st.composite
def clusters(draw):
    n_nodes = draw(st.integers(1, 6))
    nodes, pods = [], []
    for i in range(n_nodes):
        name = f"n{i}"
        gpu = draw(st.one_of(st.sampled_from([0, 4, 8, 8]), st.integers(0, 8)))
        cpu = draw(st.sampled_from([8, 32, 72, 96, 96]))
        mem = draw(st.sampled_from([64, 512, 1024, 1024]))
        max_pods = draw(st.sampled_from([110, 110, 110, 110, 1, 2, 4]))
        alloc_gpu = draw(st.one_of(st.none(), st.integers(0, gpu))) if gpu else None
        state = draw(st.sampled_from(["ok", "ok", "ok", "cordoned", "notready", "both"]))
        taints = draw(st.sampled_from([[], [], [], *([t] for t in PERMANENT_TAINTS)]))
        product = draw(st.sampled_from([None, *PRODUCTS]))
        labels = {PRODUCT: product} if product else {}
        nodes.append(node(name, gpu=gpu, cpu=cpu, mem_gi=mem, labels=labels, taints=taints,
                          unschedulable=state in ("cordoned", "both"), ready=state not in ("notready", "both"),
                          alloc_gpu=alloc_gpu, pods=max_pods))
        for j in range(draw(st.integers(0, 3))):
            pods.append(pod(f"{name}-p{j}", name, gpu=draw(st.integers(0, gpu)),
                            cpu=draw(st.sampled_from([0, 1, 8, 32])), mem_gi=draw(st.sampled_from([0, 16, 256])),
                            ns=draw(st.sampled_from(["default", "team-a"]))))
    return snapshot(nodes, pods)


@st.composite
def gangs(draw, snap=None):
    """1–3 pod sets of 1–6 pods.

    Given ``snap``, half of the gangs are "tame" (shapes its nodes can hold, selectors on
    products it has) so that feasible and borderline gangs are common, not only NeverFits.
    """
    tame = snap is not None and draw(st.booleans())
    max_gpu = max((n.capacity.get(GPU, 0) for n in snap.nodes), default=0) if snap is not None else 8
    products = sorted({n.labels[PRODUCT] for n in snap.nodes if PRODUCT in n.labels}) if tame else list(PRODUCTS)
    sets = []
    for j in range(draw(st.integers(1, 2 if tame else 3))):
        selector = draw(st.sampled_from([None, None, None, None, *({PRODUCT: p} for p in products)]))
        tols = draw(st.sampled_from([[], [], *([t] for t in TOLERATIONS), TOLERATIONS[:2]]))
        if tame:
            count = draw(st.integers(1, 4))
            gpu = draw(st.integers(0, max_gpu))
            cpu = draw(st.sampled_from([0, 1, 4, 16]))
            mem = draw(st.sampled_from([0, 8, 128]))
        else:
            count = draw(st.integers(1, 6))
            gpu = draw(st.one_of(st.integers(0, max_gpu), st.sampled_from([0, 1, 2, 4]), st.integers(0, 8)))
            cpu = draw(st.sampled_from([0, 1, 1, 4, 4, 16, 16, 48, 100]))
            mem = draw(st.sampled_from([0, 0, 8, 8, 128, 512]))
        sets.append(pod_set(f"ps{j}", count, gpu=gpu, cpu=cpu, mem_gi=mem, selector=selector, tolerations=tols))
    return gang(*sets, name="prop")


@st.composite
def scenarios(draw):
    """A cluster and a gang to evaluate on it."""
    snap = draw(clusters())
    return snap, draw(gangs(snap))


def _describe(snap, g, d) -> str:
    lines = [f"verdict={d.verdict} reasons={d.reasons} placement={d.placement}"]
    for n in snap.nodes:
        lines.append(f"  {n.name}: cap={dict(n.capacity)} alloc={dict(n.allocatable)} taints={[str(t) for t in n.taints]} "
                     f"unsched={n.unschedulable} ready={n.ready} labels={dict(n.labels)}")
    for p in snap.pods:
        lines.append(f"  pod {p.name} on {p.node_name}: {dict(p.requests)}")
    for ps in g.pod_sets:
        lines.append(f"  podset {ps.name} × {ps.count}: {dict(ps.requests)} sel={dict(ps.node_selector)} "
                     f"tol={ps.tolerations}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- properties


@PROPS
@given(scenarios())
def test_never_fits_only_when_no_placement_on_repaired_empty_cluster(case):
    snap, g = case
    d = evaluate(snap, g)
    assert d.verdict in ("Fits", "Waits", "NeverFits")
    ever = oracle_ever(snap, g)
    event(f"verdict {d.verdict}; placeable ever: {ever is not None}")
    if d.verdict == "NeverFits":
        assert ever is None, f"false NeverFits, a placement exists: {ever}\n{_describe(snap, g, d)}"
        assert not d.allowed


@PROPS
@given(scenarios())
def test_fits_comes_with_a_valid_placement_now(case):
    snap, g = case
    d = evaluate(snap, g)
    if d.verdict == "Fits":
        assert d.placement.get("when") == "now", _describe(snap, g, d)
        errs = placement_errors(snap, g, d.placement["pod_sets"], lambda n: now_free(n, snap.pods),
                                lambda n, ps: now_reason(n, ps) is None)
        assert not errs, "\n".join(errs) + "\n" + _describe(snap, g, d)
    elif d.placement:
        # A placement shown for a Waits verdict proves feasibility on the repaired empty cluster.
        assert d.verdict == "Waits", _describe(snap, g, d)
        assert d.placement["when"] == "ever", _describe(snap, g, d)
        errs = placement_errors(snap, g, d.placement["pod_sets"], ever_capacity, ever_eligible)
        assert not errs, "\n".join(errs) + "\n" + _describe(snap, g, d)


@PROPS
@given(scenarios())
def test_placeable_now_is_never_never_fits(case):
    snap, g = case
    d = evaluate(snap, g)
    now = oracle_now(snap, g)
    if now is None:
        assert d.verdict != "Fits", f"Fits without any valid placement now\n{_describe(snap, g, d)}"
        return
    assert d.verdict in ("Fits", "Waits"), f"placeable now {now}\n{_describe(snap, g, d)}"
    if d.verdict == "Waits":
        # The greedy placement may miss (its None proves nothing): that must stay Waits, with reasons.
        event("greedy missed a placement that exists now (Waits)")
        assert d.reasons, _describe(snap, g, d)
    else:
        event("placeable now: Fits")


@PROPS
@given(scenarios())
def test_node_summary_counts_are_consistent(case):
    snap, g = case
    d = evaluate(snap, g)
    nodes = d.nodes
    total = len(snap.nodes)
    assert nodes["total"] == total
    main = next(ps for ps in g.pod_sets if ps.name == nodes["pod_set"])
    # Expected per-node reasons, kube-scheduler style: the first failing filter, else every
    # short resource (NodeResourcesFit may report several for one node).
    expected: dict[str, int] = {}
    available = filtered = short = 0
    for n in snap.nodes:
        r = now_reason(n, main)
        if r is not None:
            expected[r] = expected.get(r, 0) + 1
            filtered += 1
            continue
        free = now_free(n, snap.pods)
        res = [("Too many pods" if k == "pods" else f"Insufficient {k}")
               for k, v in sorted({"pods": 1, **main.requests}.items()) if v > 0 and free.get(k, 0) < v]
        for reason in res:
            expected[reason] = expected.get(reason, 0) + 1
        if res:
            short += 1
        else:
            available += 1
    assert filtered + short + available == total
    assert nodes["fit_now"] == available, _describe(snap, g, d)
    assert nodes["eligible"] == total - filtered
    assert nodes["reasons"] == expected, f"{nodes['reasons']} != {expected}\n{_describe(snap, g, d)}"
    # Counting consistency: filter reasons (one per node) + available == nodes with a single
    # verdict each; every unavailable node carries at least one reason.
    filter_reasons = {k: v for k, v in nodes["reasons"].items() if k.startswith("node(s)")}
    assert sum(filter_reasons.values()) + nodes["eligible"] == total
    assert all(0 < v <= total for v in nodes["reasons"].values())
    assert sum(nodes["reasons"].values()) >= total - nodes["fit_now"]
    assert nodes["fit_now"] <= nodes["eligible"] <= total
    parts = sorted(f"{v} {k}" for k, v in expected.items())
    assert nodes["summary"] == f"{available}/{total} nodes are available" + (": " + ", ".join(parts) if parts else "") + "."


# ----------------------------------------------------------------------------- examples


def test_fragmentation_field_notes_example():
    """FIELD-NOTES §6: 80 × 8 GPUs, 48 empty, 24 with 2 used, 8 full; 64 × 8 GPUs → Waits."""
    nodes = [node(f"n{i:02d}", gpu=8) for i in range(80)]
    pods = [pod(f"p{i}", f"n{i:02d}", gpu=2) for i in range(48, 72)]
    pods += [pod(f"p{i}", f"n{i:02d}", gpu=8) for i in range(72, 80)]
    d = evaluate(snapshot(nodes, pods), gang(pod_set("worker", 64, gpu=8)))
    assert d.verdict == "Waits"
    assert d.reasons[0] == "Fragmented"
    f = d.fragmentation
    assert (f["free"], f["stranded"], f["ratio"], f["deficit"]) == (528, 144, 0.2727, 16)
    assert f["nodes_fit_now"] == 48 and f["pods_placeable_now"] == 48 and f["whole_nodes_free"] == 48
    assert d.nodes["fit_now"] == 48
    assert d.nodes["reasons"] == {"Insufficient nvidia.com/gpu": 32}
    assert d.nodes["summary"] == "48/80 nodes are available: 32 Insufficient nvidia.com/gpu."
    assert d.placement["when"] == "ever"
    assert sum(k for _, k in d.placement["pod_sets"]["worker"]) == 64


def test_unhealthy_gpu_waits_not_never_fits():
    """Capacity 8 / allocatable 7: repairable, so an 8-GPU pod Waits with UnhealthyDevices."""
    d = evaluate(snapshot([node("n1", gpu=8, alloc_gpu=7)]), gang(pod_set("w", 1, gpu=8)))
    assert d.verdict == "Waits"
    assert "UnhealthyDevices" in d.reasons
    assert "NeverFits" not in {f.severity for f in d.findings}
    assert d.placement == {"when": "ever", "pod_sets": {"w": [["n1", 1]]}}
    assert d.nodes["reasons"] == {"Insufficient nvidia.com/gpu": 1}


def test_pod_larger_than_any_node_never_fits():
    d = evaluate(snapshot([node("n1", gpu=0, cpu=72)]), gang(pod_set("w", 1, cpu=73)))
    assert d.verdict == "NeverFits"
    assert d.reasons == ["PodExceedsNodeCapacity"]
    assert not d.allowed
    f = next(f for f in d.findings if f.code == "PodExceedsNodeCapacity")
    assert f.data["short"] == [{"resource": "cpu", "request": 73000, "largest": 72000}]


def test_cordoned_only_cluster_waits():
    snap = snapshot([node("n1", gpu=8, unschedulable=True), node("n2", gpu=8, unschedulable=True)])
    d = evaluate(snap, gang(pod_set("w", 2, gpu=8)))
    assert d.verdict == "Waits"
    assert "NodesCordoned" in d.reasons
    assert d.nodes["reasons"] == {"node(s) were unschedulable": 2}
    assert d.nodes["summary"] == "0/2 nodes are available: 2 node(s) were unschedulable."
    assert d.placement["when"] == "ever"


def test_not_ready_only_cluster_waits():
    snap = snapshot([node("n1", gpu=8, ready=False)])
    d = evaluate(snap, gang(pod_set("w", 1, gpu=8)))
    assert d.verdict == "Waits"
    assert "NodesNotReady" in d.reasons
    assert d.nodes["reasons"] == {"node(s) had untolerated taint(s)": 1}


def test_permanent_taint_without_toleration_never_fits():
    snap = snapshot([node("n1", gpu=8, taints=["dedicated=train:NoSchedule"])])
    d = evaluate(snap, gang(pod_set("w", 1, gpu=8)))
    assert d.verdict == "NeverFits"
    assert d.reasons == ["UntoleratedTaint"]  # issue #17 item 17: a code of its own
    ok = evaluate(snap, gang(pod_set("w", 1, gpu=8, tolerations=[toleration("dedicated", "train")])))
    assert ok.verdict == "Fits"
    assert ok.placement == {"when": "now", "pod_sets": {"w": [["n1", 1]]}}


def test_gang_total_exceeds_cluster_never_fits():
    snap = snapshot([node("n1", gpu=8), node("n2", gpu=8)])
    d = evaluate(snap, gang(pod_set("w", 3, gpu=8)))
    assert d.verdict == "NeverFits"
    assert d.reasons == ["ExceedsClusterCapacity"]
    assert oracle_ever(snap, gang(pod_set("w", 3, gpu=8))) is None


def test_builders_units():
    n = node("n1", gpu=8, cpu=96, mem_gi=1024, alloc_gpu=7)
    assert n.capacity == {"cpu": 96000, "memory": 1024 * GI, GPU: 8, "pods": 110}
    assert n.allocatable[GPU] == 7
    assert node("c", gpu=0).allocatable.get(GPU) is None
    assert pod("p", "n1", gpu=2, cpu=1.5).requests == {"cpu": 1500, GPU: 2}
    assert [t.key for t in node("x", unschedulable=True, ready=False).taints] == [UNSCHEDULABLE, NOT_READY]


def test_zero_count_pod_set_does_not_crash():
    """A role with a gang minimum of 0 (count 0) beside one that must wait: a Decision, not an exception.

    evaluate() drops count-0 pod sets from its evaluations, but _now_findings picks the main
    pod set from *all* of gang.pod_sets; when the count-0 set has the largest GPU request,
    ``next(e for e in evals if e.ps is main)`` raises StopIteration.
    """
    snap = snapshot([node("n1", gpu=8, unschedulable=True)])
    g = gang(pod_set("launcher", 0, gpu=8), pod_set("worker", 1, gpu=1))
    d = evaluate(snap, g)
    assert d.verdict == "Waits"
    assert "NodesCordoned" in d.reasons


def test_greedy_miss_is_waits_not_never_fits():
    """Greedy best-fit puts the 1-GPU pod on n1 (fewest slots: 1) and leaves no H100 node for
    the selector-bound pod; brute force places a→n2, b→n1. The contract only asks for
    "not NeverFits" (Fits would be better; today the engine says Waits, PlacementUnproven)."""
    snap = snapshot([node("n1", gpu=8, pods=1, labels={PRODUCT: "H100"}), node("n2", gpu=8)])
    g = gang(pod_set("a", 1, gpu=1, cpu=1), pod_set("b", 1, cpu=16, selector={PRODUCT: "H100"}))
    assert oracle_now(snap, g) == {"a": [["n2", 1]], "b": [["n1", 1]]}
    d = evaluate(snap, g)
    assert d.verdict in ("Fits", "Waits")
    assert d.allowed


def test_second_strategy_finds_the_placement_best_fit_misses():
    # Best fit puts the 1-GPU pod on n1 and uses its only pod slot; the most-constrained-first
    # pass places the selector-bound pod first. Found by the property search.
    from builders import gang, node, pod_set, snapshot
    from webhook.engine.evaluate import evaluate

    snap = snapshot([node("n1", gpu=8, pods=1, labels={"p": "H100"}), node("n2", gpu=8)])
    g = gang(pod_set("a", 1, gpu=1, cpu=1), pod_set("b", 1, cpu=16, selector={"p": "H100"}))
    d = evaluate(snap, g)
    assert d.verdict == "Fits"
    assert d.placement["pod_sets"] == {"a": [["n2", 1]], "b": [["n1", 1]]}


# ---------------------------------------------------------------- untolerated taints by node class

TAINT_POOL = [Taint("dedicated", "ml"), Taint("dedicated", "web", "NoExecute"), Taint("gpu", "true"),
              Taint("soft", "x", "PreferNoSchedule"), Taint("node.kubernetes.io/unschedulable", "")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sets(st.integers(0, len(TAINT_POOL) - 1), max_size=3), st.integers(0, 8), st.booleans()),
                min_size=1, max_size=12),
       st.sampled_from([(), (("dedicated", "ml"),), (("gpu", None),)]),
       st.booleans())
def test_untolerated_taints_counted_per_class_equal_the_per_node_count(rows, tols, with_resource):
    # The per-class count (proofs.untolerated_taints) against a plain walk over every node.
    from webhook.engine.filters import DEFAULT_TRANSIENT, taint_matches
    from webhook.engine.model import REPAIRABLE_TAINTS, Toleration
    from webhook.engine.options import EngineOptions
    from webhook.engine.podsets import constraints_of
    from webhook.engine.proofs import untolerated_taints
    import numpy as np

    nodes = [node(f"n{i}", gpu=g, taints=[TAINT_POOL[j] for j in sorted(ts)], auto_taints=False)
             for i, (ts, g, _) in enumerate(rows)]
    snap = snapshot(nodes)
    inside = np.array([ins for _, _, ins in rows], dtype=bool)
    ps = pod_set("w", 1, gpu=1, tolerations=[Toleration(k, "Equal" if v else "Exists", v or "") for k, v in tols])
    opts = EngineOptions()
    resource = "nvidia.com/gpu" if with_resource else None
    got = untolerated_taints(snap, [ps], inside, opts, resource=resource)
    skip = REPAIRABLE_TAINTS | DEFAULT_TRANSIENT
    tolerations = constraints_of(ps, None, opts)[0].tolerations
    want: dict[str, int] = {}
    col = snap.col.get(resource) if resource else None   # no such column: every node counts, as the engine does
    for i, n in enumerate(snap.nodes):
        if inside[i] or (col is not None and snap.ever_alloc[i, col] <= 0):
            continue
        for t in n.taints:
            if t.effect in ("NoSchedule", "NoExecute") and not taint_matches(t.key, skip) \
                    and not any(tol.tolerates(t) for tol in tolerations):
                want[str(t)] = want.get(str(t), 0) + 1
    assert got == sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))
