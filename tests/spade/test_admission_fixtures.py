"""Every fixture design is admitted, or rejected with exactly the expected reason."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from curriculum.core.pool import program_hash
from engineers.spade.admission import (admit, final_answer, hint_leak,
                                       solution_actions)
from engineers.spade.config import AdmissionConfig, RejectReason
from engineers.spade.designer import DesignCandidate
from engineers.spade.parse import DesignParseError, parse_design

NAMES = sorted(p.name for p in FIXTURES.glob("*.out"))


def candidate(text: str) -> DesignCandidate:
    cand = DesignCandidate(round=0, call=0, setting="games", skill="s", messages=[], output=text,
                           num_tokens=0, corpus_doc_id=None, parent=None)
    try:
        parsed = parse_design(text)
    except DesignParseError as exc:
        cand.parse_reason, cand.parse_detail = exc.reason, str(exc)
    else:
        cand.program, cand.hint = parsed.program, parsed.hint
    return cand


def test_fixture_set_is_complete(expected):
    assert sorted(expected) == NAMES
    assert len(NAMES) >= 15
    reasons = {v for v in expected.values() if v}
    assert {"syntax_error", "missing_solution", "bad_return", "solution_does_not_win",
            "constant_task", "hint_leak", "timeout", "forbidden_import"} <= reasons
    assert sum(v is None and n.startswith("games") for n, v in expected.items()) >= 3
    assert sum(v is None and n.startswith("tools") for n, v in expected.items()) >= 2


@pytest.mark.parametrize("name", NAMES)
def test_fixture_verdict(name, expected, sandbox_pool):
    result = admit(candidate((FIXTURES / name).read_text()), sandbox_pool, AdmissionConfig())
    want = expected[name]
    got = result.reason.value if result.reason else None
    assert got == want, f"{name}: {result.detail}"
    assert result.admitted == (want is None)
    if want is None:
        assert result.penalty is None
        assert result.checks_passed[-1] == "hint_clean"
        assert result.first_observations[0] != result.first_observations[1] or \
            result.answers[0] != result.answers[1]
    else:
        assert result.penalty == AdmissionConfig().penalties[RejectReason(want)]
        assert result.detail


def test_penalties_are_configurable(sandbox_pool):
    config = AdmissionConfig(penalties={RejectReason.syntax_error: -7.0})
    result = admit(candidate((FIXTURES / "bad_syntax.out").read_text()), sandbox_pool, config)
    assert result.penalty == -7.0
    assert config.penalties[RejectReason.timeout] == -1.0  # others keep their defaults


def test_solution_actions_and_final_answer():
    assert solution_actions("42") == ["\\boxed{42}"]
    assert solution_actions(7) == ["\\boxed{7}"]
    assert solution_actions([{"name": "a", "arguments": {}}, {"answer": "x"}]) == \
        ['{"name": "a", "arguments": {}}', '{"answer": "x"}']
    for bad in (None, True, [], {"a": 1}, [object()]):
        with pytest.raises(ValueError):
            solution_actions(bad)
    assert final_answer([{"name": "a"}, {"answer": 5}]) == "5"
    assert final_answer(["\\boxed{+3}", "\\boxed{*2}"]) == "*2"
    assert final_answer(12) == "12"


def test_hint_leak_rules():
    assert hint_leak("It is 97.", ["97"]) is not None
    assert hint_leak("Try 970 first", ["97"]) is None
    assert hint_leak("use \\boxed{x}", [None]) is not None
    assert hint_leak("Think of 7 colours", ["7"]) is None  # one character: only explicit phrasing
    assert hint_leak("the answer is 7", ["7"]) is not None
    assert hint_leak("Sort the WORDS: apple,kiwi", ["apple,kiwi"]) is not None


def test_program_hash_ignores_trailing_space():
    assert program_hash("class AEnv:\n    pass\n") == program_hash("\nclass AEnv:   \n    pass")
    assert program_hash("class AEnv:\n    pass") != program_hash("class BEnv:\n    pass")
