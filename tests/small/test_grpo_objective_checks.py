"""End-to-end checks of the GRPO objective the small learner optimises: the advantages' sign
and scale against the formulas, the loss's gradient direction, and that the trainer's "old"
log-probabilities are the sampling policy's own (not stale)."""

from __future__ import annotations

import torch

from curriculum.config import load_config
from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig, SizeParams
from testbeds.mapf_frozenlake.testbed import MAPFTestbed
from trainers.small import objective
from trainers.small.objective import STD_EPS, aggregate, clipped_token_loss, group_advantages
from trainers.small.trainer import SmallTrainer, call_generator


def test_advantages_have_the_formulas_sign_and_scale():
    rewards = torch.tensor([0.8, 0.0, 0.0, 0.0, 0.8, 0.8, 0.8, 0.3])
    group = group_advantages(rewards, 4, "group")
    for g in range(2):
        r = rewards[4 * g:4 * g + 4]
        assert torch.allclose(group[4 * g:4 * g + 4], (r - r.mean()) / (r.std() + STD_EPS), atol=1e-6)
    assert group[0] > 0 > group[1] and group[7] < 0 < group[4]
    assert torch.allclose(group_advantages(rewards, 4, "none"),
                          rewards - rewards.view(2, 4).mean(1).repeat_interleave(4), atol=1e-6)
    batch = group_advantages(rewards, 4, "batch")
    assert torch.allclose(batch, group_advantages(rewards, 4, "none") / (rewards.std() + STD_EPS), atol=1e-6)


def test_the_loss_gradient_raises_positive_and_lowers_negative_advantages():
    """At ratio 1 the per-token gradient of the ``grpo`` loss is -A_i / (G x tokens of i)."""
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([2.0, -1.0])
    aggregate(clipped_token_loss(logp, logp.detach(), adv, 0.2), mask, "grpo", 3).backward()
    expected = torch.tensor([[-2.0 / 4, -2.0 / 4, 0.0], [1.0 / 6, 1.0 / 6, 1.0 / 6]])
    assert torch.allclose(logp.grad, expected, atol=1e-6)


def test_the_first_update_sees_the_sampling_policys_log_probs(tmp_path, monkeypatch):
    """The ratio of the first update is exactly 1 (old = current, both the sampler's policy), and
    the second update's old log-probs are still the sampler's (not refreshed after the update)."""
    config = load_config(None, ["trainer.name=small", "testbed.name=mapf_frozenlake", f"output_dir={tmp_path}",
                                "testbed.train_agents=2", "testbed.warmstart_sizes=[3x3]", "trainer.warmstart.cache=false",
                                "trainer.warmstart.steps=60", "trainer.warmstart.examples=300",
                                "trainer.warmstart.batch_size=16", "trainer.num_generations=8",
                                "trainer.num_iterations=2", "trainer.learning_rate=1e-3", "trainer.local_features=true"])
    trainer = SmallTrainer(config, MAPFTestbed(config.testbed))
    trainer.setup(None)
    trainer.prepare()
    seen = []
    real = objective.clipped_token_loss

    def spy(logp, old, advantages, epsilon):
        assert (advantages != 0).any()                       # the step has groups with reward spread
        seen.append((logp.detach().clone(), old.clone()))
        return real(logp, old, advantages, epsilon)

    monkeypatch.setattr(objective, "clipped_token_loss", spy)
    proposal = GeneratorConfig(sizes={s: SizeParams(data_ratio=1.0 if s == "3x3" else 0.0, hole_ratio=0.2,
                                                    wait_ratio=0.0) for s in SIZES})
    tasks = trainer.testbed.sample(proposal, 8, seed=1)
    trainer.grpo_step(tasks, generator=call_generator(0, 0, 0))
    (first, old1), (second, old2) = seen
    assert torch.equal(old1, old2)
    assert torch.allclose(first, old1, atol=1e-5)
    assert not torch.allclose(second, old2, atol=1e-5)       # the first update moved the policy
