"""Does the training distribution matter to the small learner? Three fixed schedules, N seeds each.

Every arm starts from the same cached warm start (``configs/mapf_small.yaml``) and trains the
same number of GRPO rounds on ``tasks_per_round`` instances per round; only the distribution of
map sizes differs (hole ratio 0.2 and no wait request everywhere, the eval suites' settings):

* ``hard``: only the two hardest sizes of the proposal space (9x9, 10x10), every round;
* ``schedule``: a hand-made easy-to-hard window over the eval sizes (round r: ``SCHEDULE[r]``);
* ``test``: the eval distribution (equal shares of the eval sizes) every round.

Seed s fixes every round's training instances (the same for all arms at equal sizes), the
sampling randomness and the eval seed, so arms pair up by seed. Output: one JSON per run
(``runs/<arm>-seed<s>.json``: score after each round, per-size valid rates) and ``summary.json``
with each arm's final score (mean and bootstrap 95% interval over seeds) and the paired
differences (``curriculum.stats.pairwise_differences``).

Run: ``python benchmarks/small_sensitivity.py --seeds 10 --jobs 2 --out docs/results/small_sensitivity``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "mapf_small.yaml"
HARD = ("9x9", "10x10")
SCHEDULE = (("3x3", "4x4"), ("3x3", "4x4", "5x5"), ("4x4", "5x5"), ("4x4", "5x5", "6x6"),
            ("5x5", "6x6"), ("5x5", "6x6"))
"""Sizes of round r of the ``schedule`` arm (the last entry repeats for later rounds)."""
ARMS = ("hard", "schedule", "test")


def proposal(sizes: tuple[str, ...] | list[str]) -> Any:
    from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig, SizeParams

    return GeneratorConfig(sizes={s: SizeParams(data_ratio=(1.0 / len(sizes)) if s in sizes else 0.0,
                                                hole_ratio=0.2, wait_ratio=0.0) for s in SIZES})


def sizes_of(arm: str, round_index: int, eval_sizes: list[str]) -> tuple[str, ...]:
    if arm == "hard":
        return HARD
    if arm == "schedule":
        return SCHEDULE[min(round_index, len(SCHEDULE) - 1)]
    return tuple(eval_sizes)


def run_arm(arm: str, seed: int, overrides: list[str]) -> dict[str, Any]:
    """Warm start (cached), ``rounds`` GRPO rounds on the arm's sizes, eval after each."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from curriculum.config import load_config
    from curriculum.registry import TESTBEDS, TRAINERS

    config = load_config(CONFIG, ["output_dir=/tmp", *overrides])
    testbed = TESTBEDS.get(config.testbed.name).load()(config.testbed, seed=seed)
    trainer = TRAINERS.get(config.trainer.name).load()(config, testbed)
    start = time.perf_counter()
    trainer.setup(None)
    warm = trainer.prepare()
    scores, by_size = [], []
    report = testbed.evaluate(trainer.policy(), seed=seed)
    baseline = report.score
    train_rewards = []
    for r in range(config.rounds):
        sizes = sizes_of(arm, r, config.testbed.eval_sizes)
        tasks = testbed.sample(proposal(sizes), config.tasks_per_round, seed * 1000 + r)
        metrics = trainer.train_round(tasks, round_index=r, seed=seed * 1000 + r)
        train_rewards.append(metrics["train/mean_reward"])
        report = testbed.evaluate(trainer.policy(), seed=seed)
        scores.append(report.score)
        by_size.append(report.bucket_scores)
    return {"arm": arm, "seed": seed, "baseline_score": baseline, "scores": scores, "final_score": scores[-1],
            "valid_by_size": by_size, "train_mean_reward": train_rewards,
            "warmstart_cached": warm.get("warmstart/cached"), "seconds": time.perf_counter() - start,
            "rounds": config.rounds, "tasks_per_round": config.tasks_per_round, "overrides": overrides}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/small_sensitivity"))
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    arms = args.arms.split(",")
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    # The warm start once, in this process, before the workers (they then load it from the cache).
    run_warm = [(a, s) for s in range(args.seeds) for a in arms]
    start = time.perf_counter()
    results: dict[tuple[str, int], dict[str, Any]] = {}
    first = run_warm.pop(0)
    results[first] = run_arm(*first, args.overrides)
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        futures = {key: pool.submit(run_arm, *key, args.overrides) for key in run_warm}
        for key, future in futures.items():
            results[key] = future.result()
            print(f"{key[0]}-seed{key[1]}: final {results[key]['final_score']:.3f} "
                  f"({results[key]['seconds']:.0f} s)", flush=True)
    from curriculum.stats import bootstrap_mean_ci, pairwise_differences

    for (arm, seed), res in results.items():
        (args.out / "runs" / f"{arm}-seed{seed}.json").write_text(json.dumps(res, indent=1) + "\n")
    finals = {a: {s: results[(a, s)]["final_score"] for s in range(args.seeds)} for a in arms}
    summary = {
        "config": str(CONFIG.relative_to(CONFIG.parents[1])), "overrides": args.overrides,
        "arms": {a: {"sizes": [list(sizes_of(a, r, list(results[(a, 0)]["valid_by_size"][0])))
                               for r in range(results[(a, 0)]["rounds"])],
                     "final_score": bootstrap_mean_ci(list(finals[a].values())).to_dict(),
                     "mean_train_reward": float(sum(sum(results[(a, s)]["train_mean_reward"])
                                                    for s in range(args.seeds))
                                                / (args.seeds * results[(a, 0)]["rounds"]))}
                 for a in arms},
        "baseline_score": results[(arms[0], 0)]["baseline_score"],
        "pairwise": pairwise_differences(finals),
        "seeds": args.seeds, "wall_s": round(time.perf_counter() - start, 1),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("arms", "pairwise", "baseline_score", "wall_s")}, indent=1))


if __name__ == "__main__":
    main()
