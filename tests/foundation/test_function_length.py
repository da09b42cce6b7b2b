"""No function over ``LIMIT`` lines, except the ones listed in ``ALLOWED`` with the reason.

A function's length is its ``def`` line to its last line (decorators excluded, docstring and
comments included), for every function and method, nested ones too, in the product's packages,
scripts and benchmarks. A function that grows past the limit fails here until it is split or
listed with a reason; a listed function that is no longer long (or no longer exists) fails too,
so the list stays true.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOTS = ("curriculum", "engineers", "testbeds", "trainers", "scripts", "benchmarks")
LIMIT = 60

# "path::qualified name" → why it stays longer than LIMIT.
ALLOWED: dict[str, str] = {
    # One algorithm clearer whole (the reason is also a comment in the function).
    "testbeds/mapf_frozenlake/solver.py::_joint":
        "A* with operator decomposition: the loop is the search's inner loop over locals bound above it",
    "testbeds/mapf_frozenlake/solver.py::_low_level":
        "space-time A*, CBS's inner loop: one pass per state over locals bound above it",
    "engineers/checkpoint/parse.py::repair":
        "a one-pass scanner: every branch advances the same cursor and bracket stack over the text",
    # Length that is declaration, not logic.
    "curriculum/cli_bench.py::register":
        "mounts the compare and report commands; its length is theirs",
    "curriculum/cli_bench.py::register.compare":
        "a Typer command: 37 of its lines are the option list of its signature",
    "benchmarks/generation.py::main":
        "a benchmark script's main: its argument list, then each measurement in the order printed",
    "benchmarks/grpo_step.py::main":
        "a benchmark script's main: its argument list, then each measurement in the order printed",
    "benchmarks/grpo_step.py::instrument":
        "one small timing patch per phase of a step, each a closure over the same timers",
}


def long_functions(limit: int = LIMIT, root: Path = ROOT, roots: tuple[str, ...] = ROOTS) -> dict[str, int]:
    """``"path::qualified name"`` → length, for every function longer than ``limit`` lines."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = child.end_lineno - child.lineno + 1
                if length > limit:
                    found[f"{path}::{prefix}{child.name}"] = length
                visit(child, path, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, path, f"{prefix}{child.name}.")
            else:
                visit(child, path, prefix)

    for top in roots:
        for file in sorted((root / top).rglob("*.py")):
            path = file.relative_to(root).as_posix()
            visit(ast.parse(file.read_text(), filename=path), path, "")
    return found


def test_no_new_long_function():
    new = {name: n for name, n in long_functions().items() if name not in ALLOWED}
    assert not new, (f"functions over {LIMIT} lines: {new}. Split them so they read top to bottom, or "
                     "list them in ALLOWED with the reason they are clearer whole")


def test_every_allowed_function_is_still_long_and_says_why():
    long = long_functions()
    stale = sorted(name for name in ALLOWED if name not in long)
    assert not stale, f"no longer over {LIMIT} lines (or gone): drop from ALLOWED: {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_counter_sees_a_long_method_and_not_a_short_one(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(LIMIT - 1))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"class K:\n    def f(self):\n{body}\n\n\ndef g():\n    return 1\n")
    assert long_functions(root=tmp_path, roots=("pkg",)) == {}  # def + 59 lines = 60: at the limit
    (tmp_path / "pkg" / "m.py").write_text(f"class K:\n    def f(self):\n{body}\n        return 0\n")
    assert long_functions(root=tmp_path, roots=("pkg",)) == {"pkg/m.py::K.f": LIMIT + 1}
