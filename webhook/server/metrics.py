"""The webhook's Prometheus metrics: the per-request series (``Metrics``) and the scrape-time
state of the source and the policy (``StateCollector``).

Owns metric names, help texts, labels, :data:`LATENCY_BUCKETS` (seconds) and the bounded label
values (:func:`reason_label`, :data:`GPU_NODE_STATES`). Does not own when they are incremented:
``service.AdmissionService`` records each admission, ``runner.WebhookServer`` the certificate
reloads. Each app has its own ``CollectorRegistry`` (several apps may live in one
process); no ``*_created`` series (``disable_created_metrics``): they double the scrape for nothing.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

from prometheus_client import CollectorRegistry, disable_created_metrics, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

import numpy as np

from ..diagnose.by_domain import node_figures
from ..diagnose.fragmentation import fragmentation
from ..engine.snapshot import GPU
from ..engine.topology import label_domains
from ..sources import SnapshotSource

__all__ = ["LATENCY_BUCKETS", "GPU_NODE_STATES", "MAX_DOMAINS", "MAX_PRODUCTS", "Metrics", "StateCollector",
           "gpu_fragmentation", "gpu_domains", "metrics_topology_key", "reason_label"]

disable_created_metrics()  # no *_created series: they double the scrape for nothing

#: Latency histogram buckets in seconds, from 0.5 ms.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

#: A finding code as the engine writes one (UpperCamelCase, e.g. ExceedsMaxQuota).
_CODE = re.compile(r"^[A-Z][A-Za-z0-9]{0,63}$")

#: ``gangcheck_gpu_nodes{state}``: every GPU node is in exactly one (a closed set).
GPU_NODE_STATES = ("whole_free", "partly_used", "full", "cordoned", "not_ready", "unhealthy_devices", "excluded")


def reason_label(codes) -> str:
    """The ``reason`` label of a denial: the decision's leading finding code (``Decision.reasons``
    is most important first). The codes are the engine's own literals, a closed set; anything
    else (none, not UpperCamelCase, longer than 64) is ``Other``, so the label stays bounded."""
    first = next(iter(codes or ()), None)
    return first if isinstance(first, str) and _CODE.match(first) else "Other"


def gpu_fragmentation(snap, options=None) -> dict:
    """Scrape-time GPU fragmentation of ``snap`` for the ``gpu`` resource (``nvidia.com/gpu``).

    From ``diagnose.fragmentation`` with a one-GPU probe pod (tolerating the GPU taint): a node
    that passes the scheduler's filters for it now is schedulable; ``free`` is the GPUs free
    there, ``free_whole_nodes`` the part on such nodes with no GPU in use and every installed
    device allocatable (what a pod asking for a whole node can use). Returns ``{"free": int GPUs, "free_whole_nodes": int GPUs, "nodes":
    {state: count}}`` with every state of :data:`GPU_NODE_STATES` (a node with free GPUs that no
    probe can use — out of CPU or memory, a taint, a full pod count — is ``excluded``).
    """
    rep = fragmentation(snap, {GPU: 1}, options)
    nodes = dict.fromkeys(GPU_NODE_STATES, 0)
    whole = 0
    for h in rep["heatmap"]:
        state = _HEATMAP_STATE.get(h["state"])
        if state is None:  # schedulable now, every installed device allocatable
            left = max(h["allocatable"] - h["used"], 0)
            state = "full" if left == 0 else "whole_free" if h["used"] == 0 else "partly_used"
            whole += left if h["used"] == 0 else 0
        nodes[state] += 1
    return {"free": int(rep["free"]), "free_whole_nodes": whole, "nodes": nodes}


#: ``gangcheck_gpu_whole_free_nodes`` / ``gangcheck_gpus_stranded``: at most this many ``domain``
#: values (the domains with the most GPU nodes, then by name), the rest summed into "other" —
#: plus "none" (GPU nodes without the label) and "all" (no top-level key known).
MAX_DOMAINS = 50
#: ... and at most this many ``product`` values (``nvidia.com/gpu.product``; the products with the
#: most GPU nodes), the rest summed into "other", nodes without the label "unknown".
MAX_PRODUCTS = 20
PRODUCT_LABEL = "nvidia.com/gpu.product"


def metrics_topology_key(snap, policy=None) -> str | None:
    """The node label key of the gauges' ``domain``: the policy's ``metricsTopologyLevel`` when set,
    else the top level of the snapshot's Kueue Topology (``snap.topology.kueue``; with several,
    the first by name), else None (every node is in domain "all")."""
    key = getattr(policy, "metrics_topology_level", None)
    if key:
        return key
    topologies = getattr(getattr(snap, "topology", None), "kueue", None) or {}
    for name in sorted(topologies):
        if topologies[name]:
            return topologies[name][0]
    return None


def gpu_domains(snap, key: str | None, options=None) -> dict:
    """Whole free nodes and stranded GPUs (``nvidia.com/gpu``) per (GPU product, top-level
    domain) for the scrape: ``{"key": key, "series": {(product, domain): (whole_free_nodes,
    stranded_gpus)}}``. Definitions as ``diagnose.by_domain`` (one-GPU probe pod tolerating the
    GPU taint: a whole free node is schedulable now, no GPU in use, every installed GPU
    allocatable; stranded = free GPUs on schedulable nodes that are not whole free). Bounded:
    ≤ ``MAX_PRODUCTS`` + 2 products × ≤ ``MAX_DOMAINS`` + 2 domains, GPU nodes only; every GPU
    node is counted in exactly one series. Vectorized over the nodes (``DomainIndex.sums``)."""
    _, per = node_figures(snap, None, options)
    gpu_nodes = per[:, 0] > 0
    prods, prod_names = _bounded(snap, (PRODUCT_LABEL,), per[:, 0], MAX_PRODUCTS, "unknown")
    if key:
        doms, dom_names = _bounded(snap, (key,), per[:, 0], MAX_DOMAINS, "none")
    else:
        doms, dom_names = np.zeros(len(snap.nodes), dtype=np.int64), ["all"]
    width = len(dom_names)
    cell = prods * width + doms
    whole = np.bincount(cell[gpu_nodes], weights=per[gpu_nodes, 2], minlength=len(prod_names) * width)
    stranded = np.bincount(cell[gpu_nodes], weights=per[gpu_nodes, 4], minlength=len(prod_names) * width)
    present = np.bincount(cell[gpu_nodes], minlength=len(prod_names) * width)
    series = {}
    for c in np.flatnonzero(present).tolist():
        series[(prod_names[c // width], dom_names[c % width])] = (int(whole[c]), int(stranded[c]))
    return {"key": key, "series": series}


def _bounded(snap, keys: tuple[str, ...], weight: np.ndarray, cap: int, missing: str) -> tuple[np.ndarray, list[str]]:
    """Per node a bounded label-value index and the names: the ``cap`` values of ``keys`` with the
    most ``weight`` (then by name) keep their own, the rest are "other", nodes lacking a key
    ``missing``."""
    index = label_domains(snap, keys)
    sums = index.sums(weight) if index.count else np.zeros(0, dtype=np.int64)
    order = sorted(range(index.count), key=lambda d: (-int(sums[d]), index.names[d]))
    kept = order[:cap]
    names = [index.names[d] for d in kept] + ["other", missing]
    remap = np.full(index.count + 1, len(kept), dtype=np.int64)  # default: "other"
    remap[kept] = np.arange(len(kept), dtype=np.int64)
    remap[index.count] = len(kept) + 1  # the last slot: nodes in no domain (id −1)
    ids = np.where(index.ids >= 0, index.ids, index.count)
    return remap[ids], names


#: ``diagnose.fragmentation``'s heatmap states other than "ok" → :data:`GPU_NODE_STATES`.
_HEATMAP_STATE = {"cordoned": "cordoned", "notready": "not_ready", "devices": "unhealthy_devices", "excluded": "excluded"}


class Metrics:
    """The app's Prometheus metrics, in their own registry (several apps may live in one process)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "gangcheck_webhook_requests", "Admission requests by endpoint, verdict and outcome.",
            ["endpoint", "verdict", "outcome"], registry=registry,
        )
        self.latency = Histogram(
            "gangcheck_webhook_latency_seconds", "Admission request latency (body read to response), seconds.",
            ["endpoint", "verdict", "outcome"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.in_flight = Gauge(
            "gangcheck_webhook_requests_in_flight", "Admission requests being handled.", ["endpoint"], registry=registry,
        )
        self.fail_open = Counter(
            "gangcheck_webhook_fail_open", "Requests admitted without a check, by reason.",
            ["endpoint", "reason"], registry=registry,
        )
        self.denials = Counter(
            "gangcheck_webhook_denials", "Admission requests denied (a NeverFits in enforce mode), by the "
            "decision's leading reason code (ExceedsMaxQuota, PodExceedsNodeCapacity, ...; Other otherwise).",
            ["endpoint", "reason"], registry=registry,
        )
        self.skipped = Counter(
            "gangcheck_webhook_skipped", "Requests admitted unchanged without a check, by endpoint and reason "
            "(operation, no_object, exempt_namespace, unsupported_kind, owned_by_checked_kind).",
            ["endpoint", "reason"], registry=registry,
        )
        self.cert_reloads = Counter(
            "gangcheck_tls_certificate_reloads", "Serving certificate reloads.", registry=registry,
        )
        self.cert_reload_failures = Counter(
            "gangcheck_tls_certificate_reload_failures", "Serving certificate reloads that failed (old one kept).",
            registry=registry,
        )


class StateCollector:
    """Scrape-time metrics read from the source and the policy provider."""

    def __init__(self, source: SnapshotSource, policy) -> None:
        self.source, self.policy = source, policy
        self._frag: tuple[Any, dict] | None = None  # (weak reference to a snapshot, its gpu_fragmentation)
        self._domains: tuple[Any, str | None, dict] | None = None  # (weak reference to a snapshot, key, gpu_domains)

    def fragmentation(self) -> dict | None:
        """:func:`gpu_fragmentation` of the source's current snapshot, computed once per snapshot
        (snapshots are immutable; a scrape between two cache updates reuses it); None while the
        source is not ready."""
        if not self.source.ready:
            return None
        snap = self.source.snapshot()
        if self._frag is not None and self._frag[0]() is snap:
            return self._frag[1]
        pol = self.policy.current()
        rep = gpu_fragmentation(snap, pol.engine_options() if pol is not None else None)
        self._frag = (weakref.ref(snap), rep)
        return rep

    def domains(self) -> dict | None:
        """:func:`gpu_domains` of the source's current snapshot by :func:`metrics_topology_key`,
        once per snapshot and key; None while the source is not ready."""
        if not self.source.ready:
            return None
        snap = self.source.snapshot()
        pol = self.policy.current()
        key = metrics_topology_key(snap, pol)
        if self._domains is not None and self._domains[0]() is snap and self._domains[1] == key:
            return self._domains[2]
        rep = gpu_domains(snap, key, pol.engine_options() if pol is not None else None)
        self._domains = (weakref.ref(snap), key, rep)
        return rep

    def collect(self):
        """The policy families, then the source and informer families; a status that raises
        leaves its families empty (a scrape never fails)."""
        reloads = CounterMetricFamily("gangcheck_policy_reloads", "Policy reloads applied.")
        failures = CounterMetricFamily("gangcheck_policy_reload_failures", "Policy versions rejected as invalid.")
        valid = GaugeMetricFamily("gangcheck_policy_valid", "1 when the latest policy version is valid.")
        problem = GaugeMetricFamily(
            "gangcheck_policy_problem",
            "1 for the code of the latest policy version's problem while the last good policy stays in force "
            "(empty, invalid_yaml, not_a_mapping, invalid_field, not_utf8, unreadable, missing).",
            labels=["problem"],
        )
        try:
            st = self.policy.status()
            reloads.add_metric([], float(st.get("reloads") or 0))
            failures.add_metric([], float(st.get("failures") or 0))
            valid.add_metric([], 1.0 if st.get("valid") else 0.0)
            if st.get("problem"):
                problem.add_metric([str(st["problem"])], 1.0)
        except Exception:  # pragma: no cover - metrics never break a scrape
            pass
        yield reloads
        yield failures
        yield valid
        yield problem

        ready = GaugeMetricFamily("gangcheck_cache_ready", "1 when every informer has synced.")
        age = GaugeMetricFamily("gangcheck_cache_age_seconds", "Seconds since the cluster view was last known current.")
        objects = GaugeMetricFamily("gangcheck_informer_objects", "Objects held per informer.", labels=["informer"])
        synced = GaugeMetricFamily("gangcheck_informer_synced", "1 when the informer has synced.", labels=["informer"])
        last = GaugeMetricFamily("gangcheck_informer_last_event_age_seconds", "Seconds since the informer's last event or bookmark.", labels=["informer"])
        restarts = CounterMetricFamily("gangcheck_informer_watch_restarts", "Watch restarts per informer.", labels=["informer"])
        installed = GaugeMetricFamily("gangcheck_informer_installed", "1 when the informer's API (CRD) is served.", labels=["informer"])
        relists = CounterMetricFamily("gangcheck_informer_relists", "Full re-lists per informer (410 Gone etc.).", labels=["informer"])
        errors = CounterMetricFamily("gangcheck_informer_errors", "List/watch errors per informer.", labels=["informer"])
        try:
            ready.add_metric([], 1.0 if self.source.ready else 0.0)
            age.add_metric([], float(self.source.age_seconds()))
            for name, info in _informers(self.source.status()):
                if info.get("objects") is not None:
                    objects.add_metric([name], float(info["objects"]))
                if info.get("synced") is not None:
                    synced.add_metric([name], 1.0 if info["synced"] else 0.0)
                la = _first(info, "last_event_age_s", "last_event_age_seconds", "last_event_age")
                if la is not None:
                    last.add_metric([name], float(la))
                rs = _first(info, "watch_restarts", "restarts")
                if rs is not None:
                    restarts.add_metric([name], float(rs))
                if info.get("installed") is not None:
                    installed.add_metric([name], 1.0 if info["installed"] else 0.0)
                for fam, k in ((relists, "relists"), (errors, "errors")):
                    v = _first(info, k)
                    if v is not None:
                        fam.add_metric([name], float(v))
        except Exception:  # pragma: no cover
            pass
        yield from (ready, age, objects, synced, last, restarts, installed, relists, errors)

        free = GaugeMetricFamily("gangcheck_gpus_free", "GPUs (nvidia.com/gpu) free on nodes a one-GPU pod can be placed on now.")
        whole = GaugeMetricFamily("gangcheck_gpus_free_whole_nodes", "Of gangcheck_gpus_free, the GPUs on nodes with no GPU in use.")
        nodes = GaugeMetricFamily("gangcheck_gpu_nodes", "GPU nodes by state (" + ", ".join(GPU_NODE_STATES) + ").",
                                  labels=["state"])
        try:
            rep = self.fragmentation()
            if rep is not None:
                free.add_metric([], float(rep["free"]))
                whole.add_metric([], float(rep["free_whole_nodes"]))
                for state in GPU_NODE_STATES:
                    nodes.add_metric([state], float(rep["nodes"][state]))
        except Exception:  # pragma: no cover - metrics never break a scrape
            pass
        yield from (free, whole, nodes)

        doc = (" per GPU product (nvidia.com/gpu.product; at most %d, the rest 'other', none 'unknown') and top-level "
               "topology domain (the policy's metricsTopologyLevel, else the Kueue Topology's top level; at most %d, "
               "the rest 'other', nodes without the label 'none', 'all' with no level known)." % (MAX_PRODUCTS, MAX_DOMAINS))
        whole_nodes = GaugeMetricFamily("gangcheck_gpu_whole_free_nodes", "GPU nodes schedulable now with no GPU in use "
                                        "and every installed GPU allocatable," + doc, labels=["product", "domain"])
        stranded = GaugeMetricFamily("gangcheck_gpus_stranded", "Free GPUs (nvidia.com/gpu) on schedulable nodes that are "
                                     "not whole free (a whole-node pod cannot use them)," + doc, labels=["product", "domain"])
        try:
            rep = self.domains()
            if rep is not None:
                for (product, domain), (w, st) in sorted(rep["series"].items()):
                    whole_nodes.add_metric([product, domain], float(w))
                    stranded.add_metric([product, domain], float(st))
        except Exception:  # pragma: no cover - metrics never break a scrape
            pass
        yield from (whole_nodes, stranded)


def _first(d: dict, *keys):
    """The first of ``keys`` whose value in ``d`` is a number (not a bool), or None."""
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
    return None


def _informers(status: Any):
    """(name, info) pairs from a source status: ``{"informers": {name: {...}}}`` or a list of
    ``{"name": ...}``; a static source's ``{"nodes": N, "pods": M}`` becomes two synced informers."""
    if not isinstance(status, dict):
        return []
    inf = status.get("informers")
    if isinstance(inf, dict):
        return [(str(k), v) for k, v in inf.items() if isinstance(v, dict)]
    if isinstance(inf, list):
        return [(str(v.get("name") or v.get("resource") or i), v) for i, v in enumerate(inf) if isinstance(v, dict)]
    out = []
    for k in ("nodes", "pods"):
        if isinstance(status.get(k), int):
            out.append((k, {"objects": status[k], "synced": bool(status.get("synced", True))}))
    return out
