"""Test-only scripted designer: canned design outputs per round, as the trainer's tasks."""

from __future__ import annotations

from spade_fakes import EASY_ENV, GUESS_ENV, HINT

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
