"""``--dry-run``'s numbers for the GRPO trainers, from the config alone (nothing loaded).

``GRPOTrainerAdapter`` and ``SelfPlayTrainer`` answer the controller's plan questions with these
(``Trainer.training_budget``, ``Trainer.plan_lines``):

* GRPO: one generate call of ``prompts_per_step x num_generations`` rows per optimizer step, each
  prompt prefilled once for its samples; trained tokens are samples x (``PROMPT_TOKENS`` + the
  completion limit); the supervised warm start is ``steps x batch_size`` examples of
  ``WARMSTART_FILL x (PROMPT_TOKENS + completion limit)`` tokens, cut at ``max_length``.
* SPADE self-play: one rollout step per round (``SpadeStep``: its designs and episodes at their
  token limits), its memory per GPU (``GPUPlan``: the accounting of ``curriculum.core.sizing``
  plus a colocated vLLM engine) and its step time from the FLOP floor (the formulas:
  ``curriculum.plan``'s module docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from curriculum.core.budget import PROMPT_TOKENS, WARMSTART_FILL, PaddedTraining, TrainingBudget, Work, generate_work
from curriculum.core.sizing import (GEN_UTILISATION, GIB, GPU, OVERHEAD_GIB, TRAIN_UTILISATION, ModelShape,
                                    PlanTarget, Strategy, activation_gib, kv_cache_gib, memory_per_gpu_gb,
                                    model_shape, parameter_count, state_memory_gib)


# -- GRPO ----------------------------------------------------------------------------------------------
GRPO_LONGEST_COMPLETION = 0.92
"""The longest completion of a GRPO step per completion limit: TRL pads a step's rows to it (and
to the step's longest prompt, 179-195 tokens in the demo's steps of 4 prompts). 113-127 of 128 on
average over the GRPO steps of the demo's two runs and of cpu_learns' three."""
GRPO_KEPT_ROWS = 0.6
"""Rows of a GRPO step that run a backward pass with ``skip_zero_advantage``: the rows of groups
without reward spread are dropped, one row kept of a micro-batch that had no other. Share of
groups without spread per round: 0.25-0.50 in the demo's two runs (micro-batches of one group of
4), 0.47-0.69 in cpu_learns' three (half a group of 8): 0.48-0.81 of the rows train."""


def grpo_central_training(config: Any) -> PaddedTraining:
    """What a GRPO step computes of its counted rows on a CPU (``Trainer.central_training``): rows
    padded to the step's longest completion; with ``skip_zero_advantage``, GRPO_KEPT_ROWS of them
    train."""
    return PaddedTraining(GRPO_LONGEST_COMPLETION, GRPO_KEPT_ROWS if config.trainer.skip_zero_advantage else 1.0)


def grpo_budget(config: Any, round_work: Work | None = None) -> TrainingBudget:
    """A GRPO trainer's round (``round_work``, default ``grpo_round_work``), warm start and evals
    before round 0."""
    trainer = config.trainer
    return TrainingBudget(trains_model=True, round=grpo_round_work(config) if round_work is None else round_work,
                          warmstart=warmstart_work(config), reference_model=trainer.beta > 0,
                          evals_before_training=2 if trainer.warmstart.steps else 1)


def grpo_round_work(config: Any) -> Work:
    """One round's rollouts and training: GRPO's optimizer steps."""
    trainer = config.trainer
    steps = trainer.max_steps_per_round or math.ceil(config.tasks_per_round * trainer.epochs_per_round
                                                     / trainer.prompts_per_step)
    rows = trainer.prompts_per_step * trainer.num_generations  # one generate call per optimizer step
    rollouts = generate_work(steps * rows, trainer.max_completion_length, rows)
    # A prompt is prefilled once for its num_generations samples (trainers/lm/generation's
    # share_prompt_prefill; vLLM's prefix cache on a GPU).
    rollouts = replace(rollouts, prefilled=steps * trainer.prompts_per_step * PROMPT_TOKENS)
    return rollouts + Work(trained=steps * rows * (PROMPT_TOKENS + trainer.max_completion_length))


def warmstart_work(config: Any) -> Work:
    """The supervised warm start: ``steps x batch_size`` examples of WARMSTART_FILL x (PROMPT_TOKENS
    + the completion limit) tokens, cut at ``max_length``; no work without a warm start."""
    trainer = config.trainer
    if not trainer.warmstart.steps:
        return Work()
    warm = trainer.warmstart
    tokens = round(WARMSTART_FILL * (PROMPT_TOKENS + trainer.max_completion_length))
    if warm.max_length is not None:
        tokens = min(tokens, warm.max_length)
    return Work(trained=warm.steps * warm.batch_size * tokens)


def grpo_plan_lines(config: Any, target: PlanTarget) -> list[str]:
    """The GRPO trainer's plan: steps, prompts and samples per round, and memory per GPU."""
    strategy = target.strategy
    trainer = config.trainer
    steps = trainer.max_steps_per_round or math.ceil(
        config.tasks_per_round * trainer.epochs_per_round / trainer.prompts_per_step)
    prompts = steps * trainer.prompts_per_step
    samples = prompts * trainer.num_generations
    lines = [f"  optimizer steps per round: {steps}   prompts per round: {prompts}   samples per round: {samples}",
             f"  completion token budget per round: {samples * trainer.max_completion_length:,} "
             f"(max {trainer.max_completion_length} per sample)"]
    params = parameter_count(config.model.name_or_path)
    if params is None:
        return lines + ["  memory: unknown parameter count (no local config.json, no size in the name)"]
    lora = config.model.lora is not None
    gb = memory_per_gpu_gb(params, strategy, bf16=trainer.bf16 or config.model.dtype == "bfloat16",
                           reference=trainer.beta > 0 and not lora)
    note = " (full fine-tuning accounting; LoRA needs far less)" if lora else ""
    lines.append(f"  parameters: {params / 1e9:.2f}B   estimated training memory per GPU: {gb:.1f} GiB"
                 f"{note}, plus activations")
    if colocated_vllm(config):
        when = " (use_vllm=auto: only where vllm and a GPU are present)" if trainer.use_vllm == "auto" else ""
        lines.append(f"  colocated vLLM engine: {trainer.vllm_gpu_memory_utilization:.0%} of each GPU "
                     f"(weights {2 * params / GIB:.1f} GiB + KV cache){when}")
    return lines


# -- SPADE self-play ---------------------------------------------------------------------------------
def selfplay_round_work(config: Any) -> Work:
    """One round of SPADE co-training: one rollout step (its designs, episodes and update)."""
    trainer = config.trainer
    step = spade_step(config)
    play = trainer.play
    designs = generate_work(step.designs, step.design_tokens, config.generation.batch_size,
                            step.design_prompt_tokens)
    batch = play.batch_size or trainer.micro_batch_size
    episode_calls = math.ceil(step.episodes / batch) + math.ceil(step.heldout_episodes / batch)
    played = step.episodes + step.heldout_episodes  # the held-out games are played apart, after the update
    episodes = Work(generated=played * step.episode_tokens,
                    decode_steps=episode_calls * play.max_turns * play.max_new_tokens_per_turn,
                    prefilled=played * step.episode_prompt_tokens)
    return designs + episodes + Work(trained=step.trained_tokens)


@dataclass(frozen=True)
class SpadeStep:
    """Token budget of one SPADE rollout step (upper bounds: every turn at its token limit)."""

    designs: int
    design_prompt_tokens: int
    design_tokens: int
    play_envs: int
    episodes: int
    episode_prompt_tokens: int
    episode_tokens: int
    agent_rows: int
    designer_rows: int
    heldout_episodes: int = 0
    """Unhinted episodes of the held-out games (``trainer.heldout_games``), never trained on."""

    @property
    def generated_tokens(self) -> int:
        return self.designs * (self.design_prompt_tokens + self.design_tokens) + \
            (self.episodes + self.heldout_episodes) * (self.episode_prompt_tokens + self.episode_tokens)

    @property
    def trained_tokens(self) -> int:
        return self.agent_rows * (self.episode_prompt_tokens + self.episode_tokens) + \
            self.designer_rows * (self.design_prompt_tokens + self.design_tokens)

    @property
    def longest_row(self) -> int:
        return max(self.episode_prompt_tokens + self.episode_tokens, self.design_prompt_tokens + self.design_tokens)


DESIGN_TEMPLATE_TOKENS = 1500
"""Design prompt without its document and memory excerpts (``engineers/spade/prompts.py``, measured
with the Qwen3 tokenizer to the nearest few hundred)."""
EPISODE_PROMPT_TOKENS = 512
"""System instruction plus a first observation (tool schemas included), a round figure."""


def spade_step(config: Any) -> SpadeStep:
    trainer, engineer = config.trainer, config.engineer
    play = trainer.play
    designs = int(getattr(engineer, "designs_per_round", 0) or 0)
    if getattr(engineer, "frozen_pool", None) is not None:
        designs = 0  # the pool is designed once, before round 0: no design calls per step
    corpus = getattr(engineer, "corpus", None)
    doc_tokens = getattr(corpus, "max_doc_chars", 0) // 4
    memory = getattr(engineer, "memory", None)
    seed_tokens = (getattr(memory, "seeds_in_prompt", 0) * getattr(memory, "max_seed_chars", 0)) // 4
    design_tokens = int(getattr(engineer, "max_new_tokens", None) or config.generation.engineer_max_new_tokens
                        or trainer.max_completion_length)
    envs = trainer.pool.envs_per_step
    G = play.episodes_per_condition
    return SpadeStep(
        designs=designs, design_prompt_tokens=DESIGN_TEMPLATE_TOKENS + doc_tokens + seed_tokens,
        design_tokens=design_tokens, play_envs=envs, episodes=2 * G * envs,
        episode_prompt_tokens=EPISODE_PROMPT_TOKENS, episode_tokens=play.max_episode_tokens,
        agent_rows=G * envs * (2 if trainer.train_on_hinted else 1),
        designer_rows=designs if getattr(engineer, "designer", "policy") == "policy" else 0,
        heldout_episodes=trainer.heldout_count() * trainer.heldout_episodes)


def step_seconds(step: SpadeStep, shape: ModelShape, gpu: GPU, processes: int, *, checkpointing: bool,
                 reference: bool) -> tuple[float, float]:
    """(FLOP floor, estimate) of one rollout step in seconds (module docstring)."""
    peak = max(processes, 1) * gpu.bf16_tflops * 1e12
    gen = 2 * shape.active_params * step.generated_tokens
    train = (6 + 2 * checkpointing + 2 * reference) * shape.active_params * step.trained_tokens
    return (gen + train) / peak, gen / (peak * GEN_UTILISATION) + train / (peak * TRAIN_UTILISATION)


@dataclass(frozen=True)
class GPUPlan:
    """Per-GPU memory of a training set-up, in GiB."""

    parts: dict[str, float]
    vllm_share: float
    vllm_needs: float
    gpu: GPU
    processes: int = 1
    vllm_tp: int = 1

    @property
    def total(self) -> float:
        return sum(self.parts.values()) + self.vllm_share + OVERHEAD_GIB

    def problems(self) -> list[str]:
        out = []
        if self.total > self.gpu.memory_gib:
            out.append(f"needs {self.total:.1f} GiB per GPU, the {self.gpu.name} has {self.gpu.memory_gib:.0f}")
        if self.vllm_share and self.processes % self.vllm_tp:
            out.append(f"vllm_tensor_parallel_size {self.vllm_tp} does not divide the {self.processes} processes")
        if self.vllm_share and self.vllm_needs > self.vllm_share:
            out.append(f"the colocated vLLM share ({self.vllm_share:.1f} GiB) cannot hold its weights and one "
                       f"longest sequence's KV cache ({self.vllm_needs:.1f} GiB)")
        return out


def gpu_plan(config: Any, shape: ModelShape, strategy: Strategy, gpu: GPU, longest: int) -> GPUPlan:
    """Memory per GPU of a ``selfplay`` run whose longest row has ``longest`` tokens."""
    trainer = config.trainer
    lora = config.model.lora is not None
    bf16 = trainer.bf16 or config.model.dtype == "bfloat16"
    parts = state_memory_gib(shape.params, strategy, bf16=bf16, reference=trainer.beta > 0 and not lora)
    parts["activations"] = activation_gib(shape, trainer.micro_batch_size * longest,
                                          checkpointing=trainer.gradient_checkpointing)
    share = needs = 0.0
    tp = trainer.vllm_tensor_parallel_size
    if colocated_vllm(config):
        share = trainer.vllm_gpu_memory_utilization * gpu.memory_gib
        needs = 2 * shape.params / tp / GIB + kv_cache_gib(shape, longest) / tp + 1.0
    return GPUPlan(parts, share, needs, gpu, strategy.processes, tp)


def colocated_vllm(config: Any) -> bool:
    trainer = config.trainer
    return trainer.use_vllm is not False and trainer.vllm_mode == "colocate"


def suggest(config: Any, shape: ModelShape, target: PlanTarget, longest: int) -> str | None:
    """The first shipped accelerate config, vLLM tensor-parallel size and vLLM share that fit."""
    trainer, gpu = config.trainer, target.gpu
    for rel, strategy in target.candidates():
        if not colocated_vllm(config):
            if not gpu_plan(config, shape, strategy, gpu, longest).problems():
                return f"--accelerate-config {rel}"
            continue
        sizes = [trainer.vllm_tensor_parallel_size] + [t for t in (1, 2, 4, 8) if t != trainer.vllm_tensor_parallel_size]
        for tp in (t for t in sizes if strategy.processes % t == 0):
            trial = config.model_copy(update={"trainer": trainer.model_copy(update={"vllm_tensor_parallel_size": tp})})
            plan = gpu_plan(trial, shape, strategy, gpu, longest)
            free = gpu.memory_gib - (plan.total - plan.vllm_share)
            util = min(trainer.vllm_gpu_memory_utilization, math.floor(free / gpu.memory_gib * 100) / 100)
            if util * gpu.memory_gib < plan.vllm_needs:
                continue
            sets = [f"--set trainer.vllm_tensor_parallel_size={tp}"] if tp != trainer.vllm_tensor_parallel_size else []
            if util != trainer.vllm_gpu_memory_utilization:
                sets.append(f"--set trainer.vllm_gpu_memory_utilization={util:.2f}")
            return " ".join([f"--accelerate-config {rel}", *sets])
    return None


def _groups(config: Any, strategy: Strategy) -> int:
    """Generation groups: ranks that share one colocated vLLM engine play the same environments."""
    tp = config.trainer.vllm_tensor_parallel_size if colocated_vllm(config) else 1
    return max(strategy.processes // tp, 1)


def _memory_lines(config: Any, plan: GPUPlan, longest: int) -> list[str]:
    trainer = config.trainer
    p = plan.parts
    lines = ["  estimated training memory per GPU (GiB):",
             f"    weights {p['weights']:.1f} · gradients {p['gradients']:.1f} · optimizer {p['optimizer']:.1f}"
             f" · reference {p['reference']:.1f}",
             f"    activations {p['activations']:.1f} ({trainer.micro_batch_size} row(s) x {longest:,} tokens"
             f"{', gradient checkpointing' if trainer.gradient_checkpointing else ''})"]
    if plan.vllm_share:
        lines.append(f"    vLLM share {plan.vllm_share:.1f} ({trainer.vllm_gpu_memory_utilization:.0%}; needs >= "
                     f"{plan.vllm_needs:.1f}: weights over TP {trainer.vllm_tensor_parallel_size} + KV cache)")
    else:
        lines.append("    vLLM: not on the training GPUs" if trainer.use_vllm is not False else "    vLLM: off")
    lines.append(f"    overhead {OVERHEAD_GIB:.1f} -> total {plan.total:.1f} of {plan.gpu.memory_gib:.0f}")
    return lines


def selfplay_plan_lines(config: Any, target: PlanTarget) -> list[str]:
    """The self-play trainer's plan: one rollout step's token budget, memory per GPU, step time,
    whether it fits and, if not, a shipped set-up that does."""
    strategy, gpu = target.strategy, target.gpu
    step = spade_step(config)
    trainer = config.trainer
    G = trainer.play.episodes_per_condition
    lines = [
        "  per rollout step (one round):",
        f"    {step.designs} design calls (<= {step.design_tokens:,} tokens each)",
        f"    {step.play_envs} environments x (G={G} plain + G hinted) = {step.episodes} episodes"
        f" (<= {step.episode_tokens:,} tokens, {trainer.play.max_turns} turns)",
        f"    one GRPO update: {step.agent_rows} agent + {step.designer_rows} designer rows"
        f" (designs train {trainer.designer_delay} steps later)",
        *([f"    held-out games: {trainer.heldout_count()} x {trainer.heldout_episodes} unhinted episodes"
           " after the update (the player's skill curve; never trained on)"] if step.heldout_episodes else []),
        f"    tokens: generated <= {step.generated_tokens:,}, trained <= {step.trained_tokens:,}",
        f"  sharding: designs and plays over {_groups(config, strategy)} group(s) of processes, each rank with its"
        " own sandbox pool; rows gathered into one update",
    ]
    shape = model_shape(config.model.name_or_path)
    if shape is None:
        return lines + ["  memory: unknown model shape (not a known model, no local config.json)"]
    plan = gpu_plan(config, shape, strategy, gpu, step.longest_row)
    lines.append(f"  parameters: {shape.params / 1e9:.2f}B ({shape.active_params / 1e9:.2f}B active)")
    lines.append(f"  GPU: {gpu.name} ({gpu.memory_gib:.0f} GiB, {gpu.bf16_tflops:.0f} bf16 TFLOP/s)")
    lines += _memory_lines(config, plan, step.longest_row)
    floor, estimate = step_seconds(step, shape, gpu, strategy.processes,
                                   checkpointing=trainer.gradient_checkpointing, reference=trainer.beta > 0)
    lines.append(f"  step time: FLOP floor {floor:.1f} s; estimate {estimate:.0f} s "
                 f"({GEN_UTILISATION:.0%} of peak generating, {TRAIN_UTILISATION:.0%} training)")
    lines.append(f"  {config.rounds} steps: ~{estimate * config.rounds / 3600:.1f} h")
    problems = plan.problems()
    if not problems:
        return lines + [f"  fits: yes, on {strategy.processes} x {gpu.name}"]
    lines.append(f"  fits: NO on {strategy.processes} x {gpu.name}: " + "; ".join(problems))
    hint = suggest(config, shape, target, step.longest_row)
    lines.append(f"  suggestion: {hint}" if hint else
                 "  suggestion: none of configs/accelerate/ fits; lower trainer.micro_batch_size, turn on "
                 "trainer.gradient_checkpointing, or use vllm_mode=server on separate GPUs")
    return lines
