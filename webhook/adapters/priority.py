"""PriorityClasses (scheduling.k8s.io/v1) and how a Pod's priority resolves from them.

Owns: ``priority_class_from_k8s``, the built-in system classes every API server creates, and
``class_priority`` — the Priority admission plugin's rule for a pod without spec.priority (the
named class's value, else the built-in class of that name, else the globalDefault class's value).
``pods.pod_from_k8s`` and the fast ``pod_reader`` both resolve through it. Does not own the
order in which a snapshot reads classes before pods (``snapshot_builder``).

Priorities are plain signed integers (higher is more important). Pure: no I/O.
Upstream: kubernetes/kubernetes pkg/apis/scheduling/types.go (system classes),
plugin/pkg/admission/priority/admission.go (resolution).
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import AdapterError
from .meta import bool_field, object_name, object_ref, signed_int

__all__ = ["SYSTEM_PRIORITY_CLASSES", "class_priority", "priority_class_from_k8s"]

#: The built-in PriorityClasses every API server creates (pkg/apis/scheduling/types.go).
SYSTEM_PRIORITY_CLASSES: Mapping[str, int] = {
    "system-cluster-critical": 2000000000,
    "system-node-critical": 2000001000,
}


def class_priority(class_name: str, classes: Mapping[str, int], default_priority: int) -> int:
    """The priority of a pod whose spec.priorityClassName is ``class_name`` (non-empty) and
    which has no spec.priority: ``classes[class_name]``, else the built-in system class of that
    name, else ``default_priority`` (an unknown name falls back to the default)."""
    return classes.get(class_name, SYSTEM_PRIORITY_CLASSES.get(class_name, default_priority))


def priority_class_from_k8s(obj: Mapping) -> tuple[str, int, bool]:
    """A scheduling.k8s.io/v1 PriorityClass → ``(name, value, globalDefault)``.

    Raises:
        AdapterError: no name, or a value that is not an integer.
    """
    try:
        name = object_name(obj)
        value = obj.get("value")
        if value is None:
            raise AdapterError("expected an integer, the field is missing", field="value")
        return name, signed_int(value, "value"), bool_field(obj.get("globalDefault"), "globalDefault", False)
    except AdapterError as exc:
        raise exc.within(obj=object_ref(obj))
