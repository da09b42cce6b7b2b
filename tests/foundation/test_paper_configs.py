"""The Trainee-to-Trainer paper's comparison as shipped configs.

* ``mapf_qwen3_4b.yaml`` — the method: the current checkpoint as engineer, context V6.
* ``mapf_qwen3_4b_baseline.yaml`` — "GRPO (random)": the random round-0 config kept fixed for
  every round (the ``fixed`` engineer with the random cold start), not a config re-drawn each round.
* ``mapf_qwen3_4b_base_engineer.yaml`` — the ablation: the frozen base model as engineer.

The three differ in the engineer section only, so the comparison is controlled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from curriculum.config import load_config
from curriculum.loop import build_testbed, derive_seed, run
from curriculum.registry import ENGINEERS

ROOT = Path(__file__).resolve().parents[2]
METHOD, BASELINE, ABLATION = (ROOT / "configs" / f for f in
                              ("mapf_qwen3_4b.yaml", "mapf_qwen3_4b_baseline.yaml",
                               "mapf_qwen3_4b_base_engineer.yaml"))


def _dump(path: Path) -> dict:
    return load_config(path).model_dump(mode="json")


def test_method_is_the_checkpoint_engineer_with_v6():
    engineer = _dump(METHOD)["engineer"]
    assert engineer["name"] == "checkpoint"
    assert engineer["context"] == "V6" and engineer["training_details"] == "bookkeeping"
    assert engineer["model"] == "checkpoint"


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("mapf_qwen3_4b*.yaml")), ids=lambda p: p.name)
def test_paper_engineers_answer_in_free_text(path):
    """The paper's engineer writes free text (reasoning, then a JSON config), never a
    schema-constrained answer: every Method-A paper row with a checkpoint engineer says so."""
    engineer = _dump(path)["engineer"]
    if engineer["name"] == "checkpoint":
        assert engineer["structured_output"] is False, path.name


def test_baseline_keeps_the_random_round0_config_fixed():
    config = _dump(BASELINE)
    assert config["engineer"]["name"] == "fixed"
    assert config["testbed"]["initial_proposal"] == "random"


def test_ablation_asks_the_base_model():
    engineer = _dump(ABLATION)["engineer"]
    assert engineer["name"] == "checkpoint" and engineer["model"] == "base"
    assert {k: v for k, v in engineer.items() if k != "model"} == \
        {k: v for k, v in _dump(METHOD)["engineer"].items() if k != "model"}


@pytest.mark.parametrize("other", [BASELINE, ABLATION])
def test_only_the_engineer_differs(other):
    method, alt = _dump(METHOD), _dump(other)
    method.pop("engineer"), alt.pop("engineer")
    assert method == alt


def _proposals(engineer: str, tmp_path: Path, rounds: int = 3) -> tuple[list[dict], dict]:
    config = load_config(BASELINE, [f"engineer={{name: {engineer}}}", "trainer={name: simulated}",
                                    "generation={}", "testbed.eval_agents=[3]",
                                    "testbed.eval_instances_per_size=1", "tasks_per_round=8",
                                    f"rounds={rounds}", f"output_dir={tmp_path}"])
    history = run(config).history
    cold_start = build_testbed(config).initial_proposal(
        np.random.default_rng(derive_seed(config.seed, 0, "initial")))
    return [h.proposal for h in history], cold_start.model_dump(mode="json")


def test_fixed_trains_every_round_on_the_random_cold_start(tmp_path):
    proposals, cold_start = _proposals("fixed", tmp_path)
    assert all(p == cold_start for p in proposals)
    shares = [s["data_ratio"] for s in cold_start["sizes"].values()]
    assert max(shares) - min(shares) > 0.05  # a random draw, not the uniform config


def test_random_redraws_every_round(tmp_path):
    proposals, cold_start = _proposals("random", tmp_path)
    assert proposals[0] == cold_start
    assert proposals[1] != proposals[0] and proposals[2] != proposals[1]


def test_descriptions_name_the_papers_baseline_correctly():
    assert "'GRPO (random)'" in ENGINEERS.get("fixed").description
    assert "not the paper" in ENGINEERS.get("random").description


# -- SPADE (the SPADE paper) --------------------------------------------------------------------------------

SPADE_30B = ROOT / "configs" / "spade_games_qwen3_30b_a3b.yaml"


@pytest.mark.parametrize("ablation,expected", [
    ("two_skill", {"engineer.skills"}),
    ("learning_potential", {"trainer.designer_signal"}),
    ("frozen_designer", {"trainer.train_designer", "engineer.memory"}),
])
def test_spade_ablations_change_only_their_intervention(ablation, expected):
    from curriculum.config import config_diff

    base = _dump(SPADE_30B)
    other = _dump(ROOT / "configs" / f"spade_games_qwen3_30b_a3b_{ablation}.yaml")
    changed = {".".join(line.split(":")[0].split(".")[:2]) for line in config_diff(base, other)}
    assert changed == expected


def test_fixed_grpo_row_trains_on_a_pool_designed_once():
    """The fixed-environment GRPO row is SPADE's 30B run with the pool designed once before round 0
    by the starting model and kept whole (no stale retirement over the run): only the frozen pool
    and the trainer's pool settings differ."""
    from curriculum.config import config_diff

    path = ROOT / "configs" / "spade_games_qwen3_30b_a3b_fixed_grpo.yaml"
    changed = {".".join(line.split(":")[0].split(".")[:2]) for line in config_diff(_dump(SPADE_30B), _dump(path))}
    assert changed == {"engineer.frozen_pool", "trainer.pool"}
    row = load_config(path)
    assert row.engineer.name == "spade" and row.engineer.designer == "policy" and row.testbed.initial_pool == "none"
    assert row.engineer.frozen_pool.size == row.trainer.pool.pool_size == 96
    assert row.trainer.pool.max_plays >= row.rounds and row.trainer.warmstart.steps == 0


def test_spade_ablation_settings():
    two = load_config(ROOT / "configs" / "spade_games_qwen3_30b_a3b_two_skill.yaml").engineer
    assert two.skill_list() == ["mathematical reasoning", "pattern recognition"]
    lp = load_config(ROOT / "configs" / "spade_games_qwen3_30b_a3b_learning_potential.yaml").trainer
    assert lp.designer_signal == "learning_potential" and lp.designer_delay >= 1
    frozen = load_config(ROOT / "configs" / "spade_games_qwen3_30b_a3b_frozen_designer.yaml")
    assert frozen.trainer.train_designer is False and frozen.engineer.memory is False


def test_spade_defaults_follow_the_paper():
    """Six game skills by default (58.3 vs 53.7 with two); both roles' advantages mean- and
    std-normalised, each role on its own."""
    from engineers.spade.config import SIX_GAME_SKILLS, SpadeEngineerConfig
    from trainers.selfplay.trainer import SelfPlayConfig

    assert SpadeEngineerConfig().skill_list() == list(SIX_GAME_SKILLS) and len(SIX_GAME_SKILLS) == 6
    assert SelfPlayConfig().designer_advantage == "role_std" and SelfPlayConfig().agent_advantage == "role_std"
    for name in ("spade_games_qwen3_4b", "spade_games_qwen3_8b", "spade_games_qwen3_30b_a3b"):
        assert load_config(ROOT / "configs" / f"{name}.yaml").engineer.skill_list() == list(SIX_GAME_SKILLS)


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("spade_*qwen3*.yaml")), ids=lambda p: p.stem)
def test_spade_paper_configs_keep_kl_to_the_reference(path):
    """The paper adds KL regularisation to the reference policy: every SPADE paper config has it
    on, at the public 8B and tool-use scripts' --kl-loss-coef 0.005 (docs/fidelity.md, "KL")."""
    assert load_config(path).trainer.beta == 0.005


def test_selfplay_dry_run_plans_rollout_steps_not_grpo_steps():
    """One SPADE round is one rollout step with one update: the plan says that, and prints no
    GRPO step counts (optimizer steps, prompts per round) that the selfplay trainer never runs."""
    from curriculum.plan import describe_plan

    plan = describe_plan(load_config(ROOT / "configs" / "spade_games_cpu_demo.yaml"), None, "h100-80gb")
    assert "one GRPO update" in plan and "per rollout step" in plan
    assert "optimizer steps per round" not in plan and "prompts per round" not in plan
    mapf = describe_plan(load_config(ROOT / "configs" / "mapf_cpu_demo.yaml"), None, "h100-80gb")
    assert "optimizer steps per round" in mapf
