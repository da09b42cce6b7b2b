"""Test-only scripted designer: canned design outputs per round, as the trainer's tasks."""

from __future__ import annotations

from cotrain_fakes import EASY_ENV, GUESS_ENV, HINT

from curriculum.core.pool import DesignSample, PoolEnvironment, design_task, env_task
from curriculum.core.types import Task


def design_pool(step: int) -> tuple[list[DesignSample], list[PoolEnvironment]]:
    """Round ``step``'s designs: a regret-rich guessing game, a mastered game, a rejected design;
    and the environments of the admitted ones."""
    rows = [  # (id suffix, skill, env id, program, hint, completion)
        ("0", "logic", f"guess-{step}", GUESS_ENV, HINT, "```python\nclass GuessEnv: ...\n```"),
        ("1", "logic", f"easy-{step}", EASY_ENV, "say yes", "```python\nclass EasyEnv: ...\n```"),
        ("2", "maths", None, None, "", "class Broken(:"),
        ("3", "maths", f"guess2-{step}", GUESS_ENV, HINT, "```python\nclass GuessEnv: pass\n```"),
    ]
    designs, envs = [], []
    for suffix, skill, env_id, program, hint, completion in rows:
        messages = [{"role": "user", "content": f"Design a {skill} game (round {step})."}]
        admitted = env_id is not None
        designs.append(DesignSample(design_id=f"{step}-{suffix}", skill=skill, messages=messages,
                                    completion=completion, admitted=admitted,
                                    reason="ok" if admitted else "syntax_error", env_id=env_id,
                                    penalty=None if admitted else -1.0))
        if admitted:
            envs.append(PoolEnvironment(hash=env_id, setting="games", skill=skill, hint=hint, program=program))
    return designs, envs


def design_tasks(step: int) -> list[Task]:
    """Round ``step``'s designs and environments as the trainer's tasks (designs first)."""
    designs, envs = design_pool(step)
    return [*map(design_task, designs), *map(env_task, envs)]


# -- a scripted designer engineer and a scripted-agent trainer for loop-level runs ---------------
from pathlib import Path  # noqa: E402
from typing import Literal  # noqa: E402

from curriculum.core.config import PluginConfig  # noqa: E402
from curriculum.core.records import Design  # noqa: E402
from engineers.base import DesignContext, Engineer  # noqa: E402
from trainers.selfplay.trainer import SelfPlayTrainer  # noqa: E402


class ScriptedDesignerConfig(PluginConfig):
    name: Literal["spade_scripted"] = "spade_scripted"


class ScriptedDesigner(Engineer):
    """Hands the next step the canned designs of ``design_tasks`` in the spade_pool format."""

    def design(self, ctx: DesignContext) -> Design:
        step = ctx.round + 1
        designs, new_envs = design_pool(step)
        envs = [*ctx.proposal.environments, *new_envs]
        return Design(raw={"environments": [e.model_dump(mode="json") for e in envs],
                           "designs": [d.model_dump(mode="json") for d in designs]})


class ScriptedSelfPlayTrainer(SelfPlayTrainer):
    """The real co-training trainer with the scripted agent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from cotrain_fakes import ScriptedTurnModel

        self.turn_model = ScriptedTurnModel()


FIXTURES = Path(__file__).resolve().parents[1] / "spade" / "fixtures"
DESIGN_BY_SKILL = {"s0": "games_guess_ok.out", "s1": "bad_syntax.out", "s2": "games_modarith_ok.out",
                   "s3": "games_counter_moves_ok.out"}
"""Design output per skill of the prompt (``engineer.skills: [s0, s1, s2, s3]``)."""


class SkillScriptedPolicy:
    """A designer model keyed by the prompt's skill (so sharding design calls over ranks cannot
    change what a call returns); any other prompt (held-out eval) gets ``\\boxed{0}``."""

    def generate(self, tasks, *, max_new_tokens=None, temperature=None, seed=0):
        from testbeds.base import Completion

        out = []
        for task in tasks:
            prompt = "\n".join(m["content"] for m in task.messages)
            skill = next((k for k in DESIGN_BY_SKILL if f"Target skill: {k}." in prompt), None)
            text = (FIXTURES / DESIGN_BY_SKILL[skill]).read_text() if skill else "\\boxed{0}"
            out.append(Completion(text=text, num_tokens=len(text.split())))
        return out


class ScriptedDesignSelfPlayTrainer(ScriptedSelfPlayTrainer):
    """The real co-training trainer, the scripted agent, and the skill-keyed designer model as the
    policy the ``spade`` engineer designs with."""

    name = "selfplay_scripted_designs"

    def policy(self):
        return SkillScriptedPolicy()


def register() -> None:
    from curriculum.registry import ENGINEERS, TRAINERS

    if "spade_scripted" not in ENGINEERS:
        ENGINEERS.register("spade_scripted", "spade_loop_fakes:ScriptedDesigner",
                           "spade_loop_fakes:ScriptedDesignerConfig", "test: canned SPADE designs",
                           fits=("environment_pool",))
    if "selfplay_scripted" not in TRAINERS:
        TRAINERS.register("selfplay_scripted", "spade_loop_fakes:ScriptedSelfPlayTrainer",
                          "spade_loop_fakes:ScriptedSelfPlayConfig", "test: selfplay with a scripted agent",
                          trains_on="pool")
    if "selfplay_scripted_designs" not in TRAINERS:
        TRAINERS.register("selfplay_scripted_designs", "spade_loop_fakes:ScriptedDesignSelfPlayTrainer",
                          "spade_loop_fakes:ScriptedDesignSelfPlayConfig",
                          "test: selfplay with a scripted agent and designer model", trains_on="pool")


from trainers.selfplay.trainer import SelfPlayConfig  # noqa: E402


class ScriptedSelfPlayConfig(SelfPlayConfig):
    name: Literal["selfplay_scripted"] = "selfplay_scripted"  # type: ignore[assignment]


class ScriptedDesignSelfPlayConfig(SelfPlayConfig):
    name: Literal["selfplay_scripted_designs"] = "selfplay_scripted_designs"  # type: ignore[assignment]
