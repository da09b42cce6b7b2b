"""Instance generator: a ``GeneratorConfig`` becomes solvable instances with optimal plans.

Counts: the ``n`` instances are split over sizes by ``data_ratio`` with largest-remainder
rounding (ties to the smaller size); within a size, ``round(wait_ratio · n_size)`` instances are
asked to *need a wait* and the rest to need none.

Per instance (each has its own random stream seeded by ``(seed, size, index, agents)``, so the
output is identical for any number of workers):

* Holes: ``hole_ratio · cells`` rounded stochastically (floor, plus one with probability equal to
  the fractional part), so the *expected* hole share equals the request; placed uniformly.
* Agents: pairwise-distinct starts, pairwise-distinct goals, each agent's goal ≠ its start, none
  on a hole.
* Solved optimally by ``solver.solve``; unsolvable (or over budget) draws are rejected.
* **Needs a wait** — exact definition: the instance has no conflict-free plan without wait
  actions (an agent staying put before its final arrival at its goal) whose sum of costs equals
  the optimal cost. Computed exactly: if the optimal plan found has no wait, it is ``False``;
  otherwise we run the solver restricted to wait-free plans with the optimal cost as bound —
  ``True`` iff that finite search proves there is none.
* Wait requests: draws whose needs-wait flag differs from the request are rejected. For
  ``needs_wait=True`` half the draws are *crossing* proposals — one agent's start is placed so
  it reaches a cell of another agent's shortest path at the same time — because such instances
  are rare among uniform draws on open maps.

Infeasible requests never loop forever: after ``HOLE_PATIENCE`` consecutive unsolvable draws the
hole count drops by one (so the achieved hole ratio is the closest feasible one below the
request), and after ``WAIT_PATIENCE`` draws that miss the wait request the next solvable draw is
accepted. Both are reported per size (requested vs achieved) with warnings.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig, SizeParams, size_side
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.solver import _Grid, solve

HOLE_PATIENCE = 24
"""Consecutive unsolvable draws after which one hole is removed."""
WAIT_PATIENCE = 80
"""Draws missing the wait request after which any solvable draw is accepted."""
PARALLEL_MIN = 400
"""With ``workers=None``, instance counts at or above this use all (≤2) cores."""


@dataclass
class SizeReport:
    """Requested vs achieved statistics for one size."""

    n_requested: int
    n: int
    hole_ratio_requested: float
    hole_ratio_achieved: float
    wait_ratio_requested: float | None
    wait_ratio_achieved: float
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class GenerationResult:
    """Instances (shuffled across sizes) and a per-size report."""

    instances: list[Instance]
    report: dict[str, SizeReport]
    elapsed_s: float

    @property
    def warnings(self) -> list[str]:
        return [f"{s}: {w}" for s, r in self.report.items() for w in r.warnings]

    def report_dict(self) -> dict[str, Any]:
        """JSON-able per-size report (requested vs achieved), for logs and engineers."""
        return {s: r.to_dict() for s, r in self.report.items()}


def merge_reports(reports: list[dict[str, SizeReport]]) -> dict[str, SizeReport]:
    """One per-size report over several generations (e.g. one per agent count): counts add up,
    achieved ratios are weighted by the instances each generation produced."""
    merged: dict[str, SizeReport] = {}
    for report in reports:
        for size, r in report.items():
            m = merged.get(size)
            if m is None:
                merged[size] = SizeReport(**{**r.to_dict(), "warnings": list(r.warnings)})
                continue
            n = m.n + r.n
            mean = (lambda a, b: (a * m.n + b * r.n) / n if n else a)  # noqa: E731
            merged[size] = SizeReport(
                n_requested=m.n_requested + r.n_requested, n=n,
                hole_ratio_requested=m.hole_ratio_requested,
                hole_ratio_achieved=mean(m.hole_ratio_achieved, r.hole_ratio_achieved),
                wait_ratio_requested=m.wait_ratio_requested,
                wait_ratio_achieved=mean(m.wait_ratio_achieved, r.wait_ratio_achieved),
                warnings=m.warnings + r.warnings)
    return merged


def largest_remainder(shares: list[float], n: int) -> list[int]:
    """Integer counts summing to ``n`` proportional to ``shares`` (ties: earlier entry first)."""
    total = sum(shares)
    if n <= 0:
        return [0] * len(shares)
    if total <= 0:
        shares = [1.0] * len(shares)
        total = float(len(shares))
    quotas = [s / total * n for s in shares]
    counts = [int(math.floor(q)) for q in quotas]
    rest = n - sum(counts)
    order = sorted(range(len(shares)), key=lambda i: (-(quotas[i] - counts[i]), i))
    for i in order[:rest]:
        counts[i] += 1
    return counts


def has_wait(plan: list[list[tuple[int, int]]]) -> bool:
    """Whether any agent stays put before its final arrival (paths end at that arrival)."""
    return any(p[t] == p[t + 1] for p in plan for t in range(len(p) - 1))


def compute_needs_wait(inst: Instance, plan: list[list[tuple[int, int]]], cost: int, *,
                       time_budget_s: float = 2.0, node_budget: int = 20_000) -> bool | None:
    """Exact needs-wait flag (see module docstring); ``None`` if the bounded search ran out."""
    if not has_wait(plan):
        return False
    r = solve(inst, wait_free=True, cost_bound=cost, time_budget_s=time_budget_s,
              node_budget=node_budget)
    if r.status == "solved":
        return False
    if r.status == "unsolvable":
        return True
    return None


@dataclass(frozen=True)
class _Job:
    seed: int
    size_index: int
    index: int
    agents: int
    hole_ratio: float
    want_wait: bool | None
    time_budget_s: float
    node_budget: int


def _draw_agents(rng: np.random.Generator, free: list[tuple[int, int]], k: int):
    starts_i = rng.choice(len(free), size=k, replace=False)
    for _ in range(50):
        goals_i = rng.choice(len(free), size=k, replace=False)
        if all(a != b for a, b in zip(starts_i, goals_i)):
            return [free[i] for i in starts_i], [free[i] for i in goals_i]
    return None


def _draw_crossing(rng: np.random.Generator, n: int, holes: frozenset, free: list, k: int):
    """Agents 0 and 1 meet: agent 1 starts at distance t from the cell agent 0's shortest path
    visits at time t, and its goal lies beyond that cell."""
    base = _draw_agents(rng, free, k)
    if base is None:
        return None
    starts, goals = base
    inst = Instance(n, n, holes, starts, goals)
    g = _Grid.of(inst)
    s0, g0 = starts[0][0] * n + starts[0][1], goals[0][0] * n + goals[0][1]
    d0 = g.bfs(g0)
    if d0[s0] >= 1 << 30:
        return None
    # a shortest path of agent 0
    path = [s0]
    while path[-1] != g0:
        u = path[-1]
        path.append(min(g.nbrs[u], key=lambda v: (d0[v], v)))
    if len(path) < 3:
        return None
    t = int(rng.integers(1, len(path) - 1))
    x = path[t]
    dx = g.bfs(x)
    occupied_s = {starts[i] for i in range(k) if i != 1}
    occupied_g = {goals[i] for i in range(k) if i != 1}
    cand_s = [c for c in free if dx[c[0] * n + c[1]] == t and c not in occupied_s]
    cand_g = [c for c in free if 1 <= dx[c[0] * n + c[1]] <= max(2, t) and c not in occupied_g]
    if not cand_s or not cand_g:
        return None
    s1 = cand_s[int(rng.integers(len(cand_s)))]
    g1 = cand_g[int(rng.integers(len(cand_g)))]
    if s1 == g1:
        return None
    starts[1], goals[1] = s1, g1
    return starts, goals


def _generate_one(job: _Job) -> tuple[dict[str, Any], dict[str, Any]]:
    n = size_side(SIZES[job.size_index])
    cells = n * n
    k = job.agents
    rng = np.random.default_rng([job.seed, job.size_index, job.index, job.agents, 0x4D415046])
    target = job.hole_ratio * cells
    holes_n = int(math.floor(target)) + int(rng.random() < target - math.floor(target))
    capped = max(0, min(holes_n, cells - (k + 1)))  # k+1 free cells: the least that can work
    stats = {"holes_reduced": holes_n - capped, "wait_unmet": False, "draws": 0}
    holes_n = capped
    fails = 0
    draws_total = 0
    all_cells = [(r, c) for r in range(n) for c in range(n)]
    while True:
        draws_total += 1
        stats["draws"] = draws_total
        relax_wait = job.want_wait is not None and draws_total > WAIT_PATIENCE
        perm = rng.permutation(cells)
        holes = frozenset(all_cells[i] for i in perm[:holes_n])
        free = [all_cells[i] for i in sorted(perm[holes_n:])]
        if job.want_wait and not relax_wait and rng.random() < 0.5:
            drawn = _draw_crossing(rng, n, holes, free, k) if k >= 2 else None
        else:
            drawn = _draw_agents(rng, free, k)
        res = None
        if drawn is not None:
            inst = Instance(n, n, holes, drawn[0], drawn[1])
            res = solve(inst, time_budget_s=job.time_budget_s, node_budget=job.node_budget)
        if res is None or res.status != "solved":
            fails += 1
            if fails >= HOLE_PATIENCE and holes_n > 0:
                holes_n -= 1
                stats["holes_reduced"] += 1
                fails = 0
            if draws_total > 100 * HOLE_PATIENCE:  # pragma: no cover - cannot happen with k+1 free
                raise RuntimeError(f"no solvable {n}x{n} instance with {k} agents found")
            continue
        fails = 0
        nw = compute_needs_wait(inst, res.plan, res.cost, time_budget_s=job.time_budget_s,
                                node_budget=job.node_budget)
        if job.want_wait is not None and not relax_wait and nw != job.want_wait:
            continue
        if job.want_wait is not None and nw != job.want_wait:
            stats["wait_unmet"] = True
        inst.optimal_plan = res.plan
        inst.optimal_cost = res.cost
        inst.needs_wait = nw
        return inst.to_dict(), stats


def _run_chunk(jobs: list[_Job]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [_generate_one(j) for j in jobs]


def generate(config: GeneratorConfig, n: int, *, agents: int, seed: int,
             workers: int | None = None, time_budget_s: float = 30.0, node_budget: int = 5_000,
             wait_ratio_override: float | None | str = "config",
             hole_ratio_override: float | None = None, counts: list[int] | None = None
             ) -> GenerationResult:
    """Generate ``n`` instances from ``config`` with ``agents`` agents (see module docstring).

    ``workers=None`` uses up to 2 processes when ``n ≥ PARALLEL_MIN``. Draws are rejected on
    the solver's *node* budget, which is deterministic; ``time_budget_s`` is only a safety net
    (a draw cut by the clock depends on machine load and would break reproducibility). The eval suites call
    this with ``wait_ratio_override=None`` (no wait request: natural mix) and a fixed
    ``hole_ratio_override``, and with explicit per-size ``counts``.
    """
    t0 = time.perf_counter()
    if counts is None:
        counts = largest_remainder([config.sizes[s].data_ratio for s in SIZES], n)
    too_small = [s for s, c in zip(SIZES, counts) if c and size_side(s) ** 2 < agents + 1]
    if agents < 1 or too_small:
        # k agents with distinct starts and goals (goal != own start) need k + 1 cells
        raise ValueError(f"{agents} agents do not fit on {', '.join(too_small) or 'any map'}: "
                         f"need at least {agents + 1} cells")
    ratios = [_ratios(config.sizes[s], hole_ratio_override, wait_ratio_override) for s in SIZES]
    jobs: list[_Job] = []
    for si, (hr, wr) in enumerate(ratios):
        n_wait = int(math.floor(wr * counts[si] + 0.5)) if wr is not None else 0
        for i in range(counts[si]):
            want = None if wr is None else (i < n_wait)
            jobs.append(_Job(seed, si, i, agents, hr, want, time_budget_s, node_budget))
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if len(jobs) >= PARALLEL_MIN else 1
    results = _map(jobs, workers)

    instances: list[Instance] = []
    report: dict[str, SizeReport] = {}
    pos = 0
    for si, s in enumerate(SIZES):
        chunk = results[pos:pos + counts[si]]
        pos += counts[si]
        insts = [Instance.from_dict(d) for d, _ in chunk]
        for i, inst in enumerate(insts):
            inst.id = f"k{agents}-{s}-s{seed}-{i:05d}"
        instances.extend(insts)
        report[s] = _size_report(s, counts[si], insts, [st for _, st in chunk], *ratios[si])

    order = np.random.default_rng([seed, agents, 0x53485546]).permutation(len(instances))
    instances = [instances[i] for i in order]
    return GenerationResult(instances, report, time.perf_counter() - t0)


def _ratios(p: SizeParams, hole_ratio_override: float | None, wait_ratio_override: float | None | str
            ) -> tuple[float, float | None]:
    """The requested hole ratio and wait ratio of one size (``None``: no wait request)."""
    hr = p.hole_ratio if hole_ratio_override is None else hole_ratio_override
    wr = p.wait_ratio if wait_ratio_override == "config" else wait_ratio_override
    return hr, wr


def _size_report(s: str, requested: int, insts: list[Instance], stats: list[dict[str, Any]], hr: float,
                 wr: float | None) -> SizeReport:
    """What one size achieved against what was asked, with a warning per shortfall."""
    cells = size_side(s) ** 2
    m = len(insts)
    achieved_h = sum(len(x.holes) for x in insts) / (m * cells) if m else 0.0
    achieved_w = sum(bool(x.needs_wait) for x in insts) / m if m else 0.0
    warns = []
    reduced = sum(st["holes_reduced"] > 0 for st in stats)
    if reduced:
        warns.append(f"{reduced}/{m} instances had holes removed to become solvable "
                     f"(requested hole ratio {hr:.3f}, achieved {achieved_h:.3f})")
    unmet = sum(st["wait_unmet"] for st in stats)
    if unmet:
        warns.append(f"{unmet}/{m} instances could not meet the wait request "
                     f"(requested wait ratio {wr:.3f}, achieved {achieved_w:.3f})")
    unknown = sum(x.needs_wait is None for x in insts)
    if unknown:
        warns.append(f"{unknown}/{m} instances: needs-wait undecided within budget")
    return SizeReport(requested, m, hr, achieved_h, wr, achieved_w, warns)


def _map(jobs: list[_Job], workers: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    import multiprocessing as mp

    if workers <= 1 or len(jobs) < 2 or mp.current_process().daemon:
        # (daemonic processes, e.g. pool workers, may not start children)
        return _run_chunk(jobs)
    # Interleaved chunks balance cheap and expensive sizes; results are put back in job order.
    nchunks = workers * 8
    chunks = [jobs[i::nchunks] for i in range(nchunks)]
    # fork: workers inherit the imported modules (spawn would pay ~1 s of imports per worker);
    # they run pure-Python search only, so no thread-unsafe library state is touched.
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(workers) as pool:
        out_chunks = pool.map(_run_chunk, chunks, chunksize=1)
    out: list = [None] * len(jobs)
    for ci, res in enumerate(out_chunks):
        for j, r in enumerate(res):
            out[ci + j * nchunks] = r
    return out
