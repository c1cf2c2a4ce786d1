"""Kueue Workloads: the adapter, the snapshot, and diagnose's quota step (workloads ahead, what
admitted ones hold, Kueue's own message for the gang)."""

from __future__ import annotations

import pytest

from webhook.adapters.cluster import build_snapshot
from webhook.adapters.errors import AdapterError
from webhook.adapters.workload import workload_from_k8s
from webhook.diagnose import diagnose, kueue_workloads
from webhook.engine.model import GangRequest

T0 = 1_764_489_600.0  # 2025-11-30T08:00:00Z


def _ts(offset: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(T0 + offset, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload(name, *, ns="team-a", queue="lq-a", pods=4, gpus=8, priority=0, created=0.0, state=None, cq="cq",
             owner=("Job", None), message="", version="v1beta1", active=None):
    conds = []
    if state in ("QuotaReserved", "Admitted", "Finished"):
        conds.append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": f"Quota reserved in ClusterQueue {cq}",
                      "lastTransitionTime": _ts(created + 1)})
    if state in ("Admitted", "Finished"):
        conds.append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted",
                      "lastTransitionTime": _ts(created + 2)})
    if state == "Finished":
        conds.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully",
                      "lastTransitionTime": _ts(created + 3)})
    if message:
        conds.append({"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message,
                      "lastTransitionTime": _ts(created + 5)})
    obj = {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": _ts(created),
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": owner[0], "name": owner[1] or name.removeprefix("job-"),
                                          "uid": "u", "controller": True}]},
        "spec": {"queueName": queue, "priority": priority, "podSets": [
            {"name": "main", "count": pods, "template": {"spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "8", "memory": "64Gi"}}}]}}}]},
        "status": {"conditions": conds},
    }
    if active is not None:
        obj["spec"]["active"] = active
    if state in ("QuotaReserved", "Admitted", "Finished"):
        obj["status"]["admission"] = {"clusterQueue": cq, "podSetAssignments": [{"name": "main", "count": pods, "flavors": {"nvidia.com/gpu": "h100"}}]}
    return obj


def queues():
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu", "cpu", "memory"], "flavors": [
             {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 64}, {"name": "cpu", "nominalQuota": 1000},
                                           {"name": "memory", "nominalQuota": "10Ti"}]}]}]},
         "status": {"pendingWorkloads": 3, "admittedWorkloads": 2,
                    "flavorsReservation": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "48"}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq-a", "namespace": "team-a"},
         "spec": {"clusterQueue": "cq"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq-b", "namespace": "team-b"},
         "spec": {"clusterQueue": "cq"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq-x", "namespace": "team-x"},
         "spec": {"clusterQueue": "other"}},
    ]


def nodes(n=8):
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-{i}", "labels": {"kubernetes.io/hostname": f"gpu-{i}"}},
             "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti", "pods": "110"},
                        "allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}]}} for i in range(n)]


def test_workload_fields_from_a_pending_v1beta1_workload():
    wl = workload_from_k8s(workload("job-train", pods=4, gpus=8, priority=100, created=60,
                                    message="couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed"))
    assert (wl.namespace, wl.name, wl.queue_name, wl.cluster_queue) == ("team-a", "job-train", "lq-a", "")
    assert wl.priority == 100 and wl.created == T0 + 60 and wl.pods == 4
    assert dict(wl.requests) == {"nvidia.com/gpu": 32, "cpu": 32_000, "memory": 4 * 64 * 2**30}
    assert wl.state == "Pending" and not wl.holds_quota
    assert wl.message.endswith("16 more needed") and wl.owner == "Job/train"


@pytest.mark.parametrize("state,holds", [("QuotaReserved", True), ("Admitted", True), ("Finished", False)])
def test_workload_state_from_conditions(state, holds):
    wl = workload_from_k8s(workload("job-a", state=state, version="v1beta2"))
    assert wl.state == state and wl.holds_quota is holds
    assert wl.cluster_queue == "cq"


def test_inactive_workload_and_missing_template():
    obj = workload("job-off", active=False)
    obj["spec"]["podSets"].append({"name": "extra", "count": 2})
    wl = workload_from_k8s(obj)
    assert wl.state == "Inactive" and wl.pods == 6 and dict(wl.requests)["nvidia.com/gpu"] == 32


@pytest.mark.parametrize("mutate,field", [
    (lambda o: o["spec"]["podSets"][0].__setitem__("count", -1), "spec.podSets[0].count"),
    (lambda o: o["spec"].__setitem__("podSets", {"a": 1}), "spec.podSets"),
    (lambda o: o["metadata"].__setitem__("creationTimestamp", "yesterday"), "metadata.creationTimestamp"),
    (lambda o: o["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"].__setitem__("nvidia.com/gpu", "0.5"),
     "nvidia.com/gpu"),
])
def test_bad_workload_names_the_object_and_field(mutate, field):
    obj = workload("job-bad")
    mutate(obj)
    with pytest.raises(AdapterError) as e:
        build_snapshot([obj], source="dump.yaml")
    text = str(e.value)
    assert "Workload team-a/job-bad" in text and field in text and "dump.yaml" in text


def test_snapshot_resolves_cluster_queue_through_the_local_queue():
    snap = build_snapshot(queues() + [workload("job-a"), workload("job-x", ns="team-x", queue="lq-x"),
                                      workload("job-y", ns="team-y", queue="nowhere")])
    k = snap.kueue
    assert len(k.workloads) == 3
    assert k.cluster_queue_of(k.workloads[("team-a", "job-a")]) == "cq"
    assert k.cluster_queue_of(k.workloads[("team-x", "job-x")]) == "other"
    assert k.cluster_queue_of(k.workloads[("team-y", "job-y")]) == ""


def _gang(name="train", priority=0):
    from webhook.adapters import adapt

    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq-a"}},
           "spec": {"parallelism": 4, "completions": 4, "suspend": True, "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "8", "memory": "64Gi"}}}]}}}}
    g = adapt(job)
    assert isinstance(g, GangRequest)
    return g


def _cluster():
    return queues() + nodes() + [
        workload("job-early", created=0),                          # pending, same priority, earlier → ahead
        workload("job-late", created=600),                         # pending, same priority, later → behind
        workload("job-urgent", ns="team-b", queue="lq-b", priority=1000, created=900),  # higher priority → ahead
        workload("job-train", created=300, message="couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed"),
        workload("job-big", ns="team-b", queue="lq-b", pods=4, gpus=8, state="Admitted", created=-3600),
        workload("job-small", pods=2, gpus=8, state="QuotaReserved", created=-60),
        workload("job-done", pods=8, gpus=8, state="Finished", created=-7200),
        workload("job-elsewhere", ns="team-x", queue="lq-x", priority=5000),  # another ClusterQueue
    ]


def test_kueue_workloads_ahead_holding_and_own_message():
    snap = build_snapshot(_cluster())
    out = kueue_workloads(snap, _gang(), "cq", 0)
    assert out["own_workload"] == {"name": "team-a/job-train", "state": "Pending",
                                   "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed"}
    assert list(out["workloads_ahead"]) == ["Workload/team-b/job-urgent", "Workload/team-a/job-early"]
    assert out["workloads_ahead"]["Workload/team-b/job-urgent"] == {"owner": "Job/urgent", "pods": 4, "gpus": 32, "priority": 1000,
                                                                   "created": T0 + 900}
    assert out["workloads_ahead_total"] == 2
    assert out["holding"]["workloads"] == 2 and out["holding"]["pods"] == 6 and out["holding"]["gpus"] == 48
    assert [t["workload"] for t in out["holding"]["top"]] == ["team-b/job-big", "team-a/job-small"]


def test_not_yet_submitted_gang_sees_every_equal_priority_workload_ahead():
    snap = build_snapshot(_cluster())
    out = kueue_workloads(snap, _gang("fresh"), "cq", 0)
    assert out["own_workload"] is None
    assert set(out["workloads_ahead"]) == {"Workload/team-b/job-urgent", "Workload/team-a/job-early",
                                           "Workload/team-a/job-late", "Workload/team-a/job-train"}


def test_diagnose_quota_step_shows_workloads():
    snap = build_snapshot(_cluster())
    rep = diagnose(snap, _gang(), now=T0 + 1000)
    step = next(s for s in rep["steps"] if s["name"] == "quota")
    assert "kubectl get workloads -A -o wide" in step["command"]
    f = step["findings"]
    assert "Workload/team-b/job-urgent" in f["ahead"] and "Workload/team-a/job-late" not in f["ahead"]
    assert f["holding"]["gpus"] == 48
    assert "Admitted workloads hold 48 GPU(s)" in step["meaning"]
    assert "Kueue says of Workload team-a/job-train" in step["meaning"] and "16 more needed" in step["meaning"]


# ---------------------------------------------------------------- from the first-user trial


def test_own_workload_priority_orders_the_queue_not_the_pods_priority():
    # The Job's pods carry no priority (0); Kueue orders by the Workload's spec.priority (100).
    cluster = queues() + nodes() + [
        workload("job-train", priority=100, created=300),
        workload("job-hi", priority=1000, created=900),
        workload("job-eq-early", priority=100, created=0),
        workload("job-eq-late", priority=100, created=600),
        workload("job-lo", priority=10, created=-600),
    ]
    out = kueue_workloads(build_snapshot(cluster), _gang(), "cq", 0)
    assert list(out["workloads_ahead"]) == ["Workload/team-a/job-hi", "Workload/team-a/job-eq-early"]


def test_own_admitted_workload_is_not_blocked_by_its_own_quota():
    # The ClusterQueue's reservation (48 of 64) includes the gang's own 32: quota is not the blocker.
    cluster = queues() + nodes(2) + [workload("job-train", pods=4, gpus=8, state="Admitted", created=0)]
    cluster[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 48
    snap = build_snapshot(cluster)
    from webhook.engine.evaluate import evaluate

    d = evaluate(snap, _gang())
    codes = {f.code for f in d.findings}
    assert "WaitingForQuota" not in codes and "QuotaReserved" in codes
    rep = diagnose(snap, _gang(), now=T0 + 1000)
    step = rep["steps"][0]
    assert step["status"] != "blocking" and "already holds its quota" in step["meaning"]
    assert not any(f["action"] == "borrow-quota" for f in rep["fixes"])
    # without the Workload the same request waits for quota (48 − 48 used + 0 < 32)
    d2 = evaluate(build_snapshot(cluster[:-1]), _gang())
    assert "WaitingForQuota" in {f.code for f in d2.findings}


def test_partial_admission_holds_the_admitted_count():
    obj = workload("job-part", pods=3, gpus=8, state="Admitted")
    obj["status"]["admission"]["podSetAssignments"][0]["count"] = 1
    wl = workload_from_k8s(obj)
    assert (wl.pods, dict(wl.requests)["nvidia.com/gpu"]) == (1, 8)


def test_kueue_pod_group_workload_is_its_own_and_not_counted_twice():
    from webhook.adapters import adapt

    group_pods = []
    for i in range(2):
        group_pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"pg-{i}", "namespace": "team-a",
            "labels": {"kueue.x-k8s.io/queue-name": "lq-a", "kueue.x-k8s.io/pod-group-name": "pg"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
            "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}})
    wl = workload("pg", pods=2, gpus=8, created=100, owner=("Pod", "pg-0"))
    other = workload("job-other", created=0)
    snap = build_snapshot(queues() + nodes() + group_pods + [wl, other])
    g = adapt(group_pods[0])
    out = kueue_workloads(snap, g, "cq", 0)
    assert out["own_workload"]["name"] == "team-a/pg"
    assert list(out["workloads_ahead"]) == ["Workload/team-a/job-other"]
    # seen from another gang, the group is one entry (its Workload), not also its Pending pods
    rep = diagnose(snap, _gang("fresh"), now=T0 + 1000)
    f = rep["steps"][0]["findings"]
    assert f["ahead_total"] == 2 and set(f["ahead"]) == {"Workload/team-a/pg", "Workload/team-a/job-other"}


def test_more_than_ten_ahead_keeps_queue_order_and_the_true_total():
    cluster = queues() + nodes() + [workload(f"job-{i:02d}", priority=i, created=i) for i in range(17)]
    rep = diagnose(build_snapshot(cluster), _gang("fresh"), now=T0 + 1000)
    f = rep["steps"][0]["findings"]
    assert f["ahead_total"] == 17 and len(f["ahead"]) == 10
    assert list(f["ahead"])[:2] == ["Workload/team-a/job-16", "Workload/team-a/job-15"]  # highest priority first
    assert "17 pending gang(s) are queued ahead" in rep["steps"][0]["meaning"]


@pytest.mark.parametrize("mutate,field", [
    (lambda o: o["spec"]["podSets"][0].__setitem__("count", 10**30), "spec.podSets[0].count"),
    (lambda o: o["spec"]["podSets"][0].__setitem__("template", "x"), "spec.podSets[0].template"),
    (lambda o: o["status"].__setitem__("admission", {"clusterQueue": 5}), "status.admission.clusterQueue"),
])
def test_more_bad_workloads(mutate, field):
    obj = workload("job-bad")
    mutate(obj)
    with pytest.raises(AdapterError) as e:
        workload_from_k8s(obj)
    assert field in str(e.value)


def test_diagnose_and_fragmentation_refuse_a_cluster_without_nodes(tmp_path, capsys):
    from webhook.cli import main

    empty = tmp_path / "empty.json"
    empty.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    job = tmp_path / "job.json"
    import json

    job.write_text(json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t", "namespace": "team-a"},
                               "spec": {"parallelism": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x",
                                        "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}}))
    assert main(["diagnose", str(job), "--cluster", str(empty)]) == 2
    assert "holds no Node objects" in capsys.readouterr().err
    assert main(["fragmentation", "--cluster", str(empty)]) == 2
    assert "holds no Node objects" in capsys.readouterr().err


def test_json_dump_with_a_byte_order_mark(tmp_path):
    from webhook.dump import load_cluster

    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + __import__("json").dumps({"apiVersion": "v1", "kind": "List", "items": nodes(2)}).encode())
    assert len(load_cluster(path).nodes) == 2
