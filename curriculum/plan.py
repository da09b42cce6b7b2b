"""``curriculum run --dry-run``: the resolved plan of a run, computed without loading a model."""

from __future__ import annotations

import math
import os

from curriculum.config import RunConfig, dump_config


def describe_plan(config: RunConfig) -> str:
    """The resolved config followed by the per-round budget it implies."""
    lines = [dump_config(config).rstrip(), "", "plan:"]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    lines.append(f"  processes: {world}")
    lines.append(f"  model: {config.model.name_or_path}")
    lines.append(f"  testbed: {config.testbed.name}   engineer: {config.engineer.name}   "
                 f"trainer: {config.trainer.name}")
    lines.append(f"  rounds: {config.rounds}   tasks per round: {config.tasks_per_round}")
    trainer = config.trainer
    if hasattr(trainer, "prompts_per_step"):
        steps = trainer.max_steps_per_round or math.ceil(
            config.tasks_per_round * trainer.epochs_per_round / trainer.prompts_per_step)
        prompts = steps * trainer.prompts_per_step
        samples = prompts * trainer.num_generations
        lines.append(f"  optimizer steps per round: {steps}   prompts per round: {prompts}   "
                     f"samples per round: {samples}")
        lines.append(f"  completion token budget per round: {samples * trainer.max_completion_length:,}")
    return "\n".join(lines)
