"""One design round end to end with the embedded SmolLM2-135M on CPU (transformers backend)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import FAST_SANDBOX

from engineers.base import DesignContext
from engineers.spade.config import RejectReason, SpadeEngineerConfig
from engineers.spade.engineer import SpadeEngineer


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize("setting", ["games", "tools"])
def test_design_round_with_embedded_model(setting, tmp_path, capsys):
    from trainers.lm.generation import GenerationConfig, TransformersPolicy
    from trainers.lm.models import ModelConfig, load_model

    model, tokenizer = load_model(ModelConfig())
    policy = TransformersPolicy(model, tokenizer, GenerationConfig(batch_size=2))
    config = SpadeEngineerConfig.model_validate({
        "name": "spade", "setting": setting, "designs_per_round": 2, "max_new_tokens": 384,
        "temperature": 0.7, "sandbox": FAST_SANDBOX})
    engineer = SpadeEngineer(config, run_dir=str(tmp_path))
    start = time.monotonic()
    try:
        ctx = DesignContext(round=0, total_rounds=2, history=[], proposal=None, testbed=None,
                            rng=np.random.default_rng(0), policy=policy)
        design = engineer.design(ctx)
    finally:
        engineer.close()
    seconds = time.monotonic() - start
    summary = design.notes["spade"]
    assert summary["designs"] == 2
    assert len(summary["admitted"]) + sum(summary["rejections"].values()) == 2
    for item in summary["rejected"]:
        assert RejectReason(item["reason"])  # every rejection names a known reason
    assert all(doc is not None for doc in summary["corpus_docs"])
    assert summary["corpus_docs"][0] != summary["corpus_docs"][1]
    assert design.output and design.prompt
    with capsys.disabled():
        print(f"\n[{setting}] {seconds:.1f}s; corpus {design.notes['corpus']['documents']} docs; "
              f"admitted {len(summary['admitted'])}; rejections {summary['rejections']}; "
              f"details {[r['detail'][:120] for r in summary['rejected']]}; timings {summary['seconds']}")
