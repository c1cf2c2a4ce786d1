"""Node filters in kube-scheduler's order, with its exact reason wording.

kube-scheduler runs its Filter plugins per node and stops at the first failure
(pkg/scheduler/framework/runtime/framework.go RunFilterPlugins). The order of the default
profile: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
NodeResourcesFit, then volume and inter-pod plugins (not modelled). Wording is that of
Kubernetes 1.35+ (FIELD-NOTES §1); the e2e tier compares it against a real kube-scheduler.

Two modes:
  * ``now``  — the scheduler's view today.
  * ``ever`` — DESIGN.md's "could this node ever host the pod": cordon, NotReady/unreachable and
    transient taints (``model.DEFAULT_TRANSIENT_TAINTS`` plus the policy's; keys or shell
    patterns such as ``node.kubernetes.io/*``) are treated as repaired.

A pod template is not yet the pod: the API server's admission plugins may add tolerations
before the scheduler sees it. Modelled: ExtendedResourceToleration (a toleration per extended
resource the pod requests, see :func:`admission_tolerations`; on by default, as on GKE and
AKS), and RuntimeClass (the tolerations of ``spec.runtimeClassName``'s RuntimeClass, which
gangcheck does not read: with a runtime class no taint rules a node out in ``ever`` mode).
With ``Constraints.namespace_default_tolerations`` (the PodTolerationRestriction plugin, whose
namespace default tolerations gangcheck does not read) no taint rules a node out in ``ever``
mode either.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from functools import lru_cache

import numpy as np

from .model import (
    DEFAULT_TRANSIENT_TAINTS,
    REPAIRABLE_TAINTS,
    TAINT_NOT_READY,
    TAINT_UNSCHEDULABLE,
    PodSet,
    Taint,
    Toleration,
)
from .snapshot import PER_NODE_LABELS, ClusterSnapshot

__all__ = [
    "R_UNSCHEDULABLE",
    "R_NODE_NAME",
    "R_TAINT",
    "R_AFFINITY",
    "R_PORTS",
    "R_TOO_MANY_PODS",
    "insufficient",
    "is_extended_resource",
    "admission_tolerations",
    "taint_matches",
    "DEFAULT_TRANSIENT",
    "Constraints",
    "filter_nodes",
    "FilterResult",
]

R_UNSCHEDULABLE = "node(s) were unschedulable"
R_NODE_NAME = "node(s) didn't match the requested node name"
R_TAINT = "node(s) had untolerated taint(s)"
R_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
R_PORTS = "node(s) didn't have free ports for the requested pod ports"
R_TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    """NodeResourcesFit's reason for one resource, e.g. ``Insufficient nvidia.com/gpu``."""
    return f"Insufficient {resource}"


#: The shipped transient taints (keys and patterns), always repairable in ``ever`` mode.
DEFAULT_TRANSIENT: frozenset[str] = frozenset(DEFAULT_TRANSIENT_TAINTS)

_PATTERN_CHARS = frozenset("*?[")


@lru_cache(maxsize=8192)
def taint_matches(key: str, keys: frozenset[str]) -> bool:
    """True when taint ``key`` is in ``keys``, or matches one of its shell patterns
    (``node.kubernetes.io/*``; case-sensitive, as taint keys are)."""
    if key in keys:
        return True
    return any(_PATTERN_CHARS & set(p) and fnmatchcase(key, p) for p in keys)


def is_extended_resource(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName`` (pkg/apis/core/helper/helpers.go): a
    domain-prefixed name outside ``*kubernetes.io/`` and not a quota ``requests.`` name, e.g.
    ``nvidia.com/gpu``; cpu, memory, hugepages-* and ephemeral-storage are native."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


@lru_cache(maxsize=1024)
def _ert(resources: tuple[str, ...]) -> tuple[Toleration, ...]:
    return tuple(Toleration(r, "Exists", "", "NoSchedule") for r in resources)


def admission_tolerations(ps: PodSet) -> tuple[Toleration, ...]:
    """The tolerations the ExtendedResourceToleration admission plugin adds to a pod of ``ps``.

    Mirrors kubernetes plugin/pkg/admission/extendedresourcetoleration/admission.go: for every
    extended resource any container or init container requests, a toleration with that key,
    operator Exists and effect NoSchedule (so ``nvidia.com/gpu=present:NoSchedule``, GKE's GPU
    node taint, is tolerated; a NoExecute taint of that key is not).
    """
    return _ert(tuple(sorted(r for r in ps.requests if is_extended_resource(r))))


@dataclass(frozen=True, slots=True)
class Constraints:
    """A pod set's label/taint constraints, plus what a Kueue ResourceFlavor and pod admission add.

    ``extra_selector`` is the flavor's nodeLabels (Kueue injects them as a nodeSelector);
    ``extra_tolerations`` the flavor's tolerations. ``extended_resource_toleration``: the API
    server runs the ExtendedResourceToleration plugin (:func:`admission_tolerations`).
    ``namespace_default_tolerations``: it runs PodTolerationRestriction, whose per-namespace
    default tolerations are unknown here, so no taint is permanent in ``ever`` mode.
    """

    pod_set: PodSet
    extra_selector: Mapping[str, str] | None = None
    extra_tolerations: tuple[Toleration, ...] = ()
    extended_resource_toleration: bool = True
    namespace_default_tolerations: bool = False

    @property
    def tolerations(self) -> tuple[Toleration, ...]:
        tols = self.pod_set.tolerations + self.extra_tolerations
        if self.extended_resource_toleration:
            tols += admission_tolerations(self.pod_set)
        return tols

    def taints_liftable(self) -> bool:
        """True when admission may add tolerations gangcheck cannot see (a RuntimeClass's, a
        namespace's defaults): then no taint may rule a node out for good."""
        return bool(self.pod_set.runtime_class) or self.namespace_default_tolerations

    def selector(self) -> dict[str, str]:
        sel = dict(self.pod_set.node_selector)
        if self.extra_selector:
            sel.update(self.extra_selector)
        return sel

    def needs_per_node(self) -> bool:
        """True when a rule reads per-node data (node name, hostname label, matchFields)."""
        ps = self.pod_set
        if ps.node_name:
            return True
        keys = set(self.selector())
        for t in ps.required_affinity:
            keys |= t.label_keys()
            if t.match_fields:
                return True
        return bool(keys & PER_NODE_LABELS)


def _untolerated(taints: Iterable[Taint], tolerations: tuple[Toleration, ...], skip: frozenset[str] | None) -> bool:
    """``skip``: taint keys/patterns treated as repaired; None = every taint is."""
    if skip is None:
        return False
    for t in taints:
        if t.effect not in ("NoSchedule", "NoExecute") or taint_matches(t.key, skip):
            continue
        if not any(tol.tolerates(t) for tol in tolerations):
            return True
    return False


def _reason(
    name: str,
    labels: Mapping[str, str],
    taints: tuple[Taint, ...],
    unschedulable: bool,
    ready: bool | None,
    c: Constraints,
    ever: bool,
    transient: frozenset[str],
    prepared: tuple[tuple[Toleration, ...], dict[str, str]] | None = None,
) -> str | None:
    """The first filter that rules the node out (kube-scheduler's order), None if it passes.
    ``prepared``: ``(c.tolerations, c.selector())`` computed once by a caller that asks for
    many nodes."""
    tolerations, selector = prepared if prepared is not None else (c.tolerations, c.selector())
    if not ever and unschedulable:
        if not any(tol.tolerates(Taint(TAINT_UNSCHEDULABLE, "", "NoSchedule")) for tol in tolerations):
            return R_UNSCHEDULABLE
    ps = c.pod_set
    if ps.node_name and ps.node_name != name:
        return R_NODE_NAME
    skip: frozenset[str] | None = frozenset()
    if ever:
        skip = None if c.taints_liftable() else (REPAIRABLE_TAINTS | DEFAULT_TRANSIENT | transient)
    effective = taints
    if not ever and ready is False and not any(t.key == TAINT_NOT_READY for t in taints):
        # The node lifecycle controller adds this taint within seconds of Ready=False.
        effective = taints + (Taint(TAINT_NOT_READY, "", "NoSchedule"),)
    if _untolerated(effective, tolerations, skip):
        return R_TAINT
    for k, v in selector.items():
        if labels.get(k) != v:
            return R_AFFINITY
    if ps.required_affinity and not any(t.matches(name, labels) for t in ps.required_affinity):
        return R_AFFINITY
    return None


@dataclass(frozen=True, slots=True)
class FilterResult:
    """Outcome of the label/taint filters over all nodes.

    ``mask``: bool array [nodes], True where the node passes. ``reasons``: the first failing
    filter's reason (None = passes): one per node when ``node_class`` is None, else one per
    class id of ``node_class`` (int array [nodes]; a static class of nodes, or a signature of
    class + per-node values when a rule reads the node's name). ``per_node``: a rule read
    per-node data, so reports sample failing nodes in node order.
    """

    mask: np.ndarray
    reasons: list[str | None]
    per_node: bool
    node_class: np.ndarray | None = None

    def node_reason(self, snap: ClusterSnapshot, i: int) -> str | None:
        return self.reasons[i] if self.node_class is None else self.reasons[int(self.node_class[i])]

    def histogram(self, snap: ClusterSnapshot) -> dict[str, int]:
        """Reason → number of nodes it rules out."""
        out: dict[str, int] = {}
        if self.node_class is None:
            for r in self.reasons:
                if r is not None:
                    out[r] = out.get(r, 0) + 1
            return out
        if not len(snap.nodes):
            return out
        counts = np.bincount(self.node_class, minlength=len(self.reasons))
        for cid, r in enumerate(self.reasons):
            if r is not None and counts[cid]:
                out[r] = out.get(r, 0) + int(counts[cid])
        return out

    def first_failing(self, limit: int) -> dict[str, np.ndarray]:
        """Reason → the first ``limit`` node indices it rules out, in node order; reasons in the
        order of their first node (what a walk over the nodes would meet)."""
        if self.node_class is None:
            out: dict[str, list[int]] = {}
            for i in np.flatnonzero(~self.mask):
                r = self.reasons[int(i)]
                if r is not None and len(out.setdefault(r, [])) < limit:
                    out[r].append(int(i))
            return {r: np.array(ix, dtype=np.int64) for r, ix in out.items()}
        names = sorted({r for r in self.reasons if r is not None})
        if not names:
            return {}
        of = {r: j for j, r in enumerate(names)}
        code = np.fromiter((-1 if r is None else of[r] for r in self.reasons), dtype=np.int64, count=len(self.reasons))
        per_node = code[self.node_class]
        found = {r: np.flatnonzero(per_node == j) for r, j in of.items()}
        firsts = sorted((ix[0], r) for r, ix in found.items() if len(ix))
        return {r: found[r][:limit] for _, r in firsts}


def filter_nodes(
    snap: ClusterSnapshot, c: Constraints, *, ever: bool, transient: frozenset[str] = frozenset()
) -> FilterResult:
    """Apply NodeUnschedulable, NodeName, TaintToleration and NodeAffinity to every node.

    Evaluated once per static class unless a rule reads per-node data (node name, the
    hostname label, matchFields). ``ever`` skips cordon and repairable/transient taints
    (``DEFAULT_TRANSIENT`` always, plus ``transient``: keys or shell patterns).
    """
    keys = set(c.selector())
    for t in c.pod_set.required_affinity:
        keys |= t.label_keys()
    if c.needs_per_node():
        return _filter_per_node(snap, c, ever, transient, frozenset(keys))
    node_class, classes = snap.projected_classes(frozenset(keys))
    prep = (c.tolerations, c.selector())
    class_reasons = [
        _reason("", k.labels, k.taints, k.unschedulable, k.ready, c, ever, transient, prep) for k in classes
    ]
    ok = np.fromiter((r is None for r in class_reasons), dtype=bool, count=len(class_reasons))
    mask = ok[node_class] if len(snap.nodes) else np.zeros(0, dtype=bool)
    return FilterResult(mask, class_reasons, False, node_class)


def _filter_per_node(snap: ClusterSnapshot, c: Constraints, ever: bool, transient: frozenset[str],
                     keys: frozenset[str]) -> FilterResult:
    """Rules that read per-node values (node name, hostname label, matchFields).

    The outcome depends only on the node's projected class and, per name-reading rule, on
    whether the node's value is among the rule's values; nodes sharing that signature share
    the result, so ``_reason`` runs once per signature instead of once per node.
    """
    ps = c.pod_set
    per_node_keys = sorted(keys & PER_NODE_LABELS)
    wanted: list[tuple[str, frozenset[str]]] = []  # (label key or "metadata.name", values)
    for t in ps.required_affinity:
        for r in t.match_expressions:
            if r.key in PER_NODE_LABELS:
                wanted.append((r.key, frozenset(r.values)))
        for r in t.match_fields:
            wanted.append(("metadata.name", frozenset(r.values)))
    for k in per_node_keys:
        if k in c.selector():
            wanted.append((k, frozenset({c.selector()[k]})))
    if ps.node_name:
        wanted.append(("metadata.name", frozenset({ps.node_name})))
    prep = (c.tolerations, c.selector())
    numeric = any(r.operator in ("Gt", "Lt") and r.key in PER_NODE_LABELS
                  for t in ps.required_affinity for r in t.match_expressions)
    if numeric:  # membership does not decide Gt/Lt: evaluate every node
        reasons = [_reason(n.name, n.labels, n.taints, n.unschedulable, n.ready, c, ever, transient, prep)
                   for n in snap.nodes]
        return FilterResult(np.fromiter((r is None for r in reasons), dtype=bool, count=len(reasons)), reasons, True)
    node_class, _ = snap.projected_classes(keys - PER_NODE_LABELS)
    sig_of_node, reps = _signatures(snap, node_class, wanted)
    reasons = []
    for i in reps:
        n = snap.nodes[int(i)]
        reasons.append(_reason(n.name, n.labels, n.taints, n.unschedulable, n.ready, c, ever, transient, prep))
    ok = np.fromiter((r is None for r in reasons), dtype=bool, count=len(reasons))
    mask = ok[sig_of_node] if len(snap.nodes) else np.zeros(0, dtype=bool)
    return FilterResult(mask, reasons, True, sig_of_node)


#: A signature code past this is re-numbered densely before another rule's states are folded in.
_SIG_LIMIT = 1 << 40


def _membership(snap: ClusterSnapshot, key: str, values: frozenset[str]) -> np.ndarray:
    """Per node: 0 = no ``key`` label, 1 = a value not in ``values``, 2 = a value in ``values``
    (int64 [nodes]). ``metadata.name`` reads the node's name (always present)."""
    if key == "metadata.name":
        st = np.ones(len(snap.nodes), dtype=np.int64)
        for v in values:
            i = snap.node_index.get(v)
            if i is not None:
                st[i] = 2
        return st
    has, pos = snap.label_positions(key)
    st = has.astype(np.int64)
    for v in values:
        ix = pos.get(v)
        if ix is not None:
            st[ix] = 2
    return st


def _dense(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dense id per element, one element index per id) for non-negative int codes."""
    n = len(codes)
    top = int(codes.max()) + 1 if n else 0
    if top <= 4 * n + 4096:  # a table over the codes: linear, no sort
        present = np.zeros(top, dtype=bool)
        present[codes] = True
        uniq = np.flatnonzero(present)
        remap = np.zeros(top, dtype=np.int64)
        remap[uniq] = np.arange(len(uniq), dtype=np.int64)
        inverse = remap[codes]
    else:
        uniq, inverse = np.unique(codes, return_inverse=True)
        inverse = inverse.reshape(-1)
    rep = np.zeros(len(uniq), dtype=np.int64)
    rep[inverse] = np.arange(n, dtype=np.int64)  # any node of an id will do: they share the outcome
    return inverse, rep


def _signatures(snap: ClusterSnapshot, node_class: np.ndarray,
                wanted: list[tuple[str, frozenset[str]]]) -> tuple[np.ndarray, np.ndarray]:
    """Group nodes by (projected class, per rule: label absent / value outside / value inside).

    The filters' outcome depends on nothing else (names and hostnames are only ever compared
    by membership once Gt/Lt are ruled out), so one node per group decides for the group.
    Returns (group id per node, one representative node index per group). Vectorised: a
    64 x 8 gang that excludes a few hosts by name costs a few array passes, not a Python loop
    over every node.
    """
    codes = node_class.astype(np.int64)
    for key, values in wanted:
        if len(codes) and int(codes.max()) >= _SIG_LIMIT:
            codes, _ = _dense(codes)
        codes = codes * 3 + _membership(snap, key, values)
    return _dense(codes)
