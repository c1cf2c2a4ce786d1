"""The field cases of ../shared/cases/handed.md, each reduced to its small cluster and job.

Admission cases assert the verdict and the reason codes; diagnosis-only cases (C31) and the
ones the engine cannot model yet (C13 NUMA) are noted where they stand. Workloads whose
adapter semantics matter (Volcano minAvailable, sidecars) go through the real adapters.
"""

from __future__ import annotations

import pytest

from builders import GPU, gang, node, pod, pod_set, snapshot, taint
from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.engine.evaluate import EngineOptions, evaluate
from webhook.engine.model import (
    ClusterQueue,
    FlavorQuotas,
    GangRequest,
    PodSet,
    KueueState,
    LocalQueue,
    PodGroupState,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    VolcanoQueue,
    VolcanoState,
)


def kueue(nominal: int, *, usage: int = 0, flavors=("default",), strategy="BestEffortFIFO", pending=0, cohort=None) -> KueueState:
    """One ClusterQueue ``cq`` (``nominal`` nvidia.com/gpu, ample cpu/memory), LocalQueue default/lq → cq."""
    fq = tuple(FlavorQuotas(f, {GPU: ResourceQuota(nominal), "cpu": ResourceQuota(10**9), "memory": ResourceQuota(2**60)})
               for f in flavors)
    cq = ClusterQueue("cq", (ResourceGroup((GPU, "cpu", "memory"), fq),), cohort=cohort, usage={(flavors[0], GPU): usage},
                      queueing_strategy=strategy, pending_workloads=pending)
    return KueueState(
        flavors={f: ResourceFlavor(f) for f in flavors},
        cluster_queues={"cq": cq},
        local_queues={("default", "lq"): LocalQueue("default", "lq", "cq")},
    )


def codes(d) -> list[str]:
    return [f.code for f in d.findings]


# ---------------------------------------------------------------- C01, C02


def test_c01_quota_larger_than_hardware_two_8gpu_pods_on_8_gpus_is_never():
    snap = snapshot([node("gpu-a", gpu=8)], kueue=kueue(16))
    g = gang(pod_set("Master", 1, gpu=8), pod_set("Worker", 1, gpu=8), kind="PyTorchJob", queue="lq")
    d = evaluate(snap, g)
    assert d.verdict == "NeverFits"
    assert "ExceedsClusterCapacity" in d.reasons
    assert "QuotaExceedsCapacity" in codes(d)  # the lint: quota 16 > 8 physical GPUs
    lint = next(f for f in d.findings if f.code == "QuotaExceedsCapacity")
    assert (lint.data["nominal"], lint.data["physical"]) == (16, 8)


def test_c01_alternative_reading_quota_8_denies_on_quota():
    snap = snapshot([node("gpu-a", gpu=8)], kueue=kueue(8))
    g = gang(pod_set("Master", 1, gpu=8), pod_set("Worker", 1, gpu=8), kind="PyTorchJob", queue="lq")
    d = evaluate(snap, g)
    assert d.verdict == "NeverFits"
    assert d.reasons[0] == "ExceedsMaxQuota"
    f = next(f for f in d.findings if f.code == "ExceedsMaxQuota")
    assert (f.data["request"], f.data["maximum"]) == (16, 8)


def test_c02_quota_ok_but_gpus_held_by_lower_priority_job_waits():
    snap = snapshot(
        [node("n1", gpu=4)],
        [pod("job1-launcher", "n1", cpu=1), pod("job1-w0", "n1", gpu=2), pod("job1-w1", "n1", gpu=2)],
        kueue=kueue(8, usage=4),
    )
    g = gang(pod_set("Launcher", 1, cpu=1), pod_set("Worker", 2, gpu=2), kind="MPIJob", queue="lq")
    d = evaluate(snap, g)
    assert d.verdict == "Waits"
    assert "WaitingForQuota" not in d.reasons  # 4 used + 4 ≤ 8: Kueue sees no reason to preempt
    assert d.reasons == ["InsufficientCapacity"]
    f = next(f for f in d.findings if f.code == "InsufficientCapacity")
    assert (f.data["needed"], f.data["free"]) == (4, 0)


# ---------------------------------------------------------------- Volcano quota: C04, C05, C08, C24, C25

VOLCANO_C04 = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "default"},
    "spec": {
        "minAvailable": 2,
        "queue": "a",
        "tasks": [
            {"name": "task1", "replicas": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gtx-1080-ti": "2"}}}]}}},
            {"name": "task2", "replicas": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gtx-1080-ti": "5"}}}]}}},
        ],
    },
}


def test_c04_volcano_job_above_queue_capability_is_never():
    snap = snapshot(
        [node("n1", gpu=0, cpu=64, mem_gi=256)],
        volcano=VolcanoState(queues={"a": VolcanoQueue("a", capability={"cpu": 8000, "memory": 20 * 2**30, "nvidia.com/gtx-1080-ti": 3})}),
    )
    d = evaluate(snap, adapt(VOLCANO_C04))
    assert d.verdict == "NeverFits"
    assert d.reasons[0] == "ExceedsMaxQuota"
    assert "exceeds queue capability for nvidia.com/gtx-1080-ti: 7 > 3" in d.message


def test_c05_gang_above_deserved_share_warns_and_admits():
    snap = snapshot(
        [node("n1", gpu=3)],
        volcano=VolcanoState(
            queues={q: VolcanoQueue(q, weight=1) for q in ("A", "B", "C")},
            pod_groups={("default", "c"): PodGroupState("default", "c", "C", 1, {GPU: 2}, "Pending", 0)},
        ),
    )
    g = gang(pod_set("t", 1, gpu=2), kind="Job", volcano_queue="B")
    d = evaluate(snap, g)
    assert d.verdict == "Waits" and d.allowed
    f = next(f for f in d.findings if f.code == "ExceedsDeservedShare")
    assert f.data["deserved"] == pytest.approx(1.5)
    assert f.data["request"] == 2


def test_c08_orphan_podgroups_fill_the_queue_admit_and_list_them():
    orphans = {("default", f"pg-{i}"): PodGroupState("default", f"pg-{i}", "default", 1, {GPU: 1}, "Inqueue", 0) for i in range(4)}
    snap = snapshot(
        [node("n1", gpu=4), node("n2", gpu=4)],
        volcano=VolcanoState(queues={"default": VolcanoQueue("default", capability={GPU: 4}, allocated={GPU: 4})}, pod_groups=orphans),
    )
    d = evaluate(snap, gang(pod_set("t", 1, gpu=1), kind="Job", volcano_queue="default"))
    assert d.allowed
    assert d.verdict == "Waits" and "WaitingForQuota" in d.reasons
    f = next(f for f in d.findings if f.code == "OrphanPodGroups")
    assert f.data["pod_groups"] == [f"default/pg-{i}" for i in range(4)]


def _vcjob(min_available, tasks, queue="q"):
    spec = {"queue": queue, "tasks": []}
    if min_available is not None:
        spec["minAvailable"] = min_available
    for name, replicas, task_min, extra in tasks:
        t = {"name": name, "replicas": replicas, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"limits": {GPU: "1"}}}]}}}
        if task_min is not None:
            t["minAvailable"] = task_min
        t.update(extra)
        spec["tasks"].append(t)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "vj"}, "spec": spec}


def test_c24_defaulted_minavailable_exceeds_queue_denied_with_partition_hint():
    job = _vcjob(None, [("worker", 12, None, {"partitionPolicy": {"totalPartitions": 4, "partitionSize": 3, "minPartitions": 2}})])
    snap = snapshot([node(f"n{i}", gpu=8) for i in range(4)], volcano=VolcanoState(queues={"q": VolcanoQueue("q", capability={GPU: 10})}))
    d = evaluate(snap, adapt(job))
    assert d.verdict == "NeverFits"
    assert d.reasons[0] == "ExceedsMaxQuota"
    assert "12 > 10" in d.message
    assert "MinAvailableDefaulted" in codes(d)
    assert "6" in next(f for f in d.findings if f.code == "MinAvailableDefaulted").message  # 2 partitions × 3


def test_c25_job_min_below_task_mins_requires_each_task_minimum():
    job = _vcjob(3, [("t1", 6, 2, {}), ("t2", 2, 2, {})])
    g = adapt(job)
    assert [(ps.name, ps.count) for ps in g.pod_sets] == [("t1", 2), ("t2", 2)]
    snap = snapshot([node("n1", gpu=5)], volcano=VolcanoState(queues={"q": VolcanoQueue("q")}))
    d = evaluate(snap, g)
    assert d.verdict == "Fits"  # 4 ≤ 5
    assert "MinAvailableBelowTasks" in codes(d)
    assert any("4" in w for w in d.warnings if "minAvailable" in w)


# ---------------------------------------------------------------- capacity: C09, C11, C21, C26


def test_c09_pod_larger_than_largest_node_is_never():
    snap = snapshot([node("n1", gpu=0, cpu=72, mem_gi=256)])
    d = evaluate(snap, gang(pod_set("t", 1, cpu=73), kind="Job"))
    assert d.verdict == "NeverFits" and d.reasons == ["PodExceedsNodeCapacity"]
    assert "no eligible node has ≥73 cpu (the largest eligible node has 72)" in d.message
    d = evaluate(snapshot([node("n1", gpu=8)]), gang(pod_set("t", 1, gpu=9), kind="Job"))
    assert d.verdict == "NeverFits" and "no eligible node has ≥9 nvidia.com/gpu (the largest eligible node has 8)" in d.message


def test_c11_two_8gpu_pods_on_7_7_8_free_is_fragmented():
    snap = snapshot(
        [node("n1"), node("n2"), node("n3")],
        [pod("a", "n1", gpu=1), pod("b", "n2", gpu=1)],
        kueue=kueue(24, usage=2),
    )
    g = gang(pod_set("Master", 1, gpu=8), pod_set("Worker", 1, gpu=8), kind="PyTorchJob", queue="lq")
    d = evaluate(snap, g)
    assert d.verdict == "Waits" and d.reasons == ["Fragmented"]
    fr = d.fragmentation
    assert (fr["free"], fr["nodes_fit_now"], fr["pods_needed"], fr["deficit"], fr["stranded"]) == (22, 1, 2, 1, 14)


def test_c21_job_needing_3gpu_pods_on_2gpu_nodes_denied_other_admitted():
    snap = snapshot([node(f"n{i}", gpu=2) for i in range(5)])
    d1 = evaluate(snap, gang(pod_set("t", 4, gpu=3), kind="Job", name="job1"))
    assert d1.verdict == "NeverFits" and d1.reasons == ["PodExceedsNodeCapacity"]
    d2 = evaluate(snap, gang(pod_set("t", 4, gpu=2), kind="Job", name="job2"))
    assert d2.verdict == "Fits"
    placed = d2.placement["pod_sets"]["t"]
    assert sum(n for _, n in placed) == 4 and len({name for name, _ in placed}) == 4


SIDECAR_POD_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "npu", "namespace": "default"},
    "spec": {"template": {"spec": {
        "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"limits": {GPU: "8"}}}],
        "containers": [{"name": "app", "resources": {"limits": {GPU: "8"}}}],
    }}},
}


def test_c26_sidecar_and_app_with_8_each_need_16_on_one_node():
    g = adapt(SIDECAR_POD_JOB)
    assert g.pod_sets[0].requests[GPU] == 16
    d = evaluate(snapshot([node("n1", gpu=8)]), g)
    assert d.verdict == "NeverFits"
    assert "no eligible node has ≥16 nvidia.com/gpu (the largest eligible node has 8)" in d.message


# ---------------------------------------------------------------- partial gangs: C14, C15, C16, C18, C20


def test_c14_second_all_nodes_gang_waits_while_partial_gangs_hold_gpus():
    nodes = [node(f"n{i}", gpu=1) for i in range(4)]
    pods = [pod("a-0", "n0", gpu=1, gang="Job/default/a"), pod("a-1", "n1", gpu=1, gang="Job/default/a"),
            pod("b-0", "n2", gpu=1, gang="Job/default/b"), pod("b-1", "n3", gpu=1, gang="Job/default/b")]
    g = gang(pod_set("t", 4, gpu=1, max_per_node=1), kind="Job", name="b")
    d = evaluate(snapshot(nodes, pods), g)
    assert d.verdict == "Waits" and d.reasons == ["InsufficientCapacity"]
    assert d.nodes["fit_ever"] == 4


def test_c15_two_podgroups_competing_in_permit_are_admitted_with_a_warning():
    nodes = [node("n1"), node("n2")]
    waiting = [pod(f"q-{i}", "", gpu=4, gang="PodGroup/default/q", phase="Pending") for i in range(3)]
    d = evaluate(snapshot(nodes, waiting), gang(pod_set("members", 3, gpu=4), kind="PodGroup", name="p"))
    assert d.verdict == "Fits" and d.allowed
    f = next(f for f in d.findings if f.code == "CompetingPendingGangs")
    assert (f.data["pending"], f.data["free"]) == (12, 16)
    assert any("serialize" in w for w in d.warnings)


def test_c16_ten_member_group_on_nine_free_gpus_waits_and_eight_capacity_denies():
    nodes = [node(f"n{i}", gpu=4) for i in range(3)]
    pods = [pod(f"u{i}", f"n{i}", gpu=1) for i in range(3)]
    d = evaluate(snapshot(nodes, pods), gang(pod_set("members", 10, gpu=1), kind="PodGroup"))
    assert d.verdict == "Waits" and d.reasons == ["InsufficientCapacity"]
    d = evaluate(snapshot(nodes[:2]), gang(pod_set("members", 10, gpu=1), kind="PodGroup"))
    assert d.verdict == "NeverFits" and d.reasons == ["ExceedsClusterCapacity"]


LWS_C18 = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "vllm", "namespace": "default"},
    "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {"containers": [
        {"name": "vllm", "resources": {"limits": {GPU: "1"}}}]}}}},
}


def test_c18_lws_two_groups_of_four_on_four_gpus_admitted_one_group_at_a_time():
    d = evaluate(snapshot([node(f"n{i}", gpu=1) for i in range(4)]), adapt(LWS_C18))
    assert d.allowed and d.verdict == "Waits"
    f = next(f for f in d.findings if f.code == "GroupsExceedCapacity")
    assert (f.data["groups"], f.data["groups_possible"]) == (2, 1)


def test_c20_half_started_jobsets_leave_no_room_for_js1():
    nodes = [node(f"n{i}", gpu=2) for i in range(3)]
    pods = [pod("js4-1", "n0", gpu=1), pod("js4-2", "n0", gpu=1), pod("js5-1", "n1", gpu=1), pod("js5-2", "n1", gpu=1),
            pod("js1-part2", "n2", gpu=1), pod("js3-part2", "n2", gpu=1)]
    g = gang(pod_set("part1", 1, gpu=1), pod_set("part2", 1, gpu=1), kind="JobSet", name="js-2")
    d = evaluate(snapshot(nodes, pods), g)
    assert d.verdict == "Waits" and d.reasons == ["InsufficientCapacity"]


# ---------------------------------------------------------------- device plugin: C28, C32, C33, C35, C37


def test_c28_capacity_16_allocatable_0_waits_for_the_device_plugin():
    d = evaluate(snapshot([node("gpu-01", gpu=16, alloc_gpu=0)]), gang(pod_set("t", 1, gpu=1), kind="Job"))
    assert d.verdict == "Waits"
    assert "UnhealthyDevices" in d.reasons
    assert "gpu-01 advertises 0 of 16 nvidia.com/gpu" in next(f.message for f in d.findings if f.code == "UnhealthyDevices")


def test_c32_one_unhealthy_gpu_and_one_busy_node_waits_with_both_reasons():
    nodes = [node("A", gpu=8, alloc_gpu=7), node("B", gpu=8)]
    d = evaluate(snapshot(nodes, [pod("p", "B", gpu=2)]), gang(pod_set("t", 1, gpu=8), kind="Job"))
    assert d.verdict == "Waits"
    assert d.reasons[:2] == ["Fragmented", "UnhealthyDevices"]  # 13 free but no node has 8
    assert d.fragmentation["free"] == 13
    assert d.nodes["summary"] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def _k8s_node(name, labels, resources):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": resources, "allocatable": resources, "conditions": [{"type": "Ready", "status": "True"}]}}


def test_c33_mig_layout_advertises_one_of_seven_slices_waits():
    mig = "nvidia.com/mig-1g.10gb"
    snap = build_snapshot([
        _k8s_node("a100-1", {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "1"},
                  {mig: "1", "cpu": "64", "memory": "256Gi", "pods": "110"}),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p0", "namespace": "default"},
         "spec": {"nodeName": "a100-1", "containers": [{"name": "c", "resources": {"limits": {mig: "1"}}}]},
         "status": {"phase": "Running"}},
    ])
    g = _mig_gang(mig)
    d = evaluate(snap, g)
    assert d.verdict == "Waits" and d.allowed
    assert "advertises 1 of 7 nvidia.com/mig-1g.10gb" in next(f.message for f in d.findings if f.code == "UnhealthyDevices")


def _mig_gang(resource: str, count: int = 3):
    return GangRequest("Job", "mig", "default", (PodSet("t", count, {resource: 1}),))


def test_c35_no_node_offers_both_mig_slice_and_rdma_is_never():
    mig, rdma = "nvidia.com/mig-1g.5gb", "rdma/shared_mlx5"
    objs = [
        _k8s_node("n1", {}, {mig: "0", rdma: "1000", "cpu": "64", "memory": "256Gi"}),
        _k8s_node("n2", {}, {mig: "0", rdma: "1000", "cpu": "64", "memory": "256Gi"}),
        _k8s_node("n3", {}, {mig: "7", rdma: "0", "cpu": "64", "memory": "256Gi"}),
    ]
    g = GangRequest("Job", "dynamo", "default", (PodSet("t", 1, {"cpu": 2000, "memory": 6 * 2**30, mig: 1, rdma: 1}),))
    d = evaluate(build_snapshot(objs), g)
    assert d.verdict == "NeverFits" and d.reasons == ["PodExceedsNodeCapacity"]
    assert "no single node offers" in d.message and mig in d.message and rdma in d.message
    # A MIG re-partition in progress makes it unproven: admitted with a warning.
    objs[0]["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending"
    d = evaluate(build_snapshot(objs), g)
    assert d.verdict == "Waits" and "MigReconfiguring" in d.reasons


def test_c37_stale_zero_mig_keys_do_not_break_a_whole_gpu_fit():
    objs = [_k8s_node("n1", {"nvidia.com/mig.strategy": "mixed"},
                      {GPU: "8", "nvidia.com/mig-1g.24gb": "0", "nvidia.com/mig-2g.48gb": "0", "cpu": "64", "memory": "256Gi"})]
    d = evaluate(build_snapshot(objs), gang(pod_set("t", 1, gpu=1), kind="Job"))
    assert d.verdict == "Fits" and d.reasons == []


# ---------------------------------------------------------------- taints and readiness: C38, C40, C42


def test_c38_permanent_taint_denies_transient_taint_waits():
    nodes = [node("n1"), node("n2"), node("n3", taints=[taint("maintenance", "true")])]
    g = gang(pod_set("t", 3, gpu=8), kind="Job", queue="lq")
    d = evaluate(snapshot(nodes, kueue=kueue(24)), g)
    assert d.verdict == "NeverFits" and d.reasons == ["ExceedsClusterCapacity"]
    assert d.nodes["reasons"]["node(s) had untolerated taint(s)"] == 1
    assert d.nodes["samples"]["node(s) had untolerated taint(s)"] == ["n3"]
    d = evaluate(snapshot(nodes, kueue=kueue(24)), g, EngineOptions(transient_taints=frozenset({"maintenance"})))
    assert d.verdict == "Waits" and "NodesTransientlyTainted" in d.reasons


def test_c40_notready_node_makes_the_gang_wait_not_deny():
    nodes = [node("n1"), node("n2"), node("n3", ready=False)]
    d = evaluate(snapshot(nodes), gang(pod_set("t", 3, gpu=8), kind="Job"))
    assert d.verdict == "Waits" and "NodesNotReady" in d.reasons
    assert d.nodes["summary"] == "2/3 nodes are available: 1 node(s) had untolerated taint(s)."


def test_c42_high_priority_job_waits_for_lower_priority_holder():
    snap = snapshot([node("n1")], [pod("a", "n1", gpu=4, priority=100)])
    d = evaluate(snap, gang(pod_set("t", 1, gpu=8), kind="Job", name="b"))
    assert d.verdict == "Waits" and d.reasons == ["InsufficientCapacity"]


def test_c44_strict_fifo_head_of_line_blocking_warns():
    snap = snapshot([node(f"n{i}") for i in range(5)], kueue=kueue(40, flavors=("pool-b200",), strategy="StrictFIFO", pending=1))
    d = evaluate(snap, gang(pod_set("t", 1, gpu=8), kind="Job", queue="lq"))
    assert d.verdict == "Fits" and d.allowed
    assert "HeadOfLineBlocking" in codes(d)


def test_c13_numa_fragmentation_is_not_a_false_rejection():
    # The engine has no NUMA model yet: the case's right answer is ADMIT+WARN; we must at
    # least admit (no false rejection). The NUMA warning is left for the diagnose work.
    snap = snapshot([node("p5-a")], [pod("a", "p5-a", gpu=1), pod("b", "p5-a", gpu=1)])
    d = evaluate(snap, gang(pod_set("t", 1, gpu=4), kind="Job"))
    assert d.allowed and d.verdict == "Fits"

