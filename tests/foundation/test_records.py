"""The kernel's typed records across the plugin boundary: ``EvalBreakdown``, ``MetricKey`` and
``Design.diagnostics`` round-trip, and records written before they existed still load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from curriculum.core.breakdown import EvalBreakdown, OutcomeCounts, SuiteCell, SuiteResult
from curriculum.core.metrics import MetricKey, dump_metrics, parse_metrics
from curriculum.core.records import Design, DesignRecord
from curriculum.core.types import EvalReport
from curriculum.report import group_rates, rates_by_bucket

FIXTURES = Path(__file__).parent / "fixtures" / "old_records"


def _cell(rate: float, n: int = 4) -> SuiteCell:
    return SuiteCell(n=n, valid_rate=rate, optimal_rate=rate / 2, failures={"parsable": 1}, mean_tokens=9.0)


def test_breakdown_round_trips_through_json():
    b = EvalBreakdown(suites={"3agents": SuiteResult(agents=3, sizes={"5x5": _cell(0.5)}, **dict(_cell(0.5)))},
                      buckets={"gcd:0": OutcomeCounts(n=3, correct=1, failures={"wrong": 2})},
                      rates={"tools": {"tools/mean": 0.25}})
    again = EvalBreakdown.model_validate_json(b.model_dump_json())
    assert again == b
    report = EvalReport(score=0.5, metrics={}, breakdown=b)
    assert EvalReport.model_validate_json(report.model_dump_json()).breakdown == b


def test_old_breakdown_shapes_load():
    rg = EvalBreakdown.model_validate({"buckets": {"gcd:1": {"n": 2, "correct": 0, "partial": 1, "wrong": 1}}})
    assert rg.buckets["gcd:1"] == OutcomeCounts(n=2, correct=0, failures={"partial": 1, "wrong": 1})
    held = EvalBreakdown.model_validate({"reasoning_gym": {"gcd": 0.5}, "tools": {"tools/mean": 1}})
    assert held.rates == {"reasoning_gym": {"gcd": 0.5}, "tools": {"tools/mean": 1.0}}
    assert EvalBreakdown.model_validate({}).is_empty()
    with pytest.raises(ValidationError, match="'oops' is neither a section"):
        EvalBreakdown.model_validate({"oops": "text"})


def test_an_existing_run_dirs_eval_and_design_load():
    data = json.loads((FIXTURES / "mapf_eval.json").read_text())
    report = EvalReport.model_validate(data)
    assert set(report.breakdown.suites) == set(data["breakdown"]["suites"]) == {"2agents", "3agents"}
    suite = report.breakdown.suites["2agents"]
    assert suite.valid_rate == data["breakdown"]["suites"]["2agents"]["valid_rate"]
    assert report.breakdown.model_dump(mode="json")["suites"] == data["breakdown"]["suites"]  # same on disk
    assert set(report.breakdown.rates_by_bucket()) == set(suite.sizes)
    by_size = rates_by_bucket(report.metrics, "valid_rate")  # the run's flat metrics still read by bucket
    assert set(by_size) == set(suite.sizes)
    assert list(group_rates(report.metrics, "valid_rate")) == ["2agents", "3agents"]

    old = json.loads((FIXTURES / "design.json").read_text())
    record = DesignRecord.model_validate(old)
    assert record.design.diagnostics == old["design"]["notes"]["diagnostics"] == record.diagnostics
    assert "diagnostics" not in record.design.notes and record.design.notes["rule"] == old["design"]["notes"]["rule"]
    assert DesignRecord.model_validate_json(record.model_dump_json()) == record


def test_design_diagnostics_are_named_json_values():
    d = Design(raw=None, diagnostics={"n": np.int64(3), "pair": (1, np.float32(0.5)), "nested": {"a": ("x",)}})
    assert d.diagnostics == {"n": 3, "pair": [1, 0.5], "nested": {"a": ["x"]}}
    assert Design.model_validate_json(d.model_dump_json()) == d
    with pytest.raises(ValidationError, match="valid JSON value"):
        Design(raw=None, diagnostics={"bad": object()})


@pytest.mark.parametrize("key", ["valid_rate", "valid_rate/3agents", "valid_rate/3agents/5x5",
                                 "failure_rate/3agents/hole_free", "accuracy/gcd/L2", "heldout/evaluated",
                                 "a/b/c/d"])
def test_metric_key_round_trips_its_string(key):
    assert MetricKey.parse(key).to_str() == key


def test_metric_key_fields_and_levelled_buckets():
    k = MetricKey.parse("valid_rate/3agents/5x5")
    assert (k.metric, k.group, k.cell, k.bucket, k.level) == ("valid_rate", "3agents", "5x5", "5x5", None)
    level = MetricKey.for_bucket("accuracy", "gcd", "gcd:2")
    assert level.to_str() == "accuracy/gcd/L2" and MetricKey.parse("accuracy/gcd/L2").bucket == "gcd:2"
    assert MetricKey.for_bucket("valid_rate", "3agents", "5x5") == k
    for bad in ("", "/x", "a//b"):
        with pytest.raises(ValueError, match="metric key"):
            MetricKey.parse(bad)
    metrics = {"valid_rate/3agents/5x5": 0.5, "score": 1.0, "bad//key": 2.0}
    parsed = parse_metrics(metrics)
    assert set(parsed) == {k, MetricKey("score")} and dump_metrics(parsed) == {"valid_rate/3agents/5x5": 0.5,
                                                                             "score": 1.0}
