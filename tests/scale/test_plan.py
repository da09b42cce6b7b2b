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
PAPER = sorted(p for p in (ROOT / "configs").glob("*.yaml") if "cpu" not in p.name and "simulated" not in p.name)


@pytest.mark.parametrize("path", ACCELERATE, ids=lambda p: p.name)
def test_accelerate_configs_load(path):
    data = yaml.safe_load(path.read_text())
    assert data["distributed_type"] in {"NO", "MULTI_GPU", "DEEPSPEED", "FSDP"}
    strategy = read_strategy(path)
    assert strategy.processes == data["num_processes"] >= 1


def test_paper_zero3_config_is_four_processes():
    assert read_strategy(ROOT / "configs/accelerate/zero3_4gpu.yaml") == Strategy("zero3", 4)


def test_parameter_count_from_names_and_files(tiny_model_dir):
    assert parameter_count("Qwen/Qwen3-4B") == 4_000_000_000
    assert parameter_count("Qwen/Qwen3-30B-A3B-Instruct-2507") == 30_000_000_000
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
