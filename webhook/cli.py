"""The ``gangcheck`` command line.

    gangcheck check JOB.yaml --cluster PATH|demo [--policy FILE] [--output text|json]

Exit codes: 0 every gang would be admitted (Fits or Waits), 1 a gang would be denied
(NeverFits in enforce mode), 2 bad input (the message names the file, object and field),
3 an internal error (a bug: the message says so; never 1, which scripts read as "denied").

``check`` decides as the webhook does (``admission.admission_outcome``, ``skip_reason``): the
same denial rule per mode, the same exempt namespaces, the same warnings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Sequence

from . import __version__
from . import admission as adm
from .adapters.errors import AdapterError
from .cli_args import kind_label, port as _port, reference_time, time_arg
from .cli_inputs import load_cluster_spec, manifest_gangs
from .dump import DumpError, load_cluster, load_documents
from .engine.decision import Decision
from .engine.evaluate import evaluate
from .engine.quantity import format_quantity
from .engine.snapshot import ClusterSnapshot
from .engine.text import plural

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["main", "build_parser", "render_text"]

EXIT_OK, EXIT_DENIED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands check, serve, certs)."""
    p = argparse.ArgumentParser(
        prog="gangcheck",
        description="Feasibility checks for gang-scheduled GPU jobs on Kubernetes.",
        epilog="Exit codes: check — 0 admitted (Fits/Waits), 1 denied (NeverFits), 2 bad input; "
               "diagnose, fragmentation and dump — 0 when they ran (whatever the verdict), 2 bad input or target not found; "
               "serve — 0 stopped by a signal, 2 bad input; certs — 0 written, 2 bad input or the files cannot be written; "
               "3 an internal error (please report it).",
    )
    p.add_argument("--version", action="version", version=f"gangcheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser(
        "check",
        help="check workload manifests against a cluster dump or the demo cluster",
        description=(
            "Check each gang in JOB (a file, a directory, or - for stdin) against a cluster dump "
            "(written by `gangcheck dump -o cluster.json`), the live cluster (KUBECONFIG or in-cluster) or "
            "the embedded demo cluster, deciding exactly as the webhook does with the same policy: "
            "the same denials, exempt namespaces and warnings. Verdicts: Fits (can start now), Waits "
            "(admitted; cannot start now), NeverFits (denied in enforce mode: cannot start even on the "
            "empty, repaired cluster)."
        ),
        epilog="Exit codes: 0 admitted (Fits/Waits), 1 denied (NeverFits in enforce mode), 2 bad input.",
    )
    c.add_argument("job", metavar="JOB", help="workload manifest(s): file, directory, or - for stdin")
    c.add_argument("--cluster", required=True, metavar="PATH|demo|live",
                   help="cluster dump (file or directory), 'demo', or 'live' (KUBECONFIG or in-cluster)")
    c.add_argument("--policy", metavar="FILE", help="policy YAML (the ConfigMap's policy.yaml); default policy if absent")
    c.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format (default text)")
    c.add_argument(
        "--skip-unsupported",
        action="store_true",
        help="skip documents of kinds gangcheck does not check instead of failing with exit 2",
    )
    c.add_argument("--now", type=time_arg, default=None, metavar="TIME",
                   help="reference time for expected waits: RFC 3339 (2025-06-02T12:00:00Z) or epoch seconds "
                        "(default: a dump's newest timestamp, the demo's own time, the clock for live)")
    c.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the live cache to sync (default 120)")
    _add_server_commands(sub)
    from .cli_dump import add_command as _add_dump_command

    _add_dump_command(sub)
    from .diagnose import add_commands as _add_diagnose_commands

    _add_diagnose_commands(sub)  # diagnose, fragmentation
    return p


def _add_server_commands(sub) -> None:
    """``serve`` and ``certs`` (the server modules are imported only when they run)."""
    from . import certs as _certs

    s = sub.add_parser(
        "serve", help="serve the admission webhook over TLS",
        description="Serve the validating (/validate) and mutating (/mutate) admission webhook over TLS, "
                    "with /healthz, /readyz and /metrics, against the demo cluster, a dump, or the live "
                    "cluster (list+watch). The policy file and the serving certificate are reloaded when they "
                    "change. Stops on SIGINT/SIGTERM.",
        epilog="Exit codes: 0 stopped by a signal, 2 bad input (certificate, policy, cluster, port).")
    s.add_argument("--cluster", default="demo", metavar="PATH|demo|live",
                   help="a cluster dump (file or directory), 'demo' (the embedded demo cluster; the default) or "
                        "'live' (KUBECONFIG or in-cluster; what the image and manifests/ run)")
    s.add_argument("--policy", metavar="FILE",
                   help="policy YAML, reloaded when it changes; without it: the default policy, and with --cluster "
                        "live the ConfigMap gangcheck-system/gangcheck-policy (key policy.yaml), watched")
    s.add_argument("--host", default="127.0.0.1", metavar="HOST",
                   help="address to bind (default 127.0.0.1; 0.0.0.0 in a pod, as manifests/ passes)")
    s.add_argument("--port", type=_port, default=8443, help="port, 1-65535 (default 8443)")
    s.add_argument("--tls-cert", default="certs/tls.crt", metavar="FILE", help="serving certificate (default certs/tls.crt)")
    s.add_argument("--tls-key", default="certs/tls.key", metavar="FILE", help="serving key (default certs/tls.key)")
    k = sub.add_parser("certs", help="generate a CA and a serving certificate for the webhook",
                       description="Write ca.crt, ca.key, tls.crt and tls.key into --out (keys are written 0600) and print "
                                   "the caBundle (base64 of ca.crt) for both webhook configurations; only the caBundle "
                                   "goes to stdout, so CA=$(gangcheck certs ...) captures it. The serving certificate "
                                   "is for NAME, NAME.NAMESPACE, NAME.NAMESPACE.svc, NAME.NAMESPACE.svc.cluster.local, "
                                   "localhost and 127.0.0.1: NAME and NAMESPACE must be the webhook Service's.")
    _certs.build_parser(k)


# ---------------------------------------------------------------- check


def _requests_text(requests: dict) -> str:
    order = sorted(requests, key=lambda r: (r in ("cpu", "memory", "pods", "ephemeral-storage"), r))
    return ", ".join(f"{format_quantity(r, requests[r])} {r}" for r in order if requests[r]) or "nothing"


def render_text(d: Decision, policy: Policy, outcome: adm.Outcome | None = None) -> str:
    """A person's view of one decision: verdict first, then numbers, kubectl wording; the
    warnings are the webhook's (``outcome``, by default :func:`admission.admission_outcome`)."""
    g = d.gang
    outcome = outcome or adm.admission_outcome(d, policy)
    if not outcome.allowed:
        verdict_outcome = "denied"
    elif d.verdict == "NeverFits":
        verdict_outcome = f"admitted ({policy.mode} mode)"
    else:
        verdict_outcome = "admitted with warnings" if outcome.warnings else "admitted"
    lines = [f"{kind_label(g['kind'], g.get('api_version'))} {g['namespace']}/{g['name']}: {d.verdict} — {verdict_outcome}"]
    sets = "; ".join(f"{ps['name']} {ps['count']} × ({_requests_text(ps['requests'])})" for ps in g["pod_sets"])
    lines.append(f"  gang        {plural(g['pods'], 'pod')}: {sets}")
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
    if outcome.warnings:
        lines.append("  warnings    (as the webhook returns them)")
        lines.extend(f"    - {w}" for w in outcome.warnings)
    return "\n".join(lines)


def _skipped_text(obj: dict, reason: str) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    return f"{kind_label(obj.get('kind'), obj.get('apiVersion'))} {ns}/{meta.get('name', '')}: not checked — admitted unchanged ({reason})"


def _skipped_doc(obj: dict, reason: str) -> dict:
    meta = obj.get("metadata") or {}
    return {"verdict": None, "allowed": True, "skipped": reason, "warnings": [],
            "gang": {"kind": obj.get("kind"), "api_version": obj.get("apiVersion"),
                     "namespace": meta.get("namespace") or "default", "name": meta.get("name")}}


def _cluster_line(snap: ClusterSnapshot) -> str:
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(snap.skipped.items()))
    return (
        f"cluster: {snap.source or 'dump'} ({plural(len(snap.nodes), 'node')}, {plural(len(snap.pods), 'pod')}"
        + (f"; skipped kinds: {skipped}" if skipped else "")
        + ")"
    )


def _load_snapshot(spec: str, timeout: float) -> ClusterSnapshot:
    """``load_cluster(spec)``; ``live`` syncs a live cache (progress on stderr) and returns its snapshot."""
    if spec != "live":
        return load_cluster(spec)
    return load_cluster_spec(spec, timeout, lookups=False)[0]


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``gangcheck check``; returns the exit code."""
    from .cli_args import LiveConfigError
    from .policy import PolicyError, load_policy  # pydantic: imported by the commands that need it

    try:
        policy = load_policy(args.policy)
        source, objects = load_documents(args.job)
        items, notes = manifest_gangs(source, objects, args.skip_unsupported, policy)
        snap = _load_snapshot(args.cluster, getattr(args, "timeout", 120.0))
    except (PolicyError, DumpError, AdapterError, LiveConfigError, TimeoutError) as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not snap.nodes:
        print(f"gangcheck: error: {args.cluster}: the cluster data holds no Node objects "
              "(write a dump with `gangcheck dump -o cluster.json`)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not items:
        print(f"gangcheck: error: {source}: no gang workload found" + (f" ({'; '.join(notes)})" if notes else ""), file=sys.stderr)
        return EXIT_BAD_INPUT
    options = policy.engine_options()
    now, time_note = reference_time(snap, args.cluster, getattr(args, "now", None), time.time())
    results = []
    for item in items:
        if isinstance(item, tuple):
            results.append(item)
            continue
        d = evaluate(snap, item, options, now=now)
        results.append((d, adm.admission_outcome(d, policy, operation="CREATE")))
    denied = any(not isinstance(r[0], dict) and not r[1].allowed for r in results)
    if args.output == "json":
        docs = []
        for a, b in results:
            if isinstance(a, dict):
                doc = _skipped_doc(a, b)
            else:
                doc = a.to_dict()
                doc["allowed"] = b.allowed
                doc["warnings"] = list(b.warnings)  # the webhook's warnings (engine findings: "findings")
            doc["cluster"] = {"source": snap.source, "nodes": len(snap.nodes), "pods": len(snap.pods), "skipped": dict(snap.skipped)}
            doc["now"] = now
            docs.append(doc)
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2, sort_keys=False))
    else:
        for a, b in results:
            print(_skipped_text(a, b) if isinstance(a, dict) else render_text(a, policy, b))
            print()
        for note in notes:
            print(f"note: {note}")
        print(_cluster_line(snap))
    if time_note:
        print(f"gangcheck: {time_note}", file=sys.stderr)
    return EXIT_DENIED if denied else EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    """Run ``gangcheck serve``: the webhook over TLS until SIGINT/SIGTERM."""
    from kubernetes.config import ConfigException

    from .cli_args import LiveConfigError, live_api_client
    from .policy import PolicyError
    from .server import serve

    problem = _serving_files_problem(args.tls_cert, args.tls_key)
    if problem:
        print(f"gangcheck: error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.cluster == "live":
        try:
            live_api_client().close()  # the cache builds its own; this names a bad kubeconfig first
        except LiveConfigError as exc:
            print(f"gangcheck: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
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


def _serving_files_problem(cert: str, key: str) -> str | None:
    """Why ``--tls-cert``/``--tls-key`` cannot serve (missing, unreadable, not a PEM pair), naming
    the file and how to make one; None when they load."""
    import ssl
    from pathlib import Path

    for flag, f in (("--tls-cert", cert), ("--tls-key", key)):
        p = Path(f)
        if not p.is_file():
            what = "is a directory" if p.is_dir() else "no such file"
            if p.name in ("tls.crt", "tls.key") and p.parent != Path(p.anchor or "/"):  # never suggest writing to /
                how = f"create it with `gangcheck certs --out {p.parent}`"
            else:
                how = ("create a certificate with `gangcheck certs --out DIR` and pass "
                       "`--tls-cert DIR/tls.crt --tls-key DIR/tls.key`")
            return f"{flag} {f}: {what}; {how}"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key)
    except ssl.SSLError:
        return (f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate and its matching private key; "
                "write a pair with `gangcheck certs --out DIR`")
    except OSError as exc:
        return f"--tls-cert {cert} / --tls-key {key}: cannot read: {exc.strerror or exc}"
    return None


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
    """Entry point of ``gangcheck``, ``kubectl gangcheck`` and ``python -m webhook``.

    Never ends in a traceback with exit 1 (which scripts read as "denied"): bad input is exit 2
    with a message naming the file; anything unforeseen is exit 3, one line, "internal error".
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if sys.stdout is sys.__stdout__ and sys.stdout is not None:
        _guard_stdout()
    try:
        return _dispatch(parser, args)
    except BrokenPipeError:  # output piped into `head` and closed early, outside print()
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except RecursionError:
        print(f"gangcheck: error: {args.command}: input nested too deeply to read", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print(f"gangcheck: error: {args.command}: out of memory", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # a bug: say so on one line, with an exit code that is not "denied"
        print(f"gangcheck: internal error: {args.command}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              "(please report it)", file=sys.stderr)
        return EXIT_INTERNAL


class _PipeSafe:
    """The process's stdout, made safe for ``gangcheck … | head``: once the reader has gone, the
    rest of the output is dropped (so the exit code stays the verdict's, not 0), and a name with
    a lone surrogate (JSON ``"\\ud800"``) prints escaped instead of failing the encode."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._gone = False

    def _drop(self) -> None:
        self._gone = True
        try:  # later writes and the interpreter's final flush go nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())
        except OSError:
            pass

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _guard_stdout() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    sys.stdout = _PipeSafe(sys.stdout)


def kubectl_main() -> int:
    """Entry point of ``kubectl-gangcheck``: kubectl runs it for ``kubectl gangcheck …``."""
    return main(sys.argv[1:])


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "check":
        return cmd_check(args)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "certs":
        return cmd_certs(args)
    if args.command == "dump":
        from .cli_dump import cmd_dump

        return cmd_dump(args)
    if args.command in ("diagnose", "fragmentation"):
        from . import diagnose

        return diagnose.cmd_diagnose(args) if args.command == "diagnose" else diagnose.cmd_fragmentation(args)
    parser.print_help()
    return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
