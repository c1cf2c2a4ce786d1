"""evaluate(snapshot, gang) → Decision: quota, then whole-node capacity ever and now.

The verdict contract (DESIGN.md):
  * NeverFits only with a proof: a quota maximum exceeded, or a sound capacity bound on the
    *repaired, empty* cluster (per pod set: Σ over eligible nodes of pods that fit one empty
    node < pods needed; for the gang: Σ requests > Σ capacity of nodes any pod set may use).
  * Fits only with a concrete placement on today's free resources (``fit.place``).
  * Waits otherwise, with the findings that explain why (and PlacementUnproven when neither
    a proof nor a placement was found).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from functools import lru_cache
from typing import Any

import numpy as np

from .decision import FITS, NEVER_FITS, WAITS, Decision
from .filters import DEFAULT_TRANSIENT, R_PORTS, R_TAINT, Constraints, FilterResult, filter_nodes, taint_matches
from .fit import FOUND, NONE, SEARCH_BUDGET, Demand, Shape, pods_per_node, place, resource_reasons, search, shape_of
from .model import REPAIRABLE_TAINTS, Finding, GangRequest, PodSet, ResourceFlavor, Toleration
from .quantity import format_quantity
from .quota import QuotaResult, evaluate_kueue, evaluate_volcano, lint_quota_vs_capacity
from .snapshot import ClusterSnapshot
from .text import kind_label, plural
from .wait import RuntimeHistory, estimate_wait, gang_priority, gangs_ahead

__all__ = ["EngineOptions", "evaluate", "expected_wait", "DEFAULT_GPU_RESOURCES"]

DEFAULT_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-*")
SAMPLES = 3

# Order in which findings are told (most important first).
_ORDER = [
    "InvalidGang", "QuantityOverflow", "ExceedsMaxQuota", "ResourceNotOffered", "PodExceedsNodeCapacity", "UntoleratedTaint",
    "ExceedsClusterCapacity",
    "TopologyPlacementFailed", "WaitingForQuota", "LocalQueueNotFound", "ClusterQueueNotFound", "ResourceNotCovered",
    "NoMatchingFlavor", "ClusterQueueStopped", "QueueNotFound", "QueueClosed", "ExceedsDeservedShare",
    "ParallelismExceedsCapacity", "Fragmented", "InsufficientCapacity", "UnhealthyDevices", "NodesNotReady", "NodesCordoned",
    "NodesTransientlyTainted", "MigReconfiguring", "NodeCapacityUnknown", "NoNodes", "PlacementUnproven",
]


@dataclass(frozen=True)
class EngineOptions:
    """Policy knobs the engine needs (the pydantic Policy converts to this).

    ``gpu_resources``: names or fnmatch patterns of accelerator resources (for fragmentation
    and messages). ``transient_taints``: taint keys or shell patterns treated as repairable
    (never NeverFits), in addition to ``filters.DEFAULT_TRANSIENT`` which always applies.
    ``extended_resource_toleration``: the API server runs the ExtendedResourceToleration
    admission plugin (GKE, AKS): a pod gets a NoSchedule toleration per extended resource it
    requests. ``namespace_default_tolerations``: it runs PodTolerationRestriction, so a
    namespace may add tolerations gangcheck cannot see: no taint proves NeverFits.
    ``plain_jobs_as_gangs``: treat workloads whose pods are scheduled one by one
    (``GangRequest.all_or_nothing`` False: a plain batch Job, a RayCluster without a batch
    scheduler) as gangs anyway, for clusters where they are (Kueue waitForPodsReady, an
    operator-wide gang scheduler).
    """

    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
    transient_taints: frozenset[str] = field(default_factory=frozenset)
    extended_resource_toleration: bool = True
    namespace_default_tolerations: bool = False
    plain_jobs_as_gangs: bool = False

    def is_gpu(self, resource: str) -> bool:
        """True when ``resource`` names an accelerator (matches a ``gpu_resources`` entry)."""
        return _is_gpu(resource, self.gpu_resources)


@lru_cache(maxsize=4096)
def _is_gpu(resource: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch(resource, p) for p in patterns)


@dataclass
class _PodSetEval:
    ps: PodSet
    shape: Shape
    ever_mask: np.ndarray
    now_filter: FilterResult
    now_mask: np.ndarray
    k_ever: np.ndarray
    k_now: np.ndarray
    port_blocked: np.ndarray | None = None
    key: tuple = ()
    # Count-independent figures derived from the masks, filled lazily by ``_stat``. Shared by
    # every copy ``_evaluate_pod_set`` hands out for the same shape (``replace`` keeps the dict).
    stats: dict = field(default_factory=dict)


def _stat(ev: _PodSetEval, name: str, compute) -> Any:
    """``ev.stats[name]``, computing it once per shape (the arrays are read-only)."""
    try:
        return ev.stats[name]
    except KeyError:
        v = ev.stats[name] = compute()
        return v


def _fmt_req(requests, options: EngineOptions) -> str:
    return _fmt_req_cached(tuple(requests.items()), options.gpu_resources)


@lru_cache(maxsize=1024)
def _fmt_req_cached(items: tuple, patterns: tuple[str, ...]) -> str:
    parts = []
    for r, v in sorted(items, key=lambda kv: (not _is_gpu(kv[0], patterns), kv[0])):
        if v:
            parts.append(f"{format_quantity(r, v)} {r}")
    return ", ".join(parts) or "no resources"


def _main_gpu(ps: PodSet, options: EngineOptions) -> str | None:
    for r, v in ps.requests.items():
        if v and options.is_gpu(r):
            return r
    return None


def _primary(pod_sets: list[PodSet], options: EngineOptions) -> PodSet:
    def key(ps: PodSet):
        g = _main_gpu(ps, options)
        return (ps.requests.get(g, 0) if g else 0, ps.count, ps.requests.get("cpu", 0))

    return max(pod_sets, key=key)


def _constraints(ps: PodSet, flavors: list[ResourceFlavor] | None, options: EngineOptions) -> list[Constraints]:
    ert, ns = options.extended_resource_toleration, options.namespace_default_tolerations
    if not flavors:
        return [Constraints(ps, extended_resource_toleration=ert, namespace_default_tolerations=ns)]
    return [Constraints(ps, f.node_labels, f.tolerations, ert, ns) for f in flavors]


def all_or_nothing(gang: GangRequest, options: EngineOptions) -> bool:
    """Whether the gang's pods start all at once or not at all (``GangRequest.all_or_nothing``,
    or the policy's ``plainJobsAsGangs``); else they are scheduled one by one and only what no
    single pod can ever do proves NeverFits."""
    return gang.all_or_nothing or options.plain_jobs_as_gangs


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


def _evaluate_pod_set(snap: ClusterSnapshot, ps: PodSet, flavors, now_flavor, options) -> _PodSetEval:
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


def _compute_pod_set(snap: ClusterSnapshot, ps: PodSet, flavors, now_flavor, options) -> _PodSetEval:
    cons = _constraints(ps, flavors, options)
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
    return _PodSetEval(ps, shape, ever_mask, now_filter, now_mask, k_ever, k_now, port_blocked)


def _samples(snap: ClusterSnapshot, idx: np.ndarray) -> list[str]:
    return [snap.nodes[int(i)].name for i in idx[:SAMPLES]]


def _node_report(snap: ClusterSnapshot, ev: _PodSetEval) -> dict[str, Any]:
    """The per-node view of the main pod set (histogram, samples, summary); memoised per shape."""
    key = ("report",) + ev.key
    hit = snap.recall(key) if ev.key else None
    if hit is None:
        hit = _compute_node_report(snap, ev)
        if ev.key:
            snap.remember(key, hit)
    report = dict(hit, reasons=dict(hit["reasons"]), samples={k: list(v) for k, v in hit["samples"].items()})
    report["pod_set"] = ev.ps.name
    return report


def _compute_node_report(snap: ClusterSnapshot, ev: _PodSetEval) -> dict[str, Any]:
    hist = ev.now_filter.histogram(snap)
    samples: dict[str, list[str]] = {}
    filt = ev.now_filter
    if filt.per_node:
        for i in np.flatnonzero(~filt.mask):
            r = filt.reasons[int(i)]
            if r is not None and len(samples.setdefault(r, [])) < SAMPLES:
                samples[r].append(snap.nodes[int(i)].name)
    else:
        for cid, r in enumerate(filt.reasons):
            if r is not None and len(samples.get(r, ())) < SAMPLES:
                idx = np.flatnonzero(filt.node_class == cid)[:SAMPLES]
                samples.setdefault(r, []).extend(_samples(snap, idx))
                samples[r] = samples[r][:SAMPLES]
    passing = filt.mask.copy()
    if ev.port_blocked is not None:
        blocked = passing & ev.port_blocked
        if blocked.any():
            hist[R_PORTS] = int(blocked.sum())
            samples[R_PORTS] = _samples(snap, np.flatnonzero(blocked))
        passing &= ~ev.port_blocked
    res_hist = resource_reasons(snap, snap.free, ev.shape, passing)
    for reason, n in res_hist.items():
        hist[reason] = hist.get(reason, 0) + n
        if reason.startswith("Insufficient "):
            name = reason[len("Insufficient "):]
            c = snap.col.get(name)
            idx = np.flatnonzero(passing & (snap.free[:, c] < ev.ps.requests.get(name, 0))) if c is not None else np.flatnonzero(passing)
        else:
            idx = np.flatnonzero(passing & (snap.free[:, snap.col["pods"]] < 1))
        samples[reason] = _samples(snap, idx)
    fit_now = int(np.count_nonzero(ev.k_now))
    total = len(snap.nodes)
    parts = sorted(f"{n} {r}" for r, n in hist.items())
    summary = f"{fit_now}/{total} nodes are available" + (": " + ", ".join(parts) if parts else "") + "."
    return {
        "pod_set": ev.ps.name,
        "total": total,
        "eligible": int(np.count_nonzero(ev.now_mask)),
        "eligible_ever": int(np.count_nonzero(ev.ever_mask)),
        "fit_now": fit_now,
        "fit_ever": int(np.count_nonzero(ev.k_ever)),
        "pods_placeable_now": int(ev.k_now.sum()),
        "pods_placeable_ever": int(ev.k_ever.sum()),
        "reasons": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        "samples": samples,
        "summary": summary,
    }


def _same_shape_pods(gang_sets: list[PodSet], ps: PodSet) -> int:
    """Pods of the gang with exactly ``ps``'s per-pod request (master + workers of one shape)."""
    return sum(o.count for o in gang_sets if dict(o.requests) == dict(ps.requests))


def _fragmentation(snap: ClusterSnapshot, ev: _PodSetEval, options: EngineOptions, needed: int) -> dict[str, Any] | None:
    g = _main_gpu(ev.ps, options)
    if g is None or g not in snap.col:
        return None
    base = _stat(ev, ("frag", g), lambda: _fragmentation_base(snap, ev, g))
    return dict(base, pods_needed=needed, deficit=max(0, needed - base["pods_placeable_now"]))


def _fragmentation_base(snap: ClusterSnapshot, ev: _PodSetEval, g: str) -> dict[str, Any]:
    c = snap.col[g]
    free = np.maximum(snap.free[:, c], 0)
    elig = ev.now_mask
    free_total = int(free[elig].sum())
    stranded = int(free[elig & (ev.k_now == 0)].sum())
    placeable = int(ev.k_now.sum())
    return {
        "resource": g,
        "per_pod": int(ev.ps.requests.get(g, 0)),
        "free": free_total,
        "stranded": stranded,
        "ratio": round(stranded / free_total, 4) if free_total else 0.0,
        "nodes_fit_now": int(np.count_nonzero(ev.k_now)),
        "pods_needed": 0,
        "pods_placeable_now": placeable,
        "deficit": 0,
        "whole_nodes_free": int(np.count_nonzero(elig & (snap.used[:, snap.col["pods"]] == 0) & (free >= snap.alloc[:, c]) & (snap.alloc[:, c] > 0))),
    }


def _capacity_proofs(snap, gang, evals, options, findings) -> None:
    """Add NeverFits findings that capacity bounds prove (per pod set, then gang totals).

    Count bounds (more pods than the eligible nodes hold, one topology domain, the gang's
    totals) prove NeverFits only for an all-or-nothing gang (:func:`all_or_nothing`); for pods
    scheduled one by one they are a ParallelismExceedsCapacity warning, and only what no single
    pod can ever do (no eligible node, a resource no node offers, a pod larger than any node)
    is a NeverFits."""
    gang_whole = all_or_nothing(gang, options)
    mig_pending = snap.mig_reconfiguring
    unknown = snap.unknown_capacity
    for ev in evals:
        ps = ev.ps
        if ps.count <= 0:
            continue
        # A bound proves NeverFits only on exact shapes and nodes whose capacity is known.
        n_unknown = _stat(ev, "unknown", lambda: int(np.count_nonzero(unknown & ev.ever_mask)))
        sev = NEVER_FITS if ps.exact_shape and not n_unknown else WAITS
        if sev == WAITS and n_unknown:
            findings.append(Finding("NodeCapacityUnknown", WAITS,
                f"{n_unknown} eligible node(s) report no capacity yet; placement unproven",
                {"nodes": _samples(snap, np.flatnonzero(unknown & ev.ever_mask))}))
        if mig_pending and any(r.startswith("nvidia.com/mig-") for r in ps.requests):
            findings.append(Finding("MigReconfiguring", WAITS,
                "a node's MIG layout is being reconfigured (nvidia.com/mig.config.state pending); MIG capacity may change"))
            sev = WAITS
        n_elig = _stat(ev, "n_elig", lambda: int(np.count_nonzero(ev.ever_mask)))
        cap_ever = _stat(ev, "cap_ever", lambda: int(ev.k_ever.sum()))
        if n_elig and cap_ever >= ps.count and not ps.required_topology and not ev.shape.missing:
            continue  # no per-pod-set bound can fire (the common case): skip the message text
        label = f"pod set {ps.name} ({ps.count} × {_fmt_req(ps.requests, options)}{'' if ps.exact_shape else ', an assumed shape'})"
        if n_elig == 0:
            ever_filter = filter_nodes(snap, _constraints(ps, None, options)[0], ever=True, transient=options.transient_taints)
            hist = ever_filter.histogram(snap)
            why = _ever_reasons_text(snap, ever_filter, hist) or "no nodes"
            taints = _untolerated_taints(snap, [ps], np.zeros(len(snap.nodes), dtype=bool), options)
            only_taints = bool(hist) and set(hist) == {R_TAINT}
            # A pod set that only taints keep off every node has a code of its own (the fix is a
            # toleration, not a smaller gang); kube-scheduler's TaintToleration plugin wording.
            findings.append(Finding("UntoleratedTaint" if only_taints else "ExceedsClusterCapacity", sev,
                f"{label}: no node could ever host it ({why})" + (f"; {_taints_text(taints, options)}" if taints else ""),
                {"pod_set": ps.name, "eligible_nodes": 0, "pods_needed": ps.count, "pods_possible": 0,
                 "taints": [{"taint": t, "nodes": n} for t, n in taints]}))
            continue
        if ev.shape.missing or cap_ever == 0:
            missing = list(ev.shape.missing)
            sub = snap.ever_alloc[ev.ever_mask]
            for c, v, name in zip(ev.shape.cols, ev.shape.vals, ev.shape.names):
                if name != "pods" and not (sub[:, c] > 0).any():
                    missing.append(name)
            if missing:
                findings.append(Finding("ResourceNotOffered", sev,
                    f"{label}: no eligible node advertises {' or '.join(missing)}",
                    {"pod_set": ps.name, "resources": missing}))
                continue
            short = []
            for c, v, name in zip(ev.shape.cols, ev.shape.vals, ev.shape.names):
                largest = int(sub[:, c].max())
                if largest < v:
                    short.append((name, int(v), largest))
            if short:
                text = "; ".join(f"no eligible node has ≥{format_quantity(r, v)} {r} (the largest eligible node has {format_quantity(r, m)})"
                                 for r, v, m in short)
            else:
                text = "no single node offers " + " and ".join(f"{format_quantity(r, int(v))} {r}" for _, v, r in zip(ev.shape.cols, ev.shape.vals, ev.shape.names) if r != "pods") + " together"
            findings.append(Finding("PodExceedsNodeCapacity", sev, f"{label}: {text}",
                {"pod_set": ps.name, "short": [{"resource": r, "request": v, "largest": m} for r, v, m in short]}))
            continue
        if cap_ever < ps.count and not gang_whole:
            findings.append(Finding("ParallelismExceedsCapacity", WAITS,
                f"{label}: at most {cap_ever} of its {ps.count} pods can run at once, even on the {n_elig} eligible nodes "
                "when empty; its pods are scheduled one by one, so the rest wait for running ones to finish",
                {"pod_set": ps.name, "eligible_nodes": n_elig, "pods_needed": ps.count, "pods_possible": cap_ever}))
            continue
        if cap_ever < ps.count:
            taints = _untolerated_taints(snap, [ps], ev.ever_mask, options, resource=_main_gpu(ps, options)) if ps.exact_shape else []
            findings.append(Finding("ExceedsClusterCapacity", sev,
                f"{label}: at most {cap_ever} such pods fit on the {n_elig} eligible nodes even when empty; need {ps.count}"
                + (f"; {_taints_text(taints, options)}" if taints else ""),
                {"pod_set": ps.name, "eligible_nodes": n_elig, "pods_needed": ps.count, "pods_possible": cap_ever,
                 "taints": [{"taint": t, "nodes": n} for t, n in taints]}))
            continue
        if ps.required_topology and gang_whole:
            best = 0
            domains: dict[str, int] = {}
            for i in np.flatnonzero(ev.k_ever):
                v = snap.nodes[int(i)].labels.get(ps.required_topology)
                if v is not None:
                    domains[v] = domains.get(v, 0) + int(ev.k_ever[i])
            best = max(domains.values(), default=0)
            if best < ps.count:
                findings.append(Finding("TopologyPlacementFailed", sev,
                    f"{label}: needs one {ps.required_topology} domain; the largest holds {best} such pods",
                    {"pod_set": ps.name, "topology": ps.required_topology, "largest_domain_pods": best}))
    if any(f.severity == NEVER_FITS for f in findings):
        return
    # Gang totals over the union of nodes any pod set may use (a gang's only: pods scheduled one
    # by one need no such total). A pod set whose shape is an estimate (a PodGroup: no template,
    # so neither selectors nor tolerations are known) may use any node: its totals are checked
    # against every node.
    if not gang.exact_total or not gang_whole:
        return
    if any(not ev.ps.exact_shape for ev in evals):
        if unknown.any():
            return
        union_mask = np.ones(len(snap.nodes), dtype=bool)
        sums = _stat(evals[0], "all_sums", lambda: _column_sums(snap, union_mask))
    elif len(evals) == 1:
        ev = evals[0]
        if _stat(ev, "unknown", lambda: int(np.count_nonzero(unknown & ev.ever_mask))):
            return
        union_mask = ev.ever_mask
        sums = _stat(ev, "ever_sums", lambda: _column_sums(snap, ev.ever_mask))
    else:
        union_mask = np.zeros(len(snap.nodes), dtype=bool)
        for ev in evals:
            union_mask |= ev.ever_mask
        if (unknown & union_mask).any():
            return
        sums = _column_sums(snap, union_mask)
    total = gang.total_requests()
    for r, v in total.items():
        c = snap.col.get(r)
        if c is None or v <= 0:
            continue
        have = sums[c]
        if v > have:
            outside = ~union_mask
            taints = _untolerated_taints(snap, [ev.ps for ev in evals if ev.ps.exact_shape], union_mask, options, resource=r) \
                if outside.any() and all(ev.ps.exact_shape for ev in evals) else []
            findings.append(Finding("ExceedsClusterCapacity", NEVER_FITS,
                f"the gang needs {format_quantity(r, v)} {r} in all; the {int(np.count_nonzero(union_mask))} node(s) it may use "
                f"have {format_quantity(r, have)} even when empty" + (f"; {_taints_text(taints, options)}" if taints else ""),
                {"resource": r, "request": v, "capacity": have, "taints": [{"taint": t, "nodes": n} for t, n in taints]}))
            return


#: Taint keys that look like something a component sets and clears by itself (node
#: conditions, cloud providers, autoscalers, GPU health/upgrade): told with a pointer to the
#: policy's ``transientTaints``. A hint for the message only; it never changes a verdict.
_HEALTH_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "karpenter.sh/",
                          "cluster-autoscaler.kubernetes.io/", "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler")
_HEALTH_TAINT_WORDS = ("health", "unhealthy", "pressure", "not-ready", "notready", "unreachable", "maintenance", "drain",
                       "disrupt", "upgrade", "uninitialized", "xid", "degraded")


def _looks_transient(key: str) -> bool:
    low = key.lower()
    return key.startswith(_HEALTH_TAINT_PREFIXES) or any(w in low for w in _HEALTH_TAINT_WORDS)


def _untolerated_taints(snap: ClusterSnapshot, pod_sets: list[PodSet], inside: np.ndarray, options: EngineOptions,
                        resource: str | None = None) -> list[tuple[str, int]]:
    """Taints (``key=value:effect``) that keep the pod sets off nodes outside ``inside``, with the
    number of such nodes carrying each, most nodes first; with ``resource``, only nodes that
    offer it. Repairable and transient taints are left out (they never rule a node out ever)."""
    skip = REPAIRABLE_TAINTS | DEFAULT_TRANSIENT | options.transient_taints
    # The tolerations the pod will have: the template's plus what admission adds
    # (ExtendedResourceToleration, when the policy says the API server runs it).
    tolerations = [_constraints(ps, None, options)[0].tolerations for ps in pod_sets]
    c = snap.col.get(resource) if resource else None
    counts: dict[str, int] = {}
    for i in np.flatnonzero(~inside):
        n = snap.nodes[int(i)]
        if c is not None and snap.ever_alloc[int(i), c] <= 0:
            continue
        for t in n.taints:
            if t.effect not in ("NoSchedule", "NoExecute") or taint_matches(t.key, skip):
                continue
            if any(not any(tol.tolerates(t) for tol in tols) for tols in tolerations):
                counts[str(t)] = counts.get(str(t), 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _taints_text(taints: list[tuple[str, int]], options: EngineOptions) -> str:
    """"4 node(s) carry the untolerated taint k=v:NoSchedule (…)" for the top taints."""
    parts = [f"{n} node(s) carry the untolerated taint {t}" for t, n in taints[:2]]
    more = f" (+{len(taints) - 2} more taints)" if len(taints) > 2 else ""
    text = "; ".join(parts) + more + ": add a toleration for it to the pod template"
    transient = [t for t, _ in taints[:2] if _looks_transient(t.split("=", 1)[0].split(":", 1)[0])]
    if transient:
        text += (f"; {transient[0]} looks like a taint the system sets and removes by itself: if so, list its key in the "
                 "policy's transientTaints")
    return text


def _ever_reasons_text(snap: ClusterSnapshot, ever_filter: FilterResult, hist: dict[str, int]) -> str:
    """The "ever" reason histogram, saying how many of each reason's nodes are also cordoned or
    NotReady: the node summary (the scheduler's view now, first failing filter) counts those as
    unschedulable / tainted instead, so both add up the same nodes."""
    cordoned: dict[str, int] = {}
    not_ready: dict[str, int] = {}
    for i, n in enumerate(snap.nodes):
        if not (n.unschedulable or n.ready is False):
            continue
        r = ever_filter.node_reason(snap, i)
        if r is None:
            continue
        if n.unschedulable:
            cordoned[r] = cordoned.get(r, 0) + 1
        elif n.ready is False:
            not_ready[r] = not_ready.get(r, 0) + 1
    parts = []
    for r, k in sorted(hist.items(), key=lambda kv: f"{kv[1]} {kv[0]}"):
        extra = [f"{cordoned[r]} of them cordoned"] if r in cordoned else []
        extra += [f"{not_ready[r]} of them NotReady"] if r in not_ready else []
        parts.append(f"{k} {r}" + (f" ({', '.join(extra)})" if extra else ""))
    return ", ".join(parts)


def _column_sums(snap: ClusterSnapshot, mask: np.ndarray) -> list[int | float]:
    """Σ ``ever_alloc`` over the nodes in ``mask``, per resource column (inf past 2⁶²: the
    float64 sum is checked first, since an int64 sum of absurd quantities could wrap around)."""
    sub = snap.ever_alloc[mask]
    exact = sub.sum(axis=0)
    approx = sub.sum(axis=0, dtype=np.float64)
    return [int(e) if float(a) < 2.0**62 else float("inf") for e, a in zip(exact, approx)]


def _now_findings(snap, gang, evals, options, findings) -> None:
    """Explain why a feasible gang cannot start now."""
    union_now = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union_now |= ev.now_mask
    gpu_need: dict[str, int] = {}
    for ps in gang.pod_sets:
        for r, v in ps.requests.items():
            if options.is_gpu(r) and v:
                gpu_need[r] = gpu_need.get(r, 0) + v * ps.count
    explained = False
    for r, need in gpu_need.items():
        c = snap.col.get(r)
        free = int(np.maximum(snap.free[union_now, c], 0).sum()) if c is not None else 0
        main = _primary([e.ps for e in evals], options)
        ev = next(e for e in evals if e.ps is main)
        if free >= need:
            findings.append(Finding("Fragmented", WAITS,
                f"fragmented: {free} {r} free, but only {int(np.count_nonzero(ev.k_now))} node(s) can take a pod of "
                f"{format_quantity(r, main.requests.get(r, 0))} now; {_same_shape_pods([e.ps for e in evals], main)} needed",
                {"resource": r, "free": free, "needed": need, "nodes_fit_now": int(np.count_nonzero(ev.k_now)),
                 "pods_needed": _same_shape_pods([e.ps for e in evals], main)}))
        else:
            findings.append(Finding("InsufficientCapacity", WAITS,
                f"needs {need} {r}; {free} free on eligible nodes now",
                {"resource": r, "free": free, "needed": need}))
        explained = True
    if not explained:
        findings.append(Finding("InsufficientCapacity", WAITS,
            "not enough free resources on eligible nodes to place every pod of the gang now"))
    # Nodes that could host pods once repaired.
    could = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        could |= ev.k_ever > 0
    names = lambda idx: [snap.nodes[int(i)].name for i in idx]
    cordoned = [i for i in np.flatnonzero(could) if snap.nodes[int(i)].unschedulable]
    not_ready = [i for i in np.flatnonzero(could) if snap.nodes[int(i)].ready is False]
    dev_cols = [snap.col[r] for r in snap.resources if snap.device_cols[snap.col[r]]]
    unhealthy = []
    if dev_cols:
        gap = (snap.ever_alloc[:, dev_cols] > snap.alloc[:, dev_cols]).any(axis=1)
        unhealthy = list(np.flatnonzero(could & gap))
    if unhealthy:
        details = []
        for i in unhealthy[:SAMPLES]:
            n = snap.nodes[int(i)]
            for r in snap.resources:
                c = snap.col[r]
                if snap.device_cols[c] and snap.ever_alloc[i, c] > snap.alloc[i, c]:
                    details.append(f"{n.name} advertises {int(snap.alloc[i, c])} of {int(snap.ever_alloc[i, c])} {r}")
        more = f" (+{len(unhealthy) - 1} more)" if len(unhealthy) > 1 else ""
        findings.append(Finding("UnhealthyDevices", WAITS,
            f"unhealthy devices: {details[0]}{more}; check its device plugin",
            {"nodes": names(unhealthy), "details": details}))
    if not_ready:
        findings.append(Finding("NodesNotReady", WAITS,
            f"{len(not_ready)} NotReady node(s) could host pods once Ready: {', '.join(names(not_ready[:SAMPLES]))}"
            + (" …" if len(not_ready) > SAMPLES else ""),
            {"nodes": names(not_ready)}))
    if cordoned:
        findings.append(Finding("NodesCordoned", WAITS,
            f"{len(cordoned)} cordoned node(s) could host pods once uncordoned: {', '.join(names(cordoned[:SAMPLES]))}"
            + (" …" if len(cordoned) > SAMPLES else ""),
            {"nodes": names(cordoned)}))
    transient = DEFAULT_TRANSIENT | options.transient_taints
    tainted = [i for i in np.flatnonzero(could)
               if any(t.effect in ("NoSchedule", "NoExecute") and t.key not in REPAIRABLE_TAINTS and taint_matches(t.key, transient)
                      for t in snap.nodes[int(i)].taints)]
    if tainted:
        findings.append(Finding("NodesTransientlyTainted", WAITS,
            f"{len(tainted)} node(s) carry a transient taint: {', '.join(names(tainted[:SAMPLES]))}",
            {"nodes": names(tainted)}))


def _quota_step(snap: ClusterSnapshot, gang: GangRequest, options: EngineOptions) -> QuotaResult | None:
    if gang.queue_name:
        if not (snap.kueue.cluster_queues or snap.kueue.local_queues):
            q = QuotaResult("kueue", f"{gang.namespace}/{gang.queue_name}")
            q.findings.append(Finding("KueueNotInSnapshot", "Info",
                f"labelled for Kueue LocalQueue {gang.queue_name}, but the cluster data has no Kueue objects; quota not checked"))
            return q
        return evaluate_kueue(gang, snap.kueue, _reserved_workload(snap, gang))
    if gang.volcano_queue is not None:
        gpus = {}
        for r in snap.resources:
            if options.is_gpu(r):
                gpus[r] = int(snap.alloc[:, snap.col[r]].sum())
        if not all_or_nothing(gang, options):
            # Volcano groups such pods on their own (a PodGroup of minMember 1 per pod,
            # pkg/controllers/podgroup): the object's totals are not what its queue admits.
            gang = replace(gang, exact_total=False)
        return evaluate_volcano(gang, snap.volcano, gpus)
    return None


def _reserved_workload(snap: ClusterSnapshot, gang: GangRequest):
    """The gang's own Kueue Workload when it holds quota (QuotaReserved/Admitted), else None.
    The quota-holding Workloads are indexed by namespace once per snapshot, so a check does
    not rescan every Workload."""
    if not snap.kueue.workloads:
        return None
    index = snap.recall(("kueue-reserved",))
    if index is None:
        by_ns: dict[str, list] = {}
        for w in snap.kueue.workloads.values():
            if w.holds_quota:
                by_ns.setdefault(w.namespace, []).append(w)
        index = snap.remember(("kueue-reserved",), by_ns)
    return next((w for w in index.get(gang.namespace, ()) if w.belongs_to(gang.kind, gang.namespace, gang.name)), None)


#: A pod that tolerates everything: only a flavor's labels narrow the nodes it means.
_ANY_POD = PodSet("lint", 0, {}, tolerations=(Toleration(operator="Exists"),))


def _flavor_capacity(snap: ClusterSnapshot, flavor: ResourceFlavor, resource: str) -> int:
    """Σ ever-allocatable ``resource`` on the nodes a flavor's nodeLabels select; memoised on
    the snapshot (it depends on nothing else, and every check of a Kueue gang asks for it)."""
    key = ("flavor-capacity", flavor.name, tuple(sorted(flavor.node_labels.items())), resource)
    hit = snap.recall(key)
    if hit is None:
        mask = filter_nodes(snap, Constraints(_ANY_POD, flavor.node_labels), ever=True).mask
        hit = snap.remember(key, int(snap.ever_alloc[mask, snap.col[resource]].sum()))
    return int(hit)


def _lint_quota(snap: ClusterSnapshot, q: QuotaResult, options: EngineOptions, findings: list[Finding]) -> None:
    limits = q.report.get("limits") or {}
    cq = snap.kueue.cluster_queues.get(q.report.get("cluster_queue", ""))
    if cq is None:
        return
    for fname, per in limits.items():
        flavor = snap.kueue.flavors.get(fname) or ResourceFlavor(fname)
        for r, lim in per.items():
            if not options.is_gpu(r) or r not in snap.col:
                continue
            f = lint_quota_vs_capacity(cq, fname, r, lim["nominal"], _flavor_capacity(snap, flavor, r))
            if f:
                findings.append(f)


def evaluate(
    snap: ClusterSnapshot,
    gang: GangRequest,
    options: EngineOptions | None = None,
    *,
    now: float | None = None,
    history: RuntimeHistory | None = None,
) -> Decision:
    """Decide whether ``gang`` can start now, later, or never on ``snap``.

    Args:
        snap: the cluster (``ClusterSnapshot``), never modified.
        gang: the gang (``GangRequest``) as an adapter built it.
        options: policy knobs; defaults match the default policy.
        now: the current time, epoch seconds. When given, a Waits verdict carries an expected
            wait (``wait.estimate_wait``: limit-based earliest start and a p50/p90 band); the
            engine itself has no clock.
        history: what the cluster did lately (``wait.RuntimeHistory``): run times learned per
            (queue, owner kind) and gang arrivals, for the expected wait.

    Returns:
        A ``Decision``. "Doesn't fit" is a Decision, never an exception.
    """
    options = options or EngineOptions()
    findings: list[Finding] = list(gang.findings)
    pod_sets = [ps for ps in gang.pod_sets if ps.count > 0]

    quota = _quota_step(snap, gang, options)
    if quota is not None:
        findings.extend(quota.findings)
        _lint_quota(snap, quota, options, findings)
    flavors_now = (quota.report.get("flavors") or {}) if quota else {}

    evals = [
        _evaluate_pod_set(snap, ps, (quota.candidate_flavors.get(ps.name) if quota else None), flavors_now.get(ps.name), options)
        for ps in pod_sets
    ]
    placement: dict[str, Any] = {}
    if not snap.nodes:
        findings.append(Finding("NoNodes", WAITS, "the cluster data holds no nodes; capacity not checked"))
    elif evals:
        _capacity_proofs(snap, gang, evals, options, findings)
    never = any(f.severity == NEVER_FITS for f in findings)
    placed_now = None
    if evals and not never and snap.nodes:
        def demands(key: str) -> list[Demand]:
            out = []
            for i, ev in enumerate(evals):
                g = _main_gpu(ev.ps, options)
                weight = (ev.ps.requests.get(g, 0) if g else 0, ev.ps.requests.get("cpu", 0), ev.ps.requests.get("memory", 0), -i)
                mask, k = (ev.ever_mask, ev.k_ever) if key == "ever" else (ev.now_mask, ev.k_now)
                out.append(Demand(str(i), ev.shape, ev.ps.count, mask, ev.ps.max_per_node, weight, k))
            return out

        placed_now = place(snap.free, demands("now"))
        topo = [ev.ps for ev in evals if ev.ps.required_topology]
        domains = _topology_domains(snap, evals) if topo else None
        if topo and placed_now is not None:
            placed_now = _check_topology(snap, evals, placed_now)
        # A placement now is one on the repaired empty cluster too (free ≤ ever_alloc and the
        # now filters are stricter), so the second search runs only when the first fails.
        ever_place = placed_now if placed_now is not None else place(snap.ever_alloc, demands("ever"))
        if topo and ever_place is not None and placed_now is None:
            ever_place = _check_topology(snap, evals, ever_place)
        # The greedy passes prove nothing when they fail: an exhaustive search, bounded by
        # SEARCH_BUDGET steps shared by its "ever" and "now" runs, settles small instances
        # (fit.search: at most SEARCH_MAX_PODS pods over SEARCH_MAX_CLASSES node classes).
        # Only an all-or-nothing gang is proved NeverFits by a failed search (pods scheduled one by
        # one start as they fit: ParallelismExceedsCapacity covers them).
        gang_whole = all_or_nothing(gang, options)
        why, budget = None, SEARCH_BUDGET
        if ever_place is None and gang_whole:
            found = search(snap.ever_alloc, demands("ever"), topology=domains, budget=budget)
            budget -= found.steps
            if found.status == FOUND:
                ever_place = found.placement
            elif found.status == NONE:
                why = _unprovable(snap, gang, evals)
                if why is None:
                    findings.append(_no_packing_finding(snap, gang, evals, options, found.steps))
                    never = True
            else:
                why = f"too large for the exhaustive search ({SEARCH_BUDGET} steps)"
        if not never and placed_now is None and budget > 0:
            found_now = search(snap.free, demands("now"), topology=domains, budget=budget)
            if found_now.status == FOUND:
                placed_now = found_now.placement
                ever_place = ever_place or placed_now
        if not never and ever_place is None and placed_now is None and gang_whole:
            findings.append(Finding("PlacementUnproven", WAITS,
                f"no proof that the gang can never fit, and no placement found on the empty cluster ({why or 'no placement found'}); "
                "admitted, placement unproven", {"why": why or ""}))
        chosen = placed_now if placed_now is not None else ever_place
        if chosen is not None and not never:
            placement = {
                "when": "now" if placed_now is not None else "ever",
                "pod_sets": {evals[int(k)].ps.name: [[snap.nodes[n].name, c] for n, c in v] for k, v in chosen.items()},
            }
        if placed_now is None and not never:
            _now_findings(snap, gang, evals, options, findings)

    if evals and not never:
        _group_findings(gang, evals, findings)
        _competition_findings(snap, gang, evals, options, findings)
    if quota is not None and quota.system == "kueue":
        cq = snap.kueue.cluster_queues.get(quota.report.get("cluster_queue", ""))
        if cq is not None and cq.queueing_strategy == "StrictFIFO" and cq.pending_workloads > 0:
            findings.append(Finding("HeadOfLineBlocking", "Info",
                f"ClusterQueue {cq.name} is StrictFIFO with {cq.pending_workloads} pending workload(s) ahead; "
                "the head blocks everything behind it, whatever flavor it waits for",
                {"cluster_queue": cq.name, "pending_workloads": cq.pending_workloads}))
    waits = any(f.severity == WAITS for f in findings)
    if never:
        verdict = NEVER_FITS
    elif waits or (evals and placed_now is None):
        verdict = WAITS
    else:
        verdict = FITS

    # Proofs first (the reasons of a denial lead with what denies it), then by _ORDER.
    findings.sort(key=lambda f: (f.severity != NEVER_FITS, _ORDER.index(f.code) if f.code in _ORDER else len(_ORDER)))
    reasons: list[str] = []
    for f in findings:
        if f.severity in (NEVER_FITS, WAITS) and f.code not in reasons:
            reasons.append(f.code)
    main = _primary(pod_sets, options) if pod_sets else None
    main_ev = next((e for e in evals if e.ps is main), None)
    nodes = _node_report(snap, main_ev) if main_ev else {"total": len(snap.nodes), "eligible": 0, "fit_now": 0, "fit_ever": 0, "reasons": {}, "summary": ""}
    frag = _fragmentation(snap, main_ev, options, _same_shape_pods(pod_sets, main)) if main_ev else None
    gang_info = {
        "kind": gang.kind,
        "api_version": gang.api_version,
        "name": gang.name,
        "namespace": gang.namespace,
        "pods": gang.pods,
        "queue": gang.queue_name or gang.volcano_queue,
        "pod_sets": [
            {"name": ps.name, "count": ps.count, "replicas": ps.total_replicas(), "requests": dict(ps.requests),
             "requests_text": _fmt_req(ps.requests, options)}
            for ps in gang.pod_sets
        ],
        "total_requests": gang.total_requests(),
    }
    message = _message(gang, verdict, findings, nodes, frag)
    warnings = [_short(f.message) for f in findings if f.severity in (WAITS, "Info")]
    expected = None
    if now is not None and verdict == WAITS and main_ev is not None and placed_now is None and snap.nodes:
        expected = _expected_wait(snap, gang, now, main_ev.now_mask, history, main_ev.ever_mask)
    return Decision(verdict, reasons, message, warnings, findings, gang_info, nodes,
                    quota.report if quota else None, frag, placement, expected)


def _expected_wait(snap, gang, now, eligible, history, ever=None) -> dict[str, Any]:
    prio = gang_priority(snap, gang)
    est = estimate_wait(snap, gang, now, history=history, ahead=gangs_ahead(snap, gang, prio, eligible=eligible),
                        eligible=eligible, priority=prio, ever=ever)
    return est.as_dict()


def expected_wait(
    snap: ClusterSnapshot,
    gang: GangRequest,
    now: float,
    options: EngineOptions | None = None,
    flavors: Mapping[str, str] | None = None,
    *,
    history: RuntimeHistory | None = None,
) -> dict[str, Any] | None:
    """The expected wait of ``gang`` (``WaitEstimate.as_dict()``, seconds) on its main pod set's
    eligible nodes now, or None when the gang has no pods. For callers that decided first and
    estimate later (the webhook computes it off the request's critical path). ``flavors`` is
    the Decision's ``quota["flavors"]`` (pod set → Kueue flavor assigned now); ``history`` as
    for ``evaluate``. Gangs ahead and this gang's priority come from ``snap``.
    """
    options = options or EngineOptions()
    pod_sets = [ps for ps in gang.pod_sets if ps.count > 0]
    if not pod_sets:
        return None
    main = _primary(pod_sets, options)
    name = (flavors or {}).get(main.name)
    flavor = snap.kueue.flavors.get(name) if name else None
    ev = _evaluate_pod_set(snap, main, [flavor] if flavor else None, name, options)
    return _expected_wait(snap, gang, now, ev.now_mask, history, ev.ever_mask)


def _topology_domains(snap: ClusterSnapshot, evals) -> dict[str, np.ndarray]:
    """Demand name (the pod set's index) → domain id per node for pod sets with a required
    topology (−1 where the node lacks the label): the ``topology`` argument of ``fit.search``."""
    out = {}
    for i, ev in enumerate(evals):
        key = ev.ps.required_topology
        if not key:
            continue
        ids: dict[str, int] = {}
        out[str(i)] = np.fromiter(
            (ids.setdefault(n.labels[key], len(ids)) if key in n.labels else -1 for n in snap.nodes),
            dtype=np.int64, count=len(snap.nodes))
    return out


def _unprovable(snap: ClusterSnapshot, gang: GangRequest, evals) -> str | None:
    """Why an exhaustive search without a placement on the repaired empty cluster is *no*
    proof, None when it is one: every pod set's shape and the gang's total must be stated by
    the object, every node any pod set may use must report its capacity, and no MIG layout
    may be in flux for MIG requests."""
    if not gang.exact_total or any(not ev.ps.exact_shape for ev in evals):
        return "the gang's pod shapes are assumed, not stated"
    union = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union |= ev.ever_mask
    if (snap.unknown_capacity & union).any():
        return "some eligible nodes report no capacity yet"
    if snap.mig_reconfiguring and any(r.startswith("nvidia.com/mig-") for ev in evals for r in ev.ps.requests):
        return "a MIG layout is being reconfigured"
    return None


def _no_packing_finding(snap, gang, evals, options, steps: int) -> Finding:
    """ExceedsClusterCapacity (NeverFits) when no placement of all pod sets together exists."""
    union = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union |= ev.ever_mask
    n = int(np.count_nonzero(union))
    sets = " + ".join(f"{ev.ps.count} × {_fmt_req(ev.ps.requests, options)}" for ev in evals)
    topo = any(ev.ps.required_topology for ev in evals)
    return Finding("ExceedsClusterCapacity", NEVER_FITS,
        f"no placement of all {gang.pods} pods ({sets}) exists on the {n} eligible node(s) even when empty"
        + (" within their required topology domains" if topo else "")
        + f" (exhaustive search, {steps} steps): each pod set fits alone, not together",
        {"eligible_nodes": n, "pods_needed": gang.pods, "proof": "exhaustive-search", "search_steps": steps})


def _check_topology(snap, evals, placed):
    """A now-placement for pod sets with a required topology must sit in one domain."""
    for k, chosen in placed.items():
        ps = evals[int(k)].ps
        if ps.required_topology:
            domains = {snap.nodes[n].labels.get(ps.required_topology) for n, _ in chosen}
            if len(domains) != 1 or None in domains:
                return None
    return placed


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message(gang: GangRequest, verdict: str, findings: list[Finding], nodes: dict, frag: dict | None) -> str:
    who = f"{kind_label(gang.kind, gang.api_version)} {gang.namespace}/{gang.name} ({plural(gang.pods, 'pod')})"
    if verdict == NEVER_FITS:
        f = next(f for f in findings if f.severity == NEVER_FITS)
        also = "".join(f" {g.message}." for g in findings if g.code in _EXPLAINS_DENIAL)
        return f"{who} can never start: {f.message}.{_hint(gang, f)}{also}"
    if verdict == FITS:
        return f"{who} fits now: {nodes.get('fit_now', 0)} node(s) can take its main pod shape."
    blocking = [f for f in findings if f.severity == WAITS]
    head = blocking[0].message if blocking else "waits"
    return f"{who} can start, but not now: {head}."


#: Adapter lints that explain a denial (e.g. a defaulted minAvailable), told with it.
_EXPLAINS_DENIAL = ("MinAvailableDefaulted", "MinAvailableBelowTasks", "GangMinimumBelowReplicas")


def _group_findings(gang: GangRequest, evals: list[_PodSetEval], findings: list[Finding]) -> None:
    """A workload of several independent groups (LeaderWorkerSet): how many fit at once."""
    if gang.groups <= 1:
        return
    ever = min((int(ev.k_ever.sum()) // ev.ps.count for ev in evals if ev.ps.count), default=0)
    now = min((int(ev.k_now.sum()) // ev.ps.count for ev in evals if ev.ps.count), default=0)
    if ever < gang.groups:
        findings.append(Finding("GroupsExceedCapacity", WAITS,
            f"only {ever} of {gang.groups} groups of {gang.pods} pods can run at once even on the empty cluster; "
            "the rest will wait", {"groups": gang.groups, "groups_possible": ever, "groups_now": now}))
    elif now < gang.groups:
        findings.append(Finding("GroupsWait", "Info",
            f"{now} of {gang.groups} groups of {gang.pods} pods fit now; the others wait",
            {"groups": gang.groups, "groups_now": now}))


def _competition_findings(snap, gang, evals, options, findings) -> None:
    """Pending pods of other gangs asking for the same GPUs (coscheduling Permit / Volcano
    allocate races, cases C15/C16): warn when together they exceed what is free."""
    gpu = next((r for ps in gang.pod_sets for r in ps.requests if options.is_gpu(r) and ps.requests[r]), None)
    if gpu is None or gpu not in snap.col:
        return
    mine = sum(ps.requests.get(gpu, 0) * ps.count for ps in gang.pod_sets)
    others: dict[str, int] = {}
    for p in snap.pending_pods:
        if p.requests.get(gpu, 0) and p.gang != gang.key and not (
                p.namespace == gang.namespace and gang.name and p.gang.endswith(f"/{gang.namespace}/{gang.name}")):
            key = p.gang or f"Pod/{p.namespace}/{p.name}"
            others[key] = others.get(key, 0) + p.requests[gpu]
    if not others:
        return
    union = np.zeros(len(snap.nodes), dtype=bool)
    for ev in evals:
        union |= ev.now_mask
    free = int(np.maximum(snap.free[union, snap.col[gpu]], 0).sum())
    pending = sum(others.values())
    if mine + pending > free:
        findings.append(Finding("CompetingPendingGangs", "Info",
            f"{len(others)} other pending gang(s) want {pending} {gpu}; with this one {mine + pending} > {free} free: "
            "they will serialize", {"gangs": sorted(others), "pending": pending, "free": free}))


def _hint(gang: GangRequest, f: Finding) -> str:
    d = f.data
    if f.code == "ExceedsMaxQuota" and d.get("maximum") is not None:
        r = d["resource"]
        per = max((ps.requests.get(r, 0) for ps in gang.pod_sets), default=0)
        if per:
            fixed = sum(ps.requests.get(r, 0) * ps.count for ps in gang.pod_sets if ps.requests.get(r, 0) != per)
            n = max(0, (int(d["maximum"]) - fixed) // per)
            if n == 0:
                return f" One pod alone asks for more {r} than the queue's maximum: make each pod smaller, or ask for a larger quota."
            return f" Ask for at most {plural(n, 'pod')} of {format_quantity(r, per)} {r}, or for a larger quota."
        return " Ask for a larger quota."
    if f.code == "ExceedsClusterCapacity" and d.get("proof") == "exhaustive-search":
        return " Make the pods smaller so that pods of different sets can share nodes, or ask for fewer pods."
    if f.code == "ExceedsClusterCapacity" and "pods_possible" in d:
        if d["pods_possible"]:
            return f" Ask for at most {plural(d['pods_possible'], 'pod')} in {d['pod_set']}, or widen its node selector/tolerations."
        return " Change its node selector, affinity or tolerations to match existing nodes."
    if f.code == "PodExceedsNodeCapacity":
        return " Make each pod smaller than the largest node, or add larger nodes."
    if f.code == "ResourceNotOffered":
        return " Request a resource the nodes advertise, or check the device plugin on the nodes meant to offer it."
    if f.code == "InvalidGang":
        return " Fix the gang's minimum so it does not exceed the pods that will exist."
    return ""
