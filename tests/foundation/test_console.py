"""Round summaries and eval tables render any metrics and never read model text as markup."""

from __future__ import annotations

import io

from rich.console import Console

from curriculum.console import RichReporter, eval_table
from curriculum.core.records import Design, DesignRecord, RoundReport
from curriculum.core.types import Change, EvalReport
from curriculum.registry import TESTBEDS, TRAINERS


def _render(renderable) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_eval_table_groups_per_size_and_per_check_metrics():
    report = EvalReport(score=0.5, metrics={
        "valid_rate/3agents": 0.5, "valid_rate/3agents/3x3": 1.0, "valid_rate/3agents/4x4": 0.0,
        "optimal_rate/3agents/3x3": 0.5, "optimal_rate/3agents/4x4": 0.0, "optimal_rate/3agents": 0.25,
        "failure_rate/3agents/parsable": 0.5, "failure_rate/3agents/hole_free": 0.0,
    })
    text = _render(eval_table(report))
    assert text.index("valid_rate") < text.index("failure_rate")
    assert "4x4" in text and "hole_free" in text and "0.250" in text


def test_round_summary_prints_model_text_verbatim():
    design = Design(raw={}, notes={})
    record = DesignRecord(engineer="x", design=design, projected={"sizes": {}},
                          changes=[Change(path="a", proposed="[/INST]", applied=1, reason="[bold] clipped")],
                          diagnostics={"summary": "[/INST] 3x3 is [/] easy"})
    report = RoundReport(round=0, proposal={}, train_metrics={"train/mean_reward": 0.1, "spade/regret_played": 0.2},
                         eval=EvalReport(score=0.0, metrics={}), design=record)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    RichReporter(console).round_end(report)
    assert "spade/regret_played" not in console.file.getvalue()  # no trainer declared the prefix
    console = Console(file=io.StringIO(), width=200, color_system=None)
    reporter = RichReporter(console)
    reporter.plugin_declarations(TRAINERS.get("selfplay").load().summary_metrics, None)  # what the loop hands on
    reporter.round_end(report)
    out = console.file.getvalue()
    assert "[/INST] 3x3 is [/] easy" in out and "[bold] clipped" in out and "spade/regret_played" in out


def test_engineer_diagnostics_print_as_a_short_table():
    """A checkpoint-engineer-sized record (20+ readings, nested ones, model text over lines) takes
    a few short lines; the rest is counted, not dumped (design.json keeps it whole)."""
    diagnostics = {"status": "ok", "summary": "3x3 is mastered;\n6x6 needs waits. " * 20,
                   "edits_proposed": {"buckets": [f"{n}x{n}" for n in range(3, 11)], "scope": "global"},
                   "a_rather_long_diagnostic_name_that_goes_on_and_on": 3}
    diagnostics |= {f"reading_{i}": i / 7 for i in range(20)}
    design = DesignRecord(engineer="x", design=Design(raw={}), projected={"sizes": {}}, changes=[],
                          diagnostics=diagnostics)
    report = RoundReport(round=0, proposal={}, train_metrics={}, eval=EvalReport(score=0.0, metrics={}),
                         design=design)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    RichReporter(console).round_end(report)
    out = console.file.getvalue()
    table = out[out.index("engineer diagnostics"):].rstrip().splitlines()
    assert len(table) <= 11, table  # the title and at most ten rows
    assert all(len(line) <= 120 for line in table), max(table, key=len)
    assert "6x6 needs waits" in out and "…" in out
    assert "a_rather_long_diagnostic" in out and "goes_on_and_on" not in out  # a key cut short
    assert "0.1429" in out and "0.14285" not in out
    assert f"{len(diagnostics) - 9} more in the round's design.json" in out
    assert out.index("status") < out.index("reading_0")  # single readings before nested ones


def test_non_parametric_proposals_are_summarised_not_dumped():
    from curriculum.console import proposal_table

    text = _render(proposal_table({"environments": [{"program": "x" * 5000}] * 3, "note": "[b]"}))
    assert "environments: 3 item(s)" in text and "[b]" in text and "xxxx" not in text


def test_eval_tables_print_the_papers_numbers_per_agent_count():
    """Valid % and optimal % per agent count, as the paper's tables print them (in [0, 100]),
    next to the pooled score — in `curriculum eval`/`show` tables and in the round summary; the
    rates and groups are the ones the testbed's report layout declares."""
    layout = TESTBEDS.get("mapf_frozenlake").load().report_layout
    report = EvalReport(score=0.3083, metrics={
        "valid_rate/3agents": 0.4042, "optimal_rate/3agents": 0.2608, "valid_rate/4agents": 0.2667,
        "optimal_rate/4agents": 0.161, "valid_rate": 0.3083, "valid_rate/3agents/3x3": 0.9})
    text = _render(eval_table(report, layout=layout))
    assert "pooled score 0.3083" in text and "valid %" in text and "optimal %" in text
    assert "40.42" in text and "26.08" in text and "26.67" in text and "16.10" in text
    assert text.index("40.42") < text.index("0.900")  # the headline comes first
    console = Console(file=io.StringIO(), width=200, color_system=None)
    reporter = RichReporter(console)
    reporter.plugin_declarations((), layout)
    reporter.round_end(RoundReport(round=0, proposal={}, train_metrics={}, eval=report))
    assert "40.42" in console.file.getvalue()
    assert "valid %" not in _render(eval_table(report))  # no layout: no rates declared
    assert "valid %" not in _render(eval_table(EvalReport(score=0.1, metrics={"spade/mean": 0.1}), layout=layout))


def test_baseline_delta_is_in_points_for_rates_only():
    from curriculum.console import _delta

    assert "+16.7 pts" in _delta("valid_rate/2agents", 0.1667, 0.0)
    assert "+16.7 pts" in _delta("score", 0.1667, 0.0)
    # A token count is not a rate: its difference is plain, not x100 "points".
    assert "-70.72" in _delta("mean_tokens/2agents", 57.28, 128.0)
    assert "pts" not in _delta("cost_ratio/3agents", 1.0, 1.25)


def _lines(interval: float, steps: int, total: int | None) -> list[str]:
    console = Console(file=io.StringIO(), width=200, color_system=None)  # not a terminal: a log file
    reporter = RichReporter(console, line_interval_s=interval)
    reporter.stage("warm start", total)
    for _ in range(steps):
        reporter.advance(1)
    reporter.stage("sample", None)  # ends the warm start; a quick stage that never advances has no end line
    reporter.stage_end()
    return console.file.getvalue().splitlines()


def test_progress_in_a_log_file_prints_lines_as_it_goes():
    lines = _lines(interval=0.0, steps=3, total=3)
    assert [line.split("  ")[0] for line in lines] == ["warm start started", "warm start 1/3", "warm start 2/3",
                                                       "warm start 3/3", "warm start done (3)", "sample"]
    assert all(line.endswith("0:00:00") for line in lines if not line.endswith("started"))


def test_progress_lines_are_throttled_but_show_the_first_and_last_step():
    lines = _lines(interval=3600.0, steps=5, total=5)
    assert [line.split("  ")[0] for line in lines][1:4] == ["warm start 1/5", "warm start 5/5", "warm start done (5)"]
    unknown = _lines(interval=3600.0, steps=4, total=None)
    assert [line.split("  ")[0] for line in unknown][1:3] == ["warm start 1/?", "warm start done (4)"]


def test_a_run_names_its_config_in_a_few_lines_and_prints_it_whole_only_when_verbose():
    from pathlib import Path

    from curriculum.config import dump_config, read_config_file, validate_config

    demo = Path(__file__).resolve().parents[2] / "configs" / "mapf_cpu_demo.yaml"
    text = dump_config(validate_config(read_config_file(demo)))
    quiet = Console(file=io.StringIO(), width=200, color_system=None)
    RichReporter(quiet).config(text, "runs/x")
    lines = quiet.file.getvalue().strip().splitlines()
    assert len(lines) <= 6, lines
    assert "engineer: frontier   testbed: mapf_frozenlake   trainer: grpo" in quiet.file.getvalue()
    assert "model: embedded:smollm2-135m-instruct" in quiet.file.getvalue()
    loud = Console(file=io.StringIO(), width=200, color_system=None)
    RichReporter(loud, verbose=True).config(text, "runs/x")
    assert len(loud.file.getvalue().splitlines()) > 50 and "tasks_per_round: 32" in loud.file.getvalue()
