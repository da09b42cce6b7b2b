"""The engineer path: context → scripted model → lenient parse → project → diagnostics."""

from __future__ import annotations

import json
import re
import sys
import types

import numpy as np
from checkpoint_fakes import ScriptedPolicy, answer, config_json, fixed_breakdown
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curriculum.core.records import RoundReport
from curriculum.core.types import EvalReport
from engineers.base import DesignContext
from engineers.checkpoint.config import CheckpointEngineerConfig
from engineers.checkpoint.constrained import answer_token_budget
from engineers.checkpoint.engineer import CheckpointEngineer
from testbeds.mapf_frozenlake.config import BOUNDS, SIZES, GeneratorConfig
from testbeds.mapf_frozenlake.testbed import MAPFTestbed

ROUND0 = config_json([0.3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], hole=0.437, wait=0.291)
ROUND1 = config_json([0.125] * 8, hole=0.173, wait=0.0)


def report(index: int, proposal: dict) -> RoundReport:
    return RoundReport(round=index, proposal=proposal, train_metrics={},
                       eval=EvalReport(score=0.3, metrics={}, breakdown=fixed_breakdown()))


def make_ctx(policy=None, *, rounds: int = 1, base=None) -> DesignContext:
    history = [report(0, ROUND0), report(1, ROUND1)][:rounds]
    return DesignContext(round=rounds - 1, total_rounds=3, history=history,
                         proposal=GeneratorConfig.model_validate(history[-1].proposal), testbed=MAPFTestbed(),
                         rng=np.random.default_rng(0), policy=policy, base_policy=base,
                         run_info={"epochs_per_round": 3.0})


def test_usable_answer_becomes_raw_and_summary_is_carried_into_s():
    new = config_json([0.05, 0.05, 0.2, 0.4, 0.1, 0.1, 0.05, 0.05], hole=0.2)
    policy = ScriptedPolicy([answer(new, summary="6x6 is hard, so it gets 40%.")])
    engineer = CheckpointEngineer(CheckpointEngineerConfig(context="V5"))
    design = engineer.design(make_ctx(policy))
    assert design.raw == new
    assert design.notes["summary"] == "6x6 is hard, so it gets 40%."
    assert engineer.state_dict()["summary"] == "6x6 is hard, so it gets 40%."
    d = design.diagnostics
    assert d["usable_output"] and d["status"] == "usable config" and d["context"] == ["F", "G", "H", "S"]
    assert d["frontier"]["mass_after"]["at"] == 0.6 and not d["summary_check"]["contradicts"]
    assert json.loads(json.dumps(d)) == d  # JSON-able
    # The next design shows that summary under S.
    design2 = engineer.design(make_ctx(policy, rounds=2))
    assert "## S. Your summary of your previous choice\n6x6 is hard, so it gets 40%." in design2.prompt
    # Resume: a fresh engineer restored from state shows the same S.
    restored = CheckpointEngineer(CheckpointEngineerConfig(context="V5"))
    restored.load_state_dict(engineer.state_dict())
    assert restored.summary == engineer.summary


def test_prompt_modules_follow_the_preset_and_v4_hides_round0_config():
    policy = ScriptedPolicy(["{}"])
    v3 = CheckpointEngineer(CheckpointEngineerConfig(context="V3")).design(make_ctx(policy, rounds=2)).prompt
    v4 = CheckpointEngineer(CheckpointEngineerConfig(context="V4")).design(make_ctx(policy, rounds=2)).prompt
    v6 = CheckpointEngineer(CheckpointEngineerConfig()).design(make_ctx(policy, rounds=2)).prompt
    v1 = CheckpointEngineer(CheckpointEngineerConfig(context="V1")).design(make_ctx(policy, rounds=2)).prompt
    assert "0.437" in v3 and "0.437" not in v4 and "0.173" in v4
    assert "## T. Training details" in v6 and "## S." not in v6
    assert "## G." not in v1 and "## H." not in v1 and "## F." in v1
    for prompt in (v1, v3, v4, v6):
        assert '"summary": "<why you chose this>"' in prompt and '"<map size>": {"data_ratio": <data_ratio>' in prompt


def test_unusable_output_keeps_previous_config_with_a_clear_change():
    ctx = make_ctx(ScriptedPolicy(["I think we should train more on small maps."]))
    design = CheckpointEngineer(CheckpointEngineerConfig()).design(ctx)
    assert design.raw is None
    assert design.notes["status"].startswith("no usable config in the output (no JSON object")
    projected, changes = ctx.testbed.project(design.raw, ctx.proposal)
    assert projected == ctx.proposal
    assert len(changes) == 1 and changes[0].path == "" and "kept the previous config" in changes[0].reason
    assert design.diagnostics["usable_so_far"] == "0/1"


def test_retries_until_a_usable_answer():
    new = config_json([0.125] * 8, hole=0.05)
    policy = ScriptedPolicy(["no idea", answer(new)])
    design = CheckpointEngineer(CheckpointEngineerConfig(attempts=3, max_new_tokens=64)).design(make_ctx(policy))
    assert design.raw == new and design.diagnostics["attempts"] == 2
    assert [c["temperature"] for c in policy.calls] == [0.0, 0.7]
    assert [c["max_new_tokens"] for c in policy.calls] == [64, 64]
    assert "----- attempt 2 -----" in design.output


def test_base_model_is_asked_when_configured():
    base = ScriptedPolicy([answer(config_json([0.125] * 8, hole=0.33))])
    current = ScriptedPolicy(["{}"])
    design = CheckpointEngineer(CheckpointEngineerConfig(model="base")).design(
        make_ctx(current, base=lambda: base))
    assert len(base.calls) == 1 and not current.calls
    assert design.raw["sizes"]["3x3"]["hole_ratio"] == 0.33


def test_vllm_policies_get_schema_constrained_decoding(monkeypatch):
    seen = {}

    class SamplingParams:
        def __init__(self, **kwargs):
            seen["params"] = kwargs

    class StructuredOutputsParams:
        def __init__(self, json):
            self.json = json

    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = SamplingParams
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = StructuredOutputsParams
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    text = json.dumps({"reasoning": "r", "summary": "s", **config_json([0.125] * 8, hole=0.11)})

    class LLM:
        def chat(self, messages, params, use_tqdm=False):
            seen["messages"] = messages
            out = types.SimpleNamespace(text=text, token_ids=[1, 2, 3])
            return [types.SimpleNamespace(outputs=[out])]

    class VLLMPolicy:  # same name as trainers.lm.generation.VLLMPolicy
        def __init__(self):
            self.llm = LLM()
            self.config = types.SimpleNamespace(top_p=0.9, engineer_max_new_tokens=99)

    design = CheckpointEngineer(CheckpointEngineerConfig()).design(make_ctx(VLLMPolicy()))
    schema = seen["params"]["structured_outputs"].json
    assert schema["required"][:2] == ["reasoning", "summary"] and "sizes" in schema["properties"]
    sizes = schema["properties"]["sizes"]  # the finite answer schema: every size, each optional
    assert list(sizes["properties"]) == list(SIZES) and "required" not in sizes and sizes["minProperties"] == 1
    # The policy's 99 tokens cannot hold a complete answer: the schema's bound is used instead.
    assert seen["params"]["max_tokens"] == answer_token_budget(schema) > 99
    assert design.raw["sizes"]["5x5"]["hole_ratio"] == 0.11 and design.notes["summary"] == "s"
    assert design.diagnostics["decoding"].startswith("vLLM structured outputs")


def _legal(config: GeneratorConfig) -> None:
    assert list(config.sizes) == list(SIZES)
    assert abs(sum(p.data_ratio for p in config.sizes.values()) - 1.0) <= 1e-6
    for params in config.sizes.values():
        for field, (lo, hi) in BOUNDS.items():
            assert lo <= getattr(params, field) <= hi


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True) | st.integers()
    | st.text(max_size=8) | st.sampled_from(["3x3", "5", "size_7", "10x10", "data_ratio", "sizes", "hole_ratio"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["sizes", "3x3", "4x4", "5", "9x9", "10x10", "11x11", "data_ratio", "hole_ratio",
                         "wait_ratio", "summary", "x"]), inner, max_size=5),
    max_leaves=25)


def _render(value, style: int) -> str:
    text = json.dumps(value, allow_nan=True)
    if style == 1:
        text = text.replace('"', "'")
    elif style == 2:
        text = text.replace("}", ",}")
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.text(max_size=200),
    st.tuples(st.text(max_size=40), json_values, st.integers(0, 2), st.integers(0, 400)).map(
        lambda t: t[0] + "```json\n" + _render(t[1], t[2])[: t[3] or None] + "\n```"),
))
def test_any_model_output_yields_a_legal_config(text):
    ctx = make_ctx(ScriptedPolicy([text]))
    design = CheckpointEngineer(CheckpointEngineerConfig()).design(ctx)
    projected, _ = ctx.testbed.project(design.raw, ctx.proposal)
    _legal(projected)
    json.dumps(design.notes)


def test_diagnostics_survive_the_rich_round_summary():
    from rich.console import Console

    from curriculum.console import RichReporter
    from curriculum.core.records import DesignRecord

    text = answer(config_json([0.125] * 8), summary="[/INST] 3x3 is [/] easy [bold]")
    c = make_ctx(ScriptedPolicy([text]))
    design = CheckpointEngineer(CheckpointEngineerConfig()).design(c)
    projected, changes = c.testbed.project(design.raw, c.proposal)
    r = report(0, c.proposal.model_dump(mode="json"))
    r.design = DesignRecord(engineer="checkpoint", design=design, projected=projected.model_dump(mode="json"),
                            changes=changes, diagnostics=design.diagnostics)
    import io

    console = Console(file=io.StringIO(), width=300, color_system=None)
    RichReporter(console).round_end(r)
    assert "[/INST] 3x3 is [/] easy [bold]" in console.file.getvalue()


def test_config_that_project_rejects_is_reported():
    design = CheckpointEngineer(CheckpointEngineerConfig()).design(make_ctx(ScriptedPolicy(['{"sizes": {}}'])))
    assert design.raw == {"sizes": {}}
    assert design.notes["status"].startswith("config rejected by project (unusable proposal")
    assert design.diagnostics["usable_output"] is False


def test_vllm_api_mismatch_falls_back_to_free_decoding(monkeypatch):
    vllm = types.ModuleType("vllm")  # no SamplingParams at all
    monkeypatch.setitem(sys.modules, "vllm", vllm)

    class VLLMPolicy(ScriptedPolicy):
        llm = object()

    design = CheckpointEngineer(CheckpointEngineerConfig()).design(
        make_ctx(VLLMPolicy([answer(config_json([0.125] * 8, hole=0.12))])))
    assert design.raw["sizes"]["4x4"]["hole_ratio"] == 0.12
    assert "structured outputs unavailable" in design.diagnostics["decoding"]


def test_the_prompt_shows_no_config_a_model_could_take_over():
    """Under the answer schema the format is placeholders without a number; in free text the
    example is partial and implausible (1 % on 3x3, 99 % on 10x10 at the hardest knobs)."""
    constrained = CheckpointEngineer(CheckpointEngineerConfig()).design(make_ctx(ScriptedPolicy(["{}"]))).prompt
    answer_format = constrained[constrained.index("## Your answer"):]
    shape = answer_format.split("```json")[1].split("```")[0]
    assert '"<map size>": {"data_ratio": <data_ratio>' in shape and not any(ch.isdigit() for ch in shape)
    assert "write only the map sizes you change" in answer_format
    free = CheckpointEngineer(CheckpointEngineerConfig(structured_output=False)).design(
        make_ctx(ScriptedPolicy(["{}"]))).prompt
    assert '"3x3": {"data_ratio": 0.01}' in free
    assert '"10x10": {"data_ratio": 0.99, "hole_ratio": 0.5, "wait_ratio": 1.0}' in free
    assert "not a sensible curriculum" in free


def test_answers_that_copy_the_prompts_example_are_counted():
    example = {"sizes": {"3x3": {"data_ratio": 0.01}, "10x10": {"data_ratio": 0.99, "hole_ratio": 0.5,
                                                                  "wait_ratio": 1.0}}}
    designed = config_json([0.05, 0.05, 0.2, 0.4, 0.1, 0.1, 0.05, 0.05], hole=0.2)
    counts = []
    for proposal in (example, designed):
        design = CheckpointEngineer(CheckpointEngineerConfig(structured_output=False)).design(
            make_ctx(ScriptedPolicy([answer(proposal)])))
        assert design.diagnostics["usable_output"]
        counts.append((design.diagnostics["answers"], design.diagnostics["copied_example"]))
    assert counts == [(1, 1), (1, 0)]
    # Two attempts, the first without a config: two answers.
    design = CheckpointEngineer(CheckpointEngineerConfig(structured_output=False, attempts=2)).design(
        make_ctx(ScriptedPolicy(["no config", answer(example)])))
    assert (design.diagnostics["answers"], design.diagnostics["copied_example"]) == (2, 1)


class ExampleCopier(ScriptedPolicy):
    """What the 135M engineer did: answers with the prompt's example when the prompt shows one;
    otherwise it reads F's valid rates and puts the data on the sizes between 20 % and 80 %."""

    def __init__(self) -> None:
        super().__init__([""])

    def generate(self, tasks, *, max_new_tokens=None, temperature=None, seed=0):
        from engineers.checkpoint.parse import parse_answer

        prompt = tasks[0].messages[-1]["content"]
        shown = parse_answer(prompt[prompt.index("## Your answer"):]).proposal
        if shown and any(isinstance(v, dict) and isinstance(v.get("data_ratio"), float)
                         for v in shown.get("sizes", {}).values()):
            self.outputs = [answer(shown)]
        else:
            rates = {m[0]: float(m[1]) for m in re.findall(r"^\s*(\d+x\d+)\s+n=\d+\s+valid\s+([\d.]+)%",
                                                           prompt, re.M)}
            frontier = {s: {"data_ratio": 1.0} for s, r in rates.items() if 20 <= r <= 80}
            rest = {s: {"data_ratio": 0.0} for s in rates if s not in frontier}
            self.outputs = [answer({"sizes": {**frontier, **rest}})]
        return super().generate(tasks, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)


def _designed_shares(valid: dict[str, float], **config) -> dict[str, float]:
    history = [RoundReport(round=0, proposal=ROUND1, train_metrics={},
                           eval=EvalReport(score=0.3, metrics={}, breakdown=fixed_breakdown(valid)))]
    ctx = DesignContext(round=0, total_rounds=3, history=history, proposal=GeneratorConfig.model_validate(ROUND1),
                        testbed=MAPFTestbed(), rng=np.random.default_rng(0), policy=ExampleCopier(),
                        run_info={"epochs_per_round": 3.0})
    design = CheckpointEngineer(CheckpointEngineerConfig(**config)).design(ctx)
    projected, _ = ctx.testbed.project(design.raw, ctx.proposal)
    return {s: round(p.data_ratio, 3) for s, p in projected.sizes.items() if p.data_ratio > 0}


def test_proposals_change_when_the_failure_breakdown_changes():
    early = {"3x3": 0.6, "4x4": 0.3, "5x5": 0.1, "6x6": 0.0, "7x7": 0.0, "8x8": 0.0, "9x9": 0.0, "10x10": 0.0}
    late = {"3x3": 1.0, "4x4": 1.0, "5x5": 0.9, "6x6": 0.7, "7x7": 0.4, "8x8": 0.1, "9x9": 0.0, "10x10": 0.0}
    assert _designed_shares(early) == {"3x3": 0.5, "4x4": 0.5}
    assert _designed_shares(late) == {"6x6": 0.5, "7x7": 0.5}
    # In free text the example is shown; a copier answers with it whatever F says, and is counted.
    assert _designed_shares(early, structured_output=False) == _designed_shares(late, structured_output=False)


