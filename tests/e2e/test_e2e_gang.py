"""Gangs against kube-scheduler (issue #11, part 3): gangcheck's verdict on a whole gang against
what kube-scheduler's gang scheduling does with it.

What kube-scheduler v1.37 does (k8s.io/kubernetes v1.37.2, read in the module cache):

* Feature gate **GenericWorkload** (beta in 1.37, off by default; pkg/features/kube_features.go)
  is the only gate needed, on both processes. 1.36's separate ``GangScheduling`` gate is gone in
  1.37 (CHANGELOG/CHANGELOG-1.37.md: "Removed the `GangScheduling` and `WorkloadAwarePreemption`
  feature gates", kubernetes#139520): naming it now is an unknown-gate error. In the API server it enables the storage of
  scheduling.k8s.io Workload and PodGroup (pkg/registry/scheduling/rest/storage_scheduling.go
  ``v1beta1Storage``: the resources exist only with the gate on) and keeps a pod's
  ``spec.schedulingGroup`` (pkg/api/pod/util.go ``dropDisabledSchedulingGroup`` drops it with
  the gate off). scheduling.k8s.io/v1beta1 is a beta API version, off by default, hence
  ``--runtime-config=scheduling.k8s.io/v1beta1=true``. In kube-scheduler the gate adds the
  GangScheduling plugin to the default profile (pkg/scheduler/apis/config/v1/default_plugins.go
  ``applyFeatureGates`` → ``applyGangScheduling``), starts the PodGroup informer (v1beta1,
  pkg/scheduler/eventhandlers.go) and the pod-group scheduling cycle (pkg/scheduler/schedule_one.go
  → ``scheduleOnePodGroup``). The plugin itself checks no other gate
  (pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go reads only
  ``EnableCompositePodGroup``, alpha, left off; pkg/scheduler/framework/plugins/feature/feature.go).
* A pod joins a group by ``spec.schedulingGroup.podGroupName`` naming a **PodGroup** object in
  its namespace (k8s.io/api core/v1 ``PodSchedulingGroup``); the PodGroup's
  ``spec.schedulingPolicy.gang.minCount`` is the gang's size (k8s.io/api scheduling/v1beta1
  ``GangSchedulingPolicy``). kube-scheduler reads PodGroups only; the Workload (its
  ``podGroupTemplates``, referenced by the PodGroup's ``workloadRef``) is what a controller
  would create PodGroups from — created here as a user or controller would.
* All or nothing: ``PreEnqueue`` keeps every pod of the group out of the scheduling queue until
  minCount pods of it exist (gangscheduling.go ``preEnqueueHierarchiesDisabled``); then the group
  is scheduled in one pod-group cycle (schedule_one_podgroup.go
  ``podGroupSchedulingDefaultAlgorithm``): each pod in turn through the usual Filter/Score
  plugins, assumed on its node so the next pod sees it, and ``PlacementFeasible`` (gangscheduling.go)
  ends the cycle as Unschedulable once ``remaining + scheduled < minCount``. On failure every
  tentative placement is reverted (``revertFns``) and each pod is marked Unschedulable; only
  when the group succeeds do its pods go to binding (``submitPodGroupAlgorithmResult``), and
  ``Permit`` holds each pod until minCount of them are assumed (gangscheduling.go ``Permit``).
  The PodGroup gets the condition ``PodGroupInitiallyScheduled`` True (Scheduled) or False
  (Unschedulable) (``submitPodGroupAlgorithmResult`` → ``updatePodGroupCondition``).
* With N pods of one shape, placing them one at a time is exact: a pod on node n lowers only
  n's count of pods that fit by one (a hostPort or the self anti-affinity caps that count at
  one), so the greedy cycle places all N iff Σ_n (pods of the shape that fit node n now) ≥ N —
  what gangcheck's Fits computes.

The differential (seeded; ``GANGCHECK_E2E_GANG_SEED`` / ``_CLUSTERS`` / ``_BATCH`` / ``_BOUND``
/ ``_ONLY``): ``CLUSTERS`` random small clusters — Node objects with status (GPU counts, a GPU
allocatable below capacity, pod slots, zone/product labels), bound pods using part of the nodes,
taints (NoSchedule, NoExecute, PreferNoSchedule, GKE-style GPU taints the API server's
ExtendedResourceToleration lifts), cordons, NotReady taints — and one gang each: a Workload with
one pod group template of minCount N, its PodGroup, and N pods of identical requests (maybe a
nodeSelector, a required node affinity, tolerations, a hostPort some bound pods hold too, a
required pod anti-affinity against the gang itself on kubernetes.io/hostname, a sidecar or a
plain init container), each naming the PodGroup in
``spec.schedulingGroup``. Each cluster is a node pool of its own (label ``E2E_LABEL`` =
``gang-NN``; every gang's nodeSelector names its pool), so ``BATCH`` clusters run at once.

gangcheck's verdict: ``build_snapshot`` of the nodes and pods read back from the API server
before the gang exists (its admission moment), and ``evaluate`` of the gang as a batch/v1 Job of
N such pods with ``EngineOptions(plain_jobs_as_gangs=True)``. kube-scheduler's: how many of the
gang's pods are bound once the PodGroup's condition is set and every pod is bound or marked
Unschedulable (``BOUND`` seconds at most). Fits ⟺ all N bind; Waits/NeverFits ⟺ none binds; a
gang bound in part is a finding of its own. A gang gangcheck says Fits that the scheduler left
unbound is tried once more as a fresh gang (the scheduler's informers may lag the nodes) before
it counts. Printed: ``referee gang: N clusters, A agree, D disagree (seed S, T s)``; every record
goes to ``<workdir>/gang-diff.json``.
"""

from __future__ import annotations

import json
import math
import os
import random
import ssl
import time
import urllib.parse
import urllib.request

import pytest

import e2e_controlplane as cp
from e2e_bulk import Bulk
from e2e_controlplane import E2E_LABEL, GPU, SUMMARY, node_obj, pod_obj, pod_state, wait_for

from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.engine.decision import FITS, NEVER_FITS
from webhook.engine.evaluate import evaluate
from webhook.engine.options import EngineOptions

NS = "gang-diff"
SEED = int(os.environ.get("GANGCHECK_E2E_GANG_SEED", "20261202"))
CLUSTERS = int(os.environ.get("GANGCHECK_E2E_GANG_CLUSTERS", "100"))
#: clusters run at once (disjoint node pools)
BATCH = int(os.environ.get("GANGCHECK_E2E_GANG_BATCH", "20"))
#: seconds a gang is given to be decided by kube-scheduler
BOUND = float(os.environ.get("GANGCHECK_E2E_GANG_BOUND", "20"))
#: run only these clusters (comma-separated indices; all are still drawn, so each is the same as
#: in a full run): to reproduce one
ONLY = {int(x) for x in os.environ.get("GANGCHECK_E2E_GANG_ONLY", "").split(",") if x.strip()}

GATES = "--feature-gates=GenericWorkload=true"
API_ARGS = [GATES, "--runtime-config=scheduling.k8s.io/v1beta1=true",
            # as in test_e2e_ratio.py: Nodes are created with their status in one request, and
            # no node lifecycle controller runs to lift the not-ready taint this plugin adds
            "--disable-admission-plugins=TaintNodesByCondition"]
SCHED = "/apis/scheduling.k8s.io/v1beta1"
PRODUCTS = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"]
PRODUCT = "nvidia.com/gpu.product"
ZONE = "e2e.gangcheck.io/zone"
PORT = 9000  # a hostPort some gangs and some bound pods ask for
CONDITION = "PodGroupInitiallyScheduled"  # k8s.io/api scheduling/v1beta1 PodGroupInitiallyScheduled


# ---------------------------------------------------------------- the random clusters


def pool_of(idx: int) -> str:
    return f"gang-{idx:02d}"


def random_cluster(rng: random.Random, idx: int) -> dict:
    """Nodes (with status), bound pods, and one gang (Workload, PodGroup, N pods) for cluster ``idx``."""
    prefix, pool = f"g{idx:02d}", pool_of(idx)
    nodes, bound = [], []
    for j in range(rng.randint(3, 7)):
        name = f"{prefix}-n{j}"
        gpus = rng.choice([0, 4, 8, 8, 8])
        labels = {ZONE: rng.choice(["a", "b"])}
        if gpus:
            labels[PRODUCT] = rng.choice(PRODUCTS)
        taints = []
        r = rng.random()
        if r < 0.15:
            taints.append({"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
        elif r < 0.3 and gpus:  # GKE's GPU node taint: ExtendedResourceToleration lifts NoSchedule
            taints.append({"key": GPU, "value": "present", "effect": "NoSchedule" if rng.random() < 0.8 else "NoExecute"})
        elif r < 0.35:
            taints.append({"key": "example.com/maintenance", "effect": "NoExecute"})
        elif r < 0.42:
            taints.append({"key": "example.com/soft", "effect": "PreferNoSchedule"})
        cordon = rng.random() < 0.1
        if cordon:
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        if rng.random() < 0.06:
            taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        gpu_alloc = gpus - 1 if gpus and rng.random() < 0.1 else None
        node, status = node_obj(name, pool, gpus=gpus, cpu=str(rng.choice([16, 32, 64])),
                                memory=f"{rng.choice([64, 256, 512])}Gi", pods=rng.choice([110, 110, 110, 4]),
                                labels=labels, taints=taints, unschedulable=cordon, gpu_allocatable=gpu_alloc)
        nodes.append({**node, **status})
        for k in range(rng.choice([0, 0, 1, 2])):
            bound.append(pod_obj(f"{name}-busy{k}", NS, node=name, gpus=rng.choice([0, 2, 4]) if gpus else 0,
                                 cpu=str(rng.choice([2, 8, 12])), memory=f"{rng.choice([8, 64])}Gi",
                                 host_port=PORT if rng.random() < 0.1 else None))
    # the gang: n pods of one shape, confined to the pool
    n = rng.choice([1, 2, 2, 3, 3, 4, 6, 8])
    gpus = rng.choice([0, 0, 1, 2, 4, 8])
    sel = {E2E_LABEL: pool}
    if rng.random() < 0.15:
        sel[ZONE] = rng.choice(["a", "b"])
    if gpus and rng.random() < 0.2:
        sel[PRODUCT] = rng.choice(PRODUCTS)
    tol = []
    if rng.random() < 0.35:
        tol.append({"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"})
    if rng.random() < 0.1:
        tol.append({"key": "example.com/maintenance", "operator": "Exists"})
    shape = {"gpus": gpus, "cpu": str(rng.choice([1, 2, 4, 8, 16])), "memory": f"{rng.choice([1, 8, 32, 64])}Gi"}
    affinity = None
    if rng.random() < 0.15:
        expr = rng.choice([{"key": ZONE, "operator": "In", "values": [rng.choice(["a", "b"])]},
                           {"key": PRODUCT, "operator": "NotIn", "values": [rng.choice(PRODUCTS)]},
                           {"key": PRODUCT, "operator": "DoesNotExist"}])
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}
    labels = {"app": prefix}
    template = pod_obj("template", NS, node_selector=sel, tolerations=tol or None,
                       host_port=PORT if rng.random() < 0.15 else None, **shape)["spec"]
    if rng.random() < 0.12:  # one pod of the gang per node: required anti-affinity against itself
        affinity = {**(affinity or {}), "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}}
    if affinity:
        template["affinity"] = affinity
    r = rng.random()
    if r < 0.15:  # a sidecar (restartable init container) adds to the app's requests
        template["initContainers"] = [{"name": "sidecar", "image": "x", "restartPolicy": "Always",
                                       "resources": {"requests": {"cpu": str(rng.choice([1, 4])), "memory": "1Gi"}}}]
    elif r < 0.25:  # a plain init container: the larger of it and the app counts
        template["initContainers"] = [{"name": "init", "image": "x", "resources": {
            "requests": {"cpu": str(rng.choice([2, 12])), "memory": f"{rng.choice([1, 100])}Gi"}}}]
    return {"idx": idx, "pool": pool, "nodes": nodes, "bound": bound, "n": n, "labels": labels, "spec": template}


def gang_objects(cfg: dict, suffix: str = "") -> tuple[dict, dict, list[dict]]:
    """(Workload, PodGroup, pods) of cluster ``cfg``'s gang; ``suffix`` makes a fresh copy."""
    name, n = f"g{cfg['idx']:02d}{suffix}", cfg["n"]
    gang = {"gang": {"minCount": n}}
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": name, "namespace": NS},
                "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": gang}]}}
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": f"{name}-workers", "namespace": NS},
             "spec": {"workloadRef": {"workloadName": name, "templateName": "workers"}, "schedulingPolicy": gang}}
    pods = []
    for k in range(n):
        spec = json.loads(json.dumps(cfg["spec"]))
        spec["schedulingGroup"] = {"podGroupName": f"{name}-workers"}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{k}", "namespace": NS,
                     "labels": {**cfg["labels"], "gang.e2e.gangcheck.io/group": f"{name}-workers"}}, "spec": spec})
    return workload, group, pods


def as_job(cfg: dict) -> dict:
    """The gang as gangcheck sees it at admission: a batch/v1 Job of N pods of the gang's spec."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"g{cfg['idx']:02d}", "namespace": NS},
            "spec": {"parallelism": cfg["n"], "completions": cfg["n"],
                     "template": {"metadata": {"labels": dict(cfg["labels"])}, "spec": json.loads(json.dumps(cfg["spec"]))}}}


def gangcheck_verdict(objs: list[dict], cfg: dict):
    """evaluate() on the nodes and pods the API server holds, the gang as a Job of N pods;
    plainJobsAsGangs: its pods start all or nothing, as the PodGroup's gang policy makes them."""
    snap = build_snapshot(objs, source="e2e-gang")
    return evaluate(snap, adapt(as_job(cfg), source="e2e-gang"), EngineOptions(plain_jobs_as_gangs=True))


# ---------------------------------------------------------------- the API server side


class Api(Bulk):
    def items(self, path: str, api_version: str, kind: str) -> list[dict]:
        return self.list_all(path, api_version, kind)

    def post(self, path: str, obj: dict) -> dict:
        status, body = self.request("POST", path, obj)
        if status >= 300:
            raise AssertionError(f"POST {path} {obj['metadata']['name']}: {status} {body[:400]!r}")
        return json.loads(body)

    def delete_all(self, path: str, selector: str | None = None) -> None:
        q = "?" + urllib.parse.urlencode({"labelSelector": selector}) if selector else ""
        status, body = self.request("DELETE", path + q, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        if status >= 300 and status != 404:
            raise AssertionError(f"DELETE {path}{q}: {status} {body[:300]!r}")


def clear(api: Api) -> None:
    """Delete every gang, pod and pool node; wait until none is left."""
    api.delete_all(f"/api/v1/namespaces/{NS}/pods")
    api.delete_all(f"{SCHED}/namespaces/{NS}/podgroups")
    api.delete_all(f"{SCHED}/namespaces/{NS}/workloads")
    api.delete_all("/api/v1/nodes", E2E_LABEL)
    # The PodGroupProtection admission plugin stamps a finalizer on every PodGroup, which
    # kube-controller-manager's podgroup-protection controller removes once no pod uses the
    # group (pkg/controller/scheduling/podgroupprotection/podgroup_protection_controller.go);
    # no controller-manager runs here, so once the pods are gone we do what it would.
    def unprotect() -> None:
        for g in api.items(f"{SCHED}/namespaces/{NS}/podgroups", "scheduling.k8s.io/v1beta1", "PodGroup"):
            if g["metadata"].get("finalizers") and g["metadata"].get("deletionTimestamp"):
                api.request("PATCH", f"{SCHED}/namespaces/{NS}/podgroups/{g['metadata']['name']}",
                            {"metadata": {"finalizers": None}}, ctype="application/merge-patch+json")
    left: dict[str, list[str]] = {}

    def gone() -> bool:
        left.clear()
        unprotect()
        for what, path, kind in (("pods", f"/api/v1/namespaces/{NS}/pods", "Pod"),
                                 ("podgroups", f"{SCHED}/namespaces/{NS}/podgroups", "PodGroup"),
                                 ("nodes", "/api/v1/nodes", "Node")):
            names = [o["metadata"]["name"] for o in api.items(path, "v1", kind)]
            if names:
                left[what] = names[:5]
        return not left
    try:
        wait_for(gone, 60, "the previous batch to be deleted", 0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; left: {left}") from None


def group_condition(group: dict | None) -> dict | None:
    for c in ((group or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == CONDITION:
            return c
    return None


def observe(api: Api) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """(pods by PodGroup name, PodGroups by name) in the namespace."""
    pods: dict[str, list[dict]] = {}
    for p in api.items(f"/api/v1/namespaces/{NS}/pods", "v1", "Pod"):
        g = ((p["spec"].get("schedulingGroup") or {}).get("podGroupName"))
        if g:
            pods.setdefault(g, []).append(p)
    groups = {g["metadata"]["name"]: g for g in api.items(f"{SCHED}/namespaces/{NS}/podgroups", "scheduling.k8s.io/v1beta1", "PodGroup")}
    return pods, groups


def decided(pods: list[dict], n: int, group: dict | None) -> bool:
    """Every pod bound, or the PodGroup's condition set and every pod bound or Unschedulable."""
    states = [pod_state(p) for p in pods]
    if len(pods) == n and all(s == "bound" for s in states):
        return True
    return group_condition(group) is not None and len(pods) == n and all(states)


def referee(api: Api, batch: list[dict], suffix: str = "") -> dict[int, dict]:
    """Create the gangs of ``batch``; once each is decided (or ``BOUND`` s, plus 1 s per gang of
    the batch, the scheduler taking them one after another, have passed): per cluster, how many
    of its pods are bound, the PodGroup's condition, and a pod's Unschedulable message."""
    names = {}
    for cfg in batch:
        workload, group, pods = gang_objects(cfg, suffix)
        api.post(f"{SCHED}/namespaces/{NS}/workloads", workload)
        api.post(f"{SCHED}/namespaces/{NS}/podgroups", group)
        for p in pods:
            got = api.post(f"/api/v1/namespaces/{NS}/pods", p)
            assert (got["spec"].get("schedulingGroup") or {}).get("podGroupName") == group["metadata"]["name"], \
                f"the API server dropped spec.schedulingGroup (GenericWorkload off?): {got['spec']}"
        names[cfg["idx"]] = group["metadata"]["name"]
    deadline = time.monotonic() + BOUND + len(batch)
    while True:
        pods, groups = observe(api)
        done = {c["idx"]: decided(pods.get(names[c["idx"]], []), c["n"], groups.get(names[c["idx"]])) for c in batch}
        if all(done.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out = {}
    for cfg in batch:
        g = names[cfg["idx"]]
        ps = pods.get(g, [])
        cond = group_condition(groups.get(g))
        msg = next((c.get("message") for p in ps for c in (p.get("status") or {}).get("conditions") or []
                    if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
        out[cfg["idx"]] = {"podgroup": g, "pods": len(ps), "bound": sum(pod_state(p) == "bound" for p in ps),
                           "decided": done[cfg["idx"]], "condition": {k: cond.get(k) for k in ("status", "reason", "message")} if cond else None,
                           "message": msg, "nodes": sorted({p["spec"]["nodeName"] for p in ps if p["spec"].get("nodeName")})}
    return out


def delete_gang(api: Api, name: str) -> None:
    api.delete_all(f"/api/v1/namespaces/{NS}/pods", f"gang.e2e.gangcheck.io/group={name}-workers")
    wait_for(lambda: not [p for p in api.items(f"/api/v1/namespaces/{NS}/pods", "v1", "Pod")
                          if p["metadata"].get("labels", {}).get("gang.e2e.gangcheck.io/group") == f"{name}-workers"],
             30, f"gang {name} deleted", 0.2)


def compare(decision, ref: dict, n: int) -> tuple[str, str]:
    """("agree" | "disagree" | "false-neverfits" | "partial", why)."""
    v, bound = decision.verdict, ref["bound"]
    if 0 < bound < n:
        return "partial", f"kube-scheduler bound {bound} of the gang's {n} pods (gang scheduling bound part of a gang)"
    if v == FITS:
        return ("agree", f"Fits; all {n} pods bound") if bound == n else \
               ("disagree", f"gangcheck Fits, kube-scheduler bound none ({ref['condition'] or ref['message']})")
    if bound == n:
        return ("false-neverfits" if v == NEVER_FITS else "disagree"), f"gangcheck {v}, kube-scheduler bound all {n} pods"
    return "agree", f"{v}; none bound ({(ref['condition'] or {}).get('reason') or 'undecided'})"


# ---------------------------------------------------------------- the fixture and the test


def _scheduler_ready(plane: cp.ControlPlane) -> bool:
    """kube-scheduler's /readyz (its informers synced; HTTPS with its own self-signed certificate,
    the admin client certificate authenticates us)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(plane.pki["admin.crt"], plane.pki["admin.key"])
    with urllib.request.urlopen(f"https://127.0.0.1:{plane.scheduler_port}/readyz", timeout=5, context=ctx) as r:
        return r.status == 200


@pytest.fixture(scope="module")
def gang_plane(cluster):
    """A control plane of its own: the Workload API on (GenericWorkload, scheduling.k8s.io/v1beta1)
    in kube-apiserver and kube-scheduler, without touching the shared tier cluster."""
    if cluster.external:
        pytest.skip("the gang referee needs a control plane of its own (not an external KUBECONFIG)")
    p = cp.ControlPlane(cp.bin_dir())
    p.apiserver_args = list(API_ARGS)
    try:
        p.start()
        api = Api(p.kubeconfig, threads=4)
        status, body = api.request("POST", "/api/v1/namespaces", cp.namespace_obj(NS))
        assert status in (200, 201), body
        status, body = api.request("GET", SCHED)
        assert status == 200, f"{SCHED} not served: {status} {body[:300]!r}"
        served = {r["name"] for r in json.loads(body)["resources"]}
        assert {"workloads", "podgroups", "podgroups/status"} <= served, served
        p.start_scheduler([GATES])
        cp.wait_ready(p.scheduler, lambda: _scheduler_ready(p), 90)
        yield p, api, cluster.dir
    finally:
        p.stop()


@pytest.mark.local_only
def test_gang_differential(gang_plane):
    """gangcheck Fits ⟺ kube-scheduler binds the whole gang, on ``CLUSTERS`` random clusters."""
    plane, api, workdir = gang_plane
    rng = random.Random(SEED)
    cfgs = [random_cluster(rng, i) for i in range(CLUSTERS)]
    if ONLY:
        cfgs = [c for c in cfgs if c["idx"] in ONLY]
    records = []
    t0 = time.monotonic()
    for b in range(math.ceil(len(cfgs) / BATCH)):
        batch = cfgs[b * BATCH:(b + 1) * BATCH]
        clear(api)
        api.create((("/api/v1/nodes", n) for c in batch for n in c["nodes"]), "nodes")
        api.create(((f"/api/v1/namespaces/{NS}/pods", p) for c in batch for p in c["bound"]), "bound pods")
        want = sum(len(c["bound"]) for c in batch)
        wait_for(lambda: len(api.items(f"/api/v1/namespaces/{NS}/pods", "v1", "Pod")) == want, 30, "the bound pods listed")
        objs = api.items("/api/v1/nodes", "v1", "Node") + api.items("/api/v1/pods", "v1", "Pod")
        decisions = {c["idx"]: gangcheck_verdict(objs, c) for c in batch}
        refs = referee(api, batch)
        # a Fits the scheduler did not bind: once more as a fresh gang (its informers may have lagged)
        retry = [c for c in batch if decisions[c["idx"]].verdict == FITS and refs[c["idx"]]["bound"] == 0]
        for c in retry:
            delete_gang(api, f"g{c['idx']:02d}")
        if retry:
            again = referee(api, retry, suffix="-r")
            for c in retry:
                refs[c["idx"]] = {**again[c["idx"]], "first": refs[c["idx"]]}
        for c in batch:
            d, ref = decisions[c["idx"]], refs[c["idx"]]
            outcome, why = compare(d, ref, c["n"])
            records.append({"cluster": c["idx"], "outcome": outcome, "why": why, "verdict": d.verdict, "reasons": d.reasons,
                            "message": d.message, "fit_now": d.nodes.get("fit_now"), "scheduler": ref, "n": c["n"],
                            "gang": c["spec"], "nodes": [{"name": x["metadata"]["name"], "labels": x["metadata"]["labels"],
                                                          "spec": x["spec"], "allocatable": x["status"]["allocatable"]} for x in c["nodes"]],
                            "bound": [{"node": p["spec"]["nodeName"], "requests": p["spec"]["containers"][0]["resources"]["requests"]}
                                      for p in c["bound"]]})
    clear(api)
    seconds = time.monotonic() - t0
    out = workdir / "gang-diff.json"
    out.write_text(json.dumps({"seed": SEED, "clusters": records}, indent=1, default=str))
    n = len(records)
    agree = sum(r["outcome"] == "agree" for r in records)
    fits = sum(r["verdict"] == FITS for r in records)
    summary = (f"referee gang: {n} clusters, {agree} agree, {n - agree} disagree (seed {SEED}, {seconds:.0f} s; "
               f"{fits} Fits, {n - fits} Waits/NeverFits; kube-scheduler {cp.k8s_version()} GangScheduling)")
    SUMMARY.append(summary)
    print("\n[e2e] " + summary + f" — details: {out}")
    assert n == (len(ONLY & set(range(CLUSTERS))) if ONLY else CLUSTERS)
    assert not [r for r in records if not r["scheduler"]["decided"] and r["scheduler"]["bound"] not in (0, r["n"])]
    undecided = [r["cluster"] for r in records if r["scheduler"]["condition"] is None and r["scheduler"]["bound"] != r["n"]]
    assert not undecided, f"kube-scheduler set no {CONDITION} condition on the PodGroups of clusters {undecided} (gang scheduling off?)"
    bad = [r for r in records if r["outcome"] != "agree"]
    if bad:
        pytest.fail(f"{summary}\n" + "\n".join(f"cluster {r['cluster']} [{r['outcome']}]: {r['why']} — gangcheck: {r['message'][:300]}"
                                                for r in bad), pytrace=False)
