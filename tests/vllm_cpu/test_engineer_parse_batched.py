"""The batched parse-rate measurement of the checkpoint engineer on the vLLM backend
(``benchmarks/engineer_parse.py --engine vllm``), on a tiny random-init model.

A random-init model writes noise; only the answer schema (vLLM structured outputs) makes its
answers JSON proposals. So: every answer of the batch parses with the engineer's own parser and
is used by ``project`` (a constraint that were not applied would leave ~0 of them parsing), the
answers differ (sampled, temperature > 0, a seed per history), and the Clopper-Pearson bound
of n/n is below 1 and above 0.
"""

from __future__ import annotations


def test_batched_constrained_answers_all_parse_and_differ(tmp_path, tiny_llama):
    from benchmarks.engineer_parse import batched_calls, summary_bulk
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed
    from trainers.lm.generation import GenerationConfig, VLLMPolicy

    # The design prompt (~2,000 tokens) plus the answer budget exceed the default 2,048 positions.
    model_dir = tiny_llama(tmp_path / "model", hidden_size=128, intermediate_size=256,
                           num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192)
    policy = VLLMPolicy(GenerationConfig(backend="vllm", vllm_dtype="float32", vllm_cpu_kv_cache_gib=1),
                        model_path=str(model_dir), max_model_len=8192)
    try:
        n = 6
        records, timing = batched_calls(policy, MAPFTestbed(), n, seed=0, temperature=1.0)
    finally:
        del policy.llm
    assert [r["seed"] for r in records] == list(range(n))
    failures = [(r["parse_error"], r["rejected"], r["text"][:200]) for r in records if not r["usable"]]
    assert not failures, failures
    assert all(r["parsed"] for r in records)
    assert len({r["text"] for r in records}) == n  # sampled: every answer differs
    assert all(0 < r["tokens"] <= timing["budget"] for r in records)
    parsed_row = summary_bulk(records, timing).splitlines()[1].split()
    assert parsed_row[:2] == ["parsed", f"{n}/{n}"]
