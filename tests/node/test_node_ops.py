"""Scenarios 4, 5 and 6 of #12 on the real node: what operators do to a running gangcheck.

4. Edit the policy ConfigMap (``mode: enforce`` → ``warn``): the kubelet's ConfigMap volume update
   reaches each replica, whose file poller applies it; the next admission follows it on **both**
   replicas (each asked directly at its pod IP). The time from ``kubectl apply`` to the last
   replica following is the "policy reload" figure. It is the kubelet's volume refresh plus the
   server's 2 s poll: on this tier the kubelet runs with ``syncFrequency: 10s`` (node_cluster.py);
   a default kubelet (1 min) takes up to ~1-2 min.
5. Rotate the serving certificate as a user does without touching the webhook configurations:
   ``gangcheck certs --reuse-ca`` (same CA, so the caBundle stays valid), Secret ``gangcheck-tls``
   updated in place; the kubelet updates the mount, each replica serves the new certificate (its
   serial, read over TLS at the pod IP) — while the load client submits a gang every 100 ms:
   zero failed admissions.
6. ``kubectl rollout restart deployment/gangcheck``, then deleting one pod, under the same load:
   0 failed admissions and 0 calls that only failurePolicy Ignore let through (the API server's
   ``apiserver_admission_webhook_fail_open_count``, and the load client's own count of admitted
   gangs without gangcheck's verdict); while one replica is down, a policy/v1 Eviction of the
   other is refused by the PodDisruptionBudget (HTTP 429).

The load is server-side dry-run CREATEs (``?dryRun=All``; the webhooks run, nothing is stored):
a gang gangcheck must deny and one it must admit with its annotations, in turn (load_client.py).
Figures go into the tier's SUMMARY (conftest.py) and the last line,
``real-node: image N MB, ready in X s, rollout 0 failed of M, cert rotation 0 failed, policy reload X s``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from load_client import GANGCHECK_WEBHOOKS, ApiClient, LoadClient, counter_delta, total, webhook_counters
from node_cluster import cp
from node_ops import (
    LOAD_NS, NAMESPACE, NEVER, Replicas, edit_policy, evict, load_gangs, pdb_status, policy_text,
    rotate_serving_certificate, secret_serial, set_policy,
)

#: Figures for the last summary line, filled by the scenarios.
FIGURES: dict[str, object] = {}
#: The tier's summary lines (tests/node/conftest.py's SUMMARY, found by the ``ops`` fixture).
SUMMARY: list[str] = []


def _tier_summary(config) -> list[str]:
    """SUMMARY of this directory's conftest.py, found among pytest's plugins by file: ``import
    conftest`` may name another tier's conftest when several tiers run in one session."""
    own = Path(__file__).with_name("conftest.py")
    for plugin in config.pluginmanager.get_plugins():
        f = getattr(plugin, "__file__", None)
        if f and Path(f) == own and isinstance(getattr(plugin, "SUMMARY", None), list):
            return plugin.SUMMARY
    raise AssertionError(f"{own} with a SUMMARY list is not loaded")


@pytest.fixture(scope="module")
def ops(request, deployed, image):
    """(deployed, api client, replicas); the summary line once the module's scenarios ran."""
    global SUMMARY
    SUMMARY = _tier_summary(request.config)
    kube = deployed.kube
    if not kube.exists("namespace", LOAD_NS):
        kube.apply(cp.namespace_obj(LOAD_NS))
    api = ApiClient.from_kubeconfig(deployed.node.plane.kubeconfig)
    replicas = Replicas(kube, deployed.certs / "ca.crt")
    _settled(replicas)
    FIGURES["image_mb"] = image[1].stat().st_size / 1e6
    FIGURES["ready_s"] = deployed.ready_seconds
    yield deployed, api, replicas
    api.close()
    f = {k: FIGURES.get(k, "?") for k in ("rollout_failed", "rollout_calls", "cert_failed")}
    policy = f"{FIGURES['policy_s']:.1f}" if "policy_s" in FIGURES else "?"
    SUMMARY.append(
        f"real-node: image {FIGURES['image_mb']:.0f} MB, ready in {FIGURES['ready_s']:.1f} s, "
        f"rollout {f['rollout_failed']} failed of {f['rollout_calls']}, "
        f"cert rotation {f['cert_failed']} failed, policy reload {policy} s")


def _settled(replicas: Replicas):
    return cp.wait_for(lambda: replicas.settled(2), 180, "two gangcheck replicas Ready, none terminating", 0.5)


def _fail_opens(before: dict, after: dict) -> float:
    return total(counter_delta(before, after), "apiserver_admission_webhook_fail_open_count")


def _assert_clean(report, before: dict, after: dict, what: str) -> None:
    delta = counter_delta(before, after)
    fail_open = total(delta, "apiserver_admission_webhook_fail_open_count")
    call_errors = total(delta, "apiserver_admission_webhook_rejection_count", error_type="calling_webhook_error")
    assert report.calls, f"{what}: the load client sent nothing"
    assert not report.failed and fail_open == 0 and call_errors == 0, (
        f"{what}: {len(report.failed)} failed admissions of {len(report.calls)}, API server fail-open calls "
        f"{fail_open:.0f}, calling errors {call_errors:.0f}\n{report.summary()}\n{report.describe_failures(20)}\n"
        f"API server counters delta: {delta}")


# ---------------------------------------------------------------- 4. the policy ConfigMap


def test_policy_edit_reaches_both_replicas_through_the_kubelet(ops):
    deployed, api, replicas = ops
    kube = deployed.kube
    pods = _settled(replicas)
    for p in pods:
        r = replicas.review(p, NEVER)
        assert r["allowed"] is False and r["status"]["code"] == 403, (p.name, r)
    reloads = {p.name: replicas.metric(p, "gangcheck_policy_reloads_total") for p in pods}

    original = edit_policy(kube, {"mode": "warn"})
    t0 = time.monotonic()
    try:
        followed: dict[str, float] = {}

        def both_follow():
            for p in pods:
                if p.name not in followed:
                    r = replicas.review(p, NEVER)
                    if r["allowed"]:
                        # warn mode: admitted, saying what enforce would have done
                        assert any(w.startswith("would be denied (") for w in r.get("warnings") or []), r
                        followed[p.name] = time.monotonic() - t0
            return len(followed) == len(pods)

        cp.wait_for(both_follow, 240, "both replicas to follow policy mode: warn", 0.25)
        for p in pods:  # it was the mounted file's reload (the Deployment passes --policy FILE)
            assert replicas.metric(p, "gangcheck_policy_reloads_total") == reloads[p.name] + 1, p.name
        # and through the API server (whichever replica the Service picks): admitted, with the warning
        r = kube.create(NEVER, "--dry-run=server", check=False)
        assert r.code == 0 and "would be denied (" in r.stderr, r
    finally:
        set_policy(kube, original)
        t1 = time.monotonic()
        back: dict[str, float] = {}

        def both_back():
            for p in pods:
                if p.name not in back and replicas.review(p, NEVER)["allowed"] is False:
                    back[p.name] = time.monotonic() - t1
            return len(back) == len(pods)

        cp.wait_for(both_back, 240, "both replicas back to mode: enforce", 0.25)
    FIGURES["policy_s"] = max(followed.values())
    SUMMARY.append("real-node: policy edit (mode enforce → warn) followed by each replica after "
                   + ", ".join(f"{s:.1f} s" for s in sorted(followed.values()))
                   + "; back to enforce after " + ", ".join(f"{s:.1f} s" for s in sorted(back.values()))
                   + " (kubelet syncFrequency 10s)")
    assert policy_text(kube) == original


# ---------------------------------------------------------------- 5. the serving certificate


def test_certificate_rotation_serves_the_new_certificate_with_zero_failed_admissions(ops, tmp_path):
    deployed, api, replicas = ops
    kube = deployed.kube
    pods = _settled(replicas)
    old = secret_serial(kube)
    for p in pods:
        assert replicas.served_serial(p) == old, p.name
    cert_reloads = {p.name: replicas.metric(p, "gangcheck_tls_certificate_reloads_total") for p in pods}
    before = webhook_counters(api.get_text("/metrics"), GANGCHECK_WEBHOOKS)
    load = LoadClient(api, load_gangs()).start()
    served: dict[str, float] = {}
    try:
        time.sleep(2)
        new = rotate_serving_certificate(kube, deployed.certs, tmp_path / "rotated")
        t0 = load.mark("secret updated")
        assert new != old

        def both_serve_it():
            for p in pods:
                if p.name not in served and replicas.served_serial(p) == new:
                    served[p.name] = load.now() - t0
            return len(served) == len(pods)

        cp.wait_for(both_serve_it, 240, "both replicas to serve the rotated certificate", 0.25)
        time.sleep(3)  # admissions on the new certificate
    finally:
        report = load.stop()
    after = webhook_counters(api.get_text("/metrics"), GANGCHECK_WEBHOOKS)
    for p in pods:  # one reload each: the kubelet swapped tls.crt and tls.key together
        assert replicas.metric(p, "gangcheck_tls_certificate_reloads_total") == cert_reloads[p.name] + 1, p.name
    FIGURES["cert_failed"] = len(report.failed)
    SUMMARY.append("real-node: certificate rotation: each replica served the new certificate after "
                   + ", ".join(f"{s:.1f} s" for s in sorted(served.values()))
                   + f"; load {report.summary()}; API server fail-open calls {_fail_opens(before, after):.0f}")
    _assert_clean(report, before, after, "certificate rotation")


# ---------------------------------------------------------------- 6. rollout, pod deletion, PDB


def test_rollout_restart_and_pod_deletion_fail_no_admission_and_the_pdb_holds(ops):
    deployed, api, replicas = ops
    kube = deployed.kube
    first = _settled(replicas)
    before = webhook_counters(api.get_text("/metrics"), GANGCHECK_WEBHOOKS)
    load = LoadClient(api, load_gangs()).start()
    eviction = None
    try:
        time.sleep(2)
        load.mark("rollout restart")
        kube.run("rollout", "restart", "deployment/gangcheck", "-n", NAMESPACE)
        kube.run("rollout", "status", "deployment/gangcheck", "-n", NAMESPACE, "--timeout=300s", timeout=330)
        rolled = _settled(replicas)  # the rollout's old pods gone, two new ones Ready
        assert not {p.uid for p in rolled} & {p.uid for p in first}, "rollout restart replaced no pod"
        load.mark("rolled")

        victim, other = rolled
        load.mark("delete pod")
        kube.run("delete", "pod", victim.name, "-n", NAMESPACE, "--wait=false")
        # one replica down (terminating, its replacement not Ready): the PDB allows no disruption
        cp.wait_for(lambda: pdb_status(kube).get("disruptionsAllowed") == 0, 60,
                    "the PDB's status to allow no disruption", 0.1)
        eviction = evict(api, other.name)
        load.mark("eviction refused")
        _settled(replicas)  # two Ready again after the pod deletion
        load.mark("recovered")
        time.sleep(3)
    finally:
        report = load.stop()
    after = webhook_counters(api.get_text("/metrics"), GANGCHECK_WEBHOOKS)
    status, message = eviction
    assert status == 429 and "disruption budget" in message, (status, message)
    assert other.name in {p.name for p in replicas.pods()}, "the evicted replica is gone"
    FIGURES["rollout_failed"] = len(report.failed)
    FIGURES["rollout_calls"] = len(report.calls)
    m = load.marks
    SUMMARY.append(f"real-node: rollout restart {m['rolled'] - m['rollout restart']:.1f} s, pod deletion → 2 Ready "
                   f"{m['recovered'] - m['delete pod']:.1f} s; load {report.summary()}; API server fail-open calls "
                   f"{_fail_opens(before, after):.0f}; eviction while one replica was down: HTTP {status}")
    _assert_clean(report, before, after, "rollout restart + pod deletion")
