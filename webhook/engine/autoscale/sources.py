"""The scale-up sources a check uses: the cluster's, with the policy's ``autoscaling`` applied.

Owns the merge of ``ClusterSnapshot.autoscaling`` (NodePools, node groups as the cluster shows
them) with ``EngineOptions.autoscaling`` (what the cluster cannot show), and their order;
not how either is read (``webhook.adapters.autoscaling_objects``, ``webhook.policy``).

* A policy pool named like a source gives it what the policy states: ``nodeShape`` (the shape of
  its new nodes), ``maxNodes`` (its size cap: ``max_new_nodes = maxNodes − nodes now``),
  ``provisioningSeconds``.
* A policy pool naming no source is a source of its own (``POLICY_POOL``) whose nodes carry its
  labels and taints; its nodes now are the existing nodes that carry all its labels.
* ``assumeScaleUp`` adds one source of unknown labels, taints and shape: no physical capacity
  proves NeverFits any more.

Order: Karpenter's — higher ``weight`` first, then the name later in the alphabet first
(karpenter pkg/utils/nodepool/nodepool.go ``OrderByWeight``, which the provisioner sorts its
NodePools with). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from ..options import EngineOptions
from ..snapshot import ClusterSnapshot
from .model import POLICY_POOL, PolicyPool, ScaleUpSource

__all__ = ["effective_sources", "ASSUMED"]

#: The name of the source ``assumeScaleUp`` adds.
ASSUMED = "assumed-autoscaler"


def _nodes_with(snap: ClusterSnapshot, labels) -> int:
    """Existing nodes carrying every label of ``labels`` (memoised per label set)."""
    items = tuple(sorted(labels.items()))
    key = ("autoscale-pool-nodes", items)
    hit = snap.recall(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    n = sum(1 for node in snap.nodes if all(node.labels.get(k) == v for k, v in items)) if items else 0
    return snap.remember(key, n)  # type: ignore[return-value]


def _apply(src: ScaleUpSource, pool: PolicyPool) -> ScaleUpSource:
    """``src`` with what the policy states about it."""
    changes = {}
    if pool.node_shape is not None:
        changes["node_shape"] = dict(pool.node_shape)
    if pool.max_nodes is not None:
        changes["max_new_nodes"] = max(0, pool.max_nodes - src.nodes - src.pending)
    if pool.provisioning_s is not None:
        changes["provisioning_s"] = pool.provisioning_s
    return replace(src, **changes) if changes else src


def _own(snap: ClusterSnapshot, i: int, pool: PolicyPool) -> ScaleUpSource:
    """A policy pool that names no source of the cluster, as a source of its own."""
    nodes = _nodes_with(snap, pool.labels)
    return ScaleUpSource(
        name=pool.name, kind=POLICY_POOL, requirements=(), labels=dict(pool.labels), taints=tuple(pool.taints),
        max_new_nodes=None if pool.max_nodes is None else max(0, pool.max_nodes - nodes),
        node_shape=None if pool.node_shape is None else dict(pool.node_shape), nodes=nodes,
        provisioning_s=pool.provisioning_s, origin=f"policy autoscaling.nodePools[{i}]")


def effective_sources(snap: ClusterSnapshot, options: EngineOptions) -> tuple[ScaleUpSource, ...]:
    """The sources for a check on ``snap`` under ``options``, in the order pods go to them."""
    policy = options.autoscaling
    if not policy.enabled:
        return ()
    base = snap.autoscaling.sources
    if not base and not policy.pools and not policy.assume_scale_up:
        return ()
    by_name = {p.name: p for p in policy.pools}
    out = [_apply(s, by_name[s.name]) if s.name in by_name else s for s in base]
    known = {s.name for s in base}
    out += [_own(snap, i, p) for i, p in enumerate(policy.pools) if p.name not in known]
    if policy.assume_scale_up:
        out.append(ScaleUpSource(name=ASSUMED, kind=POLICY_POOL, requirements=None, taints=None, node_shape=None,
                                 origin="policy autoscaling.assumeScaleUp"))
    # OrderByWeight: weight descending, ties by name descending (Python's sort is stable: by name
    # descending first, then by weight descending).
    out.sort(key=lambda s: s.name, reverse=True)
    out.sort(key=lambda s: s.weight, reverse=True)
    return tuple(out)
