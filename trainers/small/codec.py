"""The small learner's tokenisation of a MAPF-FrozenLake instance and of its plan.

Every token carries five ids: its vocabulary id, the grid cell it refers to (``cell``, 0 for
none; rows and columns -1..10, so a step off the grid still has a cell), for plan tokens its
time step (``time``: 1 + t, 0 for none), the goal cell of the agent it belongs to (``goal``,
0 for none) and, for the plan tokens that place an agent on a cell (its start and every move),
what each next move would run into (``feat``, a bitmask of ``FEATURE_BITS`` bits, 0 for none;
``move_features``). The embedding is the sum of a vocabulary, a row, a column, a time, a goal-row, a
goal-column and a sequence-position embedding, so a plan token that lands on (r,c) and the map
token of (r,c) share their row and column embeddings, and the direction to the goal is a local
feature of every plan token rather than a lookup back into the prompt.

Prompt (n x n map, k agents)::

    BOS SIZE_n  T(0,0) T(0,1) ... T(n-1,n-1)  AGENT_1 CELL(s_1) CELL(g_1) ... AGENT_k CELL(s_k) CELL(g_k) PLAN

with T ∈ {F, H} (walkable, hole). Plan, per agent i in order::

    AGENT_i CELL(s_i) | M_1 M_2 ... SEP

The part before ``|`` is written by the decoder (the agent's label and its start: the prompt
fixes both); the model writes moves M ∈ {U, D, L, R, W} (the testbed's ``moves`` answer
vocabulary: up, down, left, right, wait) and ``SEP``, sampled from those six tokens only. Each
move token carries the cell it lands on. Agent i's path is its start followed by the cells its
moves reach; at most ``max_path`` moves are generated per agent (then the path ends there).
``text_of`` renders the paths as the testbed's canonical plan (``testbeds.mapf_frozenlake.
parse.format_plan``), which the testbed's own parser, validator and reward score. A move is
always to a neighbouring cell or a wait, so the validator's ``legal_move`` check cannot fail;
moves off the grid (``in_bounds``), into holes, into conflicts or short of the goal can.

``move_features`` describes the choice the model makes at a token: agent i stands on cell x at
time t; for each move m (U, D, L, R, W) reaching y, three bits say whether y is off the grid or
a hole, whether an earlier agent (1..i-1, whose paths are already written) stands on y at t + 1,
and whether an earlier agent moves from y to x between t and t + 1 (a swap); a sixteenth bit says
whether an earlier agent stands on x at any time after t (ending the path here would conflict).
Earlier agents rest on their last cell, as the validator pads them. The features read only the
map and the plan written so far: what the validator would check, not what a solver would plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_SIDE = 10
"""Largest map side the vocabulary covers (MAPF-FrozenLake's 10x10)."""
MAX_AGENTS = 8
"""Most agents the vocabulary covers (the testbed's agent counts are 1..8)."""
GRID = MAX_SIDE + 2
"""Rows (and columns) a cell id can name: -1..10 (coordinates further off the grid are clamped)."""

PAD, BOS, SEP, PLAN, FREE, HOLE = 0, 1, 2, 3, 4, 5
SIZE0 = 6                                   # SIZE_n = SIZE0 + n - 3, n = 3..10
AGENT0 = SIZE0 + MAX_SIDE - 2               # AGENT_i = AGENT0 + i - 1, i = 1..8
MOVE0 = AGENT0 + MAX_AGENTS                 # U, D, L, R, W
MOVES: tuple[tuple[int, int], ...] = ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0))
"""(dr, dc) of U, D, L, R, W."""
CELL0 = MOVE0 + len(MOVES)                  # CELL(r,c) = CELL0 + r*10 + c (prompt cells)
VOCAB = CELL0 + MAX_SIDE * MAX_SIDE
"""Vocabulary size (127)."""
CELL_IDS = 1 + GRID * GRID
"""Cell ids (0: no cell)."""
PLAN_TOKENS: tuple[int, ...] = (SEP, *range(MOVE0, MOVE0 + len(MOVES)))
"""What the model may write."""
FEATURE_BITS = 3 * len(MOVES) + 1
"""Bits of ``move_features``: (blocked, vertex conflict, swap) per move, then "ending here conflicts"."""


def cell_token(r: int, c: int) -> int:
    return CELL0 + r * MAX_SIDE + c


def cell_index(r: int, c: int) -> int:
    """The cell id of (r, c), each coordinate clamped into -1..10."""
    r, c = max(-1, min(MAX_SIDE, r)), max(-1, min(MAX_SIDE, c))
    return 1 + (r + 1) * GRID + (c + 1)


def row_col(cell: Any) -> tuple[Any, Any]:
    """Row and column embedding ids (1..GRID; 0 for no cell) of cell ids (an int tensor)."""
    import torch

    has = cell > 0
    return (torch.where(has, (cell - 1) // GRID + 1, 0), torch.where(has, (cell - 1) % GRID + 1, 0))


@dataclass
class Sequence:
    """One tokenised sequence: parallel lists of vocabulary, cell, time, goal and feature ids."""

    tok: list[int] = field(default_factory=list)
    cell: list[int] = field(default_factory=list)
    time: list[int] = field(default_factory=list)
    goal: list[int] = field(default_factory=list)
    feat: list[int] = field(default_factory=list)

    def add(self, tok: int, cell: int = 0, time: int = 0, goal: int = 0, feat: int = 0) -> None:
        self.tok.append(tok)
        self.cell.append(cell)
        self.time.append(time)
        self.goal.append(goal)
        self.feat.append(feat)

    def __len__(self) -> int:
        return len(self.tok)

    def __add__(self, other: Sequence) -> Sequence:
        return Sequence(self.tok + other.tok, self.cell + other.cell, self.time + other.time,
                        self.goal + other.goal, self.feat + other.feat)


def check_instance(inst: Any) -> None:
    """ValueError when the instance does not fit the vocabulary (square, side 3..10, ≤ 8 agents)."""
    if inst.h != inst.w or not 3 <= inst.h <= MAX_SIDE or inst.num_agents > MAX_AGENTS:
        raise ValueError(f"the small learner encodes square maps of side 3..{MAX_SIDE} with at most "
                         f"{MAX_AGENTS} agents; got {inst.h}x{inst.w} with {inst.num_agents} agents")


def encode_prompt(inst: Any) -> Sequence:
    """The prompt tokens of ``inst`` (module docstring)."""
    check_instance(inst)
    n = inst.h
    seq = Sequence()
    seq.add(BOS)
    seq.add(SIZE0 + n - 3)
    for r in range(n):
        for c in range(n):
            seq.add(HOLE if (r, c) in inst.holes else FREE, cell_index(r, c))
    for i, (s, g) in enumerate(zip(inst.starts, inst.goals)):
        seq.add(AGENT0 + i, goal=cell_index(*g))
        seq.add(cell_token(*s), cell_index(*s), goal=cell_index(*g))
        seq.add(cell_token(*g), cell_index(*g), goal=cell_index(*g))
    seq.add(PLAN)
    return seq


def at(path: list[tuple[int, int]], t: int) -> tuple[int, int]:
    """Where an agent following ``path`` stands at time ``t`` (it rests on its last cell)."""
    return tuple(path[min(t, len(path) - 1)])


def move_features(inst: Any, earlier: list[list[tuple[int, int]]], cell: tuple[int, int], t: int) -> int:
    """The ``FEATURE_BITS`` bitmask of an agent on ``cell`` at time ``t`` (module docstring)."""
    n, bits = inst.h, 0
    r, c = cell
    for m, (dr, dc) in enumerate(MOVES):
        y = (r + dr, c + dc)
        if not (0 <= y[0] < n and 0 <= y[1] < n) or y in inst.holes:
            bits |= 1 << (3 * m)
        if any(at(p, t + 1) == y for p in earlier):
            bits |= 1 << (3 * m + 1)
        if y != (r, c) and any(at(p, t) == y and at(p, t + 1) == (r, c) for p in earlier):
            bits |= 1 << (3 * m + 2)
    horizon = max((len(p) for p in earlier), default=0)
    if any(at(p, s) == (r, c) for p in earlier for s in range(t + 1, horizon + 1)):
        bits |= 1 << (3 * len(MOVES))
    return bits


def forced_prefix(inst: Any, agent: int, earlier: list[list[tuple[int, int]]]
                  ) -> list[tuple[int, int, int, int, int]]:
    """(tok, cell, time, goal, feat) of agent ``agent``'s label and start, written by the decoder;
    ``earlier``: the paths of agents 1..``agent``."""
    r, c = inst.starts[agent]
    g = cell_index(*inst.goals[agent])
    start = (cell_token(r, c), cell_index(r, c), 1, g, move_features(inst, earlier, (r, c), 0))
    return [(AGENT0 + agent, 0, 0, g, 0), start]


def encode_plan(inst: Any, paths: list[list[tuple[int, int]]]) -> tuple[Sequence, list[bool]]:
    """The plan tokens of ``paths`` and, per token, whether the model writes it (the SFT and
    GRPO loss positions); paths must start at the agents' starts and move one cell at a time."""
    seq, written = Sequence(), []
    for i, path in enumerate(paths):
        if tuple(path[0]) != tuple(inst.starts[i]):
            raise ValueError(f"path {i + 1} starts at {path[0]}, not at agent {i + 1}'s start {inst.starts[i]}")
        goal = cell_index(*inst.goals[i])
        earlier = [[tuple(x) for x in p] for p in paths[:i]]
        for item in forced_prefix(inst, i, earlier):
            seq.add(*item)
            written.append(False)
        for t in range(1, len(path)):
            (r0, c0), (r, c) = path[t - 1], path[t]
            move = (r - r0, c - c0)
            if move not in MOVES:
                raise ValueError(f"path {i + 1} jumps from {(r0, c0)} to {(r, c)} at time {t}")
            seq.add(MOVE0 + MOVES.index(move), cell_index(r, c), 1 + t, goal,
                    move_features(inst, earlier, (r, c), t))
            written.append(True)
        seq.add(SEP, goal=goal)
        written.append(True)
    return seq, written


def text_of(paths: list[list[tuple[int, int]]]) -> str:
    """The testbed's canonical plan text."""
    from testbeds.mapf_frozenlake.parse import format_plan

    return format_plan([[(int(r), int(c)) for r, c in p] for p in paths])
