"""Lenient parsing of designer outputs and the content of the design prompts."""

from __future__ import annotations

import pytest

from engineers.spade.config import RejectReason
from engineers.spade.parse import DesignParseError, parse_design
from engineers.spade.prompts import PromptEnv, contract, design_messages

PROGRAM = "import random\n\nclass AEnv:\n    def solution(self):\n        return '1'\n"


@pytest.mark.parametrize("text", [
    f"```python\n{PROGRAM}```\n<hint>use parity</hint>",
    f"Sure!\n```py\n{PROGRAM}```\nHint: use parity\n\nThanks.",
    f"<program>\n{PROGRAM}</program>\n**Hint**: use parity",
    f"<think>plan ```python\nx = 1\n```</think>\n```\n{PROGRAM}```\n<hint>\nuse parity\n",
    f"{PROGRAM}\n<hint>use parity</hint>",
])
def test_lenient_forms(text):
    parsed = parse_design(text)
    assert "class AEnv" in parsed.program and "solution" in parsed.program
    assert parsed.hint == "use parity"


def test_unterminated_fence_and_hint_constant():
    text = "```python\nclass AEnv:\n    hint = 'go left first'\n    def solution(self):\n        return 1\n"
    parsed = parse_design(text)
    assert parsed.hint == "go left first"
    assert parsed.program.startswith("class AEnv")


def test_longest_class_block_wins_and_synthetic_imports_dropped():
    text = ("```python\nclass Helper:\n    pass\n```\n"
            "```python\nfrom testbeds.spade.synthetic.tool_env import ToolEnv\n"
            "class BigEnv(ToolEnv):\n    def solution(self):\n        return []\n```\n<hint>h</hint>")
    parsed = parse_design(text)
    assert "BigEnv" in parsed.program and "testbeds" not in parsed.program


@pytest.mark.parametrize("text, reason", [
    ("no code here at all", RejectReason.parse_error),
    ("```python\nx = 1\n```\n<hint>h</hint>", RejectReason.parse_error),
    (f"```python\n{PROGRAM}```", RejectReason.missing_hint),
    (f"```python\n{PROGRAM}```\n<hint>   </hint>", RejectReason.missing_hint),
    ("", RejectReason.parse_error),
])
def test_rejections_carry_reason(text, reason):
    with pytest.raises(DesignParseError) as err:
        parse_design(text)
    assert err.value.reason == reason
    assert str(err.value)


def test_prompts_cover_contracts_and_grounding():
    games = design_messages("games", "logical deduction", "DOC TEXT about primes")
    assert games[0]["role"] == "system" and "\\boxed" in games[0]["content"]
    assert "solution(self)" in games[0]["content"] and "truncated=True" in games[0]["content"]
    assert "logical deduction" in games[1]["content"] and "DOC TEXT about primes" in games[1]["content"]
    tools = design_messages("tools", "error recovery", None)
    assert "ToolEnv" in tools[0]["content"] and "tool_<name>" in tools[0]["content"]
    assert "<document>" not in tools[1]["content"]
    seed = PromptEnv("abc", "optimization", "the hint", "class SeedEnv: pass", "regret 0.40")
    neg = PromptEnv("def", "memory recall", "easy hint", "class EasyEnv: pass", "too easy")
    msgs = design_messages("games", "optimization", None, seed=seed, negatives=[neg])
    assert "class SeedEnv" in msgs[1]["content"] and "regret 0.40" in msgs[1]["content"]
    assert "easy hint" in msgs[1]["content"] and "too easy" in msgs[1]["content"]
    with pytest.raises(ValueError):
        contract("chess")
