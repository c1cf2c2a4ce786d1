"""What the CLI commands read, shared by ``check`` (webhook/cli.py) and ``diagnose`` /
``fragmentation`` (webhook/diagnose/command.py), so that neither imports the other:

- ``load_cluster_spec``: a ``--cluster`` value (a dump path, ``demo``, ``live``) → the snapshot
  and, for lookups, the raw objects; ``live`` syncs a LiveCache, with progress on stderr.
- ``manifest_gangs``: manifest documents → the gangs ``check`` would decide on, or the reason the
  webhook would pass a document unchanged (``admission.skip_reason``).
- ``review_of``: the AdmissionReview request ``kubectl create`` of an object would send.

Errors: AdapterError (a document gangcheck cannot read), DumpError (a dump), LiveConfigError (a
kubeconfig), TimeoutError (the live cache did not sync in time).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import admission as adm
from .adapters import adapt, is_supported
from .cli_args import kind_label
from .engine.snapshot import ClusterSnapshot

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["load_cluster_spec", "manifest_gangs", "review_of"]


def load_cluster_spec(spec: str, timeout: float, lookups: bool = True) -> tuple[ClusterSnapshot, list[Mapping] | None]:
    """The snapshot and, for a dump or the demo when ``lookups``, the raw objects (for workload
    lookups; None otherwise)."""
    if spec == "live":
        from .cache import LiveCache
        from .cli_args import live_api_client

        cache = LiveCache(live_api_client()).start()  # LiveConfigError names a bad kubeconfig
        t0 = time.monotonic()
        try:
            while not cache.wait_ready(1.0):
                el = time.monotonic() - t0
                print(f"gangcheck: syncing live cache… {el:.0f}s", file=sys.stderr)
                if el >= timeout:
                    raise TimeoutError(f"live cache not synced after {timeout:.0f}s (status: {json.dumps(cache.status())[:400]})")
            print(f"gangcheck: live cache synced in {time.monotonic() - t0:.1f}s", file=sys.stderr)
            return cache.snapshot(), None
        finally:
            cache.stop()
            cache.api_client.close()
    if spec == "demo":
        from .demo import demo_objects, demo_snapshot

        return demo_snapshot(), demo_objects()
    from .dump import load_cluster, load_cluster_and_objects

    if not lookups:  # a manifest names the gang: no lookup objects to keep
        return load_cluster(spec), None
    # Read once: the snapshot and the workload lookup share it (JSON dumps through the fast
    # reader; their Pods and Nodes are decoded in full only when a lookup needs them).
    return load_cluster_and_objects(spec)


def review_of(obj: dict) -> adm.ReviewRequest:
    """The request the API server would send for ``kubectl create`` of ``obj`` (namespace
    defaulted as kubectl does), so ``check`` asks the webhook's own questions of it."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) and meta.get("namespace") else "default"
    name = meta.get("name") if isinstance(meta.get("name"), str) else ""
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    return adm.ReviewRequest(uid="gangcheck-check", operation="CREATE", namespace=ns, name=name,
                             kind={"group": group, "version": version, "kind": obj.get("kind")}, obj=obj, dry_run=False)


def manifest_gangs(source: str, objects: list[dict], skip_unsupported: bool, policy: Policy) -> tuple[list, list[str]]:
    """``(items, notes)``: per checked document a GangRequest, or ``(object, reason)`` for one
    the webhook admits unchanged (``admission.skip_reason``: an exempt namespace …)."""
    items, notes = [], []
    for i, obj in enumerate(objects, 1):
        if not is_supported(obj):
            if skip_unsupported and isinstance(obj, dict):
                notes.append(f"skipped document {i}: {obj.get('apiVersion')}/{obj.get('kind')} is not a kind gangcheck checks")
                continue
        elif isinstance(obj, dict):
            reason = adm.skip_reason(review_of(obj), policy)
            if reason is not None:
                items.append((obj, reason))
                continue
        gang = adapt(obj, source=source)  # raises AdapterError for unsupported kinds
        if gang is None:
            meta = obj.get("metadata") or {}
            notes.append(f"skipped document {i}: {kind_label(obj.get('kind'), obj.get('apiVersion'))} {meta.get('name', '')} is not a gang")
            continue
        items.append(gang)
    return items, notes
