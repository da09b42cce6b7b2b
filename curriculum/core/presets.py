"""A preset: a shipped run config and what it is for, declared by the testbed it runs on.

Each testbed lists its presets on its class (``Testbed.presets``); ``curriculum run`` without
``--config`` picks the one for the resolved (engineer, testbed, trainer) on this kind of machine
(``curriculum.presets.choose_preset``). The testbed's name is not written here: the controller
fills ``testbed`` from the registry entry that declared the preset.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
"""Where the shipped config files live."""
MachineKind = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class Preset:
    """A config file in ``configs/`` and what it is for."""

    file: str
    machine: MachineKind | Literal["any"]
    summary: str
    """What the file is for, in words; the budget (rounds, tasks) is read from the file itself
    when the choice is printed, so the two cannot drift apart."""
    trainer: str
    """The trainer the file is written for."""
    engineer: str | None = None
    """Written for this engineer (``None``: any engineer that fits the testbed)."""
    testbed: str = ""
    """The testbed that declares it (filled in from its registry name)."""

    @property
    def path(self) -> Path:
        return CONFIGS / self.file
