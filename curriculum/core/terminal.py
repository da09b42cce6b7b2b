"""Text from a model or a run dir, made safe to print on a terminal.

``terminal_safe(text)`` replaces every character a terminal would act on instead of showing —
C0 controls other than newline and tab (ESC starts clear-screen, window-title and clipboard
sequences; carriage return and backspace overwrite what was shown), DEL, the C1 controls
(U+0080–U+009F, which some terminals read as ESC sequences) and the bidirectional overrides and
isolates (which reorder what is shown) — by a visible escape such as ``\\x1b`` or ``\\u202e``.
Everything else, newlines and non-ASCII letters included, is left as it is. Anything that
prints what a model wrote (``curriculum show``, a plugin's run view) passes it through here.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every terminal control character shown as an escape (module docstring)."""
    return _UNSAFE.sub(_visible, text)
