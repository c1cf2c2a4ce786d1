"""The live cache: list+watch informers feeding an immutable ``ClusterSnapshot`` (a ``SnapshotSource``).

The package's public face; its rooms:

- ``informer`` — list+watch of one REST resource in its own thread, mirroring client-go's
  reflector: paged list (``limit`` + ``continue``, a 410 on the token restarts it), watch from
  the list's resourceVersion with bookmarks, re-list on 410 Gone, exponential backoff with
  jitter, 404 → not installed for an optional CRD. Knows no kind.
- ``kinds`` — ONE table (``KINDS``) of what is watched (group/versions/plural, field
  selector, required or optional) and how each kind is projected (``webhook.adapters``
  converters) into which snapshot field; the projecting informer; the snapshot's assembly.
- ``pods`` — the Pod row's steps: the fast list path (``PodStruct`` + memoising reader),
  interning, and what the watch teaches the wait estimator (run times, arrivals).
- ``live`` — ``LiveCache``: the stores under one lock, per-node Σ requests kept on every pod
  event, the snapshot rebuild (≤ every ``rebuild_interval_s``), readiness and staleness.

The store holds only the engine's projection of each object (``Node``, ``BoundPod``,
``ClusterQueue``…), never the decoded dict: JSON bytes are decoded with msgspec, Pods and Nodes
straight into a trimmed projection (``webhook.adapters.projection``, shared with the dump
reader). Pods are filtered server-side to non-terminal phases (``POD_FIELD_SELECTOR``).

Only the ``kubernetes`` client's configuration, auth and REST layer are used (in-cluster config
or KUBECONFIG), with raw responses; no client models are built.
"""

from __future__ import annotations

from ..adapters.projection import decode_object as _decode_object  # noqa: F401  (tests read it here)
from .informer import CacheError, ResourceSpec, default_api_client
from .kinds import DEFAULT_RESOURCES, POD_FIELD_SELECTOR, _Informer  # noqa: F401  (_Informer: cli_dump's collector)
from .live import LiveCache

__all__ = ["LiveCache", "ResourceSpec", "DEFAULT_RESOURCES", "POD_FIELD_SELECTOR", "CacheError", "default_api_client"]
