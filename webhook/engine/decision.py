"""The engine's output: a ``Decision`` (verdict, reasons, numbers), JSON-ready via ``to_dict``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model import Finding

__all__ = ["FITS", "WAITS", "NEVER_FITS", "Decision"]

FITS, WAITS, NEVER_FITS = "Fits", "Waits", "NeverFits"


@dataclass
class Decision:
    """What the engine decided about one gang.

    Attributes:
        verdict: "Fits" (can start now, with a placement), "Waits" (feasible ever, not now,
            or not proven either way), "NeverFits" (proven impossible under the current
            configuration; the only verdict that may deny).
        reasons: finding codes, most important first, without duplicates.
        message: what a user should read, one paragraph.
        warnings: short lines (≤120 characters) for admission warnings, most important first.
        findings: every ``Finding`` behind the verdict.
        gang: kind, name, namespace, pods, pod_sets (per-pod requests), queue.
        nodes: total, eligible, fit_now, fit_ever, reasons (histogram), samples, summary.
        quota: the queue layer's report, None when the gang uses no queue gangcheck knows.
        fragmentation: free / stranded GPUs, ratio, deficit for the gang's main pod shape.
        placement: pod set → [[node, pods], ...] proving Fits (now) or feasibility (ever).
        expected_wait: ``WaitEstimate.as_dict()`` (seconds) for a Waits verdict when the caller
            gave the time; None otherwise.
        topology: pod set → its topology request and the best domain now (source, mode, level,
            domains, needed_pods, best_domain, best_domain_pods, best_domain_nodes_free,
            deficit_pods, deficit_nodes; ``engine.topology.report``), for pod sets with a topology
            request; None when none has one.
    """

    verdict: str
    reasons: list[str]
    message: str
    warnings: list[str]
    findings: list[Finding]
    gang: dict[str, Any]
    nodes: dict[str, Any]
    quota: dict[str, Any] | None = None
    fragmentation: dict[str, Any] | None = None
    placement: dict[str, Any] = field(default_factory=dict)
    expected_wait: dict[str, Any] | None = None
    topology: dict[str, Any] | None = None

    @property
    def allowed(self) -> bool:
        """False only for NeverFits."""
        return self.verdict != NEVER_FITS

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``--output json`` document)."""
        return {
            "verdict": self.verdict,
            "allowed": self.allowed,
            "reasons": list(self.reasons),
            "message": self.message,
            "warnings": list(self.warnings),
            "findings": [
                {"code": f.code, "severity": f.severity, "message": f.message, "data": dict(f.data)}
                for f in self.findings
            ],
            "gang": self.gang,
            "nodes": self.nodes,
            "quota": self.quota,
            "fragmentation": self.fragmentation,
            "placement": self.placement,
            "expected_wait": self.expected_wait,
            "topology": self.topology,
        }
