"""Live policy: a file (``--policy FILE``, or the mounted ConfigMap ``gangcheck-policy``) polled
for changes; an invalid new version is reported and the last good policy stays in force.

Kubelet updates a mounted ConfigMap by swapping a symlink (``..data``), so a path watch misses
it; hashing the file's bytes every ``interval`` seconds catches every change, whatever the
mechanism.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from pathlib import Path
from typing import Callable

from .policy import Policy, PolicyError, parse_policy

__all__ = ["PolicyReloader", "StaticPolicy", "as_policy_provider"]

log = logging.getLogger("gangcheck.policy")


class StaticPolicy:
    """A fixed policy behind the same interface as :class:`PolicyReloader` (always valid)."""

    def __init__(self, policy: Policy | None = None) -> None:
        self._policy = policy or Policy()

    def current(self) -> Policy:
        """The policy in force."""
        return self._policy

    def status(self) -> dict:
        """JSON-ready detail for /readyz: ``{"source": "static", "valid": true, ...}``."""
        return {"source": "static", "valid": True, "in_force": True, "error": None, "reloads": 0, "failures": 0}

    reloads = 0
    failures = 0


class PolicyReloader:
    """Holds the policy read from ``path`` and re-reads it when its content changes.

    - ``current()``: the last good ``Policy``, or None when the first read already failed.
    - ``check()``: hash the file; if the bytes changed, parse them; valid → swap in
      (``reloads`` += 1), invalid or unreadable → keep the last good one (``failures`` += 1,
      ``error`` set, logged). Returns ``"unchanged"``, ``"reloaded"`` or ``"failed"``.
    - ``start()`` / ``stop()``: a daemon thread calling ``check()`` every ``interval`` seconds.
    - ``status()``: JSON-ready detail for /readyz and metrics.

    ``path=None`` means the default policy, never reloaded.
    """

    def __init__(self, path: str | Path | None, *, interval: float = 2.0,
                 on_change: Callable[[str, "PolicyReloader"], None] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.interval = float(interval)
        self.on_change = on_change
        self.reloads = 0
        self.failures = 0
        self.error: str | None = None
        self.loaded_at: float | None = None
        self._digest: bytes | None = None
        self._policy: Policy | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.path is None:
            self._policy = Policy()
            self.loaded_at = time.time()
        else:
            self.check(initial=True)

    # -- reading

    def current(self) -> Policy | None:
        """The policy in force (the last valid one read), or None if none was ever valid."""
        return self._policy

    @property
    def valid(self) -> bool:
        """True when the latest version of the file was valid (no pending error)."""
        return self.error is None and self._policy is not None

    def check(self, *, initial: bool = False) -> str:
        """Re-read the file if its bytes changed; see the class docstring. Never raises."""
        if self.path is None:
            return "unchanged"
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            msg = f"{self.path}: cannot read policy file: {exc.strerror or exc}"
            with self._lock:
                if self.error == msg:
                    return "unchanged"
                self._digest = None
                self._fail(msg)
            return "failed"
        return self._apply(data, str(self.path), initial=initial)

    def update_text(self, text: str | None, source: str = "ConfigMap gangcheck-policy") -> str:
        """Apply policy YAML received some other way (e.g. the live cache's watch on the
        ConfigMap; ``None`` = the ConfigMap or its key is gone → the default policy).
        Same rules as ``check()``: invalid → last good kept. Never raises."""
        return self._apply((text or "").encode("utf-8"), source)

    def _apply(self, data: bytes, source: str, *, initial: bool = False) -> str:
        with self._lock:
            digest = hashlib.sha256(data).digest()
            if digest == self._digest:
                return "unchanged"
            self._digest = digest
            try:
                policy = parse_policy(data.decode("utf-8", errors="replace"), source)
            except PolicyError as exc:
                self._fail(str(exc))
                return "failed"
            self._policy = policy
            self.error = None
            self.loaded_at = time.time()
            if not initial:
                self.reloads += 1
                log.info("policy reloaded from %s (mode %s)", source, policy.mode)
        if self.on_change and not initial:
            self.on_change("reloaded", self)
        return "reloaded"

    def _fail(self, msg: str) -> None:
        self.failures += 1
        self.error = msg
        if self._policy is not None:
            log.error("invalid policy, keeping the last good one: %s", msg)
        else:
            log.error("invalid policy and no previous good one (webhook fails open): %s", msg)
        if self.on_change:
            try:
                self.on_change("failed", self)
            except Exception:  # pragma: no cover - a callback must not break polling
                log.exception("policy on_change callback failed")

    def status(self) -> dict:
        """``{"source", "valid", "in_force", "error", "reloads", "failures", "loaded_at", "mode"}``:
        ``valid`` false with ``in_force`` true means the file is invalid and the last good policy
        (loaded at ``loaded_at``, Unix seconds) is still applied."""
        p = self._policy
        return {
            "source": str(self.path) if self.path else "default",
            "valid": self.valid,
            "in_force": p is not None,
            "error": self.error,
            "reloads": self.reloads,
            "failures": self.failures,
            "loaded_at": self.loaded_at,
            "mode": p.mode if p else None,
        }

    # -- polling thread

    def start(self) -> "PolicyReloader":
        """Start polling in a daemon thread (no-op without a path or when already running)."""
        if self.path is None or self._thread is not None:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gangcheck-policy-reload", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # pragma: no cover - check() does not raise; belt and braces
                log.exception("policy reload failed")

    def stop(self) -> None:
        """Stop the polling thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def as_policy_provider(p) -> "PolicyReloader | StaticPolicy":
    """Accept a ``Policy``, ``None`` (default policy), a ``PolicyReloader``/``StaticPolicy``, or any
    object with ``current()``; return an object with ``current()``, ``status()``,
    ``reloads`` and ``failures``."""
    if p is None or isinstance(p, Policy):
        return StaticPolicy(p)
    if hasattr(p, "current"):
        return p
    if callable(p):
        class _Callable(StaticPolicy):
            def current(self_inner) -> Policy:
                return p()

        return _Callable(None)
    raise TypeError(f"expected a Policy, a PolicyReloader or a callable, got {type(p).__name__}")
