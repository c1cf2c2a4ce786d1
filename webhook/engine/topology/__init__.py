"""Topology domains: racks, blocks, NVLink domains, HyperNodes — where a gang's pods may sit together.

``domains`` owns the domain index of a level (which domain each node is in); ``hypernodes``
Volcano HyperNodes as domains; ``resolve`` a gang's requests → rules (Whole, Slices, Exclusive)
over domain indices (Kueue TAS, JobSet / LWS exclusive topology, Volcano HyperNodes, KAI);
``feasible`` capacity per domain, the proofs, a placement and its check; ``report`` the
TopologyPlacementFailed findings and the Decision's ``topology``. Pure: no I/O, no clock.
"""

from .domains import DomainIndex, label_domains, level_keys
from .feasible import RuleCheck, bounds, construct, domain_sums, exclusive_now, violations
from .hypernodes import allowed_domains, hypernode_nodes
from .report import decision_topology, rule_finding
from .resolve import Exclusive, GangTopology, Slices, Whole, resolve_gang

__all__ = ["DomainIndex", "label_domains", "level_keys", "RuleCheck", "bounds", "construct", "domain_sums", "exclusive_now", "violations",
           "allowed_domains", "hypernode_nodes", "decision_topology", "rule_finding", "Exclusive", "GangTopology", "Slices",
           "Whole", "resolve_gang"]
