"""``gangcheck fragmentation``'s analysis: for one pod shape, where the free GPUs are and which of
them no such pod can use (FIELD-NOTES §6); and ``parse_shape``, the ``--shape`` argument.

Owns the report's numbers (``fragmentation``: histogram of nodes by free GPUs, whole free nodes per
GPU product, free and stranded GPUs, the largest gang of the shape placeable now, the per-node
heatmap data); ``render_text.render_fragmentation`` prints it, JSON is the dict itself. Node
eligibility comes from the engine's filters (``webhook.engine.filters``), pods per node from
``webhook.engine.fit``. Pure: no I/O. Units: GPUs are device counts; a shape is per-pod requests
in scheduler units (millicores, bytes, devices).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from ..engine.evaluate import EngineOptions
from ..engine.filters import Constraints, filter_nodes
from ..engine.fit import pods_per_node, shape_of
from ..engine.model import PodSet, Toleration
from ..engine.quantity import parse_quantity
from ..engine.snapshot import GPU, ClusterSnapshot

__all__ = ["parse_shape", "fragmentation"]


#: A resource name as Kubernetes writes one: an optional DNS prefix and "/", then a name.
_RESOURCE_NAME = re.compile(r"^(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def parse_shape(text: str, options: EngineOptions | None = None) -> dict[str, int]:
    """``"8xnvidia.com/gpu"`` or ``"8xnvidia.com/gpu,96xcpu,1000Gixmemory"`` → per-pod request
    in scheduler units.

    Raises:
        ValueError: text that is not ``AMOUNTxRESOURCE[,...]`` (also an empty value, as argparse
            hands ``--shape=--`` over), an amount that is not a quantity, a resource name that
            is not one, or — with ``options`` — a shape that asks for no GPU resource (the
            report is about GPUs: without one every free GPU would read as stranded) or for 0 GPUs.
    """
    example = "e.g. 8xnvidia.com/gpu or 4xnvidia.com/gpu,48xcpu"
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"--shape: expected AMOUNTxRESOURCE[,AMOUNTxRESOURCE…], {example}; got an empty value")
    out: dict[str, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        amount, sep, resource = part.partition("x")
        if not sep or not resource or not amount:
            raise ValueError(f"--shape {text!r}: expected AMOUNTxRESOURCE, {example}")
        if not _RESOURCE_NAME.match(resource):
            raise ValueError(f"--shape {text!r}: {resource!r} is not a resource name, {example}")
        try:
            out[resource] = parse_quantity(resource, amount)
        except ValueError as exc:
            raise ValueError(f"--shape {text!r}: {exc}") from None
    if not out:
        raise ValueError(f"--shape {text!r}: empty, {example}")
    if options is not None:
        gpus = [r for r in out if options.is_gpu(r)]
        if not gpus:
            raise ValueError(f"--shape {text!r}: asks for no GPU resource ({', '.join(options.gpu_resources)}); "
                             f"fragmentation is measured in GPUs per pod, {example}")
        if not any(out[r] > 0 for r in gpus):
            raise ValueError(f"--shape {text!r}: asks for 0 {gpus[0]}; give at least 1, {example}")
    return out


def fragmentation(snap: ClusterSnapshot, shape: Mapping[str, int], options: EngineOptions | None = None) -> dict:
    """Cluster-wide fragmentation for one pod shape (FIELD-NOTES §6), JSON-ready.

    Nodes considered: every node advertising (or labelled with) the shape's GPU resource.
    Eligible: passes the scheduler's filters now for a pod of the shape tolerating the
    ``nvidia.com/gpu`` taint (no selector). Returns the histogram of nodes by free GPUs
    (0..max), whole free nodes per ``nvidia.com/gpu.product``, free and stranded GPUs with the
    ratio, the largest gang of the shape placeable now, and per node GPUs in use (heatmap).
    """
    options = options or EngineOptions()
    gpu = next((r for r in shape if options.is_gpu(r)), GPU)
    ps = PodSet("probe", 1, dict(shape), tolerations=(Toleration(key=gpu, operator="Exists"),))
    mask_now = filter_nodes(snap, Constraints(ps), ever=False).mask
    sh = shape_of(snap, shape)
    k_now = np.where(mask_now, pods_per_node(snap.free, sh), 0)
    c = snap.col.get(gpu)
    if c is None:
        return {"shape": dict(shape), "resource": gpu, "gpu_nodes": 0, "histogram": {}, "whole_free_by_product": {},
                "free": 0, "stranded": 0, "ratio": 0.0, "largest_gang": 0, "nodes_fit": 0, "heatmap": []}
    alloc = snap.alloc[:, c]
    ever = snap.ever_alloc[:, c]
    gpu_nodes = (ever > 0)
    free = np.maximum(snap.free[:, c], 0)
    used = snap.used[:, c]
    top = int(ever.max(initial=0))
    hist = {str(i): 0 for i in range(top + 1)}
    for v in free[gpu_nodes & mask_now].tolist():
        hist[str(min(v, top))] = hist.get(str(min(v, top)), 0) + 1
    whole: dict[str, int] = {}
    whole_mask = gpu_nodes & mask_now & (used == 0) & (free >= alloc) & (alloc > 0)
    for i in np.flatnonzero(gpu_nodes & mask_now).tolist():
        prod = snap.nodes[i].labels.get("nvidia.com/gpu.product", "unknown")
        whole.setdefault(prod, 0)
        if whole_mask[i]:
            whole[prod] += 1
    free_total = int(free[gpu_nodes & mask_now].sum())
    stranded = int(free[gpu_nodes & mask_now & (k_now == 0)].sum())
    heat = []
    for i in np.flatnonzero(gpu_nodes).tolist():
        n = snap.nodes[i]
        state = "ok" if mask_now[i] else ("cordoned" if n.unschedulable else "notready" if n.ready is False else "excluded")
        if ever[i] > alloc[i]:
            state = "devices"
        heat.append({"node": n.name, "used": int(used[i]), "allocatable": int(alloc[i]), "installed": int(ever[i]), "state": state,
                     "product": n.labels.get("nvidia.com/gpu.product", "")})
    return {
        "shape": dict(shape),
        "resource": gpu,
        "gpu_nodes": int(gpu_nodes.sum()),
        "eligible_nodes": int((gpu_nodes & mask_now).sum()),
        "histogram": hist,
        "whole_free_by_product": dict(sorted(whole.items())),
        "free": free_total,
        "stranded": stranded,
        "ratio": round(stranded / free_total, 4) if free_total else 0.0,
        "nodes_fit": int(np.count_nonzero(k_now)),
        "largest_gang": int(k_now.sum()),
        "heatmap": heat,
    }


