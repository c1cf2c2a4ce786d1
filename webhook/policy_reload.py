"""Live policy: a file (``--policy FILE``, or the mounted ConfigMap ``gangcheck-policy``) polled
for changes; an invalid new version is reported and the last good policy stays in force.

Kubelet updates a mounted ConfigMap by swapping a symlink (``..data``), so a path watch misses
it; hashing the file's bytes every ``interval`` seconds catches every change, whatever the
mechanism.

What is not a policy keeps the last good one in force (``valid`` false, the problem's code in
``status()["problem"]``, /readyz and ``gangcheck_policy_problem``): invalid YAML or fields, a file
that is not UTF-8 or cannot be read, an empty document (an unfinished write: nothing,
whitespace, comments only, ``~``), and a policy ConfigMap (or its ``policy.yaml`` key) that
disappears after one was applied (a delete-and-recreate must not switch a warn-mode webhook to
enforce for a moment). ``{}`` is the way to ask for the default policy.
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
        return {"source": "static", "source_kind": "static", "valid": True, "in_force": True, "problem": None,
                "error": None, "reloads": 0, "failures": 0}

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
        self.problem: str | None = None  # PolicyError.code of the pending error
        self.loaded_at: float | None = None
        self._text_applied = False  # a policy from update_text() is in force
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
                self._fail(msg, "unreadable")
            return "failed"
        return self._apply(data, str(self.path), initial=initial)

    def update_text(self, text: str | None, source: str = "ConfigMap gangcheck-policy") -> str:
        """Apply policy YAML received some other way (e.g. the live cache's watch on the
        ConfigMap). Same rules as ``check()``: invalid → last good kept. ``None`` means the
        ConfigMap or its key is absent: before any ConfigMap policy was applied the current
        (default) policy stays; after one was, it stays in force and the absence is reported
        (code ``missing``) until the ConfigMap is back. Never raises."""
        if text is None:
            with self._lock:
                if not self._text_applied:
                    return "unchanged"
                msg = (f"{source}: the policy ConfigMap or its policy.yaml key is gone; keeping the last good "
                       "policy (write {} for the default policy)")
                if self.error == msg:
                    return "unchanged"
                self._digest = None
                self._fail(msg, "missing")
            return "failed"
        return self._apply(text.encode("utf-8", errors="surrogatepass"), source, from_text=True)

    def _apply(self, data: bytes, source: str, *, initial: bool = False, from_text: bool = False) -> str:
        with self._lock:
            digest = hashlib.sha256(data).digest()
            if digest == self._digest:
                return "unchanged"
            self._digest = digest
            try:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise PolicyError(f"{source}: not UTF-8 text (byte {exc.start})", "not_utf8") from None
                policy = parse_policy(text, source)
            except PolicyError as exc:
                self._fail(str(exc), getattr(exc, "code", "invalid"))
                return "failed"
            self._policy = policy
            self._text_applied = from_text
            self.error = None
            self.problem = None
            self.loaded_at = time.time()
            if not initial:
                self.reloads += 1
                log.info("policy reloaded from %s (mode %s)", source, policy.mode)
        if self.on_change and not initial:
            self.on_change("reloaded", self)
        return "reloaded"

    def _fail(self, msg: str, code: str = "invalid") -> None:
        self.failures += 1
        self.error = msg
        self.problem = code
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
        """``{"source", "source_kind", "valid", "in_force", "problem", "error", "reloads",
        "failures", "loaded_at", "mode"}``: ``valid`` false with ``in_force`` true means the
        latest version is not a policy and the last good one (loaded at ``loaded_at``, Unix
        seconds) is still applied; ``problem`` is its ``PolicyError.code``, ``error`` the full
        text (it names the file and quotes the parser: /readyz shows it only on request from
        loopback). ``source_kind``: ``file``, ``configmap`` or ``default``."""
        p = self._policy
        kind = "file" if self.path else ("configmap" if self._text_applied or self.error else "default")
        return {
            "source": str(self.path) if self.path else ("ConfigMap" if kind == "configmap" else "default"),
            "source_kind": kind,
            "problem": self.problem,
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
