"""May a pod land on a node that a scale-up source adds? Karpenter's compatibility rules.

Owns the label and taint test between a pod set's constraints (``filters.Constraints``: its
nodeSelector, the ORed terms of its required node affinity, its tolerations, a Kueue flavor's
labels) and a ``ScaleUpSource``; not how much the source can add (``bounds``) nor the verdict
(``review``).

For a Karpenter NodePool this mirrors karpenter's scheduler (sigs.k8s.io/karpenter):

* requirements are sets per label key — In / NotIn / Exists / DoesNotExist, Gt / Lt as bounds
  (pkg/scheduling/requirement.go: ``NewRequirementWithFlexibility`` turns Gt N into ≥ N+1 and Lt N
  into ≤ N-1; ``HasIntersection``); the template's labels are ``In [value]`` requirements and every
  node of the pool carries ``karpenter.sh/nodepool In [name]``
  (pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go);
* ``Requirements.Compatible`` (pkg/scheduling/requirements.go): a key the pod requires must be
  defined by the pool unless it is a well-known label or the pod's operator is NotIn /
  DoesNotExist ("label %q does not have known values"); keys both define must intersect;
* aliased keys are normalised first (pkg/apis/v1/labels.go ``NormalizedLabels``:
  failure-domain.beta.kubernetes.io/zone → topology.kubernetes.io/zone, …);
* taints: the pool's ``spec.taints`` must be tolerated, its ``startupTaints`` need not be
  (pkg/scheduling/taints.go ``ToleratesPod``, used on the template's taints only).

Well-known labels: Karpenter's own set (pkg/apis/v1/labels.go ``WellKnownLabels``) plus what a
cloud provider registers, which the cluster does not show. gangcheck cannot tell which provider
runs, so every label in a domain a known provider registers (any domain containing "karpenter",
and the core Kubernetes node domains) is treated as possibly well-known: undefined by the pool,
it never rules the pool out. That errs toward "matches" — a false match costs a warning, a
false mismatch could cost a false rejection.

Other sources (a cluster-autoscaler node group's template, a policy pool) add nodes that carry
their template labels *and* labels the provider adds (zone, instance type): a key they do not
define never rules them out; a key they define must match. A source whose requirements are
unknown (None) matches any label. No source's new node has an existing node's name: a pod pinned
by ``spec.nodeName``, by ``kubernetes.io/hostname``, or by a ``metadata.name`` field selector
never matches one.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..filters import Constraints
from .model import NODEPOOL, NODEPOOL_LABEL, ScaleUpSource

__all__ = ["mismatch", "mismatches", "matches", "WELL_KNOWN_LABELS", "well_known"]

HOSTNAME = "kubernetes.io/hostname"

#: Karpenter's WellKnownLabels (pkg/apis/v1/labels.go).
WELL_KNOWN_LABELS = frozenset({
    NODEPOOL_LABEL, "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "node.kubernetes.io/instance-type",
    "kubernetes.io/arch", "kubernetes.io/os", "karpenter.sh/capacity-type", "node.kubernetes.io/windows-build",
})

#: pkg/apis/v1/labels.go NormalizedLabels: pod requirements on these keys mean the key on the right.
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}

#: Label domains a cloud provider may register as well-known (see the module doc).
_PROVIDER_DOMAINS = ("node.kubernetes.io", "topology.kubernetes.io", "kubernetes.io", "k8s.io")


def well_known(key: str) -> bool:
    """True when ``key`` is, or may be (a provider's), one of Karpenter's well-known labels."""
    if key in WELL_KNOWN_LABELS:
        return True
    domain = key.partition("/")[0] if "/" in key else ""
    return "karpenter" in domain or domain in _PROVIDER_DOMAINS


@dataclass(frozen=True, slots=True)
class _Req:
    """One key's allowed values: ``values`` (In) or everything but them (``complement``), within
    the inclusive integer bounds ``gte`` / ``lte`` (Karpenter's Requirement)."""

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    gte: int | None = None
    lte: int | None = None

    @staticmethod
    def of(key: str, operator: str, values: Iterable[str]) -> "_Req":
        vals = tuple(values)
        if operator == "In":
            return _Req(key, False, frozenset(vals))
        if operator == "NotIn":
            return _Req(key, True, frozenset(vals))
        if operator == "Exists":
            return _Req(key, True)
        if operator == "DoesNotExist":
            return _Req(key, False)
        bound = _int(vals[0]) if len(vals) == 1 else None
        if bound is None:  # an unparsable bound: the API server rejects it; match nothing
            return _Req(key, False)
        if operator == "Gt":
            return _Req(key, True, gte=bound + 1)
        if operator == "Lt":
            return _Req(key, True, lte=bound - 1)
        if operator == "Gte":
            return _Req(key, True, gte=bound)
        if operator == "Lte":
            return _Req(key, True, lte=bound)
        return _Req(key, False)  # unknown operator: nothing satisfies it

    def intersect(self, o: "_Req") -> "_Req":
        """Both at once (requirement.go ``Intersection``)."""
        gte = _max(self.gte, o.gte)
        lte = _min(self.lte, o.lte)
        if gte is not None and lte is not None and gte > lte:
            return _Req(self.key, False)
        if self.complement and o.complement:
            return _Req(self.key, True, self.values | o.values, gte, lte)
        if self.complement:
            vals = o.values - self.values
        elif o.complement:
            vals = self.values - o.values
        else:
            vals = self.values & o.values
        return _Req(self.key, False, frozenset(v for v in vals if _within(v, gte, lte)))

    def has_intersection(self, o: "_Req") -> bool:
        """requirement.go ``HasIntersection``."""
        gte = _max(self.gte, o.gte)
        lte = _min(self.lte, o.lte)
        if gte is not None and lte is not None and gte > lte:
            return False
        if self.complement and o.complement:
            return True
        if self.complement:
            return any(v not in self.values and _within(v, gte, lte) for v in o.values)
        if o.complement:
            return any(v not in o.values and _within(v, gte, lte) for v in self.values)
        return any(v in o.values and _within(v, gte, lte) for v in self.values)

    @property
    def operator(self) -> str:
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"

    def __str__(self) -> str:
        op = self.operator
        s = f"{self.key} {op}" if op in ("Exists", "DoesNotExist") else f"{self.key} {op} [{', '.join(sorted(self.values))}]"
        if self.gte is not None:
            s += f" >={self.gte}"
        if self.lte is not None:
            s += f" <={self.lte}"
        return s


def _int(v: str) -> int | None:
    try:
        return int(v)
    except ValueError:
        return None


def _max(a, b):
    return b if a is None else a if b is None else max(a, b)


def _min(a, b):
    return b if a is None else a if b is None else min(a, b)


def _within(v: str, gte: int | None, lte: int | None) -> bool:
    if gte is None and lte is None:
        return True
    n = _int(v)
    return n is not None and (gte is None or n >= gte) and (lte is None or n <= lte)


def _add(reqs: dict[str, _Req], r: _Req) -> None:
    reqs[r.key] = reqs[r.key].intersect(r) if r.key in reqs else r


def _source_requirements(src: ScaleUpSource) -> dict[str, _Req]:
    """Key → what every node of ``src`` satisfies (requirements, then template labels, then the
    pool label for a NodePool)."""
    reqs: dict[str, _Req] = {}
    for r in src.requirements or ():
        _add(reqs, _Req.of(NORMALIZED_LABELS.get(r.key, r.key), r.operator, r.values))
    for k, v in src.labels.items():
        _add(reqs, _Req.of(NORMALIZED_LABELS.get(k, k), "In", (v,)))
    if src.kind == NODEPOOL:
        _add(reqs, _Req.of(NODEPOOL_LABEL, "In", (src.name,)))
    return reqs


def _pod_terms(c: Constraints) -> list[tuple[dict[str, _Req], str]]:
    """The pod's alternatives: (key → requirement, why it cannot match any new node or ""), one
    per required node-affinity term (ORed), each ANDed with the nodeSelector."""
    base: dict[str, _Req] = {}
    for k, v in c.selector().items():
        _add(base, _Req.of(NORMALIZED_LABELS.get(k, k), "In", (v,)))
    terms = c.pod_set.required_affinity
    if not terms:
        return [(base, "")]
    out = []
    for t in terms:
        reqs = dict(base)
        for r in t.match_expressions:
            _add(reqs, _Req.of(NORMALIZED_LABELS.get(r.key, r.key), r.operator, r.values))
        pinned = "" if not t.match_fields else "a matchFields metadata.name term names existing nodes only"
        if not t.match_expressions and not t.match_fields:
            pinned = "an empty node-affinity term matches no node"
        out.append((reqs, pinned))
    return out


def _term_reasons(src_reqs: Mapping[str, _Req], pod: Mapping[str, _Req], karpenter: bool, known: bool) -> list[str]:
    """Why one pod alternative does not fit ``src``'s requirements (empty when it does)."""
    out = []
    host = pod.get(HOSTNAME)
    if host is not None and not host.complement:
        out.append(f"{HOSTNAME} is pinned to {', '.join(sorted(host.values)) or 'no value'}; a new node has a new name")
    if not known:
        return out
    for key, r in pod.items():
        if key == HOSTNAME:
            continue
        have = src_reqs.get(key)
        if have is None:
            # requirements.go Compatible: custom labels must be defined by the pool, well-known
            # ones may be undefined; NotIn / DoesNotExist need nothing.
            if karpenter and not well_known(key) and r.operator not in ("NotIn", "DoesNotExist"):
                out.append(f'label "{key}" does not have known values')
            continue
        if not have.has_intersection(r):
            # requirements.go Intersects: two NotIn / DoesNotExist never conflict.
            if r.operator in ("NotIn", "DoesNotExist") and have.operator in ("NotIn", "DoesNotExist"):
                continue
            out.append(f"key {key}, {r} not in {have}")
    return out


def _taint_reasons(src: ScaleUpSource, c: Constraints) -> list[str]:
    """The source's taints the pod does not tolerate (NoSchedule / NoExecute; startup taints and
    unknown taints never count)."""
    if src.taints is None or c.taints_liftable():
        return []
    tols = c.tolerations
    return [f"taint {t} is not tolerated" for t in src.taints
            if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in tols)]


def mismatches(src: ScaleUpSource, c: Constraints) -> tuple[str, ...]:
    """Every reason a pod with constraints ``c`` cannot land on a node ``src`` adds, requirement by
    requirement; empty when it can. With several node-affinity terms, the reasons of the term
    closest to matching (fewest reasons)."""
    ps = c.pod_set
    if ps.node_name:
        return (f"spec.nodeName pins node {ps.node_name}; a new node has a new name",)
    src_reqs = _source_requirements(src)
    karpenter, known = src.kind == NODEPOOL, src.requirements is not None
    best: list[str] | None = None
    for reqs, pinned in _pod_terms(c):
        why = ([pinned] if pinned else []) + _term_reasons(src_reqs, reqs, karpenter, known)
        if best is None or len(why) < len(best):
            best = why
        if not why:
            break
    return tuple((best or []) + _taint_reasons(src, c))


def mismatch(src: ScaleUpSource, c: Constraints) -> str | None:
    """None when a pod with constraints ``c`` may land on a node ``src`` adds, else the first reason."""
    why = mismatches(src, c)
    return why[0] if why else None


def matches(src: ScaleUpSource, constraints: Iterable[Constraints]) -> bool:
    """True when some alternative (one per candidate Kueue flavor) may land on ``src``'s nodes."""
    return any(not mismatches(src, c) for c in constraints)
