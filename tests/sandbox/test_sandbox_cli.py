"""``curriculum sandbox try`` and ``doctor`` through Typer's test runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from testbeds.spade.cli_sandbox import app

PROGRAM = '''
class LetterEnv:
    def reset(self, seed=None):
        print("noise on stdout")
        return "pick a letter", {}

    def step(self, action):
        return f"you picked {action}", float(action == "b"), action == "b", False, {}
'''


def test_try_prints_each_result_and_a_final_json_line(tmp_path):
    program = tmp_path / "env.py"
    program.write_text(PROGRAM)
    result = CliRunner().invoke(app, ["try", str(program), "--action", "a", "--action", "b"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    final = json.loads(lines[-1])
    assert final["ok"] is True and final["error"] is None
    assert [s["call"] for s in final["steps"]] == ["reset", "step", "step"]
    assert final["steps"][2]["reward"] == 1.0 and final["steps"][2]["terminated"] is True
    assert lines[0].startswith("reset:") and len(lines) == 4


def test_try_reports_a_structured_error(tmp_path):
    program = tmp_path / "env.py"
    program.write_text(PROGRAM.replace("def step(self, action):", "def step(self, action:"))
    result = CliRunner().invoke(app, ["try", str(program), "--action", "a"])
    assert result.exit_code == 1
    final = json.loads(result.output.strip().splitlines()[-1])
    assert final["ok"] is False and final["steps"] == []
    assert final["error"]["kind"] == "syntax_error" and final["error"]["line"] == 7


def test_try_json_actions_and_failure_mid_episode(tmp_path):
    program = tmp_path / "env.py"
    program.write_text(PROGRAM.replace('float(action == "b")', 'float(action["x"])'))
    result = CliRunner().invoke(app, ["try", str(program), "--json-actions",
                                      "--action", '{"x": 2}', "--action", '{"y": 1}'])
    assert result.exit_code == 1
    final = json.loads(result.output.strip().splitlines()[-1])
    assert [s["call"] for s in final["steps"]] == ["reset", "step"]
    assert final["error"]["kind"] == "exception" and "KeyError" in final["error"]["detail"]


def test_doctor_command():
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "seccomp" in result.output and "MISSING" not in result.output


def test_benchmark_runs_and_reports(tmp_path):
    """The benchmark script runs end to end (tiny sizes) and ends with its JSON summary."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "sandbox.py"
    command = [sys.executable, str(script), "--instances", "20", "--steps", "50", "--workers", "1",
               "--repeat", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["sandbox_instances_per_s"] > 0 and summary["cpu_ms_per_instance"] > 0
    assert summary["sandbox_step"]["median_ms"] > 0
    assert len(summary["layers"]) == 7


HOSTILE = '''
def nest(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value

class HostileEnv:
    def reset(self, seed=None):
        return "start", {{}}

    def step(self, action):
        return {step}
'''


def test_try_gives_a_verdict_for_unreportable_results(tmp_path):
    """A lone surrogate in an observation, an info nested 900 deep, a reward of 10**400: each
    ends in a ``bad_return`` verdict line (exit 1), not a traceback."""
    for step in ('"\\ud800", 0.0, False, False, {}', '"o", 0.0, False, False, {"x": nest(900)}',
                 '"o", 10**400, False, False, {}'):
        program = tmp_path / "env.py"
        program.write_text(HOSTILE.format(step=step))
        result = CliRunner().invoke(app, ["try", str(program), "--action", "a"])
        assert result.exit_code == 1, (step, result.output, result.exception)
        final = json.loads(result.output.strip().splitlines()[-1])
        assert final["error"]["kind"] == "bad_return", final
        assert [s["call"] for s in final["steps"]] == ["reset"]


def test_try_refuses_actions_it_could_not_report(tmp_path):
    program = tmp_path / "env.py"
    program.write_text(PROGRAM)
    for args in (["--action", "\udcff"], ["--json-actions", "--action", '"\\ud800"'],
                 ["--json-actions", "--action", "[" * 900 + "]" * 900]):
        result = CliRunner().invoke(app, ["try", str(program), *args])
        assert result.exit_code == 2, (args, result.output, result.exception)
        assert "cannot be reported" in result.output and "Traceback" not in result.output
