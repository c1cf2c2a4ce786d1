"""Reading cluster dumps and manifests from files: ``kubectl get ... -o yaml|json`` output.

``load_objects`` reads a file or a directory (recursively: ``*.yaml``, ``*.yml``, ``*.json``,
sorted by path), YAML (multi-document) or JSON, and flattens ``kind: List`` and typed lists
(``NodeList``…) into their items. ``load_cluster`` turns a dump (or ``"demo"``) into a
``ClusterSnapshot``; ``load_documents`` reads workload manifests, ``-`` meaning stdin.

Every problem with the input is a ``DumpError`` (a ``ValueError``) naming the file, the document
number (1-based, in file order) and, for YAML/JSON syntax errors, the line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from .adapters.cluster import build_snapshot
from .adapters.errors import AdapterError
from .engine.snapshot import ClusterSnapshot

__all__ = ["DumpError", "load_objects", "load_objects_with_origin", "load_documents", "load_cluster", "SUFFIXES"]

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


def _parse_yaml(text: str, path: str) -> list[Any]:
    docs: list[Any] = []
    try:
        for doc in yaml.load_all(text, Loader=_Loader):
            docs.append(doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "syntax error"
        raise DumpError(path, f"could not parse YAML: {problem}", document=len(docs) + 1, line=line) from None
    except yaml.YAMLError as exc:
        raise DumpError(path, f"could not parse YAML: {exc}", document=len(docs) + 1) from None
    return docs


def _parse_json(text: str, path: str) -> list[Any]:
    """One JSON value, or several concatenated (whitespace-separated) ones."""
    decoder = json.JSONDecoder()
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
        return path.read_text(encoding="utf-8")
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
        files = sorted(
            p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES) and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
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
    (``webhook.demo``), anything else is a dump file or directory (``load_objects``).

    Raises:
        DumpError: the dump cannot be read.
        AdapterError: an object in it cannot be converted; its source names the file and
            document, e.g. ``dump.yaml: document 3: Node <unnamed>: metadata.name: ...``.
    """
    if str(spec) == "demo":
        from .demo import demo_snapshot

        return demo_snapshot()
    loaded = load_objects_with_origin(spec)
    try:
        return build_snapshot([o for _, o in loaded], source=str(spec))
    except AdapterError as exc:
        pos = getattr(exc, "position", None)
        if pos is not None and 0 <= pos < len(loaded):
            exc.source = loaded[pos][0]
            exc.args = (exc._render(),)
        raise
