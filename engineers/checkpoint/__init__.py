"""``checkpoint``: the policy as its own environment engineer (the Trainee-to-Trainer paper, Method A).

After each round the engineer model (the current checkpoint by default; the frozen base model or
any OpenAI-compatible endpoint as alternatives) reads a context built from five modules — F
failure breakdown, G guideline, H history, S its own previous summary, T training details — and
answers with reasoning followed by a JSON generator config. The controller's ``project`` step
then forces that config into the legal space.

Submodules: ``config`` (the YAML section and the V1–V6 presets), ``context`` (the five module
renderers), ``prompt`` (the chat messages and the output schema), ``constrained`` (the finite
answer schema and llguidance-constrained decoding, on by default), ``parse`` (lenient JSON
extraction), ``diagnostics`` (per-round edit/frontier/summary checks), ``endpoint`` (the HTTP
client), ``engineer`` (the ``Engineer`` that ties them together).
"""

from engineers.checkpoint.config import PRESETS, CheckpointEngineerConfig, ContextSpec

__all__ = ["PRESETS", "CheckpointEngineerConfig", "ContextSpec"]
