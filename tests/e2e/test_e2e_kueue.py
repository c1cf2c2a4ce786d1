"""Kueue as the referee of gangcheck's Kueue quota semantics (issue #11, differential 1): the real
Kueue manager (e2e_kueue.py) against the tier's kube-apiserver.

``test_kueue_admits_and_refuses``: one ClusterQueue; a Workload within quota is admitted, one
above its maximum stays pending with Kueue's "maximum capacity" message (the plumbing works).

``test_kueue_differential``: see its docstring.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections import Counter

import pytest

import e2e_kueue as eq
from e2e_harness import unavailable
from e2e_controlplane import GPU, SUMMARY, wait_for

from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.engine.evaluate import evaluate
from webhook.engine.options import EngineOptions
from webhook.engine.quantity import parse_quantity

POOL_LABEL = "example.com/pool"
TEAM = "example.com/team"


@pytest.fixture(scope="module")
def kueue(cluster, request):
    if cluster.external:  # it would install Kueue's CRDs and a second Kueue into someone's cluster
        pytest.skip("the Kueue referee runs against the local control plane only")
    why = eq.missing()
    if why:
        unavailable(request.config, f"Kueue referee: {why}")
    k = eq.Kueue(cluster.kube, cluster.dir)
    k.install()
    k.start()
    created: list[tuple[str, str]] = []  # (resource, name) of cluster-scoped objects, namespaces
    k.created = created
    try:
        yield k
    finally:
        try:
            _cleanup(k, created)
        finally:
            k.stop()


def _cleanup(k: eq.Kueue, created: list[tuple[str, str]]) -> None:
    """Remove what the referee created while Kueue still runs (it lifts its finalizers): the
    Workloads and LocalQueues of its namespaces, then ClusterQueues, Cohorts, ResourceFlavors,
    then the namespaces (which stay Terminating: no namespace controller runs in this tier)."""
    from concurrent.futures import ThreadPoolExecutor

    by_res: dict[str, list[str]] = {}
    for res, name in created:
        by_res.setdefault(res, []).append(name)
    namespaces = by_res.get("namespace") or []
    paths = [eq.PATHS[w].replace("/v1beta2/", f"/v1beta2/namespaces/{ns}/") for ns in namespaces for w in ("workloads", "localqueues")]
    paths += [f"{eq.PATHS[w]}/{n}" for w, res in (("clusterqueues", "clusterqueues.kueue.x-k8s.io"), ("cohorts", "cohorts.kueue.x-k8s.io"),
                                                  ("resourceflavors", "resourceflavors.kueue.x-k8s.io")) for n in by_res.get(res) or []]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(k.api.delete, paths))
    names = set(by_res.get("clusterqueues.kueue.x-k8s.io") or []) | set(by_res.get("resourceflavors.kueue.x-k8s.io") or [])
    try:
        wait_for(lambda: not any(o["metadata"]["name"] in names for w in ("clusterqueues", "resourceflavors") for o in k.api.list(w)),
                 60, "the referee's ClusterQueues and ResourceFlavors to go", 0.5)
    except AssertionError as exc:
        print(f"[kueue referee] cleanup: {exc}")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(k.api.delete, [f"/api/v1/namespaces/{ns}" for ns in namespaces]))


# ---------------------------------------------------------------- objects (kueue.x-k8s.io/v1beta2)


def flavor(name: str, labels: dict, taints: list | None = None) -> dict:
    spec: dict = {"nodeLabels": dict(labels)}
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": eq.KV, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def _quota(res: str, q: dict) -> dict:
    out = {"name": res, "nominalQuota": str(q["nominal"])}
    if q.get("borrowingLimit") is not None:
        out["borrowingLimit"] = str(q["borrowingLimit"])
    if q.get("lendingLimit") is not None:
        out["lendingLimit"] = str(q["lendingLimit"])
    return out


def resource_groups(quotas: dict, split: list[str] | None = None) -> list[dict]:
    """``quotas``: flavor → resource → {nominal, borrowingLimit, lendingLimit}, in flavor order;
    one resource group covering cpu and GPUs, or with ``split`` (the flavors of a cpu group; the
    others make a GPU group) two."""
    if split is None:
        groups = [(("cpu", GPU), list(quotas))]
    else:
        groups = [(("cpu",), [f for f in quotas if f in split]), ((GPU,), [f for f in quotas if f not in split])]
    return [{"coveredResources": list(cov), "flavors": [{"name": f, "resources": [_quota(r, quotas[f][r]) for r in cov]} for f in fl]}
            for cov, fl in groups]


def cluster_queue(name: str, quotas: dict, cohort: str | None, split: list[str] | None = None) -> dict:
    spec: dict = {"namespaceSelector": {}, "resourceGroups": resource_groups(quotas, split)}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": eq.KV, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str | None, quotas: dict | None) -> dict:
    spec: dict = {}
    if parent:
        spec["parentName"] = parent
    if quotas:
        spec["resourceGroups"] = resource_groups(quotas)
    return {"apiVersion": eq.KV, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cq: str) -> dict:
    return {"apiVersion": eq.KV, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq}}


def pod_template(ps: dict) -> dict:
    req = {"cpu": str(ps["cpu"])}
    lim = {}
    if ps["gpu"]:
        req[GPU] = lim[GPU] = str(ps["gpu"])
    c = {"name": "main", "image": "registry.example.com/train:1", "resources": {"requests": req}}
    if lim:
        c["resources"]["limits"] = lim
    spec: dict = {"restartPolicy": "Never", "containers": [c]}
    if ps.get("selector"):
        spec["nodeSelector"] = dict(ps["selector"])
    if ps.get("tolerations"):
        spec["tolerations"] = [dict(t) for t in ps["tolerations"]]
    return {"spec": spec}


def workload(namespace: str, name: str, queue: str, pod_sets: list[dict]) -> dict:
    return {"apiVersion": eq.KV, "kind": "Workload", "metadata": {"name": name, "namespace": namespace},
            "spec": {"queueName": queue, "podSets": [{"name": ps["name"], "count": ps["count"], "template": pod_template(ps)}
                                                      for ps in pod_sets]}}


def as_jobset(wl: dict) -> dict:
    """The Workload's pod sets as gangcheck sees a gang at admission: a JobSet labelled for the
    Workload's LocalQueue, one replicatedJob per pod set of ``count`` pods (Kueue's JobSet
    integration makes one pod set per replicatedJob of replicas × parallelism pods)."""
    rjs = []
    for ps in wl["spec"]["podSets"]:
        n = ps["count"]
        rjs.append({"name": ps["name"], "replicas": 1, "template": {"spec": {
            "parallelism": n, "completions": n, "template": ps["template"]}}})
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": wl["metadata"]["name"], "namespace": wl["metadata"]["namespace"],
                         "labels": {"kueue.x-k8s.io/queue-name": wl["spec"]["queueName"]}},
            "spec": {"replicatedJobs": rjs}}


# ---------------------------------------------------------------- the smoke test


@pytest.mark.local_only
def test_kueue_admits_and_refuses(kueue):
    api = kueue.api
    ns = "kq-smoke"
    for obj, rec in ((flavor("kq-smoke-f", {POOL_LABEL: "smoke"}), ("resourceflavors.kueue.x-k8s.io", "kq-smoke-f")),
                     (cluster_queue("kq-smoke-cq", {"kq-smoke-f": {"cpu": {"nominal": 8}, GPU: {"nominal": 4}}}, None),
                      ("clusterqueues.kueue.x-k8s.io", "kq-smoke-cq")),
                     ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, ("namespace", ns))):
        api.create(obj)
        kueue.created.append(rec)
    api.create(local_queue(ns, "q", "kq-smoke-cq"))
    wait_for(lambda: _active(api, {"kq-smoke-cq"}), 60, "ClusterQueue kq-smoke-cq Active")
    api.create(workload(ns, "fits", "q", [{"name": "main", "count": 2, "cpu": 1, "gpu": 2}]))
    api.create(workload(ns, "never", "q", [{"name": "main", "count": 3, "cpu": 1, "gpu": 2}]))

    def decided():
        wls = {w["metadata"]["name"]: eq.workload_state(w) for w in api.list("workloads") if w["metadata"]["namespace"] == ns}
        return wls if all(wls.get(n) for n in ("fits", "never")) else None
    states = wait_for(decided, 60, "Kueue to decide both Workloads", 0.2)
    assert states["fits"] == ("admitted", ""), states
    kind, msg = states["never"]
    assert kind == "pending", states
    assert "insufficient quota for nvidia.com/gpu in flavor kq-smoke-f" in msg and "> maximum capacity (4)" in msg, msg
    assert eq.classify(msg) == "NeverFits"


def _active(api: eq.Api, names: set[str]) -> bool:
    seen = {c["metadata"]["name"]: c for c in api.list("clusterqueues") if c["metadata"]["name"] in names}
    return len(seen) == len(names) and all((eq.condition(c, "Active") or {}).get("status") == "True" for c in seen.values())


# ---------------------------------------------------------------- the differential

SEED = int(os.environ.get("GANGCHECK_E2E_KUEUE_SEED", "20261202"))
CONFIGS = int(os.environ.get("GANGCHECK_E2E_KUEUE_CONFIGS", "200"))
#: Run only these configurations (comma-separated indices; all are still drawn, so each is the
#: same as in a full run): to reproduce one.
ONLY = {int(x) for x in os.environ.get("GANGCHECK_E2E_KUEUE_ONLY", "").split(",") if x.strip()}
#: Prior Workloads per configuration at most (created one wave at a time, waited on, the ones
#: Kueue leaves pending deleted: what remains is admitted usage).
PRIOR_MAX = 3

#: Known differences: (gangcheck verdict, Kueue verdict) → (does this record show it, why, with
#: Kueue's source). A disagreement that matches counts as documented, not as a failure; a false
#: NeverFits never does.
KNOWN: dict[tuple[str, str], tuple] = {
    ("NoMatch", "Never"): (
        lambda rec: True,
        "a pod set no flavor matches: gangcheck reports NoMatchingFlavor, a Waits finding (no denial), and proves no "
        "maximum for a blocked gang; Kueue never admits it either (it stops at the first pod set it cannot assign, "
        "pkg/scheduler/flavorassigner/flavorassigner.go assignFlavors `if atLeastOnePodsAssignmentFailed { return "
        "assignment }`, so its message may name an earlier pod set's maximum instead)."),
    ("Waits", "Never"): (
        lambda rec: re.search(r"previously considered podsets requests \((?!0\))", rec["kueue_empty_message"]) is not None,
        "Kueue assigns pod sets greedily in order, each against the usage the earlier ones were given "
        "(flavorassigner.go assignFlavors passes assignment.Usage.Quota to findFlavorForPodSets: \"previously "
        "considered podsets requests (X) + current podset request (Y) > maximum capacity (Z)\"): an earlier pod set "
        "takes the only flavor a later one may use although another flavor would hold it. gangcheck searches every "
        "assignment (kueue_admit._assign_ever) and, finding one within the maxima, says Waits, never NeverFits."),
}


def _q(rng: random.Random, res: str, cohort: bool, lend_ok: bool = True) -> dict:
    nominal = rng.choice([0, 1, 2, 4, 4, 6, 8, 12, 16]) if res == GPU else rng.choice([0, 2, 4, 8, 16, 32])
    q: dict = {"nominal": nominal}
    if cohort:
        r = rng.random()
        if r < 0.3:
            q["borrowingLimit"] = rng.choice([0, 1, 2, 4, 8]) if res == GPU else rng.choice([0, 4, 16])
        if lend_ok and rng.random() < 0.3:
            q["lendingLimit"] = rng.randint(0, nominal)
    return q


def random_config(rng: random.Random, idx: int) -> dict:
    """Flavors, Cohorts, ClusterQueues, their LocalQueues, prior Workloads and a probe, all named
    ``k<idx>-…`` (namespace ``kq-k<idx>``) so configurations never share an object."""
    p = f"k{idx:03d}"
    ns = f"kq-{p}"
    flavors = []
    for j in range(rng.choice([1, 1, 2, 2, 3])):
        labels = {POOL_LABEL: f"{p}-f{j}"}
        if rng.random() < 0.4:
            labels[TEAM] = rng.choice(["a", "b"])
        taints = [{"key": "dedicated", "value": f"f{j}", "effect": rng.choice(["NoSchedule", "NoExecute"])}] if rng.random() < 0.3 else None
        flavors.append({"name": f"{p}-f{j}", "labels": labels, "taints": taints})
    n_cq = rng.choice([1, 2, 2, 3, 3, 4])
    shape = rng.choice(["none", "flat", "flat", "object", "tree", "tree"]) if n_cq > 1 else rng.choice(["none", "object", "tree"])
    cohorts: list[dict] = []  # {name, parent, quotas|None}
    cq_cohort: list[str | None] = [None] * n_cq
    if shape == "flat":
        cq_cohort = [f"{p}-co"] * n_cq  # a cohort no object defines
    elif shape == "object":
        cohorts.append({"name": f"{p}-co", "parent": None, "quota": rng.random() < 0.7})
        cq_cohort = [f"{p}-co"] * n_cq
    elif shape == "tree":  # a root with its own quota maybe, two child cohorts (spec.parentName)
        cohorts.append({"name": f"{p}-root", "parent": None, "quota": rng.random() < 0.6})
        cohorts.append({"name": f"{p}-ca", "parent": f"{p}-root", "quota": rng.random() < 0.4})
        cohorts.append({"name": f"{p}-cb", "parent": f"{p}-root", "quota": rng.random() < 0.4})
        cq_cohort = [rng.choice([f"{p}-ca", f"{p}-cb", f"{p}-root"]) for _ in range(n_cq)]
    fnames = [f["name"] for f in flavors]
    for c in cohorts:
        if c["quota"]:
            fl = rng.sample(fnames, rng.randint(1, len(fnames)))
            c["quotas"] = {f: {r: _q(rng, r, c["parent"] is not None) for r in ("cpu", GPU)} for f in fl}
        else:
            c["quotas"] = None
    cqs = []
    for j in range(n_cq):
        fl = rng.sample(fnames, rng.randint(1, len(fnames)))
        quotas = {f: {r: _q(rng, r, cq_cohort[j] is not None) for r in ("cpu", GPU)} for f in fl}
        # two resource groups (cpu in some flavors, GPUs in the others) for some queues
        split = rng.sample(fl, rng.randint(1, len(fl) - 1)) if len(fl) > 1 and rng.random() < 0.35 else None
        cqs.append({"name": f"{p}-cq{j}", "cohort": cq_cohort[j], "quotas": quotas, "split": split})

    def pod_sets(n: int, prior: bool) -> list[dict]:
        out = []
        for j in range(n):
            ps = {"name": f"ps{j}", "count": rng.choice([1, 2, 2, 3, 4]) if prior else rng.choice([1, 1, 2, 3, 4]),
                  "gpu": rng.choice([0, 1, 2, 2, 4]) if prior else rng.choice([0, 1, 1, 2, 2, 4, 8]),
                  "cpu": rng.choice([1, 2, 4]) if prior else rng.choice([1, 1, 2, 4, 8])}
            if rng.random() < 0.12:
                f = rng.choice(flavors)
                key = rng.choice(sorted(f["labels"]))
                ps["selector"] = {key: f["labels"][key] if rng.random() < 0.8 else "other"}
            tol = [{"key": "dedicated", "operator": "Exists"}] if rng.random() < 0.85 else []
            if tol:
                ps["tolerations"] = tol
            out.append(ps)
        return out
    priors = []
    for j in range(rng.randint(0, PRIOR_MAX)):
        cq = rng.choice(cqs)["name"]
        priors.append({"name": f"prior{j}", "queue": cq, "pod_sets": pod_sets(1, True)})
    probe = {"name": "probe", "queue": rng.choice(cqs)["name"], "pod_sets": pod_sets(rng.choice([1, 1, 2, 3]), False)}
    return {"idx": idx, "ns": ns, "flavors": flavors, "cohorts": cohorts, "cqs": cqs, "priors": priors, "probe": probe,
            "shape": shape}


def objects(cfg: dict) -> list[dict]:
    """Everything a configuration creates before its Workloads, in dependency order."""
    out = [flavor(f["name"], f["labels"], f["taints"]) for f in cfg["flavors"]]
    out += [cohort(c["name"], c["parent"], c["quotas"]) for c in cfg["cohorts"]]
    out += [cluster_queue(c["name"], c["quotas"], c["cohort"], c.get("split")) for c in cfg["cqs"]]
    out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cfg["ns"]}})
    out += [local_queue(cfg["ns"], c["name"], c["name"]) for c in cfg["cqs"]]
    return out


def _record(obj: dict) -> tuple[str, str] | None:
    res = {"ResourceFlavor": "resourceflavors.kueue.x-k8s.io", "Cohort": "cohorts.kueue.x-k8s.io",
           "ClusterQueue": "clusterqueues.kueue.x-k8s.io", "Namespace": "namespace"}.get(obj["kind"])
    return (res, obj["metadata"]["name"]) if res else None


def _workloads(api: eq.Api, namespaces: set[str]) -> dict[tuple[str, str], dict]:
    return {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in api.list("workloads")
            if w["metadata"]["namespace"] in namespaces}


def _decide(api: eq.Api, keys: list[tuple[str, str]], namespaces: set[str], timeout: float, what: str) -> dict:
    """Wait until Kueue has decided each Workload of ``keys``; {key: (state, message)}."""
    def all_decided():
        wls = _workloads(api, namespaces)
        out = {k: eq.workload_state(wls[k]) if k in wls else None for k in keys}
        return out if all(out.values()) else None
    return wait_for(all_decided, timeout, what, 0.3)


def _usage_settled(api: eq.Api, cq_names: set[str], namespaces: set[str]) -> bool:
    """Every ClusterQueue's status (what gangcheck reads: flavorsReservation) equals the sum of
    the quota its admitted Workloads hold (their status.admission), and counts them."""
    want: dict[str, dict[tuple[str, str], float]] = {n: {} for n in cq_names}
    count = {n: 0 for n in cq_names}
    for w in _workloads(api, namespaces).values():
        adm = (w.get("status") or {}).get("admission")
        if not adm or eq.workload_state(w) != ("admitted", ""):
            continue
        cq = adm["clusterQueue"]
        count[cq] += 1
        for psa in adm.get("podSetAssignments") or []:
            for r, f in (psa.get("flavors") or {}).items():
                q = (psa.get("resourceUsage") or {}).get(r, "0")
                want[cq][(f, r)] = want[cq].get((f, r), 0) + parse_quantity(r, q)
    for c in api.list("clusterqueues"):
        n = c["metadata"]["name"]
        if n not in cq_names:
            continue
        st = c.get("status") or {}
        if int(st.get("reservingWorkloads") or 0) != count[n]:
            return False
        got = {(fu["name"], ru["name"]): parse_quantity(ru["name"], ru.get("total", "0"))
               for fu in st.get("flavorsReservation") or [] for ru in fu.get("resources") or []}
        for k, v in want[n].items():
            if got.get(k, 0) != v:
                return False
        for k, v in got.items():
            if v and want[n].get(k, 0) != v:
                return False
    return True


def gangcheck_quota(snap, wl: dict) -> tuple[str, list[str]]:
    """gangcheck's quota verdict on the probe Workload (as a JobSet, ``as_jobset``): the quota
    layer's findings of ``evaluate``'s Decision, not the overall verdict (no Node objects exist,
    so node fit is NeverFits everywhere and must not mask quota). ExceedsMaxQuota → NeverFits,
    NoMatchingFlavor → NoMatch, WaitingForQuota or any other Waits finding of the quota layer →
    Waits, none → Fits."""
    d = evaluate(snap, adapt(as_jobset(wl), source="e2e-kueue"), EngineOptions())
    codes = [f.code for f in d.findings]
    quota_codes = [c for c in codes if c in ("ExceedsMaxQuota", "WaitingForQuota", "NoMatchingFlavor", "ResourceNotCovered",
                                              "LocalQueueNotFound", "ClusterQueueNotFound", "ClusterQueueStopped",
                                              "CohortHasCycle", "KueueNotInSnapshot")]
    if "ExceedsMaxQuota" in quota_codes:
        return "NeverFits", codes
    if "NoMatchingFlavor" in quota_codes:
        return "NoMatch", codes
    if quota_codes:
        return "Waits", codes
    return "Fits", codes


@pytest.mark.local_only
def test_kueue_differential(kueue, tmp_path_factory):
    """≥ 200 seeded random configurations (``GANGCHECK_E2E_KUEUE_SEED``/``_CONFIGS``), all at
    once, each in its own names: 1–3 ResourceFlavors (nodeLabels, some tainted), 1–4
    ClusterQueues with nominalQuota / borrowingLimit / lendingLimit per flavor, alone, in an
    implicit cohort, in a Cohort object with its own quota, or in a two-level Cohort tree
    (spec.parentName); 0–3 prior Workloads (one wave at a time; the ones Kueue leaves pending are
    deleted, so what remains is admitted usage); then a probe Workload of 1–3 pod sets.

    The snapshot for gangcheck is read back from the API server after the prior Workloads have
    settled (their usage in every ClusterQueue's status) and before any probe exists. Each probe
    is then compared: Kueue admits it (QuotaReserved=True) ⟺ gangcheck's quota layer Fits;
    pending (with "insufficient unused quota") but admitted once nothing else in its
    configuration holds quota ⟺ Waits; pending even then (a "> maximum capacity" or flavor
    mismatch message, ``e2e_kueue.classify``, kept in the record) ⟺ NeverFits. Fails on any
    false NeverFits (gangcheck NeverFits where Kueue admits or would, alone) and on any
    disagreement ``KNOWN`` does not document."""
    api = kueue.api
    t0 = time.monotonic()
    rng = random.Random(SEED)
    cfgs = [random_config(rng, i) for i in range(CONFIGS)]
    if ONLY:
        cfgs = [c for c in cfgs if c["idx"] in ONLY]
    namespaces = {c["ns"] for c in cfgs}
    cq_names = {q["name"] for c in cfgs for q in c["cqs"]}
    objs = [o for c in cfgs for o in objects(c)]
    kueue.created.extend(r for r in map(_record, objs) if r)
    api.create_many([o for o in objs if o["kind"] != "LocalQueue"])  # namespaces before what lives in them
    api.create_many([o for o in objs if o["kind"] == "LocalQueue"])
    wait_for(lambda: _active(api, cq_names), 120, f"{len(cq_names)} ClusterQueues Active", 0.5)
    t_setup = time.monotonic() - t0

    # prior Workloads, one wave at a time
    admitted_priors = 0
    for wave in range(PRIOR_MAX):
        keys, wls = [], []
        for c in cfgs:
            if wave < len(c["priors"]):
                pr = c["priors"][wave]
                wls.append(workload(c["ns"], pr["name"], pr["queue"], pr["pod_sets"]))
                keys.append((c["ns"], pr["name"]))
        api.create_many(wls)
        if not keys:
            continue
        states = _decide(api, keys, namespaces, 90, f"Kueue to decide {len(keys)} prior Workloads (wave {wave})")
        for (ns, name), (state, _) in states.items():
            if state == "admitted":
                admitted_priors += 1
            else:
                api.delete_workload(ns, name)
    wait_for(lambda: all(k[1].startswith("probe") or eq.workload_state(w) == ("admitted", "")
                         for k, w in _workloads(api, namespaces).items()), 60, "the pending prior Workloads to go", 0.3)
    wait_for(lambda: _usage_settled(api, cq_names, namespaces), 60, "ClusterQueue status to count the admitted Workloads", 0.3)
    t_priors = time.monotonic() - t0

    # gangcheck's snapshot: the Kueue objects as the API server holds them now
    objs = [o for what in ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloads") for o in api.list(what)]
    snap = build_snapshot(objs, source="e2e-kueue")
    probes = {c["idx"]: workload(c["ns"], c["probe"]["name"], c["probe"]["queue"], c["probe"]["pod_sets"]) for c in cfgs}
    ours = {i: gangcheck_quota(snap, wl) for i, wl in probes.items()}

    api.create_many(list(probes.values()))
    keys = [(c["ns"], "probe") for c in cfgs]
    _decide(api, keys, namespaces, 90, f"Kueue to decide {len(keys)} probes")
    # read once more: a pending probe's message is rewritten on each retry (the last one counts)
    now = {k: eq.workload_state(w) for k, w in _workloads(api, namespaces).items() if k[1] == "probe"}
    t_probes = time.monotonic() - t0

    # Ever: a pending probe's message cannot tell "waits" from "never". fitsResourceQuota stops
    # at the first resource that does not fit (flavorassigner.go findFlavorForPodSets: "The
    # flavor doesn't fit, no need to check other resources"), in Go's random map order, and
    # "insufficient unused quota" is itself a noFit when the request is above nominal and
    # nothing can be reclaimed — so a pod set far above its GPU maximum may be reported only as
    # "1 more needed" of cpu. What Kueue does with the same Workload once nothing else holds
    # quota tells: for each configuration whose probe is pending, every Workload is deleted and,
    # once its ClusterQueues hold nothing, the same pod sets are submitted again (probe-empty):
    # admitted → Waits; pending → never (there, with no usage, Available = PotentialAvailable
    # and the message is the maximum's, or a flavor mismatch).
    pending = [c for c in cfgs if now[(c["ns"], "probe")][0] != "admitted"]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: api.delete_workload(*k), [(c["ns"], n) for c in pending
                                                           for n in [pr["name"] for pr in c["priors"]] + ["probe"]]))
    pend_ns = {c["ns"] for c in pending}
    pend_cqs = {q["name"] for c in pending for q in c["cqs"]}
    wait_for(lambda: not _workloads(api, pend_ns), 90, f"the Workloads of {len(pending)} configurations to go", 0.3)
    wait_for(lambda: _usage_settled(api, pend_cqs, pend_ns), 60, "their ClusterQueues to hold nothing", 0.3)
    api.create_many([workload(c["ns"], "probe-empty", c["probe"]["queue"], c["probe"]["pod_sets"]) for c in pending])
    ever = _decide(api, [(c["ns"], "probe-empty") for c in pending], pend_ns, 90,
                   f"Kueue to decide {len(pending)} probes with nothing else admitted") if pending else {}
    ever = {k: eq.workload_state(w) for k, w in _workloads(api, pend_ns).items() if k in ever} or ever
    t_ever = time.monotonic() - t0

    records, agree, disagree, false_never, undocumented = [], 0, 0, 0, []
    for c in cfgs:
        state, msg = now[(c["ns"], "probe")]
        empty_msg = ""
        if state == "admitted":
            theirs = "Fits"
        else:
            e_state, empty_msg = ever[(c["ns"], "probe-empty")]
            # never, even alone: the message's kind (a maximum, or only flavor mismatches) is kept
            # for the record but not compared: a retry starts at the flavor after the last one
            # tried (FlavorAssignmentAttempts / LastAssignment.NextFlavorToTryForPodSetResource)
            # and its message names only the flavors it tried then.
            theirs = "Waits" if e_state == "admitted" else "Never"
        mine, codes = ours[c["idx"]]
        ok = mine == theirs or (mine == "NeverFits" and theirs == "Never")
        fn = mine == "NeverFits" and theirs in ("Fits", "Waits")
        rec = {"idx": c["idx"], "gangcheck": mine, "kueue": theirs, "kueue_message": msg, "kueue_empty_message": empty_msg,
               "kueue_empty_kind": eq.classify(empty_msg) if empty_msg else "", "codes": codes, "config": c}
        records.append(rec)
        if ok:
            agree += 1
            continue
        disagree += 1
        false_never += fn
        known = KNOWN.get((mine, theirs))
        rec["documented"] = bool(known and not fn and known[0](rec))
        if rec["documented"]:
            rec["why"] = known[1]
        else:
            undocumented.append(rec)
    out = tmp_path_factory.mktemp("kueue-referee") / "configs.json"
    out.write_text(json.dumps({"seed": SEED, "configs": records}, indent=1, default=str))
    summary = (f"referee kueue: {len(cfgs)} configs, {agree} agree, {disagree} disagree, {false_never} false NeverFits"
               f" (seed {SEED}, {time.monotonic() - t0:.0f} s)")
    SUMMARY.append(summary)
    print(f"\n{summary}; setup {t_setup:.0f} s, priors {t_priors - t_setup:.0f} s ({admitted_priors} admitted), "
          f"probes {t_probes - t_priors:.0f} s, ever {t_ever - t_probes:.0f} s; kueue verdicts "
          f"{ {v: sum(1 for r in records if r['kueue'] == v) for v in ('Fits', 'Waits', 'Never')} }; "
          f"documented {dict(Counter((r['gangcheck'], r['kueue']) for r in records if r.get('documented')))}; "
          f"details: {out}")
    assert not undocumented, "\n\n".join(
        f"config {r['idx']}: gangcheck {r['gangcheck']} {r['codes']}, Kueue {r['kueue']}: now {r['kueue_message']!r}, "
        f"with nothing else admitted {r['kueue_empty_message']!r}\n"
        f"{json.dumps(r['config'], default=str)}" for r in undocumented[:8])
