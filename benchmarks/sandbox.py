"""Benchmark the sandbox against running the same environment program in-process.

Measures, with every isolation layer on:

* environment instances per second, each instance being load + reset + 10 steps + close,
  with one client thread per worker;
* per-call step latency (median, p90, p99) on one instance;
* CPU time per instance (host process + every sandbox process, instances included), and the
  rate that would give on the machine's cores if nothing else ran: the wall-clock rate
  depends on what else shares the CPUs.

Run: ``.venv/bin/python benchmarks/sandbox.py [--instances 2000] [--steps 5000]``.
Prints one human-readable block and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbeds.spade.sandbox import SandboxConfig, SandboxPool  # noqa: E402

PROGRAM = '''
import random

class WalkEnv:
    """A 1-D random walk to a goal: small, but does real work per step."""

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.pos, self.goal, self.t = 0, self.rng.randint(3, 9), 0
        return f"position {self.pos}, goal {self.goal}", {"goal": self.goal}

    def step(self, action):
        self.t += 1
        self.pos += 1 if action == "right" else -1
        done = self.pos == self.goal
        return (f"position {self.pos}, goal {self.goal}", 1.0 if done else -0.01, done,
                self.t >= 50, {"t": self.t})
'''
STEPS_PER_INSTANCE = 10


def in_process_instance(source: str) -> None:
    namespace: dict = {"__name__": "__env__"}
    exec(compile(source, "<environment>", "exec"), namespace)
    env = namespace["WalkEnv"]()
    env.reset(seed=0)
    for _ in range(STEPS_PER_INSTANCE):
        env.step("right")


def sandbox_instance(pool: SandboxPool, source: str) -> None:
    with pool.load(source) as env:
        env.reset(seed=0)
        for _ in range(STEPS_PER_INSTANCE):
            env.step("right")


def instances_per_second(pool: SandboxPool, total: int) -> float:
    """Run ``total`` instances from one client thread per worker; return instances/s."""
    per_thread = total // len(pool.workers)

    def client() -> None:
        for _ in range(per_thread):
            sandbox_instance(pool, PROGRAM)

    threads = [threading.Thread(target=client) for _ in pool.workers]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return per_thread * len(threads) / (time.perf_counter() - start)


def cpu_seconds(pool: SandboxPool) -> float:
    """CPU used so far by this process and by every worker's processes (reaped instances are
    counted in their zygote's children time)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = sum(os.times()[:2])
    for worker in pool.workers:
        for pid in [worker.proc.pid, *worker.sandbox_pids()]:
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            own = int(fields[11]) + int(fields[12])
            children = int(fields[13]) + int(fields[14])
            total += (own + children) / tick
    return total


def step_latencies(step, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        step("right")
        samples.append(time.perf_counter() - start)
    return samples


def summary_ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3  # noqa: E731
    return {"median_ms": statistics.median(ordered) * 1e3, "p90_ms": pick(0.9), "p99_ms": pick(0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3,
                        help="throughput trials; the best is reported (the machine may be shared)")
    args = parser.parse_args()

    start = time.perf_counter()
    in_process = [in_process_instance(PROGRAM) for _ in range(args.instances)]
    in_process_rate = len(in_process) / (time.perf_counter() - start)
    namespace: dict = {"__name__": "__env__"}
    exec(PROGRAM, namespace)
    local_env = namespace["WalkEnv"]()
    local_env.reset(seed=0)
    local_steps = summary_ms(step_latencies(local_env.step, args.steps))

    cores = os.cpu_count() or 1
    config = SandboxConfig() if args.workers is None else SandboxConfig(workers=args.workers)
    start = time.perf_counter()
    with SandboxPool(config) as pool:
        startup_s = time.perf_counter() - start
        assert pool.report.ok, pool.report.missing
        instances_per_second(pool, 50)  # warm up
        trials, cpu_costs = [], []
        for _ in range(args.repeat):
            cpu_before = cpu_seconds(pool)
            trials.append(instances_per_second(pool, args.instances))
            cpu_costs.append((cpu_seconds(pool) - cpu_before) / args.instances)
        rate, cpu_per_instance = max(trials), min(cpu_costs)
        with pool.load(PROGRAM) as env:
            env.reset(seed=0)
            sandbox_steps = summary_ms(step_latencies(env.step, args.steps))

    result = {
        "workers": config.workers, "layers": [layer.name for layer in pool.report.layers],
        "pool_startup_s": round(startup_s, 3),
        "sandbox_instances_per_s": round(rate, 1), "trials": [round(t, 1) for t in trials],
        "in_process_instances_per_s": round(in_process_rate, 1),
        "cpu_ms_per_instance": round(cpu_per_instance * 1e3, 2),
        "cpu_bound_instances_per_s": round(cores / cpu_per_instance, 1),
        "load_average": os.getloadavg()[0],
        "sandbox_step": {k: round(v, 4) for k, v in sandbox_steps.items()},
        "in_process_step": {k: round(v, 5) for k, v in local_steps.items()},
    }
    print(f"workers: {config.workers}; layers on: {', '.join(result['layers'])}")
    print(f"pool start-up:            {startup_s:8.3f} s")
    print(f"instances/s (load+reset+{STEPS_PER_INSTANCE} steps): sandbox {rate:8.1f}   "
          f"in-process {in_process_rate:10.1f}   (best of {[round(t) for t in trials]})")
    print(f"CPU per instance:         {cpu_per_instance * 1e3:8.2f} ms (host + sandbox) -> "
          f"{cores / cpu_per_instance:.0f} instances/s on {cores} idle cores "
          f"(load average now {os.getloadavg()[0]:.1f})")
    print(f"step latency median:      sandbox {sandbox_steps['median_ms']:.3f} ms   "
          f"in-process {local_steps['median_ms']:.4f} ms")
    print(f"step latency p90 / p99:   sandbox {sandbox_steps['p90_ms']:.3f} / "
          f"{sandbox_steps['p99_ms']:.3f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
