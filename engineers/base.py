"""The engineer interface: read what happened, propose the next round's training distribution.

An engineer is called once per round, after training and evaluation. It reads the run's
history (a list of ``RoundReport``) and returns a ``Design`` whose ``raw`` field is a proposal
in the testbed's space; the controller then calls ``testbed.project`` to make it legal. Hooks
default to doing nothing, so a new engineer implements ``design`` and nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from curriculum.core.policy import ModelConfig
from curriculum.core.records import Design, RoundReport
from curriculum.core.types import Policy
from testbeds.base import Testbed


@dataclass
class DesignContext:
    """What an engineer may look at when designing the next round."""

    round: int
    """Index of the round that just finished (-1 in ``Engineer.initial_design``: none yet)."""
    total_rounds: int
    """Number of rounds in the run."""
    history: list[RoundReport]
    """All completed rounds so far, oldest first (the last one is ``round``), each as
    ``RoundReport.engineer_view()``: validation results only, never the test suite's
    (``__post_init__`` removes them, whoever builds the context)."""
    proposal: BaseModel
    """The proposal the last round trained on."""
    testbed: Testbed
    """The testbed (its proposal model, bounds and ``project``)."""
    rng: np.random.Generator
    """Seeded per round by the controller; use it for any randomness."""
    policy: Policy | None = None
    """The current policy checkpoint, for engineers that ask the policy itself."""
    base_policy: Callable[[], Policy] | None = None
    """Loads the frozen starting model on demand (the paper's base-model-as-engineer ablation)."""
    chat_model: Callable[[ModelConfig], Policy] | None = None
    """Loads a frozen chat model the run does not train (once per process), for an engineer that
    asks its own model: e.g. the checkpoint engineer beside a learner that cannot write a proposal."""
    run_info: dict[str, Any] = field(default_factory=dict)
    """Training bookkeeping (epochs per round, trainer hyper-parameters) for context modules."""
    shard: tuple[int, int] = (1, 0)
    """(groups, this process's group) when ``design`` runs on every rank (``collective_design``):
    a group's processes share one generation engine and get the same share of the work."""

    def __post_init__(self) -> None:
        self.history = [report.engineer_view() for report in self.history]


class Engineer(ABC):
    """Base class. Subclasses implement ``design`` (the registry names them)."""

    shapes_round0: ClassVar[bool] = False
    """Round 0 (warm start, training, eval) depends on this engineer, so ``compare`` must not
    start its runs from a round 0 shared with other engineers (``curriculum.stem``). Engineers
    that add ``warmstart_examples`` count as such without saying so."""

    collective_design: ClassVar[bool] = False
    """Under several processes, ``design`` runs on every rank (to shard its work; the main process's
    return value is used, and only the main process may write); otherwise on the main process only."""

    # What it declares for the registry (``curriculum.registry.CLASS_DECLARATIONS``); its name is
    # its config's ``name: Literal[...]`` (or, from another package, its entry point's).
    config_class: ClassVar[type[BaseModel]]
    """The pydantic model of its config section (``engineer:`` in a run's config)."""
    fits: ClassVar[tuple[str, ...]]
    """The proposal-space kinds it can edit (``curriculum.core.spaces``; ``ANY``: every space)."""
    description: ClassVar[str]
    """Optional: one line for ``curriculum list`` (default: the docstring's first line); read from
    this class only, never inherited."""
    commands: ClassVar[dict[str, str]]
    """Optional: its command-line sub-apps, name → ``"module:function"`` of ``commands(host) ->
    typer.Typer`` (``curriculum.core.commands``), mounted as ``curriculum NAME``; read from this
    class only, never inherited."""

    def __init__(self, config: BaseModel, *, run_dir: str | None = None) -> None:
        self.config = config
        self.run_dir = run_dir

    @property
    def name(self) -> str:
        """Registry name: the config section's ``name`` (the registry checks it; write it nowhere else)."""
        return self.config.name

    @abstractmethod
    def design(self, ctx: DesignContext) -> Design:
        """Propose the next round's raw proposal."""

    @classmethod
    def design_budget(cls, config: BaseModel, engineer_max_new_tokens: int) -> tuple[int, int, int]:
        """(model calls, prompt tokens, new tokens each) of one ``design``, from the config alone
        (``--dry-run``'s time estimate); engineers that ask no model return (0, 0, 0)."""
        return 0, 0, 0

    @classmethod
    def run_view(cls, run_dir: Path, item: str | None = None) -> Any:
        """``curriculum show RUN_DIR --envs`` (``item`` ``None``) or ``--env ITEM``: a rich
        renderable of what this engineer kept in ``run_dir`` (SPADE: the environments it designed);
        ``None``: it keeps nothing to show. ``FileNotFoundError`` / ``KeyError`` name what is missing."""
        return None

    @classmethod
    def plan_lines(cls, config: BaseModel) -> list[str]:
        """``--dry-run``'s plan lines of this engineer (e.g. which documents it will read), from its
        config section alone; default none."""
        return []

    @classmethod
    def trainer_problem(cls, config: BaseModel, trainer: type) -> str | None:
        """Why this engineer, configured by ``config``, cannot work beside a ``trainer`` (its
        class), or ``None``. Asked before a run opens its directory, so a misfit costs nothing
        (e.g. asking the trained policy for text when that policy writes plans)."""
        return None

    @classmethod
    def resume_problem(cls, config: BaseModel, run_dir: Path, state: dict[str, Any] | None,
                       *, writing: bool = True) -> str | None:
        """Why this engineer's own files in ``run_dir`` (beside the rounds, so outside their
        checksums) cannot be resumed from, in one line, or ``None``. ``state`` is the engineer
        state of the round the resume continues after (``None``: from scratch). Asked by a
        resume before it moves or saves anything, and by ``curriculum doctor`` (``writing``
        False: look without taking any lock or writing); default none."""
        return None

    # -- hooks (do nothing by default) ----------------------------------------------------------
    def on_run_start(self, testbed: Testbed, initial_proposal: BaseModel) -> None:
        """Called once when a run starts or resumes."""

    @property
    def designs_round0(self) -> bool:
        """Whether ``initial_design`` designs round 0's proposal (from this engineer's config).
        The controller builds that call's context, which loads the policy, only when it does;
        default False. An engineer class that overrides ``initial_design`` also runs its own
        round 0 in a comparison (``curriculum.stem``)."""
        return False

    def initial_design(self, ctx: DesignContext) -> Design | None:
        """On a fresh run, after the trainer's preparation (warm start) and before round 0: a
        design whose ``raw`` replaces the testbed's initial proposal (projected like any design),
        or ``None`` to keep that proposal. ``ctx.round`` is -1, ``ctx.history`` empty,
        ``ctx.proposal`` the testbed's initial proposal. A run that restarts before its round 0
        is committed asks again, so an engineer that made an expensive one should reread what it
        saved in its run directory. Called only when ``designs_round0``."""
        return None

    def on_round_end(self, report: RoundReport) -> None:
        """Called after a round is committed to disk, with its ``engineer_view()`` (no test results)."""

    def warmstart_examples(self, n: int, seed: int) -> list[dict[str, Any]]:
        """Supervised warm-start examples (prompt/completion chat pairs) for the engineer's own
        role in the policy, when the engineer is the policy (SPADE's designer); the trainer's warm
        start adds them to its own. None by default."""
        return []

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state saved with every round; engineers that derive all from history keep none."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""

    def close(self) -> None:
        """Release resources (model endpoints, studies)."""
