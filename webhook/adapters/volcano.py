"""Volcano batch.volcano.sh/v1alpha1 Job and scheduling.volcano.sh/v1beta1 PodGroup → ``GangRequest``.

Job rules mirror Volcano's admission webhook (``pkg/webhooks/admission/jobs``):

* a task's ``minAvailable`` defaults to its ``replicas`` (``mutateSpec``); a missing
  ``replicas`` is the Go zero value 0; a missing task name becomes ``default<index>``;
* the job's ``spec.minAvailable`` (absent or 0) defaults to Σ task minAvailable
  (``patchDefaultMinAvailable``), which is Σ task replicas when no task sets a minimum;
* ``spec.queue`` defaults to ``"default"``; duplicated task names are denied (validate webhook).

Gang shape (one pod set per task, named after it, replicas = task replicas): count = the task's
minAvailable; when the job minimum asks for more pods than Σ task minimums, the extra pods are
taken from the tasks in order, each up to its replicas. When the job minimum is below Σ task
minimums, Volcano's scheduler checks only the job total (``JobInfo.CheckTaskValid`` skips the
per-task check); minimums the user wrote are still required (case C25), but a minimum that was
only *defaulted* to replicas then counts 0 and the job minimum is filled from the tasks in order
— Volcano's own ``vcjob-basic`` (minAvailable 3, one task of 6) is a gang of 3, not 6, and
counting 6 would risk a false NeverFits. Findings:

* ``InvalidGang`` (NeverFits): job minAvailable > Σ replicas, or a task minAvailable > its
  replicas — the PodGroup can never be satisfied (Volcano's webhook denies both);
* ``MinAvailableBelowTasks`` (Info): job minAvailable < Σ task minAvailable and some task sets
  its minimum explicitly (cases C25, volcano#1755) — Volcano may call the gang ready with a task
  below its minimum; the counts still require every explicit task minimum;
* ``InvalidTopologyRequest`` (NeverFits): ``spec.networkTopology`` with both ``highestTierAllowed``
  and ``highestTierName`` (Volcano's webhook denies it); otherwise a network topology is
  ``TopologyRequest(source="volcano")`` on every pod set (hard → required, soft → preferred; see
  ``topology.volcano_network_topology``);
* ``MinAvailableDefaulted`` (Info): a task with a ``partitionPolicy`` whose minAvailable was
  defaulted to replicas (case C24, volcano#4867); the count stays as configured and the
  finding carries the minimum the partition policy implies (minPartitions × partitionSize).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.model import Finding, GangRequest
from .common import build_gang, count_field, list_of, mapping, pod_group_pod_set
from .errors import AdapterError
from .podspec import pod_set_from_template
from .topology import volcano_network_topology, with_request, without_kueue

__all__ = ["DEFAULT_QUEUE", "adapt_volcano_job", "adapt_volcano_podgroup"]

DEFAULT_QUEUE = "default"


def _queue(spec: Mapping) -> str:
    q = spec.get("queue")
    return q if isinstance(q, str) and q else DEFAULT_QUEUE


def adapt_volcano_job(obj: Mapping) -> GangRequest:
    """A Volcano Job: one pod set per ``spec.tasks[i]``; ``volcano_queue`` = ``spec.queue``.

    Example (C25): minAvailable 3, t1 replicas 6 min 2, t2 replicas 2 min 2 → counts 2 + 2
    (4 pods), replicas 6 and 2, finding MinAvailableBelowTasks. Example: minAvailable 3, master
    1 + worker 2 with no task minimums → counts 1 + 2; minAvailable 3 over one task of 6
    replicas → count 3, replicas 6.

    Raises:
        AdapterError: no tasks, a task without a template/containers, duplicated task names,
            counts that are not integers ≥ 0, bad quantities.
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    tasks = []
    seen: set[str] = set()
    for i, t in enumerate(list_of(spec.get("tasks"), "spec.tasks", required=True)):
        base = f"spec.tasks[{i}]"
        t = mapping(t, base)
        name = t.get("name") or f"default{i}"
        if not isinstance(name, str):
            raise AdapterError(f"expected a task name string, got {name!r}", field=f"{base}.name")
        if name in seen:
            raise AdapterError(f"duplicated task name {name!r} (Volcano's webhook denies it)", field=f"{base}.name")
        seen.add(name)
        replicas = count_field(t.get("replicas"), f"{base}.replicas", default=0)
        defaulted = t.get("minAvailable") is None
        minimum = replicas if defaulted else count_field(t["minAvailable"], f"{base}.minAvailable")
        if t.get("template") is None:
            raise AdapterError("expected a pod template, the field is missing", field=f"{base}.template")
        tasks.append({"i": i, "name": name, "replicas": replicas, "min": minimum, "defaulted": defaulted, "t": t})

    total = sum(t["replicas"] for t in tasks)
    task_min_sum = sum(t["min"] for t in tasks)  # Volcano's TaskMinAvailableTotal (defaults included)
    job_min = count_field(spec.get("minAvailable"), "spec.minAvailable", default=0) or task_min_sum
    findings: list[Finding] = []
    relaxed = job_min < task_min_sum  # Volcano then skips the per-task check (CheckTaskValid)
    # Per-task floor: every task minimum, except that when Volcano only checks the job total,
    # a minimum that was merely defaulted to replicas must not inflate the gang
    # (vcjob "minAvailable: 3" over one task of 6 replicas is a gang of 3, not 6).
    counts = {t["name"]: 0 if (relaxed and t["defaulted"]) else min(t["min"], t["replicas"]) for t in tasks}

    for t in tasks:
        if t["min"] > t["replicas"]:
            findings.append(
                Finding(
                    "InvalidGang",
                    "NeverFits",
                    f"task {t['name']!r}: minAvailable ({t['min']}) is greater than its replicas ({t['replicas']}); "
                    f"the task can never reach its minimum — set spec.tasks[{t['i']}].minAvailable ≤ {t['replicas']}",
                    {"task": t["name"], "minAvailable": t["min"], "replicas": t["replicas"]},
                )
            )
    if job_min > total:
        findings.append(
            Finding(
                "InvalidGang",
                "NeverFits",
                f"spec.minAvailable ({job_min}) is greater than the {total} pods the tasks create; "
                f"the gang can never be satisfied — set spec.minAvailable ≤ {total}",
                {"minAvailable": job_min, "replicas": total},
            )
        )
        counts = {t["name"]: t["replicas"] for t in tasks}
    elif job_min > sum(counts.values()):
        extra = job_min - sum(counts.values())
        for t in tasks:
            take = min(extra, t["replicas"] - counts[t["name"]])
            counts[t["name"]] += take
            extra -= take
    explicit_min_sum = sum(t["min"] for t in tasks if not t["defaulted"])
    if relaxed and explicit_min_sum and job_min < task_min_sum:
        findings.append(
            Finding(
                "MinAvailableBelowTasks",
                "Info",
                f"spec.minAvailable ({job_min}) is below the sum of task minAvailable ({task_min_sum}); "
                f"Volcano may treat the gang as ready with a task below its minimum — set spec.minAvailable ≥ {task_min_sum}",
                {"minAvailable": job_min, "taskMinAvailable": task_min_sum},
            )
        )

    for t in tasks:
        pp = t["t"].get("partitionPolicy")
        if pp is None or not t["defaulted"]:
            continue
        base = f"spec.tasks[{t['i']}].partitionPolicy"
        pp = mapping(pp, base)
        size = count_field(pp.get("partitionSize"), f"{base}.partitionSize", default=1)
        min_parts = count_field(pp.get("minPartitions"), f"{base}.minPartitions", default=0)
        implied = min_parts * size
        if implied < t["replicas"]:
            findings.append(
                Finding(
                    "MinAvailableDefaulted",
                    "Info",
                    f"task {t['name']!r}: minAvailable defaulted to replicas ({t['replicas']}); "
                    f"the partition policy implies {implied} ({min_parts} partitions × {size})",
                    {"task": t["name"], "minAvailable": t["replicas"], "implied": implied},
                )
            )

    pod_sets = [
        pod_set_from_template(t["name"], t["t"]["template"], counts[t["name"]], t["replicas"], field=f"spec.tasks[{t['i']}].template")
        for t in tasks
    ]
    network, problem = volcano_network_topology(spec)
    if problem is not None:
        findings.append(problem)
    pod_sets = [with_request(ps, network, findings) for ps in without_kueue(pod_sets, "Volcano Jobs", findings)]
    prio = spec.get("priorityClassName") if isinstance(spec.get("priorityClassName"), str) else None
    return build_gang(
        obj,
        pod_sets,
        findings=findings,
        templates=[t["t"]["template"] for t in tasks],
        volcano_queue=_queue(spec),
        priority_class=prio,
    )


def adapt_volcano_podgroup(obj: Mapping) -> GangRequest:
    """A Volcano PodGroup: ``minMember`` pods sharing ``minResources`` evenly (rounded up).

    Shape: one pod set ``"members"`` (see ``common.pod_group_pod_set``), ``volcano_queue`` =
    ``spec.queue`` (default ``"default"``), priority from ``spec.priorityClassName``.

    Raises:
        AdapterError: missing spec, minMember not an integer ≥ 0, a bad quantity.
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    prio = spec.get("priorityClassName") if isinstance(spec.get("priorityClassName"), str) else None
    network, problem = volcano_network_topology(spec)
    findings = [problem] if problem is not None else []
    pod_set = with_request(pod_group_pod_set(spec), network, findings)
    return build_gang(obj, [pod_set], findings=findings, volcano_queue=_queue(spec), priority_class=prio)
