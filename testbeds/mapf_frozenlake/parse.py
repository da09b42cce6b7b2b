"""Extract a multi-agent plan (one path of ``(row, col)`` cells per agent) from model text.

Canonical format (what the prompt asks for) — one line per agent, the agent's cell at times
0, 1, 2, … (repeat a cell to wait; the path may stop once the agent rests on its goal)::

    Agent 1: (0,0) (0,1) (1,1)
    Agent 2: (2,1) (2,1) (1,1) (1,0)

Also accepted, because models plausibly write them:

* ``[r,c]`` instead of ``(r,c)``, any separators (``->``, commas, ``;``), ``Agent 1 = ...``,
  ``agent1:``, ``A1:``, ``Robot 1:``; a label line followed by coordinate-only lines;
* unlabeled lines of coordinates, one per agent in order (only if no line is labeled);
* JSON: ``[[[r,c],...], ...]``, ``{"agent1": [[r,c],...], ...}``, ``{"paths"|"plan": ...}``;
* moves from the start, ``Agent 1: R R D W`` or ``RRDW`` or ``right, down, wait`` (U/D/L/R/W,
  up/down/left/right/wait/stay) — only when the starts are given.

Models think before answering, so the final answer is preferred: text after the last
``</think>``; then the last fenced code block that parses; then the text after the last "final
answer"/"answer:"/"solution:" marker; then the whole text. A response that echoes the prompt is
read after the prompt's answer-format example (that example line is the prompt's, not a path
of the response). Agents are numbered by their labels (``Agent 0`` … or ``Agent 1`` …).
``parse_plan`` never raises. A response longer than ``MAX_RESPONSE_CHARS`` (200,000 characters)
fails as "response too long" and is not parsed; anything shorter is parsed whole.

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
_LABEL = re.compile(
    r"^\W{0,6}(?:agent|robot|a)\s*[#_]?\s*(\d{1,2})"
    # "Agent 1:", "Agent 1 =", "Agent 1 -", "A1)", "Agent 1.", or a few words first:
    # "Agent 1 path:", "**Agent 1**:", "Agent 1's moves:"
    r"(?:\s*(?:[:=]|-(?!>)|\)|\.(?!\d))|\b[^:=\n(\[\d]{0,24}[:=])",
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
            r = _parse_lines(seg, starts)
        if r is not None and r.ok:
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
        coords = [(int(a), int(b)) for a, b in _COORD.findall(v)]
        if coords:
            return coords
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


def _coord_only(line: str) -> bool:
    rest = _COORD.sub(" ", line)
    letters = sum(ch.isalpha() for ch in rest)
    return letters <= 2


def _deltas(s: str) -> list[Cell] | None:
    """Move deltas from a pure move string, or ``None``."""
    path = _moves(s, (0, 0))
    if path is None or len(path) < 2:
        return None
    return [(b[0] - a[0], b[1] - a[1]) for a, b in zip(path, path[1:])]


def _parse_lines(seg: str, starts: list[Cell] | None) -> ParseResult | None:
    labeled, with_path, unlabeled = _scan_lines(seg, starts)
    labeled = {k: v for k, v in labeled.items() if v[1]}
    if labeled:
        result = _labeled_result(labeled, with_path, len(unlabeled), starts)
        if result is not None:
            return result
    if unlabeled:
        return ParseResult(True, unlabeled, "unlabeled")
    return None


def _scan_lines(seg: str, starts: list[Cell] | None
                ) -> tuple[dict[int, tuple[str, list[Cell]]], dict[int, int], list[list[Cell]]]:
    """One pass over the lines: per label ``("coords", cells)`` or ``("moves", deltas)`` (a
    label's path may continue on the following coordinate-only lines), how many lines gave each
    label a path, and the unlabeled coordinate lines."""
    # label -> ("coords", cells) or ("moves", deltas)
    labeled: dict[int, tuple[str, list[Cell]]] = {}
    with_path: dict[int, int] = {}   # label -> lines that gave it a path (a second one repeats it)
    unlabeled: list[list[Cell]] = []
    current: int | None = None   # label whose path continues on the following lines
    for line in seg.splitlines():
        m = _LABEL.match(line)
        if m:
            lab = int(m.group(1))
            rest = line[m.end():]
            coords = [(int(a), int(b)) for a, b in _COORD.findall(rest)]
            if current is not None and labeled[current][1]:
                with_path[current] = with_path.get(current, 0) + 1
            current = None
            if coords:
                with_path[lab] = with_path.get(lab, 0) + 1
                labeled[lab] = ("coords", coords)
                continue
            deltas = _deltas(rest) if starts is not None else None
            if deltas is not None:
                labeled[lab] = ("moves", deltas)
                with_path[lab] = with_path.get(lab, 0) + 1
            else:
                labeled[lab] = ("coords", [])
                current = lab
            continue
        if "(" not in line and "[" not in line:
            if not line.strip():
                if current is not None and labeled[current][1]:
                    with_path[current] = with_path.get(current, 0) + 1
                current = None
            continue
        coords = _COORD.findall(line)
        if coords and _coord_only(line):
            cells = [(int(a), int(b)) for a, b in coords]
            if current is not None:
                labeled[current][1].extend(cells)
            else:
                unlabeled.append(cells)
    if current is not None and labeled[current][1]:
        with_path[current] = with_path.get(current, 0) + 1
    return labeled, with_path, unlabeled


def _labeled_result(labeled: dict[int, tuple[str, list[Cell]]], with_path: dict[int, int], extra: int,
                    starts: list[Cell] | None) -> ParseResult | None:
    """The labeled paths in label order (moves walked from the agent's start), or ``None`` when
    none could be placed."""
    labs = sorted(labeled)
    out, agents, unplaced = [], [], []
    kinds = set()
    for lab, agent in zip(labs, _agent_numbers(labs)):
        kind, cells = labeled[lab]
        kinds.add(kind)
        if kind == "moves":
            if not starts or not 0 <= agent < len(starts):
                unplaced.append(agent)  # stated, but no start to walk the moves from
                continue
            r, c = starts[agent]
            path = [(r, c)]
            for dr, dc in cells:
                r, c = r + dr, c + dc
                path.append((r, c))
            cells = path
        out.append(cells)
        agents.append(agent)
    if out:
        numbers = dict(zip(labs, _agent_numbers(labs)))
        return ParseResult(True, out, "moves" if kinds == {"moves"} else "lines", agents=agents,
                           unplaced=unplaced, extra=extra,
                           repeated=sorted(numbers[lab] for lab, n in with_path.items()
                                           if n > 1 and lab in numbers))
    return None


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
