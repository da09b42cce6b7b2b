"""An environment pool of programs, as one typed schema shared by engineer, testbed and trainer.

A testbed whose proposal space is a ``PoolSpace`` (``curriculum.core.spaces``) trains on
environments written as programs: an engineer designs and admits them, the testbed's proposal
lists them, a trainer plays them (and may train the designer on the designs). This module is what
the three exchange:

* ``PoolEnvironment`` — an admitted environment program (``hash``, ``setting``, ``skill``,
  ``hint``, ``program``): what the engineer admits, what the testbed's proposal lists, what the
  trainer plays.
* ``DesignSample`` — one design generation with its admission verdict: the designer's training
  row, from the engineer through the proposal to the trainer.
* ``EnvOutcome`` — what the trainer's plays measured for one environment (regret, win rates);
  it returns to the engineer in ``RoundReport.env_outcomes``.

``env_task`` / ``design_task`` put a pool item into a ``Task`` and ``pool_item`` reads it back,
so the payload is written and read in one place. ``write_pool_file`` / ``read_pool_file`` keep
a pool as JSON lines, one ``PoolEnvironment`` per line, for a later run to start from (the plugin
that saves a run's pool names the file).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.types import Task

Setting = Literal["games", "tools"]
"""The two settings of a pool's environments: single-player text games, or tool use over a
backend state."""


def program_hash(program: str) -> str:
    """16 hex digits of sha256 over the program with trailing spaces and blank edges removed."""
    canonical = "\n".join(line.rstrip() for line in program.strip().splitlines())
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class PoolEnvironment(BaseModel):
    """An admitted environment program."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hash: str
    """Program hash (``program_hash``): the environment's id everywhere."""
    setting: Setting = "games"
    """Setting of the environment."""
    skill: str = ""
    """Skill tag."""
    hint: str = ""
    """Privileged hint (empty for a fixed environment set without hints)."""
    program: str
    """Program source."""
    class_name: str | None = None
    """The environment class to instantiate (``None``: the sandbox picks the one with ``reset``)."""


class DesignSample(BaseModel):
    """One design generation and its admission verdict: a designer row to train on."""

    model_config = ConfigDict(extra="forbid")

    design_id: str
    """Unique over the run (``r<round>-c<call>-<hash[:8]>``)."""
    skill: str = ""
    """Skill of the design prompt (the designer rewards' centring group)."""
    messages: list[dict[str, str]]
    """The design prompt."""
    completion: str
    """The designer's output."""
    admitted: bool = False
    """Admission verdict."""
    reason: str = ""
    """``ok`` when admitted, else the rejection reason."""
    env_id: str | None = None
    """Hash of the admitted environment."""
    penalty: float | None = None
    """Designer reward of a rejected design."""
    completion_ids: list[int] | None = None
    """Generated token ids, when the engineer kept them."""
    behaviour_logprobs: list[float] | None = None
    """Generation-time log-probs of ``completion_ids``."""
    trainable: bool = True
    """``False`` when a frozen designer (``engineer.designer: base``) wrote it: the trainer scores
    it for the logs but never trains on it."""


class EnvOutcome(BaseModel):
    """What one rollout step's plays measured for one environment, with and without its hint."""

    model_config = ConfigDict(extra="forbid")

    env_id: str
    """Hash of the environment."""
    skill: str = ""
    """Its skill tag."""
    win_rate: float = Field(ge=0.0, le=1.0)
    """Share of the unhinted episodes won."""
    win_rate_hint: float = Field(ge=0.0, le=1.0)
    """Share of the hinted episodes won."""
    mean_return: float
    """Mean return of the unhinted episodes."""
    mean_return_hint: float
    """Mean return of the hinted episodes."""
    regret: float
    """max(0, mean_return_hint - mean_return)."""
    raw_regret: float
    """mean_return_hint - mean_return, unfloored."""
    learning_potential: float = 0.0
    """|EMA_fast - EMA_slow| of the unhinted mean return (the ablation's designer signal)."""
    env_failures: int = Field(0, ge=0)
    """Episodes that ended in a sandbox failure or non-determinism."""


def env_task(env: PoolEnvironment) -> Task:
    """The task that asks the trainer to play ``env``."""
    return Task(id=f"env-{env.hash}", messages=[], data={"kind": "env", "env": env.model_dump(mode="json")},
                features={"skill": env.skill})


def design_task(design: DesignSample) -> Task:
    """The task that asks the trainer to train the designer on ``design``."""
    return Task(id=f"design-{design.design_id}", messages=design.messages,
                data={"kind": "design", "design": design.model_dump(mode="json")},
                features={"skill": design.skill})


def pool_item(task: Task) -> PoolEnvironment | DesignSample:
    """The environment or design a pool task carries; ValueError for any other task."""
    kind = task.data.get("kind")
    if kind == "env":
        return PoolEnvironment.model_validate(task.data["env"])
    if kind == "design":
        return DesignSample.model_validate(task.data["design"])
    raise ValueError(f"task {task.id!r} is not a pool task (data.kind must be 'env' or 'design', got {kind!r})")


def write_pool_file(path: str | Path, envs: Iterable[PoolEnvironment]) -> Path:
    """Write ``envs`` to the JSON-lines file ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(e.model_dump(mode="json"), sort_keys=True) + "\n" for e in envs))
    os.replace(tmp, path)
    return path


def read_pool_file(path: str | Path) -> list[PoolEnvironment]:
    """The pool ``write_pool_file`` wrote to ``path`` (a missing file: ``FileNotFoundError``)."""
    path = Path(path)
    return [PoolEnvironment.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
