"""An external model behind an OpenAI-compatible chat endpoint, evaluated, never trained.

The paper tables' rows for models nobody here trains (GPT-5.4, Grok-4.2, Gemini-3.1-Pro,
Kimi-K2.5 on MAPF-FrozenLake) are eval-only runs: ``rounds: 0`` with ``eval_before_training``,
so the controller evaluates ``policy()`` once (``baseline_eval.json``) and trains nothing.
``policy()`` is ``curriculum.core.endpoint.EndpointPolicy`` over ``endpoint`` (URL, model name
and key from the config or ``CURRICULUM_ENDPOINT_URL`` / ``CURRICULUM_ENDPOINT_MODEL`` / the key
variable, as for the checkpoint engineer's ``model: endpoint``); the run's ``model`` section only
names the run. ``train_round`` refuses: the config is eval-only by construction (``rounds`` must
be 0, checked when the trainer is built).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from curriculum.core.config import PluginConfig
from curriculum.core.types import Policy, Task
from curriculum.core.endpoint import EndpointConfig
from curriculum.core.run import RunSettings
from testbeds.base import Testbed
from trainers.base import LogFn, Trainer


class EndpointTrainerConfig(PluginConfig):
    """Evaluate an external chat endpoint (no training; ``rounds: 0``)."""

    name: Literal["endpoint"]
    """Selects this trainer."""
    endpoint: EndpointConfig = Field(default_factory=EndpointConfig)
    """Where the evaluated model answers (URL, model name, key variable, timeouts, retries)."""


class EndpointTrainer(Trainer[EndpointTrainerConfig]):
    """The policy is the endpoint; there is nothing to train or save but a note of what was asked."""

    config_class = EndpointTrainerConfig
    trains_on = "prompt"
    trains = False  # it only evaluates: the run has rounds: 0, checked when the trainer is built
    chosen_by_default = False  # it only evaluates (rounds: 0): never a run's default
    description = "An external model behind an OpenAI-compatible endpoint, evaluated only (rounds: 0)."

    def __init__(self, run_config: RunSettings, testbed: Testbed, run_dir: Path | None = None) -> None:
        super().__init__(run_config, testbed, run_dir)
        self._policy: Policy | None = None

    def setup(self, checkpoint: Path | None) -> None:
        """Nothing to load: the endpoint is reached on the first ``generate``."""

    def policy(self) -> Policy:
        if self._policy is None:
            from curriculum.core.endpoint import EndpointPolicy

            self._policy = EndpointPolicy(self.config.endpoint)
        return self._policy

    def train_round(self, tasks: Sequence[Task], *, round_index: int, seed: int,
                    log: LogFn | None = None) -> dict[str, float]:
        raise RuntimeError("the endpoint trainer does not train (an eval-only run has rounds: 0)")

    def save(self, directory: Path) -> None:
        """No weights: writes nothing."""

    def run_info(self) -> dict[str, Any]:
        return {"trainer": "endpoint", "endpoint_model": self.config.endpoint.model}
