"""The series the monitoring overlay's dashboard reads, scraped from a real app's /metrics (FastAPI's
TestClient on ``create_app``): denials by reason, fail-opens by reason, GPU fragmentation; and the
label sets stay closed."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings, strategies as st
from prometheus_client.parser import text_string_to_metric_families

from webhook.dump import load_cluster
from webhook.server import create_app
from webhook.server.metrics import GPU_NODE_STATES, gpu_fragmentation, reason_label
from webhook.sources import StaticSource

from builders import node, pod, snapshot
from test_admission import job, review


def scrape(client: TestClient) -> dict[str, dict[tuple, float]]:
    """Sample name → {sorted label pairs: value}, parsed by prometheus_client's own parser."""
    r = client.get("/metrics")
    assert r.status_code == 200
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


@pytest.fixture(scope="module")
def demo_client():
    app = create_app(StaticSource(load_cluster("demo"), "demo"), None, clock=lambda: 1_700_000_000.0)
    with TestClient(app) as c:
        yield c


def test_denials_counted_by_leading_reason(demo_client):
    c = demo_client
    before = scrape(c).get("gangcheck_webhook_denials_total", {})
    r = c.post("/validate", json=review(job(80, queue="llm-queue"), uid="deny-metric")).json()["response"]
    assert r["allowed"] is False
    r = c.post("/validate", json=review(job(4), uid="fits-metric")).json()["response"]
    assert r["allowed"] is True
    m = scrape(c)["gangcheck_webhook_denials_total"]
    key = (("endpoint", "validate"), ("reason", "ExceedsMaxQuota"))
    assert m[key] == before.get(key, 0.0) + 1
    assert sum(m.values()) == sum(before.values()) + 1  # the admitted one is not a denial
    assert all(dict(k)["reason"] == "ExceedsMaxQuota" for k in m)


def test_fail_open_counted_by_reason():
    class NotReady(StaticSource):
        ready = False

    app = create_app(NotReady(load_cluster("demo"), "demo"), None)
    with TestClient(app) as c:
        r = c.post("/validate", json=review(job(4), uid="fo")).json()["response"]
        assert r["allowed"] is True
        m = scrape(c)
    assert m["gangcheck_webhook_fail_open_total"] == {(("endpoint", "validate"), ("reason", "not_ready")): 1.0}
    assert "gangcheck_gpus_free" not in m  # no snapshot to measure yet: no sample, not a made-up 0


def test_fragmentation_series_on_a_small_cluster():
    snap = snapshot([
        node("whole-1"), node("whole-2"),              # 8 free each, nothing in use
        node("part"), node("full"),
        node("cordoned", unschedulable=True),
        node("down", ready=False),
        node("sick", alloc_gpu=6),                      # 2 of 8 devices unhealthy
        node("cpu-only", gpu=0),                        # not a GPU node: in no state
    ], [pod("p1", "part", gpu=3, cpu=1), pod("p2", "full", gpu=8, cpu=1)])
    app = create_app(StaticSource(snap, "small"), None)
    with TestClient(app) as c:
        m = scrape(c)
    assert m["gangcheck_gpus_free"] == {(): 8 + 8 + 5 + 6}  # whole-1, whole-2, part, sick
    assert m["gangcheck_gpus_free_whole_nodes"] == {(): 16.0}
    assert m["gangcheck_gpu_nodes"] == {(("state", s),): float(n) for s, n in {
        "whole_free": 2, "partly_used": 1, "full": 1, "cordoned": 1, "not_ready": 1,
        "unhealthy_devices": 1, "excluded": 0}.items()}
    assert m["gangcheck_cache_age_seconds"] == {(): 0.0}


def test_fragmentation_computed_once_per_snapshot(monkeypatch):
    import webhook.server.metrics as metrics

    calls = []
    real = metrics.gpu_fragmentation
    monkeypatch.setattr(metrics, "gpu_fragmentation", lambda s, o=None: calls.append(s) or real(s, o))
    app = create_app(StaticSource(snapshot([node("a")]), "one"), None)
    with TestClient(app) as c:
        scrape(c), scrape(c)
    assert len(calls) == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.booleans()), min_size=1, max_size=12))
def test_fragmentation_against_brute_force(spec):
    """Per node (installed GPUs, GPUs in use, cordoned): every GPU node lands in exactly one state,
    and the free / whole-node figures are the per-node sums over schedulable nodes."""
    nodes, pods, want_free, want_whole, want = [], [], 0, 0, dict.fromkeys(GPU_NODE_STATES, 0)
    for i, (gpus, used, cordoned) in enumerate(spec):
        used = min(used, gpus)
        nodes.append(node(f"n{i}", gpu=gpus, unschedulable=cordoned))
        if used:
            pods.append(pod(f"p{i}", f"n{i}", gpu=used, cpu=1))
        if gpus == 0:
            continue
        if cordoned:
            want["cordoned"] += 1
            continue
        left = gpus - used
        want_free += left
        want_whole += left if used == 0 else 0
        want["full" if left == 0 else "whole_free" if used == 0 else "partly_used"] += 1
    got = gpu_fragmentation(snapshot(nodes, pods))
    assert got == {"free": want_free, "free_whole_nodes": want_whole, "nodes": want}


@pytest.mark.parametrize("codes,label", [
    (["ExceedsMaxQuota", "WaitingForQuota"], "ExceedsMaxQuota"),
    ([], "Other"), (None, "Other"), (["not a code"], "Other"), (["A" * 65], "Other"), ([7], "Other"),
])
def test_reason_label_is_bounded(codes, label):
    assert reason_label(codes) == label
