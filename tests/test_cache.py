"""LiveCache against the scripted list/watch server on loopback (tests/scripted_apiserver.py).

No timing assertions: every check polls for a condition with a bounded wait.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from pathlib import Path

import msgspec
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kubernetes import client  # noqa: E402
from scripted_apiserver import (  # noqa: E402
    ScriptedAPIServer,
    encode,
    make_cluster_queue,
    make_node,
    make_pod,
    populate,
)

from webhook.adapters.cluster import node_from_k8s, pod_from_k8s  # noqa: E402
from webhook.cache import POD_FIELD_SELECTOR, LiveCache, _decode_object  # noqa: E402
from webhook.engine.snapshot import ClusterSnapshot  # noqa: E402
from webhook.sources import SnapshotSource  # noqa: E402

GPU = "nvidia.com/gpu"
WAIT = 20.0
ALL_CRD_GROUPS = {"kueue.x-k8s.io", "scheduling.volcano.sh", "scheduling.x-k8s.io"}


def wait_for(pred, timeout: float = WAIT, what: str = "condition"):
    """Poll ``pred`` until truthy (returns its value) or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def server():
    srv = ScriptedAPIServer().start()
    try:
        yield srv
    finally:
        srv.stop()
        assert srv._thread is None or not srv._thread.is_alive()


@pytest.fixture
def make_cache(server):
    caches: list[LiveCache] = []

    def make(**kw) -> LiveCache:
        cfg = client.Configuration()
        cfg.host = server.url
        kw.setdefault("backoff_base_s", 0.02)
        kw.setdefault("backoff_max_s", 0.2)
        kw.setdefault("rebuild_interval_s", 0.05)
        kw.setdefault("freeze_gc", False)
        kw.setdefault("crd_recheck_s", 3600)
        c = LiveCache(client.ApiClient(cfg), **kw)
        caches.append(c)
        return c

    yield make
    for c in caches:
        c.stop()
        threads = [inf.thread for inf in c._informers.values()] + [c._builder]
        assert not any(t.is_alive() for t in threads), "cache threads still running after stop()"


def free_gpus(cache: LiveCache, node: str) -> int:
    return cache.snapshot().node_free(node).get(GPU, 0)


def informer(cache: LiveCache, name: str) -> dict:
    return cache.informer_status(name)


# ---------------------------------------------------------------- sync and readiness


def test_initial_paged_sync_matches_a_full_resum(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    populate(server, 40, 1300)  # 1300 pods = 3 pages of 500
    cache = make_cache(page_size=500).start()
    assert cache.wait_ready(WAIT)
    snap = cache.snapshot()
    assert isinstance(cache, SnapshotSource)
    assert len(snap.nodes) == 40 and len(snap.pods) == 1300
    pod_lists = [r for r in server.requests if r.startswith("GET /api/v1/pods?") and "watch=1" not in r]
    assert len(pod_lists) == 3 and sum("continue=" in r for r in pod_lists) == 2
    assert all("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in r for r in pod_lists)
    # the incrementally kept per-node sums equal a full re-sum of the pods
    resum = ClusterSnapshot(snap.nodes, snap.pods)
    assert resum.resources == snap.resources
    assert np.array_equal(resum.used, snap.used)
    # node-00000 got pods 0, 40, …, 1280 (33 pods): the first 8 hold one GPU each
    assert snap.node_free("node-00000")[GPU] == 0
    assert snap.node_free("node-00000")["pods"] == 110 - 33
    st = cache.status()
    assert st["ready"] and st["informers"]["pods"]["objects"] == 1300 and st["informers"]["pods"]["lists"] == 1



def test_listed_pods_convert_as_pod_from_k8s_odd_ones_included(server, make_cache):
    # The pods list goes through PodStruct and the memoising reader; odd pods fall back to the
    # generic path, bad ones are counted and skipped, terminal ones are not stored.
    server.not_installed = set(ALL_CRD_GROUPS)
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 900}
    pods = [make_pod(f"p{i}", node="n1") for i in range(5)]
    del pods[1]["spec"]["priority"]
    pods[1]["spec"]["priorityClassName"] = "high"
    pods[2]["metadata"]["labels"]["flag"] = True                      # not a string: the generic path
    pods[3]["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "pg"
    pods[3]["status"]["containerStatuses"] = [{"name": "main", "restartCount": 4}]
    bad = make_pod("bad", node="n1")
    bad["status"]["startTime"] = "yesterday"
    server.load([make_node("n1"), pc, *pods, bad])
    cache = make_cache(page_size=3).start()
    assert cache.wait_ready(WAIT)
    got = {p.name: p for p in cache.snapshot().pods}
    want = {p["metadata"]["name"]: pod_from_k8s(p, {"high": 900}) for p in pods}
    assert got == want
    assert got["p1"].priority == 900 and dict(got["p2"].labels)["flag"] == "True"
    assert got["p3"].gang == "PodGroup/team-a/pg" and got["p3"].restarts == 4
    assert informer(cache, "pods")["convert_errors"] == 1 and "bad" not in got


def test_ready_only_after_every_informer_synced_and_backoff_recovers(server, make_cache):
    server.not_installed = {"scheduling.volcano.sh", "scheduling.x-k8s.io"}
    server.load([make_node("n1")])
    server.fail_next(10_000, 500, "/clusterqueues")  # one informer cannot list
    cache = make_cache().start()
    wait_for(lambda: informer(cache, "kueue.clusterqueues")["errors"] >= 3, what="list retries")
    wait_for(lambda: informer(cache, "nodes")["synced"], what="nodes synced")
    assert not cache.ready
    assert cache.status()["synced"] is False
    st = informer(cache, "kueue.clusterqueues")
    assert not st["synced"] and "HTTP 500" in st["last_error"]
    assert len(cache.snapshot().nodes) == 0  # nothing published before readiness
    server.clear_failures()
    assert cache.wait_ready(WAIT)
    assert len(cache.snapshot().nodes) == 1
    assert informer(cache, "kueue.clusterqueues")["synced"]


def test_server_error_on_watch_backs_off_then_recovers(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("n1"), make_node("n2")])
    cache = make_cache(watch_timeout_s=(1, 2)).start()
    assert cache.wait_ready(WAIT)
    server.fail_next(3, 503, "/nodes")
    server.drop_connections()  # the watch is cut; the next three requests fail
    wait_for(lambda: informer(cache, "nodes")["errors"] >= 3, what="three failures")
    server.upsert(make_node("n3"))
    wait_for(lambda: len(cache.snapshot().nodes) == 3, what="n3 after recovery")
    st = informer(cache, "nodes")
    assert st["synced"] and "HTTP 503" in st["last_error"]


# ---------------------------------------------------------------- pod and node events


def test_pod_bind_rebind_succeeded_and_delete_update_per_node_free(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("n1", gpus=8), make_node("n2", gpus=8)])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    assert free_gpus(cache, "n1") == 8

    pending = make_pod("p1", gpus=4, phase="Pending")
    server.upsert(pending)
    wait_for(lambda: len(cache.snapshot().pods) == 1, what="pending pod")
    assert free_gpus(cache, "n1") == 8 and cache.snapshot().pods[0].node_name == ""

    server.upsert(make_pod("p1", gpus=4, node="n1"))  # bound by the scheduler
    wait_for(lambda: free_gpus(cache, "n1") == 4, what="bind")
    assert cache.snapshot().node_free("n1")["pods"] == 109

    server.upsert(make_pod("p2", gpus=2, node="n1"))
    wait_for(lambda: free_gpus(cache, "n1") == 2, what="second pod")

    server.upsert(make_pod("p2", gpus=2, node="n2"))  # MODIFIED that moves it (requests too)
    server.upsert(make_pod("p1", gpus=6, node="n1"))  # MODIFIED with larger requests
    wait_for(lambda: free_gpus(cache, "n2") == 6 and free_gpus(cache, "n1") == 2, what="rebind")

    server.upsert(make_pod("p1", gpus=6, node="n1", phase="Succeeded"))  # leaves the selector
    wait_for(lambda: free_gpus(cache, "n1") == 8, what="Succeeded releases the node")
    assert [p.name for p in cache.snapshot().pods] == ["p2"]
    # The finished pod taught the wait estimator a run time for its (queue, owner kind):
    # from status.startTime (2025-06-01T10:01:00Z) to when the watch saw it finish.
    assert cache.history.count("team-a", "PyTorchJob") == 1
    learned = cache.history.samples("team-a", "PyTorchJob")[0]
    assert abs(learned - (time.time() - 1748772060.0)) < 120

    server.delete(make_pod("p2"))
    wait_for(lambda: free_gpus(cache, "n2") == 8 and len(cache.snapshot().pods) == 0, what="delete")
    assert cache.node_used("n1") == {"pods": 0, "cpu": 0, "memory": 0, GPU: 0}
    assert informer(cache, "pods")["events"] == 7


def test_history_learns_arrivals_and_one_run_per_gang_with_its_limit(server, make_cache):
    server.not_installed = {"scheduling.volcano.sh", "scheduling.x-k8s.io"}
    server.load([make_node("n1"), make_node("n2"), make_node("n3"), make_pod("old-0", gpus=1, job="old")])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    t0 = time.time()
    big = [make_pod(f"big-{i}", gpus=8, node=f"n{i + 1}", job="big") for i in range(2)]
    late = make_pod("late-0", gpus=8, node="n3", job="late")
    for p in big + [late]:
        p["spec"]["activeDeadlineSeconds"] = 7200
        server.upsert(p)                             # ADDED by the watch: arrivals
    wait_for(lambda: len(cache.snapshot().pods) == 4, what="four pods")
    server.upsert(big[0])                            # MODIFIED: the same pod is not counted twice
    wait_for(lambda: informer(cache, "pods")["events"] >= 4, what="the MODIFIED event")
    _, arrivals = cache.history.arrivals(time.time() + 1, 86400.0)
    got = sorted((a.gang, a.pods, a.limit_s) for a in arrivals)   # old-0 was listed, not ADDED
    assert got == [("PyTorchJob/team-a/big", 2, 7200.0), ("PyTorchJob/team-a/late", 1, 7200.0)]
    assert all(t0 - 1 <= a.t <= time.time() for a in arrivals)
    # Both pods of "big" succeed: one run time for the gang, with its limit. "late" fails after
    # running past its deadline (startTime is long ago): a run of exactly its limit.
    for p in big:
        p["status"]["phase"] = "Succeeded"
    late["status"]["phase"] = "Failed"
    for p in big + [late]:
        server.upsert(p)
    wait_for(lambda: len(cache.snapshot().pods) == 1, what="three finished")
    runs, limits, finished = cache.history.runs("team-a", "PyTorchJob")
    assert len(runs) == 2 and limits.tolist() == [7200.0, 7200.0] and 7200.0 in runs.tolist()


def test_node_cordon_and_clusterqueue_quota_change(server, make_cache):
    server.not_installed = {"scheduling.volcano.sh", "scheduling.x-k8s.io"}
    server.load([make_node("n1"), make_cluster_queue("team", 64)])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    assert cache.snapshot().nodes[0].unschedulable is False
    quota = lambda: cache.snapshot().kueue.cluster_queues["team"].resource_groups[0].flavors[0].resources[GPU].nominal  # noqa: E731
    assert quota() == 64

    server.upsert(make_node("n1", unschedulable=True))
    wait_for(lambda: cache.snapshot().nodes[0].unschedulable, what="cordon")
    snap = cache.snapshot()
    assert snap.classes[snap.node_class[0]].unschedulable

    server.upsert(make_cluster_queue("team", 128, cohort="org"))
    wait_for(lambda: quota() == 128, what="quota change")
    assert cache.snapshot().kueue.cluster_queues["team"].cohort == "org"


# ---------------------------------------------------------------- resourceVersions


def test_bookmark_advances_resource_version_and_spares_a_relist(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("n1")])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    rv0 = int(informer(cache, "nodes")["resource_version"])
    server.upsert(make_pod("p", node="n1"))  # the cluster moves on; nodes see nothing
    wait_for(lambda: server.watchers("/nodes") == 1 and server.watchers("scheduling.k8s.io/priorityclasses") == 1, what="watches open")
    bm = server.bookmark("/nodes")
    assert bm > rv0
    wait_for(lambda: informer(cache, "nodes")["resource_version"] == str(bm), what="bookmark applied")
    # Compact both histories and cut the streams: the node informer resumes from the
    # bookmark's RV, the PriorityClass informer (no bookmark) gets 410 and must re-list.
    server.compact("/nodes")
    server.compact("scheduling.k8s.io/priorityclasses")
    server.drop_connections()
    wait_for(lambda: informer(cache, "priorityclasses")["relists"] == 1, what="410 on the PriorityClass watch")
    wait_for(lambda: informer(cache, "nodes")["watch_restarts"] + informer(cache, "nodes")["errors"] >= 1, what="node watch reopened")
    wait_for(lambda: server.watchers("/nodes") == 1, what="node watch back")
    assert informer(cache, "nodes")["relists"] == 0
    assert informer(cache, "nodes")["lists"] == 1


def test_410_gone_relists_and_state_is_correct_afterwards(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("n1"), make_node("n2"), make_pod("a", gpus=2, node="n1"), make_pod("b", gpus=3, node="n2")])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    assert free_gpus(cache, "n1") == 6 and free_gpus(cache, "n2") == 5
    # Changes the watches never see (their events are compacted away)…
    server.upsert(make_pod("a", gpus=2, node="n2"), silent=True)
    server.upsert(make_pod("c", gpus=1, node="n1"), silent=True)
    server.upsert(make_node("n2", unschedulable=True), silent=True)
    with server._lock:  # b is gone without a DELETED event
        del server._colls["/pods"]["team-a/b"]
    server.expire("/pods")  # ERROR event {"kind": "Status", "code": 410}
    server.compact("/nodes")
    server.fail_next(1, 410, "/nodes")  # HTTP 410 on the re-opened node watch
    server.drop_connections()
    wait_for(lambda: informer(cache, "pods")["relists"] >= 1 and informer(cache, "nodes")["relists"] >= 1, what="re-lists")
    wait_for(lambda: free_gpus(cache, "n1") == 7 and free_gpus(cache, "n2") == 6, what="pods after re-list")
    wait_for(lambda: cache.snapshot().nodes[cache.snapshot().node_index["n2"]].unschedulable, what="nodes after re-list")
    snap = cache.snapshot()
    assert sorted(p.name for p in snap.pods) == ["a", "c"]
    assert snap.nodes[snap.node_index["n2"]].unschedulable
    assert cache.node_used("n2") == {"pods": 1, "cpu": 8000, "memory": 64 * 2**30, GPU: 2}
    # and the watch works again after the re-list
    server.delete(make_pod("c"))
    wait_for(lambda: free_gpus(cache, "n1") == 8, what="event after re-list")


# ---------------------------------------------------------------- optional CRDs and versions


def test_kueue_workloads_listed_and_watched(server, make_cache):
    """Kueue's Workloads are the only record of suspended gangs: listed, watched, and their
    admission state followed."""
    from test_workloads import workload

    server.not_installed = {"scheduling.volcano.sh", "scheduling.x-k8s.io"}
    server.load([make_node("n1"), make_cluster_queue("cq", 64), workload("job-a", pods=2, gpus=8, created=0)])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    wl = cache.snapshot().kueue.workloads[("team-a", "job-a")]
    assert (wl.state, wl.pods, dict(wl.requests)["nvidia.com/gpu"]) == ("Pending", 2, 16)
    server.upsert(workload("job-a", pods=2, gpus=8, created=0, state="Admitted"))
    wait_for(lambda: cache.snapshot().kueue.workloads[("team-a", "job-a")].state == "Admitted", what="admitted")
    assert cache.snapshot().kueue.workloads[("team-a", "job-a")].cluster_queue == "cq"
    server.delete(workload("job-a"))
    wait_for(lambda: len(cache.snapshot().kueue.workloads) == 0, what="deleted")
    assert informer(cache, "kueue.workloads")["events"] == 2


def test_pod_disruption_budgets_and_pod_labels_are_cached(server, make_cache):
    """PodDisruptionBudgets are listed and watched, and pods keep their labels, so diagnose's
    fixes can count the budgets an eviction would violate on the live cluster too."""
    from test_disruption import pdb_obj

    from webhook.engine.fixes import pdb_violations

    server.not_installed = set(ALL_CRD_GROUPS)
    web = make_pod("web-0", node="n1")
    web["metadata"]["labels"]["app"] = "web"
    server.load([make_node("n1"), web, pdb_obj(ns="team-a", allowed=0)])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    snap = cache.snapshot()
    assert [b.name for b in snap.disruption_budgets] == ["web"]
    assert snap.pods[0].labels["app"] == "web"
    assert pdb_violations(snap, snap.pods) == 1
    server.upsert(pdb_obj(ns="team-a", allowed=1))
    wait_for(lambda: cache.snapshot().disruption_budgets[0].disruptions_allowed == 1, what="budget update")
    assert pdb_violations(cache.snapshot(), cache.snapshot().pods) == 0


def test_kueue_and_volcano_not_installed_are_empty_synced_and_reported(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("n1")])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    st = cache.status()
    for name in ("kueue.clusterqueues", "kueue.localqueues", "kueue.resourceflavors", "kueue.cohorts", "kueue.workloads",
                 "volcano.queues", "volcano.podgroups", "coscheduling.podgroups"):
        assert st["informers"][name]["installed"] is False, name
        assert st["informers"][name]["synced"] is True
        assert st["informers"][name]["objects"] == 0
    assert st["informers"]["nodes"]["installed"] is True
    snap = cache.snapshot()
    assert len(snap.kueue.cluster_queues) == 0 and len(snap.volcano.queues) == 0
    # Kueue tried both versions before giving up
    assert any("/kueue.x-k8s.io/v1beta2/clusterqueues" in r for r in server.requests)
    # ready follows the lists; each installed informer's watch opens just after its list, so
    # wait for those streams, then: open watches and absent CRDs do not count as stale
    installed = [n for n, s in cache.status()["informers"].items() if s["installed"]]
    wait_for(lambda: all(informer(cache, n)["watch_open"] for n in installed), what="watches open")
    assert cache.age_seconds() == 0.0


def test_kueue_v1beta2_only_is_found(server, make_cache):
    server.not_installed = {"scheduling.volcano.sh", "scheduling.x-k8s.io"}
    server.served_versions["kueue.x-k8s.io"] = {"v1beta2"}
    server.load([make_node("n1"), make_cluster_queue("team", 32, cohort="org", version="v1beta2")])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    assert informer(cache, "kueue.clusterqueues")["version"] == "v1beta2"
    cq = cache.snapshot().kueue.cluster_queues["team"]
    assert cq.cohort == "org" and cq.resource_groups[0].flavors[0].resources[GPU].nominal == 32
    server.upsert(make_cluster_queue("team", 48, version="v1beta2"))
    wait_for(lambda: cache.snapshot().kueue.cluster_queues["team"].resource_groups[0].flavors[0].resources[GPU].nominal == 48, what="v1beta2 watch")


def test_volcano_and_coscheduling_pod_groups(server, make_cache):
    server.not_installed = {"kueue.x-k8s.io"}
    server.load(
        [
            make_node("n1"),
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}, "spec": {"capability": {GPU: "16"}, "weight": 2}},
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg1", "namespace": "ml"}, "spec": {"minMember": 4, "queue": "research"}},
            {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "pg2", "namespace": "ml"}, "spec": {"minMember": 2}},
        ]
    )
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    vs = cache.snapshot().volcano
    assert vs.queues["research"].capability == {GPU: 16} and vs.queues["research"].weight == 2
    assert vs.pod_groups[("ml", "pg1")].min_member == 4 and vs.pod_groups[("ml", "pg1")].queue == "research"
    assert vs.pod_groups[("ml", "pg2")].api_group == "scheduling.x-k8s.io"


# ---------------------------------------------------------------- priority classes and policy


def test_priority_class_resolves_pod_priority(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    pod = make_pod("p", node="n1")
    del pod["spec"]["priority"]
    pod["spec"]["priorityClassName"] = "high"
    server.load([make_node("n1"), {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}, pod])
    cache = make_cache().start()
    assert cache.wait_ready(WAIT)
    assert cache.snapshot().pods[0].priority == 1000
    assert cache.snapshot().priority_classes == {"high": 1000}


def test_policy_configmap_callback(server, make_cache):
    server.not_installed = set(ALL_CRD_GROUPS)
    seen: list = []
    lock = threading.Lock()

    def on_policy(data):
        with lock:
            seen.append(data)

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gangcheck-policy", "namespace": "gangcheck-system"}, "data": {"policy.yaml": "mode: warn\n"}}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "gangcheck-system"}, "data": {"x": "y"}}
    server.load([other])
    cache = make_cache(policy_configmap=("gangcheck-system", "gangcheck-policy"), on_policy=on_policy).start()
    assert cache.wait_ready(WAIT)
    wait_for(lambda: seen == [None], what="absent policy reported")
    server.upsert(cm)
    wait_for(lambda: len(seen) == 2, what="policy created")
    cm["data"]["policy.yaml"] = "mode: audit\n"
    server.upsert(cm)
    server.upsert(other)  # not ours: filtered by the field selector
    wait_for(lambda: len(seen) == 3, what="policy changed")
    server.delete(cm)
    wait_for(lambda: len(seen) == 4, what="policy deleted")
    assert seen == [None, {"policy.yaml": "mode: warn\n"}, {"policy.yaml": "mode: audit\n"}, None]


# ---------------------------------------------------------------- projections and the server


def test_projection_decode_converts_like_the_full_object():
    pod = make_pod("p", node="n1", gpus=2)
    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "pg"
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "lq"
    spec = pod["spec"]
    spec["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}, "ports": [{"containerPort": 80, "hostPort": 8080}]},
        {"name": "init", "resources": {"requests": {"cpu": "16"}}, "image": "x"},
    ]
    spec["overhead"] = {"cpu": "250m"}
    spec["resources"] = {"requests": {"memory": "100Gi"}}
    spec["activeDeadlineSeconds"] = 3600
    spec["priorityClassName"] = "high"
    del spec["priority"]
    raw = encode(pod)
    full = pod_from_k8s(json.loads(raw), {"high": 7})
    assert pod_from_k8s(_decode_object("Pod", raw), {"high": 7}) == full
    assert full.host_ports and full.deadline_s == 3600 and full.priority == 7 and full.gang == "PodGroup/team-a/pg"

    node = make_node("n1", unschedulable=True)
    node["spec"]["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    node["status"]["allocatable"][GPU] = "7"
    raw = encode(node)
    assert node_from_k8s(_decode_object("Node", raw)) == node_from_k8s(json.loads(raw))


def test_scripted_server_sends_deleted_when_a_pod_leaves_the_field_selector(server):
    server.load([make_pod("p", node="n1")])
    rv = server.resource_version
    server.upsert(make_pod("p", node="n1", phase="Succeeded"))
    server.upsert(make_pod("q", node="n1", phase="Succeeded"))  # never matched: not sent
    server.upsert(make_pod("q", node="n1", phase="Running"))  # starts matching: ADDED
    from urllib.parse import quote

    url = f"{server.url}/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1&fieldSelector={quote(POD_FIELD_SELECTOR)}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        events = [msgspec.json.decode(line) for line in resp.read().splitlines() if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["status"]["phase"]) for e in events] == [
        ("DELETED", "p", "Succeeded"),
        ("ADDED", "q", "Running"),
    ]
    # a list with the selector leaves the terminal pod out; paging works
    with urllib.request.urlopen(f"{server.url}/api/v1/pods?limit=1&fieldSelector={quote(POD_FIELD_SELECTOR)}", timeout=10) as resp:
        page = json.loads(resp.read())
    assert [i["metadata"]["name"] for i in page["items"]] == ["q"] and "continue" not in page["metadata"]
    # an RV from before a compaction gets the 410 ERROR event
    server.compact("/pods")
    with urllib.request.urlopen(f"{server.url}/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1", timeout=10) as resp:
        events = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert events == [{"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "too old resource version", "reason": "Expired", "code": 410}}]


def test_scripted_server_drop_is_a_cut_and_an_abandoned_watch_is_forgotten(server):
    """``drop_connections`` cuts streams (no clean terminal chunk that would let a client send
    its next request on the doomed connection), and a watch whose client went away stops being
    counted: ``watchers()`` means open streams, which the bookmark and 410 tests wait on."""
    import http.client

    def open_watch() -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/api/v1/nodes?watch=1&resourceVersion=0&timeoutSeconds=600")
        return conn

    conn = open_watch()
    resp = conn.getresponse()
    assert resp.status == 200
    wait_for(lambda: server.watchers("/nodes") == 1, what="watch registered")
    server.drop_connections()
    with pytest.raises((http.client.IncompleteRead, ConnectionError, OSError)):
        resp.read()  # a cut: the chunked body never ends cleanly
    conn.close()
    wait_for(lambda: server.watchers("/nodes") == 0, timeout=5, what="cut watch forgotten")

    conn = open_watch()
    assert conn.getresponse().status == 200
    wait_for(lambda: server.watchers("/nodes") == 1, what="second watch registered")
    conn.close()  # the client abandons an idle stream
    wait_for(lambda: server.watchers("/nodes") == 0, timeout=5, what="abandoned watch forgotten")


def test_ready_is_not_lost_when_the_last_sync_races_the_builder(server, make_cache):
    """The builder checks "all synced?" and then clears ``_changed``; an informer that finished
    its sync in between used to have its wake-up cleared, leaving the cache not ready on a quiet
    cluster. Widen that window with a slow ``clear()`` and check every cache still gets ready."""

    class SlowClear(threading.Event):
        def clear(self) -> None:
            time.sleep(0.05)
            super().clear()

    server.not_installed = set(ALL_CRD_GROUPS)
    server.load([make_node("n1")])
    for _ in range(3):
        cache = make_cache()
        cache._changed = SlowClear()
        cache.start()
        assert cache.wait_ready(WAIT), cache.status()
        assert len(cache.snapshot().nodes) == 1


def test_pod_reader_is_kept_while_the_priority_classes_stay():
    # The memoising reader lives across list pages; a new one only when the classes change.
    from webhook.cache import _Informer

    class FakeCache:
        _pc_values: dict = {}
        _pc_default = 0

    inf = _Informer.__new__(_Informer)
    inf.cache, inf._reader, inf._reader_pcs = FakeCache(), None, (None, 0)
    first = inf._pod_reader()
    assert inf._pod_reader() is first                                    # no PriorityClasses at all: kept
    FakeCache._pc_values = {"high": 9}
    second = inf._pod_reader()
    assert second is not first and second.priority_classes == {"high": 9} and inf._pod_reader() is second
