"""What a user types that would exhaust memory or corrupt a terminal is refused in one line.

* ``compare --seeds`` and a design's seed counts have an upper bound (``MAX_SEEDS``), checked
  before anything is planned, ``--dry-run`` included; so does ``--first-seed``.
* A run name may hold only printable characters: a newline, tab or escape is refused.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.compare import MAX_SEEDS, CompareSpec
from curriculum.config import ConfigError, load_config, validate_config

runner = CliRunner()


def _refused(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(
        result.exception, SystemExit), result.exception
    assert needle in result.output + result.stderr


def test_seeds_past_the_bound_are_refused_before_planning():
    _refused(["compare", "--engineers", "fixed", "--trainer", "simulated", "--seeds", "10000000000",
              "--dry-run"], "--seeds")
    with pytest.raises(ConfigError, match="--seeds"):
        CompareSpec(engineers=["fixed"], seeds=MAX_SEEDS + 1)
    with pytest.raises(ConfigError, match="--first-seed"):
        CompareSpec(engineers=["fixed"], first_seed=10**30)


def test_a_design_with_too_many_seeds_is_refused(tmp_path):
    design = tmp_path / "design.yaml"
    design.write_text("arms: {a: {engineer: fixed}, b: {engineer: random}}\n"
                      "primary: [[a, b]]\nprimary_seeds: 100000000000\n")
    _refused(["compare", "--design", str(design), "--trainer", "simulated", "--dry-run"],
             "primary_seeds")


@pytest.mark.parametrize("name", ["two\nlines", "tab\there", "esc\x1b[2J", "bell\x07"])
def test_run_names_must_be_printable(name):
    with pytest.raises(ConfigError, match="unprintable"):
        validate_config({"run_name": name})


def test_printable_run_names_still_pass():
    assert load_config(None, ["run_name=café-run 2"]).run_name == "café-run 2"
