"""README "Deploying": the kustomize overlays it shows (``# my-*/kustomization.yaml`` blocks)
render with the real kubectl and do what the text says: my-overlay moves only the image,
my-monitoring only adds Prometheus's selection label to PodMonitor gangcheck."""

from __future__ import annotations

import os
import re

import pytest
import yaml

import helm_tool as ht  # noqa: E402  (tests/ is on sys.path)

pytestmark = pytest.mark.usefixtures("tools")


def _overlays() -> dict[str, str]:
    readme = (ht.REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Deploying", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(# (my-[a-z-]+)/kustomization\.yaml.*?)```", section, re.S)
    return {name: text for text, name in blocks}


def _render_overlay(tmp_path, text):
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    doc = yaml.safe_load(text)
    doc["resources"] = [r.replace("../manifests", os.path.relpath(ht.REPO / "manifests", overlay), 1)
                        for r in doc["resources"]]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return ht.kustomize(overlay)


def _strip(objs, drop):
    out = []
    for o in objs:
        o = yaml.safe_load(yaml.safe_dump(o))
        drop(o)
        out.append(o)
    return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))


def test_the_readme_shows_both_overlays():
    assert set(_overlays()) == {"my-overlay", "my-monitoring"}


def test_my_overlay_changes_only_the_image(tmp_path):
    over = _render_overlay(tmp_path, _overlays()["my-overlay"])

    def image(o):
        if o["kind"] == "Deployment":
            c = o["spec"]["template"]["spec"]["containers"][0]
            assert c.pop("image") in ("gangcheck:0.1.0", "registry.example.com/platform/gangcheck:0.1.0")

    dep = next(o for o in over if o["kind"] == "Deployment")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/platform/gangcheck:0.1.0"
    assert _strip(over, image) == _strip(ht.kustomize(ht.REPO / "manifests"), image)


def test_my_monitoring_adds_only_the_release_label(tmp_path):
    over = _render_overlay(tmp_path, _overlays()["my-monitoring"])
    pm = next(o for o in over if o["kind"] == "PodMonitor")
    assert pm["metadata"]["labels"]["release"] == "kube-prometheus-stack"

    def label(o):
        if o["kind"] == "PodMonitor":
            o["metadata"]["labels"].pop("release", None)

    assert _strip(over, label) == _strip(ht.kustomize(ht.REPO / "manifests" / "overlays" / "monitoring"), label)
