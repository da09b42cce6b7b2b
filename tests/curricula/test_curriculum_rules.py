"""The rules of ``learnability``, ``rlve`` and ``plr`` on hand-made histories (MAPF space)."""

from __future__ import annotations

import numpy as np
import pytest

from curriculum.core.bucket_stats import bucket_metrics
from curriculum.core.buckets import BucketSpace, bucket_train_stats, space_of
from curriculum.core.records import RoundReport
from curriculum.core.types import EvalReport
from engineers.base import DesignContext
from engineers.learnability import (LearnabilityEngineer, LearnabilityEngineerConfig, estimate_success,
                                    learnability_shares)
from engineers.plr import PLREngineer, PLREngineerConfig, plr_shares, replay_distribution
from engineers.rlve import RLVEEngineer, RLVEEngineerConfig, Window, replay_windows, update_window
from testbeds.mapf_frozenlake.config import SIZES, SPACE, uniform_config


class _Bed:
    """Just enough of a testbed for the engineers: MAPF's declared bucket space."""

    name = "mapf_frozenlake"
    proposal_space = SPACE


def _report(i: int, valid: dict[str, float], train: dict[str, float] | None = None) -> RoundReport:
    return RoundReport(round=i, proposal=uniform_config().model_dump(mode="json"), train_metrics=train or {},
                       eval=EvalReport(score=0.0, metrics={}, bucket_scores=valid))


def _ctx(history, seed=0):
    return DesignContext(round=len(history) - 1, total_rounds=5, history=history, proposal=uniform_config(),
                         testbed=_Bed(), rng=np.random.default_rng(seed))


def _shares(design) -> dict[str, float]:
    return {s: v["data_ratio"] for s, v in design.raw["sizes"].items()}


# -- learnability --------------------------------------------------------------------------------

def test_learnability_moves_budget_to_the_bucket_at_one_half():
    rates = {s: 1.0 for s in SIZES} | {"6x6": 0.5, "7x7": 0.0}
    design = LearnabilityEngineer(LearnabilityEngineerConfig(exploration=0.0)).design(_ctx([_report(0, rates)]))
    shares = _shares(design)
    assert shares["6x6"] == pytest.approx(1.0)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_learnability_share_is_proportional_to_p_one_minus_p_plus_floor():
    p = {"a": 0.5, "b": 0.1, "c": 1.0, "d": 0.0}
    shares = learnability_shares(p, exploration=0.2, temperature=1.0)
    total = 0.25 + 0.09
    assert shares["a"] == pytest.approx(0.8 * 0.25 / total + 0.05)
    assert shares["b"] == pytest.approx(0.8 * 0.09 / total + 0.05)
    assert shares["c"] == pytest.approx(0.05) and shares["d"] == pytest.approx(0.05)
    assert learnability_shares({"a": 1.0, "b": 0.0}, 0.1, 1.0) == {"a": 0.5, "b": 0.5}


def test_learnability_estimate_is_a_moving_average_with_a_prior():
    est = estimate_success([{"a": 0.0}, {"a": 1.0, "b": 0.4}], ["a", "b", "c"], smoothing=0.25, prior=0.5)
    assert est == {"a": pytest.approx(0.25), "b": pytest.approx(0.4), "c": 0.5}


def test_learnability_measures_buckets_the_eval_does_not_cover_through_training():
    """A CPU eval covers 3x3-5x5 only: the big sizes' training success (0 here) must replace the
    1/2 prior, else they keep the largest p(1-p) and the budget goes where nothing is learned."""
    small = {"3x3": 0.5, "4x4": 0.2, "5x5": 0.1}
    big = [s for s in SIZES if s not in small]
    train = {f"bucket/{s}/{k}": v for s in big for k, v in (("count", 8.0), ("success", 0.0))}
    train |= {"bucket/3x3/count": 8.0, "bucket/3x3/success": 1.0}  # the eval's value wins for 3x3
    design = LearnabilityEngineer(LearnabilityEngineerConfig(exploration=0.0)).design(
        _ctx([_report(0, small, train)]))
    shares = _shares(design)
    assert shares["3x3"] == pytest.approx(0.25 / (0.25 + 0.16 + 0.09))
    assert all(shares[s] == pytest.approx(0.0) for s in big)
    # Too few training samples in a bucket: it is not observed and keeps the prior.
    sparse = {k: (1.0 if k.endswith("/count") else v) for k, v in train.items()}
    shares = _shares(LearnabilityEngineer(LearnabilityEngineerConfig(exploration=0.0)).design(
        _ctx([_report(0, small, sparse)])))
    assert shares["10x10"] > shares["4x4"]


# -- rlve ----------------------------------------------------------------------------------------

def test_rlve_window_slides_only_past_threshold_with_enough_samples():
    cfg = RLVEEngineerConfig()
    w = update_window(Window(), count=7, success=1.0, levels=8, config=cfg)
    assert (w.low, w.high, w.samples) == (0, 0, 7)            # 7 < 8 samples: no slide yet
    w = update_window(w, count=1, success=1.0, levels=8, config=cfg)
    assert (w.low, w.high, w.samples, w.correct) == (0, 1, 0, 0)  # 8 samples at 100%: slide, reset
    w = update_window(w, count=20, success=0.85, levels=8, config=cfg)
    assert w.high == 1                                          # 85% < 90%
    for _ in range(3):
        w = update_window(Window(low=w.low, high=w.high), count=8, success=0.95, levels=8, config=cfg)
    assert (w.low, w.high) == (1, 4)                            # width 4 caps the window
    top = update_window(Window(low=4, high=7), count=100, success=1.0, levels=8, config=cfg)
    assert (top.low, top.high) == (4, 7)                        # nowhere higher to go


def test_rlve_design_budgets_the_window_evenly():
    stats = bucket_metrics(["3x3"] * 8, list(range(8)), [1.0] * 8)
    history = [_report(0, {}, stats), _report(1, {}, bucket_metrics(["4x4"] * 8, list(range(8)), [1.0] * 8))]
    design = RLVEEngineer(RLVEEngineerConfig()).design(_ctx(history))
    shares = _shares(design)
    assert shares["3x3"] == shares["4x4"] == shares["5x5"] == pytest.approx(1 / 3)
    assert all(shares[s] == 0 for s in SIZES[3:])
    windows = replay_windows([bucket_train_stats(r.train_metrics) for r in history], {"all": SIZES}, RLVEEngineerConfig())
    assert (windows["all"].low, windows["all"].high) == (0, 2)


# -- plr -----------------------------------------------------------------------------------------

def test_plr_rank_prioritisation_and_staleness_match_the_paper():
    scores = {"a": 0.4, "b": 0.1, "c": 0.2}
    last = {"a": 2, "b": 0, "c": 2}
    p = replay_distribution(scores, last, now=3, temperature=1.0, staleness=0.5)
    h = {"a": 1.0, "c": 0.5, "b": 1 / 3}
    stale = {"a": 1.0, "b": 3.0, "c": 1.0}
    for b in scores:
        assert p[b] == pytest.approx(0.5 * h[b] / sum(h.values()) + 0.5 * stale[b] / 5.0)
    assert sum(p.values()) == pytest.approx(1.0)
    sharp = replay_distribution(scores, last, now=3, temperature=0.1, staleness=0.0)
    assert sharp["a"] > 0.99


def test_plr_unseen_buckets_get_the_new_level_share():
    space = BucketSpace(buckets=("a", "b", "c", "d"))
    shares = plr_shares(space, {"a": 0.3}, {"a": 0}, 1, PLREngineerConfig())
    assert shares["a"] == pytest.approx(0.25)
    assert shares["b"] == shares["c"] == shares["d"] == pytest.approx(0.25)


def test_plr_scores_by_group_reward_spread_and_mutates_the_best_bucket():
    # 5x5's groups split (spread 0.5); 3x3's all agree (spread 0): 5x5 is the level to replay.
    train = bucket_metrics(["3x3"] * 4 + ["5x5"] * 4, [0, 0, 1, 1, 2, 2, 3, 3], [1, 1, 1, 1, 1, 0, 0, 1])
    cfg = PLREngineerConfig(mutate_top=1, harder_prob=1.0, staleness=0.0)
    design = PLREngineer(cfg).design(_ctx([_report(0, {}, train)]))
    shares = _shares(design)
    assert design.notes["scores"] == {"3x3": 0.0, "5x5": 0.5}
    assert shares["5x5"] > shares["3x3"]
    assert sum(shares.values()) == pytest.approx(1.0)
    knobs = design.raw["sizes"]["5x5"]
    assert knobs["hole_ratio"] == pytest.approx(0.3) and knobs["wait_ratio"] == pytest.approx(0.2)
    assert design.raw["sizes"]["3x3"]["hole_ratio"] == pytest.approx(0.2)   # not mutated


def test_plr_without_knobs_mutates_to_the_neighbour_level():
    from engineers.plr import mutate
    from curriculum.core.buckets import Bucket

    space = BucketSpace(buckets=("t:0", "t:1", "t:2"))
    buckets = {b: Bucket(share=s) for b, s in zip(space.buckets, (0.2, 0.6, 0.2))}
    edits = mutate(space, {"t": space.buckets}, buckets, ["t:1"], PLREngineerConfig(harder_prob=1.0),
                   np.random.default_rng(0))
    assert buckets["t:1"].share == pytest.approx(0.3) and buckets["t:2"].share == pytest.approx(0.5)
    assert "t:2" in edits["t:1"]


def test_bucket_metrics_spread_is_the_group_std():
    m = bucket_metrics(["a", "a", "a", "a"], [0, 0, 1, 1], [1.0, 0.0, 0.0, 0.0])
    assert m == {"zero_spread_share": 0.5, "bucket/a/count": 4.0, "bucket/a/success": 0.25, "bucket/a/spread": 0.25}


def test_engineers_refuse_a_testbed_without_a_bucket_space():
    class Pool:
        name = "spade_pool"

    with pytest.raises(ValueError, match="declares no bucket proposal space"):
        space_of(Pool())


def test_bucket_metrics_count_the_groups_without_reward_spread():
    m = bucket_metrics(["a"] * 6, [0, 0, 1, 1, 2, 2], [1.0, 1.0, 0.0, 1.0, 0.3, 0.3])
    assert m["zero_spread_share"] == pytest.approx(2 / 3)
