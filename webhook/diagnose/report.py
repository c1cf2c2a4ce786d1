"""The model of a ``gangcheck diagnose`` report: what the analysis (``analyze``) found and the
renderers (``render_text``, ``render_json``) print. Owns the shapes, not the analysis nor the wording
of the text lines (the steps' ``meaning`` sentences are facts the analysis states, so they live here).

Frozen dataclasses, one per step (``QuotaStep``, ``FitStep``, ``NodesStep``, ``DevicePluginStep``,
``PartialGangsStep``, ``TopologyStep`` when a pod set requires one topology domain, and
``AutoscalerStep`` when the cluster shows an autoscaler), each with its question, the kubectl command a person would run, the facts
found (one field per key of the step's JSON ``findings``), what they mean and a status ("ok",
"blocking", "info"); ``DiagnosisReport`` holds the gang, the cluster, the decision,
the steps, the one-line verdict and the ranked fixes.

``to_dict()`` is the JSON document (``gangcheck diagnose -o json``: key order and presence are the
contract); ``from_dict()`` reads one back (``render_diagnosis`` accepts either). A fact the document
leaves out (e.g. the Kueue keys of a Volcano queue) is ``ABSENT``, which is not ``None`` (a key
present with the value null). Units: GPUs are device counts, other resources scheduler units
(millicores, bytes); times epoch seconds. Fixes stay the JSON dicts of
``webhook.engine.fixes.Fix.to_dict()`` (the engine owns their shape).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

__all__ = [
    "ABSENT", "SAMPLES", "Record", "Step", "QuotaStep", "FitStep", "NodesStep", "DevicePluginStep", "PartialGangsStep",
    "AutoscalerStep", "TopologyStep", "STEP_TYPES", "OPTIONAL_STEP_TYPES", "ALL_STEP_TYPES",
    "GangSummary", "ClusterSummary", "DecisionSummary", "DiagnosisReport",
]

#: How many sample names (nodes, gangs) a sentence of a report names.
SAMPLES = 3


class _Absent:
    """The type of ``ABSENT``: a fact the JSON document leaves out."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Record:
    """Fields that are the keys of a JSON object, in order; an ``ABSENT`` field is left out."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: present fields in declaration order."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not ABSENT:
                out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        """Read the JSON object back; a key not in it is ``ABSENT``, keys without a field are ignored."""
        return cls(**{f.name: d.get(f.name, ABSENT) for f in fields(cls)})

    def get(self, name: str, default: Any = None) -> Any:
        """The field ``name``, or ``default`` when it is absent."""
        v = getattr(self, name)
        return default if v is ABSENT else v

    def has(self, name: str) -> bool:
        """Whether the document carries ``name`` (its value may be None)."""
        return getattr(self, name) is not ABSENT


#: The fields every step has; a step class's other fields are its facts (the JSON ``findings``).
_STEP_FIELDS = ("command", "meaning", "status", "question")


@dataclass(frozen=True, kw_only=True)
class Step(Record):
    """One step of the isolation order: ``name`` and ``question`` (what a person asks), ``command``
    (what they would run to see it), ``meaning`` (one paragraph), ``status`` ("ok", "blocking",
    "info"); a subclass per step adds the facts found, one field per key of the JSON ``findings``."""

    name: ClassVar[str] = ""
    command: str
    meaning: str
    status: str
    question: str = ""

    def findings(self) -> dict[str, Any]:
        """The facts as the JSON ``findings``: present fields in declaration order."""
        return {k: v for k, v in super().to_dict().items() if k not in _STEP_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """The step as the JSON document has it: name, question, command, findings, meaning, status."""
        return {"name": self.name, "question": self.question, "command": self.command, "findings": self.findings(),
                "meaning": self.meaning, "status": self.status}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        """The step of ``d["name"]`` read back from its JSON form."""
        typ = ALL_STEP_TYPES[d["name"]]
        facts = d["findings"]
        return typ(question=d["question"], command=d["command"], meaning=d["meaning"], status=d["status"],
                   **{f.name: facts.get(f.name, ABSENT) for f in fields(typ) if f.name not in _STEP_FIELDS})


@dataclass(frozen=True, kw_only=True)
class QuotaStep(Step):
    """Step 1: can the gang's queue ever hold it, and can it now? ``system`` is "kueue",
    "volcano" or None (no queue).

    Kueue: ``local_queue`` ("ns/name"), ``cluster_queue`` (None when the LocalQueue names none),
    ``request`` {resource: amount}, ``limits`` {flavor: {resource: {nominal, borrowing_limit,
    maximum, usage}}} of the flavors assigned; when the ClusterQueue is known
    ``pending_workloads``, ``admitted_workloads``, ``queueing_strategy``, ``preemption``;
    ``ahead`` {gang: {pods, gpus, priority}} (≤10) and ``ahead_total``; with Workloads in the
    snapshot the keys of ``kueue_workloads`` (``own_workload``, ``workloads_ahead``,
    ``workloads_ahead_total``, ``holding``). Volcano: ``queue``, ``request``, ``capability``,
    ``allocated``, ``state``. Any system: ``orphan_pod_groups`` ["ns/name"], ``orphan_reserved``.
    """

    name: ClassVar[str] = "quota"
    system: str | None = ABSENT
    local_queue: str = ABSENT
    cluster_queue: str | None = ABSENT
    queue: str = ABSENT
    request: dict[str, int] = ABSENT
    limits: dict[str, dict[str, dict[str, int | None]]] = ABSENT
    capability: dict[str, int] = ABSENT
    allocated: dict[str, int] = ABSENT
    state: str | None = ABSENT
    pending_workloads: int = ABSENT
    admitted_workloads: int = ABSENT
    queueing_strategy: str = ABSENT
    preemption: dict[str, Any] = ABSENT
    ahead: dict[str, dict[str, int]] = ABSENT
    ahead_total: int = ABSENT
    own_workload: dict[str, str] | None = ABSENT
    workloads_ahead: dict[str, dict[str, Any]] = ABSENT
    workloads_ahead_total: int = ABSENT
    holding: dict[str, Any] = ABSENT
    orphan_pod_groups: list[str] = ABSENT
    orphan_reserved: dict[str, int] = ABSENT


@dataclass(frozen=True, kw_only=True)
class FitStep(Step):
    """Step 2: how many nodes can take one of its pods now, and how many does it need?

    The main pod set against the nodes (every fact absent for a gang without pods): ``pod_set``,
    ``per_pod`` {resource: amount}, ``pods_needed``, ``own_pods_bound``, node counts
    (``nodes_total``, ``nodes_eligible_now``, ``nodes_eligible_ever``, ``nodes_fit_now``),
    ``pods_placeable_now``, ``deficit`` (pods without a node now); with a GPU resource
    ``gpu_resource``, ``gpus_free_cluster``, ``gpus_free_eligible``, ``gpus_stranded`` (free on
    eligible nodes that cannot take one pod), ``stranded_ratio`` (0..1, 4 decimals), ``gpus_needed``."""

    name: ClassVar[str] = "fit"
    pod_set: str = ABSENT
    per_pod: dict[str, int] = ABSENT
    pods_needed: int = ABSENT
    own_pods_bound: int = ABSENT
    nodes_total: int = ABSENT
    nodes_eligible_now: int = ABSENT
    nodes_eligible_ever: int = ABSENT
    nodes_fit_now: int = ABSENT
    pods_placeable_now: int = ABSENT
    deficit: int = ABSENT
    gpu_resource: str = ABSENT
    gpus_free_cluster: int = ABSENT
    gpus_free_eligible: int = ABSENT
    gpus_stranded: int = ABSENT
    stranded_ratio: float = ABSENT
    gpus_needed: int = ABSENT


@dataclass(frozen=True, kw_only=True)
class TopologyStep(Step):
    """Is there one topology domain with room for the pod set? (#13; only for a pod set with a
    required level, after ``fit``; ``webhook.diagnose.topology``.)

    ``pod_set``, ``source`` (kueue, kai, …), ``level`` (node label key), ``keys`` (the label keys
    identifying a domain, top → level), ``topology`` (the Topology object, None when unknown),
    ``group`` (Kueue podset-group-name or None), ``pods_needed``, ``domains_total``,
    ``domains_fit_ever`` / ``domains_fit_now`` (domains whose nodes could hold every pod when
    repaired and empty / on their free resources now), ``best_domain`` (the closest: able to
    hold it ever, then most pods now), ``best_domain_pods_now``, ``best_domain_pods_ever``,
    ``pods_fit_now_cluster`` / ``nodes_fit_now_cluster`` (the whole cluster, for contrast),
    ``nodes_outside`` (nodes that could take a pod but lack a level label), ``domains`` (the
    first ``DOMAINS_SHOWN``, closest first: {domain, pods_now, pods_ever, nodes_now,
    nodes_ever}), ``engine_finding`` (the engine's TopologyPlacementFailed {code, severity,
    message, data} or None)."""

    name: ClassVar[str] = "topology"
    pod_set: str = ABSENT
    source: str = ABSENT
    level: str = ABSENT
    keys: list[str] = ABSENT
    topology: str | None = ABSENT
    group: str | None = ABSENT
    pods_needed: int = ABSENT
    domains_total: int = ABSENT
    domains_fit_ever: int = ABSENT
    domains_fit_now: int = ABSENT
    best_domain: str | None = ABSENT
    best_domain_pods_now: int = ABSENT
    best_domain_pods_ever: int = ABSENT
    pods_fit_now_cluster: int = ABSENT
    nodes_fit_now_cluster: int = ABSENT
    nodes_outside: int = ABSENT
    domains: list[dict[str, Any]] = ABSENT
    engine_finding: dict[str, Any] | None = ABSENT


@dataclass(frozen=True, kw_only=True)
class NodesStep(Step):
    """Step 3: why does each node refuse a pod (kube-scheduler's wording)? kube-scheduler's
    ``summary`` line, ``reasons`` {reason: nodes} and ``samples`` {reason: [node]}."""

    name: ClassVar[str] = "nodes"
    summary: str = ABSENT
    reasons: dict[str, int] = ABSENT
    samples: dict[str, list[str]] = ABSENT


@dataclass(frozen=True, kw_only=True)
class DevicePluginStep(Step):
    """Step 4: does one node's device plugin hide GPUs? ``nodes_with_problems``,
    ``eligible_nodes_with_problems`` (eligible ever for the gang) and ``nodes``: the first 10
    entries of ``device_plugin_findings`` shown (the eligible ones when any)."""

    name: ClassVar[str] = "device-plugin"
    nodes_with_problems: int = ABSENT
    eligible_nodes_with_problems: int = ABSENT
    nodes: list[dict[str, Any]] = ABSENT


@dataclass(frozen=True, kw_only=True)
class PartialGangsStep(Step):
    """Step 5: do partially started gangs hold resources without progress? ``partial_gangs``
    (the first 10 of ``partial_gangs``), ``partial_gangs_total``, ``deadlocks`` [[gang, gang]],
    ``own_bound`` / ``own_pending`` (the gang's own pods)."""

    name: ClassVar[str] = "partial-gangs"
    partial_gangs: list[dict[str, Any]] = ABSENT
    partial_gangs_total: int = ABSENT
    deadlocks: list[list[str]] = ABSENT
    own_bound: int = ABSENT
    own_pending: int = ABSENT


@dataclass(frozen=True, kw_only=True)
class AutoscalerStep(Step):
    """Which node autoscalers could add nodes for it, and what stops them? (#16; only when the
    cluster shows an autoscaler or the policy declares one, after ``nodes``.)

    ``enabled`` (False: the policy turns autoscaling off; then only ``sources_total`` and
    ``summary`` follow), ``sources_total``, ``summary`` (a phrase for the verdict line, "" when
    none), ``pods_missing`` (pods of the main shape with no room on the nodes now), ``required``
    (the existing nodes can never hold the gang: it cannot start without new nodes), ``matching`` (labels of
    the sources the main pod set may use, "NodePool gpu-h100"), ``sources`` (the first 10, in
    Karpenter's order: {name, kind, label ("NodePool gpu-h100"), origin, weight, matches [pod set], mismatches {pod set:
    [reason]}, limits, in_use, remaining {resource: amount}, max_new_nodes, nodes, pending
    (NodeClaims not Ready), node_shape, provisioning_s, pods_room (main shape; null =
    unbounded), pods_assigned, nodes_needed, commands [str]}), ``provisioning`` {p50_s, p90_s,
    basis}, ``provisioning_requests`` (the gang's, first 10: {namespace, name, class, pods,
    state, message, owner, means}), ``provisioning_requests_total``, ``notes`` [str]."""

    name: ClassVar[str] = "autoscaler"
    enabled: bool = ABSENT
    sources_total: int = ABSENT
    summary: str = ABSENT
    pods_missing: int = ABSENT
    required: bool = ABSENT
    matching: list[str] = ABSENT
    sources: list[dict[str, Any]] = ABSENT
    provisioning: dict[str, Any] = ABSENT
    provisioning_requests: list[dict[str, Any]] = ABSENT
    provisioning_requests_total: int = ABSENT
    notes: list[str] = ABSENT


#: Step name → its class, in the isolation order: the steps every report has.
STEP_TYPES: dict[str, type[Step]] = {t.name: t for t in (QuotaStep, FitStep, NodesStep, DevicePluginStep, PartialGangsStep)}
#: Steps a report has only when the gang or the cluster calls for them (``TopologyStep``: a pod set
#: with a required topology level; ``AutoscalerStep``: an autoscaler), with every step: what
#: ``Step.from_dict`` reads back.
OPTIONAL_STEP_TYPES: dict[str, type[Step]] = {TopologyStep.name: TopologyStep, AutoscalerStep.name: AutoscalerStep}
ALL_STEP_TYPES: dict[str, type[Step]] = {**STEP_TYPES, **OPTIONAL_STEP_TYPES}


# ---------------------------------------------------------------- the report


@dataclass(frozen=True)
class GangSummary(Record):
    """The gang diagnosed: ``kind``, ``api_version``, ``namespace``, ``name``, ``pods``, ``queue``
    (Kueue LocalQueue or Volcano queue), ``priority``, ``pod_sets`` [{name, count, requests}];
    ``found``: how the CLI found it (absent from ``diagnose()``)."""

    kind: str
    api_version: str | None
    namespace: str
    name: str
    pods: int
    queue: str | None
    priority: int
    pod_sets: list[dict[str, Any]]
    found: str = ABSENT


@dataclass(frozen=True)
class ClusterSummary(Record):
    """The cluster data: ``source`` (a path, "demo", "live" or None), ``nodes``, ``pods`` (counts)."""

    source: str | None
    nodes: int
    pods: int


@dataclass(frozen=True)
class DecisionSummary(Record):
    """The engine's decision: ``verdict`` ("Running" for a gang whose pods are all bound, else the
    engine's), ``reasons`` (codes), ``message``."""

    verdict: str
    reasons: list[str]
    message: str


@dataclass(frozen=True)
class DiagnosisReport:
    """One gang's diagnosis: ``gang``, ``cluster``, ``now`` (epoch seconds or None), ``decision``,
    ``steps`` (the five in order, the topology step after ``fit`` and the autoscaler step after
    ``nodes`` when there are),
    ``verdict`` (one line), ``fixes`` (``Fix.to_dict()``s, ranked);
    set by the CLI: ``invocation`` (the command printing it as JSON) and ``notes`` (skipped documents)."""

    gang: GangSummary
    cluster: ClusterSummary
    now: float | None
    decision: DecisionSummary
    steps: Sequence[Step]
    verdict: str
    fixes: Sequence[Mapping[str, Any]]
    invocation: Any = ABSENT
    notes: Any = ABSENT

    def step(self, name: str) -> Step | None:
        """The step called ``name``, None when the report has none."""
        return next((s for s in self.steps if s.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: gang, cluster, now, decision, steps, verdict, fixes[, invocation][, notes]."""
        out = {"gang": self.gang.to_dict(), "cluster": self.cluster.to_dict(), "now": self.now,
               "decision": self.decision.to_dict(), "steps": [s.to_dict() for s in self.steps],
               "verdict": self.verdict, "fixes": list(self.fixes)}
        if self.invocation is not ABSENT:
            out["invocation"] = self.invocation
        if self.notes is not ABSENT:
            out["notes"] = self.notes
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DiagnosisReport:
        """Read a JSON document (``to_dict()``'s shape) back into the model."""
        return cls(gang=GangSummary.from_dict(d["gang"]), cluster=ClusterSummary.from_dict(d["cluster"]), now=d.get("now"),
                   decision=DecisionSummary.from_dict(d["decision"]), steps=tuple(Step.from_dict(s) for s in d["steps"]),
                   verdict=d["verdict"], fixes=tuple(d["fixes"]), invocation=d.get("invocation", ABSENT),
                   notes=d.get("notes", ABSENT))
