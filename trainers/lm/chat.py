"""A chat model that the run does not train, for an engineer that asks its own (``engineer.model: local``).

The small learner (``trainers/small``) cannot write a proposal, so the checkpoint engineer on it
asks a separate language model — by default the embedded SmolLM2-135M-Instruct as shipped. That
model is frozen: loading it once per process is enough, and a comparison's worker process that
runs many seeds reuses it (``chat_policy`` caches by the model and generation settings).
The engine follows ``generation.backend`` as for any eval (``choose_backend``): vLLM where it runs,
else transformers, under bf16 autocast where the CPU multiplies bf16 natively.
"""

from __future__ import annotations

from typing import Any

from curriculum.core.policy import GenerationConfig, ModelConfig, resolve_model_path
from curriculum.core.types import Policy
from trainers.lm.generation import TransformersPolicy, VLLMPolicy, choose_backend
from trainers.lm.models import load_model
from trainers.lm.precision import resolve_bf16

_LOADED: dict[str, Policy] = {}
"""This process's chat models, by the JSON of (model, generation) settings."""


def chat_policy(model: ModelConfig, generation: GenerationConfig) -> Policy:
    """The frozen chat model ``model``, generating with ``generation`` (loaded once per process)."""
    key = model.model_dump_json() + generation.model_dump_json()
    if key not in _LOADED:
        _LOADED[key] = _load(model, generation)
    return _LOADED[key]


def _load(model: ModelConfig, generation: GenerationConfig) -> Any:
    if choose_backend(generation) == "vllm":
        return VLLMPolicy(generation, model_path=resolve_model_path(model.name_or_path))
    weights, tokenizer = load_model(model)
    weights.requires_grad_(False)
    device = "cuda" if next(weights.parameters()).is_cuda else "cpu"
    return TransformersPolicy(weights, tokenizer, generation, bf16=resolve_bf16("auto", device))
