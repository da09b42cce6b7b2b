"""Controlled engineer benchmarks: every engineer, identical seeds, budget, eval suites and start.

For engineers E and seeds 0..N−1, run (e, s) is ``curriculum run`` with one shared base config
(the ``--config`` file, or the testbed's shipped config for the trainer, ``Testbed.compare_config``,
plus the ``--set`` overrides) in which only ``engineer`` differs. Seed s fixes the round-0 proposal, every
round's training data and eval seed, and the trainer's randomness, so engineers differ only in
what they choose. Runs live in ``OUT/runs/<engineer>-seed<s>`` and execute in up to ``jobs``
processes. A rerun of ``compare`` reuses finished runs, resumes unfinished ones (the loop's
atomic round commits make that exact) and starts missing ones; a run dir whose saved config
differs from the requested one is an error, not silently reused.

Per engineer, the final score (the **test** suite's score after the last round; engineers never
saw it; ``compare.json``'s ``suite`` names it, and run dirs written before runs had two suites
are scored on their one eval suite, labelled so) is summarised over seeds by its
mean and 95% percentile-bootstrap interval; for every pair (a, b) the paired difference
mean_s(final_a(s) − final_b(s)) gets a t-interval over seeds, a sign-flip p over seeds and a
Holm-adjusted p over all pairs (exploratory without a design; ``curriculum.stats``). Results go
to ``OUT/compare.json``, a rich table (also saved as ``OUT/table.txt``) and PNG plots in
``OUT/plots`` (``curriculum.report``); the paths in ``compare.json`` are relative to ``OUT``.
With the simulated trainer every output says that the numbers come from a simulation, not from a
model.

Per-engineer options: ``--set engineers.<name>.<key>=<value>`` applies only to that engineer's
runs (e.g. ``engineers.optuna.sampler=random``); any other ``--set`` applies to all runs.

A declared design (``CompareDesign``, ``--design FILE``) fixes the comparison before it runs:
arms (an engineer plus overrides of its own, e.g. a ``fixed`` arm trained on the test
distribution), the primary pairs (a, b), seeds per arm (primary and secondary), and
``PowerThresholds`` (seeds, optimiser steps, scored tasks, a start eval) that ``compare`` warns
about or refuses to run below. For every primary pair, ``compare.json``'s ``primary`` holds the
paired analysis at the level of seeds on each task's final outcome (``final_task_scores``:
``EvalReport.task_scores`` of the last round), from ``curriculum.stats.seed_paired``: the mean of
per-seed mean differences, its t-interval over seeds, the sign-flip p over seeds (the seed, i.e.
the training run, is the unit of replication), and the Holm-adjusted p over the design's family
of primary pairs (``p_holm``, what the tables show). ``design_summary`` (``--dry-run``) states
each primary pair's minimal detectable effect for that test and family from a pilot's variance
(``pilot_variance``) or the stated binomial default, and the seeds a target MDE needs. For every
arm, ``compare.json``'s ``gain`` holds the same analysis of final − start on each task
(``start_task_scores``: the warm-started model's outcomes, else the model's as loaded, on the same
suite; Holm over the arms): what the arm's training added, which a difference between arms cannot
say. Each run's row keeps its final and start outcomes, so ``reanalyse`` recomputes every
statistic from ``compare.json`` alone.

Round 0: a design's arms either all start from one shared round 0 per seed (``round0: shared``;
refused when some arm's round 0 would differ) or each runs its own (``round0: own``);
``compare.json``'s ``round0`` says which the runs did (``mixed`` for comparisons in which only
some did).
"""

from __future__ import annotations

import io
import json
import math
import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from curriculum.config import ConfigError, RunConfig, apply_overrides, read_config_file, validate_config
from curriculum.core.records import LEGACY_SUITE
from curriculum.core.userfiles import read_user_bytes
from curriculum.core.types import EvalReport
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS
from curriculum.core.reporting import ReportLayout
from curriculum.report import (RunSummary, layout_of, plot_distribution, plot_final_by_size,
                               plot_score_curves, rates_by_bucket)

from curriculum.answers import answer_totals
from curriculum.rundir import RunDir, finite_json, read_json, run_path, write_json
from curriculum.stem import Stem, fork_member, plan_stems, round0_key, shares_round0
from curriculum.stats import (VarianceComponents, binomial_default_variance, bootstrap_mean_ci,
                              bootstrap_mean_ci_columns, holm, minimal_detectable_effect, seed_paired,
                              pairwise_differences, seeds_for_mde, variance_components)

SIMULATED_NOTICE = ("SIMULATED LEARNER: these numbers come from trainers/simulated.py, a documented "
                    "model of learning dynamics (docs/simulated_learner.md). They compare engineers "
                    "under that model and are not results of any language model.")
"""Stated in the table title and ``compare.json`` whenever the trainer is ``simulated``."""


MAX_SEEDS = 1_000
"""Most seeds an arm may have (``--seeds``, a design's ``primary_seeds`` / ``secondary_seeds`` /
an arm's ``seeds``): far past any comparison that can run, and refused before anything is
planned, so a mistyped count is an error, not memory exhausted by the plan."""
MAX_SEED = 2**31 - 1
"""Largest seed a comparison may reach (``--first-seed`` + seeds - 1)."""


@dataclass
class CompareSpec:
    """One comparison: what ``curriculum compare`` parses its arguments into."""

    engineers: list[str]
    testbed: str | None = None
    """``None``: the config's testbed (without ``--config``: the first registered testbed)."""
    seeds: int = 3
    rounds: int | None = None
    out: Path = Path("runs/compare")
    trainer: str | None = None
    config: Path | None = None
    overrides: list[str] = field(default_factory=list)
    jobs: int = 1
    first_seed: int | None = None
    """``None``: the design's ``first_seed``, else 0."""
    share_round0: bool = True
    """Run round 0 once per seed and start every engineer's run from it (``curriculum.stem``);
    engineers that shape round 0 (``curriculum.stem.shares_round0``) and runs already started run
    their own."""
    design: CompareDesign | None = None
    """A declared design (``--design``): arms, the primary comparison and the power thresholds;
    ``engineers`` then names its arms. ``None``: every engineer is an arm of ``seeds`` seeds."""

    def __post_init__(self) -> None:
        if self.first_seed is None:
            self.first_seed = self.design.first_seed if self.design is not None else 0
        if not 1 <= self.seeds <= MAX_SEEDS:
            raise ConfigError(f"--seeds {self.seeds}: between 1 and {MAX_SEEDS:,} seeds per arm")
        if not 0 <= self.first_seed <= MAX_SEED - MAX_SEEDS:
            raise ConfigError(f"--first-seed {self.first_seed}: between 0 and {MAX_SEED - MAX_SEEDS:,}")

    @property
    def seed_list(self) -> list[int]:
        """The seeds of the arm with the most (every arm's seeds start at ``first_seed``)."""
        return list(range(self.first_seed, self.first_seed + max(self.seeds_of(a) for a in self.engineers)))

    def seeds_of(self, arm: str) -> int:
        """Number of seeds of ``arm``."""
        return self.design.seeds_of(arm) if self.design is not None else self.seeds

    def arm_seeds(self, arm: str) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds_of(arm)))

    def engineer_of(self, arm: str) -> str:
        """The registered engineer an arm runs."""
        return self.design.arms[arm].engineer if self.design is not None else arm

    def arm_overrides(self, arm: str) -> list[str]:
        """The design's overrides, then the arm's own (before the command line's ``--set``)."""
        return [*self.design.set, *self.design.arms[arm].set] if self.design is not None else []


@dataclass
class RunOutcome:
    """How one (engineer, seed) run was obtained."""

    engineer: str
    seed: int
    path: Path
    status: str
    """``reused`` (already complete), ``resumed``, ``new``, ``failed`` or ``unfinished`` (not run to
    its end, reported as it stands: ``compare(..., finished_only=True)``)."""
    seconds: float = 0.0
    error: str | None = None


@dataclass
class CompareResult:
    """What ``compare`` returns (the same content as ``compare.json``)."""

    data: dict[str, Any]
    outcomes: list[RunOutcome]
    table_text: str
    plots: list[Path]

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


# --------------------------------------------------------------------------------------------
# the declared design: arms, primary comparison, power thresholds
# --------------------------------------------------------------------------------------------

class Arm(BaseModel):
    """One arm of a comparison: an engineer, optionally with config overrides of its own."""

    model_config = ConfigDict(extra="forbid")

    engineer: str
    """Registered engineer the arm's runs use."""
    set: list[str] = Field(default_factory=list)
    """``--set``-style overrides (``key=value``) for this arm's runs only, applied before the
    command line's; e.g. a ``fixed`` arm trained on the test distribution sets
    ``testbed.initial_proposal`` to it."""
    seeds: int | None = Field(None, ge=1, le=MAX_SEEDS)
    """Seeds of this arm (``None``: ``primary_seeds`` for arms of the primary comparison, else
    ``secondary_seeds``)."""
    description: str = ""
    """What the arm is, for tables and reports."""


class PowerThresholds(BaseModel):
    """The least design that ``compare`` runs without complaint (``power_problems``)."""

    model_config = ConfigDict(extra="forbid")

    min_primary_seeds: int = Field(6, ge=1, le=MAX_SEEDS)
    """Seeds of each arm of the primary comparison: with S seeds the smallest two-sided
    sign-flip p-value over seed means is 2/2^S (S = 3: 0.25, never significant)."""
    min_secondary_seeds: int = Field(3, ge=1, le=MAX_SEEDS)
    """Seeds of every other arm."""
    min_grpo_steps: int = Field(12, ge=1)
    """Optimiser steps per run (rounds × steps per round) for trainers that count GRPO steps."""
    min_test_tasks: int = Field(144, ge=1)
    """Tasks of the scored suite per run (each run is scored on all of them)."""
    require_start_eval: bool = True
    """Runs evaluate their starting model too (``eval_before_training``), so start and end of
    every run are on record."""
    on_underpowered: Literal["warn", "refuse"] = "warn"
    """What ``compare`` does with a design below a threshold: print each shortfall and run, or
    stop with an error before running anything."""


class CompareDesign(BaseModel):
    """A comparison fixed before it runs (``curriculum compare --design FILE``)."""

    model_config = ConfigDict(extra="forbid")

    config: Path | None = None
    """Base run config of every run (relative to the design file); ``--config`` overrides it."""
    set: list[str] = Field(default_factory=list)
    """``--set``-style overrides for every run, applied before the arms' and the command line's."""
    arms: dict[str, Arm]
    """Arm name → arm. Run directories are ``<arm>-seed<s>``."""
    primary: list[tuple[str, str]]
    """Pairs (a, b) of arms whose difference a − b is the comparison's primary question: one family,
    each pair analysed at the level of seeds (``curriculum.stats.seed_paired``) and its p adjusted
    by Holm over the family. Empty (``[]``, stated, not omitted): the design asks only what each
    arm's training adds over its starting model (``gain``, Holm over the arms)."""
    round0: Literal["shared", "own"] = "shared"
    """``shared``: every arm of a seed starts from one round 0, computed once (``curriculum.stem``);
    a design whose arms' round 0 would differ (another round-0 proposal, an engineer that shapes
    round 0) is refused. ``own``: every run computes its own round 0."""
    target_mde: float | None = Field(None, gt=0, lt=1)
    """A minimal detectable effect the design aims at (score units): with a pilot, ``--dry-run``
    prints the seeds each primary pair needs to reach it."""
    primary_seeds: int = Field(6, ge=1, le=MAX_SEEDS)
    """Seeds of the arms in ``primary`` (unless an arm sets its own)."""
    secondary_seeds: int = Field(3, ge=1, le=MAX_SEEDS)
    """Seeds of the other arms (unless an arm sets its own)."""
    first_seed: int = Field(0, ge=0, le=MAX_SEED - MAX_SEEDS)
    """First seed of every arm (arm seeds F..F+N-1): a design that asks its question again, after
    seeds were spent on an earlier look, declares fresh ones here. ``--first-seed`` overrides it."""
    alpha: float = Field(0.05, gt=0, lt=1)
    """Two-sided family-wise level of the primary tests (Holm) and of the MDE."""
    power: float = Field(0.8, gt=0, lt=1)
    """Power at which ``--dry-run`` states the minimal detectable effect."""
    thresholds: PowerThresholds = Field(default_factory=PowerThresholds)
    """Minimum seeds, steps and test tasks (``power_problems``)."""

    @model_validator(mode="after")
    def _check(self) -> CompareDesign:
        if not self.arms:
            raise ValueError("arms must name at least one arm")
        for a, b in self.primary:
            missing = [x for x in (a, b) if x not in self.arms]
            if missing:
                raise ValueError(f"primary pair ({a}, {b}) names {', '.join(missing)}, not among the "
                                 f"arms ({', '.join(self.arms)})")
            if a == b:
                raise ValueError(f"primary pair ({a}, {b}) compares an arm with itself")
        return self

    @property
    def primary_arms(self) -> list[str]:
        return [a for a in self.arms if any(a in pair for pair in self.primary)]

    def seeds_of(self, arm: str) -> int:
        own = self.arms[arm].seeds
        if own is not None:
            return own
        return self.primary_seeds if arm in self.primary_arms else self.secondary_seeds


def load_design(path: str | Path) -> CompareDesign:
    """Read and validate a design file; its ``config`` path is resolved against the file's folder."""
    data = read_config_file(path)
    try:
        design = CompareDesign.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"design {path}: {err}") from None
    for arm, spec in design.arms.items():
        if spec.engineer not in ENGINEERS.names():
            raise ConfigError(f"design {path}: arm {arm!r} names engineer {spec.engineer!r}; registered: "
                              f"{', '.join(ENGINEERS.names())}")
    if design.config is not None and not design.config.is_absolute():
        design = design.model_copy(update={"config": (Path(path).parent / design.config).resolve()})
    return design


def steps_per_run(config: RunConfig) -> int | None:
    """Optimiser steps a run takes: rounds × the steps the trainer fixes per round
    (``TrainingBudget.optimizer_steps_per_round``; self-play: one update per rollout step), else
    rounds × (``max_steps_per_round``, else ⌈tasks_per_round × epochs_per_round / prompts_per_step⌉);
    ``None`` for trainers that do not step on prompt batches (simulated)."""
    fixed = TRAINERS.get(config.trainer.name).load().training_budget(config).optimizer_steps_per_round
    if fixed is not None:
        return config.rounds * fixed
    trainer = config.trainer
    per_step = getattr(trainer, "prompts_per_step", None)
    if per_step is None:
        return None
    steps = getattr(trainer, "max_steps_per_round", None)
    if steps is None:
        steps = max(1, math.ceil(config.tasks_per_round * getattr(trainer, "epochs_per_round", 1) / per_step))
    return config.rounds * steps


def scored_tasks(config: RunConfig) -> int | None:
    """Tasks a run is scored on: the prompts of the testbed's ``test`` suite (``eval_budget``; the
    validation suite's size on testbeds without a test suite of their own); ``None`` when the
    testbed cannot count them."""
    cls = TESTBEDS.get(config.testbed.name).load()
    prompts, _ = cls.eval_budget(config.testbed, config.generation.max_new_tokens, suite="test")
    return prompts or None


def power_problems(spec: CompareSpec, configs: dict[tuple[str, int], RunConfig]) -> list[str]:
    """Every way the design falls short of its thresholds (empty: none). Without a design the
    default ``PowerThresholds`` apply, with every engineer a secondary arm."""
    design = spec.design
    limits = design.thresholds if design is not None else PowerThresholds()
    primary = set(design.primary_arms) if design is not None else set()
    problems: list[str] = []
    if design is None:
        problems.append("no primary comparison declared (--design): every pair is exploratory")
    for arm in spec.engineers:
        need = limits.min_primary_seeds if arm in primary else limits.min_secondary_seeds
        have = spec.seeds_of(arm)
        if have < need:
            role = "primary" if arm in primary else "secondary"
            problems.append(f"arm {arm}: {have} seeds, below the {need} a {role} arm needs")
    first = {arm: next(c for (a, _), c in configs.items() if a == arm) for arm in spec.engineers}
    for arm, config in first.items():
        steps = steps_per_run(config)
        if steps is not None and steps < limits.min_grpo_steps:
            problems.append(f"arm {arm}: {steps} optimiser steps per run "
                            f"({config.rounds} rounds), below {limits.min_grpo_steps}")
        tasks = scored_tasks(config)
        if tasks is not None and tasks < limits.min_test_tasks:
            problems.append(f"arm {arm}: scored on {tasks} tasks per run, below {limits.min_test_tasks}")
        if limits.require_start_eval and not config.eval_before_training:
            problems.append(f"arm {arm}: the starting model is not evaluated (eval_before_training: false)")
    # Identical problems for several arms (a shared base config) read better once.
    return list(dict.fromkeys(problems))


def round0_problems(spec: CompareSpec, configs: dict[tuple[str, int], RunConfig]) -> list[str]:
    """Why a design with ``round0: shared`` cannot give every arm one round 0 per seed (empty: it
    can, or the design runs its own round 0 per run, or there is no design): an arm whose engineer
    shapes round 0, or whose round-0 config differs from the first arm's (``stem.round0_key``)."""
    if spec.design is None or spec.design.round0 == "own" or not spec.share_round0:
        return []
    problems = []
    for (arm, seed), config in configs.items():
        if not shares_round0(ENGINEERS.get(config.engineer.name).load()):
            problems.append(f"arm {arm}: its engineer {config.engineer.name} shapes round 0 itself")
    by_seed: dict[int, list[tuple[str, str]]] = {}
    for (arm, seed), config in configs.items():
        by_seed.setdefault(seed, []).append((arm, round0_key(config)))
    for seed, keys in sorted(by_seed.items()):
        first_arm, first_key = keys[0]
        problems += [f"arm {arm}: its round 0 differs from arm {first_arm}'s (another config before the "
                     "first design, e.g. testbed.initial_proposal)" for arm, key in keys[1:] if key != first_key]
    if problems:
        problems.append("round0: shared needs every arm to start from one round 0; give every arm the same "
                        "round-0 config, or declare round0: own (every run computes its own round 0)")
    return list(dict.fromkeys(problems))


def check_power(spec: CompareSpec, configs: dict[tuple[str, int], RunConfig]) -> list[str]:
    """``power_problems``; raises ConfigError listing them when the design says ``refuse``."""
    problems = power_problems(spec, configs)
    if problems and spec.design is not None and spec.design.thresholds.on_underpowered == "refuse":
        raise ConfigError("the design is under-powered (thresholds.on_underpowered: refuse):\n  - "
                          + "\n  - ".join(problems))
    return problems


# --------------------------------------------------------------------------------------------
# per-task outcomes and the pooled paired analysis
# --------------------------------------------------------------------------------------------

def final_task_scores(run_dir: Path) -> dict[str, float]:
    """Per-task outcomes of a run's last committed round, by task id: ``EvalReport.task_scores``
    of the round's test-suite report (``RoundReport.test``) when the run has one, else of the
    round's eval. Empty when the run has no round or its reports predate per-task results."""
    history = RunDir.open(run_dir).history()
    if not history:
        return {}
    last = history[-1]
    report = getattr(last, "test", None) or last.eval
    return dict(report.task_scores)


START_EVALS = (("warm start", "warmstart"), ("baseline", "baseline"))
"""The starting model a run's gain is measured from, in order of preference: the warm-started
model when the run warm-started, else the model as loaded (``eval_before_training``'s files)."""


def start_task_scores(summary: RunSummary) -> tuple[str, dict[str, float]] | None:
    """(which start, per-task outcomes by task id) of the run's starting model on the suite its
    final scores are on (``RunSummary.pre_task_scores``). ``None`` when the run did not evaluate its
    start (``eval_before_training: false``) or the file predates per-task results."""
    for label, name in START_EVALS:
        if name in summary.pre_evals:
            scores = summary.pre_task_scores.get(name)
            return (label, scores) if scores else None
    return None


def task_differences(ya: dict[str, float], yb: dict[str, float]) -> np.ndarray:
    """y^a_t − y^b_t on the tasks both scored, in task id order (empty when none)."""
    return np.array([ya[t] - yb[t] for t in sorted(set(ya) & set(yb))], dtype=float)


def _seed_level_row(diffs: dict[int, np.ndarray], alpha: float) -> dict[str, Any]:
    """``seed_paired``'s JSON row of ``diffs`` = {seed: per-task differences}, with its seed list."""
    return {**seed_paired(diffs, alpha=alpha).to_dict(), "seed_list": sorted(diffs)}


def _adjust_family(rows: list[dict[str, Any]]) -> None:
    """Holm over a family of rows, in place: ``p_holm`` on every row that has a ``p_value``; a
    declared member without one counts as p = 1 (the family keeps its declared size)."""
    adjusted = holm([r.get("p_value", 1.0) for r in rows]) if rows else []
    for row, p in zip(rows, adjusted):
        if "p_value" in row:
            row["p_holm"] = p
            row["family"] = len(rows)


def gain_analysis(spec: CompareSpec, finals: dict[tuple[str, int], dict[str, float]],
                  starts: dict[tuple[str, int], tuple[str, dict[str, float]]]) -> list[dict[str, Any]]:
    """For every arm: ``curriculum.stats.seed_paired`` of final − start, task by task within each
    seed's run (what the arm's training added to its starting model, on the suite that scores
    it), Holm-adjusted over the arms, as JSON-able rows (``reason`` instead where no run has both)."""
    alpha = spec.design.alpha if spec.design is not None else 0.05
    rows = []
    for arm in spec.engineers:
        diffs: dict[int, np.ndarray] = {}
        labels = set()
        for (name, seed), final in sorted(finals.items(), key=lambda kv: kv[0][1]):
            if name != arm or (name, seed) not in starts:
                continue
            label, start = starts[(name, seed)]
            d = task_differences(final, start)
            if d.size:
                diffs[seed] = d
                labels.add(label)
        row: dict[str, Any] = {"arm": arm, "start": " / ".join(sorted(labels))}
        if diffs:
            row.update(_seed_level_row(diffs, alpha))
        else:
            row["reason"] = ("no complete run with its start's per-task outcomes (start_task_scores: a start eval, "
                             "eval_before_training, stored in the run's row)")
        rows.append(row)
    _adjust_family(rows)
    return rows


def paired_task_differences(scores: dict[tuple[str, int], dict[str, float]], a: str, b: str
                            ) -> dict[int, np.ndarray]:
    """{seed: d_{s,t} = y^a_{s,t} − y^b_{s,t} on the tasks both runs of seed s scored, in task id
    order}, over the seeds where both arms have per-task outcomes."""
    out: dict[int, np.ndarray] = {}
    for (arm, seed), ya in sorted(scores.items(), key=lambda kv: kv[0][1]):
        if arm != a or (b, seed) not in scores:
            continue
        d = task_differences(ya, scores[(b, seed)])
        if d.size:
            out[seed] = d
    return out


def primary_analysis(spec: CompareSpec, scores: dict[tuple[str, int], dict[str, float]]) -> list[dict[str, Any]]:
    """For every pair (a, b) of the primary comparison: ``curriculum.stats.seed_paired`` of a − b,
    Holm-adjusted over the declared family, as JSON-able rows (``reason`` where no pair exists)."""
    if spec.design is None:
        return []
    rows = []
    for a, b in spec.design.primary:
        diffs = paired_task_differences(scores, a, b)
        row: dict[str, Any] = {"a": a, "b": b}
        if diffs:
            row.update(_seed_level_row(diffs, spec.design.alpha))
        else:
            row["reason"] = "no seed where both arms have per-task outcomes"
        rows.append(row)
    _adjust_family(rows)
    return rows


# --------------------------------------------------------------------------------------------
# before the run: the minimal detectable effect (--dry-run)
# --------------------------------------------------------------------------------------------

DEFAULT_PILOT_RATE = 0.5
"""Success rate assumed when no pilot exists: Var(d) = 2·p·(1 − p) = 0.5, the binomial maximum."""


@dataclass
class PilotVariance:
    """Where the MDE's variance comes from."""

    components: VarianceComponents
    source: str
    """A sentence naming the pilot (or the default) and how the variance was estimated."""
    measured: bool = False
    """Whether the variance was measured on runs (a compare dir) rather than assumed."""


def pilot_variance(paths: list[Path]) -> PilotVariance:
    """The variance of per-task paired differences for the MDE.

    * A finished compare dir (``compare.json`` with per-run ``task_scores``, or its ``runs/``):
      ``variance_components`` of the paired differences of every pair of arms on shared seeds,
      averaged over pairs (σ²_b and σ²_w each).
    * Eval JSON files (``EvalReport`` with ``task_scores``: a run's ``rounds/*/eval.json``,
      ``curriculum eval --out``): the pooled success rate p̂ of their tasks, and
      ``binomial_default_variance(p̂)`` (two independent arms at that rate, no seed component).
    * Nothing: ``binomial_default_variance(DEFAULT_PILOT_RATE)``.
    """
    if not paths:
        return PilotVariance(binomial_default_variance(DEFAULT_PILOT_RATE),
                             "no pilot: the stated default, two independent pass/fail arms at a 50% "
                             "success rate, Var(d) = 2·p·(1 − p) = 0.5, no seed component")
    scores: dict[tuple[str, int], dict[str, float]] = {}
    rates: list[float] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            scores.update(_compare_dir_scores(path))
        else:
            try:
                report = EvalReport.model_validate_json(read_user_bytes(path, "--pilot file"))
            except ConfigError:
                raise
            except (OSError, ValueError) as err:
                raise ConfigError(f"--pilot {path}: not an eval report or compare dir ({type(err).__name__})") from None
            if not report.task_scores:
                raise ConfigError(f"--pilot {path}: the eval report has no per-task results")
            rates.extend(report.task_scores.values())
    if scores:
        arms = sorted({a for a, _ in scores})
        comps = [variance_components(d) for i, a in enumerate(arms) for b in arms[i + 1:]
                 if (d := paired_task_differences(scores, a, b))]
        if not comps:
            raise ConfigError(f"--pilot {', '.join(map(str, paths))}: no two arms share a seed with "
                              "per-task outcomes")
        mean = VarianceComponents(float(np.mean([c.between_seed for c in comps])),
                                  float(np.mean([c.within_seed for c in comps])),
                                  max(c.seeds for c in comps), float(np.mean([c.tasks_per_seed for c in comps])))
        return PilotVariance(mean, f"pilot {', '.join(map(str, paths))}: per-task paired differences of "
                                   f"{len(comps)} arm pair(s), σ²_b = {mean.between_seed:.4g}, "
                                   f"σ²_w = {mean.within_seed:.4g} (mean over pairs); a pilot sizes the "
                                   "next design, it is not evidence about its own comparison", measured=True)
    p = float(np.mean(rates))
    return PilotVariance(binomial_default_variance(p),
                         f"pilot {', '.join(map(str, paths))}: success rate {p:.3f} over {len(rates)} "
                         f"tasks, two independent arms at that rate: Var(d) = 2·p·(1 − p) = "
                         f"{2 * p * (1 - p):.4g}, no seed component")


def _compare_dir_scores(path: Path) -> dict[tuple[str, int], dict[str, float]]:
    """(arm, seed) → final per-task outcomes of a compare dir (``compare.json``, else ``runs/``)."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    summary = path / "compare.json"
    if summary.is_file():
        for row in load_compare_data(summary).get("runs", []):
            if row.get("task_scores"):
                out[(row["engineer"], int(row["seed"]))] = {str(k): float(v) for k, v in row["task_scores"].items()}
    if not out and (path / "runs").is_dir():
        for run in sorted((path / "runs").iterdir()):
            arm, _, seed = run.name.rpartition("-seed")
            if arm and seed.isdigit() and (run / "config.yaml").is_file():
                found = final_task_scores(run)
                if found:
                    out[(arm, int(seed))] = found
    if not out:
        raise ConfigError(f"--pilot {path}: no run with per-task outcomes (compare.json rows' task_scores "
                          "or runs/<arm>-seed<s>)")
    return out


def design_summary(spec: CompareSpec, configs: dict[tuple[str, int], RunConfig],
                   pilot: PilotVariance) -> dict[str, Any]:
    """What ``compare --dry-run`` prints: arms, seeds, steps, scored tasks, the power problems and
    the MDE of every primary pair (every pair when no design is declared)."""
    alpha = spec.design.alpha if spec.design is not None else 0.05
    power = spec.design.power if spec.design is not None else 0.8
    arms = []
    for arm in spec.engineers:
        config = next(c for (a, _), c in configs.items() if a == arm)
        arms.append({"arm": arm, "engineer": spec.engineer_of(arm), "seeds": spec.seeds_of(arm),
                     "steps_per_run": steps_per_run(config), "scored_tasks": scored_tasks(config),
                     "overrides": list(spec.design.arms[arm].set) if spec.design is not None else []})
    by_arm = {a["arm"]: a for a in arms}
    pairs = (spec.design.primary if spec.design is not None
             else [(a, b) for i, a in enumerate(spec.engineers) for b in spec.engineers[i + 1:]])
    target = spec.design.target_mde if spec.design is not None else None
    mdes = []
    for a, b in pairs:
        seeds = min(by_arm[a]["seeds"], by_arm[b]["seeds"])
        tasks = min(t for t in (by_arm[a]["scored_tasks"], by_arm[b]["scored_tasks"]) if t) \
            if (by_arm[a]["scored_tasks"] or by_arm[b]["scored_tasks"]) else None
        row: dict[str, Any] = {"a": a, "b": b, "seeds": seeds, "tasks": tasks}
        if tasks:
            row["mde"] = minimal_detectable_effect(pilot.components, seeds, tasks, alpha=alpha, power=power,
                                                   family=len(pairs))
            if target is not None and pilot.measured:
                row["seeds_for_target"] = seeds_for_mde(pilot.components, tasks, target, alpha=alpha,
                                                        power=power, family=len(pairs))
        else:
            row["reason"] = "the testbed does not count its scored tasks"
        mdes.append(row)
    return {"arms": arms, "primary": spec.design is not None, "family": len(pairs), "target_mde": target,
            "round0": spec.design.round0 if spec.design is not None else ("shared" if spec.share_round0 else "own"),
            "common_overrides": list(spec.design.set) if spec.design is not None else [], "pairs": mdes, "alpha": alpha, "power": power,
            "variance": pilot.components.to_dict(), "variance_source": pilot.source,
            "problems": power_problems(spec, configs) + round0_problems(spec, configs), "runs": len(configs)}


def design_text(summary: dict[str, Any]) -> str:
    """``design_summary`` as the plain text ``--dry-run`` prints."""
    lines = [f"design: {summary['runs']} runs"
             + (f" (every run: {' '.join(summary['common_overrides'])})" if summary["common_overrides"] else "")]
    for a in summary["arms"]:
        extra = f", overrides {' '.join(a['overrides'])}" if a["overrides"] else ""
        lines.append(f"  {a['arm']} ({a['engineer']}): {a['seeds']} seeds, "
                     f"{a['steps_per_run'] if a['steps_per_run'] is not None else 'n/a'} optimiser steps per run, "
                     f"{a['scored_tasks'] or 'n/a'} scored tasks{extra}")
    kind = "primary comparison" if summary["primary"] else "no primary comparison declared; every pair"
    lines.append(f"round 0: {summary['round0']}")
    if summary["primary"] and not summary["pairs"]:
        lines.append("no primary pair: the design asks what each arm's training adds over its start "
                     "(`gain`, final − start per seed, Holm over the arms)")
    else:
        lines.append(f"minimal detectable effect of the seed-level test ({kind}; {100 * summary['power']:.0f}% power, "
                     f"two-sided family-wise alpha {summary['alpha']:g} over {summary['family']} comparison(s); "
                     f"MDE = (t_(1-alpha/(2m), S-1) + t_(power, S-1)) * sqrt((s2_b + s2_w/n) / S)):")
    for p in summary["pairs"]:
        if "mde" in p and not _finite(p["mde"]):  # infinite in memory, null in compare.json
            lines.append(f"  {p['a']} - {p['b']}: no MDE: with {p['seeds']} seed the run-to-run variation is "
                         "unmeasured and the seed-level test cannot reject")
        elif "mde" in p:
            needed = ""
            if "seeds_for_target" in p:
                needed = (f"; {p['seeds_for_target']} seeds reach the target MDE {summary['target_mde']:g}"
                          if p["seeds_for_target"] else f"; no seed count up to 10000 reaches {summary['target_mde']:g}")
            lines.append(f"  {p['a']} - {p['b']}: MDE = {p['mde']:.4f} ({100 * p['mde']:.1f} points of the "
                         f"score) with S = {p['seeds']} seeds x n = {p['tasks']} tasks{needed}")
        else:
            lines.append(f"  {p['a']} - {p['b']}: no MDE ({p['reason']})")
    lines.append(f"variance from: {summary['variance_source']}")
    if summary["problems"]:
        lines.append("under-powered:")
        lines.extend(f"  - {p}" for p in summary["problems"])
    else:
        lines.append("power thresholds: all met")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def machine_estimate(config: RunConfig) -> Any:
    """``curriculum run --dry-run``'s wall-time estimate of one run on this machine
    (``curriculum.plan.wall_time``, single process): a ``curriculum.walltime.Estimate``."""
    from curriculum.core.sizing import DEFAULT_GPU, GPUS
    from curriculum.plan import read_strategy, wall_time
    from curriculum.presets import detect_machine

    return wall_time(config, read_strategy(None), GPUS[DEFAULT_GPU], detect_machine())


def runs_text(spec: CompareSpec, configs: dict[tuple[str, int], RunConfig],
              estimate: Callable[[RunConfig], Any] | None = machine_estimate) -> str:
    """What ``compare --dry-run`` prints after the design: every arm's runs (directory, seeds,
    whether each is new, to resume or done) and, with ``estimate`` (a config → an ``Estimate``
    with ``total_seconds`` and ``warmstart_seconds``, one per arm: its runs differ only in the
    seed), the wall time of the runs not done yet one after another, plus the longest warm start
    once (runs with the same model and warm-start examples share its cache entry)."""
    lines = [f"runs ({len(configs)}, seed-major, under {Path(spec.out) / 'runs'}):"]
    total, warm, per_run = 0.0, 0.0, []
    for arm in spec.engineers:
        keys = [(arm, s) for s in spec.arm_seeds(arm)]
        status = [run_status(configs[k]) for k in keys]
        counts = ", ".join(f"{status.count(x)} {x}" for x in ("new", "resume", "done") if x in status)
        lines.append(f"  {arm}: {arm}-seed{{{','.join(str(s) for _, s in keys)}}} ({counts})")
        if estimate is not None:
            est = estimate(configs[keys[0]])
            todo = sum(x != "done" for x in status)
            total += todo * est.total_seconds
            warm = max(warm, est.warmstart_seconds if todo else 0.0)
            per_run.append(f"{arm} {_duration(est.total_seconds)}")
    if estimate is not None:
        lines.append(f"estimated wall time on this machine: {_duration(total + warm)} for the runs not done, one "
                     f"after another ({_duration(total)} of runs: {', '.join(per_run)} per run; + "
                     f"{_duration(warm)} warm start once unless cached); with --jobs N the runs share the "
                     "machine's cores. Each run's estimate is `curriculum run --dry-run`'s (what it assumes: there)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------

def split_overrides(overrides: list[str], engineers: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``engineers.<name>.<key>=v`` → per-engineer ``engineer.<key>=v``; the rest apply to all."""
    common: list[str] = []
    per: dict[str, list[str]] = {e: [] for e in engineers}
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key.startswith("engineers."):
            parts = key.split(".")
            if len(parts) < 3:
                raise ConfigError(f"override {item!r} must look like engineers.<name>.<key>=<value>")
            if parts[1] not in per:
                raise ConfigError(f"override {item!r} names engineer {parts[1]!r}, which is not being "
                                  f"compared ({', '.join(engineers)})")
            per[parts[1]].append("engineer." + item.partition(".")[2].partition(".")[2])
        else:
            common.append(item)
    return common, per


def _base_data(spec: CompareSpec) -> dict[str, Any]:
    path = spec.config
    if path is None and spec.design is not None and spec.design.config is not None:
        path = spec.design.config
    default = _default_config(spec) if path is None else None
    if default is not None and default.is_file():
        path = default
    if path is None:
        return {}
    return read_config_file(path)


def _default_config(spec: CompareSpec) -> Path | None:
    """The testbed's shipped base config for the trainer (``Testbed.compare_config``; no testbed
    named: the first registered one); ``None`` without a trainer or for a name not registered
    (the run's validation names it)."""
    testbed = spec.testbed or next(iter(TESTBEDS.names()), None)
    if not spec.trainer or testbed is None or testbed not in TESTBEDS:
        return None
    return TESTBEDS.get(testbed).load().compare_config(spec.trainer)


def _section(data: dict[str, Any], key: str, name: str | None) -> None:
    """Switch a plugin section to ``name`` (dropping the file's options for another plugin)."""
    if name is None:
        return
    current = data.get(key)
    current_name = current.get("name") if isinstance(current, dict) else current
    if current_name != name:
        data[key] = {"name": name}


def run_configs(spec: CompareSpec) -> dict[tuple[str, int], RunConfig]:
    """The validated config of every (engineer, seed) run, in engineer then seed order."""
    if not spec.engineers:
        raise ConfigError("--engineers needs at least one engineer name")
    if len(set(spec.engineers)) != len(spec.engineers):
        raise ConfigError(f"--engineers lists a name twice: {','.join(spec.engineers)}")
    if spec.design is not None:
        unknown = [a for a in spec.engineers if a not in spec.design.arms]
        if unknown:
            raise ConfigError(f"--engineers names {', '.join(unknown)}, not arms of the design "
                              f"({', '.join(spec.design.arms)})")
    for e in spec.engineers:
        ENGINEERS.get(spec.engineer_of(e))  # UnknownName lists the registered ones
    common, per = split_overrides(spec.overrides, spec.engineers)
    base = _base_data(spec)
    runs_dir = (Path(spec.out) / "runs").resolve()
    out: dict[tuple[str, int], RunConfig] = {}
    for e in spec.engineers:
        for s in spec.arm_seeds(e):
            data = yaml.safe_load(yaml.safe_dump(base))  # deep copy
            _section(data, "engineer", spec.engineer_of(e))
            _section(data, "testbed", spec.testbed)
            _section(data, "trainer", spec.trainer)
            sets = [f"seed={s}", f"output_dir={runs_dir}", f"run_name={e}-seed{s}"]
            if spec.rounds is not None:
                sets.append(f"rounds={spec.rounds}")
            data = apply_overrides(data, spec.arm_overrides(e) + common + per[e] + sets)
            out[(e, s)] = validate_config(data, source=f"config of {e}-seed{s}")
    return out


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------

def run_status(config: RunConfig) -> str:
    """``new``, ``resume`` or ``done`` for a run's directory; raises ConfigError on a mismatch."""
    path = run_path(config)
    if not (path / "config.yaml").is_file():
        return "new"
    run = RunDir.open(path)
    try:
        run.extends_config(config)  # writes nothing: the run saves a larger count under its lock
    except ConfigError as err:
        raise ConfigError(f"{path} holds a run with a different config; choose another --out or "
                          f"delete it.\n{err}") from None
    return "done" if len(run.completed_rounds()) >= config.rounds else "resume"


def _registry_snapshot() -> dict[str, list[Any]]:
    """Every registered plugin, so that spawned workers know plugins registered at runtime."""
    from curriculum.registry import TESTBEDS, TRAINERS

    return {"engineer": ENGINEERS.entries(), "testbed": TESTBEDS.entries(), "trainer": TRAINERS.entries()}


def _ensure_registered(snapshot: dict[str, list[Any]] | None) -> None:
    from curriculum.registry import TESTBEDS, TRAINERS

    registries = {"engineer": ENGINEERS, "testbed": TESTBEDS, "trainer": TRAINERS}
    for kind, entries in (snapshot or {}).items():
        for entry in entries:
            if entry.name not in registries[kind]:
                registries[kind].register(entry.name, entry.target, entry.config, entry.description,
                                          offers=entry.offers, tasks=entry.tasks, fits=entry.fits,
                                          trains_on=entry.trains_on, default_trainer=entry.default_trainer,
                                          chosen_by_default=entry.chosen_by_default, source=entry.source,
                                          commands=dict(entry.commands))


def _run_one(config_data: dict[str, Any], status: str, registry: dict[str, list[Any]] | None = None,
             stem: bool = False, verbose: bool = False) -> tuple[str, float]:
    """Worker: run or resume one config; returns (run dir, seconds). A ``stem`` (a shared round 0)
    skips the test suite after its one round: its runs test their own last round. The engines'
    logs go to the run's ``engine.log``; ``verbose`` shows them on the terminal too."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _ensure_registered(registry)
    from curriculum.loop import run

    config = validate_config(config_data)
    path = run_path(config)
    start = time.perf_counter()
    # Whether the run is new is decided again under its lock: another compare on the same
    # --out may have started it since; leftovers without a config.yaml are cleared there.
    run(config, resume=path if status == "resume" else None, final_test=not stem,
        claim=status != "resume", verbose=verbose)
    return str(path), time.perf_counter() - start


def _executor(jobs: int) -> ProcessPoolExecutor:
    import multiprocessing as mp
    import sys

    # fork: workers inherit imported modules and plugins registered at runtime; but never fork a
    # process whose torch may already run threads (a forked OpenMP pool can deadlock).
    method = "fork" if "fork" in mp.get_all_start_methods() and "torch" not in sys.modules else "spawn"
    # Share the cores among the workers instead of running jobs x cores threads (which thrash);
    # an explicit trainer.torch_threads still wins.
    threads = max(1, (os.cpu_count() or 1) // jobs)
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context(method),
                               initializer=_set_worker_threads, initargs=(threads,))


def _set_worker_threads(threads: int) -> None:
    """Worker initializer (module level, so that spawned workers can unpickle it)."""
    os.environ["CURRICULUM_TORCH_THREADS"] = str(threads)


def execute(configs: dict[tuple[str, int], RunConfig], jobs: int = 1,
            progress: Any = None, stems_dir: Path | None = None, verbose: bool = False) -> list[RunOutcome]:
    """Run every config that is not complete yet, ``jobs`` at a time (``jobs=1``: in-process).
    With ``stems_dir``, new runs that can share round 0 start from one stem run per seed
    (``curriculum.stem``) kept there."""
    outcomes: dict[tuple[str, int], RunOutcome] = {}
    todo: list[tuple[tuple[str, int], str]] = []
    for key, config in configs.items():
        path = run_path(config)
        status = run_status(config)
        if status == "done":
            outcomes[key] = RunOutcome(key[0], key[1], path, "reused")
            _notify(progress, outcomes[key])
        else:
            todo.append((key, status))
    # Seed-major order: a comparison cut short still has every engineer on the first seeds.
    todo.sort(key=lambda item: item[0][1])
    # Runs with no committed round yet may start from a stem (a cut comparison's too).
    unstarted = {k for k, s in todo if s == "new" or not RunDir(run_path(configs[k])).completed_rounds()}
    passes = _Passes(configs, plan_stems(configs, unstarted, stems_dir) if stems_dir else {}, outcomes, progress)
    _run_all(passes.first(todo), jobs, passes.finish, verbose)
    _run_all(passes.second(todo), jobs, passes.finish, verbose)
    return [outcomes[key] for key in configs]


def finished_outcomes(configs: dict[tuple[str, int], RunConfig], progress: Any = None) -> list[RunOutcome]:
    """Every run of ``configs`` as it stands, running nothing: ``reused`` where it has finished,
    ``unfinished`` where it has not (or has not started)."""
    outcomes = []
    for key, config in configs.items():
        status = run_status(config)
        outcomes.append(RunOutcome(key[0], key[1], run_path(config), "reused" if status == "done" else "unfinished"))
        _notify(progress, outcomes[-1])
    return outcomes


class _Passes:
    """``execute``'s two passes over the runs to do. First the stems and every run that needs
    none, by seed; then the stems' members, which resume after the stem's round 0 (reported as
    new). A member of a failed stem runs its own. ``finish`` records each run as it ends."""

    def __init__(self, configs: dict[tuple[str, int], RunConfig], stems: dict[str, Stem],
                 outcomes: dict[tuple[str, int], RunOutcome], progress: Any) -> None:
        self.configs, self.stems, self.outcomes, self.progress = configs, stems, outcomes, progress
        self.member_of = {key: name for name, stem in stems.items() for key in stem.members}
        self.stem_status = {name: run_status(stem.config) for name, stem in stems.items()}
        self.stems_done = {name for name, status in self.stem_status.items() if status == "done"}

    def first(self, todo: list[tuple[tuple[str, int], str]]) -> list[tuple[Any, RunConfig, str, str]]:
        """The stems not done yet and every run that is no stem's member, by seed (stems first)."""
        first: list[tuple[Any, RunConfig, str, str]] = [
            (name, stem.config, self.stem_status[name], self.stem_status[name])
            for name, stem in self.stems.items() if name not in self.stems_done]
        first += [(key, self.configs[key], status, status) for key, status in todo if key not in self.member_of]
        first.sort(key=lambda item: (item[1].seed, not isinstance(item[0], str)))
        return first

    def second(self, todo: list[tuple[tuple[str, int], str]]) -> list[tuple[Any, RunConfig, str, str]]:
        """The stems' members (after the first pass): each forked from its done stem, or on its own."""
        second: list[tuple[Any, RunConfig, str, str]] = []
        for key, status in todo:
            if key not in self.member_of:
                continue
            stem = self.stems[self.member_of[key]]
            if self.member_of[key] not in self.stems_done:
                second.append((key, self.configs[key], status, status))
                continue
            try:
                fork_member(stem, self.configs[key])  # clears a start's leftovers under the lock
            except Exception:  # noqa: BLE001 - reported per run; a rerun forks it again
                self.finish(key, status, None, f"starting the run from the shared round 0 {stem.path} failed:\n"
                            + traceback.format_exc())
                continue
            second.append((key, self.configs[key], "resume", "new"))
        return second

    def finish(self, key: Any, status: str, result: Any, error: str | None) -> None:
        """Record one ended run (or stem: its members start from it once it is done) and report it."""
        if isinstance(key, str):
            stem = self.stems[key]
            if error is None:
                self.stems_done.add(key)
            _notify(self.progress, RunOutcome(f"round 0 shared by {','.join(e for e, _ in stem.members)}",
                                              stem.config.seed, stem.path, "failed" if error else status,
                                              seconds=result[1] if result else 0.0, error=error))
            return
        path = run_path(self.configs[key])
        if error is None:
            self.outcomes[key] = RunOutcome(key[0], key[1], path, "resumed" if status == "resume" else "new",
                                            seconds=result[1])
        else:
            self.outcomes[key] = RunOutcome(key[0], key[1], path, "failed", error=error)
        _notify(self.progress, self.outcomes[key])


def _run_all(items: list[tuple[Any, RunConfig, str, str]], jobs: int,
             finish: Callable[[Any, str, Any, str | None], None], verbose: bool = False) -> None:
    """Run ``(key, config, run status, reported status)`` items, ``jobs`` at a time; ``finish(key,
    reported status, (path, seconds) or None, error or None)`` after each. A key that is a string
    names a stem (``_Passes``)."""
    if jobs <= 1 or len(items) <= 1:
        for key, config, status, reported in items:
            try:
                result = _run_one(config.model_dump(mode="json"), status, None, isinstance(key, str), verbose)
                finish(key, reported, result, None)
            except Exception:  # noqa: BLE001 - one failed run must not sink the comparison
                finish(key, reported, None, traceback.format_exc())
        return
    snapshot = _registry_snapshot()
    with _executor(min(jobs, len(items))) as pool:
        futures: dict[Future, tuple[Any, str]] = {
            pool.submit(_run_one, config.model_dump(mode="json"), status, snapshot, isinstance(key, str),
                        verbose): (key, reported)
            for key, config, status, reported in items
        }
        for future in as_completed(futures):
            key, reported = futures[future]
            try:
                finish(key, reported, future.result(), None)
            except BrokenProcessPool:
                # One worker was killed (by the OS, e.g. out of memory): the pool cannot run
                # anything else. Committed rounds are safe; the same command resumes.
                finish(key, reported, None, WORKER_DIED)
            except Exception:  # noqa: BLE001
                finish(key, reported, None, traceback.format_exc())


WORKER_DIED = ("a compare worker process died (killed by the operating system, often for lack of "
               "memory; see `dmesg`), so this run was cut or never started. Its committed rounds "
               "are kept: rerun the same command to resume, with fewer --jobs if memory is short.")


def _notify(progress: Any, outcome: RunOutcome) -> None:
    if progress is not None:
        progress(outcome)


# --------------------------------------------------------------------------------------------
# summarising
# --------------------------------------------------------------------------------------------

def _matrix(rows: list[list[float]], width: int) -> np.ndarray:
    m = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        m[i, :min(width, len(row))] = row[:width]
    return m


def within(out: Path, data: dict[str, Any]) -> None:
    """Rewrite ``data``'s paths (run dirs, shared round-0 runs, plots) relative to ``out``, the
    directory ``compare.json`` lives in, so the file still reads right when the directory is moved
    or committed; a path outside ``out`` stays as it is. The design's base config is written
    relative to the working directory (where ``--design`` resolved it), when inside it."""
    def rel(path: str) -> str:
        try:
            return str(Path(path).resolve().relative_to(out.resolve()))
        except ValueError:
            return path

    for row in data["runs"]:
        for key in ("run_dir", "round0_from"):
            if key in row:
                row[key] = rel(row[key])
    data["plots"] = [rel(p) for p in data.get("plots", [])]
    design = data.get("design") or {}
    if design.get("config"):  # the base config as the command line names it: relative to the working directory
        try:
            design["config"] = str(Path(design["config"]).resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            pass


def summarize(spec: CompareSpec, summaries: dict[tuple[str, int], RunSummary],
              outcomes: list[RunOutcome], rounds: int,
              task_scores: dict[tuple[str, int], dict[str, float]] | None = None,
              start_scores: dict[tuple[str, int], tuple[str, dict[str, float]]] | None = None) -> dict[str, Any]:
    """The content of ``compare.json`` (plots are added by ``compare``). ``task_scores``: each
    complete run's final per-task outcomes (``final_task_scores``), kept per run and used by the
    primary comparison's pooled analysis; ``start_scores``: its starting model's
    (``start_task_scores``), for each arm's gain over its start."""
    task_scores = task_scores or {}
    start_scores = start_scores or {}
    simulated = any(s.simulated for s in summaries.values())
    testbed = next((s.config["testbed"]["name"] for s in summaries.values()), spec.testbed)
    layout = layout_of(testbed)
    sizes = _buckets(summaries.values(), layout)
    runs = [_run_row(o, summaries.get((o.engineer, o.seed)), sizes, task_scores, start_scores, layout)
            for o in outcomes]
    summary = {e: _engineer_summary(e, spec, summaries, rounds, sizes, layout) for e in spec.engineers}
    for e in spec.engineers:  # engineers that ask a model: its answers and copies of the prompt's example
        answered = [r for r in runs if r["engineer"] == e and "answers" in r]
        if answered:
            summary[e]["answers"] = sum(r["answers"] for r in answered)
            summary[e]["copied_example"] = sum(r["copied_example"] for r in answered)
    return statistics({
        "simulated": simulated,
        "notice": SIMULATED_NOTICE if simulated else "",
        "testbed": testbed,
        "trainer": next((s.config["trainer"]["name"] for s in summaries.values()), spec.trainer),
        "engineers": spec.engineers,
        "seeds": spec.seed_list,
        "rounds": rounds,
        "score": f"EvalReport.score after the last round (testbed-defined{': ' if layout.score else ''}"
                 f"{layout.score})",
        "suite": _suite_of(summaries.values()),
        "sizes": sizes,
        "summary": summary,
        "design": spec.design.model_dump(mode="json") if spec.design is not None else None,
        "runs": runs,
    })


def statistics(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a ``compare.json``'s content) with its comparisons computed from the per-run rows
    alone: ``pairwise`` from each complete run's final score, ``primary`` and ``gain`` from its
    final and start per-task outcomes (``task_scores``, ``start_task_scores``), and ``round0``
    from the runs' ``round0_from``. ``reanalyse`` applies it to a finished comparison."""
    spec = _spec_of(data)
    runs = [r for r in data["runs"] if r.get("complete") and r.get("final_score") is not None]
    finals: dict[str, dict[int, float]] = {e: {} for e in spec.engineers}
    for r in runs:
        finals.setdefault(r["engineer"], {})[int(r["seed"])] = float(r["final_score"])
    scores = {(r["engineer"], int(r["seed"])): {str(k): float(v) for k, v in r["task_scores"].items()}
              for r in runs if r.get("task_scores")}
    starts = {(r["engineer"], int(r["seed"])): (r.get("start", "start"),
                                                {str(k): float(v) for k, v in r["start_task_scores"].items()})
              for r in runs if r.get("start_task_scores")}
    shared = [bool(r.get("round0_from")) for r in data["runs"]]
    data = {key: value for key, value in data.items() if key not in ("pairwise", "primary", "gain", "round0")}
    data.update({
        "round0": "shared" if shared and all(shared) else "own" if not any(shared) else "mixed",
        "pairwise": pairwise_differences({e: v for e, v in finals.items() if v}),
        "primary": primary_analysis(spec, scores),
        "gain": gain_analysis(spec, scores, starts),
    })
    return data


def _spec_of(data: dict[str, Any]) -> CompareSpec:
    """The part of a ``CompareSpec`` the statistics need (arms and design), from ``compare.json``."""
    design = CompareDesign.model_validate(data["design"]) if data.get("design") else None
    return CompareSpec(engineers=list(data["engineers"]), design=design)


def reanalyse(path: str | Path) -> dict[str, Any]:
    """Recompute every statistic of a finished comparison from its stored per-run outcomes and
    rewrite its ``compare.json`` and ``table.txt`` in place (no run is repeated); returns the data.
    The design, arms, runs and plots stay as they are."""
    path = Path(path)
    file = path / "compare.json" if path.is_dir() else path
    data = statistics(load_compare_data(file))
    write_json(file, finite_json(data))
    (file.parent / "table.txt").write_text(table_text_of(data))
    return data


def _buckets(summaries: Any, layout: ReportLayout) -> list[str]:
    """Every bucket the runs' evals measured the layout's first rate on, in the layout's order."""
    if not layout.rates:
        return []
    found = {b for s in summaries for m in s.metrics for b in rates_by_bucket(m, layout.rates[0])}
    return sorted(found, key=layout.bucket_order)


def _run_row(o: RunOutcome, s: RunSummary | None, sizes: list[str],
             task_scores: dict[tuple[str, int], dict[str, float]],
             start_scores: dict[tuple[str, int], tuple[str, dict[str, float]]],
             layout: ReportLayout) -> dict[str, Any]:
    """One run's row of ``compare.json``: where and how it ran, and its scores when it has a summary
    (its final and start per-task outcomes when it is complete)."""
    row: dict[str, Any] = {"engineer": o.engineer, "seed": o.seed, "run_dir": str(o.path),
                           "status": o.status, "seconds": round(o.seconds, 2)}
    if o.error:
        row["error"] = o.error.strip().splitlines()[-1]
    if (o.path / "forked_from.json").is_file():  # round 0 came from a shared stem run
        row["round0_from"] = read_json(o.path / "forked_from.json")["stem"]
    if s is not None:
        row.update(scores=s.scores, baseline_score=s.baseline_score, complete=s.complete,
                   final_score=s.scores[-1] if s.scores else None,
                   final_metrics={k: v for k, v in (s.metrics[-1] if s.metrics else {}).items()
                                  if k.startswith(tuple(r.metric for r in layout.rates))},
                   data_ratio=[[r.get(z, 0.0) for z in sizes] for r in s.data_ratio],
                   zero_spread_share=[None if math.isnan(x) else x for x in s.zero_spread_share])
        answered = answer_totals(s.answers)
        if answered["rounds"]:  # an engineer that asks a model: how often it copied the example
            row["answers"], row["copied_example"] = answered["answers"], answered["copied_example"]
        if s.complete and s.scores and task_scores.get((o.engineer, o.seed)):
            row["task_scores"] = task_scores[(o.engineer, o.seed)]
            if (o.engineer, o.seed) in start_scores:
                row["start"], row["start_task_scores"] = start_scores[(o.engineer, o.seed)]
    return row


def _engineer_summary(engineer: str, spec: CompareSpec, summaries: dict[tuple[str, int], RunSummary],
                      rounds: int, sizes: list[str], layout: ReportLayout) -> dict[str, Any]:
    """One engineer's summary over its complete runs: the final score and per-round curve with
    bootstrap intervals, and the final value of each rate the testbed's layout declares (overall,
    ``final_<name>_rate``, and by bucket, ``final_<name>_by_size``); ``{"n": 0}`` when no run is
    complete."""
    done = [summaries[(engineer, sd)] for sd in spec.seed_list
            if (engineer, sd) in summaries and summaries[(engineer, sd)].complete]
    if not done:
        return {"n": 0}
    curve = _matrix([d.scores for d in done], rounds)
    last = [d.metrics[-1] for d in done]
    return {
        "n": len(done),
        "final_score": bootstrap_mean_ci([d.scores[-1] for d in done]).to_dict(),
        "mean_score_over_rounds": float(np.nanmean(curve)),
        "per_round": [iv.to_dict() for iv in bootstrap_mean_ci_columns(curve)],
        **{f"final_{r.name}_rate": float(np.mean([m.get(r.metric, np.nan) for m in last]))
           for r in layout.rates},
        "zero_spread_share": _nanmean([x for d in done for x in d.zero_spread_share]),
        **{f"final_{r.name}_by_size": {z: float(np.mean([rates_by_bucket(m, r).get(z, np.nan) for m in last]))
                                       for z in sizes} for r in layout.rates},
    }


def _nanmean(values: list[float]) -> float | None:
    """Mean of the values that are numbers; ``None`` when none is."""
    kept = [v for v in values if not math.isnan(v)]
    return float(np.mean(kept)) if kept else None


def _suite_of(summaries: Any) -> str:
    """The held-out suite the runs' scores are on (``RunSummary.suite``); several are named."""
    suites = sorted({s.suite for s in summaries})
    return " + ".join(suites) if suites else "test"


def _measured(value: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def results_table(data: dict[str, Any]) -> Any:
    """Rich tables: per engineer, then pairwise differences (as one renderable group)."""
    from rich.console import Group
    from rich.table import Table

    title = "Engineers on {}, {} seeds × {} rounds, scored on the {} suite".format(
        data["testbed"], len(data["seeds"]), data["rounds"], data.get("suite") or LEGACY_SUITE)
    if data["simulated"]:
        title = "SIMULATED LEARNER, not model results — " + title
    main = Table(title=title, title_justify="left")
    # The rates the testbed's layout declares, each only where some run measured it.
    declared = [(f"final {r.name}", f"final_{r.name}_rate")
                for r in layout_of(data.get("testbed")).rates if r.column]
    rates = [(label, key) for label, key in (*declared, ("groups without spread", "zero_spread_share"))
             if any(s.get("n") and _measured(s.get(key)) for s in data["summary"].values())]
    # An engineer that asks a model: how many of its answers were the prompt's example.
    asked = any("answers" in s for s in data["summary"].values())
    for col in ("engineer", "runs", "final score [95% CI]", "mean over rounds", *(label for label, _ in rates),
                *(["copied example"] if asked else [])):
        main.add_column(col, justify="left" if col == "engineer" else "right")
    for e in data["engineers"]:
        s = data["summary"][e]
        copied = ([f"{s['copied_example']}/{s['answers']}" if "answers" in s else "—"] if asked else [])
        if not s.get("n"):
            main.add_row(e, "0", "—", "—", *("—" for _ in rates), *copied)
            continue
        f = s["final_score"]
        main.add_row(e, str(s["n"]), f"{f['mean']:.3f} {_interval_text(f['low'], f['high'], '.3f')}",
                     f"{s['mean_score_over_rounds']:.3f}",
                     *(f"{s[key]:.3f}" if _measured(s.get(key)) else "—" for _, key in rates), *copied)
    pair = Table(title="Paired differences of the final score, exploratory (a − b, same seeds; t 95% CI over "
                       "seeds; sign-flip p over seeds, Holm-adjusted over all pairs)", title_justify="left")
    for col in ("a − b", "mean diff", "95% CI", "p (Holm)", "n"):
        pair.add_column(col, justify="left" if col == "a − b" else "right")
    for p in data["pairwise"]:
        pair.add_row(f"{p['a']} − {p['b']}", f"{p['mean_diff']:+.3f}",
                     _interval_text(p["ci95_low"], p["ci95_high"], "+.3f"), _p_text(p), str(p["n"]))
    parts = [main, pair]
    if data.get("primary"):
        parts.append(primary_table(data["primary"], data.get("design") or {}))
    if any("difference" in r for r in data.get("gain") or []):
        parts.append(gain_table(data["gain"], data.get("design") or {}))
    if data.get("round0") == "mixed":
        parts.append("Round 0: some runs started from a shared round 0 and others ran their own, so arms "
                     "differ in more than their engineer from round 0 on.")
    if data.get("underpowered"):
        parts.append("Under-powered design: " + "; ".join(data["underpowered"]))
    if data["simulated"]:
        parts.append(data["notice"])
    return Group(*parts)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _interval_text(low: float | None, high: float | None, spec: str) -> str:
    """``[low, high]``; an unbounded interval (one seed: infinite in memory, null in compare.json)
    reads ``[—, —]``."""
    def bound(x: float | None) -> str:
        return format(x, spec) if _finite(x) else "—"
    return f"[{bound(low)}, {bound(high)}]"


def _p_text(row: dict[str, Any]) -> str:
    """The adjusted p with the raw one beside it: ``0.31 (0.031)``."""
    if "p_holm" not in row:
        return f"{row['p_value']:.3g}" if "p_value" in row else "—"
    return f"{row['p_holm']:.3g} ({row['p_value']:.3g})"


def _seed_level_columns(row: dict[str, Any]) -> list[str]:
    """seeds, tasks, mean, CI, p (Holm, raw), rose, fell of a seed-level row."""
    d = row["difference"]
    return [str(row["seeds"]), str(row["tasks"]), f"{d['mean']:+.3f}", _interval_text(d["low"], d["high"], "+.3f"),
            _p_text(row), str(row["rose"]), str(row["fell"])]


SEED_LEVEL = ("t CI over seeds, S − 1 df; sign-flip p over seeds, Holm-adjusted over the family, raw in "
              "brackets; rose / fell count tasks and only describe")


def primary_table(rows: list[dict[str, Any]], design: dict[str, Any]) -> Any:
    """The primary comparison at the level of seeds (``primary_analysis``'s rows)."""
    from rich.table import Table

    level = 100 * (1 - design.get("alpha", 0.05))
    table = Table(title=f"Primary comparison: a − b on each task's final outcome, mean of seed means "
                        f"({level:.0f}% {SEED_LEVEL})", title_justify="left")
    for col in ("a − b", "seeds", "tasks", "mean diff", "CI", "p (Holm)", "rose", "fell"):
        table.add_column(col, justify="left" if col == "a − b" else "right")
    for r in rows:
        if "difference" not in r:
            table.add_row(f"{r['a']} − {r['b']}", "0", "0", "—", "—", "—", "—", r.get("reason", ""))
            continue
        table.add_row(f"{r['a']} − {r['b']}", *_seed_level_columns(r))
    return table


def gain_table(rows: list[dict[str, Any]], design: dict[str, Any]) -> Any:
    """Each arm's gain over its starting model at the level of seeds (``gain_analysis``)."""
    from rich.table import Table

    level = 100 * (1 - design.get("alpha", 0.05))
    table = Table(title=f"What training added: final − start on each task, mean of seed means "
                        f"({level:.0f}% {SEED_LEVEL.replace('the family', 'the arms')})", title_justify="left")
    for col in ("arm", "start", "seeds", "tasks", "mean gain", "CI", "p (Holm)", "rose", "fell"):
        table.add_column(col, justify="left" if col in ("arm", "start") else "right")
    for r in rows:
        if "difference" not in r:
            table.add_row(r["arm"], "—", "0", "0", "—", "—", "—", "—", "—")
            continue
        table.add_row(r["arm"], r["start"], *_seed_level_columns(r))
    return table


def draw_plots(data: dict[str, Any], summaries: dict[tuple[str, int], RunSummary], out: Path) -> list[Path]:
    """The three comparison plots into ``out``."""
    note = " — SIMULATED learner" if data["simulated"] else ""
    suite = data.get("suite") or LEGACY_SUITE
    sizes = data["sizes"]
    layout = layout_of(data.get("testbed"))
    curves, final, dist, flat = {}, {}, {}, {}
    for e in data["engineers"]:
        done = [summaries[(e, s)] for s in data["seeds"] if (e, s) in summaries and summaries[(e, s)].complete]
        if not done:
            continue
        curves[e] = _matrix([d.scores for d in done], data["rounds"])
        final[e] = {r.name: np.array([[rates_by_bucket(d.metrics[-1], r).get(z, np.nan) for z in sizes]
                                      for d in done]) for r in layout.rates}
        dist[e] = np.nanmean(np.stack([_matrix([[r.get(z, 0.0) for z in sizes] for r in d.data_ratio],
                                               len(sizes))[:data["rounds"]] for d in done]), axis=0)
        if any(not math.isnan(x) for d in done for x in d.zero_spread_share):
            flat[e] = _matrix([d.zero_spread_share for d in done], data["rounds"])
    if not curves:
        return []
    spread = [plot_score_curves(flat, out / "zero_spread_share.png", ylabel="share of groups without reward spread",
                                title=f"GRPO groups without reward spread per round (mean, 95% bootstrap CI over "
                                      f"seeds){note}")] if flat else []
    return [
        plot_score_curves(curves, out / "score_per_round.png",
                          title=f"{suite.capitalize()}-suite score per round (mean, 95% bootstrap CI over seeds){note}"),
        plot_final_by_size(final, sizes, out / "final_by_size.png", layout=layout,
                           title=f"Final {layout.rates_title} per {layout.bucket_label}, {suite} suite{note}"),
        plot_distribution(dist, sizes, out / "training_distribution.png",
                          title=f"Training distribution per round, mean over seeds{note}",
                          bucket_label=layout.bucket_label or "bucket"),
    ] + spread


def table_text_of(data: dict[str, Any]) -> str:
    """The results tables as plain text, 120 columns wide: ``table.txt``, and what ``compare
    --report`` prints, so the two are identical for the same ``compare.json``."""
    from rich.console import Console

    recorder = Console(record=True, width=120, file=io.StringIO())
    recorder.print(results_table(data))
    return recorder.export_text()


def load_compare_data(path: str | Path) -> dict[str, Any]:
    """``compare.json`` of a finished comparison (``path`` is its directory or the file itself):
    everything ``results_table`` renders, so a committed copy re-renders without rerunning."""
    path = Path(path)
    file = path / "compare.json" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no compare.json here (pass a `compare --out` directory or its compare.json)")
    try:
        data = json.loads(read_user_bytes(file, "compare.json"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{file}: not valid JSON ({str(err)[:120]})") from None
    missing = [key for key in ("engineers", "summary", "pairwise") if key not in data]
    if not isinstance(data, dict) or missing:
        raise ValueError(f"{file}: not a compare.json (missing {', '.join(missing) or 'an object'})")
    return data


def compare(spec: CompareSpec, progress: Any = None, warn: Callable[[str], None] | None = None,
            verbose: bool = False, finished_only: bool = False) -> CompareResult:
    """Run (or reuse) every run of ``spec`` and write ``compare.json``, the table and the plots.
    The design's power shortfalls (``power_problems``) go to ``warn`` before anything runs, or
    stop the comparison when its thresholds say ``refuse``. Each run's engine logs go to its
    ``engine.log``; ``verbose`` shows them on the terminal too. ``finished_only``: run nothing and
    report the runs under ``spec.out`` that have finished (a comparison cut short, its statistics
    over the seeds every arm of a pair finished); the others are ``unfinished`` rows."""
    start = time.perf_counter()
    configs = run_configs(spec)
    shared = round0_problems(spec, configs)
    if shared:
        raise ConfigError("the design's round 0 cannot be shared:\n  - " + "\n  - ".join(shared))
    problems = check_power(spec, configs)
    for problem in problems:
        if warn is not None:
            warn(problem)
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    share = spec.share_round0 and (spec.design is None or spec.design.round0 == "shared")
    outcomes = (finished_outcomes(configs, progress) if finished_only else
                execute(configs, jobs=spec.jobs, progress=progress,
                        stems_dir=out / "shared_round0" if share else None, verbose=verbose))
    summaries = {}
    for o in outcomes:
        path = o.path
        if (path / "config.yaml").is_file():
            summaries[(o.engineer, o.seed)] = RunSummary.load(path)
    rounds = next(iter(configs.values())).rounds
    scores = {(o.engineer, o.seed): final_task_scores(o.path) for o in outcomes
              if (o.engineer, o.seed) in summaries and summaries[(o.engineer, o.seed)].complete}
    starts = {key: begun for key in scores if (begun := start_task_scores(summaries[key])) is not None}
    data = summarize(spec, summaries, outcomes, rounds, {k: v for k, v in scores.items() if v}, starts)
    data["underpowered"] = problems
    plots = draw_plots(data, summaries, out / "plots")
    data["plots"] = [str(p) for p in plots]
    within(out, data)
    data["wall_s"] = round(time.perf_counter() - start, 2)
    write_json(out / "compare.json", finite_json(data))
    table_text = table_text_of(data)
    (out / "table.txt").write_text(table_text)
    return CompareResult(data=data, outcomes=outcomes, table_text=table_text, plots=plots)
