"""The policy's ``autoscaling`` section (issue #16) → ``EngineOptions.autoscaling``, and errors
that name the field; the example policy ConfigMap in manifests/ parses with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.engine.autoscale.model import AutoscalingPolicy, PolicyPool
from webhook.engine.model import Taint
from webhook.policy import Policy, PolicyError, parse_policy

GiB = 1 << 30
MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"

FULL = """
autoscaling:
  enabled: true
  assumeScaleUp: false
  provisioningSeconds: 420
  nodePools:
  - name: gpu-h100
    nodeShape: {cpu: "192", memory: 2000Gi, nvidia.com/gpu: 8, pods: 110}
    maxNodes: 64
    provisioningSeconds: 900
  - name: spot-a100
    labels: {pool: spot-a100, nvidia.com/gpu.product: A100}
    taints: [{key: spot, value: "true", effect: NoSchedule}, {key: preempt}]
"""


def test_default_policy_has_the_engine_defaults():
    assert Policy().engine_options().autoscaling == AutoscalingPolicy()
    assert parse_policy("{}").engine_options().autoscaling == AutoscalingPolicy(True, False, 300.0, ())


def test_full_section_reaches_the_engine_in_scheduler_units():
    a = parse_policy(FULL).engine_options().autoscaling
    assert (a.enabled, a.assume_scale_up, a.provisioning_s) == (True, False, 420.0)
    h100, spot = a.pools
    assert h100 == PolicyPool(name="gpu-h100", max_nodes=64, provisioning_s=900.0,
                              node_shape={"cpu": 192_000, "memory": 2000 * GiB, "nvidia.com/gpu": 8, "pods": 110})
    assert spot.labels == {"pool": "spot-a100", "nvidia.com/gpu.product": "A100"}
    assert spot.taints == (Taint("spot", "true", "NoSchedule"), Taint("preempt", "", "NoSchedule"))
    assert (spot.max_nodes, spot.node_shape, spot.provisioning_s) == (None, None, None)


def test_assume_scale_up_and_disabled():
    a = parse_policy("autoscaling: {assumeScaleUp: true}").engine_options().autoscaling
    assert a.assume_scale_up is True and a.enabled is True
    assert parse_policy("autoscaling: {enabled: false}").engine_options().autoscaling.enabled is False


@pytest.mark.parametrize("text, where, words", [
    ("autoscaling: {nodePools: [{name: g, nodeShape: {cpu: lots}}]}", "autoscaling.nodePools.0.nodeShape", "cpu: expected a quantity"),
    ("autoscaling: {nodePools: [{name: g, nodeShape: {nvidia.com/gpu: 0.5}}]}", "autoscaling.nodePools.0.nodeShape",
     "whole numbers"),
    ("autoscaling: {nodePools: [{name: g, nodeShape: {cpu: [1]}}]}", "autoscaling.nodePools.0.nodeShape", "expected a quantity"),
    ("autoscaling: {nodePools: [{name: g, nodeShape: {memory: true}}]}", "autoscaling.nodePools.0.nodeShape", "expected a quantity"),
    ("autoscaling: {nodePools: [{name: a}, {name: a}]}", "autoscaling.nodePools", "listed twice"),
    ("autoscaling: {nodePools: [{name: ''}]}", "autoscaling.nodePools.0.name", "at least 1 character"),
    ("autoscaling: {nodePools: [{labels: {}}]}", "autoscaling.nodePools.0.name", "Field required"),
    ("autoscaling: {nodePools: [{name: a, maxNodes: -1}]}", "autoscaling.nodePools.0.maxNodes", "greater than or equal to 0"),
    ("autoscaling: {nodePools: [{name: a, maxNodes: 2.5}]}", "autoscaling.nodePools.0.maxNodes", "valid integer"),
    ("autoscaling: {nodePools: [{name: a, maxNodes: '3'}]}", "autoscaling.nodePools.0.maxNodes", "valid integer"),
    ("autoscaling: {nodePools: [{name: a, taints: [{key: k, effect: Sometimes}]}]}", "autoscaling.nodePools.0.taints.0.effect",
     "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"),
    ("autoscaling: {nodePools: [{name: a, taints: [{value: v}]}]}", "autoscaling.nodePools.0.taints.0.key", "Field required"),
    ("autoscaling: {nodePools: [{name: a, labels: {x: [1]}}]}", "autoscaling.nodePools.0.labels.x", "valid string"),
    ("autoscaling: {nodePools: [{name: a, provisioningSeconds: 0}]}", "autoscaling.nodePools.0.provisioningSeconds", "greater than 0"),
    ("autoscaling: {nodePools: [{name: a, selector: {}}]}", "autoscaling.nodePools.0.selector", "Extra inputs"),
    ("autoscaling: {provisioningSeconds: -5}", "autoscaling.provisioningSeconds", "greater than 0"),
    ("autoscaling: {provisioningSeconds: .inf}", "autoscaling.provisioningSeconds", "finite number"),
    ("autoscaling: {enabled: 'yes'}", "autoscaling.enabled", "valid boolean"),
    ("autoscaling: {assumeScaleUp: 1}", "autoscaling.assumeScaleUp", "valid boolean"),
    ("autoscaling: {nodepools: []}", "autoscaling.nodepools", "Extra inputs"),
    ("autoscaling: [1]", "autoscaling", "valid dictionary"),
])
def test_bad_section_is_an_error_naming_the_field(text, where, words):
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "policy.yaml")
    msg = str(err.value)
    assert err.value.code == "invalid_field"
    assert msg.startswith(f"policy.yaml: {where}: ") or f"; {where}: " in msg, msg
    assert words in msg


def test_example_policy_configmap_parses_and_shows_the_section():
    cm = next(d for d in yaml.safe_load_all((MANIFESTS / "base" / "configmap-policy.yaml").read_text()) if d)
    text = cm["data"]["policy.yaml"]
    assert "autoscaling:" in text
    assert parse_policy(text).engine_options().autoscaling == AutoscalingPolicy()
