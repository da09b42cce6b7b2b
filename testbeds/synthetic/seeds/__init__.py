"""The seed library: environment programs with privileged hints that the project ships, one or
more per skill of each SPADE setting, every one passing the sandbox admission
(``tests/spade/test_seed_library.py``).

Layout: ``games/<name>.py`` holds the three parts of a structured game (``make_task``, ``check``,
``solve``; ``testbeds.synthetic.skeleton``), rendered into the ``GameEnv`` skeleton;
``tools/<name>.py`` holds a complete ``ToolEnv`` subclass. Each file starts with a
``# skill: <skill>`` line; ``<name>.hint`` beside it is the privileged hint.

Used as: the designer's warm start (design prompt → a library design, in the engineer's design
mode), the agent's warm start (first observation → the boxed solution), a starting pool
(``testbed.initial_pool: seed_library``) and memory seeds (``engineer.memory.seed_library``).
Written for this project; the public SPADE code ships no such library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from testbeds.synthetic.skeleton import GameParts, render_game, split_parts

HERE = Path(__file__).resolve().parent
SETTINGS = ("games", "tools")
_SKILL = re.compile(r"^#\s*skill:\s*(.+?)\s*$", re.M)


@dataclass(frozen=True)
class SeedEnvironment:
    """One library environment."""

    name: str
    """File stem."""
    setting: str
    """``games`` or ``tools``."""
    skill: str
    """Skill tag (the file's ``# skill:`` line)."""
    hint: str
    """Privileged hint."""
    program: str
    """The full program (games: the parts rendered into the skeleton)."""
    parts: GameParts | None = None
    """The structured parts (games only)."""


def _load(path: Path, setting: str) -> SeedEnvironment:
    source = path.read_text()
    skill = _SKILL.search(source)
    hint_path = path.with_suffix(".hint")
    if skill is None or not hint_path.is_file():
        raise ValueError(f"seed {path} needs a '# skill: ...' line and a {hint_path.name} file")
    hint = " ".join(hint_path.read_text().split())
    body = _SKILL.sub("", source, count=1).strip("\n") + "\n"
    if setting == "games":
        parts = split_parts(body, hint)
        return SeedEnvironment(path.stem, setting, skill.group(1), hint, render_game(parts), parts)
    return SeedEnvironment(path.stem, setting, skill.group(1), hint, body)


@cache
def seed_library(setting: str) -> tuple[SeedEnvironment, ...]:
    """Every library environment of ``setting``, sorted by file name."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown SPADE setting {setting!r} (games or tools)")
    return tuple(_load(p, setting) for p in sorted((HERE / setting).glob("*.py")))


def library_for(setting: str, skills: list[str] | None = None) -> list[SeedEnvironment]:
    """The library environments of ``setting`` whose skill is in ``skills`` (all when ``None``)."""
    return [s for s in seed_library(setting) if skills is None or s.skill in skills]
