"""Issue #16: the autoscalers' fixes (``webhook.engine.fixes.scale_fixes``) — raise a NodePool's
limit when its limits stop the gang, widen its requirements or tolerate its taint when it is
one edit away from matching — ranked with the others, displacement 0, with kubectl commands."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

from hypothesis import given, settings, strategies as st

from builders import GI, gang, node, pod, pod_set, snapshot, toleration
from webhook.engine.autoscale.bounds import pods_room
from webhook.engine.autoscale.match import mismatches
from webhook.engine.autoscale.model import NODES_LIMIT, AutoscalingState, ScaleUpSource
from webhook.engine.decision import NEVER_FITS, WAITS
from webhook.engine.evaluate import EngineOptions, evaluate
from webhook.engine.filters import Constraints
from webhook.engine.fixes import compute_fixes, gang_view
from webhook.engine.fixes.ranking import ACTION_RANK
from webhook.engine.fixes.scale_fixes import exact_quantity, raised_limits, scale_fixes, widened
from webhook.engine.model import Finding, NodeSelectorRequirement as Req, Taint
from webhook.engine.quantity import parse_quantity

GPU = "nvidia.com/gpu"
H100_NODE = {GPU: 8, "cpu": 96_000, "memory": 1024 * GI, "pods": 110}
ZONE = "topology.kubernetes.io/zone"
ITYPE = "node.kubernetes.io/instance-type"


def _pool(**kw) -> ScaleUpSource:
    base = dict(name="gpu-h100", limits={GPU: 64}, in_use={GPU: 24}, node_shape=H100_NODE, nodes=3,
                requirements=(Req(ITYPE, "In", ("p5.48xlarge",)),))
    base.update(kw)
    return ScaleUpSource(**base)


def _cluster(*sources, busy=False):
    nodes = [node(f"h{i}", labels={"karpenter.sh/nodepool": "gpu-h100", ITYPE: "p5.48xlarge"}) for i in range(3)]
    pods = [pod(f"x{i}", f"h{i}", gpu=8) for i in range(3)] if busy else []
    return snapshot(nodes, pods, autoscaling=AutoscalingState(sources=tuple(sources)))


def _scale_up(snap, g, missing, verdict=WAITS, code="NeedsScaleUp"):
    """evaluate's decision as the autoscaling review would leave it (#16's contract): the
    capacity proof turned into Waits plus NeedsScaleUp with ``pods_missing``."""
    d = evaluate(snap, g, EngineOptions())
    sev = NEVER_FITS if verdict == NEVER_FITS else WAITS
    keep = [f for f in d.findings if f.severity != NEVER_FITS]
    return replace(d, verdict=verdict, reasons=[code],
                   findings=keep + [Finding(code, sev, "scale-up", {"pods_missing": missing})])


def _train(n=64, **kw):
    return gang(pod_set("worker", n, gpu=8, cpu=90, mem_gi=900, **kw), kind="PyTorchJob", name="train", namespace="ml")


# ---------------------------------------------------------------- raise a limit


def test_the_limit_is_raised_from_64_to_512():
    snap, g = _cluster(_pool()), _train()
    d = _scale_up(snap, g, 61)
    fixes = compute_fixes(snap, g, d, 0.0, EngineOptions())
    lim = [f for f in fixes if f.action == "raise-scale-limit"]
    assert len(lim) == 1
    f = lim[0]
    # 61 new 8-GPU nodes: 488 GPUs on top of the 24 in use
    assert f.summary == ("raise NodePool gpu-h100's limit nvidia.com/gpu from 64 to 512 (24 in use): room for 61 more pod(s) "
                         "of the gang — evicts no one, but it adds up to 61 node(s) (cost) and they take provisioning time")
    assert (f.displaced_pods, f.displaced_gpus, f.tenants, f.sufficient, f.frees_nodes) == (0, 0, [], True, 61)
    assert f.commands[0] == "kubectl get nodepools.karpenter.sh gpu-h100 -o yaml"
    patch = shlex.split(f.commands[1])
    assert patch[:5] == ["kubectl", "patch", "nodepools.karpenter.sh", "gpu-h100", "--type"]
    assert json.loads(patch[-1]) == {"spec": {"limits": {GPU: "512"}}}
    # ranked after the wait and before add-nodes and any displacing fix
    actions = [x.action for x in fixes]
    assert actions.index("raise-scale-limit") < actions.index("add-nodes")
    assert ACTION_RANK["wait"] < ACTION_RANK["raise-scale-limit"] < ACTION_RANK["add-nodes"] < ACTION_RANK["move"]


def test_no_limit_fix_when_the_limits_have_room_or_there_is_no_autoscaler():
    g = _train()
    roomy = _cluster(_pool(limits={GPU: 1024}))
    assert [f for f in compute_fixes(roomy, g, _scale_up(roomy, g, 61), 0.0, EngineOptions()) if "scale" in f.action] == []
    bare = snapshot([node(f"h{i}") for i in range(3)])
    d = _scale_up(bare, g, 61)
    assert scale_fixes(bare, g, d, gang_view(bare, g, d, EngineOptions()), EngineOptions()) == []
    # without the NeedsScaleUp figure, the pods short now count
    d0 = evaluate(bare, g, EngineOptions())
    assert d0.verdict == NEVER_FITS and compute_fixes(bare, g, d0) == []


def test_a_neverfits_only_the_limits_stand_behind_gets_the_limit_fix_alone():
    snap, g = _cluster(_pool(limits={GPU: 40, "cpu": 1000_000}, in_use={GPU: 24, "cpu": 288_000})), _train()
    d = _scale_up(snap, g, 61, verdict=NEVER_FITS, code="ExceedsScaleUpLimits")
    fixes = compute_fixes(snap, g, d, 0.0, EngineOptions())
    assert [f.action for f in fixes] == ["raise-scale-limit"]
    # both caps bind: 61 nodes × 8 GPUs + 24, 61 nodes × 96 cores + 288
    assert fixes[0].summary.startswith("raise NodePool gpu-h100's limit nvidia.com/gpu from 40 to 512 (24 in use) and "
                                       "limit cpu from 1000 to 6144 (288 in use): room for 61 more pod(s)")
    assert json.loads(shlex.split(fixes[0].commands[1])[-1]) == {"spec": {"limits": {GPU: "512", "cpu": "6144"}}}


def test_two_pools_share_the_shortfall():
    # Pool b (weight 10, tried first) has room for 5 pods (40 GPUs free), pool a for 2 (16 free).
    a = _pool(name="a", limits={GPU: 40}, in_use={GPU: 24})
    b = _pool(name="b", weight=10, limits={GPU: 40}, in_use={GPU: 0}, nodes=0)
    snap, g = _cluster(a, b), _train()
    fixes = [f for f in compute_fixes(snap, g, _scale_up(snap, g, 61), 0.0, EngineOptions()) if f.action == "raise-scale-limit"]
    assert [f.summary.split(" — ")[0] for f in fixes] == [
        # b must take 61 - 2 = 59 pods: 59 nodes × 8 GPUs
        "raise NodePool b's limit nvidia.com/gpu from 40 to 472 (0 in use): room for 59 more pod(s) of the gang",
        # a must take 61 - 5 = 56: 24 + 56 × 8
        "raise NodePool a's limit nvidia.com/gpu from 40 to 472 (24 in use): room for 56 more pod(s) of the gang",
    ]


def test_a_node_group_max_size():
    ng = ScaleUpSource("ng-h100", kind="NodeGroup", max_new_nodes=4, node_shape=H100_NODE, requirements=None, taints=None)
    snap, g = _cluster(ng), _train()
    (f,) = [f for f in compute_fixes(snap, g, _scale_up(snap, g, 61), 0.0, EngineOptions()) if f.action == "raise-scale-limit"]
    assert f.summary.startswith("raise node group ng-h100's maximum size by 57 node(s): room for 61 more pod(s)")
    assert f.commands == ["kubectl -n kube-system get configmap cluster-autoscaler-status -o yaml",
                          "# raise node group ng-h100's max size by 57: cluster-autoscaler's --nodes=MIN:MAX:ng-h100 flag "
                          "or the cloud provider's node group settings"]


def test_exact_quantities_read_back():
    for r, v in ((GPU, 512), ("cpu", 6_144_000), ("cpu", 8_500), ("memory", 64 * GI), ("memory", 1536 * 2**20), ("memory", 1000)):
        assert parse_quantity(r, exact_quantity(r, v)) == v
    assert (exact_quantity("cpu", 8_500), exact_quantity("memory", 64 * GI), exact_quantity("memory", 1536 * 2**20)) == (
        "8500m", "64Gi", "1536Mi")


# ---------------------------------------------------------------- widen a pool, tolerate a taint


def test_one_instance_type_away():
    pool = _pool(requirements=(Req(ITYPE, "In", ("p4d.24xlarge",)),), limits={GPU: 1024})
    snap, g = _cluster(pool), _train(selector={ITYPE: "p5.48xlarge"})
    fixes = compute_fixes(snap, g, _scale_up(snap, g, 61, verdict=NEVER_FITS, code="NoMatchingScaleUp"), 0.0, EngineOptions())
    assert [f.action for f in fixes] == ["widen-nodepool"]
    f = fixes[0]
    assert f.summary == ("widen NodePool gpu-h100's requirements: add p5.48xlarge to node.kubernetes.io/instance-type "
                         "(In [p4d.24xlarge, p5.48xlarge]) so it can launch nodes for the gang — evicts no one, but it adds "
                         "nodes (cost) and other pods may land on them too; it then has room for 125 pod(s) of the 61 missing")
    assert f.sufficient and f.displaced_pods == 0
    assert f.commands[1] == ("kubectl edit nodepools.karpenter.sh gpu-h100   # spec.template.spec.requirements: "
                             "node.kubernetes.io/instance-type In [p4d.24xlarge, p5.48xlarge]")


def test_an_undefined_custom_label_is_added_with_a_json_patch():
    pool = _pool(limits={GPU: 64})  # room for 5 pods after
    snap, g = _cluster(pool), _train(selector={"team": "ml", ITYPE: "p5.48xlarge"})
    d = _scale_up(snap, g, 61, verdict=NEVER_FITS, code="NoMatchingScaleUp")
    (f,) = compute_fixes(snap, g, d, 0.0, EngineOptions())
    assert f.action == "widen-nodepool" and not f.sufficient
    assert "add the requirement team In [ml]" in f.summary and f.summary.endswith("room for 5 pod(s) of the 64 missing")  # no node has team=ml
    patch = json.loads(shlex.split(f.commands[1])[-1])
    assert patch == [{"op": "add", "path": "/spec/template/spec/requirements/-",
                      "value": {"key": "team", "operator": "In", "values": ["ml"]}}]


def test_a_taint_away_and_two_edits_away():
    tainted = _pool(name="tainted", taints=(Taint("gpu", "true", "NoSchedule"),), limits={GPU: 1024})
    far = _pool(name="far", taints=(Taint("dedicated", "", "NoSchedule"),), requirements=(Req(ZONE, "In", ("b",)),),
                limits={GPU: 1024})
    snap, g = _cluster(tainted, far), _train(selector={ZONE: "a"})
    d = _scale_up(snap, g, 61, verdict=NEVER_FITS, code="NoMatchingScaleUp")
    fixes = compute_fixes(snap, g, d, 0.0, EngineOptions())
    assert [f.action for f in fixes] == ["tolerate-taint"]  # "far" needs both a zone and a toleration
    assert fixes[0].summary.startswith("tolerate taint gpu=true:NoSchedule in the gang's pod template so NodePool tainted")
    assert fixes[0].commands == ["kubectl -n ml edit pytorchjob train   # tolerations += "
                                 "{key: gpu, operator: Equal, value: true, effect: NoSchedule}"]
    # the gang that already tolerates it matches: no fix, it is a limits question
    ok = _train(selector={ZONE: "a"}, tolerations=[toleration("gpu", "true")])
    d2 = _scale_up(snap, ok, 61)
    assert [f.action for f in compute_fixes(snap, ok, d2, 0.0, EngineOptions()) if "scale" in f.action or "widen" in f.action
            or "tolerate" in f.action] == []


# ---------------------------------------------------------------- properties against brute force

_caps = st.fixed_dictionaries({}, optional={GPU: st.integers(0, 80), "cpu": st.integers(0, 800_000), NODES_LIMIT: st.integers(0, 12)})


@settings(max_examples=200, deadline=None)
@given(limits=_caps, used=st.integers(0, 40), known=st.booleans(), max_new=st.one_of(st.none(), st.integers(0, 6)),
       gpu=st.integers(1, 8), mpn=st.one_of(st.none(), st.integers(1, 3)), pods=st.integers(1, 30))
def test_raised_limits_are_the_least_that_cover_the_pods(limits, used, known, max_new, gpu, mpn, pods):
    src = ScaleUpSource("p", limits=limits, in_use={GPU: min(used, limits.get(GPU, used)), "cpu": 0, NODES_LIMIT: 0},
                        max_new_nodes=max_new, node_shape=H100_NODE if known else None)
    req = {GPU: gpu, "cpu": 1000}
    room = pods_room(src, req, mpn)
    got = raised_limits(src, req, mpn, pods)
    if room is None or room >= pods:
        assert got is None
        return
    if got is None:
        # brute force: no single cap, however high, lets the source take the pods
        free = replace(src, limits={}, max_new_nodes=None)
        k = pods_room(free, req, mpn)
        assert k is not None and k < pods or any(
            (pods_room(replace(free, limits={r: 10**9}), req, mpn) or 0) < pods for r in limits)
        return
    lims, cap, raised = got
    after = pods_room(raised, req, mpn)
    assert after is None or after >= pods
    # each raised cap is the least: one less, the room falls short (brute force, one unit down)
    for r, (old, new) in lims.items():
        assert new > old
        lower = replace(raised, limits={**raised.limits, r: new - 1})
        assert (pods_room(lower, req, mpn) or 0) < pods
    if cap is not None:
        assert cap[1] > cap[0]
        assert (pods_room(replace(raised, max_new_nodes=cap[1] - 1), req, mpn) or 0) < pods


_KEYS = ("team", ZONE)
_VALS = ("a", "b")


@st.composite
def _pool_and_pod(draw):
    reqs = []
    for k in _KEYS:
        op = draw(st.sampled_from(("none", "In", "NotIn")))
        if op != "none":
            reqs.append(Req(k, op, tuple(draw(st.lists(st.sampled_from(_VALS), min_size=1, max_size=2, unique=True)))))
    taints = tuple(Taint(k, "", "NoSchedule") for k in draw(st.lists(st.sampled_from(("x", "y")), max_size=2, unique=True)))
    sel = {k: draw(st.sampled_from(_VALS)) for k in _KEYS if draw(st.booleans())}
    tols = [toleration(k) for k in draw(st.lists(st.sampled_from(("x", "y")), max_size=2, unique=True))]
    return ScaleUpSource("p", requirements=tuple(reqs), taints=taints), pod_set("w", 1, gpu=8, selector=sel, tolerations=tols)


def _edits(src):
    """Brute force: every single edit of the kinds widened() may make, over the whole universe."""
    for k in _KEYS:
        for v in _VALS:
            mine = [r for r in src.requirements if r.key == k]
            if not mine:
                yield replace(src, requirements=src.requirements + (Req(k, "In", (v,)),)), None
            new = tuple(Req(r.key, r.operator, r.values + (v,)) if r.key == k and r.operator == "In" and v not in r.values
                        else Req(r.key, r.operator, tuple(x for x in r.values if x != v)) if r.key == k and r.operator == "NotIn"
                        else r for r in src.requirements)
            if new != src.requirements:
                yield replace(src, requirements=new), None
    for t in src.taints:
        yield src, t


@settings(max_examples=300, deadline=None)
@given(_pool_and_pod())
def test_widened_finds_exactly_the_single_edits_that_match(case):
    src, ps = case
    c = Constraints(ps)
    got = widened(src, c)
    for what, item, cand, c2 in got:  # each offered edit makes it match
        assert mismatches(cand, c2) == ()
    if mismatches(src, c) == ():
        assert got == []
        return
    brute = False
    for cand, t in _edits(src):
        c2 = c if t is None else replace(c, extra_tolerations=(toleration(t.key),))
        if mismatches(cand, c2) == ():
            brute = True
    assert bool(got) == brute


# ---------------------------------------------------------------- with the engine's own verdict (autoscale.review)


def test_end_to_end_the_engines_neverfits_gets_the_fix_that_lifts_it():
    g = _train(selector={ITYPE: "p5.48xlarge"})
    for pool, action in ((_pool(limits={GPU: 64}), "raise-scale-limit"),
                         (_pool(requirements=(Req(ITYPE, "In", ("p4d.24xlarge",)),), limits={GPU: 1024}), "widen-nodepool"),
                         (_pool(taints=(Taint("gpu", "true", "NoSchedule"),), limits={GPU: 1024}), "tolerate-taint")):
        snap = _cluster(pool)
        d = evaluate(snap, g, EngineOptions())
        assert d.verdict == NEVER_FITS and {"ExceedsScaleUpLimits", "NoMatchingScaleUp"} & set(d.reasons), d.reasons
        (fix,) = compute_fixes(snap, g, d, 0.0, EngineOptions())
        assert fix.action == action and fix.sufficient and fix.displaced_pods == 0
        # carried out, the engine no longer proves NeverFits: a Waits with NeedsScaleUp
        if action == "raise-scale-limit":
            after = _cluster(replace(pool, limits={GPU: 512}))
            g2 = g
        elif action == "widen-nodepool":
            after = _cluster(replace(pool, requirements=(Req(ITYPE, "In", ("p4d.24xlarge", "p5.48xlarge")),)))
            g2 = g
        else:
            after = snap
            g2 = _train(selector={ITYPE: "p5.48xlarge"}, tolerations=[toleration("gpu", "true", "NoSchedule")])
        d2 = evaluate(after, g2, EngineOptions())
        assert d2.verdict == WAITS and "NeedsScaleUp" in d2.reasons, (action, d2.reasons)
