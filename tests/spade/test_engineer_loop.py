"""The spade engineer with a scripted designer model: grounding, memory, lineage, Vendi/n, configs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import FAST_SANDBOX, FIXTURES
from spade_fakes import ScriptedPolicy, write_jsonl_corpus

from engineers.spade.cli import list_envs, show_env
from curriculum.config import load_config
from engineers.base import DesignContext
from engineers.spade.config import SpadeEngineerConfig
from engineers.spade.engineer import ROUNDS_LOG, SpadeEngineer
from engineers.spade.memory import Memory

REPO = Path(__file__).resolve().parents[2]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def make_engineer(tmp_path: Path, **overrides) -> SpadeEngineer:
    corpus = write_jsonl_corpus(tmp_path / "corpus.jsonl", n=12)
    data = {"name": "spade", "designs_per_round": 1,
            "corpus": {"sources": [{"kind": "jsonl", "path": str(corpus), "id_field": "id"}]},
            "memory": {"mutate_probability": 1.0}, "diversity": {"embedding": "tfidf"},
            "sandbox": FAST_SANDBOX} | overrides
    return SpadeEngineer(SpadeEngineerConfig.model_validate(data), run_dir=str(tmp_path / "run"))


def context(round_index: int, policy) -> DesignContext:
    return DesignContext(round=round_index, total_rounds=10, history=[], proposal=None, testbed=None,
                         rng=np.random.default_rng(round_index), policy=policy)


def doc_of(task) -> str:
    text = task.messages[1]["content"]
    return text.split("<document>\n", 1)[1].split(":", 1)[0]


def test_three_step_design_loop(tmp_path):
    policy = ScriptedPolicy([fixture("games_guess_ok.out"), fixture("games_modarith_ok.out"),
                             fixture("bad_syntax.out")])
    engineer = make_engineer(tmp_path)
    try:
        first = engineer.design(context(0, policy))
        guess_hash = first.notes["spade"]["admitted"][0]
        assert first.raw["environments"][0]["hash"] == guess_hash
        assert "class GuessNumberEnv" in first.raw["environments"][0]["program"]
        assert first.diagnostics["vendi_per_n"] == pytest.approx(1.0)
        # part 2 would measure this; here we fill it in by hand
        engineer.memory.update_outcome(guess_hash, 0.35, 0.65, 0.30)

        second = engineer.design(context(1, policy))
        assert "class GuessNumberEnv" in policy.seen[1].messages[1]["content"]  # offered as seed
        assert "regret 0.35" in policy.seen[1].messages[1]["content"]
        mod_hash = second.notes["spade"]["admitted"][0]
        assert engineer.memory.get(mod_hash).parent == guess_hash

        third = engineer.design(context(2, policy))
        assert third.notes["spade"]["admitted"] == []
        assert third.notes["spade"]["rejections"] == {"syntax_error": 1}
        assert third.diagnostics["vendi_per_n"] is None
        assert len(third.raw["environments"]) == 2

        docs = [doc_of(task) for task in policy.seen]
        assert len(set(docs)) == 3  # every prompt grounded on a different document
        assert [e.corpus_doc_id for e in engineer.memory.entries()] == \
            [f"doc{d.split()[-1]}" for d in docs]
        rounds = [json.loads(line) for line in (tmp_path / "run" / ROUNDS_LOG).read_text().splitlines()]
        assert [r["vendi_per_n"] for r in rounds] == [pytest.approx(1.0), pytest.approx(1.0), None]
        assert all(r["embedding"] in ("tfidf-char3-5", None) for r in rounds)
        state = engineer.state_dict()
        assert state["corpus_cursor"] == 3 and state["calls"] == 3
    finally:
        engineer.close()

    # memory read back from disk, through the show library
    entries = list_envs(tmp_path / "run")
    assert [(e.admitted, e.reason) for e in entries] == [(True, None), (True, None), (False, "syntax_error")]
    assert show_env(tmp_path / "run", mod_hash[:6]).regret is None
    assert show_env(tmp_path / "run", guess_hash).regret == 0.35

    # resume: a new engineer continues the corpus order and the skill cycle
    resumed = make_engineer(tmp_path)
    resumed.load_state_dict(state)
    try:
        resumed.design(context(3, policy))
        assert doc_of(policy.seen[3]) not in docs
        skills = resumed.config.skill_list()
        assert f"Target skill: {skills[3]}." in policy.seen[3].messages[1]["content"]
    finally:
        resumed.close()


def test_identical_designs_give_vendi_half_and_are_flagged(tmp_path):
    text = fixture("games_sortwords_ok.out")
    engineer = make_engineer(tmp_path, designs_per_round=2)
    try:
        design = engineer.design(context(0, ScriptedPolicy([text, text])))
        summary = design.notes["spade"]
        assert len(summary["admitted"]) == 2 and summary["admitted"][0] == summary["admitted"][1]
        assert summary["vendi_per_n"] == pytest.approx(0.5)
        assert summary["near_duplicates"] == {summary["admitted"][1]: summary["admitted"][0]}
        assert len(design.raw["environments"]) == 1  # one program, remembered once
    finally:
        engineer.close()


def test_near_duplicate_rejection_against_memory(tmp_path):
    text = fixture("games_modarith_ok.out")
    engineer = make_engineer(tmp_path, diversity={"embedding": "tfidf", "reject_near_duplicates": True})
    try:
        policy = ScriptedPolicy([text, text.replace("Compute (", "Please compute (")])
        assert engineer.design(context(0, policy)).notes["spade"]["admitted"]
        second = engineer.design(context(1, policy)).notes["spade"]
        assert second["rejections"] == {"near_duplicate": 1}
    finally:
        engineer.close()


def test_ablations_no_memory_no_corpus(tmp_path):
    policy = ScriptedPolicy([fixture("tools_files_ok.out")])
    engineer = make_engineer(tmp_path, setting="tools", corpus="none", memory=False)
    try:
        first = engineer.design(context(0, policy))
        engineer.memory.update_outcome(first.notes["spade"]["admitted"][0], 0.5, 0.7, 0.2)
        engineer.design(context(1, policy))
        prompt = policy.seen[1].messages[1]["content"]
        assert "<document>" not in prompt and "Mutate" not in prompt
        assert "ToolEnv" in policy.seen[1].messages[0]["content"]
        assert first.notes["spade"]["corpus_docs"] == [None]
        assert Memory.in_run_dir(tmp_path / "run").count() == 1  # still recorded for show
    finally:
        engineer.close()


def test_engineer_requires_a_policy(tmp_path):
    engineer = make_engineer(tmp_path)
    try:
        with pytest.raises(ValueError, match="policy"):
            engineer.design(context(0, None))
    finally:
        engineer.close()


@pytest.mark.parametrize("name", ["spade_games_cpu_demo", "spade_tools_cpu_demo",
                                  "spade_games_qwen3_4b", "spade_tools_qwen3_30b_a3b"])
def test_configs_validate(name):
    config = load_config(REPO / "configs" / f"{name}.yaml")
    assert config.engineer.name == "spade"
    assert config.engineer.setting == ("games" if "games" in name else "tools")


def test_config_rejects_unknown_keys():
    from pydantic import ValidationError
    with pytest.raises(ValidationError):
        SpadeEngineerConfig.model_validate({"name": "spade", "memmory": False})
    with pytest.raises(ValidationError):
        SpadeEngineerConfig.model_validate({"name": "spade", "admission": {"penalties": {"nope": 1}}})


def test_raw_carries_design_samples(tmp_path):
    engineer = make_engineer(tmp_path, designs_per_round=2)
    try:
        design = engineer.design(context(0, ScriptedPolicy([fixture("games_guess_ok.out"),
                                                            fixture("bad_hint_leak.out")])))
    finally:
        engineer.close()
    ok, leak = design.raw["designs"]
    assert ok["admitted"] and ok["reason"] == "ok" and ok["env_id"] == design.raw["environments"][0]["hash"]
    assert ok["penalty"] is None and ok["messages"][0]["role"] == "system"
    assert "GuessNumberEnv" in ok["completion"]
    assert not leak["admitted"] and leak["reason"] == "hint_leak" and leak["penalty"] == -0.5
    assert leak["env_id"] is None and ok["design_id"] != leak["design_id"]


def test_parallel_admission_keeps_order(tmp_path):
    outputs = [fixture("bad_infinite_loop.out"), fixture("games_modarith_ok.out"),
               fixture("bad_forbidden_import.out"), fixture("tools_bank_ok.out")]
    engineer = make_engineer(tmp_path, designs_per_round=4, sandbox=FAST_SANDBOX | {"workers": 2})
    try:
        design = engineer.design(context(0, ScriptedPolicy(outputs)))
    finally:
        engineer.close()
    assert [d["reason"] for d in design.raw["designs"]] == ["timeout", "ok", "forbidden_import", "ok"]


def test_frozen_base_designer_marks_designs_untrainable(tmp_path):
    """``designer: base`` (the frozen-designer ablation): the base model writes, and its designs
    reach the trainer as ``trainable: false`` (played and scored, never trained on)."""
    from curriculum.core.pool import pool_item
    from testbeds.spade.testbed import SpadeProposal, SpadeTestbed, SpadeTestbedConfig

    outputs = [fixture("games_guess_ok.out")]
    (tmp_path / "p").mkdir()
    (tmp_path / "b").mkdir()
    policy_engineer = make_engineer(tmp_path / "p")
    base_engineer = make_engineer(tmp_path / "b", designer="base")
    base_ctx = context(0, None)
    base_ctx.base_policy = lambda: ScriptedPolicy(outputs)
    try:
        trained = policy_engineer.design(context(0, ScriptedPolicy(outputs))).raw
        frozen = base_engineer.design(base_ctx).raw
    finally:
        policy_engineer.close()
        base_engineer.close()
    assert [d["trainable"] for d in trained["designs"]] == [True]
    assert [d["trainable"] for d in frozen["designs"]] == [False]
    testbed = SpadeTestbed(SpadeTestbedConfig())
    proposal, _ = testbed.project(frozen, SpadeProposal())
    design_tasks = [t for t in testbed.sample(proposal, 0, 0) if t.data["kind"] == "design"]
    assert [pool_item(t).trainable for t in design_tasks] == [False]


def test_vendi_per_n_over_the_whole_run_pool(tmp_path):
    """The same game twice, one per round: each round's own Vendi/n is 1 (one environment), the
    run's pool shows the repeat (about 1/2)."""
    text = fixture("games_sortwords_ok.out")
    again = text.replace("```py\n", "```py\n# the same game once more\n", 1)
    assert again != text
    engineer = make_engineer(tmp_path)
    try:
        first_design = engineer.design(context(0, ScriptedPolicy([text])))
        second_design = engineer.design(context(1, ScriptedPolicy([again])))
        first, second = first_design.notes, second_design.notes
    finally:
        engineer.close()
    assert first["spade"]["vendi_per_n"] == pytest.approx(1.0) and second["spade"]["vendi_per_n"] == pytest.approx(1.0)
    assert first["spade"]["vendi_per_n_run"] == pytest.approx(1.0) and first["spade"]["run_pool"] == 1
    assert second["spade"]["run_pool"] == 2 and second["spade"]["vendi_per_n_run"] < 0.6
    assert second_design.diagnostics["vendi_per_n_run"] == second["spade"]["vendi_per_n_run"]


def test_play_outcomes_reach_memory_through_the_round_record_and_the_pool_is_saved(tmp_path):
    """The trainer's ``env_outcomes`` in the last ``RoundReport`` land in the memory; the pool the
    engineer hands on is saved for a later run's ``initial_pool: memory:<run dir>``."""
    from curriculum.core.pool import EnvOutcome
    from testbeds.spade.saved_pool import load_pool
    from curriculum.core.records import RoundReport
    from curriculum.core.types import EvalReport
    from testbeds.spade.testbed import SpadeTestbed, SpadeTestbedConfig

    policy = ScriptedPolicy([fixture("games_guess_ok.out"), fixture("bad_syntax.out")])
    engineer = make_engineer(tmp_path)
    try:
        first = engineer.design(context(0, policy))
        env_hash = first.raw["environments"][0]["hash"]
        played = EnvOutcome(env_id=env_hash, win_rate=0.25, win_rate_hint=0.75, mean_return=0.25,
                            mean_return_hint=0.75, regret=0.5, raw_regret=0.5)
        unknown = played.model_copy(update={"env_id": "rg-not-in-memory"})  # e.g. a reasoning-gym starter
        report = RoundReport(round=1, proposal={}, train_metrics={}, eval=EvalReport(score=0.0, metrics={}),
                             env_outcomes=[played, unknown])
        ctx = context(1, policy)
        ctx.history = [report]
        engineer.design(ctx)
        entry = engineer.memory.get(env_hash)
        assert (entry.regret, entry.win_rate_with_hint, entry.win_rate_without) == (0.5, 0.75, 0.25)
    finally:
        engineer.close()
    saved = load_pool(tmp_path / "run")
    assert [e.hash for e in saved] == [env_hash]
    later = SpadeTestbed(SpadeTestbedConfig(initial_pool=f"memory:{tmp_path / 'run'}"))
    assert later.initial_proposal(np.random.default_rng(0)).environments == saved
    with pytest.raises(FileNotFoundError, match="spade_pool.jsonl"):
        SpadeTestbed(SpadeTestbedConfig(initial_pool=f"memory:{tmp_path}")).initial_proposal(np.random.default_rng(0))
