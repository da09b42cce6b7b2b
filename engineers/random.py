"""``random``: a fresh uniformly random legal proposal every round.

A baseline of our own (Trainee-to-Trainer names it the second, weaker one): the training distribution
changes each round, but not in response to what the policy got wrong. It is **not** the paper's
"GRPO (random)" baseline: that one keeps the random round-0 config fixed for every round, which
is ``fixed`` with the random cold start (``engineers/fixed.py``).
"""

from __future__ import annotations

from typing import Literal

from curriculum.core.config import PluginConfig
from curriculum.core.records import Design
from curriculum.core.spaces import ANY
from engineers.base import DesignContext, Engineer


class RandomEngineerConfig(PluginConfig):
    """The random baseline has no knobs; its draws come from the run's seeded per-round RNG."""

    name: Literal["random"]
    """Selects this engineer."""


class RandomEngineer(Engineer):
    """Samples ``testbed.random_proposal`` with the controller's per-round RNG."""

    config_class = RandomEngineerConfig
    fits = (ANY,)
    description = ("Samples a fresh legal proposal each round (our re-drawn baseline; not the "
                   "paper's fixed one).")

    def design(self, ctx: DesignContext) -> Design:
        return Design(raw=ctx.testbed.random_proposal(ctx.rng).model_dump(mode="json"))
