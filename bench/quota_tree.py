"""Cost of one Kueue quota check on a large cohort forest (engine.quota.kueue).

Prints the mean wall time of ``evaluate_kueue`` (which builds the CohortTree each call) for a
gang in one ClusterQueue, with N ClusterQueues spread over N/20 cohorts under one root cohort.
Run: ``python bench/quota_tree.py [N ...]``. Figures only; no assertion.
"""

from __future__ import annotations

import sys
import time

sys.path.insert(0, "tests")

from builders import GPU, gang, pod_set  # noqa: E402
from webhook.engine.model import (  # noqa: E402
    ClusterQueue, Cohort, FlavorQuotas, KueueState, LocalQueue, ResourceFlavor, ResourceGroup, ResourceQuota,
)
from webhook.engine.quota import evaluate_kueue  # noqa: E402


def forest(n: int) -> KueueState:
    groups = lambda nominal, ll=None: (ResourceGroup((GPU, "cpu"), (FlavorQuotas("h100", {GPU: ResourceQuota(nominal, None, ll), "cpu": ResourceQuota(10**9)}),)),)  # noqa: E731
    cohorts = {"root": Cohort("root", resource_groups=groups(64))}
    for c in range(max(1, n // 20)):
        cohorts[f"co{c}"] = Cohort(f"co{c}", parent="root", resource_groups=groups(8, ll=4))
    cqs = {f"q{i}": ClusterQueue(f"q{i}", groups(8, ll=2), cohort=f"co{i % max(1, n // 20)}", usage={("h100", GPU): i % 9})
           for i in range(n)}
    return KueueState(flavors={"h100": ResourceFlavor("h100")}, cluster_queues=cqs,
                      local_queues={("default", "lq"): LocalQueue("default", "lq", "q0")}, cohorts=cohorts)


def main(sizes: list[int]) -> None:
    g = gang(pod_set("w", 8, gpu=8, cpu=4), kind="Job", queue="lq")
    for n in sizes:
        k = forest(n)
        reps = max(3, 2000 // n)
        t0 = time.perf_counter()
        for _ in range(reps):
            evaluate_kueue(g, k)
        dt = (time.perf_counter() - t0) / reps
        print(f"{n:6d} ClusterQueues, {len(k.cohorts):4d} cohorts: {dt * 1e3:8.2f} ms per evaluate_kueue")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10, 100, 1000, 5000])
