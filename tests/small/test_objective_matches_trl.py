"""The objective the small learner optimises (``trainers/small/objective``) is TRL's: on one batch of
a tiny model, with old log-probs off the current ones (so ratios and clipping matter), its loss
equals ``GRPOTrainer._compute_loss`` for every loss type the two share."""

from __future__ import annotations

import pytest

from trainers.lm.models import ModelConfig, load_model
from trainers.small.objective import aggregate, clipped_token_loss, group_advantages

MAX_COMPLETION = 5


def _trl_trainer(model_dir, tmp_path, loss_type):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = load_model(ModelConfig(name_or_path=str(model_dir)))
    args = GRPOConfig(output_dir=str(tmp_path), beta=0.0, loss_type=loss_type, epsilon=0.2,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=MAX_COMPLETION,
                      use_cpu=True, report_to="none", save_strategy="no", bf16=False,
                      gradient_checkpointing=False, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda prompts, completions, **_: [0.0] * len(prompts)],
                          args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_list([{"prompt": "say a"}]))
    return trainer, model


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_the_small_learners_loss_is_trls_on_the_same_batch(tiny_model_dir, tmp_path, loss_type):
    import torch

    trainer, model = _trl_trainer(tiny_model_dir, tmp_path, loss_type)
    model.eval()  # TRL divides by the accumulation steps only in training mode
    generator = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(5, 200, (4, 3), generator=generator)                       # (B, P)
    completion_ids = torch.randint(5, 200, (4, MAX_COMPLETION), generator=generator)      # (B, T)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]])
    advantages = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.5]), 4, "group")        # (B,)
    with torch.no_grad():
        logp, _, _ = trainer._get_per_token_logps_and_entropies(
            model, torch.cat([prompt_ids, completion_ids], 1), torch.ones(4, 3 + MAX_COMPLETION, dtype=torch.long),
            MAX_COMPLETION)                                                                  # (B, T)
    # The sampling policy's log-probs: off the current ones by up to 0.4 nats, so some ratios clip.
    old = logp + 0.4 * (torch.rand(logp.shape, generator=generator) - 0.5)
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
              "completion_ids": completion_ids, "completion_mask": mask, "advantages": advantages,
              "old_per_token_logps": old, "num_items_in_batch": mask.sum()}
    with torch.no_grad():
        theirs = trainer._compute_loss(model, inputs)
    ours = aggregate(clipped_token_loss(logp, old, advantages, 0.2), mask, loss_type, MAX_COMPLETION)
    ratio = torch.exp(logp - old)
    assert ((ratio < 0.8) | (ratio > 1.2)).any(), "the batch must exercise the clip"
    assert float(ours) == pytest.approx(float(theirs), rel=1e-5, abs=1e-7)
    # A flipped advantage sign, or advantages left unnormalised, would not match.
    assert float(aggregate(clipped_token_loss(logp, old, -advantages, 0.2), mask, loss_type, MAX_COMPLETION)) \
        != pytest.approx(float(theirs), rel=1e-3)
