"""cluster-autoscaler's status text (ConfigMap ``kube-system/cluster-autoscaler-status``, key
``status``) → its node groups' sizes.

Owns: ``parse_ca_status`` and the two formats cluster-autoscaler has written there:

* **YAML** (cluster-autoscaler 1.30 and later): the ``ClusterAutoscalerStatus`` struct of
  ``cluster-autoscaler/clusterstate/api/types.go`` marshalled as YAML — ``time``,
  ``autoscalerStatus``, ``clusterWide``, and ``nodeGroups[]`` each with ``name`` and
  ``health: {status, nodeCounts: {registered: {total, ready, notStarted, …}, unregistered,
  longUnregistered}, cloudProviderTarget, minSize, maxSize}`` (upstream's own fixture:
  ``clusterstate/utils/status_test.yaml``).
* **Legacy text** (before 1.30): ``Cluster-autoscaler status at <time>:`` (the prefix
  ``clusterstate/utils/status.go`` ``WriteStatusConfigMap`` adds), then
  ``ClusterAutoscalerStatus.GetReadableString`` (``clusterstate/api/utils.go``): a
  ``Cluster-wide:`` block, then ``NodeGroups:`` and per group ``  Name:        <id>`` and
  ``  Health:      Healthy (ready=3 unready=0 notStarted=0 longNotStarted=0 registered=3
  longUnregistered=0 cloudProviderTarget=3 (minSize=1, maxSize=5))`` — the message
  ``clusterstate.go`` ``buildHealthStatusNodeGroup`` formats.

Text in neither format is not an error: the result says why it was not read
(``CAStatus.note``), for ``AutoscalingState.notes``. Bounded: at most ``MAX_STATUS_CHARS`` of
text and ``MAX_GROUPS`` groups are read. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["NodeGroupSize", "CAStatus", "parse_ca_status", "MAX_STATUS_CHARS", "MAX_GROUPS"]

#: Longer status text is not read (a note says so): a ConfigMap holds at most 1 MiB of data.
MAX_STATUS_CHARS = 1 << 20
#: libyaml's loader when PyYAML has it (cluster-autoscaler rewrites the status every scan,
#: 10 s by default: 500 groups are ~170 KB, 2.5 s with the pure-Python loader).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: At most this many node groups are read.
MAX_GROUPS = 10_000

_PREFIX = re.compile(r"\ACluster-autoscaler status at [^\n]*:\n")
#: ``  Name:        <id>`` of a legacy group (``GetReadableString``).
_LEGACY_NAME = re.compile(r"^\s+Name:\s+(\S.*?)\s*$")
#: The group's Health line: ``  Health:      <status> (… cloudProviderTarget=N (minSize=A, maxSize=B))``.
_LEGACY_HEALTH = re.compile(r"^\s+Health:\s+(\w+)\s*\((.*)\)\s*$")
_LEGACY_SIZES = re.compile(r"cloudProviderTarget=(\d+)\s*\(minSize=(\d+),\s*maxSize=(\d+)\)")
_LEGACY_COUNT = re.compile(r"\b(ready|notStarted|registered)=(\d+)")


@dataclass(frozen=True, slots=True)
class NodeGroupSize:
    """One node group as the status shows it: ``target`` (``cloudProviderTarget``, the size
    asked of the cloud), ``min_size`` / ``max_size``, ``ready`` registered Ready nodes, and
    ``pending`` nodes asked for and not Ready yet (not started + unregistered); ``health``
    ("Healthy", "Unhealthy", "" when not shown)."""

    name: str
    target: int
    min_size: int
    max_size: int
    ready: int = 0
    pending: int = 0
    health: str = ""


@dataclass(frozen=True, slots=True)
class CAStatus:
    """What a status ConfigMap says: its ``groups``, the ``format`` read ("yaml", "legacy",
    or "" when none), and ``note``: why (part of) it was not read, "" when all was."""

    groups: tuple[NodeGroupSize, ...] = ()
    format: str = ""
    note: str = ""


def _count(value: Any) -> int | None:
    """A non-negative integer count, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _yaml_group(i: int, g: Any) -> NodeGroupSize | str:
    """One ``nodeGroups[i]`` entry → ``NodeGroupSize``, or the reason it cannot be read."""
    where = f"nodeGroups[{i}]"
    if not isinstance(g, Mapping):
        return f"{where}: expected a mapping"
    name = g.get("name")
    if not isinstance(name, str) or not name:
        return f"{where}.name: expected a non-empty string"
    health = g.get("health") if isinstance(g.get("health"), Mapping) else {}
    sizes = {}
    for key in ("cloudProviderTarget", "minSize", "maxSize"):
        v = _count(health.get(key))
        if v is None:
            return f"{where}.health.{key}: expected a non-negative integer, got {health.get(key)!r}"
        sizes[key] = v
    counts = health.get("nodeCounts") if isinstance(health.get("nodeCounts"), Mapping) else {}
    reg = counts.get("registered") if isinstance(counts.get("registered"), Mapping) else {}
    ready = _count(reg.get("ready")) or 0
    pending = (_count(reg.get("notStarted")) or 0) + (_count(counts.get("unregistered")) or 0)
    status = health.get("status")
    return NodeGroupSize(name, sizes["cloudProviderTarget"], sizes["minSize"], sizes["maxSize"], ready, pending,
                         status if isinstance(status, str) else "")


def _parse_yaml(doc: Mapping) -> CAStatus:
    groups = doc.get("nodeGroups")
    if groups is None:
        groups = []
    if not isinstance(groups, list):
        return CAStatus(format="yaml", note="nodeGroups: expected a list")
    out: list[NodeGroupSize] = []
    problems: list[str] = []
    for i, g in enumerate(groups[:MAX_GROUPS]):
        r = _yaml_group(i, g)
        if isinstance(r, str):
            problems.append(r)
        else:
            out.append(r)
    if len(groups) > MAX_GROUPS:
        problems.append(f"{len(groups) - MAX_GROUPS} node groups past the first {MAX_GROUPS} not read")
    return CAStatus(tuple(out), "yaml", "; ".join(problems[:5]))


def _parse_legacy(text: str) -> CAStatus:
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "NodeGroups:")
    except StopIteration:
        return CAStatus(format="legacy")  # a cluster-wide block only: no node groups
    out: list[NodeGroupSize] = []
    problems: list[str] = []
    name: str | None = None
    for line in lines[start + 1:]:
        m = _LEGACY_NAME.match(line)
        if m:
            if name is not None:
                problems.append(f"node group {name}: no Health line with cloudProviderTarget, minSize and maxSize")
            name = m.group(1)
            continue
        m = _LEGACY_HEALTH.match(line)
        if m and name is not None:
            sizes = _LEGACY_SIZES.search(m.group(2))
            if sizes is None:
                problems.append(f"node group {name}: no cloudProviderTarget=N (minSize=A, maxSize=B) in its Health line")
            else:
                counts = {k: int(v) for k, v in _LEGACY_COUNT.findall(m.group(2))}
                target, lo, hi = (int(x) for x in sizes.groups())
                pending = counts.get("notStarted", 0) + max(0, target - counts.get("registered", target))
                out.append(NodeGroupSize(name, target, lo, hi, counts.get("ready", 0), pending, m.group(1)))
            name = None
            if len(out) >= MAX_GROUPS:
                problems.append(f"node groups past the first {MAX_GROUPS} not read")
                break
    if name is not None:
        problems.append(f"node group {name}: no Health line with cloudProviderTarget, minSize and maxSize")
    return CAStatus(tuple(out), "legacy", "; ".join(problems[:5]))


def parse_ca_status(text: Any) -> CAStatus:
    """The ``status`` text of cluster-autoscaler's status ConfigMap → ``CAStatus``.

    Never raises: text in neither format (or not text) gives no groups and a ``note`` saying
    what was expected. A group whose sizes cannot be read is left out with a note.
    """
    if not isinstance(text, str) or not text.strip():
        return CAStatus(note="no status text (data.status is missing or empty)")
    if len(text) > MAX_STATUS_CHARS:
        return CAStatus(note=f"status text of {len(text):,} characters not read (more than {MAX_STATUS_CHARS:,})")
    body = _PREFIX.sub("", text, count=1)
    if re.search(r"^NodeGroups:\s*$", body, re.MULTILINE) or body.lstrip().startswith("Cluster-wide:"):
        return _parse_legacy(body)
    try:
        doc = yaml.load(body, Loader=_LOADER)  # noqa: S506 — a safe loader
    except (yaml.YAMLError, RecursionError):
        doc = None
    if isinstance(doc, Mapping) and ("nodeGroups" in doc or "clusterWide" in doc or "autoscalerStatus" in doc):
        return _parse_yaml(doc)
    if body.strip() == "Initializing":  # what cluster-autoscaler writes before its first loop
        return CAStatus(note="cluster-autoscaler is initializing (no node groups shown yet)")
    return CAStatus(note="status text in a format not understood (expected cluster-autoscaler's YAML status with "
                         "nodeGroups, or the older text with NodeGroups: / Name: / Health: lines)")
