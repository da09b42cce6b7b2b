"""``curriculum run --dry-run``: the resolved plan of a run, computed without loading a model.

Memory per GPU (P parameters, N processes) is the standard mixed-precision AdamW accounting:

    weights 2P (bf16) or 4P (fp32) · gradients same as weights · AdamW moments 8P (fp32)
    · fp32 master weights 4P when training in bf16 · KL reference model 2P/4P when beta > 0

    DDP (no sharding):    everything replicated on every GPU
    ZeRO-2:               gradients and optimizer state divided by N
    ZeRO-3 / FSDP:        weights, gradients, optimizer state and reference divided by N
    optimizer offload:    moments and master weights live in CPU memory (DeepSpeed
                          ``offload_optimizer_device: cpu``), not on the GPU

Activations of one micro-batch of T tokens (model with L layers, hidden size h, vocabulary V),
written for this project after Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", flash attention, so without the 5as/h attention-score term):

    gradient checkpointing:  2·L·T·h (each layer's bf16 input) + 34·T·h (one layer recomputed)
    without:                 34·L·T·h
    plus the LM head:        2·T·h (its saved input) + 4·4096·min(V, 32768) (one fp32 logits tile)

(TRL >= 1.16 scores completion tokens through a fused LM head in tiles of 4096 tokens x 32768
vocabulary entries, ``trl.trainer.utils.add_fused_lm_head``, so the full T x V logits never exist.)

A colocated vLLM engine takes ``vllm_gpu_memory_utilization`` of each GPU; inside it sit the bf16
weights (2P / tensor-parallel size) and the KV cache, which must hold at least one sequence of
the longest length: 2·L·kv_heads·head_dim·2 bytes per token. Each GPU also keeps
``OVERHEAD_GIB`` for the CUDA context, NCCL buffers and fragmentation.

Step time (SPADE plans) from the FLOP floor, N_a active parameters (a mixture-of-experts model
counts only the experts a token uses):

    generation  2·N_a per generated or prefilled token
    training    6·N_a per trained token (+2·N_a with gradient checkpointing's recompute,
                +2·N_a for the reference model's forward when beta > 0)
    floor       FLOPs / (N · peak bf16 FLOP/s of the GPU)
    estimate    generation FLOPs / (N · peak · GEN_UTILISATION)
                + training FLOPs / (N · peak · TRAIN_UTILISATION)

The utilisations are stated assumptions (decoding is memory-bound), not measurements; attention's
T² term is left out, so long contexts take longer than the estimate.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from curriculum.config import ConfigError, RunConfig, dump_config, read_config_file
from curriculum.presets import Machine, detect_machine
from curriculum.walltime import (CPU_ROW_UTILISATION, CPU_TRAIN_UTILISATION, Estimate, Model, Rates, estimate,
                                 measure_cpu_bandwidth, measure_cpu_flops, round_budget)
from trainers.models import EMBEDDED

GIB = 1024**3
OVERHEAD_GIB = 4.0
"""Per-GPU memory outside the accounting: CUDA context, NCCL buffers, allocator fragmentation."""
GEN_UTILISATION = 0.10
"""Assumed share of peak FLOP/s reached while generating (memory-bound decoding)."""
TRAIN_UTILISATION = 0.35
"""Assumed share of peak FLOP/s reached by the training forward and backward passes."""
LOGITS_TILE_TOKENS, LOGITS_TILE_VOCAB = 4096, 32768
"""TRL's fused LM head tile (``trl/kernels/chunked_logprob.py``, ``_CHUNKED_LOGPROB_CHUNK_SIZE``)."""
ACCELERATE_DIR = Path(__file__).resolve().parents[1] / "configs" / "accelerate"


@dataclass(frozen=True)
class GPU:
    """A GPU model: memory and dense bf16 tensor throughput (vendor data sheets)."""

    name: str
    memory_gib: float
    bf16_tflops: float


GPUS = {g.name: g for g in (
    GPU("h100-80gb", 80.0, 989.0),
    GPU("h200-141gb", 141.0, 989.0),
    GPU("a100-80gb", 80.0, 312.0),
    GPU("a100-40gb", 40.0, 312.0),
)}
DEFAULT_GPU = "h100-80gb"


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model: parameter counts and the sizes activations scale with."""

    params: int
    active_params: int
    layers: int
    hidden: int
    vocab: int
    kv_heads: int
    head_dim: int


# config.json of each model on the Hugging Face Hub; parameter counts from the model cards.
_KNOWN_SHAPES = {
    EMBEDDED: ModelShape(134_515_008, 134_515_008, 30, 576, 49152, 3, 64),
    "Qwen/Qwen3-4B-Instruct-2507": ModelShape(4_020_000_000, 4_020_000_000, 36, 2560, 151936, 8, 128),
    "Qwen/Qwen3-4B": ModelShape(4_020_000_000, 4_020_000_000, 36, 2560, 151936, 8, 128),
    "Qwen/Qwen3-8B": ModelShape(8_190_000_000, 8_190_000_000, 36, 4096, 151936, 8, 128),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": ModelShape(30_530_000_000, 3_340_000_000, 48, 2048, 151936, 4, 128),
    "Qwen/Qwen3-30B-A3B": ModelShape(30_530_000_000, 3_340_000_000, 48, 2048, 151936, 4, 128),
}


@dataclass(frozen=True)
class Strategy:
    """How training is distributed, read from an accelerate config file or the launcher's env."""

    name: str
    processes: int
    offload_optimizer: bool = False
    machines: int = 1


def read_strategy(accelerate_config: Path | None) -> Strategy:
    if accelerate_config is not None:
        data = read_config_file(accelerate_config)
        processes = _int_setting(data, "num_processes", 1, accelerate_config)
        machines = _int_setting(data, "num_machines", 1, accelerate_config)
        kind = str(data.get("distributed_type", "NO"))
        if kind == "DEEPSPEED":
            ds = data.get("deepspeed_config")
            ds = ds if isinstance(ds, dict) else {}
            stage = _int_setting(ds, "zero_stage", 2, accelerate_config)
            return Strategy(f"zero{stage}", processes, str(ds.get("offload_optimizer_device", "none")) == "cpu",
                            machines)
        if kind == "FSDP":
            fsdp = data.get("fsdp_config")
            fsdp = fsdp if isinstance(fsdp, dict) else {}
            return Strategy("fsdp", processes, bool(fsdp.get("fsdp_offload_params", False)), machines)
        return Strategy("ddp" if processes > 1 else "single", processes, False, machines)
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return Strategy(f"zero{os.environ.get('ACCELERATE_DEEPSPEED_ZERO_STAGE', '2')}", processes)
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return Strategy("fsdp", processes)
    return Strategy("ddp" if processes > 1 else "single", processes)


def _int_setting(data: dict[str, Any], key: str, default: int, source: Path) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{source}: {key} must be an integer (got {value!r})")
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{source}: {key} must be an integer (got {value!r})") from None


def _model_config_json(path: Path) -> dict[str, Any] | None:
    """A local model's ``config.json`` as a dict, ``None`` if absent or unreadable (the plan
    then falls back to the size in the model's name)."""
    try:
        cfg = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return cfg if isinstance(cfg, dict) else None


def model_shape(name_or_path: str) -> ModelShape | None:
    """From the table of known models or a local config.json (``None`` otherwise)."""
    if name_or_path in _KNOWN_SHAPES:
        return _KNOWN_SHAPES[name_or_path]
    cfg = _model_config_json(Path(name_or_path) / "config.json")
    if cfg is not None:
        hidden, layers = cfg.get("hidden_size"), cfg.get("num_hidden_layers")
        vocab, inter = cfg.get("vocab_size"), cfg.get("intermediate_size")
        if all(isinstance(x, int) and x > 0 for x in (hidden, layers, vocab, inter)):
            heads = cfg.get("num_attention_heads", 1)
            heads = heads if isinstance(heads, int) and heads > 0 else 1
            params = int(vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * inter))
            kv_heads, head_dim = cfg.get("num_key_value_heads", heads), cfg.get("head_dim", hidden // heads)
            return ModelShape(params, params, layers, hidden, vocab,
                              kv_heads if isinstance(kv_heads, int) and kv_heads > 0 else heads,
                              head_dim if isinstance(head_dim, int) and head_dim > 0 else hidden // heads)
    return None


def parameter_count(name_or_path: str) -> int | None:
    """Total parameters: known shape, local config.json, else the size in the model's name."""
    shape = model_shape(name_or_path)
    if shape is not None:
        return shape.params
    # "Qwen3-4B", "Qwen3-30B-A3B" (total parameters, not active), "SmolLM2-135M"
    match = re.search(r"(\d+(?:\.\d+)?)([BM])(?![a-z])", Path(name_or_path).name, re.IGNORECASE)
    if match:
        return int(float(match.group(1)) * (1e9 if match.group(2).upper() == "B" else 1e6))
    return None


# -- memory ------------------------------------------------------------------------------------------
def state_memory_gib(params: int, strategy: Strategy, *, bf16: bool, reference: bool) -> dict[str, float]:
    """Weights, gradients, optimizer state and KL reference per GPU (module docstring)."""
    n = max(strategy.processes, 1)
    weight_bytes = 2 if bf16 else 4
    parts = {"weights": weight_bytes * params, "gradients": weight_bytes * params,
             "optimizer": (8 + (4 if bf16 else 0)) * params,
             "reference": weight_bytes * params if reference else 0}
    sharded = {"zero3": ("weights", "gradients", "optimizer", "reference"), "fsdp": ("weights", "gradients", "optimizer",
                                                                                   "reference"),
               "zero2": ("gradients", "optimizer"), "zero1": ("optimizer",)}.get(strategy.name, ())
    out = {k: (v / n if k in sharded else v) / GIB for k, v in parts.items()}
    if strategy.offload_optimizer:
        out["optimizer"] = 0.0
    return out


def memory_per_gpu_gb(params: int, strategy: Strategy, *, bf16: bool, reference: bool) -> float:
    return sum(state_memory_gib(params, strategy, bf16=bf16, reference=reference).values())


def activation_gib(shape: ModelShape, tokens: int, *, checkpointing: bool) -> float:
    """One micro-batch of ``tokens`` tokens (module docstring)."""
    per_layer = 2 * tokens * shape.hidden if checkpointing else 34 * tokens * shape.hidden
    live = 34 * tokens * shape.hidden if checkpointing else 0
    head = 2 * tokens * shape.hidden + 4 * LOGITS_TILE_TOKENS * min(shape.vocab, LOGITS_TILE_VOCAB)
    return (shape.layers * per_layer + live + head) / GIB


def kv_cache_gib(shape: ModelShape, tokens: int) -> float:
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * 2 * tokens / GIB


# -- the SPADE step ----------------------------------------------------------------------------------
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

    @property
    def generated_tokens(self) -> int:
        return self.designs * (self.design_prompt_tokens + self.design_tokens) + \
            self.episodes * (self.episode_prompt_tokens + self.episode_tokens)

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


def spade_step(config: RunConfig) -> SpadeStep:
    trainer, engineer = config.trainer, config.engineer
    play = trainer.play
    designs = int(getattr(engineer, "designs_per_round", 0) or 0)
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
        designer_rows=designs if getattr(engineer, "designer", "policy") == "policy" else 0)


def step_seconds(step: SpadeStep, shape: ModelShape, gpu: GPU, processes: int, *, checkpointing: bool,
                 reference: bool) -> tuple[float, float]:
    """(FLOP floor, estimate) of one rollout step in seconds (module docstring)."""
    peak = max(processes, 1) * gpu.bf16_tflops * 1e12
    gen = 2 * shape.active_params * step.generated_tokens
    train = (6 + 2 * checkpointing + 2 * reference) * shape.active_params * step.trained_tokens
    return (gen + train) / peak, gen / (peak * GEN_UTILISATION) + train / (peak * TRAIN_UTILISATION)


# -- fit -----------------------------------------------------------------------------------------------
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


def gpu_plan(config: RunConfig, shape: ModelShape, strategy: Strategy, gpu: GPU, longest: int) -> GPUPlan:
    """Memory per GPU of a ``selfplay`` run whose longest row has ``longest`` tokens."""
    trainer = config.trainer
    lora = config.model.lora is not None
    bf16 = trainer.bf16 or config.model.dtype == "bfloat16"
    parts = state_memory_gib(shape.params, strategy, bf16=bf16, reference=trainer.beta > 0 and not lora)
    parts["activations"] = activation_gib(shape, trainer.micro_batch_size * longest,
                                          checkpointing=trainer.gradient_checkpointing)
    share = needs = 0.0
    tp = trainer.vllm_tensor_parallel_size
    if _colocated_vllm(config):
        share = trainer.vllm_gpu_memory_utilization * gpu.memory_gib
        needs = 2 * shape.params / tp / GIB + kv_cache_gib(shape, longest) / tp + 1.0
    return GPUPlan(parts, share, needs, gpu, strategy.processes, tp)


def _colocated_vllm(config: RunConfig) -> bool:
    trainer = config.trainer
    return trainer.use_vllm is not False and trainer.vllm_mode == "colocate"


def shipped_strategies() -> list[tuple[Path, Strategy]]:
    """The GPU accelerate configs in ``configs/accelerate``, fewest GPUs (then no offload) first."""
    found = [(p, read_strategy(p)) for p in sorted(ACCELERATE_DIR.glob("*.yaml")) if "cpu" not in p.name]
    return sorted(found, key=lambda item: (item[1].processes, item[1].offload_optimizer, item[0].name))


def suggest(config: RunConfig, shape: ModelShape, gpu: GPU, longest: int) -> str | None:
    """The first shipped accelerate config, vLLM tensor-parallel size and vLLM share that fit."""
    trainer = config.trainer
    for path, strategy in shipped_strategies():
        rel = path.relative_to(ACCELERATE_DIR.parents[1])
        if not _colocated_vllm(config):
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


# -- the printed plan ------------------------------------------------------------------------------------
def describe_plan(config: RunConfig, accelerate_config: Path | None = None, gpu: str = DEFAULT_GPU,
                  machine: Machine | None = None) -> str:
    """The resolved config followed by the per-round budget, memory, (SPADE) step time and the wall
    time it implies on ``machine`` (default: this one, detected)."""
    if gpu not in GPUS:
        raise ConfigError(f"unknown --gpu {gpu!r}; known: {', '.join(GPUS)}")
    strategy = read_strategy(accelerate_config)
    lines = [dump_config(config).rstrip(), "", "plan:"]
    lines.append(f"  processes: {strategy.processes}   strategy: {strategy.name}"
                 f"{' + optimizer offload to CPU' if strategy.offload_optimizer else ''}   "
                 f"(main process only: run-dir writes, eval, engineer calls)")
    lines.append(f"  model: {config.model.name_or_path}")
    lines.append(f"  testbed: {config.testbed.name}   engineer: {config.engineer.name}   "
                 f"trainer: {config.trainer.name}")
    lines.append(f"  rounds: {config.rounds}   tasks per round: {config.tasks_per_round}")
    lines.append(f"  {engine_line(config)}")
    trainer = config.trainer
    from trainers.grpo import GRPOConfig

    if _is_selfplay(trainer):
        lines += _spade_lines(config, strategy, GPUS[gpu])
    elif isinstance(trainer, GRPOConfig):  # not any config with a batch (the small learner's has no model)
        lines += _grpo_lines(config, strategy, GPUS[gpu])
    lines.append(wall_time(config, strategy, GPUS[gpu], machine or detect_machine()).line())
    return "\n".join(lines)


def engine_line(config: RunConfig) -> str:
    """Which engine decodes evals and engineer calls on this machine, and why
    (``trainers.generation.describe_backend``; measured rates: docs/scaling.md)."""
    from trainers.generation import describe_backend

    try:
        backend, why = describe_backend(config.generation)
    except RuntimeError as exc:
        return f"generation engine: none ({exc})"
    cache = f", {config.generation.cache} cache" if backend == "transformers" else ""
    return f"generation engine: {backend}{cache} ({why})"


def wall_time(config: RunConfig, strategy: Strategy, gpu: GPU, machine: Machine) -> Estimate:
    """``curriculum.walltime.estimate`` for this config on ``machine``."""
    from curriculum.registry import ENGINEERS, TESTBEDS

    testbed = TESTBEDS.get(config.testbed.name).load()
    engineer = ENGINEERS.get(config.engineer.name).load()
    budget = round_budget(config, *testbed.eval_budget(config.testbed, config.generation.max_new_tokens),
                          design=engineer.design_budget(config.engineer, config.generation.engineer_max_new_tokens))
    model = _walltime_model(config)
    if machine.kind == "gpu":  # vLLM batches every request: no per-step term (bandwidth infinite)
        rates = Rates(max(strategy.processes, 1) * gpu.bf16_tflops * 1e12, math.inf, GEN_UTILISATION,
                      TRAIN_UTILISATION)
        return estimate(config, budget, model, rates, gpu=True)
    rates = Rates(measure_cpu_flops(), measure_cpu_bandwidth(), CPU_ROW_UTILISATION, CPU_TRAIN_UTILISATION)
    return estimate(config, budget, model, rates, gpu=False)


WEIGHT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 4}
"""Bytes per parameter of ``model.dtype`` (``auto``, the checkpoint's own dtype, counted as float32:
an upper bound)."""


def _walltime_model(config: RunConfig) -> Model | None:
    """N (active parameters), L and the weights' bytes (all parameters: at many rows a
    mixture of experts reads every expert each step); ``None`` when no model trains (the
    simulated learner) or its size is unknown."""
    from trainers.grpo import GRPOConfig

    if not isinstance(config.trainer, GRPOConfig):
        return None
    shape = model_shape(config.model.name_or_path)
    total = shape.params if shape else parameter_count(config.model.name_or_path)
    if total is None:
        return None
    return Model(shape.active_params if shape else total, shape.layers if shape else None,
                 total * WEIGHT_BYTES[config.model.dtype])


def _is_selfplay(trainer: Any) -> bool:
    from trainers.selfplay import SelfPlayConfig

    return isinstance(trainer, SelfPlayConfig)


def _grpo_lines(config: RunConfig, strategy: Strategy, gpu: GPU) -> list[str]:
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
    if _colocated_vllm(config):
        when = " (use_vllm=auto: only where vllm and a GPU are present)" if trainer.use_vllm == "auto" else ""
        lines.append(f"  colocated vLLM engine: {trainer.vllm_gpu_memory_utilization:.0%} of each GPU "
                     f"(weights {2 * params / GIB:.1f} GiB + KV cache){when}")
    return lines


def _groups(config: RunConfig, strategy: Strategy) -> int:
    """Generation groups: ranks that share one colocated vLLM engine play the same environments."""
    tp = config.trainer.vllm_tensor_parallel_size if _colocated_vllm(config) else 1
    return max(strategy.processes // tp, 1)


def _memory_lines(config: RunConfig, plan: GPUPlan, longest: int) -> list[str]:
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


def _spade_lines(config: RunConfig, strategy: Strategy, gpu: GPU) -> list[str]:
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
        f"    tokens: generated <= {step.generated_tokens:,}, trained <= {step.trained_tokens:,}",
        f"  sharding: designs and plays over {_groups(config, strategy)} group(s) of processes, each rank with its"
        " own sandbox pool; rows gathered into one update",
    ]
    if config.engineer.name == "spade":  # which documents the design calls will read
        from engineers.spade.corpus import corpus_plan

        lines.append(f"  corpus: {corpus_plan(config.engineer.corpus, config.engineer.setting)}")
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
    hint = suggest(config, shape, gpu, step.longest_row)
    lines.append(f"  suggestion: {hint}" if hint else
                 "  suggestion: none of configs/accelerate/ fits; lower trainer.micro_batch_size, turn on "
                 "trainer.gradient_checkpointing, or use vllm_mode=server on separate GPUs")
    return lines
