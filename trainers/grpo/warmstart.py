"""Optional warm start: supervised fine-tuning on reference answers before GRPO round 0.

Small models often never produce a parsable MAPF plan, so every GRPO reward is 0, every group
has zero reward spread and nothing is learned. With ``trainer.warmstart.steps > 0`` the policy
first imitates reference answers through TRL's ``SFTTrainer``: the testbed's (MAPF: the optimal
CBS plan in the canonical format, on ``testbed.warmstart_tasks``), plus any examples the trainer
or the engineer supplies (``examples=``; SPADE: the seed library's designs for the designer role,
its solutions played turn by turn for the agent role):

    L_SFT = - mean over completion tokens of log pi(y_t | prompt, y_<t)

(prompt tokens are masked: ``completion_only_loss``). Off by default: the paper starts GRPO from
the base model.

Speed. TRL's ``SFTConfig`` turns ``bf16`` on whenever ``fp16`` is unset; on a CPU without native
bf16 matmuls (AVX2) that sends every GEMM to torch's reference kernel, ~15x slower than fp32
(measured: 385 s vs ~11 s per step of 8 examples). It also turns gradient checkpointing on,
which recomputes every layer's forward during the backward pass (8·N·T instead of 6·N·T FLOPs).
We pass both explicitly, from the trainer config: mixed precision and checkpointing only where
asked for. And TRL's fused LM head scores every position of the sequence when no Triton device
is present; our loss (``completion_nll``) runs the head only on the completion positions
(measured, the MAPF demo's warm-start step of 8 x ~240 tokens in passes of 2: 19.6 -> 15.0 s,
30.2 -> 24.3 s of CPU).

Cache. The warm-started weights are a pure function of (starting weights, the exact SFT examples,
the SFT hyper-parameters, the arithmetic); they are saved once under
``$CURRICULUM_CACHE/warmstart/<key>`` and reused by every later run with the same key (a second
demo, every run of a ``compare``, a run in the other environment). A file lock makes concurrent
runs with one key compute it once. The key names torch's version in full (its kernels do the
arithmetic), the major versions of transformers and TRL (model code and training loop) and the
update's settings those two resolve by default (optimizer, betas, clipping, ...), so that a library
changing a default still gets its own entry. It leaves out what only decides how the run generates
(the rollout engine, ``use_vllm``, vLLM's version, the generation settings), the engineer, and
transformers' and TRL's minor versions: ``make demo`` on vLLM's CPU build runs in ``.venv-vllm``,
whose vLLM pins transformers below the one ``.venv`` resolves, and the demo's warm start trained
there (transformers 5.19.0) and in ``.venv`` (5.25.0) came out bit-identical, yet the key with
the full versions kept two entries and recomputed eight minutes. An entry stored under that older
key (``_legacy_key``) is still found.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from curriculum.core.types import Task
from testbeds.base import Testbed

ProgressFn = Callable[[int], None]
Example = dict[str, Any]
"""One SFT example: ``{"prompt": [chat messages], "completion": [{"role": "assistant", ...}]}``."""
ExampleSource = Callable[[int, int], list[Example]]
"""``(n, seed) -> examples``: how a trainer or an engineer supplies warm-start examples."""


class WarmStartConfig(BaseModel):
    """Supervised warm start on the testbed's reference answers (``trainer.warmstart``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    steps: int = Field(0, ge=0)
    """SFT optimizer steps before GRPO round 0; 0 disables the warm start (the paper's setting)."""
    learning_rate: float = Field(1e-4, gt=0.0, le=1.0)
    """SFT learning rate (AdamW): constant, or the peak of ``lr_schedule``."""
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    """How the learning rate moves over the ``steps``: ``constant``, or decayed from
    ``learning_rate`` to 0 (``linear`` / ``cosine``, no warm-up; transformers' schedulers)."""
    batch_size: int = Field(8, ge=1)
    """Examples per SFT step."""
    examples: int | None = Field(None, ge=1)
    """Distinct reference examples drawn from ``testbed.warmstart_tasks`` (default: steps x
    batch_size, i.e. one epoch)."""
    seed: int = Field(0, ge=0)
    """Seed of the example draw and the SFT data order; fixed (not the run seed) so that runs
    with different seeds share one warm-started start."""
    cache: bool = True
    """Reuse (and store) the warm-started weights under ``$CURRICULUM_CACHE/warmstart``."""
    micro_batch_size: int | None = Field(None, ge=1)
    """Examples per forward/backward pass (``batch_size`` must be a multiple); gradients are
    accumulated over ``batch_size / micro_batch_size`` passes, the update is the same mean over
    the batch's tokens. Bounds peak memory (logits alone are 4 B x tokens x 49k vocab); default:
    the whole batch at once."""
    max_length: int | None = Field(None, ge=1)
    """Longest example in tokens (prompt + completion); a longer one is cut from the end, i.e.
    it loses its completion's end. None: never cut (TRL's own default, 1024, cut 53 of the 96
    designer examples of the SPADE games CPU demo: a design prompt with a 2,000-character document
    is 400-1,500 tokens)."""
    group_by_length: bool = False
    """Batch examples of similar token length together (batch order still shuffled by ``seed``):
    less padding, the same examples. MAPF demo: 84% -> 99% real tokens per padded batch, i.e.
    ~15% less compute per step. Off by default so that existing cache entries stay valid."""

    @model_validator(mode="after")
    def _micro_divides(self) -> WarmStartConfig:
        if self.micro_batch_size is not None and self.batch_size % self.micro_batch_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of micro_batch_size "
                             f"({self.micro_batch_size})")
        return self


def first_labelled_position(labels: Any) -> int:
    """The first position t of the (B, T) batch whose next token t+1 is labelled in any row (the
    head runs from there on); T - 1 for a pass without completion tokens (a differentiable zero)."""
    labelled = (labels[:, 1:] != -100).any(dim=0).nonzero()      # positions t predicting t+1
    return int(labelled[0]) if len(labelled) else labels.shape[1] - 1


def completion_nll(model: Any, inputs: dict[str, Any], num_items: Any = None) -> Any:
    """Summed next-token NLL of the labelled (completion) tokens, divided by ``num_items`` (the
    labelled tokens of the whole accumulated batch; default: this pass's).

    The LM head runs only on the positions from the pass's first labelled token on
    (transformers' ``logits_to_keep``). TRL's fused head scores every position when it has no
    Triton device (a CPU), prompt included: with the MAPF demo's ~177 prompt tokens of ~240, 70 %
    of its head FLOPs (49k-way vocabulary, a fifth of the 135M model's weights) were for tokens
    the loss masks. Same loss as TRL's; only the wasted head rows are gone."""
    import torch
    import torch.nn.functional as F

    labels = inputs["labels"]                                   # (B, T); -100 on prompt and pad
    first = first_labelled_position(labels)
    keep = labels.shape[1] - first                               # logits of positions first..T-1
    model_inputs = {k: v for k, v in inputs.items() if k in ("input_ids", "attention_mask", "position_ids")}
    logits = model(**model_inputs, use_cache=False, logits_to_keep=keep).logits  # (B, keep, V)
    targets = labels[:, first + 1:]                             # (B, keep - 1)
    nll = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.flatten(),
                          ignore_index=-100, reduction="sum")
    count = (targets != -100).sum() if num_items is None else num_items
    return nll / torch.as_tensor(count).clamp(min=1)  # a pass of only padding: 0, not 0 / 0


def sft_examples(testbed: Testbed, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """Prompt/completion pairs for the tasks that have a reference answer."""
    examples = []
    for task in tasks:
        answer = testbed.reference_answer(task)
        if answer is not None:
            examples.append({"prompt": task.messages,
                             "completion": [{"role": "assistant", "content": answer}]})
    return examples


def example_length(example: Example, tokenizer: Any) -> int:
    """Tokens of the chat-formatted prompt plus completion (what one SFT row costs)."""
    text = tokenizer.apply_chat_template(list(example["prompt"]) + list(example["completion"]),
                                         tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def length_grouped(examples: Sequence[Example], tokenizer: Any, batch_size: int,
                   seed: int) -> list[Example]:
    """The same examples, ordered so that each consecutive ``batch_size`` block holds examples of
    similar length (little padding) while the order of the blocks is a seeded shuffle.

    Ties are broken by a seeded permutation, so which examples share a block is also seeded."""
    import numpy as np

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(examples))
    lengths = [example_length(examples[i], tokenizer) for i in order]
    by_length = [int(order[j]) for j in np.argsort(lengths, kind="stable")]
    blocks = [by_length[i:i + batch_size] for i in range(0, len(by_length), batch_size)]
    return [examples[i] for b in rng.permutation(len(blocks)) for i in blocks[b]]


def warm_start(model: Any, tokenizer: Any, testbed: Testbed, tasks: Sequence[Task],
               settings: WarmStartConfig, *, bf16: bool = False, gradient_checkpointing: bool = False,
               progress: ProgressFn | None = None, examples: Sequence[Example] = ()) -> dict[str, float]:
    """Run ``settings.steps`` SFT updates in place on the reference answers of ``tasks`` plus
    ``examples`` (batching, schedule and cut from ``settings``; ``settings.examples`` and
    ``settings.cache`` are ``cached_warm_start``'s); returns the training metrics."""
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import SFTTrainer

    examples = sft_examples(testbed, tasks) + list(examples)
    if not examples:
        raise ValueError(f"testbed {testbed.name!r} provides no reference answers and nothing else supplied "
                         "warm-start examples; set trainer.warmstart.steps=0 (or, for SPADE, turn on "
                         "engineer.designer_warmstart / trainer.agent_warmstart)")

    class _Progress(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if progress is not None:
                progress(1)

    steps, batch_size, seed = settings.steps, settings.batch_size, settings.seed
    micro = settings.micro_batch_size or batch_size
    if settings.group_by_length:  # blocks of one micro-batch: that is what gets padded together
        examples = length_grouped(examples, tokenizer, micro, seed)
    with tempfile.TemporaryDirectory(prefix="curriculum-sft-") as scratch:
        args = sft_arguments(settings, scratch, bf16=bf16, gradient_checkpointing=gradient_checkpointing)
        class _CompletionHeadSFT(SFTTrainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                loss = completion_nll(model, inputs, num_items_in_batch)
                return (loss, None) if return_outputs else loss

        trainer = _CompletionHeadSFT(model=model, args=args, train_dataset=Dataset.from_list(examples),
                             processing_class=tokenizer, callbacks=[_Progress()])
        trainer.remove_callback(PrinterCallback)
        result = trainer.train()
    model.eval()
    return {"warmstart/steps": float(steps), "warmstart/loss": float(result.training_loss),
            "warmstart/examples": float(len(examples)),
            "warmstart/seconds": float(result.metrics.get("train_runtime", 0.0))}


def sft_arguments(settings: WarmStartConfig, output_dir: str, *, bf16: bool = False,
                  gradient_checkpointing: bool = False) -> Any:
    """TRL's ``SFTConfig`` of a warm start with ``settings``."""
    from trl import SFTConfig

    steps, seed = settings.steps, settings.seed
    micro = settings.micro_batch_size or settings.batch_size
    return SFTConfig(output_dir=output_dir, max_steps=steps, learning_rate=settings.learning_rate,
                     per_device_train_batch_size=micro,
                     gradient_accumulation_steps=settings.batch_size // micro, max_length=settings.max_length,
                     lr_scheduler_type=settings.lr_schedule,
                     completion_only_loss=True, report_to="none", save_strategy="no",
                     logging_steps=max(1, steps // 5), seed=seed, data_seed=seed,
                     disable_tqdm=True, use_cpu=not _cuda(),
                     # Explicit: SFTConfig defaults bf16 to True (15x slower on AVX2 CPUs)
                     # and gradient checkpointing to True (+1/3 compute, recomputed forwards).
                     bf16=bf16, fp16=False, gradient_checkpointing=gradient_checkpointing,
                     # Grouped examples are already in their (seeded) order.
                     train_sampling_strategy="sequential" if settings.group_by_length else "random")


_LIBRARY_DEFAULTS = ("optim", "optim_args", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay",
                     "max_grad_norm", "warmup_steps", "lr_scheduler_kwargs", "label_smoothing_factor",
                     "loss_type", "average_tokens_across_devices", "padding_free", "packing")
"""Settings of the update that ``warm_start`` leaves to transformers and TRL (``SFTConfig``'s
defaults): part of the cache key, so that a library changing one is a new entry."""


def library_defaults(config: WarmStartConfig, bf16: bool = False) -> dict[str, Any]:
    """The values of ``_LIBRARY_DEFAULTS`` a warm start with ``config`` trains with."""
    with tempfile.TemporaryDirectory(prefix="curriculum-sft-") as scratch:
        args = sft_arguments(config, scratch, bf16=bf16).to_dict()
    return {name: args.get(name) for name in _LIBRARY_DEFAULTS}


def _key_inputs(weights_digest: str, examples: list[dict[str, Any]], config: WarmStartConfig,
                bf16: bool, frozen: Sequence[str]) -> dict[str, Any]:
    """What both keys hash besides the libraries."""
    return {
        "weights": weights_digest, "examples": examples,
        "steps": config.steps, "learning_rate": config.learning_rate,
        "batch_size": config.batch_size, "seed": config.seed, "bf16": bf16,
        # Only when on, so that the keys of entries made before the option existed still match.
        **({"group_by_length": True} if config.group_by_length else {}),
        **({"micro_batch_size": config.micro_batch_size}
           if config.micro_batch_size not in (None, config.batch_size) else {}),
        # Only when set: entries made under TRL's cut at 1,024 tokens keep their key (no MAPF
        # example reaches it, ~330 tokens at most; SPADE's design examples do).
        **({"max_length": config.max_length} if config.max_length is not None else {}),
        **({"lr_schedule": config.lr_schedule} if config.lr_schedule != "constant" else {}),
        **({"frozen": sorted(frozen)} if frozen else {}),
        # The loss's LM head runs on labelled positions only (``completion_nll``); entries made with
        # TRL's fused head over every position differ in float rounding, so they are not reused.
        "head": "labelled-positions",
    }


def _hash(blob: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:20]


def cache_key(weights_digest: str, examples: list[dict[str, Any]], config: WarmStartConfig,
              bf16: bool, frozen: Sequence[str] = ()) -> str:
    """Hash of everything that determines the warm-started weights (``frozen``: the names of
    the parameters that do not train, ``model.trainable_layers``); of the libraries, what does
    the arithmetic (module docstring, "Cache")."""
    import torch
    import transformers
    import trl

    majors = [f"{module.__name__} {module.__version__.split('.')[0]}" for module in (transformers, trl)]
    return _hash({**_key_inputs(weights_digest, examples, config, bf16, frozen),
                  "arithmetic": [torch.__version__, *majors], "defaults": library_defaults(config, bf16)})


def _legacy_key(weights_digest: str, examples: list[dict[str, Any]], config: WarmStartConfig,
                bf16: bool, frozen: Sequence[str] = ()) -> str:
    """The key entries were stored under before ``cache_key`` (every library's full version)."""
    import torch
    import transformers
    import trl

    return _hash({**_key_inputs(weights_digest, examples, config, bf16, frozen),
                  "versions": [torch.__version__, transformers.__version__, trl.__version__]})


def warmstart_dir(key: str) -> Path:
    from curriculum.core.paths import cache_dir

    return cache_dir() / "warmstart" / key


def training_examples(testbed: Testbed, config: WarmStartConfig,
                      examples: Sequence[Example] = ()) -> list[Example]:
    """Every example a warm start with ``config`` trains on: the reference answers of the testbed's
    warm-start tasks, then ``examples``."""
    n = config.examples or config.steps * config.batch_size
    return sft_examples(testbed, testbed.warmstart_tasks(n, config.seed)) + list(examples)


def frozen_names(model: Any) -> list[str]:
    """The parameters that do not train (``model.trainable_layers``)."""
    return [name for name, param in model.named_parameters() if not param.requires_grad]


def cached_warm_start(model: Any, tokenizer: Any, testbed: Testbed, config: WarmStartConfig, *,
                      weights_digest: str, bf16: bool = False, gradient_checkpointing: bool = False,
                      progress: ProgressFn | None = None,
                      examples: Sequence[Example] = ()) -> tuple[Path | None, dict[str, float]]:
    """Warm-start ``model`` in place on the testbed's reference answers plus ``examples``, from
    the cache when possible (the key covers every example).

    Returns the directory holding the warm-started weights (``None`` with ``cache=False``) and
    the metrics (``warmstart/cached`` = 1 when loaded from the cache).
    """
    # Built once: the key hashes exactly the examples that are trained on.
    examples = training_examples(testbed, config, examples)

    def train() -> dict[str, float]:
        return warm_start(model, tokenizer, testbed, (), config, bf16=bf16,
                          gradient_checkpointing=gradient_checkpointing, progress=progress,
                          examples=examples)

    if not config.cache:
        return None, train()
    frozen = frozen_names(model)
    target = warmstart_dir(cache_key(weights_digest, examples, config, bf16, frozen))
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent run with the same key waits for this one
        legacy = warmstart_dir(_legacy_key(weights_digest, examples, config, bf16, frozen))
        for entry in (target, legacy):  # an entry of the older key stays where runs recorded it
            if (entry / "metrics.json").is_file():
                _load_weights(model, entry)
                if progress is not None:
                    progress(config.steps)
                metrics = json.loads((entry / "metrics.json").read_text())
                return entry, {**metrics, "warmstart/cached": 1.0}
        # Siblings a killed run left half-written: nobody else writes them while we hold the lock.
        for stale in target.parent.glob(target.name + ".tmp*"):
            shutil.rmtree(stale, ignore_errors=True)
        metrics = train()
        # Write to a sibling and rename: a killed run never leaves a half-written cache entry.
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=1))
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return target, {**metrics, "warmstart/cached": 0.0}


def _load_weights(model: Any, directory: Path) -> None:
    """Copy the cached weights into ``model`` (keeps the module object, its device and dtype)."""
    from safetensors.torch import load_file

    state = {}
    for shard in sorted(directory.glob("*.safetensors")):
        state.update(load_file(shard))
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied embeddings are saved once; anything else missing means a different architecture.
    missing = [k for k in missing if k not in _tied_keys(model)]
    if missing or unexpected:
        raise RuntimeError(f"warm-start cache {directory} does not match the model "
                           f"(missing {missing[:3]}, unexpected {unexpected[:3]}); delete it")


def _tied_keys(model: Any) -> set[str]:
    return set(getattr(model, "_tied_weights_keys", None) or [])  # a list or a dict of names


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
