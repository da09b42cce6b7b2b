"""One generation interface for evaluation and engineers, with two backends.

* ``TransformersPolicy`` — batched ``model.generate`` with left padding (CPU, or GPU without vLLM).
* ``VLLMPolicy`` — a vLLM engine over a saved checkpoint (GPU, when vllm is installed).

``share_prompt_prefill(model)`` makes the transformers path compute each distinct prompt once:
GRPO samples ``num_generations`` completions per prompt, and ``model.generate`` would otherwise run
the prompt's forward pass ("prefill") once per sample (vLLM caches shared prefixes itself).

Both implement the ``testbeds.base.Policy`` protocol: ``generate(tasks) -> [Completion]``, one
completion per task, in order, with token counts from the policy's own tokenizer.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.types import Completion, Task


class GenerationConfig(BaseModel):
    """Sampling settings for evaluation and engineer calls."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    backend: Literal["auto", "transformers", "vllm"] = "auto"
    """``auto`` uses vLLM when it is installed and a GPU is present, else transformers."""
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


def vllm_available() -> bool:
    """vLLM is importable and a CUDA device is visible."""
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def choose_backend(config: GenerationConfig) -> str:
    if config.backend == "auto":
        return "vllm" if vllm_available() else "transformers"
    if config.backend == "vllm" and not vllm_available():
        raise RuntimeError("generation.backend=vllm, but vllm is not installed or no GPU is visible "
                           "(install the 'gpu' extra on a GPU machine, or use backend=transformers)")
    return config.backend


ProgressFn = Callable[[int], None]
"""Called with the number of completions just finished (drives rich progress bars)."""


class TransformersPolicy:
    """Batched generation with a transformers causal LM; ``bf16``: under bf16 autocast (the
    trainer's mixed precision, ``trainers/precision.py``), weights stay as they are."""

    def __init__(self, model: Any, tokenizer: Any, config: GenerationConfig,
                 progress: ProgressFn | None = None, *, bf16: bool = False) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.progress = progress
        self.bf16 = bf16

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        import torch

        max_new = max_new_tokens or self.config.max_new_tokens
        temp = self.config.temperature if temperature is None else temperature
        texts = [self._render(task) for task in tasks]
        # Longest prompts first: batches then hold similar lengths and waste less padding.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: list[Completion | None] = [None] * len(texts)
        pad_side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"  # decoder-only models continue from the right edge
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), self.config.batch_size):
                idx = order[start:start + self.config.batch_size]
                batch = self.tokenizer([texts[i] for i in idx], return_tensors="pt",
                                       padding=True, add_special_tokens=False)
                batch = {k: v.to(self.model.device) for k, v in batch.items()}
                torch.manual_seed(seed + start)
                precision = (torch.autocast(self.model.device.type, dtype=torch.bfloat16) if self.bf16
                             else contextlib.nullcontext())
                with torch.no_grad(), precision:
                    generated = self.model.generate(
                        **batch, max_new_tokens=max_new, do_sample=temp > 0,
                        temperature=temp if temp > 0 else None,
                        top_p=self.config.top_p if temp > 0 else None,
                        pad_token_id=self.tokenizer.pad_token_id,
                    )  # (B, T_prompt + T_new)
                new_tokens = generated[:, batch["input_ids"].shape[1]:]  # (B, T_new)
                for row, i in enumerate(idx):
                    ids = new_tokens[row].tolist()
                    ids = _strip_after_eos(ids, self.tokenizer.eos_token_id, self.tokenizer.pad_token_id)
                    text = self.tokenizer.decode(ids, skip_special_tokens=True)
                    out[i] = Completion(text=text, num_tokens=len(ids))
                if self.progress:
                    self.progress(len(idx))
        finally:
            self.tokenizer.padding_side = pad_side
            self.model.train(was_training)
        return [c for c in out if c is not None]

    def _render(self, task: Task) -> str:
        return render_chat(self.tokenizer, task.messages)


def render_chat(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """Chat template with the generation prompt; plain concatenation for template-less tokenizers."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(m["content"] for m in messages) + "\n"


def _strip_after_eos(ids: list[int], eos: int | None, pad: int | None) -> list[int]:
    """Cut at the first EOS (inclusive of nothing after it) and drop right padding."""
    for pos, tok in enumerate(ids):
        if tok == eos:
            return ids[:pos + 1]
    while ids and pad is not None and ids[-1] == pad and pad != eos:
        ids = ids[:-1]
    return ids


def distinct_prompts(input_ids: Any, attention_mask: Any) -> tuple[Any, Any, Any]:
    """The distinct rows of a left-padded prompt batch: ``(ids (U, T), mask (U, T), inverse (B,))``
    with ``ids[inverse] == input_ids`` (rows compare ids and mask together)."""
    import torch

    rows, inverse = torch.unique(torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1),
                                 dim=0, return_inverse=True)  # (U, 2T), (B,)
    width = input_ids.shape[1]
    return rows[:, :width], rows[:, width:].to(attention_mask.dtype), inverse


def generate_sharing_prompts(model: Any, generate: Callable[..., Any], **kwargs: Any) -> Any:
    """``generate(input_ids=..., attention_mask=..., **kwargs)`` with the prompt's forward pass
    run once per distinct (left-padded) prompt row instead of once per row.

    The prompts' key/value cache is computed on the distinct rows (all tokens but the last, as
    ``generate`` continues from the last one), then gathered into one cache row per input row;
    ``generate`` then starts from that cache. Position ids follow ``generate``'s own rule for left
    padding (cumulative mask - 1; padding at 1), so every row sees the numbers a plain call would.
    Falls back to the plain call when no row repeats, or when the call brings its own cache,
    embeddings, beams or several sequences per row (their caches would need expanding too).
    """
    import torch
    from transformers import DynamicCache

    input_ids, attention_mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    beams = kwargs.get("num_beams", getattr(config, "num_beams", 1) or 1)
    per_row = kwargs.get("num_return_sequences", getattr(config, "num_return_sequences", 1) or 1)
    plain = functools.partial(generate, **kwargs)
    if (attention_mask is None or input_ids is None or input_ids.dim() != 2 or input_ids.shape[1] < 2
            or beams != 1 or per_row != 1
            or any(k in kwargs for k in ("past_key_values", "cache", "inputs_embeds", "inputs"))):
        return plain()
    ids, mask, inverse = distinct_prompts(input_ids, attention_mask)
    if ids.shape[0] == input_ids.shape[0]:
        return plain()
    positions = mask.long().cumsum(-1) - 1  # (U, T)
    positions.masked_fill_(mask == 0, 1)
    cache = DynamicCache(config=model.config)
    # transformers 5.x renamed `past_key_values` to `cache` (the old name warns); PEFT wrappers
    # hide the signature, so read it from the underlying model's class.
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(type(base).forward).parameters
    cache_arg = {"cache": cache} if "cache" in params else {"past_key_values": cache}
    head = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    with torch.no_grad():
        model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
              use_cache=True, **cache_arg, **head)
    cache.batch_select_indices(inverse)  # (U, ...) -> (B, ...): one cache row per input row
    return generate(**kwargs, **cache_arg)


def share_prompt_prefill(model: Any) -> Any:
    """Route ``model.generate`` through ``generate_sharing_prompts`` (idempotent; TRL's GRPO
    calls ``model.generate`` with each prompt repeated ``num_generations`` times)."""
    if getattr(model.generate, "shares_prompt_prefill", False):
        return model

    def original(*args: Any, **kwargs: Any) -> Any:
        return type(model).generate(model, *args, **kwargs)  # looked up per call (profilers patch it)

    @functools.wraps(type(model).generate)
    def generate(*args: Any, **kwargs: Any) -> Any:
        if args:  # positional inputs: the plain call
            return original(*args, **kwargs)
        return generate_sharing_prompts(model, original, **kwargs)

    generate.shares_prompt_prefill = True  # type: ignore[attr-defined]
    model.generate = generate
    return model


class VLLMPolicy:
    """Generation with a vLLM engine: TRL's colocated engine (weights already synced), or a
    fresh one loaded from a checkpoint directory."""

    def __init__(self, config: GenerationConfig, *, model_path: str | None = None, llm: Any = None) -> None:
        self.config = config
        if llm is None:
            from vllm import LLM  # optional dependency: the 'gpu' extra

            llm = LLM(model=model_path, gpu_memory_utilization=config.vllm_gpu_memory_utilization)
        self.llm = llm

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        from vllm import SamplingParams

        temp = self.config.temperature if temperature is None else temperature
        params = SamplingParams(max_tokens=max_new_tokens or self.config.max_new_tokens,
                                temperature=temp, top_p=self.config.top_p if temp > 0 else 1.0, seed=seed)
        outputs = self.llm.chat([t.messages for t in tasks], params, use_tqdm=False)
        return [Completion(text=o.outputs[0].text, num_tokens=len(o.outputs[0].token_ids)) for o in outputs]


class VLLMServerPolicy:
    """Generation through a running ``trl vllm-serve`` server (TRL's ``VLLMClient``)."""

    def __init__(self, client: Any, tokenizer: Any, config: GenerationConfig) -> None:
        self.client = client
        self.tokenizer = tokenizer
        self.config = config

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        temp = self.config.temperature if temperature is None else temperature
        result = self.client.chat([t.messages for t in tasks], n=1, temperature=max(temp, 1e-6),
                                  top_p=self.config.top_p, max_tokens=max_new_tokens or self.config.max_new_tokens,
                                  logprobs=None)
        ids = result["completion_ids"]
        return [Completion(text=self.tokenizer.decode(i, skip_special_tokens=True), num_tokens=len(i)) for i in ids]
