"""Per-shape results memoised on a snapshot never change a decision.

A snapshot keeps, per pod shape and constraints, the masks, pods-per-node and node report of
earlier checks. Every example (and variants of it with other pod counts) decided on one shared
snapshot, in two orders, must equal the decision made on a freshly built snapshot.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import yaml

from webhook.adapters import adapt
from webhook.adapters.cluster import build_snapshot
from webhook.demo import DEMO_NOW, demo_objects
from webhook.engine.evaluate import evaluate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def gangs():
    out = []
    for f in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            g = adapt(doc)
            if g is None:
                continue
            out.append(g)
            # the same shapes with other counts and names: what the memo is keyed to ignore
            for n in (1, 3):
                sets = tuple(dataclasses.replace(ps, count=max(0, ps.count // n)) for ps in g.pod_sets)
                out.append(dataclasses.replace(g, name=f"{g.name}-div{n}", pod_sets=sets))
    return out


def test_memoised_results_equal_fresh_ones():
    all_gangs = gangs()
    assert len(all_gangs) >= 30
    fresh = {}
    for g in all_gangs:
        snap = build_snapshot(demo_objects(), source="demo", as_of=DEMO_NOW)
        fresh[g.name] = evaluate(snap, g, now=DEMO_NOW).to_dict()
    shared = build_snapshot(demo_objects(), source="demo", as_of=DEMO_NOW)
    for order in (all_gangs, random.Random(7).sample(all_gangs, len(all_gangs))):
        for g in order:
            assert evaluate(shared, g, now=DEMO_NOW).to_dict() == fresh[g.name], g.name
    assert len(shared._memo) > 0  # the memo was used
