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

Algorithm (each part kept because it measurably helps at 3–5 agents, see benchmarks/mapf.py):

* Low level: space-time A* with the exact single-agent distance (BFS from the goal) as heuristic,
  ties broken by fewest conflicts with the other agents' current paths (a conflict-avoidance
  table), which is exact: among the optimal paths it returns one with fewest conflicts.
* High level: best-first on (cost, number of conflicting pairs); conflicts are prioritised
  cardinal > semi-cardinal > non-cardinal using multi-valued decision diagrams (MDDs) of the
  agents' optimal paths (ICBS); bypass: a child with the parent's cost and fewer conflicts
  replaces the parent's path instead of branching.
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
from dataclasses import dataclass, field

from testbeds.mapf_frozenlake.instance import Cell, Instance

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

    def bfs(self, src: int) -> list[int]:
        """Distances from ``src`` (``INF`` where unreachable)."""
        dist = [_INF] * (self.h * self.w)
        dist[src] = 0
        q = deque([src])
        while q:
            u = q.popleft()
            du = dist[u] + 1
            for v in self.nbrs[u]:
                if dist[v] == _INF:
                    dist[v] = du
                    q.append(v)
        return dist


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

    def add_vertex(self, v: int, t: int, goal: int) -> _Cons:
        return _Cons(self.vertex | {(v, t)}, self.edge,
                     max(self.goal_block, t) if v == goal else self.goal_block, max(self.max_t, t))

    def add_edge(self, u: int, v: int, t: int) -> _Cons:
        return _Cons(self.vertex, self.edge | {(u, v, t)}, self.goal_block, max(self.max_t, t))


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


def _low_level(g: _Grid, hd: list[int], start: int, goal: int, cons: _Cons, cat, *,
               allow_wait: bool, max_cost: int | None) -> tuple[int, ...] | None:
    """Optimal single-agent path under ``cons`` (fewest CAT conflicts among optimal ones)."""
    if hd[start] >= _INF:
        return None
    horizon = cons.max_t + g.nfree + 1
    if max_cost is not None:
        horizon = min(horizon, max_cost)
    if hd[start] > horizon:
        return None
    vcon, econ, gb = cons.vertex, cons.edge, cons.goal_block
    vtab, etab, rest = cat
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
        if key in done:
            continue
        done.add(key)
        if u == goal and t > gb:
            path = []
            k: tuple[int, int] | None = key
            while k is not None:
                path.append(k[0])
                k = parent[k]
            return tuple(reversed(path))
        nt = t + 1
        if nt > horizon:
            continue
        succ = nbrs[u] + (u,) if allow_wait else nbrs[u]
        for v in succ:
            fv = nt + hd[v]
            if fv > horizon:
                continue
            nk = (v, nt)
            if nk in done or nk in vcon or (u, v, nt) in econ:
                continue
            c = conf + vtab.get(nk, 0)
            if (v, u, nt) in etab:
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
    fwd: list[set[int]] = [{start}]
    for t in range(1, cost + 1):
        layer = set()
        for u in fwd[-1]:
            succ = g.nbrs[u] + (u,) if allow_wait else g.nbrs[u]
            for v in succ:
                if t + hd[v] <= cost and (v, t) not in vcon and (u, v, t) not in econ:
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

    def find_conflicts(self) -> None:
        out = []
        ps = self.paths
        for i in range(len(ps)):
            for j in range(i + 1, len(ps)):
                c = _first_conflict(ps[i], ps[j])
                if c is not None:
                    out.append((i, j) + c)
        self.conflicts = out


class _CBS:
    def __init__(self, g: _Grid, starts: list[int], goals: list[int], hds: list[list[int]], *,
                 allow_wait: bool, cost_bound: int | None, deadline: float, node_budget: int,
                 use_mdd: bool = True, use_bypass: bool = True, stall_check=None) -> None:
        self.g, self.starts, self.goals, self.hds = g, starts, goals, hds
        self.allow_wait, self.cost_bound = allow_wait, cost_bound
        self.deadline, self.node_budget = deadline, node_budget
        self.use_mdd, self.use_bypass = use_mdd, use_bypass
        self.expanded = 0
        self.stall_check = stall_check

    def _plan(self, a: int, cons: _Cons, paths: list, other_cost: int):
        max_cost = None if self.cost_bound is None else self.cost_bound - other_cost
        if max_cost is not None and max_cost < self.hds[a][self.starts[a]]:
            return None
        return _low_level(self.g, self.hds[a], self.starts[a], self.goals[a], cons,
                          _cat(paths, a), allow_wait=self.allow_wait, max_cost=max_cost)

    def _mdd_width1(self, node: _Node, a: int, t: int) -> bool:
        cost = len(node.paths[a]) - 1
        if t > cost:
            return True  # resting on its goal: moving it off delays its final arrival
        m = node.mdds.get(a)
        if m is None:
            m = _mdd(self.g, self.hds[a], self.starts[a], self.goals[a], cost, node.cons[a],
                     self.allow_wait)
            node.mdds[a] = m
        return len(m[t]) == 1

    def _choose(self, node: _Node):
        if not self.use_mdd or len(node.conflicts) == 1:
            return node.conflicts[0]
        best, best_rank = None, -1
        for c in node.conflicts:
            i, j, kind, t, a, b = c
            if kind == "v":
                ci = self._mdd_width1(node, i, t)
                cj = self._mdd_width1(node, j, t)
            else:
                ci = t <= len(node.paths[i]) - 1 and self._mdd_width1(node, i, t) and self._mdd_width1(node, i, t - 1)
                cj = t <= len(node.paths[j]) - 1 and self._mdd_width1(node, j, t) and self._mdd_width1(node, j, t - 1)
            rank = int(ci) + int(cj)
            if rank > best_rank:
                best, best_rank = c, rank
                if rank == 2:
                    break
        return best

    def run(self) -> tuple[int, list[tuple[int, ...]]] | None:
        k = len(self.starts)
        cons = [_Cons() for _ in range(k)]
        paths: list[tuple[int, ...]] = []
        for a in range(k):
            # plan agents in order, each avoiding (as a tie-break) those planned before it
            cat = _cat(paths, -1)
            max_cost = None
            if self.cost_bound is not None:
                max_cost = self.cost_bound - sum(len(q) - 1 for q in paths) - sum(
                    self.hds[b][self.starts[b]] for b in range(a + 1, k))
            p = _low_level(self.g, self.hds[a], self.starts[a], self.goals[a], cons[a], cat,
                           allow_wait=self.allow_wait, max_cost=max_cost)
            if p is None:
                return None
            paths.append(p)
        root = _Node(sum(len(p) - 1 for p in paths), paths, cons)
        root.find_conflicts()
        counter = itertools.count()
        heap = [(root.cost, len(root.conflicts), next(counter), root)]
        while heap:
            cost, _, _, node = heapq.heappop(heap)
            if not node.conflicts:
                return node.cost, node.paths
            self.expanded += 1
            if self.expanded > self.node_budget or time.perf_counter() > self.deadline:
                raise _Budget
            if self.stall_check is not None and self.expanded % 32 == 0:
                self.stall_check(self.expanded)
            while True:
                conflict = self._choose(node)
                i, j, kind, t, a, b = conflict
                children = []
                bypassed = False
                for ag in (i, j):
                    if kind == "v":
                        nc = node.cons[ag].add_vertex(a, t, self.goals[ag])
                    elif ag == i:
                        nc = node.cons[ag].add_edge(a, b, t)
                    else:
                        nc = node.cons[ag].add_edge(b, a, t)
                    other = node.cost - (len(node.paths[ag]) - 1)
                    p = self._plan(ag, nc, node.paths, other)
                    if p is None:
                        continue
                    npaths = list(node.paths)
                    npaths[ag] = p
                    ncons = list(node.cons)
                    ncons[ag] = nc
                    child = _Node(other + len(p) - 1, npaths, ncons)
                    if self.cost_bound is not None and child.cost > self.cost_bound:
                        continue
                    child.find_conflicts()
                    if (self.use_bypass and child.cost == node.cost
                            and len(child.conflicts) < len(node.conflicts)):
                        # bypass: adopt the path, keep the parent's constraints
                        node.paths = npaths
                        node.mdds.pop(ag, None)
                        node.find_conflicts()
                        bypassed = True
                        break
                    for mag, md in node.mdds.items():
                        if mag != ag:
                            child.mdds[mag] = md
                    children.append(child)
                if bypassed:
                    if not node.conflicts:
                        return node.cost, node.paths
                    continue
                for child in children:
                    heapq.heappush(heap, (child.cost, len(child.conflicts), next(counter), child))
                break
        return None


# ------------------------------------------------------------------------------------------------
# joint-state search
# ------------------------------------------------------------------------------------------------

def joint_space_size(nfree: int, k: int) -> int:
    """Upper bound on joint states: ordered placements of k agents times finished-masks."""
    if nfree < k:
        return 0
    return math.perm(nfree, k) * (1 << k)


def _joint(g: _Grid, starts: list[int], goals: list[int], hds: list[list[int]], *,
           allow_wait: bool, cost_bound: int | None, deadline: float, node_budget: int):
    """Exact A* with operator decomposition over (positions, finished mask).

    A full state is the agents' cells and which agents have declared themselves finished (a
    finished agent rests on its goal for good and costs nothing more). One time step is split
    into ``k`` intermediate states, agent ``i`` choosing its move in the ``i``-th, so the
    branching factor is ~5 rather than 5^k; conflicts are checked against the agents that
    already moved in this step (a vertex conflict, or a swap with an agent's old cell). After
    the last agent moves, any agent standing on its goal may declare itself finished (both
    branches are kept). Each unfinished agent pays 1 per step, so the cost of a path of full
    states is the sum of costs. Returns (cost, paths), ``None`` if no plan (within the bound),
    or raises ``_Budget``.
    """
    k = len(starts)
    full = (1 << k) - 1
    INF = _INF

    def declare(pos, mask):
        cand = [i for i in range(k) if not (mask >> i) & 1 and pos[i] == goals[i]]
        for r in range(len(cand) + 1):
            for sub in itertools.combinations(cand, r):
                m = mask
                for i in sub:
                    m |= 1 << i
                yield m

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
    for m in declare(start, 0):
        fs = (start, m)
        best[(start, start, 0, m)] = 0
        parent[fs] = None
        heapq.heappush(heap, (hval(start, m), 0, next(counter), start, start, 0, m, fs))
    expanded = 0
    nbrs = g.nbrs
    while heap:
        f, gc, _, cur, old, i, mask, origin = heapq.heappop(heap)
        if cost_bound is not None and f > cost_bound:
            return None
        key = (cur, old, i, mask)
        if best.get(key, INF) < gc:
            continue
        if i == 0 and mask == full:
            seq = []
            x = origin
            while x is not None:
                seq.append(x)
                x = parent[x]
            seq.reverse()
            paths = []
            for a in range(k):
                p = []
                for ps, m in seq:
                    p.append(ps[a])
                    if (m >> a) & 1:
                        break
                paths.append(tuple(p))
            return gc, paths
        expanded += 1
        if expanded > node_budget or (expanded & 255 == 0 and time.perf_counter() > deadline):
            raise _Budget
        # agent i moves (finished agents stay, free of charge)
        u = old[i]
        if (mask >> i) & 1:
            moves = (u,)
            step = 0
        else:
            moves = nbrs[u] + (u,) if allow_wait else nbrs[u]
            step = 1
        for v in moves:
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
            if i + 1 < k:
                nkey = (ncur, old, i + 1, mask)
                if best.get(nkey, INF) <= ng:
                    continue
                best[nkey] = ng
                heapq.heappush(heap, (ng + hval(ncur, mask), ng, next(counter), ncur, old,
                                      i + 1, mask, origin))
            else:
                for m in declare(ncur, mask):
                    nkey = (ncur, ncur, 0, m)
                    if best.get(nkey, INF) <= ng:
                        continue
                    best[nkey] = ng
                    fs = (ncur, m)
                    parent[fs] = origin
                    heapq.heappush(heap, (ng + hval(ncur, m), ng, next(counter), ncur, ncur, 0,
                                          m, fs))
    return None


# ------------------------------------------------------------------------------------------------
# public entry point
# ------------------------------------------------------------------------------------------------

def solve(instance: Instance, *, time_budget_s: float = 5.0, node_budget: int = 20_000,
          wait_free: bool = False, cost_bound: int | None = None,
          joint_first: int = 12, joint_limit: int = 10_000_000,
          joint_after: int = 64) -> SolveResult:
    """Optimal sum-of-costs plan for ``instance`` (see the module docstring).

    ``node_budget`` bounds CBS high-level expansions (the joint search gets 20× as many state
    expansions); ``time_budget_s`` bounds wall time. ``wait_free``/``cost_bound`` restrict the
    search as described above; with a bound, ``"unsolvable"`` means *no plan within the bound*.
    The joint search runs up front on maps with at most ``joint_first`` free cells (where
    it beats CBS), and takes over when CBS
    has expanded ``joint_after`` nodes on an instance whose joint space is at most
    ``joint_limit`` (dense small maps, where CBS thrashes and only an exhaustive search can
    prove unsolvability).
    """
    t0 = time.perf_counter()
    deadline = t0 + time_budget_s
    errs = instance.check()
    if errs:
        return SolveResult("unsolvable", method="invalid: " + "; ".join(errs),
                           elapsed_s=time.perf_counter() - t0)
    g = _Grid.of(instance)
    w = instance.w
    starts = [r * w + c for r, c in instance.starts]
    goals = [r * w + c for r, c in instance.goals]
    k = len(starts)
    hds = [g.bfs(goal) for goal in goals]

    def done(status, cost=None, paths=None, nodes=0, method=""):
        plan = None
        if paths is not None:
            plan = [[divmod(v, w) for v in p] for p in paths]
        return SolveResult(status, cost, plan, nodes, method, time.perf_counter() - t0)

    if k == 0:
        return done("solved", 0, [], 0, "trivial")
    lb = 0
    for i in range(k):
        if hds[i][starts[i]] >= _INF:
            return done("unsolvable", method="reachability")
        lb += hds[i][starts[i]]
    if cost_bound is not None and lb > cost_bound:
        return done("unsolvable", method="reachability")

    jsize = joint_space_size(g.nfree, k)

    def run_joint():
        return _joint(g, starts, goals, hds, allow_wait=not wait_free, cost_bound=cost_bound,
                      deadline=deadline, node_budget=node_budget * 20)

    if g.nfree <= joint_first and k > 1:
        try:
            res = run_joint()
        except _Budget:
            return done("budget", method="joint")
        if res is None:
            return done("unsolvable", method="joint")
        return done("solved", res[0], res[1], method="joint")

    class _Switch(Exception):
        pass

    def stall(expanded):
        if expanded >= joint_after and jsize <= joint_limit:
            raise _Switch

    cbs = _CBS(g, starts, goals, hds, allow_wait=not wait_free, cost_bound=cost_bound,
               deadline=deadline, node_budget=node_budget, stall_check=stall)
    try:
        res = cbs.run()
    except _Budget:
        return done("budget", nodes=cbs.expanded, method="cbs")
    except _Switch:
        try:
            res = run_joint()
        except _Budget:
            return done("budget", nodes=cbs.expanded, method="joint")
        if res is None:
            return done("unsolvable", nodes=cbs.expanded, method="joint")
        return done("solved", res[0], res[1], nodes=cbs.expanded, method="joint")
    if res is None:
        # CBS exhausted its (finite, bounded) tree: no plan within the bound
        return done("unsolvable", nodes=cbs.expanded, method="cbs")
    return done("solved", res[0], res[1], nodes=cbs.expanded, method="cbs")
