"""Benchmark: ``gangcheck diagnose`` on a 5k-node cluster dump (target ≤ 2 s from a dump).

Builds the same deterministic synthetic cluster as ``bench/engine.py`` (3 GPU products, racks,
~30 pods per node, cordoned/NotReady/unhealthy nodes), writes it as a JSON dump (a ``kind: List``
as ``kubectl get -o json`` writes), then times:

* ``load_cluster(dump)`` — reading and converting the dump;
* ``diagnose(snap, gang, now)`` — the five steps plus the ranked fixes, per gang (best and
  median of ``--repeat`` runs), with the verdict and the number of fixes;
* the whole CLI path once (``gangcheck diagnose FILE --cluster DUMP -o json``) in-process.

    .venv/bin/python bench/diagnose.py                 # 5000 nodes
    .venv/bin/python bench/diagnose.py --nodes 1000 --repeat 5

The last line of stdout is one JSON object: {"dump_5000_s": <load + the slowest gang's median
diagnose (the Waits gang), seconds>, "load_plus_64x8_s": <load + diagnose of 64x8>, "load_s",
"load_cpu_s" (CPU seconds of the load: less sensitive to a busy machine than wall time),
"diagnose_s": {gang: median seconds}, "cli_s"}.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine as bench_engine  # noqa: E402  (bench/engine.py)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--pods-per-node", type=int, default=30)
    p.add_argument("--rack-size", type=int, default=32)
    args = p.parse_args(argv)

    from webhook.diagnose import diagnose
    from webhook.dump import load_cluster

    t = time.perf_counter()
    objects, stats = bench_engine.build_objects(args.nodes, args.seed, args.rack_size, args.pods_per_node)
    gen_s = time.perf_counter() - t
    tmp = tempfile.mkdtemp(prefix="gangcheck-bench-")
    dump = os.path.join(tmp, f"cluster-{args.nodes}.json")
    t = time.perf_counter()
    with open(dump, "w") as fh:
        json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, fh)
    write_s = time.perf_counter() - t
    size_mb = os.path.getsize(dump) / 2**20
    del objects

    t, c = time.perf_counter(), time.process_time()
    snap = load_cluster(dump)
    load_s, load_cpu_s = time.perf_counter() - t, time.process_time() - c
    print(f"cluster: {args.nodes} nodes, {len(snap.pods)} pods; generate {gen_s:.2f} s, write {write_s:.2f} s "
          f"({size_mb:.0f} MiB JSON), load_cluster {load_s:.2f} s ({load_cpu_s:.2f} s CPU)")

    now = time.time()
    hosts = [n.name for n in snap.nodes[:5]]
    rows = {}
    gangs = dict(bench_engine.gangs(hosts, bench_engine.PRODUCTS[0][0]))
    # A gang that Waits (feasible ever, not now), so the fixes and victim search run too.
    from dataclasses import replace

    from webhook.engine.evaluate import evaluate

    base = gangs["64x8"]
    worker = base.pod_sets[0]
    dec = evaluate(snap, base)
    ever = int(dec.nodes.get("fit_ever", 0))
    now_fit = int(dec.nodes.get("fit_now", 0))
    waits_n = max(now_fit + 16, min(ever, now_fit * 2 + 16))
    gangs[f"{waits_n}x8 (waits)"] = replace(base, name="llm-waits", pod_sets=(replace(worker, count=waits_n),))
    for name, gang in gangs.items():
        times = []
        rep = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            rep = diagnose(snap, gang, now)
            times.append(time.perf_counter() - t)
        rows[name] = {"best_s": min(times), "median_s": statistics.median(times), "verdict": rep["decision"]["verdict"],
                      "fixes": len(rep["fixes"]), "deficit": rep["steps"][1]["findings"].get("deficit")}
        top = rep["fixes"][0]["action"] if rep["fixes"] else "-"
        print(f"diagnose {name:<24} best {min(times) * 1000:8.1f} ms  median {statistics.median(times) * 1000:8.1f} ms  "
              f"verdict {rep['decision']['verdict']:<9} deficit {rows[name]['deficit']}  fixes {len(rep['fixes'])} (first: {top})")

    # The CLI path end to end (in-process: parse the dump, diagnose, print JSON).
    manifest = os.path.join(tmp, "gang.json")
    from webhook.cli import main as cli_main

    pj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "llm-64x8", "namespace": "team-a"},
          "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 64, "template": {"spec": {
              "nodeSelector": {bench_engine.PRODUCT_LABEL: bench_engine.PRODUCTS[0][0]},
              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
              "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "90", "memory": "900Gi"}}}]}}}}}}
    with open(manifest, "w") as fh:
        json.dump(pj, fh)
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = cli_main(["diagnose", manifest, "--cluster", dump, "-o", "json"])
    cli_s = time.perf_counter() - t
    print(f"CLI diagnose FILE --cluster DUMP -o json: {cli_s:.2f} s (exit {rc}; includes load_cluster)")
    d = max(v["median_s"] for v in rows.values())
    print(f"target ≤ 2 s from a dump: load {load_s:.2f} s + diagnose {d:.3f} s = {load_s + d:.2f} s")
    for f in (dump, manifest):
        os.unlink(f)
    os.rmdir(tmp)
    print(json.dumps({f"dump_{args.nodes}_s": round(load_s + d, 3), "load_plus_64x8_s": round(load_s + rows["64x8"]["median_s"], 3),
                      "worst_gang": max(rows, key=lambda k: rows[k]["median_s"]), "load_s": round(load_s, 3), "load_cpu_s": round(load_cpu_s, 3),
                      "diagnose_s": {k: round(v["median_s"], 4) for k, v in rows.items()}, "cli_s": round(cli_s, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
