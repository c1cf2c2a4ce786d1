"""Kubeflow PyTorchJob (kubeflow.org/v1) and MPIJob (kubeflow.org/v2beta1, also v1) → ``GangRequest``.

One pod set per replica type (role), in the order the object lists them, with that role's pod
shape (a PyTorch Master and Worker may differ; an MPI Launcher usually has no GPU).

Replica defaults mirror the operators' defaulting: training-operator v1 sets a missing
``replicas`` to 1; mpi-operator v2beta1 sets Launcher to 1 and Worker to 0.

The gang minimum follows the PodGroup minMember the operators create (FIELD-NOTES §2):
``spec.runPolicy.schedulingPolicy.minAvailable`` > ``spec.elasticPolicy.minReplicas`` + the
non-worker replicas (PyTorchJob only) > Σ replicas. When the minimum is below Σ replicas the
counts are reduced on the Worker role only (never below 0) while ``replicas`` keeps the full
size: the operator creates every pod, the gang scheduler starts the job with the minimum.

All-or-nothing by its nature, with or without a gang scheduler: the operator wires every replica
into one job (PyTorch's WORLD_SIZE and MASTER_ADDR, MPI's hostfile of every worker), so no
replica makes progress until the minimum runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..engine.model import Finding, GangRequest, PodSet
from .common import build_gang, count_field, mapping, split_api_version
from .errors import AdapterError
from .podspec import pod_set_from_template

__all__ = ["REPLICA_SPECS", "adapt_pytorchjob", "adapt_mpijob", "gang_minimum"]

#: kind → the spec field holding its replica specs.
REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}
WORKER = "Worker"


def _default_replicas(kind: str, version: str, role: str) -> int:
    if kind == "MPIJob" and version != "v1" and role == WORKER:
        return 0  # mpi-operator v2beta1 setDefaultsTypeWorker
    return 1


def gang_minimum(spec: Mapping, replicas: Mapping[str, int], *, elastic: bool) -> tuple[int, str]:
    """The gang minimum in pods and where it came from.

    Args:
        spec: the job's ``spec``.
        replicas: role → replicas.
        elastic: whether ``spec.elasticPolicy`` applies (PyTorchJob).

    Returns:
        ``(minimum, source)`` with source one of ``"schedulingPolicy.minAvailable"``,
        ``"elasticPolicy.minReplicas"``, ``"replicas"``.

    Raises:
        AdapterError: minAvailable or minReplicas not an integer ≥ 0.
    """
    run_policy = mapping(spec.get("runPolicy"), "spec.runPolicy")
    sched = mapping(run_policy.get("schedulingPolicy"), "spec.runPolicy.schedulingPolicy")
    if sched.get("minAvailable") is not None:
        return count_field(sched["minAvailable"], "spec.runPolicy.schedulingPolicy.minAvailable"), "schedulingPolicy.minAvailable"
    if elastic:
        ep = mapping(spec.get("elasticPolicy"), "spec.elasticPolicy")
        if ep.get("minReplicas") is not None:
            workers_min = count_field(ep["minReplicas"], "spec.elasticPolicy.minReplicas")
            others = sum(n for role, n in replicas.items() if role != WORKER)
            return workers_min + others, "elasticPolicy.minReplicas"
    return sum(replicas.values()), "replicas"


def _adapt(obj: Mapping) -> GangRequest:
    kind = str(obj.get("kind"))
    _, version = split_api_version(obj.get("apiVersion"))
    key = REPLICA_SPECS[kind]
    spec = mapping(obj.get("spec"), "spec", required=True)
    roles = mapping(spec.get(key), f"spec.{key}", required=True)
    if not roles:
        raise AdapterError("expected at least one replica type, got {}", field=f"spec.{key}")
    replicas: dict[str, int] = {}
    templates: dict[str, Mapping] = {}
    for role, rs in roles.items():
        base = f"spec.{key}.{role}"
        rs = mapping(rs, base, required=True)
        replicas[str(role)] = count_field(rs.get("replicas"), f"{base}.replicas", default=_default_replicas(kind, version, str(role)))
        if rs.get("template") is None:
            raise AdapterError("expected a pod template, the field is missing", field=f"{base}.template")
        templates[str(role)] = rs["template"]
    total = sum(replicas.values())
    minimum, source = gang_minimum(spec, replicas, elastic=(kind == "PyTorchJob"))
    counts = dict(replicas)
    findings = []
    if minimum < total and WORKER in counts:
        counts[WORKER] = max(0, counts[WORKER] - (total - minimum))
    elif minimum > total:
        findings.append(
            Finding(
                "MinAvailableAboveReplicas",
                "Info",
                f"{source} ({minimum}) is more than the {total} pods the job creates; a gang scheduler "
                f"that honours it will never start the job — set it to at most {total}",
                {"minimum": minimum, "replicas": total, "source": source},
            )
        )
    if minimum < total:
        findings.append(
            Finding(
                "GangMinimumBelowReplicas",
                "Info",
                f"the gang may start with {sum(counts.values())} of {total} pods ({source}={minimum})",
                {"minimum": minimum, "replicas": total, "source": source},
            )
        )
    pod_sets: list[PodSet] = [
        pod_set_from_template(role, templates[role], counts[role], replicas[role], field=f"spec.{key}.{role}.template")
        for role in replicas
    ]
    sched = mapping(mapping(spec.get("runPolicy"), "spec.runPolicy").get("schedulingPolicy"), "spec.runPolicy.schedulingPolicy")
    queue = sched.get("queue") if isinstance(sched.get("queue"), str) and sched.get("queue") else None
    prio = sched.get("priorityClass") if isinstance(sched.get("priorityClass"), str) else None
    gang = build_gang(obj, pod_sets, findings=findings, templates=templates.values(), volcano_queue=queue, priority_class=prio)
    return replace(gang, gang_basis="its replicas form one distributed job")


def adapt_pytorchjob(obj: Mapping) -> GangRequest:
    """A kubeflow.org/v1 PyTorchJob: one pod set per ``spec.pytorchReplicaSpecs`` role.

    Example: Master 1×8 GPU + Worker 63×8 GPU → 64 pods, 512 GPUs. With
    ``elasticPolicy.minReplicas: 3`` and Worker replicas 8, Master 1: Worker count 3,
    replicas 8 (the minimum is 3 + 1 master). Findings: ``GangMinimumBelowReplicas`` (Info)
    when the minimum is below Σ replicas, ``MinAvailableAboveReplicas`` (Info) when above.

    Raises:
        AdapterError: missing replica specs or templates, replicas not an integer ≥ 0
            (e.g. ``spec.pytorchReplicaSpecs.Worker.replicas: … got 'eight'``), bad quantities.
    """
    return _adapt(obj)


def adapt_mpijob(obj: Mapping) -> GangRequest:
    """A kubeflow.org/v2beta1 (or v1) MPIJob: one pod set per ``spec.mpiReplicaSpecs`` role.

    Launcher replicas default 1, Worker replicas default 0 in v2beta1 (1 in v1); the launcher
    keeps its own, usually GPU-less, shape. The minimum rule is that of
    :func:`adapt_pytorchjob` without the elastic policy.

    Raises:
        AdapterError: as :func:`adapt_pytorchjob`, for ``spec.mpiReplicaSpecs``.
    """
    return _adapt(obj)
