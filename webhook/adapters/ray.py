"""KubeRay ray.io/v1 RayCluster and RayJob → ``GangRequest``.

Mirrors KubeRay (``ray-operator/controllers/ray/utils``) and its CRD defaults:

* the head is one pod (``spec.headGroupSpec.template``); with ``enableInTreeAutoscaling`` the
  operator adds an autoscaler container to it (``spec.autoscalerOptions.resources``, default
  cpu 500m / memory 512Mi requests, ``BuildAutoscalerContainer``);
* a worker group runs ``GetWorkerGroupDesiredReplicas`` pods: 0 when ``suspend``; otherwise
  ``replicas`` (absent → ``minReplicas``) clamped to [minReplicas, maxReplicas] (CRD defaults
  0 and 2147483647), times ``numOfHosts`` (default 1; multi-host TPU slices);
* a RayJob in ``K8sJobMode`` (the default ``submissionMode``) also runs a submitter pod from
  ``spec.submitterPodTemplate``, or KubeRay's default one (requests cpu 500m, memory 200Mi);
  a RayJob that only selects an existing cluster (``spec.clusterSelector``) creates no gang.

Kueue's RayCluster/RayJob integration makes the same pod sets (head, one per worker group,
submitter).

A Ray cluster is elastic (workers join the head as they start; the autoscaler adds and removes
them), so by default its pods are scheduled one by one and it is not all-or-nothing. It is a
gang when KubeRay hands it to a batch scheduler (label ``ray.io/scheduler-name``: volcano,
kai-scheduler, scheduler-plugins-scheduler; yunikorn with ``ray.io/gang-scheduling-enabled: "true"``;
ray-operator/controllers/ray/batchscheduler) *and* the group's size is the count checked here
(no in-tree autoscaling, or every worker group at its minReplicas: with autoscaling the batch
schedulers' PodGroup asks for the minimum replicas only), or when Kueue places it with
TopologyAwareScheduling.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from dataclasses import replace

from ..engine.model import GangRequest, PodSet
from .common import build_gang, count_field, kueue_tas, list_of, mapping
from .errors import AdapterError
from .podspec import container_requests, pod_set_from_template

__all__ = [
    "AUTOSCALER_DEFAULT_RESOURCES",
    "SUBMITTER_DEFAULT_RESOURCES",
    "cluster_pod_sets",
    "adapt_raycluster",
    "adapt_rayjob",
]

AUTOSCALER_DEFAULT_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
SUBMITTER_DEFAULT_RESOURCES = {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
INT32_MAX = 2147483647


def _head_template(cluster: Mapping, base: str) -> tuple[Mapping, str]:
    head = mapping(cluster.get("headGroupSpec"), f"{base}.headGroupSpec", required=True)
    template = head.get("template")
    if template is None:
        raise AdapterError("expected a pod template, the field is missing", field=f"{base}.headGroupSpec.template")
    if cluster.get("enableInTreeAutoscaling") is True:
        opts = mapping(cluster.get("autoscalerOptions"), f"{base}.autoscalerOptions")
        resources = opts.get("resources") or AUTOSCALER_DEFAULT_RESOURCES
        container_requests({"resources": resources}, f"{base}.autoscalerOptions")  # validate here, name the right field
        template = copy.deepcopy(dict(mapping(template, f"{base}.headGroupSpec.template")))
        spec = template.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list) and spec["containers"]:
            spec["containers"] = list(spec["containers"]) + [{"name": "autoscaler", "resources": resources}]
    return template, f"{base}.headGroupSpec.template"


def cluster_pod_sets(cluster: Mapping, base: str) -> tuple[list[PodSet], list[Mapping]]:
    """Pod sets of a RayClusterSpec: ``"head"`` (count 1) and one per worker group named by
    ``groupName`` (count = desired replicas × numOfHosts, see module doc).

    Args:
        cluster: a RayClusterSpec dict (RayCluster ``spec`` or RayJob ``spec.rayClusterSpec``).
        base: its path, for error messages.

    Returns:
        ``(pod_sets, templates)``.

    Raises:
        AdapterError: missing head/worker templates or group names, non-integer counts, bad templates.
    """
    head_t, head_field = _head_template(cluster, base)
    pod_sets = [pod_set_from_template("head", head_t, 1, field=head_field)]
    templates = [head_t]
    for i, g in enumerate(list_of(cluster.get("workerGroupSpecs"), f"{base}.workerGroupSpecs")):
        gb = f"{base}.workerGroupSpecs[{i}]"
        g = mapping(g, gb)
        name = g.get("groupName")
        if not isinstance(name, str) or not name:
            raise AdapterError("expected a groupName", field=f"{gb}.groupName")
        lo = count_field(g.get("minReplicas"), f"{gb}.minReplicas", default=0)
        hi = count_field(g.get("maxReplicas"), f"{gb}.maxReplicas", default=INT32_MAX)
        hosts = count_field(g.get("numOfHosts"), f"{gb}.numOfHosts", default=1)
        replicas = count_field(g.get("replicas"), f"{gb}.replicas", default=lo)
        if g.get("suspend") is True:
            desired = 0
        elif lo > hi:
            desired = hi
        else:
            desired = min(max(replicas, lo), hi)
        if g.get("template") is None:
            raise AdapterError("expected a pod template, the field is missing", field=f"{gb}.template")
        pod_sets.append(pod_set_from_template(name, g["template"], desired * hosts, field=f"{gb}.template"))
        templates.append(g["template"])
    return pod_sets, templates


RAY_SCHEDULER_NAME = "ray.io/scheduler-name"
RAY_GANG_ENABLED = "ray.io/gang-scheduling-enabled"
#: KubeRay batch-scheduler plugin names (ray-operator/controllers/ray/batchscheduler): volcano and
#: scheduler-plugins size their PodGroup as desired replicas + 1 head without in-tree
#: autoscaling, min replicas + 1 with it (DoBatchSchedulingOnSubmission).
_RAY_GANG_SCHEDULERS = ("volcano", "kai-scheduler", "scheduler-plugins", "scheduler-plugins-scheduler")


def _at_minimum(cluster: Mapping, base: str) -> bool:
    """Every worker group's desired replicas equal its minReplicas (so a PodGroup sized by the
    minimum and one sized by the desired replicas agree)."""
    for i, g in enumerate(list_of(cluster.get("workerGroupSpecs"), f"{base}.workerGroupSpecs")):
        gb = f"{base}.workerGroupSpecs[{i}]"
        g = mapping(g, gb)
        lo = count_field(g.get("minReplicas"), f"{gb}.minReplicas", default=0)
        if g.get("suspend") is True or count_field(g.get("replicas"), f"{gb}.replicas", default=lo) != lo:
            return False
    return True


def _ray_gang(gang: GangRequest, cluster: Mapping, base: str, templates: list[Mapping]) -> GangRequest:
    """Set ``all_or_nothing`` on a Ray gang (module doc)."""
    if kueue_tas(gang.queue_name, templates):
        return replace(gang, all_or_nothing=True, gang_basis="Kueue TopologyAwareScheduling places every pod at once")
    sched = gang.labels.get(RAY_SCHEDULER_NAME, "")
    gang_sched = sched in _RAY_GANG_SCHEDULERS or (sched == "yunikorn" and gang.labels.get(RAY_GANG_ENABLED) == "true")
    if gang_sched and (cluster.get("enableInTreeAutoscaling") is not True or _at_minimum(cluster, base)):
        return replace(gang, all_or_nothing=True, gang_basis=f"KubeRay hands it to {sched} as one PodGroup")
    return replace(gang, all_or_nothing=False, gang_basis="a Ray cluster's pods are scheduled one by one (no batch scheduler)")


def adapt_raycluster(obj: Mapping) -> GangRequest:
    """A RayCluster: head 1 + Σ worker groups desired replicas × numOfHosts.

    Example: head (1 cpu) + group "small-group" replicas 1 → 2 pods.

    Raises:
        AdapterError: see :func:`cluster_pod_sets`.
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    pod_sets, templates = cluster_pod_sets(spec, "spec")
    return _ray_gang(build_gang(obj, pod_sets, templates=templates), spec, "spec", templates)


def adapt_rayjob(obj: Mapping) -> GangRequest | None:
    """A RayJob: its ``spec.rayClusterSpec`` as for a RayCluster, plus a ``"submitter"`` pod set
    (count 1) in K8sJobMode. Returns None for a RayJob that runs on an existing cluster
    (``spec.clusterSelector`` without ``rayClusterSpec``): it creates no pods of its own
    besides the submitter, so it is not a gang.

    Raises:
        AdapterError: neither rayClusterSpec nor clusterSelector, an unknown submissionMode,
            or the errors of :func:`cluster_pod_sets`.
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    if spec.get("rayClusterSpec") is None:
        if mapping(spec.get("clusterSelector"), "spec.clusterSelector"):
            return None
        raise AdapterError("expected spec.rayClusterSpec or spec.clusterSelector, neither is set", field="spec.rayClusterSpec")
    cluster = mapping(spec.get("rayClusterSpec"), "spec.rayClusterSpec")
    pod_sets, templates = cluster_pod_sets(cluster, "spec.rayClusterSpec")
    mode = spec.get("submissionMode") or "K8sJobMode"
    if mode not in ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"):
        raise AdapterError(
            f"expected K8sJobMode, HTTPMode, InteractiveMode or SidecarMode, got {mode!r}", field="spec.submissionMode"
        )
    if mode == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        field = "spec.submitterPodTemplate"
        if template is None:
            template = {"spec": {"containers": [{"name": "ray-job-submitter", "resources": SUBMITTER_DEFAULT_RESOURCES}]}}
            field = "spec.submitterPodTemplate(default)"
        pod_sets.append(pod_set_from_template("submitter", template, 1, field=field))
        templates.append(template)
    return _ray_gang(build_gang(obj, pod_sets, templates=templates), cluster, "spec.rayClusterSpec", templates)
