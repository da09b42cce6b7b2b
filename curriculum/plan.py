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

Step time (plans whose trainer states one, ``Trainer.plan_lines``) from the FLOP floor, N_a
active parameters (a mixture-of-experts model counts only the experts a token uses):

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

import math
import os
from pathlib import Path
from typing import Any

from curriculum.config import ConfigError, RunConfig, dump_config, read_config_file
from curriculum.core.policy import describe_backend
from curriculum.core.sizing import (DEFAULT_GPU, GEN_UTILISATION, GIB, GPU, GPUS, OVERHEAD_GIB, TRAIN_UTILISATION,
                                    ModelShape, PlanTarget, Strategy, activation_gib, kv_cache_gib, memory_per_gpu_gb,
                                    model_shape, parameter_count, state_memory_gib)
from curriculum.presets import Machine, detect_machine
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS
from curriculum.walltime import (CPU_ROUND_OVERHEAD_S, CPU_TRAIN_UTILISATION, CPU_WARMSTART_UTILISATION,
                                 ROW_UTILISATION, SETUP_S, STEP_OVERHEAD_S, VLLM_MAX_ROWS, VLLM_START_S, Budget,
                                 Estimate, Lane, Lanes, Model, Rates, cpu_lanes, estimate, measure_cpu_bandwidth,
                                 measure_cpu_flops, round_budget, trainer_budget)

__all__ = ["GPU", "GPUS", "DEFAULT_GPU", "GIB", "OVERHEAD_GIB", "GEN_UTILISATION", "TRAIN_UTILISATION", "ModelShape",
           "Strategy", "activation_gib", "kv_cache_gib", "memory_per_gpu_gb", "model_shape", "parameter_count",
           "state_memory_gib", "read_strategy", "shipped_strategies", "describe_plan", "engine_line", "wall_time"]

ACCELERATE_DIR = Path(__file__).resolve().parents[1] / "configs" / "accelerate"


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


def shipped_strategies() -> list[tuple[Path, Strategy]]:
    """The GPU accelerate configs in ``configs/accelerate``, fewest GPUs (then no offload) first."""
    found = [(p, read_strategy(p)) for p in sorted(ACCELERATE_DIR.glob("*.yaml")) if "cpu" not in p.name]
    return sorted(found, key=lambda item: (item[1].processes, item[1].offload_optimizer, item[0].name))


def _candidates() -> list[tuple[str, Strategy]]:
    """``shipped_strategies`` labelled as a user passes them (``PlanTarget.candidates``)."""
    return [(str(path.relative_to(ACCELERATE_DIR.parents[1])), strategy) for path, strategy in shipped_strategies()]


# -- the printed plan ------------------------------------------------------------------------------------
def describe_plan(config: RunConfig, accelerate_config: Path | None = None, gpu: str = DEFAULT_GPU,
                  machine: Machine | None = None) -> str:
    """The resolved config followed by the per-round budget, memory, step time (when the trainer
    states one) and the wall
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
    lines += ENGINEERS.get(config.engineer.name).load().plan_lines(config.engineer)
    lines += TRAINERS.get(config.trainer.name).load().plan_lines(config, PlanTarget(strategy, GPUS[gpu], _candidates))
    lines.append(wall_time(config, strategy, GPUS[gpu], machine or detect_machine()).line())
    return "\n".join(lines)


def engine_line(config: RunConfig) -> str:
    """Which engine decodes evals and engineer calls on this machine, and why
    (``curriculum.core.policy.describe_backend``; measured rates: docs/scaling.md)."""
    try:
        backend, why = describe_backend(config.generation)
    except RuntimeError as exc:
        return f"generation engine: none ({exc})"
    cache = f", {config.generation.cache} cache" if backend == "transformers" else ""
    return f"generation engine: {backend}{cache} ({why})"


def wall_time(config: RunConfig, strategy: Strategy, gpu: GPU, machine: Machine, *, threads: int | None = None,
              lanes: Lanes | None = None) -> Estimate:
    """``curriculum.walltime.estimate`` for this config on ``machine``: on a CPU with the matmul rate
    measured in each precision the run computes in, and each part on its engine (``cpu_lanes``);
    ``threads``: torch threads of the run (default: ``trainer.torch_threads``, else this
    process's), ``lanes``: instead of ``cpu_lanes(config)``."""
    model = _walltime_model(config)
    if machine.kind == "gpu":  # vLLM batches every request: no per-step term (bandwidth infinite)
        rates = Rates(max(strategy.processes, 1) * gpu.bf16_tflops * 1e12, math.inf, GEN_UTILISATION,
                      TRAIN_UTILISATION)
        engine = Lane("vllm", "bf16")
        lanes = lanes or Lanes(engine, engine, "bf16")
        # nothing measured on a GPU: the counts stay upper bounds (every share calibrated on the CPU)
        return estimate(config, _budget(config, lanes), model, rates, gpu=True, lanes=lanes, central=False)
    lanes = lanes or cpu_lanes(config)
    threads = threads or getattr(config.trainer, "torch_threads", None)
    return estimate(config, _budget(config, lanes), model, cpu_rates(lanes, threads), gpu=False, lanes=lanes)


def _budget(config: RunConfig, lanes: Lanes) -> Budget:
    """The run's token counts (``curriculum.walltime.round_budget``), an eval on vLLM in one call."""
    testbed = TESTBEDS.get(config.testbed.name).load()
    engineer = ENGINEERS.get(config.engineer.name).load()
    tokens = config.generation.max_new_tokens
    test = testbed.eval_budget(config.testbed, tokens, suite="test") if "test" in testbed.eval_suites else None
    return round_budget(config, *testbed.eval_budget(config.testbed, tokens), test=test,
                        design=engineer.design_budget(config.engineer, config.generation.engineer_max_new_tokens),
                        eval_batch=VLLM_MAX_ROWS if lanes.eval.engine == "vllm" else None)


def cpu_rates(lanes: Lanes, threads: int | None = None) -> dict[str, Rates]:
    """This CPU's rates per decode engine: the matmul probe in float32 and, where a part of the
    run computes in bf16, in bfloat16 (``threads`` torch threads; default this process's), the
    memory probe, and each engine's calibrated utilisation and step overhead."""
    import torch

    scale = (threads / torch.get_num_threads()) if threads else 1.0
    flops = measure_cpu_flops() * scale
    bf16 = measure_cpu_flops(dtype="bfloat16") * scale if "bf16" in lanes.precisions else None
    bandwidth = measure_cpu_bandwidth()
    return {engine: Rates(flops, bandwidth, ROW_UTILISATION[engine], CPU_TRAIN_UTILISATION["fp32"], bf16,
                          STEP_OVERHEAD_S[engine], CPU_WARMSTART_UTILISATION["fp32"], CPU_ROUND_OVERHEAD_S, SETUP_S,
                          VLLM_START_S if engine == "vllm" else 0.0, CPU_TRAIN_UTILISATION["bf16"],
                          CPU_WARMSTART_UTILISATION["bf16"])
            for engine in ("transformers", "vllm")}


WEIGHT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 4}
"""Bytes per parameter of ``model.dtype`` (``auto``, the checkpoint's own dtype, counted as float32:
an upper bound)."""


def _walltime_model(config: RunConfig) -> Model | None:
    """N (active parameters), L and the weights' bytes (all parameters: at many rows a
    mixture of experts reads every expert each step); ``None`` when no model trains (the
    simulated learner: ``TrainingBudget.trains_model``) or its size is unknown."""
    if not trainer_budget(config).trains_model:
        return None
    shape = model_shape(config.model.name_or_path)
    total = shape.params if shape else parameter_count(config.model.name_or_path)
    if total is None:
        return None
    return Model(shape.active_params if shape else total, shape.layers if shape else None,
                 total * WEIGHT_BYTES[config.model.dtype], total)
