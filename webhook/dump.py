"""Reading cluster dumps and manifests from files: ``kubectl get ... -o yaml|json`` output.

``load_objects`` reads a file or a directory (recursively: ``*.yaml``, ``*.yml``, ``*.json``,
sorted by path), YAML (multi-document) or JSON, and flattens ``kind: List`` and typed lists
(``NodeList``…) into their items. ``load_cluster`` turns a dump (or ``"demo"``) into a
``ClusterSnapshot`` (``load_cluster_and_objects`` also returns the objects, for workload
lookups); ``load_documents`` reads workload manifests, ``-`` meaning stdin.

Every problem with the input is a ``DumpError`` (a ``ValueError``) naming the file, the document
number (1-based, in file order) and, for YAML/JSON syntax errors, the line.

JSON is the fast path for big dumps (``kubectl get nodes,pods -A -o json``): ``load_cluster``
decodes a ``.json`` file with msgspec, Pods and Nodes straight into the trimmed projections of
``webhook.adapters.projection`` (only the fields the converters read), everything else
generically, with the garbage collector paused while the snapshot is built. Any file the fast
reader does not take as one plain JSON object (several concatenated values, a syntax error, a
non-object item, a nested list, invalid UTF-8…) is read by the general reader instead, so results
and error messages are the same either way. YAML is read with PyYAML (its C loader when built).
"""

from __future__ import annotations

import bisect
import json
import os
import signal
import sys
import threading
from pathlib import Path
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypedDict

import msgspec
import yaml

from .adapters.cluster import ConvertedPod, _PodReader, build_snapshot
from .adapters.errors import AdapterError
from .adapters.projection import GENERIC, OBJECT_DECODERS, POD_STRUCT, PodStruct, decode_any, decode_object
from .engine.model import BoundPod, HostPort, frozen_map
from .engine.snapshot import ClusterSnapshot
from .gcpause import gc_paused

__all__ = [
    "DumpError",
    "LazyObject",
    "load_objects",
    "load_objects_with_origin",
    "load_documents",
    "load_cluster",
    "load_cluster_and_objects",
    "SUFFIXES",
]

#: File name endings read from a directory.
SUFFIXES = (".yaml", ".yml", ".json")

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe YAML loader that keeps timestamps as strings, as JSON (and kubectl -o json) does."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


class DumpError(ValueError):
    """A dump or manifest that cannot be read.

    ``str(err)`` reads like ``dump/nodes.yaml: document 2, line 14: could not parse YAML: ...``.
    Attributes: ``path`` (str), ``document`` (1-based or None), ``line`` (1-based or None),
    ``detail`` (what was wrong).
    """

    def __init__(self, path: str | Path, detail: str, *, document: int | None = None, line: int | None = None) -> None:
        self.path, self.detail, self.document, self.line = str(path), detail, document, line
        where = [w for w in (f"document {document}" if document else "", f"line {line}" if line else "") if w]
        super().__init__(f"{self.path}: {', '.join(where) + ': ' if where else ''}{detail}")


# ---------------------------------------------------------------- parsing


#: What a RecursionError while decoding says (a document nested deeper than the decoders go).
_TOO_DEEP = "nested too deeply to read (arrays or mappings inside each other beyond the parser's limit)"


def _parse_yaml(text: str, path: str) -> list[Any]:
    docs: list[Any] = []
    try:
        for doc in yaml.load_all(text, Loader=_Loader):
            docs.append(doc)
    except RecursionError:  # the pure-Python loader (no libyaml) recurses per nesting level
        raise DumpError(path, f"could not parse YAML: {_TOO_DEEP}", document=len(docs) + 1) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "syntax error"
        raise DumpError(path, f"could not parse YAML: {problem}", document=len(docs) + 1, line=line) from None
    except yaml.YAMLError as exc:
        raise DumpError(path, f"could not parse YAML: {exc}", document=len(docs) + 1) from None
    except ValueError as exc:  # an integer of more than 4,300 digits (CPython's conversion limit)
        raise DumpError(path, f"could not parse YAML: a number too long to read ({_first_line(exc)})",
                        document=len(docs) + 1) from None
    return docs


def _first_line(exc: BaseException) -> str:
    return str(exc).split(":", 1)[0]


class _NotJSON(ValueError):
    """A NaN / Infinity / -Infinity literal: Python's json accepts them, JSON does not."""


def _no_constants(name: str) -> Any:
    raise _NotJSON(name)


#: The general JSON reader: strict JSON (NaN and Infinity literals are errors, as for msgspec and
#: the API server; they would become float quantities no Kubernetes object can hold).
_STRICT_JSON = json.JSONDecoder(parse_constant=_no_constants)


def _parse_json(text: str, path: str) -> list[Any]:
    """One JSON value, or several concatenated (whitespace-separated) ones."""
    try:  # one value: msgspec is ~2× faster than json and gives the same values
        return [GENERIC.decode(text)]
    except msgspec.MsgspecError:
        pass  # several values, a syntax error, NaN, a number out of range: the json module decides
    except RecursionError:  # msgspec and json both stop at ~1,000 levels
        raise DumpError(path, f"could not parse JSON: {_TOO_DEEP}", document=1) from None
    decoder = _STRICT_JSON
    docs: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return docs
        try:
            doc, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise DumpError(path, f"could not parse JSON: {exc.msg} (column {exc.colno})", document=len(docs) + 1, line=exc.lineno) from None
        except _NotJSON as exc:
            raise DumpError(path, f"could not parse JSON: {exc} is not a JSON value (RFC 8259 has no NaN or Infinity)",
                            document=len(docs) + 1) from None
        except RecursionError:
            raise DumpError(path, f"could not parse JSON: {_TOO_DEEP}", document=len(docs) + 1) from None
        except ValueError as exc:  # an integer of more than 4,300 digits (CPython's conversion limit)
            raise DumpError(path, f"could not parse JSON: a number too long to read ({_first_line(exc)})",
                            document=len(docs) + 1) from None
        docs.append(doc)


def _check(doc: Any, path: str, number: int) -> Mapping:
    if not isinstance(doc, Mapping):
        raise DumpError(path, f"expected a Kubernetes object (a mapping with apiVersion and kind), got {_type(doc)}", document=number)
    missing = [k for k in ("apiVersion", "kind") if not isinstance(doc.get(k), str) or not doc.get(k)]
    if missing:
        raise DumpError(path, f"expected a Kubernetes object, {' and '.join(missing)} missing", document=number)
    return doc


def _type(doc: Any) -> str:
    if isinstance(doc, list):
        return "a list"
    if isinstance(doc, str):
        return "a string"
    return type(doc).__name__


def _expand(doc: Mapping, path: str, number: int) -> Iterable[tuple[str, dict]]:
    """Flatten ``kind: List`` / ``*List`` (items inherit kind/apiVersion when absent, as in
    a raw API list response)."""
    kind = doc["kind"]
    if kind.endswith("List") and "items" in doc:
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise DumpError(path, f"expected items to be a list in {kind}", document=number)
        item_kind = kind[: -len("List")]
        for j, item in enumerate(items, 1):
            where = f"{path}: document {number}, item {j}"
            if isinstance(item, Mapping) and item_kind and "kind" not in item:
                item = {**item, "kind": item_kind, "apiVersion": item.get("apiVersion", doc["apiVersion"])}
            if not isinstance(item, Mapping) or not item.get("kind") or not item.get("apiVersion"):
                raise DumpError(path, f"item {j} of the {kind} is not a Kubernetes object", document=number)
            yield from _expand(item, path, number) if str(item["kind"]).endswith("List") and "items" in item else [(where, dict(item))]
    else:
        yield f"{path}: document {number}", dict(doc)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is skipped
    except FileNotFoundError:
        raise DumpError(path, "no such file or directory") from None
    except IsADirectoryError:
        raise DumpError(path, "is a directory") from None
    except UnicodeDecodeError as exc:
        raise DumpError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DumpError(path, exc.strerror or str(exc)) from None


def _parse_text(text: str, name: str, is_json: bool) -> list[tuple[str, dict]]:
    docs = _parse_json(text, name) if is_json else _parse_yaml(text, name)
    out: list[tuple[str, dict]] = []
    for number, doc in enumerate(docs, 1):
        if doc is None:  # empty document: a stray '---'
            continue
        out.extend(_expand(_check(doc, name, number), name, number))
    return out


def _files(path: Path) -> list[Path]:
    if not path.exists():
        raise DumpError(path, "no such file or directory")
    if path.is_dir():
        try:
            files = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES) and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        except OSError as exc:  # a subdirectory it may not read (/proc, permissions)
            raise DumpError(getattr(exc, "filename", None) or path, f"cannot read the directory: {exc.strerror or exc}") from None
        if not files:
            raise DumpError(path, f"no {', '.join('*' + s for s in SUFFIXES)} files in the directory")
        return files
    return [path]


def load_objects_with_origin(path: str | Path) -> list[tuple[str, dict]]:
    """Like ``load_objects`` but each object comes with its origin
    (``"dump/nodes.yaml: document 1, item 3"``) for error messages.

    Raises:
        DumpError: see ``load_objects``.
    """
    out: list[tuple[str, dict]] = []
    for f in _files(Path(path)):
        out.extend(_parse_text(_read_text(f), str(f), f.suffix == ".json"))
    return out


def load_objects(path: str | Path) -> list[dict]:
    """Read Kubernetes objects from a file or a directory.

    Args:
        path: a ``.yaml``/``.yml`` file (multi-document), a ``.json`` file (one value or
            several concatenated), or a directory read recursively (``*.yaml``, ``*.yml``,
            ``*.json``, sorted by path, hidden entries skipped). Any other file name is read
            as YAML (which accepts JSON too).

    Returns:
        The objects as dicts, in file and document order; ``kind: List`` and typed lists
        (``NodeList``…) flattened into their items, empty documents dropped. Timestamps stay
        strings (as in JSON).

    Raises:
        DumpError: missing file, an empty directory, unreadable or non-UTF-8 text, a YAML/JSON
            syntax error (with document and line), or a document that is not a mapping with
            apiVersion and kind.
    """
    return [obj for _, obj in load_objects_with_origin(path)]


def load_documents(path_or_dash: str | Path) -> tuple[str, list[dict]]:
    """Read workload manifests: ``-`` reads stdin (source ``"<stdin>"``), anything else as
    ``load_objects``.

    Returns:
        ``(source_name, objects)``; source_name is the path as given, or ``"<stdin>"``.

    Raises:
        DumpError: as ``load_objects``; an empty input is an error too ("no objects").
    """
    if str(path_or_dash) == "-":
        name = "<stdin>"
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DumpError(name, f"not UTF-8 text (byte {exc.start})") from None
        stripped = text.lstrip()
        objs = [o for _, o in _parse_text(text, name, stripped.startswith("{"))]
    else:
        name = str(path_or_dash)
        objs = load_objects(path_or_dash)
    if not objs:
        raise DumpError(name, "no Kubernetes objects found")
    return name, objs


def load_cluster(spec: str | Path) -> ClusterSnapshot:
    """A ``ClusterSnapshot`` from ``spec``: ``"demo"`` selects the embedded demo cluster
    (``webhook.demo``), anything else is a dump file or directory (as ``load_objects`` reads it;
    ``.json`` files through the fast reader, see the module doc).

    Raises:
        DumpError: the dump cannot be read.
        AdapterError: an object in it cannot be converted; its source names the file and
            document, e.g. ``dump.yaml: document 3: Node <unnamed>: metadata.name: ...``.
    """
    if str(spec) == "demo":
        from .demo import demo_snapshot

        return demo_snapshot()
    return _load_dump(spec, keep_objects=False)[0]


def load_cluster_and_objects(spec: str | Path) -> tuple[ClusterSnapshot, list[Mapping]]:
    """``load_cluster(spec)`` and the dump's objects, for looking workloads up in it.

    Returns:
        ``(snapshot, objects)``: objects in file and document order with lists flattened, as
        ``load_objects`` returns them, except that Pods and Nodes of ``.json`` files are
        ``LazyObject`` mappings (decoded from their JSON text on first use; ``kind``,
        ``apiVersion`` and ``LazyObject.ref`` without decoding). For ``"demo"``: the demo's
        snapshot and objects.

    Raises:
        DumpError, AdapterError: as ``load_cluster``.
    """
    if str(spec) == "demo":
        from .demo import demo_objects, demo_snapshot

        return demo_snapshot(), demo_objects()
    snap, objects = _load_dump(spec, keep_objects=True)
    return snap, objects or []


# ---------------------------------------------------------------- the fast JSON reader


class LazyObject(Mapping):
    """A Pod or Node of a JSON dump, kept as its JSON text: a read-only mapping equal to the
    object ``load_objects`` returns for it, decoded on first access to anything but ``kind`` and
    ``apiVersion``. ``ref`` is ``(metadata.namespace or "default", metadata.name)``, or None when
    the metadata could not be read without decoding."""

    __slots__ = ("_raw", "_kind", "_api", "_inject", "_full", "ref")

    def __init__(self, raw: msgspec.Raw, kind: Any, api: Any, inject: bool, ref: tuple[str, Any] | None) -> None:
        self._raw, self._kind, self._api, self._inject, self._full, self.ref = raw, kind, api, inject, None, ref

    def _object(self) -> dict:
        full = self._full
        if full is None:
            full = decode_any(self._raw)  # a number msgspec will not take (1e400): json decides
            if self._inject:  # an item of a typed list without its own kind (see _expand)
                full = {**full, "kind": self._kind, "apiVersion": self._api}
            self._full = full
        return full

    def __getitem__(self, key: str) -> Any:
        if key == "kind":
            return self._kind
        if key == "apiVersion":
            return self._api
        return self._object()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._object())

    def __len__(self) -> int:
        return len(self._object())

    def __repr__(self) -> str:
        return f"LazyObject({self._kind} {self.ref})"


class _Top(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    items: list[msgspec.Raw] | None


_TOP = msgspec.json.Decoder(_Top)
_POD = OBJECT_DECODERS["Pod"]


class _General(Exception):
    """The fast reader leaves this file to the general one."""


def _decode_item(raw: Any, item_kind: str, api: str) -> tuple[Any, bool]:
    """(the object as ``build_snapshot`` needs it, True when it took the list's item kind).

    Most items are Pods: a v1 Pod becomes a ``PodStruct`` (``build_snapshot`` reads it through
    ``_PodReader.projected``), and the struct decoding doubles as the peek at ``kind``. An item
    without ``kind`` in a typed list (``NodeList``) takes the list's item kind and apiVersion,
    as ``_expand`` gives them. Other kinds, and pods with a field of an unexpected type, are
    decoded as dicts (their projection, else generically).
    """
    try:
        p = POD_STRUCT.decode(raw)
    except msgspec.ValidationError:
        pass
    else:
        kind, injected = p.kind, False
        if kind is msgspec.UNSET and item_kind:
            kind, injected = item_kind, True
            if p.apiVersion is msgspec.UNSET:
                p.apiVersion = api
        if kind == "Pod" and p.apiVersion == "v1":
            p.kind, p.raw = kind, raw
            return p, injected
        if type(kind) is str:
            obj = decode_object(kind, raw)
            if type(obj) is not dict:
                raise _General
            if injected:
                obj = {**obj, "kind": kind, "apiVersion": obj.get("apiVersion", api)}
            return obj, injected
    try:
        obj = _POD.decode(raw)
        projected = True
    except msgspec.ValidationError:
        obj, projected = GENERIC.decode(raw), False
    if type(obj) is not dict:
        raise _General  # the general reader names the item
    if "kind" in obj:
        if projected and obj["kind"] != "Pod":
            obj = decode_object(obj["kind"], raw)
        return obj, False
    if not item_kind:
        raise _General
    if projected and item_kind != "Pod":
        obj = decode_object(item_kind, raw)
    obj = {**obj, "kind": item_kind, "apiVersion": obj.get("apiVersion", api)}
    return obj, True


def _ref(obj: Any) -> tuple[str, Any] | None:
    if type(obj) is PodStruct:
        meta = obj.metadata
        return None if meta is None else (meta.namespace or "default", meta.name)
    meta = obj.get("metadata")
    if type(meta) is not dict:
        return None
    return meta.get("namespace") or "default", meta.get("name")


def _read_json_fast(path: Path, keep: bool) -> tuple[list, list | None, bool]:
    """(objects for ``build_snapshot``, objects for lookups or None, True when the file is a
    list whose items are the objects). Raises ``_General`` for anything unusual."""
    try:
        data = path.read_bytes()
    except OSError:
        raise _General from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a UTF-8 byte-order mark, as the general reader skips it
    if not data.isascii():
        try:
            data.decode("utf-8")  # the general reader rejects invalid UTF-8 anywhere
        except UnicodeDecodeError:
            raise _General from None
    try:
        top = _TOP.decode(data)
    except (msgspec.MsgspecError, RecursionError):  # not one JSON object, or items not a list
        raise _General from None
    api, kind = top.get("apiVersion"), top.get("kind")
    if type(api) is not str or not api or type(kind) is not str or not kind:
        raise _General
    try:
        if not (kind.endswith("List") and "items" in top):
            obj = decode_object(kind, data)
            if type(obj) is not dict or obj.get("kind") != kind:
                raise _General
            look = None
            if keep:
                look = [LazyObject(msgspec.Raw(data), kind, api, False, _ref(obj)) if kind in _LAZY_KINDS else obj]
            return [obj], look, False
        item_kind = kind[: -len("List")]
        items = top.get("items") or []
        objects: list = []
        lookup: list | None = [] if keep else None
        workers = _workers(len(items))
        if workers > 1:
            reader = _PodReader()  # the parent converts its share while the workers convert theirs
            with _Forked(items, item_kind, api, workers) as forked:
                _read_items(items, 0, forked.start, item_kind, api, objects, lookup, reader)
                for lo, hi, result in forked.results():
                    if result is None:  # the worker failed: read its share here
                        _read_items(items, lo, hi, item_kind, api, objects, lookup, reader)
                    else:
                        _merge_rows(items, lo, hi, result, item_kind, api, objects, lookup)
        else:
            _read_items(items, 0, len(items), item_kind, api, objects, lookup)
        return objects, lookup, True
    except (msgspec.MsgspecError, RecursionError):  # the general reader names the file and document
        raise _General from None


def _read_items(items: list, lo: int, hi: int, item_kind: str, api: str, objects: list, lookup: list | None,
                reader: _PodReader | None = None) -> None:
    """Decode ``items[lo:hi]`` onto ``objects`` (and ``lookup``); with ``reader``, v1 Pods are
    converted here (``ConvertedPod``) rather than in ``build_snapshot``. Raises ``_General``."""
    for i in range(lo, hi):
        _read_item(items[i], item_kind, api, objects, lookup, reader)


def _read_item(raw: Any, item_kind: str, api: str, objects: list, lookup: list | None,
               reader: _PodReader | None = None) -> None:
    obj, injected = _decode_item(raw, item_kind, api)
    if type(obj) is PodStruct:
        k, a = obj.kind, obj.apiVersion
        if reader is not None:
            conv = reader.deferred(obj)
            if conv is not None:
                # spec.priority was set: nothing left to resolve, the BoundPod itself
                objects.append(conv if conv.resolve else conv.pod)
                if lookup is not None:
                    pod = conv.pod
                    lookup.append(LazyObject(raw, k, a, injected, (pod.namespace, pod.name)))
                return
    else:
        k, a = obj.get("kind"), obj.get("apiVersion")
        if not k or not a:
            raise _General
        if "items" in obj and str(k).endswith("List"):
            raise _General  # a list inside the list
    objects.append(obj)
    if lookup is not None:
        lookup.append(LazyObject(raw, k, a, injected, _ref(obj)) if k in _LAZY_KINDS else obj)


_LAZY_KINDS = ("Pod", "Node")


# ---------------------------------------------------------------- parallel reading

#: A list with at least this many items is read by ``_workers`` processes: the parent reads the
#: first share, forked workers convert the rest (decoding and converting a pod is ~8 µs of
#: Python, ~1.2 s for 150k pods on one core; the transfer back costs ~1 µs a pod).
PARALLEL_MIN_ITEMS = 20_000
#: Environment variable: how many processes read a large JSON dump (1 = no worker processes).
WORKERS_ENV = "GANGCHECK_LOAD_WORKERS"


def _workers(n_items: int) -> int:
    """Processes to read ``n_items`` list items with: 1 below ``PARALLEL_MIN_ITEMS``, without
    ``os.fork`` or with other threads running (forking a threaded process is unsafe), else
    ``$GANGCHECK_LOAD_WORKERS`` or the CPUs this process may run on (at most 4)."""
    if n_items < PARALLEL_MIN_ITEMS or not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env:
        try:
            return max(1, min(int(env), 16))
        except ValueError:
            return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


class _Row(msgspec.Struct, array_like=True, gc=False):
    """A ``ConvertedPod`` on its way back from a worker: the ``BoundPod`` fields, with
    ``requests``, ``host_ports`` and ``labels`` as indices into the payload's tables."""

    namespace: str
    name: str
    node_name: str
    requests: int
    priority: int
    gang: str
    owner_kind: str
    owner_name: str
    queue: str
    phase: str
    start_time: float | None
    deadline_s: float | None
    host_ports: int
    runtime_limit_s: float | None
    labels: int
    restarts: int
    ready: bool | None
    resolve: bool
    class_name: str | None
    injected: bool


class _Payload(msgspec.Struct, array_like=True):
    """What a worker sends back: converted pods (``rows``, at item positions ``row_at``), and
    the values the rows index. The items of its share that are not rows (anything but a v1 Pod,
    terminal pods, anything the worker could not convert) the parent reads itself."""

    rows: list[_Row]
    row_at: list[int]
    requests: list[dict[str, int]]
    host_ports: list[list[tuple[int, str, str]]]
    labels: list[dict[str, str]]


_PAYLOAD = msgspec.msgpack.Decoder(_Payload)


def _convert_share(items: list, lo: int, hi: int, item_kind: str, api: str) -> bytes:
    """A worker's job: the v1 Pods of ``items[lo:hi]`` converted (``_PodReader.deferred``),
    as a msgpack ``_Payload``. Anything unusual is left to the parent."""
    reader = _PodReader()
    rows: list[_Row] = []
    row_at: list[int] = []
    ids: tuple[dict[int, int], dict[int, int], dict[int, int]] = ({}, {}, {})
    values: tuple[list, list, list] = ([], [], [])

    def index(which: int, value: Any, plain: Any) -> int:
        i = ids[which].get(id(value))
        if i is None:
            i = ids[which][id(value)] = len(values[which])
            values[which].append(plain(value))
        return i

    def ports(hp: tuple[HostPort, ...]) -> list:
        return [(h.port, h.protocol, h.host_ip) for h in hp]

    for i in range(lo, hi):
        try:
            p, injected = _decode_item(items[i], item_kind, api)
            conv = reader.deferred(p) if type(p) is PodStruct else None
        except Exception:  # noqa: BLE001 - the parent reads it and reports it in its own words
            conv = None
        if conv is None:
            continue
        pod = conv.pod
        rows.append(_Row(pod.namespace, pod.name, pod.node_name, index(0, pod.requests, dict), pod.priority, pod.gang,
                         pod.owner_kind, pod.owner_name, pod.queue, pod.phase, pod.start_time, pod.deadline_s,
                         index(1, pod.host_ports, ports), pod.runtime_limit_s, index(2, pod.labels, dict), pod.restarts,
                         pod.ready, conv.resolve, conv.class_name, injected))
        row_at.append(i)
    return msgspec.msgpack.encode(_Payload(rows, row_at, *values))


def _merge_rows(items: list, lo: int, hi: int, payload: _Payload, item_kind: str, api: str,
                objects: list, lookup: list | None) -> None:
    """Append a worker's share ``items[lo:hi]`` in order: its rows as ``ConvertedPod``, the
    items it left to the parent decoded here. Raises ``_General`` (as ``_read_items``)."""
    requests = [frozen_map(d) for d in payload.requests]
    host_ports = [tuple(HostPort(*h) for h in hp) for hp in payload.host_ports]
    labels = [frozen_map(d) for d in payload.labels]
    at = dict(zip(payload.row_at, payload.rows))
    for i in range(lo, hi):
        r = at.get(i)
        if r is None:
            _read_item(items[i], item_kind, api, objects, lookup)
            continue
        pod = BoundPod(r.namespace, r.name, r.node_name, requests[r.requests], r.priority, r.gang, r.owner_kind,
                       r.owner_name, r.queue, r.phase, r.start_time, r.deadline_s, host_ports[r.host_ports],
                       r.runtime_limit_s, labels[r.labels], r.restarts, r.ready)
        objects.append(ConvertedPod(pod, True, r.class_name) if r.resolve else pod)
        if lookup is not None:
            lookup.append(LazyObject(items[i], "Pod", "v1", r.injected, (r.namespace, r.name)))


class _Forked:
    """Worker processes (``os.fork``) converting the last ``workers - 1`` shares of ``items``
    while the parent reads the first (``start`` is where the parent's share ends).

    ``results()`` yields ``(lo, hi, payload or None)`` per worker share in order; None when the
    worker failed (exit status, a short or undecodable payload): the caller reads that share
    itself, so a worker can only cost time, never change a result. A worker never returns into
    the caller's code: it leaves through ``os._exit``. Leaving the ``with`` block kills and reaps
    workers not yet collected.
    """

    def __init__(self, items: list, item_kind: str, api: str, workers: int) -> None:
        n = len(items)
        # A worker also encodes its rows and pays copy-on-write faults: the parent, which merges
        # after waiting, takes a slightly larger share (measured: ~0.55 of the list with 2).
        first = round(n * 1.2 / (workers + 0.2))
        bounds = [0, first] + [first + round((n - first) * k / (workers - 1)) for k in range(1, workers)]
        self.start = first
        self._shares = list(zip(bounds[1:-1], bounds[2:]))
        self._procs: list[tuple[int, int]] = []  # (pid, read fd)
        sys.stdout.flush()
        sys.stderr.flush()
        for lo, hi in self._shares:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker
                status = 1
                try:
                    os.close(r)
                    data = _convert_share(items, lo, hi, item_kind, api)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(w, view):]
                    status = 0
                finally:
                    os._exit(status)
            os.close(w)
            self._procs.append((pid, r))

    def results(self) -> Iterator[tuple[int, int, _Payload | None]]:
        for (lo, hi), (pid, r) in zip(self._shares, list(self._procs)):
            chunks = []
            with os.fdopen(r, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    chunks.append(chunk)
            self._procs.remove((pid, r))
            _, status = os.waitpid(pid, 0)
            payload = None
            if status == 0:
                try:
                    payload = _PAYLOAD.decode(b"".join(chunks))
                except msgspec.MsgspecError:
                    payload = None
            yield lo, hi, payload

    def __enter__(self) -> _Forked:
        return self

    def __exit__(self, *exc: Any) -> None:
        for pid, r in self._procs:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            try:
                os.close(r)
            except OSError:
                pass
        self._procs.clear()


class _Origins:
    """Where each object of a dump came from (``"dump.json: document 1, item 3"``), worked out
    only for the object an error names."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._parts: list[tuple[str, Any]] = []

    def add(self, start: int, path: str, wheres: list[str] | None, items: bool) -> None:
        self._starts.append(start)
        self._parts.append((path, wheres if wheres is not None else items))

    def __getitem__(self, pos: int) -> str:
        i = bisect.bisect_right(self._starts, pos) - 1
        path, how = self._parts[i]
        if isinstance(how, list):
            return how[pos - self._starts[i]]
        return f"{path}: document 1, item {pos - self._starts[i] + 1}" if how else f"{path}: document 1"


def _load_dump(spec: str | Path, keep_objects: bool) -> tuple[ClusterSnapshot, list | None]:
    """(snapshot, lookup objects or None) of a dump file or directory: ``.json`` files through
    the fast reader when it takes them, the rest through ``_parse_text``; AdapterErrors get the
    file and document of the object they name."""
    with gc_paused():
        objects: list = []
        lookup: list | None = [] if keep_objects else None
        origins = _Origins()
        for f in _files(Path(spec)):
            name = str(f)
            if f.suffix == ".json":
                try:
                    objs, look, items = _read_json_fast(f, keep_objects)
                except _General:
                    pass
                else:
                    origins.add(len(objects), name, None, items)
                    objects.extend(objs)
                    if lookup is not None and look is not None:
                        lookup.extend(look)
                    continue
            loaded = _parse_text(_read_text(f), name, f.suffix == ".json")
            origins.add(len(objects), name, [w for w, _ in loaded], False)
            objects.extend(o for _, o in loaded)
            if lookup is not None:
                lookup.extend(o for _, o in loaded)
        try:
            snap = build_snapshot(objects, source=str(spec))
        except AdapterError as exc:
            pos = getattr(exc, "position", None)
            if pos is not None and 0 <= pos < len(objects):
                exc.source = origins[pos]
                exc.args = (exc._render(),)
            raise
        finally:
            del objects  # before the collector is back: it would walk every decoded dict once
    return snap, lookup
