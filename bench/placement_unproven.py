"""How often the engine still answers PlacementUnproven (issue #17 item 12), with and without the
exhaustive placement search (``webhook.engine.fit.search``).

Two populations:

* **field cases** — every ``evaluate`` call made by tests/test_cases.py (the field cases of
  ../shared/cases/handed.md), recorded by wrapping ``evaluate`` while each test runs;
* **random clusters** — seeded random clusters and gangs in three sizes: small (2–8 nodes,
  2–3 pod sets of 1–6 pods), medium (20–60 nodes, 2–4 pod sets of 1–24 pods) and large
  (200–400 nodes in 3–6 node shapes, 2–4 pod sets of up to 64 pods), partly busy, with
  selectors on a GPU product label.

For each population it prints, with the search on and with it off (``search`` replaced by one
that always gives up): decisions, PlacementUnproven count and rate, NeverFits and Fits counts,
and — search on — the steps the searches used (budget ``SEARCH_BUDGET``) and the time spent in
``evaluate`` (a figure, not a target: the machine is shared).

    python bench/placement_unproven.py                 # --seed 1 --gangs 300
    python bench/placement_unproven.py --gangs 1000 --seed 7

Deterministic: every random choice comes from ``random.Random(seed)``; steps, not time, bound
the search, so the counts do not depend on the machine.
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import webhook.engine.evaluate as E  # noqa: E402
from webhook.engine.fit import BUDGET, SearchResult  # noqa: E402
from builders import gang, node, pod, pod_set, snapshot  # noqa: E402

PRODUCT = "nvidia.com/gpu.product"


def _no_search(*_a, **_k):
    return SearchResult(BUDGET, None, 0)


class Recorder:
    def __init__(self):
        self.decisions = []
        self.steps = []
        self.seconds = 0.0

    def run(self, fn, *args, **kw):
        t = time.perf_counter()
        d = fn(*args, **kw)
        self.seconds += time.perf_counter() - t
        self.decisions.append(d)
        return d

    def summary(self) -> dict:
        n = len(self.decisions)
        unproven = sum("PlacementUnproven" in d.reasons for d in self.decisions)
        steps = sorted(self.steps)
        return {
            "decisions": n,
            "placement_unproven": unproven,
            "rate": round(unproven / n, 4) if n else 0.0,
            "never_fits": sum(d.verdict == "NeverFits" for d in self.decisions),
            "fits": sum(d.verdict == "Fits" for d in self.decisions),
            "searches": len(steps),
            "steps_max": steps[-1] if steps else 0,
            "steps_p50": steps[len(steps) // 2] if steps else 0,
            "ms_per_decision": round(1000 * self.seconds / n, 3) if n else 0.0,
        }


def _with(search_on: bool, rec: Recorder, body):
    real_eval, real_search = E.evaluate, E.search

    def counting_search(*a, **k):
        r = real_search(*a, **k)
        rec.steps.append(r.steps)
        return r

    E.search = counting_search if search_on else _no_search
    try:
        return body(lambda *a, **k: rec.run(real_eval, *a, **k))
    finally:
        E.evaluate, E.search = real_eval, real_search


def field_cases(search_on: bool) -> dict:
    import test_cases

    rec = Recorder()

    def body(ev):
        saved = test_cases.evaluate
        test_cases.evaluate = ev
        try:
            for name, fn in sorted(vars(test_cases).items()):
                if name.startswith("test_") and callable(fn) and not inspect.signature(fn).parameters:
                    try:
                        fn()
                    except AssertionError:
                        pass  # the figures count decisions, not test outcomes
        finally:
            test_cases.evaluate = saved

    _with(search_on, rec, body)
    return rec.summary()


def _cluster(rnd: random.Random, size: str):
    if size == "small":
        n, shapes = rnd.randint(2, 8), None
    elif size == "medium":
        n, shapes = rnd.randint(20, 60), None
    else:
        n = rnd.randint(200, 400)
        shapes = [(rnd.choice([4, 8]), rnd.choice([32, 96]), rnd.choice([110, 8])) for _ in range(rnd.randint(3, 6))]
    nodes, pods = [], []
    for i in range(n):
        if shapes:
            gpu, cpu, max_pods = rnd.choice(shapes)
        else:
            gpu, cpu, max_pods = rnd.choice([4, 8, 8]), rnd.choice([8, 32, 96]), rnd.choice([110, 110, 2])
        nodes.append(node(f"n{i}", gpu=gpu, cpu=cpu, pods=max_pods, labels={PRODUCT: rnd.choice(["A100", "H100"])},
                          unschedulable=rnd.random() < 0.05))
        if rnd.random() < 0.4:
            pods.append(pod(f"p{i}", f"n{i}", gpu=rnd.randint(0, gpu), cpu=rnd.choice([0, 4])))
    return snapshot(nodes, pods)


def _gang(rnd: random.Random, size: str):
    sets_n = rnd.randint(2, 3) if size == "small" else rnd.randint(2, 4)
    most = {"small": 6, "medium": 24, "large": 64}[size]
    sets = []
    for j in range(sets_n):
        sel = rnd.choice([None, None, {PRODUCT: "H100"}])
        sets.append(pod_set(f"s{j}", rnd.randint(1, most), gpu=rnd.choice([0, 1, 2, 3, 4, 6, 8]),
                            cpu=rnd.choice([0, 1, 8, 24]), selector=sel))
    return gang(*sets, name="bench")


def random_clusters(search_on: bool, size: str, gangs: int, seed: int) -> dict:
    rnd = random.Random(f"{seed}-{size}")
    cases = [(_cluster(rnd, size), None) for _ in range(max(1, gangs // 10))]
    work = [(cases[i % len(cases)][0], _gang(rnd, size)) for i in range(gangs)]
    rec = Recorder()
    _with(search_on, rec, lambda ev: [ev(s, g) for s, g in work])
    return rec.summary()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gangs", type=int, default=300, help="random gangs per size (default 300)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    out = {}
    print(f"search budget: {E.SEARCH_BUDGET} steps")
    print(f"{'population':<22} {'search':<6} {'decisions':>9} {'unproven':>8} {'rate':>7} {'never':>6} {'fits':>6} "
          f"{'searches':>8} {'steps p50':>9} {'max':>6} {'ms/dec':>7}")
    pops = [("field cases", lambda on: field_cases(on))]
    for size in ("small", "medium", "large"):
        pops.append((f"random {size}", lambda on, size=size: random_clusters(on, size, args.gangs, args.seed)))
    for name, fn in pops:
        for on in (False, True):
            s = fn(on)
            out[f"{name} search={'on' if on else 'off'}"] = s
            print(f"{name:<22} {'on' if on else 'off':<6} {s['decisions']:>9} {s['placement_unproven']:>8} {s['rate']:>7.2%} "
                  f"{s['never_fits']:>6} {s['fits']:>6} {s['searches']:>8} {s['steps_p50']:>9} {s['steps_max']:>6} "
                  f"{s['ms_per_decision']:>7}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
