"""gangcheck's whole-gang check against kube-scheduler's attempt for one pod, on one state (issue #11).

A control plane of its own (etcd + kube-apiserver + kube-scheduler of the tier's version), so the
shared tier cluster keeps its size: ``RATIO_NODES`` Node objects (8 GPUs, 96 cpu, 1 TiB each;
``GANGCHECK_RATIO_NODES``, default 5,000) with ~30 bound pods each (29 small pods; a 4-GPU pod
on four nodes of five), created over keep-alive HTTPS (e2e_bulk.py). The
``TaintNodesByCondition`` admission plugin is off there: it taints every new Node not-ready and
only the node lifecycle controller (not running) would lift it.

Then, on the same state:

* **gangcheck**: the nodes and pods read back from the API server, ``build_snapshot``, and
  ``evaluate`` of a 64 × 8-GPU Job gang, cold (the snapshot's per-shape memo emptied before each
  call, as bench/engine.py does); the median of ``CALLS`` calls.
* **kube-scheduler**: started after the load, then the gang's 64 pods are created; its
  ``scheduler_scheduling_attempt_duration_seconds`` (``result="scheduled"``) sum / count is the
  mean attempt for one pod — the scheduling algorithm plus the bind request
  (pkg/scheduler/schedule_one.go observes it after the binding cycle) — and
  ``scheduler_scheduling_algorithm_duration_seconds`` the algorithm alone.

Printed at the end of the run: ``ratio kube-scheduler: gangcheck whole gang X ms vs one pod's
attempt Y ms (X/Y)``; the goal is X/Y ≤ 0.25. The ratio is a measurement, never asserted (the
machine is shared). What is asserted: gangcheck says Fits with exactly the whole-free nodes as the
nodes that can take a pod now, and the scheduler binds all 64 pods, each to one of those nodes.
"""

from __future__ import annotations

import json
import os
import ssl
import statistics
import time
import urllib.request

import pytest

import e2e_controlplane as cp
from e2e_bulk import Bulk

from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.engine.decision import FITS
from webhook.engine.evaluate import evaluate
from webhook.engine.options import EngineOptions

RATIO_NODES = int(os.environ.get("GANGCHECK_RATIO_NODES", "5000"))
SMALL_PODS = 29          # per node, 100m cpu / 256Mi each
GPU_POD_EVERY = 5        # nodes i % 5 != 0 carry a 4-GPU pod; i % 5 == 0 stay whole free
GANG = 64
CALLS = 50
NS = "ratio"
PRODUCT = "nvidia.com/gpu.product"


def _node(i: int) -> dict:
    name = f"r-{i:05d}"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cap = {"cpu": "96", "memory": "1024Gi", "pods": "110", cp.GPU: "8"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  PRODUCT: "NVIDIA-H100-80GB-HBM3", "topology.example.com/rack": f"rack-{i // 32:03d}"}},
            "spec": {},
            # a kubelet registers its Node with its status in the create request; the API server keeps it
            "status": {"capacity": cap, "allocatable": cap,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e ratio node",
                                       "lastHeartbeatTime": now, "lastTransitionTime": now}]}}


def _pods(n_nodes: int):
    path = f"/api/v1/namespaces/{NS}/pods"
    for i in range(n_nodes):
        node = f"r-{i:05d}"
        for j in range(SMALL_PODS):
            yield path, cp.pod_obj(f"s-{i:05d}-{j:02d}", NS, node=node, cpu="100m", memory="256Mi")
        if i % GPU_POD_EVERY:
            yield path, cp.pod_obj(f"g-{i:05d}", NS, node=node, gpus=4, cpu="16", memory="128Gi")


def _gang_job() -> dict:
    c = {"name": "train", "image": "registry.example.com/train:1",
         "resources": {"requests": {cp.GPU: "8", "cpu": "64", "memory": "512Gi"}, "limits": {cp.GPU: "8"}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gang", "namespace": NS},
            "spec": {"parallelism": GANG, "completions": GANG, "completionMode": "Indexed",
                     "template": {"spec": {"restartPolicy": "Never", "containers": [c]}}}}


def _gang_pods() -> list[tuple[str, dict]]:
    job = _gang_job()
    out = []
    for k in range(GANG):
        spec = json.loads(json.dumps(job["spec"]["template"]["spec"]))
        out.append((f"/api/v1/namespaces/{NS}/pods",
                    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gang-{k:02d}", "namespace": NS, "labels": {"ratio": "gang"}},
                     "spec": spec}))
    return out


def _metric(text: str, name: str, labels: dict[str, str]) -> float:
    from prometheus_client.parser import text_string_to_metric_families
    total = 0.0
    found = False
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
                found = True
    if not found:
        raise AssertionError(f"{name}{labels} not in kube-scheduler's /metrics")
    return total


@pytest.fixture(scope="module")
def plane(cluster):
    if cluster.external:
        pytest.skip("the ratio needs a control plane of its own (not an external KUBECONFIG)")
    p = cp.ControlPlane(cp.bin_dir())
    p.apiserver_args = ["--disable-admission-plugins=TaintNodesByCondition"]
    try:
        p.start()
        yield p
    finally:
        p.stop()


@pytest.mark.local_only
def test_ratio_against_kube_scheduler(plane):
    assert RATIO_NODES >= GANG * GPU_POD_EVERY, f"GANGCHECK_RATIO_NODES={RATIO_NODES}: at least {GANG * GPU_POD_EVERY} (one node in {GPU_POD_EVERY} is whole free)"
    bulk = Bulk(plane.kubeconfig, threads=8)
    status, body = bulk.request("POST", "/api/v1/namespaces", cp.namespace_obj(NS))
    assert status in (200, 201), body
    t_nodes = bulk.create((("/api/v1/nodes", _node(i)) for i in range(RATIO_NODES)), "nodes")
    t_pods = bulk.create(_pods(RATIO_NODES), "pods")

    nodes = bulk.list_all("/api/v1/nodes", "v1", "Node")
    pods = bulk.list_all("/api/v1/pods", "v1", "Pod")
    whole_free = {f"r-{i:05d}" for i in range(RATIO_NODES) if i % GPU_POD_EVERY == 0}
    assert len(nodes) == RATIO_NODES and not any(n["spec"].get("taints") for n in nodes), "nodes stored untainted"
    assert nodes[0]["status"]["allocatable"][cp.GPU] == "8", nodes[0]["status"]
    assert len(pods) == RATIO_NODES * SMALL_PODS + RATIO_NODES - len(whole_free)

    # gangcheck on the state the API server holds
    t = time.monotonic()
    snap = build_snapshot(nodes + pods, source="e2e-ratio")
    build_s = time.monotonic() - t
    del nodes, pods
    gang = adapt(_gang_job(), source="e2e-ratio")
    opts = EngineOptions(plain_jobs_as_gangs=True)
    d = evaluate(snap, gang, opts)
    assert d.verdict == FITS, d.message
    assert d.nodes["fit_now"] == len(whole_free), d.nodes
    samples = []
    for _ in range(CALLS):
        snap._memo.clear()
        a = time.perf_counter_ns()
        evaluate(snap, gang, opts)
        samples.append((time.perf_counter_ns() - a) / 1e6)
    x = statistics.median(samples)

    # kube-scheduler on the same state: started after the load, then the gang's pods
    plane.start_scheduler()
    # kube-scheduler serves a self-signed certificate of its own (no --tls-cert-file): the process
    # started above on loopback; it authenticates us by the admin client certificate
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(plane.pki["admin.crt"], plane.pki["admin.key"])

    def metrics() -> str:
        with urllib.request.urlopen(f"https://127.0.0.1:{plane.scheduler_port}/metrics", timeout=10, context=ctx) as r:
            return r.read().decode()

    cp.wait_for(lambda: "scheduler_pending_pods" in metrics(), 60, "kube-scheduler's /metrics", 0.5)
    bulk.create(_gang_pods(), "gang pods")

    def bound() -> dict[str, str] | None:
        status, body = bulk.request("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=ratio%3Dgang")
        assert status == 200, body
        items = json.loads(body)["items"]
        out = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in items}
        return out if len(out) == GANG and all(out.values()) else None

    placed = cp.wait_for(bound, 180, "kube-scheduler to bind the 64 gang pods", 0.5)
    assert set(placed.values()) <= whole_free and len(set(placed.values())) == GANG, placed

    m = metrics()
    attempts = _metric(m, "scheduler_scheduling_attempt_duration_seconds_count", {"result": "scheduled"})
    y = 1000 * _metric(m, "scheduler_scheduling_attempt_duration_seconds_sum", {"result": "scheduled"}) / attempts
    algo = 1000 * _metric(m, "scheduler_scheduling_algorithm_duration_seconds_sum", {}) / \
        _metric(m, "scheduler_scheduling_algorithm_duration_seconds_count", {})
    assert attempts >= GANG, attempts
    n_pods = RATIO_NODES * (SMALL_PODS + 1) - len(whole_free)
    cp.SUMMARY.append(
        f"ratio kube-scheduler: gangcheck whole gang {x:.2f} ms vs one pod's attempt {y:.2f} ms ({x / y:.2f}); "
        f"algorithm alone {algo:.2f} ms ({x / algo:.2f}); {RATIO_NODES} nodes, {n_pods} bound pods, "
        f"{GANG} x 8-GPU gang, gangcheck median of {CALLS} cold checks (max {max(samples):.2f} ms), "
        f"snapshot {build_s:.1f} s; load: nodes {t_nodes:.0f} s, pods {t_pods:.0f} s")
