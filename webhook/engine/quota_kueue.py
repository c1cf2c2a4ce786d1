"""Kueue quota as a tree of resource nodes: ClusterQueues are leaves, Cohorts inner nodes.

Mirrors kueue v0.17 pkg/cache/scheduler/resource_node.go (and its use in
pkg/scheduler/flavorassigner/flavorassigner.go fitsResourceQuota), per (flavor, resource):

* a node's *subtree quota* is its own nominalQuota plus what each child lends upward: the
  child's subtree quota minus its *local quota*, where local quota = max(0, subtree −
  lendingLimit) when the child sets lendingLimit, else 0 (``localQuota``, ``accumulateFromChild``);
  a Cohort object's own ``spec.resourceGroups`` are its nominal quota; a cohort that no object
  defines (named by a ClusterQueue or as a parent) is a node with no quota of its own;
* a node's usage is its own (ClusterQueue: status reservation) or, for a Cohort, Σ over children
  of max(0, child usage − child local quota);
* ``available`` (what fits *now*, Kueue's Available): at a root, subtree − usage; below, the
  node's unused local quota plus what its parent has available, capped by its borrowingLimit
  (subtree − local − used-in-parent + borrowingLimit);
* ``potential`` (the most it could *ever* get, Kueue's PotentialAvailable, "maximum capacity"):
  the same walk with no usage anywhere: root subtree; below, local + parent's potential, capped
  by subtree + borrowingLimit.

A ClusterQueue outside any cohort is its own root: it gets its nominalQuota and nothing more.
Kueue treats a ClusterQueue whose cohort chain has a cycle as inactive (pkg/cache/scheduler/
snapshot.go, inactive reason HasCycle; pkg/cache/hierarchy/cycle.go): no proof then.

Each walk also returns *why* — which limit binds — so messages can name it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .model import ClusterQueue, Finding, GangRequest, KueueState, PodSet, ResourceFlavor, ResourceGroup, ResourceQuota
from .quantity import format_quantity
from .quota_common import NEVER, WAITS, QuotaResult, fmt

__all__ = ["CohortTree", "FlavorLimit", "Why", "kueue_limits", "evaluate_kueue", "MAX_FLAVOR_COMBINATIONS"]

#: Flavor assignments tried before giving up on a proof (then the gang is not called NeverFits).
MAX_FLAVOR_COMBINATIONS = 4096
#: Deepest cohort tree walked (the walks recurse per level; Python's default limit is 1000).
MAX_COHORT_DEPTH = 200

FR = tuple[str, str]  # (flavor, resource)
Key = tuple[str, str]  # ("cq" | "co", name)


@dataclass
class Why:
    """The limit that binds a walk.

    ``kind``: "nominalQuota" (a ClusterQueue with no cohort), "borrowingLimit" (of ``node``),
    "lendingLimit" (a cohort's pool, where at least one member lends less than it has; the first
    such member is ``node``), "cohort" (a cohort's pool: everything it holds, or for "now"
    everything still unused); ``pool``: the cohort whose pool binds; ``text``: a clause for the
    message.
    """

    kind: str
    node: Key | None = None
    pool: str | None = None
    text: str = ""


@dataclass
class FlavorLimit:
    """Limits of one (flavor, resource) for a ClusterQueue, scheduler units.

    ``maximum``: Kueue's PotentialAvailable; ``available_now``: Available (≥ 0); ``why_max`` /
    ``why_now``: the binding limit of each.
    """

    nominal: int
    borrowing_limit: int | None
    maximum: float
    usage: int
    available_now: float
    why_max: Why = field(default_factory=lambda: Why("nominalQuota"))
    why_now: Why = field(default_factory=lambda: Why("nominalQuota"))


def _quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FR, ResourceQuota]:
    out: dict[FR, ResourceQuota] = {}
    for g in groups:
        for f in g.flavors:
            for r in g.covered_resources:
                out[(f.name, r)] = f.resources.get(r, ResourceQuota(0))
            for r, q in f.resources.items():
                out.setdefault((f.name, r), q)
    return out


def _label(key: Key) -> str:
    return ("ClusterQueue " if key[0] == "cq" else "cohort ") + key[1]


class CohortTree:
    """The cohort forest of one ``KueueState``; walks are memoised per (node, flavor, resource).

    Cost: building is O(ClusterQueues + Cohorts); a walk visits a ClusterQueue's root subtree once
    per (flavor, resource).
    """

    def __init__(self, kueue: KueueState):
        self.kueue = kueue
        self.parent: dict[Key, Key | None] = {}
        self.children: dict[Key, list[Key]] = {}
        self.quotas: dict[Key, dict[FR, ResourceQuota]] = {}
        self.usage_of: dict[Key, dict] = {}
        for name, co in kueue.cohorts.items():
            self._cohort(name)
            self.quotas[("co", name)] = _quotas_of(co.resource_groups)
        for name, co in kueue.cohorts.items():
            if co.parent:
                self._cohort(co.parent)
                self._link(("co", name), ("co", co.parent))
        for name, cq in kueue.cluster_queues.items():
            key = ("cq", name)
            self.quotas[key] = _quotas_of(cq.resource_groups)
            self.usage_of[key] = dict(cq.usage)
            self.children[key] = []
            self.parent[key] = None
            if cq.cohort:
                self._cohort(cq.cohort)
                self._link(key, ("co", cq.cohort))
        self._subtree: dict = {}
        self._usage: dict = {}

    def depth(self, key: Key) -> int:
        """Nodes above ``key`` (stops at a cycle); the walks recurse this deep below its root."""
        seen, k = set(), self.parent.get(key)
        while k is not None and k not in seen:
            seen.add(k)
            k = self.parent[k]
        return len(seen)

    def height(self, root: Key) -> int:
        """Longest path from ``root`` down to a leaf, iteratively (no recursion)."""
        best, stack = 0, [(root, 0)]
        seen = set()
        while stack:
            k, d = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            best = max(best, d)
            stack.extend((c, d + 1) for c in self.children[k])
        return best

    def _cohort(self, name: str) -> None:
        key = ("co", name)
        if key not in self.parent:
            self.parent[key] = None
            self.children[key] = []
            self.quotas.setdefault(key, {})

    def _link(self, child: Key, parent: Key) -> None:
        self.parent[child] = parent
        self.children[parent].append(child)

    # ------------------------------------------------------------ structure

    def has_cycle(self, key: Key) -> bool:
        """True when walking up from ``key`` revisits a cohort (kueue hierarchy.HasCycle)."""
        seen = set()
        k = self.parent.get(key)
        while k is not None:
            if k in seen:
                return True
            seen.add(k)
            k = self.parent[k]
        return False

    def quota(self, key: Key, fr: FR) -> ResourceQuota:
        return self.quotas[key].get(fr, ResourceQuota(0))

    def subtree(self, key: Key, fr: FR) -> int:
        """SubtreeQuota: own nominal + Σ children's (subtree − local)."""
        memo = (key, fr)
        if memo not in self._subtree:
            self._subtree[memo] = 0  # guards a cycle below (never reached from a valid root)
            total = self.quota(key, fr).nominal
            for c in self.children[key]:
                total += self.subtree(c, fr) - self.local(c, fr)
            self._subtree[memo] = total
        return self._subtree[memo]

    def local(self, key: Key, fr: FR) -> int:
        """localQuota: what lendingLimit keeps inside the node's subtree."""
        ll = self.quota(key, fr).lending_limit
        return 0 if ll is None else max(0, self.subtree(key, fr) - ll)

    def lent(self, key: Key, fr: FR) -> int:
        """What the node offers its parent (subtree − local)."""
        return self.subtree(key, fr) - self.local(key, fr)

    def usage(self, key: Key, fr: FR) -> int:
        """Usage counted against the node: own (ClusterQueue) or Σ children's usage past their local quota."""
        memo = (key, fr)
        if memo not in self._usage:
            if key[0] == "cq":
                u = int(self.usage_of[key].get(fr, 0))
            else:
                self._usage[memo] = 0
                u = sum(max(0, self.usage(c, fr) - self.local(c, fr)) for c in self.children[key])
            self._usage[memo] = u
        return self._usage[memo]

    def local_available(self, key: Key, fr: FR) -> int:
        return max(0, self.local(key, fr) - self.usage(key, fr))

    # ------------------------------------------------------------ walks

    def potential(self, key: Key, fr: FR) -> tuple[int, Why]:
        """Kueue's potentialAvailable with the reason that binds."""
        p = self.parent[key]
        if p is None:
            if key[0] == "cq":
                return self.subtree(key, fr), Why("nominalQuota", key, None,
                    f"{self._own(key)} nominalQuota {self._q(fr, self.subtree(key, fr))}; it is in no cohort, so it cannot borrow")
            return self.subtree(key, fr), self._pool_why(key, fr)
        up, why = self.potential(p, fr)
        value = self.local(key, fr) + up
        bl = self.quota(key, fr).borrowing_limit
        if bl is not None and self.subtree(key, fr) + bl < value:
            value = self.subtree(key, fr) + bl
            why = Why("borrowingLimit", key, None,
                      f"{self._own(key)} {'nominalQuota' if key[0] == 'cq' else 'quota'} {self._q(fr, self.subtree(key, fr))} "
                      f"+ borrowingLimit {self._q(fr, bl)}")
        return value, why

    def available(self, key: Key, fr: FR) -> tuple[int, Why]:
        """Kueue's available (may be negative on over-admission) with the reason that binds."""
        p = self.parent[key]
        if p is None:
            free = self.subtree(key, fr) - self.usage(key, fr)
            if key[0] == "cq":
                return free, Why("nominalQuota", key, None,
                    f"{self._who(key)} uses {self._q(fr, self.usage(key, fr))} of its nominalQuota "
                    f"{self._q(fr, self.subtree(key, fr))} and is in no cohort")
            return free, self._pool_now_why(key, fr)
        up, why = self.available(p, fr)
        bl = self.quota(key, fr).borrowing_limit
        if bl is not None:
            stored = self.subtree(key, fr) - self.local(key, fr)
            used = max(0, self.usage(key, fr) - self.local(key, fr))
            cap = stored - used + bl
            if cap < up:
                up = cap
                borrowed = max(0, self.usage(key, fr) - self.subtree(key, fr))
                why = Why("borrowingLimit", key, None,
                          f"{self._who(key)} already borrows {self._q(fr, borrowed)} of its borrowingLimit {self._q(fr, bl)}")
        return self.local_available(key, fr) + up, why

    # ------------------------------------------------------------ explanations

    me: Key | None = None  # the ClusterQueue being explained: named "it" in its own clauses

    def _own(self, key: Key) -> str:
        return "its" if key == self.me else f"{_label(key)}'s"

    def _who(self, key: Key) -> str:
        return "it" if key == self.me else _label(key)

    def _q(self, fr: FR, v: float) -> str:
        return format_quantity(fr[1], int(v))

    def _pool_why(self, root: Key, fr: FR) -> Why:
        own = self.quota(root, fr).nominal
        parts, capped = [], None
        kids = sorted(self.children[root], key=lambda c: (self.local(c, fr) == 0, -self.lent(c, fr), c))
        for c in kids:
            ll = self.quota(c, fr).lending_limit
            if self.local(c, fr) > 0:
                capped = capped or c
                parts.append(f"{_label(c)} lends {self._q(fr, self.lent(c, fr))} of {self._q(fr, self.subtree(c, fr))} (lendingLimit {self._q(fr, ll)})")
            elif self.lent(c, fr) > 0:
                parts.append(f"{_label(c)} {self._q(fr, self.lent(c, fr))}" + ("" if ll is None else f" (lendingLimit {self._q(fr, ll)})"))
        if own:
            parts.append(f"its own quota {self._q(fr, own)}")
        more = len(parts) - 4
        text = f"cohort {root[1]} holds {self._q(fr, self.subtree(root, fr))} in all" + (
            f": {'; '.join(parts[:4])}" + (f"; and {more} more" if more > 0 else "") if parts else "")
        return Why("lendingLimit" if capped else "cohort", capped, root[1], text)

    def _pool_now_why(self, root: Key, fr: FR) -> Why:
        total, used = self.subtree(root, fr), self.usage(root, fr)
        users = []
        for c in self.children[root]:
            u = max(0, self.usage(c, fr) - self.local(c, fr))
            if u > 0:
                users.append((u, c))
        users.sort(key=lambda t: (-t[0], t[1]))
        parts = [f"{_label(c)} {self._q(fr, u)}" for u, c in users[:4]]
        if len(users) > 4:
            parts.append(f"{len(users) - 4} more")
        text = (f"cohort {root[1]} has {self._q(fr, max(0, total - used))} of {self._q(fr, total)} unused"
                + (f"; in use: {', '.join(parts)}" if parts else ""))
        return Why("cohort", None, root[1], text)


def kueue_limits(kueue: KueueState, cluster_queue: str, flavor: str, resource: str, tree: CohortTree | None = None) -> FlavorLimit:
    """The limits of ``cluster_queue`` in (``flavor``, ``resource``): Kueue's PotentialAvailable
    (``maximum``) and Available (``available_now``, clipped at 0), scheduler units, with the
    binding limit of each. The ClusterQueue must exist and its cohort chain must have no cycle
    (``CohortTree.has_cycle``)."""
    tree = tree or CohortTree(kueue)
    key, fr = ("cq", cluster_queue), (flavor, resource)
    tree.me = key
    q = tree.quota(key, fr)
    mx, why_max = tree.potential(key, fr)
    now, why_now = tree.available(key, fr)
    return FlavorLimit(q.nominal, q.borrowing_limit, mx, tree.usage(key, fr), max(0, now), why_max, why_now)


# ---------------------------------------------------------------- the gang against its ClusterQueue


def _pod_set_request(ps: PodSet) -> dict[str, int]:
    """The pod set's total request: what the object states (``stated_total``, a PodGroup's
    minResources) where set, never the rounded-up estimate count × per-pod shape."""
    if ps.stated_total is not None:
        return {r: v for r, v in ps.stated_total.items() if v > 0}
    return {r: v * ps.count for r, v in ps.requests.items() if v > 0}


def _flavor_matches(ps: PodSet, flavor: ResourceFlavor | None) -> bool:
    """Kueue's flavor/pod compatibility: selector keys agree and flavor taints are tolerated."""
    if flavor is None:
        return True
    for k, v in flavor.node_labels.items():
        if k in ps.node_selector and ps.node_selector[k] != v:
            return False
    tolerations = ps.tolerations + flavor.tolerations
    for t in flavor.node_taints:
        if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in tolerations):
            return False
    return True


def _group_for(cq: ClusterQueue, resource: str):
    for g in cq.resource_groups:
        if resource in g.covered_resources:
            return g
    return None


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
    lq_key = (gang.namespace, gang.queue_name or "")
    res = QuotaResult("kueue", f"{gang.namespace}/{gang.queue_name}")
    lq = kueue.local_queues.get(lq_key)
    if lq is None:
        res.findings.append(Finding("LocalQueueNotFound", WAITS,
            f"LocalQueue {gang.queue_name} not found in namespace {gang.namespace}; Kueue holds the workload until it exists"))
        return res
    cq = kueue.cluster_queues.get(lq.cluster_queue)
    res.report = {"local_queue": lq.name, "cluster_queue": lq.cluster_queue}
    if cq is None:
        res.findings.append(Finding("ClusterQueueNotFound", WAITS,
            f"ClusterQueue {lq.cluster_queue} (from LocalQueue {lq.name}) not found"))
        return res
    own = reserved if reserved is not None and kueue.cluster_queue_of(reserved) == cq.name else None
    if own is not None:
        # The gang's own Workload already holds its quota (QuotaReserved/Admitted): the
        # ClusterQueue's usage includes it, and quota is not what holds it back.
        res.report.update({"request": {r: v for r, v in gang.total_requests().items() if v}, "cohort": cq.cohort, "limits": {},
                           "workload": f"{own.namespace}/{own.name}", "workload_state": own.state})
        res.findings.append(Finding("QuotaReserved", "Info",
            f"Workload {own.namespace}/{own.name} already holds its quota in ClusterQueue {cq.name} ({own.state}); "
            "quota is not what holds it back"))
        return res
    if cq.stop_policy not in ("", "None"):
        res.findings.append(Finding("ClusterQueueStopped", WAITS,
            f"ClusterQueue {cq.name} has stopPolicy {cq.stop_policy}: nothing is admitted until it is lifted"))
    tree = CohortTree(kueue)
    if tree.has_cycle(("cq", cq.name)):
        # kueue pkg/cache/scheduler/snapshot.go: such a ClusterQueue is inactive (HasCycle).
        res.report.update({"request": {r: v for r, v in gang.total_requests().items() if v}, "cohort": cq.cohort, "limits": {}})
        res.findings.append(Finding("CohortHasCycle", WAITS,
            f"the cohort chain of ClusterQueue {cq.name} (cohort {cq.cohort}) has a cycle: Kueue keeps the ClusterQueue inactive "
            "and admits nothing until the Cohort parents are fixed",
            {"cluster_queue": cq.name, "cohort": cq.cohort}))
        return res
    root = ("cq", cq.name)
    while tree.parent[root] is not None:
        root = tree.parent[root]
    if tree.height(root) > MAX_COHORT_DEPTH:
        # The walks recurse once per level; a tree this deep is not something to prove on.
        res.report.update({"request": {r: v for r, v in gang.total_requests().items() if v}, "cohort": cq.cohort, "limits": {}})
        res.findings.append(Finding("CohortTooDeep", "Info",
            f"the cohort tree of ClusterQueue {cq.name} is more than {MAX_COHORT_DEPTH} levels deep; quota not checked",
            {"cluster_queue": cq.name, "cohort": cq.cohort}))
        return res
    memo: dict[tuple[str, str], FlavorLimit] = {}

    def limit(flavor: str, resource: str) -> FlavorLimit:
        if (flavor, resource) not in memo:
            memo[(flavor, resource)] = kueue_limits(kueue, cq.name, flavor, resource, tree)
        return memo[(flavor, resource)]

    # Per pod set: candidate flavors (in order) of the group covering its resources.
    candidates: dict[str, list[str]] = {}
    blocked = False
    for ps in gang.pod_sets:
        req = _pod_set_request(ps)
        groups = {}
        for r in req:
            if r == "pods":
                continue
            g = _group_for(cq, r)
            if g is None:
                res.findings.append(Finding("ResourceNotCovered", WAITS,
                    f"ClusterQueue {cq.name} does not declare {r}; Kueue does not admit the workload unless its configuration excludes {r}",
                    {"resource": r, "cluster_queue": cq.name}))
                blocked = True
                continue
            groups[id(g)] = g
        names: list[str] | None = None
        for g in groups.values():
            fl = [f.name for f in g.flavors if _flavor_matches(ps, kueue.flavors.get(f.name))]
            names = fl if names is None else [n for n in names if n in fl]
        if names is None:
            names = []
        if groups and not names:
            res.findings.append(Finding("NoMatchingFlavor", WAITS,
                f"pod set {ps.name}: no flavor of ClusterQueue {cq.name} matches its node selector and tolerations"))
            blocked = True
        candidates[ps.name] = names
    requests = {ps.name: _pod_set_request(ps) for ps in gang.pod_sets}
    total = gang.total_requests()
    res.report.update({"request": {r: v for r, v in total.items() if v}, "cohort": cq.cohort})
    if blocked or not gang.pod_sets:
        res.report["limits"] = {}
        return res

    def covered(ps_name):
        return [r for r in requests[ps_name] if r != "pods" and _group_for(cq, r) is not None]

    # Only pod sets asking for something the ClusterQueue covers take part in flavor assignment.
    quota_sets = [ps for ps in gang.pod_sets if covered(ps.name)]
    if not quota_sets:
        res.report["limits"] = {}
        return res
    # A flavor whose maximum cannot hold the pod set alone is never assigned to it.
    all_candidates = candidates
    candidates = {
        name: [f for f in fl if all(requests[name][r] <= limit(f, r).maximum for r in covered(name))]
        for name, fl in all_candidates.items()
    }
    # Ever: does any assignment of flavors to pod sets stay within every maximum?
    combos = itertools.product(*(candidates[ps.name] for ps in quota_sets))
    best_ever = None
    searched_all = True
    for i, combo in enumerate(combos):
        if i >= MAX_FLAVOR_COMBINATIONS:
            searched_all = False
            break
        per: dict[tuple[str, str], int] = {}
        for ps, fname in zip(quota_sets, combo):
            for r in covered(ps.name):
                per[(fname, r)] = per.get((fname, r), 0) + requests[ps.name][r]
        if all(v <= limit(f, r).maximum for (f, r), v in per.items()):
            best_ever = dict(zip((ps.name for ps in quota_sets), combo))
            break
    limits_report = {}
    for ps in quota_sets:
        for f in candidates[ps.name] or all_candidates[ps.name][:1]:
            for r in covered(ps.name):
                lim = limit(f, r)
                limits_report.setdefault(f, {})[r] = {
                    "nominal": lim.nominal,
                    "borrowing_limit": lim.borrowing_limit,
                    "maximum": int(lim.maximum),
                    "usage": lim.usage,
                    "available_now": int(lim.available_now),
                    "binding_max": lim.why_max.text,
                    "binding_now": lim.why_now.text,
                }
    res.report["limits"] = limits_report
    if best_ever is None and searched_all:
        # Report the resource that overflows most in the first flavor of each pod set.
        worst = None
        agg: dict[tuple[str, str], int] = {}
        for ps in quota_sets:
            f = (candidates[ps.name] or all_candidates[ps.name])[0]
            for r in covered(ps.name):
                agg[(f, r)] = agg.get((f, r), 0) + requests[ps.name][r]
        for (f, r), v in agg.items():
            lim = limit(f, r)
            if v > lim.maximum and (worst is None or v - lim.maximum > worst[3]):
                worst = (f, r, v, v - lim.maximum, lim)
        if worst is None:  # every flavor fits alone but no combination does
            f, r = next(iter(agg))
            worst = (f, r, agg[(f, r)], 0, limit(f, r))
        f, r, v, _, lim = worst
        why = lim.why_max
        # A gang whose totals are assumed (a Kueue pod group seen one pod at a time) proves nothing.
        res.findings.append(Finding("ExceedsMaxQuota", NEVER if gang.exact_total else WAITS,
            f"insufficient quota for {r} in flavor {f}, request {fmt(r, v)} > maximum capacity ({fmt(r, lim.maximum)}): "
            f"ClusterQueue {cq.name} can get at most {fmt(r, lim.maximum)} ({why.text})",
            {"resource": r, "flavor": f, "request": v, "maximum": int(lim.maximum),
             "nominal": lim.nominal, "borrowing_limit": lim.borrowing_limit, "cluster_queue": cq.name,
             "cohort": cq.cohort, "binding": why.kind, "binding_object": _ref(why.node), "binding_cohort": why.pool}))
        # Kueue places the pods only on nodes of a flavor that matches the pod set, so the node
        # view keeps those flavors' nodeLabels even when quota fails (issue #17 item 17: the
        # same pod shape must show the same eligible nodes whether quota holds or not).
        res.candidate_flavors = {ps.name: [kueue.flavors.get(f) or ResourceFlavor(f) for f in all_candidates[ps.name]]
                                 for ps in quota_sets if all_candidates[ps.name]}
        return res
    res.candidate_flavors = {ps.name: [kueue.flavors.get(f) or ResourceFlavor(f) for f in candidates[ps.name]] for ps in quota_sets}
    # Now: Kueue's greedy, flavors in order per pod set; earlier pod sets' requests in the same
    # flavor count first (flavorassigner fitsResourceQuota: assumedUsage + request ≤ Available).
    taken: dict[tuple[str, str], int] = {}
    assignment: dict[str, str] = {}
    shortfall = None
    for ps in quota_sets:
        chosen = None
        for f in candidates[ps.name]:
            if all(taken.get((f, r), 0) + requests[ps.name][r] <= limit(f, r).available_now for r in covered(ps.name)):
                chosen = f
                break
        if chosen is None:
            f = (best_ever or {}).get(ps.name) or candidates[ps.name][0]
            for r in covered(ps.name):
                need = taken.get((f, r), 0) + requests[ps.name][r] - limit(f, r).available_now
                if need > 0 and (shortfall is None or need > shortfall[2]):
                    shortfall = (f, r, need)
            chosen = f
        assignment[ps.name] = chosen
        for r in covered(ps.name):
            taken[(chosen, r)] = taken.get((chosen, r), 0) + requests[ps.name][r]
    res.report["flavors"] = assignment
    if shortfall is not None:
        f, r, need = shortfall
        lim = limit(f, r)
        why = lim.why_now
        res.findings.append(Finding("WaitingForQuota", WAITS,
            f"insufficient unused quota for {r} in flavor {f}, {fmt(r, need)} more needed: "
            f"ClusterQueue {cq.name} can use {fmt(r, lim.available_now)} now ({why.text})",
            {"resource": r, "flavor": f, "more_needed": int(need), "cluster_queue": cq.name, "cohort": cq.cohort,
             "available_now": int(lim.available_now), "binding": why.kind, "binding_object": _ref(why.node),
             "binding_cohort": why.pool}))
    return res


def _ref(key: Key | None) -> str | None:
    """("cq", "a") → "ClusterQueue/a"; ("co", "x") → "Cohort/x"."""
    if key is None:
        return None
    return ("ClusterQueue/" if key[0] == "cq" else "Cohort/") + key[1]
