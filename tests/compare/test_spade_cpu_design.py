"""``configs/compare/spade_cpu.yaml``: SPADE against the paper's fixed-environment baselines on the CPU,
resolved without a model: each arm is the CPU preset plus its own intervention, every arm starts from
the same warm start, and ``--dry-run`` lists the runs and their wall time."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from curriculum.compare import CompareSpec, load_design, run_configs, runs_text, scored_tasks, steps_per_run
from curriculum.config import apply_overrides, read_config_file, validate_config

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "configs/compare/spade_cpu.yaml"
PRESET = REPO / "configs/spade_games_cpu_demo.yaml"
RUN_KEYS = {"seed", "run_name", "output_dir"}


def _configs(tmp_path):
    design = load_design(DESIGN)
    spec = CompareSpec(engineers=list(design.arms), design=design, out=tmp_path / "out")
    return spec, run_configs(spec)


def test_each_arm_is_the_preset_plus_its_intervention(tmp_path):
    spec, configs = _configs(tmp_path)
    assert {arm for arm, _ in configs} == {"spade", "fixed_grpo", "fixed_rlve"}
    assert sorted({seed for _, seed in configs}) == [0, 1, 2, 3, 4]
    preset = validate_config(apply_overrides(read_config_file(PRESET), ["eval_before_training=true"]))
    spade, grpo, rlve = (configs[(arm, 0)] for arm in ("spade", "fixed_grpo", "fixed_rlve"))
    assert spade.model_dump(exclude=RUN_KEYS) == preset.model_dump(exclude=RUN_KEYS)
    for config in (spade, grpo, rlve):  # one model, one warm start, one budget, one scored suite
        assert config.model == preset.model and config.rounds == 3 and config.eval_before_training
        assert config.trainer.warmstart == preset.trainer.warmstart
        assert config.trainer.play == preset.trainer.play
        assert config.trainer.heldout_games == preset.trainer.heldout_games
        assert config.testbed.reasoning_gym == preset.testbed.reasoning_gym
        for key in ("designer_warmstart", "designer_warmstart_examples", "warmstart_seeds", "warmstart_skill_line",
                    "skills", "design_mode", "corpus"):
            assert getattr(config.engineer, key) == getattr(preset.engineer, key), key
        assert config.trainer.agent_warmstart_examples == preset.trainer.agent_warmstart_examples
        assert steps_per_run(config) == 3  # one update per rollout step
        assert scored_tasks(config) == 7 * 16
    # fixed-environment GRPO: a pool the warm-started designer writes once, then only the agent trains
    assert grpo.testbed.initial_pool == "none" and grpo.engineer.frozen_pool.size == 6
    assert grpo.trainer.pool.envs_per_step == 3 and grpo.trainer.pool.retire_win_rate == 1.0
    # fixed-environment RLVE: the held-out suite's datasets at its levels as fixed environments, designer off
    suite = preset.testbed.reasoning_gym
    assert rlve.engineer.designs_per_round == 0 and rlve.engineer.frozen_pool is None
    assert rlve.testbed.initial_pool == "reasoning_gym"
    assert rlve.testbed.reasoning_gym_train == [d for names in suite.datasets.values() for d in names]
    assert rlve.testbed.reasoning_gym_train_levels == suite.levels
    assert rlve.trainer.pool == grpo.trainer.pool


def test_dry_run_lists_the_runs_and_sums_their_wall_time(tmp_path):
    spec, configs = _configs(tmp_path)
    text = runs_text(spec, configs, estimate=lambda c: SimpleNamespace(total_seconds=600.0, warmstart_seconds=300.0))
    assert "runs (15, seed-major" in text
    assert "spade: spade-seed{0,1,2,3,4} (5 new)" in text and "fixed_rlve: fixed_rlve-seed{0,1,2,3,4} (5 new)" in text
    # 15 runs of 10 min one after another, and the warm start once
    assert "estimated wall time on this machine: 2.6 h for the runs not done" in text
    assert "2.5 h of runs: spade 10 min, fixed_grpo 10 min, fixed_rlve 10 min per run; + 5 min warm start" in text
