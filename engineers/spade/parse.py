"""Lenient reading of a designer's output: the program and the privileged hint.

``parse_design(text, setting)`` returns a ``ParsedDesign`` (``program``, ``hint``) or raises
``DesignParseError`` whose ``reason`` is ``parse_error`` or ``missing_hint`` and whose message
says what was missing. Accepted forms, most specific first:

* program: the longest ```python (or ```py / bare ```) fenced block that contains a ``class``;
  else ``<program>...</program>`` / ``<code>...</code>``; else an unterminated fence (output cut
  off at the token limit); else everything from the first ``import``/``class`` line onward when it
  contains a class.
* hint: ``<hint>...</hint>`` (closing tag optional at the end of the text); else a
  ``Hint:``/``**Hint**:`` line (with the lines following it up to a blank line); else a
  ``hint``/``HINT`` string constant or class attribute in the program.

``parse_structured(text, max_turns)`` reads a structured design (``design_mode: structured``):
one ``<reset>``, ``<check>`` and ``<solution>`` tag each (closing tag optional before the next
tag; a code fence inside a tag is unwrapped) and the hint, renders the parts into the
``GameEnv`` skeleton and returns the program. A missing part is a ``parse_error``, a part that
does not compile a ``syntax_error``, one that does not define its function a ``bad_part``; the
detail names the part.

Thinking blocks (``<think>...</think>``) are dropped first. Import lines of
``testbeds.spade.synthetic`` are removed from the program (``ToolEnv`` and the game functions are
provided by the sandbox prelude).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from engineers.spade.config import RejectReason
from testbeds.spade.synthetic.skeleton import PARTS, GameParts, PartError, render_game


@dataclass(frozen=True)
class ParsedDesign:
    """The program and hint read from one output."""

    program: str
    """Python source of the environment."""
    hint: str
    """The privileged hint."""


class DesignParseError(ValueError):
    """The output could not be read; ``reason`` is a ``RejectReason``."""

    def __init__(self, reason: RejectReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


_FENCE = re.compile(r"```[ \t]*(python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)
_OPEN_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*)$", re.S | re.I)
_TAGGED = re.compile(r"<(program|code)>\s*(.*?)\s*</\1>", re.S | re.I)
_HINT_TAG = re.compile(r"<hint>\s*(.*?)\s*(?:</hint>|$)", re.S | re.I)
_HINT_LINE = re.compile(r"^[ \t>*_#-]*hint[*_ ]*:[*_ ]*(.+?)(?:\n[ \t]*\n|\Z)", re.S | re.I | re.M)
_SYNTHETIC_IMPORT = re.compile(r"^[ \t]*(from|import)[ \t]+testbeds(\.spade\.synthetic)?\b.*$", re.M)


def _strip_thinking(text: str) -> str:
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S | re.I)
    return re.sub(r"^.*?</think>", "", text, flags=re.S | re.I)  # opening tag in the template


def find_program(text: str) -> str | None:
    """The environment program in ``text`` (see module docstring), or None."""
    blocks = [m.group(2) for m in _FENCE.finditer(text) if re.search(r"^\s*class\s", m.group(2), re.M)]
    if blocks:
        return max(blocks, key=len)
    tagged = [m.group(2) for m in _TAGGED.finditer(text) if "class " in m.group(2)]
    if tagged:
        return max(tagged, key=len)
    last_fence = text.rfind("```")
    if last_fence >= 0:
        tail = _OPEN_FENCE.match(text[last_fence:])
        if tail and re.search(r"^\s*class\s", tail.group(1), re.M):
            return tail.group(1)
    start = re.search(r"^(import |from \w+ import |class )", text, re.M)
    if start and re.search(r"^class\s", text[start.start():], re.M):
        body = text[start.start():]
        return re.split(r"^<hint>|^\s*(?:\*\*)?hint(?:\*\*)?\s*:", body, maxsplit=1, flags=re.M | re.I)[0]
    return None


def find_hint(text: str, program: str | None) -> str | None:
    """The hint in ``text`` (outside the program), else a ``hint`` constant in the program."""
    outside = text.replace(program, "") if program else text
    outside = _FENCE.sub("", outside)
    for pattern in (_HINT_TAG, _HINT_LINE):
        match = pattern.search(outside)
        if match and match.group(1).strip():
            return " ".join(match.group(1).split())
    if program:
        try:
            tree = ast.parse(program)
        except SyntaxError:
            return None
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)
                    and any(isinstance(t, ast.Name) and t.id.lower() == "hint" for t in node.targets)):
                return " ".join(node.value.value.split())
    return None


def parse_design(text: str) -> ParsedDesign:
    """Program and hint from a designer output, or ``DesignParseError`` with the reason."""
    text = _strip_thinking(text or "")
    program = find_program(text)
    if program is None or not program.strip():
        raise DesignParseError(RejectReason.parse_error,
                               "no Python program with a class found (expected a ```python block)")
    program = _SYNTHETIC_IMPORT.sub("", program).strip("\n") + "\n"
    hint = find_hint(text, program)
    if not hint:
        raise DesignParseError(RejectReason.missing_hint,
                               "no hint found (expected <hint>...</hint> after the program)")
    return ParsedDesign(program=program, hint=hint)


_PART_ERRORS = {"missing": RejectReason.parse_error, "syntax": RejectReason.syntax_error,
                "signature": RejectReason.bad_part}


def find_part(text: str, name: str) -> str | None:
    """The code inside ``<name>...</name>`` (closing tag optional before the next tag or the
    end), with a surrounding code fence removed; None when the tag is absent."""
    match = re.search(rf"<{name}>\s*\n?(.*?)(?:</{name}>|(?=\n\s*<(?:{'|'.join(PARTS)}|hint)>)|\Z)",
                      text, re.S | re.I)
    if match is None:
        return None
    fenced = _FENCE.search(match.group(1))
    body = fenced.group(2) if fenced else re.sub(r"^```[ \t]*\w*[ \t]*\n", "", match.group(1).strip())
    return body.strip("\n")


def parse_structured(text: str, max_turns: int = 4) -> ParsedDesign:
    """Program (the parts rendered into the skeleton) and hint of a structured design, or
    ``DesignParseError`` with the reason (module docstring)."""
    text = _strip_thinking(text or "")
    found = {name: find_part(text, name) for name in PARTS}
    missing = [name for name, body in found.items() if body is None]
    if missing:
        raise DesignParseError(RejectReason.parse_error,
                               f"part <{missing[0]}> is missing (a structured design needs <reset>, "
                               "<check> and <solution>)")
    hint_match = _HINT_TAG.search(text)
    hint = " ".join(hint_match.group(1).split()) if hint_match else ""
    try:
        program = render_game(GameParts(reset=found["reset"] or "", check=found["check"] or "",
                                        solution=found["solution"] or "", hint=hint), max_turns)
    except PartError as exc:
        raise DesignParseError(_PART_ERRORS[exc.kind], str(exc)) from None
    if not hint:
        raise DesignParseError(RejectReason.missing_hint,
                               "no hint found (expected <hint>...</hint> after the parts)")
    return ParsedDesign(program=program, hint=hint)
