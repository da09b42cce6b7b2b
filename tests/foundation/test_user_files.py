"""Files users hand the CLI: every unreadable one is refused with the path and the reason."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.config import ConfigError
from curriculum.core.userfiles import jsonl_records, read_user_text

runner = CliRunner()


def _clean_refusal(result, *needles):
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.fixture
def files(tmp_path):
    (tmp_path / "latin1.yaml").write_bytes(b"rounds: 2\nrun_name: caf\xe9\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "broken.yaml").write_text("rounds: [1,\n")
    (tmp_path / "deep.yaml").write_text("[" * 5000)
    return tmp_path


@pytest.mark.parametrize("name, message", [
    ("latin1.yaml", "not UTF-8 (byte 0xe9 at line 2, column 14)"),
    ("list.yaml", "must contain a mapping"),
    ("broken.yaml", "is not valid YAML"),
    ("deep.yaml", "is not valid YAML"),
    ("absent.yaml", "no such file"),
    (".", "is a directory"),
])
def test_run_config_files(files, name, message):
    _clean_refusal(runner.invoke(app, ["run", "-c", str(files / name), "--dry-run"]), message)


@pytest.mark.parametrize("text, message", [
    ("num_processes: many\n", "num_processes must be an integer"),
    ("distributed_type: DEEPSPEED\ndeepspeed_config: {zero_stage: [3]}\n", "zero_stage must be"),
    ("\xff", "not UTF-8"),
])
def test_accelerate_config_for_the_plan(tmp_path, text, message):
    path = tmp_path / "acc.yaml"
    path.write_bytes(text.encode("latin-1"))
    _clean_refusal(runner.invoke(app, ["run", "--dry-run", "--accelerate-config", str(path)]), message)


def test_sandbox_try_refuses_unreadable_programs_and_bad_json_actions(tmp_path):
    program = tmp_path / "env.py"
    program.write_bytes(b"# \xff\nclass Env: pass\n")
    _clean_refusal(runner.invoke(app, ["sandbox", "try", str(program)]), "not UTF-8")
    program.write_text("class Env: pass\n")
    _clean_refusal(runner.invoke(app, ["sandbox", "try", str(program), "--json-actions",
                                       "--action", "{nope"]), "is not JSON")


def test_readers_directly(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\r\n\n\xc3\x28\n[1, 2]\n' + b"[" * 100_000 + b"\n")
    records = list(jsonl_records(path))
    assert [r.line for r in records] == [1, 3, 4, 5]
    assert records[0].value == {"a": 1} and records[2].value == [1, 2]
    assert "not UTF-8 (byte 0xc3 at column 1)" in records[1].error
    assert "bad JSON" in records[3].error
    with pytest.raises(ConfigError, match="no such file"):
        list(jsonl_records(tmp_path / "nope.jsonl"))
    with pytest.raises(ConfigError, match="is a directory"):
        read_user_text(tmp_path)
