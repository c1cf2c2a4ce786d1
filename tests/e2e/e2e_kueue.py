"""Kueue's real manager as a referee in the e2e tier (issue #11, the Kueue quota differential).

``kueue`` (sigs.k8s.io/kueue/cmd/kueue, built by ``e2e/build-kueue.sh`` into
``~/.cache/gangcheck/kueue-<version>/``) runs here as a process against the tier's
kube-apiserver, with the CRDs of the same module (``crds/`` next to the binary, Kueue's
config/components/crd/bases) applied server-side: the Workload CRD is too large for a
client-side apply, and ``--force-conflicts`` takes over fields an earlier apply owned.

What it is given (../shared/REAL-CLUSTER.md, measured on this machine):

* ``--config``: a config.kueue.x-k8s.io/v1beta2 Configuration with internal certificate
  management off (it would wait for a kubelet to mount its Secret: cert-controller's rotator
  ``ensureCertsMounted``), leader election off, the webhook server on 127.0.0.1 and a free port
  with a self-signed certificate (``webhook.certs``; no webhook is registered with the API
  server: the referee creates Workload objects directly), metrics off (``bindAddress: "0"``),
  the health probe on a free port, client-side rate limiting lifted (the referee creates
  hundreds of objects at once), and the one integration ``batch/job``;
* ``--feature-gates=VisibilityOnDemand=false``: the visibility API server wants
  ``/visibility/tls.crt``;
* ``/etc/kueue/metrics/certs/tls.crt`` and ``tls.key``: with internal certificate management off
  cmd/kueue/main.go builds a certificate watcher on that fixed path (``metricsCertPath``, no
  flag or configuration field moves it) and exits when the files are missing, even with the
  metrics server disabled. ``metrics_certs`` creates a self-signed pair there when none exists
  (it never replaces one); where that directory cannot be written the referee cannot run and
  says so.

The CRDs have no conversion webhook (the bases leave ``spec.conversion`` out; Kueue's kustomize
patches add it), so versions are converted by the API server's ``None`` strategy: the referee
writes and reads v1beta2, the storage version.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import e2e_karpenter as ek
from e2e_controlplane import Kube, OwnedProcess, Proc, cache_root, free_port, readyz, required_version, wait_for, wait_ready

GROUP = "kueue.x-k8s.io"
KV = f"{GROUP}/v1beta2"
#: Kueue's system namespace (Configuration.namespace's default).
SYSTEM_NS = "kueue-system"
#: The path cmd/kueue/main.go reads the metrics certificate from (fixed in the source).
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
#: Collection paths (cluster-scoped, or namespaced with "{ns}").
PATHS = {
    "resourceflavors": "/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
    "clusterqueues": "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
    "cohorts": "/apis/kueue.x-k8s.io/v1beta2/cohorts",
    "localqueues": "/apis/kueue.x-k8s.io/v1beta2/localqueues",
    "workloads": "/apis/kueue.x-k8s.io/v1beta2/workloads",
}
KINDS = {"resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue", "cohorts": "Cohort",
         "localqueues": "LocalQueue", "workloads": "Workload"}


def version() -> str:
    return required_version("e2e/kueue/go.mod", "sigs.k8s.io/kueue")


def kueue_dir() -> Path:
    """Where e2e/build-kueue.sh puts kueue and crds/ (GANGCHECK_E2E_KUEUE overrides)."""
    if os.environ.get("GANGCHECK_E2E_KUEUE"):
        return Path(os.environ["GANGCHECK_E2E_KUEUE"])
    return cache_root() / f"kueue-{version()}"


def crds_dir(d: Path | None = None) -> Path:
    return (d or kueue_dir()) / "crds"


def missing(d: Path | None = None) -> str | None:
    """Why the referee cannot run (None: it can)."""
    d = d or kueue_dir()
    if not os.access(d / "kueue", os.X_OK):
        return f"{d / 'kueue'} is missing (run `make controlplane`: e2e/build-kueue.sh)"
    if not sorted(crds_dir(d).glob("*.yaml")):
        return f"{crds_dir(d)} holds no CRDs (run `GANGCHECK_REBUILD=1 bash e2e/build-kueue.sh`)"
    return metrics_certs()


def metrics_certs() -> str | None:
    """Make sure ``METRICS_CERTS`` holds tls.crt and tls.key (see the module docstring); a
    reason string when it cannot."""
    if (METRICS_CERTS / "tls.crt").is_file() and (METRICS_CERTS / "tls.key").is_file():
        return None
    try:
        from webhook import certs

        certs.generate("kueue-metrics", SYSTEM_NS, METRICS_CERTS)
    except OSError as exc:
        return (f"Kueue {version()} needs {METRICS_CERTS}/tls.crt and tls.key (a fixed path in cmd/kueue/main.go) "
                f"and they cannot be created here: {exc}")
    return None


# ---------------------------------------------------------------- the API server


class Api(ek.Api):
    """Straight HTTP to the API server (client certificate of the kubeconfig), for Kueue's objects."""

    def _req(self, method: str, path: str, body: dict | None = None, ctype: str = "application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={"Content-Type": ctype})
        with urllib.request.urlopen(req, timeout=30, context=self.ctx) as r:
            return json.loads(r.read() or b"null")

    def list(self, what: str) -> list[dict]:
        """Every object of ``what`` (a key of ``PATHS``) with apiVersion and kind set."""
        if self.base is None:
            doc = self.kube.get(f"{what}.{GROUP}", all_ns=what in ("localqueues", "workloads"))
        else:
            doc = self._req("GET", PATHS[what])
        out = doc.get("items") or []
        for i in out:
            i.setdefault("apiVersion", KV)
            i.setdefault("kind", KINDS[what])
        return out

    def create(self, obj: dict) -> None:
        """POST one object (its collection from kind and namespace); an existing one is left alone."""
        if self.base is None:
            self.kube.apply(obj)
            return
        kind = obj["kind"]
        ns = obj["metadata"].get("namespace")
        if kind == "Namespace":
            path = "/api/v1/namespaces"
        else:
            what = next(k for k, v in KINDS.items() if v == kind)
            path = PATHS[what]
            if ns:
                path = path.replace("/v1beta2/", f"/v1beta2/namespaces/{ns}/")
        try:
            self._req("POST", path, obj)
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise AssertionError(f"creating {kind} {obj['metadata']['name']}: {e.code} {e.read().decode()[:500]}") from None

    def create_many(self, objs: list[dict], workers: int = 8) -> None:
        """``create`` each of ``objs`` over a few connections at once (one TLS handshake per
        request costs ~40 ms here; hundreds of objects one after another take minutes)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            for _ in pool.map(self.create, objs):
                pass

    def delete(self, path: str) -> None:
        """DELETE ``path`` (an object or a namespaced collection); a missing one is fine."""
        try:
            self._req("DELETE", path)
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise

    def delete_workload(self, namespace: str, name: str) -> None:
        if self.base is None:
            self.kube.run("delete", "workloads.kueue.x-k8s.io", name, "-n", namespace, "--ignore-not-found", "--wait=false")
            return
        try:
            self._req("DELETE", f"{PATHS['workloads'].replace('/v1beta2/', f'/v1beta2/namespaces/{namespace}/')}/{name}")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise


# ---------------------------------------------------------------- the controller


class Kueue(OwnedProcess):
    """Kueue's manager as a process against the tier's API server (``install``/``start``/``stop``)."""

    def __init__(self, kube: Kube, workdir: Path, d: Path | None = None) -> None:
        self.kube = kube
        self.api = Api(kube)
        self.dir = Path(d or kueue_dir())
        self.work = workdir / "kueue"
        self.work.mkdir(parents=True, exist_ok=True)
        self.log = self.work / "kueue.log"
        self.health_port = 0
        self.proc: Proc | None = None

    def install(self) -> None:
        """Kueue's CRDs, server-side with --force-conflicts (they replace any earlier
        definition of the same names), and Kueue's namespace."""
        crds = crds_dir(self.dir)
        self.kube.run("apply", "--server-side", "--force-conflicts", "-f", str(crds), timeout=120)
        wait_for(lambda: self.kube.run("wait", "--for=condition=Established", "--timeout=30s", "-f", str(crds),
                                       check=False).code == 0, 90, "Kueue's CRDs Established")
        wait_for(lambda: self.kube.run("get", "clusterqueues.kueue.x-k8s.io,workloads.kueue.x-k8s.io,cohorts.kueue.x-k8s.io",
                                       "-A", check=False).code == 0, 30, "Kueue CRDs served")
        self.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}})

    def config(self) -> dict:
        certs = self.work / "webhook-certs"
        from webhook import certs as gc_certs

        gc_certs.generate("kueue-webhook", SYSTEM_NS, certs)
        self.health_port = free_port()
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": SYSTEM_NS,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": free_port(), "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 1000, "burst": 2000},
            # the referee creates hundreds of queues at once (upstream's defaults: 1 worker for each queue kind)
            "controller": {"groupKindConcurrency": {"Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 3,
                                                    "ClusterQueue.kueue.x-k8s.io": 3, "Cohort.kueue.x-k8s.io": 3,
                                                    "ResourceFlavor.kueue.x-k8s.io": 3}},
            "integrations": {"frameworks": ["batch/job"]},
        }

    def start(self, timeout: float = 120) -> "Kueue":
        cfg = self.work / "config.yaml"
        cfg.write_text(json.dumps(self.config(), indent=1))  # JSON is YAML
        env = {**os.environ, "KUBECONFIG": str(self.kube.kubeconfig)}
        self.proc = Proc("kueue", [str(self.dir / "kueue"), f"--config={cfg}", "--feature-gates=VisibilityOnDemand=false",
                                   "--zap-log-level=info"], self.log, env=env).start()

        wait_ready(self.proc, readyz(self.health_port), timeout, 0.3)
        return self


# ---------------------------------------------------------------- reading Kueue's decisions


def condition(obj: dict, ctype: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def workload_state(wl: dict) -> tuple[str, str] | None:
    """("admitted", "") when Kueue reserved quota, ("pending", message) when its scheduler tried
    and left it pending (QuotaReserved=False, reason Pending: pkg/scheduler/scheduler.go
    ``requeueAndUpdate``), None while it has not decided."""
    c = condition(wl, "QuotaReserved")
    if c is None:
        return None
    if c.get("status") == "True":
        return ("admitted", "")
    if c.get("reason") == "Pending" and c.get("message"):
        return ("pending", c["message"])
    return None


def classify(message: str) -> str:
    """A pending Workload's condition message → the quota verdict it means.

    Kueue's message (pkg/scheduler/flavorassigner/flavorassigner.go ``Assignment.Message``) is
    "couldn't assign flavors to pod set P: r1, r2, ..." per pod set that failed, joined by "; ";
    each reason comes from one flavor tried: ``fitsResourceQuota`` writes "insufficient quota for
    R in flavor F, previously considered podsets requests (X) + current podset request (Y) >
    maximum capacity (Z)" (noFit: above PotentialAvailable) or "insufficient unused quota for R in
    flavor F, N more needed" (above Available); ``checkFlavorForPodSets`` writes "untolerated
    taint ... in flavor F" and "flavor F doesn't match node affinity".

    A pod set with an "unused quota" reason could take that flavor once quota frees: Waits. A
    pod set whose every reason is a maximum or a mismatch can never be placed as Kueue assigns
    it: NeverFits when a maximum is among them, NoMatch when only mismatches are. The workload
    takes the worst of its pod sets (NeverFits > NoMatch > Waits); "Other" when no reason is
    recognised.
    """
    worst = None
    rank = {"Waits": 0, "NoMatch": 1, "NeverFits": 2}
    for part in message.split("; "):
        if "couldn't assign flavors to pod set" not in part:
            continue
        if "insufficient unused quota" in part:
            v = "Waits"
        elif "> maximum capacity" in part:
            v = "NeverFits"
        elif "untolerated taint" in part or "doesn't match node affinity" in part:
            v = "NoMatch"
        else:
            v = "Other"
        if v == "Other":
            return "Other"
        if worst is None or rank[v] > rank[worst]:
            worst = v
    return worst or "Other"
