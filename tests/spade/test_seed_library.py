"""The shipped seed library (every program admitted, every skill covered) and the structured
design mode (skeleton + parts admitted; a broken part rejected with its reason)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import FAST_SANDBOX
from spade_fakes import ScriptedPolicy

from engineers.base import DesignContext
from engineers.spade.admission import admit
from engineers.spade.config import GAME_SKILLS, TOOL_SKILLS, AdmissionConfig, RejectReason, SpadeEngineerConfig
from engineers.spade.designer import DesignCandidate
from engineers.spade.engineer import SpadeEngineer
from engineers.spade.parse import DesignParseError, parse_structured
from engineers.spade.prompts import STRUCTURED_GAMES_CONTRACT
from testbeds.spade.synthetic.seeds import library_for, seed_library
from testbeds.spade.synthetic.skeleton import PartError, format_parts, render_game, split_parts

LIBRARY = [s for setting in ("games", "tools") for s in seed_library(setting)]


def candidate(program: str | None, hint: str | None, reason: RejectReason | None = None,
              detail: str = "") -> DesignCandidate:
    return DesignCandidate(round=0, call=0, setting="games", skill="s", messages=[], output="", num_tokens=0,
                           corpus_doc_id=None, parent=None, program=program, hint=hint,
                           parse_reason=reason, parse_detail=detail)


def library_seed(program: str, setting: str):
    """The library environment a warm-start answer was made from (a variant's closest seed)."""
    from engineers.spade.diversity import closest_seed

    name, _ = closest_seed(program, setting)
    return next(s for s in seed_library(setting) if s.name == name)


def structured(text: str) -> DesignCandidate:
    try:
        parsed = parse_structured(text)
    except DesignParseError as exc:
        return candidate(None, None, exc.reason, str(exc))
    return candidate(parsed.program, parsed.hint)


@pytest.mark.parametrize("seed", LIBRARY, ids=lambda s: f"{s.setting}-{s.name}")
def test_every_library_program_is_admitted(seed, sandbox_pool):
    result = admit(candidate(seed.program, seed.hint), sandbox_pool, AdmissionConfig())
    assert result.admitted, f"{seed.name}: {result.reason} {result.detail}"
    assert result.checks_passed[-1] == "hint_clean"


@pytest.mark.parametrize("setting,skills", [("games", GAME_SKILLS), ("tools", TOOL_SKILLS)])
def test_library_covers_every_configured_skill(setting, skills):
    assert {s.skill for s in seed_library(setting)} >= set(skills)
    assert {s.skill for s in library_for(setting, [skills[0]])} == {skills[0]}
    first = seed_library(setting)[0]
    assert library_for(setting, None, [first.name]) == [first]
    with pytest.raises(ValueError, match=f"no {setting} seed-library environment named nope"):
        library_for(setting, None, ["nope"])


def test_game_seeds_round_trip_through_their_parts():
    for seed in seed_library("games"):
        assert seed.parts is not None
        assert render_game(split_parts(seed.program, seed.hint)) == seed.program
        parsed = parse_structured(format_parts(seed.parts))
        assert (parsed.program, parsed.hint) == (seed.program, seed.hint)


def test_structured_design_is_short_and_admitted(sandbox_pool):
    seed = seed_library("games")[0]
    text = format_parts(seed.parts)
    assert len(text) < len(seed.program)  # the skeleton is not the model's to write
    result = admit(structured(text), sandbox_pool, AdmissionConfig())
    assert result.admitted, result.detail


def _broken(seed, **parts) -> str:
    return format_parts(dataclasses.replace(seed.parts, **parts))


@pytest.mark.parametrize("case,reason,detail", [
    ("wrong_signature", "bad_part", "part <check>: check takes (state), expected (state, answer)"),
    ("syntax", "syntax_error", "part <solution>:"),
    ("missing", "parse_error", "part <solution> is missing"),
    ("wrong_solution", "solution_does_not_win", "did not win"),
    ("no_hint", "missing_hint", "no hint"),
    ("always_right", "trivial_win", "wins"),
])
def test_broken_part_is_rejected_with_its_reason(case, reason, detail, sandbox_pool):
    seed = next(s for s in seed_library("games") if s.name == "modular_expression")
    text = {
        "wrong_signature": _broken(seed, check="def check(state):\n    return True, ''"),
        "syntax": _broken(seed, solution="def solve(state):\n    return str(state['value']"),
        "missing": format_parts(seed.parts).split("<solution>")[0] + f"<hint>{seed.hint}</hint>",
        "wrong_solution": _broken(seed, solution="def solve(state):\n    return str(state['value'] + 1)"),
        "no_hint": _broken(seed, hint=""),
        "always_right": _broken(seed, check="def check(state, answer):\n    return True, ''"),
    }[case]
    result = admit(structured(text), sandbox_pool, AdmissionConfig())
    assert not result.admitted
    assert result.reason == RejectReason(reason)
    assert detail in result.detail
    assert result.penalty == AdmissionConfig().penalties[RejectReason(reason)]


def test_part_checks_are_pure():
    seed = seed_library("games")[0]
    with pytest.raises(PartError, match="part <reset>: does not define make_task"):
        render_game(dataclasses.replace(seed.parts, reset="x = 1"))


def test_structured_mode_in_the_engineer(tmp_path):
    seed = next(s for s in seed_library("games") if s.name == "robot_walk")
    policy = ScriptedPolicy([format_parts(seed.parts)])
    config = SpadeEngineerConfig.model_validate({
        "name": "spade", "design_mode": "structured", "designs_per_round": 1, "corpus": "none",
        "diversity": {"embedding": "tfidf"}, "sandbox": FAST_SANDBOX})
    engineer = SpadeEngineer(config, run_dir=str(tmp_path / "run"))
    try:
        design = engineer.design(DesignContext(round=0, total_rounds=1, history=[], proposal=None, testbed=None,
                                               rng=np.random.default_rng(0), policy=policy))
    finally:
        engineer.close()
    assert policy.seen[0].messages[0]["content"] == STRUCTURED_GAMES_CONTRACT
    assert design.diagnostics["admitted"] == 1
    assert design.raw["environments"][0]["program"] == seed.program


def test_structured_mode_is_for_games_only():
    with pytest.raises(ValueError, match="games setting only"):
        SpadeEngineerConfig(setting="tools", design_mode="structured")


@pytest.mark.parametrize("setting", ["games", "tools"])
def test_seed_library_as_initial_pool(setting):
    from testbeds.spade.testbed import SpadeTestbedConfig, load_initial_pool

    pool = load_initial_pool("seed_library", SpadeTestbedConfig(setting=setting))
    assert [e.program for e in pool] == [s.program for s in seed_library(setting)]
    assert all(e.hint and e.skill and e.setting == setting for e in pool)


@pytest.mark.parametrize("mode,setting", [("structured", "games"), ("program", "games"), ("program", "tools")])
def test_designer_warmstart_examples_are_admissible_designs(mode, setting, sandbox_pool):
    from engineers.spade.parse import parse_design
    from engineers.spade.prompts import contract
    from engineers.spade.warmstart import designer_examples

    config = SpadeEngineerConfig(setting=setting, design_mode=mode, corpus="none", designer_warmstart=True)
    examples = SpadeEngineer(config).warmstart_examples(7, seed=0)
    assert len(examples) == 7
    for example in examples:
        assert example["prompt"][0]["content"] == contract(setting, mode)
        text = example["completion"][0]["content"]
        parsed = parse_structured(text) if mode == "structured" else parse_design(text)
        seed = library_seed(parsed.program, setting)
        assert f"Target skill: {seed.skill}." in example["prompt"][1]["content"]
        if seed.params:  # a variant (parametrised game): admitted like the library's own
            assert admit(candidate(parsed.program, parsed.hint), sandbox_pool, AdmissionConfig()).admitted
        else:
            assert (parsed.program, parsed.hint) == (seed.program, seed.hint)
    assert SpadeEngineer(config.model_copy(update={"designer_warmstart": False})).warmstart_examples(3, 0) == []
    # Restricted to the configured skills.
    skill = seed_library(setting)[1].skill
    only = designer_examples(config.model_copy(update={"skills": [skill]}), 3, seed=0)
    assert all(f"Target skill: {skill}." in e["prompt"][1]["content"] for e in only)
    programs = {parse_design(e["completion"][0]["content"]).program if mode == "program"
                else parse_structured(e["completion"][0]["content"]).program for e in only}
    assert {library_seed(p, setting).skill for p in programs} == {skill}


@pytest.mark.parametrize("setting", ["games", "tools"])
def test_agent_warmstart_examples_replay_the_solution(setting, sandbox_pool):
    from trainers.selfplay.play import PlayConfig
    from trainers.selfplay.warmstart import agent_examples

    config = PlayConfig()
    examples = agent_examples(setting, config, sandbox_pool, 12, seed=3)
    assert len(examples) == 12
    assert {e["prompt"][0]["content"] for e in examples} == {
        config.games_instruction if setting == "games" else config.tools_instruction}
    assert any("Hint: " in e["prompt"][1]["content"] for e in examples)
    assert any("Hint: " not in e["prompt"][1]["content"] for e in examples)
    # Episodes end with the boxed final answer.
    finals = [e for e in examples if e["completion"][0]["content"].startswith("\\boxed{")]
    assert finals
    if setting == "tools":
        assert any(len(e["prompt"]) > 2 for e in examples)  # multi-turn: tool results came back


def _engineer(tmp_path, outputs, **diversity):
    config = SpadeEngineerConfig.model_validate({
        "name": "spade", "design_mode": "structured", "designs_per_round": len(outputs), "corpus": "none",
        "diversity": {"embedding": "tfidf", **diversity}, "sandbox": FAST_SANDBOX})
    return SpadeEngineer(config, run_dir=str(tmp_path / "run")), ScriptedPolicy(outputs)


def _design(engineer, policy, history=()):
    return engineer.design(DesignContext(round=0, total_rounds=2, history=list(history), proposal=None,
                                         testbed=None, rng=np.random.default_rng(0), policy=policy))


NEW_GAME = """<reset>
def make_task(rng):
    a, b = rng.randint(3, 40), rng.randint(3, 40)
    return {"a": a, "b": b}, f"Two trains leave {a + b} km apart and close at {a} and {b} km/h. After how many hours do they meet?"
</reset>
<check>
def check(state, answer):
    return answer.strip() == "1", "no: add the two speeds first"
</check>
<solution>
def solve(state):
    return "1"
</solution>
<hint>Closing speed is the sum of both speeds.</hint>"""


def test_closest_seed_names_the_library_game_a_design_copies():
    from engineers.spade.diversity import closest_seed

    for seed in seed_library("games"):
        assert closest_seed(seed.program, "games") == (seed.name, 1.0)
    name, sim = closest_seed(parse_structured(NEW_GAME).program, "games")
    assert sim < 0.6, (name, sim)  # the shared GameEnv skeleton class does not count


def test_a_copied_seed_game_is_flagged_and_shown(tmp_path):
    from engineers.spade.cli import envs_table, list_envs

    seed = next(s for s in seed_library("games") if s.name == "take_away")
    engineer, policy = _engineer(tmp_path, [format_parts(seed.parts), NEW_GAME])
    try:
        design = _design(engineer, policy)
    finally:
        engineer.close()
    diag, summary = design.diagnostics, design.notes["spade"]
    assert diag["admitted"] == 2 and diag["seed_copies"] == 1
    copied = next(h for h, (name, _) in summary["seed_similarity"].items() if name == "take_away")
    assert summary["seed_copies"] == [[copied, "take_away"]]
    assert summary["seed_similarity"][copied][1] == 1.0
    assert f"{copied[:8]} take_away 1.00" in diag["closest_seed"] and len(diag["closest_seed"]) == 2
    entries = {e.hash: e for e in list_envs(tmp_path / "run")}
    assert entries[copied].extra["closest_seed"] == "take_away"
    assert all(e.admitted for e in entries.values())
    from rich.console import Console
    console = Console(width=250, record=True)
    console.print(envs_table(list(entries.values())))
    assert "take_away 1.00" in console.export_text()


def test_copied_seed_game_is_rejected_when_near_duplicates_are(tmp_path):
    seed = next(s for s in seed_library("games") if s.name == "take_away")
    engineer, policy = _engineer(tmp_path, [format_parts(seed.parts), NEW_GAME], reject_near_duplicates=True)
    try:
        design = _design(engineer, policy)
    finally:
        engineer.close()
    summary = design.notes["spade"]
    assert summary["rejections"] == {"near_duplicate": 1} and len(summary["admitted"]) == 1
    assert "copy of seed-library environment take_away (source similarity 1.00)" in summary["rejected"][0]["detail"]


def test_the_last_rounds_plays_reach_the_memory(tmp_path):
    from engineers.spade.cli import list_envs, played
    from curriculum.core.pool import EnvOutcome
    from curriculum.core.records import RoundReport
    from curriculum.core.types import EvalReport

    engineer, policy = _engineer(tmp_path, [NEW_GAME])
    try:
        design = _design(engineer, policy)
        env = design.notes["spade"]["admitted"][0]
        assert not played(list_envs(tmp_path / "run")[0])
        outcome = EnvOutcome(env_id=env, win_rate=0.0, win_rate_hint=0.5, mean_return=0.0, mean_return_hint=0.5,
                             regret=0.5, raw_regret=0.5)
        engineer.on_round_end(RoundReport(round=1, proposal={}, train_metrics={}, eval=EvalReport(score=0.0, metrics={}),
                                          env_outcomes=[outcome]))
    finally:
        engineer.close()
    entry = list_envs(tmp_path / "run")[0]
    assert played(entry) and (entry.regret, entry.win_rate_with_hint, entry.win_rate_without) == (0.5, 0.5, 0.0)


def test_warmstart_example_counts_per_role(sandbox_pool):
    config = SpadeEngineerConfig(setting="games", design_mode="structured", corpus="none", designer_warmstart=True,
                                 designer_warmstart_examples=5)
    assert len(SpadeEngineer(config).warmstart_examples(2, seed=0)) == 5
    assert len(SpadeEngineer(config.model_copy(update={"designer_warmstart_examples": None}))
               .warmstart_examples(2, seed=0)) == 2


def test_the_same_program_in_a_later_round_is_flagged_as_a_repeat(tmp_path):
    engineer, policy = _engineer(tmp_path, [NEW_GAME])
    try:
        first = _design(engineer, policy).notes["spade"]
        again = _design(engineer, policy).notes["spade"]
    finally:
        engineer.close()
    env = first["admitted"][0]
    assert first["near_duplicates"] == {} and again["admitted"] == [env]
    assert again["near_duplicates"] == {env: env}


PARAMETRISED = [s for s in seed_library("games") if s.params]
DOCUMENT = ("Compute the determinant of a square matrix using cofactor expansion along any row; "
            "the matrix entries may be symbols or rational numbers.")


def test_the_library_has_parametrised_games():
    assert {s.name for s in PARAMETRISED} >= {"key_position", "secret_suffix", "number_code"}
    for seed in PARAMETRISED:
        assert "@@" not in seed.program and "{" not in seed.hint  # the file's values are filled in


@pytest.mark.parametrize("seed", PARAMETRISED, ids=lambda s: s.name)
def test_every_variant_of_a_parametrised_game_is_admitted(seed, sandbox_pool):
    import random

    from testbeds.spade.synthetic.seeds import variant

    programs = set()
    for i in range(6):
        v = variant(seed, random.Random(i), DOCUMENT if i % 2 else None)
        result = admit(candidate(v.program, v.hint), sandbox_pool, AdmissionConfig())
        assert result.admitted, f"{seed.name} variant {i}: {result.reason} {result.detail}"
        programs.add(v.program)
    assert len(programs) > 1  # the parameters really change the game


def test_a_variant_takes_its_words_from_the_document():
    import random

    from testbeds.spade.synthetic.seeds import document_words, variant

    assert document_words(DOCUMENT, 4) == ["compute", "square", "matrix", "using"]
    assert document_words("a bb matrix", 3, fallback=["river", "matrix", "stone"]) == ["matrix", "river", "stone"]
    seed = next(s for s in PARAMETRISED if s.name == "key_position")
    v = variant(seed, random.Random(0), DOCUMENT)
    assert "WORDS = ['compute', 'determinant'" not in v.program  # 11 letters: too long
    assert "WORDS = ['compute', 'square', 'matrix', 'using', 'cofactor', 'expansion'" not in v.program
    assert "WORDS = ['compute', 'square', 'matrix', 'using', 'cofactor', 'along']" in v.program
    # Hint words are kept out (a word of the hint would leak the answer), and the hint is filled in.
    assert not {"always", "number"} & set(document_words("always number river", 3, {"always", "number"}))
    assert v.hint == f"The key is always word number {v.program.split('POSITION = ')[1][0]} of the list."


def test_designer_warmstart_answers_depend_on_the_document():
    config = SpadeEngineerConfig(setting="games", design_mode="structured", designer_warmstart=True,
                                 corpus={"max_doc_chars": 400}, skills=["pattern recognition"],
                                 warmstart_seeds=["key_position"])
    examples = SpadeEngineer(config).warmstart_examples(4, seed=0)
    answers = [parse_structured(e["completion"][0]["content"]) for e in examples]
    assert len({a.program for a in answers}) == 4
    for example, answer in zip(examples, answers, strict=True):
        document = example["prompt"][1]["content"].split("<document>")[1].lower()
        words = answer.program.split("WORDS = [")[1].split("]")[0].replace("'", "").split(", ")
        assert all(w in document for w in words)
    with pytest.raises(ValueError, match="no games seed-library environment named nope"):
        SpadeEngineer(config.model_copy(update={"warmstart_seeds": ["nope"]})).warmstart_examples(1, seed=0)


def test_agent_warmstart_on_named_seed_games(sandbox_pool):
    from trainers.selfplay.play import PlayConfig
    from trainers.selfplay.warmstart import agent_examples

    examples = agent_examples("games", PlayConfig(), sandbox_pool, 8, seed=1, names=["key_position"])
    tasks = [e["prompt"][1]["content"] for e in examples]
    assert all(t.startswith("One of these words is the key:") for t in tasks)
    options_of = [t.split("key: ")[1].split(". Which")[0].split(", ") for t in tasks]
    assert len({w for options in options_of for w in options}) > 6  # a fresh variant (word list) per episode
    assert len({e["prompt"][1]["content"].split("word number ")[1][0] for e in examples
                if "Hint: " in e["prompt"][1]["content"]}) > 1  # and key position
    for example, task, options in zip(examples, tasks, options_of, strict=True):
        answer = example["completion"][0]["content"]
        assert answer[len("\\boxed{"):-1] in options
        if "Hint: " in task:  # the hinted half names the position of the key
            position = int(task.split("word number ")[1][0])
            assert answer == "\\boxed{" + options[position - 1] + "}"


@pytest.mark.parametrize("mode", ["structured", "program"])
def test_designer_warmstart_answers_can_start_with_the_skill(mode, sandbox_pool):
    from engineers.spade.parse import parse_design

    config = SpadeEngineerConfig(setting="games", design_mode=mode, designer_warmstart=True, corpus="none",
                                 warmstart_skill_line=True, warmstart_seeds=["key_position", "take_away"])
    for example in SpadeEngineer(config).warmstart_examples(4, seed=0):
        skill = example["prompt"][1]["content"].split("Target skill: ")[1].split(".\n")[0]
        text = example["completion"][0]["content"]
        first = text.split("<reset>\n")[1] if mode == "structured" else text.split("```python\n")[1]
        assert first.startswith(f"# skill: {skill}\n")
        parsed = parse_structured(text) if mode == "structured" else parse_design(text)
        assert admit(candidate(parsed.program, parsed.hint), sandbox_pool, AdmissionConfig()).admitted
