"""Extract a multi-agent plan (one path of ``(row, col)`` cells per agent) from model text.

Canonical format (what the prompt asks for) — one line per agent, the agent's cell at times
0, 1, 2, … (repeat a cell to wait; the path may stop once the agent rests on its goal)::

    Agent 1: (0,0) (0,1) (1,1)
    Agent 2: (2,1) (2,1) (1,1) (1,0)

Also accepted, because models write them:

* ``[r,c]`` instead of ``(r,c)``, any separators (``->``, ``→``, commas, ``;``); labels
  ``Agent 1:``, ``Agent 1 ->``, ``Agent 1 -``, ``Agent 1 =``, ``agent1:``, ``A1:``, ``Robot 1:``,
  ``**Agent 1** path:``, and labels carrying an annotation, ``Agent 1 (start (0,0), goal (0,2)):``
  or ``Agent 1: start (0,0), goal (0,2): <path>`` (the cells after the last colon are the path);
  a label line followed by coordinate-only lines;
* markdown tables: a row per agent (``| Agent 1 | (0,0) (0,1) |``, or columns ``Agent``,
  ``Start``, ``Goal``, ``Path``: the path column is read) or a column per agent and a row per
  time step (``| t | Agent 1 | Agent 2 |``); fenced code blocks;
* unlabeled lines of coordinates, one per agent in order;
* JSON: ``[[[r,c],...], ...]``, ``{"agent1": [[r,c],...], ...}``, ``{"paths"|"plan": ...}``;
* moves from the start, ``Agent 1: R R D W`` or ``RRDW`` or ``right, down, wait`` (U/D/L/R/W,
  up/down/left/right/wait/stay) — only when the starts are given.

Prose may stand before, between and after the plan lines. A line that states no coordinate
sequence is read past: a summary (``Agent 1 cost: 2``, ``Agent 1 reaches its goal at t=2.``), a
label with a lone cell inside prose (``Agent 2 waits at (1,1).``). Inside a plan line a bracket
group with words in it is prose, not a cell (``(detour around the hole at (1,1))``). A group that
is neither prose nor two integers is a malformed cell (``(0,0.5)``, ``(0,1,1)``): the answer fails
to parse with that cell as the reason; it is never dropped.

Models think before answering, so the final answer is preferred: text after the last
``</think>``; then the last fenced code block that parses; then the text after the last "final
answer"/"answer:"/"solution:"/"plan:" marker; then the whole text. Within that text an answer
may state its plan more than once ("Wait, that conflicts. Corrected: ..."): when a label comes
again after a plan that already has a path for every agent of the instance, a new statement of
the plan begins, and the last statement is the answer, as the last answer is everywhere else in
this order. A label that comes again before every agent has a path repeats that agent (below).
A response that echoes the prompt is read after the prompt's answer-format example (that example
line is the prompt's, not a path of the response). Agents are numbered by their labels
(``Agent 0`` … or ``Agent 1`` …). ``parse_plan`` never raises. A response longer than
``MAX_RESPONSE_CHARS`` (200,000 characters) fails as "response too long" and is not parsed;
anything shorter is parsed whole.

Lenient about *format*, never about *content*: the parser does not repair the plan. Every path
it finds is kept (three unlabeled lines are three agents), and each labeled path keeps the agent
its label names (``ParseResult.agents``: ``Agent 1`` / ``Agent 3`` are agents 0 and 2, never
renumbered to 0 and 1), so a response that states a different set of agents than the instance
has fails the Agent-count check whatever its format. Within the answer, labeled and unlabeled
paths together are the agents stated: a coordinate line without a label beside labeled ones is
one more agent (``ParseResult.extra``), and a label that carries a path twice states that agent
twice (``ParseResult.repeated``; its last path is the one the other checks read); either fails
Agent-count. The only numbering choice is the base: the labels are 0-based when the smallest is
0, else 1-based.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from testbeds.mapf_frozenlake.prompts import FORMAT, MOVES_FORMAT

Cell = tuple[int, int]

_COORD = re.compile(r"[\(\[]\s*(-?\d{1,4})\s*,\s*(-?\d{1,4})\s*[\)\]]")
_ANNOTATION = r"[(\[](?=[^)\]\n]*[A-Za-z])(?:[^()\[\]\n]|[(\[][^()\[\]\n]*[)\]])*[)\]]"
"""A bracket group with words in it, one level of groups inside: ``(start (0,0), goal (0,2))``."""
_LABEL = re.compile(
    r"^\W{0,6}(?:agent|robot|a(?=\d))\s*[#_]?\s*(\d{1,2})(?!\d)"
    # a few words, an annotation, or both: "Agent 1 path:", "**Agent 1**:", "Agent 1's moves:",
    # "Agent 1 (start (0,0), goal (0,2)):"
    r"[^:=\n()\[\]\d|>→]{0,24}?(?:\s*" + _ANNOTATION + r")?"
    # then "Agent 1:", "=", "->", "→", "- ", "A1)", "Agent 1.", or a table's "|"
    r"\s*(?::|=>?|->|→|—|–|-(?=[\s(\[])|\)|\.(?!\d)|\|)",
    re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.DOTALL)
_FINAL = re.compile(r"(final\s+(?:answer|plan|paths?|solution)|answer\s*:|solution\s*:|plan\s*:)",
                    re.IGNORECASE)
_MOVE_WORDS = {
    "u": (-1, 0), "up": (-1, 0), "d": (1, 0), "down": (1, 0), "l": (0, -1), "left": (0, -1),
    "r": (0, 1), "right": (0, 1), "w": (0, 0), "wait": (0, 0), "stay": (0, 0),
}
MAX_RESPONSE_CHARS = 200_000
"""Longest response parsed. A longer one is not parsed at all: ``parse_plan`` fails with
"response too long" (never a silent cut to part of it, which could make a plan valid or
invalid by what was cut)."""


@dataclass
class ParseResult:
    """Outcome of ``parse_plan``."""

    ok: bool
    """Whether at least one path with at least one cell was extracted."""
    paths: list[list[Cell]] = field(default_factory=list)
    """One path per agent, in agent order."""
    format: str = ""
    """Which format matched: ``lines``, ``unlabeled``, ``json``, ``moves``."""
    error: str = ""
    """Why parsing failed (empty when ``ok``)."""
    agents: list[int] | None = None
    """0-based agent number of each path as the response states it (``None``: 0, 1, 2, … in order)."""
    unplaced: list[int] = field(default_factory=list)
    """Agents the response states with moves but no known start (no path can be built for them)."""
    extra: int = 0
    """Unlabeled paths written beside labeled ones (each states one more agent; not in ``paths``)."""
    repeated: list[int] = field(default_factory=list)
    """Agents (0-based) whose label carries a path more than once (``paths`` holds the last)."""

    def stated_agents(self) -> list[int]:
        """Every agent number the response states, in order (duplicates kept)."""
        agents = self.agents if self.agents is not None else list(range(len(self.paths)))
        return [*agents, *self.unplaced]


def parse_plan(text: str, num_agents: int | None = None,
               starts: list[Cell] | None = None) -> ParseResult:
    """Parse ``text`` into paths (see the module docstring). Never raises."""
    try:
        return _parse(text, num_agents, starts)
    except Exception as exc:  # pragma: no cover - defensive; the fuzz test keeps this unused
        return ParseResult(False, error=f"internal parse error: {type(exc).__name__}")


def _segments(text: str) -> list[str]:
    segs: list[str] = []
    if "</think>" in text:
        after = text.rsplit("</think>", 1)[1]
        if after.strip():
            text = after
    if "```" in text:
        segs.extend(reversed(_FENCE.findall(text)))
    ms = list(_FINAL.finditer(text))
    if ms:
        segs.append(text[ms[-1].end():])
    segs.append(text)
    return segs


# The canonical answer and nothing else: parsed by two regex passes (a trained policy's usual
# output, so this fast path carries most of the validation throughput).
_CANON_TEXT = re.compile(r"\s*(?:Agent \d{1,2}: ?(?:\(\d{1,3},\d{1,3}\) ?)+\s*)+")
_CANON_LINE = re.compile(r"Agent (\d{1,2}): ?((?:\(\d{1,3},\d{1,3}\) ?)+)")
_CANON_CELL = re.compile(r"\((\d{1,3}),(\d{1,3})\)")


def _parse_canonical(text: str) -> ParseResult | None:
    if not _CANON_TEXT.fullmatch(text):
        return None
    labeled: dict[int, list[Cell]] = {}
    twice: set[int] = set()
    for lab, cells in _CANON_LINE.findall(text):
        if int(lab) in labeled:
            twice.add(int(lab))
        labeled[int(lab)] = [(int(a), int(b)) for a, b in _CANON_CELL.findall(cells)]
    labs = sorted(labeled)
    agents = _agent_numbers(labs)
    return ParseResult(True, [labeled[k] for k in labs], "lines", agents=agents,
                       repeated=[a for lab, a in zip(labs, agents) if lab in twice])


def _agent_numbers(labels: list[int]) -> list[int]:
    """Sorted labels → 0-based agent numbers (0-based labels when the smallest is 0, else 1-based)."""
    base = 0 if labels and labels[0] == 0 else 1
    return [lab - base for lab in labels]


def _parse(text: str, num_agents: int | None, starts: list[Cell] | None) -> ParseResult:
    if not isinstance(text, str):
        return ParseResult(False, error="response is not a string")
    if len(text) > MAX_RESPONSE_CHARS:
        return ParseResult(False, error=f"response too long: {len(text):,} characters, more than "
                                        f"the {MAX_RESPONSE_CHARS:,} that are validated")
    for example in (FORMAT, MOVES_FORMAT):  # an echoed prompt: its example is no answer line
        if example in text:
            after = text.rsplit(example, 1)[1]
            if after.strip():
                text = after
    if len(text) < 4000:
        fast = _parse_canonical(text)
        if fast is not None:
            return fast
    if not text.strip():
        return ParseResult(False, error="empty response")
    for seg in _segments(text):
        r = _parse_json(seg, starts)
        if r is None:
            r = _parse_lines(seg, starts, num_agents)
        if r is not None and (r.ok or r.error.startswith("malformed")):
            return r
    return ParseResult(False, error="no agent paths found (expected lines like 'Agent 1: (0,0) (0,1)')")


# -- JSON ------------------------------------------------------------------------------------

def _json_candidates(seg: str):
    s = seg.strip()
    if s[:1] in "[{":
        yield s
    for open_, close in (("{", "}"), ("[", "]")):
        i, j = seg.find(open_), seg.rfind(close)
        if 0 <= i < j:
            yield seg[i:j + 1]


def _parse_json(seg: str, starts: list[Cell] | None) -> ParseResult | None:
    if "[" not in seg and "{" not in seg:
        return None
    for cand in _json_candidates(seg):
        if len(cand) > 100_000:
            continue
        try:
            obj = json.loads(cand)
        except (ValueError, RecursionError):
            continue
        found = _paths_from_obj(obj, starts)
        if found:
            paths, agents = found
            return ParseResult(True, paths, "json", agents=agents)
    return None


def _cell(x) -> Cell | None:
    if isinstance(x, (list, tuple)) and len(x) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in x):
        return (x[0], x[1])
    if isinstance(x, str):
        m = _COORD.fullmatch(x.strip())
        if m:
            return (int(m.group(1)), int(m.group(2)))
    if isinstance(x, dict):
        r = x.get("r", x.get("row"))
        c = x.get("c", x.get("col", x.get("column")))
        if isinstance(r, int) and isinstance(c, int) and not isinstance(r, bool) and not isinstance(c, bool):
            return (r, c)
    return None


def _path_from_value(v, start: Cell | None) -> list[Cell] | None:
    if isinstance(v, str):
        items, _ = _groups(v)
        if items:  # a malformed cell leaves the value to the line reader, which names it
            return None if any(isinstance(c, str) for c in items) else items  # type: ignore[return-value]
        return _moves(v, start)
    if isinstance(v, dict):
        for key in ("path", "positions", "cells", "moves"):
            if key in v:
                return _path_from_value(v[key], start)
        return None
    if isinstance(v, list) and v:
        cells = [_cell(x) for x in v]
        if all(c is not None for c in cells):
            return cells  # type: ignore[return-value]
        if all(isinstance(x, str) for x in v):
            return _moves(" ".join(v), start)
    return None


def _paths_from_obj(obj, starts: list[Cell] | None) -> tuple[list[list[Cell]], list[int] | None] | None:
    """Paths from a decoded JSON value and, for a dict keyed by agent labels, their agent numbers."""
    if isinstance(obj, dict):
        for key in ("paths", "plan", "solution", "agents"):
            if key in obj:
                return _paths_from_obj(obj[key], starts)
        labeled = []
        for k, v in obj.items():
            m = re.search(r"(\d+)", str(k))
            if not m:
                continue
            labeled.append((int(m.group(1)), v))
        if not labeled:
            return None
        labeled.sort(key=lambda x: x[0])
        agents = _agent_numbers([lab for lab, _ in labeled])
        out = []
        for agent, (_, v) in zip(agents, labeled):
            st = starts[agent] if starts and 0 <= agent < len(starts) else None
            p = _path_from_value(v, st)
            if p is None:
                return None
            out.append(p)
        return out, agents
    if isinstance(obj, list) and obj:
        if _cell(obj[0]) is not None:  # a single path
            p = _path_from_value(obj, None)
            return ([p], None) if p else None
        out = []
        for i, v in enumerate(obj):
            st = starts[i] if starts and i < len(starts) else None
            p = _path_from_value(v, st)
            if p is None:
                return None
            out.append(p)
        return out, None
    return None


# -- lines -----------------------------------------------------------------------------------

_TOKEN = re.compile(r"[A-Za-z]+")


def _moves(s: str, start: Cell | None) -> list[Cell] | None:
    """Path from move tokens, or ``None`` if ``s`` is not purely moves (or no start)."""
    if start is None:
        return None
    toks = _TOKEN.findall(s)
    if not toks:
        return None
    if len(toks) == 1 and len(toks[0]) > 1 and toks[0].lower() not in _MOVE_WORDS:
        toks = list(toks[0])  # "RRDW"
    steps = []
    for t in toks:
        d = _MOVE_WORDS.get(t.lower())
        if d is None:
            return None
        steps.append(d)
    r, c = start
    path = [start]
    for dr, dc in steps:
        r, c = r + dr, c + dc
        path.append((r, c))
    return path


def _deltas(s: str) -> list[Cell] | None:
    """Move deltas from a pure move string, or ``None``."""
    path = _moves(s, (0, 0))
    if path is None or len(path) < 2:
        return None
    return [(b[0] - a[0], b[1] - a[1]) for a, b in zip(path, path[1:])]


_CLOSE = {"(": ")", "[": "]"}
_CELL_START = re.compile(r"[(\[]\s*[-+]?\d|$")
_CELL_TEXT = re.compile(r"\s*([-+]?\d+)\s*,\s*([-+]?\d+)\s*")


def _pairs(text: str) -> dict[int, int]:
    """Index of each bracket that opens a closed group (``(`` or ``[``, nested groups balanced)
    -> index just past its closing bracket; one pass, a mismatched closer drops the open ones."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for j, ch in enumerate(text):
        if ch in _CLOSE:
            stack.append(j)
        elif ch in ")]":
            if stack and _CLOSE[text[stack[-1]]] == ch:
                pairs[stack.pop()] = j + 1
            else:
                stack.clear()
    return pairs


def _groups(text: str, depth: int = 0) -> tuple[list[Cell | str], str]:
    """The cell groups of ``text`` in order and the text around them.

    A bracket group with a letter inside is prose (``(detour around the hole at (1,1))``, ``[goal]``)
    and is neither a cell nor read further; a group holding only further groups is a list and is
    read into (``[[0,0],[0,1]]``); any other group is a cell when it is two integers, else a
    malformed cell (kept as its text: ``(0,0.5)``, ``(0,1,1)``, and lists nested more than three deep). Returns ``(items, rest)``: items
    are ``(r, c)`` cells and malformed-cell strings, ``rest`` the text outside every group."""
    items: list[Cell | str] = []
    rest: list[str] = []
    pairs = _pairs(text)
    i = 0
    while i < len(text):
        end = pairs.get(i)
        if end is None:
            rest.append(text[i])
            i += 1
            continue
        inner = text[i + 1:end - 1]
        if re.search(r"[A-Za-z]", inner):
            rest.append(" ")
        elif ("(" in inner or "[" in inner) and depth < 3:
            sub, sub_rest = _groups(inner, depth + 1)
            items.extend(sub)
            rest.append(sub_rest)
        else:
            m = _CELL_TEXT.fullmatch(inner)
            items.append((int(m.group(1)), int(m.group(2))) if m else text[i:end])
        i = end
    return items, "".join(rest)


def _letters(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def _body(body: str, labeled: bool) -> list[Cell | str] | None:
    """The coordinate sequence a plan line states (cells and malformed cells), or ``None`` when
    the line states none.

    A labeled line states one when it has two or more cell groups, or a single one with no words
    before it (``Agent 2: (1,1)``, ``Agent 2: (1,1), already on its goal``); a lone cell after
    words (``Agent 1: reaches (0,2) at t=2``), a cost or an arrival time is a summary, not a path. An unlabeled line states one only when it
    is coordinates and separators alone (at most two stray letters). Where a body holds a colon
    outside brackets with cells after it, the cells after the last such colon are the path
    (``start (0,0), goal (0,2): (0,0) (0,1) (0,2)``)."""
    source = _after_colon(body)
    items, rest = _groups(source)
    if not items:
        source = body
        items, rest = _groups(body)
    if not items:
        return None
    if not labeled:
        return items if _letters(rest) <= 2 else None
    if len(items) == 1 and _letters(source[:_CELL_START.search(source).start()]) > 0:
        return None  # words before a lone cell: a summary ("reaches (0,2)"), not a path
    return items


def _after_colon(body: str) -> str:
    """``body`` after its last colon outside every bracket group (all of it if there is none)."""
    depth, last = 0, -1
    for j, ch in enumerate(body):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch == ":" and depth == 0:
            last = j
    return body[last + 1:]


# -- markdown tables --------------------------------------------------------------------------

_TABLE_RULE = re.compile(r"^\s*\|?(?:\s*:?-{2,}:?\s*\|)+\s*:?-*:?\s*$")
_AGENT_HEADING = re.compile(r"^\W{0,4}(?:agent|robot|a(?=\d))\s*[#_]?\s*(\d{1,2})\W{0,4}$", re.IGNORECASE)
_PATH_HEADING = re.compile(r"path|plan|route|trajector|cells|positions|sequence|moves|steps", re.IGNORECASE)
_AGENT_COLUMN = re.compile(r"agent|robot|^#$|^id$", re.IGNORECASE)


def _untable(lines: list[str]) -> list[str]:
    """``lines`` with every markdown table rewritten as label lines (``Agent 1: <its path>``) that
    the line reader takes like any other; other lines unchanged."""
    out: list[str] = []
    block: list[str] = []
    for line in [*lines, ""]:
        if line.lstrip().startswith("|"):
            block.append(line)
            continue
        if block:
            out.extend(_table_lines(block))
            block = []
        out.append(line)
    return out[:-1]


def _table_lines(block: list[str]) -> list[str]:
    """One table's label lines. A row per agent: the agent from the column headed ``Agent`` (else
    the first) and the path from the column headed ``Path``/``Plan``/``Route``/… (else the first
    column holding two or more cells: a one-cell column is a start or a goal). A column per agent
    (headed ``Agent 1``, ``Agent 2``, …; a row per time step): the column's cells top to bottom.
    A row without an agent number or a path states no path and is read past."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in block if not _TABLE_RULE.match(line)]
    header = rows[0] if rows and not _groups(" ".join(rows[0]))[0] else None
    body = rows[1:] if header else rows
    if header and any(_AGENT_HEADING.match(h) for h in header):
        return [f"Agent {m.group(1)}: " + " ".join(row[j] for row in body if j < len(row))
                for j, m in enumerate(map(_AGENT_HEADING.match, header)) if m]
    agent_col = next((j for j, h in enumerate(header or []) if _AGENT_COLUMN.search(h)), 0)
    named = [j for j, h in enumerate(header or []) if _PATH_HEADING.search(h) and j != agent_col]
    out = []
    for row in body:
        number = re.search(r"\d{1,2}", row[agent_col]) if agent_col < len(row) else None
        col = _path_column(row, agent_col, named)
        out.append(f"Agent {number.group()}: {row[col]}" if number and col is not None else "")
    return out


def _path_column(row: list[str], agent_col: int, named: list[int]) -> int | None:
    """The column of ``row`` that holds the agent's path (see ``_table_lines``), or ``None``."""
    named = [j for j in named if j < len(row)]
    if named:
        return next((j for j in named if _groups(row[j])[0]), named[0])
    return next((j for j in range(len(row)) if j != agent_col and len(_groups(row[j])[0]) >= 2), None)


# -- reading the lines -------------------------------------------------------------------------

@dataclass
class _Plan:
    """The paths one complete statement of the plan gives (an answer that revises its plan makes
    several; the last counts)."""

    labeled: dict[int, tuple[str, list]] = field(default_factory=dict)
    """Label -> ``("coords", cells and malformed cells)`` or ``("moves", deltas)``."""
    lines: dict[int, int] = field(default_factory=dict)
    """Label -> how many times the plan gives it a path (more than once repeats it)."""
    unlabeled: list[list] = field(default_factory=list)
    """Coordinate-only lines without a label, in order."""


def _claim(plans: list[_Plan], lab: int, num_agents: int | None, entry: tuple[str, list]) -> None:
    """Give label ``lab`` a path. When the current plan already gives ``lab`` one and already has
    a path for each of the instance's ``num_agents`` agents, the answer is stating its plan again
    (a revision): a new plan begins, and the last one stated is the answer. Otherwise a second
    path for ``lab`` repeats the agent in the same plan (Agent-count fails)."""
    plan = plans[-1]
    if lab in plan.labeled and num_agents is not None and len(plan.labeled) >= num_agents:
        plan = _Plan()
        plans.append(plan)
    plan.labeled[lab] = entry
    plan.lines[lab] = plan.lines.get(lab, 0) + 1


def _scan_lines(seg: str, starts: list[Cell] | None, num_agents: int | None) -> _Plan:
    """The plan the lines of ``seg`` state (its last statement when it is stated more than once):
    label lines with a coordinate sequence or moves, a label line without one followed by its
    cells on the next coordinate-only lines (up to a blank line or the next label), and
    unlabeled coordinate-only lines. Lines that state no coordinate sequence (prose, costs,
    arrival times) are read past."""
    plans = [_Plan()]
    current: int | None = None          # label waiting for its cells on the following lines
    continuing: list | None = None      # the cells those lines extend
    for line in _untable(seg.splitlines()):
        m = _LABEL.match(line)
        if m:
            lab, rest = int(m.group(1)), line[m.end():]
            items = _body(rest, labeled=True)
            deltas = _deltas(rest) if items is None and starts is not None else None
            current = continuing = None
            if items is not None:
                _claim(plans, lab, num_agents, ("coords", items))
            elif deltas is not None:
                _claim(plans, lab, num_agents, ("moves", deltas))
            else:
                current = lab
            continue
        if not line.strip():
            current = continuing = None
            continue
        items = _body(line, labeled=False) if "(" in line or "[" in line else None
        if items is None:
            continue
        if continuing is not None:
            continuing.extend(items)
        elif current is not None:
            continuing = list(items)
            _claim(plans, current, num_agents, ("coords", continuing))
        else:
            plans[-1].unlabeled.append(items)
    return plans[-1]


def _malformed(plan: _Plan) -> str:
    """Why the plan is not parsable when a path holds a malformed cell, else ``""``."""
    for lab in sorted(plan.labeled):
        kind, cells = plan.labeled[lab]
        bad = next((c for c in cells if isinstance(c, str)), None) if kind == "coords" else None
        if bad is not None:
            return f"malformed cell {_clip(bad)!r} in the path of agent {lab}: a cell is two integers, (row,col)"
    for path in plan.unlabeled:
        bad = next((c for c in path if isinstance(c, str)), None)
        if bad is not None:
            return f"malformed cell {_clip(bad)!r} in an unlabeled path: a cell is two integers, (row,col)"
    return ""


def _clip(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _parse_lines(seg: str, starts: list[Cell] | None, num_agents: int | None = None) -> ParseResult | None:
    plan = _scan_lines(seg, starts, num_agents)
    if not plan.labeled and not plan.unlabeled:
        return None
    error = _malformed(plan)
    if error:
        return ParseResult(False, error=error, format="lines")
    if plan.labeled:
        return _labeled_result(plan, starts)
    return ParseResult(True, plan.unlabeled, "unlabeled")


def _labeled_result(plan: _Plan, starts: list[Cell] | None) -> ParseResult:
    """The labeled paths in label order (moves walked from the agent's start; an agent whose
    moves have no start is stated but unplaced)."""
    labs = sorted(plan.labeled)
    numbers = dict(zip(labs, _agent_numbers(labs)))
    out, agents, unplaced = [], [], []
    kinds = set()
    for lab in labs:
        agent = numbers[lab]
        kind, cells = plan.labeled[lab]
        kinds.add(kind)
        if kind == "moves":
            if not starts or not 0 <= agent < len(starts):
                unplaced.append(agent)  # stated, but no start to walk the moves from
                continue
            r, c = starts[agent]
            cells = [(r, c)]
            for dr, dc in plan.labeled[lab][1]:
                r, c = r + dr, c + dc
                cells.append((r, c))
        out.append(cells)
        agents.append(agent)
    return ParseResult(bool(out), out, "moves" if kinds == {"moves"} else "lines", agents=agents,
                       unplaced=unplaced, extra=len(plan.unlabeled),
                       repeated=sorted(numbers[lab] for lab, n in plan.lines.items() if n > 1),
                       error="" if out else "no agent paths found")


def format_plan(paths: list[list[Cell]]) -> str:
    """The canonical answer text for ``paths`` (what the prompt asks the model to write)."""
    return "\n".join(f"Agent {i + 1}: " + " ".join(f"({r},{c})" for r, c in p)
                     for i, p in enumerate(paths))


_MOVE_LETTER = {(-1, 0): "U", (1, 0): "D", (0, -1): "L", (0, 1): "R", (0, 0): "W"}


def format_moves(paths: list[list[Cell]]) -> str:
    """The same plan as moves from each start, ``Agent 1: R D W`` (``testbed.answer_format:
    moves``); ``parse_plan`` walks them back into cells from the instance's starts."""
    return "\n".join(f"Agent {i + 1}: " + " ".join(_MOVE_LETTER[(b[0] - a[0], b[1] - a[1])]
                                                    for a, b in zip(p, p[1:]))
                     for i, p in enumerate(paths))
