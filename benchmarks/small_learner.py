"""The small learner's cost: seconds per GRPO step and per compare run, against the 135M model.

Times, with ``configs/mapf_small.yaml`` (warm start from the cache; it is built first if absent):

1. ``--steps`` GRPO steps (after one warm-up step) at the config's batch (prompts_per_step x
   num_generations), and at the 135M CPU compare's batch (4 prompts x 4 samples,
   ``configs/mapf_compare_cpu.yaml``), on tasks from the eval distribution;
2. one whole run as ``curriculum compare`` runs it (``curriculum.loop.run``: baseline eval, the
   cached warm start, ``rounds`` rounds of sample, train and eval), and what a compare of E
   engineers x S seeds costs at ``--jobs`` parallel runs from it.

``--real-step-seconds X``: the 135M GRPO step measured on this machine
(``benchmarks/grpo_step.py --config configs/mapf_compare_cpu.yaml``); the ratios are printed.
Numbers are printed, not asserted; take them on a quiet machine (``uptime``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "mapf_small.yaml"


def step_seconds(trainer, tasks, steps: int, prompts: int, generations: int) -> float:
    from trainers.small.trainer import call_generator

    cfg = trainer.config
    trainer.config = cfg.model_copy(update={"prompts_per_step": prompts, "num_generations": generations})
    try:
        trainer.grpo_step(tasks[:prompts], generator=call_generator(0, 0, 0))  # warm-up
        start = time.perf_counter()
        for s in range(steps):
            pick = [tasks[(s * prompts + i) % len(tasks)] for i in range(prompts)]
            trainer.grpo_step(pick, generator=call_generator(0, 1, s))
        return (time.perf_counter() - start) / steps
    finally:
        trainer.config = cfg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--real-step-seconds", type=float, default=None)
    parser.add_argument("--engineers", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    import torch

    from curriculum.config import apply_overrides, load_config, validate_config
    from curriculum.loop import run
    from curriculum.registry import TESTBEDS, TRAINERS
    from small_sensitivity import proposal

    config = load_config(CONFIG, ["output_dir=/tmp"])
    testbed = TESTBEDS.get("mapf_frozenlake").load()(config.testbed, seed=0)
    trainer = TRAINERS.get("small").load()(config, testbed)
    trainer.setup(None)
    trainer.prepare()
    params = sum(p.numel() for p in trainer.model.parameters())
    tasks = testbed.sample(proposal(config.testbed.eval_sizes), 256, 11)
    print(f"small learner: {params / 1e6:.2f} M parameters, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s)")
    own = step_seconds(trainer, tasks, args.steps, config.trainer.prompts_per_step, config.trainer.num_generations)
    same = step_seconds(trainer, tasks, args.steps, 4, 4)
    rows = [(f"config batch ({config.trainer.prompts_per_step} x {config.trainer.num_generations})", own,
             config.trainer.prompts_per_step * config.trainer.num_generations),
            ("135M compare batch (4 x 4)", same, 16)]
    print(f"{'GRPO step':<32}{'s/step':>9}{'ms/completion':>15}{'135M / small':>14}")
    for label, seconds, completions in rows:
        ratio = f"{args.real_step_seconds / seconds:13.0f}x" if args.real_step_seconds else f"{'—':>14}"
        print(f"{label:<32}{seconds:9.3f}{1000 * seconds / completions:15.1f}{ratio}")
    if args.real_step_seconds:
        print(f"135M step (4 x 4): {args.real_step_seconds:.2f} s, {1000 * args.real_step_seconds / 16:.0f} ms/completion; "
              f"per completion the small learner is {args.real_step_seconds / 16 / (own / rows[0][2]):.0f}x cheaper")

    with tempfile.TemporaryDirectory() as out:
        data = apply_overrides(config.model_dump(mode="json"), [f"output_dir={out}", "run_name=bench"])
        start = time.perf_counter()
        run(validate_config(data))
        seconds = time.perf_counter() - start
    total = seconds * args.engineers * args.seeds / args.jobs
    print(f"one compare run ({config.rounds} rounds x {config.trainer.max_steps_per_round} steps, cached warm "
          f"start, {config.rounds + 1} evals): {seconds:.1f} s; {args.engineers} engineers x {args.seeds} seeds "
          f"at --jobs {args.jobs}: ~{total / 60:.1f} min (without round-0 sharing)")


if __name__ == "__main__":
    main()
