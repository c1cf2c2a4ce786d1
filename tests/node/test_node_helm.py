"""#12 "Packaging beyond kustomize": the Helm chart (charts/gangcheck) installed once on the real
node, as the README's Helm section tells users — ``helm install gangcheck charts/gangcheck
--namespace gangcheck-system --create-namespace`` with the image the tier imported and
``certificates.mode=selfSigned`` — then both replicas Ready through their probes, the API server
calling the release's webhook through its Service (an impossible gang denied with gangcheck's
message, a fitting one admitted with gangcheck's ``Fits`` annotation), and ``helm uninstall``
leaving nothing of the release: every listable object of the cluster (cluster-scoped ones
included: ClusterRole, ClusterRoleBinding, both webhook configurations) is compared with a
snapshot taken just before the install.

The chart and the kustomize deployment (the session fixture ``deployed``) register cluster-scoped
objects of the same names, so the module first removes the kustomize deployment (``kubectl delete
-k <overlay>``; the Namespace goes with it, and the Secret gangcheck-tls in it) and afterwards puts
it back with the fixture's own steps (``conftest.deploy``: the README's Deploying block), both
replicas Ready, updating the session's ``Deployed`` in place (overlay, certs, ca_bundle) — so the
modules that run after this one find what the fixture promised, whatever the order.

The release is named ``gangcheck`` (so every object has the kustomize name) in the namespace
``gangcheck-system``, which the module creates itself before the snapshot (what
``--create-namespace`` would do): the snapshot then holds it, and the only thing Helm by design
leaves behind (the namespace it created) is not mistaken for the release's.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import SUMMARY, Deployed, deploy  # noqa: E402  (the node tier's conftest)

sys.path.append(str(Path(__file__).resolve().parents[1]))
import helm_tool  # noqa: E402
from e2e_controlplane import wait_for  # noqa: E402
from e2e_objects import PREFIX, dry_run  # noqa: E402
from image_tier import _truthy  # noqa: E402

from node_cluster import SYSTEM_NS  # noqa: E402
from node_objects import ensure_jobset_crd, jobset, node_cpu_millis  # noqa: E402

RELEASE = helm_tool.RELEASE  # "gangcheck": the objects get the kustomize names
#: Kinds left out of the snapshots: they come and go on their own (Events), or are deprecated
#: and answer with a warning (ComponentStatus).
UNSNAPPED = {"events", "events.events.k8s.io", "componentstatuses"}
#: The cluster-scoped objects both the chart and manifests/ create (kind, name).
CLUSTER_SCOPED = (("clusterrole", "gangcheck"), ("clusterrolebinding", "gangcheck"),
                  ("validatingwebhookconfiguration", "gangcheck"), ("mutatingwebhookconfiguration", "gangcheck"))


def every_object(kube) -> set[tuple[str, str, str]]:
    """(apiVersion/kind, namespace or "", name) of every object of every listable kind but
    UNSNAPPED, in every namespace and cluster-scoped."""
    kinds = [k for k in kube.run("api-resources", "--verbs=list", "-o", "name").stdout.split() if k not in UNSNAPPED]
    items = kube.run("get", ",".join(kinds), "-A", "-o", "json", timeout=180).json()["items"]
    return {(f"{o['apiVersion']}/{o['kind']}", o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in items}


def restore(deployed: Deployed, d: Path) -> float:
    """Put the kustomize deployment back with the fixture's own steps and make the session's
    ``deployed`` describe it (its new overlay, certificate directory and caBundle; the first
    deployment's ``ready_seconds`` stays, it is the tier's figure). Returns the seconds it took."""
    fresh = deploy(deployed.node, deployed.image_ref, d)
    deployed.overlay, deployed.certs, deployed.ca_bundle, deployed.applied = (
        fresh.overlay, fresh.certs, fresh.ca_bundle, fresh.applied)
    return fresh.ready_seconds


def delete_namespace(kube, name: str) -> None:
    kube.run("delete", "namespace", name, "--ignore-not-found", "--wait=true", "--timeout=180s", timeout=240)


class Release:
    """The installed release: ``kube``, ``kubeconfig``, ``ready_seconds`` (helm install → both
    replicas Ready), ``before`` (the snapshot taken just before the install), ``uninstalled``."""

    def __init__(self, kube, kubeconfig: Path) -> None:
        self.kube, self.kubeconfig = kube, kubeconfig
        self.ready_seconds = 0.0
        self.before: set = set()
        self.installed = self.uninstalled = False
        self.left: set | None = None

    def pods(self) -> list[dict]:
        items = self.kube.get("pods", namespace=SYSTEM_NS, selector="app.kubernetes.io/name=gangcheck")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self) -> list[dict]:
        return [p for p in self.pods() if any(c["type"] == "Ready" and c["status"] == "True"
                                              for c in p.get("status", {}).get("conditions", []))]

    def uninstall(self) -> str:
        self.uninstalled = True
        return helm_tool.uninstall(self.kubeconfig, SYSTEM_NS, release=RELEASE, timeout_s=180)


@pytest.fixture(scope="module")
def release(deployed, workload_ns, tmp_path_factory):
    reason = helm_tool.missing()
    if reason:
        if _truthy("GANGCHECK_REQUIRE_NODE"):
            pytest.fail(f"the Helm install needs helm: {reason}", pytrace=False)
        pytest.skip(f"the Helm install cannot run: {reason}")
    kube, node = deployed.kube, deployed.node
    rel = Release(kube, node.plane.kubeconfig)
    restored = None
    try:
        # the kustomize deployment out of the way: same cluster-scoped names
        kube.run("delete", "-k", str(deployed.overlay), "--wait=true", "--timeout=180s", timeout=240)
        assert not kube.exists("namespace", SYSTEM_NS), "kubectl delete -k left the namespace"
        for kind, name in CLUSTER_SCOPED:
            assert not kube.exists(kind, name), f"kubectl delete -k left {kind} {name}"
        kube.run("create", "namespace", SYSTEM_NS)  # what --create-namespace does, before the snapshot
        # and what the controllers add to every namespace, and the CRD the gangs need, before it too
        wait_for(lambda: kube.exists("serviceaccount", "default", SYSTEM_NS)
                 and kube.exists("configmap", "kube-root-ca.crt", SYSTEM_NS), 60, "the namespace's default objects", 0.5)
        ensure_jobset_crd(kube, workload_ns)
        rel.before = every_object(kube)
        name, _, tag = deployed.image_ref.rpartition(":")
        t0 = time.monotonic()
        rel.installed = True
        # README "Helm": helm install ... --namespace gangcheck-system --create-namespace --set image...
        helm_tool.helm("install", RELEASE, str(helm_tool.CHART), "--namespace", SYSTEM_NS, "--create-namespace",
                       "--set", f"image.repository={name}", "--set-string", f"image.tag={tag}",
                       "--set", "certificates.mode=selfSigned", "--wait", "--timeout=300s",
                       kubeconfig=rel.kubeconfig, timeout=360)
        wait_for(lambda: len(rel.ready_pods()) == 2, 120, "both replicas of the Helm release Ready", 0.5)
        rel.ready_seconds = time.monotonic() - t0
        yield rel
    finally:
        try:
            if rel.installed and not rel.uninstalled:
                try:
                    rel.uninstall()
                except helm_tool.ToolError as e:
                    print(f"[node] helm uninstall in teardown failed: {e}", file=sys.stderr)
            delete_namespace(kube, SYSTEM_NS)
        finally:
            restored = restore(deployed, tmp_path_factory.mktemp("redeploy"))
    assert len(deployed.ready_pods()) == 2
    if rel.left == set():
        SUMMARY.append(f"helm: installed {RELEASE}-{chart_version()} on the real node, ready in {rel.ready_seconds:.1f} s, "
                       f"uninstall left nothing ({len(rel.before)} objects compared); kustomize deployment "
                       f"restored in {restored:.1f} s")


def chart_version() -> str:
    return yaml.safe_load((helm_tool.CHART / "Chart.yaml").read_text())["version"]


def webhook_calls(kube, webhook: str) -> dict[str, float]:
    """The API server's own counts for ``webhook``: ``"answered"`` (apiserver_admission_webhook_
    request_total, allowed with HTTP 200), ``"rejected"`` (the same counter, rejected="true": the
    webhook's denial, counted under the denial's code, 403) and ``"fail_open"``
    (apiserver_admission_webhook_fail_open_count: calls that only failurePolicy Ignore let through)."""
    out = {"answered": 0.0, "rejected": 0.0, "fail_open": 0.0}
    for line in kube.run("get", "--raw", "/metrics").stdout.splitlines():
        if f'name="{webhook}"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith("apiserver_admission_webhook_request_total{"):
            if 'rejected="true"' in line:
                out["rejected"] += value
            elif 'code="200"' in line:
                out["answered"] += value
        elif line.startswith("apiserver_admission_webhook_fail_open_count{"):
            out["fail_open"] += value
    return out


def test_helm_install_made_the_release_and_both_replicas_are_ready_through_their_probes(release, deployed):
    kube = release.kube
    listed = helm_tool.helm("list", "-n", SYSTEM_NS, "-o", "json", kubeconfig=release.kubeconfig)
    (rel,) = json.loads(listed)
    assert (rel["name"], rel["status"], rel["chart"], rel["revision"]) == (RELEASE, "deployed", f"gangcheck-{chart_version()}", "1")
    dep = kube.get("deployment", "gangcheck", SYSTEM_NS)
    assert dep["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert dep["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    assert dep["status"]["readyReplicas"] == 2
    pods = release.ready_pods()
    assert len(pods) == 2
    for p in pods:
        (c,) = p["status"]["containerStatuses"]
        assert c["ready"] is True and c["restartCount"] == 0, c
        assert c["image"] == deployed.image_ref
        spec = p["spec"]["containers"][0]
        assert spec["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert spec["startupProbe"]["httpGet"]["path"] == "/healthz"
    # the self-signed certificate the chart made: its CA is the caBundle of every webhook
    secret = kube.get("secret", "gangcheck-tls", SYSTEM_NS)
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    ca = secret["data"]["ca.crt"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(ca)
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        cfg = kube.get(kind, "gangcheck")
        assert cfg["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        for w in cfg["webhooks"]:
            assert w["clientConfig"]["caBundle"] == ca, (kind, w["name"])
            assert "url" not in w["clientConfig"]
            assert w["clientConfig"]["service"] == {"name": "gangcheck", "namespace": SYSTEM_NS,
                                                     "path": w["clientConfig"]["service"]["path"], "port": 443}


def test_through_the_service_an_impossible_gang_is_denied_and_a_fitting_one_admitted(release, workload_ns):
    kube = release.kube
    cpu = node_cpu_millis(kube)
    # every pod fits the empty node alone, all three never do at once
    impossible = jobset(workload_ns, "helm-too-wide", 3, cpu // 2 + 100)
    # two small pods: fit next to the two replicas (500m each) now
    fitting = jobset(workload_ns, "helm-fits", 2, 100)
    wait_for(lambda: dry_run(kube, fitting).verdict == "Fits", 90, "the release to see the node and its own pods", 1)
    before = webhook_calls(kube, "validate.gangcheck.io")
    r = kube.apply(impossible, check=False)
    assert r.code != 0, r
    assert 'admission webhook "validate.gangcheck.io" denied the request' in r.stderr, r
    assert f"JobSet {workload_ns}/helm-too-wide" in r.stderr and "never" in r.stderr, r
    assert not kube.exists("jobset", "helm-too-wide", workload_ns)
    try:
        r = kube.apply(fitting)
        stored = kube.get("jobset", "helm-fits", workload_ns)
        # admitted by gangcheck, not let through by failurePolicy Ignore: /mutate annotated it
        assert stored["metadata"]["annotations"][PREFIX + "verdict"] == "Fits", stored["metadata"]
    finally:
        kube.delete("jobset", "helm-fits", "-n", workload_ns)
    after = webhook_calls(kube, "validate.gangcheck.io")
    # the API server's own counts: the denial and the admission were answered by the release's
    # pods, reached through the Service (the configurations name only the Service), and no call
    # was let through by failurePolicy Ignore alone
    assert after["rejected"] - before["rejected"] >= 1, (before, after)
    assert after["answered"] - before["answered"] >= 1, (before, after)
    assert after["fail_open"] == before["fail_open"], (before, after)
    eps = kube.get("endpointslices", namespace=SYSTEM_NS, selector="kubernetes.io/service-name=gangcheck")["items"]
    ips = {a for e in eps for ep in e["endpoints"] if ep["conditions"].get("ready") for a in ep["addresses"]}
    assert ips == {p["status"]["podIP"] for p in release.ready_pods()}


def test_helm_uninstall_leaves_nothing_of_the_release(release):
    kube = release.kube
    release.uninstall()
    left: dict = {}

    def same() -> bool:
        now = every_object(kube)
        left["added"], left["gone"] = sorted(now - release.before), sorted(release.before - now)
        return not left["added"] and not left["gone"]

    # the Deployment's ReplicaSet and pods go by the garbage collector after helm returns
    try:
        wait_for(same, 180, "the cluster back to its objects before helm install", 2)
    except AssertionError:
        pytest.fail(f"after helm uninstall, left: {left['added']}\nremoved that was there before: {left['gone']}")
    for kind, name in CLUSTER_SCOPED:
        assert not kube.exists(kind, name), (kind, name)
    assert kube.get("secrets", namespace=SYSTEM_NS, selector="owner=helm")["items"] == []
    assert helm_tool.helm("list", "-A", "-q", kubeconfig=release.kubeconfig).strip() == ""
    release.left = set()
