"""Helpers for single-player text games: read the agent's ``\\boxed{...}`` answer, normalise it.

* ``extract_boxed(text)`` — the content of the last complete ``\\boxed{...}`` in ``text`` (braces
  may nest), or ``None`` when there is none.
* ``normalize_answer(text)`` — lower-cased, surrounding ``$``/spaces/period stripped, inner
  whitespace collapsed; numbers written like ``3.0`` become ``3``.

Standard library only (``re``): this module is part of the sandbox prelude.
"""

import re


_BOXED = re.compile(r"\\boxed\s*\{")


def extract_boxed(text):
    """Content of the last complete ``\\boxed{...}`` in ``text`` (braces nest, ``\\boxed {`` counts), else None.

    An unclosed last box (a truncated answer) falls back to the complete box before it. This is
    the project's one reading of a boxed answer: environments, admission, agent play and the
    held-out reasoning-gym eval all use it.
    """
    if not isinstance(text, str):
        return None
    for match in reversed(list(_BOXED.finditer(text))):
        depth, start = 1, match.end()
        for pos in range(start, len(text)):
            if text[pos] == "{":
                depth += 1
            elif text[pos] == "}":
                depth -= 1
                if depth == 0:
                    return text[start:pos].strip()
    return None


def normalize_answer(text):
    """Canonical form for comparing answers: case, spaces, ``$`` and trailing periods ignored."""
    text = str(text).strip()
    for _ in range(2):  # "$3$." and "3.$" alike
        text = text.rstrip(".").strip().strip("$").strip()
    text = re.sub(r"\s+", " ", text).lower()
    if re.fullmatch(r"-?\d+\.0+", text):
        text = text.split(".")[0]
    return text
