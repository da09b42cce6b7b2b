"""Round summaries and eval tables render any metrics and never read model text as markup."""

from __future__ import annotations

import io
import re

from rich.console import Console

from curriculum.console import RichReporter, diagnostics_table, eval_table
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
    """A checkpoint-engineer-sized record (40+ readings, nested ones, model text over lines) takes
    a few short lines, short readings several to a line; the rest is counted, not dumped
    (design.json keeps it whole)."""
    diagnostics = {"status": "ok", "summary": "3x3 is mastered;\n6x6 needs waits. " * 20,
                   "edits_proposed": {"buckets": [f"{n}x{n}" for n in range(3, 11)], "scope": "global"},
                   "a_rather_long_diagnostic_name_that_goes_on_and_on": 3}
    diagnostics |= {f"reading_{i}": i / 7 for i in range(40)}
    design = DesignRecord(engineer="x", design=Design(raw={}), projected={"sizes": {}}, changes=[],
                          diagnostics=diagnostics)
    report = RoundReport(round=0, proposal={}, train_metrics={}, eval=EvalReport(score=0.0, metrics={}),
                         design=design)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    RichReporter(console).round_end(report)
    out = console.file.getvalue()
    table = out[out.index("engineer diagnostics"):].rstrip().splitlines()
    assert len(table) <= 11, table  # the title and at most ten rows
    assert all(len(line) <= 80 for line in table), max(table, key=len)
    assert "6x6 needs waits" in out and "…" in out
    assert "a_rather_long_diagnostic" in out and "goes_on_and_on" not in out  # a key cut short
    assert "0.1429" in out and "0.14285" not in out
    # several short readings to a line, a long text on its own
    assert re.search(r"status ok   \S+ 3   reading_0 0   reading_1 0.1429\n  summary 3x3", out)
    missing = [k for k in diagnostics if not re.search(rf"\b{k[:20]}", out)]
    assert missing and f"{len(missing)} more in the round's design.json" in out
    assert out.index("status") < out.index("reading_0")  # single readings before nested ones
    spade = {"admitted": 2, "designs": 4, "rejections": {"solution_failed": 1, "syntax_error": 1},
             "seed_copies": 1, "closest_seed": ["483b6177 secret_suffix 0.94", "a13be8eb key_position 0.89"],
             "vendi_per_n": 0.7104, "vendi_per_n_run": 0.2969}
    lines = _render(diagnostics_table(spade)).rstrip().splitlines()
    assert len(lines) <= 5 and "… " not in "".join(lines), lines  # all of it, in four lines


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


_SPADE_TRAIN_METRICS = (
    "admission_rate advantage_agent_mean advantage_designer_mean agent_return agent_return_hint agent_rows "
    "designer/anchor designer/learning_potential designer/lp_term designer/raw_regret designer/regret "
    "designer/regret_term designer/reward_max_all designer/reward_min_all designer/reward_std_all "
    "designer/reward_uncentred_all designer/uncentred designer_buffered designer_frozen designer_rows "
    "designs "
    "env_failures episodes heldout/sequence_next heldout/shell_game heldout_env_failures heldout_episodes "
    "heldout_excluded heldout_return heldout_seconds heldout_win_rate is_weight_clipped_frac is_weight_mean "
    "new_envs pool_size regret_played regret_played_max regret_positive_envs rejected/solution_failed "
    "rejected/syntax_error retired_mastered retired_overflow retired_stale win_rate win_rate_hint").split()
"""The training metrics of a round of the SPADE games CPU demo (its ``train_metrics.json``)."""


def _spade_like_round(index: int, last: bool) -> RoundReport:
    """A round record shaped like the SPADE games CPU demo's: 49 training metrics, its validation
    eval's six aggregates, an environment pool as the next proposal and the designer's diagnostics."""
    train = {f"spade/{name}": 0.25 for name in _SPADE_TRAIN_METRICS}
    train |= {"train/loss": 0.01, "train/mean_reward": 0.3125, "train/steps": 1.0, "train/seconds": 121.8}
    metrics = {"reasoning_gym/maths": 0.0017, "reasoning_gym/algorithmic": 0.0,
               "reasoning_gym/cognition": 0.0025, "reasoning_gym/mean": 0.0014, "heldout/evaluated": 1.0,
               "heldout/call": float(index)}
    design = None if last else DesignRecord(
        engineer="spade", design=Design(raw={}), changes=[],
        projected={"environments": [{"program": "x" * 2000}] * 6, "designs": [{"completion": "y"}] * 4},
        diagnostics={"admitted": 2, "designs": 4, "rejections": {"solution_failed": 1, "syntax_error": 1},
                     "seed_copies": 1,
                     "closest_seed": ["483b6177 secret_suffix 0.94", "a13be8eb key_position 0.89"],
                     "vendi_per_n": 0.7104, "vendi_per_n_run": 0.2969})
    return RoundReport(round=index, proposal={}, train_metrics=train, design=design,
                       eval=EvalReport(score=0.0014, metrics=metrics, suite="validation"))


def test_a_spade_like_run_prints_a_short_transcript():
    """What `curriculum run --engineer spade` prints on a CPU into a log (not a terminal, 80
    columns), in the loop's order: the config's lines, a cached warm start, and three rounds of
    stages with their summaries. The summary shows a few key numbers of the round (the player's
    held-out and pool win rates, regret, designs admitted, the validation score) and the
    engineer's diagnostics in a few lines; the round's files keep the rest."""
    from pathlib import Path

    from curriculum.config import dump_config, read_config_file, validate_config

    preset = Path(__file__).resolve().parents[2] / "configs" / "spade_games_cpu_demo.yaml"
    console = Console(file=io.StringIO(), width=80, color_system=None)
    reporter = RichReporter(console)
    reporter.plugin_declarations(TRAINERS.get("selfplay").load().summary_metrics,
                                 TESTBEDS.get("spade_pool").load().report_layout)
    reporter.config(dump_config(validate_config(read_config_file(preset))), "runs/spade-spade_pool-seed0")
    reporter.stage("warm start", 36)
    reporter.advance(36)  # from the cache
    summaries = []
    for index in range(3):
        reporter.round_start(index, 3, {})
        for stage, advances in (("sample", 0), ("train", 1), ("eval", 2), ("design", 4), ("commit", 0)):
            reporter.stage(stage, None)
            for _ in range(advances):
                reporter.advance(1)
        before = len(console.file.getvalue().splitlines())
        reporter.round_end(_spade_like_round(index, last=index == 2))
        summaries.append(console.file.getvalue().splitlines()[before:])
    out = console.file.getvalue()
    lines = out.splitlines()
    # 122 lines here (246 when the summary listed every training metric); the CLI adds the preset's two
    # lines and a last one, and the real stages a progress line or two: under 150 in all
    assert len(lines) <= 125, "\n".join(lines)
    assert all(len(summary) <= 30 for summary in summaries), summaries[0]
    for key in ("spade/heldout_win_rate", "spade/win_rate", "spade/regret_played", "spade/new_envs",
                "validation/score", "admitted 2   designs 4"):
        assert key in out, key
    assert "spade/designer/anchor" not in out and "spade/win_rate_hint" not in out
    assert "more training metrics in train_metrics.json" in out
    assert "next proposal: environments: 6 item(s), designs: 4 item(s)" in out
    assert all(len(line) <= 80 for summary in summaries for line in summary)
