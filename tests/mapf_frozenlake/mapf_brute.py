"""Reference searches for the tests: plain Dijkstra over the joint state, no cleverness.

State: (cells of all agents, set of agents that have declared themselves finished). A finished
agent rests on its goal for good and costs nothing; every other agent pays 1 per step. The
optimal sum of costs is the shortest distance to an all-finished state. Every joint move of the
unfinished agents (each: 4 moves + wait, or 4 moves only for the wait-free variant) is
enumerated with ``itertools.product`` and filtered for vertex and swap conflicts.
"""

from __future__ import annotations

import heapq
import itertools


def brute_force(inst, *, wait_free: bool = False) -> int | None:
    """Optimal sum of costs, or ``None`` if there is no plan (finite joint graph)."""
    h, w, holes = inst.h, inst.w, inst.holes
    k = inst.num_agents
    goals = tuple(inst.goals)

    def moves(cell, allow_wait):
        r, c = cell
        out = [(r + dr, c + dc) for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1))]
        out = [x for x in out if 0 <= x[0] < h and 0 <= x[1] < w and x not in holes]
        if allow_wait:
            out.append(cell)
        return out

    def finish_options(pos, done):
        cand = [i for i in range(k) if i not in done and pos[i] == goals[i]]
        for r in range(len(cand) + 1):
            for sub in itertools.combinations(cand, r):
                yield done | frozenset(sub)

    start = tuple(inst.starts)
    dist = {}
    heap = []
    for d in finish_options(start, frozenset()):
        dist[(start, d)] = 0
        heap.append((0, start, tuple(sorted(d))))
    heapq.heapify(heap)
    while heap:
        cost, pos, dl = heapq.heappop(heap)
        done = frozenset(dl)
        if dist.get((pos, done), 1 << 30) < cost:
            continue
        if len(done) == k:
            return cost
        options = [[pos[i]] if i in done else moves(pos[i], not wait_free) for i in range(k)]
        step = k - len(done)
        for npos in itertools.product(*options):
            if len(set(npos)) < k:
                continue
            if any(npos[i] == pos[j] and npos[j] == pos[i] and i != j
                   for i in range(k) for j in range(i + 1, k)):
                continue
            for nd in finish_options(npos, done):
                key = (npos, nd)
                if dist.get(key, 1 << 30) > cost + step:
                    dist[key] = cost + step
                    heapq.heappush(heap, (cost + step, npos, tuple(sorted(nd))))
    return None


def random_instance(rng, n: int, k: int, holes: int, *, square: bool = True):
    """Uniform random instance with distinct starts, distinct goals, goal != own start."""
    from testbeds.mapf_frozenlake.instance import Instance

    m = n
    cells = [(r, c) for r in range(n) for c in range(m)]
    perm = rng.permutation(len(cells))
    hole_cells = [cells[i] for i in perm[:holes]]
    free = [cells[i] for i in perm[holes:]]
    if len(free) < k + 1:
        return None
    for _ in range(100):
        s = [free[i] for i in rng.permutation(len(free))[:k]]
        g = [free[i] for i in rng.permutation(len(free))[:k]]
        if all(a != b for a, b in zip(s, g)):
            return Instance(n, m, frozenset(hole_cells), s, g)
    return None
