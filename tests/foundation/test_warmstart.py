"""The SFT warm start teaches the answer format: loss falls and reference answers are valid."""

from __future__ import annotations

import numpy as np

from curriculum.config import load_config
from curriculum.loop import build_testbed
from testbeds.base import Completion
from trainers.models import ModelConfig, load_model
from trainers.warmstart import sft_examples, warm_start


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
    first = warm_start(model, tokenizer, testbed, tasks, steps=1, learning_rate=5e-3, batch_size=4, seed=0)
    later = warm_start(model, tokenizer, testbed, tasks, steps=5, learning_rate=5e-3, batch_size=4, seed=0)
    assert later["warmstart/loss"] < first["warmstart/loss"]
    assert first["warmstart/examples"] == 8
