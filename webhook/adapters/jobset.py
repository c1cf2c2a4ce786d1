"""jobset.x-k8s.io/v1alpha2 JobSet → ``GangRequest``.

Mirrors Kueue's JobSet integration (``pkg/controller/jobs/jobset``): one pod set per
``spec.replicatedJobs[i]`` named after it, with ``replicas`` (default 1, the CRD default) ×
the Job's running pods (``parallelism`` default 1, capped by ``completions``, as for a Job).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.model import GangRequest
from .batch import job_pod_count
from .common import build_gang, count_field, list_of, mapping
from .errors import AdapterError
from .podspec import pod_set_from_template

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
    pod_sets, templates, seen = [], [], set()
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
        pod_sets.append(pod_set_from_template(name, template, replicas * per_job, field=f"{base}.template.spec.template"))
        templates.append(template)
    return build_gang(obj, pod_sets, templates=templates)
