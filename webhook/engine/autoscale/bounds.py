"""How much a scale-up source can add: pods of one shape, and resources, under its limits.

Owns the arithmetic of Karpenter's limits and node-group sizes; not whether a pod matches the
source (``match``) nor the verdict (``review``).

Karpenter's ``spec.limits`` cap the total *capacity* of a NodePool's nodes: it launches no node
whose capacity would take the pool past a limit (karpenter
pkg/controllers/provisioning/scheduling/nodeclaim.go filters instance types by the remaining
resources; pkg/controllers/provisioning/provisioner.go skips pools whose limits are exceeded). A
new node's allocatable is at most its capacity, so the pods new nodes can hold need at most
``limit − in use`` of each limited resource: with the shape of new nodes unknown, that and the
node count caps are the only bounds there are.

Two views (``ever``):

* now (``ever=False``): what the source can still add today — ``limits − in_use``,
  ``max_new_nodes``. Used for NeedsScaleUp's numbers, never for a proof.
* ever (``ever=True``): what the source's nodes could hold at most once its current nodes were
  replaced (Karpenter consolidates empty nodes; a node group scales down then up): the whole
  limit, and ``max_new_nodes + nodes`` nodes. Proofs use this view only, so a NodePool whose
  limit is taken by idle nodes never proves NeverFits.

Units: scheduler units (millicores, bytes, counts). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import NODES_LIMIT, ScaleUpSource

__all__ = ["pods_room", "nodes_for", "resource_room", "per_node"]


def _limit(src: ScaleUpSource, resource: str, ever: bool) -> int | None:
    """The capacity of ``resource`` new nodes may add (None = unlimited)."""
    if resource not in src.limits:
        return None
    return max(0, int(src.limits[resource])) if ever else src.remaining(resource)


def _node_cap(src: ScaleUpSource, ever: bool) -> int | None:
    """At most this many new nodes (None = no cap): ``max_new_nodes`` (plus today's nodes when
    ``ever``) and a ``nodes`` limit."""
    caps = []
    if src.max_new_nodes is not None:
        caps.append(max(0, src.max_new_nodes) + (src.nodes if ever else 0))
    n = _limit(src, NODES_LIMIT, ever)
    if n is not None:
        caps.append(n)
    return min(caps) if caps else None


def per_node(src: ScaleUpSource, requests: Mapping[str, int], max_per_node: int | None) -> int | None:
    """Pods of this shape one new node of ``src.node_shape`` holds (None when the shape is unknown)."""
    shape = src.node_shape
    if shape is None:
        return None
    k: int | None = None
    for r, v in requests.items():
        if v <= 0:
            continue
        fit = int(shape.get(r, 0)) // int(v)
        k = fit if k is None else min(k, fit)
    if "pods" in shape:
        k = int(shape["pods"]) if k is None else min(k, int(shape["pods"]))
    if max_per_node is not None:
        k = max_per_node if k is None else min(k, max_per_node)
    return k  # None: a pod asking nothing, on a shape without a pods count: unbounded


def _nodes_by_limits(src: ScaleUpSource, ever: bool) -> int | None:
    """New nodes of the known shape the limits allow (None = unlimited). A node's capacity is at
    least its allocatable, so counting allocatable against the limit over-counts nodes: sound."""
    shape = src.node_shape or {}
    n: int | None = None
    for r in src.limits:
        if r == NODES_LIMIT:
            continue
        size = int(shape.get(r, 0))
        if size <= 0:
            continue
        fit = (_limit(src, r, ever) or 0) // size
        n = fit if n is None else min(n, fit)
    return n


def pods_room(src: ScaleUpSource, requests: Mapping[str, int], max_per_node: int | None, *, ever: bool = False) -> int | None:
    """At most this many pods of the shape ``requests`` (scheduler units) fit on nodes ``src`` can
    add; None = unbounded. 0 when a limit is below one pod's request, the node cap is 0, or the
    known node shape cannot hold one pod."""
    nodes = _node_cap(src, ever)
    k = per_node(src, requests, max_per_node)
    if src.node_shape is not None:
        if k == 0:
            return 0
        by_limits = _nodes_by_limits(src, ever)
        if by_limits is not None:
            nodes = by_limits if nodes is None else min(nodes, by_limits)
        if nodes is None or k is None:
            return None if nodes != 0 else 0
        return k * nodes
    room: int | None = None
    for r, v in requests.items():
        if v <= 0:
            continue
        lim = _limit(src, r, ever)
        if lim is not None:
            room = lim // int(v) if room is None else min(room, lim // int(v))
    pods_lim = _limit(src, "pods", ever)
    if pods_lim is not None:
        room = pods_lim if room is None else min(room, pods_lim)
    if nodes is not None:
        if nodes == 0:
            return 0
        if max_per_node is not None:
            room = nodes * max_per_node if room is None else min(room, nodes * max_per_node)
    return room


def nodes_for(src: ScaleUpSource, requests: Mapping[str, int], max_per_node: int | None, pods: int) -> int | None:
    """New nodes of ``src.node_shape`` that ``pods`` pods of this shape need (ceil), None when the
    shape is unknown or holds no such pod."""
    k = per_node(src, requests, max_per_node)
    if src.node_shape is None or not k:
        return None
    return -(-pods // k) if pods > 0 else 0


def resource_room(src: ScaleUpSource, resource: str, *, ever: bool = False) -> int | None:
    """At most this much of ``resource`` (scheduler units) new nodes of ``src`` can add; None =
    unbounded. With a known shape also ``node cap × shape``."""
    lim = _limit(src, resource, ever)
    if src.node_shape is not None:
        size = int(src.node_shape.get(resource, 0))
        if size <= 0:
            return 0
        nodes = _node_cap(src, ever)
        by_limits = _nodes_by_limits(src, ever)
        if by_limits is not None:
            nodes = by_limits if nodes is None else min(nodes, by_limits)
        if nodes is not None:
            lim = nodes * size if lim is None else min(lim, nodes * size)
    return lim
