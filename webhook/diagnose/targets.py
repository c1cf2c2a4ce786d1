"""Finding the gang ``gangcheck diagnose KIND/NAME`` names: a workload object in the cluster data
(through the adapters), else the gang reconstructed from its pods (``find_gang``,
``gang_from_pods``); ``TargetNotFound`` when neither is there.

Owns the KIND/NAME lookup and the reconstruction; not the analysis. Pure: reads the snapshot and
the dump's objects handed to it, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..engine.model import BoundPod, GangRequest, PodSet, Toleration
from ..engine.snapshot import ClusterSnapshot

__all__ = ["TargetNotFound", "find_gang", "gang_from_pods"]

def _pods_of(snap: ClusterSnapshot, kind: str, name: str, namespace: str) -> list[BoundPod]:
    kl = kind.lower()
    out = []
    for p in snap.pods:
        if p.namespace != namespace:
            continue
        gk, _, rest = p.gang.partition("/")
        gname = rest.rsplit("/", 1)[-1] if rest else ""
        if (gk.lower() == kl and gname == name) or (p.owner_kind.lower() == kl and p.owner_name == name) or (gname == name and gk == "PodGroup"):
            out.append(p)
    return out


def gang_from_pods(kind: str, name: str, namespace: str, pods: Sequence[BoundPod], raw: Mapping[tuple[str, str], Mapping] | None = None) -> GangRequest:
    """Reconstruct a gang from its pods: one pod set per distinct request (and spec, when the raw
    pod objects are given through ``raw`` keyed by (namespace, name), which restores selectors,
    tolerations and affinity). Count = pods in the set."""
    from ..adapters.podspec import pod_set_from_template

    groups: dict[tuple, list[BoundPod]] = {}
    for p in pods:
        groups.setdefault(tuple(sorted(p.requests.items())), []).append(p)
    sets = []
    for i, (key, members) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1]))):
        label = f"pods-{i}"
        obj = (raw or {}).get((members[0].namespace, members[0].name))
        if obj is not None:
            spec = dict(obj.get("spec") or {})
            spec.pop("nodeName", None)
            ps = pod_set_from_template(label, {"metadata": {"labels": (obj.get("metadata") or {}).get("labels") or {}}, "spec": spec}, len(members))
            ps = PodSet(ps.name, len(members), dict(key), node_selector=ps.node_selector, required_affinity=ps.required_affinity,
                        tolerations=ps.tolerations, host_ports=ps.host_ports, max_per_node=ps.max_per_node)
        else:
            ps = PodSet(label, len(members), dict(key), tolerations=(Toleration(operator="Exists"),))
        sets.append(ps)
    queue = next((p.queue for p in pods if p.queue), None)
    return GangRequest(kind=kind, name=name, namespace=namespace, pod_sets=tuple(sets), queue_name=queue)


def _ref(obj: Mapping) -> tuple[str, Any]:
    """(metadata.namespace or "default", metadata.name), without decoding a ``LazyObject``."""
    ref = getattr(obj, "ref", None)
    if ref is not None:
        return ref
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "default", meta.get("name"))


class TargetNotFound(LookupError):
    """KIND/NAME names nothing gangcheck can find in the cluster data; the message says where it looked."""


def find_gang(target: str, namespace: str, snap: ClusterSnapshot, objects: Sequence[Mapping] | None = None) -> tuple[GangRequest, str]:
    """Resolve ``KIND/NAME`` in ``namespace``: a workload object in ``objects`` (the dump), else the
    pods in ``snap`` whose gang key or owner is that workload. Returns (gang, how it was found).

    Raises:
        TargetNotFound: neither is there (the message lists what was searched).
        ValueError: ``target`` is not KIND/NAME.
    """
    from ..adapters import adapt

    kind, sep, name = target.partition("/")
    if not sep or not kind or not name:
        raise ValueError(f"{target!r}: expected KIND/NAME (e.g. pytorchjob/llama-70b-pretrain) or a manifest file")
    kl = kind.lower().rstrip("s") if kind.lower() not in ("jobs",) else "job"
    aliases = {"pytorchjob": "pytorchjob", "pytorchjobs": "pytorchjob", "job": "job", "vcjob": "job", "lws": "leaderworkerset"}
    kl = aliases.get(kind.lower(), kl)
    for obj in objects or ():
        if str(obj.get("kind", "")).lower() == kl and _ref(obj) == (namespace, name):
            gang = adapt(dict(obj), source="dump")
            if gang is not None:
                return gang, f"{obj.get('kind')} object in the cluster data"
    pods = _pods_of(snap, kl, name, namespace)
    if pods:
        canonical = next((p.gang.split("/", 1)[0] for p in pods if p.gang.lower().startswith(kl + "/")), kind)
        raw = None
        if objects:
            want = {(p.namespace, p.name) for p in pods}
            raw = {}
            for o in objects:
                if o.get("kind") == "Pod":
                    k = _ref(o)
                    if k in want:
                        raw[k] = o  # the last one of a name, as in the dump
        return gang_from_pods(canonical, name, namespace, pods, raw), f"reconstructed from its {len(pods)} pod(s) in the cluster data"
    same_ns = sorted({p.gang for p in snap.pods if p.namespace == namespace and p.gang})[:8]
    raise TargetNotFound(
        f"{kind}/{name} not found in namespace {namespace}: no such workload object in the cluster data and no pod whose "
        f"gang or owner is {kind}/{name}. "
        + (f"Gangs seen in {namespace}: {', '.join(same_ns)}. " if same_ns else f"No pods with a gang in {namespace}. ")
        + "For a gang not yet submitted, pass its manifest file instead of KIND/NAME.")


