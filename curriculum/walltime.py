"""``--dry-run``'s wall-time estimate for this machine, from the config alone (nothing loaded).

Token counts (``Work``: generated, decode steps, prefilled, trained), for one round:

    generated  = training samples x max completion tokens        (``Trainer.training_budget``; GRPO:
                                                                   steps x prompts x generations)
               + eval prompts x eval tokens                       (``Testbed.eval_budget``)
               + the engineer's model calls x new tokens          (``Engineer.design_budget``)
               + a self-play trainer's designs and episodes       (its ``training_budget``)
    steps      = sequential decode steps: the rows of one generate call decode together, one step
                 per new token, so a call of R rows x T tokens is T steps (and R·T generated tokens)
                   GRPO    one call of prompts_per_step x num_generations rows per optimizer step
                   eval    ceil(prompts / generation.batch_size) calls of eval tokens
                   design  one row per engineer call (calls x new tokens steps)
                   play    designs in calls of generation.batch_size rows; episodes turn by turn in
                           calls of play.batch_size rows, every episode max_turns turns long and
                           every turn at max_new_tokens_per_turn (conservative: most stop earlier)
    prefilled  = prompts x PROMPT_TOKENS (GRPO and eval; a GRPO prompt once for all its samples)
                 + the engineer's prompts (a self-play trainer counts its own)
    trained    = training samples x (PROMPT_TOKENS + max completion tokens)

once, outside the rounds: before round 0 (``eval_before_training``) the baseline eval and a second
eval after a warm start, each on the validation and (where the testbed has one, ``eval_budget(...,
suite="test")``) the test suite; the test suite after the last round (after every round, in the
round's work, with ``test_every_round``); and the supervised warm start (``trainer.warmstart``, ``trainers/warmstart.py``), trained
once and skipped when its cache entry exists, so it is reported apart:

    warm start trained = steps x batch_size x min(max_length, WARMSTART_FILL x (PROMPT_TOKENS
                                                                  + trainer.max_completion_length))

Seconds, with N the model's (active) parameters, W its weights' bytes, F the machine's FLOP/s and
B its memory bandwidth:

    decode     = steps · W / B  +  2N · generated / (U_gen · F)
    prefill    = 2N · prefilled / (U_train · F)
    training   = (2N + 4N·k/L [+ 2N reference model when beta > 0]) · trained / (U_train · F)
    round      = decode + prefill + training (one round's Work) + ROUND_OVERHEAD_S
    run        = rounds x round + the evals before round 0;   warm start apart, "unless cached"

k/L: ``model.trainable_layers`` of the model's L decoder layers (``plan.model_shape``): only the
top k train (``trainers.models.freeze_lower_layers``), so the backward pass (4N: gradients of
activations and of weights) runs through k/L of the model; without ``trainable_layers``, or with
L unknown, k/L = 1, i.e. the usual 6N. Gradient checkpointing's recompute (+2N·k/L) is not
counted (``plan.step_seconds`` counts it for a self-play trainer's step time).

Completions are counted at their token limit, prompts at PROMPT_TOKENS: an upper bound for runs
whose answers stop early or whose prompts are shorter (``make demo``'s are ~180-200 tokens).

The machine. On a GPU, F is the ``--gpu`` model's bf16 peak times the processes, B is infinite (no
step term, as before: U_gen = ``plan.GEN_UTILISATION`` per generated token covers decoding),
U_train = ``plan.TRAIN_UTILISATION``: stated assumptions. On a CPU, ``measure_cpu_flops`` times one
torch thread's float32 matrix product (a fraction of a second) and multiplies by torch's threads,
``measure_cpu_bandwidth`` times the best of a few copies of a 64 MiB tensor (0.15 s), and
U_gen = ``CPU_ROW_UTILISATION``, U_train = ``CPU_TRAIN_UTILISATION`` are calibrated on measured
runs of the embedded SmolLM2-135M (docs/architecture.md). On a CPU a decode step is memory- and
overhead-bound at one row and compute-bound at tens of rows: the W / B term is shared by the
rows of a call, the per-row term is not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from curriculum.config import RunConfig
from curriculum.core.budget import PROMPT_TOKENS, WARMSTART_FILL, TrainingBudget, Work, generate_work
from curriculum.registry import TRAINERS

__all__ = ["PROMPT_TOKENS", "WARMSTART_FILL", "Work", "generate_work", "Budget", "Model", "Rates", "Estimate",
           "round_budget", "trainer_budget", "train_flops_per_token", "estimate", "measure_cpu_flops",
           "measure_cpu_bandwidth"]
CPU_ROW_UTILISATION = 0.25
"""Share of the measured matmul FLOP/s that one more row of a decode step costs on a CPU (2N FLOPs
per generated token), on top of the step's weight read; between two measurements of SmolLM2-135M
in float32. A 184 GFLOP/s machine: 16 tokens/s at batch 1 and 75 at batch 8, i.e. a fixed ~56 ms
per step plus ~6.3 ms per row, 0.23. This project's 2-core AVX2 machine (65-70 GFLOP/s, ~10 GB/s):
a greedy eval of 36 rows x 128 new tokens in 116 s; its 7,200-token prefill takes ~40 s at
CPU_TRAIN_UTILISATION, leaving ~0.59 s per step, of which 0.54 GB / 10 GB/s for the weights and
~15 ms per row, 0.26-0.28. (The KV cache's per-step copy, which grows with the context, is inside this
share: long single-row contexts, such as an engineer's 2,000-token prompt, decode slower.)"""
CPU_TRAIN_UTILISATION = 0.70
"""Share of the measured matmul FLOP/s that a training forward and backward pass, and a prompt's
prefill, reaches on a CPU. Calibrated on ``make demo``'s warm-start step on the 2-core AVX2
machine (65-70 GFLOP/s): 8 x ~244 tokens at 2N + 4N·15/30 FLOPs per token in 21.1 s, 0.71-0.77;
with every layer trained (6N) in 29.4 s, 0.77-0.82 (docs/results.md, "How fast is each stage")."""
ROUND_OVERHEAD_S = 20.0
"""Per round: sampling the tasks, building the trainer, committing the checkpoint."""
SIMULATED_ROUND_S = 2.0
"""Per round without a model (the simulated learner): sampling, scoring and eval by the validator."""


@dataclass(frozen=True)
class Budget:
    """One round's work, the work done once before round 0 (evals) and the warm start's."""

    round: Work
    once: Work = Work()
    warmstart: Work = Work()


@dataclass(frozen=True)
class Model:
    """What the estimate needs of the model: parameters N (active ones for a mixture of experts),
    decoder layers L (``None``: unknown) and the bytes of its weights, read once per decode step."""

    params: int
    layers: int | None
    weight_bytes: float


@dataclass(frozen=True)
class Rates:
    """The machine: FLOP/s F, memory bandwidth B (``math.inf``: no per-step term) and the two
    utilisations (module docstring)."""

    flops: float
    bandwidth: float
    gen_utilisation: float
    train_utilisation: float


@dataclass(frozen=True)
class Estimate:
    """Seconds per round, for the run and for the warm start, with what they assume."""

    round_seconds: float
    total_seconds: float
    warmstart_seconds: float
    budget: Budget
    note: str

    def line(self) -> str:
        warm = (f"+ {_human(self.warmstart_seconds)} warm start unless cached; "
                if self.budget.warmstart.trained else "")
        r = self.budget.round
        return (f"  estimated wall time on this machine: {_human(self.total_seconds)} "
                f"({warm}{_human(self.round_seconds)} per round; {r.generated:,} generated tokens in "
                f"{r.decode_steps:,} decode steps, {r.trained:,} trained tokens per round; {self.note})")


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


def measure_cpu_bandwidth(mib: int = 64, repeats: int = 5) -> float:
    """Memory bytes/s of this machine: the best of ``repeats`` copies of a ``mib`` MiB float32
    tensor with torch's threads, counting the bytes read and written (0.15 s on this project's
    2-core machine, most of it the first touch of the pages). 64 MiB each way is well above a
    CPU's last-level cache share (8 MiB on that machine), as a decode step's weights are; the best
    copy, as in ``measure_cpu_flops``, is the machine's rate without the other jobs' share."""
    import torch

    src = torch.ones(mib * 2**20 // 4)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() * 4 / max(best, 1e-9)


# -- token counts ------------------------------------------------------------------------------------
def round_budget(config: RunConfig, eval_prompts: int, eval_tokens: int,
                 design: tuple[int, int, int] = (0, 0, 0), test: tuple[int, int] | None = None) -> Budget:
    """Token counts of one round, of the evals outside the rounds and of the warm start of
    ``config`` (module docstring); ``design``: the engineer's (calls, prompt tokens, new tokens),
    averaged over the rounds that design; the trainer's part: ``Trainer.training_budget``;
    ``test``: (prompts, new tokens) of the testbed's test suite, ``None`` where it has none."""
    trainer = trainer_budget(config)
    evaluation = generate_work(eval_prompts, eval_tokens, config.generation.batch_size)
    testing = generate_work(*test, config.generation.batch_size) if test is not None else Work()
    per_round_test = testing if config.test_every_round else Work()
    # Without test_every_round the test suite runs once, after the last round.
    last_test = Work() if config.test_every_round else testing
    share = (config.rounds - 1) / config.rounds if config.rounds else 0.0  # the last round has no design call
    calls, prompt, new = design
    designing = Work(generated=round(share * calls * new), decode_steps=round(share * calls * new),
                     prefilled=round(share * calls * prompt))  # one row per call
    if not trainer.trains_model:  # a trainer without a model (the simulated learner)
        return Budget(evaluation + designing)
    before = int(config.eval_before_training) * trainer.evals_before_training  # each on both suites
    once = (evaluation + testing).times(before) + last_test
    return Budget(trainer.round + evaluation + per_round_test + designing, once, trainer.warmstart)


def trainer_budget(config: RunConfig) -> TrainingBudget:
    """What the run's trainer says one round costs (``Trainer.training_budget``, from the config alone)."""
    return TRAINERS.get(config.trainer.name).load().training_budget(config)


# -- seconds -----------------------------------------------------------------------------------------
def trained_share(config: RunConfig, layers: int | None) -> float:
    """k/L: the share of the decoder layers the backward pass runs through (module docstring)."""
    k = config.model.trainable_layers
    if k is None or not layers:
        return 1.0
    return min(k, layers) / layers


def train_flops_per_token(config: RunConfig, model: Model) -> float:
    """2N forward + 4N·k/L backward (+ 2N for the reference model's forward when beta > 0)."""
    reference = trainer_budget(config).reference_model
    return (2 + 4 * trained_share(config, model.layers) + 2 * reference) * model.params


def work_seconds(work: Work, train_flops: float, model: Model, rates: Rates) -> float:
    """Decode, prefill and training seconds of ``work`` (module docstring)."""
    n, f = model.params, rates.flops
    decode = work.decode_steps * model.weight_bytes / rates.bandwidth + \
        2 * n * work.generated / (rates.gen_utilisation * f)
    prefill = 2 * n * work.prefilled / (rates.train_utilisation * f)
    train = train_flops * work.trained / (rates.train_utilisation * f)
    return decode + prefill + train


def estimate(config: RunConfig, budget: Budget, model: Model | None, rates: Rates, *, gpu: bool) -> Estimate:
    """Seconds per round, for the run and for the warm start (module docstring); ``model``
    ``None``: no model trained, or its size unknown (a fixed time per round)."""
    if model is None:
        return Estimate(SIMULATED_ROUND_S, SIMULATED_ROUND_S * config.rounds, 0.0, Budget(budget.round),
                        "no model trained or size unknown: fixed per-round time only")
    flops = train_flops_per_token(config, model)
    per_round = work_seconds(budget.round, flops, model, rates) + ROUND_OVERHEAD_S
    total = per_round * config.rounds + work_seconds(budget.once, flops, model, rates)
    warm = work_seconds(budget.warmstart, flops, model, rates)
    if gpu:
        where = (f"GPU peak {rates.flops / 1e9:,.0f} GFLOP/s at {rates.gen_utilisation:.0%} generating, "
                 f"{rates.train_utilisation:.0%} training")
    else:
        where = (f"measured CPU matmul {rates.flops / 1e9:,.0f} GFLOP/s, "
                 f"memory {rates.bandwidth / 1e9:,.0f} GB/s: a decode step reads the weights once, "
                 f"each row at {rates.gen_utilisation:.0%}, training at {rates.train_utilisation:.0%}")
    return Estimate(per_round, total, warm, budget, f"{where}; completions at their limit")


def _human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
