"""GRPO through TRL's ``GRPOTrainer``: the learner of every round.

Objective (TRL's GRPO, per prompt group of G samples):
    A_i = (r_i - mean(r_1..G)) / std(r_1..G)             # group-relative advantage
    L = -mean_t[ min(rho_t A_i, clip(rho_t, 1-eps, 1+eps) A_i) ] + beta * KL_k3(pi || pi_ref)
with rho_t the token-level probability ratio and KL_k3 the low-variance estimator
exp(q-p) - (q-p) - 1 added directly to the loss (as in the paper's set-up).

We do not re-implement any of it. This adapter only:
* keeps one model (and, if configured, one AdamW state) alive across rounds, so every round
  continues from the previous round's weights;
* turns a round's ``Task``s into a dataset and the testbed's ``score`` into a reward function;
* pins the KL reference to the *starting* model for the whole run (TRL would otherwise load
  the reference from wherever the current weights were last loaded from);
* saves and restores weights and optimizer state per round.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from curriculum.core import distributed
from curriculum.core.bucket_stats import bucket_metrics
from curriculum.core.budget import PaddedTraining, TrainingBudget
from curriculum.core.config import PluginConfig
from curriculum.core.run import RunSettings
from curriculum.core.sizing import PlanTarget
from curriculum.core.types import Completion, Policy, Task
from testbeds.base import Testbed
from trainers.base import DigestMemo, LogFn, Trainer
from trainers.grpo.importance import loss_mask
from trainers.grpo.warmstart import WarmStartConfig
from trainers.lm.generation import (
    EngineSlot,
    TransformersPolicy,
    VLLMPolicy,
    VLLMServerPolicy,
    choose_backend,
    colocated_engine,
    cpu_engine_environment,
    engine_options,
    share_prompt_prefill,
    sync_colocated_through_reload,
    vllm_build,
)
from trainers.lm.models import load_model, resolve_model_path
from trainers.lm.precision import BF16Setting, resolve_bf16


class GRPOConfig(PluginConfig):
    """GRPO hyper-parameters (mapped onto ``trl.GRPOConfig``)."""

    name: Literal["grpo"]
    """Selects this trainer."""
    learning_rate: float = Field(2e-6, gt=0.0, le=1.0)
    """AdamW learning rate (constant schedule; the paper uses 2e-6)."""
    weight_decay: float = Field(0.0, ge=0.0)
    """AdamW weight decay."""
    prompts_per_step: int = Field(128, ge=1)
    """Distinct prompts per optimizer update (the paper: 128)."""
    num_generations: int = Field(8, ge=2)
    """Samples per prompt, the GRPO group size G (the paper: 8)."""
    gradient_accumulation_steps: int = Field(1, ge=1)
    """Micro-batches per update; the per-device batch is prompts_per_step*G divided by this."""
    epochs_per_round: float = Field(3.0, gt=0.0)
    """Passes over the round's tasks (the paper: 3)."""
    max_steps_per_round: int | None = Field(None, ge=1)
    """Cap on optimizer updates per round (overrides epochs; for CPU demos)."""
    beta: float = Field(0.001, ge=0.0)
    """KL coefficient of the low-variance (k3) KL to the starting model; 0 disables it."""
    epsilon: float = Field(0.2, gt=0.0, lt=1.0)
    """PPO-style clipping range of the probability ratio."""
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = "grpo"
    """TRL loss aggregation."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """Advantage normalisation: divide by the group's std (GRPO), the batch's, or not at all."""
    skip_zero_advantage: bool = True
    """Leave completions whose advantage is 0 (every completion of a group without reward
    spread) out of the loss's forward and backward pass, rescaling the loss so that it and its
    gradient are unchanged (``drop_zero_advantage_rows``). Exact when ``beta`` is 0, where such a
    row adds exactly 0 to the loss; with ``beta`` > 0 the KL term makes every row count and
    nothing is skipped. TRL's logged entropy and clip ratios then cover the kept rows only."""
    max_completion_length: int = Field(4096, ge=1)
    """Completion budget during training."""
    temperature: float = Field(1.0, gt=0.0, le=5.0)
    """Sampling temperature for training rollouts."""
    keep_optimizer_state: bool = True
    """Carry AdamW moments from round to round (and through resume)."""
    gradient_checkpointing: bool = False
    """Trade compute for memory on large models."""
    bf16: BF16Setting = False
    """bfloat16 mixed precision (fp32 master weights and AdamW state, bf16 matmuls under
    autocast) for the warm start, GRPO and this trainer's generation. ``auto``: on where the
    device multiplies bf16 natively (a bf16 GPU; a CPU with AVX512-BF16 or AMX), off elsewhere,
    where bf16 GEMMs are ~15x slower than fp32 (``trainers/lm/precision.py``)."""
    use_vllm: bool | Literal["auto"] = "auto"
    """Generate rollouts with vLLM: ``auto`` when installed and a GPU is present."""
    vllm_mode: Literal["colocate", "server"] = "colocate"
    """``colocate``: vLLM shares the training GPUs; ``server``: a separate ``trl vllm-serve``."""
    vllm_server_host: str = "127.0.0.1"
    """Host of the ``trl vllm-serve`` server (server mode)."""
    vllm_server_port: int = Field(8000, ge=1, le=65535)
    """Port of the ``trl vllm-serve`` server (server mode)."""
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0.0, le=1.0)
    """GPU memory share of the colocated vLLM engine."""
    vllm_importance_sampling: Literal["auto", "token_truncate", "token_mask", "sequence_truncate",
                                      "sequence_mask", "off"] = "auto"
    """Correction of the mismatch between the vLLM sampler's log-probs and the trainer's (TRL's
    ``vllm_importance_sampling_mode``): the loss of each token is multiplied by the ratio
    rho = exp(logp_trainer - logp_sampler), per token (``token_*``) or as one ratio per completion,
    the exp of the summed differences (``sequence_*``); ``*_truncate`` clips rho at
    ``vllm_importance_sampling_cap`` (and raises it to the floor), ``*_mask`` sets a rho outside
    [floor, cap] to 0. The trainer's log-probs come from the loss' own forward pass (the step is
    on policy; ``trainers/grpo/importance.py``), not from a second pass over the samples. ``off``:
    no correction. ``auto``: ``off`` where the sampler computes what the trainer does — vLLM's CPU
    build in float32 beside a float32 trainer (measured on the demo: every ratio within 2e-4 of 1;
    docs/results.md) — and ``sequence_mask`` elsewhere (bf16 or a GPU's kernels). Only used with
    ``use_vllm``."""
    vllm_importance_sampling_cap: float = Field(3.0, gt=1.0)
    """Upper bound C of the importance-sampling ratio (TRL's ``vllm_importance_sampling_clip_max``)."""
    vllm_importance_sampling_floor: float | None = Field(None, gt=0.0, lt=1.0)
    """Lower bound of the ratio (TRL's ``vllm_importance_sampling_clip_min``): ``*_truncate`` raises
    a smaller rho to it, ``*_mask`` sets it to 0; unset: no lower bound. Completions the sampler
    liked far more than the trainer (rho << 1) are the common mismatch at sequence level."""
    report_to: list[Literal["tensorboard", "wandb", "trackio"]] = Field(default_factory=list)
    """Extra metric sinks through TRL (metrics always go to the run's metrics.jsonl)."""
    logging_steps: int = Field(1, ge=1)
    """Log every N optimizer steps."""
    torch_threads: int | None = Field(None, ge=1)
    """CPU threads for torch (default: ``$CURRICULUM_TORCH_THREADS`` or all cores)."""
    warmstart: WarmStartConfig = Field(default_factory=WarmStartConfig)
    """Supervised warm start on the testbed's reference answers before GRPO round 0 (off by
    default: the paper starts GRPO from the base model). Cached across runs; see
    ``trainers/grpo/warmstart.py``."""

    @model_validator(mode="after")
    def _batch_divides(self) -> GRPOConfig:
        completions = self.prompts_per_step * self.num_generations
        if completions % self.gradient_accumulation_steps:
            raise ValueError(
                f"prompts_per_step*num_generations ({completions}) must be divisible by "
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps})"
            )
        return self


LOSS_ROW_SCALE = {"grpo": "rows", "dr_grpo": "rows", "bnpo": "tokens", "dapo": "none"}
"""How each TRL loss type normalises a micro-batch, and so how the loss of its kept rows is
rescaled: ``rows`` (a mean over the B rows: x K/B), ``tokens`` (over its completion tokens: x
kept tokens / all tokens), ``none`` (a normaliser over the whole generation batch,
``num_items_in_batch``, that does not change)."""


def drop_zero_advantage_rows(inputs: dict[str, Any], loss_type: str) -> tuple[dict[str, Any], float]:
    """One micro-batch of TRL's GRPO loss without its zero-advantage rows, and the factor that
    makes the kept rows' loss equal the full micro-batch's.

    With no KL term, every loss type is a sum over rows of advantage x (a function of the row's
    log-probs), divided by a normaliser; a row whose advantage is 0 (its whole group scored
    alike) therefore adds exactly 0 to the loss and to every gradient, but costs a full forward
    and backward. Dropping it changes only the normaliser, which the factor restores. At least
    one row is kept, so the backward still writes (zero) gradients: AdamW steps a parameter with
    a zero gradient but skips one without any, which would change its moments and step count."""
    import torch

    advantages = inputs["advantages"]  # (B,) or (B, T)
    rows = advantages.shape[0]
    keep = (advantages.reshape(rows, -1) != 0).any(dim=1).nonzero().flatten()  # (K,)
    if len(keep) == rows:
        return inputs, 1.0
    if len(keep) == 0:
        keep = torch.zeros(1, dtype=torch.long, device=advantages.device)
    kept = {k: v.index_select(0, keep) if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == rows else v
            for k, v in inputs.items()}
    mode = LOSS_ROW_SCALE[loss_type]
    if mode == "rows":
        return kept, len(keep) / rows
    if mode == "tokens":
        def tokens(batch: dict[str, Any]) -> float:
            return float(loss_mask(batch).sum().clamp(min=1.0))
        return kept, tokens(kept) / tokens(inputs)
    return kept, 1.0


@functools.cache
def grpo_trainer_class() -> type:
    """``trl.GRPOTrainer`` with two exact savings in its step:

    * ``drop_zero_advantage_rows`` in its loss (when switched on and exact: no KL term, no entropy
      masking, no auxiliary loss);
    * on a step that is on policy, the vLLM importance-sampling ratio taken from the loss' own
      forward pass instead of TRL's extra no-grad forward over every sampled completion
      (``trainers/grpo/importance.RatioFromLossForward``)."""
    from trl import GRPOTrainer

    from trainers.grpo.importance import RatioFromLossForward

    class SkippingGRPOTrainer(RatioFromLossForward, GRPOTrainer):
        skip_zero_advantage = True

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            kept, scale = inputs, 1.0
            if (self.skip_zero_advantage and self.beta == 0.0 and self.top_entropy_quantile >= 1.0
                    and not self.aux_loss_enabled and self.loss_type in LOSS_ROW_SCALE):
                kept, scale = drop_zero_advantage_rows(inputs, self.loss_type)
            loss = self._loss_with_ratio(model, kept)
            return loss if scale == 1.0 else loss * scale

    return SkippingGRPOTrainer


def _completion_text(completion: Any) -> str:
    """TRL passes conversational completions as message lists, plain ones as strings."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return str(completion)


class GRPOTrainerAdapter(Trainer[GRPOConfig]):
    """Runs one ``trl.GRPOTrainer`` per round over a model that persists across rounds."""

    config_class = GRPOConfig
    trains_on = "prompt"
    description = "GRPO through TRL's GRPOTrainer (transformers generation on CPU, vLLM on GPU)."

    @classmethod
    def training_budget(cls, run_config: RunSettings) -> TrainingBudget:
        from trainers.grpo.plan import grpo_budget

        return grpo_budget(run_config)

    @classmethod
    def central_training(cls, run_config: RunSettings) -> PaddedTraining | None:
        from trainers.grpo.plan import grpo_central_training

        return grpo_central_training(run_config)

    @classmethod
    def plan_lines(cls, run_config: RunSettings, target: PlanTarget) -> list[str]:
        from trainers.grpo.plan import grpo_plan_lines

        return grpo_plan_lines(run_config, target)

    def __init__(self, run_config: RunSettings, testbed: Testbed, run_dir: Path | None = None) -> None:
        super().__init__(run_config, testbed, run_dir)
        # TRL needs an output dir but we save nothing through it: a private scratch dir per
        # process keeps the run dir written by the main process only.
        self._scratch = Path(tempfile.mkdtemp(prefix="curriculum-trl-"))
        # Removed on close(), and also when a trainer that was never closed is collected or the
        # process exits (tests and crashed runs used to leave one empty dir per trainer in /tmp).
        weakref.finalize(self, shutil.rmtree, self._scratch, True)
        self.model = None
        self.tokenizer = None
        self.optimizer = None
        self._base_policy: Policy | None = None
        self._trl: Any = None
        self._engine = EngineSlot()  # the run's one vLLM engine, shared by evals and TRL's trainers
        self._vllm_policy: VLLMPolicy | None = None
        self._warm_metrics: dict[str, float] = {}
        self._digest = DigestMemo()  # forgotten wherever the weights change
        self.start_path = resolve_model_path(run_config.model.name_or_path)

    @property
    def bf16(self) -> bool:
        """``trainer.bf16`` decided for this machine (``trainers/lm/precision.py``)."""
        return resolve_bf16(self.config.bf16, "cuda" if _cuda() else "cpu")

    # -- lifecycle --------------------------------------------------------------------------------
    def setup(self, checkpoint: Path | None) -> None:
        import torch

        torch.set_num_threads(self.config.torch_threads or default_threads())
        self._digest.forget()
        model_dir = checkpoint / "model" if checkpoint is not None else None
        if checkpoint is not None and (checkpoint / "start.json").is_file():
            # The KL reference of a warm-started run is the warm-started model, not the base one.
            self.start_path = json.loads((checkpoint / "start.json").read_text())["start_path"]
        self.model, self.tokenizer = load_model(self.run_config.model,
                                                str(model_dir) if model_dir else None)
        if self.run_config.model.lora is not None:
            self.model = self._wrap_lora(self.model, model_dir)
        # TRL's transformers generation repeats each prompt num_generations times: prefill each once.
        share_prompt_prefill(self.model)
        # Keep the KL reference at the starting model, whatever checkpoint we resumed from.
        self.model.config._name_or_path = self.start_path
        if self.config.keep_optimizer_state:
            self.optimizer = torch.optim.AdamW(
                [p for p in self.model.parameters() if p.requires_grad],
                lr=self.config.learning_rate, weight_decay=self.config.weight_decay,
            )
            state = checkpoint / "optimizer.pt" if checkpoint is not None else None
            if state is not None and state.is_file():
                self.optimizer.load_state_dict(torch.load(state, weights_only=True))

    def prepare_steps(self) -> int:
        return self.config.warmstart.steps

    def prepare(self, progress: Callable[[int], None] | None = None,
                examples: Callable[[int, int], list[dict[str, Any]]] | None = None) -> dict[str, float]:
        """The supervised warm start of a fresh run (from the cache when its key matches), on the
        testbed's reference answers, this trainer's ``warmstart_examples`` and the engineer's
        ``examples``.

        Runs on the full model before any LoRA adapters train; the KL reference (``beta > 0``)
        then is the warm-started model, the start of GRPO."""
        if self.config.warmstart.steps == 0:
            return {}
        from trainers.grpo.warmstart import cached_warm_start

        settings, supplied = self._warmstart_inputs(examples)
        path, metrics = cached_warm_start(self.model, self.tokenizer, self.testbed, settings, examples=supplied,
                                          weights_digest=self.weights_digest(), bf16=self.bf16,
                                          gradient_checkpointing=self.config.gradient_checkpointing,
                                          progress=progress)
        self._digest.forget()
        if path is not None:
            self.start_path = str(path)
            self.model.config._name_or_path = self.start_path
        if self.optimizer is not None:  # AdamW moments of the SFT phase are not carried into GRPO
            self.optimizer.state.clear()
        self._warm_metrics = metrics
        return metrics

    def _warmstart_inputs(self, examples: Callable[[int, int], list[dict[str, Any]]] | None = None,
                          ) -> tuple[WarmStartConfig, list[dict[str, Any]]]:
        """The warm start's settings and the examples this trainer and ``examples`` (the engineer's) add."""
        settings = self.config.warmstart
        if self.run_config.model.lora is not None:
            # The adapters are what trains; their warm start is not cached (the cache holds full weights).
            settings = settings.model_copy(update={"cache": False})
        n = settings.examples or settings.steps * settings.batch_size
        supplied = self.warmstart_examples(n, settings.seed) + (examples(n, settings.seed) if examples else [])
        return settings, supplied

    def warmstart_key(self, examples: Callable[[int, int], list[dict[str, Any]]] | None = None) -> str | None:
        """The key of the warm-start cache entry ``prepare`` would read or write, without training
        (``None``: no cached warm start); after ``setup``."""
        from trainers.grpo.warmstart import cache_key, frozen_names, training_examples

        settings, supplied = self._warmstart_inputs(examples)
        if settings.steps == 0 or not settings.cache:
            return None
        return cache_key(self.weights_digest(), training_examples(self.testbed, settings, supplied), settings,
                         self.bf16, frozen_names(self.model))

    def warmstart_examples(self, n: int, seed: int) -> list[dict[str, Any]]:
        """Warm-start examples this trainer adds to the testbed's reference answers (none here;
        the SPADE trainer adds the agent role's)."""
        return []

    def _wrap_lora(self, model: Any, adapter_dir: Path | None) -> Any:
        from peft import LoraConfig, PeftModel, get_peft_model

        lora = self.run_config.model.lora
        if adapter_dir is not None and (adapter_dir / "adapter_config.json").is_file():
            return PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)
        return get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                                target_modules=lora.target_modules, task_type="CAUSAL_LM"))

    def save(self, directory: Path) -> None:
        """Every rank calls this (sharded weights are gathered collectively); rank 0 writes."""
        import torch

        state_dict = None
        if self._trl is not None and distributed.world_size() > 1:
            state_dict = self._trl.accelerator.get_state_dict(self._trl.model)
        if not distributed.is_main():
            return
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory / "model", safe_serialization=True, state_dict=state_dict)
        self.tokenizer.save_pretrained(directory / "model")
        (directory / "start.json").write_text(json.dumps({"start_path": self.start_path}))
        if self.optimizer is not None:
            torch.save(self.optimizer.state_dict(), directory / "optimizer.pt")

    def drop_resume_state(self, directory: Path) -> None:
        (directory / "optimizer.pt").unlink(missing_ok=True)

    def weights_digest(self) -> str:
        """sha256 of the weights (name and bytes of every tensor), computed once per distinct weights."""
        return self._digest.get(self.model, self._hash_weights)

    def _hash_weights(self) -> str:
        import hashlib

        import torch

        digest = hashlib.sha256()
        for name, param in sorted(self.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(param.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()[:16]

    def eval_identity(self, seed: int) -> str | None:
        import torch
        import transformers

        if distributed.world_size() > 1:
            return None  # sharded weights: one process's digest does not name the model
        gen = self.run_config.generation
        engine = getattr(self._trl, "vllm_generation", None) if self._trl is not None else None
        vllm = (engine is not None and gen.backend != "transformers") or choose_backend(gen) == "vllm"
        versions = [torch.__version__, transformers.__version__]
        if vllm:
            import vllm as vllm_module

            versions.append(vllm_module.__version__)
        # What ``policy()`` decodes with: the weights, the engine and its precision, the settings.
        return json.dumps({"weights": self.weights_digest(), "engine": "vllm" if vllm else "transformers",
                           "bf16": self.bf16, "dtype": self.run_config.model.dtype,
                           "generation": gen.model_dump(mode="json"), "versions": versions,
                           "seed": seed if gen.temperature > 0 else None}, sort_keys=True)

    # -- training ---------------------------------------------------------------------------------
    def _use_vllm(self) -> bool:
        if self.config.use_vllm == "auto":
            from trainers.lm.generation import vllm_available

            return vllm_available()
        return bool(self.config.use_vllm)

    def importance_sampling(self) -> str:
        """``trainer.vllm_importance_sampling`` decided for this run and machine: ``auto`` is
        ``off`` when vLLM's CPU build samples in float32 (``engine_options``) for a float32 model
        trained without bf16 autocast, so sampler and trainer compute the same numbers up to fp32
        rounding; ``sequence_mask`` otherwise."""
        mode = self.config.vllm_importance_sampling
        if mode != "auto":
            return mode
        exact = (vllm_build() == "cpu" and not self.bf16 and self.run_config.model.dtype == "float32"
                 and engine_options(self.run_config.generation)["dtype"] == "float32")
        return "off" if exact else "sequence_mask"

    def _shared_trl_args(self, seed: int) -> dict[str, Any]:
        """``trl.GRPOConfig`` fields that do not depend on how a round is batched (the
        ``selfplay`` trainer builds its one-step batches on top of these)."""
        cfg = self.config
        if self.run_dir is not None and "tensorboard" in cfg.report_to:
            # transformers 5 reads the TensorBoard directory from the environment only.
            os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(self.run_dir / "tensorboard"))
        importance_sampling = self.importance_sampling()
        return dict(
            output_dir=str(self._scratch),
            learning_rate=cfg.learning_rate,
            lr_scheduler_type="constant",
            weight_decay=cfg.weight_decay,
            beta=cfg.beta,
            epsilon=cfg.epsilon,
            loss_type=cfg.loss_type,
            temperature=cfg.temperature,
            # Explicit: TRL's configs default gradient checkpointing to True, which recomputes
            # every forward in the backward pass (+1/3 compute) even where memory is plentiful.
            gradient_checkpointing=cfg.gradient_checkpointing,
            bf16=self.bf16,
            use_cpu=not _cuda(),
            use_vllm=self._use_vllm(),
            vllm_mode=cfg.vllm_mode,
            vllm_server_host=cfg.vllm_server_host,
            vllm_server_port=cfg.vllm_server_port,
            vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            vllm_importance_sampling_correction=importance_sampling != "off",
            vllm_importance_sampling_mode="sequence_mask" if importance_sampling == "off" else importance_sampling,
            vllm_importance_sampling_clip_max=cfg.vllm_importance_sampling_cap,
            vllm_importance_sampling_clip_min=cfg.vllm_importance_sampling_floor,
            report_to=list(cfg.report_to) or "none",
            logging_steps=cfg.logging_steps,
            save_strategy="no",
            seed=seed,
            data_seed=seed,
            disable_tqdm=True,
        )

    def _trl_args(self, num_tasks: int, seed: int):
        import torch.distributed as dist
        from trl import GRPOConfig as TRLConfig

        cfg = self.config
        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        per_device = cfg.prompts_per_step * cfg.num_generations // (cfg.gradient_accumulation_steps * world)
        steps = cfg.max_steps_per_round
        if steps is None:
            steps = max(1, math.ceil(num_tasks * cfg.epochs_per_round / cfg.prompts_per_step))
        return TRLConfig(
            **self._shared_trl_args(seed),
            per_device_train_batch_size=max(per_device, 1),
            gradient_accumulation_steps=cfg.gradient_accumulation_steps,
            num_generations=cfg.num_generations,
            max_steps=steps,
            scale_rewards=cfg.scale_rewards,
            max_completion_length=cfg.max_completion_length,
        )

    def train_round(self, tasks: Sequence[Task], *, round_index: int, seed: int,
                    log: LogFn | None = None) -> dict[str, float]:
        from datasets import Dataset

        by_index = list(tasks)
        warm, self._warm_metrics = self._warm_metrics, {}  # reported with the first round trained
        dataset = Dataset.from_list([{"prompt": t.messages, "task_index": i} for i, t in enumerate(by_index)])
        scored: list[dict[str, Any]] = []
        trainer = self._round_trainer(training_reward(self.testbed, by_index, scored), dataset, seed=seed,
                                      log=log, round_index=round_index)
        with completion_positions_only():
            result = trainer.train()
        self._digest.forget()
        # TRL may have wrapped the model; keep the plain module for the next round, and the
        # trainer itself until ``save`` (gathering sharded weights needs its accelerator).
        self.model = trainer.accelerator.unwrap_model(trainer.model)
        self._trl = trainer
        n = max(len(scored), 1)
        return {
            "train/steps": float(trainer.state.global_step),
            "train/loss": float(result.training_loss),
            "train/mean_reward": sum(s["reward"] for s in scored) / n,
            "train/valid_rate": sum(s["valid"] for s in scored) / n,
            "train/mean_tokens": sum(s["tokens"] for s in scored) / n,
            "train/completions": float(len(scored)),
            "train/seconds": float(result.metrics.get("train_runtime", 0.0)),
            **_bucket_stats(scored),
            **warm,
        }

    def _round_trainer(self, reward: Callable[..., list[float]], dataset: Any, *, seed: int,
                       log: LogFn | None, round_index: int) -> Any:
        """TRL's GRPO trainer for one round on ``dataset`` (one row per task) with ``reward``,
        this adapter's model, tokenizer and optimizer, and its log records forwarded to ``log``."""
        from transformers import PrinterCallback

        with self._colocated_engine():
            trainer = grpo_trainer_class()(
                model=self.model,
                reward_funcs=[reward],
                args=self._trl_args(len(dataset), seed),
                train_dataset=dataset,
                processing_class=self.tokenizer,
                callbacks=[log_forwarder(log, round_index)],
                optimizers=(self.optimizer, _constant_schedule(self.optimizer)) if self.optimizer else (None, None),
            )
        trainer.skip_zero_advantage = self.config.skip_zero_advantage
        self._adopt_engine(trainer)
        # Progress and metrics go through our reporter and metrics.jsonl, not TRL's printer.
        trainer.remove_callback(PrinterCallback)
        return trainer

    @contextlib.contextmanager
    def _colocated_engine(self) -> Iterator[None]:
        """Around building a TRL trainer: with colocated vLLM, the trainer gets the run's one engine
        (``EngineSlot``: started by the first eval or the first trainer, reused by every later one);
        on the CPU build that engine starts under ``cpu_engine_environment`` with ``engine_options``."""
        if not (self._use_vllm() and self.config.vllm_mode == "colocate"):
            yield
            return
        if vllm_build() == "cpu":
            cpu_engine_environment(self.run_config.generation)  # else vLLM's default cache size
        with colocated_engine(self.run_config.generation, self._engine):
            yield

    def _adopt_engine(self, trainer: Any) -> None:
        """A new TRL trainer's colocated engine on the CPU build takes weights through
        ``reload_weights`` (``sync_colocated_through_reload``)."""
        engine = getattr(trainer, "vllm_generation", None)
        if getattr(engine, "llm", None) is not None and vllm_build() == "cpu":
            sync_colocated_through_reload(engine)  # the CPU build refuses TRL's per-tensor load

    # -- generation -------------------------------------------------------------------------------
    def policy(self) -> Policy:
        """Eval/engineer generation: reuse TRL's vLLM engine or server when training used one
        (after pushing the final weights to it), else a vLLM engine or transformers."""
        gen = self.run_config.generation
        engine = getattr(self._trl, "vllm_generation", None) if self._trl is not None else None
        if engine is not None and gen.backend != "transformers":
            engine.sync_weights()  # the engine holds the weights of the last rollout, not the last update
            if getattr(engine, "llm", None) is not None:
                return VLLMPolicy(gen, llm=engine.llm)
            if getattr(engine, "vllm_client", None) is not None:
                return VLLMServerPolicy(engine.vllm_client, self.tokenizer, gen)
        if choose_backend(gen) == "vllm":
            # One engine per run: started on the first eval, then handed the weights of each
            # optimizer step's result (``push_weights``) instead of restarting (minutes on a CPU);
            # TRL's colocated trainers of later rounds reuse it (``EngineSlot``).
            if self._vllm_policy is None:
                self._vllm_policy = VLLMPolicy(gen, model_path=self._export_for_vllm(), tokenizer=self.tokenizer)
                self._engine.llm = self._vllm_policy.llm
            else:
                self._vllm_policy.push_weights(self.model)
            return self._vllm_policy
        return TransformersPolicy(self.model, self.tokenizer, gen, bf16=self.bf16)

    def base_policy(self) -> Policy:
        if self._base_policy is None:
            model, tokenizer = load_model(self.run_config.model)
            self._base_policy = TransformersPolicy(model, tokenizer, self.run_config.generation, bf16=self.bf16)
        return self._base_policy

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _export_for_vllm(self) -> str:
        path = self._scratch / "vllm_export"
        self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        return str(path)

    def run_info(self) -> dict[str, Any]:
        return {"trainer": "grpo", "algorithm": "GRPO (TRL)", **self.config.model_dump(mode="json")}


def training_reward(testbed: Testbed, tasks: list[Task], scored: list[dict[str, Any]]) -> Callable[..., list[float]]:
    """The reward function given to TRL for one round's ``tasks`` (its dataset's ``task_index``
    column indexes them): the testbed scores each completion; one record per completion is appended
    to ``scored`` (reward, validity, tokens, GRPO group, bucket); the testbed observes every rank's
    completion lengths."""
    groups: dict[tuple[int, int], int] = {}

    def reward(prompts: list, completions: list, completion_ids: list, task_index: list[int],
               **_: Any) -> list[float]:
        batch = [Completion(text=_completion_text(c), num_tokens=len(ids))
                 for c, ids in zip(completions, completion_ids, strict=True)]
        rewards = []
        call = len(groups)  # distinct for every reward call (each adds groups)
        for idx, completion in zip(task_index, batch, strict=True):
            value, verdict = testbed.score(tasks[idx], completion)
            rewards.append(value)
            # A prompt's completions in one reward call form its GRPO group (on this rank).
            group = groups.setdefault((call, idx), len(groups))
            scored.append({"reward": value, "valid": float(bool(verdict.get("valid", False))),
                           "tokens": completion.num_tokens, "group": group,
                           "bucket": str(tasks[idx].features.get("bucket", ""))})
        # The reward's length EMA is global: every rank observes every rank's completions.
        lengths = [n for part in distributed.gather([c.num_tokens for c in batch]) for n in part]
        testbed.observe_training_batch([Completion(text="", num_tokens=n) for n in lengths])
        return rewards

    reward.__name__ = f"{testbed.name}_reward"
    return reward


@contextlib.contextmanager
def completion_positions_only() -> Iterator[None]:
    """Within the block, TRL's fused LM head scores only the labelled (completion) positions.

    ``trl.trainer.utils.add_fused_lm_head`` does so only on Triton devices; elsewhere (a CPU) it
    runs the 49k-way head over every prompt position too and masks the result, to keep tile
    shapes fixed for compilers that recompile on a new shape (Neuron). Eager CPU torch has no
    such cost, and the MAPF demo's prompts are ~85% of each GRPO row. The log-probs are the same
    (``tests/foundation/test_grpo_head.py``); without the hook (another TRL) nothing changes."""
    import trl.trainer.utils as trl_utils

    original = getattr(trl_utils, "_use_triton", None)
    if original is None:
        yield
        return
    trl_utils._use_triton = lambda device: True  # only the `compact` choice reads this name
    try:
        yield
    finally:
        trl_utils._use_triton = original


def log_forwarder(log: LogFn | None, round_index: int) -> Any:
    """A TRL callback that hands each log record, tagged with round and step, to ``log``."""
    from transformers import TrainerCallback

    class _Forward(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if log is not None and logs:
                log({"round": round_index, "step": state.global_step, **logs})

    return _Forward()


def default_threads() -> int:
    """Torch threads when ``torch_threads`` is unset: ``$CURRICULUM_TORCH_THREADS`` (set by
    ``compare`` for its parallel workers) or every core."""
    value = os.environ.get("CURRICULUM_TORCH_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else (os.cpu_count() or 1)


def _constant_schedule(optimizer: Any):
    import torch

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _bucket_stats(scored: list[dict[str, Any]]) -> dict[str, float]:
    """Per-bucket count, success and group reward spread of a round (``curriculum/core/bucket_stats.py``)
    over this rank's completions of tasks that name their bucket."""
    rows = [s for s in scored if s["bucket"]]
    if not rows:
        return {}
    return bucket_metrics([s["bucket"] for s in rows], [s["group"] for s in rows], [s["reward"] for s in rows])
