"""Kubernetes workload objects (plain dicts, e.g. from YAML) → engine ``GangRequest``.

One module per API family, registered explicitly in :data:`ADAPTERS` keyed by
``(apiVersion group, kind)``; :data:`API_VERSIONS` lists the versions each accepts.

    >>> gang = adapt(yaml.safe_load(text), source="job.yaml")   # GangRequest | None
    >>> gang.pods, gang.total_requests()

``adapt`` returns None for a kind that is recognised but is not a gang (a Pod outside a Kueue
pod group, a RayJob that runs on an existing cluster). Every problem with the input is an
:class:`AdapterError` naming the source, the object (``Kind namespace/name``) and the field —
except a well-formed quantity past int64, which the API server stores: it becomes a NeverFits
finding ``QuantityOverflow`` on the gang (see ``podspec.collect_overflows``), and a topology
request its own system refuses (``InvalidTopologyRequest``, see ``topology``). Counts are
bounded as the APIs bound them (``common.count_field``).
Adapters are pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..engine.model import GangRequest
from . import batch, coscheduling, jobset, kubeflow, kueue_pods, lws, ray, volcano
from .common import describe, split_api_version
from .errors import AdapterError
from .podspec import collect_overflows
from .topology import collect_topology, finish_gang

__all__ = ["ADAPTERS", "API_VERSIONS", "AdapterError", "adapt", "is_supported", "supported_kinds"]

Adapter = Callable[[Mapping], "GangRequest | None"]

#: (apiVersion group, kind) → adapter. The core group is "".
ADAPTERS: dict[tuple[str, str], Adapter] = {
    ("batch", "Job"): batch.adapt_job,
    ("jobset.x-k8s.io", "JobSet"): jobset.adapt_jobset,
    ("kubeflow.org", "PyTorchJob"): kubeflow.adapt_pytorchjob,
    ("kubeflow.org", "MPIJob"): kubeflow.adapt_mpijob,
    ("batch.volcano.sh", "Job"): volcano.adapt_volcano_job,
    ("scheduling.volcano.sh", "PodGroup"): volcano.adapt_volcano_podgroup,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): lws.adapt_lws,
    ("ray.io", "RayCluster"): ray.adapt_raycluster,
    ("ray.io", "RayJob"): ray.adapt_rayjob,
    ("", "Pod"): kueue_pods.adapt_pod,
    ("scheduling.x-k8s.io", "PodGroup"): coscheduling.adapt_coscheduling_podgroup,
}

#: (group, kind) → the API versions whose schema the adapter reads.
API_VERSIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch", "Job"): ("v1",),
    ("jobset.x-k8s.io", "JobSet"): ("v1alpha2",),
    ("kubeflow.org", "PyTorchJob"): ("v1",),
    ("kubeflow.org", "MPIJob"): ("v2beta1", "v1"),
    ("batch.volcano.sh", "Job"): ("v1alpha1",),
    ("scheduling.volcano.sh", "PodGroup"): ("v1beta1",),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): ("v1",),
    ("ray.io", "RayCluster"): ("v1",),
    ("ray.io", "RayJob"): ("v1",),
    ("", "Pod"): ("v1",),
    ("scheduling.x-k8s.io", "PodGroup"): ("v1alpha1",),
}


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def supported_kinds() -> list[str]:
    """Every accepted ``apiVersion kind`` pair, e.g. ``"kubeflow.org/v1 PyTorchJob"``, sorted."""
    return sorted(f"{_api_version(g, v)} {k}" for (g, k), versions in API_VERSIONS.items() for v in versions)


def is_supported(obj: Any) -> bool:
    """True when ``obj`` is a mapping whose apiVersion (group and version) and kind have an adapter.

    Never raises; use it to skip objects that are not workloads (ClusterQueue, ConfigMap, …).
    """
    if not isinstance(obj, Mapping):
        return False
    group, version = split_api_version(obj.get("apiVersion"))
    key = (group, obj.get("kind"))
    return key in ADAPTERS and version in API_VERSIONS.get(key, ())


def adapt(obj: Any, source: str = "") -> GangRequest | None:
    """Turn a workload object into a ``GangRequest`` (None when the kind is known but not a gang).

    Args:
        obj: the object as a dict (``apiVersion``, ``kind``, ``metadata``, ``spec``).
        source: where it came from (a file name, "AdmissionReview"), prefixed to error messages.

    Raises:
        AdapterError: not a mapping, an unknown apiVersion/kind (the message lists the supported
            kinds), an unsupported version of a known kind, or any malformed field; the message
            names the source, ``Kind namespace/name`` and the field path.
    """
    if not isinstance(obj, Mapping):
        raise AdapterError(f"expected a Kubernetes object (a mapping), got {type(obj).__name__}", source=source)
    who = describe(obj)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    group, version = split_api_version(api_version)
    adapter = ADAPTERS.get((group, kind))
    if adapter is None:
        raise AdapterError(
            f"unsupported kind {api_version}/{kind}; supported: {', '.join(supported_kinds())}",
            source=source,
            obj=who,
            field="apiVersion/kind",
        )
    versions = API_VERSIONS[(group, kind)]
    if version not in versions:
        raise AdapterError(
            f"unsupported version {api_version!r} of {kind}; expected "
            + " or ".join(_api_version(group, v) for v in versions),
            source=source,
            obj=who,
            field="apiVersion",
        )
    try:
        with collect_overflows() as overflows, collect_topology() as topology:  # findings, not errors
            gang = adapter(obj)
        if gang is not None:
            gang = finish_gang(gang, topology)  # Kueue's requests once the queue is known
        if gang is not None and overflows:
            gang = replace(gang, findings=(*overflows, *gang.findings))
        return gang
    except AdapterError as err:
        raise err.within(source=source, obj=who) from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:  # safety net: never a raw crash
        raise AdapterError(f"malformed object: {type(exc).__name__}: {exc}", source=source, obj=who) from exc
