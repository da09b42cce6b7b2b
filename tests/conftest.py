"""Shared fixtures: a tiny random-init model with the real SmolLM2 tokenizer."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


def save_tiny_llama(path: Path, *, hidden_size: int = 64, intermediate_size: int = 128,
                    num_attention_heads: int = 4, num_key_value_heads: int = 2,
                    max_position_embeddings: int = 2048) -> Path:
    """A 2-layer random-init Llama (seed 0) saved at ``path`` with the embedded model's tokenizer
    and chat template."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainers.lm.models import embedded_model_dir, load_tokenizer

    tokenizer = load_tokenizer(str(embedded_model_dir()))
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=2, num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads, max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def _own_eval_cache(tmp_path_factory, monkeypatch):
    """Every test its own eval cache: no test reads an eval another test (or a user's run) stored."""
    monkeypatch.setenv("CURRICULUM_EVAL_CACHE", str(tmp_path_factory.mktemp("evals")))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer Llama (hidden 64) saved with the embedded model's tokenizer and chat template."""
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_llama():
    """``save_tiny_llama`` for tests that need other sizes (e.g. wider attention heads)."""
    return save_tiny_llama
