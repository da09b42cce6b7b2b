"""Proposal space: bounds, validation, random cold start, and ``project`` on any JSON value."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from testbeds.mapf_frozenlake.config import (BOUNDS, FIELDS, SIZES, GeneratorConfig, SizeParams,
                                             project, random_config, uniform_config)


def _legal(cfg: GeneratorConfig) -> None:
    GeneratorConfig.model_validate(cfg.model_dump())   # re-validates all constraints
    assert list(cfg.sizes) == list(SIZES)
    assert abs(sum(p.data_ratio for p in cfg.sizes.values()) - 1) <= 1e-9
    for p in cfg.sizes.values():
        for f in FIELDS:
            lo, hi = BOUNDS[f]
            assert lo <= getattr(p, f) <= hi


def test_sizes_and_bounds():
    assert SIZES == ("3x3", "4x4", "5x5", "6x6", "7x7", "8x8", "9x9", "10x10")
    assert set(BOUNDS) == set(FIELDS)


def test_validator_messages():
    good = uniform_config().model_dump()
    bad = json.loads(json.dumps(good))
    del bad["sizes"]["7x7"]
    with pytest.raises(ValidationError, match="missing"):
        GeneratorConfig.model_validate(bad)
    bad = json.loads(json.dumps(good))
    bad["sizes"]["3x3"]["data_ratio"] = 0.5
    with pytest.raises(ValidationError, match="sum to 1"):
        GeneratorConfig.model_validate(bad)
    with pytest.raises(ValidationError):
        SizeParams(data_ratio=0.1, hole_ratio=0.9, wait_ratio=0.0)
    with pytest.raises(ValidationError):
        SizeParams(data_ratio=0.1, hole_ratio=0.1, wait_ratio=0.0, extra=1)


def test_random_config_is_legal_and_varied():
    rng = np.random.default_rng(0)
    cfgs = [random_config(rng) for _ in range(50)]
    for c in cfgs:
        _legal(c)
    holes = [c.sizes["5x5"].hole_ratio for c in cfgs]
    assert max(holes) - min(holes) > 0.2
    assert random_config(np.random.default_rng(7)) == random_config(np.random.default_rng(7))


def test_project_lenient_variants():
    prev = uniform_config(0.1, 0.2)
    cfg, ch = project({"5": {"hole_ratio": 0.3}, 6: {"wait_ratio": 2.0}}, prev)
    assert cfg.sizes["5x5"].hole_ratio == 0.3
    assert cfg.sizes["6x6"].wait_ratio == 1.0
    assert cfg.sizes["3x3"] == prev.sizes["3x3"]
    assert any(c.path == "sizes.6x6.wait_ratio" and "clipped" in c.reason for c in ch)
    cfg, ch = project({"sizes": {"10x10": {"data_ratio": 3, "hole_ratio": "25%",
                                            "wait_ratio": "lots"}}}, prev)
    assert cfg.sizes["10x10"].hole_ratio == 0.25
    assert cfg.sizes["10x10"].wait_ratio == prev.sizes["10x10"].wait_ratio
    _legal(cfg)


def test_project_all_zero_keeps_previous_data_ratios():
    prev = random_config(np.random.default_rng(1))
    raw = {"sizes": {s: {"data_ratio": 0, "hole_ratio": 0.1, "wait_ratio": 0.1} for s in SIZES}}
    cfg, _ = project(raw, prev)
    for s in SIZES:
        assert cfg.sizes[s].data_ratio == pytest.approx(prev.sizes[s].data_ratio)


@pytest.mark.parametrize("raw", [None, 3, "use more holes", [1, 2], {}, {"foo": 1}, True])
def test_project_unusable(raw):  # noqa: D103
    prev = uniform_config()
    cfg, ch = project(raw, prev)
    assert cfg == prev
    assert len(ch) == 1 and ch[0].path == "" and "previous" in ch[0].reason


def test_project_identity_has_no_changes():
    prev = random_config(np.random.default_rng(2))
    cfg, ch = project(prev.model_dump(), uniform_config())
    assert ch == [] and cfg == prev


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True)
    | st.text(max_size=6),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20)
field_values = (st.floats(-2, 3) | st.integers(-2, 3) | st.none() | st.text(max_size=4)
                | st.just(float("nan")) | st.just(float("inf")) | st.booleans()
                | st.sampled_from(["0.3", "40%", "1e-3"]))
size_entries = st.dictionaries(st.sampled_from(FIELDS + ("junk",)), field_values, max_size=4)
proposals = st.dictionaries(st.sampled_from(SIZES), size_entries, max_size=8)


def _num(x):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, proposals.map(lambda d: {"sizes": d}), proposals,
                 proposals.map(lambda d: "Here is my config: " + json.dumps({"sizes": d}) + " ok")),
       st.integers(0, 10**6))
def test_project_fuzz(raw, seed):
    prev = random_config(np.random.default_rng(seed))
    cfg, changes = project(raw, prev)
    _legal(cfg)
    if len(changes) == 1 and changes[0].path == "":
        assert cfg == prev
        return
    # the changes are exactly the fields whose applied value differs from the proposal
    if isinstance(raw, str):
        raw = json.loads(raw[raw.find("{"):raw.rfind("}") + 1])
    sizes = raw["sizes"] if isinstance(raw, dict) and "sizes" in raw else raw
    by_path = {c.path: c for c in changes}
    assert len(by_path) == len(changes)
    for s in SIZES:
        entry = sizes.get(s) if isinstance(sizes, dict) else None
        for f in FIELDS:
            applied = getattr(cfg.sizes[s], f)
            proposed = entry.get(f) if isinstance(entry, dict) else None
            p = _num(proposed)
            differs = p is None or p != applied or (isinstance(p, float) and math.isnan(p))
            path = f"sizes.{s}.{f}"
            assert (path in by_path) == differs, (path, proposed, applied)
            if path in by_path:
                assert by_path[path].applied == applied


def test_project_reads_json_embedded_in_text():
    prev = uniform_config(0.1, 0.1)
    cfg, ch = project('I propose {"sizes": {"4x4": {"hole_ratio": 0.35}}} because...', prev)
    assert cfg.sizes["4x4"].hole_ratio == 0.35
    cfg, ch = project("no json {here", prev)
    assert cfg == prev and ch[0].path == ""


def test_project_data_ratio_percentages_keep_proportions():
    prev = uniform_config()
    raw = {"sizes": {s: {"data_ratio": 0} for s in SIZES}}
    raw["sizes"]["3x3"]["data_ratio"] = 25
    raw["sizes"]["5x5"]["data_ratio"] = "25"
    raw["sizes"]["7x7"]["data_ratio"] = 50
    raw["sizes"]["9x9"]["data_ratio"] = -3
    cfg, ch = project(raw, prev)
    assert cfg.sizes["3x3"].data_ratio == pytest.approx(0.25)
    assert cfg.sizes["5x5"].data_ratio == pytest.approx(0.25)
    assert cfg.sizes["7x7"].data_ratio == pytest.approx(0.5)
    assert cfg.sizes["9x9"].data_ratio == 0.0
    assert {c.path for c in ch if c.path.endswith("data_ratio")} == {
        "sizes.3x3.data_ratio", "sizes.5x5.data_ratio", "sizes.7x7.data_ratio",
        "sizes.9x9.data_ratio"}
