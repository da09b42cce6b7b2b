"""Reading files that users hand us: every problem becomes a message, never a traceback.

* ``read_user_text(path, what)`` — a whole text file (configs, programs, design files). A
  missing file, a directory, a device (``/dev/zero``), a pipe, a file over the size cap
  (``MAX_USER_FILE_BYTES`` unless the caller says less), no permission or bytes that are not
  UTF-8 raise ``ConfigError`` of one line with the path and the reason (for bad bytes: the line
  and column of the first one), before more than the cap is read.
* ``jsonl_records(path)`` — a JSONL file (or ``-`` for stdin), one ``Record`` per non-blank
  line, in order. Lines are split on ``\\n`` as bytes and each is decoded on its own, so one
  line of bad bytes or bad JSON costs only that line: its ``Record`` carries ``error`` (``"not
  UTF-8: ..."``, ``"bad JSON: ..."``) and the line number instead of a value. Blank lines are
  skipped (JSONL writers use them as separators); every ``Record`` keeps its 1-based line number
  so outputs can be joined back to inputs. Whatever a line holds (an integer of more than
  ``MAX_INT_DIGITS`` digits, nesting too deep for the parser, more than ``MAX_LINE_BYTES``) it
  costs only that line. A named file must be a regular file (a device or pipe is refused).

The line-oriented tools (a plugin's ``curriculum NAME`` commands that read JSONL, e.g. a solver
or a validator over a file of instances) print exactly one output
line per record and exit with status 1 when any record failed (``EXIT_SOME_FAILED``), 2 when the
command itself failed (``EXIT_COMMAND_FAILED``: the file could not be read, a bad option).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curriculum.core.config import ConfigError
from curriculum.core.safefs import MAX_USER_FILE_BYTES, file_kind, os_problem, read_bounded

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


def _decode_error(raw: bytes, exc: UnicodeDecodeError) -> str:
    line = raw.count(b"\n", 0, exc.start) + 1
    column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
    return f"not UTF-8 (byte 0x{raw[exc.start]:02x} at line {line}, column {column})"


def read_user_bytes(path: str | Path, what: str = "file", limit: int = MAX_USER_FILE_BYTES) -> bytes:
    """The bytes of a user's file: a regular file of at most ``limit`` bytes
    (``curriculum.core.safefs.read_bounded``); ``ConfigError`` naming the path and the reason."""
    return read_bounded(path, what, limit)


def read_user_text(path: str | Path, what: str = "file", limit: int = MAX_USER_FILE_BYTES) -> str:
    """The UTF-8 text of a user's file; ``ConfigError`` naming the path and the reason."""
    raw = read_user_bytes(path, what, limit)
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


MAX_LINE_BYTES = 16 << 20
"""Longest JSONL line read; a longer one is an error of its own, skipped to its end."""


def jsonl_records(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Record]:
    """The records of a JSONL file, or of stdin for ``-`` (see the module docstring)."""
    if str(path) == "-":
        handle = sys.stdin.buffer
    else:
        handle = open_regular(path)
    for number, raw in enumerate(_bounded_lines(handle, max_line_bytes), start=1):
        if raw is None:
            yield Record(number, error=f"line longer than {max_line_bytes:,} bytes; not read")
            continue
        raw = raw.rstrip(b"\r\n")
        if raw.strip():
            yield parse_line(number, raw)


def open_regular(path: str | Path):
    """A binary handle on a user's regular file (not a device, pipe or directory), read-only."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(os_problem(path, exc)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ConfigError(f"{path}: is {file_kind(mode)}, not a regular file")
    return os.fdopen(fd, "rb")


def _bounded_lines(handle, limit: int) -> Iterator[bytes | None]:
    """Lines of ``handle`` (with their newline); ``None`` for a line over ``limit`` bytes, whose
    rest is read in blocks and dropped."""
    try:
        while line := handle.readline(limit + 1):
            if len(line) <= limit or line.endswith(b"\n"):
                yield line
                continue
            while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield None
    except OSError as exc:  # e.g. a vanished mount
        raise ConfigError(f"{getattr(handle, 'name', 'input')}: read failed ({exc.strerror or exc})") from None
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
