"""Optimal MAPF solver: Conflict-Based Search with a joint-state fallback.

Objective: minimise the **sum of costs**, where an agent's cost is the time of its last arrival at
its goal and it occupies its goal from then on. Moves are up/down/left/right or wait; a plan must
have no vertex conflict (two agents in one cell at one time, including an agent resting on its
goal) and no edge conflict (two agents swapping cells in one step). Following (moving into a cell
another agent leaves in the same step) is allowed, as in standard MAPF.

``solve(instance)`` returns ``SolveResult(status, cost, plan)`` with status

* ``"solved"`` — ``plan`` is optimal and ``cost`` its sum of costs;
* ``"unsolvable"`` — proven: some agent cannot reach its goal, or the exhaustive joint-state
  search found no plan;
* ``"budget"`` — the node or time budget ran out first.

An invalid instance (see ``instance.instance_problems``) raises ``InvalidInstance``: it is an
input error, not a hard or unsolvable problem.

Algorithm (each part kept because it measurably helps at 3–5 agents, see benchmarks/mapf.py):

* Low level: space-time A* with the exact single-agent distance (BFS from the goal) as heuristic,
  ties broken by fewest conflicts with the other agents' current paths (a conflict-avoidance
  table), which is exact: among the optimal paths it returns one with fewest conflicts.
* High level: best-first on (cost + h, number of conflicting pairs); conflicts are
  prioritised cardinal > semi-cardinal > non-cardinal using multi-valued decision diagrams
  (MDDs) of the agents' optimal paths (ICBS); h is the CG heuristic (minimum vertex cover of
  the cardinal-conflict graph, admissible); bypass: a child with the parent's cost and fewer
  conflicts replaces the parent's path instead of branching.
* Target reasoning: when an agent passes through another agent's goal after that agent has
  arrived, the split is "the resting agent arrives later" vs "the passing agent never enters
  that cell from then on" — complete, and it removes the usual endless re-splitting.
* Corridor reasoning (Li et al., "Pairwise symmetry reasoning for multi-agent path finding
  search", AIJ 2021, §5): a conflict inside a chain of degree-2 cells between agents heading
  for its opposite ends is split by two range constraints ("i stays off its end until j can
  have crossed", and vice versa) instead of one time step at a time; the bounds are BFS
  distances, tightened to the agent's earliest arrival under its constraints where needed
  (see ``_CBS._corridor_split`` for the soundness argument). Measured on the 10x10, 5-agent
  benchmark: total CBS nodes 2,062 → 1,290, CPU p99 15.4 → 9.5 ms, worst 1,179 → 177 ms.
  The chains are found by walking degree-2 cells (0.01 ms per 10x10 map); networkx's
  articulation points and biconnected components cost 0.27 ms per map — about the median
  solve time — and add nothing the BFS around a chain does not give, so the solver does not
  use networkx (and the project no longer depends on it).
* Merge & restart (MA-CBS): a pair split on more than ``merge_threshold`` times, once CBS has
  expanded ``merge_after`` nodes, becomes a meta-agent planned by the constrained joint search
  below; CBS restarts from the root. This resolves corridor-like pair symmetries that make
  plain CBS grow exponentially (measured: 8,000+ nodes → ~500 on the worst 10x10 cases).
* Low-level time collapse: after an agent's last constrained time all times are alike, so the
  space-time search keeps one state per cell beyond it (an impossible request fails fast).
* Joint-state search: A* over (positions, finished-mask) with the sum of distances heuristic.
  It decides small instances exactly — including proving unsolvability by exhausting the finite
  joint space — and takes over when CBS stalls on a small, dense map.

``wait_free=True`` restricts the search to plans where no agent waits before its final arrival
(used to decide whether an instance *needs* a wait); ``cost_bound`` prunes plans costlier than the
bound, which makes that restricted search finite.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import deque
from dataclasses import dataclass, field, replace

from testbeds.mapf_frozenlake.instance import Cell, Instance, InvalidInstance

Status = str  # "solved" | "unsolvable" | "budget"


@dataclass(frozen=True)
class SolveResult:
    """Outcome of ``solve``."""

    status: Status
    """``"solved"``, ``"unsolvable"`` or ``"budget"``."""
    cost: int | None = None
    """Sum of costs of ``plan`` (``None`` unless solved)."""
    plan: list[list[Cell]] | None = None
    """One path of ``(r, c)`` per agent, from its start to its final arrival at its goal."""
    nodes: int = 0
    """High-level CBS nodes expanded plus joint-search states expanded."""
    method: str = ""
    """Which search produced the answer: ``"cbs"``, ``"joint"`` or ``"reachability"``."""
    elapsed_s: float = 0.0
    """Wall time spent."""


class _Budget(Exception):
    pass


@dataclass
class _Grid:
    h: int
    w: int
    free: list[bool]
    nbrs: list[tuple[int, ...]]
    nfree: int
    _corridors: tuple | None = None

    @classmethod
    def of(cls, inst: Instance) -> _Grid:
        h, w = inst.h, inst.w
        free = [True] * (h * w)
        for r, c in inst.holes:
            if 0 <= r < h and 0 <= c < w:
                free[r * w + c] = False
        nbrs = []
        for v in range(h * w):
            r, c = divmod(v, w)
            out = []
            if free[v]:
                if r > 0 and free[v - w]:
                    out.append(v - w)
                if r < h - 1 and free[v + w]:
                    out.append(v + w)
                if c > 0 and free[v - 1]:
                    out.append(v - 1)
                if c < w - 1 and free[v + 1]:
                    out.append(v + 1)
            nbrs.append(tuple(out))
        return cls(h, w, free, nbrs, sum(free))

    def bfs(self, src: int, blocked: frozenset = frozenset()) -> list[int]:
        """Distances from ``src`` (``INF`` where unreachable), never entering ``blocked``."""
        dist = [_INF] * (self.h * self.w)
        dist[src] = 0
        q = deque([src])
        while q:
            u = q.popleft()
            du = dist[u] + 1
            for v in self.nbrs[u]:
                if dist[v] == _INF and v not in blocked:
                    dist[v] = du
                    q.append(v)
        return dist

    def corridors(self) -> tuple[list[int], list[tuple[frozenset, int, int]]]:
        """Maximal chains of degree-2 cells: ``(chain_of, chains)`` with ``chain_of[v]`` the
        chain index of cell ``v`` (-1: none) and ``chains[c] = (cells, end_a, end_b)``, the two
        ends being the distinct non-chain cells the chain connects. Chains that close a cycle
        or lead back to a single cell are left out (corridor reasoning needs two ends).
        Computed on first use (most instances never need it)."""
        if self._corridors is None:
            chain_of = [-1] * (self.h * self.w)
            chains: list[tuple[frozenset, int, int]] = []
            seen = [False] * (self.h * self.w)
            for v in range(self.h * self.w):
                if seen[v] or not self.free[v] or len(self.nbrs[v]) != 2:
                    continue
                cells, ends = {v}, []
                seen[v] = True
                for first in self.nbrs[v]:
                    prev, cur = v, first
                    while len(self.nbrs[cur]) == 2 and cur not in cells:
                        cells.add(cur)
                        seen[cur] = True
                        a, b = self.nbrs[cur]
                        prev, cur = cur, (b if a == prev else a)
                    ends.append(cur)
                if ends[0] in cells or ends[1] in cells or ends[0] == ends[1]:
                    continue
                for c in cells:
                    chain_of[c] = len(chains)
                chains.append((frozenset(cells), ends[0], ends[1]))
            self._corridors = (chain_of, chains)
        return self._corridors


_INF = 1 << 30


# ------------------------------------------------------------------------------------------------
# low level
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Cons:
    """Constraints of one agent: forbidden (cell, t) and forbidden moves (u, v, t)."""

    vertex: frozenset = frozenset()
    edge: frozenset = frozenset()
    goal_block: int = -1     # last time the agent may not be on its goal (it must finish after)
    max_t: int = 0           # latest constrained time
    perm: tuple = ()         # (v, t): never on v at any time >= t (target reasoning)

    def add_vertex(self, v: int, t: int, goal: int) -> _Cons:
        return _Cons(self.vertex | {(v, t)}, self.edge,
                     max(self.goal_block, t) if v == goal else self.goal_block, max(self.max_t, t),
                     self.perm)

    def add_finish_after(self, t: int) -> _Cons:
        """The agent's final arrival at its goal is after ``t`` (it may still pass its goal at
        ``t``): the resting agent's side of a target-reasoning split."""
        return _Cons(self.vertex, self.edge, max(self.goal_block, t), max(self.max_t, t), self.perm)

    def add_edge(self, u: int, v: int, t: int) -> _Cons:
        return _Cons(self.vertex, self.edge | {(u, v, t)}, self.goal_block, max(self.max_t, t),
                     self.perm)

    def add_range(self, v: int, hi: int, goal: int) -> _Cons:
        """Never on ``v`` at times ``0 … hi`` (corridor reasoning)."""
        return _Cons(self.vertex | {(v, t) for t in range(hi + 1)}, self.edge,
                     max(self.goal_block, hi) if v == goal else self.goal_block,
                     max(self.max_t, hi), self.perm)

    def add_perm(self, v: int, t: int) -> _Cons:
        return _Cons(self.vertex, self.edge, self.goal_block, max(self.max_t, t),
                     self.perm + ((v, t),))

    def perm_map(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for v, t in self.perm:
            if t < out.get(v, _INF):
                out[v] = t
        return out


def _cat(paths: list[tuple[int, ...]], skip: int):
    """Conflict-avoidance table of all paths but ``skip``."""
    vtab: dict[tuple[int, int], int] = {}
    etab: set[tuple[int, int, int]] = set()
    rest: dict[int, list[int]] = {}
    for j, p in enumerate(paths):
        if j == skip:
            continue
        for t, v in enumerate(p):
            vtab[(v, t)] = vtab.get((v, t), 0) + 1
            if t:
                etab.add((p[t - 1], v, t))
        rest.setdefault(p[-1], []).append(len(p) - 1)
    return vtab, etab, rest


def _trace(parent: dict[tuple[int, int], tuple[int, int] | None], key: tuple[int, int]) -> tuple[int, ...]:
    """The cells of the space-time path ending in state ``key`` = ``(cell, time)``."""
    path = []
    k: tuple[int, int] | None = key
    while k is not None:
        path.append(k[0])
        k = parent[k]
    return tuple(reversed(path))


def _low_level(g: _Grid, hd: list[int], start: int, goal: int, cons: _Cons, cat, *,
               allow_wait: bool, max_cost: int | None) -> tuple[int, ...] | None:
    """Optimal single-agent path under ``cons`` (fewest CAT conflicts among optimal ones)."""
    # Kept whole: space-time A* whose loop is the CBS's inner loop; its successor step reads the
    # locals bound here, and a function per expansion would cost a call per state.
    if hd[start] >= _INF:
        return None
    horizon = cons.max_t + g.nfree + 1
    if max_cost is not None:
        horizon = min(horizon, max_cost)
    if hd[start] > horizon:
        return None
    vcon, econ, gb = cons.vertex, cons.edge, cons.goal_block
    perm = cons.perm_map()
    vtab, etab, rest = cat
    tcap = cons.max_t
    tc1 = tcap + 1
    nbrs = g.nbrs
    if (start, 0) in vcon:
        return None
    # heap entries: (f, conflicts, -t, v, tie) ; parents keyed by (v, t)
    parent: dict[tuple[int, int], tuple[int, int] | None] = {(start, 0): None}
    seen_conf: dict[tuple[int, int], int] = {(start, 0): 0}
    heap = [(hd[start], 0, 0, start)]
    done: set[tuple[int, int]] = set()
    push = heapq.heappush
    pop = heapq.heappop
    while heap:
        f, conf, negt, u = pop(heap)
        t = -negt
        key = (u, t)
        # after the last constrained time all times are alike: one visit per cell suffices,
        # which also makes an impossible request fail fast instead of filling the horizon
        ckey = key if t <= tcap else (u, tc1)
        if ckey in done:
            continue
        done.add(ckey)
        if u == goal and t > gb:
            return _trace(parent, key)
        nt = t + 1
        if nt > horizon:
            continue
        cnt = nt if nt <= tcap else tc1
        succ = nbrs[u] + (u,) if allow_wait else nbrs[u]
        for v in succ:
            fv = nt + hd[v]
            if fv > horizon or (v, cnt) in done:
                continue
            nk = (v, nt)
            if vcon and nk in vcon or econ and (u, v, nt) in econ:
                continue
            if perm and nt >= perm.get(v, _INF):
                continue
            c = conf + vtab.get(nk, 0) if vtab else conf
            if etab and (v, u, nt) in etab:
                c += 1
            if v in rest:
                for te in rest[v]:
                    if nt > te:
                        c += 1
            old = seen_conf.get(nk)
            if old is not None and old <= c:
                continue
            seen_conf[nk] = c
            parent[nk] = key
            push(heap, (fv, c, -nt, v))
    return None


def _mdd(g: _Grid, hd: list[int], start: int, goal: int, cost: int, cons: _Cons,
         allow_wait: bool) -> list[set[int]]:
    """Layers of cells lying on some path of exactly ``cost`` that satisfies ``cons``."""
    vcon, econ = cons.vertex, cons.edge
    perm = cons.perm_map()
    fwd: list[set[int]] = [{start}]
    for t in range(1, cost + 1):
        layer = set()
        for u in fwd[-1]:
            succ = g.nbrs[u] + (u,) if allow_wait else g.nbrs[u]
            for v in succ:
                if (t + hd[v] <= cost and (v, t) not in vcon and (u, v, t) not in econ
                        and t < perm.get(v, _INF)):
                    layer.add(v)
        fwd.append(layer)
    layers = [set() for _ in range(cost + 1)]
    layers[cost] = {goal} & fwd[cost]
    for t in range(cost - 1, -1, -1):
        nxt = layers[t + 1]
        keep = set()
        for u in fwd[t]:
            succ = g.nbrs[u] + (u,) if allow_wait else g.nbrs[u]
            for v in succ:
                if v in nxt and (u, v, t + 1) not in econ:
                    keep.add(u)
                    break
        layers[t] = keep
    return layers


# ------------------------------------------------------------------------------------------------
# high level
# ------------------------------------------------------------------------------------------------

def _at(p: tuple[int, ...], t: int) -> int:
    return p[t] if t < len(p) else p[-1]


def _visits(p: tuple[int, ...], v: int, hi: int) -> bool:
    """Whether path ``p`` (resting on its last cell) is on ``v`` at some time in ``0 … hi``."""
    if hi < 0:
        return False
    if p[-1] == v and len(p) - 1 <= hi:
        return True
    return v in p[: hi + 1]


def _first_conflict(p: tuple[int, ...], q: tuple[int, ...]):
    """First conflict between two paths: (kind, t, a, b) with kind 'v' (cell a) or 'e' (a→b for p)."""
    lp, lq = len(p), len(q)
    T = max(lp, lq)
    prev_p, prev_q = p[0], q[0]
    if prev_p == prev_q:
        return ("v", 0, prev_p, -1)
    for t in range(1, T):
        a = p[t] if t < lp else p[-1]
        b = q[t] if t < lq else q[-1]
        if a == b:
            return ("v", t, a, -1)
        if a == prev_q and b == prev_p:
            return ("e", t, prev_p, a)
        prev_p, prev_q = a, b
    return None


@dataclass
class _Node:
    cost: int
    paths: list[tuple[int, ...]]
    cons: list[_Cons]
    conflicts: list = field(default_factory=list)
    mdds: dict = field(default_factory=dict)
    h: int = 0              # admissible: min vertex cover of the cardinal-conflict graph
    chosen: tuple | None = None

    def find_conflicts(self, group_of: list[int]) -> None:
        """First conflict of every pair of agents in different groups (a merged group is
        planned jointly, so its members never conflict with each other)."""
        out = []
        ps = self.paths
        for i in range(len(ps)):
            for j in range(i + 1, len(ps)):
                if group_of[i] == group_of[j]:
                    continue
                c = _first_conflict(ps[i], ps[j])
                if c is not None:
                    out.append((i, j) + c)
        self.conflicts = out


def _min_vertex_cover(edges: set[tuple[int, int]]) -> int:
    """Size of a minimum vertex cover (brute force over subsets; at most a handful of agents)."""
    verts = sorted({v for e in edges for v in e})
    for r in range(1, len(verts) + 1):
        for sub in itertools.combinations(verts, r):
            ss = set(sub)
            if all(a in ss or b in ss for a, b in edges):
                return r
    return len(verts)


class _Switch(Exception):
    """Raised inside CBS to hand a stalled small instance to the joint search."""


class _Restart(Exception):
    """Raised to merge two groups into a meta-agent and restart CBS (merge & restart)."""

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b


class _CBS:
    """CBS over groups of agents (singletons at first; meta-agents after merges)."""

    def __init__(self, g: _Grid, starts: list[int], goals: list[int], hds: list[list[int]], *,
                 allow_wait: bool, cost_bound: int | None, deadline: float, node_budget: int,
                 use_mdd: bool = True, use_bypass: bool = True, merge_threshold: int = 16,
                 merge_after: int = 500, max_group: int = 2, stall_check=None,
                 use_corridors: bool = True) -> None:
        self.g, self.starts, self.goals, self.hds = g, starts, goals, hds
        self.allow_wait, self.cost_bound = allow_wait, cost_bound
        self.deadline, self.node_budget = deadline, node_budget
        self.use_mdd, self.use_bypass = use_mdd, use_bypass
        self.merge_threshold, self.max_group = merge_threshold, max_group
        self.merge_after = merge_after
        self.expanded = 0
        self.stall_check = stall_check
        k = len(starts)
        self.group_of = list(range(k))
        self.pair_count: dict[tuple[int, int], int] = {}
        self.use_corridors = use_corridors
        self._from_start: dict[tuple[int, int], list[int]] = {}  # (agent, chain or -1) → BFS
        self._to_cell: dict[int, list[int]] = {}  # cell → BFS distances to it

    def members(self, gid: int) -> list[int]:
        return [a for a, x in enumerate(self.group_of) if x == gid]

    def _plan_group(self, gid: int, cons: list[_Cons], paths: list, other_cost: int):
        """Optimal paths for the members of group ``gid`` under their constraints, as a dict
        agent -> path; ``None`` if impossible (within the cost bound)."""
        mem = self.members(gid)
        max_cost = None if self.cost_bound is None else self.cost_bound - other_cost
        if max_cost is not None and max_cost < sum(self.hds[a][self.starts[a]] for a in mem):
            return None
        if len(mem) == 1:
            a = mem[0]
            p = _low_level(self.g, self.hds[a], self.starts[a], self.goals[a], cons[a],
                           _cat(paths, a), allow_wait=self.allow_wait, max_cost=max_cost)
            return None if p is None else {a: p}
        res = _joint(self.g, [self.starts[a] for a in mem], [self.goals[a] for a in mem],
                     [self.hds[a] for a in mem], allow_wait=self.allow_wait,
                     cost_bound=max_cost, deadline=self.deadline,
                     node_budget=max(1000, self.node_budget * 10), cons=[cons[a] for a in mem])
        if res is None:
            return None
        return dict(zip(mem, res[1]))

    def _mdd_width1(self, node: _Node, a: int, t: int) -> bool:
        cost = len(node.paths[a]) - 1
        if t > cost:
            return True  # resting on its goal: moving it off delays its final arrival
        if self.group_of.count(self.group_of[a]) > 1:
            return False  # members of a meta-agent: treated as non-cardinal
        m = node.mdds.get(a)
        if m is None:
            m = _mdd(self.g, self.hds[a], self.starts[a], self.goals[a], cost, node.cons[a],
                     self.allow_wait)
            node.mdds[a] = m
        return len(m[t]) == 1

    def _classify(self, node: _Node) -> None:
        """Pick the conflict to split (cardinal > semi-cardinal > non-cardinal) and set the
        CG heuristic: every cardinal conflict raises the cost of one of its two agents, so a
        minimum vertex cover of the cardinal-conflict graph is a lower bound on the extra cost."""
        node.h = 0
        if not node.conflicts:
            node.chosen = None
            return
        if not self.use_mdd:
            node.chosen = node.conflicts[0]
            return
        best, best_rank = None, -1
        edges = set()
        for c in node.conflicts:
            rank = self._cardinality(node, c)
            if rank == 2:
                edges.add((c[0], c[1]))
            if rank > best_rank:
                best, best_rank = c, rank
        node.chosen = best
        if edges:
            node.h = _min_vertex_cover(edges)

    def _cardinality(self, node: _Node, conflict) -> int:
        """How many of the two agents must pass the conflict cell at that time in every optimal
        path (MDD width 1): 2 = cardinal, 1 = semi-cardinal, 0 = non-cardinal."""
        i, j, kind, t, _, _ = conflict
        if kind == "v":
            ci = self._mdd_width1(node, i, t)
            cj = self._mdd_width1(node, j, t)
        else:
            ci = (t <= len(node.paths[i]) - 1 and self._mdd_width1(node, i, t)
                  and self._mdd_width1(node, i, t - 1))
            cj = (t <= len(node.paths[j]) - 1 and self._mdd_width1(node, j, t)
                  and self._mdd_width1(node, j, t - 1))
        return int(ci) + int(cj)

    def _split(self, node: _Node, conflict) -> tuple[_Cons, _Cons]:
        """The constraints of the two children (for agents i and j): target reasoning,
        corridor reasoning, or the standard vertex/edge split."""
        i, j, kind, t, a, b = conflict
        ci, cj = node.cons[i], node.cons[j]
        if kind == "v":
            # target reasoning: j rests on its goal a at time t while i passes. In any plan
            # either j's final arrival is after t, or j is on a from t on and i may never be
            # on a at or after t. Only the arrival is constrained on j's side: a vertex
            # constraint there would also forbid plans in which j passes a at t and finishes
            # later, which neither child would then contain (a suboptimal solve).
            if a == self.goals[j] and t >= len(node.paths[j]) - 1:
                return ci.add_perm(a, t), cj.add_finish_after(t)
            if a == self.goals[i] and t >= len(node.paths[i]) - 1:
                return ci.add_finish_after(t), cj.add_perm(a, t)
        if self.use_corridors:
            corridor = self._corridor_split(node, conflict)
            if corridor is not None:
                return corridor
        if kind == "v":
            return ci.add_vertex(a, t, self.goals[i]), cj.add_vertex(a, t, self.goals[j])
        return ci.add_edge(a, b, t), cj.add_edge(b, a, t)

    def _dist(self, agent: int, chain: int = -1) -> list[int]:
        """BFS distances from ``agent``'s start (avoiding chain ``chain`` unless -1)."""
        key = (agent, chain)
        if key not in self._from_start:
            blocked = self.g.corridors()[1][chain][0] if chain >= 0 else frozenset()
            self._from_start[key] = self.g.bfs(self.starts[agent], blocked)
        return self._from_start[key]

    def _corridor_split(self, node: _Node, conflict) -> tuple[_Cons, _Cons] | None:
        """Corridor reasoning (Li et al., ICAPS 2020 / AIJ 2021, with lower bounds in place of
        their earliest-arrival searches): agents i and j conflict inside a chain C of m
        degree-2 cells with ends e_i, e_j, i heading for e_i and j for e_j. In every plan one
        crosses C entirely before the other enters it, so either i is not on e_i at any time
        in [0, min(d'_i(e_i) - 1, d_j(e_j) + m)] or j is not on e_j in
        [0, min(d'_j(e_j) - 1, d_i(e_i) + m)], where d is the BFS distance from the agent's
        start (a lower bound on any arrival) and d' the distance avoiding C (a lower bound on
        arriving around C). Sound for any bounds below the true arrival times; used only when
        both starts lie outside C and both current paths break their child's constraint (so
        each child makes progress), else ``None``."""
        i, j, kind, t, a, b = conflict
        chain_of, chains = self.g.corridors()
        cid = chain_of[a] if chain_of[a] >= 0 else (chain_of[b] if kind == "e" else -1)
        if cid < 0:
            return None
        cells, end_a, end_b = chains[cid]
        if self.starts[i] in cells or self.starts[j] in cells:
            return None
        m = len(cells)
        pi, pj = node.paths[i], node.paths[j]
        for ei, ej in ((end_a, end_b), (end_b, end_a)):
            around_i, around_j = self._dist(i, cid)[ei] - 1, self._dist(j, cid)[ej] - 1
            if not (_visits(pi, ei, around_i) and _visits(pj, ej, around_j)):
                continue  # a way around the chain is short: the split would not bite
            ri = min(around_i, self._dist(j)[ej] + m)
            rj = min(around_j, self._dist(i)[ei] + m)
            if not _visits(pi, ei, ri):  # tighten: j's earliest arrival under its constraints
                ri = min(around_i, self._arrival(j, ej, node.cons[j]) + m)
            if not _visits(pj, ej, rj):
                rj = min(around_j, self._arrival(i, ei, node.cons[i]) + m)
            if _visits(pi, ei, ri) and _visits(pj, ej, rj):
                return (node.cons[i].add_range(ei, ri, self.goals[i]),
                        node.cons[j].add_range(ej, rj, self.goals[j]))
        return None

    def _arrival(self, agent: int, cell: int, cons: _Cons) -> int:
        """Earliest time ``agent`` can be on ``cell`` under ``cons`` (a lower bound on its
        arrival anywhere in this CBS subtree, whose constraints only grow)."""
        hd = self._to_cell.get(cell)
        if hd is None:
            hd = self._to_cell[cell] = self.g.bfs(cell)
        path = _low_level(self.g, hd, self.starts[agent], cell, replace(cons, goal_block=-1),
                          ({}, set(), {}), allow_wait=self.allow_wait, max_cost=None)
        return _INF if path is None else len(path) - 1

    def _choose(self, node: _Node):
        if node.chosen is not None and node.chosen in node.conflicts:
            return node.chosen
        if not self.use_mdd or len(node.conflicts) == 1:
            return node.conflicts[0]
        best, best_rank = None, -1
        for c in node.conflicts:
            rank = self._cardinality(node, c)
            if rank > best_rank:
                best, best_rank = c, rank
                if rank == 2:
                    break
        return best

    def run(self) -> tuple[int, list[tuple[int, ...]]] | None:
        while True:
            try:
                return self._run_once()
            except _Restart as r:
                # merge group b into group a and start over from a fresh root
                self.group_of = [r.a if x == r.b else x for x in self.group_of]
                self.pair_count = {}

    def _run_once(self) -> tuple[int, list[tuple[int, ...]]] | None:
        """Best-first search of the constraint tree from a fresh root; ``_Restart`` on a merge."""
        root = self._root()
        if root is None:
            return None
        counter = itertools.count()
        heap = [(root.cost + root.h, len(root.conflicts), next(counter), root)]
        while heap:
            node = heapq.heappop(heap)[3]
            if not node.conflicts:
                return node.cost, node.paths
            self.expanded += 1
            if self.expanded > self.node_budget or time.perf_counter() > self.deadline:
                raise _Budget
            if self.stall_check is not None and self.expanded % 32 == 0:
                self.stall_check(self.expanded)
            while True:
                conflict = self._choose(node)
                self._count_split(conflict)
                children = self._branch(node, conflict)
                if children is None:  # bypassed: the node's paths changed, choose again
                    if not node.conflicts:
                        return node.cost, node.paths
                    continue
                for child in children:
                    self._classify(child)
                    if self.cost_bound is not None and child.cost + child.h > self.cost_bound:
                        continue
                    heapq.heappush(heap, (child.cost + child.h, len(child.conflicts),
                                          next(counter), child))
                break
        return None

    def _root(self) -> _Node | None:
        """The root node: each group planned alone, avoiding (as a tie-break) the groups planned
        before it; ``None`` when a group has no path."""
        k = len(self.starts)
        cons = [_Cons() for _ in range(k)]
        paths: list[tuple[int, ...]] = [()] * k
        planned: list[tuple[int, ...]] = []
        lb_rest = sum(self.hds[a][self.starts[a]] for a in range(k))
        for gid in sorted(set(self.group_of)):
            mem = self.members(gid)
            lb_rest -= sum(self.hds[a][self.starts[a]] for a in mem)
            other = sum(len(q) - 1 for q in planned) + lb_rest
            res = self._plan_root_group(gid, cons, planned, other)
            if res is None:
                return None
            for a, p in res.items():
                paths[a] = p
                planned.append(p)
        root = _Node(sum(len(p) - 1 for p in paths), paths, cons)
        root.find_conflicts(self.group_of)
        self._classify(root)
        return root

    def _count_split(self, conflict) -> None:
        """Count a split of the conflict's two groups; ``_Restart`` once they should merge."""
        i, j = conflict[0], conflict[1]
        gi, gj = self.group_of[i], self.group_of[j]
        key = (min(gi, gj), max(gi, gj))
        self.pair_count[key] = self.pair_count.get(key, 0) + 1
        if (self.pair_count[key] > self.merge_threshold
                and self.expanded >= self.merge_after
                and self.group_of.count(gi) + self.group_of.count(gj) <= self.max_group):
            raise _Restart(*key)

    def _branch(self, node: _Node, conflict) -> list[_Node] | None:
        """The children of splitting ``node`` on ``conflict`` (each side replanned under its new
        constraint), or ``None`` after a bypass: a child with the node's cost and fewer conflicts
        gives the node its paths (keeping the node's constraints) instead of branching."""
        i, j = conflict[0], conflict[1]
        children = []
        for ag, nc in zip((i, j), self._split(node, conflict)):
            ncons = list(node.cons)
            ncons[ag] = nc
            gid = self.group_of[ag]
            mem = self.members(gid)
            other = node.cost - sum(len(node.paths[m]) - 1 for m in mem)
            res = self._plan_group(gid, ncons, node.paths, other)
            if res is None:
                continue
            npaths = list(node.paths)
            for m, p in res.items():
                npaths[m] = p
            child = _Node(sum(len(p) - 1 for p in npaths), npaths, ncons)
            if self.cost_bound is not None and child.cost > self.cost_bound:
                continue
            child.find_conflicts(self.group_of)
            if (self.use_bypass and child.cost == node.cost
                    and len(child.conflicts) < len(node.conflicts)):
                node.paths = npaths
                for m in mem:
                    node.mdds.pop(m, None)
                node.find_conflicts(self.group_of)
                node.chosen = None
                return None
            for mag, md in node.mdds.items():
                if mag not in mem:
                    child.mdds[mag] = md
            children.append(child)
        return children

    def _plan_root_group(self, gid: int, cons: list[_Cons], planned: list, other: int):
        mem = self.members(gid)
        if len(mem) == 1:
            a = mem[0]
            max_cost = None if self.cost_bound is None else self.cost_bound - other
            p = _low_level(self.g, self.hds[a], self.starts[a], self.goals[a], cons[a],
                           _cat(planned, -1), allow_wait=self.allow_wait, max_cost=max_cost)
            return None if p is None else {a: p}
        return self._plan_group(gid, cons, [], other)


# ------------------------------------------------------------------------------------------------
# joint-state search
# ------------------------------------------------------------------------------------------------

def joint_space_size(nfree: int, k: int) -> int:
    """Upper bound on joint states: ordered placements of k agents times finished-masks."""
    if nfree < k:
        return 0
    return math.perm(nfree, k) * (1 << k)


def _finish_masks(cand: list[int], mask: int):
    """Every finished mask: ``mask`` plus each subset of the agents ``cand`` (standing on their
    goals) declaring themselves finished, the empty subset first."""
    for r in range(len(cand) + 1):
        for sub in itertools.combinations(cand, r):
            m = mask
            for i in sub:
                m |= 1 << i
            yield m


def _joint_paths(parent: dict, last, k: int) -> list[tuple[int, ...]]:
    """The agents' paths of the joint search's plan ending in full state ``last``
    ``(positions, finished mask, time)``: each agent's cells up to the state it finished in."""
    seq = []
    x = last
    while x is not None:
        seq.append(x)
        x = parent[x]
    seq.reverse()
    paths = []
    for a in range(k):
        p = []
        for ps, m, _t in seq:
            p.append(ps[a])
            if (m >> a) & 1:
                break
        paths.append(tuple(p))
    return paths


def _joint(g: _Grid, starts: list[int], goals: list[int], hds: list[list[int]], *,
           allow_wait: bool, cost_bound: int | None, deadline: float, node_budget: int,
           cons: list[_Cons] | None = None):
    """Exact A* with operator decomposition over (positions, finished mask, time).

    A full state is the agents' cells and which agents have declared themselves finished (a
    finished agent rests on its goal for good and costs nothing more). One time step is split
    into ``k`` intermediate states, agent ``i`` choosing its move in the ``i``-th, so the
    branching factor is ~5 rather than 5^k; conflicts are checked against the agents that
    already moved in this step (a vertex conflict, or a swap with an agent's old cell). After
    the last agent moves, any agent standing on its goal may declare itself finished (both
    branches are kept). Each unfinished agent pays 1 per step, so the cost of a path of full
    states is the sum of costs.

    ``cons`` (per agent, used when CBS plans a merged meta-agent) makes states time-dependent;
    after the latest constrained time all times are equivalent, so time is capped there and the
    state space stays finite (without constraints time plays no role at all). Returns
    ``(cost, paths)``, ``None`` if there is no plan (within ``cost_bound``), or raises
    ``_Budget``.
    """
    # Kept whole: the loop below is the search's inner loop (one pass per intermediate state),
    # and its expansion step reads the locals bound here; a function per step would cost a call
    # per state for no gain in reading. The cold parts are apart: ``_finish_masks``, ``_joint_paths``.
    k = len(starts)
    full = (1 << k) - 1
    INF = _INF
    if cons is None:
        cons = [_Cons() for _ in range(k)]
    tcap = max(c.max_t for c in cons) + 1 if any(c.vertex or c.edge or c.perm for c in cons) else 0
    vcons = [c.vertex for c in cons]
    econs = [c.edge for c in cons]
    perms = [c.perm_map() for c in cons]
    gblock = [c.goal_block for c in cons]

    def declare(pos, mask, t):
        cand = [i for i in range(k)
                if pos[i] == goals[i] and not (mask >> i) & 1 and t > gblock[i]]
        if not cand:
            return (mask,)
        return _finish_masks(cand, mask)

    def hval(pos, mask):
        s = 0
        for i in range(k):
            if not (mask >> i) & 1:
                s += hds[i][pos[i]]
        return s

    counter = itertools.count()
    heap: list = []
    best: dict = {}
    parent: dict = {}    # full state -> previous full state
    start = tuple(starts)
    for i in range(k):
        if (start[i], 0) in vcons[i]:
            return None
    for m in declare(start, 0, 0):
        fs = (start, m, 0)
        best[(start, start, 0, m, 0)] = 0
        parent[fs] = None
        h0 = hval(start, m)
        heapq.heappush(heap, (h0, 0, next(counter), h0, start, start, 0, m, 0, fs))
    expanded = 0
    nbrs = g.nbrs
    while heap:
        f, ngc, _, hc, cur, old, i, mask, t, origin = heapq.heappop(heap)
        gc = -ngc
        if cost_bound is not None and f > cost_bound:
            return None
        tk = t if t < tcap else tcap
        if best.get((cur, old, i, mask, tk), INF) < gc:
            continue
        if i == 0 and mask == full:
            return gc, _joint_paths(parent, origin, k)
        expanded += 1
        if expanded > node_budget or (expanded & 255 == 0 and time.perf_counter() > deadline):
            raise _Budget
        # agent i moves from its cell at time t to time t + 1 (finished agents stay, for free)
        nt = t + 1
        ntk = nt if nt < tcap else tcap
        u = old[i]
        if (mask >> i) & 1:
            moves = (u,)
            step = 0
        else:
            moves = nbrs[u] + (u,) if allow_wait else nbrs[u]
            step = 1
        vc, ec, pm = vcons[i], econs[i], perms[i]
        hdi = hds[i]
        hbase = hc - hdi[u] if step else hc
        for v in moves:
            if step and ((v, nt) in vc or (u, v, nt) in ec or (pm and nt >= pm.get(v, INF))):
                continue
            ok = True
            for j in range(i):
                cj = cur[j]
                if cj == v or (cj == u and old[j] == v):
                    ok = False
                    break
            if not ok:
                continue
            ncur = cur[:i] + (v,) + cur[i + 1:]
            ng = gc + step
            nh = hbase + hdi[v] if step else hc
            if i + 1 < k:
                nkey = (ncur, old, i + 1, mask, tk)
                if best.get(nkey, INF) <= ng:
                    continue
                best[nkey] = ng
                # ties on f go to the deeper state (larger g): far fewer expansions on plateaus
                heapq.heappush(heap, (ng + nh, -ng, next(counter), nh, ncur, old,
                                      i + 1, mask, t, origin))
            else:
                for m in declare(ncur, mask, nt):
                    nkey = (ncur, ncur, 0, m, ntk)
                    if best.get(nkey, INF) <= ng:
                        continue
                    best[nkey] = ng
                    fs = (ncur, m, nt)
                    parent[fs] = origin
                    mh = nh if m == mask else hval(ncur, m)
                    heapq.heappush(heap, (ng + mh, -ng, next(counter), mh, ncur,
                                          ncur, 0, m, nt, fs))
    return None


def _reachable(g: _Grid, starts: list[int], goals: list[int], limit: int) -> bool | None:
    """Whether the goal configuration can be reached at all (cost ignored); ``None`` if more
    than ``limit`` configurations would have to be visited.

    Any simultaneous conflict-free joint move splits into chains (an agent follows the one
    ahead, the head enters an empty cell), which can be done one agent at a time, and rotations
    of fully occupied cycles. Swaps are forbidden, grid cycles have even length, so with at most
    5 agents the only cycles are 2x2 blocks. Hence the reachable configurations are exactly those
    reachable by single-agent moves into empty cells and 2x2 rotations. Moves are reversible, so
    a bidirectional search that exhausts either side's component proves unsolvability.
    """
    k = len(starts)
    if k > 5:
        return None  # 6-cycles would be possible: the move set above would be incomplete
    w = g.w
    nbrs = g.nbrs

    def succ(pos):
        occ = {c: i for i, c in enumerate(pos)}
        for i, u in enumerate(pos):
            for v in nbrs[u]:
                if v not in occ:
                    yield pos[:i] + (v,) + pos[i + 1:]
        if k >= 4:
            for u in pos:
                if u % w == w - 1:
                    continue
                block = (u, u + 1, u + w + 1, u + w)   # clockwise
                if all(c in occ for c in block):
                    for shift in (1, 3):                # clockwise / counter-clockwise
                        new = list(pos)
                        for idx, c in enumerate(block):
                            new[occ[c]] = block[(idx + shift) % 4]
                        yield tuple(new)

    a, b = tuple(starts), tuple(goals)
    if a == b:
        return True
    seen = [{a}, {b}]
    front = [[a], [b]]
    visited = 2
    while front[0] and front[1]:
        side = 0 if len(front[0]) <= len(front[1]) else 1
        mine, other = seen[side], seen[1 - side]
        nxt = []
        for pos in front[side]:
            for q in succ(pos):
                if q in other:
                    return True
                if q not in mine:
                    mine.add(q)
                    nxt.append(q)
        visited += len(nxt)
        if visited > limit:
            return None
        front[side] = nxt
    return False


# ------------------------------------------------------------------------------------------------
# public entry point
# ------------------------------------------------------------------------------------------------

def solve(instance: Instance, *, time_budget_s: float = 5.0, node_budget: int = 20_000,
          wait_free: bool = False, cost_bound: int | None = None,
          joint_first: int = 12, joint_limit: int = 10_000_000,
          joint_after: int = 64, merge_threshold: int = 16, merge_after: int = 500,
          max_group: int = 2, corridor_reasoning: bool = True) -> SolveResult:
    """Optimal sum-of-costs plan for ``instance`` (see the module docstring).

    ``node_budget`` bounds CBS high-level expansions (the joint search gets 20× as many state
    expansions); ``time_budget_s`` bounds wall time. ``wait_free``/``cost_bound`` restrict the
    search as described above; with a bound, ``"unsolvable"`` means *no plan within the bound*.
    The joint search runs up front on maps with at most ``joint_first`` free cells (where
    it beats CBS), and takes over when CBS
    has expanded ``joint_after`` nodes on an instance whose joint space is at most
    ``joint_limit`` (dense small maps, where CBS thrashes and only an exhaustive search can
    prove unsolvability). A pair of groups is merged into a meta-agent once it has been split
    on more than ``merge_threshold`` times and CBS has expanded ``merge_after`` nodes, up to
    ``max_group`` agents per meta-agent.
    """
    t0 = time.perf_counter()
    deadline = t0 + time_budget_s
    errs = instance.check()  # fields may have been edited after construction
    if errs:
        raise InvalidInstance(errs)
    p = _Problem.of(instance, t0)
    if p.k == 0:
        return p.done("solved", 0, [], 0, "trivial")
    if not p.reachable(cost_bound):
        return p.done("unsolvable", method="reachability")

    def run_joint():
        if p.k >= 3:  # exhausting the cost-free configuration space is far cheaper than A*'s
            reach = _reachable(p.g, p.starts, p.goals, limit=max(1000, node_budget * 10))
            if reach is False:
                return None
        return _joint(p.g, p.starts, p.goals, p.hds, allow_wait=not wait_free, cost_bound=cost_bound,
                      deadline=deadline, node_budget=node_budget * 20)

    if p.g.nfree <= joint_first and p.k > 1:
        return p.joint_result(run_joint, nodes=0)

    jsize = joint_space_size(p.g.nfree, p.k)

    def stall(expanded):
        if expanded >= joint_after and jsize <= joint_limit:
            raise _Switch

    cbs = _CBS(p.g, p.starts, p.goals, p.hds, allow_wait=not wait_free, cost_bound=cost_bound,
               deadline=deadline, node_budget=node_budget, stall_check=stall,
               merge_threshold=merge_threshold, merge_after=merge_after, max_group=max_group,
               use_corridors=corridor_reasoning)
    try:
        res = cbs.run()
    except _Budget:
        return p.done("budget", nodes=cbs.expanded, method="cbs")
    except _Switch:
        return p.joint_result(run_joint, nodes=cbs.expanded)
    if res is None:
        # CBS exhausted its (finite, bounded) tree: no plan within the bound
        return p.done("unsolvable", nodes=cbs.expanded, method="cbs")
    return p.done("solved", res[0], res[1], nodes=cbs.expanded, method="cbs")


@dataclass
class _Problem:
    """An instance as the searches see it: cells as indices, each goal's BFS distances."""

    g: _Grid
    w: int
    starts: list[int]
    goals: list[int]
    hds: list[list[int]]
    """``hds[i][v]``: distance from cell ``v`` to agent ``i``'s goal."""
    t0: float
    """When the solve began (for ``SolveResult.elapsed_s``)."""

    @classmethod
    def of(cls, instance: Instance, t0: float) -> _Problem:
        g = _Grid.of(instance)
        w = instance.w
        goals = [r * w + c for r, c in instance.goals]
        return cls(g, w, [r * w + c for r, c in instance.starts], goals, [g.bfs(goal) for goal in goals], t0)

    @property
    def k(self) -> int:
        return len(self.starts)

    def reachable(self, cost_bound: int | None) -> bool:
        """Every agent can reach its goal, and the sum of distances is within ``cost_bound``."""
        lb = 0
        for i in range(self.k):
            if self.hds[i][self.starts[i]] >= _INF:
                return False
            lb += self.hds[i][self.starts[i]]
        return cost_bound is None or lb <= cost_bound

    def done(self, status, cost=None, paths=None, nodes=0, method="") -> SolveResult:
        plan = None
        if paths is not None:
            plan = [[divmod(v, self.w) for v in p] for p in paths]
        return SolveResult(status, cost, plan, nodes, method, time.perf_counter() - self.t0)

    def joint_result(self, run_joint, nodes: int) -> SolveResult:
        """The result of the joint search ``run_joint`` (after ``nodes`` CBS expansions)."""
        try:
            res = run_joint()
        except _Budget:
            return self.done("budget", nodes=nodes, method="joint")
        if res is None:
            return self.done("unsolvable", nodes=nodes, method="joint")
        return self.done("solved", res[0], res[1], nodes=nodes, method="joint")
