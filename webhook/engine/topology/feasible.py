"""Feasibility over topology domains: capacity per domain, the proofs, a placement, its check.

Works on one view of the cluster — the repaired empty cluster ("ever": ``k_ever``,
``ever_alloc``) or today's free resources ("now": ``k_now``, ``free``) — given as ``ks``: per
evaluated pod set, int64 [nodes] pods of its shape each node takes alone. A domain's capacity
for a pod set is Σ of that over the domain's nodes (``DomainIndex.sums``: one ``bincount``, no
loop over nodes).

* ``bounds``: per rule, whether some domain (or, for exclusivity, enough distinct domains) could
  hold the pods. For one pod set alone these are exact (its pods are interchangeable and per-node
  capacities add up); with several pod sets sharing nodes they are necessary conditions. A
  failed bound on the "ever" view is a proof (NeverFits, TopologyPlacementFailed):
    - ``Whole``: no domain where each member's pods fit (with slices inside: whole slices);
    - ``Slices`` without a required level: fewer whole slices fit over all slice domains than
      the pod set has;
    - ``Exclusive``: Hall's condition — for some set S of pod sets, fewer domains can take a unit
      of some pod set in S than S has units (an exact criterion for the unit-to-domain matching).
* ``construct``: a placement that satisfies every hard rule (domains chosen first, then
  ``fit.place`` on the restricted node masks); None proves nothing.
* ``violations``: what a placement breaks (empty: it respects every domain rule) — every
  placement the engine returns under topology rules passes it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from ..fit import Demand, place
from .domains import DomainIndex
from .resolve import Exclusive, GangTopology, Slices, Whole

__all__ = ["domain_sums", "RuleCheck", "bounds", "construct", "violations", "exclusive_now", "MAX_HALL_SETS",
           "CANDIDATE_DOMAINS", "JOBSET_JOB_KEY"]

#: The label JobSet puts on every pod of a child Job (sigs.k8s.io/jobset api ``JobKey``); its
#: exclusive placement adds a required pod anti-affinity against pods carrying another value
#: (pkg/webhooks/pod_webhook.go ``setExclusiveAffinities``).
JOBSET_JOB_KEY = "jobset.sigs.k8s.io/job-key"

#: Hall's condition is checked over every subset of the exclusive pod sets up to this many
#: (2ⁿ subsets); beyond, over single pod sets and the whole only (still necessary conditions).
MAX_HALL_SETS = 12
#: Domains ``construct`` tries for a Whole rule (best fit first) before giving up.
CANDIDATE_DOMAINS = 4


def domain_sums(dom: DomainIndex, k: np.ndarray) -> np.ndarray:
    """Σ of ``k`` (int [nodes]) over each domain's nodes: int64 [domains]; nodes in no domain are
    left out (``DomainIndex.sums``: a gather and a reduceat, no loop over nodes)."""
    return dom.sums(k)


def _slice_caps(s: Slices, outer: DomainIndex | None, k: np.ndarray) -> np.ndarray:
    """Pods of pod set ``s.member`` that fit as whole slices: per domain of ``outer`` ([outer
    domains]), or over the cluster ([1]) when ``outer`` is None."""
    caps = domain_sums(s.domains, k)
    whole_slices = (caps // s.size) * s.size
    if outer is None:
        return np.array([int(whole_slices.sum())], dtype=np.int64)
    # Slice domains may straddle outer domains when the domains are read from labels alone:
    # count slices per (outer, slice) pair.
    both = (outer.ids >= 0) & (s.domains.ids >= 0)
    if not both.any():
        return np.zeros(outer.count, dtype=np.int64)
    pair = outer.ids[both] * s.domains.count + s.domains.ids[both]
    uniq, inv = np.unique(pair, return_inverse=True)
    per_pair = np.bincount(inv, weights=k[both]).astype(np.int64)
    per_pair = (per_pair // s.size) * s.size
    return np.bincount(uniq // s.domains.count, weights=per_pair, minlength=outer.count).astype(np.int64)


@dataclass
class RuleCheck:
    """One rule on one view. ``ok``: the bound holds. ``kind``: "whole", "slices", "exclusive".
    ``caps``: [members × domains] pods (whole slices for a member with slices inside) each domain
    takes of each member; ``fits``: bool [domains] domains that could hold the rule's pods (a
    unit of some member for exclusivity); ``needed``: pods per member; ``units_needed`` /
    ``units_possible`` (exclusivity: units, and the largest matching Hall allows)."""

    rule: object
    kind: str
    ok: bool
    caps: np.ndarray
    fits: np.ndarray
    needed: tuple[int, ...]
    units_needed: int = 0
    units_possible: int = 0
    worst_set: tuple[int, ...] = ()


def _whole_check(w: Whole, ks, counts, slices: list[Slices], widx: int, avail=None, shapes=None) -> RuleCheck:
    rows = []
    for m in w.members:
        s = next((s for s in slices if s.member == m and s.within == widx), None)
        rows.append(_slice_caps(s, w.domains, ks[m]) if s is not None else domain_sums(w.domains, ks[m]))
    caps = np.stack(rows) if rows else np.zeros((0, w.domains.count), dtype=np.int64)
    need = np.array([counts[m] for m in w.members], dtype=np.int64)[:, None]
    fits = (caps >= need).all(axis=0) if w.domains.count else np.zeros(0, dtype=bool)
    if len(w.members) > 1 and avail is not None and shapes is not None and fits.any():
        # Members share the domain's nodes: per resource, the members' pods together must not
        # exceed what the domain's nodes usable by any member hold.
        usable = np.zeros(len(w.domains.ids), dtype=bool)
        for m in w.members:
            usable |= ks[m] > 0
        want: dict[int, int] = {}
        for m in w.members:
            for c, v in zip(shapes[m].cols.tolist(), shapes[m].vals.tolist()):
                want[c] = want.get(c, 0) + v * counts[m]
        for c, v in want.items():
            have = domain_sums(w.domains, np.where(usable, np.maximum(avail[:, c], 0), 0))
            fits &= have >= v
    return RuleCheck(w, "whole", bool(fits.any()), caps, fits, tuple(counts[m] for m in w.members))


def _exclusive_check(x: Exclusive, ks) -> RuleCheck:
    caps = np.stack([domain_sums(x.domains, ks[m]) for m in x.members])
    elig = caps >= np.array(x.unit, dtype=np.int64)[:, None]
    if x.together:  # one class of units: a domain takes a group when it takes each member's part
        both = elig.all(axis=0)
        need, have = x.units[0], int(np.count_nonzero(both))
        return RuleCheck(x, "exclusive", have >= need, caps, both, tuple(u * p for u, p in zip(x.units, x.unit)),
                         need, min(have, need), tuple(range(len(x.members))) if have < need else ())
    need = sum(x.units)
    n = len(x.members)
    subsets = (itertools.chain.from_iterable(itertools.combinations(range(n), r) for r in range(1, n + 1))
               if n <= MAX_HALL_SETS else [(j,) for j in range(n)] + [tuple(range(n))])
    ok, worst, possible = True, (), need
    for sub in subsets:
        have = int(np.count_nonzero(elig[list(sub)].any(axis=0)))
        want = sum(x.units[j] for j in sub)
        if have < want:
            ok = False
            # König: the largest matching is need − max over S of (units(S) − |N(S)|).
            if need - (want - have) < possible:
                possible, worst = need - (want - have), sub
    return RuleCheck(x, "exclusive", ok, caps, elig.any(axis=0), tuple(x.units[j] * x.unit[j] for j in range(n)),
                     need, possible, worst)


def bounds(gt: GangTopology, ks, counts, avail: np.ndarray | None = None, shapes=None) -> list[RuleCheck]:
    """Every hard rule of ``gt`` checked on the view ``ks`` (see the module docstring);
    ``counts``: pods per evaluated pod set; with ``avail`` (the view's int64 [nodes × resources])
    and ``shapes`` (``fit.Shape`` per pod set), a Whole rule of several pod sets also needs their
    summed requests per resource within a domain's nodes."""
    out = []
    for i, w in enumerate(gt.whole):
        if w.hard:
            out.append(_whole_check(w, ks, counts, gt.slices, i, avail, shapes))
    for s in gt.slices:
        if s.within is None:
            cap = _slice_caps(s, None, ks[s.member])
            out.append(RuleCheck(s, "slices", int(cap[0]) >= counts[s.member], domain_sums(s.domains, ks[s.member])[None, :],
                                 domain_sums(s.domains, ks[s.member]) >= s.size, (counts[s.member],)))
    for x in gt.exclusive:
        out.append(_exclusive_check(x, ks))
    return out


def exclusive_now(snap, gt: GangTopology, gang_key: str, ks: list[np.ndarray]) -> list[np.ndarray]:
    """``ks`` (the "now" view) with the nodes of every domain that holds another JobSet's child
    Job pod (a bound pod with ``JOBSET_JOB_KEY``, not of this gang) zeroed for the pod sets of a
    JobSet exclusive rule: the anti-affinity keeps a new child Job out of such a domain. Errs
    towards fewer domains (the JobSet priority label is not compared): only a Fits is at stake.
    Which nodes hold such pods is a structure of the snapshot (one pass over its pods)."""
    rules = [x for x in gt.exclusive if x.source == "jobset"]
    if not rules:
        return ks
    held = snap.structure(("topology.jobset_pods",), lambda: _job_key_nodes(snap))
    other = np.zeros(len(snap.nodes), dtype=bool)
    for i, gangs in held.items():
        if any(g != gang_key for g in gangs):
            other[i] = True
    if not other.any():
        return ks
    out = list(ks)
    for x in rules:
        busy = domain_sums(x.domains, other.astype(np.int64)) > 0
        blocked = (x.domains.ids >= 0) & busy[np.maximum(x.domains.ids, 0)]
        for m in x.members:
            out[m] = np.where(blocked, 0, out[m])
    return out


def _job_key_nodes(snap) -> dict[int, set[str]]:
    """Node index → the gangs of its bound pods that carry ``JOBSET_JOB_KEY``."""
    out: dict[int, set[str]] = {}
    for p in snap.pods:
        if p.node_name and JOBSET_JOB_KEY in p.labels and p.phase not in ("Succeeded", "Failed"):
            i = snap.node_index.get(p.node_name)
            if i is not None:
                out.setdefault(i, set()).add(p.gang or f"Pod/{p.namespace}/{p.name}")
    return out


# ----------------------------------------------------------------------------- a placement


def construct(avail: np.ndarray, demands: list[Demand], gt: GangTopology, checks: list[RuleCheck] | None = None,
              ks=None) -> dict[str, list[tuple[int, int]]] | None:
    """A placement of ``demands`` (named by pod-set index, ``k`` set, as ``evaluate`` builds
    them on ``avail``) that satisfies every hard rule of ``gt``, or None (proves nothing).

    Domains first — each Whole rule tries its ``CANDIDATE_DOMAINS`` best-fitting domains (least
    capacity that still holds its pods), slices go to the slice domains holding the most whole
    slices, exclusive units to distinct domains (pod sets with the fewest fitting domains first,
    best fit) — then ``fit.place`` on the node masks restricted to them."""
    ks = ks if ks is not None else [d.k for d in demands]
    counts = [d.count for d in demands]
    checks = checks if checks is not None else bounds(gt, ks, counts, avail, [d.shape for d in demands])
    if not all(c.ok for c in checks):
        return None
    hard_whole = [(i, w) for i, w in enumerate(gt.whole) if w.hard]
    cands = []
    for (i, w), c in zip(hard_whole, [c for c in checks if c.kind == "whole"]):
        doms = np.flatnonzero(c.fits)
        slack = c.caps[:, doms].sum(axis=0)
        cands.append(doms[np.argsort(slack, kind="stable")][:CANDIDATE_DOMAINS].tolist())
    for combo in itertools.islice(itertools.product(*cands), CANDIDATE_DOMAINS * 2):
        masks = [d.mask for d in demands]
        for (i, w), dom in zip(hard_whole, combo):
            inside = w.domains.ids == dom
            for m in w.members:
                masks[m] = masks[m] & inside
        got = _place_restricted(avail, demands, gt, masks, ks, dict(zip((i for i, _ in hard_whole), combo)))
        if got is not None and not violations(got, gt, counts):
            return got
    return None


def _place_restricted(avail, demands, gt: GangTopology, masks, ks, chosen: dict[int, int]):
    """Split demands into per-domain parts (slices, exclusive units) and place them all."""
    parts: dict[int, list[Demand]] = {}
    for s in gt.slices:
        m = s.member
        k = np.where(masks[m], ks[m], 0)
        caps = domain_sums(s.domains, k)
        slots = caps // s.size
        need = demands[m].count // s.size
        order = np.argsort(-slots, kind="stable")
        subs = []
        for dom in order.tolist():
            if need <= 0 or slots[dom] <= 0:
                break
            t = int(min(slots[dom], need))
            inside = masks[m] & (s.domains.ids == dom)
            subs.append(replace(demands[m], count=t * s.size, mask=inside, k=np.where(inside, ks[m], 0)))
            need -= t
        if need > 0:
            return None
        parts[m] = subs
    for x in gt.exclusive:
        if x.together:
            kcaps = np.stack([domain_sums(x.domains, np.where(masks[m], ks[m], 0)) for m in x.members])
            ok = (kcaps >= np.array(x.unit, dtype=np.int64)[:, None]).all(axis=0)
            doms = sorted(np.flatnonzero(ok).tolist(), key=lambda d: int(kcaps[:, d].sum()))[: x.units[0]]
            if len(doms) < x.units[0]:
                return None
            for j, m in enumerate(x.members):
                subs = []
                for d in doms:
                    inside = masks[m] & (x.domains.ids == d)
                    subs.append(replace(demands[m], count=x.unit[j], mask=inside, k=np.where(inside, ks[m], 0)))
                parts[m] = subs
            continue
        used: set[int] = set()
        order = sorted(range(len(x.members)), key=lambda j: int(np.count_nonzero(
            domain_sums(x.domains, np.where(masks[x.members[j]], ks[x.members[j]], 0)) >= x.unit[j])))
        for j in order:
            m = x.members[j]
            caps = domain_sums(x.domains, np.where(masks[m], ks[m], 0))
            doms = [d for d in np.flatnonzero(caps >= x.unit[j]).tolist() if d not in used]
            doms.sort(key=lambda d: int(caps[d]))
            if len(doms) < x.units[j]:
                return None
            subs = []
            for d in doms[: x.units[j]]:
                used.add(d)
                inside = masks[m] & (x.domains.ids == d)
                subs.append(replace(demands[m], count=x.unit[j], mask=inside, k=np.where(inside, ks[m], 0)))
            parts[m] = subs
    flat: list[Demand] = []
    owner: dict[str, int] = {}
    for m, d in enumerate(demands):
        if m in parts:
            for j, sub in enumerate(parts[m]):
                name = f"{m}#{j}"
                owner[name] = m
                flat.append(replace(sub, name=name))
        else:
            name = str(m)
            owner[name] = m
            mk = masks[m]
            flat.append(d if mk is d.mask else replace(d, mask=mk, k=np.where(mk, ks[m], 0)))
    got = place(avail, flat)
    if got is None:
        return None
    merged: dict[str, list[tuple[int, int]]] = {str(m): [] for m in range(len(demands))}
    for name, rows in got.items():
        acc = dict(merged[str(owner[name])])
        for node, c in rows:
            acc[node] = acc.get(node, 0) + c
        merged[str(owner[name])] = sorted(acc.items())
    return merged


# ----------------------------------------------------------------------------- the check


def violations(placement: dict[str, list[tuple[int, int]]], gt: GangTopology, counts) -> list[str]:
    """The hard rules ``placement`` (pod-set index as text → [(node, pods)]) breaks, as text;
    empty when it respects every one (pod counts per pod set included)."""
    out = []
    per = {int(k): v for k, v in placement.items()}
    for m, n in enumerate(counts):
        if sum(c for _, c in per.get(m, [])) != n:
            out.append(f"pod set {m}: {sum(c for _, c in per.get(m, []))} pods placed, {n} needed")
    for w in gt.whole:
        if not w.hard:
            continue
        doms = {int(w.domains.ids[node]) for m in w.members for node, c in per.get(m, []) if c}
        if -1 in doms or len(doms) > 1:
            out.append(f"{w.level}: pod sets {list(w.members)} span domains {sorted(doms)}")
    for s in gt.slices:
        pods: dict[int, int] = {}
        for node, c in per.get(s.member, []):
            d = int(s.domains.ids[node])
            pods[d] = pods.get(d, 0) + c
        if -1 in pods or any(v % s.size for v in pods.values()):
            out.append(f"{s.level}: pod set {s.member}'s pods per domain {pods} are not whole slices of {s.size}")
    for x in gt.exclusive:
        owner: dict[int, int] = {}
        if x.together:
            per_dom: dict[int, dict[int, int]] = {}
            for j, m in enumerate(x.members):
                for node, c in per.get(m, []):
                    d = int(x.domains.ids[node])
                    per_dom.setdefault(d, {}).setdefault(j, 0)
                    per_dom[d][j] += c
            for d, got in per_dom.items():
                if d < 0 or any(got.get(j, 0) != x.unit[j] for j in range(len(x.members))):
                    out.append(f"{x.level}: domain {d} holds {got}, one group is {list(x.unit)}")
            continue
        for j, m in enumerate(x.members):
            pods = {}
            for node, c in per.get(m, []):
                d = int(x.domains.ids[node])
                pods[d] = pods.get(d, 0) + c
            for d, v in pods.items():
                if d < 0 or v != x.unit[j]:
                    out.append(f"{x.level}: pod set {m} has {v} pods in domain {d}, one unit is {x.unit[j]}")
                elif d in owner:
                    out.append(f"{x.level}: domain {d} holds units of pod sets {owner[d]} and {m}")
                else:
                    owner[d] = m
    return out
