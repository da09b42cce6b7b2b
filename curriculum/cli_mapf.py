"""``curriculum mapf``: solve, validate and generate MAPF-FrozenLake instances from the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="MAPF-FrozenLake tools: optimal solving, answer validation, generation.",
                  no_args_is_help=True)


def _lines(path: Path):
    stream = sys.stdin if str(path) == "-" else path.open()
    for line in stream:
        if line.strip():
            yield line


@app.command("solve")
def solve_command(
    file: Annotated[Path, typer.Argument(help="JSONL of instances ('-' for stdin).")],
    time_budget: Annotated[float, typer.Option(help="Seconds per instance.")] = 10.0,
    node_budget: Annotated[int, typer.Option(help="CBS nodes per instance.")] = 100_000,
) -> None:
    """Solve each instance optimally (sum of costs); print one JSON line per instance:
    {"id", "status": solved|unsolvable|budget, "cost", "plan"}.

    Example:

        echo '{"id":"a","h":3,"w":3,"holes":[[1,1]],"starts":[[0,0],[2,2]],"goals":[[2,2],[0,0]]}' > x.jsonl

        curriculum mapf solve x.jsonl
    """
    from testbeds.mapf_frozenlake.batch import solve_line

    for line in _lines(file):
        typer.echo(json.dumps(solve_line(line, time_budget_s=time_budget, node_budget=node_budget)))


@app.command("validate")
def validate_command(
    file: Annotated[Path, typer.Argument(help="JSONL of {instance, response} ('-' for stdin).")],
) -> None:
    """Run the eight validity checks on each response; print one JSON line per input with
    the checks, failure reasons, cost, optimal cost and reward.

    Example:

        echo '{"instance":{"h":2,"w":2,"holes":[],"starts":[[0,0]],"goals":[[0,1]]},"response":"Agent 1: (0,0) (0,1)"}' > r.jsonl

        curriculum mapf validate r.jsonl
    """
    from testbeds.mapf_frozenlake.batch import validate_line

    for line in _lines(file):
        typer.echo(json.dumps(validate_line(line)))


@app.command("generate")
def generate_command(
    n: Annotated[int, typer.Option(help="Number of instances.")] = 10,
    agents: Annotated[int, typer.Option(help="Agents per instance.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    config: Annotated[Path | None, typer.Option(help="GeneratorConfig JSON (default: random from --seed).")] = None,
    workers: Annotated[int | None, typer.Option(help="Processes (default: 2 for large n).")] = None,
) -> None:
    """Generate solvable instances with optimal plans; print them as JSONL and the per-size
    report (requested vs achieved ratios) on stderr.

    Example:

        curriculum mapf generate --n 100 --agents 2 --seed 0 > train.jsonl
    """
    import numpy as np

    from testbeds.mapf_frozenlake.config import GeneratorConfig, random_config
    from testbeds.mapf_frozenlake.generator import generate

    cfg = (GeneratorConfig.model_validate_json(config.read_text()) if config
           else random_config(np.random.default_rng(seed)))
    res = generate(cfg, n, agents=agents, seed=seed, workers=workers)
    for inst in res.instances:
        typer.echo(inst.to_json())
    typer.echo(json.dumps({s: r.to_dict() for s, r in res.report.items()}), err=True)
