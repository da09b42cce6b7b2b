"""GRPO leaves zero-advantage completions out of its forward/backward pass, with the same update."""

from __future__ import annotations

import hashlib

import pytest

from trainers.grpo.trainer import LOSS_ROW_SCALE, drop_zero_advantage_rows, grpo_trainer_class
from trainers.lm.models import ModelConfig, load_model


def _batch():
    import torch

    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])  # (B, T)
    return {"advantages": torch.tensor([0.0, 1.5, 0.0, -1.5]), "completion_mask": mask,
            "completion_ids": torch.arange(16).reshape(4, 4), "num_items_in_batch": mask.sum(),
            "prompt_ids": torch.ones(4, 3, dtype=torch.long), "note": "kept as is"}


def test_rows_and_factors_per_loss_type():
    import torch

    batch = _batch()
    for loss_type, factor in {"grpo": 2 / 4, "dr_grpo": 2 / 4, "bnpo": (2 + 1) / 10, "dapo": 1.0}.items():
        kept, scale = drop_zero_advantage_rows(batch, loss_type)
        assert scale == pytest.approx(factor), loss_type
        assert kept["completion_ids"].tolist() == [[4, 5, 6, 7], [12, 13, 14, 15]]
        assert kept["advantages"].tolist() == [1.5, -1.5] and kept["prompt_ids"].shape == (2, 3)
        assert kept["num_items_in_batch"] is batch["num_items_in_batch"] and kept["note"] == "kept as is"
    assert set(LOSS_ROW_SCALE) == {"grpo", "dr_grpo", "bnpo", "dapo"}
    # Nothing to drop: the same dict back. Everything zero: one row stays (zero gradients, not none).
    full = {**batch, "advantages": torch.tensor([1.0, -1.0, 0.5, -0.5])}
    assert drop_zero_advantage_rows(full, "grpo") == (full, 1.0)
    kept, _ = drop_zero_advantage_rows({**batch, "advantages": torch.zeros(4)}, "grpo")
    assert kept["completion_ids"].shape == (1, 4)
    # Per-token advantages (B, T): a row counts if any of its tokens has an advantage.
    kept, scale = drop_zero_advantage_rows({**batch, "advantages": torch.tensor(
        [[0.0] * 4, [0.0, 0.0, 2.0, 0.0], [0.0] * 4, [0.0] * 4])}, "grpo")
    assert kept["completion_ids"].tolist() == [[4, 5, 6, 7]] and scale == 0.25


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_one_grpo_step_updates_the_weights_as_without_skipping(tiny_model_dir, tmp_path, loss_type):
    import torch
    from datasets import Dataset
    from trl import GRPOConfig

    def reward(prompts, completions, **_):
        # Prompt "b": every sample scores 0.5 (a group without spread: advantages 0);
        # prompt "a": a pseudo-random score per completion text.
        return [0.5 if p.endswith("b") else int(hashlib.sha256(c.encode()).hexdigest(), 16) % 5 / 4
                for p, c in zip(prompts, completions, strict=True)]

    rows: list[int] = []

    def step(skip: bool):
        model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
        # Plain SGD without clipping: AdamW's first step and norm clipping would hide a wrong loss scale.
        args = GRPOConfig(output_dir=str(tmp_path / str(skip)), learning_rate=1.0, optim="sgd", max_grad_norm=0.0,
                          beta=0.0, loss_type=loss_type,
                          per_device_train_batch_size=8, gradient_accumulation_steps=1, num_generations=4,
                          max_steps=1, max_completion_length=6, temperature=1.0, use_cpu=True,
                          report_to="none", save_strategy="no", seed=3, data_seed=3, disable_tqdm=True,
                          gradient_checkpointing=False, bf16=False, logging_steps=1)
        trainer = grpo_trainer_class()(model=model, reward_funcs=[reward], args=args, processing_class=tokenizer,
                                       train_dataset=Dataset.from_list([{"prompt": "say a"}, {"prompt": "say b"}]))
        trainer.skip_zero_advantage = skip
        forward = trainer._get_per_token_logps_and_entropies

        def counted(model, input_ids, *a, **k):
            rows.append(input_ids.shape[0])
            return forward(model, input_ids, *a, **k)

        trainer._get_per_token_logps_and_entropies = counted
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        trainer.train()
        return {n: p.detach() for n, p in model.named_parameters()}, before

    skipped, start = step(True)
    skipped_rows, rows[:] = list(rows), []
    full, _ = step(False)
    assert rows == [8] and skipped_rows == [4]  # one micro-batch of both groups; "b"'s four rows left out
    assert any(not torch.equal(skipped[n], start[n]) for n in start)  # the step did learn
    for name in full:
        torch.testing.assert_close(skipped[name], full[name], rtol=1e-5, atol=1e-6)
