"""The Grafana dashboard (manifests/components/monitoring/dashboards/gangcheck.json) queries only
metrics the server really exports.

Every panel query is parsed with a real PromQL parser (``promql-parser``: Prometheus's grammar,
in Rust) and every metric it selects — ``foo`` or ``{__name__="foo"}``, inside ``rate``,
``histogram_quantile``, binary operators — must be a series name of a live scrape of the app's
``GET /metrics`` (FastAPI's TestClient on ``create_app`` with the demo cluster, after a denied,
an admitted, a mutated, a skipped and a failed-open request, so every labelled family has samples).
The variable queries (``label_values(metric, label)``) are Grafana's, not PromQL: their metric is
checked the same way. The rendered ConfigMap carries the same JSON.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import promql_parser
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from webhook.dump import load_cluster
from webhook.server import create_app
from webhook.sources import StaticSource

from test_admission import job, review

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"
MONITORING = MANIFESTS / "overlays" / "monitoring"
DASHBOARD = MANIFESTS / "components" / "monitoring" / "dashboards" / "gangcheck.json"

#: What Grafana puts in place of its variables before the query reaches Prometheus (a duration
#: for the interval ones, a regex for ours).
_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
_DURATIONS = {"__rate_interval": "2m", "__interval": "30s", "__range": "6h"}
_LABEL_VALUES = re.compile(r"^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*\w+\s*\)$")


def expand(expr: str) -> str:
    return _VARIABLE.sub(lambda m: _DURATIONS.get(m.group(1) or m.group(2), ".*"), expr)


def queries(dash: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, rows' nested panels included."""
    out = []
    stack = list(dash.get("panels", []))
    while stack:
        p = stack.pop(0)
        stack.extend(p.get("panels", []))
        for t in p.get("targets", []):
            out.append((p.get("title", "?"), t["expr"]))
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects; ValueError (the parser's) when it is not
    PromQL, AssertionError for a selector without a metric name."""
    names: set[str] = set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name or next((m.value for m in node.matchers.matchers if m.name == "__name__"), None)
            assert name, f"{expr!r}: a selector without a metric name ({node})"
            names.add(name)

    promql_parser.walk(promql_parser.parse(expand(expr)), visit)
    return names


def problems(dash: dict, exported: set[str]) -> list[str]:
    """Every query that does not parse or names a metric not in ``exported``, one line each."""
    out = []
    for title, expr in queries(dash):
        try:
            names = metric_names(expr)
        except ValueError as exc:
            out.append(f"{title}: not PromQL ({exc}): {expr}")
            continue
        out += [f"{title}: {n} is not exported: {expr}" for n in sorted(names - exported)]
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = _LABEL_VALUES.match(q)
            if not m:
                out.append(f"variable {var['name']}: expected label_values(metric, label), got {q!r}")
            elif m.group(1) not in exported:
                out.append(f"variable {var['name']}: {m.group(1)} is not exported")
    return out


@pytest.fixture(scope="module")
def exported() -> set[str]:
    """Series names of a live scrape after a denial, an admission, a mutation, a skip and a fail-open."""

    class NotReady(StaticSource):
        ready = False

    demo = load_cluster("demo")
    text = ""
    with TestClient(create_app(StaticSource(demo, "demo"), None, clock=lambda: 1_700_000_000.0)) as c:
        assert c.post("/validate", json=review(job(80, queue="llm-queue"), uid="d")).json()["response"]["allowed"] is False
        assert c.post("/validate", json=review(job(4), uid="a")).json()["response"]["allowed"] is True
        assert c.post("/mutate", json=review(job(4), uid="m")).status_code == 200
        assert c.post("/validate", json=review(None, op="DELETE", uid="s")).json()["response"]["allowed"] is True
        text += c.get("/metrics").text
    with TestClient(create_app(NotReady(demo, "demo"), None)) as c:
        c.post("/validate", json=review(job(4), uid="f"))
        text += c.get("/metrics").text
    names = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert {"gangcheck_webhook_latency_seconds_bucket", "gangcheck_webhook_denials_total",
            "gangcheck_webhook_skipped_total", "gangcheck_webhook_fail_open_total"} <= names
    return names


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def test_dashboard_has_the_panels_issue_12_asks_for(dashboard):
    exprs = {title: [] for title, _ in queries(dashboard)}
    for title, expr in queries(dashboard):
        exprs[title].append(expr)
    wanted = {
        "Requests": "gangcheck_webhook_requests_total",
        "Denials by reason": "gangcheck_webhook_denials_total",
        "Fail-opens by reason": "gangcheck_webhook_fail_open_total",
        "Latency quantiles": "gangcheck_webhook_latency_seconds_bucket",
        "Cache age": "gangcheck_cache_age_seconds",
        "Fragmented free GPUs": "gangcheck_gpus_free_whole_nodes",
        "Whole free nodes by domain": "gangcheck_gpu_whole_free_nodes",
        "Stranded GPUs by domain": "gangcheck_gpus_stranded",
    }
    for title, metric in wanted.items():
        assert title in exprs, f"no panel {title!r}"
        assert any(metric in metric_names(e) for e in exprs[title]), (title, exprs[title])
    assert any(e.startswith("histogram_quantile(0.99,") for e in exprs["Latency quantiles"])
    assert all("by (reason)" in e for t in ("Denials by reason", "Fail-opens by reason") for e in exprs[t])


def test_every_query_names_an_exported_metric(dashboard, exported):
    assert len(queries(dashboard)) >= 10
    assert problems(dashboard, exported) == []


@pytest.mark.parametrize("old,new,needle", [
    ("gangcheck_webhook_denials_total", "gangcheck_webhook_denial_total", "gangcheck_webhook_denial_total is not exported"),
    ("gangcheck_webhook_latency_seconds_bucket", "gangcheck_webhook_latency_seconds_buckets", "_buckets is not exported"),
    # in the JSON text a quote inside a query is \"
    ("gangcheck_gpus_free{", '{__name__=\\"gangcheck_gpu_free\\", ', "gangcheck_gpu_free is not exported"),
    ("sum by (reason) (rate(gangcheck_webhook_fail_open_total", "sum by (reason (rate(gangcheck_webhook_fail_open_total", "not PromQL"),
    ("label_values(gangcheck_cache_ready,", "label_values(gangcheck_cache_redy,", "gangcheck_cache_redy is not exported"),
])
def test_a_mutated_dashboard_fails(dashboard, exported, old, new, needle):
    text = json.dumps(dashboard)
    assert old in text
    bad = json.loads(text.replace(old, new, 1))
    found = problems(bad, exported)
    assert any(needle in p for p in found), found
    assert problems(copy.deepcopy(dashboard), exported) == []


def test_configmap_ships_the_same_dashboard(dashboard):
    kubectl = shutil.which("kubectl") or next((str(p) for p in Path.home().glob(".cache/gangcheck/*/bin/kubectl")), None)
    if kubectl is None:
        pytest.skip("kubectl not found (PATH or ~/.cache/gangcheck/<version>/bin; `make controlplane` builds it)")
    import yaml

    out = subprocess.run([kubectl, "kustomize", str(MONITORING)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    cms = [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gangcheck-dashboard"]
    assert len(cms) == 1
    cm = cms[0]
    assert cm["metadata"]["labels"] == {"grafana_dashboard": "1"} and cm["metadata"]["namespace"] == "gangcheck-system"
    assert json.loads(cm["data"]["gangcheck.json"]) == dashboard
