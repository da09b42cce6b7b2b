"""CPU MAPF configs: every corner of their proposal space yields plans the completion budget answers.

For each CPU config, the corners of its ``testbed.proposal_limits`` (smallest and largest allowed
size × lowest and highest hole ratio × lowest and highest wait ratio, at every training agent
count) are sampled, and the reference (optimal) plan of every instance, in the config's answer
format and tokenised by the config's model, must fit ``trainer.max_completion_length`` with room
for the end-of-sequence token. The paper configs keep the whole space.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from curriculum.config import load_config
from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig, ProposalLimits, SizeParams
from testbeds.mapf_frozenlake.testbed import MAPFTestbed

ROOT = Path(__file__).resolve().parents[2]
CPU_CONFIGS = ["mapf_compare_cpu.yaml"]
"""Configs whose proposal space is sized to their budget (the demo keeps the budget its numbers were
measured with and says so in its comments)."""
DRAWS = 40
"""Instances per corner and agent count."""


@pytest.fixture(scope="module")
def tokenizer():
    from trainers.lm.models import load_tokenizer, resolve_model_path

    config = load_config(ROOT / "configs" / CPU_CONFIGS[0])
    return load_tokenizer(resolve_model_path(config.model.name_or_path))


def _corner(size: str, hole: float, wait: float) -> GeneratorConfig:
    return GeneratorConfig(sizes={s: SizeParams(data_ratio=1.0 if s == size else 0.0, hole_ratio=hole,
                                                wait_ratio=wait) for s in SIZES})


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_CONFIGS)
def test_every_corner_of_the_cpu_space_fits_the_completion_budget(name, tokenizer):
    config = load_config(ROOT / "configs" / name)
    limits = config.testbed.proposal_limits
    assert not limits.unrestricted, f"{name} should narrow the proposal space"
    assert config.model.name_or_path == load_config(ROOT / "configs" / CPU_CONFIGS[0]).model.name_or_path
    budget = config.trainer.max_completion_length
    testbed = MAPFTestbed(config.testbed, seed=0)
    agents = config.testbed.train_agents if isinstance(config.testbed.train_agents, list) else [config.testbed.train_agents]
    longest = 0
    for size, hole, wait in itertools.product((limits.sizes[0], limits.sizes[-1]), limits.hole_ratio,
                                              limits.wait_ratio):
        tasks = testbed.sample(_corner(size, hole, wait), DRAWS * len(agents), seed=7)
        assert {t.features["agents"] for t in tasks} == set(agents)
        for task in tasks:
            n = len(tokenizer(testbed.reference_answer(task), add_special_tokens=False)["input_ids"])
            assert n + 1 <= budget, (f"{name}: a {task.features['agents']}-agent {size} plan (holes {hole}, "
                                     f"waits {wait}) takes {n} tokens; budget {budget}")
            longest = max(longest, n)
    # The space uses the budget (not a trivially small space): its largest plans need over half of it.
    assert longest > budget // 2


def test_the_whole_space_does_not_fit_a_cpu_budget(tokenizer):
    """The check can fail: the paper's space holds plans far beyond the CPU budget."""
    config = load_config(ROOT / "configs" / CPU_CONFIGS[0])
    testbed = MAPFTestbed(config.testbed.model_copy(update={"proposal_limits": ProposalLimits()}), seed=0)
    tasks = testbed.sample(_corner("6x6", 0.5, 1.0), 40, seed=1)
    worst = max(len(tokenizer(testbed.reference_answer(t), add_special_tokens=False)["input_ids"]) for t in tasks)
    assert worst > config.trainer.max_completion_length


def test_limits_keep_the_cold_start_and_every_projection_inside():
    config = load_config(ROOT / "configs" / CPU_CONFIGS[0])
    testbed = MAPFTestbed(config.testbed, seed=0)
    limits = config.testbed.proposal_limits
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert limits.violations(testbed.initial_proposal(rng)) == []
        assert limits.violations(testbed.random_proposal(rng)) == []
    wild = {"sizes": {"10x10": {"data_ratio": 0.9, "hole_ratio": 0.5, "wait_ratio": 1.0},
                      "5x5": {"data_ratio": 0.1, "hole_ratio": 0.5, "wait_ratio": 0.5}}}
    projected, changes = testbed.project(wild, limits.random(rng))
    assert limits.violations(projected) == []
    assert projected.sizes["10x10"].data_ratio == 0.0
    assert projected.sizes["5x5"].hole_ratio == limits.hole_ratio[1]
    assert len({c.path for c in changes}) == len(changes)
    only_excluded, changes = testbed.project({"sizes": {s: {"data_ratio": 1.0 if s == "9x9" else 0.0} for s in SIZES}},
                                             limits.random(rng))
    assert [only_excluded.sizes[s].data_ratio for s in limits.sizes] == pytest.approx([1 / 3] * 3)


def test_unrestricted_limits_keep_the_papers_cold_start():
    from testbeds.mapf_frozenlake.config import random_config

    a = random_config(np.random.default_rng(3))
    b = ProposalLimits().random(np.random.default_rng(3))
    assert a == b


def test_bad_limits_and_initial_proposals_are_refused():
    from pydantic import ValidationError

    from curriculum.config import ConfigError

    with pytest.raises(ValidationError, match="hole_ratio range"):
        ProposalLimits(hole_ratio=(0.0, 0.9))
    with pytest.raises(ValidationError, match="subset"):
        ProposalLimits(sizes=["11x11"])
    with pytest.raises(ConfigError, match="outside proposal_limits"):
        load_config(ROOT / "configs" / "mapf_cpu_demo.yaml",
                    ["testbed.proposal_limits.sizes=[3x3, 4x4]"])
