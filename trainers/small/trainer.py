"""``small``: a few-hundred-thousand-parameter transformer trained by real GRPO on MAPF-FrozenLake.

A real neural policy (``trainers/small/model.py``) over a compact tokenisation of the instance
(``trainers/small/codec.py``), cheap enough for many seeds of every engineer on a laptop CPU:

1. **Warm start** (``prepare``, fresh runs): supervised next-token training on the testbed's
   CBS-solved warm-start instances (``testbed.warmstart_tasks``: their optimal plans),
   L_SFT = − mean over written plan tokens of log π(y_t | prompt, y_<t). The weights are a pure
   function of (architecture, init seed, examples, SFT settings, torch version) and are cached
   under ``$CURRICULUM_CACHE/small_warmstart/<key>`` (a file lock makes concurrent runs with one
   key compute it once), like the 135M model's warm start (``trainers/grpo/warmstart.py``).
2. **GRPO** (``train_round``), per step: ``prompts_per_step`` tasks of the round, G =
   ``num_generations`` plans sampled per task at ``temperature``, each rendered as the testbed's
   canonical plan text and scored by the testbed's own ``score`` (parser, validator, adaptive
   reward); group-relative advantages and the clipped surrogate of ``trainers/small/objective.py``
   (the formulas TRL's ``GRPOTrainer`` optimises for the 135M model; beta = 0, no KL term),
   ``num_iterations`` AdamW updates per sampled batch (the ratio differs from 1, and the clip
   acts, from the second on). Zero-advantage rows are left out of the forward and backward
   through ``trainers.grpo.trainer.drop_zero_advantage_rows`` (exact at beta = 0). With
   ``dynamic_sampling`` (DAPO) a step samples batches of ``prompts_per_step`` tasks until it holds
   ``prompts_per_step`` groups with reward spread (at most ``max_sampling_batches`` batches) and
   the update sees those groups only; every sampled group is still scored and recorded.

Eval answers greedily (``eval_temperature`` 0) unless the caller passes a temperature. The
model writes plans only (the decoder writes each agent's label and start), so unlike a language
model it cannot fail the parse or the agent count; every other check of the validator can fail.
Everything is seeded (weights from ``init_seed``, sampling from the round's seed and step) and
runs with ``torch_threads`` CPU threads (1 by default, so parallel compare jobs do not contend).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from curriculum.core.bucket_stats import bucket_metrics
from curriculum.core.budget import OwnSeconds, TrainingBudget
from curriculum.core.config import PluginConfig
from curriculum.core.paths import cache_dir
from curriculum.core.run import RunSettings
from curriculum.core.sizing import PlanTarget
from curriculum.core.types import Completion, Task
from testbeds.base import Testbed
from trainers.base import DigestMemo, LogFn, Trainer
from trainers.small.objective import LossType, ScaleRewards

STATE_FILE = "small_policy.pt"
"""Weights, optimizer state and counters written by ``save``."""
CODEC_VERSION = 3
"""Bump when the tokenisation changes (invalidates warm-start cache entries)."""


class SmallWarmStartConfig(BaseModel):
    """Supervised warm start on the testbed's CBS-solved warm-start instances (``trainer.warmstart``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    steps: int = Field(1500, ge=0)
    """SFT optimizer steps before GRPO round 0; 0: start GRPO from the random initialisation."""
    batch_size: int = Field(32, ge=1)
    """Examples per SFT step."""
    examples: int = Field(6000, ge=1)
    """Distinct solved instances from ``testbed.warmstart_tasks`` (cycled in seeded epochs)."""
    learning_rate: float = Field(3e-3, gt=0.0, le=1.0)
    """AdamW learning rate of the SFT phase (constant)."""
    seed: int = Field(0, ge=0)
    """Seed of the example draw and order; fixed (not the run seed) so runs share one warm start."""
    cache: bool = True
    """Reuse (and store) the warm-started weights under ``$CURRICULUM_CACHE/small_warmstart``."""


class SmallConfig(PluginConfig):
    """The small learner: network size, GRPO hyper-parameters, warm start."""

    name: Literal["small"]
    """Selects this trainer."""
    d_model: int = Field(64, ge=8)
    """Width of the residual stream."""
    layers: int = Field(3, ge=1)
    """Transformer blocks."""
    heads: int = Field(4, ge=1)
    """Attention heads (must divide ``d_model``)."""
    ff_mult: int = Field(4, ge=1)
    """MLP width as a multiple of ``d_model``."""
    max_len: int = Field(384, ge=32, le=2048)
    """Longest sequence (prompt + plan) in tokens."""
    init_seed: int = Field(0, ge=0)
    """Seed of the initial weights; fixed (not the run seed) so runs share one warm start."""
    local_features: bool = False
    """Add to every plan token the goal's offset from its cell and what each next move would run
    into (off the grid or a hole, an earlier agent's cell, a swap; ``codec.move_features``): a
    representation that reads the same on every position and map size."""
    max_path_factor: float = Field(3.0, gt=0.0)
    """Cells generated per agent are capped at ceil(factor x map side); the decoder then ends the path."""
    learning_rate: float = Field(3e-4, gt=0.0, le=1.0)
    """AdamW learning rate of the GRPO phase (constant)."""
    weight_decay: float = Field(0.0, ge=0.0)
    """AdamW weight decay."""
    max_grad_norm: float = Field(1.0, gt=0.0)
    """Gradient-norm clip per update (TRL's default)."""
    prompts_per_step: int = Field(8, ge=1)
    """Distinct tasks per GRPO step."""
    num_generations: int = Field(8, ge=2)
    """Plans sampled per task, the GRPO group size G."""
    epochs_per_round: float = Field(1.0, gt=0.0)
    """Passes over the round's tasks (steps = ceil(tasks x epochs / prompts_per_step))."""
    max_steps_per_round: int | None = Field(None, ge=1)
    """Cap on GRPO steps per round (overrides ``epochs_per_round``)."""
    num_iterations: int = Field(2, ge=1)
    """AdamW updates per sampled batch (TRL's ``num_iterations``, μ)."""
    epsilon: float = Field(0.2, gt=0.0, lt=1.0)
    """Clipping range of the probability ratio."""
    loss_type: LossType = "grpo"
    """Loss aggregation (``trainers/small/objective.aggregate``)."""
    scale_rewards: ScaleRewards = "group"
    """Advantage normalisation (``trainers/small/objective.group_advantages``)."""
    temperature: float = Field(1.0, gt=0.0, le=5.0)
    """Sampling temperature of training rollouts."""
    eval_temperature: float = Field(0.0, ge=0.0, le=5.0)
    """Temperature when the caller passes none (evaluation): 0 decodes greedily."""
    generation_batch: int = Field(256, ge=1)
    """Rows decoded together."""
    dynamic_sampling: bool = False
    """DAPO's dynamic sampling: a step samples batches of ``prompts_per_step`` tasks until it holds
    ``prompts_per_step`` groups with reward spread (or ``max_sampling_batches`` batches), and
    updates on those groups only. Groups whose G rewards are equal teach nothing at beta = 0; this
    spends the update on groups that do, at the price of more sampling."""
    max_sampling_batches: int = Field(4, ge=1)
    """With ``dynamic_sampling``: the most batches of ``prompts_per_step`` tasks one step samples."""
    keep_optimizer_state: bool = True
    """Carry AdamW moments from round to round (and through resume)."""
    torch_threads: int = Field(1, ge=1)
    """CPU threads for torch in this process."""
    warmstart: SmallWarmStartConfig = Field(default_factory=SmallWarmStartConfig)
    """Supervised warm start before GRPO round 0 (cached across runs)."""

    @model_validator(mode="after")
    def _heads_divide(self) -> SmallConfig:
        if self.d_model % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model})")
        return self


# --------------------------------------------------------------------------------------------
# policy
# --------------------------------------------------------------------------------------------

def instance_of(task: Task) -> Any:
    from testbeds.mapf_frozenlake.instance import Instance

    return Instance.from_dict(task.data)


def max_path(config: SmallConfig, inst: Any) -> int:
    return int(math.ceil(config.max_path_factor * inst.h))


def steps_per_round(config: SmallConfig, n_tasks: int) -> int:
    """GRPO steps of a round of ``n_tasks`` tasks: ``max_steps_per_round``, else the epochs' batches."""
    if config.max_steps_per_round is not None:
        return config.max_steps_per_round
    return max(1, math.ceil(n_tasks * config.epochs_per_round / config.prompts_per_step))


def call_generator(*parts: int) -> Any:
    """A torch generator seeded by ``parts`` (hashed: any ints, any sign)."""
    import torch

    digest = hashlib.sha256(json.dumps([int(p) for p in parts]).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2 ** 63 - 1))


class SmallPolicy:
    """Answers MAPF tasks with the network's plans (greedy at the default eval temperature 0).

    ``max_new_tokens`` is not used: plans are capped per agent by ``max_path_factor``."""

    def __init__(self, model: Any, config: SmallConfig) -> None:
        self.model = model
        self.config = config
        self.progress: Callable[[int], None] | None = None

    def decode(self, tasks: Sequence[Task], temperature: float, generator: Any) -> list[Any]:
        from trainers.small.model import decode

        instances = [instance_of(t) for t in tasks]
        self.model.eval()
        out = []
        step = self.config.generation_batch
        for i in range(0, len(instances), step):
            chunk = instances[i:i + step]
            out.extend(decode(self.model, chunk, [max_path(self.config, x) for x in chunk],
                              temperature=temperature, generator=generator))
            if self.progress is not None:
                self.progress(len(chunk))
        return out

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        from trainers.small.codec import text_of

        t = self.config.eval_temperature if temperature is None else temperature
        decoded = self.decode(tasks, t, call_generator(seed, 0x45564C))
        return [Completion(text=text_of(d.paths), num_tokens=max(1, d.num_written)) for d in decoded]


# --------------------------------------------------------------------------------------------
# warm start
# --------------------------------------------------------------------------------------------

def sft_rows(tasks: Sequence[Task]) -> list[tuple[Any, Any]]:
    """(prompt + plan sequence, written flags) of every task with a stored optimal plan."""
    from trainers.small import codec

    rows = []
    for task in tasks:
        plan = task.data.get("optimal_plan")
        if not plan:
            continue
        inst = instance_of(task)
        prompt = codec.encode_prompt(inst)
        body, written = codec.encode_plan(inst, [[tuple(c) for c in p] for p in plan])
        rows.append((prompt + body, [False] * len(prompt) + written))
    return rows


def supervised_steps(model: Any, rows: list[tuple[Any, Any]], settings: SmallWarmStartConfig) -> dict[str, float]:
    """``settings.steps`` AdamW steps of L_SFT over seeded epochs of ``rows``; returns metrics."""
    import torch

    from trainers.small.model import pad_left, sequence_logprobs

    if not rows:
        raise ValueError("the testbed gave no solved warm-start instances; set trainer.warmstart.steps=0")
    opt = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    rng = np.random.default_rng([settings.seed, 0x534654])
    order: list[int] = []
    losses = []
    start = time.perf_counter()
    model.train()
    for _ in range(settings.steps):
        while len(order) < settings.batch_size:
            order.extend(int(i) for i in rng.permutation(len(rows)))
        pick, order = order[:settings.batch_size], order[settings.batch_size:]
        batch = pad_left([rows[i][0] for i in pick], [rows[i][1] for i in pick])
        logp = sequence_logprobs(model, batch)                                   # (B, T-1)
        loss = -logp.sum() / batch.written[:, 1:].sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    tail = losses[-max(1, len(losses) // 10):] if losses else [0.0]
    return {"warmstart/steps": float(settings.steps), "warmstart/loss": float(np.mean(tail)),
            "warmstart/examples": float(len(rows)), "warmstart/seconds": time.perf_counter() - start}


def warmstart_key(config: SmallConfig, tasks: Sequence[Task]) -> str:
    """Hash of everything the warm-started weights depend on."""
    import torch

    arch = {k: getattr(config, k) for k in ("d_model", "layers", "heads", "ff_mult", "max_len", "init_seed",
                                            "local_features")}
    settings = config.warmstart.model_dump(exclude={"cache"})
    examples = hashlib.sha256(json.dumps([t.data for t in tasks], sort_keys=True).encode()).hexdigest()
    blob = json.dumps({"arch": arch, "warmstart": settings, "examples": examples, "codec": CODEC_VERSION,
                       "torch": torch.__version__}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def cached_supervised(model: Any, testbed: Testbed, config: SmallConfig) -> dict[str, float]:
    """The warm start of ``model`` in place, from the cache when its key matches."""
    import torch

    settings = config.warmstart
    tasks = testbed.warmstart_tasks(settings.examples, settings.seed)
    if not settings.cache:
        return supervised_steps(model, sft_rows(tasks), settings)
    target = cache_dir("small_warmstart", warmstart_key(config, tasks))
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent run with the same key waits for this one
        if (target / "metrics.json").is_file():
            model.load_state_dict(torch.load(target / "model.pt", weights_only=True))
            model.eval()
            return {**json.loads((target / "metrics.json").read_text()), "warmstart/cached": 1.0}
        metrics = supervised_steps(model, sft_rows(tasks), settings)
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), tmp / "model.pt")
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=1))
        tmp.rename(target)
    return {**metrics, "warmstart/cached": 0.0}


# --------------------------------------------------------------------------------------------
# trainer
# --------------------------------------------------------------------------------------------

class SmallTrainer(Trainer[SmallConfig]):
    """Warm start, then GRPO rounds, of the small transformer (module docstring)."""

    writes_text = False  # answers MAPF tasks with plans, not chat prompts

    config_class = SmallConfig
    trains_on = "mapf"
    description = ("A small transformer (plain torch) trained by real GRPO on MAPF: engineer "
                   "benchmarks in minutes.")

    def __init__(self, run_config: RunSettings, testbed: Testbed, run_dir: Path | None = None) -> None:
        super().__init__(run_config, testbed, run_dir)
        self.model: Any = None
        self.optimizer: Any = None
        self.rounds_trained = 0
        self._warm_metrics: dict[str, float] = {}
        self._digest = DigestMemo()  # forgotten wherever the weights change

    def _build(self) -> Any:
        import torch

        from trainers.small.model import SmallTransformer

        torch.manual_seed(self.config.init_seed)
        c = self.config
        return SmallTransformer(c.d_model, c.layers, c.heads, c.ff_mult, c.max_len, c.local_features)

    def _new_optimizer(self) -> Any:
        import torch

        return torch.optim.AdamW(self.model.parameters(), lr=self.config.learning_rate,
                                 weight_decay=self.config.weight_decay)

    def setup(self, checkpoint: Path | None) -> None:
        import torch

        torch.set_num_threads(self.config.torch_threads)
        self._digest.forget()
        self.model = self._build()
        self.optimizer = self._new_optimizer()
        self.rounds_trained = 0
        if checkpoint is None:
            return
        state = torch.load(Path(checkpoint) / STATE_FILE, weights_only=True)
        self.model.load_state_dict(state["model"])
        if self.config.keep_optimizer_state and "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
        self.rounds_trained = int(state["rounds_trained"])

    @classmethod
    def plan_lines(cls, run_config: RunSettings, target: PlanTarget) -> list[str]:
        """``--dry-run``: GRPO steps, tasks and plans per round (a few hundred thousand parameters on
        one CPU thread: no GPU memory plan)."""
        cfg: SmallConfig = run_config.trainer  # type: ignore[assignment]  # its own section
        steps = steps_per_round(cfg, run_config.tasks_per_round)
        plans = steps * cfg.prompts_per_step * cfg.num_generations
        line = f"  GRPO steps per round: {steps}   tasks per update: {cfg.prompts_per_step}   plans per round: {plans}"
        if cfg.dynamic_sampling:
            line += (f" to {plans * cfg.max_sampling_batches} (dynamic sampling: up to "
                     f"{cfg.max_sampling_batches} batches a step until {cfg.prompts_per_step} groups have reward spread)")
        return [line, f"  warm start: {cfg.warmstart.steps} supervised steps (cached)"]

    @classmethod
    def training_budget(cls, run_config: RunSettings) -> TrainingBudget:
        """Its own seconds (``trainers/small/cost.py``): a model this small is priced by measured
        per-step and per-row rates, not by the FLOPs of ``curriculum.walltime``'s token model."""
        from trainers.small import cost

        cfg: SmallConfig = run_config.trainer  # type: ignore[assignment]  # its own section
        testbed = run_config.testbed
        steps = steps_per_round(cfg, run_config.tasks_per_round)
        has_test = hasattr(testbed, "instances_per_size")
        return TrainingBudget(own_seconds=OwnSeconds(
            round=steps * cost.step_seconds(cfg, testbed),
            eval=cost.eval_seconds(cfg, testbed, "validation"),
            test_eval=cost.eval_seconds(cfg, testbed, "test") if has_test else 0.0,
            warmstart=cost.warmstart_seconds(cfg, testbed) if cfg.warmstart.steps else 0.0,
            overhead=cost.ROUND_OVERHEAD_S, setup=cost.SETUP_S))

    def prepare_steps(self) -> int:
        return self.config.warmstart.steps

    def prepare(self, progress: Callable[[int], None] | None = None,
                examples: Callable[[int, int], list[dict[str, Any]]] | None = None) -> dict[str, float]:
        """The cached supervised warm start (engineer-supplied chat examples do not apply: this
        policy reads instances, not text)."""
        if self.config.warmstart.steps == 0:
            return {}
        metrics = cached_supervised(self.model, self.testbed, self.config)
        self._digest.forget()
        self.optimizer = self._new_optimizer()  # SFT moments are not carried into GRPO
        if progress is not None:
            progress(self.config.warmstart.steps)
        self._warm_metrics = metrics
        return metrics

    def train_round(self, tasks: Sequence[Task], *, round_index: int, seed: int,
                    log: LogFn | None = None) -> dict[str, float]:
        if not tasks:
            raise ValueError("the small learner needs at least one training task")
        if not self.config.keep_optimizer_state:
            self.optimizer = self._new_optimizer()
        start = time.perf_counter()
        rng = np.random.default_rng([seed, round_index, 0x534D4C])
        order: list[int] = []
        P = self.config.prompts_per_step
        scored: list[dict[str, Any]] = []
        stats: list[dict[str, float]] = []
        draw = P * (self.config.max_sampling_batches if self.config.dynamic_sampling else 1)
        groups = 0  # groups sampled so far this round
        for step in range(steps_per_round(self.config, len(tasks))):
            while len(order) < draw:
                order.extend(int(i) for i in rng.permutation(len(tasks)))
            pick = order[:draw]
            out = self.grpo_step([tasks[i] for i in pick], generator=call_generator(seed, round_index, step),
                                 keep_groups=P if self.config.dynamic_sampling else None)
            order = order[int(out["sampled_groups"]):]  # tasks a dynamic step did not sample stay next
            # A step's groups are numbered from 0: number them across the round, so that the
            # per-bucket spread never pools two steps' groups (nor loses a bucket's groups).
            scored.extend({**s, "group": s["group"] + groups} for s in out.pop("scored"))
            groups += int(out["sampled_groups"])
            stats.append(out)
            if log is not None:
                log({"round": round_index, "step": step + 1, **out})
        self.rounds_trained += 1
        warm, self._warm_metrics = self._warm_metrics, {}
        n = max(len(scored), 1)
        return {
            "train/steps": float(len(stats)),
            "train/loss": float(np.mean([s["loss"] for s in stats])),
            "train/clip_fraction": float(np.mean([s["clip_fraction"] for s in stats])),
            "train/mean_reward": sum(s["reward"] for s in scored) / n,
            "train/valid_rate": sum(s["valid"] for s in scored) / n,
            "train/mean_tokens": sum(s["tokens"] for s in scored) / n,
            "train/completions": float(len(scored)),
            "train/seconds": time.perf_counter() - start,
            **bucket_metrics([s["bucket"] for s in scored], [s["group"] for s in scored],
                             [s["reward"] for s in scored]),
            **warm,
        }

    def grpo_step(self, tasks: Sequence[Task], *, generator: Any,
                  keep_groups: int | None = None) -> dict[str, Any]:
        """One GRPO step on ``tasks``: sample G plans each, score, ``num_iterations`` updates.

        ``keep_groups`` (dynamic sampling): sample ``tasks`` in batches of ``prompts_per_step``,
        stop once ``keep_groups`` groups with reward spread are found, and update on those groups
        only; ``sampled_groups`` in the result says how many tasks were sampled."""
        import torch

        from trainers.grpo.trainer import drop_zero_advantage_rows
        from trainers.small.objective import aggregate, clip_fraction, clipped_token_loss, group_advantages
        from trainers.small import codec
        from trainers.small.model import FIELDS, pad_left, sequence_logprobs

        cfg = self.config
        G = cfg.num_generations
        rows, decoded, train_rewards, rewards, scored = self._sample_step(tasks, generator, keep_groups)
        sampled_groups = len(scored) // G
        seqs, written = [], []
        for task, d in zip(rows, decoded):
            prompt = codec.encode_prompt(instance_of(task))
            seqs.append(prompt + d.plan)
            written.append([False] * len(prompt) + d.written)
        advantages = group_advantages(train_rewards, G, cfg.scale_rewards)            # (B,)
        full = pad_left(seqs, written)
        fields = (*FIELDS, "real", "written")
        inputs = {"advantages": advantages, "completion_mask": full.written[:, 1:].float(),
                  **{k: getattr(full, k) for k in fields}}
        kept, scale = drop_zero_advantage_rows(inputs, cfg.loss_type)
        batch = type(full)(*(kept[k] for k in fields))
        mask = kept["completion_mask"]
        self.model.eval()
        with torch.no_grad():
            old = sequence_logprobs(self.model, batch, cfg.temperature)             # (K, T-1)
        losses, clipped, norms = [], [], []
        self.model.train()
        for _ in range(cfg.num_iterations):
            logp = sequence_logprobs(self.model, batch, cfg.temperature)
            token_loss = clipped_token_loss(logp, old, kept["advantages"], cfg.epsilon)
            loss = aggregate(token_loss, mask, cfg.loss_type, mask.shape[1]) * scale
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)))
            self.optimizer.step()
            self._digest.forget()
            losses.append(float(loss.detach()))
            clipped.append(clip_fraction(logp.detach(), old, kept["advantages"], mask, cfg.epsilon))
        self.model.eval()
        return {"loss": float(np.mean(losses)), "clip_fraction": float(np.mean(clipped)),
                "grad_norm": float(np.mean(norms)),
                "reward": float(np.mean(rewards)), "valid": float(np.mean([s["valid"] for s in scored])),
                "kept_rows": float(batch.tok.shape[0]), "sampled_groups": float(sampled_groups), "scored": scored}

    def _sample_step(self, tasks: Sequence[Task], generator: Any, keep_groups: int | None
                     ) -> tuple[list[Task], list[Any], list[float], list[float], list[dict[str, Any]]]:
        """One step's plans: (rows and decoded plans the update trains on, their rewards, every
        sampled plan's reward and record). Without ``keep_groups`` every task is sampled once and
        trained on; with it, batches of ``prompts_per_step`` tasks are sampled until ``keep_groups``
        groups with reward spread are found, and only those (the first found) are trained on."""
        G = self.config.num_generations
        batch_size = len(tasks) if keep_groups is None else self.config.prompts_per_step
        rows: list[Task] = []
        decoded: list[Any] = []
        rewards: list[float] = []
        scored: list[dict[str, Any]] = []
        spread: list[int] = []  # groups whose G rewards differ, in sampling order
        for first in range(0, len(tasks), batch_size):
            batch_rows, batch_decoded, batch_rewards, batch_scored = self._sample_groups(
                tasks[first:first + batch_size], generator, group_offset=first)
            rows, decoded = rows + batch_rows, decoded + batch_decoded
            rewards, scored = rewards + batch_rewards, scored + batch_scored
            if keep_groups is None:
                return rows, decoded, rewards, rewards, scored
            spread += [first + g for g in range(len(batch_rows) // G)
                       if len(set(batch_rewards[g * G:(g + 1) * G])) > 1]
            if len(spread) >= keep_groups:
                break
        chosen = [g * G + j for g in spread[:keep_groups] for j in range(G)] or list(range(G))
        return ([rows[i] for i in chosen], [decoded[i] for i in chosen], [rewards[i] for i in chosen],
                rewards, scored)

    def _sample_groups(self, tasks: Sequence[Task], generator: Any, *,
                       group_offset: int) -> tuple[list[Task], list[Any], list[float], list[dict[str, Any]]]:
        """G plans per task at the training temperature, scored by the testbed: (rows, decoded
        plans, rewards, per-row records), each task's G rows consecutive."""
        from trainers.small.codec import text_of

        G = self.config.num_generations
        rows = [t for t in tasks for _ in range(G)]
        decoded = self.policy().decode(rows, self.config.temperature, generator)
        completions = [Completion(text=text_of(d.paths), num_tokens=max(1, d.num_written)) for d in decoded]
        rewards, scored = [], []
        for i, (task, completion) in enumerate(zip(rows, completions)):
            value, verdict = self.testbed.score(task, completion)
            rewards.append(value)
            scored.append({"reward": value, "valid": float(bool(verdict.get("valid", False))),
                           "tokens": completion.num_tokens, "group": group_offset + i // G,
                           "bucket": str(task.features.get("bucket", ""))})
        self.testbed.observe_training_batch(completions)
        return rows, decoded, rewards, scored

    def policy(self) -> SmallPolicy:
        return SmallPolicy(self.model, self.config)

    def save(self, directory: Path) -> None:
        import torch

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "rounds_trained": self.rounds_trained}, directory / STATE_FILE)

    def weights_digest(self) -> str:
        """sha256 of the weights, computed once per distinct weights (``DigestMemo``)."""
        return self._digest.get(self.model, self._hash_weights)

    def _hash_weights(self) -> str:
        digest = hashlib.sha256()
        for name, param in sorted(self.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(param.detach().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]

    def eval_identity(self, seed: int) -> str:
        # What ``SmallPolicy`` decodes with (the batch too: padding rows change float rounding).
        decoding = self.config.model_dump(include={"d_model", "layers", "heads", "ff_mult", "max_len",
                                                   "local_features", "max_path_factor", "eval_temperature",
                                                   "generation_batch"})
        return json.dumps({"weights": self.weights_digest(), "decoding": decoding,
                           "seed": seed if self.config.eval_temperature > 0 else None}, sort_keys=True)

    def run_info(self) -> dict[str, Any]:
        params = sum(p.numel() for p in self.model.parameters()) if self.model is not None else 0
        return {"trainer": self.name, "algorithm": "GRPO (trainers/small/objective.py)", "parameters": params,
                "rounds_trained": self.rounds_trained, **self.config.model_dump(mode="json")}
