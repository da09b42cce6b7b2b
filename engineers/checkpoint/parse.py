"""Lenient extraction of the engineer's JSON answer from free text. Pure functions; never raise.

``parse_answer(text)`` finds candidate JSON objects and returns the **last** usable one:

1. Candidates are the top-level ``{...}`` spans of the text, found by a string-aware brace
   scanner (code fences are just text around them). An object still open at the end of the
   text (a truncated generation) is a candidate running to the end.
2. Each candidate is tried with ``json.loads``; if that fails, it is repaired and tried again.
   ``repair`` (outside string literals): removes ``//`` and ``/* */`` comments, turns
   single-quoted strings into double-quoted ones, quotes bare keys (``3x3: {...}``), maps
   ``True/False/None`` to JSON, drops trailing commas, and closes a truncated object (an open
   string is closed, a number or word cut off at the very end is dropped, then a dangling
   ``"key":`` or ``,`` is dropped, and open brackets are closed).
   Objects are decoded with repeated keys merged when both values are objects (small models
   often write ``"sizes": {...}`` several times); otherwise the later value wins.
3. Among candidates that parse to an object, the last one that looks like a proposal (has a
   ``sizes`` key or a size key such as ``"5x5"``) wins; otherwise the last object.

The answer's ``summary`` comes from the object's ``summary`` string, else from a prose line
starting with ``Summary:``; ``reasoning`` is the object's ``reasoning`` string, else the text
before the chosen object. ``proposal`` is the object without ``summary``/``reasoning``, with
size-keyed objects found next to ``sizes`` folded into it (``gather_sizes``). With the testbed's
declared ``BucketSpace`` (``parse_answer(text, space)``), the space's container and bucket names
also mark a proposal, and ``fold_buckets`` brings what small models write instead into the
space's layout (bucket entries at the top level, a bare number as a knob-less bucket's share).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from curriculum.core.spaces import BucketSpace

_SIZE_KEY = re.compile(r"^\s*(?:size\s*[_-]?\s*)?\d{1,2}(?:\s*[x×*]\s*\d{1,2})?\s*$", re.I)
_SUMMARY_LINE = re.compile(r"^\W*summary\W*:\s*(.+)$", re.I | re.M)
_BARE_WORD = re.compile(r"[A-Za-z0-9_\-.×+]")


@dataclass
class ParsedAnswer:
    """What ``parse_answer`` found."""

    proposal: dict[str, Any] | None
    """The chosen object minus ``summary``/``reasoning``; ``None`` when nothing parsed."""
    summary: str | None
    """The model's summary of its choice (module S next round)."""
    reasoning: str
    """Reasoning text (the ``reasoning`` field or the prose before the object)."""
    method: str
    """``json`` (parsed as is), ``repaired``, or ``none``."""
    candidates: int
    """Number of ``{...}`` spans found."""
    error: str | None = None
    """Why nothing usable was found (``None`` on success)."""
    repairs: list[str] = field(default_factory=list)
    """Repairs applied to the chosen candidate."""


def parse_answer(text: str, space: BucketSpace | None = None) -> ParsedAnswer:
    """Extract the last usable JSON object from ``text`` (see module docstring)."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    spans = find_object_spans(text)
    parsed: list[tuple[int, dict[str, Any], str, list[str]]] = []
    last_error = "no JSON object ('{' ... '}') in the output"
    for start, end in spans:
        value, method, repairs, error = _load(text[start:end])
        if isinstance(value, dict):
            parsed.append((start, value, method, repairs))
        elif error:
            last_error = error
        elif value is not None:
            last_error = f"the JSON value is a {type(value).__name__}, not an object"
    if not parsed:
        return ParsedAnswer(proposal=None, summary=_summary_line(text), reasoning=text.strip(),
                            method="none", candidates=len(spans), error=last_error)
    looks = [p for p in parsed if looks_like_proposal(p[1], space)]
    start, obj, method, repairs = (looks or parsed)[-1]
    summary = obj.get("summary") if isinstance(obj.get("summary"), str) else _summary_line(text)
    reasoning = obj.get("reasoning") if isinstance(obj.get("reasoning"), str) else text[:start].strip()
    proposal = gather_sizes({k: v for k, v in obj.items() if k not in ("summary", "reasoning")})
    if space is not None:
        proposal = fold_buckets(proposal, space)
    return ParsedAnswer(proposal=proposal, summary=summary.strip() if summary else None,
                        reasoning=reasoning, method=method, candidates=len(spans), repairs=repairs)


def looks_like_proposal(obj: dict[str, Any], space: BucketSpace | None = None) -> bool:
    """Has a ``sizes`` key or at least one size-like key (``"5x5"``, ``"5"``, ``"size_5"``); with a
    declared ``space``, also its container key (reasoning_gym: ``buckets``) or one of its bucket
    names (``"gcd:1"``)."""
    if "sizes" in obj or any(isinstance(k, str) and _SIZE_KEY.match(k) for k in obj):
        return True
    return space is not None and (space.container in obj or any(k in space.buckets for k in obj))


def fold_buckets(obj: dict[str, Any], space: BucketSpace) -> dict[str, Any]:
    """The answer in the space's layout, for what small models write instead: bucket entries at
    the top level move into the container (entries already inside it win), and in a space
    without knobs a bare number for a bucket is its share (``"gcd:1": 0.3`` →
    ``{"share": 0.3}``). Anything else is left for the testbed's ``project`` to judge."""
    inner = obj.get(space.container)
    stray = {k: v for k, v in obj.items() if k in space.buckets}
    if not stray and not isinstance(inner, dict):
        return obj
    merged = {**stray, **(inner if isinstance(inner, dict) else {})}
    if not space.knobs:
        merged = {k: ({space.share_key: v} if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                  for k, v in merged.items()}
    rest = {k: v for k, v in obj.items() if k not in stray and k != space.container}
    return {**rest, space.container: merged}


def gather_sizes(obj: dict[str, Any]) -> dict[str, Any]:
    """Fold size-keyed objects written next to ``"sizes"`` (after the model closed it too early)
    into ``"sizes"``; entries already inside ``"sizes"`` win. Other objects are returned as is."""
    sizes = obj.get("sizes")
    if not isinstance(sizes, dict):
        return obj
    stray = {k: v for k, v in obj.items() if k != "sizes" and isinstance(v, dict) and _SIZE_KEY.match(k)}
    if not stray:
        return obj
    rest = {k: v for k, v in obj.items() if k not in stray}
    return {**rest, "sizes": {**stray, **sizes}}


def _summary_line(text: str) -> str | None:
    matches = _SUMMARY_LINE.findall(text)
    return matches[-1].strip() if matches else None


def _merge_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Object hook: a repeated key whose values are both objects is merged (later fields win);
    otherwise the later value wins, as in plain ``json``."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _load(candidate: str) -> tuple[Any, str, list[str], str | None]:
    try:
        return json.loads(candidate, object_pairs_hook=_merge_pairs), "json", [], None
    except (ValueError, RecursionError):
        pass
    fixed, repairs = repair(candidate)
    try:
        return json.loads(fixed, object_pairs_hook=_merge_pairs), "repaired", repairs, None
    except (ValueError, RecursionError) as err:
        return None, "none", repairs, f"JSON could not be repaired: {err}"


# -- scanning -------------------------------------------------------------------------------------

def find_object_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every top-level ``{...}``; an unclosed one runs to the end of text."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = -1
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote or ch == "\n" and quote == "'":
                quote = None
            continue
        if depth > 0 and ch in "\"'":
            # A quote opens a string only inside an object; apostrophes in prose are ignored.
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    if depth > 0:
        spans.append((start, len(text)))
    return spans


# -- repair ---------------------------------------------------------------------------------------

def repair(candidate: str) -> tuple[str, list[str]]:
    """Rewrite near-JSON into JSON (see the module docstring); returns the text and repairs made."""
    out: list[str] = []
    repairs: list[str] = []
    stack: list[str] = []
    i, n = 0, len(candidate)

    def note(what: str) -> None:
        if what not in repairs:
            repairs.append(what)

    while i < n:
        ch = candidate[i]
        if ch in "\"'":
            body, i, closed = _read_string(candidate, i)
            if ch == "'":
                note("single quotes")
            if not closed:
                note("closed an unterminated string")
            out.append(json.dumps(body))
            continue
        if candidate.startswith("//", i):
            end = candidate.find("\n", i)
            i = n if end < 0 else end
            note("comments")
            continue
        if candidate.startswith("/*", i):
            end = candidate.find("*/", i + 2)
            i = n if end < 0 else end + 2
            note("comments")
            continue
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
            out.append(ch)
        elif ch in "}]":
            _drop_trailing_comma(out, note)
            if stack and stack[-1] == ch:
                stack.pop()
                out.append(ch)
            elif ch in stack:  # close intermediate brackets the model forgot
                while stack and stack[-1] != ch:
                    out.append(stack.pop())
                stack.pop()
                out.append(ch)
                note("balanced brackets")
            else:
                note("dropped a stray bracket")
        elif _BARE_WORD.match(ch):
            j = i
            while j < n and _BARE_WORD.match(candidate[j]):
                j += 1
            word = candidate[i:j]
            if j == n and stack:  # cut off mid-token by the generation limit: the value is unknown
                note("dropped a truncated value")
            else:
                out.append(_bare(word, candidate, j, note))
            i = j
            continue
        elif ch in ",:" or ch.isspace():
            out.append(ch)
        else:
            note("dropped stray characters")
        i += 1

    if stack:
        _drop_dangling(out, note)
        while stack:
            out.append(stack.pop())
        note("closed a truncated object")
    return "".join(out), repairs


def _read_string(text: str, i: int) -> tuple[str, int, bool]:
    """Read a quoted string starting at ``text[i]``; returns (content, next index, closed)."""
    quote = text[i]
    j = i + 1
    chars: list[str] = []
    while j < len(text):
        ch = text[j]
        if ch == "\\" and j + 1 < len(text):
            nxt = text[j + 1]
            chars.append({"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(nxt, nxt))
            j += 2
            continue
        if ch == quote:
            return "".join(chars), j + 1, True
        chars.append(ch)
        j += 1
    return "".join(chars), j, False


_LITERALS = {"true": "true", "false": "false", "null": "null", "none": "null",
             "nan": "null", "infinity": "null", "-infinity": "null"}


def _bare(word: str, text: str, end: int, note: Any) -> str:
    """A bare token: a number or literal stays (normalised); a key before ``:`` is quoted."""
    rest = text[end:end + 40].lstrip()
    if rest.startswith(":"):
        note("quoted bare keys")
        return json.dumps(word)
    if word.lower() in _LITERALS:
        if word != _LITERALS[word.lower()]:
            note("Python/JS literals")
        return _LITERALS[word.lower()]
    try:
        float(word)
    except ValueError:
        note("quoted bare values")
        return json.dumps(word)
    if re.fullmatch(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?", word):
        return word
    note("normalised numbers")
    value = float(word)
    return repr(value) if value == value and abs(value) != float("inf") else "null"


def _drop_trailing_comma(out: list[str], note: Any) -> None:
    k = len(out) - 1
    while k >= 0 and out[k].isspace():
        k -= 1
    if k >= 0 and out[k] == ",":
        del out[k]
        note("trailing commas")


def _drop_dangling(out: list[str], note: Any) -> None:
    """Before closing a truncated object: drop a trailing ``,``, ``:`` or a key without value."""
    while True:
        text = "".join(out).rstrip()
        if text.endswith(","):
            out[:] = [text[:-1]]
            continue
        if text.endswith(":"):
            # Remove the key (a JSON string) in front of the colon as well.
            head = text[:-1].rstrip()
            if head.endswith('"'):
                k = len(head) - 2
                while k >= 0 and not (head[k] == '"' and (k == 0 or head[k - 1] != "\\")):
                    k -= 1
                head = head[:max(k, 0)]
            out[:] = [head]
            note("dropped a dangling key")
            continue
        # A key with no colon yet, directly after '{' or ','
        m = re.search(r'([{,])\s*"(?:[^"\\]|\\.)*"$', text)
        if m:
            out[:] = [text[:m.start(1) + 1]]
            note("dropped a dangling key")
            continue
        out[:] = [text]
        return
