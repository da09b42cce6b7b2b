"""The small learner's learning curve under GRPO on a fixed training distribution, per seed.

Each seed: the cached warm start of the config (``--vary-init`` gives each seed its own initial
weights, hence its own warm start), then ``--steps`` GRPO steps of the trainer's own
``grpo_step`` on fresh instances of one fixed distribution (``--train-sizes`` x the config's
``train_agents``, ``--hole-ratio`` (20%) holes, ``--wait-ratio`` (0) of them needing a wait;
every task is new). Every ``--every`` steps it
prints and records:

* ``train_valid``, ``train_reward``: the sampled plans' valid rate and reward since the last row;
* ``no_spread``: the share of sampled groups whose G rewards are all equal (they teach nothing);
* ``groups_per_step``: groups sampled per step (``prompts_per_step`` unless the trainer's
  ``dynamic_sampling`` samples more to fill the update with groups that have spread);
* ``grad_norm`` (before clipping), ``tokens``: mean written tokens per plan;
* ``test``: the held-out test suite's valid rate, greedy (what ``compare`` scores);
* on ``--probe`` fresh training instances (fixed per seed): ``greedy``, ``sampled`` (valid rate
  at the training temperature), ``pass@k`` (any of k samples valid), ``entropy`` (nats per
  written token of the sampling policy) and ``kl_start`` (KL(current || warm start) per written
  token, exact over the allowed set, on the current policy's samples).

A change that raises ``test`` while ``pass@k`` falls is sharpening, not teaching.

Output (``--out``): ``seed<s>.json`` per seed (the rows) and ``summary.json``: per seed the
start and final test valid rate and the gain, and the seed-level mean gain with its t-interval
(S - 1 degrees of freedom).

Run: ``python benchmarks/small_learning_curve.py --config configs/mapf_small_learns.yaml --seeds 10
--out docs/results/small_learns``. One process, one torch thread; take times on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]


def proposal(sizes: list[str], hole_ratio: float = 0.2, wait_ratio: float = 0.0) -> Any:
    """Equal shares of ``sizes`` at one hole and wait ratio."""
    from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig, SizeParams

    return GeneratorConfig(sizes={s: SizeParams(data_ratio=(1.0 / len(sizes)) if s in sizes else 0.0,
                                                hole_ratio=hole_ratio, wait_ratio=wait_ratio) for s in SIZES})


def policy_statistics(trainer: Any, start: Any, tasks: list[Any], k: int, seed: int) -> dict[str, float]:
    """Greedy and sampled valid rate, pass@k, entropy and KL to ``start`` on ``tasks``."""
    import numpy as np
    import torch

    from trainers.small import codec
    from trainers.small.model import next_token_logprobs, pad_left
    from curriculum.core.types import Completion
    from trainers.small.trainer import call_generator, instance_of

    policy, temp = trainer.policy(), trainer.config.temperature
    greedy = [trainer.testbed.score(t, c)[1]["valid"] for t, c in zip(tasks, policy.generate(tasks, seed=seed))]
    rows = [t for t in tasks for _ in range(k)]
    decoded = policy.decode(rows, temp, call_generator(seed, 0x50524F))
    texts = [codec.text_of(d.paths) for d in decoded]
    valid = np.array([bool(trainer.testbed.score(t, Completion(text=x, num_tokens=1))[1]["valid"])
                      for t, x in zip(rows, texts)]).reshape(len(tasks), k)
    prompts = [codec.encode_prompt(instance_of(t)) for t in rows]
    batch = pad_left([p + d.plan for p, d in zip(prompts, decoded)],
                     [[False] * len(p) + d.written for p, d in zip(prompts, decoded)])
    with torch.no_grad():
        now = next_token_logprobs(trainer.model, batch, temp)
        then = next_token_logprobs(start, batch, temp)
    mask = batch.written[:, 1:]
    p = now.exp()
    entropy = -(p * now.nan_to_num(neginf=0.0)).sum(-1)
    kl = (p * (now - then).nan_to_num(nan=0.0, neginf=0.0, posinf=0.0)).sum(-1)
    return {"greedy": float(np.mean(greedy)), "sampled": float(valid.mean()),
            f"pass@{k}": float(valid.any(axis=1).mean()), "entropy": float(entropy[mask].mean()),
            "kl_start": float(kl[mask].mean())}


def build(config_path: Path, sets: list[str], seed: int, vary_init: bool) -> Any:
    from curriculum.config import load_config
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed
    from trainers.small.trainer import SmallTrainer

    extra = [f"trainer.init_seed={seed}"] if vary_init else []
    config = load_config(config_path, ["output_dir=/tmp", *sets, *extra])
    trainer = SmallTrainer(config, MAPFTestbed(config.testbed))
    trainer.setup(None)
    trainer.prepare()
    return trainer


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """One seed's curve (module docstring)."""
    import copy

    import numpy as np

    from trainers.small.trainer import call_generator

    began = time.perf_counter()
    trainer = build(args.config, args.set, seed, args.vary_init)
    start = copy.deepcopy(trainer.model).eval()
    testbed, P = trainer.testbed, trainer.config.prompts_per_step
    dynamic = trainer.config.dynamic_sampling
    draw = P * (trainer.config.max_sampling_batches if dynamic else 1)  # tasks one step may sample
    train = proposal(args.train_sizes, args.hole_ratio, args.wait_ratio)
    tasks = testbed.sample(train, args.steps * draw, seed=10_000 + seed)
    used = 0  # tasks sampled so far
    probe = testbed.sample(train, args.probe, seed=20_000 + seed)
    rows, window = [], []

    def record(step: int) -> None:
        test = testbed.evaluate(trainer.policy(), seed=seed, suite="test").score
        stats = policy_statistics(trainer, start, probe, args.k, seed)
        w = {k: float(np.mean([x[k] for x in window])) if window else float("nan")
             for k in ("valid", "reward", "no_spread", "grad_norm", "tokens", "sampled_groups")}
        row = {"step": step, "train_valid": w["valid"], "train_reward": w["reward"], "no_spread": w["no_spread"],
               "groups_per_step": w["sampled_groups"],
               "grad_norm": w["grad_norm"], "tokens": w["tokens"], "test": test, **stats,
               "seconds": time.perf_counter() - began}
        rows.append(row)
        window.clear()
        print(f"seed {seed} " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in row.items()), flush=True)

    record(0)
    for step in range(args.steps):
        out = trainer.grpo_step(tasks[used:used + draw], generator=call_generator(seed, 0, step),
                                keep_groups=P if dynamic else None)
        used += int(out["sampled_groups"])
        window.append(step_summary(out, trainer.config.num_generations))
        if (step + 1) % args.every == 0 or step + 1 == args.steps:
            record(step + 1)
    return {"seed": seed, "start": rows[0]["test"], "final": rows[-1]["test"],
            "gain": rows[-1]["test"] - rows[0]["test"], "rows": rows}


def step_summary(out: dict[str, Any], G: int) -> dict[str, float]:
    import numpy as np

    rewards = np.array([s["reward"] for s in out["scored"]]).reshape(-1, G)
    return {"valid": out["valid"], "reward": out["reward"], "grad_norm": out["grad_norm"],
            "no_spread": float((rewards.max(axis=1) == rewards.min(axis=1)).mean()),
            "sampled_groups": float(out["sampled_groups"]),
            "tokens": float(np.mean([s["tokens"] for s in out["scored"]]))}


def t_interval(values: list[float]) -> dict[str, Any]:
    """Mean and 95% t-interval over seeds (S - 1 degrees of freedom)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2:
        return {"mean": mean, "low": None, "high": None, "n": len(x)}
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": len(x)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "mapf_small.yaml")
    parser.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--train-sizes", type=lambda s: s.split(","), default=["3x3", "4x4", "5x5", "6x6"])
    parser.add_argument("--hole-ratio", type=float, default=0.2, help="hole ratio of the training instances")
    parser.add_argument("--wait-ratio", type=float, default=0.0,
                        help="share of training instances that need a wait")
    parser.add_argument("--probe", type=int, default=64, help="fresh training instances of the pass@k probe")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--vary-init", action="store_true", help="seed s: init_seed s (its own warm start)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    results = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        results.append(run_seed(args, seed))
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"seed{seed}.json").write_text(json.dumps(results[-1], indent=1))
    summary = {"config": str(args.config), "set": args.set, "steps": args.steps, "train_sizes": args.train_sizes,
               "hole_ratio": args.hole_ratio, "wait_ratio": args.wait_ratio,
               "vary_init": args.vary_init,
               "seeds": [{k: r[k] for k in ("seed", "start", "final", "gain")} for r in results],
               "start": t_interval([r["start"] for r in results]),
               "final": t_interval([r["final"] for r in results]),
               "gain": t_interval([r["gain"] for r in results])}
    print(json.dumps({k: summary[k] for k in ("start", "final", "gain")}, indent=1))
    if args.out is not None:
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
