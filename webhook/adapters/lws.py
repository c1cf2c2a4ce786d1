"""leaderworkerset.x-k8s.io/v1 LeaderWorkerSet → ``GangRequest``.

Mirrors the LWS controller and its CRD defaults: ``spec.replicas`` groups (default 1), each of
``spec.leaderWorkerTemplate.size`` pods (default 1: a leader and size − 1 workers). The leader
pod uses ``leaderTemplate`` when given, otherwise ``workerTemplate`` (as the controller does).
Kueue's LWS integration likewise makes a "leader" and a "worker" pod set per group.

Each group is all-or-nothing by its nature, with or without a gang scheduler: the controller
gives every pod of a group its size (LWS_GROUP_SIZE), the group is Ready only with all its pods,
and the default restartPolicy RecreateGroupOnPodRestart recreates the whole group when one pod
fails — a group missing a pod never serves. Groups are independent (``GangRequest.groups``).

Exclusive topology (``leaderworkerset.sigs.k8s.io/exclusive-topology`` on the LWS): both pod
sets get ``TopologyRequest(source="lws", mode="required", level=KEY, exclusive=True,
unit_size=size)`` — each group (leader + workers) in a domain of its own, no two groups in one.
Subgroup exclusive topology (``subgroup-exclusive-topology`` with ``subGroupPolicy``): the same
with ``unit_size=subGroupSize`` on the pod sets the subgroups span, when the subgroups are even;
with both, the group request is kept and a ``TopologyNotEnforced`` finding names the subgroup one
(see ``topology.lws_exclusive``). Kueue TAS annotations on a template win over both.
"""

from __future__ import annotations

from collections.abc import Mapping

from dataclasses import replace

from ..engine.model import Finding, GangRequest
from .common import build_gang, count_field, mapping
from .errors import AdapterError
from .podspec import get_path, pod_set_from_template
from .topology import lws_exclusive, with_request

__all__ = ["MAX_REPLICAS", "adapt_lws"]

#: ``spec.replicas`` maximum in the LeaderWorkerSet CRD (leaderworkerset.x-k8s.io_leaderworkersets.yaml).
MAX_REPLICAS = 1_000_000


def adapt_lws(obj: Mapping) -> GangRequest:
    """A LeaderWorkerSet as one group: pod sets ``"leader"`` (count 1, replicas = groups) and
    ``"worker"`` (count size − 1, replicas = groups × (size − 1), omitted when size is 1), with
    ``GangRequest.groups`` = spec.replicas. Each group starts on its own (LWS gang semantics).

    Example: replicas 2, size 2, 8 GPUs each → a gang of 1 leader + 1 worker (16 GPUs), groups 2.
    Adds an Info finding ``LeaderWorkerGroups``: each group of ``size`` pods must start
    together; groups are placed independently.

    Raises:
        AdapterError: missing ``leaderWorkerTemplate``/``workerTemplate``, size < 1, counts
            that are not integers, bad pod templates.
    """
    spec = mapping(obj.get("spec"), "spec", required=True)
    replicas = count_field(spec.get("replicas"), "spec.replicas", default=1, maximum=MAX_REPLICAS)
    lwt = mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate", required=True)
    size = count_field(lwt.get("size"), "spec.leaderWorkerTemplate.size", default=1)
    if size < 1:
        raise AdapterError(f"expected an integer ≥ 1, got {size}", field="spec.leaderWorkerTemplate.size")
    worker_t = lwt.get("workerTemplate")
    if worker_t is None:
        raise AdapterError("expected a pod template, the field is missing", field="spec.leaderWorkerTemplate.workerTemplate")
    leader_t = lwt.get("leaderTemplate")
    leader_field = "spec.leaderWorkerTemplate.leaderTemplate"
    if leader_t is None:
        leader_t, leader_field = worker_t, "spec.leaderWorkerTemplate.workerTemplate"
    # The gang is one group (leader + size-1 workers); ``groups`` says how many the LWS creates.
    pod_sets = [pod_set_from_template("leader", leader_t, 1 if replicas else 0, replicas, field=leader_field)]
    if size > 1:
        pod_sets.append(
            pod_set_from_template(
                "worker", worker_t, (size - 1) if replicas else 0, replicas * (size - 1),
                field="spec.leaderWorkerTemplate.workerTemplate",
            )
        )
    policy = mapping(lwt.get("subGroupPolicy"), "spec.leaderWorkerTemplate.subGroupPolicy")
    sub_size = sub_type = None
    if lwt.get("subGroupPolicy") is not None:
        sub_size = count_field(policy.get("subGroupSize"), "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize")
        if sub_size < 1 or sub_size > size:
            raise AdapterError(f"expected an integer from 1 to the group size {size}, got {sub_size}",
                               field="spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize")
        sub_type = policy.get("subGroupPolicyType") or "LeaderWorker"
        if sub_type not in ("LeaderWorker", "LeaderExcluded"):
            raise AdapterError(f"expected LeaderWorker or LeaderExcluded, got {str(sub_type)[:40]!r}",
                               field="spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType")
    group_req, sub_req, findings = lws_exclusive(
        mapping(get_path(obj, "metadata.annotations"), "metadata.annotations"), size, sub_size, sub_type or "")
    for req in (group_req, sub_req):
        if req is None:
            continue
        pod_sets = [ps if (req is sub_req and ps.name == "leader" and sub_type == "LeaderExcluded")
                    else with_request(ps, req, findings) for ps in pod_sets]
    finding = Finding(
        "LeaderWorkerGroups",
        "Info",
        f"{replicas} group(s) of {size} pods (1 leader + {size - 1} worker{'s' if size != 2 else ''}): each group must start "
        f"together; groups are placed independently",
        {"groups": replicas, "size": size},
    )
    return replace(build_gang(obj, pod_sets, findings=[finding, *findings], templates=[leader_t, worker_t]), groups=replicas,
                   gang_basis="a LeaderWorkerSet group runs only with all its pods")
