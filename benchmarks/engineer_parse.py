"""Does the checkpoint engineer answer? Parse rate of its design call, with and without constraints.

For ``--n`` different histories (seed ``--seed + i``: one to three earlier rounds, each a random
legal MAPF proposal of the testbed with random per-size valid rates as its failure breakdown)
this runs ``CheckpointEngineer.design`` (context V6, the paper's) on the embedded SmolLM2-135M
model (``TransformersPolicy``) once under the answer schema (``structured_output: true``, the
default: llguidance) and once as free text (``structured_output: false``, the paper's decoding),
and prints per mode:

* ``parsed``: answers holding a proposal (``diagnostics.parsed``), of ``n``;
* ``usable``: answers that ``project`` used (not replaced by the previous config);
* ``tokens``: mean generated tokens per call; ``s/call``: mean wall seconds of the call;
* ``s/token``: seconds per generated token (whole call / tokens, prompt prefill included);
* ``mask ms/token``: the constraint's own time per token (llguidance mask + applying it), i.e.
  the overhead per token the constraint adds to decoding.

``--temperature`` > 0 samples (seed per history), 0 decodes greedily. ``--modes`` picks
``constrained``, ``free`` or both. ``--json`` writes every call's record to a file.
Numbers are printed, not asserted; take them on a quiet machine (``uptime``).

Run: ``python benchmarks/engineer_parse.py [--n 20] [--temperature 0.7] [--modes constrained,free]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from curriculum.core.records import RoundReport
from curriculum.core.types import EvalReport
from engineers.base import DesignContext
from engineers.checkpoint.config import CheckpointEngineerConfig
from engineers.checkpoint.engineer import CheckpointEngineer
from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig
from testbeds.mapf_frozenlake.suites import FailureBreakdown
from testbeds.mapf_frozenlake.testbed import MAPFTestbed

CHECKS = ("parsable", "legal_move", "conflict_free", "goal_reached", "start_correct", "agent_count")


def breakdown(rng: np.random.Generator, n: int = 10) -> dict:
    """A failure breakdown with valid rates falling with size (random around a random frontier)."""
    frontier = rng.uniform(3, 9)
    sizes, failures_total = {}, {c: 0 for c in CHECKS}
    for size in SIZES:
        side = int(size.split("x")[0])
        rate = float(np.clip(1.0 / (1.0 + np.exp(side - frontier)) + rng.normal(0, 0.1), 0, 1))
        rate = round(rate * n) / n
        bad = n - round(rate * n)
        failures = {c: 0 for c in CHECKS}
        failures[str(rng.choice(["conflict_free", "goal_reached", "legal_move"]))] = bad
        for c in CHECKS:
            failures_total[c] += failures[c]
        sizes[size] = {"n": n, "valid_rate": rate, "optimal_rate": rate / 2, "failures": failures,
                       "mean_tokens": 90.0}
    total = float(np.mean([s["valid_rate"] for s in sizes.values()]))
    suite = {"agents": 3, "n": n * len(SIZES), "valid_rate": total, "optimal_rate": total / 2,
             "failures": failures_total, "mean_tokens": 90.0, "sizes": sizes}
    return FailureBreakdown.model_validate({"suites": {"3agents": suite}}).model_dump()


def history_context(testbed: MAPFTestbed, policy, seed: int, total_rounds: int = 4) -> DesignContext:
    rng = np.random.default_rng(seed)
    rounds = int(rng.integers(1, 4))
    history = []
    for index in range(rounds):
        proposal = testbed.random_proposal(rng).model_dump(mode="json")
        history.append(RoundReport(round=index, proposal=proposal, train_metrics={},
                                   eval=EvalReport(score=float(rng.uniform(0, 0.5)), metrics={},
                                                   breakdown=breakdown(rng))))
    return DesignContext(round=rounds - 1, total_rounds=total_rounds, history=history,
                         proposal=GeneratorConfig.model_validate(history[-1].proposal), testbed=testbed,
                         rng=np.random.default_rng(seed), policy=policy, base_policy=None,
                         run_info={"epochs_per_round": 1.0})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20, help="histories (design calls per mode)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first history")
    parser.add_argument("--temperature", type=float, default=0.7, help="engineer sampling temperature")
    parser.add_argument("--modes", default="constrained,free", help="comma list: constrained, free")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="free-text completion budget")
    parser.add_argument("--json", type=Path, default=None, help="write every call's record here")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in ("constrained", "free")]
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; use constrained and/or free")

    from trainers.generation import GenerationConfig, TransformersPolicy
    from trainers.models import ModelConfig, load_model

    model, tokenizer = load_model(ModelConfig())
    policy = TransformersPolicy(model, tokenizer, GenerationConfig(engineer_max_new_tokens=args.max_new_tokens))
    testbed = MAPFTestbed()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.1f}; n={args.n}, temperature={args.temperature}", flush=True)
    records: list[dict] = []
    try:
        run_calls(args, modes, policy, tokenizer, testbed, records)
    except KeyboardInterrupt:  # Ctrl-C: report the calls made so far
        print(f"interrupted after {len(records)} calls", flush=True)
    summarise(modes, records)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


def run_calls(args, modes, policy, tokenizer, testbed, records: list[dict]) -> None:
    """Each history in turn, every mode on it (paired; an interrupted run stays balanced)."""
    for i in range(args.n):
        for mode in modes:
            config = CheckpointEngineerConfig(structured_output=mode == "constrained", temperature=args.temperature)
            ctx = history_context(testbed, policy, args.seed + i)
            engineer = CheckpointEngineer(config)
            started = time.perf_counter()
            design = engineer.design(ctx)
            seconds = time.perf_counter() - started
            d = design.diagnostics
            tokens = d["answer_tokens"] if d["answer_tokens"] is not None else len(
                tokenizer(design.output or "", add_special_tokens=False)["input_ids"]) + 1
            rec = {"mode": mode, "seed": args.seed + i, "parsed": d["parsed"], "usable": d["usable_output"],
                   "tokens": tokens, "seconds": round(seconds, 2), "mask_seconds": d["mask_seconds"],
                   "status": d["status"]}
            records.append(rec)
            print(json.dumps(rec), flush=True)


def summarise(modes: list[str], records: list[dict]) -> None:
    print(f"{'mode':<12}{'parsed':>8}{'usable':>8}{'tokens':>8}{'s/call':>8}{'s/token':>9}{'mask ms/token':>15}")
    for mode in modes:
        rows = [r for r in records if r["mode"] == mode]
        if not rows:
            continue
        tokens = sum(r["tokens"] for r in rows)
        mask = [r["mask_seconds"] for r in rows if r["mask_seconds"] is not None]
        mask_text = f"{1000 * sum(mask) / tokens:.2f}" if mask else "-"
        print(f"{mode:<12}{sum(r['parsed'] for r in rows):>5}/{len(rows):<2}{sum(r['usable'] for r in rows):>5}/"
              f"{len(rows):<2}{tokens / len(rows):>8.0f}{np.mean([r['seconds'] for r in rows]):>8.1f}"
              f"{sum(r['seconds'] for r in rows) / tokens:>9.3f}{mask_text:>15}")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
