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


def _pool(fragment: str) -> str:
    return "autoscaling: {nodePools: [{name: a, %s}]}" % fragment


#: (policy text, the field the error names, words of the message)
BAD = [(_pool(frag), f"autoscaling.nodePools.0.{field}", words) for frag, field, words in (
    ("nodeShape: {cpu: lots}", "nodeShape", "cpu: expected a quantity"),
    ("nodeShape: {nvidia.com/gpu: 0.5}", "nodeShape", "whole numbers"),
    ("nodeShape: {cpu: [1]}", "nodeShape", "expected a quantity"),
    ("nodeShape: {memory: true}", "nodeShape", "expected a quantity"),
    ("maxNodes: -1", "maxNodes", "greater than or equal to 0"),
    ("maxNodes: 2.5", "maxNodes", "valid integer"),
    ("maxNodes: '3'", "maxNodes", "valid integer"),
    ("taints: [{key: k, effect: Sometimes}]", "taints.0.effect", "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"),
    ("taints: [{value: v}]", "taints.0.key", "Field required"),
    ("labels: {x: [1]}", "labels.x", "valid string"),
    ("provisioningSeconds: 0", "provisioningSeconds", "greater than 0"),
    ("selector: {}", "selector", "Extra inputs"),
)] + [
    ("autoscaling: {nodePools: [{name: a}, {name: a}]}", "autoscaling.nodePools", "listed twice"),
    ("autoscaling: {nodePools: [{name: ''}]}", "autoscaling.nodePools.0.name", "at least 1 character"),
    ("autoscaling: {nodePools: [{labels: {}}]}", "autoscaling.nodePools.0.name", "Field required"),
    ("autoscaling: {provisioningSeconds: -5}", "autoscaling.provisioningSeconds", "greater than 0"),
    ("autoscaling: {provisioningSeconds: .inf}", "autoscaling.provisioningSeconds", "finite number"),
] + [(f"autoscaling: {text}", f"autoscaling{where}", words) for text, where, words in (
    ("{enabled: 'yes'}", ".enabled", "valid boolean"),
    ("{assumeScaleUp: 1}", ".assumeScaleUp", "valid boolean"),
    ("{nodepools: []}", ".nodepools", "Extra inputs"),
    ("[1]", "", "valid dictionary"),
)]


@pytest.mark.parametrize("text, where, words", BAD)
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
