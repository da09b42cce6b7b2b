"""Module renderers F, G, H, S, T from fixed inputs, and the Trainee-to-Trainer paper's V1–V6 presets."""

from __future__ import annotations

import pytest
from checkpoint_fakes import config_json, fixed_breakdown
from pydantic import ValidationError

from engineers.checkpoint.config import PRESETS, CheckpointEngineerConfig, preset
from curriculum.core.breakdown import EvalBreakdown
from engineers.checkpoint.context import (
    HistoryEntry,
    build_context,
    render_failure_breakdown,
    render_guideline,
    render_history,
    render_summary,
    render_training,
    valid_rates_by_size,
)
from testbeds.mapf_frozenlake.config import BOUNDS, SPACE


def test_failure_breakdown_lists_every_size_with_rates_and_failed_checks():
    text = render_failure_breakdown(fixed_breakdown())
    lines = text.splitlines()
    assert lines[0] == "3agents (n=80): valid 36.2%, optimal 18.1%"
    assert len(lines) == 1 + 8
    row = {line.split()[0]: line for line in lines[1:]}
    assert "valid 100.0%" in row["3x3"] and "failed checks: none" in row["3x3"]
    assert "valid  60.0%" in row["5x5"] and "optimal  30.0%" in row["5x5"]
    assert row["5x5"].endswith("failed checks: conflict_free 4")
    assert row["8x8"].endswith("failed checks: conflict_free 10, hole_free 10")
    assert "n=10" in row["10x10"]


def test_failure_breakdown_without_suites_lists_its_rates_groups():
    assert render_failure_breakdown(EvalBreakdown()) == "(no evaluation results)"
    text = render_failure_breakdown(EvalBreakdown(rates={"tools": {"tools/mean": 0.25, "tools/files": 0.5}}))
    assert text.splitlines() == ["tools:", "  tools/mean: 0.250", "  tools/files: 0.500"]


def test_valid_rates_average_suites_weighted_by_count():
    a = fixed_breakdown({"3x3": 1.0}, n=10)
    b = fixed_breakdown({"3x3": 0.0}, n=30)
    a.suites["5agents"] = b.suites["3agents"]
    assert valid_rates_by_size(a) == {"3x3": pytest.approx(0.25)}


def test_guideline_has_heuristics_and_field_ranges():
    text = render_guideline("mapf_frozenlake", BOUNDS, {"hole_ratio": "holes"})
    assert "- hole_ratio in [0, 0.5]: holes" in text
    assert "- data_ratio in [0, 1]" in text
    assert "Fields" not in render_guideline("mapf_frozenlake")


PAPER_FINDINGS = ["frontier", "20%", "80%", "local", "only what", "keep the other", "help",
                  "(3, 4, 5)", "20%-hole", "little learning signal", "partly right"]
"""Fragments of the Trainee-to-Trainer paper's findings (data at the competence frontier, local
edits, the evaluation's agents and hole ratio) that the default guideline must not state."""


@pytest.mark.parametrize("testbed", ["mapf_frozenlake", "reasoning_gym", "other"])
def test_default_guideline_states_none_of_the_papers_findings(testbed):
    neutral = render_guideline(testbed)
    assert neutral == render_guideline(testbed, variant="neutral")
    assert not [f for f in PAPER_FINDINGS if f.lower() in neutral.lower()], neutral
    findings = render_guideline(testbed, variant="paper_findings")
    assert [f for f in PAPER_FINDINGS if f.lower() in findings.lower()]
    with pytest.raises(ValueError, match="unknown guideline variant"):
        render_guideline(testbed, variant="frontier")


def _entries():
    return [HistoryEntry(round=0, proposal=config_json([0.3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], hole=0.41),
                         breakdown=fixed_breakdown()),
            HistoryEntry(round=1, proposal=config_json([0.125] * 8, hole=0.15), breakdown=fixed_breakdown())]


def test_history_pairs_each_config_with_its_failure_breakdown_and_hides_round0_config_in_v4():
    v3 = render_history(_entries(), space=SPACE, include_initial_config=True, max_rounds=3)
    assert "round 0\n" in v3 and "0.410" in v3 and "0.300" in v3
    assert "round 1\n" in v3 and "0.150" in v3
    round1 = v3.split("round 1\n")[1]
    row = next(line for line in round1.splitlines() if line.strip().startswith("5x5") and "0." in line)
    assert row.split() == ["5x5", "0.125", "0.150", "0.000"]
    breakdown = round1.split("failure breakdown after training on it:\n")[1]
    assert [line.strip() for line in breakdown.splitlines()] == \
        [line.strip() for line in render_failure_breakdown(fixed_breakdown()).splitlines()]
    assert "failed checks: conflict_free 10, hole_free 10" in breakdown
    v4 = render_history(_entries(), space=SPACE, include_initial_config=False, max_rounds=3)
    assert "round 0 (random start config, not shown)" in v4
    assert "0.410" not in v4 and "0.300" not in v4
    assert "failed checks: conflict_free 4" in v4.split("round 1")[0]  # round 0's breakdown stays
    assert "0.150" in v4
    only_last = render_history(_entries(), space=SPACE, include_initial_config=True, max_rounds=1)
    assert "round 0" not in only_last and "round 1" in only_last
    assert render_history([], space=SPACE, include_initial_config=True, max_rounds=3) == "(no earlier rounds)"


def test_summary_verbatim_or_placeholder():
    assert render_summary("  I moved data to 6x6. ") == "I moved data to 6x6."
    assert render_summary(None).startswith("(none")
    assert render_summary("   ").startswith("(none")


def test_training_bookkeeping_and_full():
    info = {"epochs_per_round": 3.0, "num_generations": 8, "prompts_per_step": 128, "learning_rate": 2e-6,
            "beta": 0.001, "epsilon": 0.2, "temperature": 1.0, "max_completion_length": 4096,
            "algorithm": "GRPO (TRL)"}
    book = render_training(info, round_index=1, total_rounds=3, variant="bookkeeping")
    assert book == ("Round 2 of 3 has finished; the config you write trains round 3.\n"
                    "Each round trains 3 epochs over its instances: 6 of 9 total epochs are done.")
    full = render_training(info, round_index=1, total_rounds=3, variant="full",
                           reward={"weights": [0.65, 0.35], "ema": 0.7})
    assert full.startswith(book)
    for fragment in ("GRPO (TRL)", "8 answers", "128 prompts per update", "learning rate 2e-06",
                     "KL coefficient 0.001", "(0.8, 0.2)", "w_acc=0.65, w_len=0.35"):
        assert fragment in full, fragment
    capped = render_training({"epochs_per_round": 3.0, "max_steps_per_round": 4}, round_index=0,
                             total_rounds=2, variant="bookkeeping")
    assert "capped at 4 optimizer updates" in capped


EXPECTED = {"V1": ["F"], "V2": ["F", "G"], "V3": ["F", "G", "H"], "V4": ["F", "G", "H"],
            "V5": ["F", "G", "H", "S"], "V6": ["F", "G", "H", "T"]}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_presets_have_exactly_the_spec_modules(name):
    spec = preset(name)
    assert spec.modules() == EXPECTED[name]
    assert spec.history_initial_config is (name in ("V1", "V2", "V3"))
    assert spec.training == ("bookkeeping" if name == "V6" else None)
    text = build_context(spec, failure="f", guideline="g", history="h", summary="s", training="t")
    titles = [line.split(".")[0][3:] for line in text.splitlines() if line.startswith("## ")]
    assert titles == EXPECTED[name]


def test_default_is_v6_bookkeeping_and_overrides_apply_on_top():
    cfg = CheckpointEngineerConfig()
    assert cfg.context == "V6" and cfg.context_spec() == PRESETS["V6"]
    full = CheckpointEngineerConfig(training_details="full").context_spec()
    assert full.training == "full"
    ablation = CheckpointEngineerConfig(context="V6", modules={"G": False, "S": True}).context_spec()
    assert ablation.modules() == ["F", "H", "S", "T"]
    v3_like = CheckpointEngineerConfig(context="V4", modules={"history_initial_config": True}).context_spec()
    assert v3_like == PRESETS["V3"]
    assert CheckpointEngineerConfig(context="V1", modules={"T": True}).context_spec().training == "bookkeeping"
    assert CheckpointEngineerConfig(context="V6", modules={"T": False}).context_spec().modules() == ["F", "G", "H"]


def test_config_rejects_bad_values():
    with pytest.raises(ValidationError):
        CheckpointEngineerConfig(context="V7")
    with pytest.raises(ValidationError):
        CheckpointEngineerConfig(modules={"X": True})
    with pytest.raises(ValidationError):
        CheckpointEngineerConfig(endpoint={"url": "ftp://x"})
    with pytest.raises(ValidationError):
        CheckpointEngineerConfig(attempts=0)


def test_build_context_refuses_a_module_that_was_not_rendered():
    with pytest.raises(ValueError, match="module G"):
        build_context(preset("V2"), failure="f")
