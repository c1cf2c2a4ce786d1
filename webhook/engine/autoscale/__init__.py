"""Node autoscaling in the engine (issue #16): what Karpenter NodePools, cluster-autoscaler node
groups and policy-declared pools could add, and the verdict with them.

The public face re-exports the model only (``model``); the rules live in ``match`` (may a pod
land on a node a source adds — Karpenter's requirement compatibility), ``bounds`` (how many pods
and how much of each resource a source can add) and ``review`` (capacity NeverFits only with a
proof over existing nodes *and* every node the sources could add; NeedsScaleUp otherwise).
Import those submodules directly (``evaluate`` does): this package's ``__init__`` stays free of
them so ``snapshot`` and ``options`` can import the model without a cycle.
"""

from .model import (NODE_GROUP, NODEPOOL, NODEPOOL_LABEL, NODES_LIMIT, POLICY_POOL, AutoscalingPolicy, AutoscalingState,
                    PolicyPool, ProvisioningRequestInfo, ScaleUpSource)

__all__ = ["NODEPOOL", "NODE_GROUP", "POLICY_POOL", "NODEPOOL_LABEL", "NODES_LIMIT", "ScaleUpSource",
           "ProvisioningRequestInfo", "AutoscalingState", "AutoscalingPolicy", "PolicyPool"]
