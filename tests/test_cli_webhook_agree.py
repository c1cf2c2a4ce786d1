"""One decision, one set of warnings, everywhere (#17 item 15): ``gangcheck check`` and the
webhook's POST /validate answer every example the same way — allowed or denied, and the same
warnings in the same order — under the default policy, warn mode, audit mode and an exempt
namespace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from webhook.adapters import is_supported
from webhook.cli import main
from webhook.demo import demo_snapshot
from webhook.policy import parse_policy
from webhook.server import create_app
from webhook.sources import StaticSource

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "admission"))
from make_reviews import review_for  # noqa: E402

POLICIES = {
    "default": "{}",
    "warn": "mode: warn\n",
    "audit": "mode: audit\n",
    "exempt-llm": "exemptNamespaces: [llm, kube-system]\n",
}


def _examples() -> list[tuple[str, dict]]:
    out = []
    for f in sorted((ROOT / "examples").glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(f.read_text()), 1):
            if isinstance(doc, dict) and is_supported(doc):
                out.append((f"{f.name}#{i}", doc))
    for f in sorted((ROOT / "examples" / "admission").glob("*.json")):
        review = json.loads(f.read_text())
        out.append((f"admission/{f.name}", review["request"]["object"]))
    return out


EXAMPLES = _examples()


@pytest.fixture(scope="module")
def clients():
    snap = demo_snapshot()
    out, stack = {}, []
    for name, text in POLICIES.items():
        # wait_budget: long enough that every expected-wait estimate is in the answer (a late one
        # is the only way the webhook's warnings may differ from check's, by dropping that line)
        app = create_app(StaticSource(snap, "demo"), parse_policy(text), wait_budget=60.0)
        c = TestClient(app)
        c.__enter__()
        stack.append(c)
        out[name] = c
    yield out
    for c in stack:
        c.__exit__(None, None, None)


def webhook_answer(client: TestClient, obj: dict) -> tuple[bool, list[str]]:
    r = client.post("/validate", content=json.dumps(review_for(obj, "u-agree")), headers={"content-type": "application/json"})
    assert r.status_code == 200
    resp = r.json()["response"]
    return resp["allowed"], resp.get("warnings", [])


def check_answer(capsys, tmp_path: Path, obj: dict, policy: str) -> tuple[int, bool, list[str]]:
    job = tmp_path / "job.json"
    job.write_text(json.dumps(obj))
    pf = tmp_path / "policy.yaml"
    pf.write_text(POLICIES[policy] or "mode: enforce\n")
    code = main(["check", str(job), "--cluster", "demo", "-o", "json", "--policy", str(pf)])
    out = capsys.readouterr().out
    doc = json.loads(out)
    return code, doc["allowed"], doc["warnings"]


def test_the_examples_are_all_there():
    assert len(EXAMPLES) >= 24  # 12 example files, 12 reviews
    assert any(name.startswith("admission/") for name, _ in EXAMPLES)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name,obj", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_check_json_equals_validate(capsys, tmp_path, clients, policy, name, obj):
    allowed, warnings = webhook_answer(clients[policy], obj)
    code, c_allowed, c_warnings = check_answer(capsys, tmp_path, obj, policy)
    assert (c_allowed, c_warnings) == (allowed, warnings), name
    assert code == (0 if allowed else 1)


def test_warn_mode_warns_would_be_denied_in_check_too(capsys, tmp_path):
    obj = yaml.safe_load((ROOT / "examples" / "pytorchjob-80x8.yaml").read_text())
    code, allowed, warnings = check_answer(capsys, tmp_path, obj, "warn")
    assert code == 0 and allowed is True
    assert warnings[0] == "would be denied (ExceedsMaxQuota): ask for at most 64 pods of 8 nvidia.com/gpu, or for a larger quota"
    assert any("640 > maximum capacity (512)" in w for w in warnings)


def test_exempt_namespace_is_admitted_unchecked_by_check(capsys, tmp_path):
    obj = yaml.safe_load((ROOT / "examples" / "pytorchjob-80x8.yaml").read_text())
    code, allowed, warnings = check_answer(capsys, tmp_path, obj, "exempt-llm")
    assert (code, allowed, warnings) == (0, True, [])
    job = tmp_path / "job.json"
    pf = tmp_path / "policy.yaml"
    assert main(["check", str(job), "--cluster", "demo", "--policy", str(pf)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PyTorchJob llm/llama-405b-pretrain: not checked — admitted unchanged (namespace llm is exempt)")


def test_demo_64x8_gets_the_webhooks_six_warnings_in_text_too(capsys, clients):
    obj = yaml.safe_load((ROOT / "examples" / "pytorchjob-64x8.yaml").read_text())
    _, warnings = webhook_answer(clients["default"], obj)
    assert len(warnings) == 6
    assert main(["check", str(ROOT / "examples" / "pytorchjob-64x8.yaml"), "--cluster", "demo"]) == 0
    out = capsys.readouterr().out
    shown = [line[len("    - "):] for line in out.splitlines() if line.startswith("    - ")]
    assert shown == warnings
