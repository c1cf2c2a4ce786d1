"""PodDisruptionBudget input the API server would reject is bad input here too."""

from __future__ import annotations

import pytest

from webhook.adapters.disruption import disruption_budget_from_k8s
from webhook.adapters.errors import AdapterError


def _pdb(**spec):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"selector": {}, **spec}}


@pytest.mark.parametrize("spec,field,text", [
    (dict(minAvailable=1, maxUnavailable=1), "spec.maxUnavailable", "both set"),
    (dict(minAvailable="150%"), "spec.minAvailable", "at most 100%"),
    (dict(maxUnavailable="half"), "spec.maxUnavailable", "integer or a percentage"),
])
def test_rejected_like_the_api_server(spec, field, text):
    with pytest.raises(AdapterError) as e:
        disruption_budget_from_k8s(_pdb(**spec))
    assert field in str(e.value) and text in str(e.value) and "PodDisruptionBudget ns/b" in str(e.value)


@pytest.mark.parametrize("value,expected", [("100%", "100%"), ("0%", "0%"), ("3", 3), (2, 2)])
def test_accepted_values(value, expected):
    assert disruption_budget_from_k8s(_pdb(minAvailable=value)).min_available == expected


def test_unready_pods_are_not_healthy():
    from builders import node, pod, snapshot
    from webhook.engine.fixes import budget_members, disruptions_allowed
    from webhook.engine.model import DisruptionBudget, LabelSelector

    pods = [pod(f"infer-{i}", "n0", cpu=1, labels={"app": "infer"}, ready=(i >= 2)) for i in range(4)]
    b = DisruptionBudget("default", "infer", LabelSelector((("app", "infer"),)), min_available=2)
    snap = snapshot([node("n0")], pods, disruption_budgets=[b])
    (members,) = budget_members(snap)
    assert disruptions_allowed(snap, b, members) == 0   # 2 ready − 2; counting Running alone would give 2
