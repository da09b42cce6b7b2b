"""Lenient JSON extraction from engineer outputs."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engineers.checkpoint.parse import find_object_spans, parse_answer, repair

CONFIG = {"sizes": {"3x3": {"data_ratio": 0.5, "hole_ratio": 0.1, "wait_ratio": 0.0},
                    "5x5": {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3}}}


def test_code_fence_with_prose_and_summary():
    text = ("The 5x5 maps fail on conflicts.\n```json\n"
            + json.dumps({"summary": "More waits at 5x5.", **CONFIG}) + "\n```\nDone.")
    p = parse_answer(text)
    assert p.proposal == CONFIG and p.method == "json"
    assert p.summary == "More waits at 5x5."
    assert p.reasoning == "The 5x5 maps fail on conflicts.\n```json"


def test_trailing_commas_single_quotes_python_literals_comments_bare_keys():
    text = """{'summary': 'ok', sizes: {3x3: {data_ratio: 0.5, hole_ratio: .1, wait_ratio: None,}, // c
              "5x5": {"data_ratio": 5e-1, /* x */ "hole_ratio": True,},},}"""
    p = parse_answer(text)
    assert p.method == "repaired"
    assert p.proposal == {"sizes": {"3x3": {"data_ratio": 0.5, "hole_ratio": 0.1, "wait_ratio": None},
                                    "5x5": {"data_ratio": 0.5, "hole_ratio": True}}}
    assert set(p.repairs) >= {"single quotes", "quoted bare keys", "trailing commas", "comments",
                              "Python/JS literals", "normalised numbers"}


def test_truncated_object_keeps_complete_values_and_drops_the_cut_one():
    text = 'ok {"summary": "s", "sizes": {"3x3": {"data_ratio": 0.3, "hole_ratio": 0.1}, "4x4": {"data_ratio": 0.2'
    p = parse_answer(text)
    assert p.proposal == {"sizes": {"3x3": {"data_ratio": 0.3, "hole_ratio": 0.1}, "4x4": {}}}
    assert "closed a truncated object" in p.repairs and "dropped a truncated value" in p.repairs
    cut_key = parse_answer('{"sizes": {"3x3": {"data_ratio": 0.3, "hole_')
    assert cut_key.proposal == {"sizes": {"3x3": {"data_ratio": 0.3}}}
    cut_colon = parse_answer('{"sizes": {"3x3": {"data_ratio": 0.3, "hole_ratio":')
    assert cut_colon.proposal == {"sizes": {"3x3": {"data_ratio": 0.3}}}


def test_last_config_block_wins_and_non_config_objects_are_skipped():
    first = {"sizes": {"3x3": {"data_ratio": 1.0}}}
    second = {"sizes": {"4x4": {"data_ratio": 1.0}}}
    text = f"draft {json.dumps(first)} final {json.dumps(second)} note {{\"confidence\": 1}}"
    assert parse_answer(text).proposal == second
    top_level = parse_answer('{"5x5": {"data_ratio": 1}}')
    assert top_level.proposal == {"5x5": {"data_ratio": 1}}


def test_nothing_usable():
    p = parse_answer("I would increase the small maps.")
    assert p.proposal is None and p.method == "none" and "no JSON object" in p.error
    assert parse_answer("[1, 2]").proposal is None
    assert parse_answer(None).proposal is None  # type: ignore[arg-type]
    summary_line = parse_answer("Summary: keep it.\nno json")
    assert summary_line.summary == "keep it." and summary_line.proposal is None


def test_apostrophes_in_prose_do_not_open_strings():
    text = "I don't know, it's hard. " + json.dumps(CONFIG)
    assert parse_answer(text).proposal == CONFIG
    assert find_object_spans('a {"x": "}"} b') == [(2, 12)]


def test_repair_output_is_json_for_near_json():
    fixed, _ = repair("{a: [1, 2,], 'b': {c: 'd'")
    assert json.loads(fixed) == {"a": [1, 2], "b": {"c": "d"}}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_arbitrary_text(text):
    p = parse_answer(text)
    assert p.proposal is None or isinstance(p.proposal, dict)


ratios = st.floats(min_value=0, max_value=1, allow_nan=False).map(lambda x: round(x, 4))
configs = st.dictionaries(st.sampled_from([f"{n}x{n}" for n in range(3, 11)]),
                          st.fixed_dictionaries({"data_ratio": ratios, "hole_ratio": ratios, "wait_ratio": ratios}),
                          min_size=1).map(lambda sizes: {"sizes": sizes})


@settings(max_examples=100, deadline=None)
@given(configs, st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=80),
       st.booleans())
def test_a_config_in_prose_is_recovered_exactly(config, prose, fenced):
    body = json.dumps({"summary": "s", **config})
    text = f"{prose}\n```json\n{body}\n```" if fenced else f"{prose} {body}"
    assert parse_answer(text).proposal == config


@settings(max_examples=100, deadline=None)
@given(configs, st.integers(min_value=1, max_value=400))
def test_any_truncation_gives_a_prefix_of_the_config(config, cut):
    body = json.dumps(config)
    p = parse_answer(body[:cut])
    if p.proposal is None or "sizes" not in p.proposal or not isinstance(p.proposal["sizes"], dict):
        return
    for size, params in p.proposal["sizes"].items():
        assert size in config["sizes"]
        for field, value in params.items():
            assert config["sizes"][size][field] == value


def test_repeated_sizes_objects_are_merged():
    text = '{"sizes": {"3x3": {"data_ratio": 0.2}}, "sizes": {"4x4": {"data_ratio": 0.8}}, "x": 1, "x": 2}'
    p = parse_answer(text)
    assert p.proposal == {"sizes": {"3x3": {"data_ratio": 0.2}, "4x4": {"data_ratio": 0.8}}, "x": 2}


def test_size_objects_next_to_sizes_are_gathered_into_it():
    text = ('{"summary": "s", "sizes": {"3x3": {"data_ratio": 0.2}, "data_ratio": 0.1}, '
            '"6x6": {"data_ratio": 0.5}, "3x3": {"data_ratio": 0.9}, "note": {"a": 1}}')
    p = parse_answer(text)
    assert p.proposal == {"note": {"a": 1}, "sizes": {"6x6": {"data_ratio": 0.5}, "3x3": {"data_ratio": 0.2},
                                                     "data_ratio": 0.1}}
