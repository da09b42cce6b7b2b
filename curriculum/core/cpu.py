"""What this CPU offers: the feature flags the kernel reports, and whether it multiplies bf16 natively.

Shared by the trainers' precision choice (``trainer.bf16: auto``, ``trainers/lm/precision.py``) and the
controller's wall-time estimate (``curriculum/walltime.py``), which must agree without the controller
importing a trainer.
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
