"""``diagnose``'s topology step: the fit step at domain level for a pod set whose pods must sit in
one topology domain (``PodSet.topology`` with mode required: Kueue ``podset-required-topology``,
KAI ``topology-required-placement``, …).

Owns the per-domain figures — per domain of the level, the pods of the pod set that fit on its
free resources now and on the repaired, empty domain ("ever"), and the nodes they use — and the
step's meaning; the verdict stays the engine's (its ``TopologyPlacementFailed`` finding, when it
has one, is copied into the findings as ``engine_finding``, with data keys ``pod_set``,
``level``, ``best_domain``, ``best_domain_pods``, ``needed_pods``). The figures are computed
here from the domain index (``webhook.engine.topology.label_domains``), vectorized, so the step
works without that finding.

A domain is identified as Kueue identifies it (pkg/cache/scheduler/tas_flavor_snapshot.go): by
the values of the level's label and of every level above it in the Topology the pod set's
ResourceFlavor names (``spec.topologyName``); without a Topology, by the level's value alone.
Nodes lacking one of those labels are in no domain: a topology-aware scheduler places no pod of
a required level there (Kueue's snapshot skips them). Pure: no I/O. Units: pods; GPUs as device
counts.
"""

from __future__ import annotations

from shlex import quote as _q

import numpy as np

from ..engine.decision import Decision
from ..engine.fit import pods_per_node
from ..engine.fixes import GangView
from ..engine.model import TOPOLOGY_KAI, TOPOLOGY_REQUIRED, GangRequest, PodSet, ResourceFlavor
from ..engine.snapshot import ClusterSnapshot
from ..engine.text import plural
from ..engine.topology import label_domains, level_keys
from .report import TopologyStep

__all__ = ["topology_step", "DOMAINS_SHOWN", "level_word"]

#: Domains the step lists (closest to holding the pod set first).
DOMAINS_SHOWN = 5
#: The engine's finding the step reads (Kueue's reason for a pod set no domain can hold).
ENGINE_CODE = "TopologyPlacementFailed"


def level_word(key: str) -> str:
    """A level's label key as a word for sentences: the name part (``topology.example.com/rack``
    → "rack"); ``kubernetes.io/hostname`` → "node"."""
    name = key.rsplit("/", 1)[-1]
    return "node" if name == "hostname" else name


def _pod_set_index(view: GangView) -> int | None:
    """The pod set the step is about: the main one when its topology is required, else the first
    with a required level; None when none has one."""
    required = [i for i, ps in enumerate(view.pod_sets) if ps.topology is not None
                and ps.topology.mode == TOPOLOGY_REQUIRED and ps.topology.level]
    if not required:
        return None
    return view.main if view.main in required else required[0]


def _levels(snap: ClusterSnapshot, ps: PodSet, d: Decision) -> tuple[tuple[str, ...], str | None]:
    """The levels (top → bottom) of the Topology behind the pod set's request and its name: the
    request's own levels, else its Topology (KAI: ``topology_name``; Kueue: the ResourceFlavor
    the quota step assigned, ``spec.topologyName``), looked up in ``snap.topology``; ``()`` when
    none is known."""
    t = ps.topology
    if t.levels:
        return tuple(t.levels), t.topology_name
    name = t.topology_name
    if name is None and t.source != TOPOLOGY_KAI:
        fname = ((d.quota or {}).get("flavors") or {}).get(ps.name)
        flavor = snap.kueue.flavors.get(fname) if fname else None
        name = flavor.topology_name if isinstance(flavor, ResourceFlavor) else None
    if name is None:
        return (), None
    table = snap.topology.kai if t.source == TOPOLOGY_KAI else snap.topology.kueue
    return tuple(table.get(name, ())), name


def _selector(snap: ClusterSnapshot, ps: PodSet, d: Decision) -> dict[str, str]:
    """The pod set's nodeSelector with its assigned flavor's nodeLabels (what ``-l`` narrows to)."""
    sel = dict(ps.node_selector)
    fname = ((d.quota or {}).get("flavors") or {}).get(ps.name)
    flavor = snap.kueue.flavors.get(fname) if fname else None
    if isinstance(flavor, ResourceFlavor):
        sel.update(flavor.node_labels)
    return sel


def topology_step(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView) -> TopologyStep | None:
    """The topology step for the gang's pod set with a required level, or None when no pod set
    has one (the report then has no such step)."""
    i = _pod_set_index(view)
    if i is None:
        return None
    ps = view.pod_sets[i]
    t = ps.topology
    levels, topo_name = _levels(snap, ps, d)
    keys = level_keys(t.level, levels)
    index = label_domains(snap, keys)
    k_now = view.k_now[i]
    k_ever = np.where(view.ever_masks[i], pods_per_node(snap.ever_alloc, view.shapes[i], ps.max_per_node), 0)
    per = np.stack([k_now, k_ever, k_now > 0, k_ever > 0], axis=1).astype(np.int64)
    sums = index.sums(per) if index.count else np.zeros((0, 4), dtype=np.int64)
    need = int(ps.count)
    word = level_word(t.level)
    ever_ok = sums[:, 1] >= need
    now_ok = sums[:, 0] >= need
    order = sorted(range(index.count), key=lambda j: (-int(ever_ok[j]), -min(int(sums[j, 0]), need), -int(sums[j, 1]), index.names[j]))
    domains = [{"domain": index.names[j], "pods_now": int(sums[j, 0]), "pods_ever": int(sums[j, 1]),
                "nodes_now": int(sums[j, 2]), "nodes_ever": int(sums[j, 3])} for j in order[:DOMAINS_SHOWN]]
    outside = per[index.ids < 0].sum(axis=0)
    best = domains[0] if domains else None
    finding = next((f for f in d.findings if f.code == ENGINE_CODE
                    and (f.data or {}).get("pod_set", ps.name) == ps.name), None)
    f = dict(
        pod_set=ps.name,
        source=t.source,
        level=t.level,
        keys=list(keys),
        topology=topo_name,
        group=t.group,
        pods_needed=need,
        domains_total=index.count,
        domains_fit_ever=int(ever_ok.sum()),
        domains_fit_now=int(now_ok.sum()),
        best_domain=best["domain"] if best else None,
        best_domain_pods_now=best["pods_now"] if best else 0,
        best_domain_pods_ever=best["pods_ever"] if best else 0,
        pods_fit_now_cluster=int(k_now.sum()),
        nodes_fit_now_cluster=int(np.count_nonzero(k_now)),
        nodes_outside=int(outside[3]),
        domains=domains,
        engine_finding=None if finding is None else {"code": finding.code, "severity": finding.severity,
                                                     "message": finding.message, "data": dict(finding.data or {})},
    )
    sel = _selector(snap, ps, d)
    cmd = "kubectl get nodes" + (f" -l {_q(','.join(f'{k}={v}' for k, v in sel.items()))}" if sel else "") \
        + "".join(f" -L {_q(k)}" for k in keys)
    meaning, status = _meaning(f, word, ps)
    return TopologyStep(question=f"Is there one {word} ({t.level}) with room for all {need} pods of {ps.name}?",
                        command=cmd, meaning=meaning, status=status, **f)


def _meaning(f: dict, word: str, ps: PodSet) -> tuple[str, str]:
    """The step's meaning and status from its facts."""
    need, level = f["pods_needed"], f["level"]
    by = f"`gangcheck fragmentation --by {level}` lists every {word}'s whole free nodes"
    shared = f" (pod sets of group {f['group']} share that {word})" if f["group"] else ""
    if f["domains_total"] == 0:
        return (f"No node carries the label{'s' if len(f['keys']) > 1 else ''} {', '.join(f['keys'])}: there is no {word} "
                f"to place the {need} pods of {ps.name} in, and a topology-aware scheduler places none outside one."), "blocking"
    if f["domains_fit_ever"] == 0:
        return (f"No {word} can ever hold the {need} pods of {ps.name}{shared}: the largest, {f['best_domain']}, holds "
                f"{f['best_domain_pods_ever']} even repaired and empty ({plural(f['domains_total'], word)}). Only a smaller "
                f"gang, or relaxing required to preferred topology (the pods then spread over several {word}s: "
                f"cross-{word} traffic for every collective), lets it start."), "blocking"
    if f["domains_fit_now"] == 0:
        return (f"{f['pods_fit_now_cluster']} pods of this shape fit in the cluster now ({plural(f['nodes_fit_now_cluster'], 'node')}), "
                f"but no {word} has room for all {need}{shared}: the closest, {f['best_domain']}, has room for "
                f"{f['best_domain_pods_now']} now ({f['best_domain_pods_ever']} when empty); "
                f"{plural(f['domains_fit_ever'], word)} could hold it once work there ends or is moved. {by}."), "blocking"
    return (f"{plural(f['domains_fit_now'], word)} {'has' if f['domains_fit_now'] == 1 else 'have'} room for all {need} "
            f"pods now{shared}; the closest is {f['best_domain']} — topology is not the blocker."), "ok"
