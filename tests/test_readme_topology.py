"""The README's Topology section shows real output: each ``<!-- topology-example -->`` block is
what its command prints on the demo cluster today (``...`` marks lines left out).

The Job is the README's own ``rack-8x8.yaml`` block; ``rack-40x8.yaml`` is the same Job with
``parallelism``/``completions`` 40, as the README says.
"""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest

from webhook.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARK = "<!-- topology-example -->\n"


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks() -> list[tuple[list[str], list[str]]]:
    """(argv after ``gangcheck``, the expected lines) of each marked block."""
    out = []
    for part in _readme().split(MARK)[1:]:
        body = part.split("```\n", 2)[1]
        lines = body.rstrip("\n").split("\n")
        assert lines[0].startswith("$ gangcheck "), lines[0]
        out.append((shlex.split(lines[0])[2:], lines[1:]))
    return out


def _write_jobs(tmp: pathlib.Path) -> None:
    text = _readme()
    m = re.search(r"```yaml\n(apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: rack-8x8\n.*?)```", text, re.S)
    assert m, "the README's rack-8x8.yaml block"
    job = m.group(1)
    (tmp / "rack-8x8.yaml").write_text(job)
    big = job.replace("rack-8x8", "rack-40x8").replace("parallelism: 8", "parallelism: 40").replace("completions: 8", "completions: 40")
    assert big.count("40") >= 2
    (tmp / "rack-40x8.yaml").write_text(big)


def _matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` is the start of ``actual`` with runs of lines replaced by ``...``: each literal
    line appears, in order, right after the one before it unless a ``...`` stands between them
    (the block may stop before the output does)."""
    i = 0
    gap = False
    for line in expected:
        if line.strip() == "...":
            gap = True
            continue
        if gap:
            while i < len(actual) and actual[i] != line:
                i += 1
        if i >= len(actual) or actual[i] != line:
            return False
        i += 1
        gap = False
    return True


def test_readme_has_three_topology_examples():
    cmds = [argv[0] for argv, _ in _blocks()]
    assert cmds == ["fragmentation", "check", "diagnose"]


@pytest.mark.parametrize("index", range(3))
def test_readme_topology_example_is_real_output(index, tmp_path, monkeypatch, capsys):
    argv, expected = _blocks()[index]
    _write_jobs(tmp_path)
    monkeypatch.chdir(tmp_path)
    main(argv)
    actual = capsys.readouterr().out.rstrip("\n").split("\n")
    assert _matches(expected, actual), "\n".join(["README:", *expected, "", "now:", *actual])
