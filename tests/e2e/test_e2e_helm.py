"""charts/gangcheck against the real kube-apiserver of the e2e tier: the default render passes the
server's validation (`kubectl apply --dry-run=server`), and a real `helm install` / `helm upgrade`
/ `helm uninstall` — with `lookup`, so the self-signed certificate survives the upgrade.

No node here (no kubelet): the Deployment's pods are not run; the node tier does that."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import helm_tool  # noqa: E402

RELEASE = "helm-e2e"          # objects named helm-e2e-gangcheck: apart from the tier's own "gangcheck"
NAMESPACE = "gangcheck-helm-e2e"


@pytest.fixture(scope="module")
def tools():
    """helm is built (else skip with the reason; fail under GANGCHECK_REQUIRE_E2E=1)."""
    reason = helm_tool.missing()
    if reason and os.environ.get("GANGCHECK_REQUIRE_E2E", "").strip().lower() in ("1", "true", "yes", "on"):
        pytest.fail(f"e2e tier required (GANGCHECK_REQUIRE_E2E=1) but helm is unavailable: {reason}", pytrace=False)
    if reason:
        pytest.skip(f"helm tests skipped: {reason}")
    return helm_tool


def test_default_render_is_accepted_by_the_api_server(kube, tools):
    text = helm_tool.render_text()
    r = kube.run("apply", "--dry-run=server", "-f", "-", stdin=text)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == len(helm_tool.parse(text)) == 12, r.stdout
    assert all(ln.endswith("(server dry run)") for ln in lines), r.stdout


def test_install_upgrade_keeps_the_certificate_uninstall_removes_everything(cluster, kube, tools):
    kc = cluster.kubeconfig
    name = f"{RELEASE}-gangcheck"
    try:
        helm_tool.install(kc, NAMESPACE, release=RELEASE)
        first = kube.get("secret", f"{name}-tls", NAMESPACE)
        vwc = kube.get("validatingwebhookconfiguration", name)
        assert {wh["clientConfig"]["caBundle"] for wh in vwc["webhooks"]} == {first["data"]["ca.crt"]}
        assert b"BEGIN CERTIFICATE" in base64.b64decode(first["data"]["ca.crt"])
        assert kube.exists("role", f"{name}-autoscaler-status-reader", "kube-system")

        helm_tool.install(kc, NAMESPACE, {"policy": {"mode": "warn"}}, release=RELEASE)  # an upgrade
        second = kube.get("secret", f"{name}-tls", NAMESPACE)
        assert second["data"] == first["data"]  # lookup read it back: no rotation on upgrade
        mwc = kube.get("mutatingwebhookconfiguration", name)
        assert {wh["clientConfig"]["caBundle"] for wh in mwc["webhooks"]} == {first["data"]["ca.crt"]}
        cm = kube.get("configmap", f"{name}-policy", NAMESPACE)
        assert "mode: warn" in cm["data"]["policy.yaml"]
        history = helm_tool.helm("history", RELEASE, "-n", NAMESPACE, "-o", "json", kubeconfig=kc)
        assert history.count('"revision"') == 2
    finally:
        helm_tool.uninstall(kc, NAMESPACE, release=RELEASE)
    for resource, ns in (("validatingwebhookconfiguration", None), ("mutatingwebhookconfiguration", None),
                         ("clusterrole", None), ("role", "kube-system"), ("deployment", NAMESPACE),
                         ("secret", NAMESPACE)):
        probe = f"{name}-autoscaler-status-reader" if resource == "role" else (f"{name}-tls" if resource == "secret" else name)
        assert not kube.exists(resource, probe, ns), (resource, probe)
