"""The Trainee-to-Trainer paper's comparison as shipped configs (SPEC §1.7–1.8).

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
