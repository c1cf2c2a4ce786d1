"""The admin's policy: ConfigMap ``gangcheck-policy`` key ``policy.yaml`` (or ``--policy FILE``).

A pydantic schema; every field has a default, so ``{}`` is the default policy. An empty
document (nothing, whitespace, only comments, ``~``/``null``) is *not* a policy: it is what a
torn or unfinished write leaves, and reading it as "all defaults" would switch a ``mode: warn``
webhook to enforce. :func:`parse_policy` refuses it (and the reloader keeps the last good one).
``Policy.engine_options()`` hands the engine the plain knobs it needs (the engine itself never
imports pydantic, DESIGN.md layers).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from .engine.autoscale.model import AutoscalingPolicy, PolicyPool
from .engine.evaluate import DEFAULT_GPU_RESOURCES, EngineOptions
from .engine.model import Taint, frozen_map
from .engine.quantity import QuantityError, is_whole_quantity, parse_quantity

__all__ = ["Policy", "PolicyError", "load_policy", "parse_policy"]

#: A label key (apimachinery validation.IsQualifiedName): [DNS subdomain "/"] name, the name
#: 1–63 alphanumerics, '-', '_', '.', starting and ending alphanumeric.
_LABEL_KEY = re.compile(r"^(?:(?=.{1,253}/)[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class PolicyError(ValueError):
    """A policy that cannot be used; the message names the field and what was expected.

    ``code`` says which kind of problem, for /readyz and metrics (no file text in it):
    ``empty``, ``invalid_yaml``, ``not_a_mapping``, ``invalid_field``, ``not_utf8``,
    ``unreadable``, ``missing`` (the ConfigMap or its key is gone), ``invalid`` (other).
    """

    def __init__(self, message: str, code: str = "invalid") -> None:
        super().__init__(message)
        self.code = code


class _PolicyTaint(BaseModel):
    """A taint new nodes of a policy pool carry (core/v1 Taint: key, value, effect)."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1)
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class _PolicyNodePool(BaseModel):
    """One ``autoscaling.nodePools`` entry (see ``Policy``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[_PolicyTaint] = Field(default_factory=list)
    max_nodes: StrictInt | None = Field(default=None, ge=0, le=1_000_000, alias="maxNodes")
    node_shape: dict[str, Any] | None = Field(default=None, alias="nodeShape")
    provisioning_seconds: float | None = Field(default=None, gt=0, le=7 * 86400, allow_inf_nan=False, strict=True,
                                               alias="provisioningSeconds")

    @field_validator("node_shape")
    @classmethod
    def _quantities(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        """Every value a quantity (``8``, ``"1500m"``, ``"64Gi"``); extended resources whole."""
        for resource, q in (v or {}).items():
            if isinstance(q, bool) or not isinstance(q, (str, int, float)):
                raise ValueError(f"{resource}: expected a quantity such as 8, '1500m' or '64Gi', got {q!r}")
            try:
                parse_quantity(resource, q)
                whole = is_whole_quantity(q)
            except QuantityError as exc:
                raise ValueError(str(exc)) from None
            if "/" in resource and not whole:
                raise ValueError(f"{resource}: extended resources must be whole numbers, got {q!r}")
        return v

    def engine_pool(self) -> PolicyPool:
        """The engine's ``PolicyPool`` (node shape in scheduler units)."""
        shape = None if self.node_shape is None else frozen_map({r: parse_quantity(r, q) for r, q in self.node_shape.items()})
        return PolicyPool(
            name=self.name,
            labels=frozen_map(self.labels),
            taints=tuple(Taint(t.key, t.value, t.effect) for t in self.taints),
            max_nodes=self.max_nodes,
            node_shape=shape,
            provisioning_s=self.provisioning_seconds,
        )


class _PolicyAutoscaling(BaseModel):
    """The ``autoscaling`` section (see ``Policy``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = Field(default=True, strict=True)
    assume_scale_up: bool = Field(default=False, strict=True, alias="assumeScaleUp")
    provisioning_seconds: float = Field(default=300.0, gt=0, le=7 * 86400, allow_inf_nan=False, strict=True,
                                        alias="provisioningSeconds")
    node_pools: list[_PolicyNodePool] = Field(default_factory=list, max_length=1000, alias="nodePools")

    @field_validator("node_pools")
    @classmethod
    def _unique(cls, v: list[_PolicyNodePool]) -> list[_PolicyNodePool]:
        seen: set[str] = set()
        for p in v:
            if p.name in seen:
                raise ValueError(f"expected each name once, {p.name!r} is listed twice")
            seen.add(p.name)
        return v

    def engine_policy(self) -> AutoscalingPolicy:
        """The engine's ``AutoscalingPolicy``."""
        return AutoscalingPolicy(
            enabled=self.enabled,
            assume_scale_up=self.assume_scale_up,
            provisioning_s=float(self.provisioning_seconds),
            pools=tuple(p.engine_pool() for p in self.node_pools),
        )


class Policy(BaseModel):
    """gangcheck's policy. Fields (all optional):

    - ``mode``: ``enforce`` (deny NeverFits), ``warn`` (admit NeverFits with a warning),
      ``audit`` (admit everything; annotations and metrics only). Default enforce.
    - ``gpuResources``: accelerator resource names or shell patterns (``nvidia.com/mig-*``).
    - ``transientTaints``: taint keys or shell patterns (``example.com/*``) treated as repairable,
      like cordon: never grounds for a denial. They *extend* the shipped list
      (``engine.model.DEFAULT_TRANSIENT_TAINTS``: ``node.kubernetes.io/*``,
      ``node.cloudprovider.kubernetes.io/*``, cluster-autoscaler's, Karpenter's, …), which
      always applies: a taint the system clears by itself can never become permanent by policy.
    - ``extendedResourceToleration``: the API server runs the ExtendedResourceToleration
      admission plugin (GKE, AKS do): each pod tolerates NoSchedule taints keyed by an extended
      resource it requests (``nvidia.com/gpu=present:NoSchedule``). Default true.
    - ``podTolerationRestriction``: the API server runs PodTolerationRestriction, so namespaces
      may add default tolerations gangcheck does not read: no taint is grounds for a denial.
      Default false.
    - ``plainJobsAsGangs``: treat workloads whose pods are scheduled one by one (a batch Job
      without Kueue TopologyAwareScheduling or a gang policy, a RayCluster without a batch
      scheduler) as all-or-nothing gangs — for clusters where they are (Kueue with
      waitForPodsReady). Default false: only what no single pod can ever do is denied.
    - ``exemptNamespaces``: namespaces never checked (admitted unchanged).
    - ``annotationPrefix``: prefix of the annotations /mutate adds. Default ``gangcheck.io/``.
    - ``staleAfterSeconds``: cache age past which the webhook fails open. Default 120 s.
    - ``warnFragmentationRatio``: warn when stranded/free GPUs for the gang's shape ≥ this (0–1).
    - ``warnExpectedWaitSeconds``: warn when the expected wait ≥ this many seconds.
    - ``metricsTopologyLevel``: node label key of the ``domain`` label of the gauges
      ``gangcheck_gpu_whole_free_nodes`` / ``gangcheck_gpus_stranded`` (a top-level domain such
      as ``topology.example.com/block``). Default none: the top level of the cluster's Kueue
      Topology (with several, the first by name), else one domain "all".
    - ``autoscaling``: node autoscalers (issue #16) — ``enabled`` (default true; false ignores
      every NodePool / node group the cluster shows), ``assumeScaleUp`` (default false: assume
      an autoscaler the cluster does not show may add nodes of any labels and shape, so only
      quota proves NeverFits), ``provisioningSeconds`` (default 300: launch → Ready time until
      the cluster has shown some), ``nodePools``: ``[{name, labels, taints, maxNodes,
      nodeShape: {resource: quantity}, provisioningSeconds}]`` — what a NodePool or node group
      of that name cannot show (its node shape, a node cap), or a pool of its own.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    mode: Literal["enforce", "warn", "audit"] = "enforce"
    gpu_resources: list[str] = Field(default_factory=lambda: list(DEFAULT_GPU_RESOURCES), alias="gpuResources")
    transient_taints: list[str] = Field(default_factory=list, alias="transientTaints")
    extended_resource_toleration: bool = Field(default=True, alias="extendedResourceToleration")
    pod_toleration_restriction: bool = Field(default=False, alias="podTolerationRestriction")
    plain_jobs_as_gangs: bool = Field(default=False, alias="plainJobsAsGangs")
    exempt_namespaces: list[str] = Field(default_factory=lambda: ["kube-system", "gangcheck-system"], alias="exemptNamespaces")
    annotation_prefix: str = Field(default="gangcheck.io/", alias="annotationPrefix")
    stale_after_seconds: float = Field(default=120.0, gt=0, allow_inf_nan=False, strict=True, alias="staleAfterSeconds")
    warn_fragmentation_ratio: float = Field(default=0.25, ge=0, le=1, allow_inf_nan=False, strict=True, alias="warnFragmentationRatio")
    warn_expected_wait_seconds: float = Field(default=3600.0, ge=0, allow_inf_nan=False, strict=True, alias="warnExpectedWaitSeconds")
    metrics_topology_level: str | None = Field(default=None, alias="metricsTopologyLevel")
    autoscaling: _PolicyAutoscaling = Field(default_factory=_PolicyAutoscaling)

    @field_validator("transient_taints")
    @classmethod
    def _taint_keys(cls, v: list[str]) -> list[str]:
        for key in v:
            if not key.strip() or key != key.strip():
                raise ValueError(f"expected taint keys or shell patterns such as 'example.com/*', got {key!r}")
        return v

    @field_validator("metrics_topology_level")
    @classmethod
    def _label_key(cls, v: str | None) -> str | None:
        """A Kubernetes label key: an optional DNS prefix and "/", then a name of ≤ 63 characters."""
        if v is not None and not _LABEL_KEY.match(v):
            raise ValueError(f"expected a node label key such as 'topology.example.com/block', got {v!r}")
        return v

    @field_validator("annotation_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not v.endswith("/") or "/" in v[:-1] or not v[:-1]:
            raise ValueError("expected a DNS prefix ending in '/', such as 'gangcheck.io/'")
        return v

    def engine_options(self) -> EngineOptions:
        """The engine's view of this policy."""
        return EngineOptions(
            gpu_resources=tuple(self.gpu_resources),
            transient_taints=frozenset(self.transient_taints),
            extended_resource_toleration=self.extended_resource_toleration,
            namespace_default_tolerations=self.pod_toleration_restriction,
            plain_jobs_as_gangs=self.plain_jobs_as_gangs,
            autoscaling=self.autoscaling.engine_policy(),
        )


def parse_policy(text: str, source: str = "policy") -> Policy:
    """Parse policy YAML: one mapping of policy fields; ``{}`` is the default policy.

    Raises:
        PolicyError: an empty document (nothing, whitespace, comments only, ``~``/``null``:
            code ``empty``), unparsable YAML (``invalid_yaml``), not a mapping
            (``not_a_mapping``), or a field that fails validation (``invalid_field``; the
            message names each bad field and what was expected).
    """
    try:
        data = yaml.safe_load(text) if text.strip() else None  # whitespace (tabs too) is empty, not a YAML error
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: not valid YAML: {exc}", "invalid_yaml") from None
    except RecursionError:  # PyYAML's pure-Python loader recurses once per nesting level
        raise PolicyError(f"{source}: not valid YAML: nested too deeply to read", "invalid_yaml") from None
    if data is None:
        raise PolicyError(
            f"{source}: empty document, not a policy (an unfinished write?); write {{}} for the default policy",
            "empty",
        )
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: expected a mapping of policy fields, got {type(data).__name__}", "not_a_mapping")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()
        )
        raise PolicyError(f"{source}: {problems}", "invalid_field") from None


def load_policy(path: str | Path | None) -> Policy:
    """Read a policy file; ``None`` → the default policy.

    Raises:
        PolicyError: missing/unreadable file, not UTF-8, nested too deeply, or invalid content
            (the message starts with the file's path).
    """
    if path is None:
        return Policy()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{p}: cannot read policy file: {exc.strerror or exc}", "unreadable") from None
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{p}: not a policy: not UTF-8 text ({exc.reason} at byte {exc.start})", "not_utf8") from None
    return parse_policy(text, str(p))
