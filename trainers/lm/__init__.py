"""The language model a trainer runs, shared by the trainers that run one (``grpo``, ``selfplay``)
and by every trainer's ``Trainer.chat_policy``:

* ``models`` — loading any Hugging Face id or local path, or the embedded default model;
* ``generation`` — the one generation interface for evaluation and engineers, with its two
  engines (transformers, vLLM), the run's shared engine and the shared prompt prefill;
* ``precision`` — whether to run bfloat16 mixed precision on this machine;
* ``chat`` — a frozen chat model the run does not train, for an engineer that asks its own.

No plugin lives here; the modules import torch where they use it.
"""
