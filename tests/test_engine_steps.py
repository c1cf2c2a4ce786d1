"""The engine's steps that became separately callable in issue #14, each on its own:
ClusterSnapshot's constructor steps, the exhaustive search's steps (``fit``), the capacity
proofs' helpers (``proofs``), the order of findings (``explain``) and the options.

Expected values are worked out by hand in each test's comment.
"""

from __future__ import annotations

import numpy as np

from builders import GI, GPU, gang, node, pod, pod_set, snapshot
from webhook.engine.decision import NEVER_FITS, WAITS
from webhook.engine.explain import ORDER, sort_findings
from webhook.engine.fit import Demand, shape_of
from webhook.engine.fit import _class_table, _node_configs, _placement_of, _suffix_bounds
from webhook.engine.model import Finding, Node
from webhook.engine.options import EngineOptions, all_or_nothing, is_gpu_resource
from webhook.engine.podsets import evaluate_pod_set
from webhook.engine.proofs import _gang_nodes
from webhook.engine.topology import domain_sums, label_domains
from webhook.engine.snapshot import (
    DEFAULT_MAX_PODS, _ever_alloc, _node_resource_names, _pods_by_node, _repairable_devices, _resource_matrices,
)


def test_resource_names_put_cpu_memory_pods_first_then_first_seen():
    nodes = (node("a", gpu=0), node("b", gpu=2))
    names = _node_resource_names(nodes, ("example.com/x",))
    assert list(names) == ["cpu", "memory", "pods", GPU, "example.com/x"]


def test_repairable_devices_from_the_gpu_count_and_mig_labels():
    nodes = (
        node("plugin-down", gpu=0, labels={"nvidia.com/gpu.count": "8"}),
        node("mig", gpu=0, labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/gpu.count": "1"}),
        node("mixed", gpu=0, labels={"nvidia.com/gpu.count": "4", "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-balanced"}),
    )
    names = _node_resource_names(nodes, ())
    mig, labelled = _repairable_devices(nodes, names)
    # all-1g on one GPU: 7 slices; the mixed-strategy node's label is not a missing-GPU sign.
    assert mig == {1: ("nvidia.com/mig-1g.10gb", 7)}
    assert labelled == {0: 8, 1: 1}
    assert list(names)[-2:] == ["nvidia.com/mig-1g.10gb", GPU]


def test_pods_by_node_groups_bound_pods_and_shares_request_maps():
    req = {"cpu": 1000}
    pods = (pod("p1", "n1"), pod("p2", "", gpu=1), pod("p3", "n1", gpu=2))
    pods = pods + (type(pods[0])(namespace="default", name="p4", node_name="n2", requests=req),
                   type(pods[0])(namespace="default", name="p5", node_name="n2", requests=req))
    names = {"cpu": None, "memory": None, "pods": None}
    by_node, shapes = _pods_by_node(pods, names)
    assert {k: [p.name for p in v] for k, v in by_node.items()} == {"n1": ["p1", "p3"], "n2": ["p4", "p5"]}
    assert len(shapes) == 3  # p1's, p3's and the one map p4 and p5 share; the Pending p2 is not counted
    assert GPU in names


def test_resource_matrices_default_pods_and_sum_bound_requests():
    nodes = (Node("n1", capacity={"cpu": 4000}, allocatable={"cpu": 3500}), node("n2", gpu=8, cpu=8, mem_gi=0, pods=20))
    pods = (pod("a", "n1", cpu=1), pod("b", "n1", cpu=0.5), pod("c", "n2", gpu=8))
    names = _node_resource_names(nodes, ())
    by_node, shapes = _pods_by_node(pods, names)
    col = {r: i for i, r in enumerate(names)}
    alloc, cap, used = _resource_matrices(nodes, col, by_node, shapes, None)
    assert alloc[0, col["pods"]] == DEFAULT_MAX_PODS and cap[0, col["pods"]] == DEFAULT_MAX_PODS
    assert alloc[0, col["cpu"]] == 3500 and cap[0, col["cpu"]] == 4000
    assert used[0, col["cpu"]] == 1500 and used[0, col["pods"]] == 2
    assert used[1, col[GPU]] == 8 and used[1, col["pods"]] == 1 and alloc[1, col["pods"]] == 20
    _, _, given = _resource_matrices(nodes, col, by_node, shapes, {"n2": {"cpu": 7, "unknown.io/x": 3}})
    assert given[1, col["cpu"]] == 7 and given[0].sum() == 0


def test_ever_alloc_repairs_devices_not_base_resources():
    alloc = np.array([[3500, 6, 0]], dtype=np.int64)
    cap = np.array([[4000, 8, 0]], dtype=np.int64)
    col = {"cpu": 0, GPU: 1, "nvidia.com/mig-1g.10gb": 2}
    dev = np.array([False, True, True])
    ever = _ever_alloc(alloc, cap, dev, col, {0: 10}, {0: ("nvidia.com/mig-1g.10gb", 7)})
    # cpu stays allocatable (reserved by the system); GPUs: capacity 8, raised to the label's 10.
    assert ever.tolist() == [[3500, 10, 7]]


def _demand(snap, name, count, gpu, mask=None):
    sh = shape_of(snap, {GPU: gpu})
    return Demand(name, sh, count, np.ones(len(snap.nodes), dtype=bool) if mask is None else mask)


def test_class_table_groups_interchangeable_nodes_most_constrained_first():
    snap = snapshot([node("a", gpu=8), node("b", gpu=8), node("c", gpu=4), node("d", gpu=1)])
    ds = [_demand(snap, "big", 2, 4), _demand(snap, "one", 1, 1)]
    ks = [np.array([2, 2, 1, 0]), np.array([8, 8, 4, 1])]
    classes, vl, ncol = _class_table(snap.ever_alloc, ds, ks)
    # d takes only "one" (1 demand) and comes first; then the larger capacity: a/b before c.
    assert [c[0].tolist() for c in classes] == [[3], [0, 1], [2]]
    assert [c[2] for c in classes] == [(0, 1), (2, 8), (1, 4)]
    assert ncol == 2 and sorted(map(sorted, vl)) == [[1, 1], [1, 4]]
    assert _class_table(snap.ever_alloc, ds, [np.array([0, 0, 1, 0]), ks[1]]) is None  # 1 < 2 pods of "big"
    suf_k, suf_res = _suffix_bounds(classes, 2, ncol)
    assert suf_k[0] == [5, 21] and suf_k[3] == [0, 0]


def test_node_configs_are_descending_with_the_empty_one_last():
    # One node of 8 GPUs; demand 0's pods take 4 GPUs (≤ 2 per node, 2 wanted), demand 1's take 2 (≤ 4, 1 wanted):
    # (2, 0) fills the node, (1, 1) uses 6, (1, 0), (0, 1), and the empty one last.
    cls = (np.array([0]), [10, 8], (2, 4))  # capacity per column (pods, GPU); pods each demand takes alone
    steps = [0]
    out = _node_configs(cls, [[1, 4], [1, 2]], (2, 1), steps, 1000)
    assert out == [(2, 0), (1, 1), (1, 0), (0, 1), (0, 0)]
    assert steps[0] > 0


def test_placement_of_hands_each_configuration_the_next_node_of_its_class():
    snap = snapshot([node("a"), node("b")])
    ds = [_demand(snap, "x", 3, 4), _demand(snap, "y", 1, 1)]
    classes = [(np.array([5, 9]), [8], (2, 8))]
    assert _placement_of([(0, (2, 0)), (0, (1, 1))], classes, ds) == {"x": [(5, 2), (9, 1)], "y": [(9, 1)]}


def test_largest_domain_and_gang_nodes():
    snap = snapshot([node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z1"}), node("c", labels={"zone": "z2"}),
                     Node("d", labels={"zone": "z2"})])
    ev = evaluate_pod_set(snap, pod_set("w", 5, gpu=4, required_topology="zone"), None, None, EngineOptions())
    # 2 pods of 4 GPUs per 8-GPU node: z1 holds 4, z2 2 (d reports no capacity).
    assert domain_sums(label_domains(snap, ("zone",)), ev.k_ever).max() == 4
    assert _gang_nodes(snap, [ev]) is None  # d is eligible and of unknown capacity
    # The nodes a pod set may use are the ones its filters pass (here its selector), whatever they hold.
    snap2 = snapshot([node("a", mem_gi=10, labels={"zone": "z1"}), node("b", gpu=0, mem_gi=10, labels={"zone": "z1"}),
                      node("c", mem_gi=10, labels={"zone": "z2"})])
    ev2 = evaluate_pod_set(snap2, pod_set("w", 1, gpu=1, selector={"zone": "z1"}), None, None, EngineOptions())
    mask, sums = _gang_nodes(snap2, [ev2])
    assert mask.tolist() == [True, True, False] and sums[snap2.col[GPU]] == 8 and sums[snap2.col["memory"]] == 20 * GI


def test_sort_findings_puts_proofs_first_then_the_told_order():
    fs = [Finding("Fragmented", WAITS, "f"), Finding("CompetingPendingGangs", "Info", "c"),
          Finding("ExceedsClusterCapacity", NEVER_FITS, "e"), Finding("InsufficientCapacity", WAITS, "i"),
          Finding("Fragmented", WAITS, "again")]
    reasons = sort_findings(fs)
    assert reasons == ["ExceedsClusterCapacity", "Fragmented", "InsufficientCapacity"]
    assert [f.code for f in fs] == ["ExceedsClusterCapacity", "Fragmented", "Fragmented", "InsufficientCapacity", "CompetingPendingGangs"]
    assert ORDER.index("Fragmented") < ORDER.index("InsufficientCapacity")


def test_options_say_what_is_a_gpu_and_when_a_gang_is_all_or_nothing():
    assert is_gpu_resource("nvidia.com/mig-1g.10gb", EngineOptions().gpu_resources)
    assert not EngineOptions().is_gpu("cpu")
    plain = gang(pod_set("w", 2, gpu=1), kind="Job", all_or_nothing=False)
    assert all_or_nothing(plain, EngineOptions()) is False
    assert all_or_nothing(plain, EngineOptions(plain_jobs_as_gangs=True)) is True


def test_every_waits_or_never_fits_code_in_the_source_has_a_place_in_order():
    """A reason missing from ORDER is told last, after Info, whatever it means: each code the
    package builds a Finding with, unless its severity is written as Info there, must be ranked
    (found by reading the source: a literal code, or a module constant holding one)."""
    import pathlib
    import re
    root = pathlib.Path(__file__).resolve().parents[1] / "webhook"
    texts = [f.read_text() for f in root.rglob("*.py")]
    consts = {m.group(1): m.group(2) for t in texts for m in re.finditer(r'^([A-Z][A-Z_]+)\s*=\s*"([A-Z][A-Za-z]+)"', t, re.M)}
    pat = re.compile(r'Finding\(\s*(?:"([A-Z][A-Za-z]+)"|([A-Z][A-Z_]+))\s*,\s*([^,]+),')
    codes = set()
    for t in texts:
        for m in pat.finditer(t):
            code = m.group(1) or consts.get(m.group(2))
            if code and m.group(3).strip() not in ("INFO", '"Info"'):
                codes.add(code)
    # the scan sees literal, constant and variable-severity constructions
    assert {"TopologyPlacementFailed", "InvalidTopologyRequest", "QuantityOverflow", "ExceedsMaxQuota", "InvalidGang"} <= codes
    assert "CompetingPendingGangs" not in codes  # Info where it is built
    assert sorted(codes - set(ORDER)) == []
    assert ORDER.index("InvalidTopologyRequest") < ORDER.index("TopologyPlacementFailed") < ORDER.index("TopologyUnresolved")
    assert ORDER.index("PlacementUnproven") < ORDER.index("TopologyNotEnforced")
