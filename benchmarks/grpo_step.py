"""Where a GRPO step's time goes, against the machine's FLOP floor.

For a run config (default ``configs/mapf_cpu_demo.yaml``) this times, with the real model:

1. the machine's matmul rate (a 2048x2048 GEMM, best of 5) in the precision the run computes in
   (fp32, or bf16 when ``trainer.bf16`` resolves to on: ``trainers/precision.py``) — the
   *floor* rate R;
2. ``--warmstart-steps`` supervised warm-start steps (TRL ``SFTTrainer``, the config's batch);
3. ``--steps`` GRPO steps (TRL ``GRPOTrainer`` through our adapter), each split into
   generation (``model.generate`` inside TRL), forward (the loss' forward pass), backward,
   optimizer (``AdamW.step``) and other (reward scoring, tokenisation, logging, padding).

FLOPs use the 6·N·T rule for a training forward+backward over T processed tokens (padding
included, because it is computed) with N the parameter count, except for the LM head (the tied
49k x 576 embedding, a fifth of the 135M model), which both trainers run only on the completion
positions (``trainers/warmstart.completion_nll``, ``trainers/grpo.completion_positions_only``):
6·(N − N_head)·T + 6·N_head·T_head. With ``model.trainable_layers`` the backward pass covers the
trainable layers only, input and weight gradients (4·N_train·T), plus the input gradient of the
frozen head (2·N_head·T_head); the forward stays 2·(N − N_head)·T + 2·N_head·T_head. Decoding is
2·N per generated token for
decoding (with the prompt's prefill at 2·N per prompt token; GRPO's repeated prompts are prefilled
once per distinct prompt, ``trainers/generation.share_prompt_prefill``). The floor of a phase is its FLOPs / R;
``ratio`` = measured / floor (1.0 = as fast as the GEMM benchmark). Decoding is bound by memory
bandwidth and per-token overhead at small batch, not FLOPs, so its ratio is far above 1 by nature.

Run: ``python benchmarks/grpo_step.py [--config F] [--steps 3] [--warmstart-steps 3] [--set k=v]``;
``--warm-started`` times GRPO on the cached warm-started model (whose groups have reward spread,
so ``trainer.skip_zero_advantage`` leaves fewer rows out than on the base model, where every
completion scores 0).
Numbers are printed, not asserted; take them on a quiet machine (``uptime``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "mapf_cpu_demo.yaml"


def matmul_rate(threads: int, n: int = 2048, repeats: int = 5, bf16: bool = False) -> float:
    """Best-of-``repeats`` GEMM rate in FLOP/s with ``threads`` torch threads (fp32, or bf16)."""
    import torch

    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if bf16 else torch.float32
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


class Timers:
    """Accumulated seconds and counters per phase, filled by the patches below."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)
        self.active: dict[str, int] = defaultdict(int)

    def wrap(self, owner: Any, name: str, phase: str, on_call: Any = None) -> None:
        original = getattr(owner, name)
        timers = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if timers.active[phase]:  # nested in a call already timed as this phase
                return original(*args, **kwargs)
            if on_call is not None:
                on_call(*args, **kwargs)
            timers.active[phase] += 1
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timers.seconds[phase] += time.perf_counter() - t0
                timers.active[phase] -= 1

        setattr(owner, name, timed)


def instrument(timers: Timers) -> None:
    """Patch TRL / accelerate / torch entry points to time each phase of a step."""
    import torch
    from accelerate import Accelerator
    from transformers import GenerationMixin
    from trl import GRPOTrainer, SFTTrainer

    from trainers import generation, warmstart

    def count_generation(model: Any, *args: Any, **kwargs: Any) -> None:
        ids = kwargs.get("input_ids")
        if ids is not None:
            if kwargs.get("shared_prefill") and kwargs.get("attention_mask") is not None:
                # The distinct prompts but their last token, then every row's last prompt token
                # (generate's first step).
                distinct = generation.distinct_prompts(ids, kwargs["attention_mask"])[0].shape[0]
                timers.count["prompt_tokens"] += distinct * (ids.shape[1] - 1) + ids.shape[0]
            else:
                timers.count["prompt_tokens"] += ids.numel()
            timers.count["generate_calls"] += 1
            timers.count["generate_rows"] += ids.shape[0]
            timers.count["max_new_tokens"] = kwargs.get("generation_config").max_new_tokens \
                if kwargs.get("generation_config") is not None else 0

    def count_generated(trainer: Any, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        # GRPO micro-batch as generated: (B, P) prompt + (B, C) completion, padded
        timers.count["generated_tokens"] += int(inputs["completion_mask"].sum())
        timers.count["generated_slots"] += inputs["completion_ids"].numel()
        timers.count["loss_rows"] += inputs["completion_ids"].shape[0]

    def count_loss(trainer: Any, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        # The rows the loss computes on: zero-advantage rows are left out (trainers/grpo.py).
        processed = inputs["prompt_ids"].numel() + inputs["completion_ids"].numel()
        real = int(inputs["prompt_mask"].sum() + inputs["completion_mask"].sum())
        timers.count["head_tokens"] += int(inputs["completion_mask"].sum())  # labelled rows only
        timers.count["train_tokens"] += processed
        timers.count["train_real_tokens"] += real
        timers.count["trained_rows"] += inputs["completion_ids"].shape[0]

    def count_sft_loss(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        # SFT: (B, T) padded input_ids; the head runs from the pass's first labelled position on.
        labels = inputs["labels"]
        first = warmstart.first_labelled_position(labels)
        processed = inputs["input_ids"].numel()
        real = int(inputs["attention_mask"].sum()) if "attention_mask" in inputs else processed
        timers.count["train_tokens"] += processed
        timers.count["train_real_tokens"] += real
        timers.count["head_tokens"] += labels.shape[0] * (labels.shape[1] - first)

    timers.wrap(GenerationMixin, "generate", "generation", count_generation)
    # GRPO's repeated prompts are prefilled once each, outside GenerationMixin.generate (timed as
    # generation too; the inner generate call then counts as part of it).
    timers.wrap(generation, "generate_sharing_prompts", "generation",
                lambda model, generate, **kwargs: count_generation(model, shared_prefill=True, **kwargs))
    timers.wrap(GRPOTrainer, "compute_loss", "forward", count_generated)
    timers.wrap(GRPOTrainer, "_compute_loss", "loss_rows", count_loss)  # inside compute_loss: counts only
    # The warm start's loss is our completion-only head (a subclass overrides SFTTrainer's).
    timers.wrap(warmstart, "completion_nll", "forward", count_sft_loss)
    timers.wrap(Accelerator, "backward", "backward")
    timers.wrap(torch.optim.AdamW, "step", "optimizer")
    timers.wrap(GRPOTrainer, "training_step", "step")
    timers.wrap(SFTTrainer, "training_step", "step")


def trained_sizes(model: Any) -> tuple[int, int, int, bool]:
    """(all parameters, LM head, trainable parameters outside the head, whether the head trains)."""
    head = model.get_output_embeddings().weight
    params = sum(p.numel() for p in model.parameters())
    body = sum(p.numel() for p in model.parameters() if p.requires_grad and p is not head)
    return params, head.numel(), body, head.requires_grad


def report(title: str, timers: Timers, steps: int, sizes: tuple[int, int, int, bool], rate: float) -> None:
    s, c = timers.seconds, timers.count
    params, head, body, head_trains = sizes
    total = s["step"] + s["optimizer"]  # training_step holds generation, forward and backward
    other = total - s["generation"] - s["forward"] - s["backward"] - s["optimizer"]
    forward_flops = 2 * (params - head) * c["train_tokens"] + 2 * head * c["head_tokens"]
    # Input and weight gradients of the trainable layers; the head's input gradient always, its
    # weight gradient when it trains (frozen layers below the lowest trainable one: nothing).
    backward_flops = 4 * body * c["train_tokens"] + (4 if head_trains else 2) * head * c["head_tokens"]
    train_flops = forward_flops + backward_flops
    gen_flops = 2 * params * (c["prompt_tokens"] + c["generated_slots"])
    print(f"\n== {title}: {steps} step(s), per step ==")
    print(f"{'phase':<12}{'seconds':>9}{'share':>8}{'GFLOP':>10}{'floor s':>9}{'ratio':>8}")
    rows = [("generation", s["generation"], gen_flops),
            ("fwd+bwd", s["forward"] + s["backward"], train_flops),
            ("  forward", s["forward"], forward_flops),
            ("  backward", s["backward"], backward_flops),
            ("optimizer", s["optimizer"], None),
            ("other", other, None),
            ("total", total, train_flops + gen_flops)]
    for name, seconds, flops in rows:
        per = seconds / steps
        if flops:
            floor = flops / rate / steps
            print(f"{name:<12}{per:9.2f}{per / total * steps:8.0%}{flops / steps / 1e9:10.0f}"
                  f"{floor:9.2f}{per / floor:8.2f}")
        else:
            print(f"{name:<12}{per:9.2f}{per / total * steps:8.0%}{'':>10}{'':>9}{'':>8}")
    print(f"train tokens per step: {c['train_tokens'] // steps} processed, "
          f"{c['train_real_tokens'] // steps} real (padding {1 - c['train_real_tokens'] / max(c['train_tokens'], 1):.0%})")
    if c["loss_rows"]:
        print(f"loss rows per step: {c['trained_rows'] // steps} of {c['loss_rows'] // steps} through forward and "
              "backward (the rest had advantage 0: trainer.skip_zero_advantage)")
    if c["generate_calls"]:
        print(f"generation per step: {c['generate_rows'] // steps} completions, "
              f"{c['generated_tokens'] // steps} tokens kept of {c['generated_slots'] // steps} decoded slots, "
              f"{c['generated_slots'] / max(s['generation'], 1e-9):.0f} slots/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps to time (after 1 warm-up; 0: skip)")
    parser.add_argument("--warmstart-steps", type=int, default=3, help="SFT steps to time (0: skip)")
    parser.add_argument("--warm-started", action="store_true",
                        help="time GRPO on the config's warm-started model (from the warm-start cache, "
                             "computed if absent) instead of the base model, whose completions all score 0")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    import torch

    from curriculum.config import load_config
    from curriculum.loop import build_testbed, build_trainer
    from trainers.warmstart import warm_start

    config = load_config(args.config, args.overrides)
    threads = config.trainer.torch_threads or os.cpu_count() or 1
    testbed = build_testbed(config)
    trainer = build_trainer(config, testbed)
    bf16 = trainer.bf16
    rate = matmul_rate(threads, bf16=bf16)
    print(f"config {args.config.name}; torch {torch.__version__}, {threads} thread(s); "
          f"{'bf16' if bf16 else 'fp32'} GEMM floor rate {rate / 1e9:.0f} GFLOP/s")
    trainer.setup(None)
    sizes = trained_sizes(trainer.model)
    print(f"model {config.model.name_or_path}: {sizes[0] / 1e6:.1f} M parameters "
          f"({sizes[2] / 1e6:.1f} M trained outside the LM head{', head trained' if sizes[3] else ''}), "
          f"dtype {next(trainer.model.parameters()).dtype}")
    timers = Timers()
    instrument(timers)

    if args.warmstart_steps:
        ws = config.trainer.warmstart
        tasks = testbed.warmstart_tasks(ws.batch_size * (args.warmstart_steps + 1), ws.seed)
        # The config's batching (passes, length grouping), schedule and cut, as the run uses them.
        warm_start(trainer.model, trainer.tokenizer, testbed, tasks, ws.model_copy(update={"steps": 1}),
                   bf16=bf16)  # warm-up
        timers.seconds.clear(), timers.count.clear()
        warm_start(trainer.model, trainer.tokenizer, testbed, tasks,
                   ws.model_copy(update={"steps": args.warmstart_steps}), bf16=bf16)
        passes = ws.micro_batch_size or ws.batch_size
        report(f"warm-start SFT step (batch {ws.batch_size} in passes of {passes})",
               timers, args.warmstart_steps, sizes, rate)

    cfg = config.trainer
    if not args.steps:
        trainer.close()
        return
    if args.warm_started:
        print("warm start:", trainer.prepare())
    tasks = testbed.sample(testbed.initial_proposal(__import__("numpy").random.default_rng(0)),
                           cfg.prompts_per_step * (args.steps + 1), seed=0)
    trainer.config = cfg.model_copy(update={"max_steps_per_round": 1})
    trainer.train_round(tasks[:cfg.prompts_per_step], round_index=1, seed=0)  # warm-up
    timers.seconds.clear(), timers.count.clear()
    trainer.config = cfg.model_copy(update={"max_steps_per_round": args.steps})
    trainer.train_round(tasks[cfg.prompts_per_step:], round_index=1, seed=1)
    report(f"GRPO step ({cfg.prompts_per_step} prompts x {cfg.num_generations} samples, "
           f"<= {cfg.max_completion_length} new tokens)", timers, args.steps, sizes, rate)
    trainer.close()


if __name__ == "__main__":
    main()
