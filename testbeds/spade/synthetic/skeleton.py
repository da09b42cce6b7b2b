"""SPADE's structured design mode: the task-specific parts of a game, rendered into the fixed
``GameEnv`` skeleton (``testbeds/spade/synthetic/game_env.py``).

Instead of a whole program (the paper's mode: class, ``reset``, ``step``, reward, feedback, turn
limit, ``solution``), a structured design writes only what differs between games:

| part | function it must define (top level) | returns |
| --- | --- | --- |
| ``reset`` | ``make_task(rng)`` | ``(state, text)``: the task's state and statement |
| ``check`` | ``check(state, answer)`` | ``(correct, feedback)`` for the boxed answer string |
| ``solution`` | ``solve(state)`` | the correct answer |

plus the privileged hint. ``render_game(parts)`` checks each part on its own (it compiles, it
defines its function at top level with those parameters; ``PartError`` names the part and what
is wrong) and returns the program: the parts verbatim, then a ``DesignedEnv(GameEnv)`` class
whose methods call them. The program then goes through the same admission as a full program.
``split_parts(source)`` is the inverse for a file holding the three functions (the seed
library's format): its other top-level statements (imports, constants) go with ``reset``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "reset": ("make_task", ("rng",)),
    "check": ("check", ("state", "answer")),
    "solution": ("solve", ("state",)),
}
"""Part name → (function it defines, its parameters), in program order."""

SKELETON_CLASS = "DesignedEnv"
"""Name of the class ``render_game`` appends."""

CLASS_TEMPLATE = '''

class DesignedEnv(GameEnv):
    """A structured design: the GameEnv skeleton with the parts above."""

    max_turns = {max_turns}

    def make_task(self, rng):
        return make_task(rng)

    def check(self, state, answer):
        return check(state, answer)

    def solution(self):
        return solve(self.state)
'''


class PartError(ValueError):
    """A part is missing, does not compile, or does not define its function."""

    def __init__(self, part: str, kind: Literal["missing", "syntax", "signature"], message: str) -> None:
        super().__init__(f"part <{part}>: {message}")
        self.part = part
        self.kind = kind


@dataclass(frozen=True)
class GameParts:
    """The task-specific parts of one game and its hint."""

    reset: str
    check: str
    solution: str
    hint: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"reset": self.reset, "check": self.check, "solution": self.solution}


def check_part(name: str, source: str) -> None:
    """PartError unless ``source`` compiles and defines ``PARTS[name]``'s function at top level."""
    function, params = PARTS[name]
    if not source or not source.strip():
        raise PartError(name, "missing", f"empty (it must define {function}({', '.join(params)}))")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise PartError(name, "syntax", f"{exc.msg} (line {exc.lineno} of the part)") from None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    if not defs:
        raise PartError(name, "signature", f"does not define {function}({', '.join(params)}) at top level")
    got = tuple(a.arg for a in defs[-1].args.args)
    if got != params:
        raise PartError(name, "signature",
                        f"{function} takes ({', '.join(got)}), expected ({', '.join(params)})")


def render_game(parts: GameParts, max_turns: int = 4) -> str:
    """The full program of a structured design (module docstring); PartError on a broken part."""
    for name, source in parts.as_dict().items():
        check_part(name, source)
    body = "\n\n".join(source.strip("\n") for source in parts.as_dict().values())
    return body + "\n" + CLASS_TEMPLATE.format(max_turns=max_turns)


def split_parts(source: str, hint: str = "") -> GameParts:
    """The parts of a file defining ``make_task``, ``check`` and ``solve``; every other top-level
    statement (imports, constants, helpers) goes with the ``reset`` part, in file order. A
    rendered program splits back into its parts (the skeleton's class is dropped)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    functions = {function: name for name, (function, _) in PARTS.items()}
    found: dict[str, str] = {}
    shared: list[str] = []
    for node in tree.body:
        start = node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno
        text = "\n".join(lines[start - 1:node.end_lineno])
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            found[functions[node.name]] = text
        elif isinstance(node, ast.ClassDef) and node.name == SKELETON_CLASS:
            continue  # a rendered program: the skeleton's own class is not a part
        else:
            shared.append(text)
    missing = [name for name in PARTS if name not in found]
    if missing:
        raise PartError(missing[0], "missing", f"the file defines no {PARTS[missing[0]][0]}()")
    reset = "\n\n".join([*shared, found["reset"]])
    return GameParts(reset=reset, check=found["check"], solution=found["solution"], hint=hint)


def format_parts(parts: GameParts) -> str:
    """A structured design as the designer writes it: one tag per part, then the hint."""
    blocks = [f"<{name}>\n{source.strip()}\n</{name}>" for name, source in parts.as_dict().items()]
    return "\n".join(blocks) + f"\n<hint>{parts.hint}</hint>"
