"""What a workload asks of the cluster's topology → ``TopologyRequest`` on its pod sets.

Owns the reading and the upstream validation of every topology request a workload can carry:

* **Kueue TopologyAwareScheduling** (pod template annotations, kueue v0.17.0
  ``apis/kueue/v1beta2/topology_types.go``; built as ``jobframework/tas.go``
  ``podSetTopologyRequestBuilder.Build``, validated as ``jobframework/tas_validation.go``):
  ``podset-required-topology`` / ``-preferred-topology`` / ``-unconstrained-topology`` (at most
  one), ``podset-slice-required-topology`` + ``podset-slice-size`` (both or neither; size an int32
  ≥ 1 and ≤ the pod set's count), the alpha ``podset-slice-required-topology-constraints`` (JSON
  list of 1–3 ``{topology, size}``; its first layer is read as the slice, finer layers are not
  modelled: fewer constraints can only admit more), ``podset-group-name`` (not a number; only
  with required/preferred, never with slices; exactly two pod sets per group, one of count 1,
  with the same required/preferred level — ``ValidatePodSetGroupingTopology``, for the kinds whose
  Kueue webhook calls it: JobSet, LeaderWorkerSet, MPIJob, RayCluster, RayJob).
* **JobSet exclusive topology** (jobset v0.11.0 ``api/jobset/v1alpha2/jobset_types.go``
  ``ExclusiveKey`` on the JobSet or on a replicatedJob's Job template — the replicatedJob's
  wins, ``pkg/controllers/jobset_controller.go`` ``labelAndAnnotateObject``; ``NodeSelectorStrategyKey``
  ``alpha.jobset.sigs.k8s.io/node-selector`` beside it: the controller then adds the toleration of
  ``alpha.jobset.sigs.k8s.io/no-schedule``, ``addTaintToleration``).
* **LeaderWorkerSet exclusive topology** (lws v0.8.0 ``api/leaderworkerset/v1/leaderworkerset_types.go``
  ``leaderworkerset.sigs.k8s.io/exclusive-topology`` and ``subgroup-exclusive-topology`` on the
  LWS; the controller copies a non-empty value to the pods, ``leaderworkerset_controller.go``; the
  webhook refuses subgroup exclusive topology without ``subGroupPolicy``, ``leaderworkerset_webhook.go``).
* **Volcano network topology** (volcano v1.15.0 ``batch/v1alpha1/job.go`` and
  ``scheduling/v1beta1/types.go`` ``NetworkTopologySpec``: mode hard|soft, default hard;
  ``highestTierAllowed`` ≥ 0 and ``highestTierName`` not both — ``pkg/webhooks/admission/jobs/validate/admit_job.go``).
* **KAI** (KAI-Scheduler ``pkg/podgrouper/podgrouper/plugins/constants/constants.go``, read on the
  top owner by ``defaultgrouper/default_grouper.go``): ``kai.scheduler/topology`` (the Topology
  object), ``kai.scheduler/topology-required-placement`` / ``-preferred-placement`` (a level's node
  label); only pods with ``schedulerName: kai-scheduler`` are placed by KAI.

Findings (data keys: ``source``, ``field``, ``reason``, and ``value`` where one was read):

* ``InvalidTopologyRequest`` (NeverFits): the request as written is refused upstream — Kueue's,
  LWS's or Volcano's webhook refuses the object, or the API server the pods a controller makes
  from it (an exclusive-topology key that is not a label name becomes a pod affinity
  ``topologyKey``). A Kueue problem is NeverFits only when the gang names a Kueue queue.
* ``TopologyNotEnforced`` (Info): a topology annotation that changes nothing here — Kueue's without a
  queue label (Kueue does not manage the workload; its request is dropped), KAI's on pods that KAI
  does not schedule, or a second request on a pod set that already has one (one is modelled; the
  one dropped can only admit more).

Adapters never fill ``TopologyRequest.levels``: the engine resolves levels from the snapshot.
Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from ..engine.model import (
    TOPOLOGY_JOBSET,
    TOPOLOGY_KAI,
    TOPOLOGY_KUEUE,
    TOPOLOGY_LWS,
    TOPOLOGY_PREFERRED,
    TOPOLOGY_REQUIRED,
    TOPOLOGY_UNCONSTRAINED,
    TOPOLOGY_VOLCANO,
    Finding,
    GangRequest,
    PodSet,
    Toleration,
    TopologyRequest,
)
from .errors import AdapterError

__all__ = [
    "KUEUE_REQUIRED", "KUEUE_PREFERRED", "KUEUE_UNCONSTRAINED", "KUEUE_SLICE_REQUIRED", "KUEUE_SLICE_SIZE",
    "KUEUE_SLICE_CONSTRAINTS", "KUEUE_GROUP", "KUEUE_TAS_KEYS", "JOBSET_EXCLUSIVE", "JOBSET_NODE_SELECTOR",
    "JOBSET_NO_SCHEDULE", "LWS_EXCLUSIVE", "LWS_SUBGROUP_EXCLUSIVE", "KAI_TOPOLOGY", "KAI_REQUIRED", "KAI_PREFERRED",
    "KAI_SCHEDULER", "INVALID", "NOT_ENFORCED", "label_name_error", "collect_topology", "kueue_request",
    "jobset_exclusive", "lws_exclusive", "volcano_network_topology", "kai_request", "with_request", "without_kueue",
    "no_schedule_toleration", "finish_gang",
]

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KUEUE_SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
KUEUE_GROUP = "kueue.x-k8s.io/podset-group-name"
#: With any of these on a pod template Kueue builds a topology request (``Build``): TAS places the pods.
KUEUE_TAS_KEYS = (KUEUE_REQUIRED, KUEUE_PREFERRED, KUEUE_UNCONSTRAINED, KUEUE_SLICE_REQUIRED, KUEUE_SLICE_CONSTRAINTS)
_KUEUE_KEYS = KUEUE_TAS_KEYS + (KUEUE_SLICE_SIZE, KUEUE_GROUP)

JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NODE_SELECTOR = "alpha.jobset.sigs.k8s.io/node-selector"
JOBSET_NO_SCHEDULE = "alpha.jobset.sigs.k8s.io/no-schedule"
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
KAI_TOPOLOGY = "kai.scheduler/topology"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
#: KAI's default scheduler name (KAI-Scheduler pkg/common/constants/constants.go).
KAI_SCHEDULER = "kai-scheduler"

INVALID = "InvalidTopologyRequest"
NOT_ENFORCED = "TopologyNotEnforced"

#: (API group, kind) of the workloads Kueue integrates among the kinds gangcheck reads (kueue
#: v0.17.0 pkg/controller/jobs: job, jobset, kubeflow pytorchjob and mpijob, leaderworkerset,
#: raycluster, rayjob, pod): on any other kind (a Volcano Job) Kueue's annotations change nothing.
_KUEUE_KINDS = frozenset({("batch", "Job"), ("jobset.x-k8s.io", "JobSet"), ("kubeflow.org", "PyTorchJob"),
                          ("kubeflow.org", "MPIJob"), ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
                          ("ray.io", "RayCluster"), ("ray.io", "RayJob"), ("", "Pod")})
#: Kinds whose Kueue webhook checks pod-set groups (``ValidatePodSetGroupingTopology`` callers).
_GROUPED_KINDS = frozenset({"JobSet", "LeaderWorkerSet", "MPIJob", "RayCluster", "RayJob"})
#: The most layers the multi-layer slice annotation may have (``errTopologyConstraintsLayerCount``).
_MAX_LAYERS = 3
_INT32_MAX = 2**31 - 1
#: What Go's ``strconv.ParseBool`` accepts.
_GO_BOOLS = frozenset({"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"})

# k8s.io/apimachinery pkg/util/validation IsQualifiedName (metav1 ValidateLabelName).
_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")


def label_name_error(value: str) -> str | None:
    """Why ``value`` is not a label key (Kubernetes' qualified name: an optional DNS subdomain
    prefix of ≤ 253 characters and ``/``, then a name of ≤ 63 alphanumerics, '-', '_', '.' that
    starts and ends alphanumeric), or None when it is one."""
    if not value:
        return "must be a label key, got ''"
    prefix, sep, name = value.rpartition("/")
    shown = value if len(value) <= 80 else value[:80] + "…"
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return f"must be a label key (prefix a DNS subdomain), got {shown!r}"
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return f"must be a label key (name ≤ 63 alphanumerics, '-', '_', '.'), got {shown!r}"
    return None


# ---------------------------------------------------------------- deferred Kueue problems


@dataclass(frozen=True, slots=True)
class _Problem:
    """A Kueue annotation its webhook refuses, kept until the gang's queue is known."""

    field: str
    message: str
    value: str | None = None


_PENDING: ContextVar[list[_Problem] | None] = ContextVar("gangcheck_topology_problems", default=None)


@contextmanager
def collect_topology() -> Iterator[list[_Problem]]:
    """While active, the Kueue annotation problems ``kueue_request`` meets are collected (for
    ``finish_gang``) instead of raised. ``adapters.adapt`` opens it around a workload adapter."""
    token = _PENDING.set([])
    try:
        yield _PENDING.get()  # type: ignore[misc]
    finally:
        _PENDING.reset(token)


def _refused(field: str, message: str, value: str | None = None) -> None:
    sink = _PENDING.get()
    if sink is None:
        raise AdapterError(message, field=field)
    sink.append(_Problem(field, message, value))


def _annotation(annotations: Mapping[str, Any], key: str, field: str) -> str | None:
    """An annotation's value (annotations are strings: the API server refuses anything else).

    Raises:
        AdapterError: the value is not a string."""
    v = annotations.get(key)
    if v is None or isinstance(v, str):
        return v
    raise AdapterError(f"expected a string (annotation values are strings), got {type(v).__name__} {v!r}"[:160],
                       field=f"{field}[{key}]")


def _parse_int32(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 32)``: an optional sign and decimal digits in int32, else None."""
    if not re.fullmatch(r"[+-]?[0-9]{1,11}", text):
        return None
    v = int(text)
    return v if -(2**31) <= v <= _INT32_MAX else None


# ---------------------------------------------------------------- Kueue


def kueue_request(annotations: Mapping[str, Any], field: str, count: int | None = None) -> TopologyRequest | None:
    """The Kueue TAS request of a pod template's annotations, or None.

    Args:
        annotations: the template's ``metadata.annotations``.
        field: their path (``spec.template.metadata.annotations``), for messages.
        count: the pod set's pod count (the slice size may not exceed it), when known.

    Returns:
        ``TopologyRequest(source="kueue")``: mode required / preferred / unconstrained, ``level``,
        ``slice_level`` / ``slice_size`` (the first layer of the multi-layer annotation when that
        one is used), ``group``. None when no TAS annotation is set, or when Kueue's webhook refuses
        them (each reason is then collected, see ``collect_topology``, naming the annotation).

    Raises:
        AdapterError: an annotation value that is not a string; outside ``collect_topology``, an
            annotation Kueue refuses.
    """
    vals = {k: _annotation(annotations, k, field) for k in _KUEUE_KEYS}
    if all(v is None for v in vals.values()):
        return None
    at = lambda key: f"{field}[{key}]"  # noqa: E731
    problems = 0

    def refuse(key: str, message: str) -> None:
        nonlocal problems
        problems += 1
        _refused(at(key), message, vals.get(key))

    req, pref, unc = vals[KUEUE_REQUIRED], vals[KUEUE_PREFERRED], vals[KUEUE_UNCONSTRAINED]
    s_level, s_size, layers, group = vals[KUEUE_SLICE_REQUIRED], vals[KUEUE_SLICE_SIZE], vals[KUEUE_SLICE_CONSTRAINTS], vals[KUEUE_GROUP]
    if sum(v is not None for v in (req, pref, unc)) > 1:
        refuse(KUEUE_REQUIRED if req is not None else KUEUE_PREFERRED,
               f"must not set more than one of {KUEUE_REQUIRED}, {KUEUE_PREFERRED}, {KUEUE_UNCONSTRAINED}")
    for key, v in ((KUEUE_REQUIRED, req), (KUEUE_PREFERRED, pref), (KUEUE_SLICE_REQUIRED, s_level)):
        if v is not None and (err := label_name_error(v)):
            refuse(key, err)
    if unc is not None and unc not in _GO_BOOLS:
        refuse(KUEUE_UNCONSTRAINED, f"must be a boolean value, got {unc[:40]!r}")
    if group is not None:
        if group.isdigit():
            refuse(KUEUE_GROUP, f"must not be a number, got {group[:40]!r}")
        if s_size is not None:
            refuse(KUEUE_GROUP, f"may not be set when {KUEUE_SLICE_SIZE} is set")
        if s_level is not None:
            refuse(KUEUE_GROUP, f"may not be set when {KUEUE_SLICE_REQUIRED} is set")
        if req is None and pref is None:
            refuse(KUEUE_GROUP, f"may not be set when neither {KUEUE_PREFERRED} nor {KUEUE_REQUIRED} is set")
    size = None
    if s_size is not None:
        size = _parse_int32(s_size)
        if size is None:
            refuse(KUEUE_SLICE_SIZE, f"must be a numeric value, got {s_size[:40]!r}")
        elif size < 1:
            refuse(KUEUE_SLICE_SIZE, f"must be greater than or equal to 1, got {size}")
        elif count and size > count:  # a pod set of 0 pods (0 replicas) proves nothing
            refuse(KUEUE_SLICE_SIZE, f"must not be greater than the pod set's count {count}, got {size}")
    if s_level is not None and s_size is None:
        refuse(KUEUE_SLICE_SIZE, f"must be set when {KUEUE_SLICE_REQUIRED} is set")
    if s_level is None and s_size is not None:
        refuse(KUEUE_SLICE_SIZE, f"may not be set when {KUEUE_SLICE_REQUIRED} is not set")
    if layers is not None:
        first = _slice_layers(layers, at(KUEUE_SLICE_CONSTRAINTS), refuse, s_level is not None, s_size is not None,
                              group is not None, count)
        if first is not None:
            s_level, size = first
    if problems:
        return None
    if req is not None:
        mode, level, key = TOPOLOGY_REQUIRED, req, KUEUE_REQUIRED
    elif pref is not None:
        mode, level, key = TOPOLOGY_PREFERRED, pref, KUEUE_PREFERRED
    elif unc is not None:
        mode, level, key = TOPOLOGY_UNCONSTRAINED, None, KUEUE_UNCONSTRAINED
    else:  # slices alone: Kueue places them unconstrained from its highest level, each slice in one
        # domain of the slice level (pkg/cache/scheduler/tas_flavor_snapshot.go isSliceTopologyOnlyRequest)
        mode, level, key = TOPOLOGY_UNCONSTRAINED, None, KUEUE_SLICE_REQUIRED if layers is None else KUEUE_SLICE_CONSTRAINTS
    return TopologyRequest(source=TOPOLOGY_KUEUE, mode=mode, level=level, slice_level=s_level,
                           slice_size=size if s_level is not None else None,
                           group=group if (req is not None or pref is not None) else None, field=at(key))


def _slice_layers(text: str, field: str, refuse, slice_set: bool, size_set: bool, group_set: bool,
                  count: int | None) -> tuple[str, int] | None:
    """The multi-layer slice annotation (``validateSliceRequiredTopologyConstraintsAnnotation``):
    the first layer ``(topology, size)``, or None after refusing it. ``refuse(key, message)``."""
    key = KUEUE_SLICE_CONSTRAINTS
    bad = 0

    def no(message: str, k: str = key) -> None:
        nonlocal bad
        bad += 1
        refuse(k, message)

    if slice_set:
        no(f"may not be set when {KUEUE_SLICE_REQUIRED} is set")
    if size_set:
        no(f"may not be set when {KUEUE_SLICE_SIZE} is set")
    if group_set:
        no(f"may not be set when {key} is set", KUEUE_GROUP)
    if len(text) > 4096:
        no(f"must be a JSON array of at most {_MAX_LAYERS} layers, got {len(text)} characters")
        return None
    try:
        layers = json.loads(text)
    except ValueError as exc:
        no(f"must be a valid JSON array: {exc}"[:160])
        return None
    if not isinstance(layers, list) or not 1 <= len(layers) <= _MAX_LAYERS:
        no(f"topology constraints must contain between 1 and {_MAX_LAYERS} entries")
        return None
    seen: set[str] = set()
    parsed = []
    for i, layer in enumerate(layers):
        topo = layer.get("topology") if isinstance(layer, dict) else None
        size = layer.get("size") if isinstance(layer, dict) else None
        if not isinstance(topo, str) or (err := label_name_error(topo)):
            no(f"[{i}].topology: {'expected a label key' if not isinstance(topo, str) else err}")
            continue
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= _INT32_MAX:
            no(f"[{i}].size: must be an integer greater than or equal to 1, got {size!r}"[:160])
            continue
        if topo in seen:
            no(f"[{i}].topology: duplicated {topo!r}")
        seen.add(topo)
        parsed.append((topo, size))
    for i in range(len(parsed) - 1):
        if parsed[i][1] % parsed[i + 1][1]:
            no(f"[{i + 1}].size: must evenly divide the parent layer size {parsed[i][1]}")
    if parsed and count and parsed[0][1] > count:
        no(f"[0].size: must not be greater than the pod set's count {count}, got {parsed[0][1]}")
    return parsed[0] if parsed and not bad else None


def _group_problems(gang: GangRequest) -> list[Finding]:
    """Kueue's ``ValidatePodSetGroupingTopology`` over the gang's pod sets: exactly two per group,
    at least one of count 1, the same required/preferred level."""
    groups: dict[str, list[PodSet]] = {}
    for ps in gang.pod_sets:
        t = ps.topology
        if t is not None and t.source == TOPOLOGY_KUEUE and t.group is not None:
            groups.setdefault(t.group, []).append(ps)
    out = []
    for name, sets in groups.items():
        where = sets[0].topology.field.rsplit("[", 1)[0] + f"[{KUEUE_GROUP}]"
        reason = None
        if len(sets) != 2:
            reason = f"pod set group {name!r} has {len(sets)} pod set(s) ({', '.join(p.name for p in sets)}); Kueue accepts groups of exactly 2"
        elif sets[0].count != 1 and sets[1].count != 1:
            reason = (f"pod set group {name!r}: one of its two pod sets must have 1 pod, got {sets[0].count} "
                      f"({sets[0].name}) and {sets[1].count} ({sets[1].name})")
        elif (sets[0].topology.mode, sets[0].topology.level) != (sets[1].topology.mode, sets[1].topology.level):
            reason = (f"pod set group {name!r}: {sets[0].name} and {sets[1].name} must ask for the same "
                      f"required or preferred level")
        if reason:
            out.append(Finding(INVALID, "NeverFits", f"{where}: {reason} (Kueue's webhook refuses the object)",
                               {"source": TOPOLOGY_KUEUE, "field": where, "reason": reason, "value": name}))
    return out


# ---------------------------------------------------------------- JobSet, LWS, Volcano, KAI


def jobset_exclusive(js_annotations: Mapping[str, Any], rj_annotations: Mapping[str, Any], rj_field: str,
                     unit_size: int) -> tuple[TopologyRequest | None, bool, Finding | None]:
    """A replicatedJob's exclusive topology: ``(request, node_selector_strategy, finding)``.

    The replicatedJob's Job template annotation wins over the JobSet's (the controller writes the
    JobSet's first, then the replicatedJob's). Each child Job (``unit_size`` = its parallelism
    pods) in one domain of the level, no two child Jobs in one domain. With the node-selector
    strategy the pods tolerate ``alpha.jobset.sigs.k8s.io/no-schedule`` (``JOBSET_NO_SCHEDULE``)
    and select nodes the user labelled per domain. A key that is not a label name: the pods'
    affinity ``topologyKey`` / nodeSelector key is refused by the API server (NeverFits finding,
    no request).

    Raises:
        AdapterError: an annotation value that is not a string.
    """
    where = f"{rj_field}.metadata.annotations"
    key = _annotation(rj_annotations, JOBSET_EXCLUSIVE, where)
    strategy = key is not None and JOBSET_NODE_SELECTOR in rj_annotations
    if key is None:
        where = "metadata.annotations"
        key = _annotation(js_annotations, JOBSET_EXCLUSIVE, where)
        strategy = key is not None and JOBSET_NODE_SELECTOR in js_annotations
    if key is None:
        return None, False, None
    field = f"{where}[{JOBSET_EXCLUSIVE}]"
    err = label_name_error(key)
    if err and not strategy:
        reason = f"{err}: the pods' affinity topologyKey would be refused by the API server"
        return None, False, Finding(INVALID, "NeverFits", f"{field}: {reason}",
                                    {"source": TOPOLOGY_JOBSET, "field": field, "reason": reason, "value": key[:200]})
    if err:  # the node-selector strategy does not use the key
        return None, True, None
    return (TopologyRequest(source=TOPOLOGY_JOBSET, mode=TOPOLOGY_REQUIRED, level=key, exclusive=True,
                            unit_size=unit_size, field=field), strategy, None)


def no_schedule_toleration() -> Toleration:
    """The toleration the JobSet controller adds with the node-selector strategy."""
    return Toleration(JOBSET_NO_SCHEDULE, "Exists", "", "NoSchedule")


def lws_exclusive(annotations: Mapping[str, Any], size: int, subgroup_size: int | None, subgroup_type: str,
                  ) -> tuple[TopologyRequest | None, TopologyRequest | None, list[Finding]]:
    """A LeaderWorkerSet's exclusive topology: ``(group request, subgroup request, findings)``.

    The group request (``exclusive-topology``): each group of ``size`` pods (leader + workers) in
    one domain, no two groups in one; it goes on both pod sets. The subgroup request
    (``subgroup-exclusive-topology`` with ``subGroupPolicy.subGroupSize``): each subgroup of
    ``subgroup_size`` pods in one domain, no two subgroups in one — modelled when the subgroups
    are even (LeaderWorker with size divisible by subGroupSize: on both pod sets; LeaderExcluded:
    on the workers only); else a ``TopologyNotEnforced`` finding. An empty value is no request
    (the controller copies only a non-empty one). Subgroup exclusive topology without a subgroup
    policy: the LWS webhook refuses it (``InvalidTopologyRequest``).

    Raises:
        AdapterError: an annotation value that is not a string.
    """
    findings: list[Finding] = []
    group = sub = None
    for key, is_sub in ((LWS_EXCLUSIVE, False), (LWS_SUBGROUP_EXCLUSIVE, True)):
        v = _annotation(annotations, key, "metadata.annotations")
        field = f"metadata.annotations[{key}]"
        if is_sub and v is not None and subgroup_size is None:
            reason = "cannot have subgroup-exclusive-topology without spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
            findings.append(Finding(INVALID, "NeverFits", f"{field}: {reason} (the LeaderWorkerSet webhook refuses it)",
                                    {"source": TOPOLOGY_LWS, "field": field, "reason": reason, "value": v[:200]}))
            continue
        if not v:
            continue
        if err := label_name_error(v):
            reason = f"{err}: the pods' affinity topologyKey would be refused by the API server"
            findings.append(Finding(INVALID, "NeverFits", f"{field}: {reason}",
                                    {"source": TOPOLOGY_LWS, "field": field, "reason": reason, "value": v[:200]}))
            continue
        if not is_sub:
            group = TopologyRequest(source=TOPOLOGY_LWS, mode=TOPOLOGY_REQUIRED, level=v, exclusive=True,
                                    unit_size=size, field=field)
            continue
        assert subgroup_size is not None
        even = (subgroup_type == "LeaderExcluded" and (size - 1) % subgroup_size == 0) or \
               (subgroup_type != "LeaderExcluded" and size % subgroup_size == 0)
        if not even:
            reason = (f"subgroups of {subgroup_size} over a group of {size} pods are uneven (the leader joins the first); "
                      "their exclusive placement is not checked")
            findings.append(Finding(NOT_ENFORCED, "Info", f"{field}: {reason}",
                                    {"source": TOPOLOGY_LWS, "field": field, "reason": reason, "value": v}))
            continue
        sub = TopologyRequest(source=TOPOLOGY_LWS, mode=TOPOLOGY_REQUIRED, level=v, exclusive=True,
                              unit_size=subgroup_size, field=field)
    return group, sub, findings


def volcano_network_topology(spec: Mapping[str, Any], field: str = "spec") -> tuple[TopologyRequest | None, Finding | None]:
    """``spec.networkTopology`` of a Volcano Job or PodGroup: ``(request, finding)``.

    hard (the default) → required: the whole gang inside one HyperNode of tier ≤
    ``highestTierAllowed`` (or of the tier named ``highestTierName``); soft → preferred. Both
    limits set: Volcano's webhook refuses the object (``InvalidTopologyRequest``, no request).

    Raises:
        AdapterError: networkTopology not a mapping, a mode other than hard/soft (the CRD's enum),
            highestTierAllowed not an integer ≥ 0, highestTierName not a string.
    """
    nt = spec.get("networkTopology")
    where = f"{field}.networkTopology"
    if nt is None:
        return None, None
    if not isinstance(nt, Mapping):
        raise AdapterError(f"expected a mapping, got {type(nt).__name__}", field=where)
    mode = nt.get("mode") if nt.get("mode") not in (None, "") else "hard"
    if mode not in ("hard", "soft"):
        raise AdapterError(f"expected mode hard or soft, got {str(mode)[:40]!r}", field=f"{where}.mode")
    tier = nt.get("highestTierAllowed")
    if tier is not None and (isinstance(tier, bool) or not isinstance(tier, int) or not 0 <= tier <= _INT32_MAX):
        raise AdapterError(f"expected an integer ≥ 0, got {str(tier)[:40]!r}", field=f"{where}.highestTierAllowed")
    name = nt.get("highestTierName")
    if name is not None and not isinstance(name, str):
        raise AdapterError(f"expected a string, got {type(name).__name__}", field=f"{where}.highestTierName")
    name = name or None
    if tier is not None and name is not None:
        reason = "must not specify 'highestTierAllowed' and 'highestTierName' simultaneously"
        return None, Finding(INVALID, "NeverFits", f"{where}: {reason} (Volcano's webhook refuses it)",
                             {"source": TOPOLOGY_VOLCANO, "field": where, "reason": reason})
    return TopologyRequest(source=TOPOLOGY_VOLCANO, mode=TOPOLOGY_REQUIRED if mode == "hard" else TOPOLOGY_PREFERRED,
                           highest_tier=tier, highest_tier_name=name, field=where), None


def kai_request(annotations: Mapping[str, Any], templates: list[Any]) -> tuple[TopologyRequest | None, Finding | None]:
    """The KAI topology request of a workload's own annotations (KAI reads its top owner's).

    Required placement wins over preferred when both are set (the preferred level only orders
    nodes inside the required domain: never a denial). Only when a pod template has
    ``schedulerName: kai-scheduler``; otherwise a ``TopologyNotEnforced`` finding.

    Raises:
        AdapterError: an annotation value that is not a string.
    """
    req = _annotation(annotations, KAI_REQUIRED, "metadata.annotations")
    pref = _annotation(annotations, KAI_PREFERRED, "metadata.annotations")
    topo = _annotation(annotations, KAI_TOPOLOGY, "metadata.annotations")
    if not req and not pref:
        return None, None
    key, mode, level = (KAI_REQUIRED, TOPOLOGY_REQUIRED, req) if req else (KAI_PREFERRED, TOPOLOGY_PREFERRED, pref)
    field = f"metadata.annotations[{key}]"
    if not any(isinstance(t, Mapping) and isinstance(t.get("spec"), Mapping) and t["spec"].get("schedulerName") == KAI_SCHEDULER
               for t in templates):
        reason = f"the pods are not scheduled by {KAI_SCHEDULER} (spec.schedulerName): KAI does not place them"
        return None, Finding(NOT_ENFORCED, "Info", f"{field}: {reason}",
                             {"source": TOPOLOGY_KAI, "field": field, "reason": reason, "value": level})
    return TopologyRequest(source=TOPOLOGY_KAI, mode=mode, level=level, topology_name=topo or None, field=field), None


def with_request(ps: PodSet, request: TopologyRequest | None, findings: list[Finding]) -> PodSet:
    """``ps`` with ``request`` — unless it already has one: that one stays, and a
    ``TopologyNotEnforced`` finding says which request is not checked."""
    if request is None:
        return ps
    if ps.topology is None:
        return replace(ps, topology=request)
    reason = (f"pod set {ps.name} already asks for {ps.topology.source} topology ({ps.topology.field}); "
              f"this {request.source} request is not checked beside it")
    findings.append(Finding(NOT_ENFORCED, "Info", f"{request.field}: {reason}",
                            {"source": request.source, "field": request.field, "reason": reason, "value": request.level}))
    return ps


def without_kueue(pod_sets: list[PodSet], what: str, findings: list[Finding]) -> list[PodSet]:
    """``pod_sets`` without their Kueue requests, for a kind Kueue does not integrate (``what``:
    "Volcano Jobs"), and one ``TopologyNotEnforced`` finding naming the annotations."""
    fields = [ps.topology.field for ps in pod_sets if ps.topology is not None and ps.topology.source == TOPOLOGY_KUEUE]
    if not fields:
        return pod_sets
    reason = f"Kueue does not manage {what}: its topology annotations are not checked"
    findings.append(Finding(NOT_ENFORCED, "Info", f"{fields[0]}: {reason}",
                            {"source": TOPOLOGY_KUEUE, "field": fields[0], "fields": fields, "reason": reason}))
    return [replace(ps, topology=None) if ps.topology is not None and ps.topology.source == TOPOLOGY_KUEUE else ps
            for ps in pod_sets]


def finish_gang(gang: GangRequest, problems: list[_Problem]) -> GangRequest:
    """Settle the Kueue requests once the gang's queue is known.

    With a Kueue queue: every collected problem is an ``InvalidTopologyRequest`` (NeverFits: Kueue's
    webhook refuses the object), and so is a pod-set group Kueue refuses (JobSet, LWS, MPIJob,
    RayCluster, RayJob). Without one, or on a kind Kueue does not integrate (a Volcano Job), Kueue
    does not manage the workload: its requests are dropped and one ``TopologyNotEnforced`` finding
    names the annotations.
    """
    kueue_sets = [ps for ps in gang.pod_sets if ps.topology is not None and ps.topology.source == TOPOLOGY_KUEUE]
    if not problems and not kueue_sets:
        return gang
    findings: list[Finding] = []
    pod_sets = gang.pod_sets
    group = gang.api_version.rsplit("/", 1)[0] if "/" in gang.api_version else ""
    managed = (group, gang.kind) in _KUEUE_KINDS
    if gang.queue_name and managed:
        for p in problems:
            findings.append(Finding(INVALID, "NeverFits", f"{p.field}: {p.message} (Kueue's webhook refuses the object)",
                                    {"source": TOPOLOGY_KUEUE, "field": p.field, "reason": p.message,
                                     **({"value": p.value[:200]} if p.value is not None else {})}))
        if gang.kind in _GROUPED_KINDS:
            findings.extend(_group_problems(gang))
    else:
        fields = [ps.topology.field for ps in kueue_sets] + [p.field for p in problems]
        reason = ("the workload has no kueue.x-k8s.io/queue-name label: Kueue does not place it, so its "
                  "topology annotations are not checked") if managed else (
                  f"Kueue does not manage {gang.kind} objects of {group or 'core'}: its topology annotations "
                  "are not checked")
        findings.append(Finding(NOT_ENFORCED, "Info", f"{fields[0]}: {reason}",
                                {"source": TOPOLOGY_KUEUE, "field": fields[0], "fields": fields, "reason": reason}))
        pod_sets = tuple(replace(ps, topology=None) if ps.topology is not None and ps.topology.source == TOPOLOGY_KUEUE
                         else ps for ps in pod_sets)
    return replace(gang, pod_sets=tuple(pod_sets), findings=(*gang.findings, *findings))
