"""Decoding speed per engine against its floor, engine start-up, weight sync, greedy agreement.

For a run config (default ``configs/mapf_cpu_demo.yaml``) and its model this times, per engine:

* ``transformers-dynamic``: ``model.generate`` with the growing ``DynamicCache`` (today's path),
  in the run's precision (bf16 autocast where ``trainer.bf16`` resolves to on, else fp32);
* ``transformers-static``: the same with ``cache_implementation="static"`` (``generation.cache``;
  it prefills every row, repeated prompts too: a static cache cannot start from the shared prefill);
* ``vllm-bf16`` / ``vllm-fp32``: the vLLM engine of ``trainers/lm/generation.start_vllm_engine`` (the
  CPU build on a CPU), when vLLM is importable; skipped with the reason otherwise.

Workloads: ``eval`` — the testbed's eval prompts, greedy; ``grpo`` — round-0 training prompts,
each repeated ``num_generations`` times (the transformers engines prefill each distinct prompt
once: ``share_prompt_prefill``), sampled at ``trainer.temperature``. Rows: 1, 16, 48.

ms/token is the time of one decode step of all rows: every call decodes exactly ``T`` new
tokens (EOS ignored), and ``(t(T) - t(1)) / (T - 1)`` removes the prefill; tokens/s = rows / that.
The floor of a decode step is ``max(weight bytes / B, 2·N·rows / R)`` with N the parameter count,
weight bytes N·4 (fp32 weights, also under bf16 autocast) or N·2 (vLLM bf16), B the measured
memory bandwidth (``curriculum.walltime.measure_cpu_bandwidth``) and R the measured GEMM rate
(2048² matrix product, best of 5) in the engine's compute precision; ``ratio`` = measured / floor.

Start-up is the engine's construction (0 for transformers: the model is already loaded); weight
sync is one ``trainers.lm.generation.push_weights`` (0 for transformers: it decodes the trained model
itself). Agreement: greedy eval decoding to each engine's own end of sequence; per engine against
``transformers-dynamic``: prompts with identical tokens and the mean position of the first
difference.

Run: ``python benchmarks/generation.py [--config F] [--engines ...] [--quick] [--json F]``; vLLM needs
the environment of ``make install-cpu-vllm`` (its own interpreter, ``.venv-vllm``). Numbers are
printed, not asserted; the load average (``uptime``) is printed with them: rerun on a quiet machine.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.grpo_step import matmul_rate  # noqa: E402

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "mapf_cpu_demo.yaml"
ENGINES = ("transformers-dynamic", "transformers-static", "vllm-bf16", "vllm-fp32")


def machine_line() -> str:
    model = platform.processor() or "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


class TransformersEngine:
    """``model.generate`` on prompt ids, left-padded, as ``TransformersPolicy`` calls it."""

    def __init__(self, model: Any, tokenizer: Any, *, static: bool, bf16: bool) -> None:
        self.model, self.tokenizer, self.static, self.bf16 = model, tokenizer, static, bf16
        self.startup_s, self.weight_bytes = 0.0, 4 * sum(p.numel() for p in model.parameters())
        self.compute_bf16 = bf16
        self.warm_up = False  # eager torch: the first prefill-only call warms up enough

    def decode(self, prompts: list[list[int]], new_tokens: int, temperature: float, fixed: bool,
               seed: int = 0) -> list[list[int]]:
        import contextlib

        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        torch.manual_seed(seed)
        precision = torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        with torch.no_grad(), precision:
            # The static cache cannot start from the shared prefill's DynamicCache: plain generate.
            generate = functools.partial(type(self.model).generate, self.model) if self.static else self.model.generate
            out = generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                min_new_tokens=new_tokens if fixed else None, do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None, top_p=None, top_k=None,
                pad_token_id=pad, **({"cache_implementation": "static"} if self.static else {}))
        from trainers.lm.generation import _strip_after_eos

        rows = out[:, width:].tolist()
        return rows if fixed else [_strip_after_eos(r, self.tokenizer.eos_token_id, pad) for r in rows]

    def sync(self, model: Any) -> float:
        return 0.0

    def close(self) -> None:
        pass


class VLLMEngine:
    """``trainers.lm.generation.start_vllm_engine`` over the model saved to a scratch directory."""

    def __init__(self, model: Any, tokenizer: Any, dtype: str, max_model_len: int) -> None:
        from trainers.lm.generation import GenerationConfig, start_vllm_engine

        self.dir = tempfile.mkdtemp(prefix="bench-vllm-")
        model.save_pretrained(self.dir, safe_serialization=True)
        tokenizer.save_pretrained(self.dir)
        self.tokenizer = tokenizer
        t0 = time.perf_counter()
        self.llm = start_vllm_engine(self.dir, GenerationConfig(vllm_dtype=dtype), max_model_len=max_model_len)
        self.startup_s = time.perf_counter() - t0
        params = sum(p.numel() for p in model.parameters())
        self.weight_bytes = params * (2 if dtype == "bfloat16" else 4)
        self.compute_bf16 = dtype == "bfloat16"
        self.warm_up = True  # the first request at a shape pays the scheduler's and kernels' set-up

    def decode(self, prompts: list[list[int]], new_tokens: int, temperature: float, fixed: bool,
               seed: int = 0) -> list[list[int]]:
        from vllm import SamplingParams

        from trainers.lm.generation import _strip_after_eos

        params = SamplingParams(max_tokens=new_tokens, min_tokens=new_tokens if fixed else 0,
                                ignore_eos=fixed, temperature=temperature, seed=seed)
        outs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        rows = [list(o.outputs[0].token_ids) for o in outs]
        return rows if fixed else [_strip_after_eos(r, self.tokenizer.eos_token_id, None) for r in rows]

    def sync(self, model: Any) -> float:
        from trainers.lm.generation import push_weights

        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            push_weights(self.llm, model, self.dir)
            best = min(best, time.perf_counter() - t0)
        return best

    def close(self) -> None:
        import shutil

        del self.llm
        gc.collect()
        shutil.rmtree(self.dir, ignore_errors=True)


def build_engine(name: str, model: Any, tokenizer: Any, bf16: bool, max_model_len: int) -> Any:
    if name.startswith("transformers"):
        return TransformersEngine(model, tokenizer, static=name.endswith("static"), bf16=bf16)
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ModuleNotFoundError("vllm is not importable here (CPU build: make install-cpu-vllm, "
                                  "then run this with .venv-vllm/bin/python)")
    return VLLMEngine(model, tokenizer, "bfloat16" if name == "vllm-bf16" else "float32", max_model_len)


def workload_prompts(kind: str, rows: int, eval_ids: list[list[int]], train_ids: list[list[int]],
                     generations: int) -> list[list[int]]:
    if kind == "eval":
        return [eval_ids[i % len(eval_ids)] for i in range(rows)]
    distinct = max(1, rows // generations)
    return [train_ids[(i // generations) % distinct] for i in range(rows)]


def time_decode(engine: Any, prompts: list[list[int]], new_tokens: int, temperature: float,
                repeats: int) -> tuple[float, float]:
    """(seconds of the prefill call, seconds per decode step), best of ``repeats``."""
    if engine.warm_up:
        engine.decode(prompts, 2, temperature, fixed=True)  # the engine's first call at this shape
    best_1 = best_t = float("inf")
    for r in range(repeats):
        t0 = time.perf_counter()
        engine.decode(prompts, 1, temperature, fixed=True, seed=r)
        best_1 = min(best_1, time.perf_counter() - t0)
        t0 = time.perf_counter()
        out = engine.decode(prompts, new_tokens, temperature, fixed=True, seed=r)
        best_t = min(best_t, time.perf_counter() - t0)
        if any(len(o) != new_tokens for o in out):
            raise RuntimeError(f"engine decoded {sorted({len(o) for o in out})} tokens, asked for exactly {new_tokens}")
    if best_t <= best_1:
        raise RuntimeError(f"a {new_tokens}-token call ({best_t:.2f} s) was not slower than a 1-token call "
                           f"({best_1:.2f} s): the machine is too noisy to separate decoding; raise --repeats")
    return best_1, (best_t - best_1) / (new_tokens - 1)


def agreement(reference: list[list[int]], other: list[list[int]]) -> tuple[int, float]:
    same, firsts = 0, []
    for a, b in zip(reference, other, strict=True):
        same += a == b
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        firsts.append(first)
    return same, sum(firsts) / max(len(firsts), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--rows", nargs="+", type=int, default=[1, 16, 48])
    parser.add_argument("--workloads", nargs="+", default=["eval", "grpo"], choices=["eval", "grpo"])
    parser.add_argument("--new-tokens", type=int, default=None,
                        help="decode steps per timed call (default: the config's budgets)")
    parser.add_argument("--agreement-prompts", type=int, default=None, help="eval prompts decoded greedily "
                        "by every engine (default: all)")
    parser.add_argument("--agreement-tokens", type=int, default=None, help="greedy budget of the agreement "
                        "check (default: the eval budget)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--agree-with", type=Path, default=None, help="a --json file of an earlier run: "
                        "greedy agreement against its first engine's tokens (engines in separate processes)")
    parser.add_argument("--quick", action="store_true", help="rows 1 and 16, 16 new tokens, 8 agreement "
                        "prompts, 1 repeat")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.new_tokens, args.repeats = [1, 16], args.new_tokens or 16, 1
        args.agreement_prompts = args.agreement_prompts or 8
        args.agreement_tokens = args.agreement_tokens or 16

    import numpy as np
    import torch

    from curriculum.config import load_config
    from curriculum.loop import build_testbed
    from curriculum.walltime import measure_cpu_bandwidth
    from trainers.lm.generation import render_chat, share_prompt_prefill
    from trainers.lm.models import load_model
    from trainers.lm.precision import resolve_bf16

    config = load_config(args.config, args.overrides)
    threads = config.trainer.torch_threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    bf16 = resolve_bf16(config.trainer.bf16, "cpu")
    testbed = build_testbed(config)
    model, tokenizer = load_model(config.model)
    model.eval()
    share_prompt_prefill(model)  # GRPO's path; an identity for rows without repeats
    params = sum(p.numel() for p in model.parameters())

    def ids(task: Any) -> list[int]:
        return tokenizer(render_chat(tokenizer, task.messages), add_special_tokens=False)["input_ids"]

    eval_tasks = testbed.eval_tasks()
    eval_ids = [ids(t) for t in eval_tasks]
    train_ids = [ids(t) for t in testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 48, seed=0)]
    eval_budget = testbed.eval_budget(config.testbed, config.generation.max_new_tokens)[1]
    budgets = {"eval": args.new_tokens or eval_budget, "grpo": args.new_tokens or config.trainer.max_completion_length}
    temps = {"eval": 0.0, "grpo": config.trainer.temperature}
    # The engine's context must hold the greedy agreement's budget too, or vLLM stops early there.
    longest = max([*budgets.values(), args.agreement_tokens or eval_budget])
    max_len = max(len(p) for p in eval_ids + train_ids) + longest + 8

    rates = {False: matmul_rate(threads), True: matmul_rate(threads, bf16=True)}
    bandwidth = measure_cpu_bandwidth()
    print(f"machine: {machine_line()}")
    print(f"torch {torch.__version__}, {threads} thread(s); GEMM fp32 {rates[False] / 1e9:.0f} GFLOP/s, "
          f"bf16 {rates[True] / 1e9:.0f} GFLOP/s; memory {bandwidth / 1e9:.1f} GB/s")
    print(f"config {args.config.name}: {params / 1e6:.1f} M parameters, transformers compute "
          f"{'bf16 autocast' if bf16 else 'fp32'}; eval {len(eval_ids)} prompts x {budgets['eval']} tokens, "
          f"GRPO {config.trainer.num_generations} samples per prompt x {budgets['grpo']} tokens at T={temps['grpo']}")
    n_agree = args.agreement_prompts or len(eval_ids)
    agree_prompts = eval_ids[:n_agree]
    results: dict[str, Any] = {"machine": machine_line(), "params": params, "bandwidth": bandwidth,
                               "gemm": {"fp32": rates[False], "bf16": rates[True]}, "engines": {}}
    reference: list[list[int]] | None = None
    reference_name = args.engines[0]
    if args.agree_with is not None:
        earlier = json.loads(args.agree_with.read_text())["engines"]
        reference_name = next(name for name, row in earlier.items() if "greedy" in row)
        reference = earlier[reference_name]["greedy"][:n_agree]
        agree_prompts = agree_prompts[:len(reference)]
        n_agree = len(agree_prompts)
    print(f"\n{'engine':<22}{'work':<6}{'rows':>5}{'ms/token':>10}{'tokens/s':>10}{'floor ms':>10}{'ratio':>7}"
          f"{'prefill s':>11}")
    for name in args.engines:
        try:
            engine = build_engine(name, model, tokenizer, bf16, max_len)
        except Exception as exc:  # noqa: BLE001 - an engine that cannot start is reported, not fatal
            print(f"{name:<22}skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            results["engines"][name] = {"skipped": f"{type(exc).__name__}: {exc}"}
            continue
        row: dict[str, Any] = {"startup_s": engine.startup_s, "decode": []}
        for kind in args.workloads:
            for rows in args.rows:
                prompts = workload_prompts(kind, rows, eval_ids, train_ids, config.trainer.num_generations)
                prefill, step = time_decode(engine, prompts, budgets[kind], temps[kind], args.repeats)
                floor = max(engine.weight_bytes / bandwidth, 2 * params * rows / rates[engine.compute_bf16])
                print(f"{name:<22}{kind:<6}{rows:>5}{step * 1e3:10.1f}{rows / step:10.1f}{floor * 1e3:10.1f}"
                      f"{step / floor:7.1f}{prefill:11.2f}")
                row["decode"].append({"workload": kind, "rows": rows, "ms_per_token": step * 1e3,
                                      "tokens_per_s": rows / step, "floor_ms": floor * 1e3, "prefill_s": prefill})
        greedy = engine.decode(agree_prompts, args.agreement_tokens or eval_budget, 0.0, fixed=False)
        if reference is None:
            reference = greedy
        same, first = agreement(reference, greedy)
        row.update(sync_s=engine.sync(model), agree_same=same, agree_prompts=n_agree, agree_first_diff=first,
                   agree_with=reference_name, greedy=greedy)
        print(f"{name:<22}start-up {engine.startup_s:.1f} s; weight sync {row['sync_s']:.2f} s; greedy tokens "
              f"equal to {reference_name} on {same}/{n_agree} prompts (first difference at token {first:.1f} "
              f"on average)")
        results["engines"][name] = row
        engine.close()
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
