"""The small learner's cost: seconds per GRPO step and per compare run, against the 135M model.

Times, with ``configs/mapf_small.yaml`` (warm start from the cache; it is built first if absent):

1. ``--steps`` GRPO steps (after one warm-up step) at the config's batch (prompts_per_step x
   num_generations), and at the 135M CPU compare's batch (4 prompts x 4 samples,
   ``configs/mapf_compare_cpu.yaml``), on tasks from the eval distribution;
2. one whole run as ``curriculum compare`` runs it (``curriculum.loop.run``: baseline eval, the
   cached warm start, ``rounds`` rounds of sample, train and eval), and what a compare of E
   engineers x S seeds costs at ``--jobs`` parallel runs from it.

``--rates``: instead, the rates ``trainers/small/cost.py`` prices the learner with, per map size and
agent count (4x4 with 2 agents to 10x10 with 4): a greedy decode step of a call of 8 and of 64 rows,
and a training pass (with and without gradients) per row-token of 64 sampled plans.

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


def best_of(fn, n: int = 3) -> tuple[float, object]:
    times, result = [], None
    for _ in range(n):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def rates() -> None:
    """The per-step and per-token rates of ``trainers/small/cost.py`` on this machine."""
    import torch

    from curriculum.config import load_config
    from curriculum.registry import TESTBEDS, TRAINERS
    from small_sensitivity import proposal
    from trainers.small import codec
    from trainers.small.model import decode, pad_left, sequence_logprobs
    from trainers.small.trainer import call_generator, instance_of, max_path

    torch.set_num_threads(1)
    learns = Path(__file__).resolve().parents[1] / "configs" / "mapf_small_learns.yaml"
    print(f"{'map, agents':<14}{'decode step, 8 rows':>20}{'64 rows':>10}{'fwd+bwd / row-token':>22}{'fwd':>9}{'T':>5}")
    for size, agents in (("4x4", 2), ("6x6", 3), ("8x8", 4), ("10x10", 4)):
        config = load_config(learns, ["output_dir=/tmp", f"testbed.train_agents={agents}",
                                      f"testbed.eval_agents=[{agents}]"])
        testbed = TESTBEDS.get("mapf_frozenlake").load()(config.testbed, seed=0)
        trainer = TRAINERS.get("small").load()(config, testbed)
        trainer.setup(None)
        trainer.prepare()
        model = trainer.model
        insts = [instance_of(t) for t in testbed.sample(proposal([size]), 64, 11)]
        cap = [max_path(trainer.config, insts[0])]
        per_step = {}
        for rows in (8, 64):
            seconds, plans = best_of(lambda: decode(model, insts[:rows], cap * rows, temperature=0.0,
                                                    generator=call_generator(1)))
            per_step[rows] = seconds / max(len(d.plan.tok) for d in plans)
        plans = decode(model, insts, cap * 64, temperature=1.0, generator=call_generator(2))
        prompts = [codec.encode_prompt(x) for x in insts]
        batch = pad_left([p + d.plan for p, d in zip(prompts, plans)],
                         [[False] * len(p) + d.written for p, d in zip(prompts, plans)])
        tokens = 64 * batch.tok.shape[1]

        def forward_backward():
            model.train()
            sequence_logprobs(model, batch).sum().backward()
            model.zero_grad(set_to_none=True)

        def forward():
            model.eval()
            with torch.no_grad():
                sequence_logprobs(model, batch)

        fb, _ = best_of(forward_backward)
        fw, _ = best_of(forward)
        print(f"{size + ', ' + str(agents):<14}{1e3 * per_step[8]:>17.2f} ms{1e3 * per_step[64]:>7.2f} ms"
              f"{1e6 * fb / tokens:>19.1f} µs{1e6 * fw / tokens:>6.1f} µs{batch.tok.shape[1]:>5}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--real-step-seconds", type=float, default=None)
    parser.add_argument("--engineers", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rates", action="store_true", help="print the rates of trainers/small/cost.py only")
    args = parser.parse_args()
    if args.rates:
        rates()
        return

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
