"""Fuzzing every file input (hypothesis): whatever the bytes, the user gets an answer or a
clear refusal, never a traceback, and nothing committed is lost.

Covered: the JSONL tools (``mapf solve`` / ``validate``), generator-config JSON, run configs
(YAML files and ``--set`` overrides), engineer output (the checkpoint engineer's JSON answers,
``project``, SPADE designs, endpoint replies) and run-dir files (``test_fuzz_rundir.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.config import ConfigError, load_config

runner = CliRunner()
FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers(-10, 70) | st.floats(allow_nan=True) | st.text(max_size=8)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
cells = st.lists(st.lists(st.integers(-1, 5), min_size=2, max_size=2), max_size=4)


@st.composite
def instance_like(draw):
    """Mostly well-formed small instances with fields knocked out or replaced at random."""
    d = {"h": draw(st.integers(-1, 5)), "w": draw(st.integers(-1, 5)), "holes": draw(cells),
         "starts": draw(cells), "goals": draw(cells)}
    if draw(st.booleans()):
        d["optimal_cost"] = draw(st.integers(-2, 20) | json_scalars)
    for key in draw(st.lists(st.sampled_from(sorted(d)), max_size=2, unique=True)):
        if draw(st.booleans()):
            del d[key]
        else:
            d[key] = draw(json_values)
    return d


@st.composite
def jsonl_bytes(draw, record):
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["record", "json", "bytes", "blank"]))
        if kind == "record":
            lines.append(json.dumps(draw(record)).encode())
        elif kind == "json":
            lines.append(json.dumps(draw(json_values)).encode())
        elif kind == "bytes":
            lines.append(draw(st.binary(max_size=30)).replace(b"\n", b""))
        else:
            lines.append(b" " * draw(st.integers(0, 2)))
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))


def _no_traceback(result):
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def _check_jsonl_answers(raw: bytes, result):
    _no_traceback(result)
    expected = [i + 1 for i, line in enumerate(raw.split(b"\n")) if line.rstrip(b"\r").strip()]
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["line"] for o in out] == expected  # one answer per line, in order
    failed = any("error" in o for o in out)
    assert result.exit_code == (1 if failed else 0)


@FAST
@given(raw=jsonl_bytes(instance_like()))
def test_mapf_solve_answers_every_line(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("solve") / "in.jsonl"
    path.write_bytes(raw)
    result = runner.invoke(app, ["mapf", "solve", str(path), "--time-budget", "0.2",
                                 "--node-budget", "200"])
    _check_jsonl_answers(raw, result)


validate_record = st.fixed_dictionaries(
    {"instance": instance_like(), "response": st.text(max_size=40) | json_values},
    optional={"num_tokens": st.integers(-2, 5000) | json_scalars, "id": json_scalars})


@FAST
@given(raw=jsonl_bytes(validate_record))
def test_mapf_validate_answers_every_line(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("validate") / "in.jsonl"
    path.write_bytes(raw)
    _check_jsonl_answers(raw, runner.invoke(app, ["mapf", "validate", str(path), "--tokenizer", "words"]))


@FAST
@given(raw=st.binary(max_size=60) | json_values.map(lambda v: json.dumps(v).encode()))
def test_generator_config_files(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("gen") / "cfg.json"
    path.write_bytes(raw)
    result = runner.invoke(app, ["mapf", "generate", "--n", "1", "--config", str(path)])
    _no_traceback(result)
    assert result.exit_code in (0, 2)


yaml_like = st.one_of(
    st.binary(max_size=80),
    st.text(alphabet=st.sampled_from(list("abcdefghij:-[]{}, \n\t'\"!&*#|>%@`0123456789.")),
            max_size=80).map(str.encode),
    st.dictionaries(st.sampled_from(["rounds", "seed", "trainer", "testbed", "engineer", "model",
                                     "tasks_per_round", "run_name", "bogus"]),
                    json_values, max_size=4).map(lambda d: json.dumps(d).encode()),
)


@FAST
@given(raw=yaml_like)
def test_run_config_files(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("cfg") / "run.yaml"
    path.write_bytes(raw)
    try:
        load_config(path)
    except ConfigError:
        pass
    result = runner.invoke(app, ["run", "-c", str(path), "--dry-run"])
    _no_traceback(result)
    assert result.exit_code in (0, 2)


@FAST
@given(items=st.lists(st.text(max_size=30), max_size=3))
def test_set_overrides(items):
    try:
        load_config(None, items)
    except ConfigError:
        pass


# -- engineer output ------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(value=json_values | st.text(max_size=120))
def test_project_takes_any_engineer_value(value):
    from testbeds.mapf_frozenlake.config import GeneratorConfig, project, uniform_config

    previous = uniform_config(0.2, 0.1)
    proposal, changes = project(value, previous)
    assert isinstance(proposal, GeneratorConfig)
    assert abs(sum(proposal.sizes[s].data_ratio for s in proposal.sizes) - 1) < 1e-6


engineer_text = st.one_of(
    st.text(max_size=200),
    json_values.map(json.dumps),
    st.builds(lambda a, v, b: a + json.dumps(v)[: len(json.dumps(v)) // 2 + 1] + b,
              st.text(max_size=20), json_values, st.text(max_size=20)),
    st.text(alphabet=st.sampled_from(list("{}[]\"':,/*x0123456789 \nsizeTrueNone")), max_size=120),
)


@settings(max_examples=200, deadline=None)
@given(text=engineer_text)
def test_checkpoint_engineer_answers_parse_without_raising(text):
    from engineers.checkpoint.parse import parse_answer

    answer = parse_answer(text)
    assert answer.proposal is None or isinstance(answer.proposal, dict)


@settings(max_examples=100, deadline=None)
@given(text=engineer_text | st.text(alphabet=st.sampled_from(list("`pythonclasdefhint:<>/\n ")),
                                    max_size=150))
def test_spade_designs_parse_without_raising(text):
    from engineers.spade.parse import DesignParseError, parse_design

    try:
        design = parse_design(text)
    except DesignParseError as err:  # the designer's output is rejected with a reason
        assert err.args and str(err)
        return
    assert isinstance(design.program, str)


@settings(max_examples=100, deadline=None)
@given(reply=json_values)
def test_endpoint_replies(reply):
    from curriculum.core.endpoint import EndpointError, _completion

    try:
        completion = _completion(reply, "http://endpoint")
    except EndpointError:
        return
    assert isinstance(completion.text, str) and isinstance(completion.num_tokens, int)
