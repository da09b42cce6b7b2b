"""A plugin's command-line sub-app: how it is declared, and what the controller lends it.

A plugin declares its sub-commands on its class, ``commands = {"grid":
"testbeds.my_grid.cli:commands"}`` (``Entry.commands`` of its registry entry): each value
names a function ``commands(host: CommandHost) -> typer.Typer``, and
``curriculum`` mounts the app it returns under that name (``curriculum grid solve ...``). The
controller names no plugin's command; the plugin's module imports only the kernel and its own
code, like the rest of the plugin.

``CommandHost`` is what the controller lends those commands: ``run_history(run_dir)``, the
committed rounds of a run directory as ``RoundReport``s (the run-directory layout stays the
controller's). ``fail(message, code)`` is the one way a command refuses: ``error: message`` on
stderr and exit status ``code`` (2: the input could not be used).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from curriculum.core.records import RoundReport


@dataclass(frozen=True)
class CommandHost:
    """What the controller lends a plugin's commands (module docstring)."""

    run_history: Callable[[Path], list[RoundReport]]
    """The committed rounds of a run directory, oldest first."""


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (the CLI's one way to refuse)."""
    import typer
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
