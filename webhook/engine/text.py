"""Small wording helpers shared by every message (pure; no I/O)."""

from __future__ import annotations

__all__ = ["plural", "kind_label"]


def plural(n: object, noun: str) -> str:
    """``"1 pod"``, ``"12 pods"``: a count and its noun pluralised with "s" (the nouns gangcheck
    counts — pod, node, GPU, gang, group — all pluralise so). ``n`` is printed as given."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


#: Kinds whose name alone is ambiguous, by API group: how to show them.
_KIND_LABELS = {
    ("batch.volcano.sh", "Job"): "Volcano Job",
    ("scheduling.volcano.sh", "PodGroup"): "Volcano PodGroup",
    ("scheduling.x-k8s.io", "PodGroup"): "coscheduling PodGroup",
}


def kind_label(kind: object, api_version: object = "") -> str:
    """``kind`` as a person should read it: ``Volcano Job`` for a batch.volcano.sh Job (not a
    batch/v1 Job), ``Volcano PodGroup`` / ``coscheduling PodGroup`` for the two PodGroups;
    other kinds unchanged."""
    group = str(api_version or "").rpartition("/")[0]
    return _KIND_LABELS.get((group, str(kind)), str(kind))
