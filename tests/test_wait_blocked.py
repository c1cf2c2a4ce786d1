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


# ---------------------------------------------------------------- property: against brute force

from hypothesis import given, settings, strategies as st  # noqa: E402

from webhook.engine.wait import estimate_wait  # noqa: E402


@st.composite
def _cluster(draw):
    nodes, pods = [], []
    per = draw(st.sampled_from([1, 2, 4, 8]))
    for i in range(draw(st.integers(1, 6))):
        state = draw(st.sampled_from(["ok", "ok", "cordoned", "notready"]))
        nodes.append(node(f"n{i}", unschedulable=state == "cordoned", ready=state != "notready"))
        used = 0
        for j in range(draw(st.integers(0, 3))):
            who = draw(st.sampled_from(["work", "daemon", "own"]))
            g = per if who == "own" else draw(st.integers(1, 8))  # the gang's own pods have its shape
            if used + g > 8:
                break
            used += g
            kw = {"start_time": NOW - 100, "runtime_limit_s": 1000.0}
            if who == "daemon":
                kw["owner_kind"] = "DaemonSet"
            elif who == "own":
                kw["gang"] = "Job/default/train"
            pods.append(pod(f"p{i}-{j}", f"n{i}", gpu=g, **kw))
    return nodes, pods, per, draw(st.integers(1, 8))


@settings(max_examples=300, deadline=None)
@given(_cluster())
def test_blocked_exactly_when_work_that_ends_never_frees_enough(case):
    nodes, pods, per, count = case
    snap = snapshot(nodes, pods)
    g = gang(pod_set("w", count, gpu=per), kind="Job", name="train")
    est = estimate_wait(snap, g, NOW)
    # Brute force: on each schedulable Ready node, the GPUs that stay held (DaemonSet pods,
    # the gang's own pods) are never freed; the rest is.
    own = sum(1 for p in pods if p.gang == "Job/default/train")
    need = max(0, count - own)
    room = 0
    for n in nodes:
        if n.unschedulable or n.ready is False:
            continue
        held = sum(p.requests.get("nvidia.com/gpu", 0) for p in pods
                   if p.node_name == n.name and (p.owner_kind == "DaemonSet" or p.gang))
        room += (8 - held) // per
    assert (est.blocked_by is not None) == (room < need), (room, need, est)
    if est.blocked_by is not None:
        broken = {"cordoned": sum(1 for n in nodes if n.unschedulable),
                  "not_ready": sum(1 for n in nodes if n.ready is False)}
        assert dict(est.repair) == {k: v for k, v in broken.items() if v}
        assert est.blocked_by == ("repair" if any(broken.values()) else "capacity")
        assert est.pods_max == room and est.p50_s is None and est.unknown
