"""A 3-round run (tiny model trains; a scripted model answers as engineer) applies exactly the
projected proposals, stores what the engineer saw and said, and ``curriculum show`` prints it."""

from __future__ import annotations

import io
import json
from pathlib import Path

from checkpoint_fakes import config_json
from rich.console import Console

from curriculum.config import load_config
from curriculum.loop import run
from curriculum.rundir import RunDir
from curriculum.show import show_run
from testbeds.mapf_frozenlake.config import GeneratorConfig, project

# Round 0's answer: fenced JSON; 3x3 hole ratio out of range (clipped), data ratios sum to 2
# (renormalised), 10x10 missing (kept from previous).
ANSWER_0 = ("3x3 and 4x4 are easy; 6x6 fails on conflicts, so it gets more data and waits.\n```json\n"
            + json.dumps({"summary": "I mastered 3x3; 6x6 needs waits.",
                          "sizes": {**{s: v for s, v in config_json(
                              [0.1, 0.1, 0.3, 0.6, 0.3, 0.3, 0.3, 0.0], hole=0.2, wait=0.4)["sizes"].items()
                              if s != "10x10"},
                              "3x3": {"data_ratio": 0.1, "hole_ratio": 0.9, "wait_ratio": 0.0}}}) + "\n```")
# Round 1's answer: single quotes and trailing commas, only two sizes (a local edit).
ANSWER_1 = ("Summary: shift budget from 3x3 to 7x7.\n"
            "{'sizes': {'3x3': {'data_ratio': 0.0,}, '7x7': {'data_ratio': 0.4, 'hole_ratio': 0.1,},},}")


def overrides(model_dir: Path, out: Path) -> list[str]:
    sets = {
        "model.name_or_path": str(model_dir), "trainer.prompts_per_step": 2, "trainer.num_generations": 2,
        "trainer.max_steps_per_round": 1, "trainer.max_completion_length": 8, "trainer.beta": 0.0,
        "testbed.eval_agents": "[3]", "testbed.eval_instances_per_size": 1, "generation.max_new_tokens": 8,
        "rounds": 3, "tasks_per_round": 4, "output_dir": str(out), "run_name": "run",
        "engineer.name": "checkpoint_scripted", "engineer.context": "V5",
    }
    return [f"{k}={v}" for k, v in sets.items()]


def test_three_rounds_apply_exactly_the_projected_proposals(tiny_model_dir, tmp_path):
    config = load_config(None, overrides(tiny_model_dir, tmp_path),
                         base={"engineer": {"name": "checkpoint_scripted", "outputs": [ANSWER_0, ANSWER_1]}})
    result = run(config)
    rd = RunDir.open(result.run_dir)
    assert rd.completed_rounds() == [0, 1, 2]
    proposals = [json.loads((rd.round_dir(i) / "proposal.json").read_text()) for i in range(3)]
    designs = [json.loads((rd.round_dir(i) / "design.json").read_text()) for i in range(2)]

    for i, text in enumerate((ANSWER_0, ANSWER_1)):
        expected, changes = project(designs[i]["design"]["raw"], GeneratorConfig.model_validate(proposals[i]))
        assert proposals[i + 1] == expected.model_dump(mode="json") == designs[i]["projected"]
        assert designs[i]["changes"] == [c.model_dump(mode="json") for c in changes]
        assert (rd.round_dir(i) / "engineer_output.txt").read_text() == text
        assert "## F. Failure breakdown" in (rd.round_dir(i) / "engineer_prompt.txt").read_text()

    # Round 0's answer as parsed: clipped hole ratio and renormalised data are recorded by project.
    assert designs[0]["design"]["raw"]["sizes"]["3x3"]["hole_ratio"] == 0.9
    assert proposals[1]["sizes"]["3x3"]["hole_ratio"] == 0.5
    total = 2.0 + proposals[0]["sizes"]["10x10"]["data_ratio"]  # 10x10 missing: previous value
    assert abs(proposals[1]["sizes"]["6x6"]["data_ratio"] - 0.6 / total) < 1e-9
    assert proposals[1]["sizes"]["10x10"] == proposals[0]["sizes"]["10x10"] | {
        "data_ratio": proposals[1]["sizes"]["10x10"]["data_ratio"]}
    reasons = {c["path"]: c["reason"] for c in designs[0]["changes"]}
    assert reasons["sizes.3x3.hole_ratio"].startswith("clipped")
    assert reasons["sizes.10x10.hole_ratio"].startswith("missing")
    # Round 1: S carried the round-0 summary; the edit was local; the summary line was parsed.
    prompt1 = (rd.round_dir(1) / "engineer_prompt.txt").read_text()
    assert "## S. Your summary of your previous choice\nI mastered 3x3; 6x6 needs waits." in prompt1
    diag1 = designs[1]["diagnostics"]
    assert diag1["edits_proposed"]["buckets"] == ["3x3", "7x7"] and diag1["edits_proposed"]["scope"] == "local"
    assert designs[1]["design"]["notes"]["summary"] == "shift budget from 3x3 to 7x7."
    assert diag1["usable_so_far"] == "2/2"

    console = Console(file=io.StringIO(), width=200, color_system=None)
    show_run(result.run_dir, round_index=0, console=console)
    shown = console.file.getvalue()
    for fragment in ("engineer checkpoint_scripted: prompt", "## F. Failure breakdown", "raw output",
                     "6x6 fails on conflicts", "parsed proposal", "projected proposal", "project's changes",
                     "sizes.3x3.hole_ratio: 0.9 → 0.5", "diagnostics", "summary_check", "frontier"):
        assert fragment in shown, fragment


def test_answer_counts_sum_the_answers_and_the_copies_of_a_run(tiny_model_dir, tmp_path):
    from curriculum.answers import answer_counts, round_answers
    from engineers.checkpoint.prompt import implausible_example
    from testbeds.mapf_frozenlake.config import SPACE

    copied = "```json\n" + json.dumps({"summary": "as shown", **implausible_example(SPACE)}) + "\n```"
    sets = [s for s in overrides(tiny_model_dir, tmp_path) if not s.startswith("engineer.context")]
    config = load_config(None, [*sets, "engineer.structured_output=false"],
                         base={"engineer": {"name": "checkpoint_scripted", "outputs": [copied, ANSWER_1]}})
    result = run(config)
    assert answer_counts(result.run_dir) == {"answers": 2, "copied_example": 1, "rounds": 2}
    # Rounds recorded before the count: one answer per attempt, a copy flag as one copy.
    assert round_answers({"parsed": True, "attempts": 2, "copied_example": True}) == (2, 1)
    assert round_answers({"stage": 1}) == (0, 0)


def test_compare_json_counts_a_model_engineers_answers_and_copies(tiny_model_dir, tmp_path):
    """A comparison's run row and engineer summary carry the answers and the copies of the example;
    an engineer that asks no model has neither, and the table prints the count."""
    from curriculum.compare import CompareSpec, RunOutcome, summarize, table_text_of
    from curriculum.report import RunSummary
    from engineers.checkpoint.prompt import implausible_example
    from testbeds.mapf_frozenlake.config import SPACE

    copied = "```json\n" + json.dumps({"summary": "as shown", **implausible_example(SPACE)}) + "\n```"
    sets = [s for s in overrides(tiny_model_dir, tmp_path) if not s.startswith("engineer.context")]
    config = load_config(None, [*sets, "engineer.structured_output=false"],
                         base={"engineer": {"name": "checkpoint_scripted", "outputs": [copied, ANSWER_1]}})
    result = run(config)
    summary = RunSummary.load(result.run_dir)
    data = summarize(CompareSpec(engineers=[summary.engineer]),
                     {(summary.engineer, summary.seed): summary},
                     [RunOutcome(summary.engineer, summary.seed, Path(result.run_dir), "new")], rounds=3)
    row = data["runs"][0]
    assert (row["answers"], row["copied_example"]) == (2, 1)
    assert (data["summary"][summary.engineer]["answers"], data["summary"][summary.engineer]["copied_example"]) == (2, 1)
    text = table_text_of(data)
    assert "copied" in text and "1/2" in text, text
