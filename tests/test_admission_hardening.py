"""Issue #17 items 1, 8 (review level) and 18 at the admission layer: malformed reviews are
BadReview (HTTP 400) naming the field, lone surrogates never reach an encoder, and objects a
checked kind's controller created pass through."""

from __future__ import annotations

import json

import pytest

from webhook import admission as adm
from webhook.engine.evaluate import evaluate
from webhook.policy import Policy

from test_admission import job, review


@pytest.fixture(scope="module")
def snap():
    from webhook.dump import load_cluster

    return load_cluster("demo")


# ---------------------------------------------------------------- item 8: malformed reviews


def _with(path: str, value):
    doc = review(job(2))
    node = doc["request"]
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return doc


@pytest.mark.parametrize(
    "path, value, needle",
    [
        ("object.kind", ["Job"], "request.object.kind must be a string, got an array"),
        ("object.kind", {"kind": "Job"}, "request.object.kind must be a string, got an object"),
        ("object.apiVersion", 1, "request.object.apiVersion must be a string, got a number"),
        ("object.metadata", ["x"], "request.object.metadata must be an object, got an array"),
        ("uid", 7, "request.uid must be a string, got a number"),
        ("uid", ["a"], "request.uid must be a string, got an array"),
        ("operation", ["CREATE"], "request.operation must be a string, got an array"),
        ("namespace", {"a": 1}, "request.namespace must be a string, got an object"),
        ("name", 3, "request.name must be a string, got a number"),
        ("kind", ["Job"], "request.kind must be an object"),
    ],
)
def test_malformed_review_is_bad_review(path, value, needle):
    with pytest.raises(adm.BadReview) as exc:
        adm.parse_review(_with(path, value))
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_skip_never_raises_on_odd_kinds():
    # skip() is also reached with hand-built requests: a list/dict kind is "not a kind we check".
    for kind in (["Job"], {"k": 1}, None, 3):
        obj = dict(job(2), kind=kind)
        req = adm.ReviewRequest("u", "CREATE", "llm", "train", {}, obj, False)
        code, text = adm.skip(req, Policy())
        assert code == adm.SKIP_UNSUPPORTED_KIND and "not a kind gangcheck checks" in text


# ---------------------------------------------------------------- item 1: lone surrogates


def test_uid_and_names_lose_lone_surrogates():
    doc = review(job(2), uid="u-\ud800")
    doc["request"]["name"] = "n\udfff"
    doc["request"]["namespace"] = "llm"
    req = adm.parse_review(doc)
    assert req.uid == "u-\ufffd" and req.name == "n\ufffd"
    body = adm.review_bytes(adm.allowed_response(req.uid, ["x \udc80 y"]))
    out = json.loads(body.decode("utf-8"))
    assert out["response"]["uid"] == "u-\ufffd" and out["response"]["warnings"] == ["x \ufffd y"]


def test_replace_lone_surrogates_deep():
    # JSON escapes: a pair is one character (kept), a lone one becomes U+FFFD.
    doc = json.loads('{"a\\ud800": ["x\\udbff", {"k": "\\ud83d\\ude00 ok \\ud800"}], "n": 1, "f": 1.5, "t": true, "z": null}')
    out = adm.replace_lone_surrogates(doc)
    assert out == {"a\ufffd": ["x\ufffd", {"k": "\U0001F600 ok \ufffd"}], "n": 1, "f": 1.5, "t": True, "z": None}
    json.dumps(out, ensure_ascii=False).encode("utf-8")  # encodable
    assert adm.may_hold_surrogates(b'{"a":"\\ud800"}') and adm.may_hold_surrogates(b'{"a":"\\uDC00"}')
    assert not adm.may_hold_surrogates(b'{"a":"\\u00e9 \\ud7ff"}')


def test_review_bytes_never_raises():
    body = adm.review_bytes({"response": {"uid": "\ud800", "warnings": ["\udfff"]}})
    assert json.loads(body) == {"response": {"uid": "\ud800", "warnings": ["\udfff"]}}  # escaped, valid JSON
    assert body.decode("ascii")


def test_denied_gang_with_surrogate_in_its_name(snap):
    # The name reaches the denial message; before the fix _deny_message's encode raised
    # UnicodeEncodeError → internal error → a traceback and a fail-open.
    obj = job(80, queue="llm-queue", name="train-\ud800")
    req = adm.ReviewRequest("u", "CREATE", "llm", "", {}, obj, False)
    decision = evaluate(snap, adm.gang_of(req), Policy().engine_options())
    assert decision.verdict == "NeverFits"
    resp = adm.validate_response("u", decision, Policy())
    assert resp["response"]["allowed"] is False
    msg = resp["response"]["status"]["message"]
    assert "train-\ufffd" in msg and "\ud800" not in msg
    adm.review_bytes(resp).decode("utf-8")
    warn = adm.validate_response("u", decision, Policy(mode="warn"))
    assert "\ud800" not in json.dumps(warn, ensure_ascii=False)
    m = adm.mutate_response("u", obj, decision, Policy(), 0.0)
    adm.review_bytes(m).decode("utf-8")


# ---------------------------------------------------------------- item 18: controller-created objects


def _owned(obj: dict, *refs: dict) -> dict:
    obj["metadata"]["ownerReferences"] = list(refs)
    return obj


JOBSET_REF = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "big", "uid": "x", "controller": True}


@pytest.mark.parametrize(
    "obj, owner",
    [
        (_owned(job(64), JOBSET_REF), "JobSet big"),
        # a future JobSet version is still the JobSet controller
        (_owned(job(64), dict(JOBSET_REF, apiVersion="jobset.x-k8s.io/v1")), "JobSet big"),
        ({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": "llm",
          "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "controller": True}]},
          "spec": {}}, "RayJob rj"),
    ],
)
def test_controller_owned_by_checked_kind_passes(obj, owner):
    assert adm.controller_owner(obj) == owner
    code, text = adm.skip(adm.parse_review(review(obj)), Policy())
    assert code == adm.SKIP_OWNED and owner in text


@pytest.mark.parametrize(
    "refs",
    [
        [dict(JOBSET_REF, controller=False)],                      # owner but not the controller
        [dict(JOBSET_REF, controller="true")],                     # not a boolean true
        [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "c", "controller": True}],  # not a kind we check
        [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": True}],
        "not-a-list", [1, None, "x"], [{"kind": ["JobSet"], "apiVersion": {"g": 1}, "controller": True}],
    ],
)
def test_objects_without_a_checked_controller_are_checked(refs):
    obj = job(64)
    obj["metadata"]["ownerReferences"] = refs
    assert adm.controller_owner(obj) is None
    assert adm.skip(adm.parse_review(review(obj)), Policy()) is None


def test_child_job_of_a_jobset_not_denied(snap):
    # The field case: a JobSet's child Job, alone, would be judged as a gang of its own.
    child = job(80, queue="llm-queue")
    req = adm.parse_review(review(child))
    assert adm.skip(req, Policy()) is None
    assert evaluate(snap, adm.gang_of(req), Policy().engine_options()).verdict == "NeverFits"
    owned = _owned(job(80, queue="llm-queue"), JOBSET_REF)
    assert adm.skip(adm.parse_review(review(owned)), Policy())[0] == adm.SKIP_OWNED
