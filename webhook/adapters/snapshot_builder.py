"""A list of cluster objects → one ``ClusterSnapshot``: which reader each object goes to, in what order.

Owns: ``build_snapshot`` and its steps — flattening ``kind: List`` wrappers, reading the
PriorityClasses first (pods refer to them by name), dispatching every other object to its
kind's reader by (API group, kind) (``_READERS``, one table), keeping the last object of each
key, skipping terminal pods and counting every kind the engine does not use, and locating an
error at its object's position. Does not own any kind's rules: those are in ``nodes``, ``pods``
(and its fast path ``pod_reader``), ``priority``, ``kueue_objects``, ``volcano_objects``,
``workload``, ``disruption``, ``topology_objects`` (Kueue/KAI Topologies, Volcano HyperNodes) and, for node autoscalers, ``autoscaling_objects`` (combined with
the Nodes into ``ClusterSnapshot.autoscaling`` by ``autoscaling_state``).

Shapes: objects are dicts as ``kubectl get -o yaml`` writes them, or pods the JSON dump reader
already decoded (``PodStruct``) or converted (``BoundPod``, ``ConvertedPod``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any

import msgspec

from ..engine.model import BoundPod, KueueState, TopologyState, VolcanoState, frozen_map
from ..engine.snapshot import ClusterSnapshot
from .autoscaling_objects import (
    AUTOSCALING_X_K8S,
    KARPENTER,
    ca_status_from_k8s,
    is_ca_status,
    nodeclaim_from_k8s,
    nodepool_from_k8s,
    provisioning_request_from_k8s,
)
from .autoscaling_state import autoscaling_state
from .disruption import disruption_budget_from_k8s
from .errors import AdapterError
from .kueue_objects import cluster_queue_from_k8s, cohort_from_k8s, local_queue_from_k8s, resource_flavor_from_k8s
from .meta import COSCHEDULING, KUEUE, SCHEDULING_K8S, VOLCANO
from .nodes import node_from_k8s
from .pod_reader import ConvertedPod, _PodReader
from .podspec import get_path
from .pods import TERMINAL_PODS_KEY
from .priority import priority_class_from_k8s
from .projection import PodStruct
from .topology_objects import KAI, VOLCANO_TOPOLOGY, hypernode_from_k8s, topology_levels_from_k8s
from .volcano_objects import pod_group_from_k8s, volcano_queue_from_k8s
from .workload import workload_from_k8s

__all__ = ["build_snapshot"]

_by_name = attrgetter("name")
_by_namespaced_name = attrgetter("namespace", "name")


def _ca_status(obj: Mapping) -> Any:
    """cluster-autoscaler's status ConfigMap (kube-system/cluster-autoscaler-status); None for
    any other ConfigMap (skipped)."""
    return ca_status_from_k8s(obj) if is_ca_status(obj) else None


def _first(value: tuple) -> Any:
    """The key of a ``(name, value)`` pair (a Topology's levels)."""
    return value[0]


def _one(_value: Any) -> str:
    """The key of a kind the snapshot holds at most one of."""
    return ""

#: (API group, kind) → (reader, the snapshot's collection it fills, the key an object replaces
#: an earlier one by). Pods and PriorityClasses have their own steps; any other kind is skipped,
#: and so is an object its reader returns None for (a ConfigMap other than the autoscaler's status).
_READERS: dict[tuple[str, str], tuple[Callable[[Mapping], Any], str, Callable[[Any], Any]]] = {
    ("", "Node"): (node_from_k8s, "nodes", _by_name),
    (KUEUE, "ResourceFlavor"): (resource_flavor_from_k8s, "flavors", _by_name),
    (KUEUE, "ClusterQueue"): (cluster_queue_from_k8s, "cluster_queues", _by_name),
    (KUEUE, "LocalQueue"): (local_queue_from_k8s, "local_queues", _by_namespaced_name),
    (KUEUE, "Cohort"): (cohort_from_k8s, "cohorts", _by_name),
    (VOLCANO, "Queue"): (volcano_queue_from_k8s, "volcano_queues", _by_name),
    (VOLCANO, "PodGroup"): (pod_group_from_k8s, "pod_groups", _by_namespaced_name),
    (COSCHEDULING, "PodGroup"): (pod_group_from_k8s, "pod_groups", _by_namespaced_name),
    (KUEUE, "Workload"): (workload_from_k8s, "workloads", _by_namespaced_name),
    ("policy", "PodDisruptionBudget"): (disruption_budget_from_k8s, "budgets", _by_namespaced_name),
    (KARPENTER, "NodePool"): (nodepool_from_k8s, "nodepools", _by_name),
    (KARPENTER, "NodeClaim"): (nodeclaim_from_k8s, "nodeclaims", _by_name),
    (AUTOSCALING_X_K8S, "ProvisioningRequest"): (provisioning_request_from_k8s, "provisioning_requests",
                                                 _by_namespaced_name),
    ("", "ConfigMap"): (_ca_status, "ca_status", _one),
    # Topology objects (issue #13): (name, levels) pairs and HyperNodes.
    (KUEUE, "Topology"): (topology_levels_from_k8s, "kueue_topologies", _first),
    (KAI, "Topology"): (topology_levels_from_k8s, "kai_topologies", _first),
    (VOLCANO_TOPOLOGY, "HyperNode"): (hypernode_from_k8s, "hypernodes", _by_name),
}


def _is_pod_value(obj: Any) -> bool:
    """True for a pod the JSON dump reader already decoded or converted (never a list)."""
    return type(obj) is PodStruct or type(obj) is ConvertedPod or type(obj) is BoundPod


def _flatten(objects: Iterable[Any]) -> Iterable[tuple[int, Any]]:
    """Yield (position, object), expanding ``kind: List`` / ``*List`` wrappers."""
    for pos, obj in enumerate(objects):
        if _is_pod_value(obj):
            yield pos, obj
        elif isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) and obj["kind"].endswith("List") and isinstance(obj.get("items"), list):
            item_kind = obj["kind"][: -len("List")]
            for item in obj["items"]:
                if isinstance(item, Mapping) and item_kind and "kind" not in item:
                    item = {**item, "kind": item_kind, "apiVersion": obj.get("apiVersion", "")}
                yield pos, item
        else:
            yield pos, obj


def _group_of(obj: Mapping) -> str:
    """The API group of an object's apiVersion ("" for the core group or no apiVersion)."""
    api = str(obj.get("apiVersion") or "")
    return api.split("/", 1)[0] if "/" in api else ""


def _located(exc: AdapterError, pos: int, source: str) -> AdapterError:
    """``exc`` with ``position`` (the object's index in the input) and the source filled in."""
    exc.position = pos  # type: ignore[attr-defined]
    return exc.within(source=source)


def _read_priority_classes(items: list[tuple[int, Any]], source: str) -> tuple[dict[str, int], int]:
    """Step 1: every PriorityClass → ({name: value}, the globalDefault class's value or 0), and
    the check that every object is a mapping (before any other object is read).

    Raises:
        AdapterError: an object that is not a mapping, or a PriorityClass that cannot be read.
    """
    priority_classes: dict[str, int] = {}
    default_priority = 0
    for pos, obj in items:
        if _is_pod_value(obj):
            continue
        if not isinstance(obj, Mapping):
            raise _located(AdapterError(f"expected a Kubernetes object (a mapping), got {type(obj).__name__}"), pos, source)
        if obj.get("kind") == "PriorityClass" and _group_of(obj) == SCHEDULING_K8S:
            try:
                name, value, is_default = priority_class_from_k8s(obj)
            except AdapterError as exc:
                raise _located(exc, pos, source)
            priority_classes[name] = value
            if is_default:
                default_priority = value
    return priority_classes, default_priority


class _Contents:
    """Step 2: the snapshot's objects as they are read, keyed as the engine keys them (a later
    object with the same key replaces an earlier one), and the count of skipped objects by kind."""

    def __init__(self, read_pod: _PodReader) -> None:
        self.read_pod = read_pod
        self.pods: dict[tuple[str, str], BoundPod] = {}
        self.collections: dict[str, dict[Any, Any]] = {name: {} for _, name, _ in _READERS.values()}
        self.skipped: dict[str, int] = {}

    def _skip(self, key: str) -> None:
        self.skipped[key] = self.skipped.get(key, 0) + 1

    def add(self, obj: Any) -> None:
        """Read one object (a mapping, or a pod value of the JSON dump reader) into its collection.

        Raises:
            AdapterError: the object's reader cannot read it.
        """
        if type(obj) is BoundPod:  # a v1 Pod the JSON dump reader converted in full
            self.pods[(obj.namespace, obj.name)] = obj
        elif type(obj) is ConvertedPod:  # one whose priority is still to resolve
            pod = obj.pod
            if obj.resolve:
                pod = msgspec.structs.replace(pod, priority=self.read_pod._priority(None, obj.class_name))
            self.pods[(pod.namespace, pod.name)] = pod
        elif type(obj) is PodStruct:  # a v1 Pod from the JSON dump reader (webhook.dump)
            status = obj.status
            phase = None if status is None else status.phase
            if phase == "Succeeded" or phase == "Failed":  # pod_is_terminal
                self._skip(TERMINAL_PODS_KEY)
                return
            pod = self.read_pod.projected(obj)
            self.pods[(pod.namespace, pod.name)] = pod
        else:
            self._add_object(obj)

    def _add_object(self, obj: Mapping) -> None:
        """A Kubernetes object as a mapping, dispatched by (API group, kind)."""
        kind = obj.get("kind")
        group = "" if obj.get("apiVersion") == "v1" else _group_of(obj)
        if kind == "Pod" and group == "":
            status = obj.get("status")
            phase = status.get("phase") if type(status) is dict else get_path(obj, "status.phase")
            if phase == "Succeeded" or phase == "Failed":  # pod_is_terminal
                self._skip(TERMINAL_PODS_KEY)
                return
            pod = self.read_pod(obj)
            self.pods[(pod.namespace, pod.name)] = pod
            return
        if group == SCHEDULING_K8S and kind == "PriorityClass":
            return  # step 1 read it
        entry = _READERS.get((group, kind)) if isinstance(kind, str) else None
        if entry is None:
            self._skip(str(kind) if kind else "<no kind>")
            return
        read, collection, key = entry
        value = read(obj)
        if value is None:
            self._skip(kind)
            return
        self.collections[collection][key(value)] = value

    def snapshot(self, priority_classes: Mapping[str, int], source: str, as_of: float | None) -> ClusterSnapshot:
        """Step 3: the ``ClusterSnapshot`` of what was read."""
        c = self.collections
        return ClusterSnapshot(
            c["nodes"].values(),
            self.pods.values(),
            kueue=KueueState(frozen_map(c["flavors"]), frozen_map(c["cluster_queues"]), frozen_map(c["local_queues"]),
                             frozen_map(c["cohorts"]), frozen_map(c["workloads"])),
            volcano=VolcanoState(frozen_map(c["volcano_queues"]), frozen_map(c["pod_groups"])),
            priority_classes=priority_classes,
            skipped=self.skipped,
            source=source,
            as_of=as_of,
            disruption_budgets=c["budgets"].values(),
            topology=TopologyState(frozen_map(dict(c["kueue_topologies"].values())),
                                   frozen_map(dict(c["kai_topologies"].values())), frozen_map(c["hypernodes"])),
            autoscaling=autoscaling_state(c["nodes"].values(), c["nodepools"].values(), c["nodeclaims"].values(),
                                          c["ca_status"].get(""), c["provisioning_requests"].values()),
        )


def build_snapshot(objects: Iterable[dict], source: str = "", as_of: float | None = None) -> ClusterSnapshot:
    """Turn Kubernetes objects (dicts) into a ``ClusterSnapshot``.

    Args:
        objects: any mix of kinds, in any order (``kind: List`` wrappers are expanded).
            PriorityClasses are read first so a Pod's priorityClassName resolves wherever the
            class appears. A later object with the same kind and name replaces an earlier one.
            The JSON dump reader (``webhook.dump``) may also pass v1 Pods already decoded as
            ``PodStruct``, or converted (``BoundPod``, or ``ConvertedPod`` when the priority is
            still to resolve); they take their place in the order like any other object.
        source: where the objects came from (a path, "demo", "live"); put on the snapshot and
            in error messages.
        as_of: the time the objects were read, seconds since the epoch (None: unknown).

    Returns:
        A ``ClusterSnapshot``. Pods in phase Succeeded/Failed are left out (they hold nothing,
        as in kube-scheduler) and counted in ``skipped`` under ``TERMINAL_PODS_KEY``; every
        object of a kind the engine does not use is counted in ``skipped`` by kind
        (``{"Event": 3, "Service": 1}``).

    Raises:
        AdapterError: an object that is not a mapping or a known kind that cannot be read;
            the message names ``source``, the object ("Kind ns/name") and the field. The
            attribute ``position`` on the error is the index of the offending object in
            ``objects``, so a caller reading files can name the file and document.
    """
    items = list(_flatten(objects))
    priority_classes, default_priority = _read_priority_classes(items, source)
    contents = _Contents(_PodReader(priority_classes, default_priority))
    for pos, obj in items:
        try:
            contents.add(obj)
        except AdapterError as exc:
            raise _located(exc, pos, source)
    return contents.snapshot(priority_classes, source, as_of)
