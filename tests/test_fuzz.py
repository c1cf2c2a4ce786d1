"""Issue 17's "Done when" fuzz, the suite's share: 10,000 seeded requests (seed 17) from
bench/fuzz.py against a live ``gangcheck serve --cluster demo`` subprocess over HTTPS on loopback.

One run (module fixture) feeds the contract tests below; each failure message lists the failed
checks by cause with a reproducer file (re-send one with ``python bench/fuzz.py --replay FILE``).
``make fuzz`` runs the same harness with 100,000 requests.

The first tests check the harness's own checks on hand-made answers, so a fuzz run that reports
nothing is not a harness that cannot fail. No timing assertions: the run is bounded by its request
count (and a generous time limit that only stops it); figures are printed, not asserted.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_harness():
    spec = importlib.util.spec_from_file_location("gangcheck_bench_fuzz", ROOT / "bench" / "fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


fz = _load_harness()

REQUESTS = 10_000
SEED = 17


# ---------------------------------------------------------------- the harness's checks can fail


def _review(uid="u-1", obj=None):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "object": obj if obj is not None else {"metadata": {"name": "x"}}}}


def _answer(resp: dict) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}).encode()


JSON = {"content-type": "application/json"}


def test_check_response_accepts_a_good_answer():
    step = fz.Step("/validate", fz.encode(_review()))
    fails, resp = fz.check_response(step, 200, JSON, _answer({"uid": "u-1", "allowed": True, "warnings": ["fine"]}))
    assert fails == [] and resp["allowed"] is True


@pytest.mark.parametrize("resp, expected", [
    ({"uid": "other", "allowed": True}, "contract:uid_not_echoed"),
    ({"uid": "u-1", "allowed": "yes"}, "contract:allowed_not_bool"),
    ({"uid": "u-1", "allowed": True, "warnings": ["x" * 121]}, "contract:warning_too_long"),
    ({"uid": "u-1", "allowed": True, "warnings": ["a\nb"]}, "contract:warning_control_chars"),
    ({"uid": "u-1", "allowed": True, "warnings": "one"}, "contract:warnings_type"),
    ({"uid": "u-1", "allowed": False}, "contract:deny_without_message"),
    ({"uid": "u-1", "allowed": True, "warnings": ["gangcheck skipped the feasibility check: internal error (TypeError)"]},
     "fail_open_internal_error"),
])
def test_check_response_flags_contract_breaks(resp, expected):
    step = fz.Step("/validate", fz.encode(_review()))
    fails, _ = fz.check_response(step, 200, JSON, _answer(resp))
    assert expected in fails


def test_check_response_uid_with_surrogates():
    """A lone surrogate in request.uid: an exact echo or U+FFFD in its place; anything else fails."""
    step = fz.Step("/validate", fz.encode(_review(uid="a\ud800")))
    for uid, ok in (("a\ud800", True), ("a\ufffd", True), ("a", False), ("a?", False)):
        fails, _ = fz.check_response(step, 200, JSON, _answer({"uid": uid, "allowed": True}))
        assert ("contract:uid_not_echoed" not in fails) is ok, uid


def test_check_response_patches():
    obj = {"metadata": {"name": "x", "annotations": {"a": "b"}}}
    step = fz.Step("/mutate", fz.encode(_review(obj=obj)), obj=obj)
    good = base64.b64encode(json.dumps([{"op": "add", "path": "/metadata/annotations/gangcheck.io~1verdict",
                                         "value": "Fits"}]).encode()).decode()
    ok, _ = fz.check_response(step, 200, JSON, _answer({"uid": "u-1", "allowed": True, "patchType": "JSONPatch", "patch": good}))
    assert ok == []
    bad_b64, _ = fz.check_response(step, 200, JSON, _answer({"uid": "u-1", "allowed": True, "patchType": "JSONPatch",
                                                              "patch": "%%%"}))
    assert any(f.startswith("contract:patch_invalid") for f in bad_b64)
    through_scalar = base64.b64encode(json.dumps([{"op": "add", "path": "/metadata/name/x", "value": 1}]).encode()).decode()
    bad_path, _ = fz.check_response(step, 200, JSON, _answer({"uid": "u-1", "allowed": True, "patchType": "JSONPatch",
                                                               "patch": through_scalar}))
    assert any(f.startswith("contract:patch_invalid") for f in bad_path)


def test_check_response_status_and_non_json():
    step = fz.Step("/validate", b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","x":NaN}}')
    fails, _ = fz.check_response(step, 200, JSON, _answer({"uid": "u-1", "allowed": True}))
    assert "non_json_accepted" in fails
    assert fz.check_response(step, 400, {}, b"bad")[0] == []
    assert fz.check_response(step, 500, {}, b"oops")[0] == ["http_5xx"]


def test_int32_count_evaluated_is_flagged():
    m = fz.Mutation("replace", ("request", "object", "spec", "parallelism"), "int32_overflow", 10**12)
    obj = {"metadata": {"name": "x"}, "spec": {"parallelism": 10**12}}
    step = fz.Step("/validate", fz.encode(_review(obj=obj)), muts=[m])
    evaluated = {"uid": "u-1", "allowed": False, "status": {"code": 403, "message": "never"},
                 "auditAnnotations": {"verdict": "NeverFits"}}
    assert "int32_count_evaluated" in fz.check_response(step, 200, JSON, _answer(evaluated))[0]
    refused = {"uid": "u-1", "allowed": True, "warnings": ["gangcheck skipped the feasibility check: spec.parallelism ..."]}
    assert "int32_count_evaluated" not in fz.check_response(step, 200, JSON, _answer(refused))[0]
    # A later mutation dropped the value again: what was sent holds no overflow.
    gone = fz.Step("/validate", fz.encode(_review()), muts=[m, fz.Mutation("drop", m.path, "drop")])
    assert "int32_count_evaluated" not in fz.check_response(gone, 200, JSON, _answer(evaluated))[0]


def test_lowered_variants_never_raise_demand():
    """The metamorphic relation is only as good as its variants: fewer pods means no count rises,
    smaller requests means no quantity rises, and the object stays self-consistent."""
    examples = fz.load_examples()
    for i in range(300):
        rng = random.Random(f"lower:{i}")
        _stem, obj = fz.valid_gang(rng, examples)
        before = json.dumps(obj, sort_keys=True)
        variant = fz.lowered_variant(rng, obj)
        assert json.dumps(obj, sort_keys=True) == before  # the base is not modified
        if variant is None:
            continue
        _what, v = variant
        counts = lambda o: {p: x for p, x in ((p, fz.get_at(o, p)) for p in fz.paths_of(o))  # noqa: E731
                            if isinstance(x, int) and not isinstance(x, bool) and p[-1] in fz.INT32_COUNT_KEYS}
        for p, x in counts(v).items():
            assert x <= fz.get_at(obj, p), (p, x)
        if v["apiVersion"].startswith("batch.volcano.sh"):
            assert v["spec"]["minAvailable"] <= sum(t["replicas"] for t in v["spec"]["tasks"])
        for tmpl in fz.pod_templates(v):
            for c in tmpl["spec"]["containers"]:
                r = c.get("resources") or {}
                assert r.get("requests", {}).get(fz.GPU) == r.get("limits", {}).get(fz.GPU)


def test_cases_are_deterministic():
    examples = fz.load_examples()
    a = [fz.case_steps(SEED, i, examples)[2][0].body for i in range(200)]
    b = [fz.case_steps(SEED, i, examples)[2][0].body for i in range(200)]
    assert a == b
    families = {fz.case_steps(SEED, i, examples)[0] for i in range(2000)}
    assert families == set(fz.FAMILIES)


# ---------------------------------------------------------------- the live run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz")
    lines: list[str] = []
    s = fz.fuzz(requests=REQUESTS, seed=SEED, connections=2, time_limit=1200.0, rss_ceiling_mb=512, out=out,
                classify_budget=200, log=lines.append)
    fz.print_summary(s, log=lines.append)
    print("\n".join(lines))  # shown with -s or on failure
    return s, "\n".join(lines)


def _failed(s, *prefixes: str) -> dict:
    return {g: n for g, n in s.failures.items() if g.startswith(prefixes)}


def _explain(s, groups: dict) -> str:
    out = []
    for g, n in sorted(groups.items()):
        out.append(f"{n} × {g}")
        for cause, k in s.causes.get(g, fz.Counter()).most_common():
            rep = s.reproducers.get(f"{g} {{{cause}}}", "")
            flds = s.cause_fields.get(g, {}).get(cause)
            where = f" @ {', '.join(f for f, _ in flds.most_common(8))}" if flds else ""
            out.append(f"    {k} sampled: {cause}{where}" + (f" → {rep}" if rep else ""))
    return "\n".join(out)


def test_fuzz_sent_every_request(run):
    s, text = run
    assert s.requests >= REQUESTS, text
    assert "stopped_by_time_limit" not in s.notes, text
    assert not _failed(s, "harness_error"), _explain(s, _failed(s, "harness_error")) + "\n" + str(s.notes)
    # Every family ran, and the metamorphic pairs were not vacuous: admitted gangs of every kind.
    assert set(s.by_family) == set(fz.FAMILIES), s.by_family
    assert s.metamorphic_pairs >= 1000, s.metamorphic_pairs
    kinds = {"Job", "JobSet", "PyTorchJob", "MPIJob", "VolcanoJob", "PodGroup(scheduling.volcano.sh)",
             "PodGroup(scheduling.x-k8s.io)", "LeaderWorkerSet", "RayCluster", "RayJob", "Pod"}
    assert kinds <= set(s.metamorphic_admitted_by_kind), s.metamorphic_admitted_by_kind


def test_fuzz_no_5xx_and_no_dropped_connection(run):
    s, _ = run
    bad = _failed(s, "http_5xx", "dropped_connection", "server_died", "unexpected_status")
    assert not bad, _explain(s, bad)
    assert s.dropped == 0
    assert not any(k.startswith("5") for k in s.by_status), s.by_status
    # Keep-alive connections were reused: one per client thread, none closed by the server.
    assert s.server_closed_after_response == 0
    assert s.connections_opened <= 2 + 10, s.connections_opened


def test_fuzz_every_200_meets_the_admission_contract(run):
    s, _ = run
    bad = _failed(s, "contract:", "non_json_accepted")
    assert not bad, _explain(s, bad)


def test_fuzz_no_internal_error_fail_open(run):
    """Bad input gets a per-field message or a 400, never a traceback turned into a fail-open."""
    s, _ = run
    bad = _failed(s, "fail_open_internal_error")
    assert not bad, _explain(s, bad)


def test_fuzz_int32_counts_are_not_evaluated(run):
    """A count above int32 (Kubernetes' API refuses it) is an error naming the field, not a gang of 10^12 pods."""
    s, _ = run
    bad = _failed(s, "int32_count_evaluated")
    assert not bad, _explain(s, bad)


def test_fuzz_no_metamorphic_false_denial(run):
    """Fewer pods, smaller requests or fewer constraints never turn an admitted gang into a denied one."""
    s, _ = run
    bad = _failed(s, "metamorphic_false_denial")
    assert not bad, _explain(s, bad) + "\n" + "\n".join(
        smp.detail for g in bad for smp in s.samples.get(g, [])[:1])


def test_fuzz_server_rss_bounded(run):
    s, _ = run
    peak_mb = max(s.rss_kb.get("VmHWM", 0), s.rss_kb.get("peak_VmRSS", 0)) / 1024
    print(f"server RSS: before {s.rss_kb.get('before_VmRSS', 0) / 1024:.0f} MiB, peak {peak_mb:.0f} MiB, "
          f"after {s.rss_kb.get('after_VmRSS', 0) / 1024:.0f} MiB")
    bad = _failed(s, "rss_")
    assert not bad, _explain(s, bad)
    assert 0 < peak_mb <= 512
