"""The text renderers: ``render_diagnosis`` prints a ``DiagnosisReport`` (``webhook.diagnose.report``)
— steps (question, ``$ command``, ``found:`` lines, ``means:``), the verdict line and the ranked fixes
with their costs — and ``render_fragmentation`` a fragmentation report (histogram, heatmap).

Owns the wording and layout of ``gangcheck diagnose`` / ``gangcheck fragmentation`` text; decides
nothing (every fact and meaning comes from the report). Quantities are printed in Kubernetes units
(``format_quantity``); times as RFC 3339 UTC. No I/O: returns strings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from shlex import quote as _q
from typing import Any

from ..engine.quantity import format_quantity
from ..engine.text import plural
from ..engine.wait.result import format_duration
from .report import (SAMPLES, AutoscalerStep, DevicePluginStep, DiagnosisReport, FitStep, NodesStep, PartialGangsStep, QuotaStep,
                     Step, TopologyStep)

__all__ = ["render_diagnosis", "render_fragmentation", "render_domain_fragmentation", "COMMANDS_SHOWN"]

#: Commands of one fix shown in the text; past it the last line says how to list all of them.
COMMANDS_SHOWN = 12
_MARK = {"ok": "ok", "blocking": "BLOCKING", "info": "info"}


def _fmt(r: str, v: int) -> str:
    return f"{format_quantity(r, int(v))} {r}"


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def render_diagnosis(report: DiagnosisReport | Mapping[str, Any]) -> str:
    """Plain text of a ``diagnose`` report (the model, or its JSON dict as ``diagnose()`` returns
    it): steps (question, $ command, found, means), the verdict line and the ranked fixes with
    their costs."""
    if not isinstance(report, DiagnosisReport):
        report = DiagnosisReport.from_dict(report)
    from ..cli_args import kind_label

    g, c = report.gang, report.cluster
    lines = [f"Why is {kind_label(g.kind, g.get('api_version'))} {g.namespace}/{g.name} ({plural(g.pods, 'pod')}) not running?  "
             f"cluster: {c.source or 'dump'} ({plural(c.nodes, 'node')}, {plural(c.pods, 'pod')})", ""]
    for i, s in enumerate(report.steps, 1):
        lines.append(f"{i}. {s.name} [{_MARK.get(s.status, s.status)}] — {s.question}")
        lines.append(f"   $ {s.command}")
        for ln in findings_lines(s):
            lines.append(f"   found: {ln}")
        lines.append(f"   means: {s.meaning}")
        lines.append("")
    lines.append(f"Verdict: {report.verdict}")
    if report.fixes:
        lines.append("")
        lines.append("Fixes, least displacement first:")
        for i, f in enumerate(report.fixes, 1):
            lines.extend(_fix_lines(report, i, f))
    return "\n".join(lines)


def _fix_lines(report: DiagnosisReport, i: int, f: Mapping[str, Any]) -> list[str]:
    """The lines of fix number ``i`` (1-based): action and summary, cost and what it buys, its
    commands (``COMMANDS_SHOWN`` at most, the last line then says how to list every one)."""
    cost = "no displacement" if not f["displaced_pods"] else (
        f"displaces {f['displaced_pods']} pod(s) / {f['displaced_gpus']} GPU(s) of {len(f['tenants'])} tenant(s) "
        f"({', '.join(f['tenants'][:4])}), top priority {f['max_victim_priority']}, {f['gpu_hours_lost']:.1f} GPU-h lost, "
        f"{f['pdb_violations']} PDB violation(s)")
    buys = []
    if f["frees_nodes"]:
        buys.append(f"{f['frees_nodes']} node(s)")
    if f["expected_start"] is not None:
        buys.append(f"start at {_stamp(f['expected_start'])}")
    buys.append("enough alone" if f["sufficient"] else "not enough alone")
    lines = [f"{i:>2}. [{f['action']}] {f['summary']}", f"      cost: {cost}; buys: {', '.join(buys)}"]
    cmds = f["commands"]
    shown = cmds if len(cmds) <= COMMANDS_SHOWN else cmds[:COMMANDS_SHOWN - 1]
    for cmd in shown:
        lines.append(f"      $ {cmd}")
    if len(shown) < len(cmds):
        lines.append(f"      … and {len(cmds) - len(shown)} more command(s), every one in order: "
                     f"{_json_invocation(report)} | jq -r '.fixes[{i - 1}].commands[]'")
    return lines


def _json_invocation(report: DiagnosisReport) -> str:
    """The command that prints ``report`` as JSON (``report.invocation``, set by the CLI),
    for pointing at the parts the text leaves out."""
    if report.invocation:
        return report.invocation
    g = report.gang
    return f"gangcheck diagnose {_q(g.kind.lower() + '/' + g.name)} -n {_q(g.namespace)} --cluster CLUSTER -o json"


# ---------------------------------------------------------------- the "found:" lines of each step


def findings_lines(step: Step) -> list[str]:
    """The ``found:`` lines of one step (without the prefix)."""
    render = _FINDINGS.get(step.name)
    return render(step) if render is not None else []


def _quota_lines(f: QuotaStep) -> list[str]:
    out: list[str] = []
    if f.system == "kueue":
        out.extend(_kueue_lines(f))
    elif f.system == "volcano":
        out.append(f"Volcano queue {f.get('queue')} ({f.get('state') or 'Open'}): capability "
                   + (", ".join(_fmt(r, v) for r, v in (f.get("capability") or {}).items()) or "none")
                   + "; allocated " + (", ".join(_fmt(r, v) for r, v in (f.get("allocated") or {}).items()) or "nothing")
                   + "; request " + (", ".join(_fmt(r, v) for r, v in (f.get("request") or {}).items()) or "nothing"))
    else:
        out.append("no queue")
    if f.get("orphan_pod_groups"):
        out.append(f"orphan PodGroups ({len(f.orphan_pod_groups)}): " + ", ".join(f.orphan_pod_groups[:10]))
    return out


def _kueue_lines(f: QuotaStep) -> list[str]:
    out = [f"LocalQueue {f.get('local_queue')} → ClusterQueue {f.get('cluster_queue')}"]
    req = f.get("request") or {}
    for flavor, per in (f.get("limits") or {}).items():
        for r, lim in per.items():
            mx = "unlimited" if lim["maximum"] is None else format_quantity(r, lim["maximum"])
            bl = "none" if lim["borrowing_limit"] is None else format_quantity(r, lim["borrowing_limit"])
            out.append(f"{flavor} {r}: request {format_quantity(r, req.get(r, 0))}, nominal {format_quantity(r, lim['nominal'])}, "
                       f"borrowing limit {bl}, max {mx}, in use {format_quantity(r, lim['usage'])}")
    if f.has("pending_workloads"):
        seen = "Workloads" if f.has("workloads_ahead") else "Pending pods"
        out.append(f"workloads: {f.admitted_workloads} admitted, {f.pending_workloads} pending "
                   f"({f.get('queueing_strategy')}); gangs ahead seen as {seen}: {f.get('ahead_total', len(f.get('ahead') or {}))}")
    own = f.get("own_workload")
    if own:
        out.append(f"own Workload {own['name']}: {own['state']}" + (f" — {own['message']}" if own.get("message") else ""))
    for k, w in list((f.get("workloads_ahead") or {}).items())[:5]:
        made = "" if w.get("created") is None else ", created " + _stamp(w["created"])
        out.append(f"ahead: {k} ({w['owner'] or 'no owner'}): {w['pods']} pods, {w['gpus']} GPUs, priority {w['priority']}{made}")
    if f.get("workloads_ahead_total", 0) > 5:
        out.append(f"… {f.workloads_ahead_total - 5} more Workload(s) ahead")
    h = f.get("holding")
    if h:
        out.append(f"holding quota: {h['workloads']} admitted Workload(s), {h['pods']} pods, {h['gpus']} GPUs; largest: "
                   + ", ".join(f"{t['workload']} ({t['gpus']} GPUs, priority {t['priority']})" for t in h["top"][:3]))
    return out


def _fit_lines(f: FitStep) -> list[str]:
    if not f.findings():
        return []
    out = [f"{f.nodes_total} nodes, {f.nodes_eligible_now} eligible now ({f.nodes_eligible_ever} ever), "
           f"{f.nodes_fit_now} can take a {f.pod_set} pod now",
           f"pods: {f.pods_needed} needed, {f.pods_placeable_now} placeable now, deficit {f.deficit}"
           + (f" ({f.own_pods_bound} of its pods already bound)" if f.get("own_pods_bound") else "")]
    if f.has("gpu_resource"):
        out.append(f"{f.gpu_resource}: {f.gpus_free_cluster} free in the cluster, {f.gpus_free_eligible} on eligible nodes, "
                   f"{f.gpus_stranded} stranded ({f.stranded_ratio * 100:.1f}%), {f.gpus_needed} needed")
    return out


def _nodes_lines(f: NodesStep) -> list[str]:
    out = [f.summary] if f.get("summary") else []
    samples = f.get("samples") or {}
    for r, c in sorted((f.get("reasons") or {}).items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(f"{c:>6}  {r}  e.g. {', '.join(samples.get(r, [])[:SAMPLES])}")
    return out


def _device_plugin_lines(f: DevicePluginStep) -> list[str]:
    out = [f"{f.nodes_with_problems} node(s) with device-plugin signals, {f.eligible_nodes_with_problems} of them eligible for this gang"]
    for e in f.get("nodes", [])[:5]:
        pods = ", ".join(f"{p['namespace']}/{p['name']} {p['phase']}" + ("" if p.get("bound", True) else " (unbound)")
                         + (" not ready" if p.get("ready") is False else "")
                         + (f" {p['restarts']} restart(s)" if p.get("restarts") else "")
                         for p in e.get("plugin_pods", [])) or "no plugin pod in the snapshot"
        out.append(f"{e['node']}: {'; '.join(e['problems'])} [plugin: {pods}]")
    return out


def _partial_gangs_lines(f: PartialGangsStep) -> list[str]:
    out = [f"{f.partial_gangs_total} partial gang(s); deadlocked pairs: {len(f.deadlocks)}"]
    for g in f.get("partial_gangs", [])[:5]:
        held = "" if g["gpus_held"] is None else f", {g['gpus_held']} GPUs held"
        out.append(f"{g['gang']}: {g['bound']} bound, {g['pending']} pending{held}")
    return out


def _autoscaler_lines(f: AutoscalerStep) -> list[str]:
    """The sources (limits, usage, nodes, room; why the others do not match, per pod set), each
    with its commands; the gang's ProvisioningRequests; the notes."""
    if not f.get("enabled", True):
        return [f"autoscaling off in the policy; {plural(f.get('sources_total', 0), 'source')} ignored"]
    prov = f.get("provisioning") or {}
    head = (f"{plural(f.sources_total, 'source')}, {len(f.get('matching') or [])} matching the main pod set "
            f"({', '.join(f.get('matching') or []) or 'none'}); {plural(f.get('pods_missing', 0), 'pod')} "
            + ("need new nodes" if f.get("required", True) else "have no room on the nodes now"))
    if prov:
        head += f"; new nodes ~{format_duration(prov['p50_s'])} to Ready"
        head += "" if prov["p90_s"] == prov["p50_s"] else f" (p90 {format_duration(prov['p90_s'])})"
        head += f", {prov['basis']}"
    out = [head]
    for e in f.get("sources") or []:
        out.append(_source_line(e))
        out.extend(f"  $ {c}" for c in e.get("commands") or [])
    if f.get("sources_total", 0) > len(f.get("sources") or []):
        out.append(f"… {f.sources_total - len(f.sources)} more source(s)")
    for p in f.get("provisioning_requests") or []:
        owner = f", {p['owner']}" if p.get("owner") else ""
        out.append(f"ProvisioningRequest {p['namespace']}/{p['name']} ({p['class'] or 'no class'}, {plural(p['pods'], 'pod')}{owner}): "
                   f"{p['state'] or 'no condition'}" + (f" — {p['message']}" if p.get("message") else "") + f" — {p['means']}")
    if f.get("provisioning_requests_total", 0) > len(f.get("provisioning_requests") or []):
        out.append(f"… {f.provisioning_requests_total - len(f.provisioning_requests)} more ProvisioningRequest(s)")
    if f.get("provisioning_requests"):
        ns = f.provisioning_requests[0]["namespace"]
        out.append(f"  $ kubectl get provisioningrequests.autoscaling.x-k8s.io -n {_q(ns)}   # Provisioned / Failed and their messages")
    out.extend(f"note: {n}" for n in f.get("notes") or [])
    return out


def _source_line(e: Mapping[str, Any]) -> str:
    """"NodePool gpu-h100 (weight 10): takes worker; nvidia.com/gpu limit 512, 24 in use, 488 left;
    3 nodes, 2 pending NodeClaims; room for 61 pods, 61 new nodes needed" — or why it does not
    match, pod set by pod set."""
    head = e["label"] + (f" (weight {e['weight']})" if e.get("weight") else "")
    why = e.get("mismatches") or {}
    parts = []
    if e.get("matches"):
        parts.append("takes " + ", ".join(e["matches"]))
    for ps, reasons in why.items():
        parts.append(f"does not take {ps}: " + "; ".join(reasons))
    lims = [f"{r} limit {format_quantity(r, v)}, {format_quantity(r, e['in_use'].get(r, 0))} in use, "
            f"{format_quantity(r, e['remaining'][r])} left" for r, v in (e.get("limits") or {}).items()]
    parts.append("; ".join(lims) if lims else "no limits")
    if e.get("max_new_nodes") is not None:
        parts.append(f"at most {e['max_new_nodes']} more node(s)")
    pending = e.get("pending", 0)
    parts.append(f"{plural(e.get('nodes', 0), 'node')}, "
                 + (plural(pending, "pending NodeClaim") if e["kind"] == "NodePool" else f"{pending} pending"))
    if e.get("provisioning_s") is not None:
        parts.append(f"~{format_duration(e['provisioning_s'])} to Ready")
    if e.get("matches"):
        room = "unbounded room" if e.get("pods_room") is None else f"room for {plural(e['pods_room'], 'pod')}"
        if e.get("nodes_needed") is not None:
            room += f", {plural(e['nodes_needed'], 'new node')} needed"
        parts.append(room)
    return f"{head}: " + "; ".join(parts)


def _topology_lines(f: TopologyStep) -> list[str]:
    where = "" if not f.get("topology") else f" (Topology {f.topology}" + (f": {' → '.join(f.keys)})" if len(f.keys) > 1 else ")")
    out = [f"{f.pod_set}: {f.pods_needed} pods required in one domain of {f.level}{where}"
           + (f", with pod set group {f.group}" if f.get("group") else "")]
    out.append(f"{plural(f.domains_total, 'domain')}: {f.domains_fit_ever} could hold it when empty, {f.domains_fit_now} now; "
               f"the cluster has room for {f.pods_fit_now_cluster} such pods on {plural(f.nodes_fit_now_cluster, 'node')} now")
    for dom in f.get("domains") or []:
        out.append(f"  {dom['domain']}: room for {dom['pods_now']} of {f.pods_needed} now on {plural(dom['nodes_now'], 'node')}, "
                   f"{dom['pods_ever']} when empty on {plural(dom['nodes_ever'], 'node')}")
    if f.domains_total > len(f.get("domains") or []):
        out.append(f"  … {plural(f.domains_total - len(f.domains), 'more domain')}")
    if f.get("nodes_outside"):
        out.append(f"{plural(f.nodes_outside, 'node')} that could take a pod lack a label of {', '.join(f.keys)} (in no domain)")
    eng = f.get("engine_finding")
    if eng:
        out.append(f"engine: {eng['code']} ({eng['severity']}): {eng['message']}")
    return out


_FINDINGS: dict[str, Callable[[Any], list[str]]] = {
    "quota": _quota_lines, "fit": _fit_lines, "nodes": _nodes_lines, "device-plugin": _device_plugin_lines,
    "partial-gangs": _partial_gangs_lines, "autoscaler": _autoscaler_lines, "topology": _topology_lines,
}


# ---------------------------------------------------------------- fragmentation


_HEAT_CHARS = "0123456789"


def render_fragmentation(rep: dict, *, color: bool = False, width: int = 64) -> str:
    """Text of a ``fragmentation`` report. ``color`` renders the heatmap with rich (ANSI);
    otherwise plain: one character per node = GPUs in use (``#`` ≥ 10), ``c`` cordoned,
    ``n`` NotReady, ``d`` devices missing, ``x`` excluded by taints."""
    shape = ", ".join(_fmt(r, v) for r, v in rep["shape"].items())
    lines = [f"Fragmentation for pods of {shape} ({rep['resource']}): {rep['gpu_nodes']} GPU nodes, {rep['eligible_nodes'] if 'eligible_nodes' in rep else 0} schedulable now"]
    lines.append("nodes by free GPUs:")
    hist = rep["histogram"]
    most = max(hist.values(), default=0) or 1
    for k, v in hist.items():
        bar = "█" * max(1 if v else 0, round(30 * v / most))
        lines.append(f"  {k:>2} free  {v:>6}  {bar}")
    lines.append("whole free nodes by product: " + (", ".join(f"{p} {n}" for p, n in rep["whole_free_by_product"].items()) or "none"))
    lines.append(f"free {rep['free']} {rep['resource']}, stranded {rep['stranded']} ({rep['ratio'] * 100:.1f}%) on nodes that cannot take one pod")
    lines.append(f"largest gang of this shape placeable now: {rep['largest_gang']} pod(s) on {rep['nodes_fit']} node(s)")
    lines.append("")
    lines.append("GPUs in use per node (0–9 in use, # ≥10, c cordoned, n NotReady, d devices missing, x excluded):")
    cells = []
    for h in rep["heatmap"]:
        st = h["state"]
        ch = {"cordoned": "c", "notready": "n", "devices": "d", "excluded": "x"}.get(st)
        if ch is None:
            ch = _HEAT_CHARS[h["used"]] if h["used"] < 10 else "#"
        cells.append((ch, h))
    if not color:
        for i in range(0, len(cells), width):
            lines.append("  " + "".join(ch for ch, _ in cells[i:i + width]))
        return "\n".join(lines)
    from io import StringIO

    from rich.console import Console
    from rich.text import Text

    buf = StringIO()
    con = Console(file=buf, force_terminal=True, color_system="truecolor", width=width + 4)
    for i in range(0, len(cells), width):
        t = Text("  ")
        for ch, h in cells[i:i + width]:
            if h["state"] != "ok":
                t.append(ch, style="bold red")
                continue
            frac = h["used"] / max(1, h["installed"])
            style = "green" if frac == 0 else "yellow" if frac < 0.5 else "dark_orange" if frac < 1 else "grey50"
            t.append("█", style=style)
        con.print(t)
    legend = "  █ green free, yellow <50% used, orange partly used, grey full; red letters: c n d x as above"
    return "\n".join(lines) + "\n" + buf.getvalue().rstrip("\n") + "\n" + legend



def render_domain_fragmentation(rep: Mapping[str, Any]) -> str:
    """Text of a ``fragmentation --by`` report (``by_domain.domain_fragmentation``): a header, one
    row per domain shown (GPU nodes, eligible, whole free nodes, free and stranded GPUs), a line
    for the domains left out, the total line and the GPU nodes in no domain."""
    keys = rep["keys"]
    where = f" (Kueue Topology {rep['topology']}: {' → '.join(keys)})" if rep.get("topology") else ""
    shape = ", ".join(_fmt(r, v) for r, v in rep["shape"].items())
    lines = [f"Fragmentation by {rep['by']}{where}, {rep['resource']}; eligible = schedulable now for a pod of {shape}:"]
    rows = [(d["domain"], d) for d in rep["domains"]]
    name_w = max([len("domain"), len("total")] + [len(n) for n, _ in rows])
    head = ("nodes", "eligible", "whole free", "free GPUs", "stranded GPUs")
    lines.append(f"  {'domain':<{name_w}}  " + "  ".join(f"{h:>{len(h)}}" for h in head))

    def row(name: str, d: Mapping[str, Any]) -> str:
        vals = (d["nodes"], d["eligible"], d["whole_free"], d["free"], d["stranded"])
        return f"  {name:<{name_w}}  " + "  ".join(f"{v:>{len(h)}}" for v, h in zip(vals, head))

    lines.extend(row(n, d) for n, d in rows)
    more = rep["domains_total"] - rep["shown"]
    if more > 0:
        lines.append(f"  … {plural(more, 'more domain')} (--top N shows more)")
    lines.append(row("total", rep["total"]) + f"   ({plural(rep['domains_total'], 'domain')})")
    out = rep.get("outside") or {}
    if out.get("nodes"):
        lines.append(f"  {plural(out['nodes'], 'GPU node')} lack a label of {', '.join(keys)} (in no domain): "
                     f"{out['whole_free']} whole free, {out['free']} GPUs free")
    lines.append("stranded: free GPUs on nodes that are not whole free (a pod asking for a whole node cannot use them)")
    return "\n".join(lines)
