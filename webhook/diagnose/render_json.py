"""The JSON renderers: ``gangcheck diagnose -o json`` and ``gangcheck fragmentation -o json``.

The document of one diagnosis is ``DiagnosisReport.to_dict()`` (``webhook.diagnose.report`` owns
its shape; ``diagnose()`` returns it); several gangs print as a list of them. Owns only the
serialisation (2-space indent; values JSON cannot hold, e.g. a numpy scalar, as ``str``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .report import DiagnosisReport

__all__ = ["render_diagnosis_json", "render_fragmentation_json"]


def render_diagnosis_json(reports: Sequence[DiagnosisReport | Mapping[str, Any]]) -> str:
    """One report as a JSON object, several as a list (in the order given)."""
    docs = [r.to_dict() if isinstance(r, DiagnosisReport) else r for r in reports]
    return json.dumps(docs[0] if len(docs) == 1 else docs, indent=2, default=str)


def render_fragmentation_json(rep: Mapping[str, Any]) -> str:
    """The ``fragmentation`` dict as JSON."""
    return json.dumps(rep, indent=2)
