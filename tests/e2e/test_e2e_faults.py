"""Faults: gangcheck down (the API server admits: failurePolicy Ignore) and the API server restarted
(the cache resumes or re-lists, /readyz shows the gap, verdicts stay correct)."""

from __future__ import annotations

import json
import time

import pytest

from e2e_controlplane import E2E_LABEL, create_nodes, node_obj, wait_for
from e2e_objects import (
    FAMILY, PREFIX, POLICY_CM, SYSTEM_NS, batch_job, cluster_queue, delete_pool, dry_run, flavor, local_queue,
)

POOL = "faults"
NS = "faults-team"
NODES = [f"faults-gpu-{i}" for i in range(2)]
FITS = batch_job(NS, "fits", 2, 8, queue="faults-queue")
NEVER = batch_job(NS, "never", 4, 8, queue="faults-queue")  # 32 GPUs > quota 16


@pytest.fixture(scope="module")
def pool(cluster, gangcheck):
    kube = cluster.kube
    cluster.ensure_namespace(NS)
    create_nodes(kube, [node_obj(n, POOL, gpus=8, labels={FAMILY: "hopper"}) for n in NODES])
    kube.apply([flavor("faults-h100", {E2E_LABEL: POOL}), cluster_queue("faults-cq", "faults-h100", 16),
                local_queue(NS, "faults-queue", "faults-cq")])
    wait_for(lambda: dry_run(kube, FITS).verdict == "Fits", 30, "the pool in gangcheck's cache", 0.2)
    yield kube
    if not gangcheck.proc.alive():
        gangcheck.start()
    kube.delete("configmap", POLICY_CM, "-n", SYSTEM_NS)
    delete_pool(kube, POOL, NS)
    kube.run("delete", "jobs", "--all", "-n", NS, "--ignore-not-found", "--wait=false", check=False)
    kube.delete("clusterqueue", "faults-cq")
    kube.delete("resourceflavor", "faults-h100")


def test_gangcheck_down_means_admitted_and_nothing_lost(pool, gangcheck):
    before = pool.get("jobs", namespace=NS)["items"]
    assert dry_run(pool, NEVER).verdict == "Denied"
    gangcheck.stop()
    try:
        t0 = time.monotonic()
        r = pool.apply(batch_job(NS, "while-down", 4, 8, queue="faults-queue"))
        took = time.monotonic() - t0
        assert r.code == 0, r
        assert took < 15, f"apply took {took:.1f}s with the webhook down (timeoutSeconds is 5)"
        stored = pool.get("job", "while-down", NS)
        assert not [k for k in (stored["metadata"].get("annotations") or {}) if k.startswith(PREFIX)]
    finally:
        gangcheck.start()
    # nothing lost: everything that existed is still there, and the job admitted while down stays
    names = {j["metadata"]["name"] for j in pool.get("jobs", namespace=NS)["items"]}
    assert {j["metadata"]["name"] for j in before} | {"while-down"} <= names
    wait_for(lambda: dry_run(pool, NEVER).verdict == "Denied", 30, "gangcheck back: denial again", 0.2)
    assert dry_run(pool, FITS).verdict == "Fits"


@pytest.mark.local_only
def test_apiserver_restart(cluster, pool, gangcheck):
    if cluster.external:
        pytest.skip("restarting the API server needs the local control plane")
    plane = cluster.control_plane
    # a short staleness limit, so the gap becomes visible in /readyz and in admission
    reloads = lambda: (gangcheck.readyz()[1].get("policy") or {}).get("reloads", 0)  # noqa: E731
    r0 = reloads()
    pool.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY_CM, "namespace": SYSTEM_NS},
                "data": {"policy.yaml": "staleAfterSeconds: 3\n"}})
    wait_for(lambda: reloads() > r0 and gangcheck.readyz()[1].get("stale") is False, 20,
             "policy staleAfterSeconds: 3 applied", 0.2)
    before = gangcheck.readyz()[1]["source"]["informers"]

    seen: dict = {}

    def while_down():
        def gap():
            code, d = gangcheck.readyz()
            seen.update(code=code, detail=d)
            return d.get("stale") is True and d.get("age_seconds", 0) > 3
        wait_for(gap, 30, "gangcheck /readyz to report stale data while the API server is down", 0.2)

    plane.restart_apiserver(during=while_down)
    d = seen["detail"]
    assert d["age_seconds"] > 3 and d["stale"] is True, d
    assert not all(i.get("watch_open") for i in d["source"]["informers"].values()), d

    # back: watches re-open (or re-list), the age drops, /readyz is no longer stale
    def caught_up():
        code, d = gangcheck.readyz()
        return code == 200 and d.get("stale") is False and d.get("age_seconds", 99) < 3
    wait_for(caught_up, 60, "gangcheck to catch up after the API server restart", 0.2)
    after = gangcheck.readyz()[1]["source"]["informers"]
    resumed = sum((after[k]["watch_restarts"] + after[k]["relists"] + after[k]["lists"]) -
                  (before[k]["watch_restarts"] + before[k]["relists"] + before[k]["lists"]) for k in after)
    assert resumed > 0, (before, after)

    # verdicts stay correct, and follow changes made after the restart
    wait_for(lambda: dry_run(pool, FITS).verdict == "Fits", 30, "Fits after the restart", 0.2)
    assert dry_run(pool, NEVER).verdict == "Denied"
    pool.run("cordon", NODES[0])
    wait_for(lambda: dry_run(pool, FITS).verdict == "Waits", 10, "a cordon after the restart", 0.1)
    pool.run("uncordon", NODES[0])
    wait_for(lambda: dry_run(pool, FITS).verdict == "Fits", 10, "uncordon after the restart", 0.1)
    pool.delete("configmap", POLICY_CM, "-n", SYSTEM_NS)
    json.dumps(d)  # the detail is JSON-ready
