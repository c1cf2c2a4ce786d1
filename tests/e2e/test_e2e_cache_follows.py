"""The live cache follows the cluster: each change is reflected by the next verdicts within seconds.

Pool: 4 free H100 nodes; Kueue ClusterQueue with 32 GPUs; the gang: 4 × 8 GPUs through it (Fits).
Every step polls a server-side dry run (nothing stored) until the verdict changes; no fixed sleeps.
"""

from __future__ import annotations

import json
import time

import pytest

from e2e_controlplane import E2E_LABEL, create_nodes, node_obj, pod_obj, wait_for
from e2e_objects import FAMILY, POLICY_CM, SYSTEM_NS, batch_job, cluster_queue, delete_pool, dry_run, flavor, local_queue

POOL = "cache"
NS = "cache-team"
LIMIT = 10.0  # "within a few seconds"
GANG = batch_job(NS, "gang", 4, 8, queue="cache-queue")
NODES = [f"cache-gpu-{i}" for i in range(4)]


@pytest.fixture(scope="module")
def pool(cluster, gangcheck):
    kube = cluster.kube
    cluster.ensure_namespace(NS)
    create_nodes(kube, [node_obj(n, POOL, gpus=8, labels={FAMILY: "hopper"}) for n in NODES])
    kube.apply([flavor("cache-h100", {E2E_LABEL: POOL}), cluster_queue("cache-cq", "cache-h100", 32),
                local_queue(NS, "cache-queue", "cache-cq")])
    wait_for(lambda: dry_run(kube, GANG).verdict == "Fits", 30, "the pool in gangcheck's cache", 0.2)
    yield kube
    kube.delete("configmap", POLICY_CM, "-n", SYSTEM_NS)
    delete_pool(kube, POOL, NS)
    kube.delete("clusterqueue", "cache-cq")
    kube.delete("resourceflavor", "cache-h100")


def until(kube, pred, what: str):
    """Poll dry runs until ``pred(verdict)``; returns (verdict, seconds it took)."""
    t0 = time.monotonic()
    last = {}

    def check():
        v = dry_run(kube, GANG)
        last["v"] = v
        return v if pred(v) else None
    try:
        v = wait_for(check, LIMIT, what, 0.1)
    except AssertionError:
        v = last.get("v")
        raise AssertionError(f"{what}: not reflected within {LIMIT:g}s; last verdict {v and v.verdict} "
                             f"reasons {v and v.reasons} stderr {v and v.stderr.strip()[:300]}") from None
    return v, time.monotonic() - t0


def test_cordon_and_uncordon(pool):
    pool.run("cordon", NODES[0])
    v, _ = until(pool, lambda v: v.verdict == "Waits" and "NodesCordoned" in v.reasons, "cordon")
    assert v.annotations["gangcheck.io/nodes-fit-now"] == "3 nodes can take a pod now; 4 pods needed"
    pool.run("uncordon", NODES[0])
    until(pool, lambda v: v.verdict == "Fits", "uncordon")


def test_bind_and_delete_pods(pool):
    # an unbound pod, then bound through the pods/binding subresource (what kube-scheduler does)
    pool.apply(pod_obj("holder", NS, gpus=4, cpu="4", memory="16Gi", scheduler="not-running"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "holder", "namespace": NS},
               "target": {"apiVersion": "v1", "kind": "Node", "name": NODES[1]}}
    pool.run("create", "--raw", f"/api/v1/namespaces/{NS}/pods/holder/binding", "-f", "-", stdin=json.dumps(binding))
    v, _ = until(pool, lambda v: v.verdict == "Waits", "a pod bound to a node")
    assert v.annotations["gangcheck.io/nodes-fit-now"] == "3 nodes can take a pod now; 4 pods needed"
    pool.run("delete", "pod", "holder", "-n", NS, "--grace-period=0", "--force")
    until(pool, lambda v: v.verdict == "Fits", "the bound pod deleted")


def test_cluster_queue_quota_change(pool):
    pool.run("patch", "clusterqueue", "cache-cq", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota", "value": "16"}]))
    v, _ = until(pool, lambda v: v.verdict == "Denied", "nominalQuota 32 → 16")
    assert "denied the request" in v.stderr
    pool.run("patch", "clusterqueue", "cache-cq", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota", "value": "32"}]))
    until(pool, lambda v: v.verdict == "Fits", "nominalQuota 16 → 32")


def test_policy_configmap_edit(pool):
    pool.run("patch", "clusterqueue", "cache-cq", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota", "value": "16"}]))
    until(pool, lambda v: v.verdict == "Denied", "nominalQuota 32 → 16")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY_CM, "namespace": SYSTEM_NS},
          "data": {"policy.yaml": "mode: warn\n"}}
    pool.apply(cm)
    v, _ = until(pool, lambda v: v.code == 0 and v.verdict == "NeverFits", "policy mode: warn")
    assert any("would be denied" in w for w in v.warnings), v.stderr
    cm["data"]["policy.yaml"] = "mode: audit\n"
    pool.apply(cm)
    v, _ = until(pool, lambda v: v.code == 0 and not v.warnings, "policy mode: audit")
    cm["data"]["policy.yaml"] = "mode: enforce\n"
    pool.apply(cm)
    until(pool, lambda v: v.verdict == "Denied", "policy mode: enforce")
    pool.run("patch", "clusterqueue", "cache-cq", "--type=json", "-p", json.dumps([
        {"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota", "value": "32"}]))
    until(pool, lambda v: v.verdict == "Fits", "nominalQuota back to 32")
