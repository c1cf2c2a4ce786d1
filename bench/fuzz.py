"""Seeded fuzz of a live ``gangcheck serve --cluster demo`` over HTTPS on loopback.

    python bench/fuzz.py                         # 100,000 requests, seed 17 (make fuzz)
    python bench/fuzz.py --requests 20000 --seed 3 --connections 2
    python bench/fuzz.py --replay fuzz-out/failures/<file>.json   # re-send one reproducer

The server is a subprocess (``python -m webhook serve --cluster demo``) on a free loopback port
with certificates from ``python -m webhook certs``; its address space is capped
(``--server-as-limit-mb``, RLIMIT_AS) so an input that makes it allocate without bound fails
inside it instead of exhausting the shared machine. The client keeps ``--connections`` keep-alive
``http.client`` connections (one thread each, TLS verified against the generated CA).

Every request is built from ``(seed, case index)`` alone (``random.Random(f"{seed}:{i}")``), so a
failure is reproducible from its index. Case families (weights in ``FAMILIES``):

- ``mutate``: an example review from ``examples/admission/`` with 1–3 structural mutations at
  random positions anywhere in the document (drop a key or element, replace a value by another
  type — list, dict, string, number, null, bool — huge ints 10^400, floats, NaN / Infinity
  (encoded as the non-JSON literals), quantities such as ``"1e9999999"``/``"NaN"``, negative and
  int32-overflowing counts, lone surrogates ``\\ud800``, deep nesting, very long strings, unicode,
  numeric strings such as a pod-group-total-count of ``"1000000000"``), sent to /validate or /mutate;
- ``metamorphic``: a valid gang of a supported kind with random counts, shapes and constraints,
  sent to /validate; when admitted after a real evaluation, 1–2 variants with lowered demand
  (fewer pods, smaller requests) and/or removed constraints (nodeSelector, affinity, topology
  spread, required-topology annotations) are sent too: a denied variant is a *metamorphic false
  denial*; every few pairs the base also goes to /mutate (the patch is applied and checked);
- ``raw`` (random bytes, BOMs, invalid UTF-8, UTF-16), ``truncated`` (a valid review cut short),
  ``content_type`` (valid bodies under wrong media types, no Content-Type), ``empty``,
  ``nesting`` (a body or a field nested up to 100,000 deep), ``other`` (GET /healthz, /readyz,
  /metrics, wrong methods), ``big`` (rare: bodies just under / over the 3 MiB limit).

Checks on every response (``check_response``): status < 500; no dropped connection (a
request that ends without a response, on a connection the server was keeping alive, is a
failure); every 200 from /validate or /mutate meets the ``admission.k8s.io/v1`` contract (uid
echoed exactly, ``allowed`` a bool, warnings a list of strings ≤120 characters without control
characters, ``patchType: JSONPatch`` with a base64 RFC 6902 patch that applies to the object,
``status.message`` on a denial); a body that is not strict JSON (NaN/Infinity literals) is not
answered 200; no fail-open caused by an internal error; a count above int32 in a field the
adapters read is not evaluated as a gang; the server's RSS (VmRSS/VmHWM from
/proc/<pid>/status) stays under ``--rss-ceiling-mb``.

Failures are grouped by kind (``check`` plus the mutation that caused it); the first of each kind
is minimized (mutations dropped one at a time, then unrelated parts of the object) by re-sending,
and written to ``<out>/failures/<kind>.json`` with a curl command. The summary (stdout; its last
line is one JSON object) gives counts by status, verdict and family, failures by kind, RSS before
/ after / peak, requests/s and the server's CPU ms per request. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import base64
import copy
import http.client
import json
import math
import os
import random
import re
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "admission"

#: Case families and their weights (per 1,000 cases).
FAMILIES = {
    "mutate": 520,
    "metamorphic": 300,
    "raw": 40,
    "truncated": 40,
    "content_type": 35,
    "empty": 15,
    "nesting": 20,
    "other": 20,
    "big": 2,
}

INT32_MAX = 2**31 - 1
#: Count fields the adapters read whose Kubernetes type is int32 (API validation refuses larger).
INT32_COUNT_KEYS = {
    "parallelism", "completions", "replicas", "minMember", "minAvailable", "minReplicas", "maxReplicas",
    "numOfHosts", "size", "partitionSize", "minPartitions",
}
FAIL_OPEN_HEAD = "gangcheck skipped the feasibility check: "
GPU = "nvidia.com/gpu"
TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
PRODUCT_LABEL = "nvidia.com/gpu.product"
FAMILY_LABEL = "nvidia.com/gpu.family"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.example.com/rack"
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TOPOLOGY_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


# ============================================================== examples


def load_examples() -> dict[str, dict]:
    """``{file stem: AdmissionReview dict}`` for every examples/admission/*.json (sorted)."""
    out = {}
    for p in sorted(EXAMPLES.glob("*.json")):
        out[p.stem] = json.loads(p.read_text())
    if not out:
        raise SystemExit(f"no example reviews in {EXAMPLES}")
    return out


def review_of(obj: dict, uid: str) -> dict:
    """An AdmissionReview v1 CREATE request for ``obj`` (as examples/admission/make_reviews.py)."""
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    kind = obj.get("kind", "")
    meta = obj.get("metadata") or {}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": kind.lower() + "s"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": meta.get("name", ""), "namespace": meta.get("namespace", "default"), "operation": "CREATE",
            "userInfo": {"username": "fuzz@example.com", "groups": ["system:authenticated"]},
            "object": obj, "oldObject": None, "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def uid_for(rng: random.Random) -> str:
    return "%08x-%04x-%04x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16),
                                          rng.getrandbits(16), rng.getrandbits(48))


# ============================================================== structural mutations


def paths_of(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys / indices) into ``doc``, the root excluded, depth-first."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append(prefix + (k,))
            out.extend(paths_of(v, prefix + (k,)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append(prefix + (i,))
            out.extend(paths_of(v, prefix + (i,)))
    return out


def get_at(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


_MISSING = object()


def _value_at(doc: Any, path: tuple) -> Any:
    """``get_at``, or a sentinel where the path is no longer in ``doc``."""
    try:
        return get_at(doc, path)
    except (KeyError, IndexError, TypeError):
        return _MISSING


def nested(depth: int, leaf: Any = 1, as_list: bool = True) -> Any:
    v = leaf
    for _ in range(depth):
        v = [v] if as_list else {"a": v}
    return v


def evil_values(rng: random.Random) -> list[tuple[str, Any]]:
    """(tag, value) candidates for a replacement; the tag names the cause in failure kinds."""
    long_n = rng.choice([300, 5_000, 100_000])
    return [
        ("null", None), ("bool", True), ("bool", False), ("int", 0), ("int", -1), ("int", 1),
        ("int32_overflow", 2**31), ("int32_overflow", 10**12), ("int32_overflow", 10**26),
        ("int64_overflow", 2**63), ("huge_int", 10**400), ("negative", -(2**31) - 1),
        ("float", 1.5), ("float", -0.0), ("float", 1e308), ("float", 8.0),
        ("nan_literal", float("nan")), ("nan_literal", float("inf")), ("nan_literal", float("-inf")),
        ("str", ""), ("str", " "), ("str", "abc"), ("str", "8"), ("str", "-1"),
        ("nan_string", "NaN"), ("nan_string", "Infinity"), ("nan_string", "-Inf"), ("nan_string", "nan"),
        ("quantity_overflow", "1e9999999"), ("quantity_overflow", "9223372036854775808"),
        ("quantity_overflow", "1E400m"), ("quantity_overflow", "99999999999999999999Ei"),
        ("quantity_tiny", "1e-9999999"), ("quantity_odd", "0x10"), ("quantity_odd", "1.5.5"), ("quantity_odd", "8 GPUs"),
        ("numeric_string", "1000000000"), ("numeric_string", "10000000"), ("numeric_string", "2147483648"),
        ("numeric_string", "0"), ("numeric_string", "007"),
        ("surrogate", "\ud800"), ("surrogate", "\udfff"), ("surrogate", "a\ud800b"), ("surrogate", "\udc00\ud800"),
        ("unicode", "名前-\u00e9\U0001f4a5"), ("unicode", "\u202eevil"), ("unicode", "\ufeffbom"),
        ("control", "a\nb\tc\x00d\x7f\u2028e"),
        ("long_string", "x" * long_n), ("long_string", "\U0001f4a5" * (long_n // 4)),
        ("list", []), ("list", [1, "a", None, {}]), ("dict", {}), ("dict", {"a": {"b": [1]}}),
        ("deep_nesting", Deep(rng.choice([50, 400, 900]), rng.random() < 0.5)),
    ]


@dataclass(frozen=True)
class Deep:
    """A value nested ``depth`` deep, built when applied (never deep-copied)."""

    depth: int
    as_list: bool

    def build(self) -> Any:
        return nested(self.depth, as_list=self.as_list)


def _fresh(v: Any) -> Any:
    return v.build() if isinstance(v, Deep) else copy.deepcopy(v)


@dataclass
class Mutation:
    op: str           # drop | replace | insert | numeric
    path: tuple
    tag: str
    value: Any = None

    def describe(self) -> str:
        p = "/".join(str(k) for k in self.path) or "<root>"
        if self.op == "drop":
            return f"drop {p}"
        v = repr(self.value)
        return f"{self.op} {p} = {v[:60] + '...' if len(v) > 60 else v}"


_PATHS: dict[str, tuple[list, list, list, list]] = {}


def _paths(stem: str, review: dict) -> tuple[list, list, list, list]:
    """(all paths, paths under request.object, count-field paths, quantity paths) of an example."""
    if stem not in _PATHS:
        paths = paths_of(review)
        obj = [p for p in paths if len(p) > 2 and p[0] == "request" and p[1] == "object"]
        counts = [p for p in obj if p[-1] in INT32_COUNT_KEYS or p[-1] == "kueue.x-k8s.io/pod-group-total-count"]
        qty = [p for p in obj if len(p) > 1 and p[-2] in ("requests", "limits", "minResources")]
        _PATHS[stem] = (paths, obj, counts, qty)
    return _PATHS[stem]


COUNT_VALUES = [("int32_overflow", 2**31), ("int32_overflow", 10**12), ("int32_overflow", 10**26),
                ("huge_int", 10**400), ("negative", -1), ("float", 1e9), ("float", 2.5),
                ("numeric_string", "1000000000"), ("numeric_string", "100000000"), ("numeric_string", "10000000"),
                ("numeric_string", "2147483648"), ("numeric_string", "-3")]
QUANTITY_VALUES = [("nan_string", "NaN"), ("nan_string", "Infinity"), ("nan_string", "-Inf"),
                   ("quantity_overflow", "1e9999999"), ("quantity_overflow", "9223372036854775808"),
                   ("quantity_overflow", "99999999999999999999Ei"), ("quantity_tiny", "1e-9999999"),
                   ("negative", "-1"), ("quantity_odd", "1.5.5"), ("int", 8), ("float", 0.5), ("huge_int", 10**400)]


def pick_mutations(rng: random.Random, review: dict, n: int, stem: str = "") -> list[Mutation]:
    """``n`` random mutations at random paths of ``review`` (paths of the original document),
    sometimes plus one aimed at a count field or a quantity (the classes the 205k fuzz found)."""
    paths, obj_paths, count_paths, qty_paths = _paths(stem, review) if stem else (lambda p: (
        p, [q for q in p if len(q) > 2 and q[:2] == ("request", "object")], [], []))(paths_of(review))
    # Paths under request.object carry the most logic: weight them up, but keep every position.
    muts = []
    if count_paths and rng.random() < 0.08:
        tag, v = rng.choice(COUNT_VALUES)
        muts.append(Mutation("replace", rng.choice(count_paths), tag, v))
    if qty_paths and rng.random() < 0.08:
        tag, v = rng.choice(QUANTITY_VALUES)
        muts.append(Mutation("replace", rng.choice(qty_paths), tag, v))
    for _ in range(n):
        path = rng.choice(obj_paths if obj_paths and rng.random() < 0.7 else paths)
        r = rng.random()
        if r < 0.15:
            muts.append(Mutation("drop", path, "drop"))
        elif r < 0.25:
            tag, v = rng.choice(evil_values(rng))
            muts.append(Mutation("insert", path, tag, v))
        else:
            tag, v = rng.choice(evil_values(rng))
            muts.append(Mutation("replace", path, tag, v))
    # A few targeted ones: the classes the 205k fuzz found (counts in strings, names, uid).
    if rng.random() < 0.15:
        req = review.get("request") or {}
        targets = [("request", "uid"), ("request", "name"), ("request", "object", "metadata", "name")]
        labels = ((req.get("object") or {}).get("metadata") or {}).get("labels") or {}
        targets += [("request", "object", "metadata", "labels", k) for k in labels]
        path = rng.choice(targets)
        muts.append(Mutation("replace", path, "surrogate", rng.choice(["\ud800", "x\udfff", "\ud800\ud800"])))
    return muts


def apply_mutations(review: dict, muts: list[Mutation]) -> dict:
    """A deep copy of ``review`` with ``muts`` applied in order (paths that no longer exist skip)."""
    doc = fast_copy(review)
    for m in muts:
        try:
            if m.op == "insert":
                parent = get_at(doc, m.path)
                if isinstance(parent, dict):
                    parent[f"fuzz-{len(parent)}"] = _fresh(m.value)
                elif isinstance(parent, list):
                    parent.append(_fresh(m.value))
                else:  # a scalar: replace it instead
                    holder = get_at(doc, m.path[:-1])
                    holder[m.path[-1]] = _fresh(m.value)
                continue
            holder = get_at(doc, m.path[:-1])
            key = m.path[-1]
            if m.op == "drop":
                del holder[key]
            else:
                holder[key] = _fresh(m.value)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def fast_copy(doc: Any) -> Any:
    """A deep copy of a JSON document (a JSON round trip: faster than copy.deepcopy)."""
    return json.loads(json.dumps(doc))


def encode(doc: Any) -> bytes:
    """JSON text as a client would send it: ASCII with \\u escapes (so lone surrogates go through),
    NaN/Infinity as the literals Python writes (not JSON: the server must refuse them)."""
    return json.dumps(doc, ensure_ascii=True, separators=(",", ":")).encode("ascii")


# ============================================================== valid gangs (metamorphic)


def pod_templates(obj: dict) -> list[dict]:
    """Every PodTemplateSpec-like dict ({metadata?, spec: {containers}}) in ``obj``; a Pod is its own."""
    if obj.get("kind") == "Pod":
        return [obj]
    out = []

    def walk(o):
        if isinstance(o, dict):
            spec = o.get("spec")
            if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
                out.append(o)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(obj.get("spec"))
    return out


COUNTS = [1, 1, 2, 2, 3, 4, 4, 6, 8, 8, 12, 16, 16, 24, 32, 40, 48, 64, 80, 100, 128, 200, 400]
GPUS = [0, 1, 2, 4, 4, 8, 8, 8, 16]
CPUS = ["500m", "1", "2", "8", "16", "32", "64", "96", "128", "250"]
MEMS = ["512Mi", "1Gi", "8Gi", "64Gi", "256Gi", "512Gi", "1000Gi", "1500Gi", "4000Gi"]


def set_container_shape(rng: random.Random, tmpl: dict) -> None:
    spec = tmpl["spec"]
    gpu = rng.choice(GPUS)
    cpu, mem = rng.choice(CPUS), rng.choice(MEMS)
    for c in spec.get("containers") or []:
        req = {"cpu": cpu, "memory": mem}
        if gpu:
            req[GPU] = str(gpu)
        c["resources"] = {"requests": dict(req), "limits": dict(req)}
        cpu, mem = rng.choice(["100m", "250m", "1"]), rng.choice(["128Mi", "1Gi"])  # sidecars: small
        gpu = 0
    if rng.random() < 0.9:
        spec["tolerations"] = [dict(TOLERATION)]
    else:
        spec.pop("tolerations", None)


def add_constraints(rng: random.Random, tmpl: dict) -> None:
    spec = tmpl["spec"]
    r = rng.random()
    if r < 0.25:
        spec["nodeSelector"] = {PRODUCT_LABEL: rng.choice(["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL"])}
    elif r < 0.35:
        spec["nodeSelector"] = {FAMILY_LABEL: "hopper", ZONE_LABEL: rng.choice(["zone-a", "zone-b"])}
    elif r < 0.4:
        spec["nodeSelector"] = {"example.com/no-such-label": "x"}
    r = rng.random()
    if r < 0.15:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": PRODUCT_LABEL, "operator": "In", "values": ["NVIDIA-H100-NVL"]}]}]}}}
    elif r < 0.25:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "NotIn",
                                   "values": [f"h100-{rng.randrange(364):03d}" for _ in range(rng.randint(1, 20))]}]}]}}}
    elif r < 0.3:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "fuzz"}}, "topologyKey": HOSTNAME}]}}
    if rng.random() < 0.1:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": "fuzz"}}}]
    if rng.random() < 0.2:
        meta = tmpl.setdefault("metadata", {})
        ann = meta.setdefault("annotations", {})
        key = TOPOLOGY_REQUIRED if rng.random() < 0.7 else TOPOLOGY_PREFERRED
        ann[key] = rng.choice([ZONE_LABEL, RACK_LABEL, HOSTNAME])


def _workers(obj: dict) -> list[dict]:
    spec = obj["spec"]
    if obj["kind"] == "RayJob":
        spec = spec["rayClusterSpec"]
    return spec.get("workerGroupSpecs") or []


def set_counts(rng: random.Random, obj: dict) -> None:
    """Random, self-consistent counts for the object's kind (every kind in examples/admission)."""
    kind, api = obj["kind"], obj["apiVersion"]
    spec = obj["spec"]
    n = lambda: rng.choice(COUNTS)  # noqa: E731
    if api == "batch/v1":
        p = n()
        spec["parallelism"], spec["completions"] = p, rng.choice([p, p, p * 2])
    elif kind == "JobSet":
        for rj in spec["replicatedJobs"]:
            rj["replicas"] = rng.choice([1, 1, 2, 4, 8])
            p = rng.choice([1, 2, 4, 8])
            rj["template"]["spec"]["parallelism"] = rj["template"]["spec"]["completions"] = p
    elif kind == "PyTorchJob":
        spec["pytorchReplicaSpecs"]["Worker"]["replicas"] = n()
    elif kind == "MPIJob":
        spec["mpiReplicaSpecs"]["Worker"]["replicas"] = n()
    elif api.startswith("batch.volcano.sh"):
        for t in spec["tasks"]:
            t["replicas"] = rng.choice([1, 1, 2, 4, 8, 16, 31, 64])
        spec["minAvailable"] = rng.randint(1, sum(t["replicas"] for t in spec["tasks"]))
    elif kind == "PodGroup":
        m = n()
        spec["minMember"] = m
        per = rng.choice(GPUS)
        res = {"cpu": str(rng.choice([1, 8, 32, 96]) * m), "memory": f"{rng.choice([8, 64, 500, 1000]) * m}Gi"}
        if per:
            res[GPU] = str(per * m)
        if rng.random() < 0.8:
            spec["minResources"] = res
        else:
            spec.pop("minResources", None)
    elif kind == "LeaderWorkerSet":
        spec["replicas"] = rng.choice([1, 1, 2, 4, 8, 16])
        spec["leaderWorkerTemplate"]["size"] = rng.choice([1, 2, 4, 8])
    elif kind in ("RayCluster", "RayJob"):
        for g in _workers(obj):
            r = n()
            g["replicas"] = g["minReplicas"] = g["maxReplicas"] = r
    elif kind == "Pod":
        obj["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/pod-group-total-count"] = str(n())


def lower_counts(rng: random.Random, obj: dict) -> bool:
    """Fewer pods, the object kept valid (minimums ≤ totals). Returns False when nothing could be lowered."""
    kind, api = obj["kind"], obj["apiVersion"]
    spec = obj["spec"]
    low = lambda v: rng.randint(1, v) if v > 1 else v  # noqa: E731
    before = json.dumps(obj, sort_keys=True)
    if api == "batch/v1":
        spec["parallelism"] = low(spec["parallelism"])
        spec["completions"] = max(1, min(spec["completions"], rng.randint(spec["parallelism"], spec["completions"])))
    elif kind == "JobSet":
        for rj in spec["replicatedJobs"]:
            rj["replicas"] = low(rj["replicas"])
            js = rj["template"]["spec"]
            js["parallelism"] = low(js["parallelism"])
            js["completions"] = js["parallelism"]
    elif kind == "PyTorchJob":
        w = spec["pytorchReplicaSpecs"]["Worker"]
        w["replicas"] = low(w["replicas"])
    elif kind == "MPIJob":
        w = spec["mpiReplicaSpecs"]["Worker"]
        w["replicas"] = low(w["replicas"])
    elif api.startswith("batch.volcano.sh"):
        # minAvailable pods from any tasks: fewer tasks' replicas would shrink the supply, not the
        # demand, unless every pod is needed. So: all needed → fewer replicas (and the new total);
        # otherwise a lower minAvailable.
        total = sum(t["replicas"] for t in spec["tasks"])
        if spec["minAvailable"] >= total:
            for t in spec["tasks"]:
                t["replicas"] = low(t["replicas"])
            spec["minAvailable"] = sum(t["replicas"] for t in spec["tasks"])
        else:
            spec["minAvailable"] = low(spec["minAvailable"])
    elif kind == "PodGroup":
        # Fewer members; minResources (a total) unchanged or lowered: demand never rises.
        spec["minMember"] = low(spec["minMember"])
    elif kind == "LeaderWorkerSet":
        spec["replicas"] = low(spec["replicas"])
        spec["leaderWorkerTemplate"]["size"] = low(spec["leaderWorkerTemplate"]["size"])
    elif kind in ("RayCluster", "RayJob"):
        for g in _workers(obj):
            g["replicas"] = low(g["replicas"])
            g["minReplicas"] = min(g["minReplicas"], g["replicas"])
    elif kind == "Pod":
        ann = obj["metadata"]["annotations"]
        ann["kueue.x-k8s.io/pod-group-total-count"] = str(low(int(ann["kueue.x-k8s.io/pod-group-total-count"])))
    return json.dumps(obj, sort_keys=True) != before


_QTY = re.compile(r"^(\d+)(m|Mi|Gi)?$")


def smaller(rng: random.Random, value: str, resource: str) -> str | None:
    """A smaller quantity than ``value`` (None: drop the resource)."""
    m = _QTY.match(str(value))
    if not m:
        return value
    num, unit = int(m.group(1)), m.group(2) or ""
    if resource == GPU:
        return None if num <= 1 and rng.random() < 0.5 else str(rng.randint(0, num))
    return f"{max(1, rng.randint(num // 4, num))}{unit}" if num > 1 else value


def lower_requests(rng: random.Random, obj: dict) -> bool:
    changed = False
    for tmpl in pod_templates(obj):
        if rng.random() < 0.5:
            continue
        for c in tmpl["spec"].get("containers") or []:
            res = c.get("resources") or {}
            req, lim = res.get("requests") or {}, res.get("limits") or {}
            for r in list(req):
                v = smaller(rng, req[r], r)
                if v != req[r]:
                    changed = True
                if v is None:
                    req.pop(r, None)
                    lim.pop(r, None)
                else:
                    req[r] = v
                    if r in lim:
                        lim[r] = v
    if obj.get("kind") == "PodGroup" and isinstance(obj["spec"].get("minResources"), dict):
        mr = obj["spec"]["minResources"]
        for r in list(mr):
            v = smaller(rng, mr[r], r)
            changed |= v != mr[r]
            if v is None:
                mr.pop(r)
            else:
                mr[r] = v
    return changed


def remove_constraints(rng: random.Random, obj: dict) -> bool:
    changed = False
    for tmpl in pod_templates(obj):
        spec = tmpl["spec"]
        for k in ("nodeSelector", "affinity", "topologySpreadConstraints"):
            if k in spec and rng.random() < 0.8:
                del spec[k]
                changed = True
        ann = (tmpl.get("metadata") or {}).get("annotations") or {}
        for k in (TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED):
            if k in ann and rng.random() < 0.8:
                del ann[k]
                changed = True
    return changed


def valid_gang(rng: random.Random, examples: dict[str, dict]) -> tuple[str, dict]:
    """(example stem, a valid object of that example's kind with random counts, shapes, constraints)."""
    stem = rng.choice(sorted(examples))
    obj = fast_copy(examples[stem]["request"]["object"])
    obj.setdefault("metadata", {})["name"] = f"fuzz-{rng.getrandbits(40):010x}"
    set_counts(rng, obj)
    for tmpl in pod_templates(obj):
        set_container_shape(rng, tmpl)
        add_constraints(rng, tmpl)
    return stem, obj


def lowered_variant(rng: random.Random, obj: dict) -> tuple[list[str], dict] | None:
    """(what was lowered, the variant); None when no transformation changed anything."""
    for _ in range(4):
        v = fast_copy(obj)
        done = []
        ops = [("fewer_pods", lower_counts), ("smaller_requests", lower_requests), ("removed_constraints", remove_constraints)]
        chosen = [op for op in ops if rng.random() < 0.5] or [rng.choice(ops)]
        for name, fn in chosen:
            if fn(rng, v):
                done.append(name)
        if done:
            v["metadata"]["name"] = obj["metadata"]["name"] + "-lower"
            return done, v
    return None


# ============================================================== HTTP


class Dropped(Exception):
    """The request ended without a response (connection closed, reset, timed out)."""


#: The webhook's request body limit (server.py ``max_body_bytes`` default).
BODY_LIMIT_BYTES = 3 * 1024 * 1024


class Conn:
    """One keep-alive HTTPS connection (http.client). ``opened`` counts TCP+TLS connections made."""

    IDLE_REOPEN = 3.0  # s: below uvicorn's 5 s keep-alive timeout, so an idle close is never a drop

    def __init__(self, port: int, ctx: ssl.SSLContext, timeout: float = 30.0):
        self.port, self.ctx, self.timeout = port, ctx, timeout
        self.c: http.client.HTTPSConnection | None = None
        self.last = 0.0
        self.opened = 0
        self.server_closed = 0
        self.closed_unread = 0  # closes after a body over the limit (expected)
        self.prev_status: int | None = None  # status of the last answer on the current TCP connection

    def _open(self):
        self.c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=self.timeout)
        self.c.connect()
        self.opened += 1
        self.prev_status, self.prev_step = None, None

    def close(self):
        if self.c is not None:
            try:
                self.c.close()
            except Exception:
                pass
        self.c = None

    def request(self, method: str, path: str, body: bytes | None, headers: dict) -> tuple[int, dict, bytes]:
        if self.c is None or time.monotonic() - self.last > self.IDLE_REOPEN:
            self.close()
            self._open()
        try:
            self.c.request(method, path, body=body, headers=headers)
            r = self.c.getresponse()
            data = r.read()
        except (http.client.HTTPException, OSError, ssl.SSLError) as exc:
            self.close()
            raise Dropped(f"{type(exc).__name__}: {exc}") from None
        finally:
            self.last = time.monotonic()
        if r.will_close:
            # A body over the webhook's limit is refused unread, so that connection must close.
            if body is not None and len(body) > BODY_LIMIT_BYTES:
                self.closed_unread += 1
            else:
                self.server_closed += 1
            self.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data


@dataclass
class Step:
    """One HTTP request of a case."""

    path: str
    body: bytes | None
    content_type: str | None = "application/json"
    method: str = "POST"
    muts: list = field(default_factory=list)   # Mutation list (mutate family)
    obj: Any = None                           # request.object as sent (patch application)
    base: Any = None                          # the unmutated review (mutate family; minimization)
    note: str = ""


def headers_for(step: Step) -> dict:
    h = {"Accept": "application/json"}
    if step.content_type is not None:
        h["Content-Type"] = step.content_type
    return h


# ============================================================== checks


def _strict_loads(body: bytes) -> Any:
    def no_const(name):
        raise ValueError(f"non-JSON literal {name}")
    return json.loads(body, parse_constant=no_const)


def _bad_chars(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029" for ch in text)


def _apply_patch(obj: Any, patch: list) -> Any:
    """Apply the RFC 6902 ops gangcheck emits (add; also replace/remove/test) to a copy; raises on a bad op."""
    doc = copy.deepcopy(obj)
    for op in patch:
        if not isinstance(op, dict) or op.get("op") not in ("add", "replace", "remove", "test", "move", "copy"):
            raise ValueError(f"bad patch op {op!r:.80}")
        path = op.get("path")
        if not isinstance(path, str) or (path and not path.startswith("/")):
            raise ValueError(f"bad patch path {path!r:.80}")
        toks = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
        if not toks:
            raise ValueError("patch replaces the whole object")
        parent = doc
        for t in toks[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = toks[-1]
        if op["op"] in ("add", "replace"):
            if "value" not in op:
                raise ValueError("patch op without value")
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            elif isinstance(parent, dict):
                parent[last] = op["value"]
            else:
                raise ValueError(f"patch path {path} goes through a scalar")
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
    return doc


def sent_doc(step: Step) -> tuple[Any, bool]:
    """(the body as the server decodes it or None, whether it is strict JSON)."""
    if not step.body:
        return None, False
    try:
        doc = json.loads(step.body)
    except (ValueError, RecursionError):
        return None, False
    try:
        _strict_loads(step.body)
        strict = True
    except (ValueError, RecursionError):
        strict = False
    return doc, strict


_SURROGATE = re.compile("[\ud800-\udfff]")


def _uid_echoes(uid: Any) -> tuple:
    """The uids an answer may carry: the one sent, or — when it holds lone surrogates, which no
    API server sends — the same with each replaced by U+FFFD (what a Go JSON decoder makes of it)."""
    if not isinstance(uid, str):
        return (uid,)
    return (uid, _SURROGATE.sub("\ufffd", uid))


def evaluated(resp: dict, path: str) -> bool:
    """True when the server ran the engine on the object (validate: auditAnnotations; mutate: a patch)."""
    return bool(resp.get("auditAnnotations")) if path == "/validate" else "patch" in resp


def check_response(step: Step, status: int, headers: dict, body: bytes) -> tuple[list[str], dict | None]:
    """Failures (kinds) for one answered request, and the AdmissionResponse when there is one."""
    fails: list[str] = []
    if status >= 500:
        return ["http_5xx"], None
    if step.path not in ("/validate", "/mutate") or status != 200:
        if step.path in ("/validate", "/mutate") and status not in (400, 405, 413, 415, 422):
            fails.append(f"unexpected_status_{status}")
        return fails, None
    doc, strict = sent_doc(step)
    if step.body and not strict:
        fails.append("non_json_accepted")  # NaN/Infinity literals or worse, answered 200
    if not headers.get("content-type", "").startswith("application/json"):
        fails.append("contract:content_type")
    try:
        review = _strict_loads(body)
    except (ValueError, RecursionError):
        return fails + ["contract:response_not_json"], None
    resp = review.get("response") if isinstance(review, dict) else None
    if not isinstance(review, dict) or review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview" \
            or not isinstance(resp, dict):
        return fails + ["contract:envelope"], None
    sent_uid = ((doc or {}).get("request") or {}).get("uid") if isinstance(doc, dict) else None
    if not isinstance(resp.get("uid"), str) or resp.get("uid") not in _uid_echoes(sent_uid):
        fails.append("contract:uid_not_echoed")
    if not isinstance(resp.get("allowed"), bool):
        fails.append("contract:allowed_not_bool")
    warnings = resp.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        fails.append("contract:warnings_type")
        warnings = []
    for w in warnings:
        if len(w) > 120:
            fails.append("contract:warning_too_long")
        if _bad_chars(w) or not w.strip():
            fails.append("contract:warning_control_chars")
    if resp.get("allowed") is False:
        st = resp.get("status")
        if not isinstance(st, dict) or not isinstance(st.get("message"), str) or not st["message"].strip():
            fails.append("contract:deny_without_message")
        elif not isinstance(st.get("code"), int) or not 400 <= st["code"] < 500:
            fails.append("contract:deny_status_code")
    if "patch" in resp or "patchType" in resp:
        if step.path != "/mutate":
            fails.append("contract:patch_on_validate")
        elif resp.get("patchType") != "JSONPatch" or not isinstance(resp.get("patch"), str):
            fails.append("contract:patch_type")
        else:
            try:
                patch = _strict_loads(base64.b64decode(resp["patch"], validate=True))
                if not isinstance(patch, list) or not patch:
                    raise ValueError("patch is not a non-empty list")
                _apply_patch(step.obj if step.obj is not None else ((doc or {}).get("request") or {}).get("object"), patch)
            except Exception as exc:  # noqa: BLE001 - any failure to decode/apply is a contract failure
                fails.append(f"contract:patch_invalid:{type(exc).__name__}")
    if any(w.startswith(FAIL_OPEN_HEAD + "internal error") for w in warnings):
        fails.append("fail_open_internal_error")
    # int32 counts: Kubernetes' API validation refuses them; gangcheck must not size a gang by one.
    # Only a value still in the body counts (a later mutation may have dropped or replaced it).
    if evaluated(resp, step.path) and any(m.tag in ("int32_overflow", "int64_overflow", "huge_int")
                                          and _value_at(doc, m.path) == m.value
                                          for m in step.muts if m.op == "replace" and m.path and m.path[-1] in INT32_COUNT_KEYS):
        fails.append("int32_count_evaluated")
    return fails, resp


def verdict_of(resp: dict | None, path: str) -> str:
    if resp is None:
        return "none"
    w = resp.get("warnings") or []
    if any(x.startswith(FAIL_OPEN_HEAD) for x in w):
        return "fail_open"
    if resp.get("allowed") is False:
        return "denied"
    if path == "/validate":
        return (resp.get("auditAnnotations") or {}).get("verdict") or "skipped"
    if "patch" in resp:
        try:
            for op in json.loads(base64.b64decode(resp["patch"])):
                v = op.get("value")
                if isinstance(v, dict):
                    for k, x in (v.get("annotations") or v).items():
                        if k.endswith("/verdict"):
                            return x
                elif str(op.get("path", "")).endswith("~1verdict"):
                    return v
        except Exception:  # noqa: BLE001
            return "patched"
    return "skipped"


# ============================================================== case generation


def case_steps(seed: int, i: int, examples: dict[str, dict]) -> tuple[str, random.Random, list[Step]]:
    """(family, its rng after generation, the first steps) of case ``i``; pure in (seed, i)."""
    rng = random.Random(f"{seed}:{i}")
    r = rng.randrange(sum(FAMILIES.values()))
    for family, w in FAMILIES.items():
        if r < w:
            break
        r -= w
    stems = sorted(examples)
    ep = rng.choice(["/validate", "/validate", "/mutate"])

    def base_review() -> dict:
        stem = rng.choice(stems)
        rev = fast_copy(examples[stem])
        rev["request"]["uid"] = uid_for(rng)
        return stem, rev

    if family == "mutate":
        stem, rev = base_review()
        muts = pick_mutations(rng, rev, rng.choice([1, 1, 1, 2, 3]), stem)
        doc = apply_mutations(rev, muts)
        obj = (doc.get("request") or {}).get("object") if isinstance(doc.get("request"), dict) else None
        return family, rng, [Step(ep, encode(doc), muts=muts, obj=obj, base=rev)]
    if family == "metamorphic":
        stem, obj = valid_gang(rng, examples)
        doc = review_of(obj, uid_for(rng))
        return family, rng, [Step("/validate", encode(doc), obj=obj, note=stem)]
    if family == "raw":
        k = rng.randrange(6)
        if k == 0:
            body = rng.randbytes(rng.randint(1, 4096))
        elif k == 1:
            body = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"' + rng.randbytes(40) + b'"}}'
        elif k == 2:
            body = b"\xef\xbb\xbf" + encode(base_review()[1])  # UTF-8 BOM
        elif k == 3:
            body = encode(base_review()[1]).decode().encode(rng.choice(["utf-16", "utf-16-le", "utf-32"]))
        elif k == 4:
            body = encode(base_review()[1]).replace(b'"llm"', b'"\xff\xfe"', 1)  # invalid UTF-8 in a string
        else:
            body = b"\x00" * rng.randint(1, 64) + encode(base_review()[1])
        return family, rng, [Step(ep, body, note=f"raw{k}")]
    if family == "truncated":
        body = encode(base_review()[1])
        return family, rng, [Step(ep, body[: rng.randrange(1, len(body))])]
    if family == "content_type":
        rev = base_review()[1]
        k = rng.randrange(6)
        if k == 5:
            import yaml  # the server's own dependency
            return family, rng, [Step(ep, yaml.safe_dump(rev).encode(), content_type="application/yaml", note="yaml")]
        ct = [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
              "application/json; charset=utf-16"][k]
        body = encode(rev)
        if k == 4:
            body = body.decode().encode("utf-16")
        return family, rng, [Step(ep, body, content_type=ct, obj=rev["request"]["object"], note=f"ct{k}")]
    if family == "empty":
        return family, rng, [Step(ep, rng.choice([b"", b" ", b"\n", b"{}", b"[]", b"null", b"0", b'""']))]
    if family == "nesting":
        depth = rng.choice([100, 1_000, 10_000, 100_000])
        if rng.random() < 0.5:
            body = b"[" * depth + b"]" * depth
        else:
            rev = base_review()[1]
            where = rng.choice([("metadata", "labels"), ("spec",), ("metadata", "annotations"), ("metadata",)])
            holder = rev["request"]["object"]
            for k in where[:-1]:
                holder = holder.setdefault(k, {})
            holder[where[-1]] = nested(min(depth, 950), as_list=rng.random() < 0.5)
            body = encode(rev)
        return family, rng, [Step(ep, body, note=f"depth{depth}")]
    if family == "other":
        path, method = rng.choice([("/healthz", "GET"), ("/readyz", "GET"), ("/metrics", "GET"), ("/validate", "GET"),
                                   ("/mutate", "PUT"), ("/nope", "POST"), ("/validate/../metrics", "GET")])
        return family, rng, [Step(path, None if method == "GET" else b"{}", method=method)]
    # big
    rev = base_review()[1]
    size = rng.choice([3 * 1024 * 1024 - 4096, 3 * 1024 * 1024 + 10])
    rev["request"]["object"]["metadata"].setdefault("annotations", {})["fuzz"] = "x" * size
    return family, rng, [Step(ep, encode(rev), note=f"big{size}")]


# ============================================================== the run


@dataclass
class Sample:
    """One failed request kept for classification: its case, the step and the steps before it."""

    check: str
    case: int
    family: str
    steps: list
    detail: str = ""


@dataclass
class Summary:
    requests: int = 0
    cases: int = 0
    elapsed_s: float = 0.0
    by_status: Counter = field(default_factory=Counter)
    by_verdict: Counter = field(default_factory=Counter)
    by_family: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)     # check[group] → requests
    samples: dict = field(default_factory=dict)            # check[group] → [Sample] (≤ SAMPLES each)
    causes: dict = field(default_factory=dict)             # check[group] → Counter(cause class → samples)
    cause_fields: dict = field(default_factory=dict)       # check[group] → {cause class: Counter(field)}
    reproducers: dict = field(default_factory=dict)        # check[group] {cause} → file
    metamorphic_pairs: int = 0
    metamorphic_admitted_by_kind: Counter = field(default_factory=Counter)
    dropped: int = 0
    connections_opened: int = 0
    server_closed_after_response: int = 0
    rss_kb: dict = field(default_factory=dict)
    server_cpu_s: float = 0.0
    server_tracebacks: Counter = field(default_factory=Counter)
    slowest: list = field(default_factory=list)            # (seconds, case, family, what)

    def __repr__(self) -> str:  # pytest prints fixture values: keep it to one line
        return f"Summary(requests={self.requests}, failures={sum(self.failures.values())} in {len(self.failures)} groups)"

    def as_json(self) -> dict:
        return {
            "requests": self.requests, "cases": self.cases, "elapsed_s": round(self.elapsed_s, 1),
            "rps": round(self.requests / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            "by_status": dict(self.by_status), "by_verdict": dict(self.by_verdict), "by_family": dict(self.by_family),
            "failures": dict(self.failures), "causes": {k: dict(v) for k, v in self.causes.items()},
            "dropped": self.dropped, "metamorphic_pairs": self.metamorphic_pairs,
            "metamorphic_admitted_by_kind": dict(self.metamorphic_admitted_by_kind),
            "connections_opened": self.connections_opened, "server_closed_after_response": self.server_closed_after_response,
            "rss_kb": self.rss_kb, "server_cpu_ms_per_request": round(1000 * self.server_cpu_s / max(1, self.requests), 3),
            "server_tracebacks": dict(self.server_tracebacks), "notes": dict(self.notes), "reproducers": self.reproducers,
        }


SAMPLES = 12  # failed requests kept per failure group for classification
RSS_SAMPLE_S = 0.25  # how often the server's /proc/<pid>/status is read
RSS_JUMP_MB = 128    # RSS growth within RSS_JUMP_SAMPLES samples that counts as an unbounded allocation
RSS_JUMP_SAMPLES = 8
RSS_WINDOW_S = 5.0   # cases sent this recently are the suspects of a jump


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM / VmSize of ``pid`` in kB (empty when it is gone)."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "VmSize"):
                out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (/proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m webhook serve --cluster demo`` in a subprocess on a free loopback port, run from
    the repository root (so the checkout's own ``webhook`` package is served)."""

    def __init__(self, workdir: Path, python: str = sys.executable, as_limit_mb: int = 4096):
        self.workdir, self.python, self.as_limit_mb = workdir, python, as_limit_mb
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log = workdir / "server.log"

    def start(self, timeout: float = 120.0) -> "Server":
        certs = self.workdir / "certs"
        subprocess.run([self.python, "-m", "webhook", "certs", "--out", str(certs)], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        self.ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        limit = self.as_limit_mb * 1024 * 1024

        def cap():  # in the child, before exec
            if limit > 0:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        for _attempt in range(5):  # the port is free when picked; another process may take it first
            self.port = free_port()
            with open(self.log, "wb") as logf:
                self.proc = subprocess.Popen(
                    [self.python, "-m", "webhook", "serve", "--cluster", "demo", "--host", "127.0.0.1",
                     "--port", str(self.port), "--tls-cert", str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key")],
                    cwd=ROOT, stdout=logf, stderr=subprocess.STDOUT, preexec_fn=cap)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                c = Conn(self.port, self.ctx, timeout=5)
                try:
                    st, _, _ = c.request("GET", "/readyz", None, {})
                    if st == 200:
                        return self
                except (Dropped, OSError):
                    pass
                finally:
                    c.close()
                time.sleep(0.2)
            self.stop()
            if "address already in use" not in self.log.read_text(errors="replace").lower():
                break
        raise RuntimeError(f"the server did not become ready; its log:\n{self.log.read_text(errors='replace')[-3000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def tracebacks(self) -> Counter:
        """Exception types of the tracebacks in the server's log (the last line of each)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        out = Counter()
        for block in text.split("Traceback (most recent call last):")[1:]:
            lines = [ln for ln in block.splitlines() if ln and not ln.startswith((" ", "\t", "During", "The above"))]
            m = re.match(r"^([\w.]+)(:|$)", lines[0]) if lines else None
            out[m.group(1) if m else "?"] += 1
        return out


def run_step(conn: Conn, step: Step) -> tuple[list[str], dict | None, int, float]:
    """Send ``step``; (failed checks, AdmissionResponse or None, status (0: dropped), seconds)."""
    t0 = time.perf_counter()
    try:
        status, headers, body = conn.request(step.method, step.path, step.body, headers_for(step))
    except Dropped as exc:
        return ["dropped_connection"], {"_dropped": str(exc)}, 0, time.perf_counter() - t0
    fails, resp = check_response(step, status, headers, body)
    conn.prev_status, conn.prev_step = status, step
    return fails, resp, status, time.perf_counter() - t0


def group_of(check: str, step: Step, family: str) -> str:
    """The failure group a failed check is counted under: the check and where it came from."""
    if check.startswith("contract:patch_invalid"):
        check = "contract:patch_invalid"
    if family in ("raw", "content_type", "nesting", "big") and step.note:
        return f"{check}[{family}:{re.sub(r'[0-9]+$', '', step.note)}]"
    return f"{check}[{family}]"


def cause_of(m: Mutation) -> str:
    """``tag@field``: the kind of value and the field (last non-index path element) of a mutation."""
    key = next((str(k) for k in reversed(m.path) if not isinstance(k, int)), "<root>")
    if m.op == "insert":
        key = "+" + key
    return f"{m.tag}@{key}"


def _big_count(m: Mutation) -> bool:
    """A mutation that sets a count field (replicas, minMember, pod-group-total-count, …) to ≥ 10^6."""
    if not m.path or (m.path[-1] not in INT32_COUNT_KEYS and m.path[-1] != "kueue.x-k8s.io/pod-group-total-count"):
        return False
    v = m.value
    try:
        return (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1e6) or \
            (isinstance(v, str) and v.isdigit() and len(v) >= 7)
    except (TypeError, ValueError, OverflowError):
        return False


class Runner:
    """Sends the cases over ``connections`` threads until ``requests`` were sent or ``time_limit`` passed."""

    def __init__(self, server: Server, examples: dict, seed: int, requests: int, connections: int,
                 time_limit: float, rss_ceiling_mb: int, log: Callable[[str], None] = print):
        self.server, self.examples, self.seed = server, examples, seed
        self.target, self.connections, self.time_limit = requests, connections, time_limit
        self.rss_ceiling_kb = rss_ceiling_mb * 1024
        self.log = log
        self.s = Summary()
        self.lock = threading.Lock()
        self.next_case = 0
        self.sent = 0
        self.stop = threading.Event()
        self.conns: list[Conn] = []
        self.recent: list[tuple[float, int, str]] = []  # (time, case, what) of recent cases setting a count ≥ 10^6

    def _record(self, family: str, case: int, step: Step, fails: list[str], resp, status: int, dt: float,
                before: list | None = None, detail: str = "", group: str | None = None) -> None:
        with self.lock:
            self.s.requests += 1
            self.s.by_status[str(status) if status else "dropped"] += 1
            if step.path in ("/validate", "/mutate") and status == 200:
                self.s.by_verdict[verdict_of(resp, step.path)] += 1
            if dt > 0.25:
                what = step.note or "; ".join(m.describe() for m in step.muts)
                self.s.slowest.append((round(dt, 3), case, family, what[:160]))
                self.s.slowest = sorted(self.s.slowest, reverse=True)[:10]
            for f in fails:
                g = group or group_of(f, step, family)
                self.s.failures[g] += 1
                if f.startswith("dropped_connection"):
                    self.s.dropped += 1
                lst = self.s.samples.setdefault(g, [])
                if len(lst) < SAMPLES:
                    lst.append(Sample(f, case, family, (before or []) + [step],
                                      detail or (json.dumps(resp)[:400] if resp else "")))

    def _claim(self) -> int | None:
        with self.lock:
            if self.stop.is_set() or self.sent >= self.target:
                return None
            i = self.next_case
            self.next_case += 1
            self.s.cases += 1
            return i

    def _count(self, n: int = 1) -> None:
        with self.lock:
            self.sent += n

    def send(self, conn: Conn, family: str, case: int, step: Step, before: list | None = None):
        """Send one step and record it. A dropped request is sent once more on a new connection: if
        that one is answered, the drop is charged to the connection's previous answer."""
        prev, prev_step = conn.prev_status, getattr(conn, "prev_step", None)
        reused = conn.c is not None
        fails, resp, status, dt = run_step(conn, step)
        self._count()
        if status == 0:
            if not self.server.alive():
                self._record(family, case, step, ["server_died"], resp, 0, dt, before)
                self.stop.set()
                return fails, resp, status
            f2, r2, st2, dt2 = run_step(conn, step)
            if st2 != 0 and reused:
                # The request itself is fine: the connection was dead after its previous answer.
                self._record(family, case, step, [], None, 0, dt, before,
                             group=f"dropped_connection[after_{prev}]")
                with self.lock:
                    self.s.failures[f"dropped_connection[after_{prev}]"] += 1
                    self.s.dropped += 1
                    lst = self.s.samples.setdefault(f"dropped_connection[after_{prev}]", [])
                    if len(lst) < SAMPLES:
                        lst.append(Sample("dropped_connection", case, family, ([prev_step] if prev_step else []) + [step],
                                          f"the connection was closed after a {prev} answer to the first request; "
                                          f"the second, sent on it, got no answer (resent alone: {st2})"))
                fails, resp, status, dt = f2, r2, st2, dt2
            else:
                fails, resp, status, dt = f2 + (["dropped_connection"] if "dropped_connection" not in f2 else []), r2, st2, dt2
        self._record(family, case, step, fails, resp, status, dt, before)
        return fails, resp, status

    def run_case(self, conn: Conn, i: int) -> None:
        family, rng, steps = case_steps(self.seed, i, self.examples)
        step = steps[0]
        with self.lock:
            self.s.by_family[family] += 1
            if any(_big_count(m) for m in step.muts):
                self.recent = [r for r in self.recent if r[0] > time.monotonic() - RSS_WINDOW_S][-20:]
                self.recent.append((time.monotonic(), i, "; ".join(m.describe() for m in step.muts)[:200]))
        fails, resp, status = self.send(conn, family, i, step)
        if family in ("content_type", "raw") and status == 200:
            with self.lock:
                self.s.notes[f"accepted_{family}:{step.note}"] += 1
        if family != "metamorphic" or status != 200 or resp is None:
            return
        # Metamorphic: a base admitted after a real evaluation → its lowered variants must not be denied.
        if resp.get("allowed") is not True or verdict_of(resp, "/validate") not in ("Fits", "Waits"):
            return
        base_obj = step.obj
        kind = base_obj["kind"]
        if base_obj["apiVersion"].startswith("batch.volcano.sh"):
            kind = "VolcanoJob"
        elif kind == "PodGroup":
            kind = "PodGroup(" + base_obj["apiVersion"].split("/")[0] + ")"
        with self.lock:
            self.s.metamorphic_admitted_by_kind[kind] += 1
        if rng.random() < 0.2:  # the same gang through /mutate: the patch must apply
            self.send(conn, family, i, Step("/mutate", step.body, obj=base_obj, note=step.note))
        for _ in range(rng.choice([1, 1, 2])):
            lv = lowered_variant(rng, base_obj)
            if lv is None:
                continue
            what, vobj = lv
            v = Step("/validate", encode(review_of(vobj, uid_for(rng))), obj=vobj, note=f"{step.note}:{'+'.join(what)}")
            with self.lock:
                self.s.metamorphic_pairs += 1
            f3, r3, st3 = self.send(conn, family, i, v, before=[step])
            if st3 == 200 and r3 is not None and r3.get("allowed") is False:
                msg = (r3.get("status") or {}).get("message", "")
                g = f"metamorphic_false_denial[{kind}:{'+'.join(what)}]"
                with self.lock:
                    self.s.failures[g] += 1
                    lst = self.s.samples.setdefault(g, [])
                    if len(lst) < SAMPLES:
                        lst.append(Sample("metamorphic_false_denial", i, family, [step, v],
                                          f"{kind} admitted ({verdict_of(resp, '/validate')}); lowered by "
                                          f"{'+'.join(what)}: denied: {msg}"))

    def worker(self, conn: Conn, deadline: float) -> None:
        while not self.stop.is_set() and time.monotonic() < deadline:
            i = self._claim()
            if i is None:
                return
            try:
                self.run_case(conn, i)
            except Exception as exc:  # noqa: BLE001 - a harness bug must not hide the rest of the run
                with self.lock:
                    self.s.failures[f"harness_error[{type(exc).__name__}]"] += 1
                    self.s.notes[f"harness_error: case {i}: {type(exc).__name__}: {exc}"[:200]] += 1

    def sample_rss(self) -> None:
        st = proc_status(self.server.pid)
        if st:
            with self.lock:
                self.rss_hist = (getattr(self, "rss_hist", []) + [st.get("VmRSS", 0)])[-RSS_JUMP_SAMPLES:]
                last = min(self.rss_hist)
                if st.get("VmRSS", 0) - last > RSS_JUMP_MB * 1024:
                    self.rss_hist = [st.get("VmRSS", 0)]
                    # One input made the server allocate this much within a sampling interval: name
                    # the recent cases that set a count to ≥ 10^6 (a background estimate may lag).
                    g = "rss_jump"
                    self.s.failures[g] += 1
                    lst = self.s.samples.setdefault(g, [])
                    if len(lst) < SAMPLES:
                        sus = [f"case {c}: {w}" for _, c, w in self.recent[-5:]] or ["(no recent case set a count ≥ 10^6)"]
                        lst.append(Sample(g, self.recent[-1][1] if self.recent else -1, "mutate", [],
                                          f"RSS {last // 1024} → {st['VmRSS'] // 1024} MiB within {RSS_SAMPLE_S * RSS_JUMP_SAMPLES:g}s; "
                                          f"recent suspects: " + " | ".join(sus)))
                self.s.rss_kb["peak_VmRSS"] = max(self.s.rss_kb.get("peak_VmRSS", 0), st.get("VmRSS", 0))
                self.s.rss_kb["VmHWM"] = st.get("VmHWM", 0)

    def run(self) -> Summary:
        pid = self.server.pid
        st = proc_status(pid)
        self.s.rss_kb = {"before_VmRSS": st.get("VmRSS", 0), "before_VmHWM": st.get("VmHWM", 0)}
        cpu0 = proc_cpu_s(pid)
        t0 = time.monotonic()
        deadline = t0 + self.time_limit
        self.conns = [Conn(self.server.port, self.server.ctx) for _ in range(self.connections)]
        threads = [threading.Thread(target=self.worker, args=(c, deadline), daemon=True) for c in self.conns]
        for t in threads:
            t.start()
        last_log = t0
        while any(t.is_alive() for t in threads):
            time.sleep(RSS_SAMPLE_S)
            self.sample_rss()
            if not self.server.alive():
                self.stop.set()
            if time.monotonic() - last_log > 15:
                last_log = time.monotonic()
                self.log(f"  ... {self.sent} requests, {sum(self.s.failures.values())} failed checks, "
                         f"RSS {self.s.rss_kb.get('peak_VmRSS', 0) // 1024} MiB")
        for t in threads:
            t.join(timeout=60)
        self.s.elapsed_s = time.monotonic() - t0
        self.s.server_cpu_s = proc_cpu_s(pid) - cpu0
        st = proc_status(pid)
        self.s.rss_kb.update({"after_VmRSS": st.get("VmRSS", 0), "VmHWM": st.get("VmHWM", self.s.rss_kb.get("VmHWM", 0)),
                              "VmSize": st.get("VmSize", 0)})
        peak = max(self.s.rss_kb.get("VmHWM", 0), self.s.rss_kb.get("peak_VmRSS", 0))
        if peak > self.rss_ceiling_kb:
            self.s.failures["rss_ceiling"] += 1
            self.s.notes[f"rss_ceiling: peak {peak // 1024} MiB > {self.rss_ceiling_kb // 1024} MiB"] += 1
        if not self.server.alive() and "server_died[" not in " ".join(self.s.failures):
            self.s.failures["server_died[unattributed]"] += 1
        if self.sent < self.target and not self.stop.is_set():
            self.s.notes["stopped_by_time_limit"] += 1
        for c in self.conns:
            self.s.connections_opened += c.opened
            self.s.server_closed_after_response += c.server_closed
            c.close()
        return self.s


# ============================================================== classification, minimization, reproducers


def _resend(server: Server, step: Step, check: str) -> bool:
    """Send ``step`` on a fresh connection; True when ``check`` fails again."""
    if not server.alive():
        return False
    conn = Conn(server.port, server.ctx)
    try:
        fails, _, _, _ = run_step(conn, step)
    finally:
        conn.close()
    return check in fails


def _mut_step(step: Step, muts: list[Mutation], doc: dict | None = None) -> Step:
    doc = apply_mutations(step.base, muts) if doc is None else doc
    req = doc.get("request") if isinstance(doc, dict) else None
    return Step(step.path, encode(doc), step.content_type, muts=muts, base=step.base,
                obj=req.get("object") if isinstance(req, dict) else None)


def shrink(server: Server, step: Step, check: str, budget: int) -> tuple[Step, int]:
    """Drop parts of the request that are not on a mutation's path while ``check`` still fails."""
    doc = json.loads(step.body)
    keep = {tuple(m.path[:k]) for m in step.muts for k in range(1, len(m.path) + 1)}
    tries = 0
    for path in sorted(paths_of(doc), key=len):
        if tries >= budget:
            break
        if len(path) > 6 or path in keep or path[:1] != ("request",) or path in (("request",), ("request", "uid")):
            continue
        try:
            cand_doc = json.loads(json.dumps(doc))
            del get_at(cand_doc, path[:-1])[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue
        tries += 1
        cand = _mut_step(step, step.muts, cand_doc)
        if _resend(server, cand, check):
            doc, step = cand_doc, cand
    return step, tries


def _cause(server: Server, smp: Sample, budget: list[int]) -> tuple[str, Step]:
    """The smallest set of the sample's mutations (one, else two) that fails its check alone."""
    step = smp.steps[-1]
    if smp.check == "metamorphic_false_denial":
        return "lowered variant denied", step
    if smp.check == "dropped_connection":
        # The reproducer holds both requests: the one answered before the close, then this one.
        return ("closed after the previous answer" if len(smp.steps) > 1 else "no answer"), step
    if smp.family != "mutate" or not step.muts or step.base is None:
        return step.note or smp.family, step
    muts = step.muts
    trials = [[m] for m in muts] + ([[a, b] for k, a in enumerate(muts) for b in muts[k + 1:]] if len(muts) > 1 else [])
    for trial in trials:
        if len(trial) == len(muts) or budget[0] <= 0:
            break
        cand = _mut_step(step, trial)
        budget[0] -= 1
        if _resend(server, cand, smp.check):
            return "+".join(sorted(cause_of(m) for m in trial)), cand
    return "+".join(sorted(cause_of(m) for m in muts)), step


def classify(server: Server, s: Summary, out: Path | None, budget: int = 600, log: Callable[[str], None] = print) -> None:
    """For every failure group: the cause of each kept sample (the one or two mutations that fail
    the check alone, ``tag@field``; else the case's note) and one reproducer per cause, shrunk
    (unrelated parts of the request dropped) while re-sends are left in ``budget``."""
    left = [budget]
    firsts: list[tuple[str, str, Sample, Step]] = []
    for g, samples in sorted(s.samples.items()):
        causes: Counter = Counter()
        seen: set[str] = set()
        for smp in samples:
            if not smp.steps:  # rss_jump: the detail names the suspects
                causes[smp.detail[:300]] += 1
                continue
            cause, step = _cause(server, smp, left)
            # Class: the kinds of value, whatever the field ("surrogate+nan_literal"); fields listed apart.
            parts = cause.split("+") if "@" in cause else [cause]
            cls = "+".join(sorted({p.split("@", 1)[0] for p in parts}))
            fields = s.cause_fields.setdefault(g, {}).setdefault(cls, Counter())
            for p in parts:
                if "@" in p:
                    fields[p.split("@", 1)[1]] += 1
            causes[cls] += 1
            cause = cls
            if cause not in seen:
                seen.add(cause)
                firsts.append((g, cause, smp, step))
        s.causes[g] = causes
    if out is None:
        return
    for g, cause, smp, step in firsts:
        if smp.family == "mutate" and step.muts and step.base is not None and smp.check != "dropped_connection" and left[0] > 0:
            step, tries = shrink(server, step, smp.check, budget=min(25, left[0]))
            left[0] -= tries
        s.reproducers[f"{g} {{{cause}}}"] = str(write_reproducer(out / "failures", g, cause, smp, step))


def write_reproducer(out: Path, group: str, cause: str, smp: Sample, step: Step) -> Path:
    """``<out>/<group>__<cause>.json``: the requests (the last one failed), the check, the detail,
    and a curl command for the last body (``<file>.body``)."""
    out.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.+@-]+", "_", f"{group}__{cause}")[:150]
    p = out / f"{stem}.json"
    reqs = []
    for st in smp.steps[:-1] + [step]:
        r = {"path": st.path, "method": st.method, "content_type": st.content_type, "note": st.note,
             "mutations": [m.describe() for m in st.muts]}
        if st.body is None:
            r["body"] = None
        else:
            try:
                r["body"] = st.body.decode("ascii")
            except UnicodeDecodeError:
                r["body_base64"] = base64.b64encode(st.body).decode()
        reqs.append(r)
    if step.body is not None:
        (out / f"{stem}.body").write_bytes(step.body)
    ct = f"-H 'Content-Type: {step.content_type}' " if step.content_type else ""
    rec = {"group": group, "check": smp.check, "cause": cause, "case": smp.case, "family": smp.family,
           "detail": smp.detail, "requests": reqs,
           "curl": f"curl -sS --cacert certs/ca.crt {ct}--data-binary @{stem}.body https://127.0.0.1:8443{step.path}"}
    p.write_text(json.dumps(rec, indent=1, ensure_ascii=True))
    return p


# ============================================================== entry points


def fuzz(requests: int = 100_000, seed: int = 17, connections: int = 4, time_limit: float = 1800.0,
         rss_ceiling_mb: int = 512, out: Path | None = None, as_limit_mb: int = 4096, python: str = sys.executable,
         classify_budget: int = 600, log: Callable[[str], None] = print) -> Summary:
    """Start the server, send ``requests`` seeded requests, classify the failures (one reproducer
    per cause under ``out/failures`` when ``out`` is given), stop the server.

    Returns the ``Summary``: ``summary.failures`` (group → failed requests) is empty when every
    check held.
    """
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # the client encodes deep documents
    examples = load_examples()
    with tempfile.TemporaryDirectory(prefix="gangcheck-fuzz-") as tmp:
        server = Server(Path(tmp), python=python, as_limit_mb=as_limit_mb).start()
        try:
            runner = Runner(server, examples, seed, requests, connections, time_limit, rss_ceiling_mb, log=log)
            s = runner.run()
            classify(server, s, out, budget=classify_budget, log=log)
            s.server_tracebacks = server.tracebacks()
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                (out / "server.log").write_bytes(server.log.read_bytes()[-2_000_000:])
                (out / "summary.json").write_text(json.dumps(s.as_json(), indent=1, sort_keys=True))
        finally:
            server.stop()
    return s


def print_summary(s: Summary, log: Callable[[str], None] = print) -> None:
    j = s.as_json()
    log(f"requests {s.requests} in {s.elapsed_s:.1f} s ({j['rps']} req/s), cases {s.cases}; "
        f"connections opened {s.connections_opened}, closed by the server after an answer {s.server_closed_after_response}")
    log(f"server CPU {j['server_cpu_ms_per_request']} ms/request; RSS MiB: before {s.rss_kb.get('before_VmRSS', 0) / 1024:.0f}, "
        f"after {s.rss_kb.get('after_VmRSS', 0) / 1024:.0f}, peak {s.rss_kb.get('peak_VmRSS', 0) / 1024:.0f}, "
        f"VmHWM {s.rss_kb.get('VmHWM', 0) / 1024:.0f}")
    log("by status:  " + ", ".join(f"{k} {v}" for k, v in sorted(s.by_status.items())))
    log("by verdict: " + ", ".join(f"{k} {v}" for k, v in sorted(s.by_verdict.items())))
    log("by family:  " + ", ".join(f"{k} {v}" for k, v in sorted(s.by_family.items())))
    log(f"metamorphic: {s.metamorphic_pairs} lowered variants of admitted gangs; admitted bases by kind "
        f"{dict(sorted(s.metamorphic_admitted_by_kind.items()))}")
    if s.notes:
        log("notes:      " + ", ".join(f"{k} {v}" for k, v in sorted(s.notes.items())))
    if s.server_tracebacks:
        log("server log tracebacks: " + ", ".join(f"{k} {v}" for k, v in s.server_tracebacks.most_common()))
    if s.slowest:
        log("slowest:    " + "; ".join(f"{t}s case {c} {fam} {n}" for t, c, fam, n in s.slowest[:5]))
    if not s.failures:
        log("FAILURES: none")
    else:
        log(f"FAILURES: {sum(s.failures.values())} failed checks in {len(s.failures)} groups")
        for g, v in sorted(s.failures.items()):
            log(f"  {v:6d}  {g}")
            for cause, n in s.causes.get(g, Counter()).most_common():
                rep = s.reproducers.get(f"{g} {{{cause}}}", "")
                flds = s.cause_fields.get(g, {}).get(cause)
                where = f" @ {', '.join(k for k, _ in flds.most_common(8))}" if flds else ""
                log(f"            {n:3d} of {len(s.samples.get(g, []))} sampled: {cause}{where}" + (f"\n                  → {rep}" if rep else ""))
    log(json.dumps(j, sort_keys=True, default=str))


def replay(path: Path, python: str = sys.executable) -> int:
    """Start a server and re-send a reproducer's requests; print each status, failed checks and answer."""
    rec = json.loads(path.read_text())
    with tempfile.TemporaryDirectory(prefix="gangcheck-fuzz-") as tmp:
        server = Server(Path(tmp), python=python).start()
        try:
            conn = Conn(server.port, server.ctx)
            for r in rec["requests"]:
                body = r["body"].encode("ascii") if r.get("body") is not None else (
                    base64.b64decode(r["body_base64"]) if r.get("body_base64") else None)
                step = Step(r["path"], body, r.get("content_type"), method=r.get("method", "POST"))
                fails, resp, status, _ = run_step(conn, step)
                print(status, fails, json.dumps(resp)[:2000])
            conn.close()
            print("server log tracebacks:", dict(server.tracebacks()))
        finally:
            server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000, help="requests to send (default 100000)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--connections", type=int, default=4, help="keep-alive connections, one thread each (default 4)")
    ap.add_argument("--time-limit", type=float, default=3600.0, help="stop sending after this many seconds (default 3600)")
    ap.add_argument("--rss-ceiling-mb", type=int, default=512,
                    help="fail when the server's RSS exceeds this (default 512; it starts at about 90)")
    ap.add_argument("--server-as-limit-mb", type=int, default=4096,
                    help="RLIMIT_AS of the server process, 0 = none (default 4096: an unbounded allocation fails inside it)")
    ap.add_argument("--out", type=Path, default=ROOT / "fuzz-out", help="reproducers, server log, summary.json (default fuzz-out/)")
    ap.add_argument("--classify-budget", type=int, default=600, help="re-sends spent classifying failures (default 600)")
    ap.add_argument("--replay", type=Path, help="re-send one reproducer file and print the answers")
    a = ap.parse_args(argv)
    if a.replay:
        return replay(a.replay)
    s = fuzz(a.requests, a.seed, a.connections, a.time_limit, a.rss_ceiling_mb, a.out, a.server_as_limit_mb,
             classify_budget=a.classify_budget)
    print_summary(s)
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
