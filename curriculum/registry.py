"""The one place where testbeds, engineers and trainers are registered by name.

Entries are lazy (``"module:Class"`` strings) so that ``curriculum list`` and config
validation never import torch or a model. Each entry names the plugin class and its config
class; the CLI's choices, ``curriculum list`` and config validation all read from here.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One registered plugin."""

    name: str
    target: str
    """``"module:Class"`` of the plugin."""
    config: str
    """``"module:Class"`` of its pydantic config (the section users write in YAML)."""
    description: str
    """One line shown by ``curriculum list``."""

    def load(self) -> Any:
        return _import(self.target)

    def load_config(self) -> Any:
        return _import(self.config)


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class UnknownName(ValueError):
    """Raised for a name that is not registered; the message lists the choices."""


class Registry:
    """Name → ``Entry`` for one kind of plugin."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, target: str, config: str, description: str) -> None:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = Entry(name, target, config, description)

    def get(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._entries, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownName(
                f"unknown {self.kind} {name!r}.{hint} Registered: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries


TESTBEDS = Registry("testbed")
ENGINEERS = Registry("engineer")
TRAINERS = Registry("trainer")

# -- testbeds -----------------------------------------------------------------------------------
TESTBEDS.register(
    "mapf_frozenlake",
    "testbeds.mapf_frozenlake.testbed:MAPFTestbed",
    "testbeds.mapf_frozenlake.testbed:MAPFTestbedConfig",
    "Multi-agent path finding on FrozenLake grids; the engineer edits per-size generator ratios.",
)
TESTBEDS.register(
    "spade_pool",
    "testbeds.heldout.testbed:SpadeTestbed",
    "testbeds.heldout.testbed:SpadeTestbedConfig",
    "SPADE's pool of model-written environments; held-out reasoning-gym (games) or tool-suite eval.",
)

# -- engineers ----------------------------------------------------------------------------------
ENGINEERS.register(
    "fixed",
    "engineers.fixed:FixedEngineer",
    "engineers.fixed:FixedEngineerConfig",
    "Keeps the starting proposal every round; with the random cold start the paper's 'GRPO (random)' baseline.",
)
ENGINEERS.register(
    "random",
    "engineers.random:RandomEngineer",
    "engineers.random:RandomEngineerConfig",
    "Samples a fresh legal proposal each round (our re-drawn baseline; not the paper's fixed one).",
)
ENGINEERS.register(
    "frontier",
    "engineers.frontier:FrontierEngineer",
    "engineers.frontier:FrontierEngineerConfig",
    "Rule-based baseline: budget to sizes with valid rate in [20%, 80%], harder maps where mastered.",
)
ENGINEERS.register(
    "optuna",
    "engineers.optuna_engineer:OptunaEngineer",
    "engineers.optuna_engineer:OptunaEngineerConfig",
    "Optuna black-box search (TPE by default) over the generator config; one trial per round.",
)
ENGINEERS.register(
    "checkpoint",
    "engineers.checkpoint.engineer:CheckpointEngineer",
    "engineers.checkpoint.config:CheckpointEngineerConfig",
    "The policy redesigns its own generator config from a failure report (contexts V1–V6).",
)
ENGINEERS.register(
    "spade",
    "engineers.spade.engineer:SpadeEngineer",
    "engineers.spade.config:SpadeEngineerConfig",
    "SPADE: the policy writes environment programs, admitted in the sandbox and remembered.",
)

# -- trainers -----------------------------------------------------------------------------------
TRAINERS.register(
    "grpo",
    "trainers.grpo:GRPOTrainerAdapter",
    "trainers.grpo:GRPOConfig",
    "GRPO through TRL's GRPOTrainer (transformers generation on CPU, vLLM on GPU).",
)
TRAINERS.register(
    "simulated",
    "trainers.simulated:SimulatedTrainer",
    "trainers.simulated:SimulatedConfig",
    "A documented parametric learning-dynamics simulation (not a model) for fast benchmarks.",
)
TRAINERS.register(
    "selfplay",
    "trainers.selfplay:SelfPlayTrainer",
    "trainers.selfplay:SelfPlayConfig",
    "SPADE co-training: one policy as designer and agent (GRPO via TRL rollout_func).",
)

SHIPPED: dict[str, tuple[str, ...]] = {
    registry.kind: tuple(registry.names()) for registry in (TESTBEDS, ENGINEERS, TRAINERS)
}
"""What this file registers (tests and extensions may register more at run time)."""
