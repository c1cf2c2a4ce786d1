"""What the node tier's operations scenarios (4 policy edit, 5 certificate rotation, 6 rollout)
do to the deployed gangcheck, and how they look at each replica directly.

* :class:`Replicas` — the Deployment's pods (``kubectl get pods -l``), and per pod: an
  AdmissionReview POSTed straight to ``https://<pod IP>:8443/validate`` (verified against the
  deployment's CA under the Service's DNS name, as the API server does), the serial of the
  certificate the pod serves, its ``/metrics``;
* :func:`edit_policy` — rewrite ``policy.yaml`` of ConfigMap ``gangcheck-policy`` (``kubectl
  apply`` of the edited object, what a user's GitOps or ``kubectl edit`` does);
* :func:`rotate_serving_certificate` — what a user does to renew the serving certificate
  without touching the webhook configurations' caBundle: ``gangcheck certs --reuse-ca`` (a new
  key and certificate from the same CA), then Secret ``gangcheck-tls`` updated in place;
* :func:`evict` — a policy/v1 Eviction through the API (what ``kubectl drain`` sends);
* the gangs the load client submits (:func:`load_gangs`).

Times are seconds (``time.monotonic``).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
import socket
import ssl
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509

from load_client import ApiClient, Gang, parse_prometheus

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "gangcheck-system"
SELECTOR = "app.kubernetes.io/name=gangcheck,app.kubernetes.io/component=webhook"
SERVICE_DNS = f"gangcheck.{NAMESPACE}.svc"
POLICY_CM = "gangcheck-policy"
TLS_SECRET = "gangcheck-tls"
LOAD_NS = "ops-load"


def _review_for():
    """examples/admission/make_reviews.py's ``review_for`` (one AdmissionReview shape in the repo)."""
    path = REPO / "examples" / "admission" / "make_reviews.py"
    spec = importlib.util.spec_from_file_location("gangcheck_make_reviews", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, mod)
    spec.loader.exec_module(mod)
    return mod.review_for


review_for = _review_for()


# ---------------------------------------------------------------- the gangs


def job(name: str, pods: int, requests: dict, namespace: str = LOAD_NS) -> dict:
    """An Indexed batch/v1 Job of ``pods`` pods with these container requests (limits = the
    extended resources among them)."""
    limits = {k: v for k, v in requests.items() if "/" in k}
    res = {"requests": dict(requests), **({"limits": limits} if limits else {})}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                 "template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "main", "image": "registry.example.com/train:1", "resources": res}]}}},
    }


#: No node has 4096 GPUs (none has any on this tier): NeverFits, denied in enforce mode.
NEVER = job("never", 2, {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4096"})
#: A 100 m CPU pod: the node can take it; admitted with gangcheck's annotations.
SMALL = job("small", 1, {"cpu": "100m", "memory": "64Mi"})


def load_gangs(namespace: str = LOAD_NS) -> list[Gang]:
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    return [Gang("never", NEVER, path), Gang("checked", SMALL, path)]


# ---------------------------------------------------------------- the replicas


@dataclass
class Pod:
    name: str
    ip: str
    ready: bool
    terminating: bool
    uid: str


class Replicas:
    """The gangcheck pods, and direct HTTPS to each (CA file ``ca``: the caBundle's PEM)."""

    def __init__(self, kube, ca: str | Path, port: int = 8443) -> None:
        self.kube, self.ca, self.port = kube, str(ca), port

    def pods(self) -> list[Pod]:
        out = []
        for p in self.kube.get("pods", namespace=NAMESPACE, selector=SELECTOR)["items"]:
            conds = {c["type"]: c["status"] for c in (p.get("status") or {}).get("conditions") or []}
            out.append(Pod(p["metadata"]["name"], (p.get("status") or {}).get("podIP") or "",
                           conds.get("Ready") == "True", bool(p["metadata"].get("deletionTimestamp")),
                           p["metadata"]["uid"]))
        return sorted(out, key=lambda p: p.name)

    def ready(self) -> list[Pod]:
        return [p for p in self.pods() if p.ready and not p.terminating]

    def settled(self, n: int = 2) -> list[Pod] | None:
        """The pods when exactly ``n`` exist, all Ready, none terminating; else None."""
        pods = self.pods()
        if len(pods) == n and all(p.ready and not p.terminating for p in pods):
            return pods
        return None

    def _ctx(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca)

    def served_serial(self, pod: Pod, timeout: float = 5.0) -> int:
        """The serial number of the certificate ``pod`` presents (verified against the CA for
        ``gangcheck.gangcheck-system.svc``)."""
        with socket.create_connection((pod.ip, self.port), timeout=timeout) as raw:
            with self._ctx().wrap_socket(raw, server_hostname=SERVICE_DNS) as tls:
                der = tls.getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number

    def http(self, pod: Pod, method: str, path: str, body: bytes = b"", timeout: float = 5.0) -> tuple[int, bytes]:
        """One HTTP/1.1 request on a new TLS connection to the pod (Connection: close) → (status, body)."""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {SERVICE_DNS}\r\nConnection: close\r\n"
                + (f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n" if body else "") + "\r\n")
        with socket.create_connection((pod.ip, self.port), timeout=timeout) as raw:
            with self._ctx().wrap_socket(raw, server_hostname=SERVICE_DNS) as tls:
                tls.sendall(head.encode() + body)
                data = b""
                while chunk := tls.recv(65536):
                    data += chunk
        head_b, _, payload = data.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in head_b.lower():
            payload = _dechunk(payload)
        return int(head_b.split(b" ", 2)[1]), payload

    def review(self, pod: Pod, obj: dict, timeout: float = 5.0) -> dict:
        """POST an AdmissionReview for creating ``obj`` to the pod's /validate; the response part
        (``allowed``, ``status``, ``warnings``)."""
        status, payload = self.http(pod, "POST", "/validate", json.dumps(review_for(obj, str(uuid.uuid4()))).encode(),
                                    timeout)
        if status != 200:
            raise AssertionError(f"{pod.name}: /validate HTTP {status}: {payload[:300]!r}")
        return json.loads(payload)["response"]

    def metrics(self, pod: Pod) -> list[tuple[str, dict, float]]:
        status, payload = self.http(pod, "GET", "/metrics")
        if status != 200:
            raise AssertionError(f"{pod.name}: /metrics HTTP {status}")
        return parse_prometheus(payload.decode())

    def metric(self, pod: Pod, name: str, **labels: str) -> float:
        return sum(v for n, lab, v in self.metrics(pod) if n == name and all(lab.get(k) == x for k, x in labels.items()))


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return out


# ---------------------------------------------------------------- scenario 4: the policy


def policy_text(kube) -> str:
    cm = kube.get("configmap", POLICY_CM, NAMESPACE)
    return cm["data"]["policy.yaml"]


def edit_policy(kube, change: dict) -> str:
    """Set the top-level fields ``change`` in the ConfigMap's policy.yaml (comments of other
    lines kept: the edit replaces the ``field: value`` lines in place) and ``kubectl apply`` it.
    Returns the previous policy.yaml."""
    cm = kube.get("configmap", POLICY_CM, NAMESPACE)
    old = cm["data"]["policy.yaml"]
    lines = old.splitlines()
    for key, value in change.items():
        rendered = f"{key}: {json.dumps(value)}"
        for i, line in enumerate(lines):
            if line.startswith(f"{key}:"):
                lines[i] = rendered
                break
        else:
            lines.append(rendered)
    new = "\n".join(lines) + "\n"
    parsed = yaml.safe_load(new)
    for key, value in change.items():
        assert parsed[key] == value, (key, parsed)
    set_policy(kube, new)
    return old


def set_policy(kube, text: str) -> None:
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY_CM, "namespace": NAMESPACE},
                "data": {"policy.yaml": text}})


# ---------------------------------------------------------------- scenario 5: the certificate


def rotate_serving_certificate(kube, ca_dir: Path, work: Path) -> int:
    """A new serving key and certificate from the same CA (``gangcheck certs --reuse-ca``, in a
    copy of ``ca_dir`` — it needs ca.crt and ca.key), written into Secret gangcheck-tls in place
    (tls.crt, tls.key; the Secret's type and other keys kept). Returns the new serial."""
    from webhook import certs

    work.mkdir(parents=True, exist_ok=True)
    for f in ("ca.crt", "ca.key"):
        shutil.copy2(ca_dir / f, work / f)
    bundle = certs.generate("gangcheck", NAMESPACE, work, reuse_ca=True)
    assert base64.b64decode(bundle) == (ca_dir / "ca.crt").read_bytes(), "--reuse-ca changed the CA"
    crt, key = (work / "tls.crt").read_bytes(), (work / "tls.key").read_bytes()
    kube.run("patch", "secret", TLS_SECRET, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(
        {"data": {"tls.crt": base64.b64encode(crt).decode(), "tls.key": base64.b64encode(key).decode()}}))
    return x509.load_pem_x509_certificate(crt).serial_number


def secret_serial(kube) -> int:
    s = kube.get("secret", TLS_SECRET, NAMESPACE)
    return x509.load_pem_x509_certificate(base64.b64decode(s["data"]["tls.crt"])).serial_number


# ---------------------------------------------------------------- scenario 6: disruptions


def evict(api: ApiClient, pod: str) -> tuple[int, str]:
    """POST a policy/v1 Eviction of ``pod`` → (HTTP status, message)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NAMESPACE}}
    status, _, data = api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction", body)
    try:
        msg = json.loads(data).get("message", "")
    except ValueError:
        msg = data.decode(errors="replace")
    return status, msg


def pdb_status(kube) -> dict:
    return kube.get("pdb", "gangcheck", NAMESPACE).get("status") or {}
