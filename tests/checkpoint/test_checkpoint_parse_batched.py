"""The parse-rate measurement in bulk on transformers (``benchmarks/engineer_parse.py --engine
transformers-batched``), on a tiny random-init model: ``constrained_generate_many`` decodes a batch
of design prompts of different lengths (left-padded) with one matcher per row.

A random-init model writes noise; only the answer schema makes its answers JSON proposals, so every
row parsing and being used by ``project`` shows that each row is held to the schema despite the
padding; two rows of one prompt decoded greedily in one batch are equal; sampled rows differ.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("llguidance")


@pytest.fixture(scope="module")
def long_context_policy(tmp_path_factory, tiny_llama):
    from trainers.lm.chat import chat_policy
    from trainers.lm.generation import GenerationConfig
    from trainers.lm.models import ModelConfig

    # The design prompt (~1,500 tokens) plus the answer budget exceed the default 2,048 positions.
    model_dir = tiny_llama(tmp_path_factory.mktemp("model"), max_position_embeddings=8192)
    return chat_policy(ModelConfig(name_or_path=str(model_dir)), GenerationConfig())


def test_clopper_pearson_lower_bound():
    from benchmarks.engineer_parse import clopper_pearson_lower

    assert clopper_pearson_lower(0, 300) == 0.0
    assert clopper_pearson_lower(300, 300) == pytest.approx(0.05 ** (1 / 300))  # (1-p)^0: p^n = 0.05
    assert clopper_pearson_lower(1, 1) == pytest.approx(0.05)
    assert 0.45 < clopper_pearson_lower(165, 300) < 0.55 - 0.001  # below the observed 0.55
    with pytest.raises(ValueError, match="k <= n"):
        clopper_pearson_lower(4, 3)


def test_batched_rows_all_parse_and_sampled_rows_differ(long_context_policy):
    from benchmarks.engineer_parse import batched_calls, summary_bulk
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed

    n = 4
    records, timing = batched_calls(long_context_policy, MAPFTestbed(), n, seed=0, temperature=1.0,
                                    engine="transformers", batch_size=3)  # a full batch and a batch of one
    failures = [(r["parse_error"], r["rejected"], r["text"][:200]) for r in records if not r["usable"]]
    assert not failures, failures
    assert len({r["text"] for r in records}) == n
    assert all(0 < r["tokens"] <= timing["budget"] for r in records)
    assert summary_bulk(records, timing).splitlines()[1].split()[:2] == ["parsed", f"{n}/{n}"]


def test_one_prompt_twice_in_a_greedy_batch_gives_one_answer(long_context_policy):
    from benchmarks.engineer_parse import design_calls
    from engineers.checkpoint.constrained import constrained_generate_many
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed

    (_, engineer, short, schema, _), (_, _, long, _, _) = design_calls(long_context_policy, MAPFTestbed(), 2,
                                                                      seed=0, temperature=0.0)
    answers = constrained_generate_many(long_context_policy, [short, long, short], schema, max_new_tokens=
                                        engineer.constrained_budget(long_context_policy, schema),
                                        temperature=0.0, seed=0)
    (first, stats), _, (third, _) = answers
    assert first.text == third.text and stats.complete
    json.loads(first.text)
