"""kube-scheduler's filters on per-node rules (node name, hostname label, matchFields)."""

from builders import node, pod_set, snapshot, taint
from webhook.engine.filters import R_AFFINITY, R_NODE_NAME, R_TAINT, R_UNSCHEDULABLE, Constraints, filter_nodes
from webhook.engine.model import NodeSelectorRequirement, NodeSelectorTerm

NODES = [node(f"n{i}", labels={"zone": "a" if i < 5 else "b"}, unschedulable=(i == 3),
              taints=[taint("dedicated", "x")] if i == 7 else None) for i in range(10)]
SNAP = snapshot(NODES)


def reasons(ps, ever=False):
    r = filter_nodes(SNAP, Constraints(ps), ever=ever)
    return [r.node_reason(SNAP, i) for i in range(len(NODES))]


def test_hostname_in_and_zone_terms_are_exact_per_node():
    term = NodeSelectorTerm((
        NodeSelectorRequirement("kubernetes.io/hostname", "In", ("n1", "n3", "n7", "n8")),
        NodeSelectorRequirement("zone", "In", ("a",)),
    ))
    other = NodeSelectorTerm((NodeSelectorRequirement("kubernetes.io/hostname", "NotIn", ("n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7")),))
    got = reasons(pod_set("w", 1, gpu=1, required_affinity=(term, other)))
    # n1 matches term 1; n3 is cordoned first; n7 is tainted first; n8, n9 match term 2.
    assert got == [R_AFFINITY, None, R_AFFINITY, R_UNSCHEDULABLE, R_AFFINITY, R_AFFINITY, R_AFFINITY, R_TAINT, None, None]


def test_node_name_and_match_fields():
    got = reasons(pod_set("w", 1, node_name="n4"))
    # NodeName runs before TaintToleration, NodeUnschedulable before both.
    assert got == [R_NODE_NAME] * 3 + [R_UNSCHEDULABLE] + [None] + [R_NODE_NAME] * 5
    fields = NodeSelectorTerm((), (NodeSelectorRequirement("metadata.name", "In", ("n2", "n9")),))
    got = reasons(pod_set("w", 1, required_affinity=(fields,)))
    assert [i for i, r in enumerate(got) if r is None] == [2, 9]
    # ever: cordon is repairable, the permanent taint is not
    got = reasons(pod_set("w", 1, node_name="n3"), ever=True)
    assert got[3] is None and got[7] == R_NODE_NAME


def test_hostname_selector_counts_like_the_scheduler():
    ps = pod_set("w", 1, selector={"kubernetes.io/hostname": "n5"})
    r = filter_nodes(SNAP, Constraints(ps), ever=False)
    assert r.histogram(SNAP) == {R_AFFINITY: 7, R_UNSCHEDULABLE: 1, R_TAINT: 1}
    assert int(r.mask.sum()) == 1 and r.mask[5]

