"""The job controllers as referees of gangcheck's gang sizes (issue #11, part 4; e2e_controllers.py).

JobSet, LeaderWorkerSet and the MPI operator run as processes on a control plane of this tier with
kube-controller-manager (Jobs and StatefulSets create pods) and gangcheck registered as the tier
registers it. Each top-level object is created in a namespace of its own; what the controllers
create from it is read back and compared with gangcheck's view of the object as stored (after the
controllers' defaulting webhooks):

* gang size: Σ of gangcheck's pod sets' replicas (``webhook.adapters.adapt``) = the pods the
  controllers make: JobSet → Σ over its child Jobs of the pods each runs at once
  (``batch.job_pod_count``: parallelism capped by completions) = the pods the Job controller
  creates; LWS → leader StatefulSet replicas + Σ worker StatefulSets' replicas = the pods;
  MPIJob → the launcher Job's pods + the worker pods the operator creates itself.
  Per pod set too: the child Jobs of replicatedJob *n* against gangcheck's pod set *n*; LWS leader
  pods against ``leader``, worker pods against ``worker`` (and ``GangRequest.groups`` = groups);
* per-pod requests: every pod the controllers create has the effective requests
  (``podspec.effective_requests``) of gangcheck's pod set for it;
* the children pass gangcheck without a second check: every child Job and pod is skipped by
  ``admission.skip`` as owned by a checked kind, or is a kind gangcheck does not check / not a
  gang (LWS StatefulSets and their pods), and gangcheck's own skip counter saw the child Jobs.

``test_controllers_infrastructure`` uses fixtures of its own (runs everywhere the tier runs);
``test_controllers_differential`` every upstream example of the three kinds in
../shared/upstream/examples (skipped when that directory is absent) and prints
``referee controllers: K kinds, N objects, gang sizes equal on M``. A difference that is not in
``GATES`` (upstream waits for a pod state no kubelet gives here: documented with its source line)
fails the test.
"""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path

import pytest
import yaml

import e2e_controllers as ec
from e2e_controlplane import REPO, SUMMARY, ControlPlane, Kube, namespace_obj, wait_for

from webhook.adapters import adapt
from webhook.adapters.batch import job_pod_count
from webhook.adapters.podspec import effective_requests
from webhook.admission import SKIP_OWNED, SKIP_UNSUPPORTED_KIND, ReviewRequest, gang_of, skip
from webhook.policy import Policy

EXAMPLES = Path(REPO).parent / "shared" / "upstream" / "examples"
JS_LABEL = "jobset.sigs.k8s.io/jobset-name"
RJ_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"

#: Where upstream waits for a pod state that no kubelet gives in this tier; the referee then
#: compares what the controller created so far and records the rest as documented.
GATES = {
    "dependsOn": "jobset pkg/controllers/depends_on.go dependencyReachedStatus (called from jobset_controller.go:501): "
                 "a replicatedJob's Jobs are created only once the Jobs it depends on are Ready / Complete "
                 "(status Ready or Succeeded needs a kubelet)",
    "exclusive": "jobset pkg/webhooks/pod_admission_webhook.go ValidateCreate: with exclusive-topology (and no node-selector "
                 "strategy) a follower pod is refused until its Job's leader pod (completion index 0) is scheduled; here only the "
                 "leaders exist, so the Job's parallelism stands for its pods",
    "lws-exclusive": "lws pkg/controllers/pod_controller.go:160-166 (Reconcile): with leaderworkerset.sigs.k8s.io/exclusive-topology "
                     "the worker StatefulSet is created only once the leader pod is scheduled; the leader pods' size annotation "
                     "(leaderworkerset.sigs.k8s.io/size, set by the controller) stands for the group",
    "mpi-launcher": "mpi-operator pkg/controller/mpi_job_controller.go:677: with launcherCreationPolicy WaitForWorkersReady the "
                    "launcher Job is created only once every worker pod is Ready (needs a kubelet)",
    "no-limit": "kubernetes pkg/apis/core/validation/validation.go:7982: a container requesting an extended resource without a "
                "limit is invalid ('Limit must be set for non overcommitable resources'), so the API server refuses the worker "
                "StatefulSet the LWS controller creates (its template is not validated when the LWS is stored): the workers never exist",
}


# ---------------------------------------------------------------- the referee's cluster


class Referee:
    """The referee's control plane: ``kube``, ``plane``, ``kcm`` (kube-controller-manager),
    ``gangcheck`` (conftest.Gangcheck, registered) and the ``running`` controllers."""

    def __init__(self, kube: Kube, plane: ControlPlane, kcm, gangcheck, running: list) -> None:
        self.kube, self.plane, self.kcm, self.gangcheck, self.running = kube, plane, kcm, gangcheck, running

    def check_alive(self) -> None:
        for r in self.running:
            if not r.alive():
                raise AssertionError(f"{r.c.name}-controller exited:\n{r.proc.tail() if r.proc else ''}")
        if not self.kcm.alive():
            raise AssertionError("kube-controller-manager exited:\n" + self.kcm.tail())

    def skipped_owned(self) -> float:
        code, text = self.gangcheck.get("/metrics")
        total = 0.0
        for m in re.finditer(r'^gangcheck_webhook_skipped_total\{([^}]*)\} (\S+)$', text, re.M):
            if 'reason="owned_by_checked_kind"' in m.group(1) and 'endpoint="validate"' in m.group(1):
                total += float(m.group(2))
        return total


@pytest.fixture(scope="module")
def referee(cluster, request):
    if cluster.external:  # KCM and two controllers acting on every namespace of someone's cluster: no
        pytest.skip("the controllers referee runs against control planes started here only")
    from e2e_harness import Cluster, Gangcheck, unavailable
    why = ec.controllers_missing()
    bindir = cluster.control_plane.bindir
    if why is None and not (bindir / "kube-controller-manager").exists():
        why = f"{bindir / 'kube-controller-manager'} is missing (run `make controlplane`)"
    if why:
        unavailable(request.config, f"controllers referee: {why}")
    plane = ControlPlane(bindir)
    started = []
    try:
        plane.start()
        started.append(plane.stop)
        kube = Kube(str(bindir / "kubectl"), plane.kubeconfig)
        kcm = ec.start_controller_manager(plane)
        started.append(kcm.stop)
        running = [ec.RunningController(c, kube, plane.dir) for c in ec.CONTROLLERS]
        for r in running:
            r.install_crds()
        wait_for(lambda: kube.run("get", ",".join(n for c in ec.CONTROLLERS for n in c.crd_names), "-A",
                                  check=False).code == 0, 30, "the controllers' CRDs served")
        c = Cluster(kube, plane.kubeconfig, plane, plane.dir)
        g = Gangcheck(c).start()
        started.append(g.stop)
        g.register()
        for r in running:
            r.start()
            started.append(r.stop)
        yield Referee(kube, plane, kcm, g, running)
    finally:
        for stop in reversed(started):
            try:
                stop()
            except Exception:
                pass


# ---------------------------------------------------------------- reading back and comparing


def _items(kube: Kube, resource: str, ns: str, selector: str | None = None) -> list[dict]:
    return ec.api_items(kube, resource, ns, selector)


def _owned_by(obj: dict, owner: dict) -> bool:
    return any(r.get("uid") == owner["metadata"]["uid"] and r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])


def _not_checked_again(child: dict) -> str | None:
    """None when gangcheck passes ``child`` without a second check; else what it would check."""
    req = ReviewRequest(uid="x", operation="CREATE", namespace=child["metadata"]["namespace"], name=child["metadata"]["name"],
                        kind={}, obj=child, dry_run=False)
    s = skip(req, Policy())
    if s is not None and s[0] in (SKIP_OWNED, SKIP_UNSUPPORTED_KIND):
        return None
    if s is None and gang_of(req) is None:  # a kind gangcheck reads but that is no gang here (a plain pod)
        return None
    return f"{child['kind']} {child['metadata']['name']}: {s[1] if s else 'checked as a gang of its own'}"


class Outcome:
    def __init__(self, what: str) -> None:
        self.what = what
        self.problems: list[str] = []
        self.documented: list[str] = []
        self.equal = False
        self.gangcheck = self.controller = 0

    def __repr__(self) -> str:
        return f"{self.what}: gangcheck {self.gangcheck} vs controller {self.controller}; {self.problems or ''}{self.documented or ''}"


def _req(ps) -> dict:
    return {k: int(v) for k, v in dict(ps.requests).items() if v}


def _pod_req(pod: dict) -> dict:
    return {k: int(v) for k, v in effective_requests(pod["spec"]).items() if v}


def jobset_expectation(js: dict) -> tuple[dict[str, int], dict[str, str]]:
    """(replicatedJob name → Jobs the controller creates here, name → gate) from the stored JobSet."""
    jobs, gates = {}, {}
    for rj in js["spec"]["replicatedJobs"]:
        if rj.get("dependsOn"):
            jobs[rj["name"]], gates[rj["name"]] = 0, "dependsOn"
        else:
            jobs[rj["name"]] = int(rj.get("replicas", 1))
    return jobs, gates


def _exclusive(js: dict, rj: dict) -> bool:
    """The JobSet's pod webhooks hold followers back (exclusive topology without the
    node-selector strategy, on the JobSet or the replicatedJob's Job template)."""
    for meta in (js.get("metadata") or {}, (rj.get("template") or {}).get("metadata") or {}):
        ann = meta.get("annotations") or {}
        if EXCLUSIVE in ann and NODE_SELECTOR_STRATEGY not in ann:
            return True
    return False


def _leader_waiting(pods: list[dict]) -> bool:
    """Only the leader (completion index 0) exists and it is not scheduled."""
    return len(pods) == 1 and pods[0]["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") == "0" \
        and not pods[0]["spec"].get("nodeName")


def jobset_settled(kube: Kube, js: dict) -> bool:
    ns, name = js["metadata"]["namespace"], js["metadata"]["name"]
    want, _ = jobset_expectation(js)
    jobs = _items(kube, "jobs", ns, f"{JS_LABEL}={name}")
    if sum(want.values()) != len(jobs):
        return False
    pods = _items(kube, "pods", ns)
    exclusive = {rj["name"] for rj in js["spec"]["replicatedJobs"] if _exclusive(js, rj)}
    for j in jobs:
        mine = [p for p in pods if _owned_by(p, j)]
        if len(mine) != job_pod_count(j["spec"]) and not (j["metadata"]["labels"].get(RJ_LABEL) in exclusive and _leader_waiting(mine)):
            return False
    return True


def compare_jobset(kube: Kube, js: dict, what: str) -> Outcome:
    out = Outcome(what)
    ns, name = js["metadata"]["namespace"], js["metadata"]["name"]
    gang = adapt(js, source=what)
    sets = {ps.name: ps for ps in gang.pod_sets}
    want, gates = jobset_expectation(js)
    jobs = _items(kube, "jobs", ns, f"{JS_LABEL}={name}")
    pods = _items(kube, "pods", ns)
    out.gangcheck = sum(ps.total_replicas() for ps in gang.pod_sets)
    for rj in js["spec"]["replicatedJobs"]:
        n, ps = rj["name"], sets.get(rj["name"])
        mine = [j for j in jobs if (j["metadata"].get("labels") or {}).get(RJ_LABEL) == n]
        if ps is None:
            out.problems.append(f"gangcheck has no pod set {n!r}")
            continue
        if not all(_owned_by(j, js) for j in mine):
            out.problems.append(f"a Job of {n} is not controlled by the JobSet")
        made = sum(job_pod_count(j["spec"]) for j in mine)
        out.controller += made
        if n in gates:
            out.documented.append(f"{n}: {len(mine)} of {rj.get('replicas', 1)} Jobs created: {GATES[gates[n]]}")
            if any(d.get("status") == "Complete" for d in rj["dependsOn"]) and gang.all_or_nothing:
                out.problems.append(f"{n} runs after a replicatedJob completes, but gangcheck checks the JobSet as one whole gang")
            continue
        if len(mine) != want[n]:
            out.problems.append(f"{n}: {len(mine)} Jobs, replicas {want[n]}")
        if made != ps.total_replicas() or ps.count != ps.total_replicas():
            out.problems.append(f"{n}: the child Jobs run {made} pods at once, gangcheck's pod set has count {ps.count}, "
                                f"replicas {ps.total_replicas()}")
        for j in mine:
            jp = [p for p in pods if _owned_by(p, j)]
            if len(jp) != job_pod_count(j["spec"]):
                if _exclusive(js, rj) and _leader_waiting(jp):
                    out.documented.append(f"Job {j['metadata']['name']}: its leader pod of {job_pod_count(j['spec'])}: {GATES['exclusive']}")
                else:
                    out.problems.append(f"Job {j['metadata']['name']}: {len(jp)} pods for parallelism {job_pod_count(j['spec'])}")
            for p in jp:
                if _pod_req(p) != _req(ps):
                    out.problems.append(f"pod {p['metadata']['name']} requests {_pod_req(p)}, gangcheck {_req(ps)}")
            for child in [j, *jp]:
                why = _not_checked_again(child)
                if why:
                    out.problems.append(why)
    # equal: gangcheck's size is what the child Jobs run at once, replicatedJob by replicatedJob
    # (their pods all exist, or the Job's leader does and the JobSet webhook holds the rest)
    out.equal = not out.problems and out.gangcheck == out.controller
    return out


SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def _no_limit(template: dict) -> bool:
    """A container requests an extended resource (a name with a domain, not kubernetes.io's
    own) or hugepages without a limit for it: the API server refuses such a pod spec."""
    for c in ((template or {}).get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        limits = res.get("limits") or {}
        for r in (res.get("requests") or {}):
            if (r.startswith("hugepages-") or ("/" in r and not r.startswith("kubernetes.io/"))) and r not in limits:
                return True
    return False


def lws_gate(lws: dict) -> str | None:
    lwt = lws["spec"]["leaderWorkerTemplate"]
    if int(lwt.get("size", 1)) == 1:
        return None
    if _no_limit(lwt.get("workerTemplate")):
        return "no-limit"
    if LWS_EXCLUSIVE in ((lws.get("metadata") or {}).get("annotations") or {}):
        return "lws-exclusive"
    return None


def lws_settled(kube: Kube, lws: dict) -> bool:
    ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
    groups = int(lws["spec"].get("replicas", 1))
    size = int(lws["spec"]["leaderWorkerTemplate"].get("size", 1))
    pods = _items(kube, "pods", ns, f"{LWS_LABEL}={name}")
    want = groups if lws_gate(lws) else groups * size
    return len(pods) == want and all(WORKER_INDEX in (p["metadata"].get("labels") or {}) for p in pods)


def compare_lws(kube: Kube, lws: dict, what: str) -> Outcome:
    out = Outcome(what)
    ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
    gang = adapt(lws, source=what)
    sets = {ps.name: ps for ps in gang.pod_sets}
    out.gangcheck = sum(ps.total_replicas() for ps in gang.pod_sets)
    stss = _items(kube, "statefulsets", ns, f"{LWS_LABEL}={name}")
    pods = _items(kube, "pods", ns, f"{LWS_LABEL}={name}")
    out.controller = sum(int(s["spec"].get("replicas", 1)) for s in stss)
    leader_sts = [s for s in stss if _owned_by(s, lws)]
    leaders = [p for p in pods if (p["metadata"].get("labels") or {}).get(WORKER_INDEX) == "0"]
    workers = [p for p in pods if (p["metadata"].get("labels") or {}).get(WORKER_INDEX) not in (None, "0")]
    if len(leader_sts) != 1:
        out.problems.append(f"{len(leader_sts)} leader StatefulSets")
    if len(leaders) != gang.groups:
        out.problems.append(f"{len(leaders)} leader pods, gangcheck groups {gang.groups}")
    lead = sets.get("leader")
    if lead is None or lead.count != 1 or lead.total_replicas() != len(leaders):
        out.problems.append(f"leader pod set {lead and (lead.count, lead.total_replicas())} vs {len(leaders)} leader pods")
    worker = sets.get("worker")
    per_group: dict[str, int] = {}
    for p in workers:
        g = (p["metadata"].get("labels") or {}).get(GROUP_INDEX, "?")
        per_group[g] = per_group.get(g, 0) + 1
    gate = lws_gate(lws)
    if gate and not workers and worker is not None:
        out.documented.append(GATES[gate])
        if gate == "lws-exclusive":  # the controller's own group size, on every leader pod
            sizes = {int((p["metadata"].get("annotations") or {}).get(SIZE_ANNOTATION, -1)) for p in leaders}
            if sizes != {worker.count + 1}:
                out.problems.append(f"leader pods' size annotations {sizes}, gangcheck's group {worker.count + 1}")
            out.controller = len(leaders) * max(sizes)
    elif worker is None:
        if workers:
            out.problems.append(f"{len(workers)} worker pods, gangcheck has no worker pod set")
    else:
        if sorted(set(per_group.values())) != [worker.count] or len(per_group) != gang.groups:
            out.problems.append(f"worker pods per group {per_group}, gangcheck's worker pod set count {worker.count} × {gang.groups}")
        if worker.total_replicas() != len(workers):
            out.problems.append(f"{len(workers)} worker pods, gangcheck's worker replicas {worker.total_replicas()}")
    if not gate and (len(pods) != out.gangcheck or out.controller != out.gangcheck):
        out.problems.append(f"{len(pods)} pods, StatefulSet replicas {out.controller}, gangcheck {out.gangcheck}")
    for p in pods:
        ps = lead if p in leaders else worker
        if ps is not None and _pod_req(p) != _req(ps):
            out.problems.append(f"pod {p['metadata']['name']} requests {_pod_req(p)}, gangcheck {_req(ps)}")
    for child in [*stss, *pods]:
        why = _not_checked_again(child)
        if why:
            out.problems.append(why)
    out.equal = not out.problems and out.gangcheck == out.controller
    return out


MPI_JOB_NAME = "training.kubeflow.org/job-name"
MPI_JOB_ROLE = "training.kubeflow.org/job-role"


def _mpi_children(kube: Kube, mj: dict) -> tuple[list[dict], list[dict], list[dict]]:
    """(launcher Jobs, launcher pods, worker pods) the MPI operator and the Job controller made."""
    ns = mj["metadata"]["namespace"]
    jobs = [j for j in _items(kube, "jobs", ns) if _owned_by(j, mj)]
    pods = _items(kube, "pods", ns)
    launcher_pods = [p for p in pods if any(_owned_by(p, j) for j in jobs)]
    workers = [p for p in pods if _owned_by(p, mj) and (p["metadata"].get("labels") or {}).get(MPI_JOB_ROLE) == "worker"]
    return jobs, launcher_pods, workers


def _mpi_replicas(mj: dict, role: str) -> int:
    rs = (mj["spec"].get("mpiReplicaSpecs") or {}).get(role) or {}
    return int(rs.get("replicas", 1 if role == "Launcher" else 0))


def mpi_settled(kube: Kube, mj: dict) -> bool:
    jobs, launcher_pods, workers = _mpi_children(kube, mj)
    if len(workers) != _mpi_replicas(mj, "Worker"):
        return False
    if mj["spec"].get("launcherCreationPolicy") == "WaitForWorkersReady":
        return True  # gated: the launcher waits for Ready workers
    return len(jobs) == 1 and len(launcher_pods) == job_pod_count(jobs[0]["spec"])


def compare_mpi(kube: Kube, mj: dict, what: str) -> Outcome:
    """MPIJob v2beta1: the launcher Job (its pods by the Job controller) and the worker pods the
    operator creates itself (mpi-operator pkg/controller/mpi_job_controller.go getOrCreateWorker,
    newLauncherJob)."""
    out = Outcome(what)
    gang = adapt(mj, source=what)
    sets = {ps.name: ps for ps in gang.pod_sets}
    out.gangcheck = sum(ps.total_replicas() for ps in gang.pod_sets)
    jobs, launcher_pods, workers = _mpi_children(kube, mj)
    launched = sum(job_pod_count(j["spec"]) for j in jobs)
    out.controller = launched + len(workers)
    lps, wps = sets.get("Launcher"), sets.get("Worker")
    if mj["spec"].get("launcherCreationPolicy") == "WaitForWorkersReady" and not jobs:
        out.documented.append(GATES["mpi-launcher"])
        out.controller += _mpi_replicas(mj, "Launcher")  # the Launcher replicas it will create (not observed)
    elif lps is None or lps.total_replicas() != launched or len(launcher_pods) != launched:
        out.problems.append(f"launcher: {len(jobs)} Jobs running {launched} pods ({len(launcher_pods)} exist), "
                            f"gangcheck {lps and lps.total_replicas()}")
    if (wps.total_replicas() if wps else 0) != len(workers):
        out.problems.append(f"{len(workers)} worker pods, gangcheck's Worker replicas {wps and wps.total_replicas()}")
    for group, ps in ((launcher_pods, lps), (workers, wps)):
        for p in group:
            if ps is not None and _pod_req(p) != _req(ps):
                out.problems.append(f"pod {p['metadata']['name']} requests {_pod_req(p)}, gangcheck {_req(ps)}")
    for child in [*jobs, *launcher_pods, *workers]:
        why = _not_checked_again(child)
        if why:
            out.problems.append(why)
    out.equal = not out.problems and not out.documented and out.gangcheck == out.controller
    return out


#: kind → (resource, settled, compare)
KINDS = {
    "JobSet": ("jobsets.jobset.x-k8s.io", jobset_settled, compare_jobset),
    "LeaderWorkerSet": ("leaderworkersets.leaderworkerset.x-k8s.io", lws_settled, compare_lws),
    "MPIJob": ("mpijobs.v2beta1.kubeflow.org", mpi_settled, compare_mpi),
}


def _namespace_for(i: int, what: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")
    return f"c{i:02d}-{slug}"[:63].rstrip("-")


def run_objects(ref: Referee, objs: list[tuple[str, dict]], timeout: float = 90) -> tuple[list[Outcome], list[str]]:
    """Create each object in a namespace of its own, wait for the controllers to settle (or the
    documented gates), compare. Returns (outcomes of accepted objects, rejections)."""
    kube = ref.kube
    placed = []
    for i, (what, doc) in enumerate(objs):
        d = copy.deepcopy(doc)
        ns = _namespace_for(i, what)
        d.setdefault("metadata", {})["namespace"] = ns
        placed.append((what, ns, d))
    kube.apply([namespace_obj(ns) for _, ns, _ in placed])
    accepted, rejected = [], []
    for what, ns, d in placed:
        r = kube.create(d, "-o", "json", check=False)
        if r.code != 0:
            rejected.append(f"{what}: {r.stderr.strip()[:300]}")
        else:
            doc = r.json()
            accepted.append((what, ns, doc["items"][0] if doc.get("kind") == "List" else doc))  # generateName: the name given
    stored = {}
    for what, ns, d in accepted:
        stored[what] = kube.get(KINDS[d["kind"]][0], d["metadata"]["name"], ns)

    def settled():
        ref.check_alive()
        return all(KINDS[o["kind"]][1](kube, o) for o in stored.values())
    try:
        wait_for(settled, timeout, "the controllers to create every child object", 0.5)
    except AssertionError:
        pass  # compared below: the outcome says which object is short of what
    outs = []
    for what, _ns, _d in accepted:
        o = stored[what]
        outs.append(KINDS[o["kind"]][2](kube, o, what))
    return outs, rejected


# ---------------------------------------------------------------- the permanent fixtures


def _container(name: str, **req) -> dict:
    return {"name": name, "image": "registry.example.com/e2e:1", "resources": {"requests": dict(req), "limits": dict(req)}}


def small_jobset() -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "infra-js"},
            "spec": {"replicatedJobs": [
                {"name": "driver", "template": {"spec": {"template": {"spec": {"containers": [_container("d", cpu="1", memory="1Gi")]}}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 3, "completions": 3, "template": {"spec": {
                    "containers": [_container("w", cpu="2", memory="2Gi", **{"nvidia.com/gpu": "1"})],
                    "initContainers": [{"name": "side", "image": "registry.example.com/e2e:1", "restartPolicy": "Always",
                                        "resources": {"requests": {"cpu": "250m"}}}]}}}}},
                {"name": "capped", "template": {"spec": {"parallelism": 4, "completions": 2, "template": {"spec": {
                    "containers": [_container("c", cpu="500m")]}}}}},
            ]}}


def small_lws() -> dict:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "infra-lws"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {
                "size": 3,
                "leaderTemplate": {"spec": {"containers": [_container("l", cpu="1", memory="1Gi")]}},
                "workerTemplate": {"spec": {"containers": [_container("w", cpu="4", memory="8Gi", **{"nvidia.com/gpu": "2"})]}},
            }}}


def small_mpijob() -> dict:
    def role(n: int, **req) -> dict:
        return {"replicas": n, "template": {"spec": {"containers": [_container("m", **req)]}}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "infra-mpi"},
            "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
                "Launcher": role(1, cpu="500m", memory="512Mi"),
                "Worker": role(2, cpu="8", memory="32Gi", **{"nvidia.com/gpu": "4"})}}}


@pytest.mark.local_only
def test_controllers_infrastructure(referee):
    """Our own JobSet (3 replicatedJobs: default replicas and parallelism, 2 × 3 with a sidecar,
    parallelism capped by completions) and LWS (2 groups of 3, leader template): the controllers
    create 4 Jobs / 9 pods and 3 StatefulSets / 6 pods, equal to gangcheck's sizes, and
    gangcheck's webhook skipped the children as owned."""
    before = referee.skipped_owned()
    outs, rejected = run_objects(referee, [("infra/jobset", small_jobset()), ("infra/lws", small_lws()),
                                           ("infra/mpijob", small_mpijob())])
    assert not rejected, rejected
    by = {o.what: o for o in outs}
    js, lws, mpi = by["infra/jobset"], by["infra/lws"], by["infra/mpijob"]
    assert (js.gangcheck, js.controller) == (9, 9), js
    assert (lws.gangcheck, lws.controller) == (6, 6), lws
    assert (mpi.gangcheck, mpi.controller) == (3, 3), mpi
    assert js.equal and lws.equal and mpi.equal, outs
    # the live webhook saw the child Jobs (its pod rules select Kueue pod groups only) and skipped
    # them as owned by a checked kind
    wait_for(lambda: referee.skipped_owned() - before >= 4 + 1, 30, "gangcheck's skip counter to count the child Jobs")


# ---------------------------------------------------------------- the differential


def upstream_objects() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)):
            if f"{doc.get('apiVersion')} {doc.get('kind')}" in {k for c in ec.CONTROLLERS for k in c.kinds}:
                out.append((f"{path.relative_to(EXAMPLES).as_posix()}#{i}", doc))
    return out


@pytest.mark.local_only
def test_controllers_differential(referee):
    if not EXAMPLES.is_dir():
        pytest.skip(f"upstream examples not present at {EXAMPLES} (only in the project workspace)")
    objs = upstream_objects()
    assert objs, f"no JobSet, LeaderWorkerSet or MPIJob in {EXAMPLES}"
    t0 = time.monotonic()
    outs, rejected = run_objects(referee, objs, timeout=120)
    kinds = {f"{o['apiVersion']} {o['kind']}" for _, o in objs}
    equal = sum(o.equal for o in outs)
    SUMMARY.append(f"referee controllers: {len(kinds)} kinds, {len(outs)} objects, gang sizes equal on {equal}")
    print(f"\n[controllers] {len(objs)} upstream objects in {time.monotonic() - t0:.1f}s; rejected: {rejected}")
    for o in outs:
        print(f"[controllers] {o}")
    assert not [o for o in outs if o.problems], [o for o in outs if o.problems]
    assert all(o.equal or o.documented for o in outs)
