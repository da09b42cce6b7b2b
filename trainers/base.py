"""The trainer interface: learn from one round of tasks, expose a policy, save and restore.

A trainer owns the policy's weights (and optimizer). The controller calls, per round:
``train_round(tasks, ...)`` → ``policy()`` for evaluation and engineers → ``save(dir)``.
``setup(dir)`` restores a saved round on resume.

A trainer receives the run configuration typed as the kernel's ``RunSettings`` (what it may read of
the controller's ``RunConfig``) and reads its own section through its own config class:
``class MineTrainer(Trainer[MineConfig])`` makes ``self.config`` a ``MineConfig``. Every
registered trainer passes the contract suite ``tests/contracts/test_trainers.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from curriculum.core import distributed
from curriculum.core.budget import PaddedTraining, TrainingBudget
from curriculum.core.policy import ModelConfig
from curriculum.core.pool import EnvOutcome
from curriculum.core.run import RunSettings
from curriculum.core.sizing import PlanTarget
from curriculum.core.types import Policy, Task

from testbeds.base import Testbed

LogFn = Callable[[dict[str, Any]], None]
"""Receives one metrics record (already tagged with its step) per training log event."""

ConfigT = TypeVar("ConfigT", bound=BaseModel)
"""A trainer's own config class (its ``config_class``): what ``self.config`` is."""


class Trainer(ABC, Generic[ConfigT]):
    """Base class for learners (GRPO through TRL, or a simulated learner)."""

    writes_text: ClassVar[bool] = True
    """Whether ``policy()`` answers chat prompts with free text (a language model), so that an
    engineer may ask it for a proposal; the small and simulated learners answer their tasks only."""

    # What it declares for the registry (``curriculum.registry.CLASS_DECLARATIONS``); its name is
    # its config's ``name: Literal[...]`` (or, from another package, its entry point's).
    config_class: ClassVar[type[BaseModel]]
    """The pydantic model of its config section (``trainer:`` in a run's config)."""
    trains_on: ClassVar[str]
    """The task kind it needs (one of ``curriculum.core.spaces.TASK_KINDS``, or a kind a testbed
    declares of its own); testbeds whose tasks are of that kind fit."""
    trains: ClassVar[bool] = True
    """Whether ``train_round`` trains; ``False``: it only evaluates (``policy()`` is fixed, the run
    must have ``rounds: 0`` and ``train_round`` refuses), as the endpoint trainer."""
    summary_metrics: ClassVar[tuple[str, ...]] = ()
    """Its own training metrics (``train_round``'s) that a run's round summary shows beside the
    common ones (``curriculum.console``), in this order: a metric's name (the selfplay trainer's
    ``"spade/heldout_win_rate"``), or a prefix ending in ``/`` for every metric under it; the rest
    stay in the round's ``train_metrics.json`` and the run dir's metrics stream."""
    curve_metrics: ClassVar[tuple[str, ...]] = ()
    """Its own training metrics that are rates in [0, 1] measured the same way every round (the
    selfplay trainer's held-out win rate), drawn per round beside the eval score in the run's
    ``plots/eval_metrics.png``."""
    chosen_by_default: ClassVar[bool] = True
    """Whether a run that names no trainer may get this one when its testbed's ``default_trainer``
    does not apply (the first registered such trainer that fits); ``False``: only when named."""
    description: ClassVar[str]
    """Optional: one line for ``curriculum list`` (default: the docstring's first line); read from
    this class only, never inherited."""
    commands: ClassVar[dict[str, str]]
    """Optional: its command-line sub-apps, name → ``"module:function"`` of ``commands(host) ->
    typer.Typer`` (``curriculum.core.commands``), mounted as ``curriculum NAME``; read from this
    class only, never inherited."""

    def __init__(self, run_config: RunSettings, testbed: Testbed, run_dir: Path | None = None) -> None:
        self.run_config = run_config
        self.config: ConfigT = run_config.trainer  # type: ignore[assignment]  # its config_class (registry)
        if not self.trains and run_config.rounds != 0:
            raise ValueError(f"the {self.name} trainer only evaluates: set rounds: 0 (got {run_config.rounds})")
        refuse_misfit(self, testbed)
        self.testbed = testbed
        self.run_dir = run_dir
        """Where metric sinks (TensorBoard) may write; ``None`` for throw-away evaluations."""

    # -- what a run will cost, from the config alone (``--dry-run``; nothing loaded) ------------------
    central_round_share: ClassVar[float | None] = None
    """Share of its counted round work (``training_budget``) the trainer computes, measured, for
    ``--dry-run``'s central estimate; ``None``: the counts, or its ``central_training``."""

    @classmethod
    def central_training(cls, run_config: RunSettings) -> PaddedTraining | None:
        """How the trainer's training pass pads and keeps its counted rows, measured, for
        ``--dry-run``'s central estimate (``central_round_share``, where set, comes first);
        ``None``: the counts."""
        return None

    @classmethod
    def training_budget(cls, run_config: RunSettings) -> TrainingBudget:
        """One round's rollouts and training, the warm start and the evals before round 0 of
        ``run_config`` (the run configuration, its ``trainer`` section this trainer's), in tokens:
        ``--dry-run``'s wall-time estimate. Default: no model trained (a fixed time per round)."""
        return TrainingBudget()

    @classmethod
    def plan_lines(cls, run_config: RunSettings, target: PlanTarget) -> list[str]:
        """``--dry-run``'s plan lines of this trainer on ``target`` (strategy and GPU): its per-round
        budget, memory per GPU, whether it fits. Default: none."""
        return []

    @property
    def name(self) -> str:
        """Registry name: the config section's ``name`` (the registry checks it; write it nowhere else)."""
        return self.config.name

    @abstractmethod
    def setup(self, checkpoint: Path | None) -> None:
        """Load the starting model, or the state saved in ``checkpoint``."""

    def prepare_steps(self) -> int:
        """How many steps ``prepare`` will run (0: it does nothing); drives its progress bar."""
        return 0

    def prepare(self, progress: Callable[[int], None] | None = None,
                examples: Callable[[int, int], list[dict[str, Any]]] | None = None) -> dict[str, float]:
        """Called once on a fresh run, after the baseline eval and before round 0 (e.g. the
        supervised warm start); returns metrics to record. ``examples(n, seed)``: warm-start
        examples the engineer supplies (``Engineer.warmstart_examples``). Does nothing by default."""
        return {}

    @abstractmethod
    def train_round(self, tasks: Sequence[Task], *, round_index: int, seed: int,
                    log: LogFn | None = None) -> dict[str, float]:
        """Train on this round's tasks; return aggregated metrics."""

    @abstractmethod
    def policy(self) -> Policy:
        """The current policy, for evaluation and for engineers that ask it."""

    def base_policy(self) -> Policy:
        """The frozen starting model (loaded on demand); defaults to the current policy."""
        return self.policy()

    def chat_policy(self, model: ModelConfig) -> Policy:
        """A frozen chat model this run does not train, for an engineer that asks its own
        (``engineer.model: local``); generates with the run's ``generation`` settings and is
        loaded once per process (``trainers.lm.chat``)."""
        from trainers.lm.chat import chat_policy

        return chat_policy(model, self.run_config.generation)

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write everything needed to continue training from here into ``directory``."""

    def drop_resume_state(self, directory: Path) -> None:
        """Delete from the checkpoint ``save`` wrote into ``directory`` what only continuing
        training needs (optimizer moments), keeping the weights (``keep_final_optimizer_state``);
        ``setup`` from it then starts a fresh optimizer. Default: nothing to drop."""

    def weights_digest(self) -> str | None:
        """A hash of this process's weights (multi-process runs check that ranks agree)."""
        return None

    def eval_identity(self, seed: int) -> str | None:
        """Everything besides the testbed's suite that decides what ``policy()`` answers in an
        eval with ``seed`` (weights digest, generation settings, precision, engine; the seed only
        where the eval samples), as a string; ``None`` (the default): unknown, so its evals are
        never reused (``curriculum.evalcache``)."""
        return None

    def generation_shard(self) -> tuple[int, int]:
        """(groups, this process's group) for work split over processes: processes of one group
        generate with one engine and must be handed the same prompts. Default: every process
        its own group."""
        return distributed.world_size(), distributed.rank()

    def run_info(self) -> dict[str, Any]:
        """Bookkeeping for engineers' context (epochs per round, hyper-parameters)."""
        return {"trainer": self.name, **self.config.model_dump(mode="json")}

    def env_outcomes(self) -> list[EnvOutcome]:
        """What the last ``train_round`` measured per environment it played (SPADE's regret and
        win rates); the controller stores them in ``RoundReport.env_outcomes``. None by default."""
        return []

    def close(self) -> None:
        """Free memory and engines."""


def refuse_misfit(trainer: Trainer[Any], testbed: Testbed | None) -> None:
    """ValueError when ``testbed`` samples no task of the kind ``trainer`` trains on (its
    ``trains_on`` is not among the testbed's ``task_kinds``), naming both; a run refuses such a
    pair at config time already (``curriculum.registry.check_fit``), this is for code that builds
    a trainer itself. ``None`` (a trainer built without a testbed, in tests) and a testbed that
    declares no task kinds pass."""
    kinds = getattr(testbed, "task_kinds", None)
    wanted = getattr(trainer, "trains_on", None)
    if testbed is None or kinds is None or wanted is None:
        return
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if wanted not in kinds:
        testbed_name = getattr(getattr(testbed, "config", None), "name", None) or type(testbed).__name__
        raise ValueError(f"trainer {trainer.name!r} trains on {wanted} tasks, which testbed {testbed_name!r} does "
                         f"not sample (its tasks: {', '.join(kinds)}): this trainer does not fit this testbed")


class DigestMemo:
    """A torch module's weights digest, computed once per distinct weights.

    Hashing the embedded 135M model takes about a second on a CPU, and one eval site asks for it
    once per suite (its eval-cache key), the warm start once more for its cache key. ``get``
    returns the remembered digest while the weights are the same, else computes it.
    The trainer calls ``forget`` wherever it changes the weights (a load, the warm start, a
    training round): fused optimizers and writes through ``.data`` change a tensor without a
    trace. As a second guard the memo also lapses when a tensor of the module's state dict is
    replaced, moved, or written in place where autograd's version counter sees it.
    ``computed`` counts the digests computed (tests)."""

    def __init__(self) -> None:
        self._stamp: tuple[Any, ...] | None = None
        self._alive: list[Any] = []  # weak references: a remembered tensor id is that tensor's
        self._digest: str | None = None
        self.computed = 0

    def forget(self) -> None:
        self._stamp, self._alive, self._digest = None, [], None

    def get(self, module: Any, compute: Callable[[], str]) -> str:
        """``module``'s digest: the remembered one while its weights are unchanged, else ``compute()``."""
        import weakref

        tensors = list(module.state_dict(keep_vars=True).items())
        try:
            stamp = tuple((name, id(t), t.data_ptr(), t._version, str(t.dtype), tuple(t.shape))
                          for name, t in tensors)
        except RuntimeError:  # e.g. an inference tensor, which has no version counter: never remember
            stamp = None
        if (self._digest is not None and stamp is not None and stamp == self._stamp
                and all(ref() is not None for ref in self._alive)):
            return self._digest
        digest = compute()
        self.computed += 1
        if stamp is not None:
            self._stamp, self._alive, self._digest = stamp, [weakref.ref(t) for _, t in tensors], digest
        return digest
