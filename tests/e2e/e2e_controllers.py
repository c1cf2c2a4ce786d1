"""The job controllers as referees of gangcheck's gang sizes (issue #11, part 4).

JobSet (sigs.k8s.io/jobset), LeaderWorkerSet (sigs.k8s.io/lws) and the MPI operator
(github.com/kubeflow/mpi-operator; its own section at ``MPI``), built by
``e2e/build-controllers.sh`` into ``~/.cache/gangcheck/<name>-<version>/`` (binary + the CRDs of
the built module), run as processes against a control plane of this tier with a kubeconfig:

* their own control plane (``ControlPlane``: etcd + kube-apiserver, the tier's binaries) plus
  **kube-controller-manager** with only the Job and StatefulSet controllers (and the garbage
  collector), so Jobs and StatefulSets create pods. A control plane of their own because those
  controllers act on every namespace: on the session cluster they would create pods for the
  batch Jobs other e2e modules leave behind (and kube-scheduler, when another module started it,
  would bind them), changing what those modules see.
* the upstream CRDs, applied with ``kubectl apply --server-side``;
* each controller's config file (its ``Configuration`` API, api/config/v1alpha1): leader
  election off, internal cert management off, the webhook server on 127.0.0.1 and a free port
  with a serving certificate made by ``webhook.certs.generate`` (IP SAN 127.0.0.1), health
  probe and metrics on free loopback ports;
* their webhooks registered by URL with that certificate's CA. Both controllers need them:
  JobSet's JobSet defaulter sets the completion mode, restart policy, success/startup policy
  and network the controller reads (jobset pkg/webhooks/jobset_webhook.go ``Default``); its pod
  webhooks place exclusive-topology followers (pod_mutating_webhook.go) and hold a follower back
  until its leader is scheduled (pod_admission_webhook.go ``ValidateCreate``). LWS's defaulter
  sets restartPolicy, rolloutStrategy and networkConfig (lws pkg/webhooks/leaderworkerset_webhook.go
  ``Default``) and its pod defaulter writes the group-index / worker-index labels without which
  the pod controller creates no worker StatefulSet (pkg/webhooks/pod_webhook.go ``Default``,
  pkg/controllers/pod_controller.go ``Reconcile``: "worker-index label is unexpected missing").
  The registrations mirror config/components/webhook (JobSet) and config/webhook (LWS):
  manifests.yaml with the objectSelector of their patches, failurePolicy Fail.

No kubelet runs: pods stay Pending and are never Ready or Complete, which is enough for both
controllers to create every child object (Jobs with all their pods; StatefulSets with all their
pods) except where upstream waits for a pod state (see ``GATES``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from e2e_controlplane import ControlPlane, Kube, OwnedProcess, Proc, cache_root, free_port, readyz, required_version, wait_for, wait_ready


@dataclass(frozen=True)
class Controller:
    name: str            # cache directory prefix and binary name prefix
    module: str          # Go module (the wrapper's require line)
    config_api: str      # apiVersion of its Configuration file
    kinds: tuple[str, ...]  # the top-level kinds it refers (apiVersion kind)
    crd_names: tuple[str, ...]
    metrics_cert: bool   # its Configuration has metrics.certDir (JobSet) or not (LWS: self-signed)
    webhooks: bool = True  # a controller-runtime manager with a Configuration file and webhooks

    @property
    def go_mod(self) -> str:
        return f"e2e/{self.name}/go.mod"

    def version(self) -> str:
        return required_version(self.go_mod, self.module)

    def dir(self) -> Path:
        env = os.environ.get(f"GANGCHECK_E2E_{self.name.upper()}")
        return Path(env) if env else cache_root() / f"{self.name}-{self.version()}"

    @property
    def binary(self) -> Path:
        return self.dir() / f"{self.name}-controller"

    def missing(self) -> str | None:
        if not os.access(self.binary, os.X_OK):
            return f"{self.binary} is missing (run `make controlplane`: e2e/build-controllers.sh)"
        if not sorted((self.dir() / "crds").glob("*.yaml")):
            return f"{self.dir() / 'crds'} holds no CRDs (run `GANGCHECK_REBUILD=1 bash e2e/build-controllers.sh`)"
        return None


JOBSET = Controller("jobset", "sigs.k8s.io/jobset", "config.jobset.x-k8s.io/v1alpha1",
                    ("jobset.x-k8s.io/v1alpha2 JobSet",), ("jobsets.jobset.x-k8s.io",), True)
LWS = Controller("lws", "sigs.k8s.io/lws", "config.lws.x-k8s.io/v1alpha1",
                 ("leaderworkerset.x-k8s.io/v1 LeaderWorkerSet",), ("leaderworkersets.leaderworkerset.x-k8s.io",), False)
#: The MPI operator (v2beta1 MPIJob): a plain client-go controller, flags only, no webhooks (the
#: CRD's defaults and the controller's own scheme defaulting suffice). It has no switch for
#: leader election (cmd/mpi-operator/app/server.go always runs election.RunOrDie, Lease in
#: --lock-namespace) and serves /healthz on a constant :8080 (server.go healthCheckPort), every
#: interface: the port must be free.
MPI = Controller("mpi-operator", "github.com/kubeflow/mpi-operator", "", ("kubeflow.org/v2beta1 MPIJob",),
                 ("mpijobs.kubeflow.org",), False, webhooks=False)
MPI_HEALTH_PORT = 8080
MPI_LOCK_NAMESPACE = "mpi-operator"
CONTROLLERS = (JOBSET, LWS, MPI)


def _hook(name: str, path: str, url: str, ca: str, group: str, version: str, resource: str, ops: list[str],
          selector_key: str | None = None) -> dict:
    w = {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
         "clientConfig": {"url": url + path, "caBundle": ca},
         "rules": [{"apiGroups": [group], "apiVersions": [version], "operations": ops, "resources": [resource]}]}
    if selector_key:
        w["objectSelector"] = {"matchExpressions": [{"key": selector_key, "operator": "Exists"}]}
    return w


def webhook_configurations(c: Controller, url: str, ca: str) -> list[dict]:
    """The controller's Mutating/ValidatingWebhookConfigurations, by URL. Paths, names, rules and
    object selectors as upstream's kubebuilder markers and config/ patches give them (JobSet:
    config/components/webhook/manifests.yaml + patches/; LWS: config/webhook/manifests.yaml +
    mutating-patch.yaml / validating-patch.yaml)."""
    if c is JOBSET:
        sel = "jobset.sigs.k8s.io/jobset-name"
        m = [_hook("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset", url, ca, "jobset.x-k8s.io", "v1alpha2", "jobsets", ["CREATE"]),
             _hook("mpod.kb.io", "/mutate--v1-pod", url, ca, "", "v1", "pods", ["CREATE"], sel)]
        v = [_hook("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", url, ca, "jobset.x-k8s.io", "v1alpha2", "jobsets",
                   ["CREATE", "UPDATE"]),
             _hook("vpod.kb.io", "/validate--v1-pod", url, ca, "", "v1", "pods", ["CREATE"], sel)]
    else:
        sel = "leaderworkerset.sigs.k8s.io/name"
        m = [_hook("mleaderworkerset.kb.io", "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", url, ca, "leaderworkerset.x-k8s.io",
                   "v1", "leaderworkersets", ["CREATE", "UPDATE"]),
             _hook("mpod.kb.io", "/mutate--v1-pod", url, ca, "", "v1", "pods", ["CREATE"], sel)]
        v = [_hook("vleaderworkerset.kb.io", "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset", url, ca, "leaderworkerset.x-k8s.io",
                   "v1", "leaderworkersets", ["CREATE", "UPDATE"]),
             _hook("vpod.kb.io", "/validate--v1-pod", url, ca, "", "v1", "pods", ["CREATE", "UPDATE"], sel)]
    meta = {"name": f"e2e-{c.name}"}
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": meta, "webhooks": m},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": dict(meta),
             "webhooks": v}]


class RunningController(OwnedProcess):
    """One controller manager as a process (``start``/``stop``) with its webhooks registered."""

    def __init__(self, c: Controller, kube: Kube, workdir: Path) -> None:
        self.c = c
        self.kube = kube
        self.work = workdir / c.name
        self.work.mkdir(parents=True, exist_ok=True)
        self.log = self.work / f"{c.name}.log"
        self.proc: Proc | None = None
        self.health_port = self.webhook_port = self.metrics_port = 0

    def install_crds(self) -> None:
        crds = self.c.dir() / "crds"
        self.kube.run("apply", "--server-side", "--force-conflicts", "-f", str(crds))
        # right after the apply a CRD may have no status yet (`kubectl wait` then fails at once: retried)
        wait_for(lambda: self.kube.run("wait", "--for=condition=Established", "--timeout=30s", "-f", str(crds),
                                       check=False).code == 0, 60, f"{self.c.name} CRDs Established", 0.5)

    def start(self, timeout: float = 90) -> "RunningController":
        if not self.c.webhooks:
            return self._start_mpi(timeout)
        from webhook import certs

        certdir = self.work / "certs"
        ca = certs.generate(f"{self.c.name}-webhook-service", f"{self.c.name}-system", certdir)
        self.health_port, self.webhook_port, self.metrics_port = free_port(), free_port(), free_port()
        cfg = {
            "apiVersion": self.c.config_api, "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(certdir)},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
        }
        if self.c.metrics_cert:
            cfg["metrics"]["certDir"] = str(certdir)
        conf = self.work / "config.yaml"
        conf.write_text(yaml.safe_dump(cfg))
        env = {**os.environ, "KUBECONFIG": str(self.kube.kubeconfig)}
        argv = [str(self.c.binary), f"--config={conf}", "--leader-elect=false", "--zap-log-level=info"]
        self.proc = Proc(f"{self.c.name}-controller", argv, self.log, env=env).start()

        wait_ready(self.proc, readyz(self.health_port), timeout, 0.3)
        self.kube.apply(webhook_configurations(self.c, f"https://127.0.0.1:{self.webhook_port}", ca))
        return self

    def _start_mpi(self, timeout: float) -> "RunningController":
        import socket
        with socket.socket() as sk:  # its health port is a constant: say so instead of a Fatalf in its log
            if sk.connect_ex(("127.0.0.1", MPI_HEALTH_PORT)) == 0:
                raise AssertionError(f"port {MPI_HEALTH_PORT} is in use: the MPI operator serves /healthz there (a constant)")
        self.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MPI_LOCK_NAMESPACE}})
        env = {**os.environ, "KUBECONFIG": str(self.kube.kubeconfig)}
        argv = [str(self.c.binary), f"--kubeConfig={self.kube.kubeconfig}", f"--lock-namespace={MPI_LOCK_NAMESPACE}",
                "--threadiness=4", "--kube-api-qps=50", "--kube-api-burst=100", "--monitoring-port=0", "--v=2"]
        self.proc = Proc(self.c.name, argv, self.log, env=env).start()

        def leader():  # it starts its controller once it holds the Lease
            r = self.kube.run("get", "lease", "-n", MPI_LOCK_NAMESPACE, "-o", "json", check=False)
            return r.code == 0 and any((i.get("spec") or {}).get("holderIdentity") for i in r.json().get("items") or [])
        wait_ready(self.proc, leader, timeout, 0.5)
        return self



def start_controller_manager(plane: ControlPlane) -> Proc:
    """kube-controller-manager on ``plane`` with the Job, StatefulSet and garbage-collector
    controllers only (pods for Jobs and StatefulSets; children go with their owners)."""
    kc = plane.kubeconfig
    proc = Proc("kube-controller-manager", [
        str(plane.bindir / "kube-controller-manager"), f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
        "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
        "--controllers=job-controller,statefulset-controller,garbage-collector-controller",
        "--use-service-account-credentials=false", "--service-cluster-ip-range=10.0.0.0/24",
        "--concurrent-job-syncs=5", "--concurrent-statefulset-syncs=5", "--v=1",
    ], plane.log_dir / "kube-controller-manager.log").start()
    return proc


def controllers_missing() -> str | None:
    for c in CONTROLLERS:
        why = c.missing()
        if why:
            return why
    return None


def api_items(kube: Kube, resource: str, namespace: str, selector: str | None = None) -> list[dict]:
    doc = kube.get(resource, namespace=namespace, selector=selector) or {}
    return doc.get("items") or []


__all__ = ["CONTROLLERS", "JOBSET", "LWS", "MPI", "Controller", "RunningController", "controllers_missing", "start_controller_manager",
           "webhook_configurations", "api_items"]
