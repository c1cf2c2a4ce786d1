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


# ---------------------------------------------------------------- no import cycles (#14)

#: Import edges the cycle check leaves out, each naming its pair and who removes it.
CYCLE_EXEMPT: set[tuple[str, str]] = set()  # none: cli and diagnose share webhook/cli_inputs.py instead


def module_name(path: Path) -> str:
    """``webhook/adapters/cluster.py`` → ``webhook.adapters.cluster``; a package's ``__init__.py``
    is the package (``webhook.adapters``)."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every module of ``PKG`` → the modules of ``PKG`` it imports.

    An imported name resolves to the longest module it names (``webhook.adapters.common`` for
    ``from .common import x``; ``webhook.adapters``, the package's ``__init__``, for ``from . import
    adapt`` or ``import webhook.adapters``), and ``from .pkg import sub`` also to the submodule
    ``pkg.sub``. Imports inside functions count: a deferred import hides a circle, it does not
    remove it (the adapters' circle through cluster.py was one).
    """
    mods = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        names = imports_of(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                bases = {n for n in names if n == node.module or n.endswith("." + node.module)}
                names |= {f"{b}.{a.name}" for b in bases for a in node.names if f"{b}.{a.name}" in mods}
        graph[mod] = {o for o in map(owner, names) if o is not None and o != mod}
    return graph


def import_cycles(graph: dict[str, set[str]], exempt: set[tuple[str, str]] = frozenset()) -> list[list[str]]:
    """The import cycles of ``graph`` without the ``exempt`` (importer, imported) edges: each
    strongly connected set of two or more modules, sorted (Tarjan's algorithm)."""
    edges = {m: sorted(t for t in ts if (m, t) not in exempt) for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(cycles)


def test_no_module_takes_part_in_an_import_cycle():
    assert import_cycles(import_graph(), CYCLE_EXEMPT) == []


def test_the_cycle_checker_catches_planted_cycles(tmp_path, monkeypatch):
    files = {
        "__init__.py": "",
        "a.py": "from .b import f\n",                                  # a → b
        "b.py": "def f():\n    from . import c\n",                      # b → c, deferred
        "c.py": "from webhook.a import *\n",                            # c → a: a circle of three
        "d.py": "from .a import f\nimport webhook.b\n",                 # imports into the circle, not part of it
        "sub/__init__.py": "from .x import y\n",                        # the package → sub.x
        "sub/x.py": "from .. import sub\ny = 1\n",                      # sub.x → the package's __init__
        "e.py": "from .p import m\n",                                   # e → p.m, a submodule named by from-import
        "p/__init__.py": "",
        "p/m.py": "def g():\n    from ..e import z\n",                  # p.m → e
    }
    for rel, text in files.items():
        (tmp_path / "webhook" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "webhook" / rel).write_text(text)
    monkeypatch.setitem(globals(), "PKG", tmp_path / "webhook")
    graph = import_graph()
    assert graph["webhook.d"] == {"webhook.a", "webhook.b"}
    assert graph["webhook.e"] == {"webhook.p", "webhook.p.m"}
    assert import_cycles(graph) == [["webhook.a", "webhook.b", "webhook.c"], ["webhook.e", "webhook.p.m"],
                                    ["webhook.sub", "webhook.sub.x"]]
    assert import_cycles(graph, {("webhook.c", "webhook.a"), ("webhook.p.m", "webhook.e")}) == [["webhook.sub", "webhook.sub.x"]]
