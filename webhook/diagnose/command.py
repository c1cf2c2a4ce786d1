"""The CLI side of ``gangcheck diagnose`` and ``gangcheck fragmentation``: their arguments
(``add_commands``), loading the cluster (a dump, the demo, or the live cache), resolving the
target, the reference time, and printing through the renderers (``cmd_diagnose``,
``cmd_fragmentation``).

Owns the I/O (files, the live cache, stdout/stderr) and the exit codes (0 a report, 2 bad input or
a target not found); the analysis is ``analyze`` / ``fragmentation``, the output ``render_text`` /
``render_json``. The diagnosis runs through ``webhook.diagnose.diagnose`` looked up at call time,
so a wrapper installed there (bench/diagnose.py times it) sees the CLI's calls.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from shlex import quote as _q
from typing import Any

from ..cli_inputs import load_cluster_spec
from ..engine.evaluate import EngineOptions
from ..engine.snapshot import ClusterSnapshot
from .by_domain import DEFAULT_TOP, domain_fragmentation
from .fragmentation import fragmentation, parse_shape
from .render_json import render_diagnosis_json, render_fragmentation_json
from .render_text import render_diagnosis, render_domain_fragmentation, render_fragmentation
from .targets import TargetNotFound, find_gang

__all__ = ["add_commands", "cmd_diagnose", "cmd_fragmentation"]


def add_commands(sub) -> None:
    """Register ``diagnose`` and ``fragmentation`` on an argparse subparsers object."""
    from ..cli_args import time_arg

    d = sub.add_parser("diagnose", help="why a gang is pending, step by step, and fixes ranked by displacement",
                       description="Isolate why a gang cannot start: quota → fit → per-node reasons → device plugin → partial "
                                   "gangs; then the verdict and the fixes ranked by what they cost other tenants.")
    d.add_argument("target", metavar="KIND/NAME|FILE", help="a workload (e.g. pytorchjob/llama-70b-pretrain) or a manifest file")
    d.add_argument("-n", "--namespace", default=None, help="namespace of KIND/NAME (default: default)")
    d.add_argument("--cluster", required=True, metavar="PATH|demo|live", help="cluster dump, 'demo', or 'live' (kubeconfig)")
    d.add_argument("--policy", metavar="FILE", help="policy YAML (resource names, transient taints)")
    d.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format (default text)")
    d.add_argument("--skip-unsupported", action="store_true",
                   help="in a manifest file, skip documents of kinds gangcheck does not check instead of failing with exit 2")
    d.add_argument("--now", type=time_arg, default=None, metavar="TIME",
                   help="reference time: RFC 3339 (2025-06-02T12:00:00Z) or epoch seconds (default: a dump's newest "
                        "timestamp, said on stderr; the demo's own time; the clock for live)")
    d.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the live cache to sync (default 120)")
    f = sub.add_parser("fragmentation", help="free GPUs by node, stranded GPUs and a heatmap for one pod shape; --by a topology level",
                       description="For one pod shape (--shape, e.g. 8xnvidia.com/gpu): the nodes by free GPUs, the "
                                   "whole free nodes per GPU product, the free GPUs stranded on nodes that cannot take "
                                   "one such pod, the largest gang of that shape placeable now, and a heatmap of GPUs "
                                   "in use per node. Nodes count when they pass the scheduler's filters now for such "
                                   "a pod (cordoned, NotReady, tainted nodes are marked). With --by LEVEL, per "
                                   "topology domain instead (a rack, a block, any node label): GPU nodes, eligible "
                                   "nodes, whole free nodes, free GPUs and stranded GPUs (free GPUs on nodes that are "
                                   "not whole free), most whole free nodes first.",
                       epilog="Exit codes: 0 report written, 2 bad input (shape, policy, cluster, a --by label no node "
                              "carries and no Kueue Topology names).")
    f.add_argument("--cluster", required=True, metavar="PATH|demo|live", help="cluster dump, 'demo', or 'live' (kubeconfig)")
    f.add_argument("--shape", default="8xnvidia.com/gpu",
                   help="per-pod request, AMOUNTxRESOURCE[,…] with a GPU resource: 8xnvidia.com/gpu (default) or 4xnvidia.com/gpu,48xcpu")
    f.add_argument("--by", metavar="LEVEL", default=None,
                   help="group by topology domain: a node label key (topology.kubernetes.io/zone) or a level of a Kueue "
                        "Topology in the cluster data (topology.example.com/rack: a domain is then identified by the "
                        "levels above it too, as Kueue counts them); a key no node carries is an error (exit 2)")
    f.add_argument("--top", type=_positive_int, default=None, metavar="N",
                   help=f"with --by: list the N domains with the most whole free nodes (default {DEFAULT_TOP}); "
                        "the total line counts every domain")
    f.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format (default text)")
    f.add_argument("--policy", metavar="FILE", help="policy YAML (gpuResources, transientTaints)")
    f.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the live cache to sync (default 120)")


def _positive_int(text: str) -> int:
    """argparse type of ``--top``: a whole number ≥ 1."""
    import argparse

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}")
    return n


def _require_nodes(snap: ClusterSnapshot, cluster: str) -> None:
    """Raise ValueError when the cluster data holds no Node: every answer would be about an
    empty cluster (as ``gangcheck check`` refuses it)."""
    if not snap.nodes:
        raise ValueError(f"{cluster}: the cluster data holds no Node objects "
                         "(dump them with `kubectl get nodes,pods,... -A -o json`)")


def _options(policy_path: str | None) -> EngineOptions:
    if policy_path is None:  # the default policy's options, without importing pydantic (~0.15 s)
        return EngineOptions()
    from ..policy import load_policy

    return load_policy(policy_path).engine_options()


def cmd_diagnose(args) -> int:
    """``gangcheck diagnose``: exit 0 on a report, 2 for bad input or a target not found.

    A manifest file (or directory) with several gangs gets one report per gang, in document
    order — as ``gangcheck check`` checks each gang: text reports one after another, each under
    a header "gang K of N"; JSON a list of reports (one report, not a list, for one gang).
    Documents that are no gang are skipped with a note (text; JSON: ``notes`` in a lone report,
    else on stderr); a kind gangcheck does not check is an error unless ``--skip-unsupported``,
    as for ``check``."""
    import os

    from ..adapters.errors import AdapterError
    from ..cli_args import LiveConfigError
    from ..dump import DumpError

    notes: list[str] = []
    try:
        options = _options(getattr(args, "policy", None))
        manifest = os.path.exists(args.target)
        snap, objects = load_cluster_spec(args.cluster, args.timeout, lookups=not manifest)
        _require_nodes(snap, args.cluster)
        if manifest:
            found = _manifest_gangs(args, notes)
        else:
            found = [find_gang(args.target, args.namespace or "default", snap, objects)]
    except (DumpError, AdapterError, ValueError, TargetNotFound, TimeoutError, OSError, LiveConfigError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # kubeconfig missing for live, policy errors
        print(f"gangcheck: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    now = _reference_now(args, snap)
    invocation = _invocation(args, manifest)
    analyze = sys.modules[__package__].diagnose  # the package's, as a wrapper may replace it (see the docstring)
    reports = []
    for k, (gang, how) in enumerate(found):
        report = analyze(snap, gang, now, options)
        report["gang"]["found"] = how
        report["invocation"] = invocation if len(found) == 1 else f"{invocation} | jq '.[{k}]'"
        reports.append(report)
    _print_reports(args, reports, notes)
    return 0


def _manifest_gangs(args, notes: list[str]) -> list[tuple[Any, str]]:
    """The gangs of the manifest file or directory ``args.target``, in document order, each with
    how it was found; appends a note per document skipped. Raises ValueError when none is a gang."""
    from ..cli_inputs import manifest_gangs
    from ..dump import load_documents
    from ..policy import Policy

    source, docs = load_documents(args.target)
    # A diagnosis is no admission: a gang in an exempt namespace is diagnosed all the same.
    items, more = manifest_gangs(source, docs, bool(getattr(args, "skip_unsupported", False)), Policy(exemptNamespaces=[]))
    notes.extend(more)
    gangs = []
    for item in items:
        if isinstance(item, tuple):  # the webhook would pass it unchanged (e.g. a controller's child)
            obj, reason = item
            notes.append(f"skipped {obj.get('kind')} {(obj.get('metadata') or {}).get('name', '')}: {reason}")
        else:
            gangs.append(item)
    if not gangs:
        raise ValueError(f"{args.target}: no gang workload found" + (f" ({'; '.join(notes)})" if notes else ""))
    return [(g, f"manifest {args.target}") for g in gangs]


def _reference_now(args, snap: ClusterSnapshot) -> float:
    """``--now``, else the demo's own time, a dump's newest timestamp (said on stderr) or the clock."""
    from ..cli_args import reference_time

    now = args.now
    if now is None and args.cluster == "demo":
        from ..demo import DEMO_NOW

        now = DEMO_NOW
    now, time_note = reference_time(snap, args.cluster, now, time.time())
    if time_note:  # a dump read days later must not count those days as GPU-hours lost
        print(f"gangcheck: {time_note}", file=sys.stderr)
    return now


def _invocation(args, manifest: bool) -> str:
    """The command line that prints this diagnosis as JSON (the text points at it for what it leaves out)."""
    base = ["gangcheck", "diagnose", args.target]
    if args.namespace and not manifest:
        base += ["-n", args.namespace]
    base += ["--cluster", args.cluster]
    if getattr(args, "skip_unsupported", False):
        base.append("--skip-unsupported")
    if getattr(args, "policy", None):
        base += ["--policy", args.policy]
    if args.now is not None:
        base += ["--now", repr(args.now)]
    return " ".join(_q(x) for x in base + ["-o", "json"])


def _print_reports(args, reports: list[Mapping[str, Any]], notes: list[str]) -> None:
    """Print the reports as ``args.output`` says, with the notes (in the lone JSON report, else on
    stderr for JSON, after the text)."""
    if args.output == "json":
        if len(reports) == 1 and notes:
            reports[0]["notes"] = notes
        elif notes:
            for note in notes:
                print(f"gangcheck: note: {note}", file=sys.stderr)
        print(render_diagnosis_json(reports))
        return
    for k, report in enumerate(reports):
        if len(reports) > 1:
            g = report["gang"]
            if k:
                print()
            print(f"=== gang {k + 1} of {len(reports)}: {g['kind']} {g['namespace']}/{g['name']} ===")
        print(f"({report['gang']['found']})")
        print(render_diagnosis(report))
    for note in notes:
        print(f"note: {note}")


def cmd_fragmentation(args) -> int:
    """``gangcheck fragmentation``: exit 0, or 2 for bad input."""
    from ..adapters.errors import AdapterError
    from ..cli_args import LiveConfigError
    from ..dump import DumpError

    try:
        options = _options(getattr(args, "policy", None))
        shape = parse_shape(args.shape, options)
        if getattr(args, "top", None) is not None and getattr(args, "by", None) is None:
            raise ValueError("--top N: only with --by LEVEL (it bounds the domains listed)")
        snap, _ = load_cluster_spec(args.cluster, args.timeout)
        _require_nodes(snap, args.cluster)
        if getattr(args, "by", None) is not None:
            rep = domain_fragmentation(snap, args.by, shape, options, args.top or DEFAULT_TOP)
    except (DumpError, AdapterError, ValueError, TimeoutError, OSError, LiveConfigError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"gangcheck: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "by", None) is not None:
        print(render_fragmentation_json(rep) if args.output == "json" else render_domain_fragmentation(rep))
        return 0
    rep = fragmentation(snap, shape, options)
    if args.output == "json":
        print(render_fragmentation_json(rep))
    else:
        print(render_fragmentation(rep, color=sys.stdout.isatty()))
    return 0
