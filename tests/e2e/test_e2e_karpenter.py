"""Karpenter as a referee (issue #16): its real controller (KWOK cloud provider, e2e_karpenter.py)
against the tier's kube-apiserver + kube-scheduler.

``test_karpenter_provisions_a_node``: one pending pod → Karpenter creates a NodeClaim and the
provider a Node of the chosen instance type (the infrastructure works).

``test_karpenter_differential``: see its docstring.
"""

from __future__ import annotations

import pytest

import e2e_karpenter as ek
from e2e_controlplane import E2E_LABEL, pod_obj, wait_for

NS = "karp-diff"
POOL = "karp"  # E2E_LABEL value of the plain (non-Karpenter) nodes the configurations create


@pytest.fixture(scope="module")
def karpenter(cluster, request):
    why = ek.missing()
    if why:
        from conftest import _unavailable
        _unavailable(request.config, f"Karpenter referee: {why}")
    cluster.ensure_namespace(NS)
    cluster.start_scheduler()
    k = ek.Karpenter(cluster.kube, cluster.dir)
    k.install()
    ek.clear(cluster.kube, NS, f"{E2E_LABEL}={POOL}")
    k.start()
    try:
        yield k
    finally:
        try:
            ek.clear(cluster.kube, NS, f"{E2E_LABEL}={POOL}")
        finally:
            k.stop()


def pod_state(kube, name: str) -> str | None:
    """"bound", "unschedulable" (kube-scheduler said so), or None (not decided yet)."""
    pod = kube.get("pod", name, NS)
    if pod["spec"].get("nodeName"):
        return "bound"
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return "unschedulable"
    return None


def test_karpenter_provisions_a_node(karpenter):
    kube = karpenter.kube
    kube.apply(ek.nodepool("smoke", requirements=[{"key": ek.INSTANCE_TYPE, "operator": "In", "values": ["c-4x"]}]))
    wait_for(lambda: ek.nodepools_ready(kube, ["smoke"]), 30, "NodePool smoke Ready")
    kube.apply(pod_obj("smoke-0", NS, cpu="2", memory="1Gi"))
    wait_for(lambda: pod_state(kube, "smoke-0") == "unschedulable", 30, "kube-scheduler to mark smoke-0 Unschedulable")
    claims = karpenter.settle(NS, ["smoke-0"])
    assert len(claims) == 1, claims
    nc = claims[0]
    assert nc["metadata"]["labels"][ek.NODEPOOL_LABEL] == "smoke"
    node = wait_for(lambda: (kube.get("nodes", selector=f"{ek.NODEPOOL_LABEL}=smoke") or {}).get("items"), 30,
                    "the KWOK provider to create the Node")
    assert len(node) == 1
    labels = node[0]["metadata"]["labels"]
    assert labels[ek.INSTANCE_TYPE] == "c-4x"
    assert node[0]["status"]["allocatable"]["cpu"] == "3900m"
    ek.clear(kube, NS, f"{E2E_LABEL}={POOL}")
