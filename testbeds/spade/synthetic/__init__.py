"""Shared code for SPADE's synthetic environments (games and tool use).

* ``tool_env`` — ``ToolEnv``, the base class tool-use environments subclass: it parses JSON tool
  calls, dispatches them to ``tool_*`` methods over a backend state, exposes OpenAI-style tool
  schemas, and checks a final answer and the final state.
* ``games`` — functions for single-player text games (``extract_boxed``, ``normalize_answer``).

Both modules use only standard-library modules on the sandbox's import allowlist, because model
code runs inside ``testbeds.spade.sandbox`` where this package cannot be imported. ``prelude_source()``
returns their source text for ``SandboxConfig.prelude_source``: the sandbox runs it once per
worker and its names (``ToolEnv``, ``extract_boxed``...) are visible to every program.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
PRELUDE_MODULES = ("games.py", "game_env.py", "tool_env.py")
"""Modules whose source forms the sandbox prelude, in this order."""


def prelude_source() -> str:
    """The source of ``games.py`` then ``tool_env.py``, for ``SandboxConfig.prelude_source``.

    ``tool_env`` imports ``extract_boxed`` from ``games`` when imported normally; in the prelude
    that import line is dropped because the name is already defined above it.
    """
    parts = []
    for name in PRELUDE_MODULES:
        text = (_HERE / name).read_text()
        lines = [line for line in text.splitlines()
                 if not line.startswith("from testbeds.") and not line.startswith("from __future__")]
        parts.append(f"# ---- testbeds/spade/synthetic/{name}\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"
