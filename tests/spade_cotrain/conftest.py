"""Fixtures for the SPADE co-training tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def sandbox_pool():
    from testbeds.spade.sandbox import SandboxConfig, SandboxPool

    pool = SandboxPool(SandboxConfig(workers=2))
    pool.start()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A one-layer Llama with the embedded model's tokenizer: real TRL updates in a second."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainers.lm.models import EMBEDDED, load_tokenizer, resolve_model_path

    tokenizer = load_tokenizer(resolve_model_path(EMBEDDED))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, tie_word_embeddings=True)
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
