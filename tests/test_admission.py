"""Pure unit tests of webhook.admission: AdmissionReview + Decision + Policy → response."""

from __future__ import annotations

import base64
import copy
import json
from datetime import datetime, timezone

import pytest

from webhook import admission as adm
from webhook.engine.decision import Decision
from webhook.engine.evaluate import evaluate
from webhook.policy import Policy

NOW = datetime(2025, 6, 2, 12, 0, 0, tzinfo=timezone.utc)


def job(n: int, gpu: int = 8, *, queue: str | None = None, ns: str = "llm", annotations=None, name="train") -> dict:
    meta: dict = {"name": name, "namespace": ns, "labels": {}}
    if queue:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "parallelism": n,
            "completions": n,
            "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": "x",
                "resources": {"requests": {"nvidia.com/gpu": str(gpu), "cpu": "8"}, "limits": {"nvidia.com/gpu": str(gpu)}},
            }]}},
        },
    }


def review(obj: dict | None, *, op: str = "CREATE", uid: str = "u-1", ns: str | None = None) -> dict:
    req: dict = {
        "uid": uid,
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": op,
        "namespace": ns if ns is not None else ((obj or {}).get("metadata") or {}).get("namespace", ""),
        "name": ((obj or {}).get("metadata") or {}).get("name", ""),
        "userInfo": {"username": "alice"},
    }
    if obj is not None:
        req["object"] = obj
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


@pytest.fixture(scope="module")
def snap():
    from webhook.dump import load_cluster

    return load_cluster("demo")


def decide(snap, obj, policy=None):
    policy = policy or Policy()
    req = adm.parse_review(review(obj))
    assert adm.skip_reason(req, policy) is None
    return evaluate(snap, adm.gang_of(req), policy.engine_options())


def fake_decision(verdict="Waits", warnings=(), message="m", fragmentation=None, reasons=("Fragmented",)) -> Decision:
    return Decision(
        verdict=verdict, reasons=list(reasons), message=message, warnings=list(warnings), findings=[],
        gang={"kind": "Job", "name": "t", "namespace": "llm", "pods": 4, "pod_sets": [{"name": "main", "count": 4}]},
        nodes={"pod_set": "main", "fit_now": 2, "total": 10}, fragmentation=fragmentation,
    )


def decode_patch(resp: dict) -> list:
    r = resp["response"]
    assert r["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(r["patch"]))


def apply_patch(obj: dict, patch: list) -> dict:
    """A minimal RFC 6902 'add' applier (enough to prove the pointers are right)."""
    out = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] == "add"
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        cur = out
        for p in parts[:-1]:
            cur = cur[p]  # KeyError = a parent the patch assumed but that is missing
        cur[parts[-1]] = op["value"]
    return out


# ---------------------------------------------------------------- parse_review


@pytest.mark.parametrize(
    "doc, needle",
    [
        ([], "got an array"),
        ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "x"}}, "admission.k8s.io/v1beta1"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}, "kind 'Pod'"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "no request"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}, "request.uid"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "a", "object": [1]}}, "request.object"),
    ],
)
def test_parse_review_rejects(doc, needle):
    with pytest.raises(adm.BadReview) as exc:
        adm.parse_review(doc)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_parse_review_fills_namespace_from_request():
    obj = job(2)
    del obj["metadata"]["namespace"]
    req = adm.parse_review(review(obj, ns="llm"))
    assert req.obj["metadata"]["namespace"] == "llm"
    assert "namespace" not in obj["metadata"]  # input not modified
    assert req.uid == "u-1" and req.operation == "CREATE"


# ---------------------------------------------------------------- skipping


def test_skip_reasons():
    p = Policy()
    assert "DELETE" in adm.skip_reason(adm.parse_review(review(job(2), op="DELETE")), p)
    assert "CONNECT" in adm.skip_reason(adm.parse_review(review(job(2), op="CONNECT")), p)
    assert "exempt" in adm.skip_reason(adm.parse_review(review(job(2, ns="kube-system"))), p)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "llm"}}
    assert "not a kind gangcheck checks" in adm.skip_reason(adm.parse_review(review(cm)), p)
    assert adm.skip_reason(adm.parse_review(review(job(2))), p) is None
    assert adm.skip_reason(adm.parse_review(review(job(2, ns="team-a"))), Policy(exemptNamespaces=["team-a"])) is not None


def test_allowed_response_unchanged():
    r = adm.allowed_response("abc")
    assert r == {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "abc", "allowed": True}}


def test_gang_of_generate_name():
    obj = job(2)
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "train-"
    gang = adm.gang_of(adm.parse_review(review(obj)))
    assert gang.name == "train-<generated>"
    assert gang.pods == 2


# ---------------------------------------------------------------- validate


def test_enforce_denies_never_fits(snap):
    d = decide(snap, job(80, queue="llm-queue"))
    assert d.verdict == "NeverFits"
    r = adm.validate_response("u-1", d, Policy())["response"]
    assert r["allowed"] is False
    assert r["uid"] == "u-1"
    assert r["status"]["code"] == 403
    msg = r["status"]["message"]
    assert len(msg.encode()) < 1024
    assert "80 pods" in msg and "640" in msg and "512" in msg  # asked, limit with numbers
    assert "at most 64 pods" in msg  # what to change
    assert "warnings" not in r
    assert r["auditAnnotations"] == {"verdict": "NeverFits", "reasons": "ExceedsMaxQuota"}


def test_warn_mode_admits_never_fits_with_would_be_denied(snap):
    d = decide(snap, job(80, queue="llm-queue"))
    r = adm.validate_response("u-1", d, Policy(mode="warn"))["response"]
    assert r["allowed"] is True and "status" not in r
    w = r["warnings"]
    # most useful part first: the verdict, its code and what to change, then the numbers (#17 item 15)
    assert w[0] == "would be denied (ExceedsMaxQuota): ask for at most 64 pods of 8 nvidia.com/gpu, or for a larger quota"
    assert w[1] == "insufficient quota for nvidia.com/gpu in flavor h100, request 640 > maximum capacity (512):"
    assert w[2] == "… ClusterQueue team-llm can get at most 512 (its nominalQuota 512 + borrowingLimit 0)"
    assert len(w) == 3 and all(len(x) <= 120 for x in w)


def test_update_never_denied(snap):
    d = decide(snap, job(80, queue="llm-queue"))
    r = adm.validate_response("u-1", d, Policy(), operation="UPDATE")["response"]
    assert r["allowed"] is True
    assert r["warnings"][0].startswith("would be denied (ExceedsMaxQuota): ask for at most 64 pods")


def test_audit_mode_admits_silently(snap):
    for n in (80, 40):
        d = decide(snap, job(n, queue="llm-queue" if n == 80 else None))
        r = adm.validate_response("u-1", d, Policy(mode="audit"))["response"]
        assert r["allowed"] is True
        assert "warnings" not in r
        assert r["auditAnnotations"]["verdict"] == d.verdict


def test_fits_admitted_without_warnings(snap):
    d = decide(snap, job(4))
    assert d.verdict == "Fits"
    r = adm.validate_response("u-1", d, Policy())["response"]
    assert r == {"uid": "u-1", "allowed": True, "auditAnnotations": {"verdict": "Fits", "reasons": "none"}}


def test_waits_warnings_ordered_with_fragmentation(snap):
    d = decide(snap, job(40))
    assert d.verdict == "Waits"
    r = adm.validate_response("u-1", d, Policy())["response"]
    w = r["warnings"]
    assert r["allowed"] is True
    assert w[0].startswith("fragmented: 1296 nvidia.com/gpu free")
    assert w[1] == "fragmentation 93%: 1200 of 1296 free nvidia.com/gpu are on nodes too full for a pod of 8"
    assert any(x.startswith("8 cordoned node(s)") for x in w[2:])
    assert all(len(x) <= 120 for x in w)
    # threshold above the ratio → no fragmentation warning
    r2 = adm.validate_response("u-1", d, Policy(warnFragmentationRatio=0.95))["response"]
    assert not any(x.startswith("fragmentation ") for x in r2["warnings"])
    assert len(r2["warnings"]) == len(w) - 1


def test_warning_rules():
    long = "x" * 500
    d = fake_decision(warnings=["a\nb\tc\x00d\x1b[31m", "dup", "dup", long, "", "  ", "line\u2028sep"])
    w = adm.validate_response("u", d, Policy())["response"]["warnings"]
    assert w[0] == "a b c d [31m"
    assert w.count("dup") == 1
    # a long warning is split, not cut: 500 characters → 3 lines ≤ 120, the last one cut
    assert w[2] == "x" * 119 and w[3] == "… " + "x" * 117 and w[4] == "… " + "x" * 117 + "…"
    assert w[5] == "line sep"
    assert len(w) == 6
    for x in w:
        assert all(ord(ch) >= 32 and ch not in "\u2028\u2029\x7f" for ch in x)


def test_warning_total_and_count_limits():
    many = [f"warning number {i} " + "é" * 100 for i in range(100)]
    cleaned = adm.clean_warnings(many, limit=100)
    assert sum(len(x.encode()) for x in cleaned) <= 4096
    assert cleaned == [part for m in many for part in adm._split_warning(m)][: len(cleaned)]  # order kept, prefix dropped last
    assert len(cleaned) < 100
    assert len(adm.clean_warnings(many)) == adm.MAX_WARNINGS


def test_split_warning_keeps_the_end_at_a_clause_boundary():
    text = ("fragmented: 1296 nvidia.com/gpu free, but only 12 node(s) can take a pod of 8 now; 64 needed; "
            "ask for at most 12 pods of 8 nvidia.com/gpu")
    parts = adm._split_warning(text)
    assert parts == ["fragmented: 1296 nvidia.com/gpu free, but only 12 node(s) can take a pod of 8 now; 64 needed;",
                     "… ask for at most 12 pods of 8 nvidia.com/gpu"]
    assert adm._split_warning("short") == ["short"]
    assert adm.clean_warnings([text]) == parts


def test_deny_message_capped():
    d = fake_decision(verdict="NeverFits", message="too big\n" * 500)
    r = adm.validate_response("u", d, Policy())["response"]
    assert len(r["status"]["message"].encode()) <= 1000
    assert "\n" not in r["status"]["message"]


def test_fail_open_single_warning():
    r = adm.fail_open_response("u-9", "cluster cache is not synced yet\n(informer pods)")["response"]
    assert r["allowed"] is True and r["uid"] == "u-9"
    assert r["warnings"] == ["gangcheck skipped the feasibility check: cluster cache is not synced yet (informer pods)"]
    long = adm.fail_open_response("u", "e" * 400)["response"]["warnings"]
    assert len(long) == 1 and len(long[0]) == 120


# ---------------------------------------------------------------- mutate


def test_annotations(snap):
    d = decide(snap, job(40))
    ann = adm.annotations_for(d, Policy(), NOW)
    assert ann == {
        "gangcheck.io/verdict": "Waits",
        "gangcheck.io/reasons": "Fragmented,UnhealthyDevices,NodesNotReady,NodesCordoned",
        "gangcheck.io/nodes-fit-now": "12 nodes can take a pod now; 40 pods needed",
        "gangcheck.io/fragmentation": "ratio 0.93: 1200/1296 free nvidia.com/gpu stranded for 8-GPU pods, deficit 28",
        "gangcheck.io/expected-wait": "unknown",
        "gangcheck.io/checked-at": "2025-06-02T12:00:00Z",
    }
    fits = adm.annotations_for(decide(snap, job(4)), Policy(annotationPrefix="example.com/"), NOW.timestamp())
    assert fits["example.com/expected-wait"] == "0s"
    assert fits["example.com/verdict"] == "Fits"
    assert fits["example.com/nodes-fit-now"] == "12 nodes can take a pod now; 4 pods needed"


def test_patch_without_annotations(snap):
    obj = job(40)
    d = decide(snap, obj)
    r = adm.mutate_response("u-2", obj, d, Policy(), NOW)["response"]
    assert r["allowed"] is True and r["uid"] == "u-2"
    patch = decode_patch({"response": r})
    assert len(patch) == 1 and patch[0]["path"] == "/metadata/annotations"
    out = apply_patch(obj, patch)
    assert out["metadata"]["annotations"]["gangcheck.io/verdict"] == "Waits"
    assert out["spec"] == obj["spec"]


def test_patch_with_existing_annotations(snap):
    obj = job(40, annotations={"team": "llm", "gangcheck.io/verdict": "stale"})
    d = decide(snap, obj)
    patch = decode_patch(adm.mutate_response("u", obj, d, Policy(), NOW))
    assert {p["path"] for p in patch} >= {"/metadata/annotations/gangcheck.io~1verdict", "/metadata/annotations/gangcheck.io~1checked-at"}
    out = apply_patch(obj, patch)
    assert out["metadata"]["annotations"]["team"] == "llm"
    assert out["metadata"]["annotations"]["gangcheck.io/verdict"] == "Waits"
    assert out["metadata"]["annotations"]["gangcheck.io/checked-at"] == "2025-06-02T12:00:00Z"


def test_patch_null_annotations_and_no_metadata():
    d = fake_decision()
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a", "annotations": None}}
    out = apply_patch(obj, decode_patch(adm.mutate_response("u", obj, d, Policy(), NOW)))
    assert out["metadata"]["annotations"]["gangcheck.io/verdict"] == "Waits"
    bare = {"apiVersion": "batch/v1", "kind": "Job"}
    out = apply_patch(bare, decode_patch(adm.mutate_response("u", bare, d, Policy(), NOW)))
    assert out["metadata"]["annotations"]["gangcheck.io/nodes-fit-now"] == "2 nodes can take a pod now; 4 pods needed"


def test_pointer_escaping():
    patch = adm.annotation_patch({"metadata": {"annotations": {}}}, {"a~b/c": "v"})
    assert patch == [{"op": "add", "path": "/metadata/annotations/a~0b~1c", "value": "v"}]


def test_rfc3339():
    assert adm.rfc3339(0) == "1970-01-01T00:00:00Z"
    assert adm.rfc3339(datetime(2025, 1, 2, 3, 4, 5)) == "2025-01-02T03:04:05Z"


def test_topology_annotation_names_the_best_domain_now_and_its_deficit():
    from builders import gang, node, pod, pod_set, snapshot
    from webhook.engine.model import TopologyRequest

    nodes = [node(f"r{r}-n{i}", labels={"rack": f"r{r}"}) for r in range(3) for i in range(4)]
    pods = [pod(f"p{r}", f"r{r}-n0", gpu=8) for r in range(3)]
    g = gang(pod_set("worker", 4, gpu=8, topology=TopologyRequest("kueue", "required", level="rack")), kind="PyTorchJob")
    d = evaluate(snapshot(nodes, pods), g)
    ann = adm.annotations_for(d, Policy(), NOW)
    assert ann["gangcheck.io/topology"] == "worker: best rack domain now r0 takes 3 of 4 pods, deficit 1 pod (1 node)"
    assert ann["gangcheck.io/verdict"] == "Waits"
    plain = evaluate(snapshot(nodes, pods), gang(pod_set("worker", 4, gpu=8), kind="PyTorchJob"))
    assert "gangcheck.io/topology" not in adm.annotations_for(plain, Policy(), NOW)
