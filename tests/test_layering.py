"""The floors of docs/architecture.md hold: every module imports only from its own floor or below, and never
another module's ``_private`` names. Imports are read from the source (ast), including the lazy
ones inside functions, so nothing has to be imported to be checked."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "dynrag"

# Top-level part of the package -> floor (docs/architecture.md draws the same map).
FLOORS = {
    "__init__": 0, "io": 0, "errors": 0, "registry": 0, "progress": 0,
    "text": 1, "corpus": 1, "data": 1, "datasets": 1,
    "lm": 2, "retrieval": 2,
    "rerank": 3, "context": 3, "classify": 3,
    "methods": 4,
    "run": 5, "config": 5,
    "eval": 6,
    "training": 7, "tune": 7,
    "deeprag": 8,
    "world": 9,
    "reproduce": 10, "serve": 10,
    "cli": 11, "demo": 11, "render": 11, "__main__": 11,
}


@dataclass(frozen=True)
class Import:
    source: str  # dotted module name of the importing file
    line: int
    target: str  # dotted module imported from
    name: str | None  # the name taken from it (from X import name), else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


COMMANDS_FLOOR = 11  # a package's cli.py holds its commands: it stands on the command floor


def floor_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "dynrag":
        return None
    if len(parts) > 2 and parts[-1] == "cli":
        return COMMANDS_FLOOR
    return FLOORS.get(parts[1] if len(parts) > 1 else "__init__")


def resolve(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = source.split(".") if is_package else source.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def module_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


@functools.cache  # three tests read every module: parsed once (callers do not change the lists; the
# checker's own tests write their made-up modules under new paths)
def imports_of(path: Path) -> tuple[list[Import], list[tuple[int, str]]]:
    """(dynrag imports, private attributes read off imported dynrag modules: (line, 'mod._name'))."""
    source = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    modules: dict[str, str] = {}  # local name -> dynrag module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dynrag":
                    found.append(Import(source, node.lineno, alias.name, None))
                    modules[alias.asname or "dynrag"] = alias.name if alias.asname else "dynrag"
        elif isinstance(node, ast.ImportFrom):
            target = resolve(source, path.name == "__init__.py", node)
            if target.split(".")[0] != "dynrag":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if is_module(sub):  # from dynrag.retrieval import bm25: a module, not a name
                    found.append(Import(source, node.lineno, sub, None))
                    modules[alias.asname or alias.name] = sub
                else:
                    found.append(Import(source, node.lineno, target, alias.name))
    private_reads = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            private_reads.append((node.lineno, f"{modules[node.value.id]}.{node.attr}"))
    return found, private_reads


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(PACKAGE.parent.parent)}:{line}"


def test_every_module_has_a_floor():
    unplaced = sorted({module_name(p) for p in module_files() if floor_of(module_name(p)) is None})
    assert not unplaced, f"add these to FLOORS here and to docs/architecture.md: {unplaced}"


def test_no_module_imports_from_a_higher_floor():
    upward = []
    for path in module_files():
        own = floor_of(module_name(path))
        for imp in imports_of(path)[0]:
            theirs = floor_of(imp.target)
            if theirs is not None and own is not None and theirs > own:
                upward.append(f"{where(path, imp.line)}: floor {own} imports {imp.target} (floor {theirs})")
    assert not upward, "\n".join(upward)


def test_no_module_imports_another_modules_private_names():
    private = []
    for path in module_files():
        source = module_name(path)
        found, reads = imports_of(path)
        for imp in found:
            leaf = imp.name if imp.name is not None else imp.target.rsplit(".", 1)[-1]
            if imp.target != source and leaf.startswith("_") and not leaf.startswith("__"):
                private.append(f"{where(path, imp.line)}: imports {imp.target}{'.' + imp.name if imp.name else ''}")
        private += [f"{where(path, line)}: reads {name}" for line, name in reads]
    assert not private, "\n".join(private)


# Import cycles tolerated for now, each the set of modules it runs through (none today). An entry
# that is no longer a cycle fails the test, so the list cannot go stale.
KNOWN_CYCLES: set[frozenset[str]] = set()


def import_graph() -> dict[str, dict[str, str]]:
    """module -> {module it imports: where (the first such import)}, over every dynrag module."""
    graph: dict[str, dict[str, str]] = {}
    for path in module_files():
        source = module_name(path)
        edges = graph.setdefault(source, {})
        for imp in imports_of(path)[0]:
            if imp.target != source and is_module(imp.target):
                edges.setdefault(imp.target, where(path, imp.line))
    return graph


def strongly_connected(graph: dict[str, dict[str, str]]) -> list[set[str]]:
    """The groups of two or more modules that each reach all the others (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def cycle_chains(graph: dict[str, dict[str, str]], group: set[str]) -> list[str]:
    """Cycles through ``group`` until each of its modules is on one, each as a chain with the
    import that makes every step: "a (src/a.py:3) -> b (src/b.py:9) -> a"."""
    chains, covered = [], set()
    for start in sorted(group):
        if start in covered:
            continue
        paths = {start: [start]}
        todo = [start]
        while todo:  # breadth first inside the group: the shortest way from start back to it
            node = todo.pop(0)
            if start in graph[node]:
                chain = paths[node] + [start]
                chains.append(" -> ".join(f"{a} ({graph[a][b]})" for a, b in zip(chain, chain[1:])) + f" -> {start}")
                covered.update(chain)
                break
            for nxt in sorted(graph[node]):
                if nxt in group and nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    todo.append(nxt)
    return chains


def test_no_import_cycles_between_modules():
    """No two modules import each other, directly or through others.

    Every import counts, lazy ones inside functions and those under ``TYPE_CHECKING`` too: an
    import moved into a function is the usual way to make a cycle run, not a way to end it; the
    two modules still need each other, which says one job has been split across them. A
    package's ``__init__`` is the module that ``from dynrag.pkg import name`` imports from; the
    parent packages Python imports on the way to a module are not counted (every submodule would
    otherwise be in a cycle with an ``__init__`` that imports it)."""
    graph = import_graph()
    groups = strongly_connected(graph)
    new = [g for g in groups if not any(g <= known for known in KNOWN_CYCLES)]
    gone = [known for known in KNOWN_CYCLES if not any(g & known for g in groups)]
    assert not new, "import cycles:\n" + "\n".join(chain for g in new for chain in cycle_chains(graph, g))
    assert not gone, f"no longer a cycle; remove it from KNOWN_CYCLES: {[sorted(k) for k in gone]}"


# ---- the checker itself, on made-up sources ---------------------------------------------------


@pytest.fixture
def fake_module(tmp_path, monkeypatch):
    root = tmp_path / "src" / "dynrag"
    (root / "retrieval").mkdir(parents=True)
    (root / "methods").mkdir()
    for rel in ("__init__.py", "retrieval/__init__.py", "retrieval/bm25.py", "methods/__init__.py"):
        (root / rel).write_text("")
    monkeypatch.setitem(globals(), "PACKAGE", root)

    def write(rel: str, text: str) -> Path:
        path = root / rel
        path.write_text(text)
        return path

    return write


def test_the_checker_sees_lazy_relative_and_attribute_imports(fake_module):
    path = fake_module(
        "retrieval/factory.py",
        "def f():\n"
        "    from dynrag.methods.chain import PRESETS\n"
        "    from .bm25 import _read\n"
        "    from dynrag.retrieval import bm25\n"
        "    return bm25._cache\n",
    )
    found, reads = imports_of(path)
    assert [(i.target, i.name) for i in found] == [
        ("dynrag.methods.chain", "PRESETS"), ("dynrag.retrieval.bm25", "_read"), ("dynrag.retrieval.bm25", None),
    ]
    assert floor_of("dynrag.methods.chain") == 4 > floor_of("dynrag.retrieval.factory") == 2
    assert floor_of("dynrag.eval.cli") == COMMANDS_FLOOR > floor_of("dynrag.serve.app") == 10
    assert floor_of("dynrag.run.plan") == 5 == floor_of("dynrag.config")
    assert reads == [(5, "dynrag.retrieval.bm25._cache")]


def test_the_cycle_check_names_each_step_of_a_cycle_lazy_imports_included(fake_module):
    fake_module("retrieval/a.py", "from dynrag.retrieval import b\n")
    fake_module("retrieval/b.py", "def f():\n    from dynrag.retrieval.c import g\n")
    fake_module("retrieval/c.py", "import dynrag.retrieval.a\ndef g():\n    pass\n")
    graph = import_graph()
    assert [sorted(g) for g in strongly_connected(graph)] == [
        ["dynrag.retrieval.a", "dynrag.retrieval.b", "dynrag.retrieval.c"]
    ]
    assert cycle_chains(graph, {"dynrag.retrieval.a", "dynrag.retrieval.b", "dynrag.retrieval.c"}) == [
        "dynrag.retrieval.a (src/dynrag/retrieval/a.py:1) -> dynrag.retrieval.b (src/dynrag/retrieval/b.py:2) -> "
        "dynrag.retrieval.c (src/dynrag/retrieval/c.py:1) -> dynrag.retrieval.a"
    ]
