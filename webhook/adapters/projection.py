"""Trimmed projections of Pods and Nodes for msgspec: JSON bytes → only the fields the cluster
converters read.

``webhook.adapters.cluster``'s ``pod_from_k8s`` and ``node_from_k8s`` accept these projections
as they accept the full objects and return the same values (``tests/test_cache.py`` and
``tests/test_dump_fast.py`` check it): every field they read is kept, unknown fields are skipped
by the decoder without building Python objects for them. The live cache (``webhook.cache``)
decodes list pages and watch events with them; ``webhook.dump`` decodes JSON cluster dumps with
them.

A projection decoder raises ``msgspec.ValidationError`` when a kept field has an unexpected type
(``metadata.name`` a number, ``spec.containers`` a mapping…); callers then decode the object
generically (``GENERIC``) so the converter sees the object as written and reports the problem in
its own words. ``decode_object`` / ``decode_list`` do exactly that.

Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import msgspec

__all__ = [
    "PodStruct",
    "POD_STRUCT",
    "PodProjection",
    "NodeProjection",
    "GENERIC",
    "OBJECT_DECODERS",
    "LIST_DECODERS",
    "decode_object",
    "decode_list",
    "decode_any",
]


class _OwnerRef(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    controller: Any


class _Meta(TypedDict, total=False):
    name: str
    namespace: str
    resourceVersion: str
    labels: Any
    annotations: Any
    ownerReferences: list[_OwnerRef]


class _Container(TypedDict, total=False):
    name: str
    resources: Any
    ports: Any
    restartPolicy: Any


class _PodSpec(TypedDict, total=False):
    containers: list[_Container]
    initContainers: list[_Container]
    overhead: Any
    resources: Any
    priority: Any
    priorityClassName: Any
    nodeName: Any
    activeDeadlineSeconds: Any


class _Condition(TypedDict, total=False):
    type: Any
    status: Any


class _ContainerStatus(TypedDict, total=False):
    restartCount: Any


class _PodStatus(TypedDict, total=False):
    phase: Any
    startTime: Any
    containerStatuses: list[_ContainerStatus]
    conditions: list[_Condition]


class PodProjection(TypedDict, total=False):
    """A v1 Pod as ``pod_from_k8s`` and ``pod_is_terminal`` read it."""

    apiVersion: str
    kind: str
    metadata: _Meta
    spec: _PodSpec
    status: _PodStatus


class _NodeSpec(TypedDict, total=False):
    taints: Any
    unschedulable: Any


class _NodeStatus(TypedDict, total=False):
    capacity: Any
    allocatable: Any
    conditions: list[_Condition]


class NodeProjection(TypedDict, total=False):
    """A v1 Node as ``node_from_k8s`` reads it."""

    apiVersion: str
    kind: str
    metadata: _Meta
    spec: _NodeSpec
    status: _NodeStatus


class _ContainerStruct(msgspec.Struct, gc=False):
    """What a pod's effective request and host ports read from one container, undecoded: the
    raw JSON bytes of ``resources`` and ``ports`` key ``_PodReader``'s per-shape memo."""

    resources: msgspec.Raw = msgspec.Raw()
    ports: msgspec.Raw = msgspec.Raw()
    restartPolicy: str | None = None


class _MetaStruct(msgspec.Struct, gc=False):
    name: str | None = None
    namespace: str | None = None
    labels: msgspec.Raw = msgspec.Raw()
    annotations: msgspec.Raw = msgspec.Raw()
    ownerReferences: msgspec.Raw = msgspec.Raw()


class _PodSpecStruct(msgspec.Struct, gc=False):
    containers: list[_ContainerStruct] | None = None
    initContainers: list[_ContainerStruct] | None = None
    overhead: msgspec.Raw = msgspec.Raw()
    resources: msgspec.Raw = msgspec.Raw()
    priority: int | None = None
    priorityClassName: str | None = None
    nodeName: str | None = None
    activeDeadlineSeconds: int | None = None


class _ContainerStatusStruct(msgspec.Struct, gc=False):
    restartCount: int | None = None


class _ConditionStruct(msgspec.Struct, gc=False):
    type: str | None = None
    status: str | None = None


class _PodStatusStruct(msgspec.Struct, gc=False):
    phase: str | None = None
    startTime: str | None = None
    containerStatuses: list[_ContainerStatusStruct] | None = None
    conditions: list[_ConditionStruct] | None = None


class PodStruct(msgspec.Struct, gc=False):
    """A v1 Pod as the dump reader's fast path reads it: typed where the value is used as is,
    raw JSON bytes (``msgspec.Raw``) where a sub-document is only a memo key (labels, owner
    references, container resources) or rarely read (annotations).

    Decoding fails with ``msgspec.ValidationError`` on a kept field of another type (a number
    as ``metadata.name``, a string as ``spec.priority``, a container that is not an object…);
    the caller then reads the object generically and ``pod_from_k8s`` reports it in its own
    words. ``raw`` is not a field of the JSON (its key is one no Pod has): the reader sets it to
    the whole object's bytes for that fallback. ``webhook.adapters.pod_reader._PodReader.projected``
    converts it. ``kind`` and ``apiVersion`` are ``msgspec.UNSET`` when the object has no such
    key (an item of a typed list such as ``PodList``).
    """

    apiVersion: str | None | msgspec.UnsetType = msgspec.UNSET
    kind: str | None | msgspec.UnsetType = msgspec.UNSET
    metadata: _MetaStruct | None = None
    spec: _PodSpecStruct | None = None
    status: _PodStatusStruct | None = None
    raw: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="$gangcheck-raw")


#: Decodes one JSON object into a ``PodStruct`` (``msgspec.ValidationError`` on odd types).
POD_STRUCT = msgspec.json.Decoder(PodStruct)
#: Decodes any JSON value into plain Python values (dict, list, str, int, float, bool, None).
GENERIC = msgspec.json.Decoder()
#: kind → decoder of one object into its projection.
OBJECT_DECODERS: dict[str, msgspec.json.Decoder] = {
    "Pod": msgspec.json.Decoder(PodProjection),
    "Node": msgspec.json.Decoder(NodeProjection),
}
#: kind → decoder of a list response (``{metadata, items: [...]}``) into projections.
LIST_DECODERS: dict[str, msgspec.json.Decoder] = {
    "Pod": msgspec.json.Decoder(TypedDict("_PodList", {"metadata": dict, "items": list[PodProjection]}, total=False)),  # type: ignore[misc]
    "Node": msgspec.json.Decoder(TypedDict("_NodeList", {"metadata": dict, "items": list[NodeProjection]}, total=False)),  # type: ignore[misc]
}


def decode_any(raw: bytes | msgspec.Raw) -> Any:
    """Any JSON value as plain Python values, as the ``json`` module reads it: msgspec, and the
    ``json`` module for what msgspec will not take (a number out of range, ``1e400``, is
    ``inf`` there), as the general dump reader does.

    Raises:
        ValueError: ``raw`` is not valid JSON.
    """
    try:
        return GENERIC.decode(raw)
    except msgspec.MsgspecError:
        return json.loads(bytes(raw))


def decode_object(kind: str, raw: bytes | msgspec.Raw) -> Any:
    """One JSON object of ``kind``: its projection for Pod and Node, else (or when a kept field
    has an unexpected type) the generic decoding.

    Raises:
        msgspec.DecodeError: ``raw`` is not valid JSON.
    """
    dec = OBJECT_DECODERS.get(kind)
    if dec is not None:
        try:
            return dec.decode(raw)
        except msgspec.ValidationError:
            pass  # an odd but valid object: fall back to the generic decoder
    return GENERIC.decode(raw)


def decode_list(kind: str, body: bytes) -> Any:
    """A list response of ``kind`` objects: items as projections for Pod and Node, else (or when
    an item has an unexpected type) the generic decoding.

    Raises:
        msgspec.DecodeError: ``body`` is not valid JSON.
    """
    dec = LIST_DECODERS.get(kind)
    if dec is not None:
        try:
            return dec.decode(body)
        except msgspec.ValidationError:
            pass
    return GENERIC.decode(body)
