"""Property: the grouped per-node filter (rules that read a node's name or hostname) gives, on
every node, exactly what kube-scheduler's filters give when run on that node alone.

Brute force: ``filters._reason`` on each node, one at a time (the node-by-node walk
kube-scheduler does). Checked: the mask, every node's reason, the reason histogram, and the
report's samples (the first failing nodes per reason, in node order).
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import node, pod_set, snapshot, taint, toleration
from webhook.engine.filters import Constraints, _reason, filter_nodes
from webhook.engine.model import NodeSelectorRequirement, NodeSelectorTerm

HOST = "kubernetes.io/hostname"
NAMES = [f"n{i}" for i in range(12)]
HOSTS = NAMES + ["other-host"]


@st.composite
def clusters(draw):
    n = draw(st.integers(0, 12))
    nodes = []
    for i in range(n):
        labels = {"zone": draw(st.sampled_from(["a", "b"]))}
        hostname = draw(st.sampled_from(["own", "shared", "absent"]))
        nd = node(NAMES[i], labels=labels, unschedulable=draw(st.booleans()),
                  ready=draw(st.sampled_from([True, False, None])),
                  taints=[taint("dedicated", "x")] if draw(st.booleans()) else None)
        lab = dict(nd.labels)
        if hostname == "shared":
            lab[HOST] = "shared-host"  # two nodes may carry one hostname value
        elif hostname == "absent":
            del lab[HOST]
        nodes.append(type(nd)(name=nd.name, labels=lab, taints=nd.taints, unschedulable=nd.unschedulable,
                              ready=nd.ready, capacity=nd.capacity, allocatable=nd.allocatable))
    return nodes


values = st.lists(st.sampled_from(HOSTS + ["shared-host"]), max_size=4).map(tuple)


@st.composite
def requirements(draw):
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    key = draw(st.sampled_from([HOST, HOST, "zone"]))
    vals = () if op in ("Exists", "DoesNotExist") else draw(values)
    if key == "zone" and vals:
        vals = tuple(v if v in ("a", "b") else "a" for v in vals)
    return NodeSelectorRequirement(key, op, vals)


@st.composite
def pod_sets(draw):
    terms = []
    for _ in range(draw(st.integers(0, 3))):
        exprs = tuple(draw(st.lists(requirements(), max_size=3)))
        fields = ()
        if draw(st.booleans()):
            fields = (NodeSelectorRequirement("metadata.name", draw(st.sampled_from(["In", "NotIn"])), draw(values)),)
        terms.append(NodeSelectorTerm(exprs, fields))
    selector = {HOST: draw(st.sampled_from(HOSTS))} if draw(st.booleans()) else None
    tols = [toleration("dedicated")] if draw(st.booleans()) else None
    node_name = draw(st.sampled_from(["", "", *NAMES[:4]]))
    return pod_set("w", 1, gpu=1, selector=selector, tolerations=tols, required_affinity=tuple(terms),
                   node_name=node_name)


@settings(max_examples=400, deadline=None)
@given(clusters(), pod_sets(), st.booleans())
def test_grouped_per_node_filter_equals_node_by_node(nodes, ps, ever):
    snap = snapshot(nodes)
    c = Constraints(ps)
    got = filter_nodes(snap, c, ever=ever)
    want = [_reason(n.name, n.labels, n.taints, n.unschedulable, n.ready, c, ever, frozenset()) for n in nodes]
    assert [got.node_reason(snap, i) for i in range(len(nodes))] == want
    assert [bool(x) for x in got.mask] == [r is None for r in want]
    hist: dict[str, int] = {}
    for r in want:
        if r is not None:
            hist[r] = hist.get(r, 0) + 1
    assert got.histogram(snap) == hist
    first: dict[str, list[int]] = {}
    for i, r in enumerate(want):
        if r is not None and len(first.setdefault(r, [])) < 3:
            first[r].append(i)
    assert {r: list(ix) for r, ix in got.first_failing(3).items()} == first
    assert list(got.first_failing(3)) == list(first)  # reasons in the order a walk meets them
