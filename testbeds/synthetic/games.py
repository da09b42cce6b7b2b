"""Helpers for single-player text games: read the agent's ``\\boxed{...}`` answer, normalise it.

* ``extract_boxed(text)`` — the content of the last ``\\boxed{...}`` in ``text`` (braces may
  nest), or ``None`` when there is none.
* ``normalize_answer(text)`` — lower-cased, surrounding ``$``/spaces/period stripped, inner
  whitespace collapsed; numbers written like ``3.0`` become ``3``.

Standard library only (``re``): this module is part of the sandbox prelude.
"""

import re


def extract_boxed(text):
    """Content of the last ``\\boxed{...}`` in ``text`` (nested braces allowed), else None."""
    if not isinstance(text, str):
        return None
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    out = []
    while i < len(text):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return "".join(out).strip()
        out.append(ch)
        i += 1
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
