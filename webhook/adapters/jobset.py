"""jobset.x-k8s.io/v1alpha2 JobSet → ``GangRequest``.

Mirrors Kueue's JobSet integration (``pkg/controller/jobs/jobset``): one pod set per
``spec.replicatedJobs[i]`` named after it, with ``replicas`` (default 1, the CRD default) ×
the Job's running pods (``parallelism`` default 1, capped by ``completions``, as for a Job).

Exclusive topology (``alpha.jobset.sigs.k8s.io/exclusive-topology`` on the JobSet or on a
replicatedJob's Job template, see ``topology.jobset_exclusive``): the pod set gets
``TopologyRequest(source="jobset", mode="required", level=KEY, exclusive=True,
unit_size=the child Job's pods)`` — each child Job in a domain of its own; with the node-selector
strategy (``alpha.jobset.sigs.k8s.io/node-selector``) the pods also tolerate the
``alpha.jobset.sigs.k8s.io/no-schedule`` taint, as the controller makes them. A Kueue TAS request
on the same pod template is kept instead (a ``TopologyNotEnforced`` finding names the other).

``dependsOn`` with status ``Complete``: the dependent replicatedJob's Jobs exist only after the
ones it depends on succeeded, so the JobSet is not all-or-nothing (``all_or_nothing`` False, an
Info finding ``SequentialReplicatedJobs``): its pods are checked one by one; the pod sets (and
so Kueue's quota, which admits them all at once) are unchanged. ``Ready`` keeps the gang whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..engine.model import Finding, GangRequest
from .batch import job_pod_count
from .common import build_gang, count_field, list_of, mapping
from .errors import AdapterError
from .podspec import pod_set_from_template
from .topology import jobset_exclusive, no_schedule_toleration, with_request

__all__ = ["adapt_jobset"]


def adapt_jobset(obj: Mapping) -> GangRequest:
    """A JobSet as one pod set per replicatedJob.

    Shape: pod set ``name`` = the replicatedJob's name; count = replicas × parallelism (capped
    by completions), pods; requests from ``template.spec.template``. Gang size =
    Σ replicatedJobs replicas × parallelism (FIELD-NOTES §2).

    Raises:
        AdapterError: no replicatedJobs, a replicatedJob without a name or template, duplicated
            names, non-integer counts, or a bad pod template.
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    js_annotations = mapping(mapping(obj.get("metadata"), "metadata").get("annotations"), "metadata.annotations")
    pod_sets, templates, seen = [], [], set()
    findings: list[Finding] = []
    sequential: list[tuple[str, str]] = []  # (replicatedJob, the one it waits to complete)
    for i, rj in enumerate(list_of(spec.get("replicatedJobs"), "spec.replicatedJobs", required=True)):
        base = f"spec.replicatedJobs[{i}]"
        rj = mapping(rj, base)
        name = rj.get("name")
        if not isinstance(name, str) or not name:
            raise AdapterError("expected a replicatedJob name", field=f"{base}.name")
        if name in seen:
            raise AdapterError(f"duplicated replicatedJob name {name!r}", field=f"{base}.name")
        seen.add(name)
        replicas = count_field(rj.get("replicas"), f"{base}.replicas", default=1)
        job_spec = mapping(mapping(rj.get("template"), f"{base}.template", required=True).get("spec"), f"{base}.template.spec", required=True)
        template = job_spec.get("template")
        if template is None:
            raise AdapterError("expected a pod template, the field is missing", field=f"{base}.template.spec.template")
        per_job = job_pod_count(job_spec, f"{base}.template.spec")
        ps = pod_set_from_template(name, template, replicas * per_job, field=f"{base}.template.spec.template")
        rj_meta = mapping(mapping(rj.get("template"), f"{base}.template").get("metadata"), f"{base}.template.metadata")
        request, strategy, problem = jobset_exclusive(
            js_annotations, mapping(rj_meta.get("annotations"), f"{base}.template.metadata.annotations"),
            f"{base}.template", per_job)
        if problem is not None:
            findings.append(problem)
        if strategy:  # the controller adds this toleration to every pod (addTaintToleration)
            ps = replace(ps, tolerations=(*ps.tolerations, no_schedule_toleration()))
        pod_sets.append(with_request(ps, request, findings))
        templates.append(template)
        for j, dep in enumerate(list_of(rj.get("dependsOn"), f"{base}.dependsOn")):
            dep = mapping(dep, f"{base}.dependsOn[{j}]")
            if dep.get("status") == "Complete":
                sequential.append((name, str(dep.get("name") or "")))
    gang = build_gang(obj, pod_sets, findings=findings, templates=templates)
    if not sequential:
        return gang
    # dependsOn status Complete: the controller creates the dependent's Jobs only once every Job
    # it depends on has succeeded (jobset pkg/controllers/depends_on.go dependencyReachedStatus),
    # so the JobSet's pods never all run at once; one whole-gang placement would overstate what
    # must fit together. Quota (Kueue admits every replicatedJob's pod set at once) is unchanged.
    after = ", ".join(f"{n} after {d}" for n, d in sequential)
    info = Finding("SequentialReplicatedJobs", "Info",
                   f"replicatedJobs run one after another ({after} completes): its pods never all run at once, "
                   "so they are checked pod by pod", {"after": [list(x) for x in sequential]})
    return replace(gang, findings=(*gang.findings, info), all_or_nothing=False,
                   gang_basis=f"dependsOn Complete ({after}): the replicatedJobs never run all at once")
