"""Config validation: unknown keys, wrong types and out-of-range values fail with the field named."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from curriculum.config import ConfigError, apply_overrides, config_diff, load_config, parse_override

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_validate():
    config = load_config(None)
    assert config.engineer.name == "random"
    assert config.trainer.name == "grpo"
    assert config.testbed.name == "mapf_frozenlake"


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_validates(path):
    load_config(path)


def test_override_types_are_parsed():
    assert parse_override("trainer.learning_rate=1e-6") == (["trainer", "learning_rate"], 1e-6)
    assert parse_override("testbed.eval_agents=[3,4]") == (["testbed", "eval_agents"], [3, 4])
    assert parse_override("model.lora=null") == (["model", "lora"], None)
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override("trainer.learning_rate")


def test_overrides_apply_to_loaded_file():
    config = load_config(ROOT / "configs/mapf_cpu_demo.yaml", ["trainer.learning_rate=1e-6", "rounds=5"])
    assert config.trainer.learning_rate == 1e-6
    assert config.rounds == 5


def test_unknown_key_names_field_and_suggests():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["trainer.learnig_rate=1e-6"])
    message = str(err.value)
    assert "trainer.learnig_rate" in message
    assert "did you mean 'trainer.learning_rate'" in message


def test_unknown_top_level_key_suggests():
    with pytest.raises(ConfigError, match="did you mean 'rounds'"):
        load_config(None, ["round=3"])


def test_wrong_type_names_field():
    with pytest.raises(ConfigError, match=r"rounds: .*integer"):
        load_config(None, ["rounds=three"])


def test_out_of_range_names_field():
    with pytest.raises(ConfigError, match=r"trainer.learning_rate: .*greater than 0"):
        load_config(None, ["trainer.learning_rate=-1"])


def test_unknown_plugin_lists_choices():
    with pytest.raises(ConfigError, match=r"engineer: .*unknown engineer 'randon'.*Did you mean 'random'"):
        load_config(None, ["engineer.name=randon"])


def test_plugin_specific_field_is_checked():
    with pytest.raises(ConfigError, match=r"trainer.num_generations: .*greater than or equal to 2"):
        load_config(None, ["trainer.num_generations=1"])


def test_config_diff_lists_changed_keys():
    a = apply_overrides({}, ["trainer.beta=0.1", "seed=1"])
    b = apply_overrides({}, ["trainer.beta=0.2", "seed=1"])
    assert config_diff(a, b) == ["trainer.beta: 0.1 -> 0.2"]


def test_broken_config_fails_fast_from_cli(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rounds: 2\ntrainer:\n  name: grpo\n  learnig_rate: 0.1\n")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "curriculum.cli", "run", "--config", str(bad)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2
    assert "trainer.learnig_rate" in proc.stderr and "trainer.learning_rate" in proc.stderr
    # Nothing heavy ran before the error: no model was loaded. (The bound is loose on purpose:
    # ~2 s on a quiet machine, 8 s measured with two model processes on the 2 cores.)
    assert "Loading weights" not in proc.stderr + proc.stdout
    assert elapsed < 30.0, f"config error took {elapsed:.1f}s"
