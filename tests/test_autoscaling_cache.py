"""The live cache and ``gangcheck dump`` with node autoscalers' objects (issue #16): NodePools
followed through add / update / delete, NodeClaims, ProvisioningRequests, the one status
ConfigMap (others in kube-system are not listed), absent CRDs, and a dump that reads back to
the same ``AutoscalingState`` as the live cache.

Uses the scripted list/watch server and the fixtures of tests/test_cache.py. No timing
assertions: every check polls with a bounded wait.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scripted_apiserver import make_node  # noqa: E402
from test_autoscaling_objects import CA_LEGACY, CA_YAML, configmap, nodeclaim, nodepool, provreq  # noqa: E402
from test_cache import ALL_CRD_GROUPS, WAIT, make_cache, server, wait_for  # noqa: E402,F401  (fixtures)
from test_cli_dump import kubeconfig, run  # noqa: E402

from webhook.dump import load_cluster  # noqa: E402
from webhook.engine.autoscale.model import NODE_GROUP, NODEPOOL  # noqa: E402

GPU = "nvidia.com/gpu"
AUTOSCALER_GROUPS = {"karpenter.sh", "autoscaling.x-k8s.io"}


def _sources(cache):
    return {s.name: s for s in cache.snapshot().autoscaling.sources}


def test_cache_follows_a_nodepool_add_update_delete(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("n1", labels={"karpenter.sh/nodepool": "gpu-h100"})])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    assert cache.snapshot().autoscaling.sources == ()
    st = cache.status()["informers"]
    for name in ("karpenter.nodepools", "karpenter.nodeclaims", "autoscaling.provisioningrequests", "autoscaler.status"):
        assert st[name]["installed"] is True and st[name]["synced"] is True, name

    server.upsert(nodepool())
    src = wait_for(lambda: _sources(cache).get("gpu-h100"), what="NodePool added")
    assert src.kind == NODEPOOL and src.nodes == 1 and src.limits[GPU] == 512 and src.weight == 50
    assert src.in_use[GPU] == 8 and src.in_use["nodes"] == 1  # from its node: no status.resources

    changed = nodepool()
    changed["spec"]["limits"][GPU] = "1024"
    changed["status"] = {"resources": {GPU: "16", "nodes": "2"}}
    server.upsert(changed)
    src = wait_for(lambda: (s := _sources(cache).get("gpu-h100")) and s.limits[GPU] == 1024 and s, what="NodePool updated")
    assert src.in_use == {GPU: 16, "nodes": 2}

    server.upsert(nodeclaim("gpu-h100-x", ready=False))
    wait_for(lambda: _sources(cache)["gpu-h100"].pending == 1, what="NodeClaim pending")
    server.upsert(nodeclaim("gpu-h100-x", node="n1", ready=True))
    wait_for(lambda: _sources(cache)["gpu-h100"].pending == 0, what="NodeClaim Ready")
    assert cache.snapshot().autoscaling.provisioning_samples_s == (200.0,)

    server.delete(changed)
    wait_for(lambda: "gpu-h100" not in _sources(cache), what="NodePool deleted")
    assert cache.snapshot().autoscaling.sources == ()


def test_cache_reads_only_the_autoscaler_status_configmap_and_its_updates(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("g1", labels={"cloud.google.com/gke-nodepool": "a100"}),
                 configmap("not read", name="other"), configmap(CA_LEGACY, namespace="default"),
                 configmap(CA_YAML)])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    assert cache.informer_status("autoscaler.status")["objects"] == 1
    assert any("/api/v1/namespaces/kube-system/configmaps?" in r and "cluster-autoscaler-status" in r
               for r in server.requests)
    groups = [s for s in cache.snapshot().autoscaling.sources if s.kind == NODE_GROUP]
    assert [g.max_new_nodes for g in groups] == [13, 8]
    assert groups[0].requirements is not None and groups[1].requirements is None

    server.upsert(configmap("garbage"))
    wait_for(lambda: cache.snapshot().autoscaling.notes, what="status not understood")
    assert cache.snapshot().autoscaling.sources == ()
    assert "format not understood" in cache.snapshot().autoscaling.notes[0]


def test_absent_autoscaler_crds_are_fine(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS) | AUTOSCALER_GROUPS
    server.load([make_node("n1")])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    st = cache.status()["informers"]
    for name in ("karpenter.nodepools", "karpenter.nodeclaims", "autoscaling.provisioningrequests"):
        assert st[name]["installed"] is False and st[name]["synced"] is True, name
    assert cache.snapshot().autoscaling.sources == () and len(cache.snapshot().nodes) == 1


def test_a_nodepool_that_cannot_be_read_may_add_any_node(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    bad = nodepool("bad")
    bad["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Near"  # say, a newer Karpenter's operator
    server.load([make_node("n1"), bad, nodepool("good")])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    src = _sources(cache)
    assert set(src) == {"bad", "good"}
    assert (src["bad"].requirements, src["bad"].taints, dict(src["bad"].limits)) == (None, None, {})
    assert src["good"].requirements is not None
    (note,) = cache.snapshot().autoscaling.notes
    assert note.startswith("NodePool bad could not be read (NodePool bad: spec.template.spec.requirements[0].operator:")
    assert cache.informer_status("karpenter.nodepools")["convert_errors"] == 0


def test_dump_writes_the_autoscaler_objects_and_reads_back_as_the_cache(server, make_cache, tmp_path, monkeypatch, capsys):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([
        *(make_node(f"gpu-{i}", labels={"karpenter.sh/nodepool": "gpu-h100"}) for i in range(2)),
        make_node("g1", labels={"cloud.google.com/gke-nodepool": "a100"}),
        nodepool(), nodeclaim("c0", node="gpu-0", ready=True), nodeclaim("c9", ready=False),
        configmap(CA_YAML), configmap("not read", name="other"), provreq(conditions=[{"type": "Accepted", "status": "True"}]),
    ])
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", server.url)))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    out = tmp_path / "cluster.json"
    code, _, err = run(capsys, "dump", "-o", out)
    assert code == 0, err
    kinds = {}
    for item in json.loads(out.read_text())["items"]:
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    assert kinds["NodePool"] == 1 and kinds["NodeClaim"] == 2 and kinds["ProvisioningRequest"] == 1
    assert kinds["ConfigMap"] == 1  # only kube-system/cluster-autoscaler-status
    from_dump = load_cluster(out).autoscaling

    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    live = cache.snapshot().autoscaling
    assert from_dump == live
    assert [s.name for s in from_dump.sources][0] == "gpu-h100" and len(from_dump.sources) == 3
    assert from_dump.provisioning_requests[0].state == "Accepted"
    assert from_dump.provisioning_samples_s == (200.0,)
