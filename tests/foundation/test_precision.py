"""bf16 mixed precision: ``auto`` asks the machine, and generation runs under autocast when on."""

from __future__ import annotations

import pytest

from trainers.lm import precision
from trainers.lm.models import ModelConfig, load_model


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16\nbugs\t\t: none\n")
    assert {"avx2", "avx512_bf16"} <= precision.cpu_flags(info)
    assert precision.cpu_flags(tmp_path / "missing") == set()


@pytest.mark.parametrize(("flags", "native"), [({"avx2", "fma"}, False), ({"avx512f"}, False),
                                               ({"avx512f", "avx512_bf16"}, True), ({"amx_bf16"}, True)])
def test_auto_is_on_only_where_the_cpu_multiplies_bf16_natively(monkeypatch, flags, native):
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    precision.native_bf16.cache_clear()
    try:
        assert precision.resolve_bf16("auto", "cpu") is native
        assert precision.resolve_bf16(True, "cpu") is True and precision.resolve_bf16(False, "cpu") is False
    finally:
        precision.native_bf16.cache_clear()


@pytest.mark.parametrize("bf16", [False, True])
def test_generation_runs_under_bf16_autocast_when_asked(tiny_model_dir, bf16):
    import torch

    from curriculum.core.types import Task
    from trainers.lm.generation import GenerationConfig, TransformersPolicy

    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    seen: list[tuple[bool, torch.dtype]] = []
    forward = model.forward

    def spy(*args, **kwargs):
        out = forward(*args, **kwargs)
        seen.append((torch.is_autocast_enabled("cpu"), out.logits.dtype))
        return out

    model.forward = spy
    policy = TransformersPolicy(model, tokenizer, GenerationConfig(max_new_tokens=3), bf16=bf16)
    tasks = [Task(id=str(i), messages=[{"role": "user", "content": f"count to {i}"}]) for i in range(2)]
    out = policy.generate(tasks)
    assert len(out) == 2 and seen
    assert all(enabled is bf16 for enabled, _ in seen)
    assert all((dtype == torch.bfloat16) is bf16 for _, dtype in seen)
    assert next(model.parameters()).dtype == torch.float32      # the weights are not cast
    assert not torch.is_autocast_enabled("cpu")                 # and nothing leaks out of the call


def test_the_grpo_trainer_config_takes_auto(tiny_model_dir):
    from curriculum.config import load_config

    cfg = load_config(None, ["trainer.name=grpo", "trainer.bf16=auto", f"model.name_or_path={tiny_model_dir}",
                             "testbed.name=mapf_frozenlake"])
    assert cfg.trainer.bf16 == "auto"
    with pytest.raises(Exception, match="bf16"):
        load_config(None, ["trainer.name=grpo", "trainer.bf16=sometimes", "testbed.name=mapf_frozenlake"])


@pytest.mark.parametrize(("build", "native", "setting", "dtype", "eager"), [
    ("cpu", False, {}, "float32", True),          # AVX2: vLLM's bf16 is ~4x slower than its fp32
    ("cpu", True, {}, "bfloat16", True),
    ("cpu", False, {"vllm_dtype": "bfloat16", "vllm_enforce_eager": False}, "bfloat16", False),
    ("cuda", False, {}, "auto", False),           # a GPU: vLLM's own choice, compiled
])
def test_vllm_engine_options_follow_the_machine(monkeypatch, build, native, setting, dtype, eager):
    from curriculum.core.policy import GenerationConfig
    from trainers.lm import generation

    monkeypatch.setattr(generation, "vllm_build", lambda: build)
    monkeypatch.setattr(precision, "native_bf16", lambda device="cpu": native)
    assert generation.engine_options(GenerationConfig(**setting)) == {"dtype": dtype, "enforce_eager": eager}


@pytest.mark.parametrize(("build", "native", "sets", "mode"), [
    ("cpu", False, [], "off"),                                          # fp32 engine, fp32 trainer: same numbers
    ("cpu", True, [], "sequence_mask"),                                 # bf16 engine and autocast
    ("cpu", False, ["generation.vllm_dtype=bfloat16"], "sequence_mask"),
    ("cpu", False, ["model.dtype=bfloat16"], "sequence_mask"),
    ("cuda", False, [], "sequence_mask"),                               # a GPU's kernels: not measured exact
    ("cpu", False, ["trainer.vllm_importance_sampling=token_truncate"], "token_truncate"),  # a choice stays
])
def test_importance_sampling_auto_is_off_only_where_sampler_and_trainer_compute_alike(
        monkeypatch, tiny_model_dir, tmp_path, build, native, sets, mode):
    from curriculum.config import load_config
    from curriculum.loop import build_testbed, build_trainer
    from trainers.grpo import trainer as grpo
    from trainers.lm import generation

    for module in (generation, grpo):
        monkeypatch.setattr(module, "vllm_build", lambda: build)
    monkeypatch.setattr(precision, "native_bf16", lambda device="cpu": native)
    monkeypatch.setattr(grpo, "_cuda", lambda: False)
    config = load_config(None, ["trainer.name=grpo", "trainer.bf16=auto", f"model.name_or_path={tiny_model_dir}",
                                "testbed.name=mapf_frozenlake", f"output_dir={tmp_path}", *sets])
    trainer = build_trainer(config, build_testbed(config))
    try:
        assert trainer.importance_sampling() == mode
        args = trainer._shared_trl_args(seed=0)
        assert args["vllm_importance_sampling_correction"] == (mode != "off")
    finally:
        trainer.close()


@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("sets", [[], ["trainer.bf16=true"], ["trainer.bf16=false"],
                                  ["generation.vllm_dtype=bfloat16"], ["generation.vllm_dtype=float32"]])
def test_the_estimate_counts_the_precision_the_trainers_run(monkeypatch, native, sets):
    """The wall-time estimate (controller) and the trainers decide bf16 and vLLM's dtype by the
    kernel's one rule each, so an estimate never times a precision the run does not use."""
    from curriculum.config import load_config
    from curriculum.walltime import cpu_lanes
    from trainers.lm import generation

    cfg = load_config(None, ["trainer.name=grpo", "testbed.name=mapf_frozenlake", "generation.backend=vllm",
                             "trainer.use_vllm=true", *sets])
    monkeypatch.setattr(generation, "vllm_build", lambda: "cpu")
    monkeypatch.setattr(precision, "native_bf16", lambda device="cpu": native)
    lanes = cpu_lanes(cfg, native)
    assert (lanes.train == "bf16") is precision.resolve_bf16(cfg.trainer.bf16, "cpu")
    engine = generation.engine_options(cfg.generation)["dtype"]
    assert (lanes.eval.precision == "bf16") is (engine != "float32")
    assert lanes.rollout.precision == lanes.eval.precision
