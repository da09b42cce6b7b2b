"""``model.trainable_layers``: only the top k decoder layers (and the final norm) train."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from curriculum.config import load_config
from curriculum.loop import build_testbed
from trainers.grpo.warmstart import WarmStartConfig, cache_key, warm_start
from trainers.lm.models import LoraSettings, ModelConfig, load_model


def test_only_the_top_layers_and_the_final_norm_require_grad(tiny_model_dir):
    model, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir), trainable_layers=1))
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("model.layers.1.", "model.norm.")) for n in trainable)
    assert "model.norm.weight" in trainable
    # The tied embedding / LM head sits at the bottom of the stack: frozen.
    assert not model.get_input_embeddings().weight.requires_grad
    assert not any(n.startswith("model.layers.0.") for n in trainable)


def test_more_layers_than_the_model_has_is_a_clear_error(tiny_model_dir):
    with pytest.raises(ValueError, match="only 2 decoder layers"):
        load_model(ModelConfig(name_or_path=str(tiny_model_dir), trainable_layers=3))


def test_lora_and_trainable_layers_are_refused_together():
    with pytest.raises(ValidationError, match="set one of them"):
        ModelConfig(lora=LoraSettings(), trainable_layers=2)


def test_a_warm_start_changes_the_top_layer_only(tiny_model_dir):
    testbed = build_testbed(load_config(None))
    tasks = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 4, seed=2)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir), trainable_layers=1))
    before = {n: p.detach().clone() for n, p in model.state_dict().items()}
    warm_start(model, tokenizer, testbed, tasks, WarmStartConfig(steps=2, learning_rate=5e-3, batch_size=2))
    after = model.state_dict()
    changed = {n for n in before if not (before[n] == after[n]).all()}
    assert changed and all(n.startswith(("model.layers.1.", "model.norm.")) for n in changed)
    assert any(n.startswith("model.layers.1.") for n in changed)


def test_the_frozen_set_is_part_of_the_warm_start_cache_key():
    examples = [{"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": "assistant", "content": "b"}]}]
    settings = WarmStartConfig(steps=4)
    full = cache_key("w", examples, settings, False)
    assert cache_key("w", examples, settings, False, ()) == full  # all weights train: the old key
    bottom = cache_key("w", examples, settings, False, ["model.layers.0.mlp.up_proj.weight"])
    both = cache_key("w", examples, settings, False, ["model.layers.0.mlp.up_proj.weight",
                                                      "model.layers.1.mlp.up_proj.weight"])
    assert len({full, bottom, both}) == 3


def test_a_run_with_trainable_layers_trains_only_the_top_layer(tiny_model_dir, tmp_path):
    """Warm start, GRPO and the saved checkpoint through the loop: the frozen weights come out
    bit-identical, the top layer does not."""
    from safetensors.torch import load_file

    from curriculum.loop import run
    from curriculum.rundir import RunDir
    from tests.foundation.test_loop import tiny_overrides

    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path, rounds=1, **{
        "model.trainable_layers": 1, "trainer.learning_rate": 1e-2, "trainer.warmstart.steps": 1,
        "trainer.warmstart.batch_size": 2, "trainer.warmstart.cache": "false"}))
    result = run(config)
    assert result.history[0].train_metrics["train/steps"] == 2
    start = load_file(tiny_model_dir / "model.safetensors")
    saved = load_file(next(RunDir.open(result.run_dir).path.rglob("model.safetensors")))
    frozen = [n for n in start if not n.startswith(("model.layers.1.", "model.norm."))]
    assert "model.embed_tokens.weight" in frozen and any(n.startswith("model.layers.0.") for n in frozen)
    assert all((saved[n] == start[n]).all() for n in frozen)
    assert any(not (saved[n] == start[n]).all() for n in start if n.startswith("model.layers.1."))
