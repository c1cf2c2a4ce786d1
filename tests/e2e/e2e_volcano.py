"""Volcano as a referee in the e2e tier (issue #11, part 2).

``vc-scheduler`` and ``vc-controller-manager`` (volcano.sh/volcano, built by
``e2e/build-volcano.sh`` into ``~/.cache/gangcheck/volcano-<version>/``) run here as processes
with the tier's kubeconfig against its kube-apiserver. No kubelet and no image: the scheduler
binds pods to Node objects (a binding is all it does), which is exactly the decision the
referee reads.

What the tier gives them:

* the CRDs of the built module (``crds/``: config/crd/volcano/bases), applied with
  ``kubectl apply --server-side --force-conflicts`` (they replace the permissive hand-written
  ones of tests/e2e/crds for the scheduling.volcano.sh and batch.volcano.sh kinds);
* the scheduler configuration of Volcano's Helm chart (``volcano-scheduler.conf`` copied from
  installer/helm/chart/volcano/config by the build script): actions enqueue, allocate,
  backfill; tier 1 priority, gang, conformance; tier 2 overcommit, drf, predicates, proportion,
  nodeorder, binpack;
* vc-controller-manager with the queue, podgroup, job and gc controllers only
  (``--controllers``; the others watch kinds or need webhooks this tier does not have). The
  queue controller is what sets ``status.state: Open`` on a Queue; without it the scheduler
  treats every queue as not open and schedules nothing;
* short scheduling period (``--schedule-period``), metrics on a free loopback port: the
  referee counts scheduling sessions with ``volcano_e2e_scheduling_latency_milliseconds_count``
  (one observation per session, pkg/scheduler/scheduler.go ``runOnce``).

Deciding "not bound": a PodGroup gets a condition (Unschedulable or Scheduled) in every session
that saw it with its pods (plugins/gang/gang.go ``OnSessionClose``); once it has one, ``SETTLE``
more sessions without the gang bound mean Volcano did not bind it (enqueue and allocate run in
every session on the same state).
"""

from __future__ import annotations

import json
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from e2e_controlplane import Kube, Proc, cache_root, free_port, required_version, wait_for, wait_ready

SCHEDULER_NAME = "volcano"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: Sessions after the gang's PodGroup first got a condition before "not bound" is read.
SETTLE = int(os.environ.get("GANGCHECK_E2E_VOLCANO_SETTLE", "3"))
#: vc-controller-manager controllers the referee needs (pkg/controllers/*: Name()).
CONTROLLERS = "queue-controller,pg-controller,job-controller,gc-controller"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


def version() -> str:
    return required_version("e2e/volcano/go.mod", "volcano.sh/volcano")


def volcano_dir() -> Path:
    """Where e2e/build-volcano.sh puts the binaries, crds/ and the scheduler configuration
    (GANGCHECK_E2E_VOLCANO overrides)."""
    if os.environ.get("GANGCHECK_E2E_VOLCANO"):
        return Path(os.environ["GANGCHECK_E2E_VOLCANO"])
    return cache_root() / f"volcano-{version()}"


def missing(d: Path | None = None) -> str | None:
    """Why the referee cannot run (None: it can)."""
    d = d or volcano_dir()
    for b in ("vc-scheduler", "vc-controller-manager"):
        if not os.access(d / b, os.X_OK):
            return f"{d / b} is missing (run `make controlplane`: e2e/build-volcano.sh)"
    if not sorted((d / "crds").glob("*.yaml")):
        return f"{d / 'crds'} holds no CRDs (run `GANGCHECK_REBUILD=1 bash e2e/build-volcano.sh`)"
    if not (d / "volcano-scheduler.conf").is_file():
        return f"{d / 'volcano-scheduler.conf'} is missing (run `bash e2e/build-volcano.sh`)"
    return None


class Api:
    """Requests straight to the API server with the kubeconfig's client certificate (a kubectl
    process costs ~0.2 s here and the referee makes thousands of calls)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        cfg = json.loads(Path(kube.kubeconfig).read_text())
        cl, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        ctx = ssl.create_default_context(cafile=cl["certificate-authority"])
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self.base, self.ctx = cl["server"], ctx

    def call(self, method: str, path: str, body: dict | None = None, ctype: str = "application/json", query: dict | None = None):
        url = self.base + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": ctype})
        with urllib.request.urlopen(req, timeout=20, context=self.ctx) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def items(self, path: str, api_version: str, kind: str, selector: str | None = None) -> list[dict]:
        """Every item of the collection at ``path`` with ``apiVersion``/``kind`` set (a list
        leaves them out of its items)."""
        doc = self.call("GET", path, query={"labelSelector": selector} if selector else None)
        out = doc.get("items") or []
        for i in out:
            i.setdefault("apiVersion", api_version)
            i.setdefault("kind", kind)
        return out

    def create(self, path: str, obj: dict) -> dict:
        return self.call("POST", path, obj)

    def delete_collection(self, path: str, selector: str | None = None) -> None:
        q = {"labelSelector": selector} if selector else None
        self.call("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}, query=q)

    def create_nodes(self, nodes: list[tuple[dict, dict]]) -> None:
        """Create, set status, then set taints again (the API server's TaintNodesByCondition adds
        not-ready at creation; see e2e_controlplane.create_nodes)."""
        merge = "application/merge-patch+json"
        for n, st in nodes:
            name = n["metadata"]["name"]
            self.create("/api/v1/nodes", n)
            self.call("PATCH", f"/api/v1/nodes/{name}/status", st, merge)
            self.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": n["spec"].get("taints") or None}}, merge)


class Volcano:
    """vc-controller-manager + vc-scheduler as processes against the tier's API server."""

    def __init__(self, kube: Kube, workdir: Path, d: Path | None = None, period: str = "100ms") -> None:
        self.kube = kube
        self.api = Api(kube)
        self.dir = Path(d or volcano_dir())
        self.work = workdir / "volcano"
        self.work.mkdir(parents=True, exist_ok=True)
        self.period = period
        self.metrics_port = 0
        self.procs: list[Proc] = []

    def install(self) -> None:
        """Volcano's CRDs, server-side (they replace the tier's hand-written ones)."""
        crds = self.dir / "crds"
        self.kube.run("apply", "--server-side", "--force-conflicts", "-f", str(crds))
        self.kube.run("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds))
        wait_for(lambda: self.kube.run("get", "queues.scheduling.volcano.sh,podgroups.scheduling.volcano.sh,jobs.batch.volcano.sh",
                                       "-A", check=False).code == 0, 30, "Volcano CRDs served")

    def start(self, timeout: float = 90) -> "Volcano":
        kc = str(self.kube.kubeconfig)
        cm_health = free_port()
        cm = Proc("vc-controller-manager", [
            str(self.dir / "vc-controller-manager"), f"--kubeconfig={kc}", "--leader-elect=false",
            f"--controllers={CONTROLLERS}", f"--healthz-address=127.0.0.1:{cm_health}", "--enable-healthz=true",
            f"--listen-address=127.0.0.1:{free_port()}", f"--scheduler-name={SCHEDULER_NAME}", "-v=2"],
            self.work / "vc-controller-manager.log").start()
        self.procs.append(cm)
        self.metrics_port = free_port()
        sched_health = free_port()
        sched = Proc("vc-scheduler", [
            str(self.dir / "vc-scheduler"), f"--kubeconfig={kc}", "--leader-elect=false",
            f"--scheduler-conf={self.dir / 'volcano-scheduler.conf'}", f"--schedule-period={self.period}",
            f"--listen-address=127.0.0.1:{self.metrics_port}", "--enable-metrics=true",
            f"--healthz-address=127.0.0.1:{sched_health}", "--enable-healthz=true", "--cache-dumper=false",
            f"--scheduler-name={SCHEDULER_NAME}", f"-v={os.environ.get('GANGCHECK_E2E_VOLCANO_V', '2')}"],
            self.work / "vc-scheduler.log").start()
        self.procs.append(sched)

        def healthy(port: int):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                return r.status == 200
        wait_ready(cm, lambda: healthy(cm_health), timeout, 0.3)
        wait_ready(sched, lambda: healthy(sched_health), timeout, 0.3)
        wait_for(lambda: self.sessions() > 0, timeout, "the first vc-scheduler session", 0.2)
        # the queue controller opens the queues the scheduler creates (root, default)
        wait_for(lambda: self.queues_open(["default"]), timeout, "queue default Open (vc-controller-manager)", 0.2)
        return self

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.procs.clear()

    def alive(self) -> bool:
        return bool(self.procs) and all(p.alive() for p in self.procs)

    def check_alive(self) -> None:
        for p in self.procs:
            if not p.alive():
                raise AssertionError(f"{p.name} exited:\n{p.tail()}")

    # ------------------------------------------------------------ observing it
    def sessions(self) -> int:
        """Scheduling sessions run so far (one e2e_scheduling_latency observation each)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        m = re.search(r"^volcano_e2e_scheduling_latency_milliseconds_count(?:\{[^}]*\})? (\S+)$", text, re.M)
        return int(float(m.group(1))) if m else 0

    def wait_sessions(self, n: int, timeout: float = 30) -> None:
        start = self.sessions()
        wait_for(lambda: self.sessions() >= start + n, timeout, f"{n} vc-scheduler sessions", 0.05)

    def queues(self) -> list[dict]:
        return self.api.items(QUEUES, "scheduling.volcano.sh/v1beta1", "Queue")

    def queues_open(self, names: list[str]) -> bool:
        st = {q["metadata"]["name"]: (q.get("status") or {}).get("state") for q in self.queues()}
        return all(st.get(n) == "Open" for n in names)

    def pod_groups(self, namespace: str) -> list[dict]:
        return self.api.items(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups",
                              "scheduling.volcano.sh/v1beta1", "PodGroup")

    def pods(self, namespace: str | None = None) -> list[dict]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return self.api.items(path, "v1", "Pod")

    def nodes(self) -> list[dict]:
        return self.api.items("/api/v1/nodes", "v1", "Node")

    def settle(self, namespace: str, groups: list[str], timeout: float = 30) -> dict[str, dict]:
        """Wait until every PodGroup of ``groups`` is bound whole and Running, or has had a
        condition and then ``SETTLE`` more sessions passed; return name → {"bound": pods bound, "pods": pods,
        "phase", "conditions"} as it then stands."""
        deadline = time.monotonic() + timeout

        def state() -> dict[str, dict]:
            pods = self.pods(namespace)
            pgs = {g["metadata"]["name"]: g for g in self.pod_groups(namespace)}
            out = {}
            for name in groups:
                mine = [p for p in pods if (p["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION) == name]
                pg = pgs.get(name) or {}
                st = pg.get("status") or {}
                out[name] = {"pods": len(mine), "bound": sum(bool(p["spec"].get("nodeName")) for p in mine),
                             "phase": st.get("phase"), "conditions": st.get("conditions") or [],
                             "min_member": (pg.get("spec") or {}).get("minMember", 0)}
            return out

        def whole(s: dict) -> bool:
            # bound, and the PodGroup says so: it turns Running (and the queue's status.allocated
            # counts it) at the close of a session after the binding; until then the overcommit
            # plugin still counts it Inqueue
            return s["pods"] > 0 and s["bound"] == s["pods"] and s["phase"] == "Running"

        # 1. every group bound or seen by a session (it has a condition)
        while True:
            self.check_alive()
            s = state()
            if all(whole(v) or v["conditions"] for v in s.values()):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"Volcano did not look at PodGroups {groups} in {timeout:.0f}s: {s}")
            time.sleep(0.05)
        if all(whole(v) for v in s.values()):
            return s
        # 2. SETTLE more sessions; stop early when all are bound
        start = self.sessions()
        while True:
            self.check_alive()
            s = state()
            if all(whole(v) for v in s.values()):
                return s
            if self.sessions() >= start + SETTLE:
                time.sleep(0.1)  # a binding of the last session is written asynchronously
                return state()
            if time.monotonic() > deadline:
                raise AssertionError(f"Volcano did not settle PodGroups {groups} in {timeout:.0f}s: {s}")
            time.sleep(0.05)


# ---------------------------------------------------------------- objects


def queue_obj(name: str, *, weight: int = 1, capability: dict | None = None, deserved: dict | None = None,
              guarantee: dict | None = None, parent: str | None = None, label: str = "") -> dict:
    spec: dict = {"weight": weight, "reclaimable": True}
    if capability:
        spec["capability"] = dict(capability)
    if deserved:
        spec["deserved"] = dict(deserved)
    if guarantee:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "labels": {"e2e.gangcheck.io/volcano": label or "1"}}, "spec": spec}


def pod_group_obj(name: str, namespace: str, queue: str, min_member: int, min_resources: dict) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"queue": queue, "minMember": min_member, "minResources": dict(min_resources)}}
