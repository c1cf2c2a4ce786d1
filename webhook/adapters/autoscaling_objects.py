"""Node autoscalers' objects → what each says, one object at a time: Karpenter NodePools and
NodeClaims (karpenter.sh/v1), cluster-autoscaler's status ConfigMap, ProvisioningRequests
(autoscaling.x-k8s.io/v1).

Owns the per-object readers (``nodepool_from_k8s``, ``nodeclaim_from_k8s``,
``ca_status_from_k8s``, ``provisioning_request_from_k8s``) and the records they return
(``NodePoolObject``, ``NodeClaimObject``, ``CAStatusObject``). Does not own how they combine
with the cluster's Nodes into ``AutoscalingState`` (``autoscaling_state``), the status text's
formats (``ca_status``), nor any verdict (``webhook.engine.autoscale``).

Sources (kubernetes-sigs/karpenter, pkg/apis/v1): ``nodepool.go`` (NodePoolSpec:
``template.metadata.labels``, ``template.spec.requirements`` — NodeSelectorRequirementWithMinValues,
operators In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte —, ``template.spec.taints`` /
``startupTaints``, ``limits`` (a ResourceList; ``nodes`` counts nodes), ``weight`` 1–100,
``replicas`` for a static pool), ``nodepool_status.go`` (``status.resources``: what the pool's
nodes hold, by pkg/controllers/nodepool/counter), ``nodeclaim_status.go`` (``status.nodeName``,
``capacity``; conditions Launched, Registered, Initialized and Ready over them), ``labels.go``
(``karpenter.sh/nodepool``). kubernetes/autoscaler cluster-autoscaler/apis/provisioningrequest/
autoscaling.x-k8s.io/v1/types.go (``spec.provisioningClassName``, ``spec.podSets[].count``;
conditions Accepted, Provisioned, Failed, BookingExpired, CapacityRevoked).

Units: resource amounts in scheduler units (``webhook.engine.quantity``, as Node allocatable),
times in seconds since the epoch. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine.autoscale.model import NODEPOOL_LABEL, ProvisioningRequestInfo
from ..engine.model import NodeSelectorRequirement, Taint
from .ca_status import CAStatus, parse_ca_status
from .errors import AdapterError
from .meta import object_name, object_namespace, object_ref, parse_time, str_map
from .nodes import read_taints
from .podspec import as_int, get_path, list_of, mapping, resource_map

__all__ = [
    "KARPENTER",
    "AUTOSCALING_X_K8S",
    "CA_STATUS_NAMESPACE",
    "CA_STATUS_NAME",
    "NodePoolObject",
    "NodeClaimObject",
    "CAStatusObject",
    "nodepool_from_k8s",
    "nodepool_or_unreadable",
    "nodeclaim_from_k8s",
    "is_ca_status",
    "ca_status_from_k8s",
    "provisioning_request_from_k8s",
    "read_requirements",
]

#: API groups: Karpenter's, and the one of ProvisioningRequests (kubernetes/autoscaler).
KARPENTER = "karpenter.sh"
AUTOSCALING_X_K8S = "autoscaling.x-k8s.io"
#: Where cluster-autoscaler writes its status (clusterstate/utils/status.go StatusConfigMapName;
#: its --status-config-map-name flag defaults to it, in the namespace it runs in).
CA_STATUS_NAMESPACE = "kube-system"
CA_STATUS_NAME = "cluster-autoscaler-status"

#: Labels Karpenter puts on a node once it registered / initialized (pkg/apis/v1/labels.go).
REGISTERED_LABEL = "karpenter.sh/registered"
INITIALIZED_LABEL = "karpenter.sh/initialized"

_SET_OPS = ("In", "NotIn")
_NO_VALUE_OPS = ("Exists", "DoesNotExist")
_NUMBER_OPS = ("Gt", "Lt", "Gte", "Lte")
#: ProvisioningRequest conditions, in the order the one shown is chosen (the outcome first).
_PR_STATES = ("Provisioned", "Failed", "CapacityRevoked", "BookingExpired", "Accepted")


def read_requirements(value: Any, field: str) -> tuple[NodeSelectorRequirement, ...]:
    """A ``[]NodeSelectorRequirementWithMinValues`` → ``NodeSelectorRequirement``s (``minValues``
    ignored: it only asks Karpenter for variety among instance types).

    Validation as Karpenter's CRD states it (nodeclaim.go): In/NotIn need values, Exists/
    DoesNotExist none, Gt/Lt/Gte/Lte exactly one integer.

    Raises:
        AdapterError: not a list, an entry without a key, an unknown operator, or values that
            do not fit the operator (the field names the entry).
    """
    out = []
    for i, r in enumerate(list_of(value, field)):
        where = f"{field}[{i}]"
        r = mapping(r, where)
        key = r.get("key")
        if not isinstance(key, str) or not key:
            raise AdapterError("expected a non-empty label key", field=f"{where}.key")
        op = r.get("operator")
        if op not in _SET_OPS + _NO_VALUE_OPS + _NUMBER_OPS:
            raise AdapterError(f"expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte, got {op!r}",
                               field=f"{where}.operator")
        values = tuple("" if v is None else str(v) for v in list_of(r.get("values"), f"{where}.values"))
        if op in _SET_OPS and not values:
            raise AdapterError(f"expected at least one value for operator {op}", field=f"{where}.values")
        if op in _NO_VALUE_OPS and values:
            raise AdapterError(f"expected no values for operator {op}, got {list(values)}", field=f"{where}.values")
        if op in _NUMBER_OPS:
            if len(values) != 1:
                raise AdapterError(f"expected exactly one integer value for operator {op}, got {list(values)}",
                                   field=f"{where}.values")
            try:
                int(values[0])
            except ValueError:
                raise AdapterError(f"expected an integer for operator {op}, got {values[0]!r}",
                                   field=f"{where}.values[0]") from None
        out.append(NodeSelectorRequirement(key, op, values))
    return tuple(out)


def _mapping_at(obj: Mapping, path: str) -> Mapping:
    """The mapping at dotted ``path`` ({} when a step is missing or null).

    Raises:
        AdapterError: a step that is not a mapping (the field names that step).
    """
    cur: Mapping = obj
    parts = path.split(".")
    for i, part in enumerate(parts):
        cur = mapping(cur.get(part), ".".join(parts[: i + 1]))
    return cur


@dataclass(frozen=True, slots=True)
class NodePoolObject:
    """A NodePool as read: its template (``requirements``; ``labels``: the template's and those
    Karpenter adds to every node it launches — ``karpenter.sh/nodepool``, ``karpenter.sh/registered``,
    ``karpenter.sh/initialized``, the NodeClass's ``<group>/<kind>``; ``taints``,
    ``startup_taints``), ``limits`` (scheduler units; ``nodes`` a count), ``weight`` (0 when
    unset), ``replicas`` (a static pool's fixed size; None for a dynamic pool) and
    ``status_resources`` (``status.resources``; None when the status does not show them)."""

    name: str
    requirements: tuple[NodeSelectorRequirement, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Mapping[str, int] = field(default_factory=dict)
    weight: int = 0
    replicas: int | None = None
    status_resources: Mapping[str, int] | None = None
    #: why the NodePool could not be read ("" when it was): see ``nodepool_or_unreadable``.
    error: str = ""


def nodepool_from_k8s(obj: Mapping) -> NodePoolObject:
    """A karpenter.sh NodePool → ``NodePoolObject``.

    Raises:
        AdapterError: no metadata.name, a requirement, label map, taint or quantity that
            cannot be read, a weight outside 0–100 or a negative replicas (the field is named).
    """
    try:
        name = object_name(obj)
        spec = _mapping_at(obj, "spec")
        tspec = _mapping_at(obj, "spec.template.spec")
        tmeta = _mapping_at(obj, "spec.template.metadata")
        status = _mapping_at(obj, "status")
        replicas = spec.get("replicas")
        # what every node of the pool carries besides the template's labels (karpenter
        # pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go NewNodeClaimTemplate)
        labels = {**str_map(tmeta.get("labels"), "spec.template.metadata.labels"), NODEPOOL_LABEL: name,
                  REGISTERED_LABEL: "true", INITIALIZED_LABEL: "true"}
        ref = _mapping_at(obj, "spec.template.spec.nodeClassRef")
        if isinstance(ref.get("group"), str) and isinstance(ref.get("kind"), str) and isinstance(ref.get("name"), str):
            labels[f"{ref['group']}/{ref['kind'].lower()}"] = ref["name"]  # labels.go NodeClassLabelKey
        return NodePoolObject(
            name=name,
            requirements=read_requirements(tspec.get("requirements"), "spec.template.spec.requirements"),
            labels=labels,
            taints=read_taints(tspec.get("taints"), "spec.template.spec.taints"),
            startup_taints=read_taints(tspec.get("startupTaints"), "spec.template.spec.startupTaints"),
            limits=resource_map(spec.get("limits"), "spec.limits"),
            weight=as_int(spec.get("weight"), "spec.weight", default=0, maximum=100),
            replicas=None if replicas is None else as_int(replicas, "spec.replicas"),
            status_resources=None if status.get("resources") is None
            else resource_map(status.get("resources"), "status.resources"),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


def nodepool_or_unreadable(obj: Mapping) -> NodePoolObject:
    """``nodepool_from_k8s``, or — for a NodePool with a name that cannot be read otherwise —
    a ``NodePoolObject`` carrying only its name and ``error``. The live cache keeps such a pool
    (``autoscaling_state`` takes it as able to add any node): a NodePool gangcheck cannot read
    is still one Karpenter may provision from, and dropping it could deny a gang it would serve.

    Raises:
        AdapterError: no metadata.name (the object cannot be keyed).
    """
    try:
        return nodepool_from_k8s(obj)
    except AdapterError as exc:
        return NodePoolObject(name=object_name(obj), error=str(exc))


@dataclass(frozen=True, slots=True)
class NodeClaimObject:
    """A NodeClaim as read: its ``nodepool`` (label ``karpenter.sh/nodepool``; "" when none),
    ``node_name`` (``status.nodeName``, "" before registration), ``capacity`` (``status.capacity``,
    scheduler units), ``created`` / ``ready_at`` (creationTimestamp, the Ready condition's
    lastTransitionTime, epoch seconds or None), ``ready`` (Ready is True) and ``deleting``
    (a deletionTimestamp is set)."""

    name: str
    nodepool: str = ""
    node_name: str = ""
    capacity: Mapping[str, int] = field(default_factory=dict)
    created: float | None = None
    ready: bool = False
    ready_at: float | None = None
    deleting: bool = False

    @property
    def provisioning_s(self) -> float | None:
        """Seconds from creation to Ready, when both are known and Ready is True."""
        if not self.ready or self.created is None or self.ready_at is None or self.ready_at < self.created:
            return None
        return self.ready_at - self.created


def nodeclaim_from_k8s(obj: Mapping) -> NodeClaimObject:
    """A karpenter.sh NodeClaim → ``NodeClaimObject``.

    Raises:
        AdapterError: no metadata.name, labels that are not a map, a capacity quantity or a
            timestamp that cannot be read (the field is named).
    """
    try:
        name = object_name(obj)
        meta = mapping(obj.get("metadata"), "metadata")
        status = mapping(obj.get("status"), "status")
        labels = str_map(meta.get("labels"), "metadata.labels")
        ready, ready_at = False, None
        for i, c in enumerate(list_of(status.get("conditions"), "status.conditions")):
            c = mapping(c, f"status.conditions[{i}]")
            if c.get("type") == "Ready":
                ready = c.get("status") == "True"
                ready_at = parse_time(c.get("lastTransitionTime"), f"status.conditions[{i}].lastTransitionTime")
        node_name = status.get("nodeName")
        if node_name is not None and not isinstance(node_name, str):
            raise AdapterError(f"expected a string, got {type(node_name).__name__}", field="status.nodeName")
        return NodeClaimObject(
            name=name,
            nodepool=labels.get(NODEPOOL_LABEL, ""),
            node_name=node_name or "",
            capacity=resource_map(status.get("capacity"), "status.capacity"),
            created=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            ready=ready,
            ready_at=ready_at,
            deleting=meta.get("deletionTimestamp") not in (None, ""),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))


@dataclass(frozen=True, slots=True)
class CAStatusObject:
    """cluster-autoscaler's status ConfigMap: the parsed ``status`` and where it was read
    (``"kube-system/cluster-autoscaler-status"``)."""

    status: CAStatus
    origin: str = f"{CA_STATUS_NAMESPACE}/{CA_STATUS_NAME}"


def is_ca_status(obj: Mapping) -> bool:
    """True for the ConfigMap kube-system/cluster-autoscaler-status (any other is not read)."""
    return (get_path(obj, "metadata.name") == CA_STATUS_NAME
            and get_path(obj, "metadata.namespace") == CA_STATUS_NAMESPACE)


def ca_status_from_k8s(obj: Mapping) -> CAStatusObject:
    """The status ConfigMap → ``CAStatusObject``. Never raises for its contents: a ``data``
    that is not a map, or a ``status`` text in no known format, gives no groups and a note."""
    data = obj.get("data") if isinstance(obj, Mapping) else None
    text = data.get("status") if isinstance(data, Mapping) else None
    status = parse_ca_status(text)
    if not isinstance(data, Mapping) and data is not None:
        status = CAStatus(note=f"data: expected a map of strings, got {type(data).__name__}")
    return CAStatusObject(status)


def provisioning_request_from_k8s(obj: Mapping) -> ProvisioningRequestInfo:
    """An autoscaling.x-k8s.io ProvisioningRequest → ``ProvisioningRequestInfo``.

    ``state``: the first of Provisioned, Failed, CapacityRevoked, BookingExpired, Accepted whose
    condition is True ("" when none); ``owner``: "Kind/name" of the first ownerReference
    (Kueue's Workload), "" when none.

    Raises:
        AdapterError: no metadata.name, a podSets entry whose count is not an integer ≥ 0,
            or conditions / ownerReferences that are not lists (the field is named).
    """
    try:
        name = object_name(obj)
        namespace = object_namespace(obj)
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        pods = 0
        for i, ps in enumerate(list_of(spec.get("podSets"), "spec.podSets")):
            ps = mapping(ps, f"spec.podSets[{i}]")
            pods += as_int(ps.get("count"), f"spec.podSets[{i}].count", default=0, maximum=2**31 - 1)
        true_conditions: dict[str, str] = {}
        for i, c in enumerate(list_of(status.get("conditions"), "status.conditions")):
            c = mapping(c, f"status.conditions[{i}]")
            if c.get("status") == "True" and isinstance(c.get("type"), str):
                true_conditions[c["type"]] = str(c.get("message") or "")
        state = next((s for s in _PR_STATES if s in true_conditions), "")
        owner = ""
        for i, ref in enumerate(list_of(get_path(obj, "metadata.ownerReferences"), "metadata.ownerReferences")):
            if isinstance(ref, Mapping) and ref.get("kind") and ref.get("name"):
                owner = f"{ref['kind']}/{ref['name']}"
                break
        class_name = spec.get("provisioningClassName")
        return ProvisioningRequestInfo(
            namespace=namespace,
            name=name,
            class_name=class_name if isinstance(class_name, str) else "",
            pods=pods,
            state=state,
            message=true_conditions.get(state, "") if state else "",
            owner=owner,
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
