"""Helpers shared by the sandbox tests."""

from __future__ import annotations

import time


def settled_pids(worker, expected: int) -> list[int]:
    """The worker's processes, polled for up to a second until there are ``expected``
    (the spare is forked just after a close is answered)."""
    deadline = time.monotonic() + 1.0
    while len(pids := worker.sandbox_pids()) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return pids


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
