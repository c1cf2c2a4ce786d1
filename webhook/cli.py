"""The ``gangcheck`` command line.

    gangcheck check JOB.yaml --cluster PATH|demo [--policy FILE] [--output text|json]

Exit codes: 0 every gang would be admitted (Fits or Waits), 1 a gang would be denied
(NeverFits in enforce mode), 2 bad input (the message names the file, object and field).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Sequence

from . import __version__
from .adapters import adapt, is_supported
from .adapters.errors import AdapterError
from .dump import DumpError, load_cluster, load_documents
from .engine.decision import NEVER_FITS, Decision
from .engine.evaluate import evaluate
from .engine.quantity import format_quantity
from .engine.snapshot import ClusterSnapshot

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["main", "build_parser", "render_text"]

EXIT_OK, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands check, serve, certs)."""
    p = argparse.ArgumentParser(
        prog="gangcheck",
        description="Feasibility checks for gang-scheduled GPU jobs on Kubernetes.",
        epilog="Exit codes: check — 0 admitted (Fits/Waits), 1 denied (NeverFits), 2 bad input; "
               "diagnose and fragmentation — 0 when they ran (whatever the verdict), 2 bad input or target not found.",
    )
    p.add_argument("--version", action="version", version=f"gangcheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser(
        "check",
        help="check workload manifests against a cluster dump or the demo cluster",
        description=(
            "Check each gang in JOB (a file, a directory, or - for stdin) against a cluster dump "
            "(the output of `kubectl get nodes,pods,priorityclasses,resourceflavors,clusterqueues,"
            "localqueues,cohorts,queues.scheduling.volcano.sh,podgroups -A -o yaml`) or the embedded "
            "demo cluster. Verdicts: Fits (can start now), Waits (admitted; cannot start now), "
            "NeverFits (denied: cannot start even on the empty, repaired cluster)."
        ),
        epilog="Exit codes: 0 admitted (Fits/Waits), 1 denied (NeverFits in enforce mode), 2 bad input.",
    )
    c.add_argument("job", metavar="JOB", help="workload manifest(s): file, directory, or - for stdin")
    c.add_argument("--cluster", required=True, metavar="PATH|demo", help="cluster dump (file or directory) or 'demo'")
    c.add_argument("--policy", metavar="FILE", help="policy YAML (the ConfigMap's policy.yaml); default policy if absent")
    c.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format (default text)")
    c.add_argument(
        "--skip-unsupported",
        action="store_true",
        help="skip documents of kinds gangcheck does not check instead of failing with exit 2",
    )
    _add_server_commands(sub)
    from .diagnose import add_commands as _add_diagnose_commands

    _add_diagnose_commands(sub)  # diagnose, fragmentation
    return p


def _port(text: str) -> int:
    """argparse type: a TCP port number."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {port}")
    return port


def _add_server_commands(sub) -> None:
    """``serve`` and ``certs`` (the server modules are imported only when they run)."""
    from . import certs as _certs

    s = sub.add_parser("serve", help="serve the admission webhook over TLS")
    s.add_argument("--cluster", default="demo", metavar="PATH|demo|live", help="cluster source (default demo)")
    s.add_argument("--policy", metavar="FILE", help="policy YAML, reloaded when it changes")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=_port, default=8443, help="port, 1-65535 (default 8443)")
    s.add_argument("--tls-cert", default="certs/tls.crt", metavar="FILE", help="serving certificate (default certs/tls.crt)")
    s.add_argument("--tls-key", default="certs/tls.key", metavar="FILE", help="serving key (default certs/tls.key)")
    k = sub.add_parser("certs", help="generate a CA and a serving certificate for the webhook",
                       description="Write ca.crt, ca.key, tls.crt, tls.key and print the caBundle (base64 of ca.crt).")
    _certs.build_parser(k)


# ---------------------------------------------------------------- check


def _gangs(source: str, objects: list[dict], skip_unsupported: bool) -> tuple[list, list[str]]:
    gangs, notes = [], []
    for i, obj in enumerate(objects, 1):
        if not is_supported(obj):
            if skip_unsupported and isinstance(obj, dict):
                notes.append(f"skipped document {i}: {obj.get('apiVersion')}/{obj.get('kind')} is not a kind gangcheck checks")
                continue
        gang = adapt(obj, source=source)  # raises AdapterError for unsupported kinds
        if gang is None:
            meta = obj.get("metadata") or {}
            notes.append(f"skipped document {i}: {obj.get('kind')} {meta.get('name', '')} is not a gang")
            continue
        gangs.append(gang)
    return gangs, notes


def _requests_text(requests: dict) -> str:
    order = sorted(requests, key=lambda r: (r in ("cpu", "memory", "pods", "ephemeral-storage"), r))
    return ", ".join(f"{format_quantity(r, requests[r])} {r}" for r in order if requests[r]) or "nothing"


def render_text(d: Decision, policy: Policy) -> str:
    """A person's view of one decision: verdict first, then numbers, kubectl wording."""
    g = d.gang
    outcome = {
        "Fits": "admitted",
        "Waits": "admitted with warnings",
        "NeverFits": "denied" if policy.mode == "enforce" else f"admitted ({policy.mode} mode)",
    }[d.verdict]
    lines = [f"{g['kind']} {g['namespace']}/{g['name']}: {d.verdict} — {outcome}"]
    sets = "; ".join(f"{ps['name']} {ps['count']} × ({_requests_text(ps['requests'])})" for ps in g["pod_sets"])
    lines.append(f"  gang        {g['pods']} pods: {sets}")
    q = d.quota
    if q:
        if q.get("cluster_queue"):
            head = f"LocalQueue {g['namespace']}/{q.get('local_queue')} → ClusterQueue {q['cluster_queue']}"
            lines.append(f"  quota       {head}")
            assigned = set((q.get("flavors") or {}).values())
            for flavor, per in (q.get("limits") or {}).items():
                if assigned and flavor not in assigned:
                    continue
                for r, lim in per.items():
                    mx = "unlimited" if lim["maximum"] is None else format_quantity(r, lim["maximum"])
                    req = q.get("request", {}).get(r, 0)
                    lines.append(
                        f"              {flavor} {r}: request {format_quantity(r, req)}, in use {format_quantity(r, lim['usage'])}, "
                        f"nominal {format_quantity(r, lim['nominal'])}, max {mx}"
                    )
        elif q.get("queue"):
            cap = q.get("capability") or {}
            caps = ", ".join(f"{format_quantity(r, v)} {r}" for r, v in cap.items()) or "no capability set"
            lines.append(f"  quota       Volcano queue {q['queue']}: capability {caps}")
    n = d.nodes
    if n.get("total"):
        lines.append(
            f"  nodes       {n['total']} total, {n['eligible']} eligible now, {n['fit_now']} can take a pod "
            f"of {n.get('pod_set', '')} now, {n['fit_ever']} could when empty"
        )
        lines.append(f"              {n['summary']}")
    f = d.fragmentation
    if f:
        lines.append(
            f"  fragment    {f['free']} {f['resource']} free on eligible nodes, {f['stranded']} stranded "
            f"({f['ratio'] * 100:.1f}%); pods placeable now {f['pods_placeable_now']}, needed {f['pods_needed']} "
            f"(deficit {f['deficit']})"
        )
    if d.expected_wait:
        lines.append(f"  wait        {d.expected_wait['text']}")
    if d.reasons:
        lines.append(f"  reasons     {', '.join(d.reasons)}")
    lines.append(f"  message     {d.message}")
    extra = [w for w in d.warnings if w not in d.message]
    if extra:
        lines.append("  warnings")
        lines.extend(f"    - {w}" for w in extra)
    return "\n".join(lines)


def _cluster_line(snap: ClusterSnapshot) -> str:
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(snap.skipped.items()))
    return (
        f"cluster: {snap.source or 'dump'} ({len(snap.nodes)} nodes, {len(snap.pods)} pods"
        + (f"; skipped kinds: {skipped}" if skipped else "")
        + ")"
    )


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``gangcheck check``; returns the exit code."""
    from .policy import PolicyError, load_policy  # pydantic: imported by the commands that need it

    try:
        policy = load_policy(args.policy)
        snap = load_cluster(args.cluster)
        source, objects = load_documents(args.job)
        gangs, notes = _gangs(source, objects, args.skip_unsupported)
    except (PolicyError, DumpError, AdapterError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not snap.nodes:
        print(f"gangcheck: error: {args.cluster}: the cluster data holds no Node objects "
              "(dump them with `kubectl get nodes,pods,... -A -o yaml`)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not gangs:
        print(f"gangcheck: error: {source}: no gang workload found" + (f" ({'; '.join(notes)})" if notes else ""), file=sys.stderr)
        return EXIT_BAD_INPUT
    options = policy.engine_options()
    now = snap.as_of if snap.as_of is not None else time.time()
    decisions = [evaluate(snap, g, options, now=now) for g in gangs]
    denied = any(d.verdict == NEVER_FITS for d in decisions) and policy.mode == "enforce"
    if args.output == "json":
        docs = []
        for d in decisions:
            doc = d.to_dict()
            doc["allowed"] = not (d.verdict == NEVER_FITS and policy.mode == "enforce")
            doc["cluster"] = {"source": snap.source, "nodes": len(snap.nodes), "pods": len(snap.pods), "skipped": dict(snap.skipped)}
            docs.append(doc)
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2, sort_keys=False))
    else:
        for d in decisions:
            print(render_text(d, policy))
            print()
        for note in notes:
            print(f"note: {note}")
        print(_cluster_line(snap))
    return EXIT_DENIED if denied else EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    """Run ``gangcheck serve``: the webhook over TLS until SIGINT/SIGTERM."""
    from kubernetes.config import ConfigException

    from .policy import PolicyError
    from .server import serve

    try:
        code = serve(args.cluster, args.policy, args.host, args.port, args.tls_cert, args.tls_key)
    except SystemExit as exc:  # uvicorn exits 3 when it cannot start (e.g. the port is taken)
        if exc.code in (0, None):
            return EXIT_OK
        print(f"gangcheck: error: the server could not start on {args.host}:{args.port} (see the log above)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ConfigException as exc:
        print(f"gangcheck: error: --cluster live: no Kubernetes configuration: {exc} "
              "(run in a cluster or set KUBECONFIG)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except FileNotFoundError as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (PolicyError, DumpError, AdapterError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # e.g. the port is taken
        print(f"gangcheck: error: cannot serve on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


def cmd_certs(args: argparse.Namespace) -> int:
    """Run ``gangcheck certs``: write the files and print the caBundle."""
    from .certs import generate

    try:
        bundle = generate(args.service, args.namespace, args.out, days=args.days, reuse_ca=args.reuse_ca)
    except (OSError, ValueError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"wrote {args.out}/ca.crt ca.key tls.crt tls.key for {args.service}.{args.namespace}.svc", file=sys.stderr)
    print(bundle)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gangcheck`` and ``python -m webhook``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _dispatch(parser, args)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "check":
        return cmd_check(args)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "certs":
        return cmd_certs(args)
    if args.command in ("diagnose", "fragmentation"):
        from . import diagnose

        return diagnose.cmd_diagnose(args) if args.command == "diagnose" else diagnose.cmd_fragmentation(args)
    parser.print_help()
    return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
