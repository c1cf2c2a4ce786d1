"""Autoscaling benchmark (#16): what NodePools cost a check, in one run, side by side.

On one synthetic cluster (bench/engine.py's ``build_objects``: N nodes, ~30 pods each) built
three ways — no autoscaler, 1 Karpenter NodePool, 16 NodePools (one matching the gang, the
rest ruled out by a requirement or a taint, as on a cluster with a pool per team) — times
``evaluate`` for:

* ``64x8``: the 64 × 8-GPU gang on H100 nodes (fits or waits on the existing nodes; with pools
  the review only asks whether NeedsScaleUp applies);
* ``64x8-B200``: the same gang asking for a GPU product no node has (NeverFits without
  autoscalers; with the matching NodePool it Waits with NeedsScaleUp — the review's full path).

Cold (the snapshot's per-shape memo emptied before each call) p50/p99, and each row's p99 ratio
to the no-autoscaler row of the same gang. Prints a table, then one JSON line.

    python bench/autoscale.py                 # 5,000 nodes
    python bench/autoscale.py --nodes 20000 --repeat 100
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine as eb  # noqa: E402  (bench/engine.py: the cluster generator)

GPU = "nvidia.com/gpu"


def nodepool(name: str, product: str, *, taint: bool = False, limit_gpus: int = 4096) -> dict:
    spec = {"template": {"metadata": {"labels": {eb.PRODUCT_LABEL: product}},
                         "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                                  "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                    "values": ["on-demand"]}]}},
            "limits": {GPU: str(limit_gpus)}}
    if taint:
        spec["template"]["spec"]["taints"] = [{"key": "dedicated", "value": name, "effect": "NoSchedule"}]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec,
            "status": {"resources": {GPU: "0"}}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    eb.pin_one_cpu()
    from webhook.adapters.cluster import build_snapshot
    from webhook.engine.model import GangRequest, PodSet, Toleration

    objs, _ = eb.build_objects(args.nodes, args.seed, 32, 30)
    product = eb.PRODUCTS[0][0]
    pools = {
        "none": [],
        "1 NodePool": [nodepool("b200", "NVIDIA-B200")],
        "16 NodePools": [nodepool("b200", "NVIDIA-B200")]
        + [nodepool(f"team-{i:02d}", f"NVIDIA-TEAM-{i}", taint=i % 2 == 0) for i in range(15)],
    }
    tol = (Toleration(key=GPU, operator="Exists", effect="NoSchedule"),)
    req = {GPU: 8, "cpu": 90_000, "memory": 900 * eb.GiB}
    gangs = {
        "64x8": GangRequest("PyTorchJob", "llm", "team-a", (PodSet("Worker", 64, req, node_selector={eb.PRODUCT_LABEL: product},
                                                                      tolerations=tol),)),
        "64x8-B200": GangRequest("PyTorchJob", "llm-b200", "team-a",
                                 (PodSet("Worker", 64, req, node_selector={eb.PRODUCT_LABEL: "NVIDIA-B200"}, tolerations=tol),)),
    }
    rows: dict[str, dict] = {}
    for label, extra in pools.items():
        t0 = time.perf_counter()
        snap = build_snapshot(objs + extra)
        build_s = time.perf_counter() - t0
        for gname, gang in gangs.items():
            r = eb.time_evaluate(snap, gang, args.repeat, 5, 20.0)
            rows[f"{gname} / {label}"] = {**r, "build_s": round(build_s, 2)}
    print(f"{args.nodes} nodes, cold evaluate (ms)")
    print(f"{'gang / autoscalers':<28} {'p50':>8} {'p99':>8} {'p99 ratio':>10}  verdict, reasons")
    out = {"nodes": args.nodes}
    for key, r in rows.items():
        gname = key.split(" / ")[0]
        base = rows[f"{gname} / none"]["p99_ms"]
        ratio = r["p99_ms"] / base if base else float("nan")
        print(f"{key:<28} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {ratio:>10.2f}  {r['verdict']}, {','.join(r['reasons'][:3])}")
        out[key] = {"p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "p99_ratio": round(ratio, 2), "verdict": r["verdict"]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
