"""Pod specs and pod templates → effective requests and placement constraints.

Shared by every workload adapter (templates) and by the cluster adapter (real Pods).
Rules mirror Kubernetes (FIELD-NOTES §1):

* effective request per resource = max(Σ regular containers + Σ sidecars,
  max over init containers i of (req_i + Σ sidecars declared before i)) + spec.overhead,
  as ``PodRequests`` in k8s.io/component-helpers/resource/helpers.go computes it;
  pod-level ``spec.resources.requests`` (cpu, memory, hugepages) override the container sum;
* a container's limits stand in for missing requests (the API server's defaulting at Pod
  creation; templates have not been through it yet).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..engine.model import (
    Finding,
    HostPort,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSet,
    Toleration,
    TopologyRequest,
    frozen_map,
)
from ..engine.quantity import QuantityError, QuantityOverflow, is_whole_quantity, parse_quantity
from .errors import AdapterError
from .topology import KUEUE_PREFERRED, KUEUE_REQUIRED, kueue_request

__all__ = [
    "get_path",
    "mapping",
    "list_of",
    "as_int",
    "INT32_MAX",
    "QUANTITY_OVERFLOW",
    "collect_overflows",
    "container_requests",
    "effective_requests",
    "pod_set_from_template",
    "pod_spec_constraints",
    "resource_map",
]

POD_LEVEL_RESOURCES = ("cpu", "memory")
TOPOLOGY_REQUIRED = KUEUE_REQUIRED
TOPOLOGY_PREFERRED = KUEUE_PREFERRED
HOSTNAME = "kubernetes.io/hostname"
#: The largest value of an int32 field (replicas, parallelism, minMember, …): the API server
#: refuses more ("must be less than or equal to 2147483647").
INT32_MAX = 2**31 - 1
#: Finding code of a quantity past int64 (see ``collect_overflows``).
QUANTITY_OVERFLOW = "QuantityOverflow"
#: Digit strings longer than this are not read (int() of a much longer one raises).
_MAX_DIGITS = 4000
_OVERFLOWS: ContextVar[list[Finding] | None] = ContextVar("gangcheck_quantity_overflows", default=None)


def get_path(obj: Any, path: str, default: Any = None) -> Any:
    """``obj["a"]["b"]`` for ``path == "a.b"``; ``default`` when any step is missing or null."""
    cur = obj
    for part in path.split("."):
        if not (type(cur) is dict or isinstance(cur, Mapping)) or cur.get(part) is None:
            return default
        cur = cur[part]
    return cur


def mapping(value: Any, field: str, *, required: bool = False) -> Mapping:
    """``value`` as a mapping (``None`` → ``{}`` unless ``required``).

    Raises:
        AdapterError: not a mapping, or missing while ``required``.
    """
    if type(value) is dict:  # the common case, without the ABC check
        return value
    if value is None:
        if required:
            raise AdapterError("expected a mapping, the field is missing", field=field)
        return {}
    if not isinstance(value, Mapping):
        raise AdapterError(f"expected a mapping, got {type(value).__name__}", field=field)
    return value


def list_of(value: Any, field: str, *, required: bool = False) -> list:
    """``value`` as a list (``None`` → ``[]`` unless ``required``; a required list must be non-empty).

    Raises:
        AdapterError: not a list, or missing/empty while ``required``.
    """
    if value is None:
        if required:
            raise AdapterError("expected a non-empty list, the field is missing", field=field)
        return []
    if not isinstance(value, list):
        raise AdapterError(f"expected a list, got {type(value).__name__}", field=field)
    if required and not value:
        raise AdapterError("expected a non-empty list, got []", field=field)
    return value


def as_int(value: Any, field: str, *, default: int | None = None, minimum: int = 0, maximum: int | None = None) -> int:
    """A non-negative integer field (replicas, parallelism, minAvailable…).

    A string of ASCII digits is read as its number (annotations are strings); anything else that
    is not an int (bool, float, other text) is refused.

    Raises:
        AdapterError: missing without a default, not an integer ("expected an integer from 0
            to 2147483647 (int32), got 'eight'"), below ``minimum``, or above ``maximum``
            ("1000000000000 is above the int32 maximum 2147483647").
    """
    if value is None:
        if default is None:
            raise AdapterError("expected an integer, the field is missing", field=field)
        return default
    expected = f"an integer ≥ {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}"
    if maximum == INT32_MAX:
        expected += " (int32)"
    if isinstance(value, bool) or not isinstance(value, int):
        text = value.strip() if isinstance(value, str) else None
        if text and text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS:
            value = int(text)
        elif text and text.isascii() and text.isdigit():
            raise AdapterError(f"a number of {len(text)} digits is {'above the maximum' if maximum is not None else 'too large'}",
                               field=field)
        else:
            shown = value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "…"
            raise AdapterError(f"expected {expected}, got {shown!r}", field=field)
    if value < minimum:
        raise AdapterError(f"expected {expected}, got {value}", field=field)
    if maximum is not None and value > maximum:
        # The value first (warnings are cut at 120 characters). str() of an int past 4,300
        # digits raises: describe a huge one by its size.
        shown = str(value) if value.bit_length() <= 128 else f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
        limit = f"the int32 maximum {maximum}" if maximum == INT32_MAX else f"the maximum {maximum}"
        raise AdapterError(f"{shown} is above {limit}", field=field)
    return value


@contextmanager
def collect_overflows() -> Iterator[list[Finding]]:
    """While active (in this thread / task), ``resource_map`` records a quantity past int64 as a
    NeverFits ``QuantityOverflow`` finding in the yielded list and counts it as 0 (what
    kube-scheduler's overflowing int64 makes of it on the fast path), instead of raising.

    ``adapters.adapt`` opens it around a workload adapter and adds the findings to the gang, so
    such a quantity reaches the normal decision path: the request as written can never be
    met, and the message names the field and what the scheduler would do (``QuantityOverflow``).
    Outside it (cluster objects: nodes, queues) an overflow is an ``AdapterError``.
    """
    token = _OVERFLOWS.set([])
    try:
        yield _OVERFLOWS.get()  # type: ignore[misc]
    finally:
        _OVERFLOWS.reset(token)


def resource_map(value: Any, field: str) -> dict[str, int]:
    """Parse ``{name: quantity}`` into scheduler units.

    Extended resources (names with a domain, e.g. ``nvidia.com/gpu``) must be whole numbers, as
    the API server's validation requires ("must be an integer"): ``0.5`` GPUs is an error, not 1.
    A quantity past int64 (``QuantityOverflow``) is a finding while ``collect_overflows`` is
    active (counted as 0), an error otherwise.

    Raises:
        AdapterError: not a mapping, a value that is not a quantity, or a fractional extended
            resource.
    """
    out: dict[str, int] = {}
    for name, q in mapping(value, field).items():
        name = str(name)
        where = f"{field}.{name}"
        try:
            v = out[name] = parse_quantity(name, q)
            if "/" in name and not is_whole_quantity(q):
                raise AdapterError(f"extended resources must be whole numbers, got {q!r}", field=where)
        except QuantityOverflow as exc:
            sink = _OVERFLOWS.get()
            if sink is None:  # cluster data (a node, a running pod): bad input, as any bad quantity
                raise AdapterError(f"quantity too large, got {q!r}", field=where) from None
            out[name] = 0
            sink.append(Finding(
                QUANTITY_OVERFLOW, "NeverFits",
                f"{where}: {exc.consequence()} — write the amount the pod needs",
                {"field": where, "resource": name, "quantity": exc.text, "capped": exc.capped},
            ))
        except QuantityError as exc:
            raise AdapterError(str(exc).split(": ", 1)[-1], field=where) from None
    return out


def container_requests(container: Mapping, field: str) -> dict[str, int]:
    """A container's requests, limits filling in missing requests (Pod defaulting)."""
    res = mapping(container.get("resources"), f"{field}.resources")
    reqs = resource_map(res.get("requests"), f"{field}.resources.requests")
    for name, v in resource_map(res.get("limits"), f"{field}.resources.limits").items():
        reqs.setdefault(name, v)
    return reqs


def _max_into(acc: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > acc.get(k, 0):
            acc[k] = v


def _add_into(acc: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        acc[k] = acc.get(k, 0) + v


def effective_requests(spec: Mapping, field: str = "spec") -> dict[str, int]:
    """The pod's effective request per resource (scheduler units); zero entries dropped.

    Args:
        spec: a PodSpec as a dict (a Pod's ``spec`` or a template's ``spec``).
        field: the path of ``spec`` in the object, for error messages.

    Raises:
        AdapterError: a container or quantity that cannot be read.
    """
    spec = mapping(spec, field)
    regular: dict[str, int] = {}
    for i, c in enumerate(list_of(spec.get("containers"), f"{field}.containers")):
        _add_into(regular, container_requests(mapping(c, f"{field}.containers[{i}]"), f"{field}.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(list_of(spec.get("initContainers"), f"{field}.initContainers")):
        cf = f"{field}.initContainers[{i}]"
        c = mapping(c, cf)
        reqs = container_requests(c, cf)
        if c.get("restartPolicy") == "Always":  # a sidecar: runs beside everything after it
            _add_into(sidecars, reqs)
            _max_into(init_peak, sidecars)
        else:
            step = dict(sidecars)
            _add_into(step, reqs)
            _max_into(init_peak, step)
    total = dict(regular)
    _add_into(total, sidecars)
    pod_level = resource_map(get_path(spec, "resources.requests"), f"{field}.resources.requests")
    for name in POD_LEVEL_RESOURCES:
        if name in pod_level:
            total[name] = pod_level[name]
    _max_into(total, init_peak)
    _add_into(total, resource_map(spec.get("overhead"), f"{field}.overhead"))
    return {k: v for k, v in total.items() if v > 0}


def _requirements(items: Any, field: str) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for j, e in enumerate(list_of(items, field)):
        e = mapping(e, f"{field}[{j}]")
        key, op = e.get("key"), e.get("operator")
        if not isinstance(key, str) or op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise AdapterError(
                "expected key and operator In|NotIn|Exists|DoesNotExist|Gt|Lt", field=f"{field}[{j}]"
            )
        out.append(NodeSelectorRequirement(key, op, tuple(str(v) for v in list_of(e.get("values"), f"{field}[{j}].values"))))
    return tuple(out)


def _self_anti_affinity(spec: Mapping, labels: Mapping[str, str], field: str) -> bool:
    """True when required pod anti-affinity on the hostname matches the pod's own labels."""
    terms = get_path(spec, "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution")
    for k, term in enumerate(list_of(terms, f"{field}.affinity.podAntiAffinity.required…")):
        if not isinstance(term, Mapping) or term.get("topologyKey") != HOSTNAME:
            continue
        sel = term.get("labelSelector") or {}
        match = sel.get("matchLabels") or {}
        if match and all(labels.get(a) == b for a, b in match.items()):
            exprs = sel.get("matchExpressions") or []
            if all(
                NodeSelectorRequirement(e.get("key", ""), e.get("operator", ""), tuple(e.get("values") or ())).matches(labels)
                for e in exprs
                if isinstance(e, Mapping)
            ):
                return True
        elif not match and sel.get("matchExpressions"):
            exprs = sel["matchExpressions"]
            if all(
                isinstance(e, Mapping)
                and NodeSelectorRequirement(e.get("key", ""), e.get("operator", ""), tuple(e.get("values") or ())).matches(labels)
                for e in exprs
            ):
                return True
    return False


def pod_spec_constraints(spec: Mapping, labels: Mapping[str, str] | None = None, field: str = "spec") -> dict:
    """Placement constraints of a PodSpec: node_selector, required_affinity, tolerations,
    node_name, host_ports, max_per_node (keyword arguments for ``PodSet``).

    Raises:
        AdapterError: a malformed selector, affinity term or toleration.
    """
    spec = mapping(spec, field)
    labels = labels or {}
    selector = {str(k): str(v) for k, v in mapping(spec.get("nodeSelector"), f"{field}.nodeSelector").items()}
    terms = []
    tpath = f"{field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    for i, t in enumerate(list_of(get_path(spec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"), tpath)):
        t = mapping(t, f"{tpath}[{i}]")
        terms.append(
            NodeSelectorTerm(
                _requirements(t.get("matchExpressions"), f"{tpath}[{i}].matchExpressions"),
                _requirements(t.get("matchFields"), f"{tpath}[{i}].matchFields"),
            )
        )
    tols = []
    for i, t in enumerate(list_of(spec.get("tolerations"), f"{field}.tolerations")):
        t = mapping(t, f"{field}.tolerations[{i}]")
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise AdapterError(f"expected operator Equal or Exists, got {op!r}", field=f"{field}.tolerations[{i}]")
        tols.append(Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or "")))
    ports = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(list_of(spec.get(group), f"{field}.{group}")):
            if not isinstance(c, Mapping):
                continue
            for p in list_of(c.get("ports"), f"{field}.{group}[{i}].ports"):
                if isinstance(p, Mapping) and p.get("hostPort"):
                    ports.append(HostPort(int(p["hostPort"]), str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "")))
    max_per_node = 1 if (ports or _self_anti_affinity(spec, labels, field)) else None
    return {
        "node_selector": frozen_map(selector),
        "required_affinity": tuple(terms),
        "tolerations": tuple(tols),
        "node_name": str(spec.get("nodeName") or ""),
        "host_ports": tuple(ports),
        "max_per_node": max_per_node,
        "runtime_class": spec.get("runtimeClassName") if isinstance(spec.get("runtimeClassName"), str) else "",
    }


def pod_set_from_template(name: str, template: Any, count: int, replicas: int | None = None, field: str = "template") -> PodSet:
    """Build a ``PodSet`` from a PodTemplateSpec dict (``{metadata, spec}``).

    Args:
        name: the role name (e.g. "Worker", "main").
        template: the PodTemplateSpec.
        count: pods of this role that must start together.
        replicas: pods of this role that will exist (default ``count``).
        field: path of the template in the object, for error messages.

    Raises:
        AdapterError: missing ``spec``/``containers``, or malformed requests or constraints.
    """
    template = mapping(template, field)
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        raise AdapterError("expected a pod template with a spec", field=f"{field}.spec")
    if not list_of(spec.get("containers"), f"{field}.spec.containers"):
        raise AdapterError("expected at least one container", field=f"{field}.spec.containers")
    meta = mapping(template.get("metadata"), f"{field}.metadata")
    labels = {str(k): str(v) for k, v in mapping(meta.get("labels"), f"{field}.metadata.labels").items()}
    annotations = mapping(meta.get("annotations"), f"{field}.metadata.annotations")
    return PodSet(
        name=name,
        count=count,
        replicas=replicas,
        requests=frozen_map(effective_requests(spec, f"{field}.spec")),
        topology=_kueue_topology(annotations, f"{field}.metadata.annotations", count),
        **pod_spec_constraints(spec, labels, f"{field}.spec"),
    )


def _kueue_topology(annotations: Mapping[str, Any], field: str, count: int | None = None) -> TopologyRequest | None:
    """The Kueue TAS request of a pod template's ``podset-*`` annotations, or None
    (``topology.kueue_request``: every annotation Kueue reads, with its webhook's checks)."""
    return kueue_request(annotations, field, count)
