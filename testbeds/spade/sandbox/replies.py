"""Every reply from a sandboxed worker is untrusted input: decode and check it without exceptions.

Model code runs in the instance and can replace anything there (``json.dumps`` included), so
a reply frame may hold any bytes. The host accepts one only when all of this holds:

* the frame is UTF-8 JSON, nested at most ``max_reply_depth`` deep, with no ``NaN`` /
  ``Infinity`` / overflowing float (``1e999``), no integer longer than ``max_reply_int_digits``
  digits, and no string (keys included) holding a lone surrogate — so whatever is accepted
  can be written out again as strict JSON by anything downstream;
* an **instance reply** is an object with exactly the keys ``ok`` (a bool), ``output`` (a
  string) and ``value`` (when ``ok``) or ``error`` (when not). An ``error`` is an object with a
  ``kind`` an instance can report (``INSTANCE_KINDS``: ``syntax_error``, ``exception``,
  ``memory_limit``, ``bad_return``, ``forbidden_import``, ``bad_program``, ``bad_call``), a
  string ``detail`` and optional ``line`` (int), ``traceback`` (string). A ``timeout``,
  ``crash`` or any unknown kind coming from an instance is a forgery and is refused: only the
  host decides those;
* a **control reply** (from the zygote) is an object with ``ok`` and a ``value`` object, or an
  ``error`` object as above with any ``FailureKind``; an **instance offer** is
  ``{"op": "instance", "pid": positive int}``.

Anything else raises ``ReplyError`` (never another exception); the pool turns it into a
``bad_return`` failure for that instance (which it then closes) or, for the zygote, a
``crash`` of the worker (which it kills and restarts). Numbers the API hands on (a step's
reward) are checked with comparisons only (``finite_float``), never with a conversion that
could raise.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, get_args

from testbeds.spade.sandbox.config import Failure, FailureKind

INSTANCE_KINDS = frozenset({"syntax_error", "exception", "memory_limit", "bad_return",
                            "forbidden_import", "bad_program", "bad_call"})
"""Failure kinds an instance may report about itself; the others are decided by the host."""
ALL_KINDS = frozenset(get_args(FailureKind))
MAX_DETAIL_CHARS = 2_000
MAX_TRACEBACK_CHARS = 16_000
FLOAT_MAX = 1.7976931348623157e308
_SURROGATE = re.compile("[\ud800-\udfff]")


class ReplyError(Exception):
    """A reply that breaks the protocol; ``detail`` says how."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail[:500]


@dataclass(frozen=True)
class ReplyLimits:
    """The limits a decoded reply must respect."""

    max_depth: int
    """Deepest nesting of lists and objects (the reply's own envelope counts as one level)."""
    max_int_digits: int
    """Most digits of any integer."""


@dataclass(frozen=True)
class InstanceReply:
    """A checked instance reply: ``value`` when ``failure`` is None."""

    value: Any
    output: str
    failure: Failure | None


def _refuse_constant(name: str) -> Any:
    raise ReplyError(f"non-finite number {name} in the reply")


def decode(payload: bytes, limits: ReplyLimits) -> Any:
    """The JSON value of ``payload``, checked as the module docstring says, or ``ReplyError``."""
    try:
        value = json.loads(payload.decode("utf-8"), parse_constant=_refuse_constant)
    except ReplyError:
        raise
    except UnicodeDecodeError as exc:
        raise ReplyError(f"reply is not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise ReplyError("reply nested too deeply to decode") from None
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        raise ReplyError(f"undecodable reply: {exc}") from None
    check_tree(value, limits.max_depth, limits.max_int_digits)
    return value


def check_tree(value: Any, max_depth: int, max_int_digits: int = 4_300) -> None:
    """Refuse nesting deeper than ``max_depth``, strings holding lone surrogates, floats that
    overflowed to infinity (``1e999``) and integers of more than ``max_int_digits`` digits
    (iterative: no recursion to exhaust; integers are sized by their bits, never converted)."""
    most_bits = math.ceil(max_int_digits * math.log2(10)) + 1
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii() and _SURROGATE.search(item):
                raise ReplyError("a string in the reply holds a lone surrogate (not valid UTF-8)")
        elif kind is float:
            if not math.isfinite(item):
                raise ReplyError("a number in the reply overflows a float")
        elif kind is int:
            if item.bit_length() >= most_bits - 4 and len(str(abs(item))) > max_int_digits:
                raise ReplyError(f"integer of {len(str(abs(item)))} digits exceeds "
                                 f"max_reply_int_digits ({max_int_digits})")
        elif kind is list or kind is dict:
            if depth > max_depth:
                raise ReplyError(f"reply nested deeper than {max_depth} levels")
            if kind is dict:
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)


def finite_float(value: Any) -> float | None:
    """``value`` as a finite float when it is a JSON number (not a bool) a float can hold,
    else None. Uses comparisons only, so a 400-digit integer cannot raise ``OverflowError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return float(value) if -FLOAT_MAX <= value <= FLOAT_MAX else None


def _failure(error: Any, kinds: frozenset[str], source: str) -> Failure:
    if not isinstance(error, dict):
        raise ReplyError(f"{source} error is {type(error).__name__}, not an object")
    unknown = set(error) - {"kind", "detail", "line", "signal", "traceback"}
    if unknown:
        raise ReplyError(f"{source} error has unknown fields {sorted(unknown)[:5]}")
    kind, detail = error.get("kind"), error.get("detail")
    if not isinstance(kind, str) or kind not in kinds:
        raise ReplyError(f"{source} reported failure kind {str(kind)[:40]!r}, which it may not report")
    if not isinstance(detail, str):
        raise ReplyError(f"{source} error detail is not a string")
    line, traceback, number = error.get("line"), error.get("traceback"), error.get("signal")
    if line is not None and (isinstance(line, bool) or not isinstance(line, int)
                             or not -(1 << 31) < line < 1 << 31):
        raise ReplyError(f"{source} error line is not a line number")
    if traceback is not None and not isinstance(traceback, str):
        raise ReplyError(f"{source} error traceback is not a string")
    if number is not None and (source == "instance" or isinstance(number, bool)
                               or not isinstance(number, int) or not 0 < number < 128):
        raise ReplyError(f"{source} error signal is not a signal number")
    return Failure(kind=kind, detail=detail[:MAX_DETAIL_CHARS], line=line, signal=number,
                   traceback=None if traceback is None else traceback[-MAX_TRACEBACK_CHARS:])


def instance_reply(payload: bytes, limits: ReplyLimits) -> InstanceReply:
    """Check one reply of an instance (see the module docstring)."""
    reply = decode(payload, limits)
    if not isinstance(reply, dict):
        raise ReplyError(f"reply is {type(reply).__name__}, not an object")
    ok, output = reply.get("ok"), reply.get("output", "")
    if not isinstance(ok, bool):
        raise ReplyError("reply has no boolean 'ok'")
    if not isinstance(output, str):
        raise ReplyError("reply 'output' is not a string")
    expected = {"ok", "output", "value" if ok else "error"}
    if set(reply) - expected or (set(expected) - {"output"}) - set(reply):
        raise ReplyError(f"reply has fields {sorted(reply)[:6]}, expected {sorted(expected)}")
    if ok:
        return InstanceReply(reply["value"], output, None)
    return InstanceReply(None, output, _failure(reply["error"], INSTANCE_KINDS, "instance"))


def control_reply(payload: bytes, limits: ReplyLimits) -> dict:
    """Check one reply of the zygote; returns ``{"ok": True, "value": {...}}`` or
    ``{"ok": False, "error": {...}}`` with the error normalised."""
    reply = decode(payload, limits)
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise ReplyError("control reply is not an object with a boolean 'ok'")
    if reply["ok"]:
        if not isinstance(reply.get("value"), dict):
            raise ReplyError("control reply value is not an object")
        return {"ok": True, "value": reply["value"]}
    failure = _failure(reply.get("error"), ALL_KINDS, "worker")
    return {"ok": False, "error": failure.model_dump(exclude_none=True)}


def instance_offer(payload: bytes, limits: ReplyLimits) -> int:
    """The sandbox pid of an offered instance, from ``{"op": "instance", "pid": N}``."""
    message = decode(payload, limits)
    if not isinstance(message, dict) or message.get("op") != "instance" or set(message) != {"op", "pid"}:
        raise ReplyError(f"unexpected control message: {str(message)[:200]}")
    pid = message["pid"]
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 1 << 22:
        raise ReplyError(f"instance offer with a bad pid: {str(pid)[:40]}")
    return pid
