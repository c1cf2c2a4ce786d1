"""A local Kubernetes control plane for the e2e tier: etcd + kube-apiserver (+ kube-scheduler).

envtest-style (FIELD-NOTES §10): no kubelet, no controller-manager, no containers. Binaries come
from ``e2e/build.sh`` (``make controlplane``), cached in ``~/.cache/gangcheck/<version>/bin``.

Everything runs on 127.0.0.1 with free ports, in a temporary directory; each process is the
leader of its own process group, and ``stop()`` kills the groups and removes the directory.

Also here: ``Kube`` — a small client used by the tests (kubectl subprocess + JSON), and
``generate_pki`` (CA, apiserver serving cert, admin client cert in system:masters, service
account key pair) with ``cryptography``.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "e2e" / "build.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kubectl")
#: Lines the scenarios add for the end of the run (referee results): conftest prints them in
#: pytest's terminal summary.
SUMMARY: list[str] = []


# ---------------------------------------------------------------- binaries


def required_version(go_mod: str, module: str) -> str:
    """The version ``go_mod`` (a path under the repository) requires of ``module``."""
    for line in (REPO / go_mod).read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "require" and parts[1] == module:
            return parts[2]
    raise RuntimeError(f"{go_mod}: no `require {module} vX.Y.Z` line")


def k8s_version() -> str:
    return required_version("e2e/go.mod", "k8s.io/kubernetes")


def cache_root() -> Path:
    """The build scripts' cache root: GANGCHECK_CACHE, else $XDG_CACHE_HOME/gangcheck, else ~/.cache/gangcheck."""
    return Path(os.environ.get("GANGCHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gangcheck"))


def bin_dir() -> Path:
    """Where e2e/build.sh puts the binaries (GANGCHECK_E2E_BIN overrides)."""
    if os.environ.get("GANGCHECK_E2E_BIN"):
        return Path(os.environ["GANGCHECK_E2E_BIN"])
    return cache_root() / k8s_version() / "bin"


def missing_binaries(d: Path | None = None) -> list[str]:
    d = d or bin_dir()
    return [b for b in BINARIES if not os.access(d / b, os.X_OK)]


# ---------------------------------------------------------------- PKI


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _issue(ca_cert, ca_key, subject: x509.Name, *, server: bool, ips=(), dns=()) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    )
    if ips or dns:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]), critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def generate_pki(d: Path, extra_ips: Iterable[str] = ()) -> dict[str, Path]:
    """CA; apiserver serving cert (127.0.0.1, localhost, kubernetes.default.svc, 10.0.0.1, and
    ``extra_ips``); admin client cert (CN admin, O system:masters); service-account RSA key pair.
    Returns paths."""
    d.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name("gangcheck-e2e-ca")).issuer_name(_name("gangcheck-e2e-ca"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    files: dict[str, bytes] = {"ca.crt": ca_cert.public_bytes(serialization.Encoding.PEM), "ca.key": _pem_key(ca_key)}
    files["apiserver.crt"], files["apiserver.key"] = _issue(
        ca_cert, ca_key, _name("kube-apiserver"), server=True, ips=("127.0.0.1", "10.0.0.1", *extra_ips),
        dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
    files["admin.crt"], files["admin.key"] = _issue(ca_cert, ca_key, _name("admin", "system:masters"), server=False)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files["sa.key"] = _pem_key(sa)
    files["sa.pub"] = sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    out = {}
    for name, data in files.items():
        p = d / name
        p.write_bytes(data)
        os.chmod(p, 0o600 if name.endswith(".key") else 0o644)
        out[name] = p
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.1):
    """Poll ``pred`` until it returns a truthy value (returned) or ``timeout`` → AssertionError."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as exc:  # keep polling; report the last error
            last_exc = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


# ---------------------------------------------------------------- processes


def wait_ready(proc: "Proc", probe: Callable[[], Any], timeout: float, interval: float = 0.2) -> None:
    """Poll ``probe`` (exceptions count as not ready) until truthy; AssertionError with the
    process's log tail when ``proc`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if not proc.alive():
            raise AssertionError(f"{proc.name} exited:\n{proc.tail()}")
        try:
            if probe():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{proc.name} not ready in {timeout:.0f}s:\n{proc.tail()}")
        time.sleep(interval)


def _die_with_parent() -> None:
    """In the child: SIGKILL when the test process dies, even by SIGKILL (Linux prctl
    PR_SET_PDEATHSIG), so no etcd/kube-apiserver outlives a killed pytest."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    env: dict | None = None
    popen: subprocess.Popen | None = None

    def start(self) -> "Proc":
        f = open(self.log, "ab")
        f.write(f"\n==== {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n".encode())
        f.flush()
        self.popen = subprocess.Popen(self.argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True, env=self.env, preexec_fn=_die_with_parent)
        f.close()
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        p = self.popen
        if p is None:
            return
        if p.poll() is None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            try:  # the leader is gone; make sure nothing of its group lingers
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.popen = None

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def readyz(port: int) -> Callable[[], bool]:
    """A probe for ``wait_ready``: GET http://127.0.0.1:<port>/readyz answers 200 (the health
    endpoint controller-runtime managers serve)."""
    def ready() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    return ready


class OwnedProcess:
    """A referee's controller, run as one process: ``self.proc`` (a ``Proc``, None until started
    and after ``stop``)."""

    proc: Proc | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path) -> Path:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gangcheck-e2e",
        "clusters": [{"name": "gangcheck-e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "admin", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "gangcheck-e2e", "context": {"cluster": "gangcheck-e2e", "user": "admin"}}],
    }
    path.write_text(json.dumps(doc, indent=1))
    os.chmod(path, 0o600)
    return path


class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler on demand) on loopback, in ``workdir``."""

    def __init__(self, bindir: Path, workdir: Path | None = None) -> None:
        self.bindir = Path(bindir)
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="gangcheck-e2e-"))
        self.pki: dict[str, Path] = {}
        self.etcd: Proc | None = None
        self.apiserver: Proc | None = None
        self.scheduler: Proc | None = None
        self.scheduler_port = 0
        self.etcd_port = self.peer_port = self.api_port = 0
        self.kubeconfig = self.dir / "kubeconfig"
        self.log_dir = self.dir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # For the real-node tier (tests/node): more serving-certificate IPs, kube-apiserver flags
        # appended after the defaults (a later scalar flag wins), and the ServiceAccount
        # admission plugin (off here: no controller-manager creates the `default` ServiceAccount).
        self.pki_ips: tuple[str, ...] = ()
        self.apiserver_args: list[str] = []
        self.service_account_admission = False

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    # ------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 90.0) -> "ControlPlane":
        t0 = time.monotonic()
        self.pki = generate_pki(self.dir / "pki", self.pki_ips)
        self.etcd_port, self.peer_port, self.api_port = free_port(), free_port(), free_port()
        self.start_etcd()
        wait_for(self._etcd_healthy, 30, "etcd /health", 0.1)
        self.start_apiserver()
        self.wait_apiserver_ready(timeout - (time.monotonic() - t0))
        write_kubeconfig(self.kubeconfig, self.server, self.pki["ca.crt"], self.pki["admin.crt"], self.pki["admin.key"])
        self.startup_seconds = time.monotonic() - t0
        return self

    def start_etcd(self) -> None:
        data = self.dir / "etcd-data"
        data.mkdir(exist_ok=True)
        client, peer = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{self.peer_port}"
        self.etcd = Proc("etcd", [
            str(self.bindir / "etcd"), "--name=e2e", f"--data-dir={data}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=e2e={peer}", "--unsafe-no-fsync=true", "--log-level=warn",
        ], self.log_dir / "etcd.log").start()

    def _etcd_healthy(self) -> bool:
        if not self.etcd.alive():
            raise RuntimeError("etcd exited:\n" + self.etcd.tail())
        with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=2) as r:
            return json.loads(r.read()).get("health") == "true"

    def start_apiserver(self) -> None:
        p = self.pki
        self.apiserver = Proc("kube-apiserver", [
            str(self.bindir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--secure-port={self.api_port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--tls-cert-file={p['apiserver.crt']}", f"--tls-private-key-file={p['apiserver.key']}",
            f"--client-ca-file={p['ca.crt']}", f"--cert-dir={self.dir / 'apiserver-certs'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC", "--allow-privileged=true",
            *([] if self.service_account_admission else ["--disable-admission-plugins=ServiceAccount"]),
            # as on GKE and AKS: a pod requesting nvidia.com/gpu tolerates nvidia.com/gpu:NoSchedule
            # taints (plugin/pkg/admission/extendedresourcetoleration); gangcheck models it
            "--enable-admission-plugins=ExtendedResourceToleration",
            f"--service-account-issuer=https://127.0.0.1:{self.api_port}",
            f"--service-account-key-file={p['sa.pub']}", f"--service-account-signing-key-file={p['sa.key']}",
            # 1.37 refuses to start when the endpoint reconciler would publish a loopback address
            # as the `kubernetes` Service's endpoint (pkg/controlplane/instance.go: "cannot use
            # public IP ... with endpoint reconciler", reconcilers/lease.go ValidateIP; absent in
            # 1.36). Advertising 127.0.0.1, no Endpoints are published (nothing in-cluster here
            # could reach them); a plane that advertises another address (tests/node) keeps the
            # default lease reconciler.
            *([] if any(a.startswith("--advertise-address=") for a in self.apiserver_args)
              else ["--endpoint-reconciler-type=none"]),
            "--v=1", *self.apiserver_args,
        ], self.log_dir / "kube-apiserver.log").start()

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki["ca.crt"]))
        ctx.load_cert_chain(str(self.pki["admin.crt"]), str(self.pki["admin.key"]))
        return ctx

    def readyz(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.server}/readyz", timeout=3, context=self._ssl()) as r:
                return r.status == 200
        except Exception:
            return False

    def wait_apiserver_ready(self, timeout: float = 60.0) -> None:
        wait_ready(self.apiserver, self.readyz, timeout)

    def restart_apiserver(self, down_seconds: float = 0.0, during: Callable[[], None] | None = None) -> None:
        """Stop kube-apiserver, optionally run ``during()`` while it is down, start it again."""
        self.apiserver.stop()
        if during is not None:
            during()
        if down_seconds:
            time.sleep(down_seconds)
        self.start_apiserver()
        self.wait_apiserver_ready(90)

    def start_scheduler(self, extra_args: Iterable[str] = ()) -> None:
        """Start kube-scheduler (once; a no-op while it runs). ``extra_args`` are appended after
        the default flags (e.g. ``--feature-gates=...``); without them it runs as before."""
        if self.scheduler is not None and self.scheduler.alive():
            return
        self.scheduler_port = free_port()  # /metrics, /healthz (HTTPS; the admin client certificate)
        self.scheduler = Proc("kube-scheduler", [
            str(self.bindir / "kube-scheduler"), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={self.scheduler_port}", "--v=2",
            *extra_args,
        ], self.log_dir / "kube-scheduler.log").start()

    def stop(self) -> None:
        for p in (self.scheduler, self.apiserver, self.etcd):
            if p is not None:
                try:
                    p.stop()
                except Exception:
                    pass
        if self._own_dir and not os.environ.get("GANGCHECK_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- kubectl


@dataclass
class Result:
    argv: list[str]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __str__(self) -> str:
        return f"$ {' '.join(self.argv)}\nexit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


@dataclass
class Kube:
    """kubectl with a fixed kubeconfig; ``apply``/``create`` take Python objects (sent as JSON)."""

    kubectl: str
    kubeconfig: Path
    env: dict = field(default_factory=dict)

    def run(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60) -> Result:
        argv = [self.kubectl, f"--kubeconfig={self.kubeconfig}", *args]
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **self.env})
        r = Result(argv, p.returncode, p.stdout, p.stderr)
        if check and r.code != 0:
            raise AssertionError(f"kubectl failed:\n{r}")
        return r

    def _doc(self, objs) -> str:
        objs = [objs] if isinstance(objs, dict) else list(objs)
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})

    def apply(self, objs, *extra: str, check: bool = True) -> Result:
        return self.run("apply", "-f", "-", *extra, stdin=self._doc(objs), check=check)

    def create(self, objs, *extra: str, check: bool = True) -> Result:
        return self.run("create", "-f", "-", *extra, stdin=self._doc(objs), check=check)

    def get(self, resource: str, name: str | None = None, namespace: str | None = None, *, all_ns: bool = False,
            selector: str | None = None, check: bool = True):
        args = ["get", resource] + ([name] if name else []) + ["-o", "json"]
        if namespace:
            args += ["-n", namespace]
        if all_ns:
            args.append("-A")
        if selector:
            args += ["-l", selector]
        r = self.run(*args, check=check)
        return r.json() if r.code == 0 else None

    def exists(self, resource: str, name: str, namespace: str | None = None) -> bool:
        args = ["get", resource, name, "--ignore-not-found", "-o", "name"] + (["-n", namespace] if namespace else [])
        return bool(self.run(*args).stdout.strip())

    def delete(self, *args: str) -> Result:
        return self.run("delete", *args, "--ignore-not-found", "--wait=false", check=False)

    def patch_status(self, resource: str, name: str, patch: dict, namespace: str | None = None) -> Result:
        args = ["patch", resource, name, "--subresource=status", "--type=merge", "-p", json.dumps(patch)]
        if namespace:
            args += ["-n", namespace]
        return self.run(*args)


# ---------------------------------------------------------------- object builders


E2E_LABEL = "e2e.gangcheck.io/pool"
GPU = "nvidia.com/gpu"


def node_obj(name: str, pool: str, *, gpus: int = 8, cpu: str = "96", memory: str = "1024Gi", pods: int = 110,
             labels: dict | None = None, taints: Iterable[dict] = (), unschedulable: bool = False,
             gpu_allocatable: int | None = None, extra_capacity: dict | None = None) -> tuple[dict, dict]:
    """(Node object, status patch) for a kubelet-less node."""
    lab = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", E2E_LABEL: pool,
           **(labels or {})}
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        capacity[GPU] = str(gpus)
    capacity.update(extra_capacity or {})
    allocatable = dict(capacity)
    if gpus and gpu_allocatable is not None:
        allocatable[GPU] = str(gpu_allocatable)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = list(taints)
    if unschedulable:
        spec["unschedulable"] = True
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab}, "spec": spec}
    ready = not any(t.get("key") == "node.kubernetes.io/not-ready" for t in taints)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {
        "capacity": capacity, "allocatable": allocatable,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                        "message": "e2e fake node", "lastHeartbeatTime": now, "lastTransitionTime": now}],
    }}
    return node, status


def create_nodes(kube: Kube, nodes: list[tuple[dict, dict]]) -> None:
    """Create the Nodes, set their status through the status subresource, then their taints.

    The API server's TaintNodesByCondition admission adds ``node.kubernetes.io/not-ready:NoSchedule``
    to every Node it creates; the node lifecycle controller (not running here) would remove it
    once the node is Ready. So the taints are set again after the status: exactly the wanted ones.
    """
    if not nodes:
        return
    kube.apply([n for n, _ in nodes])
    for n, st in nodes:
        name = n["metadata"]["name"]
        kube.patch_status("node", name, st)
        kube.run("patch", "node", name, "--type=merge", "-p", json.dumps({"spec": {"taints": n["spec"].get("taints") or None}}))


def pod_obj(name: str, namespace: str, *, node: str | None = None, gpus: int = 0, cpu: str = "1", memory: str = "1Gi",
            labels: dict | None = None, node_selector: dict | None = None, tolerations: list | None = None,
            host_port: int | None = None, scheduler: str | None = None) -> dict:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        res["requests"][GPU] = str(gpus)
        res["limits"] = {GPU: str(gpus)}
    c: dict[str, Any] = {"name": "main", "image": "registry.example.com/e2e:1", "resources": res}
    if host_port:
        c["ports"] = [{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]
    spec: dict[str, Any] = {"containers": [c], "restartPolicy": "Never", "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": spec}


def pod_state(pod: dict) -> str | None:
    """kube-scheduler's decision on a pod: "bound" (``spec.nodeName`` set), "unschedulable"
    (``PodScheduled=False``, reason Unschedulable), or None while it has not decided."""
    if pod["spec"].get("nodeName"):
        return "bound"
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return "unschedulable"
    return None


def namespace_obj(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
