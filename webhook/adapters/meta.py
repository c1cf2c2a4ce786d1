"""Object metadata and scalar readers shared by the cluster-state readers.

Owns: the strict readers of an object's identity (``metadata.name``, ``metadata.namespace``,
``object_ref`` for error messages), the API group names the snapshot dispatches on, and the
scalar field readers every cluster-state reader uses (string maps, quantities, booleans, signed
integers, RFC 3339 times). Every reader raises ``AdapterError`` naming the field and what was
expected; the caller adds the object (``exc.within(obj=object_ref(obj))``).

Does not own: reading any one kind (``nodes``, ``pods``, ``priority``, ``kueue_objects``,
``volcano_objects``, ``workload``, ``disruption``), nor the helpers of the workload → gang adapters
(``common``). Why not ``common``: ``common`` reads a *workload* leniently for display and gang
assembly (a name falls back to ``generateName + "<generated>"``, a missing one is
``"<unnamed>"``, never an error), while the readers here are strict: a cluster object without a
name cannot be keyed in a snapshot, so it is an error. Keeping the two apart keeps each
module's rule single; this module imports nothing from the other readers, so every reader
(including ``workload`` and ``disruption``) may import it without an import circle.

Units: quantities in scheduler units (cpu millicores, memory bytes, counts otherwise; see
``webhook.engine.quantity``); times in seconds since the epoch. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ..engine.quantity import QuantityError, parse_quantity
from .errors import AdapterError
from .podspec import get_path, mapping

__all__ = [
    "KUEUE",
    "VOLCANO",
    "COSCHEDULING",
    "SCHEDULING_K8S",
    "object_ref",
    "object_name",
    "object_namespace",
    "str_map",
    "quantity",
    "bool_field",
    "signed_int",
    "parse_time",
]

#: API groups of the cluster-state kinds gangcheck reads.
KUEUE = "kueue.x-k8s.io"
VOLCANO = "scheduling.volcano.sh"
COSCHEDULING = "scheduling.x-k8s.io"
SCHEDULING_K8S = "scheduling.k8s.io"


def object_ref(obj: Mapping) -> str:
    """``"Kind ns/name"`` (``"Kind name"`` for cluster-scoped objects), for error messages."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name, ns = meta.get("name"), meta.get("namespace")
    who = f"{ns}/{name}" if ns else str(name or "<unnamed>")
    return f"{kind or '<no kind>'} {who}"


def str_map(value: Any, field: str) -> dict[str, str]:
    """A label or annotation map as ``{str: str}``: keys and values stringified, a null value
    kept as "" (unlike ``common.string_map``, which drops it).

    Raises:
        AdapterError: not a mapping.
    """
    return {str(k): "" if v is None else str(v) for k, v in mapping(value, field).items()}


def object_name(obj: Mapping) -> str:
    """``metadata.name``.

    Raises:
        AdapterError: missing, empty or not a string (field ``metadata.name``).
    """
    name = get_path(obj, "metadata.name")
    if not isinstance(name, str) or not name:
        raise AdapterError("expected a non-empty string", field="metadata.name")
    return name


def object_namespace(obj: Mapping, default: str = "default") -> str:
    """``metadata.namespace``; ``default`` when missing or empty.

    Raises:
        AdapterError: not a string (field ``metadata.namespace``).
    """
    ns = get_path(obj, "metadata.namespace")
    if ns is None or ns == "":
        return default
    if not isinstance(ns, str):
        raise AdapterError(f"expected a string, got {type(ns).__name__}", field="metadata.namespace")
    return ns


def quantity(resource: str, value: Any, field: str) -> int:
    """A resource quantity (``"8"``, ``"1500m"``, ``"2Gi"``) in scheduler units.

    Raises:
        AdapterError: not a quantity ``parse_quantity`` accepts for ``resource``.
    """
    try:
        return parse_quantity(resource, value)
    except QuantityError as exc:
        raise AdapterError(str(exc).split(": ", 1)[-1], field=field) from None


def bool_field(value: Any, field: str, default: bool) -> bool:
    """A boolean field: true/false, or the strings "true"/"false" (any case); ``default`` when null.

    Raises:
        AdapterError: anything else.
    """
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise AdapterError(f"expected true or false, got {value!r}", field=field)


def signed_int(value: Any, field: str) -> int:
    """An integer of any sign, or its decimal string (a priority, a host port).

    Raises:
        AdapterError: a bool, or anything that is not an integer.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise AdapterError(f"expected an integer, got {value!r}", field=field)
    try:
        return int(value)
    except ValueError:
        raise AdapterError(f"expected an integer, got {value!r}", field=field) from None


def parse_time(value: Any, field: str) -> float | None:
    """RFC 3339 timestamp (``"2025-06-01T10:00:00Z"``, metav1.Time) → seconds since the epoch.

    Returns None for a missing value. Raises ``AdapterError`` for text that is not a timestamp.
    A timestamp without a zone is taken as UTC (metav1.Time always serialises in UTC).
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):  # YAML loaders may already decode timestamps
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise AdapterError(f"expected an RFC 3339 time such as 2025-06-01T10:00:00Z, got {value!r}", field=field) from None
    else:
        raise AdapterError(f"expected an RFC 3339 time, got {value!r}", field=field)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()
