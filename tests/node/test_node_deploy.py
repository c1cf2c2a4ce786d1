"""Scenario 1 of #12: ``kubectl apply -k`` of an overlay of manifests/ (only the image reference
changed) on a real node — both replicas become Ready through their own probes, in a namespace
that enforces the ``restricted`` Pod Security level, which admitted them."""

from __future__ import annotations

import yaml

from node_cluster import NODE_NAME, REPO as ROOT, SYSTEM_NS


def test_the_overlay_changes_nothing_but_the_image_reference(deployed):
    kube = deployed.kube
    over = [d for d in yaml.safe_load_all(kube.run("kustomize", str(deployed.overlay)).stdout) if d]
    base = [d for d in yaml.safe_load_all(kube.run("kustomize", str(ROOT / "manifests")).stdout) if d]
    images = [c["image"] for d in over if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]["containers"]]
    assert images == [deployed.image_ref]
    (base_dep,) = [d for d in base if d["kind"] == "Deployment"]
    for d in over:
        if d["kind"] == "Deployment":
            d["spec"]["template"]["spec"]["containers"][0]["image"] = base_dep["spec"]["template"]["spec"]["containers"][0]["image"]
    assert over == base


def test_both_replicas_run_on_the_real_node_and_are_ready_through_their_probes(deployed):
    pods = deployed.ready_pods()
    assert len(pods) == 2
    for p in pods:
        assert p["spec"]["nodeName"] == NODE_NAME
        assert p["status"]["phase"] == "Running"
        (c,) = p["status"]["containerStatuses"]
        assert c["ready"] is True and c["started"] is True and c["restartCount"] == 0, c
        assert c["image"] == deployed.image_ref
        spec = p["spec"]["containers"][0]
        # Ready came from the manifests' own probes, on the container's https port
        assert spec["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert spec["startupProbe"]["httpGet"]["path"] == "/healthz"
    dep = deployed.kube.get("deployment", "gangcheck", SYSTEM_NS)
    assert dep["status"]["readyReplicas"] == 2 and dep["status"]["availableReplicas"] == 2


def test_the_namespace_enforces_restricted_and_admitted_the_pods_under_it(deployed):
    ns = deployed.kube.get("namespace", SYSTEM_NS)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # the PodSecurity admission plugin is live: a pod that breaks `restricted` is refused there
    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-restricted", "namespace": SYSTEM_NS},
           "spec": {"containers": [{"name": "c", "image": deployed.image_ref}]}}
    r = deployed.kube.create(bad, "--dry-run=server", check=False)
    assert r.code != 0 and 'violates PodSecurity "restricted:latest"' in r.stderr, r
    # and the gangcheck pods, which it admitted, run as the restricted level requires
    for p in deployed.ready_pods():
        sc, csc = p["spec"]["securityContext"], p["spec"]["containers"][0]["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["seccompProfile"]["type"] == "RuntimeDefault"
        assert csc["allowPrivilegeEscalation"] is False and csc["capabilities"]["drop"] == ["ALL"]


def test_the_pods_reach_the_api_server_through_the_kubernetes_service(deployed):
    """In-cluster config: the kubelet gives the pods KUBERNETES_SERVICE_HOST = the `kubernetes`
    Service's ClusterIP (kube-proxy takes it to the API server); their informers synced over it,
    or /readyz would not be 200."""
    kube = deployed.kube
    cluster_ip = kube.get("service", "kubernetes", "default")["spec"]["clusterIP"]
    for p in deployed.ready_pods():
        r = kube.run("exec", "-n", SYSTEM_NS, p["metadata"]["name"], "--", "sh", "-c",
                     "echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT", timeout=60)
        assert r.stdout.strip() == f"{cluster_ip}:443", r
