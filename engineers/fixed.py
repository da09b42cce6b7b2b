"""``fixed``: keep the starting proposal for every round (training without a curriculum).

With the testbed's default random cold start (MAPF-FrozenLake: ``testbed.initial_proposal:
random``) this is the Trainee-to-Trainer paper's baseline "Qwen3-4B + GRPO (random)":
the same backbone and training procedure with the *random round-0 config kept fixed for every
round* and no engineer. ``configs/mapf_qwen3_4b_baseline.yaml`` is that baseline at the paper's
scale. With an explicit ``testbed.initial_proposal`` it is a fixed hand-chosen distribution
instead; with the ``spade_pool`` testbed it hands the starting pool (``testbed.initial_pool``, e.g.
``memory:DIR``) over unchanged every step. SPADE's fixed-environment GRPO row designs that pool in
the run: the ``spade`` engineer with ``frozen_pool``.

Not to be confused with ``random`` (``engineers/random.py``), which re-draws the config every
round: a second, different baseline.
"""

from __future__ import annotations

from typing import Literal

from curriculum.core.config import PluginConfig
from curriculum.core.records import Design
from curriculum.core.spaces import ANY
from engineers.base import DesignContext, Engineer


class FixedEngineerConfig(PluginConfig):
    """The fixed baseline has no knobs; the starting proposal is the testbed's ``initial_proposal``."""

    name: Literal["fixed"]
    """Selects this engineer."""


class FixedEngineer(Engineer):
    """Returns the current proposal unchanged, so every round trains on the round-0 proposal."""

    config_class = FixedEngineerConfig
    fits = (ANY,)
    description = ("Keeps the starting proposal every round; with the random cold start the paper's "
                   "'GRPO (random)' baseline.")

    def design(self, ctx: DesignContext) -> Design:
        return Design(raw=ctx.proposal.model_dump(mode="json"))
