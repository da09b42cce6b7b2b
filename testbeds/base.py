"""The testbed interface: what a curriculum controls and how a policy is scored on it.

A testbed owns four things:

* its **proposal space** — the pydantic model an engineer edits (for MAPF-FrozenLake the
  per-size generator config), including the legal bounds of every field;
* ``project`` — forcing any raw engineer output into that legal space, recording each change;
* ``sample`` — turning a proposal into training ``Task``s, deterministically from a seed;
* ``score`` / ``evaluate`` — the reward of one completion and the eval report of a policy.

**Held-out suites.** ``evaluate(policy, suite=...)`` scores one of the testbed's ``eval_suites``:

* ``"validation"`` — what engineers read (its per-bucket rates, failure breakdown, score);
* ``"test"`` — what reports, ``compare`` and the demo score on; the controller stores it in
  ``RoundReport.test``, which engineers never receive (``RoundReport.engineer_view``).

The two are generated from their own seeds and are **disjoint by content**, and ``sample`` and
``warmstart_tasks`` never return an instance whose content is in either (they redraw it): the
content is ``canonical(task)`` (MAPF-FrozenLake: map, starts and goals; reasoning-gym: the
prompt). A testbed with a single held-out suite declares ``eval_suites = ("validation",)``; its
reports then score on that suite and say so.

Everything the controller stores about a round (proposals, eval reports) is plain JSON, so
run directories stay readable and resumable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from curriculum.core.presets import Preset
from curriculum.core.reporting import ReportLayout
from curriculum.core.spaces import ProposalSpace
from curriculum.core.types import Change, Completion, EvalReport, Policy, Task

REPOSITORY = Path(__file__).resolve().parents[1]
"""The checkout the shipped configs (``configs/``) live in."""


class Testbed(ABC):
    """Base class for testbeds. Subclasses set ``proposal_model`` and implement the methods."""

    proposal_model: ClassVar[type[BaseModel]]
    """The pydantic model engineers edit."""
    proposal_space: ClassVar[ProposalSpace]
    """How engineers read and write that model (``curriculum.core.spaces``); its kind must be the
    one the registry entry declares (``offers``)."""
    def allowed_space(self) -> ProposalSpace:
        """The part of ``proposal_space`` this run may use (a testbed whose config narrows the
        space, e.g. to some buckets or knob ranges, returns the narrowed space; ``project`` moves
        every proposal into it). Engineers that tell a model what to write show it this space."""
        return self.proposal_space

    eval_suites: ClassVar[tuple[str, ...]] = ("validation", "test")
    """The held-out suites ``evaluate`` accepts (module docstring): both, or ``("validation",)``
    for a testbed with one held-out suite."""
    samples_exactly_n: ClassVar[bool] = True
    """``sample(proposal, n, ...)`` returns exactly ``n`` tasks. Pool testbeds (SPADE) return one
    task per pool entry instead and set this to ``False``."""

    # What it declares for the registry (``curriculum.registry.CLASS_DECLARATIONS``); its name is
    # its config's ``name: Literal[...]`` (or, from another package, its entry point's).
    config_class: ClassVar[type[BaseModel]]
    """The pydantic model of its config section (``testbed:`` in a run's config)."""
    task_kinds: ClassVar[tuple[str, ...]]
    """The kinds of task it samples (``curriculum.core.spaces.TASK_KINDS``, or kinds of its own,
    ``is_task_kind`` names); trainers fit by these."""
    default_trainer: ClassVar[str | None] = None
    """Optional: the trainer a run that names none gets, when it is registered and fits (else the
    first registered trainer that fits)."""
    description: ClassVar[str]
    """Optional: one line for ``curriculum list`` (default: the docstring's first line); read from
    this class only, never inherited."""
    commands: ClassVar[dict[str, str]]
    """Optional: its command-line sub-apps, name → ``"module:function"`` of ``commands(host) ->
    typer.Typer`` (``curriculum.core.commands``), mounted as ``curriculum NAME``; read from this
    class only, never inherited."""

    @property
    def name(self) -> str:
        """Registry name: the config section's ``name`` (the registry checks it; write it nowhere else)."""
        return self.config.name

    # -- proposal space -----------------------------------------------------------------------
    @abstractmethod
    def initial_proposal(self, rng: np.random.Generator) -> BaseModel:
        """The round-0 proposal (the paper samples it at random)."""

    @abstractmethod
    def random_proposal(self, rng: np.random.Generator) -> BaseModel:
        """A uniformly random legal proposal (the ``random`` engineer's move)."""

    @abstractmethod
    def project(self, raw: Any, previous: BaseModel) -> tuple[BaseModel, list[Change]]:
        """Force ``raw`` (any JSON value) into the legal space; return it and the edits made."""

    # -- data and scoring ---------------------------------------------------------------------
    @abstractmethod
    def sample(self, proposal: BaseModel, n: int, seed: int) -> list[Task]:
        """``n`` training tasks drawn from ``proposal``; identical for identical arguments."""

    @abstractmethod
    def score(self, task: Task, completion: Completion) -> tuple[float, dict[str, Any]]:
        """Reward of one completion and a JSON-able verdict (per-check results etc.)."""

    @abstractmethod
    def evaluate(self, policy: Policy, *, seed: int = 0, suite: str = "validation") -> EvalReport:
        """Evaluate ``policy`` on one fixed held-out suite (``eval_suites``); the report's
        ``suite`` names it. Call ``check_suite(suite)`` first."""

    def check_suite(self, suite: str) -> str:
        """``suite`` if this testbed has it; otherwise a ``ValueError`` naming those it has."""
        if suite not in self.eval_suites:
            raise ValueError(f"testbed {self.name!r} has held-out suites {list(self.eval_suites)}; "
                             f"there is no {suite!r} suite")
        return suite

    def eval_identity(self, suite: str) -> str | None:
        """Everything besides the policy and the seed that decides ``evaluate(policy, suite=suite)``
        (the suite's tasks by content, the scoring settings), as a string; ``None`` (the default):
        unknown, so the suite's evals are never reused (``curriculum.evalcache``)."""
        return None

    def held_out_keys(self) -> frozenset[str]:
        """``canonical`` contents of every held-out (validation and test) task: what ``sample`` and
        ``warmstart_tasks`` must never return. Empty by default, for a testbed whose held-out
        suite cannot coincide with training (``spade_pool``)."""
        return frozenset()

    def canonical(self, task: Task) -> str:
        """The content that identifies a task for deduplication (module docstring); by default
        its prompt messages."""
        import json

        return json.dumps(task.messages, sort_keys=True)

    @classmethod
    def eval_budget(cls, config: BaseModel, default_max_new_tokens: int,
                    suite: str = "validation") -> tuple[int, int]:
        """(prompts, new tokens per prompt) one ``evaluate`` call on ``suite`` generates, from the
        config alone (``--dry-run``'s time estimate, ``compare``'s count of scored tasks); (0, 0)
        when unknown."""
        return 0, 0

    prompt_share: ClassVar[float] = 1.0
    """Prompt tokens a run computes per ``PROMPT_TOKENS`` counted, for ``--dry-run``'s central
    estimate (``curriculum.walltime.central_budget``), where measured; 1: the round figure."""
    eval_answer_fill: ClassVar[float] = 1.0
    """Share of a transformers eval's counted decode steps and generated tokens that a warm-started
    model's answers take, where a call's last answer ends well before the limit (``generate``
    stops a call when its last row does), measured; 1: answers run to the limit."""

    presets: ClassVar[tuple[Preset, ...]] = ()
    """The shipped run configs for this testbed, by machine, trainer and engineer: what ``curriculum
    run`` without ``--config`` starts from (``curriculum.presets.choose_preset``; the first that
    fits wins, one written for the engineer before a generic one)."""

    report_layout: ClassVar[ReportLayout] = ReportLayout()
    """How ``curriculum report``, ``compare`` and ``show`` read its eval metrics: which rates they
    summarise, per group and per bucket, what the score is, what a bucket is and in which order
    buckets are drawn (``curriculum.core.reporting``). Default: no rates, the score only."""

    compare_configs: ClassVar[dict[str, str]] = {}
    """Trainer name → the shipped run config (relative to the repository root) that ``curriculum
    compare`` starts from on this testbed when no ``--config`` is given."""

    @classmethod
    def compare_config(cls, trainer: str) -> Path | None:
        """The base config ``curriculum compare`` uses for ``trainer`` on this testbed without
        ``--config`` (``compare_configs``); ``None``: none shipped (the library defaults)."""
        relative = cls.compare_configs.get(trainer)
        return REPOSITORY / relative if relative is not None else None

    def reference_answer(self, task: Task) -> str | None:
        """A correct answer to ``task`` in the format the prompt asks for, if the testbed knows
        one (used by the optional supervised warm start); ``None`` by default."""
        return None

    def warmstart_tasks(self, n: int, seed: int) -> list[Task]:
        """The supervised warm start's ``n`` tasks (those with a ``reference_answer`` are used).
        Independent of any engineer's proposal, so runs that differ only in their engineer
        share one warm start. Default: ``n`` tasks from the initial proposal."""
        return self.sample(self.initial_proposal(np.random.default_rng(seed)), n, seed)

    # -- state that must survive a resume (e.g. reward EMAs) ----------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-able mutable state; empty by default."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""

    def observe_training_batch(self, completions: Sequence[Completion]) -> None:
        """Hook called after each scored training batch (e.g. to update a reward EMA)."""

    def close(self) -> None:
        """Release resources (sandbox pools, eval workers); the controller calls it at the end."""
