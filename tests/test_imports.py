"""srl's modules import each other without circles.

The graph is read from the source (ast), not from a running interpreter: every `import` and
`from ... import` naming an srl module is an edge, wherever it stands. Imports inside functions
and under `if TYPE_CHECKING:` count too: they are how a circle gets hidden rather than broken
(the two circles this test was written against were both hidden that way), and a moved piece
should not need them. `from pkg import name` is an edge to `pkg.name` when that is a module,
else to `pkg`; importing `pkg.mod` also runs `pkg/__init__.py`, but that edge is not counted
(a package that re-exports its own modules is not a circle worth breaking).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import srl

SRC = Path(srl.__file__).resolve().parent.parent

# Circles known and owned elsewhere: each with the reason it is allowed for now. An entry that no
# longer closes a circle fails the test, so the list only shrinks.
KNOWN: dict[frozenset[str], str] = {}


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its own name)."""
    out = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules in `modules` that the import statements anywhere in `tree` import."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package `level - 1` levels above this module's
                parent = here[: len(here) - (node.level - 1)]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            for alias in node.names:  # `from pkg import mod` imports pkg.mod; `from mod import x`, mod
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return out & modules


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports (see the module doc for what counts)."""
    modules = module_names(root, package)
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = imported(tree, name, path.name == "__init__.py", set(modules)) - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of `graph`: its strongly connected parts of more than one module (Tarjan),
    each as a path that closes on its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(part)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_closed_path(graph, part) for part in parts]


def _closed_path(graph: dict[str, set[str]], part: set[str]) -> list[str]:
    """A circle through the first module of `part`, found breadth-first inside `part`."""
    start = min(part)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & part):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle through {start} in {sorted(part)}")


def test_srl_has_no_import_circles():
    graph = import_graph(SRC, "srl")
    assert len(graph) > 100 and "srl.algos.ppo" in graph["srl.algos"]  # the walk found srl's modules
    found = cycles(graph)
    new = [c for c in found if frozenset(c) not in KNOWN]
    assert not new, "import circles:\n" + "\n".join(" -> ".join(c) for c in new)
    gone = set(KNOWN) - {frozenset(c) for c in found}
    assert not gone, f"no longer circles (remove them from KNOWN): {[sorted(g) for g in gone]}"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_circles_hidden_in_functions_and_type_checking_are_found(tmp_path):
    """The shapes srl had: a -> b at the top, b -> c under TYPE_CHECKING, c -> a in a function."""
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import thing\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\nthing = 1\n",
        "pkg/c.py": "def f():\n    from .. import pkg\n    from pkg import a\n    return a\n",
        "pkg/d.py": "import pkg.e\n",
        "pkg/e.py": "import os\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.a"}, graph  # `from pkg import a` is the module, not the package
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


@pytest.mark.parametrize("cut", ["pkg/b.py", "pkg/c.py"])
def test_breaking_one_edge_breaks_the_circle(tmp_path, cut):
    files = {
        "pkg/__init__.py": "from pkg import a, b, c\n",  # a package re-exporting its modules: no circle
        "pkg/a.py": "from pkg.b import thing\n",
        "pkg/b.py": "from pkg import c\nthing = 1\n",
        "pkg/c.py": "def f():\n    from pkg import a\n",
    }
    files[cut] = "thing = 1\n"
    _write(tmp_path, files)
    assert cycles(import_graph(tmp_path, "pkg")) == []
