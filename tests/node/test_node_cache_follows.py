"""Scenario 7 of #12: the deployed webhook's live cache follows the real node.

A probe gang (a JobSet of one pod, in CPU: the node has no GPU, and its capacity is what the
kubelet really reports) sized to fit the node's free CPU now, next to the two gangcheck replicas.
Then: cordon the node → the probe Waits with NodesCordoned (a cordon is repairable, so never a
NeverFits: README "Verdicts"); uncordon → Fits. A real pod (the locally built pause image) run
by the kubelet, requesting CPU → the probe Waits (not enough free now, fits the empty node);
delete it → Fits. Each verdict comes from ``kubectl create --dry-run=server`` through the API
server and the Service, as a user would ask."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_controlplane import wait_for  # noqa: E402
from e2e_objects import dry_run  # noqa: E402

from node_cluster import NODE_NAME  # noqa: E402
from node_objects import ensure_jobset_crd, jobset, millicores, node_cpu_millis  # noqa: E402

REPLICA_CPU = 500  # millicores: manifests/base/deployment.yaml requests.cpu, per replica
BUSY_CPU = 400


def requested_cpu_millis(kube) -> int:
    """Σ CPU requests of the pods bound to the node and not finished, in millicores."""
    total = 0
    for p in kube.get("pods", all_ns=True)["items"]:
        if p["spec"].get("nodeName") != NODE_NAME or p["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for c in p["spec"]["containers"]:
            total += millicores(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
    return total


@pytest.fixture(scope="module")
def probe(deployed, workload_ns):
    kube = deployed.kube
    ensure_jobset_crd(kube, workload_ns)
    used = requested_cpu_millis(kube)
    assert used == 2 * REPLICA_CPU, used  # only gangcheck runs on the node
    free = node_cpu_millis(kube) - used
    assert free > BUSY_CPU + 200, f"the node has too little CPU for this scenario: {free}m free"
    # fits what is free now with 100m to spare; not once BUSY_CPU more is in use
    return kube, jobset(workload_ns, "probe", 1, free - 100)


def verdict_becomes(kube, obj, want: str, what: str, reason: str | None = None):
    def check():
        v = dry_run(kube, obj)
        return v if v.verdict == want and (reason is None or reason in v.reasons) else None
    return wait_for(check, 90, what, 0.5)


def test_the_probe_fits_the_node_now(probe):
    kube, obj = probe
    verdict_becomes(kube, obj, "Fits", "the probe to fit the node's free CPU")


def test_cordon_then_uncordon_the_node(probe):
    kube, obj = probe
    kube.run("cordon", NODE_NAME)
    try:
        v = verdict_becomes(kube, obj, "Waits", "a Waits after the cordon", "NodesCordoned")
        assert v.code == 0 and v.warnings, v
    finally:
        kube.run("uncordon", NODE_NAME)
    verdict_becomes(kube, obj, "Fits", "Fits again after uncordon")


def test_a_real_pod_on_the_node_then_deleted(probe, deployed, workload_ns):
    kube, obj = probe
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy", "namespace": workload_ns},
           "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
               "name": "busy", "image": deployed.node.pause_ref, "imagePullPolicy": "Never",
               "resources": {"requests": {"cpu": f"{BUSY_CPU}m", "memory": "16Mi"}}}]}}
    kube.create(pod)
    try:
        wait_for(lambda: (kube.get("pod", "busy", workload_ns)["status"].get("phase") == "Running"), 120,
                 "the busy pod Running on the node", 0.5)
        assert kube.get("pod", "busy", workload_ns)["spec"]["nodeName"] == NODE_NAME
        v = verdict_becomes(kube, obj, "Waits", "a Waits while the busy pod runs")
        assert v.code == 0 and v.warnings, v
    finally:
        kube.run("delete", "pod", "busy", "-n", workload_ns, "--wait=true", "--timeout=120s", check=False, timeout=150)
    verdict_becomes(kube, obj, "Fits", "Fits again once the busy pod is gone")
