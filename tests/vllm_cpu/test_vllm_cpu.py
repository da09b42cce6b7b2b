"""The vLLM rollout path end to end on the CPU build, on a tiny random-init model.

Runs where ``vllm`` is importable as the CPU build (``make install-cpu-vllm``, then
``make test-cpu-vllm``); elsewhere every test skips and says why. Checked: the engine starts and
generates through ``VLLMPolicy`` (the GPU path's class); after ``push_weights`` the engine's
log-probs of a fixed continuation equal the trainer model's (fp32 on both sides) and differ from
the ones before the push, so the engine samples from the updated weights.
"""

from __future__ import annotations

import pytest

from trainers.lm.generation import GenerationConfig, describe_backend

CONFIG = GenerationConfig(backend="vllm", vllm_dtype="float32", vllm_cpu_kv_cache_gib=1, max_new_tokens=8)


@pytest.fixture(scope="module")
def engine(vllm_model_dir):
    from trainers.lm.generation import VLLMPolicy

    policy = VLLMPolicy(CONFIG, model_path=str(vllm_model_dir), max_model_len=256)
    yield policy
    del policy.llm


def engine_logprobs(llm, ids: list[int]) -> list[float]:
    """The engine's log-prob of each token of ``ids`` after the first."""
    from vllm import SamplingParams

    out = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                       use_tqdm=False)[0]
    return [step[tok].logprob for tok, step in zip(ids[1:], out.prompt_logprobs[1:], strict=True)]


def model_logprobs(model, ids: list[int]) -> list[float]:
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()  # (T-1, V)
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()


def test_backend_vllm_resolves_here():
    backend, why = describe_backend(CONFIG)
    assert backend == "vllm" and "vllm" in why.lower()


def test_engine_generates_through_the_policy(engine):
    from curriculum.core.types import Task

    tasks = [Task(id=str(i), messages=[{"role": "user", "content": f"Count to {i}."}]) for i in range(3)]
    out = engine.generate(tasks, max_new_tokens=8)
    assert len(out) == 3
    assert all(1 <= c.num_tokens <= 8 for c in out)


def test_weight_push_makes_engine_logprobs_equal_the_trainers(engine, vllm_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(vllm_model_dir, dtype=torch.float32)
    ids = engine.tokenizer("The quick brown fox jumps over the lazy dog.", add_special_tokens=False)["input_ids"]
    before = engine_logprobs(engine.llm, ids)
    assert before == pytest.approx(model_logprobs(model, ids), abs=2e-3)
    torch.manual_seed(1)
    with torch.no_grad():  # an "optimizer step": every weight moves
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    trained = model_logprobs(model, ids)
    assert max(abs(a - b) for a, b in zip(before, trained, strict=True)) > 0.05  # the step is visible
    engine.push_weights(model)
    assert engine_logprobs(engine.llm, ids) == pytest.approx(trained, abs=2e-3)


def test_grpo_step_through_trls_colocated_engine_syncs_weights(vllm_model_dir, tmp_path):
    """``trainer.use_vllm: true`` on the CPU: TRL's colocated engine samples a GRPO step, and TRL's
    sync (``sync_colocated_through_reload``) moves the trainer's weights into it: the engine then
    scores a fixed continuation as the trainer's model does, and not as before the sync. (A
    random-init model scores 0 on every completion, so the step itself leaves the weights as they
    are; they are moved by hand, as an optimizer step would.)"""
    import numpy as np
    import torch

    from curriculum.config import load_config
    from curriculum.loop import build_testbed, build_trainer
    from tests.foundation.test_loop import tiny_overrides

    config = load_config(None, tiny_overrides(vllm_model_dir, tmp_path, **{
        "trainer.use_vllm": "true", "trainer.max_steps_per_round": 1}))
    testbed = build_testbed(config)
    trainer = build_trainer(config, testbed)
    trainer.setup(None)
    try:
        tasks = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 2, seed=0)
        metrics = trainer.train_round(tasks, round_index=0, seed=0)
        assert metrics["train/completions"] > 0  # sampled by the engine
        engine = trainer._trl.vllm_generation
        assert engine.syncs_through_reload
        ids = trainer.tokenizer("A fixed continuation to score.", add_special_tokens=False)["input_ids"]
        torch.manual_seed(2)
        with torch.no_grad():
            for p in trainer.model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        trained = model_logprobs(trainer.model, ids)
        stale = engine_logprobs(engine.llm, ids)
        assert max(abs(a - b) for a, b in zip(stale, trained, strict=True)) > 0.05
        engine.sync_weights()
        # TRL's engine starts with this machine's engine options (eager; bf16 only where native).
        from trainers.lm.precision import native_bf16

        assert engine.llm.model_config.dtype == (torch.bfloat16 if native_bf16("cpu") else torch.float32)
        assert engine.llm.model_config.enforce_eager
        tolerance = 2e-3 if engine.llm.model_config.dtype == torch.float32 else 3e-2
        assert engine_logprobs(engine.llm, ids) == pytest.approx(trained, abs=tolerance)
    finally:
        trainer.close()


def test_one_engine_serves_every_eval_and_every_rounds_trainer(vllm_model_dir, tmp_path):
    """A run starts one vLLM engine: the first eval's (``generation.backend: vllm``) is the engine
    TRL's colocated trainer samples round 0 and round 1 with, and the evals after them read it too;
    each round's trainer still syncs its weights into it before sampling. On this machine's fp32
    engine beside an fp32 trainer, ``vllm_importance_sampling: auto`` turns TRL's correction off."""
    import gc

    import numpy as np
    import torch

    from curriculum.config import load_config
    from curriculum.loop import build_testbed, build_trainer
    from trainers.lm.precision import native_bf16

    config = load_config(None, tiny_overrides_for_vllm(vllm_model_dir, tmp_path))
    testbed = build_testbed(config)
    trainer = build_trainer(config, testbed)
    trainer.setup(None)
    try:
        tasks = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 2, seed=0)
        first = trainer.policy()  # the baseline eval starts the run's engine
        first.generate(tasks[:1], max_new_tokens=4)
        engines = []
        for round_index in range(2):
            trainer.train_round(tasks, round_index=round_index, seed=round_index)
            engines.append(trainer._trl.vllm_generation.llm)
            assert trainer._trl.vllm_generation.syncs_through_reload
            with torch.no_grad():  # an update the next sync must carry
                for p in trainer.model.parameters():
                    p.add_(0.01)
            assert trainer.policy().llm is first.llm
        assert engines[0] is first.llm and engines[1] is first.llm
        ids = trainer.tokenizer("A fixed continuation to score.", add_special_tokens=False)["input_ids"]
        tolerance = 2e-3 if first.llm.model_config.dtype == torch.float32 else 3e-2
        assert engine_logprobs(first.llm, ids) == pytest.approx(model_logprobs(trainer.model, ids), abs=tolerance)
        assert trainer._trl.vllm_importance_sampling_correction == native_bf16("cpu")
    finally:
        trainer.close()
        trainer._trl = trainer._vllm_policy = trainer._engine.llm = None
        gc.collect()


def tiny_overrides_for_vllm(model_dir, out):
    from tests.foundation.test_loop import tiny_overrides

    return tiny_overrides(model_dir, out, **{"trainer.use_vllm": "true", "trainer.max_steps_per_round": 1,
                                             "generation.backend": "vllm", "generation.vllm_cpu_kv_cache_gib": 1})
