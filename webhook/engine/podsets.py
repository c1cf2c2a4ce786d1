"""The per-pod-set view ``evaluate`` works on: eligible nodes and pods per node, now and ever.

Owns ``PodSetEval`` (a pod set's node masks — ever on the repaired, empty cluster, now on
today's free resources — and pods of its shape each node can take) and its memo on the snapshot
per distinct shape (``evaluate_pod_set``; ``ClusterSnapshot.recall``/``remember``), plus the
small helpers every step shares (the main GPU, the primary pod set, request text, node
samples). Not the verdict rules (``proofs``, ``evaluate``) nor the text (``explain``).

Arrays: bool / int64 [nodes], read-only once memoised. Units: scheduler units (millicores,
bytes, GPUs as counts). Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from .filters import Constraints, FilterResult, filter_nodes
from .fit import Shape, pods_per_node, shape_of
from .model import PodSet, ResourceFlavor
from .options import EngineOptions, is_gpu_resource
from .quantity import format_quantity
from .snapshot import ClusterSnapshot

__all__ = ["SAMPLES", "PodSetEval", "stat_of", "fmt_req", "main_gpu", "primary_pod_set", "constraints_of", "evaluate_pod_set",
           "sample_names", "same_shape_pods"]


SAMPLES = 3


@dataclass
class PodSetEval:
    """One pod set's view of the cluster.

    ``ever_mask`` / ``now_mask``: bool [nodes], the nodes its filters pass on the repaired
    cluster / today (the now mask also drops nodes whose host ports are taken); ``k_ever`` /
    ``k_now``: int64 [nodes], pods of its shape each such node takes when empty / on today's
    free resources (0 elsewhere); ``now_filter``: the filter result behind the now mask (per-node
    reasons); ``key``: the memo key (its shape and constraints, not its name or count).
    """

    ps: PodSet
    shape: Shape
    ever_mask: np.ndarray
    now_filter: FilterResult
    now_mask: np.ndarray
    k_ever: np.ndarray
    k_now: np.ndarray
    port_blocked: np.ndarray | None = None
    key: tuple = ()
    # Count-independent figures derived from the masks, filled lazily by ``stat_of``. Shared by
    # every copy ``evaluate_pod_set`` hands out for the same shape (``replace`` keeps the dict).
    stats: dict = field(default_factory=dict)


def stat_of(ev: PodSetEval, name: str, compute) -> Any:
    """``ev.stats[name]``, computing it once per shape (the arrays are read-only)."""
    try:
        return ev.stats[name]
    except KeyError:
        v = ev.stats[name] = compute()
        return v


def fmt_req(requests, options: EngineOptions) -> str:
    """A per-pod request as text, accelerators first: "8 nvidia.com/gpu, 90 cpu, 900Gi memory"."""
    return _fmt_req_cached(tuple(requests.items()), options.gpu_resources)


@lru_cache(maxsize=1024)
def _fmt_req_cached(items: tuple, patterns: tuple[str, ...]) -> str:
    parts = []
    for r, v in sorted(items, key=lambda kv: (not is_gpu_resource(kv[0], patterns), kv[0])):
        if v:
            parts.append(f"{format_quantity(r, v)} {r}")
    return ", ".join(parts) or "no resources"


def main_gpu(ps: PodSet, options: EngineOptions) -> str | None:
    """The first accelerator resource the pod set requests, or None."""
    for r, v in ps.requests.items():
        if v and options.is_gpu(r):
            return r
    return None


def primary_pod_set(pod_sets: list[PodSet], options: EngineOptions) -> PodSet:
    """The pod set a Decision's node view and fragmentation describe: most GPUs per pod, then
    most pods, then most cpu per pod."""
    def key(ps: PodSet):
        g = main_gpu(ps, options)
        return (ps.requests.get(g, 0) if g else 0, ps.count, ps.requests.get("cpu", 0))

    return max(pod_sets, key=key)


def constraints_of(ps: PodSet, flavors: list[ResourceFlavor] | None, options: EngineOptions) -> list[Constraints]:
    """The filters' constraints of the pod set: one per candidate Kueue flavor (its nodeLabels
    and tolerations added), or one without a flavor."""
    ert, ns = options.extended_resource_toleration, options.namespace_default_tolerations
    if not flavors:
        return [Constraints(ps, extended_resource_toleration=ert, namespace_default_tolerations=ns)]
    return [Constraints(ps, f.node_labels, f.tolerations, ert, ns) for f in flavors]


def _used_ports(snap: ClusterSnapshot, ps: PodSet) -> np.ndarray:
    wanted = {(p.port, p.protocol) for p in ps.host_ports}
    blocked = np.zeros(len(snap.nodes), dtype=bool)
    for node, pods in snap.pods_by_node.items():
        for p in pods:
            if any((hp.port, hp.protocol) in wanted for hp in p.host_ports):
                blocked[snap.node_index[node]] = True
                break
    return blocked


def _shape_key(ps: PodSet, flavors, now_flavor, options: EngineOptions) -> tuple:
    """What a pod set's per-node view depends on (not its name or count)."""
    return (
        tuple(sorted(ps.requests.items())), tuple(sorted(ps.node_selector.items())), ps.required_affinity,
        ps.tolerations, ps.node_name, ps.host_ports, ps.max_per_node,
        tuple(f.name for f in flavors) if flavors else None, now_flavor, options.transient_taints,
        ps.runtime_class, options.extended_resource_toleration, options.namespace_default_tolerations,
    )


def evaluate_pod_set(snap: ClusterSnapshot, ps: PodSet, flavors, now_flavor, options) -> PodSetEval:
    """Masks and pods-per-node of one pod set, now and ever; memoised on the snapshot per shape."""
    key = ("podset",) + _shape_key(ps, flavors, now_flavor, options)
    hit = snap.recall(key)
    if hit is not None:
        return replace(hit, ps=ps)
    ev = _compute_pod_set(snap, ps, flavors, now_flavor, options)
    for a in (ev.ever_mask, ev.now_mask, ev.k_ever, ev.k_now):
        a.setflags(write=False)
    ev.key = key
    return snap.remember(key, ev)


def _compute_pod_set(snap: ClusterSnapshot, ps: PodSet, flavors, now_flavor, options) -> PodSetEval:
    cons = constraints_of(ps, flavors, options)
    ever_mask = np.zeros(len(snap.nodes), dtype=bool)
    for c in cons:
        ever_mask |= filter_nodes(snap, c, ever=True, transient=options.transient_taints).mask
    # The "now" view follows the flavor Kueue would assign now (else the first candidate).
    now_c = cons[0]
    if now_flavor is not None and flavors:
        now_c = next((c for c, f in zip(cons, flavors) if f.name == now_flavor), cons[0])
    now_filter = filter_nodes(snap, now_c, ever=False)
    # The now mask is the now filter's (the flavor assigned now, else the first candidate, as
    # Kueue tries them in order), so "eligible" and the node summary count the same nodes.
    now_mask = now_filter.mask.copy()
    shape = shape_of(snap, ps.requests)
    k_ever = np.where(ever_mask, pods_per_node(snap.ever_alloc, shape, ps.max_per_node), 0)
    port_blocked = _used_ports(snap, ps) if ps.host_ports else None
    if port_blocked is not None:
        now_mask = now_mask & ~port_blocked
    k_now = np.where(now_mask, pods_per_node(snap.free, shape, ps.max_per_node), 0)
    return PodSetEval(ps, shape, ever_mask, now_filter, now_mask, k_ever, k_now, port_blocked)


def sample_names(snap: ClusterSnapshot, idx: np.ndarray) -> list[str]:
    """Names of the first ``SAMPLES`` nodes of ``idx`` (node indices)."""
    return [snap.nodes[int(i)].name for i in idx[:SAMPLES]]


def same_shape_pods(gang_sets: list[PodSet], ps: PodSet) -> int:
    """Pods of the gang with exactly ``ps``'s per-pod request (master + workers of one shape)."""
    return sum(o.count for o in gang_sets if dict(o.requests) == dict(ps.requests))
