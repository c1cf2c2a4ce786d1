"""The cluster's topology objects → engine values: Kueue and KAI Topologies, Volcano HyperNodes.

Owns reading:

* Kueue ``Topology`` (kueue.x-k8s.io v1beta1 / v1beta2, kueue v0.17.0
  apis/kueue/v1beta2/topology_types.go): ``spec.levels[].nodeLabel``, 1 to 16 unique levels top →
  bottom, ``kubernetes.io/hostname`` only as the lowest → ``(name, levels)``;
* KAI ``Topology`` (kai.scheduler/v1alpha1, KAI-Scheduler pkg/apis/kai/v1alpha1/topology_types.go,
  the same shape as Kueue's) → ``(name, levels)``;
* Volcano ``HyperNode`` (topology.volcano.sh/v1alpha1, volcano v1.15.0
  staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1/hypernode_types.go): ``spec.tier``
  (≥ 0), ``spec.tierName``, ``spec.members[]`` of type Node | HyperNode with exactly one selector
  ``exactMatch.name`` / ``regexMatch.pattern`` / ``labelMatch`` (a LabelSelector; Node members
  only) → ``HyperNode``. A member that selects nothing in Volcano's scheduler (an empty
  labelMatch, a labelMatch on a HyperNode member: ``GetMembers``) is left out.

Does not own the ResourceFlavor's ``topologyName`` (``kueue_objects``) nor what the levels mean
(``webhook.engine.topology``). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..engine.model import HyperNode, HyperNodeMember
from .disruption import label_selector
from .errors import AdapterError
from .meta import object_name, object_ref
from .podspec import as_int, list_of, mapping

__all__ = ["KAI", "VOLCANO_TOPOLOGY", "HOSTNAME", "MAX_LEVELS", "topology_levels_from_k8s", "hypernode_from_k8s"]

#: API groups of the KAI Topology and the Volcano HyperNode.
KAI = "kai.scheduler"
VOLCANO_TOPOLOGY = "topology.volcano.sh"
HOSTNAME = "kubernetes.io/hostname"
#: A Topology's most levels (the CRDs' MaxItems).
MAX_LEVELS = 16


def topology_levels_from_k8s(obj: Mapping) -> tuple[str, tuple[str, ...]]:
    """A Kueue or KAI Topology → ``(name, its levels' node label keys top → bottom)``.

    Raises:
        AdapterError: no name; ``spec.levels`` missing, empty, longer than 16 or not a list; a
            level without a non-empty string ``nodeLabel``; a duplicated level;
            ``kubernetes.io/hostname`` above the lowest level (the CRDs refuse each of these).
    """
    try:
        name = object_name(obj)
        spec = mapping(obj.get("spec"), "spec", required=True)
        levels = list_of(spec.get("levels"), "spec.levels", required=True)
        if len(levels) > MAX_LEVELS:
            raise AdapterError(f"expected at most {MAX_LEVELS} levels, got {len(levels)}", field="spec.levels")
        keys: list[str] = []
        for i, level in enumerate(levels):
            label = mapping(level, f"spec.levels[{i}]").get("nodeLabel")
            if not isinstance(label, str) or not label:
                raise AdapterError("expected a non-empty node label key", field=f"spec.levels[{i}].nodeLabel")
            if label in keys:
                raise AdapterError(f"duplicated level {label!r}", field=f"spec.levels[{i}].nodeLabel")
            keys.append(label)
        if HOSTNAME in keys[:-1]:
            raise AdapterError(f"{HOSTNAME} can only be the lowest level", field=f"spec.levels[{keys.index(HOSTNAME)}].nodeLabel")
        return name, tuple(keys)
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def _string(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise AdapterError("expected a non-empty string", field=field)
    return value


def _member(m: Any, field: str) -> HyperNodeMember | None:
    m = mapping(m, field)
    kind = m.get("type")
    if kind not in ("Node", "HyperNode"):
        raise AdapterError(f"expected Node or HyperNode, got {str(kind)[:40]!r}", field=f"{field}.type")
    sel = mapping(m.get("selector"), f"{field}.selector", required=True)
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if sel.get(k) is not None]
    if len(given) != 1:
        raise AdapterError(f"expected exactly one of exactMatch, regexMatch, labelMatch, got {len(given)}",
                           field=f"{field}.selector")
    sf = f"{field}.selector.{given[0]}"
    body = mapping(sel[given[0]], sf)
    if given[0] == "exactMatch":
        return HyperNodeMember(kind, exact=_string(body.get("name"), f"{sf}.name"))
    if given[0] == "regexMatch":
        pattern = _string(body.get("pattern"), f"{sf}.pattern")
        if len(pattern) > 1024:
            raise AdapterError(f"expected a pattern of at most 1024 characters, got {len(pattern)}", field=f"{sf}.pattern")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise AdapterError(f"not a regular expression: {exc}", field=f"{sf}.pattern") from None
        return HyperNodeMember(kind, regex=pattern)
    sel = label_selector(body, sf)  # metav1.LabelSelector, as a PodDisruptionBudget's
    labels, exprs = sel.match_labels, sel.expressions
    if kind != "Node" or not (labels or exprs):
        return None  # selects nothing in Volcano's scheduler (GetMembers)
    return HyperNodeMember(kind, labels=labels, expressions=exprs)


def hypernode_from_k8s(obj: Mapping) -> HyperNode:
    """A Volcano HyperNode → ``HyperNode``.

    Raises:
        AdapterError: no name; ``spec.tier`` missing or not an integer ≥ 0; ``spec.tierName`` not a
            string; a member whose type is not Node/HyperNode, without exactly one selector, with
            an empty name or pattern, a pattern that is not a regular expression, or a malformed
            labelMatch.
    """
    try:
        name = object_name(obj)
        spec = mapping(obj.get("spec"), "spec", required=True)
        tier = as_int(spec.get("tier"), "spec.tier", minimum=0, maximum=2**31 - 1)
        tier_name = spec.get("tierName")
        if tier_name is not None and not isinstance(tier_name, str):
            raise AdapterError(f"expected a string, got {type(tier_name).__name__}", field="spec.tierName")
        members = []
        for i, m in enumerate(list_of(spec.get("members"), "spec.members")):
            member = _member(m, f"spec.members[{i}]")
            if member is not None:
                members.append(member)
        return HyperNode(name=name, tier=tier, members=tuple(members), tier_name=tier_name or None)
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
