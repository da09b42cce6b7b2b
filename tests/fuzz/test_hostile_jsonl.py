"""Hostile JSONL for ``curriculum mapf solve`` / ``validate``: every line its own answer.

A 4,301-digit integer must cost only its own line (not every line after it), a line that failed
and a command that failed have different exit codes, every output line is strict JSON (a NaN
``id`` echoed as a string), and a long response is validated whole up
to ``MAX_RESPONSE_CHARS`` and refused as "too long" beyond it, never cut.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.core.userfiles import EXIT_COMMAND_FAILED, EXIT_SOME_FAILED, parse_line
from testbeds.mapf_frozenlake.parse import MAX_RESPONSE_CHARS, parse_plan

runner = CliRunner()
INSTANCE = {"h": 3, "w": 3, "holes": [], "starts": [[0, 0]], "goals": [[0, 2]]}
PLAN = "Agent 1: (0,0) (0,1) (0,2)"


def _answers(result) -> list[dict]:
    return [json.loads(line) for line in result.output.strip().splitlines()]


def test_a_huge_integer_costs_only_its_line(tmp_path):
    good = json.dumps({"id": "ok", **INSTANCE})
    lines = [good] * 5 + ['{"id": "big", "h": ' + "9" * 4301 + "}"] + [good] * 5
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["mapf", "solve", str(path), "--time-budget", "1"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    answers = _answers(result)
    assert [a["line"] for a in answers] == list(range(1, 12))
    assert "4,301 digits" in answers[5]["error"]
    assert all(a["status"] == "solved" for i, a in enumerate(answers) if i != 5)
    assert result.exit_code == EXIT_SOME_FAILED
    record = parse_line(1, b"[" + b"1" * 4300 + b"]")  # the longest integer read
    assert record.error is None and len(str(record.value[0])) == 4300


def test_a_failed_line_and_a_failed_command_exit_differently(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("{oops\n")
    assert runner.invoke(app, ["mapf", "solve", str(path)]).exit_code == EXIT_SOME_FAILED == 1
    missing = runner.invoke(app, ["mapf", "solve", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == EXIT_COMMAND_FAILED == 2 and "no such file" in missing.output


def test_long_responses_are_validated_whole_or_refused_as_too_long(tmp_path):
    padded = PLAN + " x" * 100_100  # past the limit: a cut to the tail lost the plan
    waits = "Agent 1: (0,0) " + "(0,0) " * 33_000 + "(0,1) (0,2)"  # 198,026: kept whole
    at_limit = PLAN + " " * (MAX_RESPONSE_CHARS - len(PLAN))
    records = [{"instance": INSTANCE, "response": r} for r in (padded, waits, at_limit)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = runner.invoke(app, ["mapf", "validate", str(path), "--tokenizer", "words"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    too_long, whole, limit = _answers(result)
    assert "response too long: 200,226 characters" in json.dumps(too_long)
    assert whole["valid"] is True and whole["cost"] > 33_000
    assert limit["valid"] is True
    assert parse_plan(padded).error.startswith("response too long")


def test_every_output_line_is_strict_json(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": value, "instance": INSTANCE, "response": PLAN}) + "\n"
                            for value in (float("nan"), float("inf"), -float("inf"), "\ud800")))
    result = runner.invoke(app, ["mapf", "validate", str(path), "--tokenizer", "words"])
    ids = [json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in the output"))["id"]
           for line in result.output.strip().splitlines()]
    assert ids == ["NaN", "Infinity", "-Infinity", "\ud800"]
