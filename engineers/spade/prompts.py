"""Designer prompts for the two SPADE settings, written for this project.

``design_messages(setting, skill, document, seeds, negatives, mutate)`` returns the chat
messages of one design call: a system message with the setting's contract (what the class must
implement, how the agent acts, how to format the answer) and a user message with the skill, the
grounding document (or none, for the no-corpus ablation), the environment to mutate (if any)
and the remembered environments to avoid. The model must answer with the program in a
```python fence and the hint inside ``<hint>...</hint>``; ``engineers.spade.parse`` reads that
back leniently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from testbeds.spade.synthetic.skeleton import PartError, format_parts, split_parts

GAMES_CONTRACT = """\
You design environments that train a reasoning agent. Write one self-contained single-player \
text game as a Python class whose name ends in `Env`.

Requirements for the class:
- `reset(self, seed=None)` creates a fresh task from `random.Random(seed)` and returns \
`(observation: str, info: dict)`. Different seeds must give different tasks. The observation \
states the rules, the task and that the answer goes in \\boxed{...}.
- `step(self, action: str)` returns `(observation: str, reward: float, terminated: bool, \
truncated: bool, info: dict)`. Read the answer from the last \\boxed{...} in the action (the \
helper `extract_boxed(text)` is available without import and returns None if absent). A correct \
answer gives reward 1.0 and terminated=True. A wrong or missing answer gives reward 0.0 and \
feedback that says specifically what is wrong (e.g. too high, violates a rule, wrong format), so \
the agent can try again. Set truncated=True once `max_turns` actions have been taken.
- `solution(self)` returns the correct answer (a string) for the current task; the checker \
sends it as \\boxed{answer}. For games that need several moves, return the list of actions instead.
- Only the standard library modules math, random, re, itertools, functools, collections, \
fractions, string, json, heapq may be imported. No files, no network, no printing.
- The task must need genuine reasoning; a random or empty answer must never win.

Also write a privileged hint: one or two sentences with the key idea or strategy that makes the \
task solvable. The hint must never contain the answer itself.

Answer in exactly this format:
```python
<the complete program>
```
<hint>the hint</hint>"""

TOOLS_CONTRACT = """\
You design environments that train a tool-using agent. Write one Python class whose name ends \
in `Env` and that subclasses `ToolEnv` (already defined; do not import it). `ToolEnv` handles \
parsing the agent's JSON tool calls, dispatching them, tool schemas, turn limits and rewards.

Implement in the subclass:
- `setup(self, rng)`: build the backend state in `self.state` (a dict: files, accounts, \
inventory, calendar...) from `rng` (a `random.Random` seeded by reset; different seeds must give \
different tasks) and return the task text for the agent.
- Tools as methods `tool_<name>(self, arg: str, ...)` with type annotations (str, int, float, \
bool, list, dict) and a one-line docstring. They read or change `self.state` and return JSON \
values; raise `ValueError("message")` for bad requests so the agent can recover.
- `expected_answer(self)`: the final answer string, or None if only the final state matters.
- `check_state(self)`: True when the backend state satisfies the task (default True).
- `solution(self)`: the list of actions that solves the current task: tool calls as dicts \
`{"name": "<tool>", "arguments": {...}}` followed by `{"answer": "<final answer>"}`.
- Optionally set the class attribute `max_turns` (default 12).
- Only the standard library modules math, random, re, itertools, functools, collections, json, \
string may be imported. No files, no network, no printing.
- Solving must need several tool calls; answering without using the tools must never succeed.

Also write a privileged hint: one or two sentences with the strategy (which tools, in which \
order, what to watch for). The hint must never contain the final answer.

Answer in exactly this format:
```python
<the complete program>
```
<hint>the hint</hint>"""


STRUCTURED_GAMES_CONTRACT = """\
You design text games that train a reasoning agent. The game engine is fixed: it shows the task \
text, reads the agent's answer from \\boxed{...}, gives your feedback on a wrong answer and lets \
the agent retry a few times. You write only the task, as three Python functions, and a hint.

<reset>
def make_task(rng):
    # rng is a random.Random; different seeds must give different tasks
    ...
    return state, text   # state: anything; text: the task statement
</reset>
<check>
def check(state, answer):
    # answer: the boxed text (a string)
    ...
    return correct, feedback   # bool; what is wrong when not correct
</check>
<solution>
def solve(state):
    return answer   # the correct answer (a string)
</solution>
<hint>one or two sentences with the key idea; never the answer itself</hint>

Only math, random, re, itertools, functools, collections, fractions, string, json, heapq may be \
imported. The task must need genuine reasoning: a random or empty answer must never be correct. \
Answer with the four tags above and nothing else."""


@dataclass(frozen=True)
class PromptEnv:
    """A remembered environment shown in a prompt."""

    hash: str
    """Program hash."""
    skill: str
    """Skill tag."""
    hint: str
    """Its privileged hint."""
    source: str
    """Program text (cut for the prompt)."""
    note: str
    """Why it is shown (e.g. 'regret 0.35', 'too easy: solved 95% without hint')."""


def contract(setting: str, mode: str = "program") -> str:
    """The system message of a setting in a design mode (``program`` or ``structured``)."""
    if mode == "structured":
        if setting != "games":
            raise ValueError("the structured design mode is defined for the games setting only")
        return STRUCTURED_GAMES_CONTRACT
    if setting == "games":
        return GAMES_CONTRACT
    if setting == "tools":
        return TOOLS_CONTRACT
    raise ValueError(f"unknown SPADE setting {setting!r} (games or tools)")


def design_messages(setting: str, skill: str, document: str | None,
                    seed: PromptEnv | None = None,
                    negatives: Sequence[PromptEnv] = (), max_seed_chars: int = 3000,
                    mode: str = "program") -> list[dict[str, str]]:
    """Chat messages of one design call (see module docstring)."""
    parts = [f"Target skill: {skill}."]
    if document:
        parts.append("Take inspiration from this reference document (its topic, objects, rules or "
                     "data), and turn it into an environment that exercises the target skill:\n"
                     f"<document>\n{document}\n</document>")
    else:
        parts.append("Invent an original environment that exercises the target skill.")
    if seed is not None:
        parts.append(f"Mutate this earlier environment ({seed.note}): keep what makes it "
                     "challenging, change the task, rules or data so that it is new, and adjust the "
                     "difficulty so the hint makes the difference.\n"
                     + seed_block(seed, mode, max_seed_chars))
    if negatives:
        lines = [f"- [{n.note}] skill {n.skill}; hint: {n.hint[:200]}" for n in negatives]
        parts.append("Avoid environments like these (they were too easy or too hard):\n"
                     + "\n".join(lines))
    parts.append("Write the parts and the hint now, in the required format." if mode == "structured"
                 else "Write the program and the hint now, in the required format.")
    return [{"role": "system", "content": contract(setting, mode)},
            {"role": "user", "content": "\n\n".join(parts)}]


def seed_block(seed: PromptEnv, mode: str, max_chars: int) -> str:
    """A remembered environment in the answer format of ``mode`` (structured: its parts, when
    the program splits into them; otherwise the program in a fence), then its hint."""
    if mode == "structured":
        try:
            return format_parts(replace(split_parts(seed.source), hint=seed.hint))
        except (SyntaxError, PartError):
            pass
    return f"```python\n{seed.source[:max_chars]}\n```\n<hint>{seed.hint}</hint>"
