"""Test-only scripted designer: canned design outputs per round, as the trainer's tasks."""

from __future__ import annotations

from cotrain_fakes import EASY_ENV, GUESS_ENV, HINT

from testbeds.base import Task


def design_tasks(step: int) -> list[Task]:
    """Round ``step``'s designs: a regret-rich guessing game, a mastered game, a rejected design."""
    designs = [
        {"design_id": f"{step}-0", "skill": "logic", "env_id": f"guess-{step}", "admitted": True,
         "reason": "ok", "source": GUESS_ENV, "hint": HINT, "completion": "```python\nclass GuessEnv: ...\n```"},
        {"design_id": f"{step}-1", "skill": "logic", "env_id": f"easy-{step}", "admitted": True,
         "reason": "ok", "source": EASY_ENV, "hint": "say yes", "completion": "```python\nclass EasyEnv: ...\n```"},
        {"design_id": f"{step}-2", "skill": "maths", "env_id": None, "admitted": False,
         "reason": "syntax_error", "penalty": -1.0, "completion": "class Broken(:"},
        {"design_id": f"{step}-3", "skill": "maths", "env_id": f"guess2-{step}", "admitted": True,
         "reason": "ok", "source": GUESS_ENV, "hint": HINT, "completion": "```python\nclass GuessEnv: pass\n```"},
    ]
    tasks = []
    for d in designs:
        messages = [{"role": "user", "content": f"Design a {d['skill']} game (round {step})."}]
        tasks.append(Task(id=f"design-{d['design_id']}", messages=messages, data={
            "kind": "design", "design_id": d["design_id"], "skill": d["skill"], "messages": messages,
            "completion": d["completion"], "admitted": d["admitted"], "reason": d["reason"],
            "env_id": d["env_id"], "penalty": d.get("penalty")}))
        if d["admitted"]:
            tasks.append(Task(id=f"env-{d['env_id']}", messages=[], data={
                "kind": "env", "env_id": d["env_id"], "source": d["source"], "hint": d["hint"],
                "skill": d["skill"], "setting": "games"}))
    return tasks


# -- a scripted designer engineer and a scripted-agent trainer for loop-level runs ---------------
from typing import Literal  # noqa: E402

from curriculum.config import PluginConfig  # noqa: E402
from curriculum.records import Design  # noqa: E402
from engineers.base import DesignContext, Engineer  # noqa: E402
from trainers.selfplay import SelfPlayTrainer  # noqa: E402


class ScriptedDesignerConfig(PluginConfig):
    name: Literal["spade_scripted"] = "spade_scripted"


class ScriptedDesigner(Engineer):
    """Hands the next step the canned designs of ``design_tasks`` in the spade_pool format."""

    name = "spade_scripted"

    def design(self, ctx: DesignContext) -> Design:
        step = ctx.round + 1
        envs = list(ctx.proposal.model_dump(mode="json")["environments"])
        designs = []
        for task in design_tasks(step):
            d = task.data
            if d["kind"] == "env":
                envs.append({"hash": d["env_id"], "setting": "games", "skill": d["skill"], "hint": d["hint"],
                             "program": d["source"]})
            else:
                designs.append({k: d[k] for k in ("design_id", "skill", "messages", "completion", "admitted",
                                                  "reason", "env_id", "penalty")})
        return Design(raw={"environments": envs, "designs": designs})


class ScriptedSelfPlayTrainer(SelfPlayTrainer):
    """The real co-training trainer with the scripted agent."""

    name = "selfplay_scripted"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from cotrain_fakes import ScriptedTurnModel

        self.turn_model = ScriptedTurnModel()


def register() -> None:
    from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS

    if "spade_scripted" not in ENGINEERS:
        ENGINEERS.register("spade_scripted", "spade_loop_fakes:ScriptedDesigner",
                           "spade_loop_fakes:ScriptedDesignerConfig", "test: canned SPADE designs")
    if "selfplay" not in TRAINERS:
        TRAINERS.register("selfplay", "trainers.selfplay:SelfPlayTrainer", "trainers.selfplay:SelfPlayConfig",
                          "SPADE co-training")
    if "selfplay_scripted" not in TRAINERS:
        TRAINERS.register("selfplay_scripted", "spade_loop_fakes:ScriptedSelfPlayTrainer",
                          "spade_loop_fakes:ScriptedSelfPlayConfig", "test: selfplay with a scripted agent")
    if "spade_pool" not in TESTBEDS:
        TESTBEDS.register("spade_pool", "testbeds.heldout.testbed:SpadeTestbed",
                          "testbeds.heldout.testbed:SpadeTestbedConfig", "SPADE pool, held-out eval")


from trainers.selfplay import SelfPlayConfig  # noqa: E402


class ScriptedSelfPlayConfig(SelfPlayConfig):
    name: Literal["selfplay_scripted"] = "selfplay_scripted"  # type: ignore[assignment]
