"""The engine's policy knobs (``EngineOptions``) and what follows from them alone.

Owns which resources count as accelerators (``gpu_resources`` patterns, ``is_gpu_resource``)
and whether a gang starts all at once (``all_or_nothing``); not the pydantic policy that fills
them (``webhook.policy``), nor any rule of the verdict. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatch
from functools import lru_cache

from .autoscale.model import AutoscalingPolicy
from .model import GangRequest

__all__ = ["DEFAULT_GPU_RESOURCES", "EngineOptions", "is_gpu_resource", "all_or_nothing"]


DEFAULT_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-*")


@dataclass(frozen=True)
class EngineOptions:
    """Policy knobs the engine needs (the pydantic Policy converts to this).

    ``gpu_resources``: names or fnmatch patterns of accelerator resources (for fragmentation
    and messages). ``transient_taints``: taint keys or shell patterns treated as repairable
    (never NeverFits), in addition to ``filters.DEFAULT_TRANSIENT`` which always applies.
    ``extended_resource_toleration``: the API server runs the ExtendedResourceToleration
    admission plugin (GKE, AKS): a pod gets a NoSchedule toleration per extended resource it
    requests. ``namespace_default_tolerations``: it runs PodTolerationRestriction, so a
    namespace may add tolerations gangcheck cannot see: no taint proves NeverFits.
    ``plain_jobs_as_gangs``: treat workloads whose pods are scheduled one by one
    (``GangRequest.all_or_nothing`` False: a plain batch Job, a RayCluster without a batch
    scheduler) as gangs anyway, for clusters where they are (Kueue waitForPodsReady, an
    operator-wide gang scheduler). ``autoscaling``: the policy's autoscaling section
    (``autoscale.AutoscalingPolicy``: assume a scale-up, node shapes, provisioning time).
    """

    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
    transient_taints: frozenset[str] = field(default_factory=frozenset)
    extended_resource_toleration: bool = True
    namespace_default_tolerations: bool = False
    plain_jobs_as_gangs: bool = False
    autoscaling: AutoscalingPolicy = field(default_factory=AutoscalingPolicy)

    def is_gpu(self, resource: str) -> bool:
        """True when ``resource`` names an accelerator (matches a ``gpu_resources`` entry)."""
        return is_gpu_resource(resource, self.gpu_resources)


@lru_cache(maxsize=4096)
def is_gpu_resource(resource: str, patterns: tuple[str, ...]) -> bool:
    """True when ``resource`` matches one of the fnmatch ``patterns`` (memoised)."""
    return any(fnmatch(resource, p) for p in patterns)


def all_or_nothing(gang: GangRequest, options: EngineOptions) -> bool:
    """Whether the gang's pods start all at once or not at all (``GangRequest.all_or_nothing``,
    or the policy's ``plainJobsAsGangs``); else they are scheduled one by one and only what no
    single pod can ever do proves NeverFits."""
    return gang.all_or_nothing or options.plain_jobs_as_gangs
