"""What a trainer reads of the run configuration: ``RunSettings``.

A trainer receives the whole run configuration (its own section is ``trainer``; it also reads the
starting ``model``, the ``generation`` settings, the round sizes and the seed). The controller's
``curriculum.config.RunConfig`` is that configuration, but no plugin may import the controller
(docs/architecture.md, "Layers"), so trainers are typed with this protocol of the fields they
may read, which ``RunConfig`` satisfies field for field (``tests/contracts/test_trainers.py``
checks it). A trainer reads its own section through its own config class (``Trainer[C]``:
``self.config`` is a ``C``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from curriculum.core.policy import GenerationConfig, ModelConfig


@runtime_checkable
class RunSettings(Protocol):
    """The fields of the run configuration a trainer may read (``curriculum.config.RunConfig``)."""

    model: ModelConfig
    """The starting policy."""
    generation: GenerationConfig
    """Generation settings for evaluation and for engineers that query a model."""
    trainer: BaseModel
    """The trainer's own section, an instance of its ``config_class``."""
    testbed: BaseModel
    """The testbed's section (e.g. a pool testbed's ``setting``)."""
    engineer: BaseModel
    """The engineer's section (e.g. what one of its design calls may cost, for ``--dry-run``)."""
    rounds: int
    """Number of train → eval → design rounds (0: an eval-only run)."""
    tasks_per_round: int
    """Training tasks drawn from the proposal each round."""
    seed: int
    """Master seed."""
