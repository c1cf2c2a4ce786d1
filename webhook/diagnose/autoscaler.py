"""The autoscaler step of ``diagnose`` (issue #16): which node autoscalers could add nodes for the
gang, and what stops them?

Owns the step's facts (``autoscaler_step``): the sources — Karpenter NodePools, cluster-autoscaler
node groups, the policy's pools (``engine.autoscale.sources.effective_sources``) — that could take
each pod set, and why each other one cannot, requirement by requirement
(``engine.autoscale.match.mismatches``); per source its limits, what its nodes hold and what is
left (``ScaleUpSource.remaining``), its nodes now and NodeClaims pending, the room it has for the
main pod shape and the new nodes that takes (``engine.autoscale.bounds``); the gang's
ProvisioningRequests (Kueue's ProvisioningRequest admission check) and their state; the
provisioning time (``engine.wait.provisioning``); what was not read (``AutoscalingState.notes``).
Does not render text. Pure: no I/O.

Silent when the cluster shows no autoscaler: no step at all (``None``); one line when the policy
turns autoscaling off though the cluster shows some.
Units: scheduler units (millicores, bytes, counts); seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from shlex import quote as _q
from typing import Any

from ..engine.autoscale.bounds import nodes_for, pods_room
from ..engine.autoscale.match import mismatches
from ..engine.autoscale.model import NODE_GROUP, NODEPOOL, NODEPOOL_LABEL, ProvisioningRequestInfo, ScaleUpSource
from ..engine.autoscale.sources import effective_sources
from ..engine.decision import Decision
from ..engine.evaluate import EngineOptions
from ..engine.fixes import GangView
from ..engine.fixes.view import pod_set_constraints
from ..engine.model import GangRequest
from ..engine.quantity import format_quantity
from ..engine.snapshot import ClusterSnapshot
from ..engine.text import plural
from ..engine.wait.provisioning import provisioning_estimate
from ..engine.wait.result import format_duration
from .report import SAMPLES, AutoscalerStep

__all__ = ["autoscaler_step", "gang_provisioning_requests", "PR_STATE_MEANING", "SOURCES_SHOWN"]

QUESTION = "Which node autoscalers could add nodes for it, and what stops them?"
#: Sources and ProvisioningRequests listed in the findings (the totals say how many there are).
SOURCES_SHOWN = 10
STATUS_CONFIGMAP = "kubectl -n kube-system get configmap cluster-autoscaler-status -o yaml"

#: What a ProvisioningRequest's state means (cluster-autoscaler provisioningrequest/apis
#: autoscaling.x-k8s.io/v1 types.go: the conditions Accepted, Provisioned, Failed,
#: BookingExpired, CapacityRevoked).
PR_STATE_MEANING: Mapping[str, str] = {
    "Provisioned": "the capacity is there (booked for the pods); Kueue admits the Workload",
    "Failed": "cluster-autoscaler could not provision it; Kueue retries with a new request",
    "BookingExpired": "the booked capacity was released before the pods were scheduled",
    "CapacityRevoked": "the capacity is gone; Kueue evicts the Workload and asks again",
    "Accepted": "accepted by cluster-autoscaler, not provisioned yet",
    "": "not accepted by cluster-autoscaler yet (is it running with ProvisioningRequests enabled?)",
}
_PR_BLOCKING = frozenset({"Failed", "CapacityRevoked", "BookingExpired"})


def gang_provisioning_requests(snap: ClusterSnapshot, gang: GangRequest) -> list[ProvisioningRequestInfo]:
    """The ProvisioningRequests Kueue made for ``gang``: those owned by the gang's Workload
    (``KueueWorkload.belongs_to``) or, without Workloads in the snapshot, by a Workload named as
    Kueue names the gang's (``<kind>-<name>-<hash>``: kueue pkg/controller/jobframework
    GetWorkloadNameForOwnerWithGVK; Kueue names the request ``<workload>-<check>-<attempt>``,
    pkg/controller/admissionchecks/provisioning ProvisioningRequestName)."""
    prs = [p for p in snap.autoscaling.provisioning_requests if p.namespace == gang.namespace]
    if not prs:
        return []
    own = {wl.name for wl in snap.kueue.workloads.values()
           if wl.namespace == gang.namespace and wl.belongs_to(gang.kind, gang.namespace, gang.name)}
    prefix = f"{gang.kind.lower()}-{gang.name}-"

    def mine(p: ProvisioningRequestInfo) -> bool:
        kind, _, name = p.owner.partition("/")
        if own:
            return (kind == "Workload" and name in own) or any(p.name.startswith(w + "-") for w in own)
        return (kind == "Workload" and name.startswith(prefix)) or p.name.startswith(prefix)

    return sorted((p for p in prs if mine(p)), key=lambda p: p.name)


def _pods_missing(d: Decision, view: GangView) -> int:
    """NeedsScaleUp's ``pods_missing`` when the engine found one, else the main shape's deficit now."""
    f = next((f for f in d.findings if f.code == "NeedsScaleUp"), None)
    v = f.data.get("pods_missing") if f is not None else None
    return int(v) if isinstance(v, int) else view.deficit


def _source_commands(s: ScaleUpSource, claims: bool = True) -> list[str]:
    """What a person runs to see the source, each with what it shows (a NodePool's NodeClaims
    with ``claims``)."""
    if s.kind == NODEPOOL:
        name = _q(s.name)
        out = [f"kubectl get nodepools.karpenter.sh {name} -o yaml   # spec.limits, spec.template.spec.requirements / taints; "
               "status.resources is what its nodes hold"]
        if claims:
            out.append(f"kubectl get nodeclaims.karpenter.sh -l {_q(f'{NODEPOOL_LABEL}={s.name}')}   # its NodeClaims: "
                       "READY False = launched, not Ready yet")
        return out
    if s.kind == NODE_GROUP:
        return [f"{STATUS_CONFIGMAP}   # node group {s.name}: minSize / maxSize / cloudProviderTarget, health, scale-up state"]
    if s.labels:
        sel = ",".join(f"{k}={v}" for k, v in s.labels.items())
        return [f"kubectl get nodes -l {_q(sel)}   # the nodes of policy pool {s.name} now"]
    return []


def _source_fact(s: ScaleUpSource, pod_sets, consts, main: int, req: Mapping[str, int], mpn: int | None,
                 missing: int, assigned: Mapping[str, Any]) -> dict[str, Any]:
    """One source's entry of the step's ``sources``."""
    why = {}
    matches = []
    for ps, c in zip(pod_sets, consts):
        m = mismatches(s, c)
        if m:
            why[ps.name] = list(m)
        else:
            matches.append(ps.name)
    room = pods_room(s, req, mpn) if pod_sets[main].name in matches else 0
    need = min(missing, room) if room is not None else missing
    pool = assigned.get((s.kind, s.name)) or {}
    return {
        "name": s.name, "kind": s.kind, "label": s.label, "origin": s.origin, "weight": s.weight,
        "matches": matches, "mismatches": why,
        "limits": {r: int(v) for r, v in s.limits.items()},
        "in_use": {r: int(v) for r, v in s.in_use.items()},
        "remaining": {r: s.remaining(r) for r in s.limits},
        "max_new_nodes": s.max_new_nodes, "nodes": s.nodes, "pending": s.pending,
        "node_shape": None if s.node_shape is None else {r: int(v) for r, v in s.node_shape.items()},
        "provisioning_s": s.provisioning_s,
        "pods_room": room,
        "pods_assigned": pool.get("pods"),
        "nodes_needed": pool.get("nodes_needed") if pool else (nodes_for(s, req, mpn, need) if need > 0 and room != 0 else None),
        "commands": _source_commands(s, claims=bool(matches or s.nodes or s.pending)),
    }


def autoscaler_step(snap: ClusterSnapshot, gang: GangRequest, d: Decision, view: GangView,
                    options: EngineOptions) -> AutoscalerStep | None:
    """The autoscaler step, or None when the cluster shows no autoscaler (and the policy declares
    none). Blocking when pods need new nodes and no source can add them (none matches, their
    limits leave too little room) or a ProvisioningRequest of the gang failed; "info" when the
    sources can add them (the gang waits for provisioning); "ok" when it needs none."""
    sources = effective_sources(snap, options)
    prs_all = snap.autoscaling.provisioning_requests
    shown = snap.autoscaling.sources
    if not sources and not prs_all:
        if not shown:
            return None
        return AutoscalerStep(
            question=QUESTION, command=_first_command(shown) or STATUS_CONFIGMAP, enabled=False, sources_total=len(shown),
            summary="", meaning=f"The policy turns autoscaling off (autoscaling.enabled: false): the {plural(len(shown), 'source')} "
                                "the cluster shows are not counted on.", status="info")
    prs = gang_provisioning_requests(snap, gang)
    missing = _pods_missing(d, view) if view.pod_sets else 0
    facts: dict[str, Any] = {"enabled": True, "sources_total": len(sources), "pods_missing": missing}
    if not view.pod_sets:
        entries, matching = [], []
    else:
        pod_sets = view.pod_sets
        flavors = (d.quota or {}).get("flavors") or {}
        consts = [pod_set_constraints(snap, ps, flavors, options) for ps in pod_sets]
        ps = pod_sets[view.main]
        req = {r: int(v) for r, v in ps.requests.items() if v}
        need_up = next((f for f in d.findings if f.code == "NeedsScaleUp"), None)
        pools = (need_up.data.get("pools") or []) if need_up is not None else []
        assigned = {(p.get("kind"), p.get("name")): p for p in pools if isinstance(p, Mapping)}
        entries = [_source_fact(s, pod_sets, consts, view.main, req, ps.max_per_node, missing, assigned) for s in sources]
        matching = [e for e in entries if ps.name in e["matches"]]
    used = [s for s, e in zip(sources, entries) if e in matching]
    p50, p90, basis = provisioning_estimate(snap, options, sources=used or sources)
    facts.update(
        matching=[e["label"] for e in matching],
        sources=entries[:SOURCES_SHOWN],
        provisioning={"p50_s": int(round(p50)), "p90_s": int(round(p90)), "basis": basis},
        provisioning_requests=[_pr_fact(p) for p in prs[:SOURCES_SHOWN]],
        provisioning_requests_total=len(prs),
        notes=list(snap.autoscaling.notes),
    )
    status, summary, meaning = _judge(view, missing, matching, entries, prs, p50, basis)
    return AutoscalerStep(question=QUESTION, command=_step_command(gang, prs, matching, entries), summary=summary,
                          meaning=meaning, status=status, **facts)


def _pr_fact(p: ProvisioningRequestInfo) -> dict[str, Any]:
    return {"namespace": p.namespace, "name": p.name, "class": p.class_name, "pods": p.pods, "state": p.state,
            "message": p.message, "owner": p.owner, "means": PR_STATE_MEANING.get(p.state, p.state)}


def _first_command(sources: Sequence[ScaleUpSource]) -> str:
    cmds = [c for s in sources for c in _source_commands(s)]
    return cmds[0].split("   #", 1)[0] if cmds else ""


def _step_command(gang: GangRequest, prs, matching, entries) -> str:
    """The one command of the step: the gang's ProvisioningRequests when it has some, else the
    first matching source's (its NodeClaims when it has some pending), else the first source's."""
    if prs:
        return f"kubectl get provisioningrequests.autoscaling.x-k8s.io -n {_q(gang.namespace)}"
    for e in matching[:1] or entries[:1]:
        cmds = e["commands"]
        if cmds:
            pick = cmds[1] if matching and e["kind"] == NODEPOOL and e["pending"] and len(cmds) > 1 else cmds[0]
            return pick.split("   #", 1)[0]
    return STATUS_CONFIGMAP


def _limits_text(e: Mapping[str, Any]) -> str:
    """"nvidia.com/gpu limit 512, 24 in use" for each limit; "no limits" without."""
    parts = [f"{r} limit {format_quantity(r, v)}, {format_quantity(r, e['in_use'].get(r, 0))} in use" for r, v in e["limits"].items()]
    if e["max_new_nodes"] is not None:
        parts.append(f"at most {e['max_new_nodes']} more node(s)")
    return "; ".join(parts) or "no limits"


def _judge(view: GangView, missing: int, matching, entries, prs, p50: float, basis: str) -> tuple[str, str, str]:
    """(status, summary for the verdict line, meaning)."""
    failed = [p for p in prs if p.state in _PR_BLOCKING]
    pr_txt = "".join(f" ProvisioningRequest {p.name} is {p.state}: {p.message or PR_STATE_MEANING[p.state]}." for p in failed[:SAMPLES])
    if missing <= 0:
        return ("blocking" if failed else "ok", "", "The gang needs no new nodes: it fits on the nodes that exist." + pr_txt)
    ps = view.pod_sets[view.main].name
    if not entries:
        return ("blocking" if failed else "info", "",
                f"{plural(missing, 'pod')} of pod set {ps} need new nodes; the cluster shows ProvisioningRequests but no NodePool or "
                "node group gangcheck could read, so what the autoscaler may add is unknown (see the notes)." + pr_txt)
    if not matching:
        why = "; ".join(f"{e['label']}: {e['mismatches'].get(ps, ['?'])[0]}" for e in entries[:SAMPLES])
        more = f"; … and {len(entries) - SAMPLES} more" if len(entries) > SAMPLES else ""
        return ("blocking", f"no autoscaler can add nodes for pod set {ps}",
                f"{plural(missing, 'pod')} of pod set {ps} need new nodes, and no autoscaler can add a node they may use — "
                f"{why}{more}. Widen a NodePool's requirements or tolerate its taint (see the fixes), or change the pods' "
                f"selector / tolerations." + pr_txt)
    rooms = [e["pods_room"] for e in matching]
    room = None if any(r is None for r in rooms) else sum(rooms)
    prov = f"~{format_duration(p50)} to Ready ({basis})"
    pending = sum(e["pending"] for e in matching)
    pend_txt = f" {plural(pending, 'node')} already launched, not Ready yet." if pending else ""
    if room is not None and room < missing:
        lim = "; ".join(f"{e['label']}: {_limits_text(e)}" for e in matching[:SAMPLES])
        return ("blocking", f"autoscaler limits leave room for {room} of the {missing} pod(s) that need new nodes",
                f"{plural(missing, 'pod')} of pod set {ps} need new nodes; the matching sources can add room for only {room} now under "
                f"their limits ({lim}). Raise a limit (see the fixes) or wait for their nodes to free.{pend_txt}" + pr_txt)
    first = next((e for e in matching if e["pods_room"] != 0), matching[0])
    nodes = first["nodes_needed"]
    adds = f"{plural(nodes, 'new node')}" if nodes is not None else "new nodes (their size is not known here)"
    summary = f"{plural(missing, 'pod')} wait for new nodes from {', '.join(e['label'] for e in matching[:SAMPLES])}, {prov}"
    return ("blocking" if failed else "info", summary,
            f"{plural(missing, 'pod')} of pod set {ps} need new nodes: {first['label']} can add {adds} "
            f"({_limits_text(first)}), {prov}.{pend_txt} The gang waits for them; nothing to fix unless that is too long." + pr_txt)
