"""LiveCache: the informers' stores assembled into an immutable ``ClusterSnapshot`` (a ``SnapshotSource``).

Owns: the informers' lifecycle (one thread each, ``start``/``stop``), the stores under one lock
(``_replace`` after a list, ``_apply`` for watch events), the per-node Σ requests kept on every
pod event (bind, delete, rebind, request change: a snapshot does not re-sum pods), the
run-time history the watch feeds, the snapshot rebuild, readiness and staleness.

``snapshot()`` returns the last published ``ClusterSnapshot``; a builder thread republishes it
at most every ``rebuild_interval_s`` (0.5 s) when something changed. The admission path never
waits on the network. ``ready`` turns True once every informer has synced and a snapshot of the
synced state is published; then ``gc.freeze()`` moves the long-lived projection out of the
collector's reach (FIELD-NOTES §9).

Does not own: list/watch/410/backoff (``webhook.cache.informer``), which kinds are read and how
each is projected and placed in the snapshot (``webhook.cache.kinds``, ``webhook.cache.pods``).

Units: ages and intervals in seconds (monotonic clock), history times epoch seconds.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from ..engine.snapshot import ClusterSnapshot
from ..engine.wait import RuntimeHistory
from .informer import ResourceSpec, backoff_delay, default_api_client, rest_get
from .kinds import DEFAULT_RESOURCES, LIST_SLOTS, _Informer, assemble_snapshot, policy_resource
from .pods import PodInterner

__all__ = ["LiveCache"]

log = logging.getLogger("gangcheck.cache")


class LiveCache:
    """A ``SnapshotSource`` kept current by list+watch informers.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (its configuration gives the host, TLS
            and auth); None → ``default_api_client()`` (in-cluster, else KUBECONFIG).
        resources: the resources to read (default ``DEFAULT_RESOURCES``).
        policy_configmap: ``(namespace, name)`` of the policy ConfigMap to watch, or None.
        on_policy: called from the informer thread with the ConfigMap's ``data`` (dict) when it
            appears or changes, and with None when it is absent after the first sync or deleted.
            Exceptions it raises are logged, never propagated.
        page_size: list page size (``limit``). rebuild_interval_s: minimum seconds between two
            snapshot rebuilds (stretched to twice the last build's duration when that is
            longer, so building never takes more than a third of the time). watch_timeout_s: (lo, hi) range of the server-side watch
            ``timeoutSeconds`` (client-go uses 5–10 min). backoff_base_s / backoff_max_s:
            exponential backoff on errors, with jitter (delay × U(0.5, 1)). crd_recheck_s: how
            often an absent CRD is listed again. freeze_gc: ``gc.freeze()`` after the first sync.

    Call ``start()``, then read ``ready``/``snapshot()``; ``stop()`` ends and joins the threads.
    A silent half-open watch connection is noticed by the socket read timeout (the watch's
    ``timeoutSeconds`` + ``watch_read_slack_s``), after which the watch is re-opened.

    Raises:
        kubernetes.config.ConfigException: no ``api_client`` given and no in-cluster config or
            kubeconfig found.
    """

    def __init__(
        self,
        api_client: Any = None,
        *,
        resources: Iterable[ResourceSpec] = DEFAULT_RESOURCES,
        policy_configmap: tuple[str, str] | None = None,
        on_policy: Callable[[dict | None], None] | None = None,
        page_size: int = 500,
        rebuild_interval_s: float = 0.5,
        watch_timeout_s: tuple[float, float] = (300.0, 600.0),
        watch_read_slack_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        list_timeout_s: float = 120.0,
        backoff_base_s: float = 0.8,
        backoff_max_s: float = 30.0,
        crd_recheck_s: float = 300.0,
        dependency_wait_s: float = 10.0,
        freeze_gc: bool = True,
        source: str = "live",
    ) -> None:
        self._own_client = api_client is None
        self.api_client = api_client if api_client is not None else default_api_client()
        specs = list(resources)
        if policy_configmap is not None:
            ns, name = policy_configmap
            specs.append(policy_resource(ns, name))
        self.on_policy = on_policy
        self.page_size = page_size
        self.rebuild_interval_s = rebuild_interval_s
        self.watch_timeout_s = watch_timeout_s
        self.watch_read_slack_s = watch_read_slack_s
        self.connect_timeout_s = connect_timeout_s
        self.list_timeout_s = list_timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.crd_recheck_s = crd_recheck_s
        self.dependency_wait_s = dependency_wait_s
        self.freeze_gc = freeze_gc
        self.source = source

        #: What the expected-wait estimator learns from: run times of gangs seen finishing
        #: (Succeeded, or stopped at their limit) per (queue, owner kind), with their limits,
        #: and pods the watch sees created (gang arrivals), from now on. Bounded memory.
        self.history = RuntimeHistory()
        self.history.observe_from(time.time())
        self._learned: OrderedDict[str, float] = OrderedDict()   # gang → when its run time was learned
        self._learned_lock = threading.Lock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._generation = 0
        self._informers: dict[str, _Informer] = {}
        for s in specs:
            self._informers[s.name] = _Informer(self, s)
        #: snapshot slot → the informers whose stores fill it, in merge order (kinds.KINDS' slot)
        self._slots = self._slot_informers(self._informers.values())
        self._used: dict[str, dict[str, int]] = {}  # node → Σ requests of pods bound to it (+ "pods")
        self._pc_values: dict[str, int] = {}
        self._pc_default = 0
        #: shares equal request maps and label sets between pods, interns their strings
        self._compact_pod = PodInterner().compact
        self._policy_data: dict | None = None
        self._policy_reported = False
        self._snapshot = ClusterSnapshot((), source=source)
        self._snapshot_time = time.monotonic()
        self._snapshot_generation = -1
        self._ready = False
        self._started = 0.0
        self._sync_seconds: float | None = None
        self._builder = threading.Thread(target=self._build_loop, name="cache-snapshot", daemon=True)
        self.builds = 0
        self.build_errors = 0
        self.last_build_s = 0.0

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "LiveCache":
        """Start every informer and the snapshot builder; returns self (non-blocking)."""
        self._started = time.monotonic()
        for inf in self._informers.values():
            inf.thread.start()
        self._builder.start()
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until ``ready`` (or ``timeout`` seconds); returns ``ready``. Not for the admission path."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready and not self._stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        return self._ready

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every thread: abort open requests, join informers and the builder (≤ ``timeout`` s)."""
        self._stop.set()
        self._changed.set()
        for inf in self._informers.values():
            inf.close()
        deadline = time.monotonic() + timeout
        for inf in self._informers.values():
            if inf.thread.is_alive():
                inf.thread.join(max(0.0, deadline - time.monotonic()))
        if self._builder.is_alive():
            self._builder.join(max(0.0, deadline - time.monotonic()))
        if self._own_client:
            try:
                self.api_client.close()
            except Exception:
                pass

    def __enter__(self) -> "LiveCache":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------ SnapshotSource
    @property
    def ready(self) -> bool:
        """True once every informer has synced and a snapshot of that state is published."""
        return self._ready

    def snapshot(self) -> ClusterSnapshot:
        """The last published snapshot (immutable; never blocks, never calls the API server)."""
        return self._snapshot

    def age_seconds(self) -> float:
        """Seconds the view may lag the cluster: over installed informers, 0 while a watch
        stream is open, else seconds since its last list, event, bookmark or clean stream end.
        Before the first sync: seconds since ``start()``."""
        now = time.monotonic()
        if not self._ready:
            return now - self._started if self._started else 0.0
        worst = 0.0
        for inf in self._informers.values():
            if inf.installed is False or inf.watch_open:
                continue
            worst = max(worst, now - inf.last_contact)
        return worst

    def status(self) -> dict:
        """JSON-ready state for /readyz and /metrics: ready, age, sizes and per informer:
        synced, installed, objects, last event age, watch restarts, relists, errors."""
        now = time.monotonic()
        snap = self._snapshot
        return {
            "source": self.source,
            "kind": "live",
            "ready": self._ready,
            "synced": all(inf.synced.is_set() for inf in self._informers.values()),
            "age_s": round(self.age_seconds(), 3),
            "sync_s": None if self._sync_seconds is None else round(self._sync_seconds, 3),
            "nodes": len(snap.nodes),
            "pods": len(snap.pods),
            "snapshot_age_s": round(now - self._snapshot_time, 3),
            "snapshot_builds": self.builds,
            "snapshot_build_s": round(self.last_build_s, 3),
            "informers": {name: inf.status(now) for name, inf in self._informers.items()},
        }

    # ------------------------------------------------------------ for tests and benchmarks
    def informer_status(self, name: str) -> dict:
        """``status()["informers"][name]``."""
        return self._informers[name].status(time.monotonic())

    def apply_watch_lines(self, name: str, lines: Iterable[bytes]) -> int:
        """Apply watch event lines (``{"type":…,"object":…}`` JSON) to informer ``name`` as if
        they came from its stream: decode, convert, update the store and per-node usage.
        Returns the events applied. Meant for benchmarks of the apply path."""
        return self._informers[name].apply_lines(lines)

    def node_used(self, node: str) -> dict[str, int]:
        """A copy of the incrementally maintained Σ requests of pods bound to ``node``."""
        with self._lock:
            return dict(self._used.get(node, {}))

    # ------------------------------------------------------------ internals
    def _get(self, path: str, query: list[tuple[str, str]], timeout):
        """GET through the kubernetes client's REST layer (auth headers, TLS, proxy); returns
        the raw urllib3 response, body not read."""
        return rest_get(self.api_client, path, query, timeout)

    def _backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row (``informer.backoff_delay``)."""
        return backoff_delay(failures, self.backoff_base_s, self.backoff_max_s)

    @staticmethod
    def _slot_informers(informers: Iterable[_Informer]) -> dict[str, list[_Informer]]:
        """slot → its informers, by the row's ``rank`` then informer order (a later one's
        entry wins on the same key when the slot's stores are merged)."""
        slots: dict[str, list[_Informer]] = {}
        for inf in sorted(informers, key=lambda i: i.kind.rank if i.kind is not None else 0):
            if inf.kind is not None and inf.kind.slot is not None:
                slots.setdefault(inf.kind.slot, []).append(inf)
        return slots

    @staticmethod
    def _add_used(used: dict[str, dict[str, int]], pod, sign: int) -> None:
        """Add (``sign`` 1) or remove (−1) ``pod``'s requests and one pod to its node's Σ in ``used``."""
        node = pod.node_name
        if not node:
            return
        u = used.get(node)
        if u is None:
            u = used[node] = {"pods": 0}
        for r, v in pod.requests.items():
            u[r] = u.get(r, 0) + sign * v
        u["pods"] = u.get("pods", 0) + sign

    def _apply(self, inf: _Informer, ops: list[tuple[Any, Any]]) -> None:
        """Apply (key, value|None) operations to ``inf``'s store under the lock."""
        store = inf.store
        kind = inf.kind
        with self._lock:
            if kind is not None and kind.node_usage:
                used, add = self._used, self._add_used
                for key, value in ops:
                    old = store.pop(key, None) if value is None else store.get(key)
                    if old is not None:
                        add(used, old, -1)
                    if value is not None:
                        store[key] = value
                        add(used, value, 1)
            else:
                for key, value in ops:
                    if value is None:
                        store.pop(key, None)
                    else:
                        store[key] = value
            self._generation += 1
        self._after_change(inf)

    def _replace(self, inf: _Informer, new: dict) -> None:
        """Swap ``inf``'s whole store (after a list), recomputing per-node usage for pods."""
        with self._lock:
            inf.store = new
            if inf.kind is not None and inf.kind.node_usage:
                used: dict[str, dict[str, int]] = {}
                for pod in new.values():
                    self._add_used(used, pod, 1)
                self._used = used
            self._generation += 1
        self._after_change(inf)

    def _after_change(self, inf: _Informer) -> None:
        """The row's ``on_change`` (PriorityClasses, the policy ConfigMap), then wake the builder."""
        kind = inf.kind
        if kind is not None and kind.on_change is not None:
            kind.on_change(self, inf.store)
        self._changed.set()

    def _gather(self) -> dict[str, Any]:
        """slot → a copy of its stores' entries (a tuple for ``LIST_SLOTS``, else one merged
        map); call under ``_lock``."""
        stores: dict[str, Any] = {}
        for slot, infs in self._slots.items():
            if slot in LIST_SLOTS:
                stores[slot] = tuple(v for inf in infs for v in inf.store.values())
            else:
                merged: dict = {}
                for inf in infs:
                    merged.update(inf.store)
                stores[slot] = merged
        return stores

    def _build(self) -> ClusterSnapshot:
        """Copy the stores under the lock (cheap), build the snapshot outside it."""
        with self._lock:
            gen = self._generation
            stores = self._gather()
            used = {k: dict(v) for k, v in self._used.items()}
            pcs = dict(self._pc_values)
        snap = assemble_snapshot(stores, priority_classes=pcs, node_used=used, source=self.source)
        self._snapshot_generation = gen
        return snap

    def _build_loop(self) -> None:
        """The builder thread: once every informer has synced, rebuild and publish the snapshot
        after changes, at most every ``rebuild_interval_s`` (or twice the last build's time);
        the first publication makes the cache ``ready`` (and freezes the collector's view)."""
        last = 0.0
        while not self._stop.is_set():
            self._changed.wait(1.0)
            if self._stop.is_set():
                break
            if not self._changed.is_set():
                continue
            if not all(inf.synced.is_set() for inf in self._informers.values()):
                # Clear, then look again: an informer sets ``synced`` before ``_changed``, so a
                # sync that completes between the check above and this clear() is seen by the
                # second check. Clearing after a single check lost that wake-up, and the cache
                # then stayed not-ready until some unrelated event arrived (never, if quiet).
                self._changed.clear()
                if not all(inf.synced.is_set() for inf in self._informers.values()):
                    continue
            # at most every rebuild_interval_s, and never more than a third of the time
            # building (a 500k-pod snapshot takes ~0.7 s): events keep most of the GIL
            gap = max(self.rebuild_interval_s, 2.0 * self.last_build_s)
            wait = gap - (time.monotonic() - last)
            if wait > 0 and self._ready and self._stop.wait(wait):
                break
            self._changed.clear()
            try:
                tb = time.perf_counter()
                snap = self._build()
                self.last_build_s = time.perf_counter() - tb
            except Exception:
                self.build_errors += 1
                log.exception("snapshot build failed; keeping the previous snapshot")
                continue
            last = time.monotonic()
            self._snapshot = snap
            self._snapshot_time = last
            self.builds += 1
            if not self._ready:
                self._sync_seconds = last - self._started
                if self.freeze_gc:
                    gc.collect()
                    gc.freeze()
                self._ready = True
                log.info("cache synced in %.2fs: %d nodes, %d pods", self._sync_seconds, len(snap.nodes), len(snap.pods))
