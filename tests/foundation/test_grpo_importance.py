"""rho of the vLLM importance-sampling correction as the loss computes it
(``trainers/grpo/importance.py``), on hand-made log-probs; the same against the real engine in
``tests/vllm_cpu/test_vllm_importance_sampling.py``."""

from __future__ import annotations

import math

import pytest
import torch

from trainers.grpo.importance import RatioStats, importance_sampling_ratio

TRAINER = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -3.0, -1.0]])  # (B, T)
SAMPLER = torch.tensor([[-2.0, -1.0, float("nan")], [-0.1, -1.0, -9.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # row 1's last token is padding


def test_token_truncate_clips_each_token_and_a_nan_sampler_logp_counts_as_agreement():
    ratio = importance_sampling_ratio(TRAINER, SAMPLER, MASK, "token_truncate", 0.3, 2.0)
    assert ratio.shape == (2, 3)
    assert ratio[0].tolist() == pytest.approx([2.0, math.exp(-1.0), 1.0])  # e^1 clipped to 2; NaN -> 1
    assert ratio[1, :2].tolist() == pytest.approx([1.0, 0.3])  # e^-2 raised to the floor
    assert float(ratio[1, 2]) == 1.0  # padding: difference masked to 0


def test_token_mask_zeroes_tokens_outside_the_bounds():
    ratio = importance_sampling_ratio(TRAINER, SAMPLER, MASK, "token_mask", 0.3, 2.0)
    assert ratio[0].tolist() == pytest.approx([0.0, math.exp(-1.0), 1.0])
    assert ratio[1, :2].tolist() == pytest.approx([1.0, 0.0])


def test_sequence_modes_take_one_ratio_per_completion_from_the_summed_differences():
    truncate = importance_sampling_ratio(TRAINER, SAMPLER, MASK, "sequence_truncate", None, 3.0)
    mask = importance_sampling_ratio(TRAINER, SAMPLER, MASK, "sequence_mask", 0.5, 3.0)
    assert truncate.shape == mask.shape == (2, 1)
    assert truncate[:, 0].tolist() == pytest.approx([1.0, math.exp(-2.0)])  # 1 - 1 + 0; 0 - 2
    assert mask[:, 0].tolist() == pytest.approx([1.0, 0.0])  # e^-2 below the floor


def test_the_ratio_is_a_weight_not_a_gradient_path():
    logps = TRAINER.clone().requires_grad_()
    assert not importance_sampling_ratio(logps, SAMPLER, MASK, "token_truncate", None, 3.0).requires_grad


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown importance-sampling mode"):
        importance_sampling_ratio(TRAINER, SAMPLER, MASK, "token", None, 3.0)


def test_stats_over_micro_batches_equal_those_of_the_whole_batch():
    ratio = importance_sampling_ratio(TRAINER, SAMPLER, MASK, "token_truncate", 0.5, 2.0)
    whole, split = RatioStats(), RatioStats()
    whole.add(TRAINER, SAMPLER, MASK, ratio, "token_truncate")
    for row in range(2):
        split.add(TRAINER[row:row + 1], SAMPLER[row:row + 1], MASK[row:row + 1], ratio[row:row + 1], "token_truncate")
    assert split.metrics() == pytest.approx(whole.metrics())
    values = ratio[MASK.bool()]
    assert whole.metrics()["sampling/importance_sampling_ratio/mean"] == pytest.approx(float(values.mean()))
    # |differences| over scored tokens: 1, 1 (row 0; its NaN left out), 0, 2 (row 1)
    assert whole.metrics()["sampling/sampling_logp_difference/mean"] == pytest.approx(1.0)
    assert whole.metrics()["sampling/sampling_logp_difference/max"] == pytest.approx(2.0)
