"""No import cycle among the project's modules, dynamic imports included.

import-linter and grimp (``test_layering.py``) see ``import`` statements only. A module that loads
another by name, ``importlib.import_module("curriculum.x")``, is an import as well, and a cycle
through one is as real: the first module half-initialised when the second imports it back. This
suite reads every module's source and takes as an import each ``import`` and ``from ... import``
statement (in functions too) and each call of ``importlib.import_module`` / ``__import__`` whose
argument is a string literal, or a name the module binds to string literals (``name = "..."``,
``for name in ("...", ...)``). Then no group of modules may import each other, directly or
through others; the last tests show the finder sees a cycle of each kind.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("curriculum", "engineers", "testbeds", "trainers")
DYNAMIC = {"import_module", "__import__"}
"""Functions that import the module their first argument names."""


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name → its file, for every module of ``packages`` under ``root``."""
    out = {}
    for package in packages:
        for file in sorted((root / package).rglob("*.py")):
            parts = file.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return out


def _string_names(tree: ast.AST) -> dict[str, set[str]]:
    """Name → the string literals the module binds it to (assignments and ``for`` loops)."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, set()).add(node.value.value)
        elif (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
              and isinstance(node.iter, (ast.Tuple, ast.List, ast.Set))):
            values = {e.value for e in node.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            out.setdefault(node.target.id, set()).update(values)
    return out


def _dynamic_targets(call: ast.Call, names: dict[str, set[str]]) -> set[str]:
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in DYNAMIC or not call.args:
        return set()
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {arg.value}
    return set(names.get(arg.id, ())) if isinstance(arg, ast.Name) else set()


def imported_names(name: str, file: Path, known: set[str]) -> set[str]:
    """Every module name ``name`` (the module in ``file``) imports, statically or by a literal name;
    ``from package import x`` imports the module ``package.x`` when it is one of ``known``, else
    ``package`` (as grimp counts it)."""
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    names = _string_names(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            out.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names)
        elif isinstance(node, ast.Call):
            out.update(_dynamic_targets(node, names))
    return out


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module → the modules of ``packages`` it imports (itself left out)."""
    found = modules(root, packages)
    return {name: {m for m in imported_names(name, file, set(found)) if m in found and m != name}
            for name, file in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that reach each other (strongly connected components), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


def test_no_module_imports_itself_back():
    graph = import_graph()
    assert "curriculum.cli_bench" in graph["curriculum.cli"], "the graph must see the CLI's imports"
    found = cycles(graph)
    assert found == [], f"modules that import each other, directly or through others: {found}"


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return import_graph(tmp_path, ("pkg",))


def test_a_cycle_through_a_literal_import_module_is_found(tmp_path):
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/app.py": "import importlib\n\ndef mount():\n    importlib.import_module('pkg.extra').register()\n",
        "pkg/extra.py": "def register():\n    from pkg.app import mount\n",
        "pkg/alone.py": "import pkg.app\n",
    })
    assert cycles(graph) == [["pkg.app", "pkg.extra"]]


def test_a_cycle_through_a_name_bound_to_literals_is_found(tmp_path):
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/cli.py": ("import importlib\n\ndef mount(app):\n    for module in ('pkg.bench',):\n"
                       "        importlib.import_module(module).register(app)\n"),
        "pkg/bench.py": "from . import cli\n",
        "pkg/one.py": "from importlib import import_module\nNAME = 'pkg.two'\nimport_module(NAME)\n",
        "pkg/two.py": "from pkg import three\n",
        "pkg/three.py": "__import__('pkg.one')\n",
    })
    assert cycles(graph) == [["pkg.bench", "pkg.cli"], ["pkg.one", "pkg.three", "pkg.two"]]
