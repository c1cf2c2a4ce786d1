"""Kueue quota as a tree of resource nodes: ClusterQueues are leaves, Cohorts inner nodes.

Owns the tree and its walks (what a ClusterQueue could ever get, what it can get now, and which
limit binds); not the gang against its ClusterQueue (flavor candidates and assignment, the
findings: ``kueue_admit``). Quantities are scheduler units (GPUs as counts, cpu millicores,
memory bytes), per (flavor, resource).

Mirrors Kueue's scheduler cache (kueue v0.17, pkg/cache/scheduler):

* resource_node.go — ``resourceNode`` (Quotas, SubtreeQuota, Usage) is ``ResourceNode``;
  ``localQuota``, ``LocalAvailable``, ``available``, ``potentialAvailable`` and
  ``accumulateFromChild`` are ``CohortTree.local``, ``local_available``, ``available``,
  ``potential``, and the sums in ``subtree`` / ``usage``;
* cohort.go — a ``cohort`` is an inner node: its own ``spec.resourceGroups`` are its quotas,
  it has a parent and children (``CohortTree._add_cohorts``);
* clusterqueue.go — a ``clusterQueue`` is a leaf: quotas from its resource groups, usage from its
  status, at most one parent cohort (``CohortTree._add_cluster_queues``);
* resource.go ``createResourceQuotas`` — ``_quotas_of``;
* pkg/cache/hierarchy/cycle.go ``HasCycle`` — ``CohortTree.has_cycle``.

The rules, per (flavor, resource):

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

from dataclasses import dataclass, field

from ..model import KueueState, ResourceGroup, ResourceQuota
from ..quantity import format_quantity

__all__ = ["CohortTree", "ResourceNode", "FlavorLimit", "Why", "kueue_limits", "ref", "MAX_COHORT_DEPTH"]

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


@dataclass
class ResourceNode:
    """One node of the tree (Kueue's ``resourceNode`` with its place in the hierarchy).

    ``key``: ("cq", name) for a ClusterQueue (a leaf), ("co", name) for a Cohort; ``quotas``:
    (flavor, resource) → ``ResourceQuota`` (nominal, borrowingLimit, lendingLimit);
    ``own_usage``: a ClusterQueue's reserved quota per (flavor, resource) (empty for a Cohort,
    whose usage is its children's past their local quota); ``parent``: the cohort above, None
    at a root; ``children``: keys in the order the ``KueueState`` lists them.
    """

    key: Key
    quotas: dict[FR, ResourceQuota] = field(default_factory=dict)
    own_usage: dict = field(default_factory=dict)
    parent: Key | None = None
    children: list[Key] = field(default_factory=list)


def _quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FR, ResourceQuota]:
    """(flavor, resource) → quota of a ClusterQueue's or Cohort's resource groups; a covered
    resource a flavor leaves out has quota 0 (kueue resource.go createResourceQuotas)."""
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


def ref(key: Key | None) -> str | None:
    """("cq", "a") → "ClusterQueue/a"; ("co", "x") → "Cohort/x"; None → None."""
    if key is None:
        return None
    return ("ClusterQueue/" if key[0] == "cq" else "Cohort/") + key[1]


class CohortTree:
    """The cohort forest of one ``KueueState``; walks are memoised per (node, flavor, resource).

    ``nodes``: key → ``ResourceNode``. Cost: building is O(ClusterQueues + Cohorts); a walk
    visits a ClusterQueue's root subtree once per (flavor, resource).
    """

    def __init__(self, kueue: KueueState):
        self.kueue = kueue
        self.nodes: dict[Key, ResourceNode] = {}
        self._add_cohorts(kueue)
        self._add_cluster_queues(kueue)
        self._subtree: dict = {}
        self._usage: dict = {}

    # ------------------------------------------------------------ building

    def _add_cohorts(self, kueue: KueueState) -> None:
        """Every Cohort object (its quotas from spec.resourceGroups), then the parent links; a
        parent no object defines becomes a node with no quota (kueue cohort.go)."""
        for name, co in kueue.cohorts.items():
            self._cohort(name).quotas = _quotas_of(co.resource_groups)
        for name, co in kueue.cohorts.items():
            if co.parent:
                self._cohort(co.parent)
                self._link(("co", name), ("co", co.parent))

    def _add_cluster_queues(self, kueue: KueueState) -> None:
        """Every ClusterQueue as a leaf with its quotas and usage, under its cohort when it names
        one (kueue clusterqueue.go)."""
        for name, cq in kueue.cluster_queues.items():
            key = ("cq", name)
            self.nodes[key] = ResourceNode(key, _quotas_of(cq.resource_groups), dict(cq.usage))
            if cq.cohort:
                self._cohort(cq.cohort)
                self._link(key, ("co", cq.cohort))

    def _cohort(self, name: str) -> ResourceNode:
        key = ("co", name)
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = ResourceNode(key)
        return node

    def _link(self, child: Key, parent: Key) -> None:
        self.nodes[child].parent = parent
        self.nodes[parent].children.append(child)

    # ------------------------------------------------------------ structure

    def root(self, key: Key) -> Key:
        """The root above ``key`` (its chain must have no cycle: ``has_cycle``)."""
        while self.nodes[key].parent is not None:
            key = self.nodes[key].parent
        return key

    def depth(self, key: Key) -> int:
        """Nodes above ``key`` (stops at a cycle); the walks recurse this deep below its root."""
        seen, k = set(), self.nodes[key].parent if key in self.nodes else None
        while k is not None and k not in seen:
            seen.add(k)
            k = self.nodes[k].parent
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
            stack.extend((c, d + 1) for c in self.nodes[k].children)
        return best

    def has_cycle(self, key: Key) -> bool:
        """True when walking up from ``key`` revisits a cohort (kueue hierarchy.HasCycle)."""
        seen = set()
        k = self.nodes[key].parent if key in self.nodes else None
        while k is not None:
            if k in seen:
                return True
            seen.add(k)
            k = self.nodes[k].parent
        return False

    # ------------------------------------------------------------ quantities (resource_node.go)

    def quota(self, key: Key, fr: FR) -> ResourceQuota:
        return self.nodes[key].quotas.get(fr, ResourceQuota(0))

    def subtree(self, key: Key, fr: FR) -> int:
        """SubtreeQuota: own nominal + Σ children's (subtree − local)."""
        memo = (key, fr)
        if memo not in self._subtree:
            self._subtree[memo] = 0  # guards a cycle below (never reached from a valid root)
            total = self.quota(key, fr).nominal
            for c in self.nodes[key].children:
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
            node = self.nodes[key]
            if key[0] == "cq":
                u = int(node.own_usage.get(fr, 0))
            else:
                self._usage[memo] = 0
                u = sum(max(0, self.usage(c, fr) - self.local(c, fr)) for c in node.children)
            self._usage[memo] = u
        return self._usage[memo]

    def local_available(self, key: Key, fr: FR) -> int:
        """LocalAvailable: unused local quota (visible to the subtree only)."""
        return max(0, self.local(key, fr) - self.usage(key, fr))

    # ------------------------------------------------------------ walks

    def potential(self, key: Key, fr: FR) -> tuple[int, Why]:
        """Kueue's potentialAvailable with the reason that binds."""
        p = self.nodes[key].parent
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
        p = self.nodes[key].parent
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
        """Why a root cohort's pool binds the maximum: who lends how much into it."""
        own = self.quota(root, fr).nominal
        parts, capped = [], None
        kids = sorted(self.nodes[root].children, key=lambda c: (self.local(c, fr) == 0, -self.lent(c, fr), c))
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
        """Why a root cohort's pool binds now: how much is unused and who uses the rest."""
        total, used = self.subtree(root, fr), self.usage(root, fr)
        users = []
        for c in self.nodes[root].children:
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
