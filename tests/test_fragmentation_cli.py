"""gangcheck fragmentation: histogram, whole free nodes per product, stranded GPUs, largest
gang, heatmap (plain when piped, rich when colour is asked for)."""

from __future__ import annotations

import json

import pytest

from builders import GPU, node, pod, snapshot
from webhook.cli import main
from webhook.diagnose import fragmentation, parse_shape, render_fragmentation


def test_field_notes_example_80_nodes():
    # FIELD-NOTES §6: 48 empty, 24 with 2 used, 8 full → 528 free, 16 short of 64, 144 stranded (27.3 %)
    nodes = [node(f"n{i:02d}", gpu=8) for i in range(80)]
    pods = [pod(f"p{i}", f"n{i:02d}", gpu=2) for i in range(48, 72)] + [pod(f"f{i}", f"n{i:02d}", gpu=8) for i in range(72, 80)]
    rep = fragmentation(snapshot(nodes, pods), {GPU: 8})
    assert (rep["free"], rep["stranded"], rep["ratio"], rep["largest_gang"]) == (528, 144, 0.2727, 48)
    assert rep["histogram"]["8"] == 48 and rep["histogram"]["6"] == 24 and rep["histogram"]["0"] == 8
    assert rep["whole_free_by_product"] == {"unknown": 48}


def test_parse_shape():
    assert parse_shape("8xnvidia.com/gpu") == {GPU: 8}
    assert parse_shape("4xnvidia.com/gpu,48xcpu,384Gixmemory") == {GPU: 4, "cpu": 48000, "memory": 384 * 1024**3}
    with pytest.raises(ValueError):
        parse_shape("eight gpus")


def test_cli_demo_text_plain_when_piped(capsys):
    assert main(["fragmentation", "--cluster", "demo"]) == 0
    out = capsys.readouterr().out
    assert "largest gang of this shape placeable now: 12 pod(s) on 12 node(s)" in out
    assert "NVIDIA-H100-80GB-HBM3 12" in out and "NVIDIA-H100-NVL 0" in out
    assert "\x1b[" not in out                                    # no ANSI when not a TTY


def test_cli_demo_json(capsys):
    assert main(["fragmentation", "--cluster", "demo", "--shape", "8xnvidia.com/gpu", "-o", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["gpu_nodes"] == 384 and rep["largest_gang"] == 12 and len(rep["heatmap"]) == 384
    assert rep["stranded"] == 1200 and rep["histogram"]["4"] == 300


def test_rich_heatmap_has_colour():
    rep = fragmentation(snapshot([node("a"), node("b", alloc_gpu=0)], [pod("p", "a", gpu=4)]), {GPU: 8})
    assert "\x1b[" in render_fragmentation(rep, color=True)
    plain = render_fragmentation(rep)
    assert plain.splitlines()[-1].strip() == "4d"


def test_cli_bad_shape_exit_2(capsys):
    assert main(["fragmentation", "--cluster", "demo", "--shape", "x"]) == 2
    assert "AMOUNTxRESOURCE" in capsys.readouterr().err
