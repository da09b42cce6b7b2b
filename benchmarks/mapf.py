"""MAPF-FrozenLake speed benchmarks (targets in brackets).

1. Generation: a 4000-instance, 2-agent training round from a random config over mixed sizes
   (both cores) [< 20 s].
2. Solver: 10x10 maps with 15–25% holes, 2–5 agents, uniform random starts/goals; median, p99
   and max milliseconds and the status counts [5 agents, 400 instances: median < 2 ms,
   p99 < 100 ms, no budget exhaustion; the C++ CBSH2-RTC reference: p99 ≤ 5.4 ms with every instance
   decided (docs/results.md, "MAPF solver against the C++ reference")].
3. Dense tiny maps: 4x4–7x7 with 20–35% holes, 3–5 agents, the default budget (20,000 CBS
   nodes, 5 s — counted here as 5 s of CPU, so that a loaded machine does not cut searches
   short); per size and agent count the decided fraction (solved or proven unsolvable within
   that budget), CPU median / p99 / max, and the slowest instances as JSON lines (the worst
   cases to study).
4. Validation: ``validate(instance, text)`` on canonical answers (valid and mutated), and on
   the same answers after a short reasoning block [≥ 20,000/s].

Run: ``python benchmarks/mapf.py [--quick] [--only solver,dense] [--no-corridor]``
(``--no-corridor`` turns corridor reasoning off, to measure what it buys). Timings are CPU
time of this process unless labelled wall; on a shared machine wall time includes waiting.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbeds.mapf_frozenlake.config import random_config, uniform_config  # noqa: E402
from testbeds.mapf_frozenlake.generator import generate  # noqa: E402
from testbeds.mapf_frozenlake.instance import Instance  # noqa: E402
from testbeds.mapf_frozenlake.parse import format_plan  # noqa: E402
from testbeds.mapf_frozenlake.solver import solve  # noqa: E402
from testbeds.mapf_frozenlake.validate import validate  # noqa: E402


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def bench_generation(n: int, seed: int) -> None:
    cfg = random_config(np.random.default_rng(seed))
    cores = min(2, os.cpu_count() or 1)
    c0, t = _cpu(), time.perf_counter()
    res = generate(cfg, n, agents=2, seed=seed)
    el = time.perf_counter() - t
    cpu = _cpu() - c0
    # On a shared machine wall time includes waiting for the CPU; CPU seconds / cores is what
    # the round costs on an otherwise idle machine.
    print(f"generation: {n} instances (2 agents, random config seed {seed}) in {el:.2f} s wall "
          f"= {n / el:.0f} instances/s; {cpu:.2f} CPU s over {cores} cores "
          f"(~{cpu / cores:.2f} s uncontended)   [target < 20 s for 4000]")
    for w in res.warnings:
        print(f"  warning: {w}")


def random_instance(rng: np.random.Generator, n: int, k: int, hole_ratio: float) -> Instance:
    cells = [(r, c) for r in range(n) for c in range(n)]
    perm = rng.permutation(len(cells))
    nh = int(round(hole_ratio * n * n))
    holes = frozenset(cells[i] for i in perm[:nh])
    free = [cells[i] for i in perm[nh:]]
    while True:
        s = [free[i] for i in rng.permutation(len(free))[:k]]
        g = [free[i] for i in rng.permutation(len(free))[:k]]
        if all(a != b for a, b in zip(s, g)):
            return Instance(n, n, holes, s, g)


def bench_solver(counts: dict[int, int], seed: int, corridor: bool = True) -> None:
    rng = np.random.default_rng(seed)
    for k, m in counts.items():
        times, cpus, status = [], [], {}
        for _ in range(m):
            inst = random_instance(rng, 10, k, float(rng.uniform(0.15, 0.25)))
            c, t = time.process_time(), time.perf_counter()
            r = solve(inst, time_budget_s=5.0, node_budget=20_000, corridor_reasoning=corridor)
            times.append((time.perf_counter() - t) * 1000)
            cpus.append((time.process_time() - c) * 1000)
            status[r.status] = status.get(r.status, 0) + 1
        ts, cs = np.array(times), np.array(cpus)
        print(f"solver 10x10 {k} agents, {m} instances: wall median {np.median(ts):.2f} ms, "
              f"p99 {np.percentile(ts, 99):.2f} ms, max {ts.max():.2f} ms | CPU median "
              f"{np.median(cs):.2f} ms, p99 {np.percentile(cs, 99):.2f} ms, max {cs.max():.2f} ms"
              f" | {status}")


DEFAULT_TIME_S = 5.0
"""``solve``'s default time budget."""


def bench_dense(per_cell: int, seed: int, corridor: bool = True, worst: int = 3) -> None:
    """Decided fraction and tail latency on dense tiny maps, with the slowest instances."""
    rng = np.random.default_rng(seed)
    slowest: list[tuple[float, str, str]] = []
    total, decided = 0, 0
    for n in (4, 5, 6, 7):
        for k in (3, 4, 5):
            cpus, status = [], {}
            for _ in range(per_cell):
                inst = random_instance(rng, n, k, float(rng.uniform(0.20, 0.35)))
                c = time.process_time()
                r = solve(inst, corridor_reasoning=corridor, time_budget_s=60.0)
                cpu = (time.process_time() - c) * 1000
                cpus.append(cpu)
                verdict = r.status if cpu <= DEFAULT_TIME_S * 1000 else "over 5 s CPU"
                status[verdict] = status.get(verdict, 0) + 1
                slowest.append((cpu, verdict, inst.to_json(with_solution=False)))
            cs = np.array(cpus)
            ok = status.get("solved", 0) + status.get("unsolvable", 0)
            total, decided = total + per_cell, decided + ok
            print(f"dense {n}x{n} {k} agents, {per_cell} instances: decided {ok / per_cell:.1%} | "
                  f"CPU median {np.median(cs):.2f} ms, p99 {np.percentile(cs, 99):.1f} ms, "
                  f"max {cs.max():.0f} ms | {status}")
    print(f"dense tiny maps: {decided}/{total} decided ({decided / total:.1%}) within the default "
          "budget; slowest:")
    for cpu, status_, line in sorted(slowest, reverse=True)[:worst]:
        print(f"  {cpu:.0f} ms {status_}: {line}")


def bench_validate(n: int, seed: int) -> None:
    insts = generate(uniform_config(0.2, 0.3), 200, agents=2, seed=seed, workers=1).instances
    rng = np.random.default_rng(seed)
    pairs = []
    for inst in insts:
        plan = [list(p) for p in inst.optimal_plan]
        if rng.random() < 0.5:   # mutate: drop a step of one agent
            p = plan[int(rng.integers(len(plan)))]
            if len(p) > 2:
                del p[int(rng.integers(1, len(p) - 1))]
        pairs.append((inst, format_plan(plan)))
    think = ("<think>Agent 1 should go right first, then down; agent 2 waits one step at "
             "(1,1) so they do not collide. Check holes: none on the way.</think>\n")
    for label, texts in (("canonical answers", pairs),
                         ("reasoning + answer", [(i, think + x) for i, x in pairs])):
        c, t = time.process_time(), time.perf_counter()
        done = 0
        while done < n:
            for inst, text in texts:
                validate(inst, text)
            done += len(texts)
        el = time.perf_counter() - t
        cpu = time.process_time() - c
        print(f"validation ({label}): {done} texts in {el:.2f} s wall = {done / el:.0f} "
              f"validations/s ({done / cpu:.0f}/s per CPU second)   [target >= 20000/s]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="generation,solver,dense,validate",
                    help="comma-separated benchmarks to run")
    ap.add_argument("--no-corridor", action="store_true", help="solver without corridor reasoning")
    args = ap.parse_args()
    q, only, corridor = args.quick, set(args.only.split(",")), not args.no_corridor
    if "generation" in only:
        bench_generation(400 if q else 4000, args.seed)
    if "solver" in only:
        bench_solver({2: 50, 3: 50, 4: 50, 5: 100} if q else {2: 200, 3: 200, 4: 200, 5: 400},
                     args.seed, corridor)
    if "dense" in only:
        bench_dense(10 if q else 50, args.seed, corridor)
    if "validate" in only:
        bench_validate(4000 if q else 40000, args.seed)


if __name__ == "__main__":
    main()
