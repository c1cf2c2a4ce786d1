"""Objects the real-node scenarios submit: gangs in CPU terms (the node has no GPU; its capacity
is the kubelet's real CPU and memory) and the JobSet CRD they need."""

from __future__ import annotations

from node_cluster import NODE_NAME, REPO, cp

JOBSET_CRD = REPO / "tests" / "e2e" / "crds" / "jobset.yaml"


def millicores(q: str) -> int:
    """A CPU quantity (``2``, ``1500m``, ``0.5``) in millicores."""
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def node_cpu_millis(kube: cp.Kube) -> int:
    """The node's allocatable CPU, in millicores."""
    return millicores(kube.get("node", NODE_NAME)["status"]["allocatable"]["cpu"])


def ensure_jobset_crd(kube: cp.Kube, namespace: str) -> None:
    """Install the JobSet CRD (tests/e2e/crds) once and wait until JobSets are served."""
    if kube.exists("crd", "jobsets.jobset.x-k8s.io"):
        return
    kube.run("apply", "--server-side", "-f", str(JOBSET_CRD))
    kube.run("wait", "--for=condition=Established", "--timeout=60s", "crd/jobsets.jobset.x-k8s.io")
    cp.wait_for(lambda: kube.run("get", "jobsets", "-n", namespace, check=False).code == 0, 60, "JobSets served", 0.5)


def jobset(namespace: str, name: str, pods: int, cpu_millis: int, image: str = "localhost/gangcheck-pause:1") -> dict:
    """A JobSet (all or nothing) of one replicated Job of ``pods`` pods, each requesting
    ``cpu_millis`` millicores and 16 MiB."""
    pod = {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": image,
        "resources": {"requests": {"cpu": f"{cpu_millis}m", "memory": "16Mi"}}}]}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
                "parallelism": pods, "completions": pods, "template": {"spec": pod}}}}]}}
