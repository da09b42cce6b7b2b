"""Reading files that users hand us: every problem becomes a message, never a traceback.

* ``read_user_text(path, what)`` — a whole text file (configs, programs, run-dir records). A
  missing file, a directory, no permission or bytes that are not UTF-8 raise ``ConfigError``
  with the path and the reason (for bad bytes: the line and column of the first one).
* ``jsonl_records(path)`` — a JSONL file (or ``-`` for stdin), one ``Record`` per non-blank
  line, in order. Lines are split on ``\\n`` as bytes and each is decoded on its own, so one
  line of bad bytes or bad JSON costs only that line: its ``Record`` carries ``error`` (``"not
  UTF-8: ..."``, ``"bad JSON: ..."``) and the line number instead of a value. Blank lines are
  skipped (JSONL writers use them as separators); every ``Record`` keeps its 1-based line number
  so outputs can be joined back to inputs. Whatever a line holds (an integer of more than
  ``MAX_INT_DIGITS`` digits, nesting too deep for the parser) it costs only that line.

The line-oriented tools (``curriculum mapf solve`` / ``validate``) print exactly one output
line per record and exit with status 1 when any record failed (``EXIT_SOME_FAILED``), 2 when the
command itself failed (``EXIT_COMMAND_FAILED``: the file could not be read, a bad option).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curriculum.core.config import ConfigError

EXIT_SOME_FAILED = 1
"""Exit status of a line-oriented tool when at least one input line produced an error."""
EXIT_COMMAND_FAILED = 2
"""Exit status when the command failed as a whole (its input could not be read): no line's
answer can be trusted to be complete."""


@dataclass(frozen=True)
class Record:
    """One non-blank line of a JSONL file: its parsed JSON value, or why it has none."""

    line: int
    """1-based line number in the file."""
    value: Any = None
    """The parsed JSON value (``None`` when ``error`` is set)."""
    error: str | None = None
    """Why the line could not be read (bad encoding or bad JSON)."""


def _file_problem(path: Path, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a file"
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied"
    return f"{path}: cannot be read ({exc.strerror or exc})"


def _decode_error(raw: bytes, exc: UnicodeDecodeError) -> str:
    line = raw.count(b"\n", 0, exc.start) + 1
    column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
    return f"not UTF-8 (byte 0x{raw[exc.start]:02x} at line {line}, column {column})"


def read_user_bytes(path: str | Path) -> bytes:
    """The bytes of a user's file; ``ConfigError`` naming the path and the reason if unreadable."""
    path = Path(path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(_file_problem(path, exc)) from None


def read_user_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of a user's file; ``ConfigError`` naming the path and the reason."""
    raw = read_user_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is {_decode_error(raw, exc)}") from None


def parse_line(number: int, raw: bytes) -> Record:
    """One JSONL line (bytes, without its newline) → a ``Record``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Record(number, error=f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                                    f"{exc.start + 1})")
    try:
        return Record(number, json.loads(text, parse_int=_parse_int))
    except json.JSONDecodeError as exc:
        return Record(number, error=f"bad JSON ({exc.msg} at column {exc.colno})")
    except _HugeInteger as exc:
        return Record(number, error=f"bad JSON ({exc})")
    except RecursionError:
        return Record(number, error="bad JSON (nested too deeply)")
    except (ValueError, OverflowError, MemoryError) as exc:  # anything else: still this line only
        return Record(number, error=f"bad JSON ({type(exc).__name__}: {str(exc)[:120]})")


MAX_INT_DIGITS = 4_300
"""Longest integer read from a JSONL line (Python's own int-string limit); a line with a longer
one gets an error of its own."""


class _HugeInteger(ValueError):
    pass


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise _HugeInteger(f"an integer of {digits:,} digits; at most {MAX_INT_DIGITS:,} are read")
    return int(text)


def jsonl_records(path: str | Path) -> Iterator[Record]:
    """The records of a JSONL file, or of stdin for ``-`` (see the module docstring)."""
    if str(path) == "-":
        lines: Iterator[bytes] = iter(sys.stdin.buffer)
    else:
        path = Path(path)
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise ConfigError(_file_problem(path, exc)) from None
        lines = _closing_lines(handle)
    for number, raw in enumerate(lines, start=1):
        raw = raw.rstrip(b"\r\n")
        if raw.strip():
            yield parse_line(number, raw)


def _closing_lines(handle) -> Iterator[bytes]:
    with handle:
        try:
            yield from handle
        except OSError as exc:  # e.g. a directory opened on some systems, a vanished mount
            raise ConfigError(f"{handle.name}: read failed ({exc.strerror or exc})") from None
