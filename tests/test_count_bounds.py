"""Counts follow the API's own validation (issue #17 items 2, 8, 11).

Every count an adapter reads is an int32 in its API, ≥ 0 (LeaderWorkerSet's replicas ≤ 1,000,000):
the API server refuses more ("must be less than or equal to 2147483647"), so gangcheck refuses
it too — a per-field AdapterError (CLI exit 2; the webhook admits with one warning naming the
field) instead of a NeverFits for an object Kubernetes would never store. ``TABLE`` gives each
field's bound; ``test_bounds_match_the_crds`` checks it against the upstream CRDs (when
/work/shared/upstream is present).
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import httpx
import pytest
import yaml

from webhook.adapters import AdapterError, adapt
from webhook.cli import main
from webhook.engine.evaluate import evaluate
from webhook.server import create_app
from webhook.sources import StaticSource

try:
    from .builders import node, snapshot
except ImportError:
    from builders import node, snapshot

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = Path("/work/shared/upstream/crds")
INT32_MAX = 2**31 - 1
TOTAL = "kueue.x-k8s.io/pod-group-total-count"

# (example, path in the object, bound, CRD file or None, the field's path in the CRD schema)
TABLE = [
    ("job-8x8", "spec.parallelism", INT32_MAX, None, None),  # k8s.io/api batch/v1 JobSpec: *int32
    ("job-8x8", "spec.completions", INT32_MAX, None, None),
    ("jobset-64-nvl", "spec.replicatedJobs[0].replicas", INT32_MAX, "jobset/jobset.x-k8s.io_jobsets.yaml",
     ".spec.replicatedJobs[].replicas"),
    ("jobset-64-nvl", "spec.replicatedJobs[0].template.spec.parallelism", INT32_MAX, "jobset/jobset.x-k8s.io_jobsets.yaml",
     ".spec.replicatedJobs[].template.spec.parallelism"),
    ("jobset-64-nvl", "spec.replicatedJobs[0].template.spec.completions", INT32_MAX, "jobset/jobset.x-k8s.io_jobsets.yaml",
     ".spec.replicatedJobs[].template.spec.completions"),
    ("pytorchjob-64x8", "spec.pytorchReplicaSpecs.Worker.replicas", INT32_MAX,
     "kubeflow-trainer/kubeflow.org_pytorchjobs.yaml", ".spec.pytorchReplicaSpecs.*.replicas"),
    ("pytorchjob-64x8", "spec.runPolicy.schedulingPolicy.minAvailable", INT32_MAX,
     "kubeflow-trainer/kubeflow.org_pytorchjobs.yaml", ".spec.runPolicy.schedulingPolicy.minAvailable"),
    ("pytorchjob-64x8", "spec.elasticPolicy.minReplicas", INT32_MAX,
     "kubeflow-trainer/kubeflow.org_pytorchjobs.yaml", ".spec.elasticPolicy.minReplicas"),
    ("mpijob", "spec.mpiReplicaSpecs.Worker.replicas", INT32_MAX, "mpi-operator/kubeflow.org_mpijobs.yaml",
     ".spec.mpiReplicaSpecs.*.replicas"),
    ("mpijob", "spec.runPolicy.schedulingPolicy.minAvailable", INT32_MAX, "mpi-operator/kubeflow.org_mpijobs.yaml",
     ".spec.runPolicy.schedulingPolicy.minAvailable"),
    ("volcano-job", "spec.minAvailable", INT32_MAX, "volcano/batch.volcano.sh_jobs.yaml", ".spec.minAvailable"),
    ("volcano-job", "spec.tasks[1].replicas", INT32_MAX, "volcano/batch.volcano.sh_jobs.yaml", ".spec.tasks[].replicas"),
    ("volcano-job", "spec.tasks[1].minAvailable", INT32_MAX, "volcano/batch.volcano.sh_jobs.yaml", ".spec.tasks[].minAvailable"),
    ("podgroup-volcano", "spec.minMember", INT32_MAX, "volcano/scheduling.volcano.sh_podgroups.yaml", ".spec.minMember"),
    ("podgroup-coscheduling", "spec.minMember", INT32_MAX, None, None),  # scheduler-plugins PodGroupSpec.MinMember int32
    ("leaderworkerset", "spec.replicas", 1_000_000, "lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml", ".spec.replicas"),
    ("leaderworkerset", "spec.leaderWorkerTemplate.size", INT32_MAX, "lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
     ".spec.leaderWorkerTemplate.size"),
    ("raycluster", "spec.workerGroupSpecs[0].replicas", INT32_MAX, "kuberay/ray.io_rayclusters.yaml", ".spec.workerGroupSpecs[].replicas"),
    ("raycluster", "spec.workerGroupSpecs[0].minReplicas", INT32_MAX, "kuberay/ray.io_rayclusters.yaml", ".spec.workerGroupSpecs[].minReplicas"),
    ("raycluster", "spec.workerGroupSpecs[0].maxReplicas", INT32_MAX, "kuberay/ray.io_rayclusters.yaml", ".spec.workerGroupSpecs[].maxReplicas"),
    ("raycluster", "spec.workerGroupSpecs[0].numOfHosts", INT32_MAX, "kuberay/ray.io_rayclusters.yaml", ".spec.workerGroupSpecs[].numOfHosts"),
    ("rayjob", "spec.rayClusterSpec.workerGroupSpecs[0].replicas", INT32_MAX, "kuberay/ray.io_rayjobs.yaml",
     ".spec.rayClusterSpec.workerGroupSpecs[].replicas"),
    ("rayjob", "spec.rayClusterSpec.workerGroupSpecs[0].numOfHosts", INT32_MAX, "kuberay/ray.io_rayjobs.yaml",
     ".spec.rayClusterSpec.workerGroupSpecs[].numOfHosts"),
    ("kueue-pod-group", f"metadata.annotations[{TOTAL}]", INT32_MAX, None, None),  # Workload pod-set counts: int32
]
IDS = [f"{e}:{p}" for e, p, *_ in TABLE]


def example(name: str) -> dict:
    return next(iter(yaml.safe_load_all((ROOT / "examples" / f"{name}.yaml").read_text())))


def with_value(name: str, path: str, value) -> dict:
    """The example with the field at ``path`` (``a.b[0].c``, ``…annotations[key]``) set to ``value``."""
    obj = copy.deepcopy(example(name))
    if path.startswith("metadata.annotations["):
        obj["metadata"].setdefault("annotations", {})[path[len("metadata.annotations["):-1]] = str(value)
        return obj
    cur = obj
    parts = path.replace("]", "").replace("[", ".").split(".")
    for i, p in enumerate(parts):
        key = int(p) if p.isdigit() else p
        if i == len(parts) - 1:
            cur[key] = value
        else:
            if isinstance(cur, dict) and key not in cur:
                cur[key] = {}
            cur = cur[key]
    return obj


SNAP = snapshot([node(f"n{i}") for i in range(4)])


@pytest.mark.parametrize("name, path, bound, crd, crd_path", TABLE, ids=IDS)
def test_counts_beyond_the_api_bound_are_bad_input_naming_the_field(name, path, bound, crd, crd_path):
    for value in (bound + 1, 10**12, 10**26, 10**400):
        with pytest.raises(AdapterError) as exc:
            adapt(with_value(name, path, value), source="job.yaml")
        assert exc.value.field == path, str(exc.value)
        assert f"is above the {'int32 maximum' if bound == INT32_MAX else 'maximum'} {bound}" in exc.value.detail
        assert len(str(exc.value)) < 300  # 10^400 is described, not printed
    with pytest.raises(AdapterError) as exc:
        adapt(with_value(name, path, -1))
    assert exc.value.field == path


@pytest.mark.parametrize("name, path, bound, crd, crd_path", TABLE, ids=IDS)
def test_the_bound_itself_is_read_and_evaluated(name, path, bound, crd, crd_path):
    gang = adapt(with_value(name, path, bound))
    if gang is None:  # e.g. a RayJob whose cluster became empty: nothing to check
        return
    d = evaluate(SNAP, gang, now=1_750_000_000.0)  # no OverflowError with the largest counts
    assert d.verdict in ("Fits", "Waits", "NeverFits")


def _crd_field(crd: str, crd_path: str) -> dict:
    doc = yaml.safe_load((UPSTREAM / crd).read_text())
    version = next(v for v in doc["spec"]["versions"] if v.get("storage")) if len(doc["spec"]["versions"]) > 1 else doc["spec"]["versions"][0]
    node_ = version["schema"]["openAPIV3Schema"]
    for part in crd_path.strip(".").split("."):
        for_list = part.endswith("[]")
        part = part.removesuffix("[]")
        node_ = node_["additionalProperties"] if part == "*" else node_["properties"][part]
        if for_list:
            node_ = node_["items"]
    return node_


@pytest.mark.parametrize("name, path, bound, crd, crd_path", [t for t in TABLE if t[3]], ids=[i for i, t in zip(IDS, TABLE) if t[3]])
def test_bounds_match_the_crds(name, path, bound, crd, crd_path):
    if not (UPSTREAM / crd).exists():
        pytest.skip(f"upstream CRD {crd} not present on this machine")
    f = _crd_field(crd, crd_path)
    assert f["type"] == "integer" and f.get("format") == "int32"
    assert f.get("maximum", INT32_MAX) == bound
    assert f.get("minimum", 0) == 0  # ours: ≥ 0 everywhere (LWS size ≥ 1 and total-count ≥ 1 are the operators')


@pytest.mark.parametrize("value", [10**12, 10**26])
def test_cli_exit_2_names_the_field(capsys, tmp_path, value):
    f = tmp_path / "js.yaml"
    f.write_text(yaml.safe_dump(with_value("jobset-64-nvl", "spec.replicatedJobs[0].replicas", value)))
    code = main(["check", str(f), "--cluster", "demo"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"spec.replicatedJobs[0].replicas: {value} is above the int32 maximum 2147483647" in err


def test_webhook_admits_with_a_warning_naming_the_field():
    app = create_app(StaticSource(SNAP, "test"), None, clock=lambda: 1_750_000_000.0)
    obj = with_value("job-8x8", "spec.parallelism", 10**12)
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u", "operation": "CREATE", "namespace": "llm", "object": obj}}

    async def post(path):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gangcheck") as c:
            return await c.post(path, json=review)

    try:
        responses = [asyncio.run(post(path)) for path in ("/validate", "/mutate")]
    finally:
        app.state.executor.shutdown(wait=True)  # no worker thread left behind (later tests fork)
    for r in responses:
        assert r.status_code == 200
        resp = r.json()["response"]
        assert resp["allowed"] is True and "patch" not in resp
        assert len(resp["warnings"]) == 1
        assert "could not read the object: spec.parallelism: 1000000000000 is above" in resp["warnings"][0]
