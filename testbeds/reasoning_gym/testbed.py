"""``reasoning_gym``: reasoning-gym's procedural tasks as a parametric generator for curricula.

Proposal space (``curriculum.core.spaces.BucketSpace``, no knobs): one **bucket per (task, difficulty
level)**, named ``<task>:<level>``; its share is that level's part of the round's training data.
A task's data share is the sum of its buckets' shares, its difficulty settings the distribution
over its levels. The levels come from the library, not from us: the task's curriculum
(``reasoning_gym.create_curriculum(task)``) declares attributes, each with a list of levels
(``AttributeDefinition.levels``). Level L of a task sets every attribute to its level
min(L, len(levels) − 1) and builds the dataset config with the curriculum's
``generate_configuration`` in ``RangeAttributeMode.UPPER_BOUND`` (a range attribute then spans
exactly its level-L segment, so level L means level L, not "level ≤ L"). A task has
min(``max_levels``, max over attributes of len(levels)) levels. Buckets are grouped per task
(``bucket_groups``), easiest level first — RLVE's per-environment ladder.

* ``sample(proposal, n, seed)``: largest-remainder counts per bucket, each bucket's items from its
  level config with a seed derived from (seed, bucket) in the training range; the prompt is the
  item's question plus "Put your final answer inside \\boxed{}" (as the held-out eval).
* ``score``: the dataset's own verifier ``score_answer`` on the last ``\\boxed{}`` content (the
  whole reply without one); reward = that score (1 correct; partial credit where the task defines it).
* ``evaluate(suite=...)``: a fixed suite of ``eval_per_bucket`` items per bucket, from
  ``eval_seed`` (``validation``, what engineers read) or ``test_seed`` (``test``, what reports
  score on), both disjoint from training seeds. Deduplicated by prompt (``canonical``): the test
  suite skips items whose prompt is a validation item's, and ``sample`` skips any held-out
  prompt, taking the bucket's next item instead. ``score`` = mean over buckets of the accuracy (share of answers scoring 1);
  metrics ``accuracy/<task>`` and ``accuracy/<task>/L<level>``; ``bucket_scores``; and the failure
  breakdown per task and level, ``breakdown.buckets[<task>:<level>]`` an ``OutcomeCounts`` (``n``,
  ``correct``, failures ``partial`` (0 < score < 1), ``wrong`` (a boxed answer scoring 0),
  ``no_answer`` (no \\boxed{})) — the bucket-space section the checkpoint engineer's module F renders.
"""

from __future__ import annotations

import difflib
import enum
import functools
import json
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curriculum.core.breakdown import EvalBreakdown, OutcomeCounts
from curriculum.core.buckets import allocate, project_buckets
from curriculum.core.config import PluginConfig
from curriculum.core.metrics import MetricKey, dump_metrics
from curriculum.core.presets import Preset
from curriculum.core.reporting import ReportLayout, ReportRate
from curriculum.core.spaces import BucketSpace
from curriculum.core.types import Change, Completion, EvalReport, Policy, Task
from testbeds.base import Testbed
from testbeds.spade.heldout.reasoning import INSTRUCTION, answer_of

SMALL_TASKS = ("chain_sum", "spell_backward", "letter_counting", "gcd")
"""A small CPU task set: short questions, short exact answers."""
TRAIN_SEED_BASE = 40_000_000
"""Training items draw seeds from here on; eval items from ``eval_seed`` (default 30_000_000)."""


class BucketShare(BaseModel):
    """One (task, level) bucket of a reasoning-gym proposal."""

    model_config = ConfigDict(extra="forbid")

    share: float = Field(ge=0.0, le=1.0)
    """Share of the round's training items drawn from this task at this level."""


class ReasoningGymProposal(BaseModel):
    """What an engineer edits: per ``<task>:<level>`` bucket, its share (shares sum to 1)."""

    model_config = ConfigDict(extra="forbid")

    buckets: dict[str, BucketShare]
    """Bucket name → share."""


class ReasoningGymTestbedConfig(PluginConfig):
    """Settings of the reasoning-gym testbed (the ``testbed`` section of a run config)."""

    name: Literal["reasoning_gym"]
    """Registry name."""
    tasks: list[str] = Field(default_factory=lambda: list(SMALL_TASKS), min_length=1)
    """reasoning-gym dataset names that have a curriculum (``curriculum list`` cannot show them all;
    ``python -c "import reasoning_gym.factory as f; print(sorted(f.CURRICULA))"`` does)."""
    max_levels: int = Field(4, ge=1, le=20)
    """Most difficulty levels per task (a task with fewer declared levels keeps its own number)."""
    eval_per_bucket: int = Field(8, ge=1)
    """Eval items per (task, level)."""
    eval_seed: int = Field(30_000_000, ge=0)
    """Base seed of the validation suite (fixed across rounds and runs)."""
    dedup: bool = True
    """Keep the test suite and training free of held-out prompts (module docstring). A level with
    too few distinct questions for that (``propositional_logic`` level 0 has 4) is an error
    naming it; ``false`` lets its items repeat across suites and training."""
    test_seed: int = Field(35_000_000, ge=0)
    """Base seed of the test suite (what reports score on; engineers never see its results).
    Keep it ≥ 100,000 away from ``eval_seed`` and below ``TRAIN_SEED_BASE`` (40,000,000)."""
    initial: Literal["uniform", "random", "easiest"] = "uniform"
    """Round-0 proposal: equal shares, a random Dirichlet draw, or every task at its level 0."""

    @model_validator(mode="after")
    def _apart(self) -> ReasoningGymTestbedConfig:
        if abs(self.test_seed - self.eval_seed) < 100_000 or max(self.test_seed, self.eval_seed) >= TRAIN_SEED_BASE:
            raise ValueError(f"test_seed ({self.test_seed}) and eval_seed ({self.eval_seed}) must be at least "
                             f"100,000 apart and below {TRAIN_SEED_BASE} (training seeds), so the suites draw "
                             "different items")
        return self

    @field_validator("tasks")
    @classmethod
    def _known(cls, tasks: list[str]) -> list[str]:
        curricula = _curricula()
        bad = [t for t in tasks if t not in curricula]
        if bad:
            hints = [f"{t!r} (did you mean {difflib.get_close_matches(t, curricula, n=1)[0]!r}?)"
                     if difflib.get_close_matches(t, curricula, n=1) else repr(t) for t in bad]
            raise ValueError(f"reasoning-gym has no curriculum for {', '.join(hints)}")
        if len(set(tasks)) != len(tasks):
            raise ValueError("tasks must be distinct")
        return tasks


def _curricula() -> dict[str, Any]:
    try:
        from reasoning_gym.factory import CURRICULA
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise ImportError("the reasoning_gym testbed needs the PyPI package reasoning-gym") from err
    return CURRICULA


def task_levels(task: str, max_levels: int) -> int:
    """Number of levels of ``task``: the longest attribute level list, capped at ``max_levels``."""
    from reasoning_gym.factory import create_curriculum

    return min(max_levels, max(len(a.levels) for a in create_curriculum(task).attributes.values()))


@functools.lru_cache(maxsize=512)
def level_fields(task: str, level: int) -> dict[str, Any]:
    """The dataset config's fields at ``level`` (seed and size left out), from the curriculum, as
    the library's own Python values (enums stay enums: ``word_sorting``'s transformation)."""
    from reasoning_gym.factory import create_curriculum
    from reasoning_gym.coaching.base_curriculum import DefaultCurriculumContext, RangeAttributeMode

    curriculum = create_curriculum(task)
    for name, attr in curriculum.attributes.items():
        curriculum.set_attr_level(name, min(level, len(attr.levels) - 1))
    config = curriculum.generate_configuration(
        {"seed": 0, "size": 1}, context=DefaultCurriculumContext(mode=RangeAttributeMode.UPPER_BOUND))
    return {k: v for k, v in vars(config).items() if k not in ("seed", "size")}


def level_config(task: str, level: int) -> str:
    """``level_fields`` as JSON (enums by value), the readable record each item carries."""
    return json.dumps(level_fields(task, level), sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else list(value)


@functools.lru_cache(maxsize=64)
def _dataset(task: str, level: int, seed: int, size: int) -> Any:
    from reasoning_gym.factory import create_dataset

    return create_dataset(task, seed=seed, size=size, **level_fields(task, level))


def bucket_name(task: str, level: int) -> str:
    return f"{task}:{level}"


class ReasoningGymTestbed(Testbed):
    """reasoning-gym tasks × difficulty levels as buckets (module docstring)."""

    config_class = ReasoningGymTestbedConfig
    task_kinds = ("prompt", "bucketed")
    default_trainer = "grpo"
    description = ("reasoning-gym tasks x difficulty levels (from its curricula); the engineer "
                   "edits per-level data shares.")

    proposal_model: ClassVar[type[BaseModel]] = ReasoningGymProposal
    proposal_space: BucketSpace = BucketSpace(buckets=("<task>:<level>",), unit="task level")
    """The kind the registry checks on the class; every instance replaces it with the buckets of its
    configured tasks and levels (they depend on the config, so the class cannot list them)."""
    report_layout: ClassVar[ReportLayout] = ReportLayout(
        rates=(ReportRate("accuracy", "accuracy", label="accuracy", column=False),),  # the score itself
        score="mean over the buckets of the share of answers scoring 1")
    """Reports draw the accuracy per task level (``accuracy/<task>/L<level>``)."""

    def __init__(self, config: ReasoningGymTestbedConfig | None = None, *, seed: int = 0) -> None:
        self.config = config or ReasoningGymTestbedConfig()
        self.seed = seed
        self.levels = {t: task_levels(t, self.config.max_levels) for t in self.config.tasks}
        self.bucket_groups = {t: tuple(bucket_name(t, level) for level in range(n)) for t, n in self.levels.items()}
        """Task → its buckets, easiest level first."""
        self.proposal_space = BucketSpace(buckets=tuple(b for bs in self.bucket_groups.values() for b in bs),
                                          unit="task level")
        self._where = {b: (t, level) for t, bs in self.bucket_groups.items() for level, b in enumerate(bs)}
        self._suites: dict[str, list[Task]] = {}
        self._held_out: frozenset[str] | None = None

    # -- proposal space -----------------------------------------------------------------------
    def _proposal(self, shares: dict[str, float]) -> ReasoningGymProposal:
        return ReasoningGymProposal(buckets={b: BucketShare(share=shares[b]) for b in self.proposal_space.buckets})

    def initial_proposal(self, rng: np.random.Generator) -> ReasoningGymProposal:
        buckets = self.proposal_space.buckets
        if self.config.initial == "random":
            return self.random_proposal(rng)
        if self.config.initial == "easiest":
            firsts = {bs[0] for bs in self.bucket_groups.values()}
            return self._proposal({b: (1.0 / len(firsts) if b in firsts else 0.0) for b in buckets})
        return self._proposal({b: 1.0 / len(buckets) for b in buckets})

    def random_proposal(self, rng: np.random.Generator) -> ReasoningGymProposal:
        draw = rng.dirichlet(np.ones(len(self.proposal_space.buckets)))
        return self._proposal({b: float(x) / float(draw.sum()) for b, x in zip(self.proposal_space.buckets, draw)})

    def project(self, raw: Any, previous: BaseModel) -> tuple[ReasoningGymProposal, list[Change]]:
        space = self.proposal_space
        prev = space.read(previous if isinstance(previous, BaseModel) else ReasoningGymProposal.model_validate(previous))
        buckets, changes = project_buckets(space, raw, prev)
        return self._proposal({b: v.share for b, v in buckets.items()}), changes

    # -- data and scoring ---------------------------------------------------------------------
    def _items(self, bucket: str, count: int, seed: int, prefix: str) -> list[Task]:
        task, level = self._where[bucket]
        data = _dataset(task, level, seed, count)
        config_json = level_config(task, level)
        out = []
        for i in range(count):
            entry = data[i]
            out.append(Task(
                id=f"{prefix}-{bucket}-{seed}-{i}",
                messages=[{"role": "user", "content": str(entry["question"]) + INSTRUCTION}],
                data={"task": task, "level": level, "config": config_json, "seed": seed, "size": count, "index": i,
                      "answer": None if entry["answer"] is None else str(entry["answer"])},
                features={"bucket": bucket, "task": task, "level": level},
            ))
        return out

    def _bucket_seed(self, base: int, bucket: str) -> int:
        return base + 1000 * self.proposal_space.buckets.index(bucket)

    def _distinct(self, bucket: str, count: int, seed: int, prefix: str, exclude: frozenset[str]) -> list[Task]:
        """The bucket's first ``count`` items from ``seed`` whose prompt is not in ``exclude``."""
        extra = 0
        for _ in range(10):
            items = self._items(bucket, count + extra, seed, prefix)
            kept = [t for t in items if self.canonical(t) not in exclude][:count]
            if len(kept) == count:
                return kept
            extra = 2 * extra + max(2, count - len(kept))
        distinct = len({self.canonical(t) for t in items})
        raise ValueError(f"bucket {bucket!r} cannot give {count} items whose prompts are outside the "
                         f"held-out suites: {len(items)} draws hold {distinct} distinct questions. Drop the "
                         "task or its level (max_levels), or set testbed.dedup=false")

    def held_out_keys(self) -> frozenset[str]:
        """Prompts (``canonical``) of every validation and test item: what training avoids."""
        if self._held_out is None:
            self._held_out = frozenset(self.canonical(t) for suite in self.eval_suites
                                       for t in self.eval_tasks(suite)) if self.config.dedup else frozenset()
        return self._held_out

    def sample(self, proposal: BaseModel, n: int, seed: int) -> list[Task]:
        shares = {b: v.share for b, v in self.proposal_space.read(proposal).items()}
        tasks: list[Task] = []
        held = self.held_out_keys()
        for bucket, count in allocate(shares, n).items():
            if count:
                tasks += self._distinct(bucket, count, self._bucket_seed(TRAIN_SEED_BASE + 1_000_003 * seed, bucket),
                                        "train", held)
        order = np.random.default_rng([seed, 0x5247]).permutation(len(tasks))
        return [tasks[i] for i in order]

    def score(self, task: Task, completion: Completion) -> tuple[float, dict[str, Any]]:
        d = task.data
        data = _dataset(d["task"], d["level"], d["seed"], d["size"])
        answered = answer_of(completion.text)
        boxed = "\\boxed{" in completion.text
        try:
            value = float(data.score_answer(answered, data[d["index"]]))
        except Exception as err:  # noqa: BLE001 - a dataset's verifier must not sink a round
            return 0.0, {"score": 0.0, "valid": False, "answered": boxed, "error": f"verifier raised {err!r}"}
        value = min(1.0, max(0.0, value))
        return value, {"score": value, "valid": value >= 1.0, "answered": boxed}

    def simulated_answer(self, task: Task, correct: bool, rng: np.random.Generator) -> str:
        """The simulated learner's text (``trainers/simulated.py``): the reference answer boxed
        when ``correct``; otherwise a wrong boxed answer, or (one time in five) no box at all."""
        if correct:
            return f"The answer is \\boxed{{{task.data['answer']}}}."
        if rng.random() < 0.2:
            return "I could not work this out."
        return "The answer is \\boxed{unknown}."

    def reference_answer(self, task: Task) -> str | None:
        """The item's answer boxed; ``None`` for open-ended tasks whose items have no single answer
        (``propositional_logic``: its verifier checks any valid conclusion)."""
        answer = task.data["answer"]
        return None if answer is None else f"\\boxed{{{answer}}}"

    def eval_tasks(self, suite: str = "validation") -> list[Task]:
        """One fixed held-out suite: ``eval_per_bucket`` items per bucket (module docstring)."""
        self.check_suite(suite)
        if suite not in self._suites:
            n = self.config.eval_per_bucket
            if suite == "validation":
                tasks = [t for b in self.proposal_space.buckets
                         for t in self._items(b, n, self._bucket_seed(self.config.eval_seed, b), "eval")]
            else:
                exclude = (frozenset(self.canonical(t) for t in self.eval_tasks("validation"))
                           if self.config.dedup else frozenset())
                tasks = [t for b in self.proposal_space.buckets
                         for t in self._distinct(b, n, self._bucket_seed(self.config.test_seed, b), "test", exclude)]
            self._suites[suite] = tasks
        return self._suites[suite]

    presets: ClassVar[tuple[Preset, ...]] = (
        Preset("reasoning_gym_cpu_demo.yaml", "cpu", trainer="grpo",
               summary="embedded 135M model, GRPO on reasoning-gym tasks"),
        Preset("reasoning_gym_qwen3_4b.yaml", "gpu", trainer="grpo",
               summary="Qwen3-4B at the MAPF paper's budget, 3 epochs per round"),
        Preset("reasoning_gym_simulated.yaml", "any", trainer="simulated",
               summary="the simulated learner: engineer benchmarks (not a model)"),
    )

    compare_configs: ClassVar[dict[str, str]] = {"simulated": "configs/reasoning_gym_simulated.yaml"}

    @classmethod
    def eval_budget(cls, config: BaseModel, default_max_new_tokens: int,
                    suite: str = "validation") -> tuple[int, int]:
        """``eval_per_bucket`` prompts for every (task, level), at the policy's completion budget."""
        levels = sum(task_levels(t, config.max_levels) for t in config.tasks)
        return config.eval_per_bucket * levels, default_max_new_tokens

    def evaluate(self, policy: Policy, *, seed: int = 0, suite: str = "validation") -> EvalReport:
        tasks = self.eval_tasks(suite)
        completions = policy.generate(tasks, seed=seed)
        verdicts = [self.score(t, c)[1] for t, c in zip(tasks, completions, strict=True)]
        return eval_report(tasks, completions, verdicts, self.bucket_groups).model_copy(update={"suite": suite})


OUTCOMES = ("correct", "partial", "wrong", "no_answer")
"""How one eval answer ended (``breakdown.buckets[bucket]`` counts each: ``correct``, the others
as ``failures``)."""


def _outcome(verdict: dict[str, Any]) -> str:
    if verdict["score"] >= 1.0:
        return "correct"
    if not verdict["answered"]:
        return "no_answer"
    return "partial" if verdict["score"] > 0 else "wrong"


def eval_report(tasks: Sequence[Task], completions: Sequence[Completion], verdicts: Sequence[dict[str, Any]],
                groups: dict[str, tuple[str, ...]]) -> EvalReport:
    """Metrics, per-bucket scores and the per-task, per-level failure breakdown (module docstring)."""
    outcomes: dict[str, list[str]] = {b: [] for bs in groups.values() for b in bs}
    for t, v in zip(tasks, verdicts, strict=True):
        outcomes[t.features["bucket"]].append(_outcome(v))
    scores = {b: sum(o == "correct" for o in os) / len(os) for b, os in outcomes.items() if os}
    keyed: dict[MetricKey, float] = {}
    for task, buckets in groups.items():
        seen = [b for b in buckets if b in scores]
        keyed[MetricKey("accuracy", task)] = float(np.mean([scores[b] for b in seen])) if seen else 0.0
        for b in buckets:
            if b in scores:
                keyed[MetricKey.for_bucket("accuracy", task, b)] = scores[b]
    counts = {b: OutcomeCounts(n=len(os), correct=os.count("correct"),
                               failures={k: os.count(k) for k in OUTCOMES if k != "correct"})
              for b, os in outcomes.items() if os}
    keyed[MetricKey("accuracy")] = float(np.mean(list(scores.values()))) if scores else 0.0
    keyed[MetricKey("mean_tokens")] = float(np.mean([c.num_tokens for c in completions])) if completions else 0.0
    metrics = dump_metrics(keyed)
    samples = [{"prompt": t.messages[-1]["content"][:300], "response": c.text[:300], "answer": t.data["answer"],
                **v} for t, c, v in list(zip(tasks, completions, verdicts, strict=True))[:3]]
    return EvalReport(score=metrics["accuracy"], metrics=metrics, samples=samples, bucket_scores=scores,
                      breakdown=EvalBreakdown(buckets=counts),
                      task_scores={t.id: float(_outcome(v) == "correct") for t, v in zip(tasks, verdicts)})
