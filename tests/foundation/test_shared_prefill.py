"""GRPO's repeated prompts are prefilled once per distinct prompt, with the same generations."""

from __future__ import annotations

import pytest

from trainers.lm.generation import generate_sharing_prompts, share_prompt_prefill
from trainers.lm.models import ModelConfig, load_model


@pytest.fixture(scope="module")
def model_and_batch(tiny_model_dir):
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    model.eval()
    tokenizer.padding_side = "left"
    # Three prompts of different lengths, each four times and interleaved (as with several
    # GRPO groups in one batch): the gather has to put every cache row back in its place.
    prompts = ["Grid 3x3 and one agent", "A much longer prompt about two agents on a four by four map",
               "short"]
    rows = [prompts[i % 3] for i in range(12)]
    batch = tokenizer(rows, return_tensors="pt", padding=True, add_special_tokens=False)
    return model, tokenizer, batch


def _prefill_rows(model):
    """Record the batch size of every forward the model runs over more than one token."""
    seen: list[tuple[int, int]] = []
    hook = model.model.embed_tokens.register_forward_hook(
        lambda _m, inputs, _out: seen.append(tuple(inputs[0].shape)) if inputs[0].shape[1] > 1 else None)
    return seen, hook


@pytest.mark.parametrize("sample", [False, True])
def test_same_tokens_and_scores_as_plain_generate(model_and_batch, sample):
    import torch

    model, tokenizer, batch = model_and_batch
    kwargs = dict(max_new_tokens=12, do_sample=sample, pad_token_id=tokenizer.pad_token_id,
                  output_scores=True, return_dict_in_generate=True,
                  **({"temperature": 0.9, "top_k": 0} if sample else {}))
    with torch.no_grad():
        torch.manual_seed(3)
        plain = model.generate(**batch, **kwargs)
        seen, hook = _prefill_rows(model)
        torch.manual_seed(3)
        shared = generate_sharing_prompts(model, model.generate, **batch, **kwargs)
        hook.remove()
    assert torch.equal(plain.sequences, shared.sequences)
    for a, b in zip(plain.scores, shared.scores, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # One prefill over the 3 distinct prompts (all but their last token), not the 12 rows.
    assert seen == [(3, batch["input_ids"].shape[1] - 1)]


def test_plain_call_when_no_prompt_repeats_or_a_cache_is_given(model_and_batch):
    import torch
    from transformers import DynamicCache

    model, _tokenizer, batch = model_and_batch
    unique = {k: v[:3] for k, v in batch.items()}
    calls: list[dict] = []

    def generate(**kwargs):
        calls.append(kwargs)
        return "plain"

    assert generate_sharing_prompts(model, generate, **unique, max_new_tokens=2) == "plain"
    assert "past_key_values" not in calls[-1] and "cache" not in calls[-1]
    own = DynamicCache()
    assert generate_sharing_prompts(model, generate, **batch, past_key_values=own) == "plain"
    assert calls[-1]["past_key_values"] is own
    assert generate_sharing_prompts(model, generate, **batch, num_return_sequences=2) == "plain"
    assert generate_sharing_prompts(model, generate, input_ids=batch["input_ids"]) == "plain"
    # With repeats, `generate` receives a cache holding one row per input row.
    generate_sharing_prompts(model, generate, **batch, max_new_tokens=2)
    cache = calls[-1].get("cache", calls[-1].get("past_key_values"))
    assert cache is not None and cache.get_seq_length() == batch["input_ids"].shape[1] - 1
    assert cache.layers[0].keys.shape[0] == 12
    with torch.no_grad():
        assert torch.equal(cache.layers[0].keys[0], cache.layers[0].keys[3])


def test_share_prompt_prefill_wraps_generate_once(tiny_model_dir):
    import torch

    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    tokenizer.padding_side = "left"
    batch = tokenizer(["two", "two", "three words here", "three words here"], return_tensors="pt",
                      padding=True, add_special_tokens=False)
    assert share_prompt_prefill(share_prompt_prefill(model)) is model
    assert model.generate.shares_prompt_prefill
    seen, hook = _prefill_rows(model)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    hook.remove()
    assert out.shape == (4, batch["input_ids"].shape[1] + 3)
    assert seen[0][0] == 2  # the first forward ran over the two distinct prompts


def test_grpo_rounds_prefill_each_prompt_once(tiny_model_dir, tmp_path):
    """Through TRL: a GRPO step's generate call holds each prompt num_generations times; the
    forward over the prompts runs on the distinct ones."""
    import numpy as np

    from curriculum.config import load_config
    from curriculum.loop import build_testbed, build_trainer
    from tests.foundation.test_loop import tiny_overrides

    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path, **{
        "trainer.num_generations": 4, "trainer.max_steps_per_round": 1}))
    testbed = build_testbed(config)
    trainer = build_trainer(config, testbed)
    trainer.setup(None)
    try:
        assert trainer.model.generate.shares_prompt_prefill
        tasks = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 2, seed=0)
        seen, hook = _prefill_rows(trainer.model)
        try:
            metrics = trainer.train_round(tasks, round_index=0, seed=0)
        finally:
            hook.remove()
        assert metrics["train/completions"] == 8
        assert seen and seen[0][0] == 2  # 2 prompts x 4 samples: one prefill over 2 rows
    finally:
        trainer.close()
