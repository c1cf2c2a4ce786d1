"""Karpenter as a referee (issue #16): its real controller (KWOK cloud provider, e2e_karpenter.py)
against the tier's kube-apiserver + kube-scheduler.

``test_karpenter_provisions_a_node``: one pending pod → Karpenter creates a NodeClaim and the
provider a Node of the chosen instance type (the infrastructure works).

``test_karpenter_differential``: see its docstring.
"""

from __future__ import annotations

import json
import os
import random
import time

import pytest

import e2e_karpenter as ek
from e2e_harness import unavailable
from e2e_controlplane import E2E_LABEL, SUMMARY, node_obj, pod_obj, pod_state, wait_for

from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.engine.autoscale.model import AutoscalingPolicy, PolicyPool
from webhook.engine.decision import FITS, NEVER_FITS
from webhook.engine.evaluate import evaluate
from webhook.engine.options import EngineOptions
from webhook.engine.quantity import parse_quantity

NS = "karp-diff"
POOL = "karp"  # E2E_LABEL value of the plain (non-Karpenter) nodes the configurations create


@pytest.fixture(scope="module")
def karpenter(cluster, request):
    if cluster.external:  # it would add CRDs, NodePools and Nodes to someone's cluster (maybe with its own autoscaler)
        pytest.skip("the Karpenter referee runs against the local control plane only")
    why = ek.missing()
    if why:
        unavailable(request.config, f"Karpenter referee: {why}")
    cluster.ensure_namespace(NS)
    cluster.start_scheduler()
    k = ek.Karpenter(cluster.kube, cluster.dir)
    k.install()
    ek.clear(k.api, NS, (E2E_LABEL, POOL))
    k.start()
    try:
        yield k
    finally:
        try:
            ek.clear(k.api, NS, (E2E_LABEL, POOL))
        finally:
            k.stop()


def pod_states(api: ek.Api, names: list[str]) -> list[str | None] | None:
    """Per pod: "bound", "unschedulable" (kube-scheduler said so) or None (not decided yet);
    None when some pod is undecided."""
    pods = {p["metadata"]["name"]: p for p in api.items("pods", NS)}
    states = [pod_state(pods[n]) if n in pods else None for n in names]
    return states if all(states) else None


@pytest.mark.local_only
def test_karpenter_provisions_a_node(karpenter):
    kube = karpenter.kube
    kube.apply(ek.nodepool("smoke", requirements=[{"key": ek.INSTANCE_TYPE, "operator": "In", "values": ["c-4x"]}]))
    wait_for(lambda: ek.nodepools_ready(karpenter.api, ["smoke"]), 30, "NodePool smoke Ready")
    kube.apply(pod_obj("smoke-0", NS, cpu="2", memory="1Gi"))
    wait_for(lambda: pod_states(karpenter.api, ["smoke-0"]) == ["unschedulable"], 30, "kube-scheduler to mark smoke-0 Unschedulable")
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
    ek.clear(karpenter.api, NS, (E2E_LABEL, POOL))


# ---------------------------------------------------------------- the differential

SEED = int(os.environ.get("GANGCHECK_E2E_KARPENTER_SEED", "20261202"))
CONFIGS = int(os.environ.get("GANGCHECK_E2E_KARPENTER_CONFIGS", "50"))
#: Run only these configurations (comma-separated indices; all are still drawn, so each is the
#: same as in a full run): to reproduce one.
ONLY = {int(x) for x in os.environ.get("GANGCHECK_E2E_KARPENTER_ONLY", "").split(",") if x.strip()}
TEAM = "example.com/team"
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
TYPES = [t["name"] for t in ek.CATALOG]


def random_config(rng: random.Random, idx: int) -> dict:
    """NodePools, plain nodes (with bound pods) and a gang of one pod shape, for configuration
    ``idx``. The gang is drawn first; each NodePool is then drawn to suit it with probability 0.6
    (a GPU type for a GPU gang, the gang's custom label, a toleration for its taint), so that
    about half the configurations give Karpenter something to provision."""
    # the gang: n pods of one shape
    n = rng.choice([1, 2, 3, 4, 6, 8])
    if rng.random() < 0.4:
        shape = {"gpus": rng.choice([1, 2, 4, 8]), "cpu": str(rng.choice([4, 8, 30])), "memory": f"{rng.choice([16, 64, 200])}Gi"}
    else:
        shape = {"gpus": 0, "cpu": str(rng.choice([1, 2, 3, 6, 12, 40, 100])), "memory": f"{rng.choice([1, 4, 30, 100])}Gi"}
    sel = {}
    if rng.random() < 0.3:
        sel[TEAM] = rng.choice(["a", "b"])
    if rng.random() < 0.2:
        sel[ek.ZONE] = rng.choice(ek.ZONES)
    if rng.random() < 0.1:
        sel[ek.INSTANCE_TYPE] = rng.choice(TYPES)
    tolerates = rng.random() < 0.5
    tol = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}] if tolerates else None
    gang = [pod_obj(f"k{idx:02d}-g{j}", NS, node_selector=sel or None, tolerations=tol, **shape) for j in range(n)]

    pools, pinned = [], {}
    gpu_types = [t["name"] for t in ek.CATALOG if ek.GPU in t["resources"]]
    for j in range(rng.choice([1, 1, 2])):
        suit = rng.random() < 0.6
        name = f"k{idx:02d}-{j}"
        reqs = [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]
        r = rng.random()
        if r < 0.6:
            t = rng.choice(gpu_types if suit and shape["gpus"] else TYPES)
            reqs.append({"key": ek.INSTANCE_TYPE, "operator": "In", "values": [t]})
            pinned[name] = t
        elif r < 0.85:
            reqs.append({"key": ek.INSTANCE_TYPE, "operator": "In", "values": rng.sample(TYPES, rng.choice([2, 3]))})
        if rng.random() < 0.35:
            reqs.append({"key": ek.ZONE, "operator": "In", "values": rng.sample(list(ek.ZONES), rng.choice([1, 2]))})
        if rng.random() < 0.25:
            reqs.append({"key": ek.CAPACITY_TYPE, "operator": "In", "values": [rng.choice(["spot", "on-demand"])]})
        labels = {}
        if (suit and TEAM in sel) or rng.random() < 0.3:  # a custom label: template label or one-value requirement
            team = sel[TEAM] if suit and TEAM in sel else rng.choice(["a", "b"])
            if rng.random() < 0.5:
                labels[TEAM] = team
            else:
                reqs.append({"key": TEAM, "operator": "In", "values": [team]})
        limits = {}
        if rng.random() < 0.6:
            for res, choices in (("cpu", ["16", "64", "200", "1000"]), ("memory", ["256Gi", "2048Gi", "8192Gi"]),
                                 (ek.GPU, ["8", "16", "32", "64"])):
                if rng.random() < 0.5:
                    limits[res] = rng.choice(choices)
        tainted = rng.random() < (0.6 if suit and tolerates else 0.3 if not suit else 0.0)
        pools.append(ek.nodepool(name, requirements=reqs, labels=labels, taints=[dict(TAINT)] if tainted else None,
                                 limits=limits or None, weight=rng.choice([None, 10, 50])))
    # a system node, as every Karpenter cluster has one (Karpenter itself runs there), tainted
    # like EKS's for critical add-ons; then 0-2 plain nodes the gang may use
    nodes = [node_obj(f"k{idx:02d}-sys", POOL, gpus=0, cpu="2", memory="8Gi",
                      taints=[{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}])]
    bound = []
    for j in range(rng.choice([0, 0, 1, 2])):
        name = f"k{idx:02d}-n{j}"
        gpus = rng.choice([0, 0, 4, 8])
        labels = {ek.ZONE: rng.choice(ek.ZONES)}
        if rng.random() < 0.3:
            labels[TEAM] = rng.choice(["a", "b"])
        nodes.append(node_obj(name, POOL, gpus=gpus, cpu=str(rng.choice([8, 16, 32])), memory=f"{rng.choice([32, 64, 256])}Gi",
                              labels=labels, taints=[dict(TAINT)] if rng.random() < 0.2 else ()))
        if rng.random() < 0.5:
            bound.append(pod_obj(f"{name}-busy", NS, node=name, cpu=str(rng.choice([2, 6])), memory="8Gi",
                                 gpus=rng.choice([0, 2]) if gpus else 0))
    return {"idx": idx, "pools": pools, "pinned": pinned, "nodes": nodes, "bound": bound, "gang": gang}


def as_job(cfg: dict) -> dict:
    """The gang as gangcheck sees it at admission: a batch/v1 Job of ``len(gang)`` such pods."""
    pod = cfg["gang"][0]
    n = len(cfg["gang"])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"k{cfg['idx']:02d}", "namespace": NS},
            "spec": {"parallelism": n, "completions": n, "template": {"spec": pod["spec"]}}}


def gangcheck_verdict(api: ek.Api, cfg: dict):
    """evaluate() on what the API server holds (nodes, pods, NodePools, NodeClaims), with the
    catalog's node shape for each NodePool pinned to one instance type (the policy's pools)."""
    objs = [o for what in ("nodes", "nodepools", "nodeclaims", "pods") for o in api.items(what)]
    snap = build_snapshot(objs, source="e2e-karpenter")
    policy = AutoscalingPolicy(pools=tuple(PolicyPool(name=p, node_shape=ek.node_shape(t)) for p, t in sorted(cfg["pinned"].items())))
    # plainJobsAsGangs: the Job's pods start all or nothing — gangcheck's strictest reading (count
    # bounds prove NeverFits), the one a false NeverFits would come from.
    return evaluate(snap, adapt(as_job(cfg), source="e2e-karpenter"), EngineOptions(plain_jobs_as_gangs=True, autoscaling=policy))


def per_node(alloc: dict, req: dict) -> int:
    """How many pods of requests ``req`` fit a node of allocatable ``alloc`` (scheduler units)."""
    k = int(alloc.get("pods", 110))
    for r, v in req.items():
        if v:
            k = min(k, int(alloc.get(r, 0)) // v)
    return max(k, 0)


def pod_requests(pod: dict) -> dict[str, int]:
    req = pod["spec"]["containers"][0]["resources"]["requests"]
    return {r: parse_quantity(r, v) for r, v in req.items()}


def referee(karpenter, cfg: dict) -> dict:
    """Create the gang; after kube-scheduler decided and Karpenter settled: how many pods were
    bound to existing nodes, the NodeClaims per NodePool, and whether they give every pod a home."""
    kube = karpenter.kube
    kube.apply(cfg["gang"])
    names = [p["metadata"]["name"] for p in cfg["gang"]]
    states = wait_for(lambda: pod_states(karpenter.api, names), 60, "kube-scheduler to decide on the gang")
    pending = [n for n, s in zip(names, states) if s == "unschedulable"]
    claims = karpenter.settle(NS, pending) if pending else karpenter.nodeclaims()
    req = pod_requests(cfg["gang"][0])
    homes = states.count("bound")
    per_pool: dict[str, int] = {}
    for c in claims:
        pool = c["metadata"]["labels"].get(ek.NODEPOOL_LABEL, "")
        per_pool[pool] = per_pool.get(pool, 0) + 1
        alloc = (c.get("status") or {}).get("allocatable") or {}
        if not alloc:  # not launched yet: the catalog's shape of its instance type
            alloc = ek.node_shape(c["metadata"]["labels"][ek.INSTANCE_TYPE])
        else:
            alloc = {r: parse_quantity(r, v) for r, v in alloc.items()}
        homes += per_node(alloc, {**req, "pods": 1})
    return {"bound": states.count("bound"), "pending": len(pending), "nodeclaims": per_pool,
            "provided": homes >= len(names), "over_limits": over_limits(cfg, claims)}


def over_limits(cfg: dict, claims: list[dict]) -> dict[str, list[str]]:
    """NodePool → resources whose limit its NodeClaims' capacity exceeds. Karpenter lets that
    happen: it refuses a NodeClaim only when the pool's usage already exceeds a limit
    (karpenter pkg/controllers/provisioning/provisioner.go ``Create``: ``Limits.ExceededBy`` of
    the current usage), and a simulation counts only launched NodeClaims against the limits
    (pkg/controllers/provisioning/scheduling/scheduler.go: ``remainingResources`` starts from
    ``spec.limits`` minus the state nodes' ``Capacity()``, empty until a NodeClaim launches), so a
    pass that runs while NodeClaims of the previous one are launching overshoots."""
    out = {}
    for pool in cfg["pools"]:
        name, limits = pool["metadata"]["name"], pool["spec"].get("limits") or {}
        used: dict[str, int] = {}
        for c in claims:
            if c["metadata"]["labels"].get(ek.NODEPOOL_LABEL) != name:
                continue
            cap = (c.get("status") or {}).get("capacity") or next(
                t["resources"] for t in ek.CATALOG if t["name"] == c["metadata"]["labels"].get(ek.INSTANCE_TYPE))
            for r, v in cap.items():
                used[r] = used.get(r, 0) + parse_quantity(r, v)
        over = sorted(r for r, v in limits.items() if used.get(r, 0) > parse_quantity(r, v))
        if over:
            out[name] = over
    return out


def compare(decision, ref: dict, pinned: dict) -> tuple[str, str]:
    """("agree" | "disagree" | "documented" | "false-neverfits", why); "documented": Karpenter
    went past a NodePool limit (``over_limits``), so its result proves nothing about the limit."""
    v = decision.verdict
    nsu = next((f for f in decision.findings if f.code == "NeedsScaleUp"), None)
    if v == NEVER_FITS and ref["provided"] and ref["over_limits"]:
        return "documented", f"Karpenter exceeded the limits of {ref['over_limits']} (see over_limits)"
    if v == NEVER_FITS:
        return ("false-neverfits", "gangcheck NeverFits, Karpenter provided for the whole gang") if ref["provided"] else \
               ("agree", "NeverFits; Karpenter provided no home for the whole gang")
    if not ref["provided"]:
        return "disagree", f"gangcheck {v}, Karpenter provided for {ref['bound']} bound + NodeClaims {ref['nodeclaims']} only"
    if not ref["nodeclaims"]:
        return ("agree", "fits the existing nodes; no NodeClaim") if v == FITS else \
               ("disagree", f"gangcheck {v} but the gang fit the existing nodes")
    if nsu is None:
        return "disagree", f"gangcheck {v} without NeedsScaleUp; Karpenter created NodeClaims {ref['nodeclaims']}"
    said = {p["name"]: p.get("nodes_needed") for p in nsu.data.get("pools", []) if p.get("pods")}
    for pool, count in sorted(ref["nodeclaims"].items()):
        if pool in ref["over_limits"]:
            return "documented", f"Karpenter exceeded the limits of {ref['over_limits']}; NeedsScaleUp {said}"
        if pool in pinned and said.get(pool) != count:
            return "disagree", f"NodePool {pool}: NeedsScaleUp nodes_needed {said.get(pool)}, Karpenter created {count}"
    for pool, need in sorted(said.items()):
        if pool in pinned and need and pool not in ref["nodeclaims"]:
            return "disagree", f"NodePool {pool}: NeedsScaleUp nodes_needed {need}, Karpenter created none"
    return "agree", f"NeedsScaleUp {said}; Karpenter created {ref['nodeclaims']}"


def known_difference(decision, cfg: dict) -> str | None:
    """Why gangcheck answers Waits where Karpenter provides nothing, when that is by design:
    gangcheck knows no node shape for a NodePool not pinned to one instance type, and no
    instance type's offerings (zones, capacity types) even for a pinned one. None otherwise."""
    nsu = next((f for f in decision.findings if f.code == "NeedsScaleUp"), None)
    if nsu is None:
        return None
    rows = [p for p in nsu.data.get("pools", []) if p.get("pods")]
    if any(p.get("nodes_needed") is None for p in rows):
        return "shape unknown to gangcheck (NodePool not pinned to one instance type)"
    sel = (cfg["gang"][0]["spec"].get("nodeSelector") or {})
    for p in rows:
        t = cfg["pinned"].get(p["name"])
        pool = next(x for x in cfg["pools"] if x["metadata"]["name"] == p["name"])
        zones = ek.type_zones(t) if t else set(ek.ZONES)
        for r in pool["spec"]["template"]["spec"]["requirements"]:
            if r["key"] == ek.ZONE:
                zones &= set(r["values"])
        if ek.ZONE in sel:
            zones &= {sel[ek.ZONE]}
        if not zones:
            return f"instance type {t} is not offered in the zones NodePool {p['name']} and the gang allow (offerings unknown to gangcheck)"
    return None


@pytest.mark.local_only
def test_karpenter_differential(karpenter):
    """≥ 50 seeded random configurations (``GANGCHECK_E2E_KARPENTER_SEED``/``_CONFIGS``):
    NodePools (instance-type, zone, capacity-type and custom-label requirements, template labels
    and taints, cpu/memory/GPU limits, weights), plain nodes with bound pods, and a gang of one pod
    shape. gangcheck's verdict on the snapshot of what the API server holds before the gang
    exists (its admission moment) is compared with what Karpenter does once the gang's pods are
    pending: the NodeClaims it creates, and whether they (with the nodes kube-scheduler bound pods
    to) give every pod a home. F = NeverFits while Karpenter provided: must be 0. Where a
    NodePool is pinned to one instance type (its shape known to both), NeedsScaleUp's
    ``nodes_needed`` must equal the NodeClaims Karpenter created for it. Every record goes to
    ``<workdir>/karpenter-diff.json``."""
    kube = karpenter.kube
    rng = random.Random(SEED)
    records = []
    t0 = time.monotonic()
    for idx in range(CONFIGS):
        cfg = random_config(rng, idx)
        if ONLY and idx not in ONLY:
            continue
        t = [time.monotonic()]
        ek.clear(karpenter.api, NS, (E2E_LABEL, POOL))
        t.append(time.monotonic())
        karpenter.api.create_nodes(cfg["nodes"])
        if cfg["bound"]:
            kube.apply(cfg["bound"])
        kube.apply(cfg["pools"])
        names = [p["metadata"]["name"] for p in cfg["pools"]]
        wait_for(lambda: ek.nodepools_ready(karpenter.api, names), 30, f"NodePools {names} Ready")
        t.append(time.monotonic())
        decision = gangcheck_verdict(karpenter.api, cfg)
        t.append(time.monotonic())
        ref = referee(karpenter, cfg)
        t.append(time.monotonic())
        outcome, why = compare(decision, ref, cfg["pinned"])
        if outcome == "disagree" and not ref["provided"]:
            why += "; " + (known_difference(decision, cfg) or "not explained")
        nsu = next((f for f in decision.findings if f.code == "NeedsScaleUp"), None)
        records.append({"config": idx, "seconds": {k: round(b - a, 2) for k, a, b in zip(
                            ("clear", "create", "gangcheck", "karpenter"), t, t[1:])}, "outcome": outcome, "why": why, "verdict": decision.verdict,
                        "reasons": decision.reasons, "message": decision.message,
                        "needs_scale_up": dict(nsu.data) if nsu else None, "karpenter": ref,
                        "pools": [p["spec"] | {"name": p["metadata"]["name"]} for p in cfg["pools"]],
                        "pinned": cfg["pinned"], "nodes": [n["metadata"] | {"status": st["status"]} for n, st in cfg["nodes"]],
                        "bound": [p["spec"] for p in cfg["bound"]], "gang": {"pods": len(cfg["gang"]), "spec": cfg["gang"][0]["spec"]}})
    ek.clear(karpenter.api, NS, (E2E_LABEL, POOL))
    out = karpenter.work / "karpenter-diff.json"
    out.write_text(json.dumps({"seed": SEED, "configs": records}, indent=1, default=str))
    n = len(records)
    agree = sum(r["outcome"] == "agree" for r in records)
    false_nf = [r for r in records if r["outcome"] == "false-neverfits"]
    summary = (f"referee karpenter: {n} configs, {agree} agree, {n - agree} disagree, {len(false_nf)} false NeverFits"
               f" (seed {SEED}, {time.monotonic() - t0:.0f}s; details: {out})")
    SUMMARY.append(summary)
    print("\n[e2e] " + summary)
    assert n == (len(ONLY & set(range(CONFIGS))) if ONLY else CONFIGS)
    counts = [r for r in records if r["outcome"] == "disagree" and r["why"].startswith("NodePool ")]
    bad = false_nf + counts
    if bad:
        pytest.fail(f"{summary}\n" + "\n".join(f"config {r['config']}: {r['why']} — gangcheck: {r['message'][:300]}"
                                                for r in bad), pytrace=False)
