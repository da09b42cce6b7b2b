"""Every shipped config validates; ``--dry-run`` prints the plan without a GPU or a model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from curriculum.config import load_config
from curriculum.plan import Strategy, memory_per_gpu_gb, parameter_count, read_strategy

ROOT = Path(__file__).resolve().parents[2]
ACCELERATE = sorted((ROOT / "configs/accelerate").glob("*.yaml"))
PAPER = sorted(p for p in (ROOT / "configs").glob("*.yaml")
               if not any(word in p.name for word in ("cpu", "simulated", "small", "endpoint")))  # no model to plan


@pytest.mark.parametrize("path", ACCELERATE, ids=lambda p: p.name)
def test_accelerate_configs_load(path):
    data = yaml.safe_load(path.read_text())
    assert data["distributed_type"] in {"NO", "MULTI_GPU", "DEEPSPEED", "FSDP"}
    strategy = read_strategy(path)
    assert strategy.processes == data["num_processes"] >= 1


def test_paper_zero3_config_is_four_processes():
    assert read_strategy(ROOT / "configs/accelerate/zero3_4gpu.yaml") == Strategy("zero3", 4)


def test_parameter_count_from_names_and_files(tiny_model_dir):
    assert parameter_count("Qwen/Qwen3-4B") == 4_020_000_000  # known shape (model card)
    assert parameter_count("Qwen/Qwen3-30B-A3B-Instruct-2507") == 30_530_000_000
    assert parameter_count("someone/Qwen3-14B-Base") == 14_000_000_000  # from the name
    assert parameter_count("embedded:smollm2-135m-instruct") == 134_515_008
    assert parameter_count(str(tiny_model_dir)) > 0
    assert parameter_count("some/model") is None


def test_memory_accounting_shards_as_documented():
    p = 1_000_000_000
    ddp = memory_per_gpu_gb(p, Strategy("ddp", 4), bf16=True, reference=False)
    zero2 = memory_per_gpu_gb(p, Strategy("zero2", 4), bf16=True, reference=False)
    zero3 = memory_per_gpu_gb(p, Strategy("zero3", 4), bf16=True, reference=False)
    assert ddp == pytest.approx(16 * p / 1024**3)  # 2 weights + 2 grads + 12 optimizer
    assert zero2 == pytest.approx((2 * p + 14 * p / 4) / 1024**3)
    assert zero3 == pytest.approx(16 * p / 4 / 1024**3)


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.name)
def test_dry_run_prints_plan_for_paper_configs(path):
    load_config(path)
    proc = subprocess.run([sys.executable, "-m", "curriculum.cli", "run", "-c", str(path), "--dry-run",
                           "--accelerate-config", str(ROOT / "configs/accelerate/zero3_4gpu.yaml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "plan:" in proc.stdout and "processes: 4" in proc.stdout
    assert "estimated training memory per GPU" in proc.stdout
    assert "Loading weights" not in proc.stdout + proc.stderr


# -- SPADE at the papers' scale ------------------------------------------------------------------------
SPADE_PAPER = {  # config -> the accelerate config its header names
    "spade_games_qwen3_4b.yaml": "zero3_8gpu.yaml",
    "spade_games_qwen3_8b.yaml": "zero3_8gpu.yaml",
    "spade_games_qwen3_30b_a3b.yaml": "zero3_offload_8gpu.yaml",
    "spade_tools_qwen3_30b_a3b.yaml": "zero3_offload_8gpu.yaml",
}


def _plan(config_name: str, accelerate: str, *sets: str, gpu: str = "h100-80gb") -> str:
    from curriculum.plan import describe_plan

    config = load_config(ROOT / "configs" / config_name, list(sets))
    return describe_plan(config, ROOT / "configs/accelerate" / accelerate, gpu)


@pytest.mark.parametrize("name", sorted(SPADE_PAPER))
def test_spade_paper_configs_fit_their_hardware(name):
    text = (ROOT / "configs" / name).read_text()
    assert f"configs/accelerate/{SPADE_PAPER[name]}" in text  # the header names its launch set-up
    plan = _plan(name, SPADE_PAPER[name])
    assert "fits: yes, on 8 x h100-80gb" in plan, plan
    # the papers' rollout sizes (public SPADE code): 24 environments, 192 agent trajectories per update
    assert "24 environments x (G=8 plain + G hinted) = 384 episodes" in plan
    assert "192 agent" in plan and "400 steps" in plan
    for part in ("weights", "optimizer", "activations", "vLLM share", "step time: FLOP floor"):
        assert part in plan


def test_spade_misfit_says_so_and_its_suggestion_fits():
    import re

    plan = _plan("spade_games_qwen3_30b_a3b.yaml", "zero3_4gpu.yaml")
    assert "fits: NO on 4 x h100-80gb" in plan and "does not divide the 4 processes" in plan
    suggestion = re.search(r"suggestion: --accelerate-config configs/accelerate/(\S+)(.*)", plan)
    assert suggestion, plan
    sets = re.findall(r"--set (\S+)", suggestion.group(2))
    assert "fits: yes" in _plan("spade_games_qwen3_30b_a3b.yaml", suggestion.group(1), *sets)


def test_spade_plan_without_vllm_room_suggests_smaller_share():
    plan = _plan("spade_games_qwen3_4b.yaml", "zero3_8gpu.yaml", "trainer.vllm_gpu_memory_utilization=0.8")
    assert "fits: NO" in plan and "needs" in plan
    assert "--set trainer.vllm_gpu_memory_utilization=0." in plan


def test_optimizer_offload_and_activation_formulas():
    from curriculum.plan import ModelShape, activation_gib, state_memory_gib

    p = 8_000_000_000
    offload = state_memory_gib(p, Strategy("zero3", 8, offload_optimizer=True), bf16=True, reference=False)
    assert offload["optimizer"] == 0.0 and offload["weights"] == pytest.approx(2 * p / 8 / 1024**3)
    shape = ModelShape(p, p, layers=10, hidden=100, vocab=1000, kv_heads=1, head_dim=10)
    head = 2 * 50 * 100 + 4 * 4096 * 1000  # saved LM-head input + one fp32 logits tile (vocab < 32768)
    assert activation_gib(shape, 50, checkpointing=True) * 1024**3 == pytest.approx(
        2 * 10 * 50 * 100 + 34 * 50 * 100 + head)
    assert activation_gib(shape, 50, checkpointing=False) * 1024**3 == pytest.approx(34 * 10 * 50 * 100 + head)


def test_step_time_flop_floor():
    from curriculum.plan import GPU, ModelShape
    from trainers.grpo.plan import SpadeStep, step_seconds

    step = SpadeStep(designs=1, design_prompt_tokens=0, design_tokens=100, play_envs=1, episodes=2,
                     episode_prompt_tokens=0, episode_tokens=50, agent_rows=1, designer_rows=1)
    assert step.generated_tokens == 200 and step.trained_tokens == 150
    shape = ModelShape(10, 5, 1, 1, 1, 1, 1)
    floor, estimate = step_seconds(step, shape, GPU("x", 1, 1e-12), 1, checkpointing=False, reference=False)
    assert floor == pytest.approx(2 * 5 * 200 + 6 * 5 * 150)  # active parameters, 1 FLOP/s
    assert estimate > floor


def test_dry_run_unknown_gpu_is_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "curriculum.cli", "run", "-c",
                           str(ROOT / "configs/spade_games_qwen3_4b.yaml"), "--dry-run", "--gpu", "b9000"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode != 0 and "unknown --gpu 'b9000'" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
