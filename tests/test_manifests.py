"""manifests/: every file parses, kustomizations reference files that exist, and the objects say
what the issue asks (read-only RBAC, restricted pods, fail-open webhooks). Renders with
`kubectl kustomize` too when kubectl is on PATH."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent / "manifests"
KUSTOMIZATIONS = [ROOT, ROOT / "base", ROOT / "overlays" / "cert-manager", ROOT / "overlays" / "monitoring",
                  ROOT / "components" / "monitoring"]


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def base_objects() -> dict[tuple[str, str], dict]:
    out = {}
    k = docs(ROOT / "base" / "kustomization.yaml")[0]
    for res in k["resources"]:
        for d in docs(ROOT / "base" / res):
            out[(d["kind"], d["metadata"]["name"])] = d
    return out


def test_every_file_parses():
    files = sorted(ROOT.rglob("*.yaml"))
    assert len(files) >= 12
    for f in files:
        for d in docs(f):
            assert isinstance(d, dict) and d.get("apiVersion") and d.get("kind"), f


@pytest.mark.parametrize("kdir", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_kustomization_resources_exist(kdir):
    k = docs(kdir / "kustomization.yaml")[0]
    assert k["kind"] == ("Component" if kdir.parent.name == "components" else "Kustomization")
    for res in k.get("resources", []) + k.get("components", []):
        p = (kdir / res).resolve()
        assert p.exists(), f"{kdir}: {res} missing"
        if p.is_dir():
            assert (p / "kustomization.yaml").exists()


def test_objects():
    objs = base_objects()
    kinds = {k for k, _ in objs}
    assert kinds >= {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service",
                     "PodDisruptionBudget", "ConfigMap", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
    role = objs[("ClusterRole", "gangcheck")]
    for rule in role["rules"]:
        assert set(rule["verbs"]) == {"get", "list", "watch"}
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "nodes") in granted and ("", "pods") in granted and ("kueue.x-k8s.io", "workloads") in granted
    assert ("", "configmaps") not in granted  # only in its namespace, via a Role
    assert ("karpenter.sh", "nodepools") in granted and ("karpenter.sh", "nodeclaims") in granted
    assert ("autoscaling.x-k8s.io", "provisioningrequests") in granted
    # cluster-autoscaler's status ConfigMap: that one name in kube-system, read-only
    status = objs[("Role", "gangcheck-autoscaler-status-reader")]
    assert status["metadata"]["namespace"] == "kube-system"
    assert status["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-autoscaler-status"],
                                "verbs": ["get", "list", "watch"]}]
    binding = objs[("RoleBinding", "gangcheck-autoscaler-status-reader")]
    assert binding["metadata"]["namespace"] == "kube-system" and binding["roleRef"]["name"] == status["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gangcheck", "namespace": "gangcheck-system"}]
    dep = objs[("Deployment", "gangcheck")]
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    c = pod["containers"][0]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"]["drop"] == ["ALL"]
    assert sc["allowPrivilegeEscalation"] is False
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["resources"]["requests"] and c["resources"]["limits"]
    svc = objs[("Service", "gangcheck")]
    assert svc["spec"]["ports"][0]["port"] == 443 and c["ports"][0]["containerPort"] == 8443
    policy = yaml.safe_load(objs[("ConfigMap", "gangcheck-policy")]["data"]["policy.yaml"])
    from webhook.policy import Policy

    assert Policy.model_validate(policy) == Policy()  # the shipped policy is the default one
    for kind, path in (("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")):
        cfg = objs[(kind, "gangcheck")]
        resources = set()
        for wh in cfg["webhooks"]:
            assert wh["failurePolicy"] == "Ignore" and wh["sideEffects"] == "None"
            assert 1 <= wh["timeoutSeconds"] <= 10
            assert wh["admissionReviewVersions"] == ["v1"]
            assert wh["clientConfig"]["service"]["path"] == path
            expr = wh["namespaceSelector"]["matchExpressions"][0]
            assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "NotIn"
            assert set(expr["values"]) == {"kube-system", "gangcheck-system"}
            for r in wh["rules"]:
                assert r["operations"] == ["CREATE"]
                resources |= {(g, res) for g in r["apiGroups"] for res in r["resources"]}
        assert resources == {
            ("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("kubeflow.org", "pytorchjobs"), ("kubeflow.org", "mpijobs"),
            ("batch.volcano.sh", "jobs"), ("leaderworkerset.x-k8s.io", "leaderworkersets"), ("ray.io", "rayjobs"),
            ("ray.io", "rayclusters"), ("", "pods"), ("scheduling.x-k8s.io", "podgroups"), ("scheduling.volcano.sh", "podgroups"),
        }


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")
@pytest.mark.parametrize("kdir", [ROOT, ROOT / "overlays" / "cert-manager"], ids=["base", "cert-manager"])
def test_kubectl_kustomize_renders(kdir):
    out = subprocess.run(["kubectl", "kustomize", str(kdir)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
    kinds = [d["kind"] for d in rendered]
    assert "Deployment" in kinds and "ValidatingWebhookConfiguration" in kinds
    assert all(d["metadata"].get("namespace") == "gangcheck-system" for d in rendered
               if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                                    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
               and d["metadata"]["name"] != "gangcheck-autoscaler-status-reader")
    status = [d for d in rendered if d["metadata"]["name"] == "gangcheck-autoscaler-status-reader"]
    assert sorted(d["kind"] for d in status) == ["Role", "RoleBinding"]
    assert all(d["metadata"]["namespace"] == "kube-system" for d in status)
    if kdir.name == "cert-manager":
        for d in rendered:
            if d["kind"].endswith("WebhookConfiguration"):
                assert d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "gangcheck-system/gangcheck-serving"
        assert kinds.count("Certificate") == 2 and kinds.count("Issuer") == 2
