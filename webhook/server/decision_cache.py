"""Per-snapshot memo of the engine's answers: :class:`DecisionCache` (LRU, thread-safe).

The service keeps two: decisions and expected-wait estimates, both keyed by the gang (minus the
annotations gangcheck itself adds) and the engine options, both emptied when the snapshot
object changes. Owns only the memo; not what is evaluated nor when (``service.py``).
"""

from __future__ import annotations

import dataclasses
import threading
from types import MappingProxyType
from typing import Any

__all__ = ["DecisionCache"]


class DecisionCache:
    """Decisions for recently seen gangs on the current snapshot (LRU, thread-safe).

    The API server sends the same object to /mutate and then /validate (and retries after a
    timeout): the second evaluation is a lookup. Keyed by the gang (minus the annotations
    gangcheck itself adds) and the engine options; emptied whenever ``source.snapshot()``
    returns a different snapshot object, so a decision never outlives the data it was made on.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._snap: Any = None
        self._entries: "dict[str, Any]" = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(gang, options, prefix: str) -> str:
        """``repr(options) + "|" + repr(gang)``, the gang without its annotations that start
        with ``prefix`` (the ones gangcheck's /mutate writes, so /validate hits the same key)."""
        ann = getattr(gang, "annotations", None) or {}
        if any(k.startswith(prefix) for k in ann):
            try:
                kept = {k: v for k, v in ann.items() if not k.startswith(prefix)}
                gang = dataclasses.replace(gang, annotations=type(ann)(kept) if isinstance(ann, MappingProxyType) else kept)
            except (TypeError, ValueError):  # pragma: no cover
                pass
        return repr(options) + "|" + repr(gang)

    def get(self, snap, key: str):
        """The entry for ``key`` on ``snap`` (now the most recently used), or None; a new
        ``snap`` (identity, not equality) empties the cache first. Counts ``hits``/``misses``."""
        if self.size <= 0:
            return None
        with self._lock:
            if snap is not self._snap:
                self._snap, self._entries = snap, {}
                return None
            d = self._entries.pop(key, None)
            if d is not None:
                self._entries[key] = d  # most recently used last
                self.hits += 1
            else:
                self.misses += 1
            return d

    def put(self, snap, key: str, decision) -> None:
        """Keep ``decision`` for ``key`` on ``snap``; the least recently used entries beyond
        ``size`` go. A new ``snap`` empties the cache first."""
        if self.size <= 0:
            return
        with self._lock:
            if snap is not self._snap:
                self._snap, self._entries = snap, {}
            self._entries[key] = decision
            while len(self._entries) > self.size:
                self._entries.pop(next(iter(self._entries)))
