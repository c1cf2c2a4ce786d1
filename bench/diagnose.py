"""Benchmark: ``gangcheck diagnose`` on a 5k-node cluster dump (target ≤ 2 s from a dump) and live.

**Dump.** Builds the same deterministic synthetic cluster as ``bench/engine.py`` (3 GPU products,
racks, ~30 pods per node, cordoned/NotReady/unhealthy nodes), writes it as a JSON dump (a
``kind: List`` as ``kubectl get -o json`` writes), then times:

* ``load_cluster(dump)`` — reading and converting the dump;
* ``diagnose(snap, gang, now)`` — the five steps plus the ranked fixes, per gang (best and
  median of ``--repeat`` runs), with the verdict and the number of fixes;
* the whole CLI path once (``gangcheck diagnose FILE --cluster DUMP -o json``) in-process.

**Live.** Starts ``tests/scripted_apiserver.py`` in its own process with ``--nodes`` nodes and
``--live-pods`` bound pods (as ``bench/cache.py`` does: 5,000 H100 nodes of 8 GPUs / 96 CPU /
1 TiB, ~2.2 KB of JSON per pod, the first 8 pods of each node holding one GPU each, so every GPU
is taken; Kueue/Volcano not installed), writes a kubeconfig pointing at it, and in a fresh
interpreter (the live cache ``gc.freeze()``s its process, and the dump case's heap would skew it)
runs ``gangcheck diagnose <64x8 H100 PyTorchJob> --cluster live -o json`` once through
``webhook.cli.main`` with ``KUBECONFIG`` set. Wrappers around the cache's internals split the
end-to-end time into: client setup, live cache sync until ready (the paged LISTs — request,
body read, msgspec decode, conversion — and the first snapshot build), ``snapshot()``,
``stop()``, manifest parse, ``diagnose``, and JSON output; plus this process's CPU time, the
server's CPU time during the run, and the garbage collector's pauses.

    .venv/bin/python bench/diagnose.py                 # 5000 nodes: dump, then live
    .venv/bin/python bench/diagnose.py --nodes 1000 --repeat 5
    .venv/bin/python bench/diagnose.py --no-live       # the dump case only
    .venv/bin/python bench/diagnose.py --live          # the live case only

The last line of stdout is one JSON object: {"dump_5000_s": <load + the slowest gang's median
diagnose (the Waits gang), seconds>, "load_plus_64x8_s": <load + diagnose of 64x8>, "load_s",
"load_cpu_s" (CPU seconds of the load: less sensitive to a busy machine than wall time),
"diagnose_s": {gang: median seconds}, "cli_s"} (dump case) and {"live_5000_s": <the CLI end to
end>, "live_sync_s": <LiveCache start() → ready>, "live_snapshot_s", "live_diagnose_s",
"live_cpu_s", "live_server_cpu_s", "live_verdict"} (live case).
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


def run_dump(args) -> dict:
    """The dump case; prints its lines and returns its keys of the final JSON object. The
    temporary dump and manifest are removed whatever happens."""
    import shutil

    tmp = tempfile.mkdtemp(prefix="gangcheck-bench-")
    try:
        return _run_dump(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_dump(args, tmp: str) -> dict:
    from webhook.diagnose import diagnose
    from webhook.dump import load_cluster

    t = time.perf_counter()
    objects, stats = bench_engine.build_objects(args.nodes, args.seed, args.rack_size, args.pods_per_node)
    gen_s = time.perf_counter() - t
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
    os.unlink(dump)  # 139 MiB: free the disk before the live case runs
    return {f"dump_{args.nodes}_s": round(load_s + d, 3), "load_plus_64x8_s": round(load_s + rows["64x8"]["median_s"], 3),
            "worst_gang": max(rows, key=lambda k: rows[k]["median_s"]), "load_s": round(load_s, 3), "load_cpu_s": round(load_cpu_s, 3),
            "diagnose_s": {k: round(v["median_s"], 4) for k, v in rows.items()}, "cli_s": round(cli_s, 3)}


# ---------------------------------------------------------------- live

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def live_manifest() -> dict:
    """64 × {8 GPU, 90 CPU, 900Gi} workers for the scripted server's nodes (every node is labelled
    ``nvidia.com/gpu.product=H100`` with 8 GPUs / 96 CPU / 1024Gi, untainted): the dump case's
    gang with the product the scripted cluster has."""
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "llm-64x8-h100", "namespace": "team-a"},
            "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 64, "template": {"spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "H100"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "90", "memory": "900Gi"}}}]}}}}}}


def _proc_cpu_s(pid: int) -> float:
    """user + system CPU seconds of process ``pid`` (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def live_child(manifest: str) -> dict:
    """Run ``gangcheck diagnose MANIFEST --cluster live -o json`` once in this (fresh) process,
    KUBECONFIG already pointing at the scripted server; returns the split timings.

    The split comes from thin wrappers around the live cache's methods (a few hundred calls in
    all: one per LIST page, not per object), installed before the CLI runs."""
    import gc
    import threading

    from webhook import cache as wc
    from webhook.cache import informer as wci  # the list pages' decoders live in the package's rooms
    from webhook.cache import pods as wcp
    from webhook import diagnose as wd
    from webhook.cli import main as cli_main

    lock = threading.Lock()
    acc: dict[str, float] = {}
    cnt: dict[str, int] = {}
    marks: dict[str, float] = {}
    info: dict = {}

    def add(key: str, value: float) -> None:
        with lock:
            acc[key] = acc.get(key, 0.0) + value
            cnt[key] = cnt.get(key, 0) + 1

    def mark(key: str) -> None:
        marks.setdefault(key, time.perf_counter())

    class TimedBody:
        """The raw urllib3 response, with the body read (``.data``) timed and counted."""

        def __init__(self, resp, name: str) -> None:
            self._resp, self._name = resp, name

        def __getattr__(self, attr):
            return getattr(self._resp, attr)

        @property
        def data(self):
            t = time.perf_counter()
            body = self._resp.data
            add(f"read.{self._name}", time.perf_counter() - t)
            add(f"bytes.{self._name}", len(body))
            return body

    Informer, Cache = wc._Informer, wc.LiveCache
    orig = {"request": Informer._request, "list_all": Informer._list_all, "decode": wci._decode_list, "replace": Cache._replace,
            "build": Cache._build, "init": Cache.__init__, "start": Cache.start, "wait_ready": Cache.wait_ready,
            "snapshot": Cache.snapshot, "stop": Cache.stop, "diagnose": wd.diagnose}

    def request(self, query, timeout):
        if any(k == "watch" for k, _ in query):
            return orig["request"](self, query, timeout)
        t = time.perf_counter()
        resp = orig["request"](self, query, timeout)
        add(f"request.{self.spec.name}", time.perf_counter() - t)
        return TimedBody(resp, self.spec.name)

    def list_all(self):
        t = time.perf_counter()
        try:
            return orig["list_all"](self)
        finally:
            add(f"list.{self.spec.name}", time.perf_counter() - t)

    def decode(kind, body):
        t = time.perf_counter()
        try:
            return orig["decode"](kind, body)
        finally:
            add(f"decode.{kind}", time.perf_counter() - t)

    def replace(self, inf, new):
        t = time.perf_counter()
        try:
            return orig["replace"](self, inf, new)
        finally:
            add(f"replace.{inf.spec.name}", time.perf_counter() - t)

    def build(self):
        t = time.perf_counter()
        try:
            return orig["build"](self)
        finally:
            add("build", time.perf_counter() - t)

    def init(self, *a, **kw):
        mark("init0")
        orig["init"](self, *a, **kw)
        mark("init1")

    def start(self):
        mark("start")
        return orig["start"](self)

    def wait_ready(self, timeout=None):
        ok = orig["wait_ready"](self, timeout)
        if ok:
            mark("ready")
        return ok

    def snapshot(self):
        mark("snap0")
        snap = orig["snapshot"](self)
        mark("snap1")
        info.setdefault("nodes", len(snap.nodes))
        info.setdefault("pods", len(snap.pods))
        return snap

    def stop(self, *a, **kw):
        info.setdefault("status", self.status())
        mark("stop0")
        orig["stop"](self, *a, **kw)
        mark("stop1")

    def diagnose(*a, **kw):
        mark("diag0")
        rep = orig["diagnose"](*a, **kw)
        mark("diag1")
        return rep

    gc_t0: list[float] = []

    def on_gc(phase, gcinfo):
        if phase == "start":
            gc_t0.append(time.perf_counter())
        elif gc_t0:
            add(f"gc.gen{gcinfo['generation']}", time.perf_counter() - gc_t0.pop())

    Informer._request, Informer._list_all, wci._decode_list, wcp._decode_list = request, list_all, decode, decode
    Cache._replace, Cache._build, Cache.__init__, Cache.start = replace, build, init, start
    Cache.wait_ready, Cache.snapshot, Cache.stop, wd.diagnose = wait_ready, snapshot, stop, diagnose
    gc.callbacks.append(on_gc)
    out = io.StringIO()
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(out):
            rc = cli_main(["diagnose", manifest, "--cluster", "live", "-o", "json"])
        total_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    finally:
        gc.callbacks.remove(on_gc)
        Informer._request, Informer._list_all, wci._decode_list, wcp._decode_list = orig["request"], orig["list_all"], orig["decode"], orig["decode"]
        Cache._replace, Cache._build, Cache.__init__, Cache.start = orig["replace"], orig["build"], orig["init"], orig["start"]
        Cache.wait_ready, Cache.snapshot, Cache.stop, wd.diagnose = orig["wait_ready"], orig["snapshot"], orig["stop"], orig["diagnose"]
    if rc != 0 or "diag1" not in marks:
        raise SystemExit(f"gangcheck diagnose --cluster live exited {rc}")
    rep = json.loads(out.getvalue())
    st = info["status"]
    m = {k: v - t0 for k, v in marks.items()}
    return {
        "total_s": total_s, "cpu_s": cpu_s, "exit": rc, "nodes": info["nodes"], "pods": info["pods"],
        "setup_s": m["start"],  # policy, parse args, LiveCache(): kubeconfig and client
        "sync_s": m["ready"] - m["start"],  # start() → wait_ready() True (10 ms polling)
        "cache_sync_s": st["sync_s"],  # the cache's own start() → first snapshot published
        "snapshot_s": m["snap1"] - m["snap0"],
        "stop_s": m["stop1"] - m["stop0"],
        "manifest_s": m["diag0"] - m["stop1"],  # read + adapt the manifest
        "diagnose_s": m["diag1"] - m["diag0"],
        "output_s": total_s - m["diag1"],  # json.dumps(indent=2) of the report, print
        "split": acc, "calls": cnt, "snapshot_builds": st["snapshot_builds"],
        "verdict": rep["decision"]["verdict"], "fixes": len(rep["fixes"]),
        "first_fix": rep["fixes"][0]["action"] if rep["fixes"] else "-",
        "deficit": rep["steps"][1]["findings"].get("deficit"),
    }


def run_live(args) -> dict:
    """The live case: the scripted server in its own process, the CLI in a fresh one; prints
    its lines and returns its keys of the final JSON object. The server is always stopped and
    the temporary kubeconfig and manifest removed."""
    import shutil
    import subprocess

    tmp = tempfile.mkdtemp(prefix="gangcheck-bench-live-")
    srv = None
    try:
        t = time.perf_counter()
        srv = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "scripted_apiserver.py"), "--nodes", str(args.nodes),
                                "--pods", str(args.live_pods)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = srv.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit(f"scripted server failed to start: {line!r}")
        port = int(line.split()[1])
        populate_s = time.perf_counter() - t
        kubeconfig = os.path.join(tmp, "kubeconfig")
        manifest = os.path.join(tmp, "gang.json")
        with open(kubeconfig, "w") as fh:  # JSON is YAML
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "bench",
                       "clusters": [{"name": "scripted", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                       "users": [{"name": "bench", "user": {}}],
                       "contexts": [{"name": "bench", "context": {"cluster": "scripted", "user": "bench"}}]}, fh)
        with open(manifest, "w") as fh:
            json.dump(live_manifest(), fh)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE_")}  # no in-cluster config
        env["KUBECONFIG"] = kubeconfig
        srv_cpu0 = _proc_cpu_s(srv.pid)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--live-child", manifest], env=env,
                              capture_output=True, text=True, timeout=1800)
        srv_cpu_s = _proc_cpu_s(srv.pid) - srv_cpu0
        if proc.returncode != 0:
            raise SystemExit(f"live run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        if srv is not None:
            try:
                srv.stdin.close()
            except OSError:
                pass
            try:
                srv.wait(timeout=30)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    sp, n = r["split"], r["calls"]
    pods_list = sp.get("list.pods", 0.0)
    pods_req, pods_read, pods_dec = sp.get("request.pods", 0.0), sp.get("read.pods", 0.0), sp.get("decode.Pod", 0.0)
    gc_s = sum(v for k, v in sp.items() if k.startswith("gc."))
    gc_n = sum(v for k, v in n.items() if k.startswith("gc."))
    print(f"live: {r['nodes']} nodes, {r['pods']} pods (scripted server, populated in {populate_s:.1f} s); "
          f"CLI diagnose FILE --cluster live -o json: {r['total_s']:.2f} s (exit {r['exit']}), "
          f"{r['cpu_s']:.2f} s CPU in the CLI process + {srv_cpu_s:.2f} s CPU in the server")
    print(f"  setup {r['setup_s'] * 1000:.0f} ms, sync until ready {r['sync_s']:.2f} s (cache's own figure {r['cache_sync_s']:.2f} s), "
          f"snapshot() {r['snapshot_s'] * 1000:.2f} ms, stop() {r['stop_s'] * 1000:.0f} ms, manifest {r['manifest_s'] * 1000:.0f} ms, "
          f"diagnose {r['diagnose_s']:.2f} s, JSON output {r['output_s'] * 1000:.0f} ms")
    print(f"  pods LIST {pods_list:.2f} s: {n.get('request.pods', 0)} pages, {sp.get('bytes.pods', 0) / 2**20:.0f} MiB; "
          f"request to headers {pods_req:.2f} s, body read {pods_read:.2f} s, generic page decode {pods_dec:.2f} s, "
          f"per-pod decode + convert + store {pods_list - pods_req - pods_read - pods_dec:.2f} s; nodes LIST {sp.get('list.nodes', 0.0):.2f} s; "
          f"per-node sums {sp.get('replace.pods', 0.0):.2f} s; snapshot build {sp.get('build', 0.0):.2f} s "
          f"({r['snapshot_builds']} build(s)); GC pauses {gc_s:.2f} s ({gc_n} collections)")
    print(f"  verdict {r['verdict']}, deficit {r['deficit']}, fixes {r['fixes']} (first: {r['first_fix']})")
    return {f"live_{args.nodes}_s": round(r["total_s"], 3), "live_sync_s": round(r["sync_s"], 3), "live_snapshot_s": round(r["snapshot_s"], 6),
            "live_diagnose_s": round(r["diagnose_s"], 3), "live_cpu_s": round(r["cpu_s"], 3), "live_server_cpu_s": round(srv_cpu_s, 3),
            "live_pods": r["pods"], "live_verdict": r["verdict"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--pods-per-node", type=int, default=30)
    p.add_argument("--rack-size", type=int, default=32)
    p.add_argument("--live-pods", type=int, default=150000, help="bound pods in the scripted server (live case)")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--live", action="store_true", help="run only the live case")
    only.add_argument("--no-live", action="store_true", help="run only the dump case")
    p.add_argument("--live-child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.live_child:
        print(json.dumps(live_child(args.live_child)))
        return 0
    result: dict = {}
    if not args.live:
        result.update(run_dump(args))
    if not args.no_live:
        result.update(run_live(args))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
