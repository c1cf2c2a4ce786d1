"""A gang against its Kueue ClusterQueue: which flavors could hold each pod set, whether any
assignment stays within the maximums (ever), Kueue's greedy assignment now, and the findings.

Owns ``evaluate_kueue`` and its steps, and the quota-versus-hardware lint; not the cohort tree
and its limits (``kueue``: ``CohortTree``, ``kueue_limits``). Quantities are scheduler units
(GPUs as counts, cpu millicores, memory bytes).

Mirrors kueue v0.17 pkg/scheduler/flavorassigner/flavorassigner.go: flavors are tried in the
ClusterQueue's order per pod set, a flavor must match the pod set's node selector and tolerate
its taints (``_flavor_matches``), and a pod set fits a flavor when the usage assumed by earlier
pod sets plus its request stays within Available (``fitsResourceQuota``). A ClusterQueue with a
stopPolicy admits nothing (pkg/cache/scheduler/clusterqueue.go, isStopped); one whose cohort
chain has a cycle is inactive (pkg/cache/scheduler/snapshot.go, HasCycle).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from ..model import ClusterQueue, Finding, GangRequest, KueueState, PodSet, ResourceFlavor
from .common import INFO, NEVER, WAITS, QuotaResult, fmt
from .kueue import MAX_COHORT_DEPTH, CohortTree, FlavorLimit, kueue_limits, ref

__all__ = ["evaluate_kueue", "lint_quota_vs_capacity", "MAX_FLAVOR_COMBINATIONS"]

#: Flavor assignments tried before giving up on a proof (then the gang is not called NeverFits).
MAX_FLAVOR_COMBINATIONS = 4096


def evaluate_kueue(gang: GangRequest, kueue: KueueState, reserved=None) -> QuotaResult:
    """Check a Kueue-managed gang against its ClusterQueue and the cohort tree above it.

    Args:
        gang: with ``queue_name`` set (label kueue.x-k8s.io/queue-name).
        kueue: a ``KueueState``.
        reserved: the gang's own ``KueueWorkload`` when it already holds quota (the caller
            looks it up); in the gang's ClusterQueue it yields an Info finding QuotaReserved
            and no quota check, since the ClusterQueue's usage already counts it.

    Returns:
        A ``QuotaResult`` with findings ExceedsMaxQuota (NeverFits: a request above Kueue's
        PotentialAvailable, the "maximum capacity"), WaitingForQuota (Waits: above Available),
        LocalQueueNotFound / ClusterQueueNotFound / ResourceNotCovered / NoMatchingFlavor /
        ClusterQueueStopped / CohortHasCycle (Waits), and the limits per resource in
        ``report``. Both messages name the limit that binds (nominalQuota without a cohort, a
        borrowingLimit, a member's lendingLimit, or the cohort's pool and who uses it);
        ``data["binding"]`` is its kind and ``data["cohort"]`` the ClusterQueue's cohort or None.
    """
    res = QuotaResult("kueue", f"{gang.namespace}/{gang.queue_name}")
    cq = _find_cluster_queue(gang, kueue, res)
    if cq is None or _already_reserved(gang, kueue, cq, reserved, res):
        return res
    if cq.stop_policy not in ("", "None"):
        res.findings.append(Finding("ClusterQueueStopped", WAITS,
            f"ClusterQueue {cq.name} has stopPolicy {cq.stop_policy}: nothing is admitted until it is lifted"))
    tree = CohortTree(kueue)
    if _tree_unusable(gang, cq, tree, res):
        return res
    a = _Admission(gang, kueue, cq, tree, res)
    all_candidates, blocked, units = _candidate_flavors(a)
    res.report.update({"request": _requested(gang), "cohort": cq.cohort})
    # Only pod sets asking for something the ClusterQueue covers take part in flavor assignment,
    # one unit per (pod set, resource group) it asks of: Kueue picks a flavor per resource group.
    quota_sets = [] if blocked else [u for u in units if a.covered(u.name)]
    if not quota_sets:
        res.report["limits"] = {}
        return res
    # A flavor whose maximum cannot hold the pod set alone is never assigned to it.
    candidates = {
        name: [f for f in fl if all(a.requests[name][r] <= a.limit(f, r).maximum for r in a.covered(name))]
        for name, fl in all_candidates.items()
    }
    best_ever, searched_all = _assign_ever(a, quota_sets, candidates)
    res.report["limits"] = _limits_report(a, quota_sets, candidates, all_candidates)
    if best_ever is None and searched_all:
        res.findings.append(_exceeds_max_quota(a, quota_sets, candidates, all_candidates))
        # Kueue places the pods only on nodes of a flavor that matches the pod set, so the node
        # view keeps those flavors' nodeLabels even when quota fails (issue #17 item 17: the
        # same pod shape must show the same eligible nodes whether quota holds or not).
        res.candidate_flavors = a.per_pod_set(quota_sets, all_candidates, skip_empty=True)
        return res
    res.candidate_flavors = a.per_pod_set(quota_sets, candidates)
    assignment, shortfall = _assign_now(a, quota_sets, candidates, best_ever)
    res.report["flavors"] = a.main_flavor(quota_sets, assignment)
    if shortfall is not None:
        res.findings.append(_waiting_for_quota(a, *shortfall))
    return res


def lint_quota_vs_capacity(cq: ClusterQueue, flavor: str, resource: str, nominal: int, physical: int) -> Finding | None:
    """QuotaExceedsCapacity (Info): a ClusterQueue promises more of a device than its flavor's nodes have."""
    if nominal > physical:
        return Finding("QuotaExceedsCapacity", INFO,
            f"ClusterQueue {cq.name} quota {nominal} {resource} in flavor {flavor} > {physical} on the nodes that flavor selects",
            {"cluster_queue": cq.name, "flavor": flavor, "resource": resource, "nominal": nominal, "physical": physical})
    return None


# ---------------------------------------------------------------- what the steps share


@dataclass
class _Admission:
    """One gang against one ClusterQueue: the tree, the limits asked for so far (memoised per
    (flavor, resource)) and each pod set's total request (``_pod_set_request``)."""

    gang: GangRequest
    kueue: KueueState
    cq: ClusterQueue
    tree: CohortTree
    res: QuotaResult
    memo: dict[tuple[str, str], FlavorLimit] = field(default_factory=dict)
    requests: dict[str, dict[str, int]] = field(init=False)
    #: unit name → its pod set's name (a unit is a pod set's requests of one resource group)
    pod_set_of: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.requests = {ps.name: _pod_set_request(ps) for ps in self.gang.pod_sets}

    def per_pod_set(self, units: list[PodSet], flavors: dict[str, list[str]], skip_empty: bool = False) -> dict[str, list[ResourceFlavor]]:
        """Pod set → the flavors of its units (in order, once each): the nodes a pod set may use
        are those of one of them (with several resource groups a pod gets every group's flavor
        labels, which this union does not narrow: more nodes, never fewer)."""
        out: dict[str, list[ResourceFlavor]] = {}
        for u in units:
            names = flavors.get(u.name) or []
            if skip_empty and not names:
                continue
            lst = out.setdefault(self.pod_set_of.get(u.name, u.name), [])
            for f in names:
                if all(x.name != f for x in lst):
                    lst.append(self.kueue.flavors.get(f) or ResourceFlavor(f))
        return out

    def main_flavor(self, units: list[PodSet], assignment: dict[str, str]) -> dict[str, str]:
        """Pod set → the flavor assigned to its unit of a device resource (else its first unit)."""
        out: dict[str, str] = {}
        for u in units:
            ps = self.pod_set_of.get(u.name, u.name)
            device = any(r not in ("cpu", "memory", "ephemeral-storage", "pods") for r in self.requests[u.name])
            if ps not in out or device:
                out[ps] = assignment[u.name]
        return out

    def limit(self, flavor: str, resource: str) -> FlavorLimit:
        """``kueue_limits`` of the ClusterQueue in (flavor, resource), computed once."""
        if (flavor, resource) not in self.memo:
            self.memo[(flavor, resource)] = kueue_limits(self.kueue, self.cq.name, flavor, resource, self.tree)
        return self.memo[(flavor, resource)]

    def covered(self, ps_name: str) -> list[str]:
        """The pod set's requested resources the ClusterQueue covers (``pods`` aside)."""
        return [r for r in self.requests[ps_name] if r != "pods" and _group_for(self.cq, r) is not None]


def _pod_set_request(ps: PodSet) -> dict[str, int]:
    """The pod set's total request: what the object states (``stated_total``, a PodGroup's
    minResources) where set, never the rounded-up estimate count × per-pod shape."""
    if ps.stated_total is not None:
        return {r: v for r, v in ps.stated_total.items() if v > 0}
    return {r: v * ps.count for r, v in ps.requests.items() if v > 0}


def _requested(gang: GangRequest) -> dict[str, int]:
    """The gang's total request without zero amounts (the report's ``request``)."""
    return {r: v for r, v in gang.total_requests().items() if v}


def _label_keys(kueue: KueueState, group) -> frozenset[str]:
    """The nodeLabels keys of a resource group's flavors (kueue pkg/cache/scheduler/
    clusterqueue.go updateLabelKeys: ResourceGroup.LabelKeys)."""
    keys: set[str] = set()
    for f in group.flavors:
        flavor = kueue.flavors.get(f.name)
        if flavor is not None:
            keys.update(flavor.node_labels)
    return frozenset(keys)


def _flavor_matches(ps: PodSet, flavor: ResourceFlavor | None, label_keys: frozenset[str] = frozenset()) -> bool:
    """Kueue's flavor/pod compatibility (flavorassigner.go checkFlavorForPodSets, flavorSelector):
    the pod set's nodeSelector and required node affinity, cut down to the keys some flavor of
    the group labels (``label_keys``; an affinity term left empty matches every flavor), must
    match the flavor's nodeLabels as a node's labels — so a key the group uses that this flavor
    lacks does not match; and the flavor's NoSchedule/NoExecute taints must be tolerated."""
    if flavor is None:
        return True
    labels = flavor.node_labels
    for k, v in ps.node_selector.items():
        if k in label_keys and labels.get(k) != v:
            return False
    terms: list[tuple] | None = []
    for t in ps.required_affinity:
        exprs = tuple(e for e in t.match_expressions if e.key in label_keys)
        if not exprs:
            terms = None  # this ORed term asks nothing of a flavor: every flavor matches
            break
        terms.append(exprs)
    if terms and not any(all(e.matches(labels) for e in exprs) for exprs in terms):
        return False
    tolerations = ps.tolerations + flavor.tolerations
    for t in flavor.node_taints:
        if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in tolerations):
            return False
    return True


def _group_for(cq: ClusterQueue, resource: str):
    """The ClusterQueue's resource group covering ``resource``, or None."""
    for g in cq.resource_groups:
        if resource in g.covered_resources:
            return g
    return None


# ---------------------------------------------------------------- the steps, in order


def _find_cluster_queue(gang: GangRequest, kueue: KueueState, res: QuotaResult) -> ClusterQueue | None:
    """The gang's LocalQueue and its ClusterQueue; None (with LocalQueueNotFound or
    ClusterQueueNotFound) when either is missing."""
    lq = kueue.local_queues.get((gang.namespace, gang.queue_name or ""))
    if lq is None:
        res.findings.append(Finding("LocalQueueNotFound", WAITS,
            f"LocalQueue {gang.queue_name} not found in namespace {gang.namespace}; Kueue holds the workload until it exists"))
        return None
    cq = kueue.cluster_queues.get(lq.cluster_queue)
    res.report = {"local_queue": lq.name, "cluster_queue": lq.cluster_queue}
    if cq is None:
        res.findings.append(Finding("ClusterQueueNotFound", WAITS,
            f"ClusterQueue {lq.cluster_queue} (from LocalQueue {lq.name}) not found"))
    return cq


def _already_reserved(gang: GangRequest, kueue: KueueState, cq: ClusterQueue, reserved, res: QuotaResult) -> bool:
    """True (with QuotaReserved) when the gang's own Workload already holds its quota in ``cq``
    (QuotaReserved/Admitted): the ClusterQueue's usage includes it, and quota is not what holds
    it back."""
    own = reserved if reserved is not None and kueue.cluster_queue_of(reserved) == cq.name else None
    if own is None:
        return False
    res.report.update({"request": _requested(gang), "cohort": cq.cohort, "limits": {},
                       "workload": f"{own.namespace}/{own.name}", "workload_state": own.state})
    res.findings.append(Finding("QuotaReserved", INFO,
        f"Workload {own.namespace}/{own.name} already holds its quota in ClusterQueue {cq.name} ({own.state}); "
        "quota is not what holds it back"))
    return True


def _tree_unusable(gang: GangRequest, cq: ClusterQueue, tree: CohortTree, res: QuotaResult) -> bool:
    """True when no proof may rest on the cohort tree: its chain has a cycle (CohortHasCycle:
    kueue pkg/cache/scheduler/snapshot.go keeps such a ClusterQueue inactive) or it is deeper
    than ``MAX_COHORT_DEPTH`` (CohortTooDeep: the walks recurse once per level)."""
    key = ("cq", cq.name)
    if tree.has_cycle(key):
        res.report.update({"request": _requested(gang), "cohort": cq.cohort, "limits": {}})
        res.findings.append(Finding("CohortHasCycle", WAITS,
            f"the cohort chain of ClusterQueue {cq.name} (cohort {cq.cohort}) has a cycle: Kueue keeps the ClusterQueue inactive "
            "and admits nothing until the Cohort parents are fixed",
            {"cluster_queue": cq.name, "cohort": cq.cohort}))
        return True
    if tree.height(tree.root(key)) > MAX_COHORT_DEPTH:
        res.report.update({"request": _requested(gang), "cohort": cq.cohort, "limits": {}})
        res.findings.append(Finding("CohortTooDeep", INFO,
            f"the cohort tree of ClusterQueue {cq.name} is more than {MAX_COHORT_DEPTH} levels deep; quota not checked",
            {"cluster_queue": cq.name, "cohort": cq.cohort}))
        return True
    return False


def _candidate_flavors(a: _Admission) -> tuple[dict[str, list[str]], bool, list[PodSet]]:
    """The assignment units — a pod set's requests of one resource group, since Kueue assigns
    each resource group its own flavor (flavorassigner.go assignFlavors: findFlavorForPodSets
    per resource, ``RGByResource``; a flavor belongs to one group of a ClusterQueue) — and per
    unit the group's flavors (in the ClusterQueue's order) that match the pod set; and whether
    admission is blocked (ResourceNotCovered for a resource no group covers, NoMatchingFlavor
    for a unit no flavor matches). A pod set asking of one group is one unit of its own name;
    with several, each unit is named ``pod set[resources]`` and ``a.requests`` gets its share."""
    candidates: dict[str, list[str]] = {}
    blocked = False
    units: list[PodSet] = []
    for ps in a.gang.pod_sets:
        groups = {}
        for r in _pod_set_request(ps):
            if r == "pods":
                continue
            g = _group_for(a.cq, r)
            if g is None:
                a.res.findings.append(Finding("ResourceNotCovered", WAITS,
                    f"ClusterQueue {a.cq.name} does not declare {r}; Kueue does not admit the workload unless its configuration excludes {r}",
                    {"resource": r, "cluster_queue": a.cq.name}))
                blocked = True
                continue
            groups.setdefault(id(g), (g, []))[1].append(r)
        if not groups:
            candidates[ps.name] = []
            units.append(ps)
            continue
        for g, rs in groups.values():
            keys = _label_keys(a.kueue, g)
            names = [f.name for f in g.flavors if _flavor_matches(ps, a.kueue.flavors.get(f.name), keys)]
            if len(groups) == 1:
                unit = ps
            else:
                unit = replace(ps, name=f"{ps.name}[{','.join(rs)}]")
                a.requests[unit.name] = {r: a.requests[ps.name][r] for r in rs}
            a.pod_set_of[unit.name] = ps.name
            units.append(unit)
            if not names:
                a.res.findings.append(Finding("NoMatchingFlavor", WAITS,
                    f"pod set {ps.name}: no flavor of ClusterQueue {a.cq.name}"
                    + (f" for {', '.join(rs)}" if len(groups) > 1 else "") + " matches its node selector and tolerations"))
                blocked = True
            candidates[unit.name] = names
    return candidates, blocked, units


def _assign_ever(a: _Admission, quota_sets: list[PodSet], candidates: dict[str, list[str]]) -> tuple[dict[str, str] | None, bool]:
    """The first assignment of flavors to pod sets (in ``itertools.product`` order) whose sums
    stay within every maximum, or None; and whether every assignment was tried (at most
    ``MAX_FLAVOR_COMBINATIONS``: past that, no proof)."""
    for i, combo in enumerate(itertools.product(*(candidates[ps.name] for ps in quota_sets))):
        if i >= MAX_FLAVOR_COMBINATIONS:
            return None, False
        per: dict[tuple[str, str], int] = {}
        for ps, fname in zip(quota_sets, combo):
            for r in a.covered(ps.name):
                per[(fname, r)] = per.get((fname, r), 0) + a.requests[ps.name][r]
        if all(v <= a.limit(f, r).maximum for (f, r), v in per.items()):
            return dict(zip((ps.name for ps in quota_sets), combo)), True
    return None, True


def _limits_report(a: _Admission, quota_sets: list[PodSet], candidates, all_candidates) -> dict[str, dict[str, dict]]:
    """flavor → resource → the limits the report shows, for each pod set's candidate flavors
    (its first matching flavor when none can hold it)."""
    out: dict[str, dict[str, dict]] = {}
    for ps in quota_sets:
        for f in candidates[ps.name] or all_candidates[ps.name][:1]:
            for r in a.covered(ps.name):
                lim = a.limit(f, r)
                out.setdefault(f, {})[r] = {
                    "nominal": lim.nominal,
                    "borrowing_limit": lim.borrowing_limit,
                    "maximum": int(lim.maximum),
                    "usage": lim.usage,
                    "available_now": int(lim.available_now),
                    "binding_max": lim.why_max.text,
                    "binding_now": lim.why_now.text,
                }
    return out


def _exceeds_max_quota(a: _Admission, quota_sets: list[PodSet], candidates, all_candidates) -> Finding:
    """ExceedsMaxQuota for the resource that overflows most in the first flavor of each pod set
    (NeverFits; Waits when the gang's totals are assumed, as for a Kueue pod group seen one pod
    at a time)."""
    worst = None
    agg: dict[tuple[str, str], int] = {}
    for ps in quota_sets:
        f = (candidates[ps.name] or all_candidates[ps.name])[0]
        for r in a.covered(ps.name):
            agg[(f, r)] = agg.get((f, r), 0) + a.requests[ps.name][r]
    for (f, r), v in agg.items():
        lim = a.limit(f, r)
        if v > lim.maximum and (worst is None or v - lim.maximum > worst[3]):
            worst = (f, r, v, v - lim.maximum, lim)
    if worst is None:  # every flavor fits alone but no combination does
        f, r = next(iter(agg))
        worst = (f, r, agg[(f, r)], 0, a.limit(f, r))
    f, r, v, _, lim = worst
    why, cq = lim.why_max, a.cq
    return Finding("ExceedsMaxQuota", NEVER if a.gang.exact_total else WAITS,
        f"insufficient quota for {r} in flavor {f}, request {fmt(r, v)} > maximum capacity ({fmt(r, lim.maximum)}): "
        f"ClusterQueue {cq.name} can get at most {fmt(r, lim.maximum)} ({why.text})",
        {"resource": r, "flavor": f, "request": v, "maximum": int(lim.maximum),
         "nominal": lim.nominal, "borrowing_limit": lim.borrowing_limit, "cluster_queue": cq.name,
         "cohort": cq.cohort, "binding": why.kind, "binding_object": ref(why.node), "binding_cohort": why.pool})


def _assign_now(a: _Admission, quota_sets: list[PodSet], candidates, best_ever) -> tuple[dict[str, str], tuple | None]:
    """Kueue's greedy now: per pod set the first flavor (in order) where the requests of earlier
    pod sets in that flavor plus its own stay within Available (flavorassigner
    fitsResourceQuota); a pod set that fits none takes its ever-assignment's flavor (else its
    first candidate). Returns (pod set → flavor, the largest (flavor, resource, more needed)
    or None)."""
    taken: dict[tuple[str, str], int] = {}
    assignment: dict[str, str] = {}
    shortfall = None
    for ps in quota_sets:
        need_of = a.requests[ps.name]
        chosen = None
        for f in candidates[ps.name]:
            if all(taken.get((f, r), 0) + need_of[r] <= a.limit(f, r).available_now for r in a.covered(ps.name)):
                chosen = f
                break
        if chosen is None:
            f = (best_ever or {}).get(ps.name) or candidates[ps.name][0]
            for r in a.covered(ps.name):
                need = taken.get((f, r), 0) + need_of[r] - a.limit(f, r).available_now
                if need > 0 and (shortfall is None or need > shortfall[2]):
                    shortfall = (f, r, need)
            chosen = f
        assignment[ps.name] = chosen
        for r in a.covered(ps.name):
            taken[(chosen, r)] = taken.get((chosen, r), 0) + need_of[r]
    return assignment, shortfall


def _waiting_for_quota(a: _Admission, f: str, r: str, need: float) -> Finding:
    """WaitingForQuota (Waits): ``need`` more of ``r`` in flavor ``f`` than the ClusterQueue can use now."""
    lim = a.limit(f, r)
    why, cq = lim.why_now, a.cq
    return Finding("WaitingForQuota", WAITS,
        f"insufficient unused quota for {r} in flavor {f}, {fmt(r, need)} more needed: "
        f"ClusterQueue {cq.name} can use {fmt(r, lim.available_now)} now ({why.text})",
        {"resource": r, "flavor": f, "more_needed": int(need), "cluster_queue": cq.name, "cohort": cq.cohort,
         "available_now": int(lim.available_now), "binding": why.kind, "binding_object": ref(why.node),
         "binding_cohort": why.pool})
