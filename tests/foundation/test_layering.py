"""The house's layers hold (docs/architecture.md, contracts in pyproject.toml's [tool.importlinter]).

The kernel imports nothing of ours; testbeds import only the kernel; engineers and trainers
import the kernel and testbeds but never each other nor the controller. import-linter checks every
import (function-level ones included); the second test proves the contracts do fail on an
upward import of each kind, so the first one cannot pass vacuously.
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
    assert "Contracts: 4 kept, 0 broken." in result.stdout


def test_an_upward_import_breaks_its_contract(tmp_path):
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    upward = {
        "curriculum/core/types.py": "from curriculum import registry",       # kernel -> controller
        "testbeds/base.py": "from engineers.spade import memory",            # testbed -> engineer
        "engineers/fixed.py": "def f():\n    from trainers import base",     # engineer -> trainer (in a function)
        "trainers/simulated.py": "from curriculum import loop",              # trainer -> controller
    }
    for path, line in upward.items():
        with (tmp_path / path).open("a") as handle:
            handle.write("\n" + line + "\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "Contracts: 0 kept, 4 broken." in result.stdout, result.stdout + result.stderr
    for importer, imported in [("curriculum.core.types", "curriculum.registry"), ("testbeds.base", "engineers.spade.memory"),
                               ("engineers.fixed", "trainers.base"), ("trainers.simulated", "curriculum.loop")]:
        assert f"{importer} -> {imported}" in result.stdout
