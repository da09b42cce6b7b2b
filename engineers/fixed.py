"""``fixed``: keep the starting proposal for every round (training without a curriculum)."""

from __future__ import annotations

from typing import Literal

from curriculum.config import PluginConfig
from curriculum.records import Design
from engineers.base import DesignContext, Engineer


class FixedEngineerConfig(PluginConfig):
    """The fixed baseline has no knobs."""

    name: Literal["fixed"] = "fixed"
    """Selects this engineer."""


class FixedEngineer(Engineer):
    """Returns the current proposal unchanged."""

    name = "fixed"

    def design(self, ctx: DesignContext) -> Design:
        return Design(raw=ctx.proposal.model_dump(mode="json"))
