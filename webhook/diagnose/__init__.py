"""``gangcheck diagnose`` and ``gangcheck fragmentation``: why a gang is Pending, in the order an
expert isolates it, and what to do about it (FIELD-NOTES §4–§7). The package's public face.

Steps of ``diagnose`` (each: name, question, the kubectl command a person would run, what
gangcheck found — numbers —, and what it means): 1. quota, 2. fit, 3. nodes (per-node reasons),
4. device-plugin, 5. partial-gangs (with a topology step after 2 when a pod set requires one
topology domain, #13, and an autoscaler step after 3 when the cluster shows a node autoscaler, #16); then a one-line verdict and the fixes ranked by displacement
(``webhook.engine.fixes``).

Rooms:

* ``report`` — the model: one frozen dataclass per step, ``DiagnosisReport``; ``to_dict`` is the JSON.
* ``analyze`` — the order of the steps, fit and per-node reasons, the verdict line (``diagnose``,
  ``diagnose_report``); ``quota``, ``device_plugin``, ``partial_gangs`` — steps 1, 4, 5;
  ``autoscaler`` — the autoscaler step (NodePools, node groups, ProvisioningRequests);
  ``topology`` — the topology step (per domain of a required level, the pods that fit now and ever).
* ``render_text`` / ``render_json`` — the two renderers of the model (and of fragmentation).
* ``fragmentation`` — the fragmentation report for one pod shape, ``parse_shape``; ``by_domain`` —
  the same per topology domain (``fragmentation --by LEVEL``, the per-domain gauges).
* ``targets`` — KIND/NAME → a gang (``find_gang``); ``command`` — the CLI commands (the I/O).

``diagnose()`` and ``fragmentation()`` are pure (no I/O, no clock: ``now`` is an argument);
``cmd_diagnose`` / ``cmd_fragmentation`` do the I/O for the CLI.
"""

from __future__ import annotations

from .analyze import diagnose, diagnose_report
from .by_domain import domain_fragmentation
from .command import _options, add_commands, cmd_diagnose, cmd_fragmentation  # _options: tests
from .device_plugin import DEVICE_PLUGIN_NAMESPACES, device_plugin_findings
from .fragmentation import fragmentation, parse_shape
from .partial_gangs import partial_gangs
from .quota import kueue_workloads
from .render_json import render_diagnosis_json, render_fragmentation_json
from .render_text import render_diagnosis, render_domain_fragmentation, render_fragmentation
from .report import DiagnosisReport
from .targets import TargetNotFound, find_gang, gang_from_pods

__all__ = [
    "diagnose",
    "render_diagnosis",
    "fragmentation",
    "render_fragmentation",
    "domain_fragmentation",
    "render_domain_fragmentation",
    "parse_shape",
    "gang_from_pods",
    "find_gang",
    "cmd_diagnose",
    "cmd_fragmentation",
    "add_commands",
    "DEVICE_PLUGIN_NAMESPACES",
    "TargetNotFound",
    "kueue_workloads",
    "partial_gangs",
    "device_plugin_findings",
    "diagnose_report",
    "DiagnosisReport",
    "render_diagnosis_json",
    "render_fragmentation_json",
]
