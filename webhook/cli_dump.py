"""``gangcheck dump [-o FILE]``: everything gangcheck reads from the live cluster, as one JSON file
that ``--cluster FILE`` reads through the fast JSON reader (``webhook.dump``).

What is read is exactly what the live cache lists (``webhook.cache.DEFAULT_RESOURCES``: Nodes,
non-terminal Pods, PriorityClasses, PodDisruptionBudgets, Kueue ResourceFlavors, ClusterQueues,
LocalQueues, Cohorts and Workloads, Volcano Queues and PodGroups, coscheduling PodGroups, Karpenter
NodePools and NodeClaims, ProvisioningRequests, the ConfigMap
kube-system/cluster-autoscaler-status, and the topology objects: Kueue and KAI Topologies, Volcano
HyperNodes), with
the cache's own list code: each resource is listed by a ``webhook.cache._Informer`` (paging with
``limit``/``continue``, a restart when the continue token expires, the API versions tried in
order, 404 on every version = the API is not installed). The informer never watches here and
converts nothing: the raw JSON of each page is taken as the API server sent it. A resource whose
API is absent (no Kueue, no Volcano, no coscheduling, Karpenter, ProvisioningRequest, KAI or
HyperNode CRDs) is
skipped with a note on stderr.

The output is ``{"apiVersion": "v1", "kind": "List", "items": [...]}`` (compact JSON, one item
per line), every item with its own ``apiVersion`` and ``kind`` (the API server leaves them out of
the items of a core list). Each resource's items go to a temporary file as they arrive (bounded
memory: one page at a time), so a list restarted after an expired continue token starts its
file over; the output file is then written from them and renamed into place (a reader never
sees half a dump). Progress goes to stderr (per resource, and every ``PROGRESS_EVERY`` items on
big clusters); stdout gets the dump only with ``-o -``.

Exit codes: 0 written, 2 no usable kubeconfig, the cluster unreachable, or the file not
writable (the message names it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Callable, TypedDict

import msgspec

from .cli_args import LiveConfigError, live_api_client

__all__ = ["add_command", "cmd_dump", "dump_cluster", "DumpSummary", "PROGRESS_EVERY"]

#: Items between two progress lines of one resource.
PROGRESS_EVERY = 20_000
#: List attempts per resource before giving up (network errors, 5xx, 429), with the cache's backoff.
ATTEMPTS = 5


class _Page(TypedDict, total=False):
    apiVersion: str
    kind: str
    items: list[msgspec.Raw] | None


class _Head(TypedDict, total=False):
    apiVersion: Any
    kind: Any


_PAGE = msgspec.json.Decoder(_Page)
_HEAD = msgspec.json.Decoder(_Head)
_encode = msgspec.json.encode


class DumpSummary(dict):
    """What ``dump_cluster`` wrote: ``{informer name: items}`` for the resources listed, with
    attributes ``skipped`` (informer name → why: its API is not installed) and ``path``."""

    skipped: dict[str, str]
    path: str


def _with_kind(raw: bytes, api: str, kind: str) -> bytes:
    """The item's JSON with ``apiVersion`` and ``kind`` first when it lacks them (core list
    items); unchanged when it has both."""
    head = _HEAD.decode(raw)
    if isinstance(head.get("kind"), str) and head.get("kind") and isinstance(head.get("apiVersion"), str) and head.get("apiVersion"):
        return raw
    fill = {}
    if not (isinstance(head.get("apiVersion"), str) and head.get("apiVersion")):
        fill["apiVersion"] = api
    if not (isinstance(head.get("kind"), str) and head.get("kind")):
        fill["kind"] = kind
    body = raw.strip()
    prefix = _encode(fill)[:-1]  # '{"apiVersion":…,"kind":…'
    inner = body[1:].lstrip()
    return prefix + (b"}" if inner.startswith(b"}") else b"," + inner)


def _collector_class():
    """An ``_Informer`` that hands each listed page's raw body to a sink instead of converting
    it (the cache's list code, unchanged: paging, continue restarts, versions, 404)."""
    from .cache import _Informer

    class _Collector(_Informer):
        def __init__(self, cache: Any, spec: Any, on_page: Callable[[Any, list, bytes], None]) -> None:
            super().__init__(cache, spec)
            self._on_page = on_page

        def _request(self, query, timeout):
            resp = super()._request(query, timeout)
            if resp.status == 200:
                self._on_page(self, query, resp.data)  # urllib3 keeps the body: the list reads it again
            return resp

        def _convert_into(self, obj, converted) -> None:  # the dump keeps raw JSON, not projections
            pass

        def _convert_pods(self, raws, converted) -> None:
            pass

    return _Collector


def dump_cluster(api_client: Any, out: IO[bytes], *, page_size: int = 500, log: Callable[[str], None] | None = None,
                 resources: Any = None, workdir: str | None = None) -> DumpSummary:
    """List every resource gangcheck reads and write the dump JSON to ``out``.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (host, TLS, auth).
        out: a binary stream; receives ``{"apiVersion":"v1","kind":"List","items":[…]}``.
        page_size: list page size (``limit``).
        log: progress and notes (one line each; default: nothing).
        resources: the ``ResourceSpec``s to list (default ``webhook.cache.DEFAULT_RESOURCES``).
        workdir: where the per-resource temporary files go (default: the system's).

    Returns:
        A ``DumpSummary``.

    Raises:
        webhook.cache.CacheError: a resource could not be listed after ``ATTEMPTS`` tries (the
            message names it and the last HTTP status); a required API (nodes, pods …) that
            answers 404.
        OSError: the temporary files cannot be written.
    """
    from .cache import DEFAULT_RESOURCES, CacheError, LiveCache

    say = log or (lambda _m: None)
    specs = tuple(resources if resources is not None else DEFAULT_RESOURCES)
    cache = LiveCache(api_client, resources=specs, page_size=page_size, freeze_gc=False)
    collector_cls = _collector_class()
    summary = DumpSummary()
    summary.skipped = {}
    with tempfile.TemporaryDirectory(prefix="gangcheck-dump-", dir=workdir) as tmp:
        parts: list[tuple[Path, int]] = []
        for spec in specs:
            part = Path(tmp) / f"{len(parts):02d}.jsonl"
            state = {"fh": None, "items": 0, "next_report": PROGRESS_EVERY, "t0": time.monotonic()}

            def on_page(inf, query, body, state=state, part=part, spec=spec) -> None:
                if not any(k == "continue" for k, _ in query):  # a (re)started list: start the file over
                    if state["fh"] is not None:
                        state["fh"].close()
                    state["fh"] = open(part, "wb")
                    state["items"] = 0
                    state["next_report"] = PROGRESS_EVERY
                page = _PAGE.decode(body)
                api = page.get("apiVersion") or (f"{spec.group}/{inf.version}" if spec.group else inf.version)
                kind = str(page.get("kind") or "")
                kind = kind[: -len("List")] if kind.endswith("List") else kind
                fh = state["fh"]
                for raw in page.get("items") or ():
                    fh.write(_with_kind(bytes(raw), api, kind))
                    fh.write(b"\n")
                state["items"] += len(page.get("items") or ())
                if state["items"] >= state["next_report"]:
                    say(f"{spec.name}: {state['items']:,} so far ({time.monotonic() - state['t0']:.0f}s)")
                    state["next_report"] += PROGRESS_EVERY

            inf = collector_cls(cache, spec, on_page)
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    inf._list_and_replace()
                    break
                except CacheError as exc:
                    if attempt == ATTEMPTS or exc.status in (401, 403, 404):
                        raise CacheError(f"{spec.name}: {exc}", exc.status) from None
                    delay = cache._backoff(attempt)
                    say(f"{spec.name}: {exc}; retrying in {delay:.1f}s")
                    time.sleep(delay)
                except Exception as exc:  # network errors (urllib3), bad JSON
                    if attempt == ATTEMPTS:
                        raise CacheError(f"{spec.name}: {type(exc).__name__}: {exc}") from None
                    delay = cache._backoff(attempt)
                    say(f"{spec.name}: {type(exc).__name__}: {exc}; retrying in {delay:.1f}s")
                    time.sleep(delay)
            if state["fh"] is not None:
                state["fh"].close()
            if inf.installed is False:
                group = spec.group or "core"
                why = f"{group} {'/'.join(spec.versions)} {spec.plural} not served (API not installed)"
                summary.skipped[spec.name] = why
                say(f"{spec.name}: skipped: {why}")
                continue
            summary[spec.name] = state["items"]
            parts.append((part, state["items"]))
            if state["items"] >= PROGRESS_EVERY or spec.kind in ("Node", "Pod"):
                say(f"{spec.name}: {state['items']:,} in {time.monotonic() - state['t0']:.1f}s")
        out.write(b'{"apiVersion":"v1","kind":"List","metadata":{},"items":[\n')
        first = True
        for part, n in parts:
            if not n:
                continue
            with open(part, "rb") as fh:
                for line in fh:
                    if not first:
                        out.write(b",\n")
                    out.write(line.rstrip(b"\n"))
                    first = False
        out.write(b"\n]}\n")
    return summary


def add_command(sub) -> None:
    """Register ``dump`` on an argparse subparsers object."""
    d = sub.add_parser(
        "dump", help="write what gangcheck reads from the live cluster to a JSON file for --cluster FILE",
        description="List every resource gangcheck reads from the live cluster (KUBECONFIG or in-cluster): "
                    "Nodes, non-terminal Pods, PriorityClasses, PodDisruptionBudgets, and where installed "
                    "Kueue (ResourceFlavors, ClusterQueues, LocalQueues, Cohorts, Workloads), Volcano (Queues, "
                    "PodGroups), coscheduling PodGroups, Karpenter (NodePools, NodeClaims), ProvisioningRequests "
                    "the ConfigMap kube-system/cluster-autoscaler-status, and the topology objects (Kueue and KAI "
                    "Topologies, Volcano HyperNodes). APIs that are not installed are "
                    "skipped with a note. "
                    "Writes one JSON List that `gangcheck check|diagnose|fragmentation --cluster FILE` reads.",
        epilog="Exit codes: 0 written, 2 no usable kubeconfig, the cluster unreachable, or FILE not writable.")
    d.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="where to write the dump (default - : stdout); name it *.json for the fast reader")
    d.add_argument("--page-size", type=_page_size, default=500, metavar="N", help="objects per list request (default 500)")


def _page_size(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= n <= 10_000:
        raise argparse.ArgumentTypeError(f"expected 1 to 10000, got {n}")
    return n


def cmd_dump(args: argparse.Namespace) -> int:
    """Run ``gangcheck dump``; returns the exit code."""
    from .cache import CacheError

    def say(msg: str) -> None:
        print(f"gangcheck: dump: {msg}", file=sys.stderr, flush=True)

    try:
        client = live_api_client()
    except LiveConfigError as exc:
        print(f"gangcheck: error: {exc}", file=sys.stderr)
        return 2
    target = args.output
    tmp_path = None
    t0 = time.monotonic()
    try:
        if target == "-":
            summary = dump_cluster(client, sys.stdout.buffer, page_size=args.page_size, log=say)
            sys.stdout.buffer.flush()
        else:
            dest = Path(target)
            if dest.is_dir():
                raise IsADirectoryError(f"{dest}: is a directory (give a file name, e.g. {dest / 'cluster.json'})")
            parent = dest.parent if str(dest.parent) else Path(".")
            try:
                fd, tmp_path = tempfile.mkstemp(dir=parent, prefix="." + dest.name + ".", suffix=".tmp")
            except OSError as exc:
                raise OSError(f"{dest}: cannot write here: {exc.strerror or exc}") from None
            with os.fdopen(fd, "wb", buffering=1 << 20) as fh:
                summary = dump_cluster(client, fh, page_size=args.page_size, log=say, workdir=str(parent))
            os.replace(tmp_path, dest)
            tmp_path = None
            if dest.suffix != ".json":
                say(f"note: {dest} does not end in .json: --cluster reads it as YAML (slower); rename it to *.json")
    except CacheError as exc:
        print(f"gangcheck: error: --cluster live ({_host(client)}): {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gangcheck: error: {exc.strerror and exc.filename and f'{exc.filename}: {exc.strerror}' or exc}", file=sys.stderr)
        return 2
    finally:
        if tmp_path is not None:
            try:
                os.unlink(tmp_path)
            except OSError:
                pass
        try:
            client.close()
        except Exception:
            pass
    counts = ", ".join(f"{name} {n:,}" for name, n in summary.items())
    where = "stdout" if target == "-" else target
    say(f"wrote {where} in {time.monotonic() - t0:.1f}s: {counts}"
        + (f"; skipped (not installed): {', '.join(summary.skipped)}" if summary.skipped else ""))
    return 0


def _host(client: Any) -> str:
    return str(getattr(getattr(client, "configuration", None), "host", "") or "the API server")
