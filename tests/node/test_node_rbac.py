"""Scenario 3 of #12: RBAC least privilege, checked by the real authorizer.

``kubectl auth can-i --list --as=system:serviceaccount:gangcheck-system:gangcheck`` in a plain
namespace, in kube-system and in gangcheck-system equals the lists below: get/list/watch on what
the cache reads (manifests/base/rbac.yaml), the
cluster-autoscaler status ConfigMap by name in kube-system, plus what every authenticated user
gets from the API server's bootstrap roles (system:basic-user, system:discovery,
system:public-info-viewer: the self-review APIs and the discovery/health URLs) and, from 1.37,
every ServiceAccount (read ClusterTrustBundles). No Secret
anywhere: the serving certificate reaches the pod as a mounted volume (the kubelet reads the
Secret, not gangcheck). No write anywhere but the self-reviews every user may create. The pods
being Ready (scenario 1) shows this is enough: /readyz answers 200 only once every informer
has listed and watched. Not even the policy ConfigMap: the Deployment mounts it and passes
``--policy FILE`` (a server started without ``--policy`` watches it and then needs a Role to
get/list/watch ``gangcheck-policy``)."""

from __future__ import annotations

import pytest

from node_cluster import SYSTEM_NS

SA = f"system:serviceaccount:{SYSTEM_NS}:gangcheck"
RO = "[get list watch]"

# What every authenticated user may do (the API server's bootstrap ClusterRoles).
EVERYONE = [
    "selfsubjectreviews.authentication.k8s.io [] [] [create]",
    "selfsubjectaccessreviews.authorization.k8s.io [] [] [create]",
    "selfsubjectrulesreviews.authorization.k8s.io [] [] [create]",
    "[/.well-known/openid-configuration/] [] [get]",
    "[/.well-known/openid-configuration] [] [get]",
    "[/api/*] [] [get]",
    "[/api] [] [get]",
    "[/apis/*] [] [get]",
    "[/apis] [] [get]",
    "[/healthz] [] [get]",
    "[/healthz] [] [get]",
    "[/livez] [] [get]",
    "[/livez] [] [get]",
    "[/openapi/*] [] [get]",
    "[/openapi] [] [get]",
    "[/openid/v1/jwks/] [] [get]",
    "[/openid/v1/jwks] [] [get]",
    "[/readyz] [] [get]",
    "[/readyz] [] [get]",
    "[/version/] [] [get]",
    "[/version/] [] [get]",
    "[/version] [] [get]",
    "[/version] [] [get]",
]
# The ClusterRole gangcheck (manifests/base/rbac.yaml): read-only, what the cache lists and watches.
CLUSTER_WIDE = [
    f"nodes [] [] {RO}", f"pods [] [] {RO}",
    f"priorityclasses.scheduling.k8s.io [] [] {RO}", f"poddisruptionbudgets.policy [] [] {RO}",
    f"resourceflavors.kueue.x-k8s.io [] [] {RO}", f"clusterqueues.kueue.x-k8s.io [] [] {RO}",
    f"localqueues.kueue.x-k8s.io [] [] {RO}", f"cohorts.kueue.x-k8s.io [] [] {RO}",
    f"workloads.kueue.x-k8s.io [] [] {RO}", f"topologies.kueue.x-k8s.io [] [] {RO}",
    f"queues.scheduling.volcano.sh [] [] {RO}", f"podgroups.scheduling.volcano.sh [] [] {RO}",
    f"podgroups.scheduling.x-k8s.io [] [] {RO}",
    f"hypernodes.topology.volcano.sh [] [] {RO}", f"topologies.kai.scheduler [] [] {RO}",
    f"nodepools.karpenter.sh [] [] {RO}", f"nodeclaims.karpenter.sh [] [] {RO}",
    f"provisioningrequests.autoscaling.x-k8s.io [] [] {RO}",
]
# What every ServiceAccount may do: from Kubernetes 1.37 (ClusterTrustBundle on by default) the
# bootstrap ClusterRole system:cluster-trust-bundle-discovery, bound to system:serviceaccounts
# (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go). Not gangcheck's RBAC.
EVERY_SERVICE_ACCOUNT = [f"clustertrustbundles.certificates.k8s.io [] [] {RO}"]
EXPECTED = {
    "default": EVERYONE + EVERY_SERVICE_ACCOUNT + CLUSTER_WIDE,
    "kube-system": EVERYONE + EVERY_SERVICE_ACCOUNT + CLUSTER_WIDE + [f"configmaps [] [cluster-autoscaler-status] {RO}"],
    SYSTEM_NS: EVERYONE + EVERY_SERVICE_ACCOUNT + CLUSTER_WIDE,
}


def can_i_list(kube, namespace: str) -> list[str]:
    """``kubectl auth can-i --list`` as gangcheck's ServiceAccount: one normalized line per rule
    (``resource [nonResourceURLs] [resourceNames] [verbs]``), sorted."""
    out = kube.run("auth", "can-i", "--list", f"--as={SA}", "-n", namespace).stdout.splitlines()
    assert out and out[0].split()[0] == "Resources", out
    return sorted(" ".join(line.split()) for line in out[1:] if line.strip())


@pytest.mark.parametrize("namespace", sorted(EXPECTED))
def test_can_i_list_as_the_service_account_is_exactly_the_kept_list(deployed, namespace):
    got = can_i_list(deployed.kube, namespace)
    assert got == sorted(EXPECTED[namespace]), "\n".join(got)


@pytest.mark.parametrize("verb", ["get", "list", "watch"])
def test_it_cannot_read_secrets_anywhere(deployed, verb):
    for ns in ("default", "kube-system", SYSTEM_NS):
        r = deployed.kube.run("auth", "can-i", verb, "secrets", f"--as={SA}", "-n", ns, check=False)
        assert (r.code, r.stdout.strip()) == (1, "no"), r
    r = deployed.kube.run("auth", "can-i", verb, "secrets", f"--as={SA}", "--all-namespaces", check=False)
    assert (r.code, r.stdout.strip()) == (1, "no"), r
    # the real API, not only the review: the authorizer refuses the call itself
    r = deployed.kube.run("get", "secret", "gangcheck-tls", "-n", SYSTEM_NS, f"--as={SA}", check=False)
    assert r.code != 0 and "Forbidden" in r.stderr, r


@pytest.mark.parametrize("verb", ["create", "update", "patch", "delete", "deletecollection"])
def test_it_can_write_nothing_but_the_self_reviews_every_user_may(deployed, verb):
    for ns in ("default", "kube-system", SYSTEM_NS):
        writable = [line for line in can_i_list(deployed.kube, ns) if verb in line.rsplit("[", 1)[1]]
        expected = [line for line in EVERYONE if verb in line.rsplit("[", 1)[1]]
        assert writable == sorted(expected), (ns, writable)
    for what in ("pods", "nodes", "configmaps", "jobs.batch", "validatingwebhookconfigurations.admissionregistration.k8s.io"):
        r = deployed.kube.run("auth", "can-i", verb, what, f"--as={SA}", "-n", SYSTEM_NS, check=False)
        assert r.stdout.strip() == "no", (what, r)
