"""Every upstream example manifest of a supported kind adapts (or is a non-gang → None).

Reads /work/shared/upstream/examples (outside the repository: real manifests from Kueue, JobSet,
Kubeflow, MPI operator, Volcano, LWS and KubeRay). A user's clone does not have that directory,
so the module is skipped when it is absent. Nothing from it is copied into the repository.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.adapters import AdapterError, adapt, is_supported

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "upstream" / "examples"

if not EXAMPLES.is_dir():
    pytest.skip(f"upstream examples not present at {EXAMPLES} (only in the project workspace)", allow_module_level=True)

FILES = sorted(EXAMPLES.rglob("*.yaml"))


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _rel(path: Path) -> str:
    return path.relative_to(EXAMPLES).as_posix()


@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_every_supported_document_adapts(path):
    for doc in _docs(path):
        if not is_supported(doc):
            continue
        if path.name.startswith("invalid-"):
            # meant to be denied by Volcano's own webhook: adapt or a clear AdapterError, nothing else
            try:
                adapt(doc, source=_rel(path))
            except AdapterError as err:
                assert _rel(path) in str(err)
            continue
        gang = adapt(doc, source=_rel(path))
        if gang is not None:
            assert gang.pod_sets, _rel(path)
            assert all(ps.count >= 0 and ps.total_replicas() >= ps.count for ps in gang.pod_sets)


def test_supported_and_skipped_counts():
    supported = skipped = 0
    for path in FILES:
        for doc in _docs(path):
            if is_supported(doc):
                supported += 1
            else:
                skipped += 1
    # ClusterQueues, Queues, TrainJobs, ConfigMaps, Services... are skipped, not errors
    assert supported >= 60 and skipped >= 30, (supported, skipped)


def _one(rel: str, kind: str):
    """The first document of ``kind`` in ``rel`` (kueue/pod-group.yaml holds two member Pods)."""
    doc = next(d for d in _docs(EXAMPLES / rel) if d.get("kind") == kind)
    return adapt(doc, source=rel)


def _shape(g):
    return [(ps.name, ps.count, ps.total_replicas()) for ps in g.pod_sets]


@pytest.mark.parametrize(
    "rel, kind, pods, shape, totals",
    [
        ("kueue/pytorchjob-sample.yaml", "PyTorchJob", 2, [("Master", 1, 1), ("Worker", 1, 1)], {"cpu": 2000, "memory": 400 * 2**20}),
        ("volcano/vcjob-mindspore-gpu.yaml", "Job", 3, [("mpimaster", 1, 1), ("mpiworker", 2, 2)], {"nvidia.com/gpu": 2}),
        # one group of the LWS (leader + 1 worker); the LWS creates 2 groups
        ("lws/lws-vllm-gpu.yaml", "LeaderWorkerSet", 2, [("leader", 1, 2), ("worker", 1, 2)], {"nvidia.com/gpu": 16, "cpu": 250_000}),
        ("mpi-operator/tensorflow-benchmarks-gpu.yaml", "MPIJob", 3, [("Launcher", 1, 1), ("Worker", 2, 2)], {"nvidia.com/gpu": 2}),
        ("kuberay/rayjob-sample.yaml", "RayJob", 3, [("head", 1, 1), ("small-group", 1, 1), ("submitter", 1, 1)], {"cpu": 1000 + 200 + 500}),
        ("kuberay/raycluster-tpu-v6e-16-multihost.yaml", "RayCluster", 5, [("head", 1, 1), ("tpu-group", 4, 4)], {"google.com/tpu": 16}),
        ("kueue/job-partial-admission.yaml", "Job", 5, [("main", 5, 20)], {"cpu": 5000}),
        ("kueue/pod-group.yaml", "Pod", 2, [("pods", 2, 2)], {"cpu": 6000}),
        ("volcano/vcjob-basic.yaml", "Job", 3, [("default-nginx", 3, 6)], {}),
        ("volcano/podgroup.yaml", "PodGroup", 1, [("members", 1, 1)], {"cpu": 1000, "memory": 2 * 10**9}),
        ("jobset/tpu-v6e-multislice-jax.yaml", "JobSet", 8, [("slice", 8, 8)], {"google.com/tpu": 32}),
    ],
)
def test_hand_checked_examples(rel, kind, pods, shape, totals):
    g = _one(rel, kind)
    assert g.pods == pods
    assert _shape(g) == shape
    got = g.total_requests()
    for r, v in totals.items():
        assert got.get(r) == v, (r, got)


def test_hand_checked_metadata_and_findings():
    assert _one("kueue/pytorchjob-sample.yaml", "PyTorchJob").queue_name == "user-queue"
    tf = _one("mpi-operator/tensorflow-benchmarks-gpu.yaml", "MPIJob")
    assert "nvidia.com/gpu" not in tf.pod_sets[0].requests  # the launcher has no GPU
    assert _one("kuberay/rayjob-volcano-queue.yaml", "RayJob").volcano_queue == "kuberay-test-queue"
    assert _one("kueue/pod-group.yaml", "Pod").name == "sample-group"
    invalid = _one("volcano/invalid-minavailable-webhook-deny.yaml", "Job")
    assert [(f.code, f.severity) for f in invalid.findings] == [("InvalidGang", "NeverFits")]
    with pytest.raises(AdapterError, match=r"spec.tasks\[1\].name: duplicated task name 'task-1'"):
        _one("volcano/invalid-duplicated-taskname-webhook-deny.yaml", "Job")
