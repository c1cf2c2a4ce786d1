"""PodDisruptionBudgets (policy/v1) → ``DisruptionBudget``, and label selectors.

``gangcheck diagnose`` ranks displacing fixes first by the PodDisruptionBudgets their evictions
would violate (FIELD-NOTES §7); this module reads the budgets, ``engine.fixes`` counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.model import DisruptionBudget, LabelSelector
from .meta import object_name, object_namespace, object_ref
from .errors import AdapterError
from .podspec import as_int, list_of, mapping

__all__ = ["disruption_budget_from_k8s", "label_selector"]

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(value: Any, field: str) -> LabelSelector | None:
    """A metav1.LabelSelector dict → ``LabelSelector``; None for a null selector.

    Raises:
        AdapterError: not a mapping, a matchLabels value that is not a string, an unknown
            operator, In/NotIn without values, or Exists/DoesNotExist with values.
    """
    if value is None:
        return None
    sel = mapping(value, field)
    labels = mapping(sel.get("matchLabels"), f"{field}.matchLabels")
    pairs = []
    for k, v in labels.items():
        if not isinstance(v, str):
            raise AdapterError(f"expected a string label value, got {v!r}", field=f"{field}.matchLabels.{k}")
        pairs.append((str(k), v))
    exprs = []
    for i, e in enumerate(list_of(sel.get("matchExpressions"), f"{field}.matchExpressions")):
        ef = f"{field}.matchExpressions[{i}]"
        e = mapping(e, ef)
        key, op = e.get("key"), e.get("operator")
        if not isinstance(key, str) or not key:
            raise AdapterError("expected a label key", field=f"{ef}.key")
        if op not in _OPERATORS:
            raise AdapterError(f"expected one of {', '.join(_OPERATORS)}, got {op!r}", field=f"{ef}.operator")
        values = tuple(str(v) for v in list_of(e.get("values"), f"{ef}.values"))
        if op in ("In", "NotIn") and not values:
            raise AdapterError(f"operator {op} needs at least one value", field=f"{ef}.values")
        if op in ("Exists", "DoesNotExist") and values:
            raise AdapterError(f"operator {op} takes no values", field=f"{ef}.values")
        exprs.append((key, op, values))
    return LabelSelector(tuple(sorted(pairs)), tuple(exprs))


def _int_or_percent(value: Any, field: str) -> int | str | None:
    """An IntOrString of a budget: a non-negative int, or "N%" with 0 ≤ N ≤ 100 (the API
    server's PodDisruptionBudget validation)."""
    if value is None:
        return None
    if isinstance(value, str) and not value.strip().isdigit():
        num = value.strip()[:-1] if value.strip().endswith("%") else None
        if num is None or not num.isdigit():
            raise AdapterError(f"expected an integer or a percentage such as 50%, got {value!r}", field=field)
        if int(num) > 100:
            raise AdapterError(f"expected a percentage of at most 100%, got {value!r}", field=field)
        return f"{int(num)}%"
    return as_int(value, field)


def disruption_budget_from_k8s(obj: Mapping) -> DisruptionBudget:
    """A policy/v1 PodDisruptionBudget → ``DisruptionBudget`` (spec.selector, spec.minAvailable,
    spec.maxUnavailable, status.disruptionsAllowed when the object carries a status).

    Raises:
        AdapterError: no metadata.name, a bad selector, minAvailable/maxUnavailable that are
            neither a non-negative integer nor a percentage ≤ 100%, or both set; names the
            object and the field.
    """
    try:
        spec = mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        allowed = status.get("disruptionsAllowed")
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            raise AdapterError("minAvailable and maxUnavailable are both set; the API server accepts only one",
                               field="spec.maxUnavailable")
        return DisruptionBudget(
            namespace=object_namespace(obj),
            name=object_name(obj),
            selector=label_selector(spec.get("selector"), "spec.selector"),
            min_available=_int_or_percent(spec.get("minAvailable"), "spec.minAvailable"),
            max_unavailable=_int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable"),
            disruptions_allowed=None if allowed is None else as_int(allowed, "status.disruptionsAllowed"),
        )
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
