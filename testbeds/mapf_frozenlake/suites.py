"""Fixed evaluation suites and the failure breakdown engineers read (the Trainee-to-Trainer paper's module F).

A run has two held-out suites (``testbeds.base``): **validation** (seed ``eval_seed``; engineers
read its breakdown) and **test** (seed ``test_seed``; reports score on it). Both are built by
``build_suite``; the test suite is built with ``exclude`` = the validation suite's contents, so no
test instance has the map, starts and goals (``content_key``) of a validation instance: such a
draw is skipped and the next draw of its size taken (draws beyond ``per_size`` come from the same
seeded stream, so the suite stays reproducible).

A suite is ``per_size`` instances with ``agents`` agents at each of the 8 sizes, generated once
from a fixed seed with a fixed hole ratio and, unless the testbed's ``eval_wait_ratio`` asks for a
share of instances that need a wait, no wait request (the natural mix), then cached as
JSONL under ``$CURRICULUM_CACHE`` (default ``~/.cache/curriculum``) in ``mapf_suites/``, keyed by
a hash of every parameter that affects the instances (plus ``SUITE_VERSION``, bumped whenever the
generator changes its output).

Metrics per size and aggregated per suite: valid rate (all eight checks pass), optimal rate (valid
and cost == optimum), failure counts per check (a response can fail several checks; unparsable
responses count only as ``parsable`` failures), mean response length in tokens, and mean plan
cost / optimal cost over valid responses (the path-length measure of the Trainee-to-Trainer paper).

Draws that the solver cannot decide within the suite's node budget (5,000 CBS nodes; the clock
is only a 60 s safety net, so suites are reproducible) are rejected
and redrawn like unsolvable ones, so suites lean very slightly towards instances CBS finds
tractable; this matters only for 5 agents on 3x3/4x4 maps.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from curriculum.core.breakdown import EvalBreakdown, SuiteCell, SuiteResult
from curriculum.core.metrics import MetricKey
from curriculum.core.paths import cache_dir
from testbeds.mapf_frozenlake.config import SIZES, uniform_config
from testbeds.mapf_frozenlake.generator import generate
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.validate import CHECKS, Verdict

SUITE_VERSION = 2
"""Bump when the generator's output for given parameters changes (invalidates caches)."""


def suites_dir() -> Path:
    """Where built eval suites are cached: ``cache_dir()/mapf_suites``."""
    return cache_dir("mapf_suites")


def content_key(inst: Instance) -> str:
    """An instance's content for deduplication: map size, holes, starts and goals (in agent
    order); ids, solutions and metadata do not count."""
    return json.dumps([inst.h, inst.w, sorted(inst.holes), inst.starts, inst.goals])


def suite_key(agents: int, per_size: int, seed: int, hole_ratio: float,
              sizes: tuple[str, ...] | list[str] = SIZES, exclude: frozenset[str] = frozenset(),
              wait_ratio: float | None = None) -> str:
    params = {"agents": agents, "per_size": per_size, "seed": seed, "hole_ratio": hole_ratio,
              "sizes": list(sizes), "version": SUITE_VERSION}
    if wait_ratio is not None:  # absent for the natural mix, so existing caches keep their keys
        params["wait_ratio"] = wait_ratio
    if exclude:
        params["exclude"] = hashlib.sha256("\n".join(sorted(exclude)).encode()).hexdigest()
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def build_suite(agents: int, per_size: int, seed: int, hole_ratio: float = 0.2, *,
                use_cache: bool = True, workers: int | None = None,
                sizes: tuple[str, ...] | list[str] = SIZES,
                exclude: frozenset[str] | set[str] = frozenset(),
                wait_ratio: float | None = None) -> list[Instance]:
    """The eval suite (ordered by size, then index), from the disk cache when present.

    ``wait_ratio``: the share of each size's instances that need a wait (the generator's wait
    request); ``None``, the default, is the natural mix.

    ``sizes`` restricts the suite to some map sizes; each size's instances are the same whether
    or not other sizes are included (per-size draws are seeded by size). ``exclude``: contents
    (``content_key``) the suite must not contain; each size's first ``per_size`` draws outside
    it are kept (a size whose draws keep landing in ``exclude`` is a ``ValueError``)."""
    sizes = [s for s in SIZES if s in sizes]
    exclude = frozenset(exclude)
    key = suite_key(agents, per_size, seed, hole_ratio, sizes, exclude, wait_ratio)
    path = suites_dir() / f"{agents}agents-{per_size}x{len(sizes)}-seed{seed}-{key}.jsonl"
    if use_cache and path.exists():
        try:
            insts = [Instance.from_json(line) for line in path.read_text().splitlines() if line]
            if len(insts) == per_size * len(sizes):
                return insts
        except (ValueError, KeyError, TypeError):
            pass  # corrupt cache: regenerate
    insts = _draw_suite(agents, per_size, seed, hole_ratio, sizes, exclude, workers, wait_ratio)
    for inst in insts:
        inst.id = f"eval-{inst.id}"
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text("".join(i.to_json() + "\n" for i in insts))
        os.replace(tmp, path)
    return insts


def _draw_suite(agents: int, per_size: int, seed: int, hole_ratio: float, sizes: list[str],
                exclude: frozenset[str], workers: int | None, wait_ratio: float | None = None) -> list[Instance]:
    """Each size's first ``per_size`` draws whose content is not in ``exclude``: draw ``per_size``
    (plus a margin when excluding), widen the draw until enough remain."""
    order = {s: i for i, s in enumerate(SIZES)}
    extra = 0 if not exclude else max(2, per_size // 4)
    for _ in range(8):
        counts = [per_size + extra if s in sizes else 0 for s in SIZES]
        res = generate(uniform_config(hole_ratio, 0.0), sum(counts), agents=agents,
                       seed=seed, workers=workers, wait_ratio_override=wait_ratio,
                       counts=counts, time_budget_s=60.0, node_budget=5_000)
        drawn = sorted(res.instances, key=lambda x: (order[x.size], x.id or ""))
        kept = {s: [i for i in drawn if i.size == s and content_key(i) not in exclude][:per_size]
                for s in sizes}
        if all(len(v) == per_size for v in kept.values()):
            return [i for s in sizes for i in kept[s]]
        extra = 2 * extra + per_size
    short = [s for s, v in kept.items() if len(v) < per_size]
    raise ValueError(f"cannot draw {per_size} {agents}-agent instances per size outside the excluded "
                     f"suite on {short}: the maps are too small to hold that many distinct instances")


SizeBreakdown = SuiteCell
"""One suite at one map size (the kernel's ``SuiteCell``)."""
SuiteBreakdown = SuiteResult
"""One suite aggregated over sizes, with the per-size table (the kernel's ``SuiteResult``)."""
FailureBreakdown = EvalBreakdown
"""What engineers read (module F): the kernel's ``EvalBreakdown`` with its ``suites`` section,
keyed ``"{k}agents"``."""


def _agg(rows: list[tuple[Verdict, int]]) -> SuiteCell:
    n = len(rows)
    fails = {c: 0 for c in CHECKS}
    for v, _ in rows:
        for c in v.failed:
            fails[c] += 1
    ratios = [v.cost / v.optimal_cost for v, _ in rows if v.valid and v.optimal_cost]
    return SuiteCell(n=n, valid_rate=sum(v.valid for v, _ in rows) / n if n else 0.0,
                     optimal_rate=sum(v.optimal for v, _ in rows) / n if n else 0.0,
                     failures=fails, mean_tokens=sum(t for _, t in rows) / n if n else 0.0,
                     mean_cost_ratio=sum(ratios) / len(ratios) if ratios else None)


def summarize(instances: list[Instance], verdicts: list[Verdict],
              num_tokens: list[int]) -> EvalBreakdown:
    """Group verdicts by (number of agents, size) into an ``EvalBreakdown``'s ``suites``."""
    by: dict[int, dict[str, list[tuple[Verdict, int]]]] = {}
    for inst, v, t in zip(instances, verdicts, num_tokens):
        by.setdefault(inst.num_agents, {}).setdefault(inst.size, []).append((v, t))
    suites = {}
    for k in sorted(by):
        sizes = {s: _agg(by[k][s]) for s in SIZES if s in by[k]}
        rows = [r for s in SIZES if s in by[k] for r in by[k][s]]
        suites[f"{k}agents"] = SuiteResult(agents=k, sizes=sizes, **dict(_agg(rows)))
    return EvalBreakdown(suites=suites)


def flat_metrics(b: EvalBreakdown) -> dict[str, float]:
    """``valid_rate/3agents``, ``optimal_rate/3agents/5x5``, ``failure_rate/3agents/hole_free``, …
    (each name a ``MetricKey``: metric / suite / size or check)."""
    out: dict[MetricKey, float] = {}
    total_n = 0
    total_tokens = 0.0
    for name, s in b.suites.items():
        out[MetricKey("valid_rate", name)] = s.valid_rate
        out[MetricKey("optimal_rate", name)] = s.optimal_rate
        out[MetricKey("mean_tokens", name)] = s.mean_tokens
        if s.mean_cost_ratio is not None:
            out[MetricKey("cost_ratio", name)] = s.mean_cost_ratio
        for c, k in s.failures.items():
            out[MetricKey("failure_rate", name, c)] = k / s.n if s.n else 0.0
        for size, sb in s.sizes.items():
            out[MetricKey.for_bucket("valid_rate", name, size)] = sb.valid_rate
            out[MetricKey.for_bucket("optimal_rate", name, size)] = sb.optimal_rate
        total_n += s.n
        total_tokens += s.mean_tokens * s.n
    out[MetricKey("mean_tokens")] = total_tokens / total_n if total_n else 0.0
    out[MetricKey("valid_rate")] = (sum(s.valid_rate * s.n for s in b.suites.values()) / total_n
                                    if total_n else 0.0)
    out[MetricKey("optimal_rate")] = (sum(s.optimal_rate * s.n for s in b.suites.values()) / total_n
                                      if total_n else 0.0)
    return {k.to_str(): v for k, v in out.items()}


def bucket_scores(b: EvalBreakdown) -> dict[str, float]:
    """Per size, the valid rate averaged over the eval suites (agent counts) that cover it."""
    acc: dict[str, list[float]] = {}
    for suite in b.suites.values():
        for size, sb in suite.sizes.items():
            if sb.n:
                acc.setdefault(size, []).append(sb.valid_rate)
    return {size: sum(v) / len(v) for size, v in acc.items()}
