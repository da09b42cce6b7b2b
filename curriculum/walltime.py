"""``--dry-run``'s wall-time estimate for this machine, from the config alone (nothing loaded).

Token counts (``Work``: generated, decode steps, prefilled, trained) are counted at their limits,
as the plugins state them (an upper bound):

    generated  = training samples x max completion tokens        (``Trainer.training_budget``; GRPO:
                                                                   steps x prompts x generations)
               + eval prompts x eval tokens                       (``Testbed.eval_budget``)
               + the engineer's model calls x new tokens          (``Engineer.design_budget``)
               + a self-play trainer's designs and episodes       (its ``training_budget``)
    steps      = sequential decode steps: the rows of one generate call decode together, one step
                 per new token, so a call of R rows x T tokens is T steps (and R·T generated tokens)
                   GRPO    one call of prompts_per_step x num_generations rows per optimizer step
                   eval    transformers: ceil(prompts / generation.batch_size) calls of eval tokens;
                           vLLM: one call of every prompt (up to VLLM_MAX_ROWS rows)
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
round's work, with ``test_every_round``); and the supervised warm start (``trainer.warmstart``, ``trainers/grpo/warmstart.py``), trained
once and skipped when its cache entry exists, so it is reported apart:

    warm start trained = steps x batch_size x min(max_length, WARMSTART_FILL x (PROMPT_TOKENS
                                                                  + trainer.max_completion_length))

The central estimate (``central_budget``, on a CPU) takes from those counts what a run computes,
measured on the CPU runs (docs/scaling.md, "Wall-time estimate"): a prompt is the testbed's ``prompt_share`` of
PROMPT_TOKENS on the testbeds where it was measured; a vLLM engine decodes a finished row no
further (DECODE_FILL of the generated tokens after a warm start; the evals of the model as shipped
run to the limit), transformers' ``generate`` decodes every row of a call to the call's last step
(fill 1); a trainer that states its ``central_training`` (GRPO: ``trainers/grpo/plan.py``) pads every
row to the step's longest prompt and completion (``longest_completion`` of the limit) and trains
``kept_rows`` of them (TRL's importance-sampling correction of vLLM's samples takes the trainer's
log-probs from that training pass: ``trainers/grpo/importance.py``). A trainer that states a
``central_round_share`` computes that share of its counted round, and an eval whose answers end
early the testbed's ``eval_answer_fill`` of its counted steps. A trainer or testbed without a calibration keeps its
upper-bound counts, and so does every estimate on a GPU. The upper bound, every share 1, is printed beside the
central estimate.

Seconds, with N the model's (active) parameters, L its decoder layers, W its weights' bytes in the
engine's dtype, F_p the machine's FLOP/s in the part's precision and B its memory bandwidth:

    decode     = steps · max(W / B, L · STEP_OVERHEAD_S[engine])  +  2N · generated / (U_row · F_p)
    prefill    = 2N · prefilled / (U_train · F_p)
    training   = (2N + 4N·k/L [+ 2N reference model when beta > 0]) · trained / (U_train · F_p)
    round      = train + eval + test eval + design (one round's Work) + round overhead
    run        = set-up + evals before round 0 + rounds x round + the test suite after the last;
                 warm start (at U_warm) apart, "unless cached"

k/L: ``model.trainable_layers`` of the model's L decoder layers (``plan.model_shape``): only the
top k train (``trainers.lm.models.freeze_lower_layers``), so the backward pass (4N: gradients of
activations and of weights) runs through k/L of the model; without ``trainable_layers``, or with
L unknown, k/L = 1, i.e. the usual 6N. Gradient checkpointing's recompute (+2N·k/L) is not
counted (``plan.step_seconds`` counts it for a self-play trainer's step time).

The machine. On a GPU, F is the ``--gpu`` model's bf16 peak times the processes, B is infinite
and there is no per-step overhead (U_gen = ``plan.GEN_UTILISATION`` per generated token covers
decoding), U_train = ``plan.TRAIN_UTILISATION``: stated assumptions. On a CPU, ``measure_cpu_flops``
times one torch thread's 256² matrix product in float32 and, where a part runs in bf16, in
bfloat16 (a fraction of a second each) and multiplies by torch's threads; ``measure_cpu_bandwidth``
times the best of a few copies of a 64 MiB tensor (0.15 s). Which engine and precision each part
runs in (``cpu_lanes``): evals and engineer calls on ``generation.backend`` (vLLM where it names
vLLM), GRPO rollouts on TRL's colocated vLLM engine where ``trainer.use_vllm`` is true, else
transformers; transformers and training compute in bf16 where ``trainer.bf16`` resolves so
(``auto``: the CPU multiplies bf16 natively, AVX512-BF16 or AMX, as the trainers' precision
module decides), a vLLM engine in its ``generation.vllm_dtype`` (``auto``: the same test). The
utilisations U_row, U_train, U_warm and the per-step overheads are calibrated on measured runs
of the embedded SmolLM2-135M (their docstrings). On a CPU a decode step is overhead- or
memory-bound at one row and compute-bound at tens of rows: the step term is shared by the rows
of a call, the per-row term is not.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from curriculum.config import RunConfig
from curriculum.core.budget import PROMPT_TOKENS, WARMSTART_FILL, OwnSeconds, TrainingBudget, Work, generate_work
from curriculum.core.cpu import bf16_setting, cpu_vllm_dtype, native_cpu_bf16
from curriculum.registry import TESTBEDS, TRAINERS

__all__ = ["PROMPT_TOKENS", "WARMSTART_FILL", "Work", "generate_work", "Budget", "Model", "Rates", "Estimate",
           "Lane", "Lanes", "round_budget", "central_budget", "trainer_budget", "train_flops_per_token",
           "estimate", "cpu_lanes", "native_bf16", "measure_cpu_flops", "measure_cpu_bandwidth"]

Engine = Literal["transformers", "vllm"]
Precision = Literal["fp32", "bf16"]

# -- calibration (CPU) ------------------------------------------------------------------------------
STEP_OVERHEAD_S: dict[str, float] = {"transformers": 2.0e-3, "vllm": 0.8e-3}
"""Seconds per decoder layer of one decode step that do not shrink with the FLOP rate (kernel
dispatch, the key/value cache's bookkeeping, sampling), unless reading the weights takes longer.
Fitted on the 2-core AVX512-BF16 (d) machine (AMD family 26; bf16 GEMM 819 GFLOP/s on two threads
at 256²) with libgomp's default wait, as the CLI runs: ``make demo``'s run on transformers (bf16
autocast; its evals of 36 and 72 prompts and GRPO rounds, 3:56 wall) is estimated within 4 %
with 2.0 ms, the same demo on vLLM's CPU build in bf16 (2:14) within 10 % with 0.8 ms
(``benchmarks/estimate_check.py``; docs/scaling.md). ``benchmarks/grpo_step.py`` there: a sampled
decode step of 16 rows takes ~86 ms on transformers, ~26 ms on vLLM. The earlier fit, 3.0 and
1.6 ms, was taken with ``OMP_WAIT_POLICY=PASSIVE`` on the AVX512-BF16 (c) machine (transformers
116 ms a step at one row, vLLM 50 ms; docs/results.md, "Decoding per engine"); PASSIVE made the
same GRPO step 19-30 % slower on (d)."""
ROW_UTILISATION: dict[str, float] = {"transformers": 0.25, "vllm": 0.5}
"""Share of the measured matmul FLOP/s (the part's precision) that one more row of a decode step
reaches (2N FLOPs per generated token). transformers: 0.25 in float32 (a 184 GFLOP/s machine: 16
tokens/s at batch 1 and 75 at batch 8, 0.23; the 2-core AVX2 machine, 65-70 GFLOP/s: a greedy eval
of 36 rows x 128 tokens in 116 s, 0.26-0.28) and in bf16 autocast (AVX512-BF16 machine: 2.5-2.7 ms
per row at 16-48 rows against 412 GFLOP/s bf16 on two threads, 0.24). vLLM's CPU build: 1.4 ms
per row in bf16 there (0.47), 2.1 ms in fp32 against 208 GFLOP/s (0.62)."""
DECODE_FILL: dict[str, float] = {"transformers": 1.0, "vllm": 0.55}
"""Share of the counted generated tokens (every completion at its limit) an engine computes after
a warm start. transformers' ``generate`` keeps every row of a call until its last row ends and the
calls run to the limit (the demo's evals took 26-28 s whether completions averaged 128 tokens, the
model as shipped, or 61-80 after the warm start): 1. vLLM drops a finished row: the warm-started
135M model's completions averaged 64-77 of 128 tokens over the GRPO steps of the demo's two runs
and of cpu_learns' three (50-98 per step), and 58-80 in their evals: 0.55. The model as shipped
runs to the limit (its evals averaged 128 of 128), so the evals before a warm start count at 1."""
SAMPLED_DECODE = 1.2
"""Decode seconds of a sampled rollout (temperature > 0) per greedy decode second: the sampler's
softmax, top-p and draw over the vocabulary for every row. benchmarks/generation.py on the
AVX512-BF16 machine, GRPO prompts x 4 samples (T = 0.7) against greedy eval prompts, ms per step
at 1 / 16 / 48 rows: transformers 1.17 / 1.18 / 1.31, vLLM 1.28 / 1.06 / 1.19; the demo's GRPO
steps took 23-29 s where greedy decoding and the training pass come to 22.5 s."""
CPU_TRAIN_UTILISATION: dict[str, float] = {"fp32": 0.70, "bf16": 0.80}
"""Share of the measured matmul FLOP/s that a training forward and backward pass, and a prompt's
prefill, reaches on a CPU. fp32: ``make demo``'s warm-start step on the 2-core AVX2 machine (65-70
GFLOP/s): 8 x ~244 tokens at 2N + 4N·15/30 FLOPs per token in 21.1 s, 0.71-0.77; with every layer
trained (6N) in 29.4 s, 0.77-0.82 (docs/results.md, "How fast is each stage"). bf16: a GRPO step of
the demo on the AVX512-BF16 machine (448 GFLOP/s bf16 at 2048², 412 at 256² on two threads):
forward and backward of the kept rows of 16 in 4.6-5.0 s, TRL's no-grad scoring of all 16 in
4.3 s, 0.78-0.83 of the 256² rate, which large bf16 products exceed (2048²: 1.9x the 256² rate
there; float32's rate does not grow with the size)."""
CPU_WARMSTART_UTILISATION: dict[str, float] = {"fp32": 0.70, "bf16": 0.45}
"""The same for the supervised warm start (passes of 2 examples, TRL's SFT trainer). fp32: as
CPU_TRAIN_UTILISATION (its calibration is this warm start's step); SPADE's warm start in fp32 on the
AVX512-BF16 machine, 36 steps of 4 long examples in 263 s against 208 GFLOP/s: 0.83. bf16: the
demo's 64 steps x 8 examples in 365 s there (bf16 autocast, 412 GFLOP/s bf16 at 256² on two
threads): 0.42-0.45; its small products and TRL's per-token metrics gain less from bf16 than
GRPO's passes."""
ROUND_OVERHEAD_S = 20.0
"""Per round on a GPU (sampling, building the trainer, committing a checkpoint of billions of
parameters): an assumption."""
CPU_ROUND_OVERHEAD_S = 4.0
"""Per round on a CPU: sampling, building TRL's trainer, the vLLM weight push, committing and
saving the 135M checkpoint; the demo's rounds less their training and evals: 1.4-4 s; cpu_learns'
(vLLM) 3-6 s."""
SETUP_S = 5.0
"""Once per run: importing, building the plugins, loading the model (4.5 s for the demo's 135M
model, its evals before round 0 reused from the eval cache)."""
VLLM_START_S = 15.0
"""Once per run that decodes on vLLM's CPU build: the engine's start-up, 5-23 s (``enforce_eager``,
docs/results.md, "Decoding per engine")."""
VLLM_MAX_ROWS = 256
"""Rows one vLLM engine schedules at once (``max_num_seqs``): an eval is one call of its prompts."""
SIMULATED_ROUND_S = 2.0
"""Per round without a model (the simulated learner): sampling, scoring and eval by the validator."""
DEFAULT_LAYERS = 30
"""Decoder layers where the model's depth is unknown (for the per-step overhead)."""


# -- what the estimate is made of ----------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """Token counts of one round's parts, of one eval per suite, of the warm start, and which
    evals run outside the rounds. ``round`` and ``once`` (properties) are the sums per round and
    outside the rounds."""

    train: Work = Work()
    """The trainer's rollouts and training (``Trainer.training_budget``)."""
    eval: Work = Work()
    """One eval on the validation suite (after each round, and before round 0)."""
    test_suite: Work = Work()
    """One eval on the test suite (``Work()`` where the testbed has none)."""
    design: Work = Work()
    """The engineer's model calls, averaged over the rounds (the last round designs nothing)."""
    warmstart: Work = Work()
    """The supervised warm start (skipped when cached)."""
    baseline_evals: int = 0
    """1: the model as shipped is evaluated on both suites before round 0 (``eval_before_training``)."""
    prepared_evals: int = 0
    """1: again after the warm start."""
    test_every_round: bool = False
    """The test suite after every round; otherwise after the last one only."""
    own: OwnSeconds | None = None
    """Seconds the trainer states itself instead of token counts (``TrainingBudget.own_seconds``)."""

    @property
    def test(self) -> Work:
        """The test suite's work in each round."""
        return self.test_suite if self.test_every_round else Work()

    @property
    def round(self) -> Work:
        return self.train + self.eval + self.test + self.design

    @property
    def once(self) -> Work:
        final = Work() if self.test_every_round else self.test_suite
        return (self.eval + self.test_suite).times(self.baseline_evals + self.prepared_evals) + final


@dataclass(frozen=True)
class Model:
    """What the estimate needs of the model: parameters N (active ones for a mixture of experts),
    decoder layers L (``None``: unknown) and the bytes of its weights (``model.dtype``), read once
    per decode step."""

    params: int
    layers: int | None
    weight_bytes: float
    total_params: int | None = None
    """Every parameter (a vLLM engine's weights in its own dtype); ``None``: ``params``."""

    def engine_bytes(self, lane: Lane) -> float:
        """The weights one decode step reads: transformers' in ``model.dtype`` (bf16 autocast
        keeps fp32 weights), a vLLM engine's in its dtype."""
        if lane.engine != "vllm":
            return self.weight_bytes
        return (self.total_params or self.params) * (2 if lane.precision == "bf16" else 4)


@dataclass(frozen=True)
class Lane:
    """Where a part of the work runs on a CPU: its decode engine and its precision."""

    engine: Engine = "transformers"
    precision: Precision = "fp32"
    sampled: bool = False
    """Rows are sampled (temperature > 0), not greedy: SAMPLED_DECODE."""


@dataclass(frozen=True)
class Lanes:
    """The lanes of a run's parts (``cpu_lanes``): evals and engineer calls, the trainer's rollouts,
    and training passes (and prefill outside an engine)."""

    eval: Lane = Lane()
    rollout: Lane = Lane()
    train: Precision = "fp32"

    @property
    def uses_vllm(self) -> bool:
        return "vllm" in (self.eval.engine, self.rollout.engine)

    @property
    def precisions(self) -> set[str]:
        return {self.eval.precision, self.rollout.precision, self.train}


@dataclass(frozen=True)
class Rates:
    """The machine: FLOP/s F (float32 on a CPU; ``bf16_flops`` where a part runs in bf16), memory
    bandwidth B (``math.inf``: no per-step term) and the utilisations (module docstring). On a GPU
    ``gen_utilisation`` is the share of peak per generated token and ``step_overhead_s`` is 0."""

    flops: float
    bandwidth: float
    gen_utilisation: float
    train_utilisation: float
    bf16_flops: float | None = None
    step_overhead_s: float = 0.0
    """Per decoder layer and decode step (CPU: ``STEP_OVERHEAD_S``; GPU: none)."""
    warm_utilisation: float | None = None
    """The warm start's utilisation (default: ``train_utilisation``)."""
    round_overhead_s: float = ROUND_OVERHEAD_S
    setup_s: float = 0.0
    """Once per run (CPU: SETUP_S)."""
    engine_start_s: float = 0.0
    """Once per run that decodes on this engine (CPU vLLM: VLLM_START_S)."""
    bf16_train_utilisation: float | None = None
    """Training and prefill in bf16 (default: ``train_utilisation``)."""
    bf16_warm_utilisation: float | None = None
    """The warm start in bf16 (default: ``warm_utilisation``)."""

    def rate(self, precision: str) -> float:
        """The matmul FLOP/s in ``precision``."""
        return self.bf16_flops if precision == "bf16" and self.bf16_flops else self.flops

    def pass_rate(self, precision: str, warm: bool = False) -> float:
        """FLOP/s of a training or prefill pass in ``precision`` (``warm``: the warm start's)."""
        bf16 = precision == "bf16" and self.bf16_flops is not None
        train = (self.bf16_train_utilisation if bf16 else None) or self.train_utilisation
        utilisation = ((self.bf16_warm_utilisation if bf16 else None) or self.warm_utilisation or train) if warm \
            else train
        return utilisation * self.rate(precision)


@dataclass(frozen=True)
class Estimate:
    """Seconds for the run, per round and for the warm start; ``phases``: the run's seconds per
    part (``PHASES``: ``setup``, the evals before round 0 as the run's metrics name them, the
    rounds' ``train``, ``eval``, ``test_eval``, ``design`` and ``overhead`` summed over the rounds,
    ``final_test`` after the last), what ``benchmarks/estimate_check.py`` sets beside a run's
    measured ones; ``upper_seconds``: the run with every count at its limit."""

    round_seconds: float
    total_seconds: float
    warmstart_seconds: float
    budget: Budget
    note: str
    phases: dict[str, float] = field(default_factory=dict)
    upper_seconds: float | None = None

    def line(self) -> str:
        upper = (f"at most {_human(self.upper_seconds)} with every prompt and completion at its count; "
                 if self.upper_seconds is not None and _human(self.upper_seconds) != _human(self.total_seconds)
                 else "")
        warm = (f"+ {_human(self.warmstart_seconds)} warm start unless cached; "
                if self.budget.warmstart.trained else "")
        r = self.budget.round
        return (f"  estimated wall time on this machine: {_human(self.total_seconds)} "
                f"({upper}{warm}{_human(self.round_seconds)} per round; {r.generated:,} generated tokens in "
                f"{r.decode_steps:,} decode steps, {r.trained:,} trained tokens per round at most; {self.note})")


# -- the machine ---------------------------------------------------------------------------------------
def measure_cpu_flops(size: int = 256, repeats: int = 20, dtype: str = "float32") -> float:
    """FLOP/s of torch's CPU matrix product in ``dtype`` (``float32`` or ``bfloat16``) on this
    machine: one thread's best of ``repeats`` (a multi-threaded probe swings tenfold on a shared
    machine; at 256² the best of 20 held within 2 % at a load of 7 on 2 cores), times the threads
    torch will use."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(size, size).to(getattr(torch, dtype))
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            a @ a
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return threads * 2 * size**3 / max(best, 1e-9)


def measure_cpu_bandwidth(mib: int = 64, repeats: int = 20) -> float:
    """Memory bytes/s of this machine: the best of ``repeats`` copies of a ``mib`` MiB float32
    tensor with torch's threads, counting the bytes read and written (0.2-0.3 s on this project's
    2-core machine). 64 MiB each way is well above a
    CPU's last-level cache share (8 MiB on that machine), as a decode step's weights are; the best
    copy, as in ``measure_cpu_flops``, is the machine's rate without the other jobs' share (on a
    busy machine it still reads several times low; a small model's decode step is overhead-bound,
    ``STEP_OVERHEAD_S``, so its estimate does not move with it)."""
    import torch

    src = torch.ones(mib * 2**20 // 4)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() * 4 / max(best, 1e-9)


@functools.cache
def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX, with oneDNN): the test of the
    trainers' ``native_bf16("cpu")``, which ``trainer.bf16: auto`` and ``vllm_dtype: auto`` take
    (the controller does not import the trainers)."""
    return native_cpu_bf16()


def cpu_lanes(config: RunConfig, native: bool | None = None) -> Lanes:
    """Which engine and precision each part of ``config``'s run takes on a CPU (module docstring);
    ``native``: whether the CPU multiplies bf16 natively (default: this one)."""
    native = native_bf16() if native is None else native
    trainer, generation = config.trainer, config.generation
    train: Precision = "bf16" if bf16_setting(getattr(trainer, "bf16", False), native) else "fp32"
    engine_precision: Precision = "fp32" if cpu_vllm_dtype(generation.vllm_dtype, native) == "float32" else "bf16"
    eval_lane = Lane("vllm", engine_precision) if generation.backend == "vllm" else Lane("transformers", train)
    colocated = getattr(trainer, "use_vllm", False) is True
    sampled = float(getattr(trainer, "temperature", 0.0) or 0.0) > 0
    rollout = Lane("vllm", engine_precision, sampled) if colocated else Lane("transformers", train, sampled)
    return Lanes(eval_lane, rollout, train)


# -- token counts ------------------------------------------------------------------------------------
def round_budget(config: RunConfig, eval_prompts: int, eval_tokens: int,
                 design: tuple[int, int, int] = (0, 0, 0), test: tuple[int, int] | None = None,
                 eval_batch: int | None = None) -> Budget:
    """Token counts of one round's parts, of the evals outside the rounds and of the warm start of
    ``config`` (module docstring); ``design``: the engineer's (calls, prompt tokens, new tokens),
    averaged over the rounds that design; the trainer's part: ``Trainer.training_budget``;
    ``test``: (prompts, new tokens) of the testbed's test suite, ``None`` where it has none;
    ``eval_batch``: rows of one eval call (default ``generation.batch_size``; a vLLM engine
    takes every prompt at once)."""
    trainer = trainer_budget(config)
    batch = eval_batch or config.generation.batch_size
    evaluation = generate_work(eval_prompts, eval_tokens, batch)
    testing = generate_work(*test, batch) if test is not None else Work()
    share = (config.rounds - 1) / config.rounds if config.rounds else 0.0  # the last round has no design call
    calls, prompt, new = design
    designing = Work(generated=round(share * calls * new), decode_steps=round(share * calls * new),
                     prefilled=round(share * calls * prompt))  # one row per call
    before = int(config.eval_before_training)  # each on both suites
    if trainer.own_seconds is not None:  # a trainer that prices itself (the small learner)
        return Budget(eval=evaluation, test_suite=testing, design=designing, baseline_evals=before,
                      prepared_evals=before * (trainer.evals_before_training - 1),
                      test_every_round=config.test_every_round, own=trainer.own_seconds)
    if not trainer.trains_model:  # a trainer without a model (the simulated learner)
        return Budget(eval=evaluation, design=designing)
    return Budget(train=trainer.round, eval=evaluation, test_suite=testing, design=designing,
                  warmstart=trainer.warmstart, baseline_evals=before,
                  prepared_evals=before * (trainer.evals_before_training - 1),
                  test_every_round=config.test_every_round)


def trainer_budget(config: RunConfig) -> TrainingBudget:
    """What the run's trainer says one round costs (``Trainer.training_budget``, from the config alone)."""
    return TRAINERS.get(config.trainer.name).load().training_budget(config)


def central_budget(config: RunConfig, budget: Budget, lanes: Lanes, *, as_shipped: bool = False) -> Budget:
    """What a run computes of ``budget``'s counts (module docstring: prompts at the testbed's
    ``prompt_share``, a vLLM engine's rows at DECODE_FILL, GRPO's padded and kept rows);
    ``as_shipped``: the evals of the model as shipped, which run to the limit."""
    fill = 1.0 if as_shipped else DECODE_FILL[lanes.eval.engine]
    testbed = TESTBEDS.get(config.testbed.name).load()
    answers = 1.0 if as_shipped else testbed.eval_answer_fill
    prompt = testbed.prompt_share

    def evals(work: Work) -> Work:
        return Work(generated=round(work.generated * fill * answers), decode_steps=round(work.decode_steps * answers),
                    prefilled=round(work.prefilled * prompt), trained=work.trained)

    train = budget.train
    trainer = TRAINERS.get(config.trainer.name).load()
    if (share := trainer.central_round_share) is not None:
        train = Work(*(round(share * x) for x in (train.generated, train.decode_steps, train.prefilled, train.trained)))
    elif (central := trainer.central_training(config)) is not None:
        limit = config.trainer.max_completion_length
        padded = (prompt * PROMPT_TOKENS + central.longest_completion * limit) / (PROMPT_TOKENS + limit)
        train = Work(generated=round(train.generated * DECODE_FILL[lanes.rollout.engine]),
                     decode_steps=train.decode_steps,
                     prefilled=round(train.prefilled * prompt),
                     trained=round(train.trained * padded * central.kept_rows))
    return replace(budget, train=train, eval=evals(budget.eval), test_suite=evals(budget.test_suite),
                   design=evals(budget.design))


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


def work_seconds(work: Work, train_flops: float, model: Model, rates: Rates, lane: Lane = Lane(),
                 train: Precision = "fp32", warm: bool = False) -> float:
    """Decode, prefill and training seconds of ``work`` (module docstring): decoding and prefill on
    ``lane``, training in ``train``'s precision (``warm``: at the warm start's utilisation)."""
    n = model.params
    steps = 0.0
    if work.decode_steps:
        overhead = (model.layers or DEFAULT_LAYERS) * rates.step_overhead_s
        steps = work.decode_steps * max(model.engine_bytes(lane) / rates.bandwidth, overhead)
    rows = 2 * n * work.generated / (rates.gen_utilisation * rates.rate(lane.precision))
    if lane.sampled:
        steps, rows = steps * SAMPLED_DECODE, rows * SAMPLED_DECODE
    prefill = 2 * n * work.prefilled / rates.pass_rate(lane.precision)
    training = train_flops * work.trained / rates.pass_rate(train, warm)
    return steps + rows + prefill + training


def estimate(config: RunConfig, budget: Budget, model: Model | None, rates: Rates | dict[Engine, Rates], *,
             gpu: bool, lanes: Lanes = Lanes(), central: bool = True) -> Estimate:
    """Seconds per round, for the run and for the warm start (module docstring); ``model``
    ``None``: no model trained, or its size unknown (a fixed time per round). ``rates``: one for
    every engine, or per engine (a vLLM engine decodes at its own utilisation and overhead);
    ``central``: the central estimate (``central_budget``) beside the upper bound."""
    if budget.own is not None:
        return _own_estimate(config, budget, budget.own)
    if model is None:
        phases = {**dict.fromkeys(PHASES, 0.0), "overhead": SIMULATED_ROUND_S * config.rounds}
        return Estimate(SIMULATED_ROUND_S, SIMULATED_ROUND_S * config.rounds, 0.0, Budget(train=budget.round),
                        "no model trained or size unknown: fixed per-round time only", phases)
    per_engine = rates if isinstance(rates, dict) else {"transformers": rates, "vllm": rates}
    upper = _phases(config, budget, budget, model, per_engine, lanes)
    phases = _phases(config, central_budget(config, budget, lanes),
                     central_budget(config, budget, lanes, as_shipped=True), model, per_engine, lanes) \
        if central else upper
    base = per_engine["transformers"]
    warm = work_seconds(budget.warmstart, train_flops_per_token(config, model), model, base,
                        train=lanes.train, warm=True)
    per_round = sum(phases[k] for k in ROUND_PHASES) / max(config.rounds, 1)
    calibrated = central and not math.isclose(sum(phases.values()), sum(upper.values()))
    return Estimate(per_round, sum(phases.values()), warm, budget, _note(config, base, lanes, gpu, calibrated),
                    phases, sum(upper.values()) if central else None)


def _own_estimate(config: RunConfig, budget: Budget, own: OwnSeconds) -> Estimate:
    """The estimate of a trainer that states its own seconds (``OwnSeconds``): its parts in the
    run's order. The engineer's model calls are not priced (no model of the trainer's to price
    them with)."""
    rounds = config.rounds
    test = own.test_eval if budget.test_every_round else 0.0
    phases = {"setup": own.setup,
              "baseline_eval": budget.baseline_evals * own.eval,
              "baseline_test_eval": budget.baseline_evals * own.test_eval,
              "warmstart_eval": budget.prepared_evals * own.eval,
              "warmstart_test_eval": budget.prepared_evals * own.test_eval,
              "train": rounds * own.round, "eval": rounds * own.eval, "test_eval": rounds * test,
              "design": 0.0, "overhead": rounds * own.overhead,
              "final_test": 0.0 if budget.test_every_round else own.test_eval}
    per_round = sum(phases[k] for k in ROUND_PHASES) / max(rounds, 1)
    note = ("the trainer's own measured rates (its steps are overhead-bound, not priced by FLOPs); "
            "an engineer's model calls not counted")
    return Estimate(per_round, sum(phases.values()), own.warmstart, budget, note, phases)


def _phases(config: RunConfig, budget: Budget, shipped: Budget, model: Model, rates: dict[Engine, Rates],
            lanes: Lanes) -> dict[str, float]:
    """The run's seconds per part (``Estimate.phases``); ``shipped``: the counts of the evals of the
    model as shipped."""
    flops = train_flops_per_token(config, model)

    def seconds(work: Work, lane: Lane = lanes.eval) -> float:
        return work_seconds(work, flops, model, rates[lane.engine], lane, lanes.train)

    rounds, base = config.rounds, rates["transformers"]
    setup = base.setup_s + (rates["vllm"].engine_start_s if lanes.uses_vllm else 0.0)
    return {"setup": setup,
            "baseline_eval": budget.baseline_evals * seconds(shipped.eval),
            "baseline_test_eval": budget.baseline_evals * seconds(shipped.test_suite),
            "warmstart_eval": budget.prepared_evals * seconds(budget.eval),
            "warmstart_test_eval": budget.prepared_evals * seconds(budget.test_suite),
            "train": rounds * seconds(budget.train, lanes.rollout),
            "eval": rounds * seconds(budget.eval),
            "test_eval": rounds * seconds(budget.test),
            "design": rounds * seconds(budget.design),
            "overhead": rounds * base.round_overhead_s,
            "final_test": 0.0 if budget.test_every_round else seconds(budget.test_suite)}


ROUND_PHASES = ("train", "eval", "test_eval", "design", "overhead")
"""``Estimate.phases`` that every round repeats (their sum over the rounds is ``round_seconds``)."""
PHASES = ("setup", "baseline_eval", "baseline_test_eval", "warmstart_eval", "warmstart_test_eval",
          *ROUND_PHASES, "final_test")
"""Every part of ``Estimate.phases``, in the order a run goes through them."""


def _note(config: RunConfig, base: Rates, lanes: Lanes, gpu: bool, central: bool) -> str:
    if gpu:
        where = (f"GPU peak {base.flops / 1e9:,.0f} GFLOP/s at {base.gen_utilisation:.0%} generating, "
                 f"{base.train_utilisation:.0%} training")
    else:
        bf16 = f", bf16 {base.bf16_flops / 1e9:,.0f}" if base.bf16_flops and "bf16" in lanes.precisions else ""
        where = (f"measured CPU matmul fp32 {base.flops / 1e9:,.0f}{bf16} GFLOP/s, memory "
                 f"{base.bandwidth / 1e9:,.0f} GB/s; evals on {lanes.eval.engine} {lanes.eval.precision}, "
                 f"rollouts on {lanes.rollout.engine} {lanes.rollout.precision}, training in {lanes.train}")
    counted = ("central: prompts, fills and trained rows as measured (docs/scaling.md)" if central
               else f"every prompt at {PROMPT_TOKENS} tokens, every completion at its limit, an upper bound"
               + ("" if gpu else f" (no measured shares for {config.trainer.name} on {config.testbed.name})"))
    return f"{where}; {counted}"


def _human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def describe_lanes(lanes: Lanes) -> dict[str, Any]:
    """``lanes`` as plain data (for ``benchmarks/estimate_check.py``'s output)."""
    return {"eval": f"{lanes.eval.engine} {lanes.eval.precision}",
            "rollout": f"{lanes.rollout.engine} {lanes.rollout.precision}",
            "train": lanes.train}
