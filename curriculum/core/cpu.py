"""What this CPU offers: the feature flags the kernel reports, whether it multiplies bf16 natively,
and what ``trainer.bf16`` and ``generation.vllm_dtype`` therefore mean on it.

Shared by the trainers' precision choice (``trainer.bf16: auto``, ``trainers/lm/precision.py``), the
vLLM engine's dtype (``trainers/lm/generation.py``) and the controller's wall-time estimate
(``curriculum/walltime.py``), which must agree without the controller importing a trainer.
"""

from __future__ import annotations

from pathlib import Path

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
"""Flags of the instructions oneDNN multiplies bf16 with (``vdpbf16ps``, AMX tiles)."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU feature flags the kernel reports (empty where there is no /proc/cpuinfo)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_cpu_bf16(flags: set[str] | None = None) -> bool:
    """Whether this CPU multiplies bf16 natively: one of ``NATIVE_BF16_FLAGS`` among ``flags``
    (default: ``cpu_flags()``) and torch built with oneDNN, which uses those instructions."""
    import torch

    found = cpu_flags() if flags is None else flags
    return bool(NATIVE_BF16_FLAGS & found) and torch.backends.mkldnn.is_available()


def bf16_setting(setting: bool | str, native: bool) -> bool:
    """``trainer.bf16`` as a decision: ``auto`` is ``native`` (whether the device multiplies bf16
    natively), ``True`` / ``False`` as written. The trainers train so and the wall-time estimate counts so."""
    return native if setting == "auto" else bool(setting)


def cpu_vllm_dtype(dtype: str, native: bool) -> str:
    """``generation.vllm_dtype`` on vLLM's CPU build: ``auto`` is ``bfloat16`` where the CPU multiplies
    bf16 natively and ``float32`` where it does not (there vLLM's bf16 decodes ~4x slower than its
    fp32 at 48 rows, docs/results.md, "Decoding per engine"); any other value as written."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if native else "float32"
