"""Workload adapters: Kubernetes objects (inline fixtures) → GangRequest, with real values."""

from __future__ import annotations

import copy

import pytest
import yaml

from webhook.adapters import ADAPTERS, AdapterError, adapt, is_supported
from webhook.engine.model import GangRequest

GI = 2**30
MI = 2**20


# ------------------------------------------------------------------ small builders


def tmpl(gpu: int = 0, cpu: str | None = None, memory: str | None = None, **spec) -> dict:
    """A pod template with one container; gpu as a limit only (how users write it)."""
    res: dict = {}
    if cpu or memory:
        res["requests"] = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if gpu:
        res["limits"] = {"nvidia.com/gpu": gpu}
    return {"spec": {"containers": [{"name": "c", "image": "img", "resources": res}], **spec}}


def meta(name="train", ns="llm", **extra) -> dict:
    return {"name": name, "namespace": ns, **extra}


def pytorchjob(master=1, workers=63, gpu=8, **spec) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": meta(labels={"kueue.x-k8s.io/queue-name": "team-a"}),
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": master, "template": tmpl(gpu, "8", "64Gi")},
                "Worker": {"replicas": workers, "template": tmpl(gpu, "8", "64Gi")},
            },
            **spec,
        },
    }


def vcjob(min_available, *tasks, **spec) -> dict:
    """tasks: (name, replicas, minAvailable|None, gpu)."""
    out = []
    for name, replicas, tmin, gpu in tasks:
        t = {"name": name, "replicas": replicas, "template": tmpl(gpu)}
        if tmin is not None:
            t["minAvailable"] = tmin
        out.append(t)
    s = {"tasks": out, **spec}
    if min_available is not None:
        s["minAvailable"] = min_available
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta("vc", "ml"), "spec": s}


def shape(g: GangRequest) -> list[tuple[str, int, int]]:
    """(pod set, count, replicas) per pod set."""
    return [(ps.name, ps.count, ps.total_replicas()) for ps in g.pod_sets]


def codes(g: GangRequest) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in g.findings]


# ------------------------------------------------------------------ Kubeflow


def test_pytorchjob_master_and_63_workers_is_64_pods_512_gpus():
    g = adapt(pytorchjob(), source="job.yaml")
    assert (g.kind, g.namespace, g.name, g.api_version) == ("PyTorchJob", "llm", "train", "kubeflow.org/v1")
    assert g.pods == 64
    assert g.total_requests()["nvidia.com/gpu"] == 512
    assert shape(g) == [("Master", 1, 1), ("Worker", 63, 63)]
    assert dict(g.pod_sets[1].requests) == {"cpu": 8000, "memory": 64 * GI, "nvidia.com/gpu": 8}
    assert g.queue_name == "team-a"
    assert g.findings == ()


@pytest.mark.parametrize(
    "extra, worker_count, total, code",
    [
        ({"runPolicy": {"schedulingPolicy": {"minAvailable": 33}}}, 32, 33, "GangMinimumBelowReplicas"),
        ({"elasticPolicy": {"minReplicas": 15, "maxReplicas": 63}}, 15, 16, "GangMinimumBelowReplicas"),
        # schedulingPolicy wins over the elastic minimum
        ({"elasticPolicy": {"minReplicas": 15}, "runPolicy": {"schedulingPolicy": {"minAvailable": 9}}}, 8, 9, "GangMinimumBelowReplicas"),
        # a minimum of 0 cannot take the master away; workers never go below 0
        ({"runPolicy": {"schedulingPolicy": {"minAvailable": 0}}}, 0, 1, "GangMinimumBelowReplicas"),
        ({"runPolicy": {"schedulingPolicy": {"minAvailable": 100}}}, 63, 64, "MinAvailableAboveReplicas"),
    ],
)
def test_pytorchjob_gang_minimum_precedence(extra, worker_count, total, code):
    g = adapt(pytorchjob(**extra))
    assert shape(g) == [("Master", 1, 1), ("Worker", worker_count, 63)]
    assert g.pods == total
    assert codes(g) == [(code, "Info")]


def test_pytorchjob_scheduling_policy_queue_and_priority():
    g = adapt(pytorchjob(runPolicy={"schedulingPolicy": {"queue": "vq", "priorityClass": "high"}}))
    assert (g.volcano_queue, g.priority_class) == ("vq", "high")


def test_mpijob_launcher_without_gpu_and_default_worker_replicas():
    obj = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "mpi"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"template": tmpl(0, "1", "1Gi")},
                "Worker": {"replicas": 4, "template": tmpl(8, "32", "256Gi")},
            }
        },
    }
    g = adapt(obj)
    assert g.namespace == "default"
    assert shape(g) == [("Launcher", 1, 1), ("Worker", 4, 4)]
    assert "nvidia.com/gpu" not in g.pod_sets[0].requests
    assert g.total_requests()["nvidia.com/gpu"] == 32
    # v2beta1 Worker replicas default to 0 (mpi-operator defaulting); v1 defaults every role to 1
    del obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert shape(adapt(obj)) == [("Launcher", 1, 1), ("Worker", 0, 0)]
    obj["apiVersion"] = "kubeflow.org/v1"
    assert shape(adapt(obj)) == [("Launcher", 1, 1), ("Worker", 1, 1)]


# ------------------------------------------------------------------ batch/v1 Job and JobSet


def job(parallelism=None, completions=None, annotations=None, gpu=1) -> dict:
    spec: dict = {"template": tmpl(gpu, "4", "16Gi", priorityClassName="train-high")}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "sample-", "labels": {"kueue.x-k8s.io/queue-name": "q"}, "annotations": annotations or {}},
        "spec": spec,
    }


@pytest.mark.parametrize(
    "parallelism, completions, expected",
    [(None, None, 1), (8, None, 8), (8, 3, 3), (4, 10, 4), (0, None, 0)],
)
def test_job_parallelism_capped_by_completions(parallelism, completions, expected):
    g = adapt(job(parallelism, completions))
    assert shape(g) == [("main", expected, expected)]
    assert g.name == "sample-<generated>"
    assert g.priority_class == "train-high"


def test_job_kueue_partial_admission():
    g = adapt(job(20, 20, {"kueue.x-k8s.io/job-min-parallelism": "5"}))
    assert shape(g) == [("main", 5, 20)]
    assert codes(g) == [("PartialAdmission", "Info")]


def test_kueue_priority_label_wins_over_template_priority():
    obj = job(2)
    obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "wpc-low"
    assert adapt(obj).priority_class == "wpc-low"


def test_queue_name_from_older_annotation():
    obj = job(2)
    obj["metadata"]["labels"] = {}
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/queue-name": "legacy"}
    assert adapt(obj).queue_name == "legacy"


def test_jobset_replicas_times_parallelism_per_replicated_job():
    obj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta("js", labels={"kueue.x-k8s.io/queue-name": "q"}),
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "template": {"spec": {"template": tmpl(0, "2")}}},
                {"name": "workers", "replicas": 4, "template": {"spec": {"parallelism": 2, "completions": 2, "template": tmpl(8)}}},
            ]
        },
    }
    g = adapt(obj)
    assert shape(g) == [("driver", 1, 1), ("workers", 8, 8)]
    assert g.pods == 9 and g.total_requests()["nvidia.com/gpu"] == 64


def _depends_on_jobset(status: str) -> dict:
    """jobset/depends-on.yaml's shape with 8-GPU pods: an initializer, then a trainer that
    depends on it with ``status``."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta("js"),
        "spec": {"replicatedJobs": [
            {"name": "initializer", "template": {"spec": {"template": tmpl(8)}}},
            {"name": "trainer", "dependsOn": [{"name": "initializer", "status": status}],
             "template": {"spec": {"template": tmpl(8)}}},
        ]},
    }


def test_jobset_depends_on_complete_never_runs_all_pods_at_once():
    """The JobSet controller creates a replicatedJob's Jobs only once those it depends on are
    Complete (jobset pkg/controllers/depends_on.go dependencyReachedStatus): the initializer's
    pods are gone before the trainer's exist. Found by the controllers referee
    (tests/e2e/test_e2e_controllers.py: jobset/depends-on.yaml got 1 of 6 pods). Checked as one
    whole gang, 2 × 8 GPUs on one 8-GPU node was a false NeverFits."""
    from builders import node, snapshot
    from webhook.engine.decision import NEVER_FITS
    from webhook.engine.evaluate import evaluate

    g = adapt(_depends_on_jobset("Complete"))
    assert shape(g) == [("initializer", 1, 1), ("trainer", 1, 1)]  # quota (Kueue) still counts both
    assert g.all_or_nothing is False
    assert ("SequentialReplicatedJobs", "Info") in codes(g)
    assert evaluate(snapshot([node("n1", gpu=8)]), g).verdict != NEVER_FITS
    # Ready: the initializer keeps running beside the trainer — one gang, as before
    ready = adapt(_depends_on_jobset("Ready"))
    assert ready.all_or_nothing is True
    assert evaluate(snapshot([node("n1", gpu=8)]), ready).verdict == NEVER_FITS


# ------------------------------------------------------------------ Volcano


@pytest.mark.parametrize(
    "obj, expected, findings",
    [
        # no minimums anywhere: job minAvailable defaults to Σ replicas
        (vcjob(None, ("master", 1, None, 0), ("worker", 2, None, 1)), [("master", 1, 1), ("worker", 2, 2)], []),
        # Volcano's vcjob-basic: minAvailable 3 over one task of 6 → a gang of 3
        (vcjob(3, ("nginx", 6, None, 1)), [("nginx", 3, 6)], []),
        # C25: job 3 < Σ task minimums 4 → each task keeps its minimum, Info finding
        (vcjob(3, ("t1", 6, 2, 1), ("t2", 2, 2, 1)), [("t1", 2, 6), ("t2", 2, 2)], [("MinAvailableBelowTasks", "Info")]),
        # job 5 > Σ task minimums 4 → the extra pod comes from the first task with room
        (vcjob(5, ("t1", 6, 2, 1), ("t2", 2, 2, 1)), [("t1", 3, 6), ("t2", 2, 2)], []),
        (vcjob(4, ("t1", 1, 1, 1), ("t2", 6, 1, 1)), [("t1", 1, 1), ("t2", 3, 6)], []),
        # job minAvailable above Σ replicas: the PodGroup can never be satisfied
        (vcjob(5, ("a", 2, None, 0), ("b", 2, None, 0)), [("a", 2, 2), ("b", 2, 2)], [("InvalidGang", "NeverFits")]),
        (vcjob(None, ("a", 2, 3, 0)), [("a", 2, 2)], [("InvalidGang", "NeverFits"), ("InvalidGang", "NeverFits")]),
    ],
)
def test_volcano_job_counts_and_findings(obj, expected, findings):
    g = adapt(obj)
    assert shape(g) == expected
    assert codes(g) == findings
    assert g.volcano_queue == "default"


def test_volcano_partition_policy_defaulted_minimum_c24():
    obj = vcjob(None, ("worker", 12, None, 1), queue="research")
    obj["spec"]["tasks"][0]["partitionPolicy"] = {"totalPartitions": 4, "partitionSize": 3, "minPartitions": 2}
    g = adapt(obj)
    assert shape(g) == [("worker", 12, 12)]  # as configured: Volcano defaulted minAvailable to 12
    assert g.volcano_queue == "research"
    (f,) = g.findings
    assert (f.code, f.severity, f.data["implied"], f.data["minAvailable"]) == ("MinAvailableDefaulted", "Info", 6, 12)
    assert "partition policy implies 6" in f.message


def test_volcano_podgroup_spreads_min_resources():
    obj = yaml.safe_load(
        """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: pg, namespace: ml}
        spec:
          minMember: 3
          queue: gpu
          minResources: {cpu: "10", memory: 3Gi, nvidia.com/gpu: "8"}
        """
    )
    g = adapt(obj)
    assert shape(g) == [("members", 3, 3)]
    assert dict(g.pod_sets[0].requests) == {"cpu": 3334, "memory": GI, "nvidia.com/gpu": 3}
    assert g.volcano_queue == "gpu"


def test_coscheduling_podgroup():
    obj = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"minMember": 4, "minResources": {"nvidia.com/gpu": 32}},
    }
    g = adapt(obj)
    assert shape(g) == [("members", 4, 4)]
    assert g.total_requests() == {"nvidia.com/gpu": 32}
    assert g.volcano_queue is None


# ------------------------------------------------------------------ LWS, Ray, Kueue pods


def test_lws_groups_of_leader_and_workers():
    obj = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta("vllm"),
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "leaderTemplate": tmpl(0, "4"), "workerTemplate": tmpl(8, "100")}},
    }
    g = adapt(obj)
    # The gang is one group (1 leader + 3 workers); the LWS creates 2 such groups.
    assert shape(g) == [("leader", 1, 2), ("worker", 3, 6)]
    assert g.groups == 2
    assert g.total_requests()["nvidia.com/gpu"] == 24
    assert codes(g) == [("LeaderWorkerGroups", "Info")]
    assert g.findings[0].data == {"groups": 2, "size": 4}
    # without a leaderTemplate the leader uses the worker template; size and replicas default to 1
    del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    del obj["spec"]["replicas"], obj["spec"]["leaderWorkerTemplate"]["size"]
    g = adapt(obj)
    assert shape(g) == [("leader", 1, 1)]
    assert g.groups == 1
    assert g.pod_sets[0].requests["nvidia.com/gpu"] == 8


def raycluster_spec(**worker) -> dict:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": tmpl(0, "2", "8Gi")},
        "workerGroupSpecs": [{"groupName": "gpu", "template": tmpl(1, "4", "16Gi"), **worker}],
    }


@pytest.mark.parametrize(
    "worker, expected",
    [
        ({"replicas": 3, "minReplicas": 1, "maxReplicas": 5}, 3),
        ({"minReplicas": 2}, 2),  # replicas absent → minReplicas
        ({"replicas": 1, "minReplicas": 2}, 2),  # clamped up to minReplicas
        ({"replicas": 9, "maxReplicas": 4}, 4),  # clamped down to maxReplicas
        ({"replicas": 2, "numOfHosts": 4}, 8),  # multi-host groups
        ({"replicas": 2, "suspend": True}, 0),
        ({}, 0),  # CRD defaults: replicas 0, minReplicas 0
    ],
)
def test_raycluster_worker_counts(worker, expected):
    obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("rc"), "spec": raycluster_spec(**worker)}
    g = adapt(obj)
    assert shape(g) == [("head", 1, 1), ("gpu", expected, expected)]


def test_raycluster_autoscaler_container_added_to_head():
    obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("rc"), "spec": {**raycluster_spec(replicas=1), "enableInTreeAutoscaling": True}}
    assert dict(adapt(obj).pod_sets[0].requests) == {"cpu": 2500, "memory": 8 * GI + 512 * MI}


def test_rayjob_submitter_modes_and_cluster_selector():
    obj = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta("rj"), "spec": {"entrypoint": "python x.py", "rayClusterSpec": raycluster_spec(replicas=2)}}
    g = adapt(obj)
    assert shape(g) == [("head", 1, 1), ("gpu", 2, 2), ("submitter", 1, 1)]
    assert dict(g.pod_sets[2].requests) == {"cpu": 500, "memory": 200 * MI}
    custom = copy.deepcopy(obj)
    custom["spec"]["submitterPodTemplate"] = tmpl(0, "1", "1Gi")
    assert dict(adapt(custom).pod_sets[2].requests) == {"cpu": 1000, "memory": GI}
    http = copy.deepcopy(obj)
    http["spec"]["submissionMode"] = "HTTPMode"
    assert shape(adapt(http)) == [("head", 1, 1), ("gpu", 2, 2)]
    selector = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta("rj"), "spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}
    assert adapt(selector) is None


def test_kueue_pod_group_and_plain_pod():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "worker-",
            "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/pod-group-name": "grp"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "4"},
        },
        "spec": tmpl(8, "16")["spec"],
    }
    g = adapt(pod)
    assert (g.name, g.pods, g.queue_name) == ("grp", 4, "q")
    assert g.total_requests()["nvidia.com/gpu"] == 32
    assert codes(g) == [("PodGroupShapeAssumed", "Info")]
    plain = copy.deepcopy(pod)
    plain["metadata"]["labels"] = {"app": "x"}
    assert adapt(plain) is None


# ------------------------------------------------------------------ registry and errors


def test_registry_and_is_supported():
    assert ("batch", "Job") in ADAPTERS and ("batch.volcano.sh", "Job") in ADAPTERS and ("", "Pod") in ADAPTERS
    assert is_supported({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"})
    assert not is_supported({"apiVersion": "kubeflow.org/v2beta1", "kind": "PyTorchJob"})
    assert not is_supported({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"})
    assert not is_supported({"apiVersion": "v1", "kind": "ConfigMap"})
    assert not is_supported("not an object")


def _bad(mutate):
    obj = pytorchjob()
    mutate(obj)
    return obj


def _set_worker_replicas(obj):
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "eight"


def _drop_worker_template(obj):
    del obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]


def _drop_containers(obj):
    del obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]


def _bad_quantity(obj):
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8 GPUs"


@pytest.mark.parametrize(
    "obj, expected",
    [
        (_bad(_set_worker_replicas), "job.yaml: PyTorchJob llm/train: spec.pytorchReplicaSpecs.Worker.replicas: expected an integer from 0 to 2147483647 (int32), got 'eight'"),
        (_bad(_drop_worker_template), "PyTorchJob llm/train: spec.pytorchReplicaSpecs.Worker.template: expected a pod template"),
        (_bad(_drop_containers), "PyTorchJob llm/train: spec.pytorchReplicaSpecs.Master.template.spec.containers: expected at least one container"),
        (_bad(_bad_quantity), "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu: expected a quantity such as '8' or '500m', got '8 GPUs'"),
        ({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf"}}, "TFJob default/tf: apiVersion/kind: unsupported kind kubeflow.org/v1/TFJob; supported: "),
        ({"apiVersion": "kubeflow.org/v2beta1", "kind": "PyTorchJob", "metadata": {"name": "p"}}, "apiVersion: unsupported version 'kubeflow.org/v2beta1' of PyTorchJob; expected kubeflow.org/v1"),
        (vcjob(None, ("a", 1, None, 0), ("a", 1, None, 0)), "Job ml/vc: spec.tasks[1].name: duplicated task name 'a'"),
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 2}}, "Job default/j: spec.template: expected a pod template"),
        (job(20, None, {"kueue.x-k8s.io/job-min-parallelism": "25"}), "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: expected an integer greater than 0 and less than spec.parallelism (20), got 25"),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r"}, "spec": {}}, "RayJob default/r: spec.rayClusterSpec: expected spec.rayClusterSpec or spec.clusterSelector"),
        (
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/pod-group-name": "g"}}, "spec": tmpl()["spec"]},
            "Pod default/p: metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: expected the pod group's total pod count",
        ),
        (
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/pod-group-name": "g"}, "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}},
            "Pod default/p: spec.containers[0].resources.requests.cpu: expected a quantity",
        ),
        (
            {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"}, "spec": {"leaderWorkerTemplate": {"size": 0, "workerTemplate": tmpl()}}},
            "spec.leaderWorkerTemplate.size: expected an integer ≥ 1, got 0",
        ),
        ("kind: Job", "expected a Kubernetes object (a mapping), got str"),
    ],
)
def test_bad_input_names_object_and_field(obj, expected):
    with pytest.raises(AdapterError) as exc:
        adapt(obj, source="job.yaml")
    assert expected in str(exc.value)
    assert str(exc.value).startswith("job.yaml: ")


def test_unknown_kind_lists_supported_kinds():
    with pytest.raises(AdapterError) as exc:
        adapt({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}})
    msg = str(exc.value)
    for kind in ("batch/v1 Job", "kubeflow.org/v1 PyTorchJob", "kubeflow.org/v2beta1 MPIJob", "ray.io/v1 RayJob", "v1 Pod"):
        assert kind in msg


def test_adapters_do_not_mutate_input():
    obj = pytorchjob(elasticPolicy={"minReplicas": 3})
    before = copy.deepcopy(obj)
    adapt(obj)
    ray_obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("rc"), "spec": {**raycluster_spec(), "enableInTreeAutoscaling": True}}
    ray_before = copy.deepcopy(ray_obj)
    adapt(ray_obj)
    assert obj == before and ray_obj == ray_before
