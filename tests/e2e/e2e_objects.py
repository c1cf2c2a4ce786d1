"""Objects the e2e scenarios create (a scaled-down seed cluster, gangs) and verdict helpers."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

from e2e_controlplane import E2E_LABEL, GPU, Kube, create_nodes, node_obj, pod_obj

KV = "kueue.x-k8s.io/v1beta2"  # the storage version of Kueue's CRDs, which the tier installs
PREFIX = "gangcheck.io/"
SYSTEM_NS = "gangcheck-system"
POLICY_CM = "gangcheck-policy"
FAMILY = "nvidia.com/gpu.family"
PRODUCT = "nvidia.com/gpu.product"


def flavor(name: str, node_labels: dict) -> dict:
    return {"apiVersion": KV, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": node_labels}}


def cluster_queue(name: str, flavor_name: str, gpus: int, *, cpu: str = "10000", memory: str = "100000Gi") -> dict:
    """A ClusterQueue outside any cohort (so it cannot borrow). No status: Kueue's CRD makes it a
    subresource, and no Kueue runs outside the Kueue referee, so its usage reads as none."""
    return {
        "apiVersion": KV, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                "name": flavor_name, "resources": [
                    {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory},
                    {"name": GPU, "nominalQuota": str(gpus)}]}]}],
        },
    }


def local_queue(namespace: str, name: str, cq: str) -> dict:
    return {"apiVersion": KV, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}}


def _template(gpus: int, *, cpu: str = "8", memory: str = "64Gi", node_selector: dict | None = None) -> dict:
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "registry.example.com/train:1",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {GPU: str(gpus)}}}],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"spec": spec}


def batch_job(namespace: str, name: str, pods: int, gpus: int, *, queue: str | None = None,
              node_selector: dict | None = None) -> dict:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "suspend": bool(queue),
                 "template": _template(gpus, node_selector=node_selector)},
    }


def pytorch_job(namespace: str, name: str, workers: int, gpus: int, *, node_selector: dict | None = None) -> dict:
    def role(n):
        return {"replicas": n, "restartPolicy": "OnFailure", "template": _template(gpus, node_selector=node_selector)}
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {"Master": role(1), "Worker": role(workers)}},
    }


def rayjob_on_existing_cluster(namespace: str, name: str) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"entrypoint": "python train.py", "clusterSelector": {"ray.io/cluster": "shared"}}}


def renamed(obj: dict, name: str) -> dict:
    o = copy.deepcopy(obj)
    o["metadata"]["name"] = name
    return o


# ---------------------------------------------------------------- verdicts through the API server


@dataclass
class Verdict:
    code: int            # kubectl exit code
    stderr: str          # denial / warnings
    obj: dict | None     # the object as the API server would store it (annotations added by /mutate)

    @property
    def annotations(self) -> dict:
        return {k: v for k, v in ((self.obj or {}).get("metadata", {}).get("annotations") or {}).items() if k.startswith(PREFIX)}

    @property
    def verdict(self) -> str | None:
        if self.code != 0 and "denied the request" in self.stderr:
            return "Denied"
        return self.annotations.get(PREFIX + "verdict")

    @property
    def reasons(self) -> list[str]:
        return [r for r in self.annotations.get(PREFIX + "reasons", "").split(",") if r and r != "none"]

    @property
    def warnings(self) -> list[str]:
        return [line[len("Warning: "):] for line in self.stderr.splitlines() if line.startswith("Warning: ")]


def dry_run(kube: Kube, obj: dict) -> Verdict:
    """``kubectl create --dry-run=server -o json``: the full admission chain, nothing stored."""
    r = kube.create(obj, "--dry-run=server", "-o", "json", check=False)
    out = None
    if r.code == 0 and r.stdout.strip():
        doc = json.loads(r.stdout)
        out = doc["items"][0] if doc.get("kind") == "List" else doc
    return Verdict(r.code, r.stderr, out)


# ---------------------------------------------------------------- the seed cluster (scaled down)


def seed_nodes(pool: str, prefix: str) -> list:
    """7 H100 nodes (8 GPUs): 0-2 half used (a bound 4-GPU pod each), 3-5 free, 6 cordoned; 1 CPU node."""
    gpu_labels = {FAMILY: "hopper", PRODUCT: "NVIDIA-H100-80GB-HBM3"}
    nodes = []
    for i in range(7):
        cordon = i == 6
        nodes.append(node_obj(f"{prefix}-gpu-{i}", pool, gpus=8, labels=gpu_labels, unschedulable=cordon,
                              taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}] if cordon else ()))
    nodes.append(node_obj(f"{prefix}-cpu-0", pool, gpus=0, cpu="64", memory="256Gi"))
    return nodes


def create_seed(kube: Kube, pool: str, prefix: str, busy_ns: str) -> None:
    create_nodes(kube, seed_nodes(pool, prefix))
    kube.apply([pod_obj(f"{prefix}-busy-{i}", busy_ns, node=f"{prefix}-gpu-{i}", gpus=4, cpu="16", memory="128Gi")
                for i in range(3)])


def delete_pool(kube: Kube, pool: str, *namespaces: str) -> None:
    for ns in namespaces:
        kube.run("delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force", "--ignore-not-found", "--wait=false",
                 check=False)
    kube.run("delete", "nodes", "-l", f"{E2E_LABEL}={pool}", "--ignore-not-found", "--wait=false", check=False)
