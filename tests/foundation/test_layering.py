"""The house's layers hold (docs/architecture.md, contracts in pyproject.toml's [tool.importlinter]).

The kernel imports nothing of ours; testbeds import only the kernel; engineers and trainers
import the kernel and testbeds but never each other nor the controller; the controller names no
plugin: it reaches plugins through the registry's lazy ``module:Class`` entries and their base
types (``engineers.base``, ``testbeds.base``, ``trainers.base``) only. import-linter checks every
import (function-level ones included); the second test proves the contracts do fail on an
upward import of each kind, the third that the controller's contract fails on each import the
controller once made of a plugin, so the first one cannot pass vacuously. The last one: no two
controller modules import each other, directly or through others.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("curriculum", "engineers", "testbeds", "trainers")
LINT = ("from importlinter.cli import lint_imports; import sys; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))")


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LINT], cwd=where, capture_output=True, text=True, timeout=120)


def test_every_layer_contract_is_kept():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


def _planted(tmp_path: Path, lines: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Lint a copy of the packages with ``lines`` appended to (or written as) the given files."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for path, line in lines.items():
        with (tmp_path / path).open("a") as handle:
            handle.write("\n" + line + "\n")
    return _lint(tmp_path)


def test_an_upward_import_breaks_its_contract(tmp_path):
    result = _planted(tmp_path, {
        "curriculum/core/types.py": "from curriculum import registry",       # kernel -> controller
        "testbeds/base.py": "from engineers.spade import memory",            # testbed -> engineer
        "engineers/fixed.py": "def f():\n    from trainers import base",     # engineer -> trainer (in a function)
        "trainers/simulated.py": "from curriculum import loop",              # trainer -> controller
        "curriculum/compare.py": "def f():\n    from testbeds.mapf_frozenlake import testbed",  # controller -> plugin
    })
    assert result.returncode != 0
    assert "Contracts: 0 kept, 5 broken." in result.stdout, result.stdout + result.stderr
    for importer, imported in [("curriculum.core.types", "curriculum.registry"), ("testbeds.base", "engineers.spade.memory"),
                               ("engineers.fixed", "trainers.base"), ("trainers.simulated", "curriculum.loop"),
                               ("curriculum.compare", "testbeds.mapf_frozenlake.testbed")]:
        assert f"{importer} -> {imported}" in result.stdout


FORMER_PLUGIN_IMPORTS = {
    "curriculum/config.py": ["trainers.lm.generation", "trainers.lm.models"],
    "curriculum/plan.py": ["trainers.lm.models", "trainers.grpo.trainer", "trainers.lm.generation",
                           "trainers.selfplay.trainer", "engineers.spade.corpus"],
    "curriculum/walltime.py": ["trainers.grpo.trainer", "trainers.selfplay.trainer"],
    "curriculum/cli_mapf.py": ["testbeds.mapf_frozenlake.batch", "testbeds.mapf_frozenlake.config",
                               "testbeds.mapf_frozenlake.generator", "trainers.lm.models"],
    "curriculum/cli_sandbox.py": ["testbeds.spade.sandbox", "testbeds.spade.sandbox.replies"],
    "curriculum/cli_spade.py": ["engineers.spade.memory"],
}
"""Every controller module -> plugin module import the controller once made (in functions, as most were),
the plugin modules named at their present paths."""


def test_each_former_controller_import_of_a_plugin_breaks_the_contract(tmp_path):
    lines = {path: "def _former():\n" + "".join(f"    import {module}\n" for module in modules)
             for path, modules in FORMER_PLUGIN_IMPORTS.items()}
    result = _planted(tmp_path, lines)
    assert result.returncode != 0
    assert "Contracts: 4 kept, 1 broken." in result.stdout, result.stdout + result.stderr
    assert "The controller names no plugin" in result.stdout
    for path, modules in FORMER_PLUGIN_IMPORTS.items():
        importer = path.removesuffix(".py").replace("/", ".")
        for module in modules:
            assert f"{importer} -> {module}" in result.stdout, (importer, module)


def test_the_controller_has_no_import_cycle():
    import grimp

    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    cycles = sorted({tuple(sorted((a, b))) for a in graph.modules if a.startswith("curriculum.")
                     for b in graph.find_modules_directly_imported_by(a)
                     if b.startswith("curriculum.") and b != a and graph.chain_exists(importer=b, imported=a)})
    assert cycles == [], f"controller modules that import each other: {cycles}"
