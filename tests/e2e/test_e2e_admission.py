"""kubectl apply through a real API server with gangcheck registered as its admission webhook.

The cluster: a scaled-down seed (7 H100 nodes of which 3 half used and 1 cordoned, a CPU node;
Kueue flavor h100, ClusterQueue with 32 GPUs in no cohort, LocalQueue llm/llm-queue).
"""

from __future__ import annotations

import pytest

from e2e_controlplane import E2E_LABEL, wait_for
from e2e_objects import (
    FAMILY, PREFIX, batch_job, cluster_queue, create_seed, delete_pool, dry_run, flavor, local_queue,
    pytorch_job, rayjob_on_existing_cluster, renamed,
)

POOL = "seed"
NS = "llm"
BUSY = "seed-busy"
OTHER = "research"
SEL = {E2E_LABEL: POOL}


@pytest.fixture(scope="module")
def seed(cluster, gangcheck):
    kube = cluster.kube
    cluster.ensure_namespace(NS, BUSY, OTHER)
    create_seed(kube, POOL, "seed", BUSY)
    kube.apply([flavor("seed-h100", {FAMILY: "hopper", E2E_LABEL: POOL}),
                cluster_queue("seed-team-llm", "seed-h100", 32), local_queue(NS, "llm-queue", "seed-team-llm")])
    # the cache has seen the whole seed (nodes, their status, the bound pods) once the waiting
    # gang's dry run finds exactly the 3 free nodes, and the Kueue objects once it no longer says
    # "no Kueue objects" (each kind has its own informer: nodes can be seen before the queues)
    def seen() -> bool:
        v = dry_run(kube, WAITING)
        return (v.annotations.get(PREFIX + "nodes-fit-now") == "3 nodes can take a pod now; 4 pods needed"
                and not any("no Kueue objects" in w or "not found" in w for w in v.warnings))
    wait_for(seen, 30, "gangcheck to see the seed cluster and its Kueue queues", 0.2)
    yield kube
    delete_pool(kube, POOL, BUSY)
    kube.delete("clusterqueue", "seed-team-llm")
    kube.delete("resourceflavor", "seed-h100")


# 8 × 8 GPUs through a queue whose maximum is 32 GPUs: can never be admitted.
OVER_QUOTA = batch_job(NS, "too-big", 8, 8, queue="llm-queue")
# 1 master + 9 workers × 8 GPUs on a pool of 7 GPU nodes: can never run.
OVER_CAPACITY = pytorch_job(OTHER, "too-wide", 9, 8, node_selector=SEL)
# 4 × 8 GPUs through the queue: quota fits (32), 3 whole nodes free now, 7 once repaired/empty.
WAITING = batch_job(NS, "waits", 4, 8, queue="llm-queue")


def test_impossible_gang_is_denied_by_kubectl_apply(seed):
    r = seed.apply(OVER_QUOTA, check=False)
    assert r.code != 0, r
    assert 'admission webhook "validate.gangcheck.io" denied the request' in r.stderr, r
    assert "Job llm/too-big" in r.stderr and "never" in r.stderr, r  # the engine's message, whatever it leads with
    assert not seed.exists("job", "too-big", NS)

    r = seed.apply(OVER_CAPACITY, check=False)
    assert r.code != 0, r
    assert 'denied the request' in r.stderr and "PyTorchJob research/too-wide" in r.stderr, r
    assert not seed.exists("pytorchjob", "too-wide", OTHER)


def test_waiting_gang_is_created_with_warnings_and_annotations(seed):
    r = seed.apply(WAITING)
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("Warning: ")]
    assert warnings, f"kubectl printed no warnings:\n{r}"
    stored = seed.get("job", "waits", NS)
    ann = stored["metadata"].get("annotations") or {}
    assert ann.get(PREFIX + "verdict") == "Waits", ann
    assert ann.get(PREFIX + "reasons") and ann[PREFIX + "reasons"] != "none", ann
    assert ann.get(PREFIX + "nodes-fit-now") == "3 nodes can take a pod now; 4 pods needed", ann
    for k in ("fragmentation", "expected-wait", "checked-at"):
        assert PREFIX + k in ann, ann
    seed.delete("job", "waits", "-n", NS)


def test_dry_run_server_gives_the_same_verdict_and_stores_nothing(seed):
    v = dry_run(seed, renamed(OVER_QUOTA, "too-big-dry"))
    r = seed.apply(renamed(OVER_QUOTA, "too-big-dry2"), "--dry-run=server", check=False)
    assert v.code != 0 and r.code != 0
    assert "denied the request" in v.stderr and "denied the request" in r.stderr
    # the same denial text as a real apply (minus the object name)
    real = seed.apply(renamed(OVER_QUOTA, "too-big-real"), check=False)
    strip = lambda s: s.split("denied the request:", 1)[1].replace("too-big-real", "X").replace("too-big-dry2", "X").strip()  # noqa: E731
    assert strip(r.stderr) == strip(real.stderr)

    w = dry_run(seed, renamed(WAITING, "waits-dry"))
    assert w.code == 0 and w.verdict == "Waits", w
    assert w.warnings, w
    assert w.annotations[PREFIX + "nodes-fit-now"] == "3 nodes can take a pod now; 4 pods needed"
    r = seed.apply(renamed(WAITING, "waits-dry2"), "--dry-run=server")
    assert "Warning: " in r.stderr
    for name in ("too-big-dry", "too-big-dry2", "too-big-real", "waits-dry", "waits-dry2"):
        assert not seed.exists("job", name, NS), name


def test_kinds_gangcheck_does_not_check_pass_untouched(seed):
    objs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain", "namespace": NS}, "data": {"a": "b"}},
        rayjob_on_existing_cluster(NS, "on-shared-cluster"),  # sent to the webhook, but not a gang
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain-pod", "namespace": NS},
         "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "64"}}}]}},
    ]
    r = seed.apply(objs)
    assert "Warning:" not in r.stderr, r
    for kind, name in (("configmap", "plain"), ("rayjob", "on-shared-cluster"), ("pod", "plain-pod")):
        got = seed.get(kind, name, NS)
        ann = got["metadata"].get("annotations") or {}
        assert not [k for k in ann if k.startswith(PREFIX)], (kind, ann)
    seed.run("delete", "pod", "plain-pod", "-n", NS, "--grace-period=0", "--force", check=False)
