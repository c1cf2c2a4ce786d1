"""Helpers shared by the workload adapters: object identity, metadata, and ``GangRequest`` assembly.

Every adapter module (batch, jobset, kubeflow, volcano, lws, ray, kueue_pods, coscheduling)
reads metadata the same way (see :func:`build_gang`):

* namespace defaults to ``"default"``; the name is ``metadata.name``, or
  ``metadata.generateName + "<generated>"`` when the API server has not named it yet;
* ``queue_name`` (Kueue LocalQueue) from the label ``kueue.x-k8s.io/queue-name``, falling back to
  the older annotation of the same name (Kueue's ``jobframework.QueueName``);
* ``priority_class``: the Kueue WorkloadPriorityClass label ``kueue.x-k8s.io/priority-class``
  wins over the pod templates' ``priorityClassName`` (Kueue's ``ExtractPriority`` order);
* ``volcano_queue``: the adapter's own value (``spec.queue`` for Volcano kinds) or the
  ``volcano.sh/queue-name`` / ``scheduling.volcano.sh/queue-name`` label or annotation that
  KubeRay, LWS and Kubeflow use to hand a queue to Volcano.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..engine.model import Finding, GangRequest, PodSet, frozen_map
from .podspec import INT32_MAX, as_int, get_path, list_of, mapping, resource_map
from .topology import KUEUE_TAS_KEYS, kai_request, with_request

__all__ = [
    "QUEUE_NAME",
    "PRIORITY_CLASS",
    "VOLCANO_QUEUE_KEYS",
    "split_api_version",
    "describe",
    "mapping",
    "list_of",
    "string_map",
    "build_gang",
    "template_priority",
    "count_field",
    "pod_group_pod_set",
    "kueue_tas",
    "external_group",
]

QUEUE_NAME = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
VOLCANO_QUEUE_KEYS = ("volcano.sh/queue-name", "scheduling.volcano.sh/queue-name")


def split_api_version(api_version: Any) -> tuple[str, str]:
    """``"batch/v1"`` → ``("batch", "v1")``; ``"v1"`` (core) → ``("", "v1")``; non-strings → ``("", "")``."""
    if not isinstance(api_version, str):
        return "", ""
    if "/" in api_version:
        group, version = api_version.rsplit("/", 1)
        return group, version
    return "", api_version


def _name(obj: Mapping) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = meta.get("name")
    if isinstance(name, str) and name:
        return name
    gen = meta.get("generateName")
    if isinstance(gen, str) and gen:
        return gen + "<generated>"
    return "<unnamed>"


def _namespace(obj: Mapping) -> str:
    ns = get_path(obj, "metadata.namespace")
    return ns if isinstance(ns, str) and ns else "default"


#: Cluster-scoped kinds gangcheck reads or is handed (they have no namespace to show).
CLUSTER_SCOPED_KINDS = frozenset({
    "Node", "Namespace", "PriorityClass", "ResourceFlavor", "ClusterQueue", "Cohort", "Queue",
    "CustomResourceDefinition", "StorageClass", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "RuntimeClass", "DeviceClass",
})


def describe(obj: Any) -> str:
    """``"Kind namespace/name"`` for error messages (``"PyTorchJob llm/train"``); a cluster-scoped
    object without a namespace is ``"Kind name"`` (``"Node p1-a"``, never ``"Node default/p1-a"``)."""
    if not isinstance(obj, Mapping):
        return "<not an object>"
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "<no kind>"
    meta = obj.get("metadata")
    if kind in CLUSTER_SCOPED_KINDS and not (isinstance(meta, Mapping) and meta.get("namespace")):
        return f"{kind} {_name(obj)}"
    return f"{kind} {_namespace(obj)}/{_name(obj)}"


def string_map(value: Any, field: str) -> dict[str, str]:
    """Labels or annotations as ``{str: str}`` (values stringified, nulls dropped).

    Raises:
        AdapterError: not a mapping.
    """
    return {str(k): str(v) for k, v in mapping(value, field).items() if v is not None}


def count_field(value: Any, field: str, default: int | None = None, maximum: int = INT32_MAX) -> int:
    """A replica-like count: an integer from 0 to ``maximum`` (default int32's 2^31 − 1).

    Every count an adapter reads is an int32 in its API (Go ``int32``, OpenAPI ``format: int32``)
    and the API server refuses a larger value ("must be less than or equal to 2147483647"):
    batch/v1 JobSpec parallelism/completions (k8s.io/api batch/v1 types.go), JobSet
    replicatedJobs[].replicas (minimum 0), Kubeflow replicaSpecs.*.replicas,
    schedulingPolicy.minAvailable, elasticPolicy.minReplicas, Volcano Job minAvailable and
    tasks[].replicas/minAvailable (minimum 0), Volcano and scheduler-plugins PodGroup
    minMember, LeaderWorkerSet replicas (the CRD's maximum is 1,000,000: callers pass it) and
    leaderWorkerTemplate.size, KubeRay workerGroupSpecs[].replicas/minReplicas/maxReplicas/
    numOfHosts (the CRDs in jobset, kubeflow/training-operator, mpi-operator, volcano,
    lws, kuberay). Kueue reads its pod-group-total-count annotation with ``strconv.Atoi``
    (pkg/controller/jobs/pod), but a Workload's pod-set counts are int32: gangcheck reads at most
    int32 there too. Bounding every count keeps what the engine does with it bounded.

    Raises:
        AdapterError: not an integer from 0 to ``maximum``; the message names the field and the
            range.
    """
    return as_int(value, field, default=default, minimum=0, maximum=maximum)


def template_priority(templates: Iterable[Any]) -> str | None:
    """The first non-empty ``spec.priorityClassName`` among PodTemplateSpec dicts (None when none)."""
    for t in templates:
        pc = get_path(t, "spec.priorityClassName")
        if isinstance(pc, str) and pc:
            return pc
    return None


def build_gang(
    obj: Mapping,
    pod_sets: Iterable[PodSet],
    *,
    findings: Iterable[Finding] = (),
    templates: Iterable[Any] = (),
    volcano_queue: str | None = None,
    priority_class: str | None = None,
    name: str | None = None,
) -> GangRequest:
    """Assemble a ``GangRequest`` from a workload object and its pod sets.

    Args:
        obj: the workload as a dict (``apiVersion``, ``kind``, ``metadata``, ``spec``).
        pod_sets: one ``PodSet`` per role, counts in pods.
        findings: the adapter's own lints (InvalidGang, MinAvailableBelowTasks, …).
        templates: PodTemplateSpec dicts searched for ``priorityClassName``, and for
            ``schedulerName: kai-scheduler`` (the object's KAI topology annotations then go on
            every pod set, ``topology.kai_request``).
        volcano_queue: the Volcano queue when the kind names one (``spec.queue``); otherwise
            taken from the ``volcano.sh/queue-name`` label/annotation when present.
        priority_class: an explicit priority class (e.g. Kubeflow schedulingPolicy.priorityClass),
            used when the Kueue priority label is absent, before the templates.
        name: the gang name (default: the object's name, see module doc).

    Raises:
        AdapterError: labels or annotations that are not mappings.
    """
    templates = list(templates)
    meta = mapping(obj.get("metadata"), "metadata")
    labels = string_map(meta.get("labels"), "metadata.labels")
    annotations = string_map(meta.get("annotations"), "metadata.annotations")
    queue = labels.get(QUEUE_NAME) or annotations.get(QUEUE_NAME) or None
    prio = labels.get(PRIORITY_CLASS) or priority_class or template_priority(templates)
    if volcano_queue is None:
        for key in VOLCANO_QUEUE_KEYS:
            volcano_queue = labels.get(key) or annotations.get(key)
            if volcano_queue:
                break
        else:
            volcano_queue = None
    findings = list(findings)
    kai, note = kai_request(mapping(meta.get("annotations"), "metadata.annotations"), templates)
    if note is not None:
        findings.append(note)
    if kai is not None:
        pod_sets = [with_request(ps, kai, findings) for ps in pod_sets]
    return GangRequest(
        kind=str(obj.get("kind") or ""),
        name=name or _name(obj),
        namespace=_namespace(obj),
        pod_sets=tuple(pod_sets),
        api_version=str(obj.get("apiVersion") or ""),
        queue_name=queue,
        volcano_queue=volcano_queue or None,
        priority_class=prio or None,
        findings=tuple(findings),
        labels=frozen_map(labels),
        annotations=frozen_map(annotations),
    )


#: Kueue TopologyAwareScheduling pod-set annotations (kueue v0.17.0 apis/kueue/v1beta2
#: topology_types.go; jobframework/tas.go builds a request from any of them): with one of them
#: Kueue admits the pod set only once it has placed every pod.
_TAS_ANNOTATIONS = KUEUE_TAS_KEYS


def kueue_tas(queue: str | None, templates: Iterable[Any]) -> bool:
    """True when Kueue (a ``queue`` label) will place the pods with TopologyAwareScheduling: a
    pod template carries a podset-*-topology annotation. (A TAS ResourceFlavor without the
    annotations is not detected here: the gang is then treated as not all-or-nothing, which
    can only admit more.)"""
    if not queue:
        return False
    for t in templates:
        ann = get_path(t, "metadata.annotations")
        if isinstance(ann, Mapping) and any(ann.get(k) not in (None, "") for k in _TAS_ANNOTATIONS):
            return True
    return False


def external_group(templates: Iterable[Any]) -> str | None:
    """The group a pod template joins that is defined by another object, in words, or None.

    * scheduler-plugins coscheduling: label ``scheduling.x-k8s.io/pod-group`` (older
      ``pod-group.scheduling.sigs.k8s.io``) names a PodGroup;
    * Volcano: annotation ``scheduling.k8s.io/group-name`` names a PodGroup;
    * the Workload API: ``spec.workloadRef`` (Kubernetes 1.35, ``name`` and ``podGroup``) or
      ``spec.schedulingGroup`` (1.36, ``podGroupName``; KEP-4671) names a Workload pod group.

    That object's minimum (minMember, gang minCount) decides how many pods start together,
    not the workload's own count.
    """
    for t in templates:
        labels = get_path(t, "metadata.labels")
        labels = labels if isinstance(labels, Mapping) else {}
        ann = get_path(t, "metadata.annotations")
        ann = ann if isinstance(ann, Mapping) else {}
        for key in ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io"):
            if labels.get(key):
                return f"scheduler-plugins PodGroup {labels[key]}"
        if ann.get("scheduling.k8s.io/group-name"):
            return f"Volcano PodGroup {ann['scheduling.k8s.io/group-name']}"
        ref = get_path(t, "spec.workloadRef")
        if isinstance(ref, Mapping) and ref.get("name"):
            return f"Workload {ref.get('name')} pod group {ref.get('podGroup') or '?'}"
        sg = get_path(t, "spec.schedulingGroup")
        if isinstance(sg, Mapping) and sg:
            return f"scheduling group {sg.get('podGroupName') or '?'}"
    return None


def pod_group_pod_set(spec: Mapping, field: str = "spec") -> PodSet:
    """The members of a PodGroup (Volcano or scheduler-plugins) as one pod set ``"members"``.

    A PodGroup carries no pod template, only ``minMember`` (pods, Go zero value 0 when absent)
    and ``minResources`` (the total the group needs). Shape: count = minMember, per-pod requests
    = minResources / minMember per resource, rounded up (cpu millicores, memory bytes, counts),
    so that count × request ≥ minResources. minMember 0 → count 0, no requests.

    The per-pod shape is an assumption (minMember counts only the pods that must start together;
    the members may differ and may tolerate any taint): ``exact_shape`` is False, so it is never
    proof of NeverFits, and ``stated_total`` carries minResources itself, which quota and gang
    totals use (issue #17 item 3).

    Raises:
        AdapterError: minMember not an integer ≥ 0, or a minResources value that is not a quantity.
    """
    members = count_field(spec.get("minMember"), f"{field}.minMember", default=0)
    total = resource_map(spec.get("minResources"), f"{field}.minResources")
    per_pod = {r: -(-v // members) for r, v in total.items() if v > 0} if members else {}
    stated = {r: v for r, v in total.items() if v > 0}
    return PodSet(name="members", count=members, requests=frozen_map(per_pod), exact_shape=False,
                  stated_total=frozen_map(stated) if members else None)
