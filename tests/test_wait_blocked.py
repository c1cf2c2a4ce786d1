"""Issue #17 item 13: a gang that running work can never unblock — only a cordon, a NotReady
node, a transient taint or a broken device plugin stands in its way — is told what it waits for
(repair), in the same words by ``check``/``diagnose`` (the expected wait's text) and by the
webhook (the expected-wait annotation and the warning); never "p50 >30d, p90 >30d (end times
known for 100% of blocking pods)" on one side and "unknown" on the other."""

from __future__ import annotations

from builders import gang, node, pod, pod_set, snapshot
from webhook import admission as adm
from webhook.engine.evaluate import EngineOptions, evaluate, expected_wait
from webhook.policy import Policy

NOW = 1_000_000.0
CORDONED = ("waits for repair: 2 cordoned node(s) must be uncordoned; "
            "running work alone never frees enough (at most 2 of 4 pods)")


def _cordoned_cluster():
    # Two free nodes, two cordoned ones: the 4 × 8-GPU gang needs the cordoned two.
    return snapshot([node("a"), node("b"), node("c", unschedulable=True), node("d", unschedulable=True)])


def test_only_a_cordon_blocks_the_wait_says_repair():
    snap = _cordoned_cluster()
    g = gang(pod_set("w", 4, gpu=8), kind="Job", name="train")
    d = evaluate(snap, g, now=NOW)
    assert d.verdict == "Waits"
    w = d.expected_wait
    assert w["text"] == CORDONED
    assert (w["blocked_by"], w["repair"], w["pods_max"], w["unknown"], w["p50_s"]) == ("repair", {"cordoned": 2}, 2, True, None)
    # The webhook computes the estimate apart (expected_wait); the same answer.
    assert expected_wait(snap, g, NOW) == w


def test_the_webhook_annotation_and_warning_say_the_same():
    snap = _cordoned_cluster()
    d = evaluate(snap, gang(pod_set("w", 4, gpu=8), kind="Job", name="train"), now=NOW)
    ann = adm.annotations_for(d, Policy(), NOW)
    assert ann["gangcheck.io/expected-wait"] == CORDONED
    # The warning is there though the wait has no number to compare with the threshold.
    assert CORDONED in adm._decision_warnings(d, Policy())


def test_running_work_that_does_free_enough_keeps_the_band():
    # A busy node with a limit: the band is about running work, no blocker.
    snap = snapshot([node("a"), node("b"), node("c", unschedulable=True)],
                    [pod("x", "b", gpu=8, start_time=NOW - 600, runtime_limit_s=3600.0)])
    d = evaluate(snap, gang(pod_set("w", 2, gpu=8), kind="Job", name="train"), now=NOW)
    w = d.expected_wait
    assert "blocked_by" not in w and w["p90_s"] is not None and w["text"].startswith("expected wait p50 ")


def test_not_ready_devices_and_a_transient_taint_named():
    snap = snapshot([node("a"), node("nr", ready=False), node("dev", alloc_gpu=0),
                     node("t1", taints=["example.com/maintenance=soon:NoSchedule"]),
                     node("t2", taints=["example.com/maintenance=soon:NoSchedule"])])
    opts = EngineOptions(transient_taints=frozenset({"example.com/maintenance"}))
    d = evaluate(snap, gang(pod_set("w", 5, gpu=8), kind="Job", name="train"), opts, now=NOW)
    assert d.verdict == "Waits"
    assert d.expected_wait["text"] == (
        "waits for repair: 2 node(s) must lose the taint example.com/maintenance=soon:NoSchedule, "
        "1 node(s) must advertise their devices again (device plugin), 1 NotReady node(s) must become Ready; "
        "running work alone never frees enough (at most 1 of 5 pods)")


def test_the_gangs_own_bound_pods_never_count_as_work_that_ends():
    # 2 of 3 pods bound (with a limit, so a naive estimate would let them "end"); the third
    # needs the cordoned node. Their end never frees room for the third.
    own = dict(gang="Job/default/train", start_time=NOW - 60, runtime_limit_s=600.0)
    snap = snapshot([node("a"), node("b"), node("c", unschedulable=True)],
                    [pod("train-0", "a", gpu=8, **own), pod("train-1", "b", gpu=8, **own)])
    d = evaluate(snap, gang(pod_set("w", 3, gpu=8), kind="Job", name="train"), now=NOW)
    assert d.expected_wait["text"] == ("waits for repair: 1 cordoned node(s) must be uncordoned; "
                                       "running work alone never frees enough (at most 0 of 1 pods)")
