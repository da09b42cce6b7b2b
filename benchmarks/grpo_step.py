"""Where a GRPO step's time goes, against the machine's FLOP floor.

For a run config (default ``configs/mapf_cpu_demo.yaml``) this times, with the real model:

1. the machine's matmul rate (a 2048x2048 GEMM, best of 5) in the precision the run computes in
   (fp32, or bf16 when ``trainer.bf16`` resolves to on: ``trainers/lm/precision.py``) — the
   *floor* rate R;
2. ``--warmstart-steps`` supervised warm-start steps (TRL ``SFTTrainer``, the config's batch);
3. ``--steps`` GRPO steps (TRL ``GRPOTrainer`` through our adapter), each split into
   generation (``model.generate`` inside TRL), forward (the loss' forward pass), backward,
   optimizer (``AdamW.step``) and other (reward scoring, tokenisation, logging, padding).

FLOPs use the 6·N·T rule for a training forward+backward over T processed tokens (padding
included, because it is computed) with N the parameter count, except for the LM head (the tied
49k x 576 embedding, a fifth of the 135M model), which both trainers run only on the completion
positions (``trainers/grpo/warmstart.completion_nll``, ``trainers/grpo/trainer.completion_positions_only``):
6·(N − N_head)·T + 6·N_head·T_head. With ``model.trainable_layers`` the backward pass covers the
trainable layers only, input and weight gradients (4·N_train·T), plus the input gradient of the
frozen head (2·N_head·T_head); the forward stays 2·(N − N_head)·T + 2·N_head·T_head. Decoding is
2·N per generated token for
decoding (with the prompt's prefill at 2·N per prompt token; GRPO's repeated prompts are prefilled
once per distinct prompt, ``trainers/lm/generation.share_prompt_prefill``). The floor of a phase is its
FLOPs / R;
``ratio`` = measured / floor (1.0 = as fast as the GEMM benchmark). Generation's floor is a
roofline: the prefill's FLOPs at R, and each decode step the longer of reading the weights once
(weight bytes / B, with B the machine's read bandwidth: a 256 MiB sum, best of 10) and its rows'
2·N FLOPs at R.

``--grpo-engines transformers,vllm`` times the GRPO step once per rollout engine: ``transformers``
(``trainer.use_vllm: false``, generation by ``model.generate``) and ``vllm`` (``trainer.use_vllm:
true``, TRL's colocated engine; run it in the vLLM environment, ``.venv-vllm``). The vLLM rows
split the step into generation (``vllm.LLM.generate``: prefill counted once per distinct prompt, the
engine's prefix cache shares the repeats), weight sync (the trainer's weights into the engine
before the step's rollouts, ``sync_weights``), logp recomp (TRL's no-grad forward over the sampled
batch: the trainer's log-probs for the importance-sampling correction, floor 2·N per token with
the head on the completion positions; only with ``--trl-ratio``: by default the ratio takes the
loss' own forward, ``trainers/grpo/importance.py``), forward, backward, optimizer and other. The
generation floor uses the GEMM rate in the engine's dtype (bf16 when it runs bf16); the sync has
no FLOP floor. The engine's start-up (one per round) falls outside the step and is printed apart.
``--quick``: a smoke test on a tiny random-init Llama (``tests/conftest.save_tiny_llama``), 2
prompts x 2 samples, 8 new tokens, 1 step, no warm start.

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

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "mapf_cpu_demo.yaml"


def read_bandwidth(threads: int, mib: int = 256, repeats: int = 10) -> float:
    """Best-of-``repeats`` read bandwidth in bytes/s: the sum of a ``mib`` MiB float32 tensor."""
    import torch

    torch.set_num_threads(threads)
    x = torch.ones(mib * 2 ** 20 // 4)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best


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
        self.startup_seconds = 0.0

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

    from trainers.grpo import warmstart
    from trainers.lm import generation

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
        # The rows the loss computes on: zero-advantage rows are left out (trainers/grpo/trainer.py).
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


def instrument_vllm(timers: Timers) -> None:
    """Time TRL's colocated vLLM engine: its ``generate`` calls and its weight syncs."""
    from trl import GRPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration
    from vllm import LLM

    import trainers.grpo.trainer as grpo

    def count_generation(llm: Any, prompts: Any, *args: Any, **kwargs: Any) -> None:
        ids = [tuple(p["prompt_token_ids"]) if isinstance(p, dict) else tuple(p) for p in prompts]
        timers.count["prompt_tokens"] += sum(len(p) for p in set(ids))  # prefix cache: distinct prompts once
        timers.count["generate_calls"] += 1
        timers.count["generate_rows"] += len(ids)

    timers.wrap(LLM, "generate", "generation", count_generation)
    # TRL's no-grad forward over the sampled batch (the trainer's log-probs for the
    # importance-sampling correction); the loss' own forward calls the same method, inside "forward".
    original_logps = GRPOTrainer._get_per_token_logps_and_entropies

    def recompute(self: Any, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                  *args: Any, **kwargs: Any) -> Any:
        if timers.active["forward"]:
            return original_logps(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        timers.count["recompute_tokens"] += input_ids.numel()
        timers.count["recompute_head_tokens"] += input_ids.shape[0] * logits_to_keep
        t0 = time.perf_counter()
        try:
            return original_logps(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        finally:
            timers.seconds["recompute"] += time.perf_counter() - t0

    GRPOTrainer._get_per_token_logps_and_entropies = recompute
    timers.wrap(VLLMGeneration, "sync_weights", "sync", lambda *a, **k: timers.count.__setitem__(
        "syncs", timers.count["syncs"] + 1))
    original = grpo.sync_colocated_through_reload

    def reload_then_time(vllm_generation: Any) -> None:
        # The CPU build's sync is set on the instance (trainers.lm.generation.sync_colocated_through_reload).
        original(vllm_generation)
        if not getattr(vllm_generation, "sync_timed", False):
            timers.wrap(vllm_generation, "sync_weights", "sync",
                        lambda *a, **k: timers.count.__setitem__("syncs", timers.count["syncs"] + 1))
            vllm_generation.sync_timed = True

    grpo.sync_colocated_through_reload = reload_then_time
    original_init = VLLMGeneration.__init__

    def timed_init(self: Any, *args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        original_init(self, *args, **kwargs)
        timers.count["startups"] += 1
        timers.startup_seconds += time.perf_counter() - t0

    VLLMGeneration.__init__ = timed_init


def trained_sizes(model: Any) -> tuple[int, int, int, bool]:
    """(all parameters, LM head, trainable parameters outside the head, whether the head trains)."""
    head = model.get_output_embeddings().weight
    params = sum(p.numel() for p in model.parameters())
    body = sum(p.numel() for p in model.parameters() if p.requires_grad and p is not head)
    return params, head.numel(), body, head.requires_grad


def generation_floor(c: dict[str, int], params: int, rate: float, bandwidth: float | None,
                     weight_bytes: int) -> float:
    """Seconds of generation's roofline floor (module docstring): prefill FLOPs at ``rate``, and each
    decode step the longer of the weights over ``bandwidth`` and its rows' FLOPs at ``rate``."""
    prefill = 2 * params * c["prompt_tokens"] / rate
    if not c["generated_slots"] or not bandwidth:
        return prefill + 2 * params * c["generated_slots"] / rate
    # (rows, C) completions per generation call: C decode steps of `rows` rows each.
    steps = c["generated_slots"] * c["generate_calls"] / max(c["generate_rows"], 1)
    rows = c["generated_slots"] / steps
    return prefill + steps * max(weight_bytes / bandwidth, 2 * params * rows / rate)


def report(title: str, timers: Timers, steps: int, sizes: tuple[int, int, int, bool], rate: float,
           gen_rate: float | None = None, bandwidth: float | None = None, gen_weight_bytes: int = 0) -> None:
    """Per-step seconds of each phase against its floor (FLOPs / ``rate``; generation's roofline at
    ``gen_rate`` when given, the engine's dtype, and ``bandwidth`` over ``gen_weight_bytes``)."""
    s, c = timers.seconds, timers.count
    params, head, body, head_trains = sizes
    total = s["step"] + s["optimizer"]  # training_step holds generation, sync, forward and backward
    other = (total - s["generation"] - s["sync"] - s["recompute"] - s["forward"] - s["backward"]
             - s["optimizer"])
    forward_flops = 2 * (params - head) * c["train_tokens"] + 2 * head * c["head_tokens"]
    # Input and weight gradients of the trainable layers; the head's input gradient always, its
    # weight gradient when it trains (frozen layers below the lowest trainable one: nothing).
    backward_flops = 4 * body * c["train_tokens"] + (4 if head_trains else 2) * head * c["head_tokens"]
    train_flops = forward_flops + backward_flops
    gen_flops = 2 * params * (c["prompt_tokens"] + c["generated_slots"])
    print(f"\n== {title}: {steps} step(s), per step ==")
    print(f"{'phase':<12}{'seconds':>9}{'share':>8}{'GFLOP':>10}{'floor s':>9}{'ratio':>8}")
    recompute_flops = 2 * (params - head) * c["recompute_tokens"] + 2 * head * c["recompute_head_tokens"]
    gen_floor_s = generation_floor(c, params, gen_rate or rate, bandwidth, gen_weight_bytes)
    rows = [("generation", s["generation"], gen_flops, gen_floor_s),
            *([("weight sync", s["sync"], None, None)] if c["syncs"] else []),
            *([("logp recomp", s["recompute"], recompute_flops, recompute_flops / rate)]
              if c["recompute_tokens"] else []),
            ("fwd+bwd", s["forward"] + s["backward"], train_flops, train_flops / rate),
            ("  forward", s["forward"], forward_flops, forward_flops / rate),
            ("  backward", s["backward"], backward_flops, backward_flops / rate),
            ("optimizer", s["optimizer"], None, None),
            ("other", other, None, None),
            ("total", total, train_flops + gen_flops + recompute_flops,
             (train_flops + recompute_flops) / rate + gen_floor_s)]
    for name, seconds, flops, floor_s in rows:
        per = seconds / steps
        if flops:
            floor = floor_s / steps
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
    if c["syncs"]:
        print(f"weight syncs per step: {c['syncs'] / steps:.1f}, {s['sync'] / c['syncs']:.2f} s each")
    if c["startups"]:
        print(f"vLLM engine start-ups (outside the step, one per round): {c['startups']}, "
              f"{timers.startup_seconds / c['startups']:.1f} s each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps to time (after 1 warm-up; 0: skip)")
    parser.add_argument("--warmstart-steps", type=int, default=3, help="SFT steps to time (0: skip)")
    parser.add_argument("--warm-started", action="store_true",
                        help="time GRPO on the config's warm-started model (from the warm-start cache, "
                             "computed if absent) instead of the base model, whose completions all score 0")
    parser.add_argument("--grpo-engines", default="transformers",
                        help="comma list of rollout engines to time the GRPO step with: transformers, vllm")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: a tiny random-init model, 2x2 rollouts of 8 tokens, 1 step, no warm start")
    parser.add_argument("--trl-ratio", action="store_true",
                        help="vLLM rows: the importance-sampling ratio from TRL's no-grad recomputation of the "
                             "trainer's log-probs (its own way) instead of the loss' forward (the comparison)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    engines = [e.strip() for e in args.grpo_engines.split(",") if e.strip()]
    unknown = sorted(set(engines) - {"transformers", "vllm"})
    if unknown or not engines:
        parser.error(f"--grpo-engines takes transformers and/or vllm, got {args.grpo_engines!r}")
    if "vllm" in engines:
        from trainers.lm.generation import vllm_available, vllm_build

        if vllm_build() is None and not vllm_available():
            parser.error("--grpo-engines vllm needs vLLM (the CPU build: make install-cpu-vllm, then .venv-vllm)")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    if args.quick:
        import tempfile

        from tests.conftest import save_tiny_llama

        tiny = save_tiny_llama(Path(tempfile.mkdtemp(prefix="grpo-step-tiny-")), hidden_size=128,
                               intermediate_size=256, num_attention_heads=2, num_key_value_heads=1)
        args.steps, args.warmstart_steps = min(args.steps, 1), 0
        args.overrides = [f"model.name_or_path={tiny}", "trainer.prompts_per_step=2", "trainer.num_generations=2",
                          "trainer.max_completion_length=8", "trainer.warmstart.steps=0",
                          "model.trainable_layers=1", "generation.vllm_cpu_kv_cache_gib=1", *args.overrides]

    import torch

    from curriculum.config import load_config
    from curriculum.loop import build_testbed, build_trainer
    from trainers.grpo.warmstart import warm_start

    config = load_config(args.config, args.overrides)
    threads = config.trainer.torch_threads or os.cpu_count() or 1
    testbed = build_testbed(config)
    trainer = build_trainer(config, testbed)
    bf16 = trainer.bf16
    rate = matmul_rate(threads, bf16=bf16)
    # A vLLM engine may run in the other precision: its rate too, measured before any engine starts.
    # Only then: where bf16 is not native (AVX2) its reference GEMM takes minutes on one thread.
    other_rate = matmul_rate(threads, bf16=not bf16) if "vllm" in engines and args.steps else None
    bandwidth = read_bandwidth(threads) if args.steps else None
    print(f"config {args.config.name}; torch {torch.__version__}, {threads} thread(s); "
          f"{'bf16' if bf16 else 'fp32'} GEMM floor rate {rate / 1e9:.0f} GFLOP/s"
          + (f"; read bandwidth {bandwidth / 1e9:.1f} GB/s" if bandwidth else ""))
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
    if "vllm" in engines:
        instrument_vllm(timers)
        if args.trl_ratio:
            from trainers.grpo.trainer import grpo_trainer_class

            grpo_trainer_class().ratio_from_loss_forward = False
    for engine in engines:
        update = {"use_vllm": engine == "vllm", "vllm_mode": "colocate"}
        trainer.config = cfg.model_copy(update={**update, "max_steps_per_round": 1})
        trainer.train_round(tasks[:cfg.prompts_per_step], round_index=1, seed=0)  # warm-up
        timers.seconds.clear(), timers.count.clear()
        timers.startup_seconds = 0.0
        trainer.config = cfg.model_copy(update={**update, "max_steps_per_round": args.steps})
        trainer.train_round(tasks[cfg.prompts_per_step:], round_index=1, seed=1)
        gen_rate, gen_weight_bytes = None, sizes[0] * next(trainer.model.parameters()).element_size()
        if engine == "vllm":
            import torch

            llm = trainer._trl.vllm_generation.llm
            engine_bf16 = getattr(getattr(llm, "model_config", None), "dtype", None) == torch.bfloat16
            gen_rate = rate if engine_bf16 == bf16 else other_rate  # both measured before any engine started
            gen_weight_bytes = sizes[0] * (2 if engine_bf16 else 4)
            print(f"vLLM engine dtype {llm.model_config.dtype}; its GEMM floor rate {gen_rate / 1e9:.0f} GFLOP/s")
            trainer._trl = None  # the engine goes with TRL's trainer
        report(f"GRPO step, {engine} rollouts ({cfg.prompts_per_step} prompts x {cfg.num_generations} samples, "
               f"<= {cfg.max_completion_length} new tokens)", timers, args.steps, sizes, rate, gen_rate,
               bandwidth, gen_weight_bytes)
    trainer.close()


if __name__ == "__main__":
    main()
