"""Multi-process runs (``accelerate launch``): who decides, who writes, how the others follow.

Under ``accelerate launch`` every process runs the same ``curriculum run``. Training is data
parallel inside TRL (DDP, FSDP or DeepSpeed, chosen by the accelerate config). The controller's
decisions happen once, on the main process, and are broadcast:

* the run directory (its name may contain a timestamp) is created by the main process;
* evaluation, engineer calls and every write to the run dir happen on the main process;
* the next proposal and the testbed's reward state are broadcast to all ranks after each round.

Single-process runs go through the same calls, which then do nothing.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

T = TypeVar("T")


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def init() -> None:
    """Join the process group that ``accelerate launch`` set up (gloo on CPU, nccl on GPU)."""
    if world_size() > 1:
        import torch
        from accelerate import PartialState

        # Without a GPU, accelerate only picks gloo when told it runs on the CPU.
        PartialState(cpu=not torch.cuda.is_available())


def _initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def broadcast(value: T) -> T:
    """The main process's ``value`` on every rank (any picklable object)."""
    if world_size() == 1 or not _initialized():
        return value
    import torch.distributed as dist

    box = [value if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(value: Any) -> list[Any]:
    """Every rank's ``value``, in rank order, on every rank."""
    if world_size() == 1 or not _initialized():
        return [value]
    import torch.distributed as dist

    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, value)
    return out


def barrier() -> None:
    if world_size() > 1 and _initialized():
        import torch.distributed as dist

        dist.barrier()
