"""Worst-case cost of ONE admission review whose counts are as large as Kubernetes allows.

Every count a workload states (replicas, parallelism, completions, minAvailable, minMember,
numOfHosts, size, min/maxReplicas, Kueue's pod-group-total-count and job-min-parallelism) is
set to the given value in each example manifest (``examples/*.yaml``, every kind gangcheck
checks), and the review runs as the webhook runs it: ``parse_review`` → ``gang_of`` (adapter)
→ ``evaluate`` → the expected-wait estimate (the background estimate of a Waits gang) →
``validate_response`` and ``mutate_response`` (the annotations); ``--diagnose`` adds
``diagnose()`` (fixes), as ``gangcheck diagnose`` runs it. The cluster is the demo cluster
(383 nodes, 1,500+ pods). Each (kind, value) runs in a fresh interpreter, so its peak RSS
(``ru_maxrss``) is its own; ``Δrss`` is the peak minus the RSS before the review (imports and
the snapshot already loaded).

    .venv/bin/python bench/worst_review.py                         # int32 max and 10^9
    .venv/bin/python bench/worst_review.py --values 1000000000,10000000 --diagnose
    .venv/bin/python bench/worst_review.py --kinds kueue-pod-group,kueue-pod-group-fill

Prints one line per case (kind, value, outcome, verdict, CPU ms of the review, Δrss MiB, peak
RSS MiB) and, last, one JSON object ``{"<kind>@<value>": {"outcome", "verdict", "cpu_ms",
"rss_delta_mib", "peak_rss_mib"}, ...}``. CPU time is process time (not wall-clock), so a
loaded machine inflates it less; it is still a figure, not a bound — the bound is structural
(``tests/test_bounds.py``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INT32_MAX = 2**31 - 1
COUNT_KEYS = ("replicas", "parallelism", "completions", "minAvailable", "minMember", "numOfHosts", "size",
              "minReplicas", "maxReplicas")
TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def inflate(obj, value: int):
    """A deep copy of ``obj`` with every count field (``COUNT_KEYS``, at any depth) set to
    ``value``, Kueue's total-count annotation to ``value`` and job-min-parallelism to
    ``value - 1`` (it must stay below parallelism)."""
    obj = copy.deepcopy(obj)

    def walk(x):
        if isinstance(x, dict):
            for k, v in list(x.items()):
                if k in COUNT_KEYS and isinstance(v, int) and not isinstance(v, bool):
                    x[k] = value
                elif k == "annotations" and isinstance(v, dict):
                    if TOTAL_COUNT in v:
                        v[TOTAL_COUNT] = str(value)
                    if MIN_PARALLELISM in v:
                        v[MIN_PARALLELISM] = str(max(1, value - 1))
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(obj)
    return obj


def examples() -> dict[str, dict]:
    """``kind label`` → manifest, one per example file (the first document of each)."""
    import yaml

    out = {}
    for p in sorted((ROOT / "examples").glob("*.yaml")):
        doc = next(iter(yaml.safe_load_all(p.read_text())))
        if not isinstance(doc, dict) or "kind" not in doc:
            continue
        out[p.stem] = doc
    return out


#: The estimator's own worst case, besides the stated counts: a Kueue pod group of pods so small
#: that every node holds its allocatable pods of them, with a total-count just below what the
#: cluster could ever hold (the band's DP then runs over the most states the nodes allow).
FILL = "kueue-pod-group-fill"


def fill_object(snap) -> tuple[dict, int]:
    """The ``FILL`` Pod and its total-count: halfway between the pods of its shape that fit
    now and those the empty cluster holds (``pods_per_node`` on free and on allocatable), so
    that it waits for running pods and the band's DP runs."""
    from webhook.engine.fit import pods_per_node, shape_of

    obj = copy.deepcopy(examples()["kueue-pod-group"])
    obj["spec"]["tolerations"] = [{"operator": "Exists"}]
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1m"}}
    shape = shape_of(snap, {"cpu": 1})
    now, empty = (int(pods_per_node(a, shape).sum()) for a in (snap.free, snap.alloc))
    total = (now + empty) // 2
    obj["metadata"]["annotations"][TOTAL_COUNT] = str(total)
    return obj, total


def review(obj: dict) -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "bench", "operation": "CREATE", "namespace": obj.get("metadata", {}).get("namespace", "default"),
                        "name": obj.get("metadata", {}).get("name", ""), "kind": {"kind": obj.get("kind")}, "object": obj}}


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(case: str, value: int, diagnose: bool) -> dict:
    """Run one review in this process; returns the figures."""
    sys.path.insert(0, str(ROOT))
    from webhook import admission as adm
    from webhook.adapters import AdapterError
    from webhook.demo import demo_snapshot
    from webhook.engine.evaluate import evaluate, expected_wait
    from webhook.policy import Policy

    snap = demo_snapshot()
    pol = Policy()
    options = pol.engine_options()
    if case == FILL:
        obj, value = fill_object(snap)
        body, case = review(obj), "kueue-pod-group"
    else:
        body = review(inflate(examples()[case], value))
    now = snap.as_of if snap.as_of is not None else time.time()
    # Warm the paths that do not depend on the counts (imports, per-snapshot memos).
    warm = adm.gang_of(adm.parse_review(review(examples()[case])))
    if warm is not None:
        evaluate(snap, warm, options)
    before = rss_mib()
    t0 = time.process_time()
    verdict, outcome = "-", ""
    try:
        req = adm.parse_review(body)
        try:
            gang = adm.gang_of(req)
        except AdapterError as exc:
            gang, outcome = None, f"bad_object: {exc}"
        if gang is not None:
            d = evaluate(snap, gang, options)
            if d.verdict == "Waits":
                w = expected_wait(snap, gang, now, options, (d.quota or {}).get("flavors"))
                if w is not None:
                    import dataclasses
                    d = dataclasses.replace(d, expected_wait=w)
            resp = adm.validate_response(req.uid, d, pol)
            adm.mutate_response(req.uid, req.obj, d, pol, now)
            verdict = d.verdict
            outcome = "allowed" if resp["response"]["allowed"] else "denied"
            if diagnose:
                from webhook.diagnose import diagnose as run_diagnose
                run_diagnose(snap, gang, now, options)
    except Exception as exc:  # a crash is a finding of this bench, not its end
        outcome = f"ERROR {type(exc).__name__}: {exc}"[:200]
    cpu_ms = (time.process_time() - t0) * 1000
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"outcome": outcome, "verdict": verdict, "value": value, "cpu_ms": round(cpu_ms, 1),
            "rss_delta_mib": round(max(0.0, peak - before), 1), "peak_rss_mib": round(peak, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--values", default=f"{INT32_MAX},1000000000",
                    help="comma-separated counts to try (default: int32 max and 10^9)")
    ap.add_argument("--kinds", default="", help="comma-separated example names (default: all), e.g. kueue-pod-group,jobset-64-nvl")
    ap.add_argument("--diagnose", action="store_true", help="also run diagnose() (fixes) on the gang")
    ap.add_argument("--limit-mib", type=int, default=4096,
                    help="address-space limit of each child (MiB): a runaway allocation fails there, not in the OOM killer")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "VALUE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(one(args.child[0], int(args.child[1]), args.diagnose)))
        return 0
    cases = [c for c in [*examples(), FILL] if not args.kinds or c in args.kinds.split(",")]
    values = [int(v) for v in args.values.split(",") if v]
    results: dict[str, dict] = {}
    print(f"{'case':<26} {'value':>12} {'verdict':<10} {'cpu ms':>9} {'Δrss MiB':>9} {'peak MiB':>9}  outcome")
    for case in cases:
        for value in (values if case != FILL else [0]):
            cmd = [sys.executable, __file__, "--child", case, str(value)] + (["--diagnose"] if args.diagnose else [])
            limit = args.limit_mib * 2**20

            def cap() -> None:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

            p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=cap, timeout=900)
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                r = {"outcome": f"CRASHED rc={p.returncode}: {p.stderr.strip().splitlines()[-1:]}", "verdict": "-",
                     "cpu_ms": None, "rss_delta_mib": None, "peak_rss_mib": None}
            value = r.get("value", value)
            results[f"{case}@{value}"] = r
            print(f"{case:<26} {value:>12} {r['verdict']:<10} {r['cpu_ms']!s:>9} {r['rss_delta_mib']!s:>9} "
                  f"{r['peak_rss_mib']!s:>9}  {r['outcome'][:90]}", flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
