"""Every input gets an answer: instance validity with reasons (shared by the solver, the
validator, the gym env and the testbed) and the line-by-line JSONL tools."""

import json

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import testbeds  # noqa: F401  (registers MAPFFrozenLake-v0)
from testbeds.mapf_frozenlake.cli import app
from testbeds.mapf_frozenlake.batch import solve_record, validate_record
from testbeds.mapf_frozenlake.instance import MAX_AGENTS, Instance, InvalidInstance
from testbeds.mapf_frozenlake.solver import solve

GOOD = {"id": "ok", "h": 3, "w": 3, "holes": [[1, 1]], "starts": [[0, 0], [2, 2]],
        "goals": [[2, 2], [0, 0]]}


def _with(**kw):
    return {**GOOD, **kw}


@pytest.mark.parametrize("fields, reason", [
    ({"starts": [[0, 0], [0, 0]]}, "agents 1 and 2 share start (0, 0)"),
    ({"goals": [[2, 2], [2, 2]]}, "agents 1 and 2 share goal (2, 2)"),
    ({"starts": [[1, 1], [2, 2]]}, "start of agent 1 (1, 1) is a hole"),
    ({"goals": [[1, 1], [0, 0]]}, "goal of agent 1 (1, 1) is a hole"),
    ({"h": -3, "w": 99999999}, "grid -3x99999999 is out of range"),
    ({"h": 0}, "grid 0x3 is out of range"),
    ({"goals": [[2, 5], [0, 0]]}, "goal of agent 1 (2, 5) is off the 3x3 grid"),
    ({"starts": [[-1, 0], [2, 2]]}, "start of agent 1 (-1, 0) is off the 3x3 grid"),
    ({"holes": [[7, 7]]}, "hole (7, 7) is off the 3x3 grid"),
    ({"goals": [[2, 2]]}, "2 starts but 1 goals"),
    ({"starts": [], "goals": []}, "0 agents"),
    ({"h": "3"}, "'h' must be an integer"),
    ({"h": True}, "'h' must be an integer"),
    ({"starts": [[0, 0, 1], [2, 2]]}, "'starts'[0] must be a [row, col] pair"),
    ({"holes": "none"}, "'holes' must be a list"),
    ({"optimal_plan": [[[0, 0]]]}, "optimal_plan has 1 paths for 2 agents"),
    ({"optimal_cost": -1}, "optimal_cost -1 is negative"),
    ({"optimal_cost": 2.5}, "'optimal_cost' must be an integer"),
    ({"needs_wait": "yes"}, "'needs_wait' must be true or false"),
])
def test_invalid_instances_name_their_reason(fields, reason):
    with pytest.raises(InvalidInstance) as err:
        Instance.from_dict(_with(**fields))
    assert any(reason in r for r in err.value.reasons), err.value.reasons
    # the batch tools answer with the same reason instead of "unsolvable"
    out = solve_record(_with(**fields), line=4)
    assert out["status"] == "error" and out["line"] == 4 and reason in out["error"]
    assert out["id"] == "ok"
    v = validate_record({"instance": _with(**fields), "response": "Agent 1: (0,0)"}, line=9)
    assert reason in v["error"] and v["line"] == 9 and "valid" not in v


def test_every_reason_is_listed_and_missing_fields_are_named():
    with pytest.raises(InvalidInstance) as err:
        Instance.from_dict({"h": 3, "w": 3, "starts": [[0, 0], [0, 0]], "goals": [[1, 1], [3, 3]],
                            "holes": [[1, 1]]})
    assert len(err.value.reasons) == 3  # shared start, goal on hole, goal off grid
    with pytest.raises(InvalidInstance, match="missing fields 'w', 'goals'"):
        Instance.from_dict({"h": 3, "starts": [[0, 0]]})
    with pytest.raises(InvalidInstance, match="must be a JSON object"):
        Instance.from_dict([1, 2])
    with pytest.raises(InvalidInstance, match=f"must be 1..{MAX_AGENTS}"):
        Instance(8, 8, frozenset(), [(0, c) for c in range(8)] + [(1, c) for c in range(8)]
                 + [(2, 0)], [(7, c) for c in range(8)] + [(6, c) for c in range(8)] + [(5, 0)])


def test_solver_refuses_an_instance_edited_into_invalidity():
    inst = Instance.from_dict(GOOD)
    assert solve(inst).status == "solved"
    inst.starts = [(0, 0), (0, 0)]
    with pytest.raises(InvalidInstance, match="share start"):
        solve(inst)


def test_gym_env_plays_a_given_instance_and_refuses_invalid_ones():
    env = gym.make("MAPFFrozenLake-v0").unwrapped
    obs, info = env.reset(seed=0, options={"instance": GOOD})
    assert info["instance"]["starts"] == GOOD["starts"] and "3x3" in obs
    _, reward, done, _, verdict = env.step("Agent 1: (0,0) (0,1) (0,2) (1,2) (2,2)\n"
                                           "Agent 2: (2,2) (2,1) (2,0) (1,0) (0,0) (0,0)")
    assert done and verdict["optimal_cost"] == 8
    with pytest.raises(InvalidInstance, match="is a hole"):
        env.reset(options={"instance": _with(starts=[[1, 1], [2, 2]])})


def test_testbed_regenerates_a_suite_cache_holding_an_invalid_instance(tmp_path, monkeypatch):
    from testbeds.mapf_frozenlake.suites import build_suite, suites_dir

    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path))
    good = build_suite(2, 1, seed=3)
    path = next(suites_dir().glob("*.jsonl"))
    lines = path.read_text().splitlines()
    bad = json.loads(lines[0])
    bad["starts"] = [bad["starts"][0], bad["starts"][0]]
    path.write_text("\n".join([json.dumps(bad)] + lines[1:]) + "\n")
    assert [i.to_json() for i in build_suite(2, 1, seed=3)] == [i.to_json() for i in good]


# -- the CLI, line by line ------------------------------------------------------------------------

def _run(args, **kw):
    return CliRunner().invoke(app, args, **kw)


def _mixed_file(tmp_path, record):
    """A good line, then every kind of bad line; blank lines in between are not records."""
    lines = [json.dumps(record(GOOD)).encode(), b"",
             b'{"h": 3, \xff\xfe "w": 3}',                      # line 3: not UTF-8
             b"{not json",                                      # line 4
             json.dumps(record({"h": 3, "w": 3})).encode(),      # line 5: missing fields
             json.dumps(record(_with(starts=[[0, 0], [0, 0]]))).encode(),  # line 6: invalid
             b"[1, 2, 3]",                                      # line 7: not an object
             b"   ",
             json.dumps(record(GOOD)).encode()]                  # line 9
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("command, record", [
    ("solve", lambda inst: inst),
    ("validate", lambda inst: {"id": "r", "instance": inst, "response": "Agent 1: (0,0) (0,1)"}),
])
def test_cli_answers_every_line_in_order(tmp_path, command, record):
    res = _run([command, str(_mixed_file(tmp_path, record))])
    assert res.exit_code == 1
    out = [json.loads(x) for x in res.stdout.splitlines()]
    assert [o["line"] for o in out] == [1, 3, 4, 5, 6, 7, 9]
    assert "error" not in out[0] and "error" not in out[-1]
    assert "not UTF-8 (byte 0xff at column 10)" in out[1]["error"]
    assert "bad JSON" in out[2]["error"]
    assert "missing fields 'starts', 'goals'" in out[3]["error"]
    assert "share start" in out[4]["error"]
    assert "JSON object" in out[5]["error"]
    if command == "solve":
        assert out[0]["status"] == "solved" and out[4]["status"] == "error"


def test_cli_exit_codes(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(GOOD))
    res = _run(["solve", str(good)])
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 2
    res = _run(["solve", "-"], input=json.dumps(GOOD) + "\n")
    assert res.exit_code == 0 and json.loads(res.stdout)["cost"] == 8
    for target, message in ((tmp_path / "absent.jsonl", "no such file"),
                            (tmp_path, "is a directory")):
        res = _run(["validate", str(target)])
        assert res.exit_code == 2 and message in res.stderr and "Traceback" not in res.output


def test_cli_generate_refuses_bad_inputs_readably(tmp_path):
    cases = {b"{oops": "not valid JSON", b"[1]": "must contain a JSON object",
             b'{"sizes": 3}': "invalid generator config", b"\xff": "not UTF-8"}
    for raw, message in cases.items():
        path = tmp_path / "cfg.json"
        path.write_bytes(raw)
        res = _run(["generate", "--config", str(path)])
        assert res.exit_code == 2 and message in res.stderr, res.output
        assert res.exception is None or isinstance(res.exception, SystemExit)
    res = _run(["generate", "--agents", "12", "--n", "4"])  # cannot fit on 3x3
    assert res.exit_code == 2 and "do not fit" in res.stderr


def test_cli_validate_counts_tokens_with_a_tokenizer(tmp_path, tiny_model_dir):
    """num_tokens comes from the chosen tokenizer (not whitespace words), and the output names
    the unit; a record's own num_tokens is kept and marked 'given'."""
    from trainers.lm.models import load_tokenizer

    response = "Agent 1: (0,0) (0,1)"
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"instance": GOOD, "response": response}) + "\n"
                    + json.dumps({"instance": GOOD, "response": response, "num_tokens": 7}) + "\n")
    tokens = len(load_tokenizer(str(tiny_model_dir))(response, add_special_tokens=False)["input_ids"])
    assert tokens != len(response.split())
    out = [json.loads(x) for x in _run(["validate", str(path), "--tokenizer", str(tiny_model_dir)]).stdout.splitlines()]
    assert [(o["num_tokens"], o["token_unit"]) for o in out] == [(tokens, str(tiny_model_dir)), (7, "given")]
    out = [json.loads(x) for x in _run(["validate", str(path), "--tokenizer", "words"]).stdout.splitlines()]
    assert [(o["num_tokens"], o["token_unit"]) for o in out] == [(4, "words"), (7, "given")]
    res = _run(["validate", str(path), "--tokenizer", str(tmp_path / "no-such-model")])
    assert res.exit_code == 2 and "cannot load tokenizer" in res.stderr and "Traceback" not in res.output
