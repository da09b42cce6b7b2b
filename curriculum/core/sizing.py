"""Sizing a training set-up from its numbers alone: GPUs, model shapes, distribution strategies,
memory per GPU and activations (the formulas: ``curriculum.plan``'s module docstring).

Shared by ``--dry-run``'s plan (``curriculum.plan``) and the trainers' own plan lines
(``Trainer.plan_lines``, which receive a ``PlanTarget``). Nothing is loaded: known models come
from a table, others from a local ``config.json`` or the size in their name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curriculum.core.policy import EMBEDDED

GIB = 1024**3
OVERHEAD_GIB = 4.0
"""Per-GPU memory outside the accounting: CUDA context, NCCL buffers, allocator fragmentation."""
GEN_UTILISATION = 0.10
"""Assumed share of peak FLOP/s reached while generating (memory-bound decoding)."""
TRAIN_UTILISATION = 0.35
"""Assumed share of peak FLOP/s reached by the training forward and backward passes."""
LOGITS_TILE_TOKENS, LOGITS_TILE_VOCAB = 4096, 32768
"""TRL's fused LM head tile (``trl/kernels/chunked_logprob.py``, ``_CHUNKED_LOGPROB_CHUNK_SIZE``)."""


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


@dataclass(frozen=True)
class PlanTarget:
    """Where ``--dry-run`` plans a run: the distribution strategy, the GPU model, and the shipped
    strategies a trainer may suggest when the run does not fit (``(label, strategy)``, the label
    as a user passes it: ``--accelerate-config configs/accelerate/....yaml``)."""

    strategy: Strategy
    gpu: GPU
    candidates: Callable[[], list[tuple[str, Strategy]]] = field(default=lambda: [])
