"""The frontier baseline's rules, on MAPF-FrozenLake's declared bucket space and on a made-up one."""

from __future__ import annotations

import pytest

from curriculum.core.spaces import Bucket, BucketSpace, Knob
from engineers.frontier import FrontierEngineerConfig, frontier_proposal
from testbeds.mapf_frozenlake.config import SIZES, SPACE, uniform_config
from testbeds.mapf_frozenlake.suites import FailureBreakdown, SizeBreakdown, SuiteBreakdown, bucket_scores


def _run(rates, proposal=None, **cfg):
    current = SPACE.read(proposal or uniform_config(0.2, 0.3))
    buckets, rule = frontier_proposal(SPACE, current, rates, FrontierEngineerConfig(**cfg))
    return SPACE.write(buckets), rule


def test_bucket_scores_average_the_agent_counts():
    def suite(k, rate):
        size = SizeBreakdown(n=2, valid_rate=rate, optimal_rate=0.0, failures={}, mean_tokens=1.0)
        return SuiteBreakdown(agents=k, sizes={"5x5": size}, n=2, valid_rate=rate, optimal_rate=0.0,
                              failures={}, mean_tokens=1.0)

    b = FailureBreakdown(suites={"3agents": suite(3, 0.6), "4agents": suite(4, 0.2)})
    assert bucket_scores(b) == {"5x5": pytest.approx(0.4)}


def test_rules():
    rates = {"3x3": 0.95, "4x4": 0.5, "5x5": 0.3, "6x6": 0.1, "7x7": 0.05, "8x8": 0.0, "9x9": 0.0, "10x10": 0.0}
    raw, rule = _run(rates)
    assert rule["3x3"] == "mastered" and rule["4x4"] == rule["5x5"] == "frontier" and rule["6x6"] == "next"
    d = {s: raw["sizes"][s]["data_ratio"] for s in SIZES}
    assert sum(d.values()) == pytest.approx(1.0)
    assert d["4x4"] == d["5x5"] == pytest.approx(2 * d["6x6"]) and d["4x4"] == pytest.approx(50 * d["3x3"])
    assert d["4x4"] / sum(d.values()) > 0.35
    assert raw["sizes"]["3x3"]["hole_ratio"] == pytest.approx(0.3)   # mastered: harder by the declared steps
    assert raw["sizes"]["3x3"]["wait_ratio"] == pytest.approx(0.5)
    assert raw["sizes"]["4x4"]["hole_ratio"] == pytest.approx(0.2)   # frontier: unchanged
    assert raw["sizes"]["7x7"]["hole_ratio"] == pytest.approx(0.15)  # hopeless: easier by half a step
    assert raw["sizes"]["7x7"]["wait_ratio"] == pytest.approx(0.2)


def test_no_size_in_band_moves_budget_to_the_next_frontier():
    raw, rule = _run({s: 0.0 for s in SIZES}, uniform_config())
    assert rule["3x3"] == "next"
    assert raw["sizes"]["3x3"]["data_ratio"] == pytest.approx(1 / (1 + 7 * FrontierEngineerConfig().floor_weight))


def test_any_bucket_space_with_knobs_that_get_harder_downward():
    """A space that is not MAPF's: datasets as buckets, one knob where lower is harder."""
    space = BucketSpace(buckets=("easy", "mid", "hard"), container="datasets",
                        knobs=(Knob(name="tolerance", low=0.0, high=1.0, harder="lower", step=0.25),))
    current = {b: Bucket(share=1 / 3, knobs={"tolerance": 0.5}) for b in space.buckets}
    buckets, rule = frontier_proposal(space, current, {"easy": 0.9, "mid": 0.5, "hard": 0.0},
                                      FrontierEngineerConfig(step_scale=2.0))
    assert rule == {"easy": "mastered", "mid": "frontier", "hard": "next"}
    assert buckets["easy"].knobs["tolerance"] == 0.0       # harder = lower, by 2 x 0.25, clipped at 0
    assert buckets["hard"].knobs["tolerance"] == 0.75      # easier by half of that
    assert space.read(space.write(buckets)) == buckets


def test_band_must_be_ordered():
    with pytest.raises(ValueError):
        FrontierEngineerConfig(low=0.8, high=0.2)
