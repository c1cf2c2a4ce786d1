"""Karpenter's KWOK cloud provider as a referee in the e2e tier (issue #16).

``karpenter-kwok`` (sigs.k8s.io/karpenter/kwok, built by ``e2e/build-karpenter.sh`` into
``~/.cache/gangcheck/karpenter-<version>/``) is Karpenter's real controller with a cloud provider
that launches no machine: ``Create`` writes a Node object with the chosen instance type's
capacity (karpenter kwok/cloudprovider/cloudprovider.go ``toNode``). It runs here as a process
against the tier's kube-apiserver + kube-scheduler: kube-scheduler marks a pod Unschedulable,
Karpenter simulates, creates NodeClaims, and the provider creates their Nodes.

What the tier gives it:

* the CRDs of the built module (``crds/`` next to the binary: karpenter.sh NodePool, NodeClaim,
  NodeOverlay, autoscaling.x-k8s.io CapacityBuffer, karpenter.kwok.sh KWOKNodeClass), applied
  with ``kubectl apply --server-side``, and one KWOKNodeClass ``default`` (its CRD defaults its
  status to Ready: kwok/apis/v1alpha1/kwoknodeclass.go);
* an instance-type catalog of its own (``CATALOG``, written to a file and passed through
  ``INSTANCE_TYPES_FILE_PATH``, kwok/options/options.go): the embedded one has no GPU type.
  Karpenter's allocatable of a type is its capacity minus the KWOK provider's kube-reserved
  100m cpu and 10Mi memory (kwok/cloudprovider/helpers.go ``newInstanceType``), which is what
  ``node_shape`` gives gangcheck;
* environment (pkg/operator/options/options.go): ``KUBECONFIG``, leader election off, metrics
  and health probe on free ports (Karpenter binds ``:<port>``, every interface: the format is
  upstream's), short batch windows.

New nodes never become Ready: no kubelet and no node lifecycle controller run, so they keep
``node.kubernetes.io/not-ready`` and pods are not bound to them. The referee does not need that:
Karpenter's decision is the NodeClaims it creates (it counts in-flight NodeClaims as capacity
and does not create more for the same pods: pkg/controllers/provisioning/scheduling/scheduler.go
``NewScheduler`` takes the cluster's in-flight nodes as existing nodes).

Settling: Karpenter re-simulates when a provisionable pod changes (pkg/controllers/provisioning/
controller.go ``PodController``, else every 10 s); ``settle`` touches a pending pod to trigger a
pass and reads ``karpenter_scheduler_scheduling_duration_seconds_count`` from the metrics
endpoint to see the pass end, until two passes in a row leave the NodeClaims unchanged.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

from e2e_controlplane import Kube, OwnedProcess, Proc, cache_root, create_nodes, free_port, readyz, required_version, wait_for, wait_ready

GROUP = "karpenter.sh"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
NODECLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
GPU = "nvidia.com/gpu"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
#: kube-reserved the KWOK provider subtracts from every instance type (kwok/cloudprovider/helpers.go).
RESERVED = {"cpu": 100, "memory": 10 * 2**20}
ZONES = ("test-zone-a", "test-zone-b", "test-zone-c")


def _type(name: str, cpu: int, mem_gi: int, *, gpus: int = 0, pods: int = 110, zones=ZONES, price: float = 1.0) -> dict:
    res = {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": str(pods)}
    if gpus:
        res[GPU] = str(gpus)
    offerings = []
    for z in zones:
        for ct, factor in (("spot", 0.7), ("on-demand", 1.0)):
            offerings.append({"Price": round(price * factor, 4), "Available": True, "Requirements": [
                {"key": CAPACITY_TYPE, "operator": "In", "values": [ct]},
                {"key": ZONE, "operator": "In", "values": [z]}]})
    return {"name": name, "offerings": offerings, "architecture": "amd64", "operatingSystems": ["linux"], "resources": res}


#: The referee's instance types (KWOK's JSON format, kwok/cloudprovider/helpers.go InstanceTypeOptions).
CATALOG = [
    _type("c-4x", 4, 16, price=0.2),
    _type("c-16x", 16, 64, price=0.8),
    _type("c-64x", 64, 256, price=3.2),
    _type("c-16x-p8", 16, 64, pods=8, zones=ZONES[:2], price=0.7),
    _type("g-4x", 32, 256, gpus=4, zones=ZONES[:2], price=8.0),
    _type("g-8x", 96, 1024, gpus=8, zones=ZONES[1:], price=20.0),
]


def _qty(s: str) -> int:
    """A catalog quantity in scheduler units (cpu millicores, memory bytes, counts)."""
    if s.endswith("Gi"):
        return int(s[:-2]) * 2**30
    return int(s)


def node_shape(type_name: str) -> dict[str, int]:
    """Allocatable of one node of ``type_name`` as Karpenter sees it (scheduler units)."""
    t = next(t for t in CATALOG if t["name"] == type_name)
    shape = {}
    for r, v in t["resources"].items():
        n = _qty(v) * (1000 if r == "cpu" else 1)
        shape[r] = n - RESERVED.get(r, 0)
    return shape


def type_zones(type_name: str) -> set[str]:
    t = next(t for t in CATALOG if t["name"] == type_name)
    return {r["values"][0] for o in t["offerings"] for r in o["Requirements"] if r["key"] == ZONE}


# ---------------------------------------------------------------- the binary


def version() -> str:
    return required_version("e2e/karpenter/go.mod", "sigs.k8s.io/karpenter")


def karpenter_dir() -> Path:
    """Where e2e/build-karpenter.sh puts karpenter-kwok and crds/ (GANGCHECK_E2E_KARPENTER overrides)."""
    if os.environ.get("GANGCHECK_E2E_KARPENTER"):
        return Path(os.environ["GANGCHECK_E2E_KARPENTER"])
    return cache_root() / f"karpenter-{version()}"


def missing(d: Path | None = None) -> str | None:
    """Why the referee cannot run (None: it can)."""
    d = d or karpenter_dir()
    if not os.access(d / "karpenter-kwok", os.X_OK):
        return f"{d / 'karpenter-kwok'} is missing (run `make controlplane`: e2e/build-karpenter.sh)"
    if not sorted((d / "crds").glob("*.yaml")):
        return f"{d / 'crds'} holds no CRDs (run `GANGCHECK_REBUILD=1 bash e2e/build-karpenter.sh`)"
    return None


# ---------------------------------------------------------------- reading the API server


#: Collection paths of what the referee reads.
PATHS = {
    "nodes": "/api/v1/nodes",
    "pods": "/api/v1/pods",
    "nodepools": "/apis/karpenter.sh/v1/nodepools",
    "nodeclaims": "/apis/karpenter.sh/v1/nodeclaims",
}


class Api:
    """Requests straight to the API server with the kubeconfig's client certificate (the referee
    polls a lot; a kubectl process costs ~0.2 s here). Falls back to kubectl for a kubeconfig it
    cannot use (tokens, embedded data)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.base = self.ctx = None
        try:
            cfg = json.loads(Path(kube.kubeconfig).read_text())
            cl, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
            ctx = ssl.create_default_context(cafile=cl["certificate-authority"])
            ctx.load_cert_chain(user["client-certificate"], user["client-key"])
            self.base, self.ctx = cl["server"], ctx
        except (OSError, ValueError, KeyError, IndexError, TypeError, ssl.SSLError):
            pass

    def items(self, what: str, namespace: str | None = None) -> list[dict]:
        """``what``: a key of ``PATHS``; every item, with ``apiVersion`` and ``kind`` set (a list
        from the API server leaves them out of its items)."""
        api_version, kind = {"nodes": ("v1", "Node"), "pods": ("v1", "Pod"), "nodepools": ("karpenter.sh/v1", "NodePool"),
                             "nodeclaims": ("karpenter.sh/v1", "NodeClaim")}[what]
        if self.base is None:
            res = {"nodepools": "nodepools.karpenter.sh", "nodeclaims": "nodeclaims.karpenter.sh"}.get(what, what)
            doc = self.kube.get(res, namespace=namespace, all_ns=namespace is None and what == "pods")
        else:
            path = PATHS[what]
            if namespace:
                path = path.replace("/pods", f"/namespaces/{namespace}/pods")
            with urllib.request.urlopen(self.base + path, timeout=20, context=self.ctx) as r:
                doc = json.loads(r.read())
        out = doc.get("items") or []
        for i in out:
            i.setdefault("apiVersion", api_version)
            i.setdefault("kind", kind)
        return out

    def _send(self, method: str, path: str, body: dict, ctype: str = "application/json") -> None:
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": ctype})
        urllib.request.urlopen(req, timeout=20, context=self.ctx).close()

    def create_nodes(self, nodes: list[tuple[dict, dict]]) -> None:
        """``e2e_controlplane.create_nodes`` (the same three steps: create, status, taints) over HTTP."""
        if self.base is None:
            create_nodes(self.kube, nodes)
            return
        merge = "application/merge-patch+json"
        for n, st in nodes:
            name = n["metadata"]["name"]
            self._send("POST", "/api/v1/nodes", n)
            self._send("PATCH", f"/api/v1/nodes/{name}/status", st, merge)
            self._send("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": n["spec"].get("taints") or None}}, merge)

    def annotate_pod(self, namespace: str, name: str, key: str, value: str) -> None:
        if self.base is None:
            self.kube.run("annotate", "pod", name, "-n", namespace, "--overwrite", f"{key}={value}", check=False)
            return
        try:
            self._send("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", {"metadata": {"annotations": {key: value}}},
                       "application/merge-patch+json")
        except urllib.error.HTTPError:
            pass  # gone meanwhile: the pass is triggered by the others


# ---------------------------------------------------------------- the controller


class Karpenter(OwnedProcess):
    """karpenter-kwok as a process against the tier's API server (``start``/``stop``)."""

    def __init__(self, kube: Kube, workdir: Path, d: Path | None = None) -> None:
        self.kube = kube
        self.api = Api(kube)
        self.dir = Path(d or karpenter_dir())
        self.work = workdir / "karpenter"
        self.work.mkdir(parents=True, exist_ok=True)
        self.catalog = self.work / "instance-types.json"
        self.log = self.work / "karpenter.log"
        self.metrics_port = self.health_port = 0
        self.proc: Proc | None = None

    def install(self) -> None:
        """Karpenter's CRDs (server-side: the NodePool CRD is large) and the KWOKNodeClass."""
        crds = self.dir / "crds"
        self.kube.run("apply", "--server-side", "--force-conflicts", "-f", str(crds))
        self.kube.run("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds))
        wait_for(lambda: self.kube.run("get", "nodepools.karpenter.sh,nodeclaims.karpenter.sh,kwoknodeclasses.karpenter.kwok.sh",
                                       check=False).code == 0, 30, "Karpenter CRDs served")
        self.kube.apply({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                         "metadata": {"name": NODECLASS["name"]}, "spec": {}})

    def start(self, timeout: float = 90) -> "Karpenter":
        self.catalog.write_text(json.dumps(CATALOG, indent=1))
        self.metrics_port, self.health_port = free_port(), free_port()
        env = {**os.environ, "KUBECONFIG": str(self.kube.kubeconfig), "SYSTEM_NAMESPACE": "kube-system",
               "DISABLE_LEADER_ELECTION": "true", "METRICS_PORT": str(self.metrics_port),
               "HEALTH_PROBE_PORT": str(self.health_port), "INSTANCE_TYPES_FILE_PATH": str(self.catalog),
               "BATCH_IDLE_DURATION": "300ms", "BATCH_MAX_DURATION": "3s", "LOG_LEVEL": "info",
               "CPU_REQUESTS": "1000", "DISABLE_CLUSTER_STATE_OBSERVABILITY": "true"}
        self.proc = Proc("karpenter", [str(self.dir / "karpenter-kwok")], self.log, env=env).start()

        wait_ready(self.proc, readyz(self.health_port), timeout, 0.3)
        return self

    # ------------------------------------------------------------ observing it
    def passes(self) -> int:
        """Provisioning simulations finished so far (the provisioner's scheduling_duration count)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        m = re.search(r'^karpenter_scheduler_scheduling_duration_seconds_count\{[^}]*controller="provisioner"[^}]*\} (\S+)$',
                      text, re.M)
        return int(float(m.group(1))) if m else 0

    def nodeclaims(self) -> list[dict]:
        return self.api.items("nodeclaims")

    def settle(self, namespace: str, pending: list[str], timeout: float = 60) -> list[dict]:
        """Trigger provisioning passes (by touching a pending pod) until two passes in a row
        end with the same NodeClaims; return them. The first pass may have started before the
        last pod was pending (then the second creates the rest and a third confirms); every
        later one starts after its poke, with every pod of ``pending`` in Karpenter's cache."""
        deadline = time.monotonic() + timeout
        seen: list[int] = []
        k = 0
        while True:
            if not self.alive():
                raise AssertionError("karpenter-kwok exited:\n" + self.proc.tail())
            before = self.passes()
            k += 1
            if pending:
                self.api.annotate_pod(namespace, pending[k % len(pending)], "e2e.gangcheck.io/poke", str(k))
            wait_for(lambda: self.passes() > before or None, max(1.0, deadline - time.monotonic()),
                     "a Karpenter provisioning pass", 0.1)
            time.sleep(0.2)  # the NodeClaims of a pass are created after its simulation is counted
            claims = self.nodeclaims()
            seen.append(len(claims))
            if len(seen) >= 2 and seen[-1] == seen[-2]:
                return claims
            if time.monotonic() > deadline:
                raise AssertionError(f"Karpenter did not settle in {timeout:.0f}s (NodeClaims per pass: {seen})")


# ---------------------------------------------------------------- objects


def nodepool(name: str, *, requirements: list[dict], labels: dict | None = None, taints: list[dict] | None = None,
             limits: dict | None = None, weight: int | None = None) -> dict:
    """A karpenter.sh/v1 NodePool on the KWOKNodeClass; never consolidated or expired (the
    referee reads what Karpenter provisions, not what it later removes)."""
    spec: dict = {"nodeClassRef": dict(NODECLASS), "requirements": requirements, "expireAfter": "Never"}
    if taints:
        spec["taints"] = taints
    np: dict = {"apiVersion": f"{GROUP}/v1", "kind": "NodePool", "metadata": {"name": name},
                "spec": {"template": {"metadata": {"labels": dict(labels or {})}, "spec": spec},
                         "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}}}
    if limits:
        np["spec"]["limits"] = dict(limits)
    if weight is not None:
        np["spec"]["weight"] = weight
    return np


def nodepools_ready(api: Api, names: list[str]) -> bool:
    items = {i["metadata"]["name"]: i for i in api.items("nodepools")}
    for n in names:
        conds = ((items.get(n) or {}).get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
            return False
    return True


def clear(api: Api, namespace: str, plain_label: tuple[str, str]) -> None:
    """Remove every pod of ``namespace``, every NodePool and NodeClaim, every Node Karpenter made
    and the plain Nodes labelled ``plain_label`` (key, value), so the next configuration starts
    from nothing. Karpenter's termination finalizers go within a second (nothing to drain: no
    kubelet); what still holds one after 10 s has it dropped."""
    kube, (key, value) = api.kube, plain_label
    t0 = time.monotonic()
    kube.run("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--ignore-not-found", "--wait=false",
             check=False)

    def left() -> list[dict]:
        items = api.items("nodes") + api.items("nodeclaims") + api.items("nodepools")
        return [i for i in items if i["kind"] != "Node" or NODEPOOL_LABEL in (i["metadata"].get("labels") or {})
                or (i["metadata"].get("labels") or {}).get(key) == value]

    objs = left()
    if objs:
        kube.run("delete", "--wait=false", "--ignore-not-found",
                 *[f"{_resource(i)}/{i['metadata']['name']}" for i in objs], check=False)

    def gone() -> bool:
        rest = left()
        if rest and time.monotonic() - t0 > 10:
            for i in rest:
                if i["metadata"].get("finalizers"):
                    kube.run("patch", _resource(i), i["metadata"]["name"], "--type=merge", "-p",
                             '{"metadata":{"finalizers":null}}', check=False)
        return not rest and not api.items("pods", namespace)
    wait_for(gone, 60, "the previous configuration's objects to go", 0.1)


def _resource(obj: dict) -> str:
    return {"Node": "node", "NodePool": "nodepools.karpenter.sh", "NodeClaim": "nodeclaims.karpenter.sh"}[obj["kind"]]
