"""The ``curriculum`` command line: parse arguments, load the config, call one library function."""

from __future__ import annotations

import os

# OpenMP threads keep libgomp's default wait (a short spin, then sleep): OMP_WAIT_POLICY=PASSIVE,
# sleeping at once, made a GRPO step of the demo 19-30 % slower (docs/scaling.md, "Knobs that matter").
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated, Optional  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from curriculum.config import ConfigError  # noqa: E402
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS  # noqa: E402

# transformers 5 renames gradient checkpointing and warns on every TRL step; not the user's concern.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")

app = typer.Typer(
    help="Closed-loop RL curricula for language models: train → eval → design, with pluggable "
    "environment engineers.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
console = Console()


def _fail(message: str, code: int = 2) -> None:
    from curriculum.console import fail

    fail(message, code)


def _example_testbed() -> str:
    """The testbed the help's examples name: the first registered one."""
    names = TESTBEDS.names()
    return names[0] if names else "TESTBED"


def _run_example() -> str:
    """``curriculum run``'s example, from the registry: the first testbed and its first generic
    CPU preset (``Testbed.presets``)."""
    testbed = _example_testbed()
    presets = TESTBEDS.get(testbed).load().presets if testbed in TESTBEDS else ()
    file = next((p.file for p in presets if p.machine == "cpu" and p.engineer is None), "FILE.yaml")
    return (f"Example: curriculum run --engineer random --testbed {testbed} --config configs/{file} "
            "--set trainer.learning_rate=1e-6")


@app.command(epilog=_run_example())
def run(
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML run config.")] = None,
    engineer: Annotated[Optional[str], typer.Option(help=f"Engineer: {', '.join(ENGINEERS.names())}.")] = None,
    testbed: Annotated[Optional[str], typer.Option(help=f"Testbed: {', '.join(TESTBEDS.names())}.")] = None,
    trainer: Annotated[Optional[str], typer.Option(help=f"Trainer: {', '.join(TRAINERS.names())}.")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="Override a dotted key, e.g. trainer.beta=0.")] = [],
    rounds: Annotated[Optional[int], typer.Option(help="Number of rounds.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Master seed.")] = None,
    output_dir: Annotated[Optional[Path], typer.Option(help="Parent directory of run dirs.")] = None,
    run_name: Annotated[Optional[str], typer.Option(help="Run directory name.")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue the run in this run dir.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved config and plan; load nothing.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="Print the whole resolved config at the start and the engines' logs and warnings "
                          "as they come (by default a few lines name the config, and the logs go to the run "
                          "dir's engine.log).")] = False,
    accelerate_config: Annotated[Optional[Path], typer.Option(
        help="With --dry-run: the accelerate config to plan for (processes, ZeRO/FSDP).")] = None,
    gpu: Annotated[str, typer.Option(
        help="With --dry-run: the GPU model to fit (h100-80gb, h200-141gb, a100-80gb, a100-40gb).")] = "h100-80gb",
    machine: Annotated[str, typer.Option(
        help="Without --config: size the preset for a cpu or gpu machine (auto: detect).")] = "auto",
) -> None:
    """Run a curriculum: rounds of train → eval → design. Without --config the preset for the
    engineer, testbed and trainer on this machine is chosen, and printed with the reason."""
    from curriculum.console import RichReporter
    from curriculum.loop import run as run_loop
    from curriculum.plan import describe_plan
    from curriculum.presets import detect_machine, resolve_run

    try:
        base = None
        if resume is not None and config is None:
            from curriculum.rundir import RunDir

            base = RunDir.open(resume).saved_config().model_dump(mode="json")
        cfg, choice = resolve_run(config, set_, engineer=engineer, testbed=testbed, trainer=trainer,
                                  machine=machine, base=base, rounds=rounds, seed=seed, output_dir=output_dir,
                                  run_name=run_name)
        if choice is not None:
            console.print(choice.explain(cfg), markup=False, highlight=False, soft_wrap=True)
        elif config is not None:
            console.print(f"config: {config}", markup=False, highlight=False, soft_wrap=True)
        if dry_run:
            found = choice.machine if choice is not None else detect_machine(machine)
            console.print(describe_plan(cfg, accelerate_config, gpu, found), markup=False, highlight=False,
                          soft_wrap=True)
            return
        result = run_loop(cfg, resume=resume, reporter=RichReporter(console, verbose=verbose),
                          verbose=verbose)
    except ConfigError as err:
        _fail(str(err))
    except OSError as err:  # a full disk, a read-only mount: committed rounds are intact
        import errno

        if err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        _fail(f"{err.filename or 'the run directory'}: {err.strerror}. Every committed round is "
              "intact: free space (or fix the permissions), then `curriculum run --resume RUN`")
    console.print(f"[bold green]done[/]: {len(result.history)} round(s) in {result.run_dir}")


@app.command(name="eval", epilog="Examples: curriculum eval runs/my-run   |   curriculum eval runs/my-run --start "
                                 "--set testbed.eval_instances_per_size=12 --out start.json   |   "
                                 "curriculum eval runs/my-run --set testbed.eval_instances_per_size=12 --against start.json")
def eval_(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.")],
    round_index: Annotated[Optional[int], typer.Option("--round", help="Round to evaluate (default: last).")] = None,
    start: Annotated[bool, typer.Option(
        "--start", help="Evaluate the run's starting model instead (warm-started if the run has a warm start).")] = False,
    set_: Annotated[list[str], typer.Option(
        "--set", help="Change the saved config for this eval only, e.g. testbed.eval_instances_per_size=12.")] = [],
    out: Annotated[Optional[Path], typer.Option(help="Write the eval report (with per-task results) as JSON.")] = None,
    against: Annotated[Optional[Path], typer.Option(
        help="Another eval's JSON (--out, or a run dir's *_eval.json / rounds/*/eval.json): compare task by task.")] = None,
    suite: Annotated[str, typer.Option(
        help="Held-out suite: validation (what engineers read) or test (what reports score on).")] = "validation",
) -> None:
    """Evaluate a run's checkpoint and print its per-bucket tables; optionally on a
    larger suite, and paired task by task against another eval."""
    from curriculum.console import RichReporter, eval_table
    from curriculum.core.types import EvalReport
    from curriculum.loop import evaluate_run
    from curriculum.core.userfiles import read_user_bytes
    from curriculum.report import run_layout
    from curriculum.rundir import write_json
    from curriculum.stats import paired_tasks

    if start and round_index is not None:
        _fail("--start and --round exclude each other")
    if out is not None and (problem := output_file_problem(out)) is not None:
        _fail(f"--out {out}: {problem}")  # before the eval, not after its work
    try:
        other = (EvalReport.model_validate_json(read_user_bytes(against, "--against file"))
                 if against is not None else None)
    except ConfigError as err:
        _fail(str(err))
    except (OSError, ValueError) as err:
        _fail(f"--against {against}: not an eval report ({type(err).__name__}: {err})")
    if other is not None and not other.task_scores:
        _fail(f"--against {against}: the report has no per-task results (written before they were "
              "recorded); evaluate that checkpoint again with --out")
    try:
        report = evaluate_run(run_dir, round_index=round_index, start=start, overrides=set_,
                              reporter=RichReporter(console), suite=suite)
    except (ConfigError, FileNotFoundError, ValueError) as err:
        _fail(str(err))
    what = "starting model" if start else f"round {round_index}" if round_index is not None else "last round"
    console.print(eval_table(report, title=f"eval of {run_dir} ({what}, {suite} suite)",
                             layout=run_layout(run_dir)))
    if out is not None:
        write_json(out, report.model_dump(mode="json"))
        console.print(f"wrote {out}")
    if other is not None:
        try:
            console.print(f"this eval − {against}: {paired_tasks(report.task_scores, other.task_scores).line()}",
                          markup=False, highlight=False, soft_wrap=True)
        except ValueError as err:
            _fail(f"--against {against}: {err}")


def output_file_problem(path: Path) -> str | None:
    """Why a report cannot be written to ``path`` (a file to create or replace), or ``None``."""
    if os.path.isdir(path):
        return "is a directory; name a file to write the report to"
    if os.path.lexists(path) and not os.path.isfile(path):
        return "exists and is not a regular file"
    parent = path.parent
    if not parent.is_dir():
        return f"its folder {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"its folder {parent} is not writable"
    return None


@app.command(name="list", epilog="Example: curriculum list")
def list_() -> None:
    """List registered testbeds, engineers and trainers, with what each fits."""
    for title, registry in (("testbeds", TESTBEDS), ("engineers", ENGINEERS), ("trainers", TRAINERS)):
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("name", style="bold")
        table.add_column("description")
        table.add_column("fits", style="dim")
        for entry in registry.entries():
            table.add_row(entry.name, entry.description, entry.declares())
        console.print(table)


@app.command(epilog="Example: curriculum show runs/my-run --round 1   |   curriculum show runs/my-run --envs")
def show(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.")],
    round_index: Annotated[Optional[int], typer.Option("--round", help="Show one round in full.")] = None,
    envs: Annotated[bool, typer.Option("--envs", help="An engineer that designs environments: list the ones it "
                                                      "remembers.")] = False,
    env: Annotated[Optional[str], typer.Option("--env", help="An engineer that designs environments: one of them "
                                                             "(hash or prefix) with its code.")] = None,
) -> None:
    """Show a run: one line per round, everything the engineer saw and said in one round, or
    the environments its engineer designed (an engineer that keeps them, ``Engineer.run_view``)."""
    try:
        if envs or env is not None:
            from curriculum.show import engineer_view

            console.print(engineer_view(run_dir, env))
            return
        from curriculum.show import show_run

        show_run(run_dir, round_index=round_index, console=console)
    except (ConfigError, FileNotFoundError, KeyError) as err:
        _fail(str(err).strip("'\""))


@app.command(epilog=f"Example: curriculum doctor runs/random-{_example_testbed()}-seed0-20261130-120000")
def doctor(run_dir: Annotated[Path, typer.Argument(help="A run directory.")]) -> None:
    """Check a run directory's health: config, every round against its checksums, leftovers,
    metrics, and what --resume would do. Exits 1 when something is damaged."""
    from curriculum.doctor import diagnose

    try:
        report = diagnose(run_dir)
    except ConfigError as err:
        _fail(str(err))
    console.print(f"[bold]health of {escape(str(report.path))}[/]", highlight=False, soft_wrap=True)
    for finding in report.findings:
        mark = "[green]ok     [/]" if finding.ok else "[bold red]DAMAGED[/]"
        console.print(f"{mark} {finding.subject:<22} {escape(finding.detail)}", highlight=False,
                      soft_wrap=True)
    console.print(f"resume: {escape(report.resume)}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if report.healthy else 1)


def _mount_subapps() -> None:
    """Each plugin's sub-commands, as its registry entry declares them (``curriculum.core.commands``),
    then the controller's own top-level commands that live next to their library code."""
    from curriculum import cli_bench
    from curriculum.core.commands import CommandHost
    from curriculum.registry import load_commands, mounted_commands

    host = CommandHost(run_history=_run_history)
    for name, entry, target in mounted_commands():
        app.add_typer(load_commands(entry, target)(host), name=name)
    # Top-level commands that live next to their library code (compare, report).
    cli_bench.register(app, console, _fail)


def _run_history(run_dir: Path) -> list:
    from curriculum.rundir import RunDir

    return RunDir(run_dir).history()


_mount_subapps()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
