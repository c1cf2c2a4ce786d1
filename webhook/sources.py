"""Where a snapshot comes from: a dump or the demo (static), or the live cache.

The server and the CLI only talk to a ``SnapshotSource``; the admission path calls
``snapshot()`` (an immutable ``ClusterSnapshot``, no API call) and ``age_seconds()``.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from .engine.snapshot import ClusterSnapshot

__all__ = ["SnapshotSource", "StaticSource"]


@runtime_checkable
class SnapshotSource(Protocol):
    """What the webhook needs from cluster state.

    - ``snapshot()``: the current immutable view (never blocks on the network).
    - ``ready``: True once every informer has synced (readiness).
    - ``age_seconds()``: seconds since the view was last known to be current (for a live
      cache: since the last event or bookmark on the slowest informer); the webhook fails
      open past the policy's ``staleAfterSeconds``.
    - ``status()``: JSON-ready detail for /readyz and metrics (per informer: synced, objects,
      last event age, restarts).
    """

    @property
    def ready(self) -> bool: ...

    def snapshot(self) -> ClusterSnapshot: ...

    def age_seconds(self) -> float: ...

    def status(self) -> dict: ...


class StaticSource:
    """A fixed snapshot (a dump file or the embedded demo): always ready, never stale."""

    def __init__(self, snapshot: ClusterSnapshot, name: str = "") -> None:
        self._snapshot = snapshot
        self._name = name or snapshot.source
        self._loaded = time.monotonic()

    @property
    def ready(self) -> bool:
        return True

    def snapshot(self) -> ClusterSnapshot:
        return self._snapshot

    def age_seconds(self) -> float:
        return 0.0

    def status(self) -> dict:
        return {
            "source": self._name,
            "kind": "static",
            "synced": True,
            "nodes": len(self._snapshot.nodes),
            "pods": len(self._snapshot.pods),
        }
