"""``parse_quantity`` against exact rational arithmetic (issue #17 item 8): a quantity is its
ceiling in scheduler units when it fits an int64, a ``QuantityOverflow`` exactly when it does not
(the rule that denies), and never an arithmetic trap, whatever the exponent."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.engine.quantity import MAX_QUANTITY, QuantityError, QuantityOverflow, parse_quantity

BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

mantissa = st.tuples(st.text("0123456789", min_size=1, max_size=22), st.text("0123456789", max_size=12))
suffix = st.one_of(st.sampled_from(sorted(BINARY) + sorted(DECIMAL)).map(lambda s: ("s", s)),
                   st.integers(-40, 40).map(lambda e: ("e", e)),
                   st.integers(-(2**31), 2**31 - 1).map(lambda e: ("e", e)))


def exact(intp: str, frac: str, suf) -> Fraction:
    v = Fraction(int(intp + frac), 10 ** len(frac))
    kind, s = suf
    if kind == "e":
        return v * Fraction(10) ** s if abs(s) < 400 else (v and (Fraction(10) ** 400 if s > 0 else Fraction(1, 10**400)))
    return v * (2 ** BINARY[s] if s in BINARY else Fraction(10) ** DECIMAL[s])


@settings(max_examples=400, deadline=None)
@given(m=mantissa, suf=suffix, resource=st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]))
def test_parse_is_the_exact_ceiling_or_an_overflow(m, suf, resource):
    intp, frac = m
    text = intp + ("." + frac if frac else "") + (f"e{suf[1]}" if suf[0] == "e" else suf[1])
    if len(text) > 64:
        return
    v = exact(intp, frac, suf) * (1000 if resource == "cpu" else 1)
    try:
        got = parse_quantity(resource, text)
    except QuantityOverflow:
        assert v > MAX_QUANTITY, text
        return
    except QuantityError as exc:
        raise AssertionError(f"{text}: {exc}")
    assert v <= MAX_QUANTITY and got == math.ceil(v), text
