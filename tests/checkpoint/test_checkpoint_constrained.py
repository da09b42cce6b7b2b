"""Schema-constrained engineer answers: a random-init model under the answer schema always writes
JSON that ``project`` accepts unchanged in shape; without the constraint it does not; the flag
switches it off; the run dir records whether each answer parsed and what ``project`` changed."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pytest
from rich.console import Console
from test_checkpoint_engineer import make_ctx

from curriculum.config import load_config
from curriculum.loop import run
from curriculum.rundir import RunDir
from curriculum.show import show_run
from engineers.checkpoint.config import CheckpointEngineerConfig
from engineers.checkpoint.constrained import answer_schema, answer_token_budget, max_answer_chars
from engineers.checkpoint.engineer import CheckpointEngineer
from testbeds.mapf_frozenlake.config import BOUNDS, SIZES, SPACE, GeneratorConfig, project

pytest.importorskip("llguidance")

SHORT = {"answer_reasoning_chars": 40, "answer_summary_chars": 30}


@pytest.fixture(scope="module")
def tiny_policy(tiny_model_dir):
    from trainers.lm.generation import GenerationConfig, TransformersPolicy
    from trainers.lm.models import load_tokenizer
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    return TransformersPolicy(model, load_tokenizer(str(tiny_model_dir)),
                              GenerationConfig(engineer_max_new_tokens=64))


def check_schema_valid(answer: dict, reasoning_chars: int, summary_chars: int) -> None:
    assert list(answer) == ["reasoning", "summary", "sizes"]
    assert len(answer["reasoning"]) <= reasoning_chars and len(answer["summary"]) <= summary_chars
    # Sizes and fields may be left out (kept), but what is written comes in the declared order.
    assert answer["sizes"] and list(answer["sizes"]) == [s for s in SIZES if s in answer["sizes"]]
    for params in answer["sizes"].values():
        assert params and list(params) == [f for f in ("data_ratio", "hole_ratio", "wait_ratio") if f in params]
        for field, value in params.items():
            lo, hi = BOUNDS[field]
            assert isinstance(value, (int, float)) and lo <= value <= hi
            assert round(value, 3) == value  # at most 3 decimals


def test_answer_schema_is_finite_and_its_bound_is_the_longest_answer():
    schema = answer_schema(SPACE, GeneratorConfig, reasoning_chars=10, summary_chars=5)
    longest = {"reasoning": "r" * 10, "summary": "s" * 5,
               "sizes": {s: {"data_ratio": 0.125, "hole_ratio": 0.125, "wait_ratio": 0.125} for s in SIZES}}
    assert max_answer_chars(schema) == len(json.dumps(longest, separators=(",", ":")))
    assert answer_token_budget(schema) == max_answer_chars(schema) + 1
    # The proposal model's own schema (free size keys) has no bound.
    from engineers.checkpoint.prompt import output_schema

    assert max_answer_chars(output_schema(GeneratorConfig)) is None


@pytest.mark.parametrize("temperature,seed", [(0.0, 0), (1.0, 1), (1.0, 2), (1.5, 3)])
def test_random_model_under_constraints_always_answers_with_a_config_project_accepts(
        tiny_policy, temperature, seed):
    config = CheckpointEngineerConfig(temperature=temperature, **SHORT)
    ctx = dataclasses.replace(make_ctx(tiny_policy), rng=np.random.default_rng(seed))
    design = CheckpointEngineer(config).design(ctx)
    answer = json.loads(design.output)
    check_schema_valid(answer, 40, 30)
    d = design.diagnostics
    assert d["parsed"] and d["constrained"] and d["usable_output"] and d["status"] == "usable config"
    assert d["decoding"].startswith("llguidance")
    assert d["answer_tokens"] <= answer_token_budget(CheckpointEngineer(config).answer_schema(ctx))
    _, changes = project(design.raw, ctx.proposal)
    assert all(c.path != "" for c in changes)  # project used the answer, not the previous config
    assert d["project_changed"] == [f"{c.path}: {c.reason}" for c in changes]


def test_flag_off_decodes_freely_and_the_random_model_then_gives_no_config(tiny_policy):
    config = CheckpointEngineerConfig(structured_output=False, **SHORT)
    design = CheckpointEngineer(config).design(make_ctx(tiny_policy))
    d = design.diagnostics
    assert d["decoding"] == "free text + lenient parsing" and not d["constrained"]
    assert d["answer_tokens"] is None
    assert not d["parsed"] and not d["usable_output"] and design.raw is None
    _, changes = project(design.raw, make_ctx(tiny_policy).proposal)
    assert [c.path for c in changes] == [""]  # project kept the previous config


def test_run_dir_records_parse_and_project_changes_and_show_prints_them(tiny_model_dir, tmp_path):
    sets = {
        "model.name_or_path": str(tiny_model_dir), "trainer.prompts_per_step": 2, "trainer.num_generations": 2,
        "trainer.max_steps_per_round": 1, "trainer.max_completion_length": 8, "trainer.beta": 0.0,
        "testbed.eval_agents": "[3]", "testbed.eval_instances_per_size": 1, "generation.max_new_tokens": 8,
        "generation.engineer_max_new_tokens": 32, "rounds": 2, "tasks_per_round": 4,
        "output_dir": str(tmp_path), "run_name": "run", "engineer.name": "checkpoint",
        "engineer.answer_reasoning_chars": 20, "engineer.answer_summary_chars": 20,
    }
    result = run(load_config(None, [f"{k}={v}" for k, v in sets.items()]))
    rd = RunDir.open(result.run_dir)
    design = json.loads((rd.round_dir(0) / "design.json").read_text())
    d = design["diagnostics"]
    assert d["parsed"] is True and d["constrained"] is True and d["usable_so_far"] == "1/1"
    assert d["project_changed"] == [f"{c['path']}: {c['reason']}" for c in design["changes"]]
    console = Console(file=io.StringIO(), width=200, color_system=None)
    show_run(result.run_dir, round_index=None, console=console)
    table = console.file.getvalue()
    assert "engineer answers parsed: 1/1 (constrained)" in table
    console = Console(file=io.StringIO(), width=200, color_system=None)
    show_run(result.run_dir, round_index=0, console=console)
    shown = console.file.getvalue()
    assert "parsed proposal: engineer proposed (parsed: yes, llguidance JSON schema" in shown


def test_the_answer_schema_offers_only_the_sizes_and_ranges_the_run_may_use():
    """A run narrowed to 3x3-6x6 and holes in [0, 0.4]: the schema (and so constrained decoding)
    cannot write 10x10, nor a hole ratio project would clip; unnarrowed runs keep the whole space."""
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed, MAPFTestbedConfig

    narrowed = MAPFTestbed(MAPFTestbedConfig(proposal_limits={"sizes": ["3x3", "4x4", "5x5", "6x6"],
                                                              "hole_ratio": (0.0, 0.4)}))
    ctx = dataclasses.replace(make_ctx(), testbed=narrowed)
    schema = CheckpointEngineer(CheckpointEngineerConfig(structured_output=True)).answer_schema(ctx)
    sizes = schema["properties"]["sizes"]["properties"]
    assert list(sizes) == ["3x3", "4x4", "5x5", "6x6"]
    assert sizes["3x3"]["properties"]["hole_ratio"]["maximum"] == 0.4
    assert list(answer_schema(MAPFTestbed().allowed_space(), GeneratorConfig)["properties"]["sizes"]["properties"]) \
        == list(SIZES)
