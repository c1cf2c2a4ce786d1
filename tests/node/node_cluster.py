"""A one-node Kubernetes cluster on this machine, for the real-node tier (tests/node).

The control plane is the e2e tier's (``tests/e2e/e2e_controlplane.py``: etcd + kube-apiserver +
kube-scheduler), with three additions set through its hooks: the ServiceAccount admission plugin
on (pods get their projected token), kube-apiserver listening on the pod bridge too, and
advertising the bridge's address (the ``kubernetes`` Service's endpoint, which pods reach).
Then, all started here and stopped by ``stop()``:

* kube-controller-manager (removes the node's not-ready taint, creates ServiceAccounts and
  ``kube-root-ca.crt``, runs Deployments/ReplicaSets/Jobs, signs nothing);
* containerd (Debian's package) with its root, state and sockets in the tier's directory, the
  CRI plugin with ``restrict_oom_score_adj = true`` (this VM's root lacks CAP_SYS_RESOURCE),
  runc with ``SystemdCgroup = false``, the sandbox image ``localhost/gangcheck-pause:1`` built
  by e2e/build-pause.sh and imported — nothing is pulled;
* CNI: Debian's containernetworking-plugins (/usr/lib/cni), one ``bridge`` network
  (``gcnode0``, 10.244.0.0/24, host-local IPAM with its data in the tier's directory, ``ipMasq:
  false``) whose pods get routes to their own subnet and the Service range only: no default
  route, so nothing leaves the machine;
* kubelet (``failCgroupV1: false``, ``cgroupDriver: cgroupfs``, ``failSwapOn: false``, image GC
  off so the imported images stay), node name ``gangcheck-node``, node IP = the bridge address;
* kube-proxy in iptables mode: the API server calls the webhook by its Service (without
  ``--enable-aggregator-routing`` kube-apiserver's webhook service resolver is
  ``NewClusterIPServiceResolver``: kubernetes cmd/kube-apiserver/app/server.go
  ``buildServiceResolver``; it dials the ClusterIP from the host and kube-proxy's OUTPUT DNAT
  takes it to a ready endpoint, as on a real cluster), and pods reach the API server by
  ``KUBERNETES_SERVICE_HOST`` (10.0.0.1:443 → the bridge address : the API server's port).
  Conntrack sysctls are left alone (``maxPerCore: 0``, timeouts 0) and localhost NodePorts are
  off (no route_localnet).

Every component authenticates with the admin client certificate (system:masters); that is the
tier's shortcut, not what a production node does (Node authorizer, TLS bootstrap).

``HostState`` (node_host.py) records what the components change outside the tier's directory
before anything starts; ``stop()`` puts it back and returns what is left (empty = clean).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE))

import e2e_controlplane as cp  # noqa: E402
from node_host import HostState  # noqa: E402

REPO = cp.REPO
NODE_BINARIES = ("kubelet", "kube-controller-manager", "kube-proxy")
DEBIAN_TOOLS = {"containerd": "containerd", "ctr": "containerd", "runc": "runc", "umoci": "umoci",
                "iptables": "iptables", "ip": "iproute2"}
CNI_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
LOCK_PATH = "/tmp/gangcheck-node.lock"

SYSTEM_NS = "gangcheck-system"  # manifests/base/namespace.yaml
NODE_NAME = "gangcheck-node"
BRIDGE = "gcnode0"
POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.0.0.0/24"  # e2e_controlplane's --service-cluster-ip-range
PAUSE_SCRIPT = REPO / "e2e" / "build-pause.sh"
#: The NodeCluster this process is running (one at most; the conftest's fixture sets it).
RUNNING: list["NodeCluster"] = []


def missing() -> str | None:
    """Why the tier cannot run on this machine, or None."""
    if os.geteuid() != 0:
        return "not root (containerd, runc, the kubelet and the CNI bridge need root)"
    absent = sorted({pkg for t, pkg in DEBIAN_TOOLS.items() if shutil.which(t) is None})
    if absent:
        return f"missing Debian packages: {' '.join(absent)} (apt-get install {' '.join(absent)})"
    if any(not os.access(CNI_DIR / p, os.X_OK) for p in CNI_PLUGINS):
        return f"no CNI plugins in {CNI_DIR} (apt-get install containernetworking-plugins)"
    if shutil.which("go") is None and not os.access(cp.bin_dir() / "kubelet", os.X_OK):
        return "`go` is not on PATH and no kubelet was built (make controlplane)"
    return None


def build_binaries() -> Path:
    """e2e/build.sh (builds only what is missing) → the bin directory."""
    p = subprocess.run(["bash", str(cp.BUILD_SCRIPT)], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise AssertionError(f"e2e/build.sh failed ({p.returncode}):\n{p.stderr[-4000:]}")
    sys.stderr.write(p.stderr[-1500:])
    missing_bins = [b for b in (*cp.BINARIES, *NODE_BINARIES) if not os.access(cp.bin_dir() / b, os.X_OK)]
    assert not missing_bins, f"e2e/build.sh did not produce {missing_bins}"
    return cp.bin_dir()


def build_pause() -> tuple[str, Path]:
    """e2e/build-pause.sh → (reference, OCI archive)."""
    p = subprocess.run(["bash", str(PAUSE_SCRIPT)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PY": sys.executable})
    if p.returncode != 0:
        raise AssertionError(f"e2e/build-pause.sh failed ({p.returncode}):\n{p.stderr[-3000:]}")
    ref, archive = p.stdout.strip().splitlines()[-2:]
    return ref, Path(archive)


class TierLock:
    """An exclusive fcntl lock on /tmp/gangcheck-node.lock for the whole tier (``flock`` on the
    command line takes the same lock): two runs on one machine would fight over the bridge, the
    iptables rules and /run/containerd."""

    def __init__(self, path: str = LOCK_PATH) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, timeout: float = 3600) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if not announced:
                    print(f"[node] waiting for {self.path} (another real-node tier run holds it)", file=sys.stderr)
                    announced = True
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.path} still held after {timeout:.0f}s")
                time.sleep(1)

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


class NodeCluster:
    """The control plane plus one real node. Attributes after ``start()``: ``plane``
    (cp.ControlPlane), ``kube`` (cp.Kube, admin), ``ctr`` (argv prefix for ``ctr`` on this
    containerd, namespace k8s.io), ``dir``, ``node_ready_seconds`` (kubelet start → Ready)."""

    def __init__(self, bindir: Path, workdir: Path, pause: tuple[str, Path]) -> None:
        self.bindir = Path(bindir)
        self.dir = Path(workdir)
        self.pause_ref, self.pause_archive = pause
        self.plane = cp.ControlPlane(self.bindir, self.dir / "cp")
        self.log_dir = self.plane.log_dir
        self.procs: list[cp.Proc] = []
        self.host: HostState | None = None
        self.kube: cp.Kube | None = None
        self.sock = self.dir / "containerd" / "containerd.sock"
        self.ctr = ["ctr", "--address", str(self.sock), "--namespace", "k8s.io"]
        self.node_ready_seconds = 0.0
        self.notes: list[str] = []

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "NodeCluster":
        # under the tier lock no other run is active: a bridge of ours is a killed run's leftover
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
            subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
            self.notes.append(f"deleted {BRIDGE} left by an earlier run")
        self.host = HostState.record(self.dir)
        self._bridge()
        self.plane.pki_ips = (GATEWAY,)
        self.plane.service_account_admission = True
        # Listen on the bridge as well as loopback (one --bind-address: all addresses; the
        # machine's network only carries 127.0.0.0/8 test traffic), advertise the bridge
        # address: the `kubernetes` Service's endpoint that kube-proxy sends pods to.
        self.plane.apiserver_args = ["--bind-address=0.0.0.0", f"--advertise-address={GATEWAY}",
                                     f"--kubelet-client-certificate={self.dir / 'cp' / 'pki' / 'admin.crt'}",
                                     f"--kubelet-client-key={self.dir / 'cp' / 'pki' / 'admin.key'}",
                                     # logs/exec: dial the kubelet at the node IP (no DNS here)
                                     "--kubelet-preferred-address-types=InternalIP"]
        self.plane.start(timeout=180)
        self.kube = cp.Kube(str(self.bindir / "kubectl"), self.plane.kubeconfig)
        self.plane.start_scheduler()
        self._controller_manager()
        self._containerd()
        self._import(self.pause_archive)
        self._kube_proxy()
        self._kubelet()
        return self

    def stop(self) -> list[str]:
        """Stop everything (pods first, so the kubelet tears their sandboxes down), put the host
        back; returns the leftovers (empty = clean)."""
        if self.kube is not None and self.plane.apiserver is not None and self.plane.apiserver.alive():
            try:
                self._drain_pods()
            except Exception as e:
                self.notes.append(f"draining pods: {e}")
        for p in reversed(self.procs):
            if p.name == "containerd":
                self._kill_leftover_tasks()
            try:
                p.stop(timeout=20)
            except Exception:
                pass
            if p.name == "kube-proxy":  # its own cleanup of the iptables rules it wrote
                subprocess.run([str(self.bindir / "kube-proxy"), "--cleanup", f"--config={self.dir / 'kube-proxy.yaml'}"],
                               capture_output=True, timeout=60)
        self.procs.clear()
        self.plane.stop()
        if self.host is None:
            return []
        self.notes += self.host.restore()
        return self.host.leftovers()

    def tails(self, n: int = 30) -> str:
        """The last ``n`` lines of every component's log (for failure messages)."""
        parts = []
        for f in sorted(self.log_dir.glob("*.log")):
            lines = f.read_text(errors="replace").splitlines()[-n:]
            parts.append(f"----- {f.name} (last {len(lines)} lines)\n" + "\n".join(lines))
        return "\n".join(parts)

    # ------------------------------------------------------------ pieces
    def _proc(self, name: str, argv: list[str]) -> cp.Proc:
        p = cp.Proc(name, argv, self.log_dir / f"{name}.log").start()
        self.procs.append(p)
        return p

    def _bridge(self) -> None:
        # made here (the CNI bridge plugin reuses it) so that kube-apiserver can advertise its
        # address and the kubelet can use it as the node IP before the first pod exists
        for argv in (["ip", "link", "add", BRIDGE, "type", "bridge"],
                     ["ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE],
                     ["ip", "link", "set", BRIDGE, "up"]):
            r = subprocess.run(argv, capture_output=True, text=True)
            assert r.returncode == 0, f"{' '.join(argv)}: {r.stderr}"

    def _controller_manager(self) -> None:
        pki = self.plane.pki
        kc = self.plane.kubeconfig
        self._proc("kube-controller-manager", [
            str(self.bindir / "kube-controller-manager"), f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={cp.free_port()}",
            f"--service-account-private-key-file={pki['sa.key']}", f"--root-ca-file={pki['ca.crt']}",
            "--use-service-account-credentials=false", "--allocate-node-cidrs=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--node-monitor-grace-period=40s", "--v=1",
        ])

    def _containerd(self) -> None:
        d = self.dir / "containerd"
        cni = self.dir / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        (cni / "net.d" / "10-gangcheck.conflist").write_text(json.dumps({
            "cniVersion": "0.4.0", "name": "gangcheck-node",
            "plugins": [{
                "type": "bridge", "bridge": BRIDGE, "isGateway": True, "isDefaultGateway": False,
                "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local", "dataDir": str(cni / "ipam"),
                         "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                         "routes": [{"dst": SERVICE_CIDR}]},
            }, {"type": "loopback"}],
        }, indent=1))
        d.mkdir(parents=True, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        (d / "config.toml").write_text(f"""version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[debug]
  address = "{d}/debug.sock"
[metrics]
  address = ""
[{cri}]
  sandbox_image = "{self.pause_ref}"
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{CNI_DIR}"
  conf_dir = "{cni / 'net.d'}"
""")
        p = self._proc("containerd", ["containerd", "--config", str(d / "config.toml")])
        cp.wait_ready(p, lambda: subprocess.run([*self.ctr, "version"], capture_output=True, timeout=10).returncode == 0, 60)

    def _import(self, archive: Path) -> None:
        r = subprocess.run([*self.ctr, "image", "import", str(archive)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"ctr image import {archive}: {r.stderr}"

    def import_image(self, archive: Path) -> None:
        """``ctr -n k8s.io image import`` into the node's containerd (what the CRI serves)."""
        self._import(archive)

    def _kube_proxy(self) -> None:
        cfg = self.dir / "kube-proxy.yaml"
        cfg.write_text(json.dumps({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "mode": "iptables", "clusterCIDR": POD_CIDR, "hostnameOverride": NODE_NAME,
            "clientConnection": {"kubeconfig": str(self.plane.kubeconfig)},
            "bindAddress": "127.0.0.1",
            "healthzBindAddress": f"127.0.0.1:{cp.free_port()}", "metricsBindAddress": f"127.0.0.1:{cp.free_port()}",
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False, "syncPeriod": "5s", "minSyncPeriod": "0s"},
        }, indent=1))
        self._proc("kube-proxy", [str(self.bindir / "kube-proxy"), f"--config={cfg}", "--v=1"])

    def _kubelet(self) -> None:
        d = self.dir / "kubelet"
        d.mkdir(parents=True, exist_ok=True)
        pki = self.plane.pki
        cfg = d / "config.yaml"
        cfg.write_text(json.dumps({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "failCgroupV1": False, "cgroupDriver": "cgroupfs", "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.sock}",
            "address": GATEWAY, "port": cp.free_port(), "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": cp.free_port(),
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(pki["ca.crt"])}},
            "authorization": {"mode": "Webhook"},
            "podLogsDir": str(self.dir / "pod-logs"),
            "resolvConf": str(self._resolv_conf()),
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "podCIDR": POD_CIDR, "maxPods": 32, "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "5s", "syncFrequency": "10s",
            "fileCheckFrequency": "5s", "volumeStatsAggPeriod": "0s",
            "localStorageCapacityIsolation": True,
        }, indent=1))
        t0 = time.monotonic()
        p = self._proc("kubelet", [
            str(self.bindir / "kubelet"), f"--config={cfg}", f"--kubeconfig={self.plane.kubeconfig}",
            f"--root-dir={d / 'root'}", f"--hostname-override={NODE_NAME}", f"--node-ip={GATEWAY}", "--v=1",
        ])
        cp.wait_ready(p, self.node_ready, 180, interval=0.25)
        self.node_ready_seconds = time.monotonic() - t0
        # the node lifecycle controller lifts node.kubernetes.io/not-ready once it sees Ready
        cp.wait_for(lambda: not any(t.get("key") == "node.kubernetes.io/not-ready"
                                    for t in (self.kube.get("node", NODE_NAME)["spec"].get("taints") or [])),
                    120, "the node's not-ready taint lifted by kube-controller-manager", 0.5)

    def _resolv_conf(self) -> Path:
        # pods get no DNS server: nothing they need has a name (the API server is an IP)
        p = self.dir / "resolv.conf"
        p.write_text("options ndots:1\n")
        return p

    def node_ready(self) -> bool:
        r = self.kube.run("get", "node", NODE_NAME, "-o", "json", check=False)
        if r.code != 0:
            return False
        conds = {c["type"]: c["status"] for c in r.json()["status"].get("conditions", [])}
        return conds.get("Ready") == "True"

    def _drain_pods(self) -> None:
        k = self.kube
        for kind in ("deployments", "replicasets", "jobs", "daemonsets", "statefulsets"):
            k.run("delete", kind, "--all", "-A", "--wait=false", check=False, timeout=60)
        k.run("delete", "pods", "--all", "-A", "--grace-period=1", "--wait=false", check=False, timeout=60)
        cp.wait_for(lambda: not k.get("pods", all_ns=True)["items"], 120, "every pod deleted", 0.5)
        # the kubelet stops the sandboxes after the pods are gone from the API
        cp.wait_for(lambda: self._tasks() == [], 90, "every sandbox stopped by the kubelet", 0.5)

    def _tasks(self) -> list[str]:
        r = subprocess.run([*self.ctr, "tasks", "ls", "-q"], capture_output=True, text=True, timeout=30)
        return r.stdout.split() if r.returncode == 0 else ["?"]

    def _kill_leftover_tasks(self) -> None:
        for t in self._tasks():
            if t == "?":
                break
            self.notes.append(f"killed leftover task {t}")
            subprocess.run([*self.ctr, "tasks", "kill", "-s", "SIGKILL", t], capture_output=True, timeout=30)
            time.sleep(0.5)
            subprocess.run([*self.ctr, "tasks", "rm", "-f", t], capture_output=True, timeout=30)
        r = subprocess.run([*self.ctr, "containers", "ls", "-q"], capture_output=True, text=True, timeout=30)
        for c in r.stdout.split():
            subprocess.run([*self.ctr, "containers", "rm", c], capture_output=True, timeout=30)
