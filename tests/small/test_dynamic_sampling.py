"""DAPO's dynamic sampling on the small learner: a step keeps sampling until its update holds
``prompts_per_step`` groups with reward spread, updates on those only, and a round consumes only
the tasks it sampled."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from curriculum.config import load_config
from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig, SizeParams
from testbeds.mapf_frozenlake.testbed import MAPFTestbed
from trainers.small import objective
from trainers.small.trainer import SmallTrainer, call_generator


def _trainer(tmp_path, *sets: str) -> SmallTrainer:
    config = load_config(None, ["trainer.name=small", "testbed.name=mapf_frozenlake", f"output_dir={tmp_path}",
                                "testbed.train_agents=2", "testbed.warmstart_sizes=[3x3]", "trainer.warmstart.cache=false",
                                "trainer.warmstart.steps=60", "trainer.warmstart.examples=300",
                                "trainer.warmstart.batch_size=16", "trainer.num_generations=4",
                                "trainer.prompts_per_step=4", "trainer.local_features=true", *sets])
    trainer = SmallTrainer(config, MAPFTestbed(config.testbed))
    trainer.setup(None)
    trainer.prepare()
    return trainer


def _tasks(trainer: SmallTrainer, n: int, seed: int = 1) -> list:
    proposal = GeneratorConfig(sizes={s: SizeParams(data_ratio=1.0 if s == "4x4" else 0.0, hole_ratio=0.2,
                                                    wait_ratio=0.0) for s in SIZES})
    return trainer.testbed.sample(proposal, n, seed=seed)


def _spread_groups(scored: list[dict], G: int) -> list[int]:
    rewards = np.array([s["reward"] for s in scored]).reshape(-1, G)
    return [g for g in range(len(rewards)) if rewards[g].max() > rewards[g].min()]


def test_the_update_holds_only_groups_with_spread_and_sampling_stops_once_it_has_enough(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path)
    G, P = 4, 4
    seen = []
    real = objective.clipped_token_loss

    def spy(logp, old, advantages, epsilon):
        seen.append(advantages.clone())
        return real(logp, old, advantages, epsilon)

    monkeypatch.setattr(objective, "clipped_token_loss", spy)
    tasks = _tasks(trainer, 8 * P)
    out = trainer.grpo_step(tasks, generator=call_generator(0, 0, 0), keep_groups=P)
    sampled = int(out["sampled_groups"])
    spread = _spread_groups(out["scored"], G)
    assert sampled % P == 0 and sampled <= len(tasks)           # whole batches of P tasks
    assert len(out["scored"]) == sampled * G                    # every sampled plan is recorded
    if sampled < len(tasks):                                    # stopped early: it had enough
        assert len(spread) >= P
        assert len(_spread_groups(out["scored"][:(sampled - P) * G], G)) < P   # not one batch earlier
    kept = min(len(spread), P)
    assert out["kept_rows"] == kept * G                         # the update: the kept groups' rows only
    assert all((a != 0).all() for a in seen)                    # no zero-advantage row reaches the loss


def test_without_dynamic_sampling_the_step_samples_every_task_once(tmp_path):
    trainer = _trainer(tmp_path)
    tasks = _tasks(trainer, 4)
    out = trainer.grpo_step(tasks, generator=call_generator(0, 0, 0))
    assert out["sampled_groups"] == 4 and len(out["scored"]) == 16


def test_a_dynamic_round_numbers_every_sampled_group_apart(tmp_path):
    trainer = _trainer(tmp_path, "trainer.dynamic_sampling=true", "trainer.max_sampling_batches=3",
                       "trainer.max_steps_per_round=3")
    torch.manual_seed(0)
    metrics = trainer.train_round(_tasks(trainer, 40), round_index=0, seed=0)
    assert metrics["train/steps"] == 3.0
    assert 3 * 4 * 4 <= metrics["train/completions"] <= 3 * 3 * 4 * 4  # between one and three batches a step


@pytest.mark.parametrize("bad", ["trainer.max_sampling_batches=0"])
def test_the_sampling_cap_is_validated(tmp_path, bad):
    with pytest.raises(Exception, match="max_sampling_batches"):
        load_config(None, ["trainer.name=small", "testbed.name=mapf_frozenlake", f"output_dir={tmp_path}", bad])


def test_the_dry_run_plan_states_the_sampling_bound():
    """``--dry-run``'s lines for the small learner: plans per round, and with dynamic sampling the
    most a round may sample."""
    config = load_config(None, ["trainer.name=small", "testbed.name=mapf_frozenlake", "trainer.max_steps_per_round=5",
                                "trainer.prompts_per_step=4", "trainer.num_generations=4"])
    assert "plans per round: 80" in SmallTrainer.plan_lines(config, None)[0]
    dynamic = load_config(None, ["trainer.name=small", "testbed.name=mapf_frozenlake", "trainer.max_steps_per_round=5",
                                 "trainer.prompts_per_step=4", "trainer.num_generations=4",
                                 "trainer.dynamic_sampling=true", "trainer.max_sampling_batches=3"])
    assert "plans per round: 80 to 240" in SmallTrainer.plan_lines(dynamic, None)[0]
