"""``curriculum run --dry-run``: the resolved plan of a run, computed without loading a model.

Memory per GPU is the standard mixed-precision AdamW accounting (bytes per parameter P,
N processes), before activations and the vLLM engine's share:

    weights 2P (bf16) or 4P (fp32) · gradients same as weights · AdamW moments 8P (fp32)
    · fp32 master weights 4P when training in bf16 · KL reference model 2P/4P when beta > 0

    DDP (no sharding):    everything replicated on every GPU
    ZeRO-2:               gradients and optimizer state divided by N
    ZeRO-3 / FSDP:        weights, gradients, optimizer state and reference divided by N
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curriculum.config import ConfigError, RunConfig, dump_config, read_config_file
from trainers.models import EMBEDDED

_KNOWN_PARAMS = {EMBEDDED: 134_515_008}


@dataclass
class Strategy:
    """How training is distributed, read from an accelerate config file or the launcher's env."""

    name: str
    processes: int


def read_strategy(accelerate_config: Path | None) -> Strategy:
    if accelerate_config is not None:
        data = read_config_file(accelerate_config)
        processes = _int_setting(data, "num_processes", 1, accelerate_config)
        kind = str(data.get("distributed_type", "NO"))
        if kind == "DEEPSPEED":
            deepspeed = data.get("deepspeed_config")
            stage = _int_setting(deepspeed if isinstance(deepspeed, dict) else {}, "zero_stage", 2,
                                 accelerate_config)
            return Strategy(f"zero{stage}", processes)
        if kind == "FSDP":
            return Strategy("fsdp", processes)
        return Strategy("ddp" if processes > 1 else "single", processes)
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


def parameter_count(name_or_path: str) -> int | None:
    """From a local config.json when there is one, else from the size in the model's name."""
    if name_or_path in _KNOWN_PARAMS:
        return _KNOWN_PARAMS[name_or_path]
    config_path = Path(name_or_path) / "config.json"
    cfg = _model_config_json(config_path)
    if cfg is not None:
        hidden, layers = cfg.get("hidden_size"), cfg.get("num_hidden_layers")
        vocab, inter = cfg.get("vocab_size"), cfg.get("intermediate_size")
        if all(isinstance(x, int) and x > 0 for x in (hidden, layers, vocab, inter)):
            return int(vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * inter))
    # "Qwen3-4B", "Qwen3-30B-A3B" (total parameters, not active), "SmolLM2-135M"
    match = re.search(r"(\d+(?:\.\d+)?)([BM])(?![a-z])", Path(name_or_path).name, re.IGNORECASE)
    if match:
        return int(float(match.group(1)) * (1e9 if match.group(2).upper() == "B" else 1e6))
    return None


def memory_per_gpu_gb(params: int, strategy: Strategy, *, bf16: bool, reference: bool) -> float:
    n = max(strategy.processes, 1)
    weight_bytes = 2 if bf16 else 4
    weights, grads = weight_bytes * params, weight_bytes * params
    optim = (8 + (4 if bf16 else 0)) * params
    ref = weight_bytes * params if reference else 0
    if strategy.name in ("zero3", "fsdp"):
        total = (weights + grads + optim + ref) / n
    elif strategy.name == "zero2":
        total = weights + ref + (grads + optim) / n
    else:
        total = weights + grads + optim + ref
    return total / 1024**3


def describe_plan(config: RunConfig, accelerate_config: Path | None = None) -> str:
    """The resolved config followed by the per-round budget and memory it implies."""
    strategy = read_strategy(accelerate_config)
    lines = [dump_config(config).rstrip(), "", "plan:"]
    lines.append(f"  processes: {strategy.processes}   strategy: {strategy.name}   "
                 f"(main process only: run-dir writes, eval, engineer calls)")
    lines.append(f"  model: {config.model.name_or_path}")
    lines.append(f"  testbed: {config.testbed.name}   engineer: {config.engineer.name}   "
                 f"trainer: {config.trainer.name}")
    lines.append(f"  rounds: {config.rounds}   tasks per round: {config.tasks_per_round}")
    trainer = config.trainer
    if hasattr(trainer, "prompts_per_step"):
        steps = trainer.max_steps_per_round or math.ceil(
            config.tasks_per_round * trainer.epochs_per_round / trainer.prompts_per_step)
        prompts = steps * trainer.prompts_per_step
        samples = prompts * trainer.num_generations
        lines.append(f"  optimizer steps per round: {steps}   prompts per round: {prompts}   "
                     f"samples per round: {samples}")
        lines.append(f"  completion token budget per round: {samples * trainer.max_completion_length:,} "
                     f"(max {trainer.max_completion_length} per sample)")
        params = parameter_count(config.model.name_or_path)
        if params is None:
            lines.append("  memory: unknown parameter count (no local config.json, no size in the name)")
        else:
            lora = config.model.lora is not None
            gb = memory_per_gpu_gb(params, strategy, bf16=trainer.bf16 or config.model.dtype == "bfloat16",
                                   reference=trainer.beta > 0 and not lora)
            note = " (full fine-tuning accounting; LoRA needs far less)" if lora else ""
            lines.append(f"  parameters: {params / 1e9:.2f}B   estimated training memory per GPU: {gb:.1f} GiB"
                         f"{note}, plus activations")
            if trainer.use_vllm is not False and trainer.vllm_mode == "colocate":
                when = " (use_vllm=auto: only where vllm and a GPU are present)" if trainer.use_vllm == "auto" else ""
                lines.append(f"  colocated vLLM engine: {trainer.vllm_gpu_memory_utilization:.0%} of each GPU "
                             f"(weights {2 * params / 1024**3:.1f} GiB + KV cache){when}")
    return "\n".join(lines)
