"""Small wording helpers shared by every message (pure; no I/O)."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: object, noun: str) -> str:
    """``"1 pod"``, ``"12 pods"``: a count and its noun pluralised with "s" (the nouns gangcheck
    counts — pod, node, GPU, gang, group — all pluralise so). ``n`` is printed as given."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
