"""Whether to run bfloat16 mixed precision: fp32 master weights and optimizer state, matmuls in
bf16 under ``torch.autocast``.

bf16 pays only where the hardware multiplies bf16 natively: a CUDA GPU with bf16 support, or an
x86 CPU with AVX512-BF16 or AMX (``vdpbf16ps`` / tile instructions, which oneDNN uses). There a
bf16 GEMM runs at 2-3x the fp32 rate. On a CPU without them (plain AVX2, or AVX512 without the
BF16 extension) oneDNN emulates bf16 or torch falls back to its reference kernel, which measured
~15x *slower* than fp32 (docs/results.md, "The CPU recipe's settings"). ``auto`` therefore asks the machine.

Measured on a 2-core AMD EPYC with AVX512-BF16 (docs/results.md, "How fast is each stage"): a real warm-start
SFT step 24.0 -> 13.6 s, and greedy decoding of 36 rows x 64 tokens 48.5 -> 28.0 s, one thread
each.
"""

from __future__ import annotations

import functools
from typing import Literal

from curriculum.core.cpu import bf16_setting, cpu_flags, native_cpu_bf16

BF16Setting = bool | Literal["auto"]


@functools.cache
def native_bf16(device: str = "cpu") -> bool:
    """Whether ``device`` (``cpu`` or ``cuda``) multiplies bf16 natively (module docstring)."""
    import torch

    if device == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return native_cpu_bf16(cpu_flags())


def resolve_bf16(setting: BF16Setting, device: str) -> bool:
    """``trainer.bf16`` as a decision: ``auto`` is ``native_bf16(device)``."""
    return bf16_setting(setting, setting == "auto" and native_bf16(device))  # probes only for auto
