"""Small random clusters with racks inside blocks, for the topology surface tests (#13)."""

from __future__ import annotations

import random

from builders import GPU, node, pod, snapshot
from webhook.engine.model import TopologyState

RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"

__all__ = ["RACK", "BLOCK", "random_cluster", "naive"]


def random_cluster(rng: random.Random, topology: bool = False):
    """6–24 GPU nodes over blocks b0/b1 with racks r0–r2 *inside each block* (so "r1" names two
    racks when the block is a level above), a few nodes without a rack label, a CPU node; random
    usage, cordons, NotReady and a lost device plugin."""
    nodes, pods = [], []
    for i in range(rng.randint(6, 24)):
        labels = {BLOCK: f"b{rng.randint(0, 1)}", "nvidia.com/gpu.product": rng.choice(("H100", "H200"))}
        if rng.random() > 0.1:
            labels[RACK] = f"r{rng.randint(0, 2)}"
        state = rng.choice(("ok",) * 6 + ("cordoned", "notready", "plugin"))
        nodes.append(node(f"n{i:02d}", gpu=8, labels=labels, unschedulable=state == "cordoned",
                          ready=False if state == "notready" else True, alloc_gpu=0 if state == "plugin" else None))
        used = rng.choice((0, 0, 2, 4, 8))
        if used and state != "plugin":
            pods.append(pod(f"p{i}", f"n{i:02d}", gpu=used))
    nodes.append(node("cpu-0", gpu=0, labels={BLOCK: "b0", RACK: "r0"}))
    topo = TopologyState(kueue={"default": (BLOCK, RACK, "kubernetes.io/hostname")}) if topology else None
    return snapshot(nodes, pods, topology=topo)


def naive(snap, keys):
    """The per-domain figures counted node by node (the definitions of webhook.diagnose.by_domain)."""
    used = {}
    for p in snap.pods:
        used[p.node_name] = used.get(p.node_name, 0) + p.requests.get(GPU, 0)
    out = {}
    for n in snap.nodes:
        cap = n.capacity.get(GPU, 0)
        if not cap or any(k not in n.labels for k in keys):
            continue
        name = "/".join(n.labels[k] for k in keys)
        alloc = n.allocatable.get(GPU, 0)
        u = used.get(n.name, 0)
        schedulable = n.ready is not False and not n.unschedulable
        free = max(alloc - u, 0) if schedulable else 0
        whole = schedulable and u == 0 and alloc >= cap and alloc > 0
        row = out.setdefault(name, dict(nodes=0, eligible=0, whole_free=0, free=0, stranded=0))
        row["nodes"] += 1
        row["eligible"] += schedulable
        row["whole_free"] += whole
        row["free"] += free
        row["stranded"] += 0 if whole else free
    return out
