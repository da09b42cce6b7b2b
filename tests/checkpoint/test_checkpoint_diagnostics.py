"""Edit granularity, frontier movement and summary/F consistency."""

from __future__ import annotations

import pytest
from checkpoint_fakes import config_json, fixed_breakdown

from engineers.checkpoint.diagnostics import (
    edit_granularity,
    frontier_groups,
    frontier_groups_of,
    frontier_movement,
    summary_claims,
    summary_consistency,
)
from curriculum.core.spaces import BucketSpace
from engineers.checkpoint.context import valid_rates_by_size
from testbeds.mapf_frozenlake.config import SIZES, SPACE

ORDER = list(SIZES)


def test_edit_granularity_local_global_none():
    before = config_json([0.125] * 8, hole=0.2)
    same = config_json([0.13] * 8, hole=0.21)
    assert edit_granularity(before, same) == {"count": 0, "cells": [], "buckets": [], "scope": "none"}
    local = config_json([0.125] * 8, hole=0.2)
    local["sizes"]["6x6"]["hole_ratio"] = 0.05
    local["sizes"]["6x6"]["wait_ratio"] = 0.5
    local["sizes"]["7x7"]["data_ratio"] = 0.4
    g = edit_granularity(before, local)
    assert g["count"] == 3 and g["buckets"] == ["6x6", "7x7"] and g["scope"] == "local"
    assert ["6x6", "hole_ratio"] in g["cells"]
    wide = config_json([0.125] * 8, hole=0.4)
    assert edit_granularity(before, wide)["scope"] == "global"
    assert edit_granularity(before, wide, local_max_sizes=8)["scope"] == "local"
    assert edit_granularity(before, None)["scope"] == "none"
    partial = {"sizes": {"5x5": {"data_ratio": 0.9}}}  # missing cells are not edits
    assert edit_granularity(before, partial)["cells"] == [["5x5", "data_ratio"]]


def test_frontier_groups_at_the_50_percent_crossing():
    valid = {"3x3": 1.0, "4x4": 0.9, "5x5": 0.6, "6x6": 0.3, "7x7": 0.1, "8x8": 0.0}
    assert frontier_groups(valid, ORDER) == {"below": ["3x3", "4x4"], "at": ["5x5", "6x6"],
                                              "above": ["7x7", "8x8"]}
    assert frontier_groups({"3x3": 0.9, "4x4": 0.8}, ORDER)["at"] == ["4x4"]
    assert frontier_groups({"3x3": 0.1, "4x4": 0.0}, ORDER) == {"below": [], "at": ["3x3"], "above": ["4x4"]}
    bumpy = frontier_groups({"3x3": 0.2, "4x4": 0.7, "5x5": 0.1}, ORDER)
    assert bumpy["at"] == ["3x3", "4x4", "5x5"]
    assert frontier_groups({}, ORDER) == {"below": [], "at": [], "above": []}


def test_frontier_movement_masses():
    before = config_json([0.125] * 8, hole=0.3, wait=0.4)
    after = config_json([0.05, 0.05, 0.3, 0.3, 0.1, 0.1, 0.05, 0.05], hole=0.3, wait=0.4)
    after["sizes"]["3x3"]["hole_ratio"] = 0.1  # 3x3: valid 100% -> no signal
    after["sizes"]["9x9"]["wait_ratio"] = 0.0  # 9x9: valid 0% -> no signal
    m = frontier_movement(valid_rates_by_size(fixed_breakdown()), before, after, SPACE)
    assert m["groups"]["at"] == ["5x5", "6x6"]
    assert m["mass_before"] == {"below": 0.25, "at": 0.25, "above": 0.5}
    assert m["mass_after"] == {"below": 0.1, "at": 0.6, "above": 0.3}
    assert m["mass_delta"]["at"] == pytest.approx(0.35)
    assert m["no_signal_buckets"] == ["3x3", "8x8", "9x9", "10x10"]
    assert m["eased_on_no_signal"] == [["3x3", "hole_ratio"], ["9x9", "wait_ratio"]]


def test_summary_claims_and_negation():
    claims = summary_claims("I have mastered 3x3 and 4×4. Size 8 is hard; 6x6 is not easy.")
    assert [(c["bucket"], c["claim"]) for c in claims] == [("3x3", "mastered"), ("4x4", "mastered"),
                                                         ("8x8", "hard"), ("6x6", "hard")]
    assert summary_claims("The 3x4 map is easy.") == []


def test_summary_contradicting_f_is_flagged():
    f = valid_rates_by_size(fixed_breakdown())
    ok = summary_consistency("3x3 is mastered. 8x8 is still too hard.", f)
    assert ok["checked"] and not ok["contradicts"] and len(ok["claims"]) == 2
    bad = summary_consistency("I mastered 7x7 now. 4x4 is hard for me.", f)
    assert bad["contradicts"]
    assert [(c["bucket"], c["rate"]) for c in bad["contradictions"]] == [("7x7", 0.1), ("4x4", 0.9)]
    assert summary_consistency(None, f) == {"checked": False, "reason": "no summary", "claims": [],
                                            "contradictions": [], "contradicts": False}


# -- a bucket space with several groups (reasoning_gym's task x level) --------------------------------

RG_SPACE = BucketSpace(buckets=("gcd:0", "gcd:1", "gcd:2", "chain_sum:0", "chain_sum:1"), unit="task level")
RG_GROUPS = {"gcd": ("gcd:0", "gcd:1", "gcd:2"), "chain_sum": ("chain_sum:0", "chain_sum:1")}
RG_RATES = {"gcd:0": 1.0, "gcd:1": 0.625, "gcd:2": 0.125, "chain_sum:0": 0.25, "chain_sum:1": 0.0}


def _shares(*values: float) -> dict:
    return {"buckets": {b: {"share": v} for b, v in zip(RG_SPACE.buckets, values)}}


def test_frontier_is_found_per_group_and_masses_use_the_share_key():
    assert frontier_groups_of(RG_RATES, RG_GROUPS) == {
        "below": ["gcd:0"], "at": ["gcd:1", "gcd:2", "chain_sum:0"], "above": ["chain_sum:1"]}
    m = frontier_movement(RG_RATES, _shares(0.2, 0.2, 0.2, 0.2, 0.2), _shares(0.05, 0.4, 0.25, 0.3, 0.0),
                          RG_SPACE, RG_GROUPS)
    assert m["mass_before"] == {"below": 0.2, "at": 0.6, "above": 0.2}
    assert m["mass_after"] == {"below": 0.05, "at": 0.95, "above": 0.0}
    assert m["no_signal_buckets"] == ["gcd:0", "chain_sum:1"] and m["eased_on_no_signal"] == []


def test_edits_and_summary_claims_name_buckets_and_tasks():
    g = edit_granularity(_shares(0.2, 0.2, 0.2, 0.2, 0.2), {"buckets": {"gcd:1": {"share": 0.5}}},
                         container="buckets")
    assert g == {"count": 1, "cells": [["gcd:1", "share"]], "buckets": ["gcd:1"], "scope": "local"}
    check = summary_consistency("gcd:0 is mastered. chain_sum is easy now.", RG_RATES, RG_GROUPS)
    assert [(c["bucket"], c["claim"]) for c in check["claims"]] == [("gcd:0", "mastered"), ("chain_sum", "mastered")]
    assert check["contradictions"] == [{"bucket": "chain_sum", "claim": "mastered", "rate": 0.125}]
