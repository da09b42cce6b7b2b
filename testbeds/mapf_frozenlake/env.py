"""Gymnasium environment ``MAPFFrozenLake-v0``: one MAPF instance per episode, one text action.

``reset(seed=...)`` draws an instance from the generator (a ``GeneratorConfig``, default: equal
size shares, 20% holes, natural wait mix) and returns the prompt text (system and user message
joined by a blank line) as a ``Text`` observation; ``info`` holds the instance.
``reset(options={"instance": {...}})`` plays a given instance instead (a JSON object as in
``instance.py``, or an ``Instance``); an invalid one raises ``InvalidInstance`` with every
reason, like the solver and the validator; its optimal cost is computed when absent. ``step(text)``
validates the response and ends the episode; the reward is the accuracy term of the Trainee-to-Trainer paper
(a text env has no token counts, so no length term), and ``info`` carries the eight checks, the
cost and the optimal cost. Episodes are deterministic given the reset seed.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium as gym

from testbeds.mapf_frozenlake.config import GeneratorConfig, uniform_config
from testbeds.mapf_frozenlake.generator import generate
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.prompts import render_prompt
from testbeds.mapf_frozenlake.reward import accuracy
from testbeds.mapf_frozenlake.solver import solve
from testbeds.mapf_frozenlake.validate import validate

CHARSET = string.printable
MAX_TEXT = 8192


class MAPFFrozenLakeEnv(gym.Env):
    """Single-step text environment over generated MAPF-FrozenLake instances."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, config: GeneratorConfig | dict | None = None, agents: int = 2,
                 render_mode: str | None = None) -> None:
        if config is None:
            config = uniform_config(0.2, 0.0)
        elif isinstance(config, dict):
            config = GeneratorConfig.model_validate(config)
        self.gen_config = config
        self.agents = agents
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Text(max_length=MAX_TEXT, charset=CHARSET)
        self.action_space = gym.spaces.Text(max_length=MAX_TEXT, charset=CHARSET)
        self.instance: Instance | None = None
        self._prompt = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        given = (options or {}).get("instance")
        if given is not None:
            inst = given if isinstance(given, Instance) else Instance.from_dict(given)
            if inst.optimal_cost is None:  # the accuracy term compares against the optimum
                solved = solve(inst)
                inst.optimal_cost = solved.cost if solved.status == "solved" else None
        else:
            inst_seed = int(self.np_random.integers(0, 2**31 - 1))
            inst = generate(self.gen_config, 1, agents=self.agents, seed=inst_seed,
                            workers=1).instances[0]
        self.instance = inst
        self._prompt = "\n\n".join(m["content"] for m in render_prompt(inst))
        return self._prompt, {"instance": inst.to_dict()}

    def step(self, action: str):
        if self.instance is None:
            raise RuntimeError("call reset() before step()")
        verdict = validate(self.instance, action if isinstance(action, str) else str(action))
        reward = accuracy(verdict.valid, verdict.cost, verdict.optimal_cost)
        info = verdict.to_dict()
        return self._prompt, float(reward), True, False, info

    def render(self):
        if self.render_mode == "ansi":
            return self._prompt
        return None


