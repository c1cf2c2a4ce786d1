"""The admission service's steps, called one at a time (webhook/server/service.py and its rooms):
decode, gate, read_gang, evaluate (budget, overload), with_wait, respond, record, answer, the
decision cache and the /readyz detail. The whole path over HTTP is tests/test_server*.py's."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading

import pytest
from prometheus_client import CollectorRegistry

from webhook import admission as adm
from webhook.decision_log import DECISION_LOGGER
from webhook.dump import load_cluster
from webhook.engine.evaluate import evaluate
from webhook.policy import Policy, parse_policy
from webhook.server import AdmissionService
from webhook.server.body import BadRequest, content_type_problem
from webhook.server.decision_cache import DecisionCache
from webhook.server.metrics import _informers
from webhook.server.service import FailOpen
from webhook.server.status import readiness
from webhook.sources import StaticSource

from test_admission import job, review


@pytest.fixture(scope="module")
def demo():
    return load_cluster("demo")


class Source:
    def __init__(self, snap, ready=True, age=0.0, status=None):
        self.snap, self.ready, self.age, self._status = snap, ready, age, status or {"kind": "fake"}

    def snapshot(self):
        return self.snap

    def age_seconds(self):
        return self.age

    def status(self):
        if isinstance(self._status, Exception):
            raise self._status
        return self._status


def service(source, policy=None, **kw) -> AdmissionService:
    return AdmissionService(source, policy, registry=CollectorRegistry(), **kw)


def sample(svc: AdmissionService, name: str, **labels) -> float | None:
    return svc.metrics.registry.get_sample_value(name, labels)


def req_of(obj, **kw) -> adm.ReviewRequest:
    return adm.parse_review(review(obj, **kw))


# ---------------------------------------------------------------- decision cache


def test_decision_cache_is_lru_per_snapshot():
    c = DecisionCache(2)
    s1, s2 = object(), object()
    assert c.get(s1, "a") is None  # first sight of s1: emptied, not counted
    c.put(s1, "a", 1)
    c.put(s1, "b", 2)
    assert c.get(s1, "a") == 1  # a is now the most recently used
    c.put(s1, "c", 3)  # evicts b, the least recently used
    assert (c.get(s1, "b"), c.get(s1, "a"), c.get(s1, "c")) == (None, 1, 3)
    assert (c.hits, c.misses) == (3, 1)
    assert c.get(s2, "a") is None  # another snapshot: emptied
    assert c.get(s1, "a") is None  # and s1's entries are gone for good


def test_decision_cache_off():
    c = DecisionCache(0)
    s = object()
    c.put(s, "a", 1)
    assert c.get(s, "a") is None and (c.hits, c.misses) == (0, 0)


def test_decision_cache_key_ignores_gangchecks_own_annotations():
    opts = Policy().engine_options()
    plain = adm.gang_of(req_of(job(4, annotations={"team": "a"})))
    marked = adm.gang_of(req_of(job(4, annotations={"team": "a", "gangcheck.io/verdict": "Fits"})))
    other = adm.gang_of(req_of(job(4, annotations={"team": "b"})))
    k = DecisionCache.key(plain, opts, "gangcheck.io/")
    assert DecisionCache.key(marked, opts, "gangcheck.io/") == k
    assert DecisionCache.key(other, opts, "gangcheck.io/") != k
    assert k.startswith(repr(opts) + "|")


# ---------------------------------------------------------------- decode


def test_decode_reads_an_admission_review():
    r = AdmissionService.decode(adm.review_bytes(review(job(4), uid="d-1", op="UPDATE")), "application/json; charset=utf-8")
    assert (r.uid, r.operation, r.namespace) == ("d-1", "UPDATE", "llm")


@pytest.mark.parametrize("body, ctype, status, text", [
    (b"{}", "text/plain", 415, "Content-Type 'text/plain' is not supported; send application/json"),
    (b'{"a": NaN}', "application/json", 400, "body is not valid JSON: NaN is not a JSON value"),
    (b"\xef\xbb\xbf{}", None, 400, "body is not valid JSON: starts with a byte order mark"),
])
def test_decode_refuses(body, ctype, status, text):
    with pytest.raises(BadRequest) as e:
        AdmissionService.decode(body, ctype)
    assert (e.value.status, str(e.value)) == (status, text)


def test_decode_names_the_review_field():
    with pytest.raises(BadRequest) as e:
        AdmissionService.decode(b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}', None)
    assert e.value.status == 400 and "request.uid" in str(e.value)


def test_content_type_charset():
    assert content_type_problem("application/json; charset=UTF-8") is None
    assert content_type_problem("application/json; charset=latin-1") == (
        "charset 'latin-1' is not supported; send application/json in UTF-8")


# ---------------------------------------------------------------- gate and gang


def test_gate_passes_a_fresh_source_with_the_policy(demo):
    pol = parse_policy("mode: warn\n")
    svc = service(Source(demo, age=3.0), pol)
    assert svc.gate(req_of(job(4)), False, {}) is pol


def test_gate_skip_is_counted_and_noted(demo):
    svc = service(Source(demo))
    note: dict = {}
    assert svc.gate(req_of(job(4), op="DELETE"), True, note) is None
    assert note == {"skip": "operation"}
    assert sample(svc, "gangcheck_webhook_skipped_total", endpoint="mutate", reason="operation") == 1.0


@pytest.mark.parametrize("src, policy, reason, message", [
    (dict(ready=False), None, "not_ready", "cluster cache not synced yet"),
    (dict(age=10000.0), None, "stale", "cluster data is stale (10000s old, limit 120s)"),
    (dict(), lambda: None, "policy_invalid", "no valid policy loaded"),
])
def test_gate_fails_open(demo, src, policy, reason, message):
    svc = service(Source(demo, **src), policy)
    with pytest.raises(FailOpen) as e:
        svc.gate(req_of(job(4)), False, {})
    assert (e.value.reason, e.value.message) == (reason, message)


def test_read_gang(demo):
    g = AdmissionService.read_gang(req_of(job(40, queue="llm-queue")))
    assert (g.kind, g.name, g.namespace, g.queue_name) == ("Job", "train", "llm", "llm-queue")
    bad = job(8)
    bad["spec"]["parallelism"] = "lots"
    with pytest.raises(FailOpen) as e:
        AdmissionService.read_gang(req_of(bad))
    assert e.value.reason == "bad_object" and e.value.message.startswith("could not read the object: spec.parallelism")


# ---------------------------------------------------------------- evaluate, wait, respond


def test_evaluate_runs_the_engine_in_a_worker(demo):
    seen = []

    def engine(snap, gang, options):
        seen.append(threading.current_thread().name)
        return evaluate(snap, gang, options)

    svc = service(Source(demo), evaluate=engine)
    gang = AdmissionService.read_gang(req_of(job(80, queue="llm-queue")))
    d = asyncio.run(svc.evaluate(demo, gang, Policy().engine_options()))
    assert d.verdict == "NeverFits" and d.reasons == ["ExceedsMaxQuota"]
    assert seen[0].startswith("gangcheck-check") and svc._pending == 0
    svc.executor.shutdown(wait=True)


def test_evaluate_overloaded_and_past_its_budget(demo):
    release = threading.Event()

    def engine(*a):
        release.wait(30)
        return "late"

    svc = service(Source(demo), evaluate=engine, time_budget=0.05, workers=1)
    gang = AdmissionService.read_gang(req_of(job(4)))
    svc._pending = svc.max_pending
    with pytest.raises(FailOpen) as e:
        asyncio.run(svc.evaluate(demo, gang, Policy().engine_options()))
    assert (e.value.reason, e.value.message) == ("overloaded", "too many checks in progress")
    svc._pending = 0

    async def past_budget():
        with pytest.raises(FailOpen) as e:
            await svc.evaluate(demo, gang, Policy().engine_options())
        assert svc._pending == 1  # the check still holds its worker
        release.set()
        while svc._pending:
            await asyncio.sleep(0.01)
        return e.value

    fo = asyncio.run(past_budget())
    assert (fo.reason, fo.message) == ("timeout", "check exceeded its 0.05s time budget")
    svc.executor.shutdown(wait=True)


def test_with_wait_attaches_and_caches_the_estimate(demo):
    calls = []

    def estimate(snap, gang, now, options, flavors, history=None):
        calls.append(now)
        return {"p50_s": 600.0}

    svc = service(Source(demo), expected_wait=estimate, wait_budget=30.0, clock=lambda: 1748865600.0)
    gang = AdmissionService.read_gang(req_of(job(40, queue="llm-queue")))
    opts = Policy().engine_options()
    d = evaluate(demo, gang, opts)
    key = DecisionCache.key(gang, opts, "gangcheck.io/")

    async def twice():
        return await svc.with_wait(demo, gang, opts, key, d), await svc.with_wait(demo, gang, opts, key, d)

    first, second = asyncio.run(twice())
    assert first == dataclasses.replace(d, expected_wait={"p50_s": 600.0}) and second == first
    now = demo.as_of if demo.as_of is not None else 1748865600.0
    assert calls == [now]  # the second came from the wait cache
    assert svc._inflight == {} and svc._pending == 0
    svc.executor.shutdown(wait=True)


def test_with_wait_gives_up_on_a_failed_estimate(demo):
    def estimate(*a, **kw):
        raise RuntimeError("no history")

    svc = service(Source(demo), expected_wait=estimate, wait_budget=30.0)
    gang = AdmissionService.read_gang(req_of(job(40, queue="llm-queue")))
    opts = Policy().engine_options()
    d = evaluate(demo, gang, opts)
    assert asyncio.run(svc.with_wait(demo, gang, opts, "k", d)) is d
    svc.executor.shutdown(wait=True)


def test_respond(demo):
    svc = service(Source(demo), clock=lambda: 1748865600.0)
    pol = Policy()
    for n, verdict, outcome in ((80, "NeverFits", "denied"), (4, "Fits", "allowed")):
        req = req_of(job(n, queue="llm-queue"), uid=f"r{n}")
        d = evaluate(demo, adm.gang_of(req), pol.engine_options())
        review_, v, o, reason = svc.respond(req, d, pol, mutate=False)
        assert (v, o, reason) == (verdict, outcome, None)
        assert review_ == adm.validate_response(f"r{n}", d, pol, operation="CREATE")
    req = req_of(job(80, queue="llm-queue"), uid="m")
    d = evaluate(demo, adm.gang_of(req), pol.engine_options())
    review_, v, o, _ = svc.respond(req, d, pol, mutate=True)
    assert (v, o) == ("NeverFits", "allowed")  # /mutate never denies: it annotates
    assert review_ == adm.mutate_response("m", req.obj, d, pol, 1748865600.0)


# ---------------------------------------------------------------- answer and record


def test_decide_then_cache_hit(demo):
    svc = service(StaticSource(demo, "demo"))
    req = req_of(job(80, queue="llm-queue"), uid="c")

    async def both():
        note1, note2 = {}, {}
        a = await svc.decide(req, True, note1)
        b = await svc.decide(req, False, note2)
        return a, b, note2

    (_, v1, o1, _), (_, v2, o2, _), note = asyncio.run(both())
    assert (v1, o1, v2, o2) == ("NeverFits", "allowed", "NeverFits", "denied")
    assert (svc.decisions.hits, svc.decisions.misses) == (1, 0)  # the first look at a snapshot empties, uncounted
    assert note == {"reasons": ["ExceedsMaxQuota"]}
    svc.executor.shutdown(wait=True)


def test_answer_fails_open_on_an_internal_error(demo):
    class Broken(Source):
        def snapshot(self):
            raise RuntimeError("boom")

    svc = service(Broken(demo))
    note: dict = {}
    logging.getLogger("gangcheck.server").disabled = True
    try:
        review_, verdict, outcome = asyncio.run(svc.answer(req_of(job(4), uid="e"), "validate", note))
    finally:
        logging.getLogger("gangcheck.server").disabled = False
    assert review_ == adm.fail_open_response("e", "internal error (RuntimeError)")
    assert (verdict, outcome, note) == ("none", "fail_open", {"error": "RuntimeError", "fail_open": "internal_error"})
    assert sample(svc, "gangcheck_webhook_fail_open_total", endpoint="validate", reason="internal_error") == 1.0


def test_record_counts_and_logs(demo, caplog):
    svc = service(Source(demo))
    caplog.set_level(logging.INFO, logger=DECISION_LOGGER)
    req = req_of(job(4), uid="rec")
    svc.record("validate", req, "Fits", "allowed", 0.003, {"reasons": []})
    svc.record("mutate", None, "none", "bad_request", 0.001, {})
    assert sample(svc, "gangcheck_webhook_requests_total", endpoint="validate", verdict="Fits", outcome="allowed") == 1.0
    assert sample(svc, "gangcheck_webhook_requests_total", endpoint="mutate", verdict="none", outcome="bad_request") == 1.0
    assert sample(svc, "gangcheck_webhook_latency_seconds_bucket", endpoint="validate", verdict="Fits",
                  outcome="allowed", le="0.005") == 1.0
    assert sample(svc, "gangcheck_webhook_latency_seconds_bucket", endpoint="validate", verdict="Fits",
                  outcome="allowed", le="0.0025") == 0.0
    lines = [r.getMessage() for r in caplog.records if r.name == DECISION_LOGGER]
    assert len(lines) == 1 and '"uid":"rec"' in lines[0] and '"outcome":"allowed"' in lines[0]


# ---------------------------------------------------------------- readiness and metrics helpers


def test_readiness_redacts_unless_verbose(demo):
    st = {"name": "cluster-a.example", "synced": True,
          "informers": {"nodes": {"synced": True, "objects": 3, "error": "dial 10.0.0.1 refused"}}}
    src = Source(demo, age=2.5, status=st)
    pol = parse_policy("mode: warn\n")
    quiet = readiness(src, service(src, pol).policy, verbose=False)
    assert quiet["source"] == {"synced": True, "informers": {"nodes": {"synced": True, "objects": 3}}}
    assert (quiet["age_seconds"], quiet["stale"], quiet["ready"], quiet["source_ready"]) == (2.5, False, True, True)
    loud = readiness(src, service(src, pol).policy, verbose=True)
    assert loud["source"] == st


def test_readiness_of_a_raising_status(demo):
    src = Source(demo, status=ValueError("nope"))
    pol = service(src).policy
    assert readiness(src, pol, verbose=False)["source"] == {"error": "ValueError"}
    d = readiness(src, pol, verbose=True)
    assert d["source"] == {"error": "ValueError: nope"} and (d["ready"], d["source_ready"]) == (False, False)
    assert "stale" not in d and "age_seconds" not in d


def test_informers_from_each_status_shape():
    assert _informers({"informers": {"nodes": {"objects": 3}, "bad": 1}}) == [("nodes", {"objects": 3})]
    assert _informers({"informers": [{"name": "pods", "objects": 2}, {"objects": 1}]}) == [
        ("pods", {"name": "pods", "objects": 2}), ("1", {"objects": 1})]
    assert _informers({"nodes": 10, "pods": 20}) == [
        ("nodes", {"objects": 10, "synced": True}), ("pods", {"objects": 20, "synced": True})]
    assert _informers(None) == []
