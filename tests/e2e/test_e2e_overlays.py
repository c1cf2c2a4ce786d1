"""The add-on overlays validate against their add-ons' real CRDs, in the tier's real kube-apiserver.

``manifests/overlays/cert-manager`` (Issuers, Certificates), ``manifests/overlays/monitoring``
(the base + ``manifests/components/monitoring``: PodMonitor, dashboard ConfigMap) and both at once
(the README's recipe) are rendered with ``kubectl kustomize``; the CRDs of cert-manager and
prometheus-operator come from their Go modules (``e2e/build-addon-crds.sh``: the module proxy,
cached in ``~/.cache/gangcheck/addon-crds/``) and are installed here; then ``kubectl apply
--dry-run=server`` (strict field validation, kubectl's default) sends every rendered object
through the API server, which checks custom resources against the CRD's OpenAPI schema (types,
enums, required and unknown fields). Mutated objects — a wrong type, a value outside an enum, a
misspelt field — must be refused, with the field named.

Runs against the local control plane only (it would install CRDs into someone's cluster).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from e2e_controlplane import REPO
from e2e_harness import unavailable

OVERLAYS = REPO / "manifests" / "overlays"
BUILD = REPO / "e2e" / "build-addon-crds.sh"
#: The CRDs each overlay needs (file names in the add-on's CRD directory).
CERT_MANAGER_CRDS = ("cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml",
                     "cert-manager.io_clusterissuers.yaml", "cert-manager.io_certificaterequests.yaml")
PROMETHEUS_CRDS = ("monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_servicemonitors.yaml")


@pytest.fixture(scope="module")
def addon_crds(cluster, request) -> dict[str, Path]:
    """{"cert-manager": dir, "prometheus-operator": dir}, their CRDs installed and Established."""
    if cluster.external:
        pytest.skip("the overlay validation installs cert-manager's and prometheus-operator's CRDs: local control plane only")
    p = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        unavailable(request.config, f"{BUILD.relative_to(REPO)} failed (Go module proxy?): {p.stderr.strip()[-400:]}")
    cert_manager, prometheus = (Path(line) for line in p.stdout.strip().splitlines()[-2:])
    files = [cert_manager / f for f in CERT_MANAGER_CRDS] + [prometheus / f for f in PROMETHEUS_CRDS]
    args = [a for f in files for a in ("-f", str(f))]
    # Server-side: prometheus-operator's CRDs are larger than the last-applied annotation allows.
    cluster.kube.run("apply", "--server-side", "--force-conflicts", *args, timeout=120)
    cluster.kube.run("wait", "--for=condition=Established", "--timeout=60s", *args)
    print(f"\n[e2e] add-on CRDs: {(cert_manager / 'VERSION').read_text().strip()}, "
          f"{(prometheus / 'VERSION').read_text().strip()}")
    return {"cert-manager": cert_manager, "prometheus-operator": prometheus}


def render(overlay: str | Path, kube) -> list[dict]:
    r = subprocess.run([kube.kubectl, "kustomize", str(OVERLAYS / overlay)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def dry_run(kube, objs: list[dict]):
    """``kubectl apply --dry-run=server`` of ``objs`` (strict field validation)."""
    return kube.apply(objs, "--dry-run=server", "--validate=strict", check=False)


def one(objs: list[dict], kind: str, name: str) -> dict:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} in the rendering"
    return copy.deepcopy(found[0])


def assert_all_accepted(kube, objs: list[dict]) -> None:
    r = dry_run(kube, objs)
    assert r.code == 0, r
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == len(objs) and all("(server dry run)" in ln for ln in lines), r


def raw_post(kube, obj: dict):
    ns, group_version = obj["metadata"]["namespace"], obj["apiVersion"]
    path = f"/apis/{group_version}/namespaces/{ns}/{PLURALS[obj['kind']]}?dryRun=All&fieldValidation=Strict"
    return kube.run("create", "--raw", path, "-f", "-", stdin=json.dumps(obj), check=False)


def assert_raw_accepted(kube, obj: dict) -> None:
    r = raw_post(kube, obj)
    assert r.code == 0 and json.loads(r.stdout)["metadata"]["name"] == obj["metadata"]["name"], r


#: kind → resource (plural), from the CRDs' spec.names.
PLURALS = {"Certificate": "certificates", "Issuer": "issuers", "PodMonitor": "podmonitors"}


def assert_refused(kube, obj: dict, *needles: str) -> None:
    """POST ``obj`` to the API server as a dry run with strict field validation — raw, so that
    kubectl's own client-side schema check cannot be what refuses it — and expect a refusal
    naming ``needles`` (the tests post the unmutated object the same way first: accepted)."""
    r = raw_post(kube, obj)
    assert r.code != 0, f"the API server accepted a mutated {obj['kind']}:\n{r}"
    for n in needles:
        assert n in r.stderr, f"{n!r} not in:\n{r.stderr}"


def test_cert_manager_overlay_validates(addon_crds, kube):
    objs = render("cert-manager", kube)
    kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objs if o["apiVersion"] == "cert-manager.io/v1")
    assert kinds == ["Certificate/gangcheck-ca", "Certificate/gangcheck-serving", "Issuer/gangcheck-ca", "Issuer/gangcheck-selfsigned"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        assert one(objs, kind, "gangcheck")["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "gangcheck-system/gangcheck-serving"}
    # The serving certificate names the Service the webhook configurations call and the Secret the Deployment mounts.
    serving = one(objs, "Certificate", "gangcheck-serving")
    assert "gangcheck.gangcheck-system.svc" in serving["spec"]["dnsNames"]
    tls = next(v for v in one(objs, "Deployment", "gangcheck")["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == serving["spec"]["secretName"] == "gangcheck-tls"
    assert_all_accepted(kube, objs)


def test_cert_manager_mutations_refused(addon_crds, kube):
    objs = render("cert-manager", kube)
    cert = one(objs, "Certificate", "gangcheck-serving")
    assert_raw_accepted(kube, cert)

    wrong_type = copy.deepcopy(cert)
    wrong_type["spec"]["duration"] = 2160  # a Go duration string ("2160h") in the schema
    assert_refused(kube, wrong_type, "spec.duration", "string")

    dns_not_a_list = copy.deepcopy(cert)
    dns_not_a_list["spec"]["dnsNames"] = "gangcheck.gangcheck-system.svc"
    assert_refused(kube, dns_not_a_list, "spec.dnsNames", "array")

    bad_enum = copy.deepcopy(cert)
    bad_enum["spec"]["privateKey"]["algorithm"] = "DSA"  # RSA, ECDSA or Ed25519
    assert_refused(kube, bad_enum, "spec.privateKey.algorithm", "Unsupported value")

    misspelt = copy.deepcopy(cert)
    misspelt["spec"]["dnsName"] = misspelt["spec"].pop("dnsNames")
    assert_refused(kube, misspelt, 'unknown field "spec.dnsName"')

    no_issuer = copy.deepcopy(cert)
    del no_issuer["spec"]["issuerRef"]
    assert_refused(kube, no_issuer, "spec.issuerRef", "Required value")


def test_monitoring_overlay_validates(addon_crds, kube):
    objs = render("monitoring", kube)
    pm = one(objs, "PodMonitor", "gangcheck")
    dep = one(objs, "Deployment", "gangcheck")
    # It scrapes what the server serves: the container port it names, over HTTPS, at /metrics,
    # the pods the Deployment labels, verified with the serving Secret's CA.
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (ep,) = pm["spec"]["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for c in dep["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ep["port"] in ports and f"--port={ports[ep['port']]}" in args
    assert (ep["scheme"], ep["path"]) == ("https", "/metrics") and "--tls-cert=/certs/tls.crt" in args
    assert ep["tlsConfig"]["ca"]["secret"]["name"] == "gangcheck-tls"
    assert one(objs, "ConfigMap", "gangcheck-dashboard")["metadata"]["labels"] == {"grafana_dashboard": "1"}
    assert_all_accepted(kube, objs)
    assert_raw_accepted(kube, pm)

    wrong_type = copy.deepcopy(pm)
    wrong_type["spec"]["podMetricsEndpoints"][0]["port"] = 8443  # the port's name; the number is portNumber
    assert_refused(kube, wrong_type, "spec.podMetricsEndpoints[0].port", "string")

    bad_scheme = copy.deepcopy(pm)
    bad_scheme["spec"]["podMetricsEndpoints"][0]["scheme"] = "HTTPS"
    assert_refused(kube, bad_scheme, "spec.podMetricsEndpoints[0].scheme", "Unsupported value")

    misspelt = copy.deepcopy(pm)
    misspelt["spec"]["podMetricEndpoints"] = misspelt["spec"].pop("podMetricsEndpoints")
    assert_refused(kube, misspelt, 'unknown field "spec.podMetricEndpoints"')


def test_both_overlays_at_once(addon_crds, kube, tmp_path):
    """The README's recipe: the cert-manager overlay as a resource, the monitoring Component."""
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(OVERLAYS / "cert-manager", tmp_path)],  # kustomize takes no absolute path
        "components": [os.path.relpath(REPO / "manifests" / "components" / "monitoring", tmp_path)]}))
    objs = render(tmp_path, kube)
    assert {o["kind"] for o in objs} >= {"Certificate", "Issuer", "PodMonitor", "Deployment"}
    assert len(objs) == len(render("cert-manager", kube)) + 2  # + PodMonitor + dashboard ConfigMap
    assert_all_accepted(kube, objs)
