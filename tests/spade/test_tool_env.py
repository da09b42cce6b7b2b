"""ToolEnv in process (the base class) and inside the sandbox (through the prelude)."""

from __future__ import annotations

import json

from conftest import FIXTURES

from engineers.spade.parse import parse_design
from testbeds.spade.synthetic.games import extract_boxed, normalize_answer
from testbeds.spade.synthetic.tool_env import ToolEnv, parse_action


class CounterEnv(ToolEnv):
    max_turns = 4

    def setup(self, rng):
        self.state = {"count": rng.randint(0, 5)}
        self.goal = self.state["count"] + 2
        return f"Raise the counter to {self.goal} and report it."

    def tool_add(self, n: int) -> int:
        """Add n to the counter."""
        if n <= 0:
            raise ValueError("n must be positive")
        self.state["count"] += n
        return self.state["count"]

    def tool_peek(self) -> int:
        """Read the counter."""
        return self.state["count"]

    def expected_answer(self):
        return str(self.goal)

    def check_state(self):
        return self.state["count"] == self.goal

    def solution(self):
        return [{"name": "add", "arguments": {"n": 2}}, {"answer": str(self.goal)}]


def test_schemas_dispatch_and_success():
    env = CounterEnv()
    obs, info = env.reset(seed=3)
    assert "Raise the counter" in obs and info["tools"] == ["add", "peek"]
    schema = {s["function"]["name"]: s for s in env.tool_schemas()}
    assert schema["add"]["function"]["parameters"] == {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert schema["add"]["function"]["description"] == "Add n to the counter."
    out = env.step('<tool_call>{"name": "add", "arguments": {"n": 2}}</tool_call>')
    assert json.loads(out[0])["result"] == env.goal and out[1:4] == (0.0, False, False)
    out = env.step(f"The counter is \\boxed{{{env.goal}}}")
    assert out[1:4] == (1.0, True, False)


def test_errors_feedback_and_truncation():
    env = CounterEnv()
    env.reset(seed=1)
    assert "unknown tool" in env.step('{"name": "delete", "arguments": {}}')[0]
    assert "n must be positive" in env.step('{"name": "add", "arguments": {"n": -1}}')[0]
    assert "bad arguments" in env.step('{"name": "add", "arguments": {"m": 1}}')[0]
    obs, reward, terminated, truncated, _ = env.step("hello")
    assert "Invalid action" in obs and truncated and not terminated and reward == 0.0
    env.reset(seed=1)
    obs, reward, terminated, _, _ = env.step("\\boxed{999}")
    assert terminated and reward == 0.0 and "wrong" in obs
    env.reset(seed=1)
    env.step('{"name": "add", "arguments": {"n": 1}}')
    obs, reward, _, _, _ = env.step({"answer": str(env.goal)})
    assert reward == 0.0 and "state" in obs


def test_parse_action_forms():
    assert parse_action('```json\n{"name": "a", "arguments": {"x": 1}}\n```') == ("call", "a", {"x": 1})
    assert parse_action({"name": "a", "arguments": '{"x": 2}'}) == ("call", "a", {"x": 2})
    assert parse_action('{"answer": 3}') == ("answer", "3")
    assert parse_action("{not json}")[0] == "invalid"
    assert extract_boxed("a \\boxed{x{y}} b \\boxed{z}") == "z"
    assert extract_boxed("\\boxed{unclosed") is None
    assert normalize_answer(" $3.0$. ") == "3"


def test_tool_env_runs_in_sandbox(sandbox_pool):
    parsed = parse_design((FIXTURES / "tools_bank_ok.out").read_text())
    with sandbox_pool.load(parsed.program) as env:
        first = env.reset(7)
        assert "transfer" in first.obs and first.info["tools"] == ["get_balances", "transfer"]
        schemas = env.call("tool_schemas")
        assert {s["function"]["name"] for s in schemas} == {"get_balances", "transfer"}
        for action in env.call("solution"):
            result = env.step(json.dumps(action))
        assert result.terminated and result.reward == 1.0
