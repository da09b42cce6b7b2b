"""``curriculum sandbox``: try an environment program in the sandbox, or report the layers.

The ``spade_pool`` testbed's command (it plays these programs); the sandbox itself is
``testbeds.spade.sandbox``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from curriculum.core.commands import CommandHost

app = typer.Typer(help="Run model-written environment programs in the sandbox.",
                  no_args_is_help=True)


def commands(host: CommandHost) -> typer.Typer:
    """``curriculum sandbox`` (the ``spade_pool`` testbed's registry entry declares it;
    ``curriculum.core.commands``)."""
    return app


@app.command("try", epilog="Example: curriculum sandbox try my_env.py --action 3 --action '\\boxed{7}'")
def try_command(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                         help="Environment program (.py).")],
    action: Annotated[Optional[list[str]], typer.Option(
        "--action", "-a", help="Action for one step; repeat.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed passed to reset.")] = None,
    class_name: Annotated[Optional[str], typer.Option(
        "--class", help="Environment class (default: the one whose name ends in Env).")] = None,
    json_actions: Annotated[bool, typer.Option(
        "--json-actions", help="Parse each action as JSON.")] = False,
    allow_degraded: Annotated[bool, typer.Option(
        help="Run even if an isolation layer is missing.")] = False,
) -> None:
    """Run FILE in the sandbox: reset, then one step per --action.

    Prints each result as it comes, then one JSON line {"ok", "error", "steps"}.
    Exits 1 when the program failed (the JSON line says how), 2 when an input could not be
    used (an unreadable file, an action that is not JSON or could not be reported)."""
    from curriculum.core.config import ConfigError
    from curriculum.core.commands import fail
    from curriculum.core.userfiles import read_user_text
    from testbeds.spade.sandbox import SandboxConfig, try_program

    try:
        program = read_user_text(file, "environment program")
        actions = [_json_action(a) for a in action or []] if json_actions else list(action or [])
        for text, value in zip(action or [], actions):
            _reportable(text, value)
    except ConfigError as err:
        fail(str(err))
    report = try_program(program, actions, seed=seed, class_name=class_name,
                         config=SandboxConfig(allow_degraded=allow_degraded),
                         echo=lambda entry: typer.echo(f"{entry['call']}: {json.dumps(entry)}"))
    typer.echo(report.model_dump_json())
    raise typer.Exit(0 if report.ok else 1)


def _reportable(text: str, value) -> None:
    """Refuse an action that could not be sent to the sandbox and reported back as JSON."""
    from curriculum.core.config import ConfigError
    from testbeds.spade.sandbox import SandboxConfig
    from testbeds.spade.sandbox.replies import ReplyError, check_tree

    try:
        check_tree(value, SandboxConfig.model_fields["max_reply_depth"].default - 2)
    except ReplyError as exc:
        shown = text[:60].encode("utf-8", "backslashreplace").decode()
        raise ConfigError(f"--action {shown!r}{'...' if len(text) > 60 else ''} cannot be "
                          f"reported: {exc.detail}; pass valid UTF-8 text, nested less deeply") from None


def _json_action(text: str):
    from curriculum.core.config import ConfigError

    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"--action {text!r} is not JSON ({exc})") from None


@app.command("doctor", epilog="Example: curriculum sandbox doctor")
def doctor_command() -> None:
    """Start one worker and report which isolation layers are in force."""
    from testbeds.spade.sandbox import doctor

    report = doctor()
    for layer in report.layers:
        typer.echo(f"{'ok     ' if layer.active else 'MISSING'} {layer.name:<17} {layer.detail}")
    raise typer.Exit(0 if report.ok else 1)
