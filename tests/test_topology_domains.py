"""The domain index of a topology level (webhook.engine.topology.domains)."""

import numpy as np
import pytest

from webhook.engine.model import Node
from webhook.engine.snapshot import ClusterSnapshot
from webhook.engine.topology import label_domains, level_keys

LEVELS = ("block", "rack", "kubernetes.io/hostname")


def _snap():
    nodes = []
    for i in range(12):
        labels = {"block": f"b{i % 2}", "rack": f"r{(i // 2) % 3}", "kubernetes.io/hostname": f"n{i}"}
        if i == 5:
            labels = {"block": "b1"}  # no rack label: in no rack domain
        nodes.append(Node(name=f"n{i}", labels=labels, allocatable={"cpu": 1000}, capacity={"cpu": 1000}))
    return ClusterSnapshot(nodes)


def test_level_keys_take_the_levels_above():
    assert level_keys("rack", LEVELS) == ("block", "rack")
    assert level_keys("block", LEVELS) == ("block",)
    assert level_keys("zone", LEVELS) == ("zone",)
    assert level_keys("rack") == ("rack",)


def test_a_rack_is_identified_by_its_block_too():
    d = label_domains(_snap(), level_keys("rack", LEVELS))
    assert d.names == ("b0/r0", "b1/r0", "b0/r1", "b1/r1", "b0/r2", "b1/r2")
    assert d.ids.tolist() == [0, 1, 2, 3, 4, -1, 0, 1, 2, 3, 4, 5]
    assert d.sums(np.ones(12, dtype=np.int64)).tolist() == [2, 2, 2, 2, 2, 1]
    assert d.nodes_of(5).tolist() == [11]
    assert d.level == "rack"


def test_the_rack_label_alone_merges_blocks():
    d = label_domains(_snap(), ("rack",))
    assert d.names == ("r0", "r1", "r2")
    assert d.ids.tolist() == [0, 0, 1, 1, 2, -1, 0, 0, 1, 1, 2, 2]


def test_hostname_level_is_one_domain_per_node():
    d = label_domains(_snap(), ("kubernetes.io/hostname",))
    assert d.count == 11 and d.domain_of(5) == -1 and d.names[5] == "n6"


def test_cached_per_snapshot_and_read_only():
    snap = _snap()
    a = label_domains(snap, ("rack",))
    assert label_domains(snap, ("rack",)) is a
    with pytest.raises(ValueError):
        a.ids[0] = 3
    with pytest.raises(ValueError):
        label_domains(snap, ())


def test_empty_cluster():
    d = label_domains(ClusterSnapshot([]), ("rack",))
    assert d.count == 0 and d.ids.shape == (0,)
