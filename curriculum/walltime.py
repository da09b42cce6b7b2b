"""``--dry-run``'s wall-time estimate for this machine, from the config alone (nothing loaded).

Per round, with N the model's (active) parameters and F the machine's effective FLOP/s:

    generated  = training samples x max completion tokens      (GRPO: steps x prompts x generations)
               + eval prompts x eval tokens                     (``Testbed.eval_budget``)
               + the engineer's model calls x new tokens        (``Engineer.design_budget``)
               + SPADE's designs and episodes                   (``plan.spade_step``)
    prefilled  = prompts x PROMPT_TOKENS (GRPO and eval) + the engineer's prompts (SPADE counts its own)
    trained    = training samples x (PROMPT_TOKENS + max completion tokens)
    seconds    = 2N (generated / U_gen + prefilled / U_train) / F
               + (6 + 2·reference) N · trained / (U_train · F) + ROUND_OVERHEAD_S

Completions are counted at their token limit, so the estimate is an upper bound for runs whose
answers stop early. F: on a CPU, ``measure_cpu_flops`` times one thread's float32 matrix product with
torch (a fraction of a second) and multiplies by torch's threads; on a GPU machine, the processes times the ``--gpu`` model's bf16 peak.
The utilisations U are stated assumptions: on a GPU ``plan.GEN_UTILISATION`` /
``plan.TRAIN_UTILISATION``; on a CPU ``CPU_GEN_UTILISATION`` / ``CPU_TRAIN_UTILISATION``,
calibrated against a measured run of ``configs/mapf_cpu_demo.yaml`` (docs/architecture.md says
by how much the estimate and the measurement differed).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from curriculum.config import RunConfig

PROMPT_TOKENS = 400
"""Assumed prompt length of one training or eval task (a MAPF prompt of a mid-sized map)."""
CPU_GEN_UTILISATION = 0.012
"""Share of the measured matmul FLOP/s that token-by-token generation reaches on a CPU (batches of
1–8; calibrated on the checkpoint CPU demo, docs/architecture.md)."""
CPU_TRAIN_UTILISATION = 0.30
"""Share of the measured matmul FLOP/s that a training forward and backward pass (and a prompt's
prefill) reaches on a CPU (calibrated on the SPADE CPU demo's TRL step, docs/architecture.md)."""
ROUND_OVERHEAD_S = 20.0
"""Per round: sampling the tasks, building the trainer, committing the checkpoint."""
SIMULATED_ROUND_S = 2.0
"""Per round without a model (the simulated learner): sampling, scoring and eval by the validator."""


@dataclass(frozen=True)
class Budget:
    """Token counts of one round."""

    generated: int
    prefilled: int
    trained: int


@dataclass(frozen=True)
class Estimate:
    """Seconds per round and for the run, with what they assume."""

    round_seconds: float
    total_seconds: float
    budget: Budget
    flops: float
    note: str

    def line(self) -> str:
        return (f"  estimated wall time on this machine: {_human(self.total_seconds)} "
                f"({_human(self.round_seconds)} per round; {self.budget.generated:,} generated, "
                f"{self.budget.trained:,} trained tokens per round; {self.note})")


def measure_cpu_flops(size: int = 256, repeats: int = 20) -> float:
    """float32 FLOP/s of torch's CPU matrix product on this machine: one thread's best of
    ``repeats`` (a multi-threaded probe swings tenfold on a shared machine), times the threads
    torch will use."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(size, size)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            a @ a
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return threads * 2 * size**3 / max(best, 1e-9)


def round_budget(config: RunConfig, eval_prompts: int, eval_tokens: int,
                 design: tuple[int, int, int] = (0, 0, 0)) -> Budget:
    """Token counts of one round of ``config`` (module docstring); ``design``: the engineer's
    (calls, prompt tokens, new tokens), averaged over the rounds that design."""
    from curriculum.plan import spade_step

    trainer = config.trainer
    share = (config.rounds - 1) / config.rounds  # the last round has no design call
    calls, prompt, new = design
    eval_generated = eval_prompts * eval_tokens + round(share * calls * new)
    eval_prefilled = eval_prompts * PROMPT_TOKENS + round(share * calls * prompt)
    if hasattr(trainer, "play"):  # SPADE co-training: one rollout step per round
        step = spade_step(config)
        generated = step.designs * step.design_tokens + step.episodes * step.episode_tokens
        prefilled = step.designs * step.design_prompt_tokens + step.episodes * step.episode_prompt_tokens
        return Budget(generated + eval_generated, prefilled + eval_prefilled, step.trained_tokens)
    if hasattr(trainer, "prompts_per_step"):
        steps = trainer.max_steps_per_round or math.ceil(config.tasks_per_round * trainer.epochs_per_round
                                                         / trainer.prompts_per_step)
        samples = steps * trainer.prompts_per_step * trainer.num_generations
        return Budget(samples * trainer.max_completion_length + eval_generated,
                      samples * PROMPT_TOKENS + eval_prefilled,
                      samples * (PROMPT_TOKENS + trainer.max_completion_length))
    return Budget(eval_generated, eval_prefilled, 0)  # a trainer without a model (simulated)


def estimate(config: RunConfig, budget: Budget, params: int | None, *, flops: float, gpu: bool,
             gen_utilisation: float, train_utilisation: float) -> Estimate:
    """Seconds per round and in total (module docstring)."""
    n = params or 0
    reference = getattr(config.trainer, "beta", 0.0) > 0
    gen = 2 * n * (budget.generated / gen_utilisation + budget.prefilled / train_utilisation) / flops
    train = (6 + 2 * reference) * n * budget.trained / (train_utilisation * flops)
    per_round = gen + train + (ROUND_OVERHEAD_S if params else SIMULATED_ROUND_S)
    where = "GPU peak" if gpu else "measured CPU matmul"
    note = (f"{where} {flops / 1e9:,.0f} GFLOP/s at {gen_utilisation:.0%} generating, "
            f"{train_utilisation:.0%} training; completions at their limit")
    if params is None:
        note = "no model trained or size unknown: fixed per-round time only"
    return Estimate(per_round, per_round * config.rounds, budget, flops, note)


def _human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
