"""Topology domains: racks, blocks, NVLink domains, HyperNodes — where a gang's pods may sit together.

``domains`` owns the domain index of a level (which domain each node is in); the feasibility
rules over domains (Kueue TAS, JobSet / LWS exclusive topology, Volcano HyperNodes, KAI) build on
it. Pure: no I/O, no clock.
"""

from .domains import DomainIndex, label_domains, level_keys

__all__ = ["DomainIndex", "label_domains", "level_keys"]
