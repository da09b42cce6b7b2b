"""``schedule``: a declared, hand-written sequence of proposals (a curriculum written in advance).

Users of GRPO trainers write such schedules by hand ("first the small maps, then the large
ones"); here it is the positive control a harness must be able to rank first where a curriculum
matters. ``stages`` lists proposals in the testbed's own JSON (MAPF: ``{"sizes": {"3x3":
{"data_ratio": ..., ...}, ...}}``). Round 0 trains on the testbed's ``initial_proposal``; the
design after round r hands round r+1 a stage:

* **By round** (``advance_at`` unset): stage r, so ``stages[0]`` trains round 1, ``stages[1]``
  round 2, ...; once the list is used up its last stage repeats.
* **By rule** (``advance_at`` set): the run stays on a stage until the last eval's success rate
  reaches ``advance_at`` (``advance_on``: ``stage_buckets`` = the share-weighted
  ``EvalReport.bucket_scores`` of the buckets the stage trains on; ``score`` = the eval's
  scalar score), or until it has trained ``max_rounds_per_stage`` rounds on it; then it moves one
  stage on. The last stage repeats.

A stage may leave out what stays as it was: the testbed's ``project`` fills a missing field from
the proposal before, as it does for every engineer. A stage that ``project`` cannot read at all
(no field of the testbed's proposal) is refused when the run starts, naming the stage. With no
stages the engineer keeps the current proposal (the ``fixed`` baseline).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue, field_validator

from curriculum.core.config import PluginConfig
from curriculum.core.records import Design, RoundReport
from curriculum.core.spaces import ANY, BucketSpace
from engineers.base import DesignContext, Engineer
from testbeds.base import Testbed


class ScheduleEngineerConfig(PluginConfig):
    """The stages of the schedule and, optionally, the rule that advances them."""

    name: Literal["schedule"]
    """Selects this engineer."""
    stages: list[dict[str, JsonValue]] = Field(default_factory=list)
    """Proposals in the testbed's JSON, one per stage, in order; the last one repeats. Empty: keep
    the current proposal every round."""
    advance_at: float | None = Field(None, ge=0.0, le=1.0)
    """``None``: one stage per round. Otherwise move to the next stage once the last eval's
    success rate (``advance_on``) reaches this value."""
    advance_on: Literal["stage_buckets", "score"] = "stage_buckets"
    """What ``advance_at`` is compared with: the share-weighted success rate of the buckets the
    stage trains on (bucket spaces), or the eval's scalar score."""
    max_rounds_per_stage: int | None = Field(None, ge=1)
    """With ``advance_at``: move on after this many rounds on a stage even below the threshold
    (``None``: stay until the threshold is reached)."""

    @field_validator("stages")
    @classmethod
    def _objects(cls, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        empty = [i for i, stage in enumerate(stages) if not stage]
        if empty:
            raise ValueError(f"stages {empty} are empty; write each stage as a proposal of the testbed")
        return stages


class ScheduleEngineer(Engineer):
    """Hands each round the next stage of a declared schedule (see the module docstring)."""

    config_class = ScheduleEngineerConfig
    fits = (ANY,)
    description = ("A declared hand-written sequence of proposals, one per round or advanced when the "
                   "eval passes a threshold.")

    config: ScheduleEngineerConfig

    def __init__(self, config: ScheduleEngineerConfig, *, run_dir: str | None = None) -> None:
        super().__init__(config, run_dir=run_dir)
        self.stage = -1
        """Index of the stage the last design handed out (-1: none yet)."""
        self.rounds_on_stage = 0
        """Rounds trained on that stage so far (rule mode)."""

    def on_run_start(self, testbed: Testbed, initial_proposal: BaseModel) -> None:
        previous = initial_proposal
        for index, stage in enumerate(self.config.stages):
            projected, changes = testbed.project(stage, previous)
            rejected = next((c for c in changes if c.path == ""), None)
            if rejected is not None:
                raise ValueError(f"engineer.stages[{index}] is not a proposal of testbed "
                                 f"{testbed.name}: {rejected.reason}")
            previous = projected

    def design(self, ctx: DesignContext) -> Design:
        if not self.config.stages:
            return Design(raw=ctx.proposal.model_dump(mode="json"), notes={"stage": None},
                          diagnostics={"stage": None})
        reached = self._reached(ctx)
        self.stage, self.rounds_on_stage = self._next_stage(ctx.round, reached)
        stage = self.config.stages[self.stage]
        return Design(raw=stage, notes={"stage": self.stage, "stages": len(self.config.stages)},
                      diagnostics={"stage": self.stage, "advance_rate": reached})

    def _next_stage(self, round_index: int, rate: float | None) -> tuple[int, int]:
        """(stage for the next round, rounds it will have trained on that stage)."""
        last = len(self.config.stages) - 1
        if self.config.advance_at is None:
            return min(round_index, last), 1
        if self.stage < 0:
            return 0, 1
        cap = self.config.max_rounds_per_stage
        advance = (rate is not None and rate >= self.config.advance_at) or (
            cap is not None and self.rounds_on_stage >= cap)
        if advance and self.stage < last:
            return self.stage + 1, 1
        return self.stage, self.rounds_on_stage + 1

    def _reached(self, ctx: DesignContext) -> float | None:
        """The success rate ``advance_at`` is compared with, from the last round's eval (``None``:
        no rule, or no stage handed out yet)."""
        if self.config.advance_at is None or self.stage < 0 or not ctx.history:
            return None
        return stage_rate(ctx.history[-1], ctx.testbed, self.config.advance_on)

    def state_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "rounds_on_stage": self.rounds_on_stage}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stage = int(state.get("stage", -1))
        self.rounds_on_stage = int(state.get("rounds_on_stage", 0))


def stage_rate(report: RoundReport, testbed: Testbed, advance_on: str) -> float:
    """The round's eval score, or (``stage_buckets`` on a bucket space) the success rate of the
    buckets the round trained on, weighted by their shares; buckets the eval did not cover are
    left out (none covered: the eval score)."""
    space = testbed.proposal_space
    if advance_on == "score" or not isinstance(space, BucketSpace):
        return float(report.eval.score)
    shares = {b: bucket.share for b, bucket in space.read(report.proposal).items()
              if bucket.share > 0 and b in report.eval.bucket_scores}
    total = sum(shares.values())
    if total <= 0:
        return float(report.eval.score)
    return sum(share * report.eval.bucket_scores[b] for b, share in shares.items()) / total
