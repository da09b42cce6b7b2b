"""The CLI is thin and self-documenting: choices come from the registries, --help shows examples."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS

runner = CliRunner()


def test_list_shows_every_registered_plugin():
    result = runner.invoke(app, ["list"], terminal_width=200)
    assert result.exit_code == 0
    for registry in (TESTBEDS, ENGINEERS, TRAINERS):
        for entry in registry.entries():
            assert entry.name in result.output
            assert entry.description.split()[0] in result.output


def _commands(typer_app, prefix=()):
    import typer.main

    group = typer.main.get_command(typer_app)
    def walk(command, path):
        sub = getattr(command, "commands", None)
        if sub:
            for name, child in sub.items():
                yield from walk(child, path + (name,))
        else:
            yield path
    yield from walk(group, prefix)


@pytest.mark.parametrize("path", list(_commands(app)), ids=lambda p: " ".join(p))
def test_every_command_help_shows_an_example(path):
    result = runner.invoke(app, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and "curriculum" in result.output


def test_unknown_engineer_is_a_clear_error():
    result = runner.invoke(app, ["run", "--engineer", "nope", "--dry-run"])
    assert result.exit_code == 2
    assert "unknown engineer 'nope'" in result.output


def test_dry_run_prints_resolved_config_and_plan():
    result = runner.invoke(app, ["run", "--engineer", "fixed", "--set", "rounds=4", "--dry-run"],
                           terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "rounds: 4" in result.output and "name: fixed" in result.output and "plan:" in result.output
