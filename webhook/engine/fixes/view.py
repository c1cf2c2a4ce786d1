"""The gang's view of the cluster: ``GangView`` (per pod set: the nodes it may use now / ever and
how many of its pods each takes now), ``gang_view``, and which pods are the gang's own
(``own_pod``).

Owns the per-pod-set masks and counts the fixes start from, honouring the Kueue flavor the quota
layer assigned; not the verdict (``evaluate``) nor the victims (``units``). Units as in ``fit``:
scheduler units (millicores, bytes, counts) per resource column.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from ..decision import Decision
from ..filters import Constraints, filter_nodes
from ..fit import Shape, pods_per_node, shape_of
from ..model import BoundPod, GangRequest, PodSet, ResourceFlavor
from ..snapshot import ClusterSnapshot

__all__ = ["GangView", "gang_view", "is_gpu_name", "own_pod", "pod_set_constraints"]


@dataclass
class GangView:
    """Per pod set: the nodes it may use now/ever and how many of its pods each can take.

    ``main`` is the index of the primary pod set (most GPUs per pod, then most pods);
    ``own_bound`` / ``own_pending``: pods of this gang already in the snapshot.
    ``need`` pods of the main shape still to place; ``placeable`` of them fit on free resources now.
    """

    pod_sets: list[PodSet]
    shapes: list[Shape]
    now_masks: list[np.ndarray]
    ever_masks: list[np.ndarray]
    k_now: list[np.ndarray]
    main: int
    own_bound: list[BoundPod]
    own_pending: list[BoundPod]
    need: int
    placeable: int
    gpu: str | None
    priority: int

    @property
    def deficit(self) -> int:
        """Pods of the main shape that have no place now (≥ 0)."""
        return max(0, self.need - self.placeable)


def is_gpu_name(resource: str, options: Any = None) -> bool:
    """True for accelerator resources (``options.is_gpu`` when given, else the default names)."""
    if options is not None and hasattr(options, "is_gpu"):
        return bool(options.is_gpu(resource))
    return resource in ("nvidia.com/gpu", "amd.com/gpu") or resource.startswith("nvidia.com/mig-")


def own_pod(gang: GangRequest, p: BoundPod) -> bool:
    """True when ``p`` belongs to ``gang`` (gang key, or owner/group name in its namespace)."""
    if p.namespace != gang.namespace:
        return False
    if p.gang and (p.gang == gang.key or p.gang.lower() == gang.key.lower()):
        return True
    tail = p.gang.rsplit("/", 1)[-1] if p.gang else ""
    return bool(gang.name) and (tail == gang.name or p.owner_name == gang.name)


def _own_test(gang: GangRequest) -> Callable[[BoundPod], bool]:
    """``lambda p: own_pod(gang, p)`` for pods of the gang's namespace, with the gang's key and
    name worked out once."""
    key = gang.key
    low = key.lower()
    name = gang.name
    ascii_key = key.isascii()

    def own(p: BoundPod) -> bool:
        g = p.gang
        if g:
            # ASCII case folding keeps lengths: a key of another length cannot match.
            if g == key or ((len(g) == len(key) or not ascii_key or not g.isascii()) and g.lower() == low):
                return True
            # The part after the last "/" is a suffix of g.
            return bool(name) and ((g.endswith(name) and g.rsplit("/", 1)[-1] == name) or p.owner_name == name)
        return bool(name) and p.owner_name == name

    return own


def pod_set_constraints(snap: ClusterSnapshot, ps: PodSet, flavors_now: Mapping[str, str], options: Any = None) -> Constraints:
    """The constraints of ``ps`` with the Kueue flavor the quota layer assigned it
    (``flavors_now``: pod set name → flavor name, ``decision.quota["flavors"]``): the flavor's
    nodeLabels and tolerations added; with ``options`` (``EngineOptions``) its admission
    plugins (ExtendedResourceToleration, PodTolerationRestriction) as the engine has them."""
    fname = flavors_now.get(ps.name)
    flavor = snap.kueue.flavors.get(fname) if fname else None
    kw = {} if options is None else {"extended_resource_toleration": options.extended_resource_toleration,
                                     "namespace_default_tolerations": options.namespace_default_tolerations}
    if isinstance(flavor, ResourceFlavor):
        return Constraints(ps, flavor.node_labels, flavor.tolerations, **kw)
    return Constraints(ps, **kw)


def gang_view(snap: ClusterSnapshot, gang: GangRequest, decision: Decision | None = None, options: Any = None) -> GangView:
    """Masks and per-node pod counts for each pod set, honouring the Kueue flavor the quota
    layer assigned (``decision.quota["flavors"]``). Units as in ``fit``.

    Raises nothing for an empty gang (``need`` is then 0).
    """
    flavors_now = ((decision.quota or {}).get("flavors") or {}) if decision is not None else {}
    transient = getattr(options, "transient_taints", frozenset())
    pod_sets = [ps for ps in gang.pod_sets if ps.count > 0]
    shapes, now_masks, ever_masks, k_now = [], [], [], []
    for ps in pod_sets:
        c = pod_set_constraints(snap, ps, flavors_now)
        now = filter_nodes(snap, c, ever=False).mask
        ever = filter_nodes(snap, c, ever=True, transient=transient).mask
        sh = shape_of(snap, ps.requests)
        shapes.append(sh)
        now_masks.append(now)
        ever_masks.append(ever)
        k_now.append(np.where(now, pods_per_node(snap.free, sh, ps.max_per_node), 0))

    def gpu_of(ps: PodSet) -> int:
        return max((v for r, v in ps.requests.items() if is_gpu_name(r, options)), default=0)

    main = max(range(len(pod_sets)), key=lambda i: (gpu_of(pod_sets[i]), pod_sets[i].count), default=0)
    ns = gang.namespace
    mine = _own_test(gang)
    own = [p for p in snap.pods if p.namespace == ns and mine(p)]
    own_bound = [p for p in own if p.node_name]
    own_pending = [p for p in own if not p.node_name]
    gpu = None
    need = placeable = 0
    if pod_sets:
        ps = pod_sets[main]
        gpu = next((r for r, v in ps.requests.items() if v and is_gpu_name(r, options)), None)
        same = sum(o.count for o in pod_sets if dict(o.requests) == dict(ps.requests))
        bound_same = sum(1 for p in own_bound if dict(p.requests) == dict(ps.requests))
        need = max(0, same - bound_same)
        placeable = int(k_now[main].sum())
    priority = 0
    if gang.priority_class:
        priority = snap.priority_classes.get(gang.priority_class, 0)
    elif own:
        priority = max(p.priority for p in own)
    return GangView(pod_sets, shapes, now_masks, ever_masks, k_now, main, own_bound, own_pending, need, placeable, gpu, priority)
