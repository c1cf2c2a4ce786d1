"""Kubernetes resource quantities → integers in the units the scheduler compares.

Units (the same ones kube-scheduler's NodeResourcesFit uses):
  * ``cpu``: millicores (``"1.5"`` → 1500, ``"250m"`` → 250).
  * everything else (``memory``, ``ephemeral-storage``, ``hugepages-*``, ``pods`` and extended
    resources such as ``nvidia.com/gpu``): the plain value in base units (bytes, counts),
    rounded *up* to an integer, as ``resource.Quantity.Value()`` does.

Pure: no I/O. Raises :class:`QuantityError` (a ``ValueError``) for text that is not a quantity.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["QuantityError", "parse_quantity", "format_quantity", "CPU"]

CPU = "cpu"
#: Kubernetes quantities fit in an int64 (resource.Quantity's scaled value); larger is nonsense.
MAX_QUANTITY = 2**63 - 1

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity (e.g. ``"8 GPUs"``, ``"-1"``)."""


def parse_quantity(resource: str, value: object) -> int:
    """Parse one quantity for ``resource`` (see ``_parse``); strings are memoised."""
    if isinstance(value, str):
        return _parse_cached(resource, value)
    return _parse(resource, value)


@lru_cache(maxsize=4096)
def _parse_cached(resource: str, value: str) -> int:
    return _parse(resource, value)


def _parse(resource: str, value: object) -> int:
    """Parse one quantity for ``resource``.

    Args:
        resource: the resource name; ``"cpu"`` selects millicores, any other name base units.
        value: a string such as ``"8"``, ``"250m"``, ``"900Gi"``, ``"1e3"`` or an int/float.

    Returns:
        A non-negative int: millicores for cpu, otherwise base units rounded up.

    Raises:
        QuantityError: ``value`` is not a quantity, or is negative.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{resource}: expected a quantity such as '8' or '500m', got {value!r}")
    if isinstance(value, (int, float)):
        number = Decimal(str(value))
    elif isinstance(value, str):
        m = _RE.match(value.strip())
        if not m:
            raise QuantityError(f"{resource}: expected a quantity such as '8' or '500m', got {value!r}")
        try:
            number = Decimal(m.group(1))
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
            raise QuantityError(f"{resource}: bad number {value!r}") from exc
        if m.group(2):
            number = number * (Decimal(10) ** int(m.group(2)[1:]))
        elif m.group(3):
            suffix = m.group(3)
            number = number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])
    else:
        raise QuantityError(f"{resource}: expected a quantity such as '8' or '500m', got {value!r}")
    if number < 0:
        raise QuantityError(f"{resource}: quantity must not be negative, got {value!r}")
    if resource == CPU:
        number = number * 1000
    if not number.is_finite() or number > MAX_QUANTITY:
        raise QuantityError(f"{resource}: quantity too large, got {value!r}")
    return int(math.ceil(number))


def format_quantity(resource: str, value: int) -> str:
    """Render an engine integer for people: cpu in cores ("91.25"), memory in Gi/Mi, others plain."""
    if resource == CPU:
        if value % 1000 == 0:
            return str(value // 1000)
        return f"{value / 1000:g}"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size:
                shown = value / size
                return f"{shown:.1f}{suffix}".replace(".0" + suffix, suffix)
        return str(value)
    return str(value)
