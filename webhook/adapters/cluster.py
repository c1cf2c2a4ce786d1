"""Cluster objects (Kubernetes dicts, as ``kubectl get -o yaml`` writes them) → ``ClusterSnapshot``:
the public face of the cluster-state readers.

This module holds no rules of its own; it names, in one place, what the cache, the dump reader,
the CLI, the benchmarks and the tests import (``from webhook.adapters.cluster import ...``).
Each concern lives in its own module:

* ``snapshot_builder`` — ``build_snapshot``: List wrappers, PriorityClasses first, one reader
  per (API group, kind), terminal pods and unused kinds counted in ``skipped``;
* ``nodes`` — v1 Node (taints, cordon, Ready, capacity/allocatable);
* ``pods`` — v1 Pod one at a time (``pod_from_k8s``, ``pod_health``, ``pod_is_terminal``,
  ``TERMINAL_PODS_KEY``); ``pod_reader`` — its memoised fast path for many pods
  (``_PodReader``, ``ConvertedPod``);
* ``priority`` — scheduling.k8s.io/v1 PriorityClass and the system classes;
* ``kueue_objects`` — kueue.x-k8s.io (v1beta1, v1beta2; v1alpha1 Cohort) ResourceFlavor,
  ClusterQueue, LocalQueue, Cohort;
* ``volcano_objects`` — scheduling.volcano.sh/v1beta1 Queue and PodGroup;
  scheduling.x-k8s.io/v1alpha1 PodGroup (scheduler-plugins coscheduling);
* ``workload`` (Kueue Workload), ``disruption`` (PodDisruptionBudget);
* ``autoscaling_objects`` — karpenter.sh/v1 NodePool and NodeClaim, autoscaling.x-k8s.io/v1
  ProvisioningRequest, cluster-autoscaler's status ConfigMap (its text: ``ca_status``);
  ``autoscaling_state`` — those and the Nodes → ``ClusterSnapshot.autoscaling``;
* ``topology_objects`` — Kueue (kueue.x-k8s.io) and KAI (kai.scheduler/v1alpha1) Topologies,
  Volcano HyperNodes (topology.volcano.sh/v1alpha1) → ``ClusterSnapshot.topology``;
* ``meta`` — object identity and the scalar readers all of them share.

Every converter takes one object as a plain dict and returns one engine value, raising
``AdapterError`` naming the object ("Kind ns/name") and the field for input it cannot read.
Anything else is counted in ``ClusterSnapshot.skipped`` by kind, never an error.

Resource amounts are scheduler units (cpu millicores, memory bytes, counts otherwise; see
``webhook.engine.quantity``). The rules mirror what the API server's defaulting and
kube-scheduler do, so a dump of an un-defaulted object still reads the way the cluster sees it.
Pure: no file I/O (``webhook.dump`` reads files; the cache feeds live objects).
"""

from __future__ import annotations

from .kueue_objects import cluster_queue_from_k8s, cohort_from_k8s, local_queue_from_k8s, resource_flavor_from_k8s
from .meta import object_ref, parse_time
from .nodes import node_from_k8s
from .pod_reader import ConvertedPod, _PodReader
from .pods import TERMINAL_PODS_KEY, pod_from_k8s, pod_health, pod_is_terminal
from .priority import SYSTEM_PRIORITY_CLASSES, priority_class_from_k8s
from .snapshot_builder import build_snapshot
from .topology_objects import hypernode_from_k8s, topology_levels_from_k8s
from .volcano_objects import pod_group_from_k8s, volcano_queue_from_k8s

__all__ = [
    "build_snapshot",
    "object_ref",
    "node_from_k8s",
    "pod_from_k8s",
    "pod_health",
    "pod_is_terminal",
    "priority_class_from_k8s",
    "resource_flavor_from_k8s",
    "cluster_queue_from_k8s",
    "local_queue_from_k8s",
    "cohort_from_k8s",
    "volcano_queue_from_k8s",
    "pod_group_from_k8s",
    "topology_levels_from_k8s",
    "hypernode_from_k8s",
    "parse_time",
    "ConvertedPod",
    "SYSTEM_PRIORITY_CLASSES",
    "TERMINAL_PODS_KEY",
    "_PodReader",  # private, but webhook.cache and webhook.dump import it from here
]
