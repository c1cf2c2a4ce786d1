"""Kubernetes resource quantities → integers in the units the scheduler compares.

Units (the same ones kube-scheduler's NodeResourcesFit uses):
  * ``cpu``: millicores (``"1.5"`` → 1500, ``"250m"`` → 250).
  * everything else (``memory``, ``ephemeral-storage``, ``hugepages-*``, ``pods`` and extended
    resources such as ``nvidia.com/gpu``): the plain value in base units (bytes, counts),
    rounded *up* to an integer, as ``resource.Quantity.Value()`` does.

Pure: no I/O. Raises :class:`QuantityError` (a ``ValueError``) for text that is not a quantity,
and its subclass :class:`QuantityOverflow` for a quantity beyond the int64 the scheduler counts
in (which the API server nevertheless stores: see the class). Every cost is bounded: text past
``MAX_QUANTITY_CHARS`` is refused, the arithmetic is exact (no rounding, no trap) at any
exponent. Mirrors ``resource.ParseQuantity`` (k8s.io/apimachinery/pkg/api/resource/quantity.go).
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["QuantityError", "QuantityOverflow", "parse_quantity", "is_whole_quantity", "format_quantity", "CPU",
           "MAX_QUANTITY", "MAX_QUANTITY_CHARS"]

CPU = "cpu"
#: Kubernetes quantities are read as an int64 by the scheduler (``resource.Quantity.Value()``,
#: ``MilliValue()`` for cpu); more does not fit (k8s.io/apimachinery/pkg/api/resource/quantity.go,
#: ``maxAllowed``).
MAX_QUANTITY = 2**63 - 1
#: Longest quantity text read. The API server sets no such limit, but no quantity that fits an
#: int64 needs more (19 digits, a fraction of nanos, a suffix); longer text is refused as bad
#: input before any arithmetic on it.
MAX_QUANTITY_CHARS = 64

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
#: Exact arithmetic on at most MAX_QUANTITY_CHARS digits (times 2^60 for Ei) at any exponent:
#: nothing rounds, nothing overflows (an exponent past int64 is an ``Infinity``, never a trap).
_CTX = decimal.Context(prec=200, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[InvalidOperation])
#: The exponent of ``<number>e<exponent>``: resource.Quantity's suffixer reads it into an int32
#: (``suffixHandler.interpret``, quantity suffix.go), so one outside int32 is not what it seems.
_EXP_RANGE = (-(2**31), 2**31 - 1)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity (e.g. ``"8 GPUs"``, ``"-1"``, ``NaN``)."""


class QuantityOverflow(QuantityError):
    """A well-formed quantity larger than the int64 the scheduler counts in.

    The API server stores such a quantity (its parser keeps any exponent), so the object is
    created; what kube-scheduler then makes of it (quantity.go): a binary-suffixed amount
    (``Ki``…``Ei``) is capped at 2^63 − 1 by ``ParseQuantity`` (``capped`` True, not for cpu),
    so no node ever has enough; any other, and cpu in millicores, makes ``Value()`` /
    ``MilliValue()`` overflow — 0 on the int64 fast path (``positiveScaleInt64`` fails), the
    low 64 bits otherwise — so the scheduler does not count what was asked and may bind the pod
    without it. ``text`` is the quantity as written.
    """

    def __init__(self, resource: str, text: str, capped: bool) -> None:
        self.resource, self.text, self.capped = resource, text, capped
        super().__init__(f"{resource}: quantity {text} is more than an int64 holds")

    def consequence(self) -> str:
        """What Kubernetes does with it, for a message: ``"<text> …: the pod would …"``."""
        if self.capped:
            return (f"{self.text} is more than the int64 Kubernetes counts quantities in; the API server caps it at "
                    "2^63-1 and no node ever has that much: the pod would stay Pending")
        return (f"{self.text} overflows the int64 Kubernetes counts quantities in; kube-scheduler would count it "
                "as 0 (or a wrapped number) and could bind the pod without it")


def parse_quantity(resource: str, value: object) -> int:
    """Parse one quantity for ``resource`` (see ``_parse``); strings are memoised."""
    if isinstance(value, str):
        return _parse_cached(resource, value)
    return _parse(resource, value)


def is_whole_quantity(value: object) -> bool:
    """True when ``value`` is a whole number of base units (API validation of extended
    resources: "must be an integer"). Raises as ``parse_quantity``."""
    number, _ = _exact("", value)
    return number == number.to_integral_value(context=_CTX)


@lru_cache(maxsize=4096)
def _parse_cached(resource: str, value: str) -> int:
    return _parse(resource, value)


def _bad(resource: str, value: object) -> QuantityError:
    shown = value if not isinstance(value, str) or len(value) <= MAX_QUANTITY_CHARS else value[:MAX_QUANTITY_CHARS] + "…"
    return QuantityError(f"{resource}: expected a quantity such as '8' or '500m', got {shown!r}")


def _exact(resource: str, value: object) -> tuple[Decimal, str]:
    """The exact value in base units (cores for cpu) and the suffix kind ("binary" or "").

    Raises:
        QuantityError: not a quantity, negative, or an exponent outside int32.
        QuantityOverflow: a JSON number too large for a double (decoded as infinity).
    """
    if isinstance(value, bool):
        raise _bad(resource, value)
    if isinstance(value, float):
        if math.isnan(value):
            raise _bad(resource, value)
        if math.isinf(value):  # JSON decoders turn a number past ~1.8e308 into infinity
            if value < 0:
                raise QuantityError(f"{resource}: quantity must not be negative, got {value!r}")
            raise QuantityOverflow(resource, "a number past 1.8e308", False)
        number, kind = Decimal(repr(value)), ""
    elif isinstance(value, int):
        number, kind = Decimal(value), ""
    elif isinstance(value, str):
        if len(value) > MAX_QUANTITY_CHARS:
            raise QuantityError(f"{resource}: expected a quantity of at most {MAX_QUANTITY_CHARS} characters, "
                                f"got {len(value)}")
        m = _RE.match(value.strip())
        if not m:
            raise _bad(resource, value)
        number, kind = Decimal(m.group(1)), ""
        if m.group(2):
            exp = int(m.group(2)[1:])  # at most MAX_QUANTITY_CHARS digits
            if not _EXP_RANGE[0] <= exp <= _EXP_RANGE[1]:
                raise QuantityError(f"{resource}: exponent out of range in {value!r} "
                                    "(the API server reads it as a 32-bit number)")
            number = number.scaleb(exp, context=_CTX)
        elif m.group(3):
            suffix = m.group(3)
            if suffix in _BINARY:
                number, kind = _CTX.multiply(number, Decimal(_BINARY[suffix])), "binary"
            else:
                number = _CTX.multiply(number, _DECIMAL[suffix])
    else:
        raise _bad(resource, value)
    if number < 0:
        raise QuantityError(f"{resource}: quantity must not be negative, got {value!r}")
    return number, kind


def _parse(resource: str, value: object) -> int:
    """Parse one quantity for ``resource``.

    Args:
        resource: the resource name; ``"cpu"`` selects millicores, any other name base units.
        value: a string such as ``"8"``, ``"250m"``, ``"900Gi"``, ``"1e3"`` or an int/float.

    Returns:
        A non-negative int ≤ ``MAX_QUANTITY``: millicores for cpu, otherwise base units
        rounded up (as ``Quantity.Value()`` / ``MilliValue()`` round away from zero).

    Raises:
        QuantityOverflow: more than ``MAX_QUANTITY`` (for cpu: in millicores).
        QuantityError: ``value`` is not a quantity, is negative, NaN, longer than
            ``MAX_QUANTITY_CHARS`` or has an exponent outside int32.
    """
    number, kind = _exact(resource, value)
    if not number:
        return 0
    if resource == CPU:
        number = _CTX.multiply(number, Decimal(1000))
    if not number.is_finite() or number > MAX_QUANTITY:
        text = value if isinstance(value, str) else repr(value)
        if isinstance(value, float) and math.isinf(value):
            text = "a number past 1.8e308"
        raise QuantityOverflow(resource, text.strip(), kind == "binary" and resource != CPU)
    return int(number.to_integral_value(rounding=decimal.ROUND_CEILING, context=_CTX))


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
