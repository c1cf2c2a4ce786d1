"""Volcano as a referee (issue #11, part 2): vc-scheduler + vc-controller-manager
(e2e_volcano.py) against the tier's kube-apiserver; no kube-scheduler needed (the pods name
``schedulerName: volcano``).

``test_volcano_binds_a_gang``: a Queue, a PodGroup of 2 and its pods → Volcano binds both (the
infrastructure works); a gang too big for the node binds no pod (all or nothing).

``test_volcano_differential``: see its docstring.
"""

from __future__ import annotations

import json
import os
import random
import time

import pytest

import e2e_volcano as ev
from e2e_harness import unavailable, without_gangcheck_webhooks
from e2e_controlplane import E2E_LABEL, GPU, SUMMARY, node_obj, pod_obj, wait_for

from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.engine.decision import FITS, NEVER_FITS
from webhook.engine.evaluate import evaluate
from webhook.engine.options import EngineOptions

NS = "vc-diff"
POOL = "vc"  # E2E_LABEL value of the nodes the configurations create
QUEUE_LABEL = "e2e.gangcheck.io/volcano"


@pytest.fixture(scope="module")
def volcano(cluster, request):
    if cluster.external:  # it would add CRDs, Queues and Nodes to someone's cluster (maybe with its own Volcano)
        pytest.skip("the Volcano referee runs against the local control plane only")
    why = ev.missing()
    if why:
        unavailable(request.config, f"Volcano referee: {why}")
    cluster.ensure_namespace(NS)
    v = ev.Volcano(cluster.kube, cluster.dir)
    # gangcheck is the one judged here, by its engine on the objects read back: its webhook (when an
    # earlier module registered it) must not refuse the configurations' never-fitting PodGroups
    with without_gangcheck_webhooks(cluster.kube):
        v.install()
        clear(v)
        v.start()
        try:
            yield v
        finally:
            try:
                clear(v)
            finally:
                v.stop()


def clear(v: ev.Volcano) -> None:
    """Remove the pods and PodGroups of ``NS``, the referee's Queues and Nodes; wait until gone."""
    api = v.api
    api.delete_collection(f"/api/v1/namespaces/{NS}/pods")
    api.delete_collection(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups")
    api.delete_collection(ev.QUEUES, QUEUE_LABEL)
    api.delete_collection("/api/v1/nodes", f"{E2E_LABEL}={POOL}")

    def gone() -> bool:
        return not (v.pods(NS) or v.pod_groups(NS) or api.items(ev.QUEUES, "", "", QUEUE_LABEL)
                    or api.items("/api/v1/nodes", "", "", f"{E2E_LABEL}={POOL}"))
    wait_for(gone, 60, "the previous configuration's objects to go", 0.05)


def gang_pods(name: str, queue: str, n: int, shape: dict) -> tuple[dict, list[dict]]:
    """A PodGroup of ``n`` (minResources = n × the pod's requests) and its ``n`` pods."""
    pods = []
    for j in range(n):
        p = pod_obj(f"{name}-{j}", NS, scheduler=ev.SCHEDULER_NAME, **shape)
        p["metadata"]["annotations"] = {ev.GROUP_ANNOTATION: name}
        pods.append(p)
    req = pods[0]["spec"]["containers"][0]["resources"]["requests"]
    mins = {}
    for r, q in req.items():
        if r == "cpu":
            mins[r] = f"{int(q) * n}"
        elif r == "memory":
            mins[r] = f"{int(q[:-2]) * n}Gi"
        else:
            mins[r] = str(int(q) * n)
    return ev.pod_group_obj(name, NS, queue, n, mins), pods


def as_vcjob(name: str, queue: str, n: int, pod: dict) -> dict:
    """The gang as gangcheck sees it at admission: a Volcano Job of one task of ``n`` such pods
    (Volcano's job controller would make exactly the PodGroup the referee creates by hand:
    minMember = minAvailable, minResources = Σ the minimum pods' requests)."""
    spec = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": n, "schedulerName": ev.SCHEDULER_NAME, "queue": queue,
                     "tasks": [{"name": "worker", "replicas": n, "template": {"spec": spec}}]}}


@pytest.mark.local_only
def test_volcano_binds_a_gang(volcano):
    api = volcano.api
    api.create_nodes([node_obj("vc-smoke-n0", POOL, gpus=4, cpu="8", memory="32Gi")])
    api.create(ev.QUEUES, ev.queue_obj("vc-smoke", capability={GPU: "4"}))
    wait_for(lambda: volcano.queues_open(["vc-smoke"]), 30, "queue vc-smoke Open")
    ok_pg, ok_pods = gang_pods("smoke-ok", "vc-smoke", 2, {"gpus": 2, "cpu": "1", "memory": "1Gi"})
    big_pg, big_pods = gang_pods("smoke-big", "vc-smoke", 3, {"gpus": 0, "cpu": "3", "memory": "1Gi"})
    for obj in (ok_pg, *ok_pods, big_pg, *big_pods):
        path = f"/api/v1/namespaces/{NS}/pods" if obj["kind"] == "Pod" else f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"
        api.create(path, obj)
    st = volcano.settle(NS, ["smoke-ok", "smoke-big"])
    assert st["smoke-ok"]["bound"] == 2, st
    assert st["smoke-big"]["bound"] == 0, st  # 3 × 3 CPUs on an 8-CPU node: all or nothing
    nodes = {p["spec"].get("nodeName") for p in volcano.pods(NS) if p["metadata"]["name"].startswith("smoke-ok")}
    assert nodes == {"vc-smoke-n0"}
    clear(volcano)


# ---------------------------------------------------------------- the differential

SEED = int(os.environ.get("GANGCHECK_E2E_VOLCANO_SEED", "20261202"))
CONFIGS = int(os.environ.get("GANGCHECK_E2E_VOLCANO_CONFIGS", "120"))
#: Run only these configurations (comma-separated indices; all are still drawn, so each is the
#: same as in a full run): to reproduce one.
ONLY = {int(x) for x in os.environ.get("GANGCHECK_E2E_VOLCANO_ONLY", "").split(",") if x.strip()}


def random_config(rng: random.Random, idx: int) -> dict:
    """Nodes, Queues (capability, deserved, guarantee, weight, sometimes under a parent),
    background gangs already in the queues, and the gang under test, for configuration ``idx``."""
    p = f"v{idx:03d}"
    nodes = []
    for j in range(rng.choice([1, 2, 2, 3])):
        nodes.append(node_obj(f"{p}-n{j}", POOL, gpus=rng.choice([0, 4, 4, 8, 8]), cpu=str(rng.choice([8, 16, 32])),
                              memory=f"{rng.choice([64, 256])}Gi"))
    parent = f"{p}-parent" if rng.random() < 0.3 else None
    queues = []
    if parent:
        cap = {GPU: str(rng.choice([4, 8, 16]))} if rng.random() < 0.5 else None
        queues.append(ev.queue_obj(parent, weight=1, capability=cap, label="1"))
    leaves = []
    for j in range(rng.choice([1, 2, 2, 3])):
        name = f"{p}-q{j}"
        cap: dict = {}
        if rng.random() < 0.5:
            cap[GPU] = str(rng.choice([2, 4, 6, 8, 12, 16]))
        if rng.random() < 0.25:
            cap["cpu"] = str(rng.choice([4, 8, 16, 32]))
        deserved = {GPU: str(rng.choice([2, 4, 8]))} if rng.random() < 0.2 else None
        guarantee = {GPU: str(rng.choice([1, 2, 4]))} if rng.random() < 0.15 else None
        queues.append(ev.queue_obj(name, weight=rng.choice([1, 1, 2, 4]), capability=cap or None, deserved=deserved,
                                   guarantee=guarantee, parent=parent if parent and rng.random() < 0.8 else None))
        leaves.append(name)
    background = []
    for q in leaves:
        for k in range(rng.choice([0, 0, 1, 2])):
            shape = {"gpus": rng.choice([1, 2, 4]), "cpu": str(rng.choice([1, 2])), "memory": "1Gi"}
            background.append(gang_pods(f"{q}-bg{k}", q, rng.choice([1, 2]), shape))
        if rng.random() < 0.15:  # a group that no node can hold: enqueued (or not), never bound
            background.append(gang_pods(f"{q}-stuck", q, 1, {"gpus": rng.choice([2, 4]), "cpu": "64", "memory": "1Gi"}))
    n = rng.choice([1, 2, 3, 4])
    if rng.random() < 0.8:
        shape = {"gpus": rng.choice([1, 2, 4, 8]), "cpu": str(rng.choice([1, 2])), "memory": "1Gi"}
    else:
        shape = {"gpus": 0, "cpu": str(rng.choice([1, 2, 4, 8])), "memory": "1Gi"}
    queue = rng.choice(leaves)
    gang = gang_pods(f"{p}-gang", queue, n, shape)
    return {"idx": idx, "nodes": nodes, "queues": queues, "leaves": leaves, "background": background,
            "gang": gang, "queue": queue, "n": n}


def _create_group(api: ev.Api, pg: dict, pods: list[dict]) -> None:
    api.create(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups", pg)
    for pod in pods:
        api.create(f"/api/v1/namespaces/{NS}/pods", pod)


def snapshot_objects(v: ev.Volcano) -> list[dict]:
    return v.nodes() + v.pods() + v.queues() + v.pod_groups(NS)


def verdict_on(objs: list[dict], cfg: dict):
    """evaluate() of the gang, as the Volcano Job that would make its PodGroup, on ``objs``."""
    snap = build_snapshot(objs, source="e2e-volcano")
    pg, pods = cfg["gang"]
    return evaluate(snap, adapt(as_vcjob(pg["metadata"]["name"], cfg["queue"], cfg["n"], pods[0]), source="e2e-volcano"),
                    EngineOptions())


def compare(decision, bound: bool) -> tuple[str, str]:
    v = decision.verdict
    if bound:
        if v == FITS:
            return "agree", "Fits; Volcano bound the whole gang"
        if v == NEVER_FITS:
            return "false-neverfits", "gangcheck NeverFits, Volcano bound the whole gang"
        return "disagree", f"gangcheck {v} ({', '.join(decision.reasons)}), Volcano bound the whole gang"
    if v == FITS:
        return "disagree", "gangcheck Fits, Volcano did not bind the gang"
    return "agree", f"{v} ({', '.join(decision.reasons)}); Volcano did not bind the gang"


def known_difference(decision, ref: dict, cfg: dict, objs: list[dict]) -> str | None:
    """A disagreement that is a documented difference (upstream source cited), else None.

    * The gang's queue sets spec.deserved: gangcheck reads it as the capacity plugin's share
      (capacity.go ``buildQueueAttrs``: deserved capped by the real capability; it only decides
      what may be reclaimed, so an Info, not a Waits), because a cluster that sets spec.deserved
      runs that plugin. The Helm chart's configuration this referee runs has the proportion
      plugin instead, which never reads spec.deserved and shares the cluster by weight
      (proportion.go ``OnSessionOpen``). It is this difference only when gangcheck, given the
      same objects without spec.deserved, says ExceedsDeservedShare (the proportion share).
    * A boundary of the proportion share: another queue asks for more of some resource than the
      cluster has (a background group of 64 CPUs, or GPUs beyond the cluster's), so the proportion
      plugin never counts it satisfied — a queue is satisfied only when its request fits its
      share on *every* resource (proportion.go ``OnSessionOpen``:
      ``attr.request.LessEqual(attr.deserved, api.Zero)``) — and the gang's queue approaches
      exactly what it holds + the gang round after round. Where Volcano's float rounds stop
      (their order is Go map order) decides the answer: seed 7, configuration 47 logged (-v=5) a
      deserved of 3999.92 milli-GPUs for a gang of 4 GPUs, past Volcano's 0.1-milli tolerance, so
      the second pod was refused. gangcheck's share (GPUs only, ``_deserved_share``) says it fits.
      It is this difference only when Volcano enqueued the gang (Inqueue) but did not bind it,
      such a queue exists, and the water-filling over cpu, memory and GPUs
      (``proportion_deserved``) gives the gang's queue, on some resource the gang asks for,
      within 1 % of what it holds + the gang.
    """
    spec = next((q for q in cfg["queues"] if q["metadata"]["name"] == cfg["queue"]), {}).get("spec") or {}
    if decision.verdict == FITS and ref["phase"] == "Inqueue" and ref["bound"] < cfg["n"]:
        why = _share_boundary(cfg, objs)
        if why:
            return why
    if decision.verdict == FITS and spec.get("deserved") and not ref["bound"] == cfg["n"]:
        plain = [dict(o, spec={k: v for k, v in o["spec"].items() if k != "deserved"}) if o["kind"] == "Queue" else o
                 for o in objs]
        again = verdict_on(plain, cfg)
        if any(f.code == "ExceedsDeservedShare" and (f.data or {}).get("plugin") == "proportion" for f in again.findings):
            return ("spec.deserved is read as the capacity plugin's share; the proportion plugin configured here ignores it "
                    "and its share by weight is below the gang (see known_difference)")
    return None


def _share_boundary(cfg: dict, objs: list[dict]) -> str | None:
    """See ``known_difference``: the boundary case of the proportion share, or None."""
    from webhook.engine.quota import QueueDemand, proportion_deserved
    from webhook.engine.quota.volcano import queue_allocated, queue_demands
    snap = build_snapshot(objs, source="e2e-volcano")
    pg, pods = cfg["gang"]
    gang = adapt(as_vcjob(pg["metadata"]["name"], cfg["queue"], cfg["n"], pods[0]), source="e2e-volcano")
    need = {r: v for r, v in gang.total_requests().items() if v > 0 and r != "pods"}
    total = {r: float(snap.alloc[:, c].sum()) for r, c in snap.col.items() if r in ("cpu", "memory", GPU)}
    demands = queue_demands(snap.volcano, gang, cfg["queue"], need)
    never = sorted(q for q, d in demands.items() if q != cfg["queue"] and any(v > total.get(r, 0) for r, v in d.items()))
    if not never:
        return None
    vq = snap.volcano.queues
    queues = [QueueDemand(q, vq[q].weight, d, dict(vq[q].capability), dict(vq[q].guarantee)) for q, d in sorted(demands.items()) if q in vq]
    total_guarantee: dict = {}
    for q in vq.values():
        for r, v in q.guarantee.items():
            total_guarantee[r] = total_guarantee.get(r, 0) + v
    mine = proportion_deserved(total, queues, total_guarantee).get(cfg["queue"], {})
    held = queue_allocated(snap.volcano, gang, cfg["queue"])
    edge = [r for r, v in need.items() if r in mine and abs(mine[r] - (held.get(r, 0) + v)) <= 0.01 * (held.get(r, 0) + v)]
    if not edge:
        return None
    return (f"queue(s) {', '.join(never)} ask for more than the cluster has and are never satisfied; the gang's queue's share of "
            f"{', '.join(edge)} is exactly what it holds + the gang, where Volcano's float rounds end below it (see known_difference)")


@pytest.mark.local_only
def test_volcano_differential(volcano):
    """≥ 100 seeded random configurations (``GANGCHECK_E2E_VOLCANO_SEED``/``_CONFIGS``): Nodes
    (0/4/8 GPUs), 1–3 Queues (capability on GPUs and CPU, deserved, guarantee, weight, some
    under a parent Queue), background gangs (PodGroups + pods) Volcano has bound or left pending
    in them, and a gang under test (a PodGroup of 1–4 pods of one shape). gangcheck's verdict on
    the snapshot built from what the API server holds before the gang exists is compared with
    whether Volcano enqueues and binds the whole gang (``Volcano.settle``). F = NeverFits while
    Volcano bound the gang: must be 0; every other disagreement must be a documented difference
    (``known_difference``). Each record goes to ``<workdir>/volcano-diff.json``."""
    v = volcano
    api = v.api
    rng = random.Random(SEED)
    records = []
    t0 = time.monotonic()
    for idx in range(CONFIGS):
        cfg = random_config(rng, idx)
        if ONLY and idx not in ONLY:
            continue
        t = [time.monotonic()]
        clear(v)
        t.append(time.monotonic())
        for q in cfg["queues"]:  # first: the queue controller opens them while the nodes are made
            api.create(ev.QUEUES, q)
        api.create_nodes(cfg["nodes"])
        names = [q["metadata"]["name"] for q in cfg["queues"]]
        wait_for(lambda: v.queues_open(names), 30, f"queues {names} Open", 0.05)
        for pg, pods in cfg["background"]:
            _create_group(api, pg, pods)
        bg = v.settle(NS, [pg["metadata"]["name"] for pg, _ in cfg["background"]]) if cfg["background"] else {}
        t.append(time.monotonic())
        objs = snapshot_objects(v)  # what the API server holds before the gang exists (its admission moment)
        decision = verdict_on(objs, cfg)
        t.append(time.monotonic())
        pg, pods = cfg["gang"]
        _create_group(api, pg, pods)
        gname = pg["metadata"]["name"]
        ref = v.settle(NS, [gname])[gname]
        t.append(time.monotonic())
        bound = ref["bound"] == cfg["n"]
        outcome, why = compare(decision, bound)
        if outcome == "disagree":
            known = known_difference(decision, ref, cfg, objs)
            if known:
                outcome, why = "documented", f"{why}; {known}"
        records.append({"config": idx, "seconds": {k: round(b - a, 2) for k, a, b in zip(
                            ("clear", "create", "gangcheck", "volcano"), t, t[1:])},
                        "outcome": outcome, "why": why, "verdict": decision.verdict, "reasons": decision.reasons,
                        "message": decision.message, "volcano": ref, "background": bg,
                        "queues": [q["metadata"]["name"] and {"name": q["metadata"]["name"], **q["spec"]} for q in cfg["queues"]],
                        "queue": cfg["queue"], "nodes": [n["metadata"]["name"] and st["status"]["allocatable"] for n, st in cfg["nodes"]],
                        "gang": {"pods": cfg["n"], "requests": pods[0]["spec"]["containers"][0]["resources"]["requests"]}})
    clear(v)
    out = v.work / "volcano-diff.json"
    out.write_text(json.dumps({"seed": SEED, "configs": records}, indent=1, default=str))
    n = len(records)
    agree = sum(r["outcome"] == "agree" for r in records)
    false_nf = [r for r in records if r["outcome"] == "false-neverfits"]
    documented = [r for r in records if r["outcome"] == "documented"]
    summary = (f"referee volcano: {n} configs, {agree} agree, {n - agree} disagree, {len(false_nf)} false NeverFits"
               f" (seed {SEED}, {time.monotonic() - t0:.0f} s" + (f"; {len(documented)} documented differences" if documented else "")
               + f"; details: {out})")
    SUMMARY.append(summary)
    print("\n[e2e] " + summary)
    assert n == (len(ONLY & set(range(CONFIGS))) if ONLY else CONFIGS)
    bad = [r for r in records if r["outcome"] in ("false-neverfits", "disagree")]
    if bad:
        pytest.fail(f"{summary}\n" + "\n".join(f"config {r['config']}: {r['why']} — gangcheck: {r['message'][:300]}"
                                                for r in bad), pytrace=False)
