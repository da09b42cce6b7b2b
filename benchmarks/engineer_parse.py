"""Does the checkpoint engineer answer? Parse rate of its design call, with and without constraints.

For ``--n`` different histories (seed ``--seed + i``: one to three earlier rounds, each a random
legal MAPF proposal of the testbed with random per-size valid rates as its failure breakdown)
this runs ``CheckpointEngineer.design`` (context V6, the paper's) on the embedded SmolLM2-135M
model (``TransformersPolicy``) once under the answer schema (``structured_output: true``, the
default: llguidance) and once as free text (``structured_output: false``, the paper's decoding),
and prints per mode:

* ``parsed``: answers holding a proposal (``diagnostics.parsed``), of ``n``;
* ``usable``: answers that ``project`` used (not replaced by the previous config);
* ``tokens``: mean generated tokens per call; ``s/call``: mean wall seconds of the call;
* ``s/token``: seconds per generated token (whole call / tokens, prompt prefill included);
* ``mask ms/token``: the constraint's own time per token (llguidance mask + applying it), i.e.
  the overhead per token the constraint adds to decoding;
* ``copied``: answers equal to the prompt's example (``diagnostics.copied_example``), of all
  answers; ``unchanged``: calls whose config for the next round is the current one;
  ``distinct``: different answers (parsed proposals) among the ``n`` calls (a model that answers
  the same whatever the history has 1).

``--temperature`` > 0 samples (seed per history), 0 decodes greedily. ``--modes`` picks
``constrained``, ``free`` or both. ``--json`` writes every call's record to a file.
Numbers are printed, not asserted; take them on a quiet machine (``uptime``).

``--engine vllm`` measures the constrained path of the engineer on the vLLM backend
(``generation.backend: vllm``) in bulk: the ``--n`` design prompts and answer schemas, each
built by the engineer from its history exactly as ``design`` builds them (``messages``,
``answer_schema``, ``constrained_budget``, the seed drawn from the history's rng), are answered in
ONE batched engine call through ``engineer.vllm_structured_generate_many`` (vLLM structured outputs
with the engine's backend, which the header names; on vLLM's CPU build the answers are sampled
from the engine's seeded stream instead of one seed per history, which that build cannot batch), then each answer goes through the engineer's
own ``parse_answer`` and ``judge`` (``project``). One attempt per history: the rate is per call.
The summary adds the one-sided 95 % Clopper-Pearson lower bound of the parse and usable rates
(``k/n >= bound``). Use ``--temperature`` > 0 so that the answers differ. ``--model`` points
at another checkpoint directory (default: the embedded SmolLM2-135M). Run it in the vLLM
environment with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``.

Run: ``python benchmarks/engineer_parse.py [--n 20] [--temperature 0.7] [--modes constrained,free]``;
``.venv-vllm/bin/python benchmarks/engineer_parse.py --engine vllm --n 300 --temperature 0.7``;
``python benchmarks/engineer_parse.py --engine transformers-batched --n 100 --batch-size 25 --temperature 0.7``
(the same bulk measurement on transformers, for machines where vLLM does not run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from curriculum.core.records import RoundReport
from curriculum.core.types import EvalReport, Task
from engineers.base import DesignContext
from engineers.checkpoint.config import CheckpointEngineerConfig
from engineers.checkpoint.engineer import CheckpointEngineer
from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig
from testbeds.mapf_frozenlake.suites import FailureBreakdown
from testbeds.mapf_frozenlake.testbed import MAPFTestbed

CHECKS = ("parsable", "legal_move", "conflict_free", "goal_reached", "start_correct", "agent_count")


def breakdown(rng: np.random.Generator, n: int = 10) -> dict:
    """A failure breakdown with valid rates falling with size (random around a random frontier)."""
    frontier = rng.uniform(3, 9)
    sizes, failures_total = {}, {c: 0 for c in CHECKS}
    for size in SIZES:
        side = int(size.split("x")[0])
        rate = float(np.clip(1.0 / (1.0 + np.exp(side - frontier)) + rng.normal(0, 0.1), 0, 1))
        rate = round(rate * n) / n
        bad = n - round(rate * n)
        failures = {c: 0 for c in CHECKS}
        failures[str(rng.choice(["conflict_free", "goal_reached", "legal_move"]))] = bad
        for c in CHECKS:
            failures_total[c] += failures[c]
        sizes[size] = {"n": n, "valid_rate": rate, "optimal_rate": rate / 2, "failures": failures,
                       "mean_tokens": 90.0}
    total = float(np.mean([s["valid_rate"] for s in sizes.values()]))
    suite = {"agents": 3, "n": n * len(SIZES), "valid_rate": total, "optimal_rate": total / 2,
             "failures": failures_total, "mean_tokens": 90.0, "sizes": sizes}
    return FailureBreakdown.model_validate({"suites": {"3agents": suite}}).model_dump()


def history_context(testbed: MAPFTestbed, policy, seed: int, total_rounds: int = 4) -> DesignContext:
    rng = np.random.default_rng(seed)
    rounds = int(rng.integers(1, 4))
    history = []
    for index in range(rounds):
        proposal = testbed.random_proposal(rng).model_dump(mode="json")
        history.append(RoundReport(round=index, proposal=proposal, train_metrics={},
                                   eval=EvalReport(score=float(rng.uniform(0, 0.5)), metrics={},
                                                   breakdown=breakdown(rng))))
    return DesignContext(round=rounds - 1, total_rounds=total_rounds, history=history,
                         proposal=GeneratorConfig.model_validate(history[-1].proposal), testbed=testbed,
                         rng=np.random.default_rng(seed), policy=policy, base_policy=None,
                         run_info={"epochs_per_round": 1.0})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20, help="histories (design calls per mode)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first history")
    parser.add_argument("--temperature", type=float, default=0.7, help="engineer sampling temperature")
    parser.add_argument("--modes", default="constrained,free", help="comma list: constrained, free")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="free-text completion budget")
    parser.add_argument("--json", type=Path, default=None, help="write every call's record here")
    parser.add_argument("--engine", choices=["transformers", "transformers-batched", "vllm"], default="transformers",
                        help="transformers: one design call at a time, both modes; transformers-batched: the "
                             "constrained calls in batched generate calls; vllm: every constrained call in one batch")
    parser.add_argument("--batch-size", type=int, default=16, help="rows per generate (transformers-batched)")
    parser.add_argument("--model", type=Path, default=None,
                        help="checkpoint directory (default: the embedded SmolLM2-135M)")
    parser.add_argument("--vllm-dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                        help="vLLM engine dtype (generation.vllm_dtype)")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in ("constrained", "free")]
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; use constrained and/or free")
    if args.n < 1:
        parser.error("--n must be at least 1")
    if args.engine != "transformers":
        if modes != ["constrained"] and args.modes != parser.get_default("modes"):
            parser.error(f"--engine {args.engine} measures the constrained path only (--modes constrained)")
        (main_vllm if args.engine == "vllm" else main_batched_transformers)(args)
        return

    from trainers.lm.generation import GenerationConfig, TransformersPolicy
    from trainers.lm.models import ModelConfig, load_model

    model, tokenizer = load_model(ModelConfig())
    policy = TransformersPolicy(model, tokenizer, GenerationConfig(engineer_max_new_tokens=args.max_new_tokens))
    testbed = MAPFTestbed()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.1f}; n={args.n}, temperature={args.temperature}", flush=True)
    records: list[dict] = []
    try:
        run_calls(args, modes, policy, tokenizer, testbed, records)
    except KeyboardInterrupt:  # Ctrl-C: report the calls made so far
        print(f"interrupted after {len(records)} calls", flush=True)
    summarise(modes, records)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


def clopper_pearson_lower(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower bound of a binomial rate: the p with P(X >= k | n, p) =
    1 - confidence (0 when k = 0)."""
    from scipy.stats import beta

    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    return 0.0 if k == 0 else float(beta.ppf(1.0 - confidence, k, n - k + 1))


def design_calls(policy, testbed: MAPFTestbed, n: int, seed: int, temperature: float) -> list[tuple]:
    """``n`` constrained design calls as ``CheckpointEngineer.design`` builds them: per history
    (seed ``seed + i``) its engineer, prompt, answer schema and sampling seed."""
    config = CheckpointEngineerConfig(structured_output=True, temperature=temperature)
    calls = []
    for i in range(n):
        ctx = history_context(testbed, policy, seed + i)
        engineer = CheckpointEngineer(config)
        messages = engineer.messages(ctx, config.context_spec())
        calls.append((ctx, engineer, Task(id=f"engineer-{seed + i}", messages=messages), engineer.answer_schema(ctx),
                      int(ctx.rng.integers(0, 2**31 - 1))))  # the seed design's first attempt draws
    return calls


def batched_calls(policy, testbed: MAPFTestbed, n: int, seed: int, temperature: float,
                  engine: str = "vllm", batch_size: int = 16) -> tuple[list[dict], dict]:
    """``n`` constrained design calls of the checkpoint engineer answered in bulk: on ``vllm`` in
    one batched engine call (``vllm_structured_generate_many``), on ``transformers`` in batched
    ``generate`` calls of ``batch_size`` rows (``constrained_generate_many``, one seeded stream per
    batch). Each answer is parsed with ``parse_answer`` and judged with
    ``CheckpointEngineer.judge`` (the testbed's ``project``). Returns one record per call and the
    timing."""
    from engineers.checkpoint.parse import parse_answer

    calls = design_calls(policy, testbed, n, seed, temperature)
    budget = max(engineer.constrained_budget(policy, schema) for _, engineer, _, schema, _ in calls)
    started = time.perf_counter()
    if engine == "vllm":
        from engineers.checkpoint.engineer import vllm_structured_generate_many
        from trainers.lm.generation import vllm_build

        completions = vllm_structured_generate_many(
            policy, [c[2] for c in calls], [c[3] for c in calls], max_new_tokens=budget,
            temperature=temperature, seeds=None if vllm_build() == "cpu" else [c[4] for c in calls])
    else:
        from engineers.checkpoint.constrained import constrained_generate_many

        if len({json.dumps(c[3], sort_keys=True) for c in calls}) != 1:
            raise ValueError("a transformers batch decodes every row under one schema; these calls differ")
        completions = []
        for start in range(0, n, batch_size):
            chunk = calls[start:start + batch_size]
            answers = constrained_generate_many(policy, [c[2] for c in chunk], chunk[0][3], max_new_tokens=budget,
                                                temperature=temperature, seed=chunk[0][4])
            completions += [completion for completion, _ in answers]
            print(f"{start + len(chunk)}/{n} answered, {time.perf_counter() - started:.0f} s", flush=True)
    seconds = time.perf_counter() - started
    records = []
    for i, ((ctx, engineer, _, _, call_seed), completion) in enumerate(zip(calls, completions, strict=True)):
        parsed = parse_answer(completion.text, ctx.testbed.proposal_space)
        found, _, _, _, rejected, usable = engineer.judge(ctx, parsed)
        records.append({"seed": seed + i, "sampling_seed": call_seed, "parsed": found,
                        "usable": usable, "tokens": completion.num_tokens,
                        "rejected": rejected.reason if rejected is not None else None,
                        "parse_error": parsed.error, "text": completion.text})
    tokens = sum(r["tokens"] for r in records)
    return records, {"seconds": seconds, "tokens": tokens, "budget": budget, "engine": engine}


def main_batched_transformers(args) -> None:
    from trainers.lm.chat import chat_policy
    from trainers.lm.generation import GenerationConfig
    from trainers.lm.models import ModelConfig

    started = time.perf_counter()
    policy = chat_policy(ModelConfig(name_or_path=str(args.model)) if args.model else ModelConfig(),
                         GenerationConfig(engineer_max_new_tokens=args.max_new_tokens))
    startup = time.perf_counter() - started
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.1f}; engine transformers (bf16 autocast: {policy.bf16}), llguidance, "
          f"batches of {args.batch_size}; load {startup:.1f} s; n={args.n}, temperature={args.temperature}",
          flush=True)
    records, timing = batched_calls(policy, MAPFTestbed(), args.n, args.seed, args.temperature,
                                    engine="transformers", batch_size=args.batch_size)
    print(summary_bulk(records, timing))
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"timing": timing, "records": records}, indent=1))


def main_vllm(args) -> None:
    from trainers.lm.generation import GenerationConfig, VLLMPolicy
    from trainers.lm.models import embedded_model_dir

    model_dir = str(args.model or embedded_model_dir())
    config = GenerationConfig(backend="vllm", vllm_dtype=args.vllm_dtype, engineer_max_new_tokens=args.max_new_tokens)
    started = time.perf_counter()
    policy = VLLMPolicy(config, model_path=model_dir)
    startup = time.perf_counter() - started
    structured = getattr(getattr(policy.llm.llm_engine, "vllm_config", None), "structured_outputs_config", None)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.1f}; engine vllm {policy.llm.model_config.dtype}, structured outputs "
          f"backend {getattr(structured, 'backend', '?')}; model {model_dir}; start-up {startup:.1f} s; "
          f"n={args.n}, temperature={args.temperature}", flush=True)
    records, timing = batched_calls(policy, MAPFTestbed(), args.n, args.seed, args.temperature)
    print(summary_bulk(records, timing))
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"timing": timing, "records": records}, indent=1))


def summary_bulk(records: list[dict], timing: dict) -> str:
    """k/n parsed and usable with their 95 % lower bounds, distinct answers, tokens and time."""
    n = len(records)
    lines = [f"{'':<8}{'k/n':>10}{'rate':>8}{'95% lower':>11}"]
    for key in ("parsed", "usable"):
        k = sum(bool(r[key]) for r in records)
        lines.append(f"{key:<8}{f'{k}/{n}':>10}{k / n:>8.3f}{clopper_pearson_lower(k, n):>11.3f}")
    distinct = len({r["text"] for r in records})
    lines.append(f"distinct answers {distinct}/{n}; {timing['tokens'] / n:.0f} tokens per answer (budget "
                 f"{timing['budget']}); {timing['engine']}, in bulk {timing['seconds']:.1f} s = "
                 f"{timing['seconds'] / n:.2f} s per answer, {timing['tokens'] / timing['seconds']:.0f} tokens/s")
    return "\n".join(lines)


def run_calls(args, modes, policy, tokenizer, testbed, records: list[dict]) -> None:
    """Each history in turn, every mode on it (paired; an interrupted run stays balanced)."""
    for i in range(args.n):
        for mode in modes:
            config = CheckpointEngineerConfig(structured_output=mode == "constrained", temperature=args.temperature)
            ctx = history_context(testbed, policy, args.seed + i)
            engineer = CheckpointEngineer(config)
            started = time.perf_counter()
            design = engineer.design(ctx)
            seconds = time.perf_counter() - started
            d = design.diagnostics
            tokens = d["answer_tokens"] if d["answer_tokens"] is not None else len(
                tokenizer(design.output or "", add_special_tokens=False)["input_ids"]) + 1
            projected, _ = testbed.project(design.raw, ctx.proposal)
            rec = {"mode": mode, "seed": args.seed + i, "parsed": d["parsed"], "usable": d["usable_output"],
                   "tokens": tokens, "seconds": round(seconds, 2), "mask_seconds": d["mask_seconds"],
                   "status": d["status"], "answers": d["answers"], "copied": d["copied_example"],
                   "unchanged": projected == ctx.proposal, "raw": design.raw,
                   "projected": projected.model_dump(mode="json")}
            records.append(rec)
            print(json.dumps(rec), flush=True)


def summarise(modes: list[str], records: list[dict]) -> None:
    print(f"{'mode':<12}{'parsed':>8}{'usable':>8}{'tokens':>8}{'s/call':>8}{'s/token':>9}{'mask ms/token':>15}"
          f"{'copied':>9}{'unchanged':>10}{'distinct':>9}")
    for mode in modes:
        rows = [r for r in records if r["mode"] == mode]
        if not rows:
            continue
        tokens = sum(r["tokens"] for r in rows)
        mask = [r["mask_seconds"] for r in rows if r["mask_seconds"] is not None]
        mask_text = f"{1000 * sum(mask) / tokens:.2f}" if mask else "-"
        print(f"{mode:<12}{sum(r['parsed'] for r in rows):>5}/{len(rows):<2}{sum(r['usable'] for r in rows):>5}/"
              f"{len(rows):<2}{tokens / len(rows):>8.0f}{np.mean([r['seconds'] for r in rows]):>8.1f}"
              f"{sum(r['seconds'] for r in rows) / tokens:>9.3f}{mask_text:>15}"
              f"{sum(r['copied'] for r in rows):>5}/{sum(r['answers'] for r in rows):<3}"
              f"{sum(r['unchanged'] for r in rows):>6}/{len(rows):<3}"
              f"{len({json.dumps(r['raw'], sort_keys=True) for r in rows}):>6}/{len(rows):<2}")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
