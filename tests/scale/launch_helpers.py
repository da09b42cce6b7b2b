"""Helpers for tests that launch several processes with ``accelerate launch`` and kill them."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def accelerate_launch(config: str = "configs/accelerate/cpu_2proc.yaml") -> list[str]:
    """``accelerate launch`` with a CPU accelerate config and a free rendezvous port; append the
    script (or ``-m module``) and its arguments."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / config),
            "--main_process_port", str(free_port())]


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (torchrun starts workers in their own sessions)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    stack, tree = [pid], []
    while stack:
        current = stack.pop()
        tree.append(current)
        stack.extend(children.get(current, []))
    for member in tree:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
