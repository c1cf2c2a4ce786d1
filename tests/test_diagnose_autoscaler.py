"""Issue #16: diagnose's autoscaler step — which NodePools / node groups / policy pools could take
the gang, their limits and usage, pending NodeClaims, why the others do not match (requirement by
requirement), the gang's ProvisioningRequests, the provisioning time, the notes — in the model,
the JSON document and the text; silent on a cluster without an autoscaler."""

from __future__ import annotations

import json
from dataclasses import replace

from builders import GI, gang, node, pod_set, snapshot
from webhook.diagnose import DiagnosisReport, diagnose_report, render_diagnosis, render_diagnosis_json
from webhook.diagnose.autoscaler import gang_provisioning_requests
from webhook.diagnose.report import AutoscalerStep
from webhook.engine.autoscale.model import AutoscalingPolicy, AutoscalingState, ProvisioningRequestInfo, ScaleUpSource
from webhook.engine.decision import NEVER_FITS, WAITS
from webhook.engine.evaluate import EngineOptions, evaluate
from webhook.engine.model import Finding, KueueState, KueueWorkload, NodeSelectorRequirement as Req, Taint

GPU = "nvidia.com/gpu"
ITYPE = "node.kubernetes.io/instance-type"
H100 = {GPU: 8, "cpu": 96_000, "memory": 1024 * GI, "pods": 110}
SAMPLES_S = tuple(range(200, 320, 10))  # 12 NodeClaims: p50 250 s, p90 300 s


def _h100(**kw):
    base = dict(name="gpu-h100", weight=10, limits={GPU: 512}, in_use={GPU: 24}, node_shape=H100, nodes=3, pending=2,
                requirements=(Req(ITYPE, "In", ("p5.48xlarge",)),), origin="NodePool gpu-h100")
    base.update(kw)
    return ScaleUpSource(**base)


CPU_POOL = ScaleUpSource("cpu", requirements=(Req(ITYPE, "In", ("m5.large",)),), taints=(Taint("dedicated", "cpu"),))
OWN_PR = ProvisioningRequestInfo("ml", "pytorchjob-train-abcde-prov-1", "best-effort-atomic-scale-up.autoscaling.x-k8s.io", 64,
                                 "Failed", "no capacity in zone a", "Workload/pytorchjob-train-abcde")
OTHER_PR = ProvisioningRequestInfo("ml", "job-other-f0f0f-prov-1", "check-capacity.autoscaling.x-k8s.io", 2, "Provisioned", "",
                                   "Workload/job-other-f0f0f")


def _snap(sources=(), prs=(), notes=(), samples=SAMPLES_S, **kw):
    nodes = [node(f"h{i}", labels={ITYPE: "p5.48xlarge"}) for i in range(3)]
    return snapshot(nodes, autoscaling=AutoscalingState(sources=tuple(sources), provisioning_samples_s=samples,
                                                        provisioning_requests=tuple(prs), notes=tuple(notes)), **kw)


def _train(n=64):
    return gang(pod_set("worker", n, gpu=8, cpu=90, mem_gi=900, selector={ITYPE: "p5.48xlarge"}),
                kind="PyTorchJob", name="train", namespace="ml")


def _decision(snap, g, missing, code="NeedsScaleUp", verdict=WAITS):
    """The decision as #16's review leaves it: the capacity proof turned into Waits + NeedsScaleUp."""
    d = evaluate(snap, g, EngineOptions())
    keep = [f for f in d.findings if f.severity != NEVER_FITS]
    sev = NEVER_FITS if verdict == NEVER_FITS else WAITS
    return replace(d, verdict=verdict, reasons=[code], findings=keep + [Finding(code, sev, "m", {"pods_missing": missing})])


def _report(snap, g, d, options=None):
    return diagnose_report(snap, g, 0.0, options, decision=d)


def test_no_autoscaler_no_step():
    snap, g = _snap(samples=()), _train()
    rep = _report(snap, g, evaluate(snap, g, EngineOptions()))
    assert [s.name for s in rep.steps] == ["quota", "fit", "nodes", "device-plugin", "partial-gangs"]
    assert "autoscaler" not in render_diagnosis(rep)


def test_a_nodepool_that_can_add_the_nodes():
    snap, g = _snap([_h100(), CPU_POOL], [OWN_PR, OTHER_PR], ["read 2 NodePools, 0 node groups"]), _train()
    rep = _report(snap, g, _decision(snap, g, 61))
    assert [s.name for s in rep.steps] == ["quota", "fit", "nodes", "autoscaler", "device-plugin", "partial-gangs"]
    st = rep.step("autoscaler")
    assert isinstance(st, AutoscalerStep)
    assert (st.enabled, st.sources_total, st.pods_missing, st.matching) == (True, 2, 61, ["NodePool gpu-h100"])
    h100, cpu = st.sources
    assert {k: h100[k] for k in ("name", "matches", "mismatches", "limits", "in_use", "remaining", "nodes", "pending",
                                 "pods_room", "nodes_needed")} == {
        "name": "gpu-h100", "matches": ["worker"], "mismatches": {}, "limits": {GPU: 512}, "in_use": {GPU: 24},
        "remaining": {GPU: 488}, "nodes": 3, "pending": 2, "pods_room": 61, "nodes_needed": 61}
    # requirement by requirement, in Karpenter's words
    assert cpu["matches"] == [] and cpu["mismatches"] == {"worker": [
        "key node.kubernetes.io/instance-type, node.kubernetes.io/instance-type In [p5.48xlarge] not in "
        "node.kubernetes.io/instance-type In [m5.large]",
        "taint dedicated=cpu:NoSchedule is not tolerated"]}
    assert st.provisioning == {"p50_s": 250, "p90_s": 300, "basis": "learned from 12 NodeClaims"}
    # only the gang's own ProvisioningRequest (Kueue's name for its Workload), and it failed: blocking
    assert st.provisioning_requests_total == 1 and st.provisioning_requests[0]["name"] == OWN_PR.name
    assert st.status == "blocking"
    assert st.command == "kubectl get provisioningrequests.autoscaling.x-k8s.io -n ml"
    assert st.notes == ["read 2 NodePools, 0 node groups"]
    assert st.meaning.endswith("ProvisioningRequest pytorchjob-train-abcde-prov-1 is Failed: no capacity in zone a.")
    text = render_diagnosis(rep)
    for line in (
        "4. autoscaler [BLOCKING] — Which node autoscalers could add nodes for it, and what stops them?",
        "   $ kubectl get provisioningrequests.autoscaling.x-k8s.io -n ml",
        "   found: 2 sources, 1 matching the main pod set (NodePool gpu-h100); 61 pods need new nodes; new nodes ~4m to Ready "
        "(p90 5m), learned from 12 NodeClaims",
        "   found: NodePool gpu-h100 (weight 10): takes worker; nvidia.com/gpu limit 512, 24 in use, 488 left; 3 nodes, "
        "2 pending NodeClaims; room for 61 pods, 61 new nodes needed",
        "   found:   $ kubectl get nodeclaims.karpenter.sh -l karpenter.sh/nodepool=gpu-h100   # its NodeClaims: READY False "
        "= launched, not Ready yet",
        "   found: NodePool cpu: does not take worker: key node.kubernetes.io/instance-type, node.kubernetes.io/instance-type "
        "In [p5.48xlarge] not in node.kubernetes.io/instance-type In [m5.large]; taint dedicated=cpu:NoSchedule is not "
        "tolerated; no limits; 0 nodes, 0 pending NodeClaims",
        "   found: ProvisioningRequest ml/pytorchjob-train-abcde-prov-1 (best-effort-atomic-scale-up.autoscaling.x-k8s.io, "
        "64 pods, Workload/pytorchjob-train-abcde): Failed — no capacity in zone a — cluster-autoscaler could not provision it; "
        "Kueue retries with a new request",
        "   found: note: read 2 NodePools, 0 node groups",
        "5. device-plugin [ok] — Does one node's device plugin hide GPUs?",
    ):
        assert line in text.splitlines(), line
    # a pool without nodes that does not match: no NodeClaims to look at
    assert "nodeclaims.karpenter.sh -l karpenter.sh/nodepool=cpu" not in text
    verdict = next(ln for ln in text.splitlines() if ln.startswith("Verdict: "))
    assert verdict == ("Verdict: PyTorchJob ml/train: Waits — capacity: 61 of 64 pods have no room now; 61 pods wait for new "
                       "nodes from NodePool gpu-h100, ~4m to Ready (learned from 12 NodeClaims).")


def test_the_json_document_reads_back_and_renders_the_same():
    snap, g = _snap([_h100(), CPU_POOL], [OWN_PR]), _train()
    rep = _report(snap, g, _decision(snap, g, 61))
    doc = json.loads(render_diagnosis_json([rep]))
    step = next(s for s in doc["steps"] if s["name"] == "autoscaler")
    assert list(step) == ["name", "question", "command", "findings", "meaning", "status"]
    assert list(step["findings"]) == ["enabled", "sources_total", "summary", "pods_missing", "matching", "sources", "provisioning",
                                      "provisioning_requests", "provisioning_requests_total", "notes"]
    back = DiagnosisReport.from_dict(doc)
    assert back.to_dict() == doc
    assert render_diagnosis(doc) == render_diagnosis(rep)


def test_limits_that_stop_it_block_and_the_fix_says_how_much():
    snap, g = _snap([_h100(limits={GPU: 64})]), _train()
    rep = _report(snap, g, _decision(snap, g, 61))
    st = rep.step("autoscaler")
    assert st.status == "blocking" and st.sources[0]["pods_room"] == 5
    assert st.summary == "autoscaler limits leave room for 5 of the 61 pod(s) that need new nodes"
    assert st.meaning.startswith("61 pods of pod set worker need new nodes; the matching sources can add room for only 5 now under "
                                 "their limits (NodePool gpu-h100: nvidia.com/gpu limit 64, 24 in use).")
    fix = next(f for f in rep.fixes if f["action"] == "raise-scale-limit")
    assert fix["summary"].startswith("raise NodePool gpu-h100's limit nvidia.com/gpu from 64 to 512 (24 in use)")
    assert fix["displaced_pods"] == 0
    text = render_diagnosis(rep)
    assert "[raise-scale-limit] raise NodePool gpu-h100's limit nvidia.com/gpu from 64 to 512" in text
    verdict = next(ln for ln in text.splitlines() if ln.startswith("Verdict: "))
    assert verdict.endswith("; autoscaler limits leave room for 5 of the 61 pod(s) that need new nodes.")


def test_no_pool_matches_neverfits_still_gets_the_step_and_the_widen_fix():
    snap, g = _snap([_h100(requirements=(Req(ITYPE, "In", ("p4d.24xlarge",)),), limits={GPU: 1024})]), _train()
    rep = _report(snap, g, _decision(snap, g, 61, code="NoMatchingScaleUp", verdict=NEVER_FITS))
    st = rep.step("autoscaler")
    assert st.status == "blocking" and st.matching == []
    assert st.sources[0]["mismatches"] == {"worker": ["key node.kubernetes.io/instance-type, node.kubernetes.io/instance-type In [p5.48xlarge] not in "
                                                   "node.kubernetes.io/instance-type In [p4d.24xlarge]"]}
    assert st.meaning.startswith("61 pods of pod set worker need new nodes, and no autoscaler can add a node they may use — "
                                 "NodePool gpu-h100: key node.kubernetes.io/instance-type")
    assert st.command == "kubectl get nodepools.karpenter.sh gpu-h100 -o yaml"
    assert [f["action"] for f in rep.fixes] == ["widen-nodepool"]


def test_autoscaling_off_in_the_policy_is_one_line():
    snap, g = _snap([_h100()]), _train()
    opts = EngineOptions(autoscaling=AutoscalingPolicy(enabled=False))
    rep = _report(snap, g, evaluate(snap, g, opts), opts)
    st = rep.step("autoscaler")
    assert st.to_dict()["findings"] == {"enabled": False, "sources_total": 1, "summary": ""}
    lines = [ln for ln in render_diagnosis(rep).splitlines() if ln.startswith("   found: autoscaling")]
    assert lines == ["   found: autoscaling off in the policy; 1 source ignored"]


def test_the_gangs_provisioning_requests_by_its_workload():
    g = _train()
    wl = KueueWorkload("ml", "pytorchjob-train-99999", owner="PyTorchJob/train")
    renamed = ProvisioningRequestInfo("ml", "pytorchjob-train-99999-prov-2", owner="Workload/pytorchjob-train-99999")
    stale = ProvisioningRequestInfo("ml", "pytorchjob-train-abcde-prov-1", owner="Workload/pytorchjob-train-abcde")
    elsewhere = ProvisioningRequestInfo("other", "pytorchjob-train-99999-prov-1", owner="Workload/pytorchjob-train-99999")
    with_wl = _snap(prs=[renamed, stale, elsewhere], kueue=KueueState(workloads={("ml", wl.name): wl}))
    # With the Workload known: its requests only (not an older Workload's, not another namespace's).
    assert gang_provisioning_requests(with_wl, g) == [renamed]
    # Without Workloads: Kueue's name for the gang's Workload.
    assert gang_provisioning_requests(_snap(prs=[renamed, stale, elsewhere, OTHER_PR]), g) == [renamed, stale]


def test_provisioning_requests_without_a_readable_node_group_say_it_is_unknown():
    snap, g = _snap(prs=[replace(OWN_PR, state="Accepted", message="")], notes=["cluster-autoscaler-status: format not understood"]), _train()
    st = _report(snap, g, _decision(snap, g, 61)).step("autoscaler")
    assert (st.status, st.sources_total, st.sources, st.summary) == ("info", 0, [], "")
    assert st.meaning == ("61 pods of pod set worker need new nodes; the cluster shows ProvisioningRequests but no NodePool or node "
                          "group gangcheck could read, so what the autoscaler may add is unknown (see the notes).")


def test_the_engines_assignment_is_shown_per_source():
    # A node group and a NodePool of the same name: the finding's pools are told apart by kind.
    ng = ScaleUpSource("gpu-h100", kind="NodeGroup", max_new_nodes=10, node_shape=H100, requirements=None, taints=None)
    snap, g = _snap([_h100(), ng]), _train()
    d = _decision(snap, g, 61)
    need = next(f for f in d.findings if f.code == "NeedsScaleUp")
    pools = [{"name": "gpu-h100", "kind": "NodePool", "pods": 51, "nodes_needed": 51},
             {"name": "gpu-h100", "kind": "NodeGroup", "pods": 10, "nodes_needed": 10}]
    d.findings[d.findings.index(need)] = replace(need, data={"pods_missing": 61, "pools": pools})
    st = _report(snap, g, d).step("autoscaler")
    assert [(e["label"], e["pods_assigned"], e["nodes_needed"], e["pods_room"]) for e in st.sources] == [
        ("NodePool gpu-h100", 51, 51, 61), ("node group gpu-h100", 10, 10, 10)]
    assert st.status == "info"


# ---------------------------------------------------------------- with the engine's own verdict (autoscale.review)


def test_end_to_end_needs_scale_up_and_the_limit_fix():
    g = _train()
    roomy = _snap([_h100(pending=0)], samples=())
    rep = diagnose_report(roomy, g, 1e6)
    assert rep.decision.verdict == "Waits" and "NeedsScaleUp" in rep.decision.reasons
    st = rep.step("autoscaler")
    assert (st.status, st.pods_missing, st.sources[0]["pods_assigned"], st.sources[0]["nodes_needed"]) == ("info", 61, 61, 61)
    assert st.summary == "61 pods wait for new nodes from NodePool gpu-h100, ~5m to Ready (the policy's default)"
    assert not any(f["action"] == "raise-scale-limit" for f in rep.fixes)
    tight = _snap([_h100(limits={GPU: 64}, pending=0)], samples=())
    rep = diagnose_report(tight, g, 1e6)
    assert rep.decision.verdict == NEVER_FITS and rep.decision.reasons[0] == "ExceedsScaleUpLimits"
    assert rep.step("autoscaler").status == "blocking"
    assert [f["action"] for f in rep.fixes] == ["raise-scale-limit"]
    assert rep.fixes[0]["summary"].startswith("raise NodePool gpu-h100's limit nvidia.com/gpu from 64 to 512 (24 in use)")


def test_the_verdict_line_tells_new_nodes_once():
    # As evaluate will carry it once the provisioning time is wired in (wait.provisioning).
    from webhook.engine.wait.provisioning import scale_up_wait

    g = _train()
    snap = _snap([_h100(pending=0)], samples=())
    d = evaluate(snap, g, EngineOptions(), now=1e6)
    need = next(f for f in d.findings if f.code == "NeedsScaleUp")
    d = replace(d, expected_wait=scale_up_wait(snap, EngineOptions(), d.expected_wait, need.data))
    assert d.expected_wait["blocked_by"] == "scale-up"
    verdict = _report(snap, g, d).verdict
    assert verdict == ("PyTorchJob ml/train: Waits — capacity: 61 of 64 pods have no room now; 61 pods wait for new nodes "
                       "from NodePool gpu-h100, ~5m to Ready (the policy's default).")
