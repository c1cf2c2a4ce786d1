"""Issue #17 items 25–27: what is all-or-nothing, what pod admission adds, which taints repair themselves.

* 25 — a plain batch Job (and a Ray cluster without a batch scheduler) is scheduled pod by pod:
  more pods than the cluster holds at once is a ParallelismExceedsCapacity warning, never a
  denial; only what no single pod could ever do is a NeverFits. Gangs by their nature
  (PyTorchJob, JobSet, LWS groups) and Jobs placed whole (Kueue TAS, gangPolicy JobAsGang, the
  policy's plainJobsAsGangs) keep the count proof. Property: for a non-gang the verdict is
  NeverFits exactly when a brute-force search finds no node that could ever host one pod.
* 26 — ExtendedResourceToleration (kubernetes plugin/pkg/admission/extendedresourcetoleration):
  a pod requesting nvidia.com/gpu tolerates nvidia.com/gpu:NoSchedule (GKE's GPU node taint),
  not NoExecute; a RuntimeClass or PodTolerationRestriction may add unseen tolerations, so a
  taint then proves nothing.
* 27 — taints the system sets and clears (node.kubernetes.io/*, cloud provider, cluster-autoscaler,
  Karpenter, …) are repairable by default; admins' transientTaints extend the defaults.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.adapters import adapt
from webhook.engine.evaluate import EngineOptions, evaluate
from webhook.engine.filters import DEFAULT_TRANSIENT, admission_tolerations, is_extended_resource, taint_matches
from webhook.engine.model import DEFAULT_TRANSIENT_TAINTS, Taint
from webhook.policy import PolicyError, parse_policy

try:  # tests/ as a package or as a rootdir-inserted directory
    from .builders import GPU, gang, node, pod_set, snapshot, toleration
except ImportError:
    from builders import GPU, gang, node, pod_set, snapshot, toleration


def container(gpu: int = 8, cpu: str = "8") -> dict:
    res = {"cpu": cpu, "memory": "16Gi"}
    if gpu:
        res[GPU] = str(gpu)
    return {"name": "c", "image": "x", "resources": {"requests": dict(res), "limits": {GPU: str(gpu)} if gpu else {}}}


def job(parallelism: int, gpu: int = 8, *, labels=None, annotations=None, template_meta=None, spec_extra=None,
        pod_spec_extra=None) -> dict:
    pod_spec = {"containers": [container(gpu)], "restartPolicy": "Never"}
    pod_spec.update(pod_spec_extra or {})
    spec = {"parallelism": parallelism, "completions": parallelism, "completionMode": "Indexed",
            "template": {"metadata": template_meta or {}, "spec": pod_spec}}
    spec.update(spec_extra or {})
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "labels": labels or {}, "annotations": annotations or {}},
            "spec": spec}


def pytorchjob(workers: int, gpu: int = 8) -> dict:
    t = {"spec": {"containers": [container(gpu)]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt", "namespace": "ml"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": t},
                                             "Worker": {"replicas": workers, "template": copy.deepcopy(t)}}}}


def raycluster(workers: int, gpu: int = 8, labels=None, autoscaling: bool | None = None, min_replicas: int = 0) -> dict:
    spec = {"headGroupSpec": {"template": {"spec": {"containers": [container(0, "2")]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": min_replicas, "maxReplicas": 100,
                                  "template": {"spec": {"containers": [container(gpu)]}}}]}
    if autoscaling is not None:
        spec["enableInTreeAutoscaling"] = autoscaling
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": "ml", "labels": labels or {}},
            "spec": spec}


def gpu_nodes(n: int, **kw):
    return [node(f"n{i}", gpu=8, **kw) for i in range(n)]


# ---------------------------------------------------------------- item 25


def test_plain_job_beyond_capacity_is_a_warning_not_a_denial():
    """The field case: parallelism over the eligible nodes, default scheduler, no queue."""
    snap = snapshot(gpu_nodes(5))
    d = evaluate(snap, adapt(job(8)))
    assert d.verdict == "Waits"
    assert "ParallelismExceedsCapacity" in d.reasons
    assert "ExceedsClusterCapacity" not in d.reasons
    f = next(f for f in d.findings if f.code == "ParallelismExceedsCapacity")
    assert f.data["pods_possible"] == 5 and f.data["pods_needed"] == 8
    assert "at most 5 of its 8 pods can run at once" in f.message
    assert "PlacementUnproven" not in d.reasons


def test_plain_job_adapter_marks_pods_scheduled_one_by_one():
    g = adapt(job(8))
    assert g.all_or_nothing is False and "one by one" in g.gang_basis


def test_plain_job_that_no_single_pod_can_run_is_still_denied():
    snap = snapshot(gpu_nodes(5))
    d = evaluate(snap, adapt(job(2, gpu=16)))
    assert d.verdict == "NeverFits"
    assert "PodExceedsNodeCapacity" in d.reasons


def test_plain_job_whose_pods_no_node_accepts_is_still_denied():
    snap = snapshot(gpu_nodes(3, taints=["dedicated=infer:NoSchedule"]))
    d = evaluate(snap, adapt(job(2)))
    assert d.verdict == "NeverFits"
    assert d.reasons == ["UntoleratedTaint"]  # only the taint keeps it off every node (#17 item 17)


def test_policy_plain_jobs_as_gangs_restores_the_count_proof():
    snap = snapshot(gpu_nodes(5))
    opts = parse_policy("plainJobsAsGangs: true").engine_options()
    assert opts.plain_jobs_as_gangs is True
    d = evaluate(snap, adapt(job(8)), opts)
    assert d.verdict == "NeverFits" and "ExceedsClusterCapacity" in d.reasons
    assert parse_policy("{}").engine_options().plain_jobs_as_gangs is False


def test_job_placed_whole_by_kueue_tas_keeps_the_count_proof():
    obj = job(8, labels={"kueue.x-k8s.io/queue-name": "q"},
              template_meta={"annotations": {"kueue.x-k8s.io/podset-preferred-topology": "kubernetes.io/hostname"}})
    g = adapt(obj)
    assert g.all_or_nothing is True
    d = evaluate(snapshot(gpu_nodes(5)), g)
    assert d.verdict == "NeverFits" and "ExceedsClusterCapacity" in d.reasons


def test_kueue_queue_without_tas_places_pod_by_pod():
    g = adapt(job(8, labels={"kueue.x-k8s.io/queue-name": "q"}))
    assert g.all_or_nothing is False
    assert evaluate(snapshot(gpu_nodes(5)), g).verdict == "Waits"


def test_job_gang_policy_job_as_gang_is_a_gang():
    g = adapt(job(8, spec_extra={"gangPolicy": {"policy": "JobAsGang"}}))
    assert g.all_or_nothing is True
    assert evaluate(snapshot(gpu_nodes(5)), g).verdict == "NeverFits"


@pytest.mark.parametrize("meta,spec_extra,expect", [
    ({"labels": {"scheduling.x-k8s.io/pod-group": "pg1"}}, None, "scheduler-plugins PodGroup pg1"),
    ({"annotations": {"scheduling.k8s.io/group-name": "vpg"}}, None, "Volcano PodGroup vpg"),
    (None, {"workloadRef": {"name": "wl", "podGroup": "workers"}}, "Workload wl pod group workers"),
    (None, {"schedulingGroup": {"podGroupName": "pg-0"}}, "scheduling group pg-0"),
])
def test_job_joining_a_group_defined_elsewhere_is_checked_pod_by_pod(meta, spec_extra, expect):
    g = adapt(job(8, template_meta=meta, pod_spec_extra=spec_extra))
    assert g.all_or_nothing is False
    f = next(f for f in g.findings if f.code == "GangDefinedElsewhere")
    assert f.data["group"] == expect
    assert evaluate(snapshot(gpu_nodes(5)), g).verdict == "Waits"


def test_volcano_queue_of_a_plain_job_is_not_checked_as_a_whole():
    """Volcano gives a plain Job's pods PodGroups of one: the Job's total is not what its
    queue admits, so exceeding the queue's capability proves nothing."""
    from webhook.engine.model import VolcanoQueue, VolcanoState

    vq = VolcanoQueue("research", capability={GPU: 32})
    snap = snapshot(gpu_nodes(10), volcano=VolcanoState(queues={"research": vq}))
    obj = job(8, labels={"volcano.sh/queue-name": "research"}, pod_spec_extra={"schedulerName": "volcano"})
    d = evaluate(snap, adapt(obj))
    assert d.verdict == "Waits"
    assert "ExceedsMaxQuota" in d.reasons  # still told, as a Waits
    gang_obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v", "namespace": "ml"},
                "spec": {"queue": "research", "minAvailable": 8,
                         "tasks": [{"name": "w", "replicas": 8, "template": {"spec": {"containers": [container(8)]}}}]}}
    assert evaluate(snap, adapt(gang_obj)).verdict == "NeverFits"


def test_pytorchjob_stays_a_gang():
    g = adapt(pytorchjob(7))
    assert g.all_or_nothing is True
    d = evaluate(snapshot(gpu_nodes(5)), g)
    assert d.verdict == "NeverFits" and "ExceedsClusterCapacity" in d.reasons


def test_raycluster_without_batch_scheduler_is_not_a_gang():
    g = adapt(raycluster(8))
    assert g.all_or_nothing is False
    d = evaluate(snapshot(gpu_nodes(5) + [node("cpu", gpu=0)]), g)
    assert d.verdict == "Waits" and "ParallelismExceedsCapacity" in d.reasons


def test_raycluster_with_volcano_is_a_gang_unless_autoscaling_shrinks_it():
    snap = snapshot(gpu_nodes(5) + [node("cpu", gpu=0)])
    g = adapt(raycluster(8, labels={"ray.io/scheduler-name": "volcano"}))
    assert g.all_or_nothing is True and evaluate(snap, g).verdict == "NeverFits"
    # with in-tree autoscaling KubeRay's PodGroup asks for the minReplicas only
    g = adapt(raycluster(8, labels={"ray.io/scheduler-name": "volcano"}, autoscaling=True, min_replicas=1))
    assert g.all_or_nothing is False and evaluate(snap, g).verdict == "Waits"
    g = adapt(raycluster(8, labels={"ray.io/scheduler-name": "volcano"}, autoscaling=True, min_replicas=8))
    assert g.all_or_nothing is True


PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(
    st.lists(st.tuples(st.sampled_from([0, 4, 8]), st.sampled_from([None, "dedicated=x:NoSchedule", "ToBeDeletedByClusterAutoscaler:NoSchedule",
                                        "karpenter.sh/disrupted:NoExecute", f"{GPU}=present:NoSchedule", f"{GPU}=present:NoExecute"]),
                       st.booleans()), min_size=0, max_size=6),
    st.integers(1, 40), st.sampled_from([1, 2, 4, 8, 16]), st.booleans(),
)
def test_non_gang_neverfits_iff_no_node_could_ever_host_one_pod(spec, count, per_pod, tolerate):
    """Brute force: a pod scheduled on its own can run iff some node, repaired and empty,
    accepts it (taints, allocatable). The engine's NeverFits must say exactly that. Taints:
    dedicated is permanent unless tolerated; cluster-autoscaler's and Karpenter's repair
    themselves; nvidia.com/gpu NoSchedule is tolerated by admission (every pod here asks for a
    GPU), NoExecute is not."""
    nodes = [node(f"n{i}", gpu=g, taints=[t] if t else None, unschedulable=cordon) for i, (g, t, cordon) in enumerate(spec)]
    tols = [toleration("dedicated")] if tolerate else []
    ps = pod_set("main", count, gpu=per_pod, cpu=1, tolerations=tols)
    g = gang(ps, kind="Job", all_or_nothing=False)
    d = evaluate(snapshot(nodes), g)

    def could_host(n) -> bool:
        for t in n.taints:
            if t.effect in ("NoSchedule", "NoExecute") and t.key == "dedicated" and not tolerate:
                return False
            if t.key == GPU and t.effect == "NoExecute":
                return False
        return n.allocatable.get(GPU, 0) >= per_pod
    if not nodes:
        assert d.verdict == "Waits"  # NoNodes: nothing checked
    else:
        assert (d.verdict == "NeverFits") == (not any(could_host(n) for n in nodes))


# ---------------------------------------------------------------- item 26


def gke_nodes(n: int, effect: str = "NoSchedule"):
    return gpu_nodes(n, taints=[f"{GPU}=present:{effect}"])


def test_gke_gpu_taint_is_tolerated_by_admission():
    """The field case: a 4 × 8-GPU Indexed Job (here a gang) on four free GKE GPU nodes."""
    snap = snapshot(gke_nodes(4))
    g = adapt(job(4, spec_extra={"gangPolicy": {"policy": "JobAsGang"}}))
    d = evaluate(snap, g)
    assert d.verdict == "Fits", d.message
    assert d.nodes["fit_now"] == 4


def test_extended_resource_toleration_can_be_switched_off():
    snap = snapshot(gke_nodes(4))
    opts = parse_policy("extendedResourceToleration: false").engine_options()
    d = evaluate(snap, adapt(job(4)), opts)
    assert d.verdict == "NeverFits"
    assert d.nodes["reasons"] == {"node(s) had untolerated taint(s)": 4}


def test_extended_resource_toleration_adds_no_schedule_only():
    """Upstream adds effect NoSchedule; a NoExecute taint of the same key still repels the pod."""
    d = evaluate(snapshot(gke_nodes(4, "NoExecute")), adapt(job(4)))
    assert d.verdict == "NeverFits"


def test_extended_resource_toleration_needs_the_request():
    cpu_pod = adapt(job(1, gpu=0))
    assert evaluate(snapshot(gke_nodes(2)), cpu_pod).verdict == "NeverFits"


def test_admission_tolerations_mirror_upstream_names():
    assert is_extended_resource("nvidia.com/gpu") and is_extended_resource("example.com/fpga")
    for native in ("cpu", "memory", "hugepages-2Mi", "kubernetes.io/foo", "requests.nvidia.com/gpu", "pods"):
        assert not is_extended_resource(native)
    ps = pod_set("p", 1, gpu=1, cpu=1)
    (tol,) = admission_tolerations(ps)
    assert (tol.key, tol.operator, tol.effect) == (GPU, "Exists", "NoSchedule")
    assert tol.tolerates(Taint(GPU, "present", "NoSchedule")) and not tol.tolerates(Taint(GPU, "present", "NoExecute"))


def test_runtime_class_may_lift_any_taint():
    snap = snapshot(gpu_nodes(4, taints=["dedicated=infer:NoSchedule"]))
    assert evaluate(snap, adapt(job(4))).verdict == "NeverFits"
    d = evaluate(snap, adapt(job(4, pod_spec_extra={"runtimeClassName": "nvidia"})))
    assert d.verdict == "Waits"


def test_pod_toleration_restriction_policy_makes_taints_no_proof():
    snap = snapshot(gpu_nodes(4, taints=["dedicated=infer:NoSchedule"]))
    opts = parse_policy("podTolerationRestriction: true").engine_options()
    assert evaluate(snap, adapt(job(4)), opts).verdict == "Waits"


# ---------------------------------------------------------------- item 27

SYSTEM_TAINTS = ["ToBeDeletedByClusterAutoscaler:NoSchedule", "karpenter.sh/disrupted:NoSchedule",
                 "node.kubernetes.io/memory-pressure:NoSchedule", "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule"]


def test_system_taints_are_repairable_by_default():
    """The field case: four free GPU nodes, each with one taint the system clears by itself."""
    snap = snapshot([node(f"n{i}", gpu=8, taints=[t]) for i, t in enumerate(SYSTEM_TAINTS)])
    g = adapt(pytorchjob(3))
    d = evaluate(snap, g)
    assert d.verdict == "Waits", d.message
    f = next(f for f in d.findings if f.code == "NodesTransientlyTainted")
    assert sorted(f.data["nodes"]) == ["n0", "n1", "n2", "n3"]


@pytest.mark.parametrize("key", ["node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure",
                                 "node.kubernetes.io/network-unavailable", "node.cloudprovider.kubernetes.io/shutdown",
                                 "DeletionCandidateOfClusterAutoscaler", "karpenter.sh/unregistered",
                                 "startup-taint.cluster-autoscaler.kubernetes.io/cni", "node.cilium.io/agent-not-ready"])
def test_default_transient_taints_cover(key):
    assert taint_matches(key, DEFAULT_TRANSIENT)


def test_default_transient_taints_do_not_cover_user_taints():
    for key in ("dedicated", GPU, "example.com/maintenance", "nvidia.com/gpu.product"):
        assert not taint_matches(key, DEFAULT_TRANSIENT)
    assert all(DEFAULT_TRANSIENT_TAINTS[k] for k in DEFAULT_TRANSIENT_TAINTS)  # each has its source


def test_admin_transient_taints_extend_the_defaults_and_take_patterns():
    snap = snapshot([node("a", gpu=8, taints=["example.com/repair=1:NoSchedule"]),
                     node("b", gpu=8, taints=["karpenter.sh/disrupted:NoSchedule"])])
    g = adapt(pytorchjob(1))
    assert evaluate(snap, g).verdict == "NeverFits"  # example.com/repair is permanent by default
    opts = parse_policy("transientTaints: ['example.com/*']").engine_options()
    assert evaluate(snap, g, opts).verdict == "Waits"  # the admin's pattern, and Karpenter's default, both hold


def test_transient_taints_reject_blank_keys():
    with pytest.raises(PolicyError, match="transientTaints"):
        parse_policy("transientTaints: ['  ']")


def test_engine_options_default_keeps_admission_on():
    o = EngineOptions()
    assert o.extended_resource_toleration is True and o.namespace_default_tolerations is False and o.plain_jobs_as_gangs is False
