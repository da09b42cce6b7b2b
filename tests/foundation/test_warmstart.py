"""The SFT warm start teaches the answer format: loss falls and reference answers are valid."""

from __future__ import annotations

import numpy as np
import pytest

from curriculum.config import load_config
from curriculum.core.types import Completion
from curriculum.loop import build_testbed
from trainers.grpo.warmstart import WarmStartConfig, sft_examples, warm_start
from trainers.lm.models import ModelConfig, load_model


def test_reference_answers_pass_the_validator():
    testbed = build_testbed(load_config(None))
    tasks = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 16, seed=1)
    examples = sft_examples(testbed, tasks)
    assert len(examples) == 16
    for task, example in zip(tasks, examples):
        answer = example["completion"][0]["content"]
        reward, verdict = testbed.score(task, Completion(text=answer, num_tokens=20))
        assert verdict["valid"] and verdict["optimal"], verdict
        assert reward == 0.5  # w_acc = 0.5 before the short-answer EMA rises; accuracy 1, length 0


def test_warm_start_lowers_the_loss(tiny_model_dir):
    testbed = build_testbed(load_config(None))
    tasks = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 8, seed=2)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    settings = WarmStartConfig(steps=1, learning_rate=5e-3, batch_size=4)
    first = warm_start(model, tokenizer, testbed, tasks, settings)
    later = warm_start(model, tokenizer, testbed, tasks, settings.model_copy(update={"steps": 5}))
    assert later["warmstart/loss"] < first["warmstart/loss"]
    assert first["warmstart/examples"] == 8


def _digest(model) -> str:
    import hashlib

    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def test_cache_key_changes_with_every_input():
    from trainers.grpo.warmstart import WarmStartConfig, cache_key

    examples = [{"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": "assistant", "content": "b"}]}]
    base = WarmStartConfig(steps=4, batch_size=8)
    key = cache_key("w", examples, base, False)
    assert key == cache_key("w", examples, WarmStartConfig(steps=4), False)
    other_examples = [{**examples[0], "completion": [{"role": "assistant", "content": "c"}]}]
    variants = [cache_key("w2", examples, base, False), cache_key("w", other_examples, base, False),
                cache_key("w", examples, base, True)]
    for change in ({"steps": 5}, {"learning_rate": 2e-4}, {"batch_size": 4}, {"seed": 1},
                   {"group_by_length": True}, {"micro_batch_size": 4}, {"max_length": 2048},
                   {"lr_schedule": "cosine"}, {"lr_schedule": "linear"}):
        variants.append(cache_key("w", examples, base.model_copy(update=change), False))
    assert key not in variants and len(set(variants)) == len(variants)
    # Whether the cache is used does not change what it would hold.
    assert cache_key("w", examples, base.model_copy(update={"cache": False}), False) == key


def test_cached_warm_start_trains_once_and_reloads_identical_weights(tiny_model_dir, tmp_path, monkeypatch):
    from trainers.grpo.warmstart import WarmStartConfig, cached_warm_start

    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path))
    testbed = build_testbed(load_config(None, ["testbed.warmstart_sizes=[3x3]"]))
    settings = WarmStartConfig(steps=2, batch_size=2, learning_rate=5e-3)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    start = _digest(model)
    ticks: list[int] = []
    path, first = cached_warm_start(model, tokenizer, testbed, settings, weights_digest=start,
                                    progress=ticks.append)
    assert first["warmstart/cached"] == 0.0 and sum(ticks) == 2
    trained = _digest(model)
    assert trained != start
    fresh, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    again_path, again = cached_warm_start(fresh, tokenizer, testbed, settings, weights_digest=start)
    assert again["warmstart/cached"] == 1.0 and again_path == path
    assert again["warmstart/loss"] == first["warmstart/loss"]
    assert _digest(fresh) == trained
    # A different starting point is a different entry.
    other, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    third_path, third = cached_warm_start(other, tokenizer, testbed, settings, weights_digest="another")
    assert third_path != path and third["warmstart/cached"] == 0.0


def test_supplied_examples_train_a_testbed_without_reference_answers(tiny_model_dir):
    import pytest

    from testbeds.spade.testbed import SpadeTestbed, SpadeTestbedConfig

    testbed = SpadeTestbed(SpadeTestbedConfig())  # no reference answers of its own
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    examples = [{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
                 "completion": [{"role": "assistant", "content": f"\\boxed{{{2 * i}}}"}]} for i in range(4)]
    settings = WarmStartConfig(steps=1, learning_rate=5e-3, batch_size=2)
    metrics = warm_start(model, tokenizer, testbed, [], settings, examples=examples)
    assert metrics["warmstart/examples"] == 4
    with pytest.raises(ValueError, match="no reference answers and nothing else supplied"):
        warm_start(model, tokenizer, testbed, [], settings)


def test_length_grouped_batches_keep_the_examples_and_cut_padding(tiny_model_dir):
    from trainers.grpo.warmstart import example_length, length_grouped

    testbed = build_testbed(load_config(None))
    tasks = testbed.warmstart_tasks(48, 0)
    examples = sft_examples(testbed, tasks)
    _, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    grouped = length_grouped(examples, tokenizer, 8, seed=0)
    key = lambda e: e["completion"][0]["content"] + e["prompt"][-1]["content"]  # noqa: E731
    assert sorted(map(key, grouped)) == sorted(map(key, examples))  # same examples, reordered

    def padded(rows):  # tokens a batch of rows costs when padded to its longest row
        lengths = [example_length(e, tokenizer) for e in rows]
        return sum(8 * max(lengths[i:i + 8]) for i in range(0, len(lengths), 8))

    assert padded(grouped) < padded(examples)
    assert grouped == length_grouped(examples, tokenizer, 8, seed=0)  # seeded
    assert grouped != length_grouped(examples, tokenizer, 8, seed=1)  # block order is shuffled


def test_micro_batch_must_divide_the_batch():
    import pytest
    from pydantic import ValidationError

    from trainers.grpo.warmstart import WarmStartConfig

    assert WarmStartConfig(batch_size=8, micro_batch_size=2).micro_batch_size == 2
    with pytest.raises(ValidationError, match="multiple of micro_batch_size"):
        WarmStartConfig(batch_size=8, micro_batch_size=3)


def _sum_examples(n: int) -> list[dict]:
    return [{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
             "completion": [{"role": "assistant", "content": f"\\boxed{{{2 * i}}}"}]} for i in range(n)]


def test_micro_batches_make_the_same_update_as_one_pass(tiny_model_dir):
    """batch_size 4 in passes of 1 (gradient accumulation) = batch_size 4 in one pass, up to rounding."""
    import torch

    from testbeds.spade.testbed import SpadeTestbed, SpadeTestbedConfig

    testbed = SpadeTestbed(SpadeTestbedConfig())
    weights = []
    for micro in (None, 1):
        model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
        ticks: list[int] = []
        settings = WarmStartConfig(steps=2, learning_rate=5e-3, batch_size=4, micro_batch_size=micro)
        warm_start(model, tokenizer, testbed, [], settings, examples=_sum_examples(8), progress=ticks.append)
        assert sum(ticks) == 2  # optimizer steps, not passes
        weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    start, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    name = "model.layers.0.mlp.up_proj.weight"
    assert not torch.equal(weights[0][name], start.state_dict()[name])  # it trained
    # AdamW divides by sqrt(v) + 1e-8: where a gradient is near 1e-8 (rare vocabulary rows, dead
    # units) float rounding of the two summation orders moves the update by a visible fraction of
    # lr (5e-3). So: every weight within a tenth of one step, and all but 1e-5 of them exact.
    # (Wrong accumulation scaling, e.g. a per-pass mean, moves every weight by up to a whole step.)
    total = close = 0
    for key, value in weights[0].items():
        torch.testing.assert_close(weights[1][key], value, rtol=0.0, atol=5e-4)
        close += int(torch.isclose(weights[1][key], value, rtol=1e-4, atol=1e-5).sum())
        total += value.numel()
    assert close >= total * (1 - 1e-5)


def test_a_long_example_keeps_its_completion(tiny_model_dir):
    """A prompt past TRL's default cut (1,024 tokens) still trains on its completion: a SPADE design
    prompt with its document is up to ~1,500 tokens, and the design is the completion."""
    from testbeds.spade.testbed import SpadeTestbed, SpadeTestbedConfig

    testbed = SpadeTestbed(SpadeTestbedConfig())
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    prompt = "Design a game about these words: " + " ".join(f"word{i}" for i in range(600))
    example = {"prompt": [{"role": "user", "content": prompt}],
               "completion": [{"role": "assistant", "content": "<hint>count the words</hint>"}]}
    assert len(tokenizer(prompt)["input_ids"]) > 1100
    settings = WarmStartConfig(steps=1, learning_rate=5e-3, batch_size=1)
    metrics = warm_start(model, tokenizer, testbed, [], settings, examples=[example])
    assert metrics["warmstart/loss"] > 0.0


def test_a_decayed_schedule_moves_the_weights_less_than_a_constant_one(tiny_model_dir):
    """lr_schedule reaches TRL: with linear decay from the same peak the later steps are smaller
    (the last of 3 steps runs at 1/3 of the peak), so the weights end nearer the start."""
    import torch

    from testbeds.spade.testbed import SpadeTestbed, SpadeTestbedConfig

    testbed = SpadeTestbed(SpadeTestbedConfig())
    start, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    name = "model.layers.0.mlp.up_proj.weight"
    moved = {}
    for schedule in ("constant", "linear"):
        model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
        settings = WarmStartConfig(steps=3, learning_rate=5e-3, batch_size=4, lr_schedule=schedule)
        warm_start(model, tokenizer, testbed, [], settings, examples=_sum_examples(12))
        moved[schedule] = float(torch.linalg.norm(model.state_dict()[name] - start.state_dict()[name]))
    assert 0.0 < moved["linear"] < 0.95 * moved["constant"]


def test_unknown_lr_schedule_is_a_config_error():
    from pydantic import ValidationError

    from trainers.grpo.warmstart import WarmStartConfig

    with pytest.raises(ValidationError, match="lr_schedule"):
        WarmStartConfig(lr_schedule="exponential")


def test_completion_head_loss_is_the_full_logit_nll_of_the_completion_tokens(tiny_model_dir):
    """``completion_nll`` runs the LM head on the labelled positions only; its loss (and gradient)
    is the summed NLL of the completion tokens under the full logits, over any token count, on a
    padded batch whose rows start their completions at different positions."""
    import torch
    import torch.nn.functional as F

    from trainers.grpo.warmstart import completion_nll

    model, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    torch.manual_seed(0)
    input_ids = torch.randint(5, 200, (3, 12))                                  # (B, T)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[2, 9:] = 0                                                  # right padding
    labels = input_ids.clone()
    labels[0, :7] = -100                                                       # prompts of 7, 4, 5
    labels[1, :4] = -100
    labels[2, :5] = -100
    labels[2, 9:] = -100
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (B, T, V)
    want = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100,
                           reduction="sum")
    got = completion_nll(model, inputs)
    torch.testing.assert_close(got, want / (labels[:, 1:] != -100).sum(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(completion_nll(model, inputs, num_items=40), want / 40, rtol=1e-5, atol=1e-6)

    name = "model.layers.0.mlp.up_proj.weight"
    got.backward()
    ours = model.get_parameter(name).grad.clone()
    model.zero_grad()
    (want / (labels[:, 1:] != -100).sum()).backward()
    torch.testing.assert_close(ours, model.get_parameter(name).grad, rtol=1e-4, atol=1e-6)

    only_prompt = dict(inputs, labels=torch.full_like(labels, -100))          # nothing to learn
    assert float(completion_nll(model, only_prompt)) == 0.0


def _warmstart_key(config_file, *sets, model_dir, monkeypatch=None) -> str:
    """The warm-start cache key a run of ``config_file`` with ``sets`` would use (nothing trains)."""
    from pathlib import Path

    from curriculum.loop import build_trainer

    path = Path(__file__).resolve().parents[2] / "configs" / config_file
    small = [f"model.name_or_path={model_dir}", "trainer.warmstart.steps=2", "trainer.warmstart.batch_size=2",
             "trainer.warmstart.micro_batch_size=1", "testbed.warmstart_sizes=[3x3]", "trainer.bf16=false",
             "model.trainable_layers=2"]
    config = load_config(path, [*small, *sets])
    trainer = build_trainer(config, build_testbed(config))
    try:
        trainer.setup(None)
        return trainer.warmstart_key()
    finally:
        trainer.close()


def test_the_warm_start_key_ignores_how_a_run_generates_and_follows_what_trains(tiny_model_dir, tiny_llama,
                                                                                tmp_path, monkeypatch):
    """`make demo` (on vLLM's CPU build in .venv-vllm, or on transformers) and
    `curriculum run --engineer checkpoint --testbed mapf_frozenlake` (in .venv) share one entry:
    the engineer, the rollout engine and transformers' and TRL's minor versions are not in the key;
    what decides the weights is."""
    import torch
    import transformers
    import trl

    demo = _warmstart_key("mapf_cpu_demo.yaml", model_dir=tiny_model_dir)
    assert demo is not None
    same = [_warmstart_key("mapf_checkpoint_cpu_demo.yaml", model_dir=tiny_model_dir),
            _warmstart_key("mapf_cpu_demo.yaml", "generation.backend=vllm", "trainer.use_vllm=true",
                           model_dir=tiny_model_dir),
            _warmstart_key("mapf_cpu_demo.yaml", "generation.batch_size=8", "trainer.temperature=1.0",
                           "seed=3", "rounds=1", model_dir=tiny_model_dir)]
    monkeypatch.setattr(transformers, "__version__", "5.19.0")  # .venv-vllm's, below .venv's
    monkeypatch.setattr(trl, "__version__", "1.99.0")
    same.append(_warmstart_key("mapf_cpu_demo.yaml", model_dir=tiny_model_dir))
    assert same == [demo] * 4
    other_model = tiny_llama(tmp_path / "wider", hidden_size=96)
    changed = [_warmstart_key("mapf_cpu_demo.yaml", f"trainer.warmstart.{k}={v}", model_dir=tiny_model_dir)
               for k, v in (("steps", 3), ("learning_rate", 1e-4), ("seed", 1))]
    changed += [_warmstart_key("mapf_cpu_demo.yaml", model_dir=other_model),
                _warmstart_key("mapf_cpu_demo.yaml", "testbed.warmstart_sizes=[4x4]",
                               model_dir=tiny_model_dir),
                _warmstart_key("mapf_cpu_demo.yaml", "model.trainable_layers=1", model_dir=tiny_model_dir)]
    monkeypatch.setattr(transformers, "__version__", "6.0.0")  # another major version
    changed.append(_warmstart_key("mapf_cpu_demo.yaml", model_dir=tiny_model_dir))
    monkeypatch.setattr(transformers, "__version__", "5.25.0")
    monkeypatch.setattr(torch, "__version__", "2.14.0+cpu")  # other kernels
    changed.append(_warmstart_key("mapf_cpu_demo.yaml", model_dir=tiny_model_dir))
    assert demo not in changed and len(set(changed)) == len(changed), changed


def test_a_library_default_that_changes_the_update_changes_the_key(monkeypatch):
    from trainers.grpo import warmstart

    examples = [{"prompt": [{"role": "user", "content": "a"}],
                 "completion": [{"role": "assistant", "content": "b"}]}]
    settings = WarmStartConfig(steps=4)
    key = warmstart.cache_key("w", examples, settings, False)
    defaults = warmstart.library_defaults(settings)
    assert defaults["optim"] and defaults["max_grad_norm"] is not None
    monkeypatch.setattr(warmstart, "library_defaults",
                        lambda config, bf16=False: {**defaults, "optim": "adamw_torch"})
    assert warmstart.cache_key("w", examples, settings, False) != key


def test_an_entry_stored_under_the_older_key_is_still_found(tiny_model_dir, tmp_path, monkeypatch):
    """Entries made before the key left out the minor versions stay in use where runs recorded them."""
    from trainers.grpo.warmstart import _legacy_key, cached_warm_start, training_examples

    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path))
    testbed = build_testbed(load_config(None, ["testbed.warmstart_sizes=[3x3]"]))
    settings = WarmStartConfig(steps=2, batch_size=2)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    old = tmp_path / "warmstart" / _legacy_key("w", training_examples(testbed, settings), settings, False)
    model.save_pretrained(old, safe_serialization=True)
    (old / "metrics.json").write_text('{"warmstart/loss": 0.5}')
    path, metrics = cached_warm_start(model, tokenizer, testbed, settings, weights_digest="w")
    assert path == old and metrics == {"warmstart/loss": 0.5, "warmstart/cached": 1.0}
