"""Fixes on the node autoscalers (issue #16): raise a NodePool's limits (or a node group's /
policy pool's maximum size) when they are what stops the gang, widen a NodePool's requirements
or tolerate its taint when a pool is one requirement or taint away from taking the gang.

Owns which of those fixes apply to a gang, their wording and their kubectl commands; not whether
a pod may land on a source's nodes (``autoscale.match``) nor how much a source can add
(``autoscale.bounds``) — every fix here is checked with those two: a raised limit is the least
value under which ``bounds.pods_room`` covers the pods missing, a widened requirement one under
which ``match.mismatches`` finds nothing left.

Each of these fixes evicts no one (displacement 0), but the first two add nodes: they cost money
and take provisioning time, which their summaries say. Only the main pod set (the one that has
pods missing) is considered. Units: scheduler units (millicores, bytes, counts).
Sources: Karpenter NodePool ``spec.limits`` (a ResourceList over the capacity of its nodes),
``spec.template.spec.requirements`` and ``spec.template.spec.taints`` (kubernetes-sigs/karpenter
pkg/apis/v1/nodepool.go); cluster-autoscaler's node group max size (its ``--nodes=MIN:MAX:NAME``
flag or the cloud provider's group).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..autoscale.bounds import nodes_for, pods_room
from ..autoscale.match import mismatches
from ..autoscale.model import NODE_GROUP, NODEPOOL, NODES_LIMIT, POLICY_POOL, ScaleUpSource
from ..autoscale.sources import effective_sources
from ..decision import Decision
from ..filters import Constraints
from ..model import GangRequest, NodeSelectorRequirement, Taint, Toleration
from ..options import EngineOptions
from ..quantity import CPU
from ..snapshot import ClusterSnapshot
from .commands import _q, _resource_of
from .ranking import Fix
from .view import GangView, pod_set_constraints

__all__ = ["SCALE_CODES", "scale_fixes", "raised_limits", "widened", "exact_quantity"]

#: Finding codes of a NeverFits that only the autoscalers' configuration stands behind
#: (``autoscale.review``): scale fixes are still offered for them.
SCALE_CODES = frozenset({"NoMatchingScaleUp", "ExceedsScaleUpLimits"})
#: At most this many sources get a fix of each kind (the first in Karpenter's order).
PER_KIND = 3
#: The largest limit searched (scheduler units): past it raising a limit does not help.
_MAX_LIMIT = 1 << 62


def exact_quantity(resource: str, value: int) -> str:
    """``value`` (scheduler units) as an exact Kubernetes quantity: cpu "8" or "8500m", memory
    "64Gi" / "1536Mi" / bytes, others plain."""
    v = int(value)
    if resource == CPU:
        return str(v // 1000) if v % 1000 == 0 else f"{v}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if v and v % size == 0:
                return f"{v // size}{suffix}"
    return str(v)


def _js(text: str) -> str:
    """``text`` as a JSON string (the engine imports no json module): quotes, backslashes and
    control characters escaped."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _least(ok, lo: int) -> int | None:
    """The least integer x ≥ lo with ``ok(x)`` (``ok`` monotone), None when none up to ``_MAX_LIMIT``."""
    if ok(lo):
        return lo
    hi = max(1, lo)
    while not ok(hi):
        if hi >= _MAX_LIMIT:
            return None
        lo, hi = hi, min(_MAX_LIMIT, hi * 2)
    while hi - lo > 1:  # ok(hi), not ok(lo)
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def raised_limits(src: ScaleUpSource, requests: Mapping[str, int], max_per_node: int | None,
                  pods: int) -> tuple[dict[str, tuple[int, int]], tuple[int, int] | None, ScaleUpSource] | None:
    """The least raise of ``src``'s caps under which it has room for ``pods`` pods of
    ``requests`` (``bounds.pods_room``).

    Each cap (a ``limits`` entry, ``max_new_nodes``) is raised alone to the least value that
    lifts it above ``pods`` with every other cap removed, then all together are checked.

    Returns:
        ``({resource: (old limit, new limit)}, (old, new) max_new_nodes or None, the raised
        source)``; None when the room already covers ``pods``, or no raise can (a new node
        cannot hold one such pod, or the caps are not what bounds it).
    """
    room = pods_room(src, requests, max_per_node)
    if room is None or room >= pods:
        return None
    free = replace(src, limits={}, max_new_nodes=None)
    lims: dict[str, tuple[int, int]] = {}
    for r, old in src.limits.items():
        def ok(x: int, r: str = r) -> bool:
            k = pods_room(replace(free, limits={r: x}), requests, max_per_node)
            return k is None or k >= pods
        if ok(int(old)):
            continue
        new = _least(ok, int(old))
        if new is None:
            return None
        lims[r] = (int(old), new)
    cap = None
    if src.max_new_nodes is not None:
        def ok_nodes(x: int) -> bool:
            k = pods_room(replace(free, max_new_nodes=x), requests, max_per_node)
            return k is None or k >= pods
        if not ok_nodes(src.max_new_nodes):
            new = _least(ok_nodes, src.max_new_nodes)
            if new is None:
                return None
            cap = (src.max_new_nodes, new)
    raised = replace(src, limits={**src.limits, **{r: n for r, (_, n) in lims.items()}},
                     max_new_nodes=src.max_new_nodes if cap is None else cap[1])
    after = pods_room(raised, requests, max_per_node)
    if not (lims or cap) or not (after is None or after >= pods):
        return None
    return lims, cap, raised


def widened(src: ScaleUpSource, c: Constraints) -> list[tuple[str, Any, ScaleUpSource, Constraints]]:
    """Single edits after which a pod with constraints ``c`` matches ``src``
    (``match.mismatches`` empty): ``("requirement", NodeSelectorRequirement, source, c)`` — the
    NodePool's requirement on that key widened to the value the pod asks for (an ``In`` gains
    it, a ``NotIn`` loses it, an undefined custom label gets ``In [value]``); or ``("taint",
    Taint, src, c')`` — the pod tolerates that taint. Requirements are edited on NodePools only
    (a node group's labels come from its template, a policy pool's from the policy)."""
    if not mismatches(src, c):
        return []
    out: list[tuple[str, Any, ScaleUpSource, Constraints]] = []
    if src.kind == NODEPOOL and src.requirements is not None:
        for key, value in _asked(c):
            if key in src.labels:
                continue  # a template label is one value: changing it changes the pool for its users
            new = _widen(src.requirements, key, value)
            if new is None:
                continue
            cand = replace(src, requirements=new)
            if not mismatches(cand, c):
                out.append(("requirement", next(r for r in new if r.key == key), cand, c))
    for t in src.taints or ():
        if t.effect not in ("NoSchedule", "NoExecute") or any(tol.tolerates(t) for tol in c.tolerations):
            continue
        c2 = replace(c, extra_tolerations=c.extra_tolerations + (Toleration(t.key, "Equal" if t.value else "Exists", t.value, t.effect),))
        if not mismatches(src, c2):
            out.append(("taint", t, src, c2))
    return out


def _asked(c: Constraints) -> list[tuple[str, str]]:
    """(key, value) pairs the pod's nodeSelector and the In expressions of its only affinity term
    ask for (with several ORed terms no single value is needed)."""
    out = list(c.selector().items())
    terms = c.pod_set.required_affinity
    if len(terms) == 1:
        out.extend((r.key, r.values[0]) for r in terms[0].match_expressions if r.operator == "In" and len(r.values) == 1)
    return out


def _widen(reqs: Sequence[NodeSelectorRequirement], key: str, value: str) -> tuple[NodeSelectorRequirement, ...] | None:
    """``reqs`` with the requirement(s) on ``key`` letting ``value`` in; None when none of them
    keeps it out or one cannot be widened to it (Exists/DoesNotExist/Gt/Lt stay as they are)."""
    mine = [r for r in reqs if r.key == key]
    if not mine:
        return tuple(reqs) + (NodeSelectorRequirement(key, "In", (value,)),)
    out, changed = [], False
    for r in reqs:
        if r.key == key and r.operator == "In" and value not in r.values:
            r, changed = NodeSelectorRequirement(key, "In", tuple(r.values) + (value,)), True
        elif r.key == key and r.operator == "NotIn" and value in r.values:
            r, changed = NodeSelectorRequirement(key, "NotIn", tuple(v for v in r.values if v != value)), True
        out.append(r)
    return tuple(out) if changed else None


def _missing(decision: Decision, view: GangView) -> int:
    """Pods of the gang that need new nodes: NeedsScaleUp's ``pods_missing``, else the pods of the
    main shape without a node now."""
    for f in decision.findings:
        if f.code == "NeedsScaleUp" and isinstance(f.data.get("pods_missing"), int):
            return int(f.data["pods_missing"])
    return view.deficit


def scale_fixes(snap: ClusterSnapshot, gang: GangRequest, decision: Decision, view: GangView, options: Any) -> list[Fix]:
    """The autoscaler fixes for ``gang`` (unranked): raise-scale-limit when the sources that match
    its main pod set cannot add room for the pods missing under their caps, widen-nodepool /
    tolerate-taint when no source matches it and one is one edit away. [] without sources or
    without pods missing."""
    options = options if options is not None else EngineOptions()
    sources = effective_sources(snap, options) if view.pod_sets else ()
    missing = _missing(decision, view)
    if not sources or missing <= 0:
        return []
    ps = view.pod_sets[view.main]
    req = {r: int(v) for r, v in ps.requests.items() if v}
    c = pod_set_constraints(snap, ps, (decision.quota or {}).get("flavors") or {}, options)
    matching = [s for s in sources if not mismatches(s, c)]
    if matching:
        return _limit_fixes(matching, req, ps.max_per_node, missing)
    return _widen_fixes(gang, sources, c, req, ps.max_per_node, missing)


def _limit_fixes(matching: Sequence[ScaleUpSource], req: Mapping[str, int], mpn: int | None, missing: int) -> list[Fix]:
    rooms = [pods_room(s, req, mpn) for s in matching]
    if any(k is None for k in rooms) or sum(rooms) >= missing:
        return []  # the caps do not stop it
    out: list[Fix] = []
    for s, room in zip(matching, rooms):
        need = missing - (sum(rooms) - room)  # what this source must take, the others full
        got = raised_limits(s, req, mpn, need)
        if got is None:
            continue
        lims, cap, raised = got
        parts = [f"its limit {r} from {exact_quantity(r, a)} to {exact_quantity(r, b)}"
                 + ("" if r == NODES_LIMIT else f" ({exact_quantity(r, s.in_use.get(r, 0))} in use)") for r, (a, b) in lims.items()]
        if cap is not None:
            parts.append(f"its maximum size by {cap[1] - cap[0]} node(s)")
        nodes = nodes_for(raised, req, mpn, need)
        adds = f"adds up to {nodes} node(s)" if nodes is not None else "adds nodes"
        out.append(Fix("raise-scale-limit",
                       f"raise {s.label}'s " + " and ".join(p.removeprefix("its ") for p in parts)
                       + f": room for {need} more pod(s) of the gang — evicts no one, but it {adds} (cost) and they take "
                         "provisioning time",
                       frees_nodes=nodes or 0, sufficient=True, commands=_limit_commands(s, lims, cap)))
        if len(out) >= PER_KIND:
            break
    return out


def _limit_commands(s: ScaleUpSource, lims: Mapping[str, tuple[int, int]], cap: tuple[int, int] | None) -> list[str]:
    if s.kind == NODEPOOL and lims:
        patch = '{"spec":{"limits":{' + ",".join(f"{_js(r)}:{_js(exact_quantity(r, b))}" for r, (_, b) in lims.items()) + "}}}"
        cmds = [f"kubectl get nodepools.karpenter.sh {_q(s.name)} -o yaml", f"kubectl patch nodepools.karpenter.sh {_q(s.name)} --type merge -p {_q(patch)}"]
        if cap is not None:
            cmds.append(f"# and the policy's autoscaling.nodePools entry {s.name}: maxNodes + {cap[1] - cap[0]}")
        return cmds
    if s.kind == NODE_GROUP:
        return ["kubectl -n kube-system get configmap cluster-autoscaler-status -o yaml",
                f"# raise node group {s.name}'s max size by {cap[1] - cap[0] if cap else 0}: cluster-autoscaler's "
                f"--nodes=MIN:MAX:{s.name} flag or the cloud provider's node group settings"]
    if s.kind == POLICY_POOL or cap is not None:
        return [f"# the policy's autoscaling.nodePools entry {s.name}: maxNodes + {cap[1] - cap[0] if cap else 0} "
                "(and the autoscaler behind it)"]
    return []


def _widen_fixes(gang: GangRequest, sources: Sequence[ScaleUpSource], c: Constraints, req: Mapping[str, int],
                 mpn: int | None, missing: int) -> list[Fix]:
    out: list[Fix] = []
    taken = 0
    for s in sources:
        edits = widened(s, c)
        if not edits:
            continue
        taken += 1
        for what, item, cand, c2 in edits:
            room = pods_room(cand, req, mpn)
            enough = room is None or room >= missing
            room_txt = "" if room is None else f"; it then has room for {room} pod(s) of the {missing} missing"
            if what == "requirement":
                out.append(Fix("widen-nodepool",
                               f"widen {s.label}'s requirements: {_req_text(item)} so it can launch nodes for the gang — evicts no one, "
                               f"but it adds nodes (cost) and other pods may land on them too{room_txt}",
                               sufficient=enough, commands=_widen_commands(s, item)))
            else:
                out.append(Fix("tolerate-taint",
                               f"tolerate taint {item} in the gang's pod template so {s.label} can launch nodes for it — only if "
                               f"the gang is meant for those nodes{room_txt}",
                               sufficient=enough, commands=[
                                   f"kubectl -n {_q(gang.namespace)} edit {_resource_of(gang)} {_q(gang.name)}"
                                   f"   # tolerations += {_toleration_text(item)}"]))
        if taken >= PER_KIND:
            break
    return out


def _req_text(r: NodeSelectorRequirement) -> str:
    """"add h100 to node.kubernetes.io/instance-type" / "require team In [ml]" / "let x NotIn [...]"."""
    if r.operator == "In" and len(r.values) > 1:
        return f"add {r.values[-1]} to {r.key} (In [{', '.join(r.values)}])"
    if r.operator == "In":
        return f"add the requirement {r.key} In [{r.values[0]}]"
    return f"{r.key} NotIn [{', '.join(r.values)}]" if r.values else f"drop the NotIn on {r.key}"


def _widen_commands(s: ScaleUpSource, r: NodeSelectorRequirement) -> list[str]:
    show = f"kubectl get nodepools.karpenter.sh {_q(s.name)} -o jsonpath='{{.spec.template.spec.requirements}}'"
    if r.operator == "In" and len(r.values) == 1:
        patch = ('[{"op":"add","path":"/spec/template/spec/requirements/-","value":{"key":' + _js(r.key)
                 + ',"operator":"In","values":[' + ",".join(_js(v) for v in r.values) + "]}}]")
        return [show, f"kubectl patch nodepools.karpenter.sh {_q(s.name)} --type json -p {_q(patch)}"]
    return [show, f"kubectl edit nodepools.karpenter.sh {_q(s.name)}   # spec.template.spec.requirements: "
                  f"{r.key} {r.operator} [{', '.join(r.values)}]"]


def _toleration_text(t: Taint) -> str:
    if t.value:
        return f"{{key: {t.key}, operator: Equal, value: {t.value}, effect: {t.effect}}}"
    return f"{{key: {t.key}, operator: Exists, effect: {t.effect}}}"
