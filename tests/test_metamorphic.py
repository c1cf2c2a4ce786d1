"""Metamorphic property over every kind's adapter: less demand or fewer constraints never deny.

If a workload is admitted (verdict Fits or Waits) on a cluster, then the same workload with
*less* demand — fewer pods (replicas, parallelism, minMember, size, total-count …), smaller
requests — or with a constraint *removed* (nodeSelector, required node affinity, Kueue required
topology, host ports, pod anti-affinity; an added toleration) must not be denied (NeverFits) on
that cluster. A NeverFits is a proof that no placement exists; relaxing the object only adds
placements, so a proof for the relaxed object would be a proof for the original (issue #17,
item 3: shrinking PodGroups turned 198 of 6,525 admitted gangs into denials).

"Less demand" follows each controller's own semantics: for a Volcano Job a task's replicas are
lowered together with the job's minAvailable (the job minimum is a pod count over all tasks,
so lowering one task's replicas alone may shift the minimum onto the other tasks — that is
more demand, not less); for a Kubeflow job an explicit minAvailable is lowered with the
Worker replicas; a RayCluster worker group's minReplicas is clamped with its replicas.

Clusters are small (1–6 nodes) with products, zones, permanent and repairable taints, bound
pods, and optionally a Kueue ClusterQueue (two flavors) and a Volcano queue with a capability.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from builders import GPU, node, pod, snapshot
from webhook.adapters import adapt
from webhook.engine.evaluate import evaluate
from webhook.engine.model import (
    ClusterQueue,
    FlavorQuotas,
    KueueState,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    VolcanoQueue,
    VolcanoState,
)

PRODUCT = "nvidia.com/gpu.product"
ZONE = "topology.kubernetes.io/zone"
TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
QUEUE = "kueue.x-k8s.io/queue-name"

PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

KINDS = ["Job", "JobSet", "PyTorchJob", "MPIJob", "VolcanoJob", "LeaderWorkerSet", "RayJob", "RayCluster",
         "Pod", "CoschedulingPodGroup", "VolcanoPodGroup"]


# ----------------------------------------------------------------------------- clusters


@st.composite
def clusters(draw):
    nodes, pods = [], []
    for i in range(draw(st.integers(1, 6))):
        name = f"n{i}"
        gpu = draw(st.sampled_from([0, 4, 8, 8]))
        labels = {ZONE: draw(st.sampled_from(["z1", "z2"]))}
        product = draw(st.sampled_from([None, "A100", "H100"]))
        if product:
            labels[PRODUCT] = product
        state = draw(st.sampled_from(["ok", "ok", "ok", "cordoned", "notready"]))
        nodes.append(node(name, gpu=gpu, cpu=draw(st.sampled_from([8, 32, 96])), mem_gi=draw(st.sampled_from([64, 1024])),
                          labels=labels, taints=draw(st.sampled_from([[], [], ["dedicated=train:NoSchedule"]])),
                          unschedulable=state == "cordoned", ready=state != "notready",
                          alloc_gpu=draw(st.one_of(st.none(), st.integers(0, gpu))) if gpu else None,
                          pods=draw(st.sampled_from([110, 110, 2]))))
        for j in range(draw(st.integers(0, 2))):
            pods.append(pod(f"{name}-p{j}", name, gpu=draw(st.integers(0, gpu)), cpu=draw(st.sampled_from([0, 4]))))
    kueue = None
    if draw(st.booleans()):
        flavors = {"a100": ResourceFlavor("a100", {PRODUCT: "A100"}), "h100": ResourceFlavor("h100", {PRODUCT: "H100"})}
        fq = tuple(FlavorQuotas(f, {GPU: ResourceQuota(draw(st.sampled_from([4, 8, 16, 64]))),
                                    "cpu": ResourceQuota(10**7), "memory": ResourceQuota(2**60)}) for f in flavors)
        cq = ClusterQueue("cq", (ResourceGroup((GPU, "cpu", "memory"), fq),))
        kueue = KueueState(flavors=flavors, cluster_queues={"cq": cq}, local_queues={("default", "lq"): LocalQueue("default", "lq", "cq")})
    volcano = None
    if draw(st.booleans()):
        cap = {GPU: draw(st.sampled_from([8, 16, 64]))}
        if draw(st.booleans()):
            cap["cpu"] = draw(st.sampled_from([10_000, 100_000]))
        volcano = VolcanoState(queues={"default": VolcanoQueue("default", capability=cap)})
    return snapshot(nodes, pods, kueue=kueue, volcano=volcano)


# ----------------------------------------------------------------------------- pod templates


@st.composite
def templates(draw):
    gpu = draw(st.sampled_from([0, 1, 2, 4, 6, 8]))
    cpu = draw(st.sampled_from([1, 4, 16, 48]))
    container = {"name": "c", "resources": {"requests": {"cpu": str(cpu)}, "limits": {}}}
    if gpu:
        container["resources"]["limits"][GPU] = str(gpu)
    if draw(st.integers(0, 5)) == 0:
        container["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    spec: dict = {"containers": [container]}
    meta: dict = {"labels": {"app": "x"}, "annotations": {}}
    product = draw(st.sampled_from([None, None, "A100", "H100"]))
    if product:
        spec["nodeSelector"] = {PRODUCT: product}
    if draw(st.integers(0, 3)) == 0:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [draw(st.sampled_from(["z1", "z2"]))]}]}]}}}
    if draw(st.integers(0, 4)) == 0:
        spec.setdefault("affinity", {})["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}
    if draw(st.integers(0, 2)) == 0:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"}]
    if draw(st.integers(0, 4)) == 0:
        meta["annotations"][TOPOLOGY] = ZONE
    return {"metadata": meta, "spec": spec}


def _meta(draw, name="w"):
    labels = {}
    if draw(st.booleans()):
        labels[QUEUE] = "lq"
    return {"name": name, "namespace": "default", "labels": labels}


n_small = st.integers(1, 4)


@st.composite
def objects(draw, kind):
    """A random object of ``kind`` (see KINDS) built from ``templates``."""
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(draw),
                "spec": {"parallelism": draw(n_small), "completions": draw(st.integers(1, 6)), "template": draw(templates())}}
    if kind == "JobSet":
        rjs = [{"name": f"rj{i}", "replicas": draw(st.integers(1, 3)),
                "template": {"spec": {"parallelism": draw(st.integers(1, 2)), "template": draw(templates())}}}
               for i in range(draw(st.integers(1, 2)))]
        return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta(draw), "spec": {"replicatedJobs": rjs}}
    if kind in ("PyTorchJob", "MPIJob"):
        lead = "Master" if kind == "PyTorchJob" else "Launcher"
        key = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "mpiReplicaSpecs"
        spec: dict = {key: {lead: {"replicas": 1, "template": draw(templates())},
                            "Worker": {"replicas": draw(st.integers(0, 4)), "template": draw(templates())}}}
        if draw(st.booleans()):
            spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": draw(st.integers(1, 5))}}
        api = "kubeflow.org/v1" if kind == "PyTorchJob" else "kubeflow.org/v2beta1"
        return {"apiVersion": api, "kind": kind, "metadata": _meta(draw), "spec": spec}
    if kind == "VolcanoJob":
        tasks = []
        for i in range(draw(st.integers(1, 2))):
            t = {"name": f"t{i}", "replicas": draw(st.integers(1, 3)), "template": draw(templates())}
            if draw(st.booleans()):
                t["minAvailable"] = draw(st.integers(0, t["replicas"]))
            tasks.append(t)
        spec = {"tasks": tasks}
        if draw(st.booleans()):
            spec["minAvailable"] = draw(st.integers(1, sum(t["replicas"] for t in tasks)))
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": _meta(draw), "spec": spec}
    if kind == "LeaderWorkerSet":
        lwt = {"size": draw(n_small), "workerTemplate": draw(templates())}
        if draw(st.booleans()):
            lwt["leaderTemplate"] = draw(templates())
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": _meta(draw),
                "spec": {"replicas": draw(st.integers(1, 3)), "leaderWorkerTemplate": lwt}}
    if kind in ("RayJob", "RayCluster"):
        groups = []
        for i in range(draw(st.integers(1, 2))):
            r = draw(st.integers(0, 3))
            groups.append({"groupName": f"g{i}", "replicas": r, "minReplicas": draw(st.integers(0, r)),
                           "numOfHosts": draw(st.sampled_from([1, 1, 2])), "template": draw(templates())})
        cluster = {"headGroupSpec": {"template": draw(templates())}, "workerGroupSpecs": groups}
        if kind == "RayCluster":
            return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": _meta(draw), "spec": cluster}
        return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": _meta(draw), "spec": {"rayClusterSpec": cluster}}
    if kind == "Pod":
        t = draw(templates())
        meta = _meta(draw, "p0")
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = "grp"
        meta["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": str(draw(st.integers(1, 6)))}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]}
    if kind in ("CoschedulingPodGroup", "VolcanoPodGroup"):
        members = draw(st.integers(1, 6))
        res = {}
        gpus = draw(st.sampled_from([0, 4, 8, 16, 24, 32]))
        if gpus:
            res[GPU] = str(gpus)
        res["cpu"] = str(draw(st.sampled_from([1, 10, 33, 100])))
        spec = {"minMember": members, "minResources": res}
        if kind == "VolcanoPodGroup":
            return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": _meta(draw), "spec": spec}
        return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": _meta(draw), "spec": spec}
    raise AssertionError(kind)


# ----------------------------------------------------------------------------- relaxations


def _pod_templates(obj) -> list[dict]:
    """Every PodTemplateSpec-like dict in ``obj`` (a dict whose spec has containers)."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if isinstance(x.get("spec"), dict) and isinstance(x["spec"].get("containers"), list):
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(obj)
    return out


def _lower(value, draw, floor=0):
    return max(floor, value - draw(st.integers(1, max(1, value))))


def fewer_pods(obj, kind, draw) -> bool:
    """Lower a pod count of ``obj`` in place, the way the kind's controller reads it. False
    when there is nothing to lower."""
    spec = obj["spec"]
    if kind == "Job":
        if spec["parallelism"] <= 1:
            return False
        spec["parallelism"] = _lower(spec["parallelism"], draw, 1)
        return True
    if kind == "JobSet":
        rj = draw(st.sampled_from(spec["replicatedJobs"]))
        field = draw(st.sampled_from(["replicas", "parallelism"]))
        holder = rj if field == "replicas" else rj["template"]["spec"]
        if holder[field] <= 1:
            return False
        holder[field] = _lower(holder[field], draw, 1)
        return True
    if kind in ("PyTorchJob", "MPIJob"):
        key = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "mpiReplicaSpecs"
        w = spec[key]["Worker"]
        if w["replicas"] == 0:
            return False
        d = draw(st.integers(1, w["replicas"]))
        w["replicas"] -= d
        sched = spec.get("runPolicy", {}).get("schedulingPolicy")
        if sched:
            sched["minAvailable"] = max(1, sched["minAvailable"] - d)
        return True
    if kind == "VolcanoJob":
        t = draw(st.sampled_from(spec["tasks"]))
        if t["replicas"] <= 1:
            return False
        d = draw(st.integers(1, t["replicas"] - 1))
        t["replicas"] -= d
        if "minAvailable" in t:
            t["minAvailable"] = min(t["minAvailable"], t["replicas"])
        if "minAvailable" in spec:
            spec["minAvailable"] = max(1, spec["minAvailable"] - d)
        return True
    if kind == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        if draw(st.booleans()) and lwt["size"] > 1:
            lwt["size"] = _lower(lwt["size"], draw, 1)
            return True
        if spec["replicas"] > 1:
            spec["replicas"] = _lower(spec["replicas"], draw, 1)
            return True
        return False
    if kind in ("RayJob", "RayCluster"):
        cluster = spec if kind == "RayCluster" else spec["rayClusterSpec"]
        g = draw(st.sampled_from(cluster["workerGroupSpecs"]))
        if g["replicas"] == 0:
            return False
        g["replicas"] = _lower(g["replicas"], draw)
        g["minReplicas"] = min(g["minReplicas"], g["replicas"])
        return True
    if kind == "Pod":
        ann = obj["metadata"]["annotations"]
        n = int(ann["kueue.x-k8s.io/pod-group-total-count"])
        if n <= 1:
            return False
        ann["kueue.x-k8s.io/pod-group-total-count"] = str(_lower(n, draw, 1))
        return True
    if kind in ("CoschedulingPodGroup", "VolcanoPodGroup"):
        if spec["minMember"] <= 1:
            return False
        spec["minMember"] = _lower(spec["minMember"], draw, 1)  # minResources unchanged: the case
        return True
    raise AssertionError(kind)


def smaller_requests(obj, kind, draw) -> bool:
    if kind in ("CoschedulingPodGroup", "VolcanoPodGroup"):
        res = obj["spec"]["minResources"]
        r = draw(st.sampled_from(sorted(res)))
        res[r] = str(int(res[r]) // 2)
        return True
    t = draw(st.sampled_from(_pod_templates(obj)))
    c = t["spec"]["containers"][0]["resources"]
    if draw(st.booleans()) and GPU in c["limits"]:
        c["limits"][GPU] = str(int(c["limits"][GPU]) // 2)
    else:
        c["requests"]["cpu"] = str(int(c["requests"]["cpu"]) // 2)
    return True


def fewer_constraints(obj, kind, draw) -> bool:
    if kind in ("CoschedulingPodGroup", "VolcanoPodGroup"):
        return False
    t = draw(st.sampled_from(_pod_templates(obj)))
    spec, meta = t["spec"], t.get("metadata", {})
    options = []
    if "nodeSelector" in spec:
        options.append("nodeSelector")
    if "nodeAffinity" in spec.get("affinity", {}):
        options.append("nodeAffinity")
    if "podAntiAffinity" in spec.get("affinity", {}):
        options.append("podAntiAffinity")
    if TOPOLOGY in meta.get("annotations", {}):
        options.append("topology")
    if "ports" in spec["containers"][0]:
        options.append("ports")
    options.append("tolerate")
    what = draw(st.sampled_from(options))
    event(f"relax: {what}")
    if what == "nodeSelector":
        del spec["nodeSelector"]
    elif what in ("nodeAffinity", "podAntiAffinity"):
        del spec["affinity"][what]
    elif what == "topology":
        del meta["annotations"][TOPOLOGY]
    elif what == "ports":
        del spec["containers"][0]["ports"]
    else:
        spec.setdefault("tolerations", []).append({"operator": "Exists"})
    return True


MUTATIONS = {"fewer pods": fewer_pods, "smaller requests": smaller_requests, "fewer constraints": fewer_constraints}


@st.composite
def cases(draw, kind):
    snap = draw(clusters())
    obj = draw(objects(kind))
    relaxed = copy.deepcopy(obj)
    how = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(MUTATIONS)))
        if MUTATIONS[name](relaxed, kind, draw):
            how.append(name)
    return snap, obj, relaxed, how


def _explain(snap, obj, relaxed, d0, d1) -> str:
    lines = [f"original: {d0.verdict} {d0.reasons}", f"relaxed:  {d1.verdict} {d1.reasons}: {d1.message}"]
    for n in snap.nodes:
        lines.append(f"  {n.name}: alloc={dict(n.allocatable)} cap={dict(n.capacity)} labels={dict(n.labels)} "
                     f"taints={[str(t) for t in n.taints]} unsched={n.unschedulable} ready={n.ready}")
    for p in snap.pods:
        lines.append(f"  pod {p.name} on {p.node_name}: {dict(p.requests)}")
    lines.append(f"  kueue={bool(snap.kueue.cluster_queues)} volcano={dict(snap.volcano.queues)}")
    lines.append(f"  object:  {obj}")
    lines.append(f"  relaxed: {relaxed}")
    return "\n".join(lines)


@pytest.mark.parametrize("kind", KINDS)
@PROPS
@given(data=st.data())
def test_relaxing_an_admitted_workload_never_denies_it(kind, data):
    snap, obj, relaxed, how = data.draw(cases(kind))
    g0, g1 = adapt(obj), adapt(relaxed)
    if g0 is None or g1 is None:
        return
    d0, d1 = evaluate(snap, g0), evaluate(snap, g1)
    event(f"{d0.verdict} → {d1.verdict}")
    if d0.verdict != "NeverFits":
        assert d1.verdict != "NeverFits", f"{how} turned an admitted {kind} into a denial\n" + _explain(snap, obj, relaxed, d0, d1)


# ----------------------------------------------------------------------------- the case


def _podgroup(api: str, members: int, gpus: int) -> dict:
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": members, "minResources": {GPU: str(gpus)}}}


@pytest.mark.parametrize("api", ["scheduling.x-k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1"])
def test_lowered_min_member_is_not_a_proof_of_a_32_gpu_pod(api):
    """Issue #17 item 3: minMember 4 → 1 with minResources 32 GPUs on four 8-GPU nodes. The pods
    may well be four of 8 GPUs (minMember counts only the pods that must start together): the
    assumed 32-GPU pod is no proof."""
    snap = snapshot([node(f"n{i}", gpu=8) for i in range(4)])
    assert evaluate(snap, adapt(_podgroup(api, 4, 32))).verdict == "Fits"
    d = evaluate(snap, adapt(_podgroup(api, 1, 32)))
    assert d.verdict != "NeverFits", d.message
    assert "PodExceedsNodeCapacity" in d.reasons  # still told, as a warning
    # What the object states *is* proof: 40 GPUs in all on a cluster of 32.
    over = evaluate(snap, adapt(_podgroup(api, 1, 40)))
    assert over.verdict == "NeverFits"
    assert over.reasons[0] == "ExceedsClusterCapacity"
    f = next(f for f in over.findings if f.severity == "NeverFits")
    assert (f.data["request"], f.data["capacity"]) == (40, 32)


def test_podgroup_quota_uses_the_stated_total_not_the_rounded_up_shape():
    """minResources cpu 10 over minMember 3 is 3334m per assumed pod, 10.002 cpu in all: the
    Volcano queue's capability of exactly 10 cpu holds what the PodGroup states."""
    snap = snapshot([node("n1", gpu=0, cpu=96)], volcano=VolcanoState(queues={"default": VolcanoQueue("default", capability={"cpu": 10_000})}))
    obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "default"},
           "spec": {"minMember": 3, "minResources": {"cpu": "10"}}}
    d = evaluate(snap, adapt(obj))
    assert d.verdict != "NeverFits", d.message
    assert d.gang["total_requests"]["cpu"] == 10_000
    obj["spec"]["minResources"]["cpu"] = "10001m"
    assert evaluate(snap, adapt(obj)).reasons[0] == "ExceedsMaxQuota"
