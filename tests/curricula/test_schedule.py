"""``schedule``: stages by round, stages advanced by a rule, refused stages, and a run that follows it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from curriculum.core.records import RoundReport
from curriculum.core.types import EvalReport
from engineers.base import DesignContext
from engineers.schedule import ScheduleEngineer, ScheduleEngineerConfig, stage_rate
from testbeds.mapf_frozenlake.config import SIZES, SPACE, GeneratorConfig, project, uniform_config


class _Bed:
    """Just enough of a testbed: MAPF's bucket space and ``project``."""

    name = "mapf_frozenlake"
    proposal_space = SPACE

    @staticmethod
    def project(raw, previous):
        return project(raw, previous)


def _stage(*shares: float, hole: float = 0.2) -> dict:
    """A full MAPF proposal with these shares on 3x3, 4x4, ... (the rest 0)."""
    padded = list(shares) + [0.0] * (len(SIZES) - len(shares))
    return {"sizes": {s: {"data_ratio": d, "hole_ratio": hole, "wait_ratio": 0.0} for s, d in zip(SIZES, padded)}}


EASY, MIDDLE, HARD = _stage(1.0), _stage(0.0, 0.5, 0.5), _stage(0.0, 0.0, 0.0, 1.0)


def _report(index: int, proposal: dict, rates: dict[str, float], score: float = 0.0) -> RoundReport:
    return RoundReport(round=index, proposal=proposal, train_metrics={},
                       eval=EvalReport(score=score, metrics={}, bucket_scores=rates))


def _run(engineer: ScheduleEngineer, rates_per_round: list[dict[str, float]]) -> list[dict]:
    """Design after each round, each round evaluated with the next ``rates``; returns the raw
    proposals handed out (round 1 onwards)."""
    proposal = uniform_config()
    engineer.on_run_start(_Bed(), proposal)
    history, handed = [], []
    for index, rates in enumerate(rates_per_round):
        history.append(_report(index, proposal.model_dump(mode="json"), rates))
        design = engineer.design(DesignContext(round=index, total_rounds=len(rates_per_round) + 1,
                                               history=history, proposal=proposal, testbed=_Bed(),
                                               rng=np.random.default_rng(index)))
        handed.append(design.raw)
        proposal, _ = project(design.raw, proposal)
        state = json.loads(json.dumps(engineer.state_dict()))
        engineer = ScheduleEngineer(engineer.config)  # a resumed run: only the saved state carries over
        engineer.load_state_dict(state)
    return handed


def test_one_stage_per_round_and_the_last_repeats():
    engineer = ScheduleEngineer(ScheduleEngineerConfig(stages=[EASY, MIDDLE, HARD]))
    assert _run(engineer, [{}] * 5) == [EASY, MIDDLE, HARD, HARD, HARD]


def test_rule_advances_when_the_stage_buckets_pass_the_threshold():
    config = ScheduleEngineerConfig(stages=[EASY, MIDDLE, HARD], advance_at=0.6)
    # Round 1 trains EASY (3x3 at 0.5: stay), round 2 EASY (0.7: advance), round 3 MIDDLE: 4x4
    # and 5x5 at 0.9 and 0.2 average 0.55 (stay), round 4 MIDDLE at 0.65 (advance).
    rates = [{}, {"3x3": 0.5, "4x4": 0.9}, {"3x3": 0.7}, {"4x4": 0.9, "5x5": 0.2},
             {"4x4": 0.9, "5x5": 0.4}, {}]
    assert _run(ScheduleEngineer(config), rates) == [EASY, EASY, MIDDLE, MIDDLE, HARD, HARD]


def test_rule_moves_on_after_max_rounds_per_stage():
    config = ScheduleEngineerConfig(stages=[EASY, MIDDLE, HARD], advance_at=0.9, max_rounds_per_stage=2)
    assert _run(ScheduleEngineer(config), [{"3x3": 0.1}] * 6) == [EASY, EASY, MIDDLE, MIDDLE, HARD, HARD]


def test_stage_rate_weights_the_trained_buckets_by_share_and_falls_back_to_the_score():
    report = _report(1, MIDDLE, {"3x3": 1.0, "4x4": 0.8, "5x5": 0.2}, score=0.3)
    assert stage_rate(report, _Bed(), "stage_buckets") == pytest.approx(0.5)
    assert stage_rate(report, _Bed(), "score") == pytest.approx(0.3)
    assert stage_rate(_report(1, HARD, {"3x3": 1.0}, score=0.3), _Bed(), "stage_buckets") == pytest.approx(0.3)


def test_no_stages_keeps_the_current_proposal():
    handed = _run(ScheduleEngineer(ScheduleEngineerConfig()), [{}] * 2)
    assert handed == [uniform_config().model_dump(mode="json")] * 2


def test_a_stage_may_leave_out_what_stays():
    partial = {"sizes": {"6x6": {"hole_ratio": 0.4}}}
    engineer = ScheduleEngineer(ScheduleEngineerConfig(stages=[partial]))
    handed = _run(engineer, [{}])
    applied, _ = project(handed[0], uniform_config())
    assert applied.sizes["6x6"].hole_ratio == 0.4
    assert applied.sizes["3x3"] == uniform_config().sizes["3x3"]


def test_a_stage_the_testbed_cannot_read_is_refused_at_run_start():
    engineer = ScheduleEngineer(ScheduleEngineerConfig(stages=[EASY, {"levels": {"gcd:1": 1.0}}]))
    with pytest.raises(ValueError, match=r"engineer.stages\[1\] is not a proposal of testbed mapf_frozenlake"):
        engineer.on_run_start(_Bed(), uniform_config())


def test_config_refuses_empty_stages():
    with pytest.raises(ValidationError, match="stages"):
        ScheduleEngineerConfig(stages=[EASY, {}])


def test_a_run_trains_each_round_on_its_stage(tmp_path):
    from curriculum.config import load_config
    from curriculum.loop import run

    stages = json.dumps([EASY, HARD])
    config = load_config(None, [
        "trainer.name=simulated", "testbed.name=mapf_frozenlake", "engineer.name=schedule",
        f"engineer.stages={stages}", "rounds=3", "tasks_per_round=16", "testbed.eval_agents=[2]",
        "testbed.eval_instances_per_size=1", f"output_dir={tmp_path}", "run_name=schedule"])
    result = run(config)
    trained = [GeneratorConfig.model_validate(r.proposal) for r in result.history]
    assert trained[1] == GeneratorConfig.model_validate(EASY)
    assert trained[2] == GeneratorConfig.model_validate(HARD)
