"""DESIGN.md's layers, checked: imports point one way only.

engine ← adapters ← (cache, admission, policy) ← (server, cli). The engine imports no I/O,
no Kubernetes client, no pydantic, no web framework; adapters do no I/O; admission is pure.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "webhook"


def imports_of(path: Path) -> set[str]:
    """Absolute module names imported by ``path`` (relative imports resolved inside webhook)."""
    tree = ast.parse(path.read_text())
    rel_pkg = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = rel_pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:
                    out.update(f"{mod}.{a.name}" for a in node.names)
                else:
                    out.add(mod)
            else:
                out.add(node.module or "")
    return out


def modules(sub: str) -> list[Path]:
    """Every module of a layer: a package's files at any depth (engine/fixes/*.py too), or one file."""
    return sorted((PKG / sub).rglob("*.py")) if (PKG / sub).is_dir() else [PKG / f"{sub}.py"]


FORBIDDEN = {
    "engine": ("webhook.adapters", "webhook.cache", "webhook.server", "webhook.cli", "webhook.admission",
               "webhook.policy", "webhook.dump", "webhook.diagnose", "kubernetes", "pydantic", "fastapi",
               "uvicorn", "yaml", "json", "socket", "urllib", "http", "os", "time", "datetime", "subprocess"),
    "adapters": ("webhook.cache", "webhook.server", "webhook.cli", "webhook.admission", "webhook.dump",
                 "kubernetes", "fastapi", "uvicorn", "socket", "urllib", "http", "subprocess"),
    "admission": ("webhook.server", "webhook.cache", "webhook.cli", "kubernetes", "fastapi", "uvicorn", "socket"),
    "policy": ("webhook.server", "webhook.cache", "webhook.cli", "webhook.admission"),
    "cache": ("webhook.server", "webhook.cli", "webhook.admission"),
}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_one_way(layer):
    bad = []
    for path in modules(layer):
        for mod in imports_of(path):
            if any(mod == f or mod.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(PKG.parent)} imports {mod}")
    assert bad == []


def test_the_checker_sees_relative_imports():
    # Guards the test itself: a known relative import must resolve to its absolute name.
    assert "webhook.engine.model" in imports_of(PKG / "engine" / "evaluate.py")
    assert "webhook.engine.model" in imports_of(PKG / "adapters" / "podspec.py")
