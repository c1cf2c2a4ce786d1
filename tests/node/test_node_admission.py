"""Scenario 2 of #12: the API server calls the deployed webhook through its Service (the webhook
configurations name only ``service: gangcheck-system/gangcheck``; kube-apiserver's default
ClusterIP resolver dials the ClusterIP and kube-proxy's rules take it to a ready pod) —
``kubectl apply`` of an impossible gang is denied with gangcheck's message, a waiting gang is
created with warnings and gangcheck's annotations, and ``--dry-run=server`` gives the same verdicts.

The gangs are JobSets (all-or-nothing; the CRD from tests/e2e/crds) in CPU terms, the only
resources this node has: it has no GPU, and its capacity is the kubelet's real CPU and memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_controlplane import wait_for  # noqa: E402
from e2e_objects import PREFIX, dry_run  # noqa: E402

from node_cluster import SYSTEM_NS  # noqa: E402
from node_objects import ensure_jobset_crd, jobset, node_cpu_millis  # noqa: E402


@pytest.fixture(scope="module")
def gangs(deployed, workload_ns):
    kube = deployed.kube
    ensure_jobset_crd(kube, workload_ns)
    cpu = node_cpu_millis(kube)
    # every pod of the gang fits the empty node alone, but all of them never do at once
    impossible = jobset(workload_ns, "too-wide", 3, cpu // 2 + 100)
    # two pods that fit the empty node together, not next to the two gangcheck replicas now
    waiting = jobset(workload_ns, "waits", 2, (cpu - 200) // 2)
    wait_for(lambda: dry_run(kube, waiting).verdict == "Waits", 90, "gangcheck to see the node and its own pods", 1)
    yield kube, impossible, waiting
    kube.delete("jobsets", "--all", "-n", workload_ns)


def test_an_impossible_gang_is_denied_with_gangchecks_message(gangs):
    kube, impossible, _ = gangs
    r = kube.apply(impossible, check=False)
    assert r.code != 0, r
    assert 'admission webhook "validate.gangcheck.io" denied the request' in r.stderr, r
    assert "JobSet gangs/too-wide" in r.stderr and "never" in r.stderr, r
    assert not kube.exists("jobset", "too-wide", "gangs")
    # the same verdict without storing anything
    d = dry_run(kube, impossible)
    assert d.verdict == "Denied" and "JobSet gangs/too-wide" in d.stderr, d


def test_a_waiting_gang_is_created_with_warnings_and_annotations(gangs):
    kube, _, waiting = gangs
    d = dry_run(kube, waiting)
    assert d.code == 0 and d.verdict == "Waits" and d.warnings, d
    r = kube.apply(waiting)
    assert any(line.startswith("Warning: ") for line in r.stderr.splitlines()), r
    stored = kube.get("jobset", "waits", "gangs")
    ann = {k: v for k, v in stored["metadata"]["annotations"].items() if k.startswith(PREFIX)}
    assert ann[PREFIX + "verdict"] == "Waits"
    assert ann[PREFIX + "reasons"] == d.annotations[PREFIX + "reasons"]
    assert [line[len("Warning: "):] for line in r.stderr.splitlines() if line.startswith("Warning: ")] == d.warnings


def test_the_api_server_called_the_webhook_through_its_service(gangs, deployed):
    kube, _, _ = gangs
    vwc = kube.get("validatingwebhookconfiguration", "gangcheck")
    for w in vwc["webhooks"]:
        assert "url" not in w["clientConfig"] and w["clientConfig"]["service"]["name"] == "gangcheck"
    svc = kube.get("service", "gangcheck", SYSTEM_NS)
    eps = kube.get("endpointslices", namespace=SYSTEM_NS, selector="kubernetes.io/service-name=gangcheck")["items"]
    ips = {a for e in eps for ep in e["endpoints"] if ep["conditions"].get("ready") for a in ep["addresses"]}
    assert ips == {p["status"]["podIP"] for p in deployed.ready_pods()}
    assert svc["spec"]["clusterIP"].startswith("10.0.0.")
    # the API server's own count of webhook calls, answered (HTTP 200) by gangcheck
    metrics = kube.run("get", "--raw", "/metrics").stdout
    calls = [line for line in metrics.splitlines()
             if line.startswith("apiserver_admission_webhook_request_total") and 'name="validate.gangcheck.io"' in line
             and 'code="200"' in line]
    assert calls and sum(float(line.rsplit(" ", 1)[1]) for line in calls) >= 3, calls
