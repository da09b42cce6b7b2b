"""``curriculum mapf``: solve, validate and generate MAPF-FrozenLake instances from the shell.

``solve`` and ``validate`` read JSONL and print exactly one JSON line per non-blank input line,
in order, each with the input's ``"line"`` number: a result, or ``{"line", "id", "error"}``
naming what was wrong with that line (bad encoding, bad JSON, an integer of more than 4,300
digits, a missing field, an invalid instance). The exit status is 0 when every line gave a
result, 1 when any line gave an error, 2 when the command failed (the file could not be read).
``validate`` checks a response whole up to ``MAX_RESPONSE_CHARS`` (200,000 characters); a longer
one fails as "response too long", never cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from curriculum.core.commands import CommandHost, fail

app = typer.Typer(help="MAPF-FrozenLake tools: optimal solving, answer validation, generation.",
                  no_args_is_help=True)


def commands(host: CommandHost) -> typer.Typer:
    """``curriculum mapf`` (this testbed's registry entry declares it; ``curriculum.core.commands``)."""
    return app


def _each_record(file: Path, handle: Callable[..., dict[str, Any]], *, solve: bool) -> None:
    """Print one output line per input record; exit 1 if any record failed."""
    from curriculum.core.config import ConfigError
    from curriculum.core.userfiles import EXIT_COMMAND_FAILED, EXIT_SOME_FAILED, jsonl_records
    from testbeds.mapf_frozenlake.batch import error_result

    failed = False
    try:
        for record in jsonl_records(file):
            if record.error is not None:
                out = error_result(record.error, line=record.line, solve=solve)
            else:
                try:
                    out = handle(record.value, line=record.line)
                except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
                    # a line the checks did not foresee still gets its own answer
                    out = error_result(f"{type(exc).__name__}: {str(exc)[:200]}", line=record.line,
                                       solve=solve)
            failed = failed or "error" in out
            typer.echo(_strict_json(out))
    except ConfigError as err:
        fail(str(err), EXIT_COMMAND_FAILED)
    raise typer.Exit(EXIT_SOME_FAILED if failed else 0)


def _strict_json(out: dict[str, Any]) -> str:
    """One output line as strict JSON: a NaN or infinity echoed from the input (an ``id``)
    is written as the string "NaN" / "Infinity", never as a bare token JSON does not allow."""
    try:
        return json.dumps(out, allow_nan=False)
    except ValueError:
        return json.dumps(json.loads(json.dumps(out), parse_constant=str), allow_nan=False)


@app.command("solve")
def solve_command(
    file: Annotated[Path, typer.Argument(help="JSONL of instances ('-' for stdin).")],
    time_budget: Annotated[float, typer.Option(min=0.0, help="Seconds per instance.")] = 10.0,
    node_budget: Annotated[int, typer.Option(min=1, help="CBS nodes per instance.")] = 100_000,
) -> None:
    """Solve each instance optimally (sum of costs); print one JSON line per instance:
    {"line", "id", "status": solved|unsolvable|budget|error, "cost", "plan"} (+ "error").

    Example:

        echo '{"id":"a","h":3,"w":3,"holes":[[1,1]],"starts":[[0,0],[2,2]],"goals":[[2,2],[0,0]]}' > x.jsonl

        curriculum mapf solve x.jsonl
    """
    from testbeds.mapf_frozenlake.batch import solve_record

    def handle(value: Any, line: int) -> dict[str, Any]:
        return solve_record(value, line=line, time_budget_s=time_budget, node_budget=node_budget)

    _each_record(file, handle, solve=True)


@app.command("validate")
def validate_command(
    file: Annotated[Path, typer.Argument(help="JSONL of {instance, response} ('-' for stdin).")],
    tokenizer: Annotated[str, typer.Option(
        help="Counts the response tokens for the length reward when a record has no num_tokens: a "
             "Hugging Face id or local path, the embedded model (default), or 'words' (whitespace "
             "words, no model needed).")] = "embedded:smollm2-135m-instruct",
) -> None:
    """Run the eight validity checks on each response (at most 200,000 characters; a longer
    one fails as "response too long"); print one JSON line per input with
    the checks, failure reasons, cost, optimal cost, reward, num_tokens and token_unit (the
    tokenizer that counted them, 'words', or 'given' when the record had num_tokens).

    Example:

        echo '{"instance":{"h":2,"w":2,"holes":[],"starts":[[0,0]],"goals":[[0,1]]},"response":"Agent 1: (0,0) (0,1)"}' > r.jsonl

        curriculum mapf validate r.jsonl --tokenizer words
    """
    from testbeds.mapf_frozenlake.batch import validate_record

    count = _token_counter(tokenizer)

    def handle(value: Any, line: int) -> dict[str, Any]:
        return validate_record(value, line=line, count_tokens=count, token_unit=tokenizer)

    _each_record(file, handle, solve=False)


def _token_counter(name: str) -> Callable[[str], int]:
    """``words``, or a tokenizer's token count (no special tokens, as a completion is counted),
    loaded on first use: records that carry ``num_tokens`` never load a model."""
    from testbeds.mapf_frozenlake.batch import words

    if name == "words":
        return words
    loaded: list[Any] = []

    def count(text: str) -> int:
        if not loaded:
            try:
                from curriculum.core.policy import load_tokenizer, resolve_model_path

                loaded.append(load_tokenizer(resolve_model_path(name)))
            except Exception as err:  # noqa: BLE001 - any loading failure is the user's to fix
                fail(f"cannot load tokenizer {name!r}: {type(err).__name__}: {str(err)[:300]} "
                     "(pass --tokenizer words to count whitespace words instead)")
        return len(loaded[0](text, add_special_tokens=False)["input_ids"])

    return count


def _generator_config(path: Path):
    """The ``GeneratorConfig`` in a JSON file, or a readable refusal."""
    from pydantic import ValidationError

    from curriculum.core.config import ConfigError, field_names, format_errors
    from curriculum.core.userfiles import read_user_text
    from testbeds.mapf_frozenlake.config import GeneratorConfig

    try:
        text = read_user_text(path, "generator config")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path} must contain a JSON object (a GeneratorConfig)")
        return GeneratorConfig.model_validate(data)
    except ValidationError as err:
        fail(format_errors(err, str(path), lambda loc: field_names(GeneratorConfig, loc))
             .replace("invalid", "invalid generator config", 1))
    except ConfigError as err:
        fail(str(err))


@app.command("generate")
def generate_command(
    n: Annotated[int, typer.Option(min=0, help="Number of instances.")] = 10,
    agents: Annotated[int, typer.Option(min=1, help="Agents per instance.")] = 2,
    seed: Annotated[int, typer.Option(min=0, help="Seed.")] = 0,
    config: Annotated[Path | None, typer.Option(help="GeneratorConfig JSON (default: random from --seed).")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Processes (default: 2 for large n).")] = None,
) -> None:
    """Generate solvable instances with optimal plans; print them as JSONL and the per-size
    report (requested vs achieved ratios) on stderr.

    Example:

        curriculum mapf generate --n 100 --agents 2 --seed 0 > train.jsonl
    """
    import numpy as np

    from testbeds.mapf_frozenlake.config import random_config
    from testbeds.mapf_frozenlake.generator import generate

    cfg = _generator_config(config) if config else random_config(np.random.default_rng(seed))
    try:
        res = generate(cfg, n, agents=agents, seed=seed, workers=workers)
    except ValueError as err:  # e.g. more agents than the configured maps can hold
        fail(str(err))
    for inst in res.instances:
        typer.echo(inst.to_json())
    typer.echo(json.dumps({s: r.to_dict() for s, r in res.report.items()}), err=True)
