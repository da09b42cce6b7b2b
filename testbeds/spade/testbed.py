"""The SPADE testbed: the proposal is the environment pool (plus the last design call's samples),
training tasks are what the ``selfplay`` trainer plays and trains, evaluation is held out.

Proposal (``SpadeProposal``): ``environments`` — admitted programs (``PoolEnvironment``), and
``designs`` — the design generations of the call that produced this proposal (``DesignSample``);
both types are the kernel's (``curriculum.core.pool``), shared with the engineer and the trainer.

``sample(proposal, n, seed)`` returns one ``env_task`` per environment and one ``design_task``
per design (``n`` is ignored: a SPADE step plays its pool, it does not draw i.i.d. prompts).

Initial pool (``initial_pool``): ``none`` (SPADE: the designer fills it; also the spade engineer's
``frozen_pool``, which designs round 0's whole pool before round 0 — the fixed-environment GRPO
baseline), ``reasoning_gym`` (reasoning-gym datasets as environment programs from training seeds
disjoint from the eval's; no hints), ``seed_library`` (the project's seed library of the setting,
``testbeds/spade/synthetic/seeds``), ``programs:<dir>`` (``*.py`` files, hint in ``<name>.hint``), or
``memory:<run dir>`` (the active admitted environments of an earlier SPADE run's memory, as its
engineer last saved them in ``<run dir>/spade_pool.jsonl``, or a ``curriculum spade export``
directory). With the ``fixed`` engineer the pool then never changes.

Evaluation (``evaluate``), every ``eval_every`` calls and at call ``final_eval_call`` (set it to
``rounds - 1``; a baseline eval before training counts as a call too when enabled): games →
reasoning-gym maths / algorithmic / cognition (``testbeds.spade.heldout.reasoning``), each item's score
in ``task_scores`` by its content (``item_key``: what ``curriculum compare`` pairs at the level of
seeds); tools → the fixed tool suite (``testbeds.spade.heldout.tools``). Skipped calls report
``heldout/evaluated = 0`` and the score of the last measured call (so curves stay flat rather
than falling to 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from curriculum.core.config import PluginConfig
from curriculum.core.pool import DesignSample, PoolEnvironment, design_task, env_task, program_hash
from curriculum.core.presets import Preset
from curriculum.core.spaces import PoolSpace
from curriculum.core.types import Change, Completion, EvalReport, Policy, Task
from testbeds.base import Testbed
from testbeds.spade.heldout.reasoning import ReasoningGymEval
from testbeds.spade.heldout.tools import ToolSuiteEval
from testbeds.spade.sandbox import SandboxConfig
from testbeds.spade.saved_pool import load_pool


class SpadeProposal(BaseModel):
    """The pool a SPADE step trains on, and the designs that produced it."""

    model_config = ConfigDict(extra="forbid")

    environments: list[PoolEnvironment] = Field(default_factory=list)
    """Admitted environments."""
    designs: list[DesignSample] = Field(default_factory=list)
    """The last design call's samples."""


class SpadeTestbedConfig(PluginConfig):
    """SPADE pool testbed with held-out evaluation."""

    name: Literal["spade_pool"]
    """Selects this testbed."""
    setting: Literal["games", "tools"] = "games"
    """Which held-out suite evaluates the policy."""
    initial_pool: str = "none"
    """``none``, ``reasoning_gym``, ``seed_library``, ``programs:<dir>`` or ``memory:<run dir>``
    (module docstring)."""
    reasoning_gym_train: list[str] = Field(default_factory=lambda: ["basic_arithmetic", "chain_sum", "gcd",
                                                                      "number_sorting", "spell_backward",
                                                                      "letter_counting", "number_sequence"])
    """Datasets of the fixed reasoning-gym environment set (``initial_pool: reasoning_gym``)."""
    reasoning_gym_items: int = Field(200, ge=1)
    """(question, answer) pairs per fixed reasoning-gym environment."""
    reasoning_gym_train_levels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Dataset of ``reasoning_gym_train`` → its reasoning-gym config values (a level, as the held-out
    suite's ``reasoning_gym.levels``); a dataset not named keeps reasoning-gym's defaults."""
    reasoning_gym: ReasoningGymEval = Field(default_factory=ReasoningGymEval)
    """Held-out reasoning-gym eval (games)."""
    tools: ToolSuiteEval = Field(default_factory=ToolSuiteEval)
    """Held-out tool suite (tools)."""
    eval_every: int = Field(1, ge=1)
    """Evaluate every N ``evaluate`` calls (one per round)."""
    final_eval_call: int | None = Field(None, ge=0)
    """Always evaluate at this call (the last round's index)."""
    sandbox: SandboxConfig = Field(default_factory=lambda: SandboxConfig(workers=2))
    """Sandbox for the held-out tool suite (the ``ToolEnv`` prelude is added)."""

    @model_validator(mode="after")
    def _train_levels_name_train_datasets(self) -> SpadeTestbedConfig:
        if unknown := sorted(set(self.reasoning_gym_train_levels) - set(self.reasoning_gym_train)):
            raise ValueError(f"reasoning_gym_train_levels names datasets not in reasoning_gym_train: "
                             f"{', '.join(unknown)} (reasoning_gym_train: {', '.join(self.reasoning_gym_train)})")
        return self


def load_initial_pool(spec: str, config: SpadeTestbedConfig) -> list[PoolEnvironment]:
    """The starting pool named by ``spec``."""
    if spec == "none":
        return []
    if spec == "reasoning_gym":
        from testbeds.spade.heldout.reasoning import training_environments

        return training_environments(config.reasoning_gym_train, config.reasoning_gym_items,
                                     levels=config.reasoning_gym_train_levels)
    if spec == "seed_library":
        from testbeds.spade.synthetic.seeds import seed_library

        return [PoolEnvironment(hash=program_hash(s.program), setting=config.setting, skill=s.skill, hint=s.hint,
                                program=s.program) for s in seed_library(config.setting)]
    kind, _, where = spec.partition(":")
    if kind == "programs":
        out = []
        for path in sorted(Path(where).glob("*.py")):
            hint_path = path.with_suffix(".hint")
            program = path.read_text()
            out.append(PoolEnvironment(hash=program_hash(program), setting=config.setting, skill=path.stem,
                                       hint=hint_path.read_text().strip() if hint_path.is_file() else "",
                                       program=program))
        return out
    if kind == "memory":
        return load_pool(where)
    raise ValueError(f"unknown initial_pool {spec!r} "
                     "(none, reasoning_gym, seed_library, programs:<dir>, memory:<run dir>)")


def _valid_items(items: Any, model: type[BaseModel], path: str, changes: list[Change]) -> list[Any]:
    """The entries of ``items`` that validate as ``model``; each dropped one is recorded in ``changes``."""
    if not isinstance(items, list):
        changes.append(Change(path=path, proposed=str(items)[:200], applied=[], reason="not a list: dropped"))
        return []
    out = []
    for i, item in enumerate(items):
        try:
            out.append(model.model_validate(item))
        except ValidationError as err:
            changes.append(Change(path=f"{path}.{i}", proposed=str(item)[:200], applied=None,
                                  reason=f"dropped malformed {path[:-1]}: {err.errors()[0]['msg']}"))
    return out


class SpadeTestbed(Testbed):
    """Pool proposals, ``env``/``design`` tasks for the ``selfplay`` trainer, held-out eval."""

    config_class = SpadeTestbedConfig
    task_kinds = ("pool",)
    default_trainer = "selfplay"
    prompt_share = 0.17
    """The CPU preset's held-out reasoning-gym questions with the instruction and the chat template
    are 67 tokens on average, 68 padded per eval call of 8: 68 / 400."""
    eval_answer_fill = 0.15
    """The CPU preset answers its reasoning-gym questions in ``\\boxed{...}``, a few tokens of the 48
    allowed: its round evals took 35-40 s on one thread (two runs side by side, nothing else
    running) where the count at every answer's limit says 7-8x that."""
    description = ("SPADE's pool of model-written environments; held-out reasoning-gym (games) or "
                   "tool-suite eval.")
    commands: ClassVar[dict[str, str]] = {"sandbox": "testbeds.spade.cli_sandbox:commands"}

    samples_exactly_n = False  # one task per pool environment and per design, whatever n is
    eval_suites = ("validation",)
    """One held-out suite: the reasoning-gym games or tool suite that ``evaluate`` scores is a
    different task family from the pool's model-written environments (nothing in training can
    equal one of its items), so there is no second suite to split off; reports score on it and
    label it ``validation``."""
    presets: ClassVar[tuple[Preset, ...]] = (
        Preset("spade_games_cpu_demo.yaml", "cpu", trainer="selfplay",
               summary="embedded 135M model, games, structured designs, cached warm starts"),
        Preset("spade_games_qwen3_4b.yaml", "gpu", trainer="selfplay",
               summary="the paper's 4B games set-up: Qwen3-4B-Instruct-2507"),
    )

    proposal_model = SpadeProposal
    proposal_space = PoolSpace()

    def __init__(self, config: SpadeTestbedConfig, seed: int = 0) -> None:
        self.config = config
        self.seed = seed
        self.eval_calls = 0
        self.last_eval: dict[str, Any] | None = None
        self._sandbox: Any = None

    # -- proposals ----------------------------------------------------------------------------------
    def initial_proposal(self, rng: np.random.Generator) -> SpadeProposal:
        return SpadeProposal(environments=load_initial_pool(self.config.initial_pool, self.config))

    def random_proposal(self, rng: np.random.Generator) -> SpadeProposal:
        """A random subset of the initial pool (the ``random`` engineer over a fixed set)."""
        envs = self.initial_proposal(rng).environments
        keep = [e for e in envs if rng.random() < 0.5] or envs[:1]
        return SpadeProposal(environments=keep)

    def project(self, raw: Any, previous: BaseModel) -> tuple[SpadeProposal, list[Change]]:
        changes: list[Change] = []
        if isinstance(raw, SpadeProposal):
            return raw, changes
        if not isinstance(raw, dict) or not ({"environments", "designs"} & set(raw)):
            changes.append(Change(path="", proposed=str(raw)[:200], applied="previous proposal",
                                  reason="no 'environments' or 'designs': kept the previous proposal"))
            return previous, changes
        envs = _valid_items(raw.get("environments", []), PoolEnvironment, "environments", changes)
        designs = _valid_items(raw.get("designs", []), DesignSample, "designs", changes)
        return SpadeProposal(environments=envs, designs=designs), changes

    # -- tasks --------------------------------------------------------------------------------------
    def sample(self, proposal: BaseModel, n: int, seed: int) -> list[Task]:
        return [*map(env_task, proposal.environments), *map(design_task, proposal.designs)]

    def score(self, task: Task, completion: Completion) -> tuple[float, dict[str, Any]]:
        """Not used: the ``selfplay`` trainer takes returns from the environments it plays. A
        single-turn completion of a pool task earns 0 with a verdict that says so."""
        return 0.0, {"valid": False, "reason": "spade_pool tasks are played by the selfplay trainer "
                                               "(trainer.name=selfplay), not scored one completion at a time"}

    # -- evaluation ---------------------------------------------------------------------------------
    def _tool_sandbox(self) -> Any:
        if self._sandbox is None:
            from testbeds.spade.sandbox import SandboxPool
            from testbeds.spade.synthetic import prelude_source

            cfg = self.config.sandbox
            self._sandbox = SandboxPool(cfg.model_copy(update={"prelude_source": prelude_source() + cfg.prelude_source}))
            self._sandbox.start()
        return self._sandbox

    @classmethod
    def eval_budget(cls, config: BaseModel, default_max_new_tokens: int,
                    suite: str = "validation") -> tuple[int, int]:
        """Per call on average (``eval_every``); games: the reasoning-gym items, tools: the suite's tasks."""
        if config.setting == "games":
            rg = config.reasoning_gym
            items = sum(len(names) for names in rg.datasets.values()) * rg.per_dataset
            return max(1, items // config.eval_every), rg.max_new_tokens
        return 0, 0

    def evaluate(self, policy: Policy, *, seed: int = 0, suite: str = "validation") -> EvalReport:
        self.check_suite(suite)
        call = self.eval_calls
        self.eval_calls += 1
        due = call % self.config.eval_every == 0 or call == self.config.final_eval_call
        if not due and self.last_eval is not None:
            return EvalReport(score=self.last_eval["score"], metrics={"heldout/evaluated": 0.0,
                                                                      "heldout/call": float(call)}, suite=suite)
        if self.config.setting == "games":
            from testbeds.spade.heldout.reasoning import evaluate_items, training_questions

            trained = (training_questions(self.config.reasoning_gym_train, self.config.reasoning_gym_items,
                                          levels=self.config.reasoning_gym_train_levels)
                       if self.config.initial_pool == "reasoning_gym" else frozenset())
            metrics, breakdown, samples, items = evaluate_items(policy, self.config.reasoning_gym, seed=seed,
                                                                exclude=trained)
            score = metrics["reasoning_gym/mean"]
        else:
            from testbeds.spade.heldout.tools import evaluate as tools_evaluate

            metrics, breakdown, samples = tools_evaluate(policy, self.config.tools, self._tool_sandbox(), seed=seed)
            score, items = metrics["tools/mean"], {}
        metrics = {**metrics, "heldout/evaluated": 1.0, "heldout/call": float(call)}
        self.last_eval = {"score": score, "call": call}
        return EvalReport(score=score, metrics=metrics, breakdown=breakdown, samples=samples, suite=suite,
                          task_scores=items)

    def state_dict(self) -> dict[str, Any]:
        return {"eval_calls": self.eval_calls, "last_eval": self.last_eval}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.eval_calls = int(state.get("eval_calls", 0))
        self.last_eval = state.get("last_eval")

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
