"""What the e2e tier's modules share beyond e2e_controlplane: the ``Cluster`` a scenario gets,
the ``Gangcheck`` server registered as the cluster's webhook, ``unavailable`` (skip, or fail under
``GANGCHECK_REQUIRE_E2E=1``) and ``without_gangcheck_webhooks``.

A module of its own, not conftest.py: ``from conftest import …`` inside a test resolves to
whichever conftest module was imported last — in a whole-suite run that is tests/node's (CI
failed on it: "cannot import name 'Cluster' from 'conftest' (tests/node/conftest.py)").
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

import e2e_controlplane as cp
from e2e_objects import SYSTEM_NS

WEBHOOKS = cp.REPO / "manifests" / "base" / "webhooks.yaml"
#: The reason the tier was skipped, for the banner at the end of the run (conftest.py).
SKIP_KEY = pytest.StashKey[str]()


def truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def unavailable(config, reason: str):
    """Skip the tier (the banner says why), or fail under GANGCHECK_REQUIRE_E2E=1."""
    if truthy("GANGCHECK_REQUIRE_E2E"):
        pytest.fail(f"e2e tier required (GANGCHECK_REQUIRE_E2E=1) but unavailable: {reason}", pytrace=False)
    config.stash[SKIP_KEY] = reason
    pytest.skip(f"e2e tier skipped: {reason}")


class Cluster:
    """What the scenarios use: ``kube`` (kubectl), ``kubeconfig``, ``control_plane`` (None for an
    external cluster), ``dir`` (scratch space, logs)."""

    def __init__(self, kube: cp.Kube, kubeconfig: Path, control_plane: cp.ControlPlane | None, workdir: Path) -> None:
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.control_plane = control_plane
        self.dir = workdir
        self.external = control_plane is None

    def start_scheduler(self) -> None:
        """Run kube-scheduler against the local control plane (an external cluster has its own)."""
        if self.control_plane is not None:
            self.control_plane.start_scheduler()

    def ensure_namespace(self, *names: str) -> None:
        self.kube.apply([cp.namespace_obj(n) for n in names])


class Gangcheck:
    """``python -m webhook serve --cluster live`` as a subprocess (KUBECONFIG = the cluster)."""

    def __init__(self, c: Cluster) -> None:
        self.cluster = c
        self.host = os.environ.get("GANGCHECK_E2E_WEBHOOK_HOST", "127.0.0.1")
        self.port = cp.free_port()
        self.certs = c.dir / "gangcheck-certs"
        from webhook import certs

        service = self.host if not _is_ip(self.host) else "gangcheck"
        self.ca_bundle = certs.generate(service, SYSTEM_NS, self.certs)
        self.proc: cp.Proc | None = None
        self.log = c.dir / "gangcheck.log"

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> "Gangcheck":
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), "PYTHONUNBUFFERED": "1"}
        bind = "127.0.0.1" if self.host == "127.0.0.1" else "0.0.0.0"
        self.proc = cp.Proc("gangcheck", [
            sys.executable, "-m", "webhook", "serve", "--cluster", "live", "--host", bind, "--port", str(self.port),
            "--tls-cert", str(self.certs / "tls.crt"), "--tls-key", str(self.certs / "tls.key"),
        ], self.log, env=env).start()

        def ready():
            if not self.proc.alive():
                raise RuntimeError("gangcheck exited:\n" + self.proc.tail())
            code, _ = self.readyz()
            return code == 200
        try:
            cp.wait_for(ready, timeout, "gangcheck /readyz", 0.2)
        except RuntimeError as exc:
            raise AssertionError(str(exc)) from None
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certs / "ca.crt"))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=5, context=self._ssl()) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def readyz(self) -> tuple[int, dict]:
        try:
            code, body = self.get("/readyz")
        except OSError:
            return 0, {}
        try:
            return code, json.loads(body)
        except ValueError:
            return code, {}

    def webhook_configurations(self) -> list[dict]:
        """manifests/base/webhooks.yaml with clientConfig.url → this server and our caBundle."""
        docs = [d for d in yaml.safe_load_all(WEBHOOKS.read_text()) if d]
        for d in docs:
            d["metadata"]["name"] = "gangcheck"
            for w in d["webhooks"]:
                path = w["clientConfig"]["service"].get("path", "/")
                w["clientConfig"] = {"url": f"https://{self.host}:{self.port}{path}", "caBundle": self.ca_bundle}
        return docs

    def register(self) -> None:
        self.cluster.kube.apply(self.webhook_configurations())


def _is_ip(host: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


WEBHOOK_KINDS = ("validatingwebhookconfiguration", "mutatingwebhookconfiguration")
#: A Job for probing whether the API server calls gangcheck: one pod asking for more GPUs than any
#: node has. gangcheck's answer depends on the cluster (denied on fresh data with nodes; admitted
#: with a warning when its data has no nodes or is not fresh), so what counts is that it answered.
PROBE = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "webhook-probe", "namespace": "default"},
         "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{
             "name": "c", "image": "registry.example.com/probe:1",
             "resources": {"requests": {cp.GPU: "100000"}, "limits": {cp.GPU: "100000"}}}]}}}}


def _webhook_answers(kube: cp.Kube) -> bool:
    """True when a server-side dry run of ``PROBE`` went through gangcheck: denied by
    ``validate.gangcheck.io``, or admitted with gangcheck's annotations (``gangcheck.io/``, the
    mutating webhook) or with a warning (the tier registers no other webhook)."""
    r = kube.create(PROBE, "--dry-run=server", "-o", "json", check=False)
    if r.code != 0:
        return "gangcheck.io" in r.stderr
    if "Warning:" in r.stderr:
        return True
    try:
        ann = (json.loads(r.stdout).get("metadata") or {}).get("annotations") or {}
    except ValueError:
        return False
    return any(k.startswith("gangcheck.io/") for k in ann)


@contextlib.contextmanager
def without_gangcheck_webhooks(kube: cp.Kube):
    """Unregister gangcheck's webhooks (if this session registered them) for the block, then put
    them back. For referees that create objects gangcheck would deny on purpose — a background
    PodGroup that can never fit is input to Volcano, not a submission to judge; with the webhook
    in place the API server refuses it (403) once an earlier module has registered gangcheck.
    Waits until the API server's admission chain has dropped (then regained) the webhook: a
    server-side dry run of ``PROBE`` no longer (then again) reaches gangcheck."""
    saved = []
    for kind in WEBHOOK_KINDS:
        doc = kube.get(kind, "gangcheck", check=False)
        if doc:
            meta = doc["metadata"]
            doc["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
            saved.append(doc)
    if saved:
        kube.delete(",".join(WEBHOOK_KINDS), "gangcheck")
        cp.wait_for(lambda: not _webhook_answers(kube), 30, "the API server to drop gangcheck's webhooks", 0.2)
    try:
        yield bool(saved)
    finally:
        if saved:
            kube.apply(saved)
            cp.wait_for(lambda: _webhook_answers(kube), 30, "the API server to call gangcheck's webhooks again", 0.2)
