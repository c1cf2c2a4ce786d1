"""batch/v1 Job → ``GangRequest``.

Mirrors how Kueue sizes a Job's single pod set (``pkg/controller/jobs/job``): the pods that run
at once are ``spec.parallelism`` (default 1), capped by ``spec.completions`` when set (a Job
never runs more pods than the completions still to do). With Kueue partial admission
(annotation ``kueue.x-k8s.io/job-min-parallelism``) Kueue may admit the Job with as few as that
many pods, so the gang minimum is the annotation and the full parallelism stays the replicas.

A Job's pods are scheduled one by one (the Job controller creates them; kube-scheduler, Volcano
and KAI place each on its own — Volcano and KAI give a plain Job a PodGroup of minMember 1): it
is all-or-nothing only when Kueue places it with TopologyAwareScheduling (a queue label and a
podset-*-topology annotation: Kueue admits it only with a placement for every pod) or when
``spec.gangPolicy.policy`` is ``JobAsGang`` (KEP-5764: the Job controller makes a Workload
whose gang minCount is the parallelism). A template that joins a group defined elsewhere
(a PodGroup, a Workload pod group) gets that group's minimum, which the Job does not state:
the Job itself is then checked pod by pod. Kueue's quota still covers the whole Job.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.model import Finding, GangRequest
from dataclasses import replace

from .common import build_gang, count_field, external_group, kueue_tas, mapping
from .errors import AdapterError
from .podspec import pod_set_from_template

__all__ = ["MIN_PARALLELISM", "job_pod_count", "adapt_job"]

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def job_pod_count(job_spec: Mapping, field: str = "spec") -> int:
    """Pods of a JobSpec that run at once: ``parallelism`` (default 1) capped by ``completions``.

    Args:
        job_spec: a batch/v1 JobSpec dict.
        field: its path in the object, for error messages.

    Raises:
        AdapterError: parallelism or completions not an integer ≥ 0.
    """
    parallelism = count_field(job_spec.get("parallelism"), f"{field}.parallelism", default=1)
    completions = job_spec.get("completions")
    if completions is not None:
        parallelism = min(parallelism, count_field(completions, f"{field}.completions"))
    return parallelism


def adapt_job(obj: Mapping) -> GangRequest:
    """A batch/v1 Job as one pod set ``"main"``.

    Shape: count = parallelism capped by completions (pods), per-pod requests from
    ``spec.template`` (FIELD-NOTES §1). With annotation ``kueue.x-k8s.io/job-min-parallelism``
    (Kueue partial admission) count = that minimum, replicas = the capped parallelism, and an
    Info finding ``PartialAdmission`` is added.

    Raises:
        AdapterError: missing ``spec``/``spec.template``/containers, a non-integer count, a bad
            quantity, or a min-parallelism annotation that is not an integer in
            [1, parallelism) (Kueue's webhook rejects those too).
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    pods = job_pod_count(spec)
    template = spec.get("template")
    if template is None:
        raise AdapterError("expected a pod template, the field is missing", field="spec.template")
    count, replicas, findings = pods, None, []
    annotations = mapping(mapping(obj.get("metadata"), "metadata").get("annotations"), "metadata.annotations")
    if annotations.get(MIN_PARALLELISM) is not None:
        field = f"metadata.annotations[{MIN_PARALLELISM}]"
        minimum = count_field(annotations.get(MIN_PARALLELISM), field)
        parallelism = count_field(spec.get("parallelism"), "spec.parallelism", default=1)
        if not 0 < minimum < parallelism:
            raise AdapterError(
                f"expected an integer greater than 0 and less than spec.parallelism ({parallelism}), got {minimum}",
                field=field,
            )
        count, replicas = min(minimum, pods), pods
        findings.append(
            Finding(
                "PartialAdmission",
                "Info",
                f"Kueue partial admission: the Job may start with {count} of {pods} pods "
                f"({MIN_PARALLELISM}={minimum}); the check uses the minimum",
                {"minimum": count, "parallelism": pods},
            )
        )
    pod_set = pod_set_from_template("main", template, count, replicas, field="spec.template")
    group = external_group([template])
    if group:
        findings.append(Finding("GangDefinedElsewhere", "Info",
            f"its pods join {group}: that group's minimum decides how many start together; the Job is checked pod by pod",
            {"group": group}))
    gang = build_gang(obj, [pod_set], findings=findings, templates=[template])
    policy = mapping(spec.get("gangPolicy"), "spec.gangPolicy").get("policy")
    if policy == "JobAsGang":
        return replace(gang, all_or_nothing=True, gang_basis="spec.gangPolicy JobAsGang (a Workload gang of parallelism pods)")
    if kueue_tas(gang.queue_name, [template]):
        return replace(gang, all_or_nothing=True, gang_basis="Kueue TopologyAwareScheduling places every pod at once")
    return replace(gang, all_or_nothing=False, gang_basis="a Job's pods are scheduled one by one")
