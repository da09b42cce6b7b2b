"""The frontier baseline's rules."""

from __future__ import annotations

import pytest

from engineers.frontier import FrontierEngineerConfig, frontier_proposal, valid_rate_by_size
from testbeds.mapf_frozenlake.config import SIZES, uniform_config


def test_valid_rate_by_size_averages_agent_counts():
    m = {"valid_rate/3agents/5x5": 0.6, "valid_rate/4agents/5x5": 0.2, "valid_rate/3agents": 0.9,
         "optimal_rate/3agents/5x5": 0.1}
    assert valid_rate_by_size(m) == {"5x5": pytest.approx(0.4)}


def test_rules():
    cfg = FrontierEngineerConfig()
    prop = uniform_config(0.2, 0.3).model_dump(mode="json")
    rates = {"3x3": 0.95, "4x4": 0.5, "5x5": 0.3, "6x6": 0.1, "7x7": 0.05, "8x8": 0.0, "9x9": 0.0, "10x10": 0.0}
    raw, rule = frontier_proposal(prop, rates, cfg)
    assert rule["3x3"] == "mastered" and rule["4x4"] == rule["5x5"] == "frontier" and rule["6x6"] == "next"
    d = {s: raw["sizes"][s]["data_ratio"] for s in SIZES}
    assert sum(d.values()) == pytest.approx(1.0)
    assert d["4x4"] == d["5x5"] == pytest.approx(2 * d["6x6"]) and d["4x4"] == pytest.approx(50 * d["3x3"])
    assert d["4x4"] / sum(d.values()) > 0.35
    assert raw["sizes"]["3x3"]["hole_ratio"] == pytest.approx(0.3)   # mastered: harder
    assert raw["sizes"]["3x3"]["wait_ratio"] == pytest.approx(0.5)
    assert raw["sizes"]["4x4"]["hole_ratio"] == pytest.approx(0.2)   # frontier: unchanged
    assert raw["sizes"]["7x7"]["hole_ratio"] == pytest.approx(0.15)  # hopeless: easier
    assert raw["sizes"]["7x7"]["wait_ratio"] == pytest.approx(0.2)


def test_no_size_in_band_moves_budget_to_the_next_frontier():
    cfg = FrontierEngineerConfig()
    prop = uniform_config().model_dump(mode="json")
    raw, rule = frontier_proposal(prop, {s: 0.0 for s in SIZES}, cfg)
    assert rule["3x3"] == "next"
    assert raw["sizes"]["3x3"]["data_ratio"] == pytest.approx(1 / (1 + 7 * cfg.floor_weight))


def test_band_must_be_ordered():
    with pytest.raises(ValueError):
        FrontierEngineerConfig(low=0.8, high=0.2)
