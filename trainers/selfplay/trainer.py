"""SPADE co-training (the SPADE paper): one policy, two roles, one GRPO update per rollout step.

One round of the controller is one SPADE rollout step t. Its tasks (from the spade engineer's
design call after step t-1, made with the same weights) are of two kinds (``Task.data["kind"]``):

* ``"env"`` — an admitted environment (``PoolEnvironment``: ``hash``, ``program``, ``hint``,
  ``skill``, ``setting``, optional ``class_name``);
* ``"design"`` — one designer generation (``DesignSample``: ``design_id``, ``skill``, ``messages``
  (the design prompt), ``completion`` (its text), ``admitted``, ``reason``, ``env_id`` (when
  admitted), ``penalty`` (when rejected), optional ``completion_ids`` + ``behaviour_logprobs``
  (generation-time log-probs; when absent they are computed now, before any update, i.e. under the
  same weights)).

Both are the kernel's pool types (``curriculum.core.pool``), read back with ``pool_item``. Step t then:

1. admits the new environments into the training pool and buffers the design samples
   (``trainers.selfplay.buffer``); a rejected design is scored at once with its admission penalty;
2. plays the play set (the environments of this step's admitted designs, then the least-played pool
   environments up to ``envs_per_step``): G episodes without the hint and G with it each
   (``trainers.selfplay.play``), through the sandbox pool;
3. scores designs: designer signal ``regret`` → this step's designs, 0.4 * clip(regret/0.15, 0, 1) +
   0.6 * anchor(win rate) from this step's plays; or ``learning_potential`` → the buffered designs
   due now (generated k steps ago), 0.4 * clip(LP/0.15, 0, 1) + 0.6 * anchor(latest win rate) with
   LP = |EMA_fast - EMA_slow| / (2 (a_fast - a_slow)) of their environment's return over its plays
   since (the environment is replayed every step until then) (``trainers.selfplay.rewards``); then
   centres them per skill together with the rejected ones.
   Designs marked ``trainable: false`` (a frozen designer, or ``train_designer: false``) are
   scored for the logs and never buffered;
4. builds the update batch: agent rows (one per unhinted episode; hinted too when
   ``train_on_hinted``) with reward R = episode return, grouped by (environment, hint condition),
   and designer rows popped from the buffer (generated at step t-k, k = ``designer_delay``), with
   their centred reward, grouped by skill; advantages per role, each role on its own:
   A_i = (r_i - mean_group(r)) / (std_role(r - mean_group) + eps) (GRPO's mean and std, the two
   roles normalised separately; ``agent_advantage`` / ``designer_advantage: centred`` drop the std
   division of either, the public code's designer advantage being centred only);
5. hands the batch to TRL's ``GRPOTrainer`` through ``rollout_func`` (``prompt_ids``,
   ``completion_ids``, ``logprobs`` and ``env_mask``: environment turns are masked out of the loss)
   and overrides TRL's group advantages with the per-role ones. Designer rows get per-token
   truncated importance weights w_t = min(exp(logp_now_t - logp_behaviour_t), cap), applied as a
   per-token advantage A_i * w_t (identical to scaling the token's clipped surrogate, w_t >= 0).
   With vLLM and TRL's ``vllm_importance_sampling_correction`` on, TRL itself multiplies every
   token's loss by min(exp(logp_trainer - logp_sampling), cap), and for designer rows the sampling
   log-probs we return *are* the behaviour log-probs, so TRL applies the same weight and ours is
   skipped (no double correction);
6. retires environments: mastered (unhinted win rate >= ``retire_win_rate``) or stale (played
   ``max_plays`` times), and the oldest beyond ``pool_size``.
7. with ``heldout_games``, plays the run's held-out seed-library games after the update: unhinted,
   ``heldout_episodes`` each, from the same seeds every round (``trainers.selfplay.heldout``,
   ``testbeds.spade.heldout.games``); ``spade/heldout_win_rate`` is the player's skill on one fixed set
   of games, comparable across rounds. Those programs never enter the pool.

Several processes (``accelerate launch``, DDP / ZeRO / FSDP): every rank reads the same tasks
(the proposal is broadcast by the controller) and the same state. The play set is split over
generation groups — each rank, or each tensor-parallel group sharing one colocated vLLM engine —
environment i going to group i mod groups, played in that rank's own sandbox pool from the reset
seeds it has in the whole set; the episodes are gathered to every rank in set order. The main
process alone then runs 3, 4 and 6 (it owns the designer buffer, the pool and the EMAs; the
environment memory is the engineer's, on the main process too) and broadcasts the rows, its
state and the metrics; the other ranks load that state, so every rank holds the same state after
every step. The update is one optimizer step over the global batch: rank r trains rows r, r+W, …
(padded to a multiple of W with fully masked rows), DDP / ZeRO average the gradients, so the
weights stay identical on every rank (the controller logs each rank's weight digest). With the
``grpo`` loss a padding row still counts in the per-row mean, scaling the step by
n / (W·ceil(n/W)) (at most (W-1)/n away from 1). Design generation and admission are sharded in
the engineer's design call (``SpadeEngineer.collective_design``).

Everything the next steps depend on — the pool, the designer buffer, the EMA trackers, the step
counter and the NumPy generator — is saved with the checkpoint (``selfplay_state.json``) and
restored exactly by ``setup``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from curriculum.core import distributed
from curriculum.core.budget import TrainingBudget
from curriculum.core.pool import DesignSample, EnvOutcome, PoolEnvironment, pool_item
from curriculum.core.sizing import PlanTarget
from curriculum.core.types import Task
from testbeds.base import Testbed
from testbeds.spade.heldout.games import HeldoutRecord
from testbeds.spade.sandbox import SandboxConfig
from trainers.base import LogFn
from trainers.grpo.trainer import GRPOConfig, GRPOTrainerAdapter, _constant_schedule, log_forwarder
from trainers.selfplay import rewards as R
from trainers.selfplay.buffer import DelayedDesignerBuffer, DesignerSample
from trainers.selfplay.play import Episode, PlayConfig, TransformersTurnModel, TurnModel, play, summarise

STATE_FILE = "selfplay_state.json"
LOGPROB_CHUNK = 1024
"""Completion positions per LM-head call in ``sequence_logprobs``."""


class PoolSettings(BaseModel):
    """The training pool of admitted environments."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    pool_size: int = Field(64, ge=1)
    """Most environments kept; the oldest leave first."""
    envs_per_step: int = Field(4, ge=1)
    """Environments played per rollout step (those of this step's admitted designs always, then the least played)."""
    retire_win_rate: float = Field(0.9, ge=0.0, le=1.0)
    """Retire an environment once the agent wins this share of its unhinted episodes (mastered)."""
    max_plays: int = Field(8, ge=1)
    """Retire an environment after this many rollout steps in the play set (stale)."""


class SelfPlayConfig(GRPOConfig):
    """SPADE co-training on top of the GRPO adapter's settings.

    Of the inherited GRPO fields, ``prompts_per_step``, ``num_generations``, ``epochs_per_round``,
    ``max_steps_per_round`` and ``warmstart_steps`` are not used: each round is one rollout step
    with one optimizer update over every agent and designer row it produced.
    """

    name: Literal["selfplay"]  # type: ignore[assignment]
    """Selects this trainer."""
    play: PlayConfig = Field(default_factory=PlayConfig)
    """Agent episodes: G, turn and token limits, temperature."""
    pool: PoolSettings = Field(default_factory=PoolSettings)
    """Training pool size and retirement."""
    designer_signal: Literal["regret", "learning_potential"] = "regret"
    """Designer reward: hint regret + anchor (the method, scored at the design's first play), or
    learning potential + anchor (ablation): |fast − slow EMA| of the agent's return on the
    environment over its plays from the design's step to its training step k = ``designer_delay``
    steps later takes the regret's place in the blend; the anchor reads the latest win rate."""
    regret_scale: float = Field(R.REGRET_SCALE, gt=0.0)
    """Regret that earns the full regret term: clip(regret / scale, 0, 1)."""
    regret_weight: float = Field(R.REGRET_WEIGHT, ge=0.0)
    """Weight of the regret term in the blend."""
    anchor_weight: float = Field(R.ANCHOR_WEIGHT, ge=0.0)
    """Weight of the anchor in the blend."""
    anchor_low: float = Field(R.ANCHOR_LOW, ge=0.0, le=1.0)
    """Lower end of the anchor's plateau."""
    anchor_high: float = Field(R.ANCHOR_HIGH, ge=0.0, le=1.0)
    """Upper end of the anchor's plateau."""
    anchor_ramp: float = Field(R.ANCHOR_RAMP, gt=0.0)
    """Width of the anchor's linear ramps."""
    anchor_on: Literal["no_hint", "all"] = "no_hint"
    """Win rate the anchor reads: unhinted episodes (default) or all 2G."""
    ema_fast: float = Field(0.35, gt=0.0, le=1.0)
    """Step size of the fast return EMA (learning potential; public SPADE code ``lp_gamma_fast``)."""
    ema_slow: float = Field(0.15, gt=0.0, le=1.0)
    """Step size of the slow return EMA (learning potential; public SPADE code ``lp_gamma_slow``)."""
    designer_delay: int = Field(4, ge=0)
    """k: a designer sample is trained k rollout steps after it was generated."""
    designer_max_wait: int = Field(8, ge=0)
    """Steps past due after which an unscored designer sample is dropped."""
    is_cap: float = Field(2.0, gt=0.0)
    """Cap of the truncated importance weight of delayed designer samples."""
    train_designer: bool = True
    """Train the designer role. ``false`` is the public code's no-designer-training ablation
    (``--spade-no-train-on-env-trajectories``): the policy still designs, its designs are played and
    scored, but never trained on (``engineer.designer: base`` freezes the designer's weights too)."""
    agent_warmstart: bool = False
    """Warm-start the agent role on the seed library's solutions (``trainers/selfplay/warmstart.py``)
    when ``warmstart.steps > 0``; the designer role's examples come from ``engineer.designer_warmstart``."""
    agent_warmstart_examples: int | None = Field(None, ge=1)
    """Agent examples (moves) in that warm start (``None``: as many as every other source,
    ``warmstart.examples`` or steps x batch size)."""
    agent_warmstart_seeds: list[str] | None = None
    """Names of the seed-library environments played in that warm start (``None``: all of the
    setting's); a parametrised game is played as a fresh variant in every episode."""
    train_on_hinted: bool = False
    """Also train the agent on its hinted episodes (default: they only measure regret)."""
    agent_advantage: Literal["role_std", "centred"] = "role_std"
    """Agent rows: group-centred return divided by the agent role's std (``role_std``), or only
    centred (``centred``)."""
    designer_advantage: Literal["role_std", "centred"] = "role_std"
    """Designer rows: the per-skill mean-centred reward divided by the designer role's std
    (``role_std``: GRPO's mean and std, normalised apart from the agent role), or only centred
    (``centred``: the public SPADE code, which leaves the designer on its own scale)."""
    micro_batch_size: int = Field(8, ge=1)
    """Rows per forward/backward pass (the update accumulates over the whole step)."""
    sandbox: SandboxConfig = Field(default_factory=lambda: SandboxConfig(workers=2))
    """Sandbox for playing environments (the synthetic prelude, ``ToolEnv``, is added)."""
    vllm_tensor_parallel_size: int = Field(1, ge=1)
    """GPUs one colocated vLLM engine spans (tensor parallel; it must divide the number of processes).
    A model whose bf16 weights do not fit in one GPU's vLLM share needs more than 1."""
    heldout_games: list[str] | int = 0
    """The player's skill across rounds: seed-library games of the setting held out of training
    and played unhinted after every round's update, from the same seeds every round
    (``testbeds/spade/heldout/games.py``; metrics ``spade/heldout_win_rate`` and ``spade/heldout/<game>``).
    A list names the games; a number n draws n of them from the run seed, among the games
    ``agent_warmstart_seeds`` does not name; 0 or ``[]``: off (the paper has no such curve). The set
    is recorded in the run directory (``spade_heldout_games.json``) and a resume plays that set."""
    heldout_episodes: int = Field(8, ge=1)
    """Unhinted episodes per held-out game per round (turn and token limits: ``play``); a round
    plays games x this many extra episodes."""

    @model_validator(mode="before")
    @classmethod
    def _play_temperature(cls, data: Any) -> Any:
        """``play.temperature`` defaults to the training ``temperature``."""
        if isinstance(data, dict):
            play = data.get("play") or {}
            if isinstance(play, dict) and "temperature" not in play:
                data = {**data, "play": {**play, "temperature": data.get("temperature", 1.0)}}
        return data

    @model_validator(mode="after")
    def _learning_potential_window(self) -> SelfPlayConfig:
        if self.ema_fast <= self.ema_slow:
            raise ValueError(f"ema_fast ({self.ema_fast}) must be larger than ema_slow ({self.ema_slow})")
        if self.designer_signal == "learning_potential" and self.designer_delay < 1:
            raise ValueError("designer_signal: learning_potential measures the change of the agent's return over "
                             "the plays between a design and its training step: it needs designer_delay >= 1")
        return self

    @model_validator(mode="after")
    def _heldout_games(self) -> SelfPlayConfig:
        spec = self.heldout_games
        if isinstance(spec, int) and spec < 0:
            raise ValueError(f"heldout_games must be seed-library names or a count >= 0, not {spec}")
        if not isinstance(spec, int):
            if len(set(spec)) != len(spec):
                raise ValueError(f"heldout_games names a game twice: {spec}")
            clash = sorted(set(spec) & set(self.agent_warmstart_seeds or ()))
            if clash:
                raise ValueError(f"heldout_games {clash} are also in agent_warmstart_seeds: "
                                 "a held-out game must not be trained on")
        return self

    def heldout_count(self) -> int:
        """How many held-out games a round plays."""
        return self.heldout_games if isinstance(self.heldout_games, int) else len(self.heldout_games)

    @model_validator(mode="after")
    def _same_temperature(self) -> SelfPlayConfig:
        if self.play.temperature != self.temperature:
            raise ValueError(f"play.temperature ({self.play.temperature}) must equal temperature ({self.temperature}): "
                             "the loss and the importance weights read log-probs at the training temperature")
        return self


class SelfPlayTrainer(GRPOTrainerAdapter):
    """One model, two roles: plays admitted environments and trains agent and designer rows."""

    config_class = SelfPlayConfig
    trains_on = "pool"
    curve_metrics = ("spade/heldout_win_rate",)
    summary_metrics = ("spade/heldout_win_rate", "spade/win_rate", "spade/regret_played", "spade/new_envs",
                       "spade/admission_rate", "spade/pool_size")
    """The player's skill on the held-out games and on the pool, the regret of what it played, the
    designs admitted (count and rate) and the pool's size; the other ``spade/`` metrics (designer
    reward parts, win rates with the hint, rejections by reason, ...) are in ``train_metrics.json``."""
    description = "SPADE co-training: one policy as designer and agent (GRPO via TRL rollout_func)."
    central_round_share = 0.25
    """Its counts take designs at their token limit, every episode turn at ``max_new_tokens_per_turn``
    for ``max_turns`` turns, prompts at their round figures and every row trained at the longest
    row's length; the CPU preset's rounds took 0.21-0.30 of the count's seconds in the eight runs of
    its comparison that ran two side by side with nothing else (one thread each): games end early (a
    win or a loss in one turn of a few tokens) and TRL pads each micro-batch of one row to that row."""

    @classmethod
    def training_budget(cls, run_config: Any) -> TrainingBudget:
        from trainers.grpo.plan import grpo_budget, selfplay_round_work

        return replace(grpo_budget(run_config, selfplay_round_work(run_config)), optimizer_steps_per_round=1)

    @classmethod
    def plan_lines(cls, run_config: Any, target: PlanTarget) -> list[str]:
        from trainers.grpo.plan import selfplay_plan_lines

        return selfplay_plan_lines(run_config, target)

    def __init__(self, run_config: Any, testbed: Testbed, run_dir: Path | None = None) -> None:
        super().__init__(run_config, testbed, run_dir)
        cfg: SelfPlayConfig = self.config
        self.buffer = DelayedDesignerBuffer(cfg.designer_delay, cfg.designer_max_wait)
        self.pool_envs: dict[str, dict[str, Any]] = {}
        """env_id → {env fields, added, plays, win_rate, ...} (insertion order = age)."""
        self.retired: dict[str, str] = {}
        """env_id → why it left the pool (``mastered``, ``stale``, ``overflow``); never re-admitted."""
        self.ema: dict[str, list[float]] = {}
        """env_id → [fast, slow, plays]: EMAs of the agent's mean unhinted return over its plays."""
        self.last_win: dict[str, list[float]] = {}
        """env_id → [win rate, hinted win rate] at its latest play (the LP ablation's anchor reads it)."""
        self.step = 0
        self.rng = np.random.default_rng(run_config.seed)
        self._sandbox: Any = None
        self.turn_model: TurnModel | None = None
        """Set by tests to script the agent; otherwise the policy's own ``TransformersTurnModel``."""
        self.last_rows: list[dict[str, Any]] = []
        """The previous update's rows (role, group, reward, advantage, ids): for tests and logs."""
        self.last_env_results: dict[str, EnvOutcome] = {}
        """Per environment results of the previous step (handed to the engineer by ``env_outcomes``)."""
        self.heldout: HeldoutRecord | None = None
        """The run's held-out games (``heldout_games``), set by ``setup``; never in the pool."""
        self._heldout_excluded = 0
        """Environments of this step's tasks left out because they are held-out games."""

    # -- state ------------------------------------------------------------------------------------
    def setup(self, checkpoint: Path | None) -> None:
        super().setup(checkpoint)
        path = checkpoint / STATE_FILE if checkpoint is not None else None
        state = json.loads(path.read_text()) if distributed.is_main() and path is not None and path.is_file() else None
        state = distributed.broadcast(state)  # the main process's copy, also across nodes
        if state is not None:
            self.load_state_dict(state)
        self.heldout = self._heldout_record()

    def _heldout_record(self) -> HeldoutRecord | None:
        """The run's held-out games (``trainers/selfplay/heldout.py``): the main process reads the run
        directory's record or makes (and writes) a new one; every rank gets its copy."""
        from trainers.selfplay.heldout import resolve_record

        record = None
        if distributed.is_main():
            setting = getattr(self.run_config.testbed, "setting", "games")
            record = resolve_record(self.config, setting, self.run_config.seed, self.run_dir, write=True)
        data = distributed.broadcast(record.model_dump(mode="json") if record is not None else None)
        return HeldoutRecord.model_validate(data) if data is not None else None

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "buffer": self.buffer.state_dict(), "pool": self.pool_envs,
                "retired": self.retired,
                "ema": self.ema, "last_win": self.last_win, "rng": self.rng.bit_generator.state,
                "last_env_results": {k: v.model_dump(mode="json") for k, v in self.last_env_results.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.buffer.load_state_dict(state["buffer"])
        self.pool_envs = dict(state["pool"])
        self.retired = dict(state["retired"])
        self.ema = {k: list(v) for k, v in state["ema"].items()}
        self.last_win = {k: list(v) for k, v in state.get("last_win", {}).items()}
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]
        self.last_env_results = {k: EnvOutcome.model_validate(v) for k, v in state.get("last_env_results", {}).items()}

    def save(self, directory: Path) -> None:
        super().save(directory)
        if distributed.is_main():
            (directory / STATE_FILE).write_text(json.dumps(self.state_dict(), sort_keys=True))

    def warmstart_examples(self, n: int, seed: int) -> list[dict[str, Any]]:
        """The agent role's warm start on the seed library (``agent_warmstart``), without the
        held-out games."""
        if not self.config.agent_warmstart:
            return []
        from testbeds.spade.synthetic.seeds import seed_library
        from trainers.selfplay.heldout import warmstart_names
        from trainers.selfplay.warmstart import agent_examples

        setting = self.run_config.testbed.setting
        names = warmstart_names([s.name for s in seed_library(setting)], self.config.agent_warmstart_seeds,
                                self.heldout)
        return agent_examples(setting, self.config.play, self.sandbox(),
                              self.config.agent_warmstart_examples or n, seed, names=names)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        super().close()

    def run_info(self) -> dict[str, Any]:
        info = super().run_info()
        info.update({"trainer": "selfplay", "algorithm": "SPADE co-training (GRPO via TRL)"})
        return info

    def env_outcomes(self) -> list[EnvOutcome]:
        return list(self.last_env_results.values())

    # -- pieces -----------------------------------------------------------------------------------
    def sandbox(self) -> Any:
        if self._sandbox is None:
            from testbeds.spade.sandbox import SandboxPool
            from testbeds.spade.synthetic import prelude_source

            cfg = self.config.sandbox
            if not cfg.prelude_source:
                cfg = cfg.model_copy(update={"prelude_source": prelude_source()})
            self._sandbox = SandboxPool(cfg)
            self._sandbox.start()
        return self._sandbox

    def _turn_model(self) -> TurnModel:
        """Scripted (tests), else TRL's vLLM engine once one exists (weights synced), else transformers."""
        if self.turn_model is not None:
            return self.turn_model
        engine = getattr(self._trl, "vllm_generation", None) if self._trl is not None else None
        if engine is not None and getattr(engine, "llm", None) is not None:
            from trainers.selfplay.play import VLLMTurnModel

            engine.sync_weights()
            return VLLMTurnModel(engine.llm, self.tokenizer)
        return TransformersTurnModel(self.model, self.tokenizer,
                                     batch_size=self.config.play.batch_size or self.config.micro_batch_size)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def sequence_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """log_softmax(logits / T) of each completion token under the current weights; the LM head
        runs over ``LOGPROB_CHUNK`` positions at a time, so a long design never holds its full
        T x V logits."""
        import torch

        model = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        ids = torch.tensor([prompt_ids + completion_ids], device=model.device)
        was_training = model.training
        model.eval()
        out: list[float] = []
        try:
            with torch.no_grad():
                hidden = model.get_decoder()(input_ids=ids).last_hidden_state[0, len(prompt_ids) - 1:-1]
                head = model.get_output_embeddings()
                targets = torch.tensor(completion_ids, device=hidden.device)
                for start in range(0, len(completion_ids), LOGPROB_CHUNK):
                    logits = head(hidden[start:start + LOGPROB_CHUNK]).float() / self.config.temperature
                    logp = torch.log_softmax(logits, dim=-1)
                    chunk = targets[start:start + LOGPROB_CHUNK]
                    out += logp.gather(1, chunk[:, None])[:, 0].tolist()
        finally:
            model.train(was_training)
        return out

    def _design_sample(self, design: DesignSample) -> DesignerSample:
        from trainers.lm.generation import render_chat

        trainable = design.trainable and self.config.train_designer
        parts = {} if design.admitted else {"penalty": -1.0 if design.penalty is None else float(design.penalty)}
        if not trainable:  # a frozen designer's output: scored for the logs, never trained (no tokens)
            return DesignerSample(id=design.design_id, step=self.step, skill=design.skill,
                                  prompt_ids=[], completion_ids=[], behaviour_logprobs=[],
                                  env_id=design.env_id, admitted=design.admitted,
                                  reason=design.reason, trainable=False, parts=parts)
        prompt_ids = self._encode(render_chat(self.tokenizer, design.messages))
        completion_ids = design.completion_ids or self._encode(design.completion)
        if self.tokenizer.eos_token_id is not None and (not completion_ids or completion_ids[-1] != self.tokenizer.eos_token_id):
            completion_ids = [*completion_ids, self.tokenizer.eos_token_id]
        behaviour = design.behaviour_logprobs
        if behaviour is None or len(behaviour) != len(completion_ids):
            behaviour = self.sequence_logprobs(prompt_ids, completion_ids)
        return DesignerSample(
            id=design.design_id, step=self.step, skill=design.skill,
            prompt_ids=prompt_ids, completion_ids=list(completion_ids), behaviour_logprobs=list(behaviour),
            env_id=design.env_id, admitted=design.admitted, reason=design.reason, parts=parts,
        )

    def _play_set(self, required: list[str]) -> list[str]:
        limit = self.config.pool.envs_per_step
        chosen = list(required)
        rest = [e for e in self.pool_envs if e not in chosen]
        # least played first; ties broken by a seeded shuffle (resumes identically: rng is saved)
        order = self.rng.permutation(len(rest)) if rest else []
        rest = [rest[i] for i in order]
        rest.sort(key=lambda e: self.pool_envs[e]["plays"])
        chosen += rest[:max(0, limit - len(chosen))]
        return chosen

    def _designer_rewards(self, designs: list[DesignerSample],
                          stats: dict[str, dict[str, Any]]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Uncentred value of each design that can be scored now, centred per skill among them.

        ``regret``: this step's designs, from their environment's plays this step (admitted but
        unplayed: no reward yet). ``learning_potential``: ``designs`` are the buffered ones due now;
        their value is the blend of their environment's LP over every play so far and the anchor
        at its latest win rate. Rejected: their penalty."""
        cfg: SelfPlayConfig = self.config
        regret = cfg.designer_signal == "regret"
        scored = [d for d in designs if not d.admitted or not regret or d.env_id in stats]
        raw: list[float] = []
        parts: dict[str, dict[str, float]] = {}
        for d in scored:
            if not d.admitted:
                p = {"penalty": d.parts["penalty"]}
                value = p["penalty"]
            elif regret:
                s = stats[d.env_id]
                rate = s["win_rate"] if cfg.anchor_on == "no_hint" else (s["win_rate"] + s["win_rate_hint"]) / 2
                p = R.designer_reward(s["returns_hint"], s["returns"], rate, scale=cfg.regret_scale,
                                      regret_weight=cfg.regret_weight, anchor_weight=cfg.anchor_weight,
                                      low=cfg.anchor_low, high=cfg.anchor_high, ramp=cfg.anchor_ramp)
                p["learning_potential"] = s["learning_potential"]
                p["win_rate"], p["win_rate_hint"] = s["win_rate"], s["win_rate_hint"]
                value = p["reward"]
            else:
                lp = self._lp_parts(d.env_id)
                win, win_hint = self.last_win.get(d.env_id or "", [0.0, 0.0])
                rate = win if cfg.anchor_on == "no_hint" else (win + win_hint) / 2
                p = {**lp, **R.learning_potential_reward(
                    lp["learning_potential"], rate, scale=cfg.regret_scale, regret_weight=cfg.regret_weight,
                    anchor_weight=cfg.anchor_weight, low=cfg.anchor_low, high=cfg.anchor_high,
                    ramp=cfg.anchor_ramp)}
                p["win_rate"], p["win_rate_hint"] = win, win_hint
                value = p["reward"]
            raw.append(value)
            parts[d.id] = {**p, "uncentred": value}
        centred = R.center_by_group(raw, [d.skill for d in scored])
        return {d.id: c for d, c in zip(scored, centred, strict=True)}, parts

    def _lp_parts(self, env_id: str | None) -> dict[str, float]:
        """Learning potential of an environment from its return EMAs (0 before a second play)."""
        fast, slow, *plays = self.ema.get(env_id or "", [0.0, 0.0, 0.0])
        plays = plays[0] if plays else 0.0  # checkpoints before the play count kept [fast, slow]
        lp = R.learning_potential(fast, slow, self.config.ema_fast, self.config.ema_slow)
        return {"learning_potential": lp, "ema_fast": fast, "ema_slow": slow, "plays": plays}

    def _lp_waiting(self) -> set[str]:
        """Environments whose buffered design waits for its learning-potential window to close."""
        if self.config.designer_signal != "learning_potential":
            return set()
        return {d.env_id for d in self.buffer.pending() if d.admitted and d.reward is None and d.env_id}

    # -- one rollout step ---------------------------------------------------------------------------
    def train_round(self, tasks: Sequence[Task], *, round_index: int, seed: int,
                    log: LogFn | None = None) -> dict[str, float]:
        """One rollout step on every rank: plays sharded, the main process scores and batches,
        every rank takes its share of the one update (module docstring, "Several processes")."""
        self._check_multiprocess()
        started = time.monotonic()
        self.step = round_index
        new_envs, designs, step_envs = self._read_tasks(tasks)
        # play every environment of this step's admitted designs (their reward needs plays), then
        # the least-played pool environments (new ones without a design, e.g. an initial pool, included)
        # (a design that re-creates a retired environment is played once more, outside the pool).
        known = {**step_envs, **self.pool_envs}
        designed = [d.env_id for d in designs if d.admitted and d.env_id in known]
        designed += sorted(e for e in self._lp_waiting() if e in known)  # LP: replay until scored
        play_ids = self._play_set(list(dict.fromkeys(designed)))
        envs = [PoolEnvironment.model_validate(known[e]["env"]) for e in play_ids]
        episodes = self._play_sharded(envs, seed)
        batch = None
        if distributed.is_main():  # the buffer, the pool and the EMAs are the main process's
            batch = self._score_and_batch(designs, known, envs, episodes, new_envs)
        batch = distributed.broadcast(batch)
        if not distributed.is_main():
            self.load_state_dict(batch["state"])
        rows = batch["rows"]
        self.last_rows = rows
        # the update: every rank trains its share of the global batch
        train = {"train/loss": 0.0, "train/steps": 0.0}
        train.update(self._importance_weights(rows))
        if len(rows) >= 2:  # a single row has no group to compare with
            train.update(self._update(rows, seed, round_index, log))
        self._digest.forget()  # the weights may have changed
        train.update(self._play_heldout())  # the player's skill after this round's update
        metrics = {**batch["metrics"], **train, "train/seconds": time.monotonic() - started}
        if log is not None:
            log({"round": round_index, "event": "spade_step", **metrics})
        return metrics

    def _play_heldout(self) -> dict[str, float]:
        """The held-out games, unhinted, from the record's seeds (the same every round), and their
        metrics (``trainers/selfplay/heldout.py``); none without held-out games."""
        if self.heldout is None:
            return {}
        from trainers.selfplay.heldout import heldout_metrics

        started = time.monotonic()
        record = self.heldout
        config = self.config.play.model_copy(update={"episodes_per_condition": record.episodes})
        episodes = self._play_sharded(record.environments(), record.seed, config=config, conditions=(False,))
        return {**heldout_metrics(record, episodes), "spade/heldout_excluded": float(self._heldout_excluded),
                "spade/heldout_seconds": time.monotonic() - started}

    def _check_multiprocess(self) -> None:
        """Sharded weights (ZeRO-3, FSDP) need every rank in every forward pass: plays then go
        through vLLM (one engine per rank or tensor-parallel group), not the transformers fallback."""
        sharded = (os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"
                   or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true")
        if distributed.world_size() > 1 and sharded and self.turn_model is None and not self._use_vllm():
            raise ValueError("selfplay under ZeRO-3/FSDP plays through vLLM: set trainer.use_vllm=true "
                             "(ranks play different environments, so transformers generation cannot shard weights)")

    def _read_tasks(self, tasks: Sequence[Task]) -> tuple[list[str], list[DesignerSample], dict[str, dict[str, Any]]]:
        """New environments enter the pool; designs become buffered samples (same on every rank)."""
        new_envs: list[str] = []
        designs: list[DesignerSample] = []
        step_envs: dict[str, dict[str, Any]] = {}
        held = self.heldout.hashes() if self.heldout is not None else frozenset()
        self._heldout_excluded = 0
        for task in tasks:
            item = pool_item(task)
            if isinstance(item, PoolEnvironment) and item.hash in held:  # measured, never trained on
                self._heldout_excluded += 1
            elif isinstance(item, PoolEnvironment):
                info = {"env": item.model_dump(mode="json"), "added": self.step, "plays": 0,
                        "win_rate": None, "win_rate_hint": None}
                step_envs[item.hash] = info
                if item.hash not in self.pool_envs and item.hash not in self.retired:
                    self.pool_envs[item.hash] = info
                    new_envs.append(item.hash)
            else:
                designs.append(self._design_sample(item))
        return new_envs, designs, step_envs

    def generation_shard(self) -> tuple[int, int]:
        """(groups, this rank's group): ranks sharing one tensor-parallel vLLM engine play the same
        environments (and generate the same design calls); otherwise every rank is its own group."""
        world, rank = distributed.world_size(), distributed.rank()
        engine = getattr(self._trl, "vllm_generation", None) if self._trl is not None else None
        tp = self.config.vllm_tensor_parallel_size if engine is not None and self.turn_model is None else 1
        return max(world // tp, 1), rank // tp

    def _play_sharded(self, envs: list[PoolEnvironment], seed: int, *, config: PlayConfig | None = None,
                      conditions: Sequence[bool] = (False, True)) -> list[Episode]:
        """Each group plays environments i with i % groups == group in its own sandbox pool, from
        the seeds environment i gets in the whole set; the episodes are gathered in set order."""
        if not envs:
            return []
        groups, group = self.generation_shard()
        mine = [i for i in range(len(envs)) if i % groups == group]
        model = self._turn_model()  # on every rank: syncing vLLM weights can be collective
        played = play(self.sandbox(), [envs[i] for i in mine], model, config or self.config.play, seed=seed,
                      indices=mine, conditions=conditions) if mine else []
        per_env: dict[int, list[Episode]] = {}
        for rank_mine, rank_played in distributed.gather((mine, played)):
            for i in rank_mine:
                per_env.setdefault(i, [e for e in rank_played if e.env_id == envs[i].hash])
        return [ep for i in range(len(envs)) for ep in per_env[i]]

    def _score_and_batch(self, designs: list[DesignerSample], known: dict[str, dict[str, Any]],
                         envs: list[PoolEnvironment], episodes: list[Episode],
                         new_envs: list[str]) -> dict[str, Any]:
        """Main process: play statistics, designer rewards, the buffer, the update's rows with
        per-role advantages over the global batch, retirement; returned for broadcasting."""
        cfg: SelfPlayConfig = self.config
        stats = summarise(envs, episodes)
        for env_id, s in stats.items():
            previous = self.ema.get(env_id)
            fast, slow = R.lp_update(previous, R.mean(s["returns"]), cfg.ema_fast, cfg.ema_slow)
            plays = previous[2] if previous and len(previous) > 2 else float(previous is not None)
            self.ema[env_id] = [fast, slow, plays + 1.0]
            s["learning_potential"] = R.learning_potential(fast, slow, cfg.ema_fast, cfg.ema_slow)
            s["regret"] = R.regret(s["returns_hint"], s["returns"])
            s["raw_regret"] = R.raw_regret(s["returns_hint"], s["returns"])
            entry = known[env_id]
            entry["plays"] += 1
            entry["win_rate"], entry["win_rate_hint"] = s["win_rate"], s["win_rate_hint"]
            self.last_win[env_id] = [s["win_rate"], s["win_rate_hint"]]
        # 3. buffer this step's trainable designs (a frozen designer's are only scored, for the logs);
        # score this step's designs (regret) or the buffered ones due now (learning potential)
        self.buffer.add([d for d in designs if d.trainable])
        if cfg.designer_signal == "learning_potential":
            designs_to_score = [d for d in self.buffer.pending()
                                if d.reward is None and d.step + cfg.designer_delay <= self.step]
        else:
            designs_to_score = designs
        rewards, parts = self._designer_rewards(designs_to_score, stats)
        buffered = {d.id for d in self.buffer.pending()}
        self.buffer.score({k: v for k, v in rewards.items() if k in buffered}, parts)
        due = self.buffer.pop_due(self.step)
        # 4. rows and per-role advantages
        rows = self._agent_rows(episodes) + [self._designer_row(d) for d in due]
        std_roles = [role for role, mode in (("agent", cfg.agent_advantage), ("designer", cfg.designer_advantage))
                     if mode == "role_std"]
        advantages = R.role_advantages([r["reward"] for r in rows], [r["group"] for r in rows],
                                       [r["role"] for r in rows], std_roles=std_roles)
        for row, adv in zip(rows, advantages, strict=True):
            row["advantage"] = adv
        retired = self._retire(stats)
        self.last_env_results = {e: _outcome(e, s) for e, s in stats.items()}
        metrics = self._metrics(designs, parts, stats, new_envs, episodes, rows, due, retired)
        return {"state": self.state_dict(), "rows": rows, "metrics": metrics}

    def _importance_weights(self, rows: list[dict[str, Any]]) -> dict[str, float]:
        """Per-token truncated IS weights min(pi_now / pi_behaviour, cap) of the delayed designer
        rows under the weights this update starts from. Every rank computes all of them (the same
        forward passes everywhere, so sharded weights gather in step); with vLLM's IS correction on,
        TRL applies the same weight itself and this is skipped."""
        designer = [r for r in rows if r["role"] == "designer"]
        trl_corrects = self._use_vllm()
        seen: list[float] = []
        for row in designer:
            if trl_corrects:
                break
            now = np.asarray(self.sequence_logprobs(row["prompt_ids"], row["completion_ids"]))
            w = R.truncated_is_weights(now, np.asarray(row["behaviour"]), self.config.is_cap)
            row["is_weights"] = [float(x) for x in w]
            seen += row["is_weights"]
        clipped = sum(w >= self.config.is_cap for w in seen)
        return {"spade/is_weight_mean": float(np.mean(seen)) if seen else 1.0,
                "spade/is_weight_clipped_frac": clipped / len(seen) if seen else 0.0,
                "spade/advantage_agent_mean": R.mean([r["advantage"] for r in rows if r["role"] == "agent"]),
                "spade/advantage_designer_mean": R.mean([r["advantage"] for r in designer])}

    def _agent_rows(self, episodes: list[Episode]) -> list[dict[str, Any]]:
        rows = []
        for ep in episodes:
            if ep.model_tokens == 0 or (ep.hinted and not self.config.train_on_hinted):
                continue
            rows.append({"role": "agent", "group": f"{ep.env_id}|{'hint' if ep.hinted else 'plain'}",
                         "reward": ep.ret, "prompt_ids": ep.prompt_ids, "completion_ids": ep.completion_ids,
                         "env_mask": ep.env_mask, "logprobs": ep.logprobs, "behaviour": None, "id": ep.env_id})
        return rows

    def _designer_row(self, d: DesignerSample) -> dict[str, Any]:
        return {"role": "designer", "group": d.skill, "reward": float(d.reward), "prompt_ids": d.prompt_ids,
                "completion_ids": d.completion_ids, "env_mask": [1] * len(d.completion_ids),
                "logprobs": d.behaviour_logprobs, "behaviour": d.behaviour_logprobs, "id": d.id,
                "generated_step": d.step}

    def _retire(self, stats: dict[str, dict[str, Any]]) -> dict[str, int]:
        pool = self.config.pool
        mastered = [e for e, s in stats.items() if s["win_rate"] >= pool.retire_win_rate]
        mastered = [e for e in mastered if e in self.pool_envs]
        waiting = self._lp_waiting()  # LP windows still open: not stale yet
        stale = [e for e in stats if e in self.pool_envs and e not in mastered and e not in waiting
                 and self.pool_envs[e]["plays"] >= pool.max_plays]
        for e in mastered:
            self.retired[e] = "mastered"
        for e in stale:
            self.retired[e] = "stale"
        for e in mastered + stale:
            self.pool_envs.pop(e, None)
        overflow = max(0, len(self.pool_envs) - pool.pool_size)
        for e in list(self.pool_envs)[:overflow]:
            self.pool_envs.pop(e)
            self.retired[e] = "overflow"
        return {"mastered": len(mastered), "stale": len(stale), "overflow": overflow}

    def _metrics(self, designs, parts, stats, new_envs, episodes, rows, due, retired) -> dict[str, float]:
        out: dict[str, float] = {}
        n = len(designs)
        out["spade/designs"] = float(n)
        out["spade/admission_rate"] = sum(d.admitted for d in designs) / n if n else 0.0
        reasons: dict[str, int] = {}
        for d in designs:
            if not d.admitted:
                reasons[d.reason or "rejected"] = reasons.get(d.reason or "rejected", 0) + 1
        for reason, count in sorted(reasons.items()):
            out[f"spade/rejected/{reason}"] = count / n
        admitted_parts = [p for p in parts.values() if "penalty" not in p]  # the designs scored this step
        for key in ("regret", "raw_regret", "regret_term", "lp_term", "anchor", "learning_potential", "uncentred"):
            vals = [p[key] for p in admitted_parts if key in p]
            out[f"spade/designer/{key}"] = R.mean(vals)
        uncentred = [p["uncentred"] for p in parts.values()]  # every design scored now, rejected included
        out["spade/designer/reward_uncentred_all"] = R.mean(uncentred)
        out["spade/designer/reward_std_all"] = R.std(uncentred)
        out["spade/designer/reward_min_all"] = min(uncentred, default=0.0)
        out["spade/designer/reward_max_all"] = max(uncentred, default=0.0)
        out["spade/win_rate"] = R.mean([s["win_rate"] for s in stats.values()])
        out["spade/win_rate_hint"] = R.mean([s["win_rate_hint"] for s in stats.values()])
        out["spade/regret_played"] = R.mean([s["regret"] for s in stats.values()])
        out["spade/regret_played_max"] = max((s["regret"] for s in stats.values()), default=0.0)
        out["spade/regret_positive_envs"] = float(sum(s["regret"] > 0 for s in stats.values()))
        out["spade/agent_return"] = R.mean([e.ret for e in episodes if not e.hinted])
        out["train/mean_reward"] = out["spade/agent_return"]  # the controller's round table shows this key
        out["spade/agent_return_hint"] = R.mean([e.ret for e in episodes if e.hinted])
        out["spade/episodes"] = float(len(episodes))
        out["spade/env_failures"] = float(sum(s["env_failures"] for s in stats.values()))
        out["spade/agent_rows"] = float(sum(r["role"] == "agent" for r in rows))
        out["spade/designer_rows"] = float(len(due))
        out["spade/designer_frozen"] = float(sum(not d.trainable for d in designs))
        out["spade/designer_buffered"] = float(len(self.buffer))
        out["spade/pool_size"] = float(len(self.pool_envs))
        out["spade/new_envs"] = float(len(new_envs))
        for key, value in retired.items():
            out[f"spade/retired_{key}"] = float(value)
        return out

    # -- the GRPO update ----------------------------------------------------------------------------
    def _update(self, rows: list[dict[str, Any]], seed: int, round_index: int, log: LogFn | None) -> dict[str, float]:
        """One optimizer step over all rows; rank r trains rows r, r+W, ... of the global batch
        (padded to a multiple of W with fully masked rows) and DDP/ZeRO averages the gradients."""
        from datasets import Dataset
        from transformers import PrinterCallback
        from trl import GRPOConfig as TRLConfig

        cfg: SelfPlayConfig = self.config
        local = shard_rows(rows, distributed.rank(), distributed.world_size())
        n = len(local)
        accum = next(a for a in range(math.ceil(n / cfg.micro_batch_size), n + 1) if n % a == 0)
        args = TRLConfig(
            # SPADE's correction is per token, capped at its own is_cap, and always on: it weights the
            # delayed designer rows (off-policy by design), not only the sampler's numerics, so it
            # overrides the shared IS settings (``_importance_weights`` leaves it to TRL with vLLM).
            **{**self._shared_trl_args(seed), "logging_steps": 1, "vllm_importance_sampling_correction": True,
               "vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": cfg.is_cap},
            per_device_train_batch_size=n // accum, gradient_accumulation_steps=accum,
            num_generations=n * distributed.world_size(), max_steps=1, scale_rewards="none",
            max_completion_length=max(len(r["completion_ids"]) for r in rows),
            vllm_tensor_parallel_size=cfg.vllm_tensor_parallel_size,
            shuffle_dataset=False,
        )

        def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
            if len(prompts) != n:
                raise RuntimeError(f"selfplay expected one TRL batch of {n} rows per process, got {len(prompts)}")
            return {"prompt_ids": [r["prompt_ids"] for r in local],
                    "completion_ids": [r["completion_ids"] for r in local],
                    "logprobs": [r["logprobs"] for r in local],
                    "env_mask": [r["env_mask"] for r in local],
                    "spade_reward": [r["reward"] for r in local]}

        def spade_reward(prompts: list, completions: list, spade_reward: list, **_: Any) -> list[float]:
            return [float(v) for v in spade_reward]

        with self._colocated_engine():  # one engine for every step's trainer
            trainer = _SpadeGRPO(
                rows=local, model=self.model, reward_funcs=[spade_reward], args=args,
                train_dataset=Dataset.from_list([{"prompt": "spade rollout step"}]),
                processing_class=self.tokenizer, callbacks=[log_forwarder(log, round_index)], rollout_func=rollout,
                optimizers=(self.optimizer, _constant_schedule(self.optimizer)) if self.optimizer else (None, None),
            )
        self._adopt_engine(trainer)
        trainer.remove_callback(PrinterCallback)
        result = trainer.train()
        self.model = trainer.accelerator.unwrap_model(trainer.model)
        self._trl = trainer
        return {"train/loss": float(result.training_loss), "train/steps": float(trainer.state.global_step)}


def shard_rows(rows: list[dict[str, Any]], rank: int, world: int) -> list[dict[str, Any]]:
    """Rank ``rank``'s rows of the global batch: every ``world``-th row, after padding the batch to
    a multiple of ``world`` with copies of its first rows whose ``env_mask`` is all 0 and advantage
    0 (no token of a padding row enters the loss or the KL term)."""
    missing = -len(rows) % world
    pads = [{**rows[k % len(rows)], "role": "pad", "advantage": 0.0, "is_weights": None,
             "env_mask": [0] * len(rows[k % len(rows)]["completion_ids"])} for k in range(missing)]
    return (rows + pads)[rank::world]


def _outcome(env_id: str, stats: dict[str, Any]) -> EnvOutcome:
    """The typed record of one environment's plays this step (what the engineer's memory stores)."""
    return EnvOutcome(env_id=env_id, skill=stats["skill"], win_rate=stats["win_rate"],
                      win_rate_hint=stats["win_rate_hint"], mean_return=R.mean(stats["returns"]),
                      mean_return_hint=R.mean(stats["returns_hint"]), regret=stats["regret"],
                      raw_regret=stats["raw_regret"], learning_potential=stats["learning_potential"],
                      env_failures=stats["env_failures"])


def trim_padding(inputs: dict[str, Any]) -> dict[str, Any]:
    """A micro batch of TRL's GRPO inputs without the columns that are padding in every row.

    TRL pads the whole step's rows to one width (prompts on the left, completions on the right)
    and slices micro batches out of it, so a micro batch of short agent episodes is run at the
    width of the step's longest design row. Dropping the leading prompt columns that are masked
    in every row and the trailing completion columns that are masked in every row (those are
    padding; environment tokens inside a completion keep ``completion_mask`` 1 and are masked by
    ``tool_mask``) leaves the loss unchanged: masked positions take no part in attention or in
    the loss's sums, and rotary position embeddings see the same relative positions."""
    import torch

    prompt_mask, completion_mask = inputs["prompt_mask"], inputs["completion_mask"]
    rows, width = completion_mask.shape
    used = prompt_mask.bool().any(dim=0).nonzero()
    start = int(used[0]) if len(used) else 0
    used = completion_mask.bool().any(dim=0).nonzero()
    end = int(used[-1]) + 1 if len(used) else 1
    out = dict(inputs)
    for key, value in inputs.items():
        if not torch.is_tensor(value) or value.dim() != 2 or value.size(0) != rows:
            continue
        if key in ("prompt_ids", "prompt_mask"):
            out[key] = value[:, start:]
        elif value.size(1) == width:
            out[key] = value[:, :end]
    return out


def _spade_grpo_class() -> type:
    from trl import GRPOTrainer

    class SpadeGRPO(GRPOTrainer):
        """TRL's GRPO with SPADE's per-role advantages; delayed designer rows carry per-token
        truncated IS weights (``SelfPlayTrainer._importance_weights``) folded into the advantage."""

        def __init__(self, *args: Any, rows: list[dict[str, Any]], **kwargs: Any) -> None:
            os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
            super().__init__(*args, **kwargs)
            self.spade_rows = rows

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            return super()._compute_loss(model, trim_padding(inputs))

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            import torch

            out = super()._generate_and_score_completions(inputs)
            rows = self.spade_rows
            width = out["completion_ids"].size(1)
            adv = torch.tensor([r["advantage"] for r in rows], dtype=torch.float32,
                               device=out["completion_ids"].device)[:, None].expand(len(rows), width).clone()
            for i, row in enumerate(rows):
                if row["role"] == "designer" and row.get("is_weights"):
                    w = row["is_weights"]
                    adv[i, :len(w)] *= torch.tensor(w, dtype=adv.dtype, device=adv.device)
            out["advantages"] = adv
            return out

    return SpadeGRPO


_SpadeGRPO_cache: type | None = None


def _SpadeGRPO(**kwargs: Any) -> Any:  # noqa: N802 - used like a class; built on first use (imports TRL)
    global _SpadeGRPO_cache
    if _SpadeGRPO_cache is None:
        _SpadeGRPO_cache = _spade_grpo_class()
    return _SpadeGRPO_cache(**kwargs)
