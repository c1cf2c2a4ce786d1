"""The node tier's load client (load_client.py) on canned answers: what counts as a failed
admission, and reading the API server's counters. Needs no node (runs in every tier run)."""

from __future__ import annotations

import json
from email.message import Message

from load_client import classify, counter_delta, parse_prometheus, total, webhook_counters

DENIED = json.dumps({"kind": "Status", "code": 403, "message":
                     'admission webhook "validate.gangcheck.io" denied the request: Job a/b (2 pods) can never start: …'}).encode()


def _headers(*warnings: str) -> Message:
    m = Message()
    for w in warnings:
        m["Warning"] = f'299 - "{w}"'
    return m


def _job(annotations: dict | None = None) -> bytes:
    return json.dumps({"kind": "Job", "metadata": {"name": "x", "annotations": annotations or {}}}).encode()


def test_a_gang_that_must_be_denied():
    assert classify("never", 403, _headers(), DENIED)[0] == "ok"
    # admitted: the check did not run (the API server or gangcheck failed open)
    outcome, detail = classify("never", 201, _headers("gangcheck skipped the feasibility check: stale"), _job())
    assert outcome == "unchecked" and "skipped" in detail
    # denied, but by something else
    other = json.dumps({"code": 403, "message": 'admission webhook "other.example.com" denied the request'}).encode()
    assert classify("never", 403, _headers(), other)[0] == "wrong"
    assert classify("never", 500, _headers(), b'{"message": "Internal error"}')[0] == "error"
    assert classify("never", 0, None, b"ConnectionRefusedError: [Errno 111]")[0] == "error"


def test_a_gang_that_must_be_admitted_with_gangcheck_annotations():
    assert classify("checked", 201, _headers(), _job({"gangcheck.io/verdict": "Fits"})) == ("ok", "gangcheck.io/verdict=Fits")
    assert classify("checked", 201, _headers(), _job())[0] == "unchecked"  # the mutating call failed open
    assert classify("checked", 429, _headers(), b'{"message": "too many requests"}')[0] == "error"


APISERVER = """\
# HELP apiserver_admission_webhook_fail_open_count [ALPHA] Admission webhook fail open count
# TYPE apiserver_admission_webhook_fail_open_count counter
apiserver_admission_webhook_fail_open_count{name="mutate.gangcheck.io",type="admit"} 3
apiserver_admission_webhook_fail_open_count{name="validate.gangcheck.io",type="validating"} 4
apiserver_admission_webhook_fail_open_count{name="other.example.com",type="validating"} 9
# TYPE apiserver_admission_webhook_rejection_count counter
apiserver_admission_webhook_rejection_count{error_type="no_error",name="validate.gangcheck.io",operation="CREATE",rejection_code="403",type="validating"} 10
apiserver_admission_webhook_request_total{code="200",name="mutate.gangcheck.io",operation="CREATE",rejected="false",type="admit"} 2.5e+01
weird_label{a="q\\"x",b=""} 1 1700000000
"""


def test_the_api_servers_counters_keep_their_names_and_only_gangchecks_webhooks():
    samples = parse_prometheus(APISERVER)
    assert ("weird_label", {"a": 'q"x', "b": ""}, 1.0) in samples
    c = webhook_counters(APISERVER)
    assert total(c, "apiserver_admission_webhook_fail_open_count") == 7  # not other.example.com's 9
    assert total(c, "apiserver_admission_webhook_rejection_count", error_type="no_error") == 10
    assert total(c, "apiserver_admission_webhook_request_total", code="200") == 25
    later = APISERVER.replace('type="admit"} 3', 'type="admit"} 5')
    d = counter_delta(c, webhook_counters(later))
    assert d == {("apiserver_admission_webhook_fail_open_count", ("name", "mutate.gangcheck.io"), ("type", "admit")): 2.0}
    # a series first seen after the start counts from zero
    assert total(counter_delta({}, c), "apiserver_admission_webhook_fail_open_count") == 7
