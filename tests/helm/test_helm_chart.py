"""charts/gangcheck rendered by the real helm: with default values it is the kustomize base
(tests/helm_tool.KNOWN_DIFFERENCES are the only allowed differences), each certificate mode
renders valid objects, and bad values fail with a message naming the field."""

from __future__ import annotations

import base64
import copy
import tomllib

import pytest
import yaml
from cryptography import x509

from webhook.policy import Policy

pytestmark = pytest.mark.usefixtures("tools")

import helm_tool as ht  # noqa: E402  (tests/ is on sys.path: tests/conftest.py)


@pytest.fixture(scope="module")
def base():
    return ht.kustomize(ht.BASE)


@pytest.fixture(scope="module")
def default_render():
    return ht.render()


def find(objs, kind, name=None):
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"{kind} {name}: {len(hits)} objects"
    return hits[0]


def kinds(objs):
    return sorted((o["kind"], o["metadata"]["name"]) for o in objs)


def test_chart_version_is_the_package_version():
    pyproject = tomllib.loads((ht.REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ht.CHART / "Chart.yaml").read_text())
    assert chart["version"] == pyproject and chart["appVersion"] == pyproject


def test_helm_is_the_pinned_version():
    out = ht.helm("version", "--template", "{{.Version}}")
    assert out.strip() == ht.helm_version() == "v3.22.0"


def test_lint_passes():
    out = ht.helm("lint", "--strict", str(ht.CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


# ---------------------------------------------------------------- default values == the base


def test_default_render_is_the_kustomize_base(base, default_render):
    assert ht.differences(base, default_render) == []
    # and the comparison saw every object of the base, not an empty list
    assert len(base) == 12 and {k for k, _ in kinds(base)} >= {
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
        "Deployment", "Service", "PodDisruptionBudget", "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration"}
    assert sorted(set(kinds(default_render)) ^ set(kinds(base))) == [("Namespace", "gangcheck-system"),
                                                                     ("Secret", "gangcheck-tls")]
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in default_render if o["kind"] == "Role"}
    assert roles == {("kube-system", "gangcheck-autoscaler-status-reader")}


def _mutated(objs, kind, mutate):
    out = copy.deepcopy(objs)
    mutate(find(out, kind))
    return out


@pytest.mark.parametrize("what, mutate, expect", [
    ("a Service port", lambda o: o["spec"]["ports"][0].update(port=444), "spec.ports[0].port: base 443 != chart 444"),
    ("a container port", lambda o: o["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(containerPort=9443),
     "containerPort: base 8443 != chart 9443"),
    ("a webhook timeout", lambda o: o["webhooks"][1].update(timeoutSeconds=10), "webhooks[1].timeoutSeconds"),
    ("a ClusterRole verb", lambda o: o["rules"][0]["verbs"].append("create"), "rules[0].verbs: 3 items in the base, 4"),
    ("the policy", lambda o: o["data"].update({"policy.yaml": o["data"]["policy.yaml"].replace("enforce", "warn")}),
     "data.policy.yaml.mode: base 'enforce' != chart 'warn'"),
    ("a base label", lambda o: o["metadata"]["labels"].pop("app.kubernetes.io/part-of"), "only in the base"),
    ("a Helm label", lambda o: o["metadata"]["labels"].pop("helm.sh/chart"), "Helm label helm.sh/chart missing"),
])
def test_the_comparison_fails_on_a_changed_render(base, default_render, what, mutate, expect):
    kind = {"a Service port": "Service", "a container port": "Deployment", "a webhook timeout": "MutatingWebhookConfiguration",
            "a ClusterRole verb": "ClusterRole", "the policy": "ConfigMap", "a base label": "ServiceAccount",
            "a Helm label": "PodDisruptionBudget"}[what]
    diffs = ht.differences(base, _mutated(default_render, kind, mutate))
    assert len(diffs) == 1 and expect in diffs[0], diffs


def test_the_comparison_fails_on_a_changed_base_and_a_missing_object(base, default_render):
    diffs = ht.differences(_mutated(base, "Service", lambda o: o["spec"]["ports"][0].update(targetPort=8443)),
                           default_render)
    assert diffs == ["Service gangcheck-system/gangcheck: .spec.ports[0].targetPort: base 8443 != chart 'https'"]
    no_pdb = [o for o in default_render if o["kind"] != "PodDisruptionBudget"]
    assert ht.differences(base, no_pdb) == ["PodDisruptionBudget gangcheck-system/gangcheck: only in the base"]
    bad_ca = _mutated(default_render, "ValidatingWebhookConfiguration",
                      lambda o: o["webhooks"][0]["clientConfig"].update(caBundle="bm90IGEgY2VydA=="))
    assert ht.differences(base, bad_ca) == ["ValidatingWebhookConfiguration gangcheck: webhooks[validate.gangcheck.io]"
                                            ".clientConfig.caBundle is not a base64 PEM certificate"]


def test_namespace_create_renders_the_base_namespace(base):
    chart = ht.render({"namespace": {"create": True}})
    ns = find(chart, "Namespace")
    assert ht.differences([find(base, "Namespace")], [ns]) == []


def test_default_policy_loads_and_exempts_the_release_namespace(default_render):
    policy = yaml.safe_load(find(default_render, "ConfigMap")["data"]["policy.yaml"])
    Policy.model_validate(policy)  # the server's own loader accepts it
    other = ht.render({"policy": {"mode": "warn"}}, namespace="gc")
    cm = find(other, "ConfigMap")
    p = Policy.model_validate(yaml.safe_load(cm["data"]["policy.yaml"]))
    assert p.mode == "warn" and p.exempt_namespaces == ["kube-system", "gangcheck-system", "gc"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for wh in find(other, kind)["webhooks"]:
            assert wh["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "gangcheck-system", "gc"]
            assert wh["clientConfig"]["service"] == {"name": "gangcheck", "namespace": "gc", "path": wh["clientConfig"]["service"]["path"], "port": 443}


def test_values_reach_the_deployment():
    chart = ht.render({"replicas": 3, "image": {"repository": "ghcr.io/me/gangcheck", "tag": "0.1.0-rc1",
                                                "digest": "sha256:" + "ab" * 32, "pullPolicy": "Always"},
                       "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                       "nodeSelector": {"pool": "system"},
                       "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                       "affinity": None, "podDisruptionBudget": {"enabled": False}})
    spec = find(chart, "Deployment")["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    assert spec["replicas"] == 3
    assert c["image"] == "ghcr.io/me/gangcheck@sha256:" + "ab" * 32 and c["imagePullPolicy"] == "Always"
    assert c["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    assert pod["nodeSelector"] == {"pool": "system"} and pod["tolerations"][0]["key"] == "dedicated"
    assert "affinity" not in pod  # null drops the default (helm merges maps: {} would keep it)
    assert not [o for o in chart if o["kind"] == "PodDisruptionBudget"]
    tag = find(ht.render({"image": {"repository": "r", "tag": "t", "pullPolicy": "IfNotPresent"}}), "Deployment")
    assert tag["spec"]["template"]["spec"]["containers"][0]["image"] == "r:t"


# ---------------------------------------------------------------- certificate modes


def _ca_bundles(objs):
    return {wh["clientConfig"].get("caBundle") for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
            for wh in find(objs, kind)["webhooks"]}


def test_self_signed_mode_generates_a_serving_certificate_signed_by_the_ca_bundle(default_render):
    secret = find(default_render, "Secret", "gangcheck-tls")
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    ca_pem = base64.b64decode(secret["data"]["ca.crt"])
    (bundle,) = _ca_bundles(default_render)
    assert base64.b64decode(bundle) == ca_pem  # every webhook trusts the CA of the mounted Secret
    ca = x509.load_pem_x509_certificate(ca_pem)
    crt = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    crt.verify_directly_issued_by(ca)
    sans = crt.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "gangcheck.gangcheck-system.svc" in sans and "gangcheck.gangcheck-system.svc.cluster.local" in sans
    assert b"PRIVATE KEY" in base64.b64decode(secret["data"]["tls.key"])
    vol = find(default_render, "Deployment")["spec"]["template"]["spec"]["volumes"][0]
    assert vol == {"name": "tls", "secret": {"secretName": "gangcheck-tls"}}


def test_cert_manager_mode_renders_the_cert_manager_overlay(base):
    """certManager with default values = manifests/overlays/cert-manager (Issuers, Certificates,
    the cainjector annotation), rendered by kubectl kustomize."""
    overlay = ht.kustomize(ht.REPO / "manifests" / "overlays" / "cert-manager")
    for o in overlay:  # the overlay's own objects lack the base's labels; the chart labels everything alike
        if o["apiVersion"] == "cert-manager.io/v1":
            o["metadata"]["labels"] = {"app.kubernetes.io/name": "gangcheck", "app.kubernetes.io/part-of": "gangcheck"}
    chart = ht.render({"certificates": {"mode": "certManager"}})
    assert not [o for o in chart if o["kind"] == "Secret"]
    assert _ca_bundles(chart) == {None}
    diffs = ht.differences(overlay, chart)
    assert diffs == [], diffs
    assert kinds([o for o in chart if o["apiVersion"] == "cert-manager.io/v1"]) == [
        ("Certificate", "gangcheck-ca"), ("Certificate", "gangcheck-serving"),
        ("Issuer", "gangcheck-ca"), ("Issuer", "gangcheck-selfsigned")]
    own = ht.render({"certificates": {"mode": "certManager", "certManager": {"issuerRef": {"name": "corp", "kind": "ClusterIssuer"}}}})
    cm = [o for o in own if o["apiVersion"] == "cert-manager.io/v1"]
    assert kinds(cm) == [("Certificate", "gangcheck-serving")]
    assert cm[0]["spec"]["issuerRef"] == {"name": "corp", "kind": "ClusterIssuer"}


def test_existing_secret_mode_mounts_the_users_secret():
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    chart = ht.render({"certificates": {"mode": "existingSecret", "existingSecret": {"name": "my-tls", "caBundle": ca}}})
    assert not [o for o in chart if o["kind"] == "Secret" or o["apiVersion"].startswith("cert-manager")]
    assert _ca_bundles(chart) == {ca}
    vol = find(chart, "Deployment")["spec"]["template"]["spec"]["volumes"][0]
    assert vol["secret"]["secretName"] == "my-tls"


# ---------------------------------------------------------------- bad values


@pytest.mark.parametrize("values, field, expected", [
    ({"replicas": 0}, "replicas", "minimum: got 0, want 1"),
    ({"replicas": "two"}, "replicas", "got string, want integer"),
    ({"replicas": 1.5}, "replicas", "got number, want integer"),
    ({"certificates": {"mode": "bogus"}}, "certificates/mode", "'selfSigned', 'certManager', 'existingSecret'"),
    ({"certificates": {"mode": "existingSecret"}}, "certificates/existingSecret/name", "minLength: got 0, want 1"),
    ({"certificates": {"mode": "existingSecret", "existingSecret": {"name": "x", "caBundle": ""}}},
     "certificates/existingSecret/caBundle", "minLength: got 0, want 1"),
    ({"certificates": {"mode": "existingSecret", "existingSecret": {"name": "x", "caBundle": "-----BEGIN"}}},
     "certificates/existingSecret/caBundle", "does not match pattern"),
    ({"image": {"pullPolicy": "Sometimes"}}, "image/pullPolicy", "'Always', 'IfNotPresent', 'Never'"),
    ({"policy": {"mode": "strict"}}, "policy/mode", "'enforce', 'warn', 'audit'"),
    ({"replica": 2}, "", "additional properties 'replica' not allowed"),
])
def test_bad_values_fail_with_the_field_named(values, field, expected):
    with pytest.raises(ht.ToolError) as e:
        ht.render(values)
    msg = e.value.stderr
    assert "values don't meet the specifications of the schema" in msg, msg
    assert f"at '{'/' + field if field else ''}'" in msg, msg
    assert expected in msg, msg
    assert "panic" not in msg and "goroutine" not in msg


# ---------------------------------------------------------------- the schema's policy is policy.py's


def _aliases(model) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def test_schema_policy_fields_are_policy_py_fields():
    """values.schema.json's policy (and its autoscaling, nodePools) lists exactly the fields
    webhook/policy.py accepts and forbids the rest, so a typo fails at `helm install` instead of
    leaving the pods unready on an invalid policy."""
    import json

    from webhook import policy as pol

    schema = json.loads((ht.CHART / "values.schema.json").read_text())["properties"]["policy"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == _aliases(Policy)
    auto = schema["properties"]["autoscaling"]
    assert auto["additionalProperties"] is False
    assert set(auto["properties"]) == _aliases(pol._PolicyAutoscaling)
    pool = auto["properties"]["nodePools"]["items"]
    assert pool["additionalProperties"] is False and pool["required"] == ["name"]
    assert set(pool["properties"]) == _aliases(pol._PolicyNodePool)


@pytest.mark.parametrize("values, field, expected", [
    ({"policy": {"mod": "warn"}}, "policy", "additional properties 'mod' not allowed"),
    ({"policy": {"plainJobsAsGangs": "yes"}}, "policy/plainJobsAsGangs", "got string, want boolean"),
    ({"policy": {"autoscaling": {"enabled": "maybe"}}}, "policy/autoscaling/enabled", "got string, want boolean"),
    ({"policy": {"autoscaling": {"nodePool": []}}}, "policy/autoscaling", "additional properties 'nodePool' not allowed"),
    ({"policy": {"autoscaling": {"nodePools": [{"maxNodes": 3}]}}}, "policy/autoscaling/nodePools/0",
     "missing property 'name'"),
    ({"certificates": {"mode": "certManager", "certManager": {"issuerRef": {"kind": "ClusterIssuer"}}}},
     "certificates/certManager/issuerRef", "missing property 'name'"),
    ({"certificates": {"certManager": {"issuerRef": {"name": "x", "knd": "ClusterIssuer"}}}},
     "certificates/certManager/issuerRef", "additional properties 'knd' not allowed"),
])
def test_bad_policy_and_issuer_values_fail_with_the_field_named(values, field, expected):
    test_bad_values_fail_with_the_field_named(values, field, expected)


def test_full_policy_values_pass_the_schema_and_load():
    """Every policy field set (the schema must not refuse what policy.py accepts)."""
    policy = {"mode": "warn", "extendedResourceToleration": False, "podTolerationRestriction": True,
              "plainJobsAsGangs": True, "staleAfterSeconds": 60, "warnFragmentationRatio": 0.5,
              "metricsTopologyLevel": "topology.example.com/block",
              "autoscaling": {"enabled": True, "assumeScaleUp": True, "provisioningSeconds": 120,
                              "nodePools": [{"name": "gpu-h100", "nodeShape": {"cpu": "192", "nvidia.com/gpu": 8},
                                             "maxNodes": 4, "labels": {"a": "b"},
                                             "taints": [{"key": "gpu", "effect": "NoSchedule"}],
                                             "provisioningSeconds": 600}]}}
    cm = find(ht.render({"policy": policy}), "ConfigMap", "gangcheck-policy")
    loaded = Policy.model_validate(yaml.safe_load(cm["data"]["policy.yaml"]))
    assert loaded.plain_jobs_as_gangs is True and loaded.autoscaling.node_pools[0].max_nodes == 4
    assert loaded.metrics_topology_level == "topology.example.com/block"


@pytest.mark.parametrize("values", [{"replicas": 1}, {"podDisruptionBudget": {"minAvailable": 2}}])
def test_a_pdb_that_blocks_every_drain_fails_naming_both_fields(values):
    """minAvailable ≥ replicas: no eviction is ever allowed, so `kubectl drain` of a node running
    a gangcheck pod never finishes; the chart refuses it and says how to fix it."""
    with pytest.raises(ht.ToolError) as e:
        ht.render(values)
    msg = e.value.stderr
    assert "podDisruptionBudget.minAvailable" in msg and "replicas" in msg, msg
    assert "podDisruptionBudget.enabled=false" in msg, msg


def test_a_blocking_pdb_given_with_set_fails_too():
    """--set makes integers int64 (a values file makes them float64): both are checked."""
    with pytest.raises(ht.ToolError) as e:
        ht.helm("template", "g", str(ht.CHART), "--set", "podDisruptionBudget.minAvailable=2")
    assert "podDisruptionBudget.minAvailable (2) must be less than replicas (2)" in e.value.stderr
    pdb = find(ht.parse(ht.helm("template", "g", str(ht.CHART), "--set", "podDisruptionBudget.minAvailable=50%")),
               "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == "50%"


def test_one_replica_without_a_pdb_renders():
    chart = ht.render({"replicas": 1, "podDisruptionBudget": {"enabled": False}})
    assert find(chart, "Deployment")["spec"]["replicas"] == 1
    assert not [o for o in chart if o["kind"] == "PodDisruptionBudget"]


def test_readme_values_table_names_every_value():
    """README's Helm values table names every key of values.yaml (down to certificates' modes),
    so a user reading the table sees every knob the chart has."""
    import re

    readme = (ht.REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("#### Helm", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    named = set()
    for row in rows:
        first = row.split("|")[1]
        prefix = ""
        for name in re.findall(r"`([^`]+)`", first):
            if "." in name:
                prefix = name.rsplit(".", 1)[0] + "."
                named.add(name)
            else:
                named.add(prefix + name)
    values = yaml.safe_load((ht.CHART / "values.yaml").read_text())
    expected = set()
    for k, v in values.items():
        if k in ("image", "podDisruptionBudget", "webhook", "namespace"):
            expected |= {f"{k}.{sub}" for sub in v}
        elif k == "certificates":
            expected.add("certificates.mode")
            for mode in ("selfSigned", "certManager", "existingSecret"):
                expected |= {f"certificates.{mode}.{sub}" for sub in v[mode]}
        else:
            expected.add(k)
    assert expected - named == set()
