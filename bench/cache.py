"""Benchmark: the live cache fed by the scripted list/watch server (tests/scripted_apiserver.py).

For each size NODES:PODS (default 5000:150000 and 20000:500000):

1. the scripted server runs in its own process (its memory is not counted), populated with
   NODES GPU nodes and PODS bound pods (~2.2 KB of JSON each), Kueue/Volcano not installed;
2. a fresh measuring process creates a ``LiveCache`` against it and reports
   * ``sync_s``: ``start()`` → ``ready`` (paged lists of every resource, projection, the first
     snapshot published, ``gc.freeze()``);
   * ``rss_mb``: VmRSS growth of that process from just before ``start()`` to after ready
     (store + per-node sums + the published ``ClusterSnapshot``), MB = 2**20 bytes;
   * ``events_per_s``: a burst of pod events (1/3 MODIFIED rebinding existing pods, 1/3 ADDED,
     1/3 DELETED) applied by the cache. Two figures: ``http`` = over the watch stream (from the
     server releasing the burst to the cache having applied every event: chunked HTTP read +
     decode + convert + apply), ``apply`` = the apply path alone (``apply_watch_lines`` on
     pre-encoded event lines, no HTTP). The JSON carries the HTTP figure unless ``--apply-path``.

Usage: ``python bench/cache.py [--sizes 5000:150000,20000:500000] [--burst 30000]``.
The last output line is one JSON object: ``{"5000": {"rss_mb", "sync_s", "events_per_s"}, …}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def vmrss_mb() -> float:
    """Resident set size of this process (VmRSS from /proc/self/status), MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _admin(port: int, op: str, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/_admin/{op}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def child(nodes: int, pods: int, port: int, burst: int) -> dict:
    """Measure one size against the server on ``port``; returns the figures."""
    from kubernetes import client
    from scripted_apiserver import encode, make_pod

    from webhook.cache import LiveCache

    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    api = client.ApiClient(cfg)
    cache = LiveCache(api, crd_recheck_s=3600, watch_timeout_s=(3000, 3600))
    gc.collect()
    rss0 = vmrss_mb()
    t0 = time.perf_counter()
    cache.start()
    if not cache.wait_ready(3600):
        raise SystemExit("cache did not sync")
    sync_s = time.perf_counter() - t0
    time.sleep(1.0)  # let the builder settle
    rss1 = vmrss_mb()
    snap = cache.snapshot()
    assert len(snap.nodes) == nodes and len(snap.pods) == pods, (len(snap.nodes), len(snap.pods))

    # --- burst over the watch stream
    _admin(port, "prepare_burst", {"n": burst})
    e0 = cache.informer_status("pods")["events"]
    rel = _admin(port, "release_burst", {})
    t1 = time.perf_counter()
    deadline = t1 + 600
    while cache.informer_status("pods")["events"] < e0 + rel["released"]:
        if time.perf_counter() > deadline:
            raise SystemExit("burst not applied")
        time.sleep(0.001)
    http_s = time.perf_counter() - t1
    http_eps = rel["released"] / http_s
    third = burst // 3

    # --- the apply path alone, on pre-encoded lines (same mix, fresh names)
    lines = []
    for i in range(third):
        lines.append(b'{"type":"MODIFIED","object":' + encode(make_pod(f"w-{i:06d}", f"team-{i % 20:02d}", node=f"node-{(i + 2) % nodes:05d}", job=f"job-{i // 64:05d}")) + b"}")
    for i in range(third):
        lines.append(b'{"type":"ADDED","object":' + encode(make_pod(f"direct-{i:06d}", "direct", node=f"node-{i % nodes:05d}", job="direct")) + b"}")
    for i in range(burst - 2 * third):
        lines.append(b'{"type":"DELETED","object":' + encode(make_pod(f"direct-{i % max(third, 1):06d}", "direct", node=f"node-{i % nodes:05d}", job="direct")) + b"}")
    t2 = time.perf_counter()
    applied = 0
    for k in range(0, len(lines), 500):
        applied += cache.apply_watch_lines("pods", lines[k : k + 500])
    apply_s = time.perf_counter() - t2
    apply_eps = applied / apply_s

    status = cache.status()
    cache.stop()
    return {
        "nodes": nodes,
        "pods": pods,
        "rss_mb": round(rss1 - rss0, 1),
        "rss_total_mb": round(rss1, 1),
        "sync_s": round(sync_s, 2),
        "events_http_per_s": round(http_eps),
        "events_apply_per_s": round(apply_eps),
        "burst": rel["released"],
        "snapshot_builds": status["snapshot_builds"],
        "informer_pods": status["informers"]["pods"],
    }


def run_size(nodes: int, pods: int, burst: int) -> dict:
    """Start the server process for one size, measure in a fresh process, stop the server."""
    t = time.perf_counter()
    srv = subprocess.Popen([sys.executable, str(ROOT / "tests" / "scripted_apiserver.py"), "--nodes", str(nodes), "--pods", str(pods)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit(f"scripted server failed to start: {line!r}")
        port = int(line.split()[1])
        print(f"# {nodes} nodes / {pods} pods: server populated in {time.perf_counter() - t:.1f}s (port {port})", flush=True)
        cmd = [sys.executable, __file__, "--child", f"{nodes}:{pods}", "--port", str(port), "--burst", str(burst)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        srv.stdin.close()
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints per-size detail lines and the final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5000:150000,20000:500000", help="NODES:PODS,… (the JSON key is NODES)")
    ap.add_argument("--burst", type=int, default=30000, help="pod events in the burst")
    ap.add_argument("--apply-path", action="store_true", help="report the apply-path figure as events_per_s")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        n, p = (int(x) for x in args.child.split(":"))
        print(json.dumps(child(n, p, args.port, args.burst)))
        return 0
    result = {}
    for size in args.sizes.split(","):
        n, p = (int(x) for x in size.split(":"))
        r = run_size(n, p, args.burst)
        print(
            f"# {n} nodes / {p} pods: rss +{r['rss_mb']} MB (process {r['rss_total_mb']} MB), sync {r['sync_s']} s, "
            f"burst of {r['burst']} pod events: {r['events_http_per_s']}/s over the watch stream, "
            f"{r['events_apply_per_s']}/s on the apply path alone",
            flush=True,
        )
        result[str(n)] = {
            "rss_mb": r["rss_mb"],
            "sync_s": r["sync_s"],
            "events_per_s": r["events_apply_per_s"] if args.apply_path else r["events_http_per_s"],
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
