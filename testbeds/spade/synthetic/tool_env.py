"""``ToolEnv``: the base class of SPADE tool-use environments.

A subclass simulates tools over a backend state (files, accounts, inventory...):

* ``setup(rng)`` builds ``self.state`` from a ``random.Random`` seeded by ``reset`` and returns
  the task text shown to the agent;
* each ``tool_<name>(self, arg: type, ...)`` method is a tool; its docstring is the tool's
  description and its parameters (annotated ``str``/``int``/``float``/``bool``/``list``/``dict``)
  form the JSON schema; it returns any JSON value, or raises ``ValueError`` with a message the
  agent sees as a tool error;
* ``expected_answer()`` (the answer the final reply must equal, or ``None`` when only the state
  matters) and/or ``check_state()`` (whether the backend reached the goal) define success;
* ``solution()`` returns the list of actions (tool-call dicts, then a final ``{"answer": ...}``)
  that solves the current task.

One action per ``step``. An action is a tool call, written as JSON
``{"name": "<tool>", "arguments": {...}}`` (optionally inside ``<tool_call>...</tool_call>`` or a
code fence), or a final answer, written as ``\\boxed{...}`` or ``{"answer": "..."}``. A tool call
returns the tool's result (or error) as the observation with reward 0; the final answer ends the
episode with reward 1.0 when ``expected_answer`` matches (``normalize_answer``) and
``check_state()`` holds, else 0.0 with feedback saying which check failed. After ``max_turns``
actions without a final answer the episode is truncated. ``tool_schemas()`` returns the
OpenAI-style schemas (``{"type": "function", "function": {name, description, parameters}}``).

Only standard-library modules on the sandbox allowlist are used: this file is part of the sandbox
prelude (``testbeds.spade.synthetic.prelude_source``), so programs use ``ToolEnv`` without importing it.
"""

import json
import random
import re

from testbeds.spade.synthetic.games import extract_boxed, normalize_answer

_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
               "list": "array", "dict": "object"}


def _type_name(annotation):
    if isinstance(annotation, str):
        return annotation.split("[")[0].split("|")[0].strip()
    return getattr(annotation, "__name__", "str")


def parse_action(action):
    """Classify one agent action: ``("answer", text)``, ``("call", name, arguments)`` or
    ``("invalid", reason)``. Accepts a dict or a string (JSON, tags or fences allowed)."""
    if isinstance(action, dict):
        payload = action
    else:
        text = str(action)
        tagged = re.search(r"<tool_call>(.*?)</tool_call>", text, re.S)
        if tagged:
            text = tagged.group(1)
        else:
            boxed = extract_boxed(text)
            if boxed is not None:
                return ("answer", boxed)
        fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
        if fenced:
            text = fenced.group(1)
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return ("invalid", "no tool call or final answer found: write a JSON tool call "
                               '{"name": ..., "arguments": {...}} or a final answer \\boxed{...}')
        try:
            payload = json.loads(text[start:end + 1])
        except ValueError as exc:
            return ("invalid", f"the tool call is not valid JSON ({exc})")
    if not isinstance(payload, dict):
        return ("invalid", "a tool call must be a JSON object")
    if "answer" in payload and "name" not in payload:
        return ("answer", str(payload["answer"]))
    name = payload.get("name")
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ("invalid", "arguments must be a JSON object")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return ("invalid", 'a tool call needs "name" (a string) and "arguments" (an object)')
    return ("call", name, arguments)


class ToolEnv:
    """Base class: JSON tool calls dispatched to ``tool_*`` methods over ``self.state``."""

    max_turns = 12
    """Actions allowed before the episode is truncated."""

    # -- to implement in subclasses ---------------------------------------------------------
    def setup(self, rng):
        """Build ``self.state`` from ``rng`` and return the task text."""
        raise NotImplementedError("subclasses implement setup(rng)")

    def expected_answer(self):
        """The answer the final reply must equal, or None when only the final state counts."""
        return None

    def check_state(self):
        """Whether the backend state satisfies the task (default: no state condition)."""
        return True

    # -- Gym-style interface ----------------------------------------------------------------
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.state = {}
        self.turn = 0
        self.done = False
        self.history = []
        self.task = self.setup(self.rng)
        obs = (f"{self.task}\n\nTools (OpenAI function schemas):\n"
               f"{json.dumps(self.tool_schemas())}\n\n"
               'Call one tool per turn as JSON {"name": "<tool>", "arguments": {...}}. '
               "When done, reply with the final answer in \\boxed{...}.")
        return obs, {"turn": 0, "tools": [s["function"]["name"] for s in self.tool_schemas()]}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {"turn": self.turn}
        self.turn += 1
        parsed = parse_action(action)
        reward, terminated = 0.0, False
        if parsed[0] == "answer":
            terminated = True
            self.done = True
            answer_ok, state_ok = self._check(parsed[1])
            if answer_ok and state_ok:
                reward, obs = 1.0, "Correct: the task is solved."
            elif not answer_ok:
                obs = f"Incorrect: the final answer {parsed[1]!r} is wrong."
            else:
                obs = "Incorrect: the backend state does not satisfy the task."
        elif parsed[0] == "call":
            obs = self._dispatch(parsed[1], parsed[2])
        else:
            obs = f"Invalid action: {parsed[1]}"
        self.history.append(action if isinstance(action, str) else json.dumps(action))
        truncated = not terminated and self.turn >= self.max_turns
        if truncated:
            self.done = True
            obs += f"\nTurn limit of {self.max_turns} reached."
        return obs, reward, terminated, truncated, {"turn": self.turn}

    def tool_schemas(self):
        """OpenAI-style schemas of every ``tool_*`` method, sorted by name."""
        schemas = []
        for attr in sorted(dir(type(self))):
            if not attr.startswith("tool_") or attr == "tool_schemas":
                continue
            fn = getattr(type(self), attr)
            if not callable(fn):
                continue
            code = fn.__code__
            names = code.co_varnames[1:code.co_argcount]
            defaults = fn.__defaults__ or ()
            required = list(names[:len(names) - len(defaults)])
            annotations = getattr(fn, "__annotations__", {})
            properties = {n: {"type": _JSON_TYPES.get(_type_name(annotations.get(n, "str")), "string")}
                          for n in names}
            schemas.append({"type": "function", "function": {
                "name": attr[len("tool_"):],
                "description": " ".join((fn.__doc__ or "").split()),
                "parameters": {"type": "object", "properties": properties, "required": required},
            }})
        return schemas

    # -- internals -------------------------------------------------------------------------
    def _check(self, answer):
        expected = self.expected_answer()
        answer_ok = expected is None or normalize_answer(answer) == normalize_answer(expected)
        return answer_ok, bool(self.check_state())

    def _dispatch(self, name, arguments):
        method = getattr(self, "tool_" + name, None) if re.fullmatch(r"\w+", name) else None
        if method is None or name == "schemas":
            known = ", ".join(s["function"]["name"] for s in self.tool_schemas())
            return f"Error: unknown tool {name!r}. Available tools: {known}."
        try:
            result = method(**arguments)
        except TypeError as exc:
            return f"Error: bad arguments for {name}: {exc}"
        except (ValueError, KeyError, LookupError) as exc:
            return f"Error from {name}: {exc}"
        return json.dumps({"result": result}, default=str)
