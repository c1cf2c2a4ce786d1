"""Argument types and small helpers shared by the CLI commands (check, diagnose, fragmentation,
serve, dump): parsing ``--port`` and ``--now``, the reference time of a dump, labels for
kinds that share a name, and the live cluster's client with errors that name the kubeconfig.

No command logic here; nothing is imported that the commands would not import anyway.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from typing import Any

from .engine.snapshot import ClusterSnapshot
from .engine.text import kind_label

__all__ = [
    "port",
    "parse_time",
    "time_arg",
    "rfc3339",
    "dump_time",
    "reference_time",
    "kind_label",
    "LiveConfigError",
    "live_api_client",
]


def port(text: str) -> int:
    """argparse type: a TCP port number, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {value}")
    return value


def parse_time(text: str) -> float:
    """``--now``: seconds since the epoch (``1748865600``, ``1748865600.5``) or an RFC 3339 time
    (``2025-06-02T12:00:00Z``, ``2025-06-02T14:00:00+02:00``; a time without an offset is
    UTC) → epoch seconds.

    Raises:
        ValueError: anything else (the message shows both accepted forms).
    """
    s = str(text).strip()
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        if value != value or value in (float("inf"), float("-inf")) or value < 0:
            raise ValueError(f"expected a time ≥ 0, got {text!r}")
        return value
    iso = s[:-1] + "+00:00" if s[-1:] in ("Z", "z") else s
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(
            f"expected an RFC 3339 time such as 2025-06-02T12:00:00Z or seconds since the epoch, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def time_arg(text: str) -> float:
    """argparse type wrapping :func:`parse_time`."""
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def rfc3339(seconds: float) -> str:
    """Epoch seconds as ``2025-06-02T12:00:00Z``."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def dump_time(snap: ClusterSnapshot) -> float | None:
    """The newest timestamp the snapshot holds: the latest ``status.startTime`` of its pods
    (epoch seconds), None when no pod has one. A dump describes the cluster at (or shortly
    after) that moment; the wall clock may be days later."""
    newest = None
    for p in snap.pods:
        t = p.start_time
        if t is not None and (newest is None or t > newest):
            newest = t
    return newest


def reference_time(snap: ClusterSnapshot, cluster: str, now: float | None, wall: float) -> tuple[float, str | None]:
    """The time a command evaluates at, and a note saying where it came from (None when the
    user gave ``--now`` or the data is live).

    ``now`` given → it. The demo (``snap.as_of``) → its own time. ``live`` → ``wall``. A dump →
    :func:`dump_time` (its newest pod start), so run times and GPU-hours lost are measured
    at the time of the dump and not at the time it is read; ``wall`` when the dump has no
    pod start time.
    """
    if now is not None:
        return now, None
    if snap.as_of is not None:
        return snap.as_of, None
    if cluster == "live":
        return wall, None
    t = dump_time(snap)
    if t is None:
        return wall, f"no --now given and {cluster} holds no pod start time: using the current time {rfc3339(wall)}"
    return t, f"no --now given: using the dump's newest timestamp {rfc3339(t)} (its latest pod start)"


class LiveConfigError(RuntimeError):
    """No usable Kubernetes configuration for ``--cluster live``; the message names the
    kubeconfig file(s) tried and says what was wrong, on one line."""


def _kubeconfig_files() -> str:
    env = os.environ.get("KUBECONFIG")
    if env:
        files = [f for f in env.split(os.pathsep) if f]
        return ", ".join(files) + " (KUBECONFIG)"
    return os.path.expanduser("~/.kube/config")


def _one_line(exc: BaseException, limit: int = 240) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, UnicodeDecodeError):
        text = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    elif type(exc).__module__.startswith("yaml"):
        problem = getattr(exc, "problem", None)
        mark = getattr(exc, "problem_mark", None)
        text = f"not valid YAML: {problem or text}" + (f" (line {mark.line + 1})" if mark is not None else "")
    elif isinstance(exc, (TypeError, AttributeError, KeyError, ValueError)):
        text = f"not a kubeconfig ({type(exc).__name__}: {text})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def live_api_client() -> Any:
    """A ``kubernetes.client.ApiClient`` as ``webhook.cache.default_api_client()`` makes it
    (in-cluster config, else the kubeconfig), reading ``$KUBECONFIG`` when called (the client
    library reads it once, at import), with any failure as a :class:`LiveConfigError` naming
    the kubeconfig file(s).

    Raises:
        LiveConfigError: not in a cluster and the kubeconfig is missing, unreadable, not
            YAML, not a kubeconfig, or has no usable context.
    """
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
        return client.ApiClient(cfg)
    except config.ConfigException:
        pass
    try:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None, client_configuration=cfg,
                                persist_config=False)
        return client.ApiClient(cfg)
    except Exception as exc:  # the client raises ConfigException, YAML, Unicode and Type errors
        raise LiveConfigError(
            f"--cluster live: not running in a cluster and no usable kubeconfig in {_kubeconfig_files()}: "
            f"{_one_line(exc)}"
        ) from None
