"""``curriculum compare`` and ``curriculum report``: parse arguments, call one library function."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS

COMPARE_EXAMPLE = (f"Example: curriculum compare --engineers random,fixed,optuna --testbed "
                   f"{(TESTBEDS.names() or ['TESTBED'])[0]} "
                   "--trainer simulated --seeds 5 --rounds 6 --out runs/compare-sim --jobs 2")
REPORT_EXAMPLE = "Example: curriculum report runs/compare-sim/runs/optuna-seed0"


def register(app: typer.Typer, console: Console, fail: Callable[[str], None]) -> None:
    """Add the ``compare`` and ``report`` commands to the main app ``app`` (``curriculum.cli``), which
    lends its ``console`` and ``fail`` (print a refusal, exit 2): this module never imports it."""

    @app.command(epilog=COMPARE_EXAMPLE)
    def compare(
        engineers: Annotated[Optional[str], typer.Option(
            help=f"Comma-separated engineers: {', '.join(ENGINEERS.names())} (with --design: arms of "
                 "the design; default all).")] = None,
        testbed: Annotated[Optional[str], typer.Option(help=f"Testbed: {', '.join(TESTBEDS.names())} "
                                                      "(default: the config's).")] = None,
        seeds: Annotated[Optional[int], typer.Option(min=1, max=1_000, help="Number of seeds (F..F+N-1, F = --first-seed), the same for every engineer (default 3; a --design declares its own).")] = None,
        rounds: Annotated[Optional[int], typer.Option(min=1, help="Rounds per run (default: the config's).")] = None,
        out: Annotated[Path, typer.Option(help="Output directory (runs, compare.json, plots).")] = Path("runs/compare"),
        trainer: Annotated[Optional[str], typer.Option(
            help=f"Trainer: {', '.join(TRAINERS.names())} (simulated: a learning-dynamics model, "
                 "not a language model).")] = None,
        config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Base YAML run config for every run "
                          "(default for --trainer simulated: configs/<testbed>_simulated.yaml).")] = None,
        set_: Annotated[list[str], typer.Option("--set", help="Override for every run, e.g. tasks_per_round=64; "
                        "engineers.<name>.<key>=v for one engineer only.")] = [],
        jobs: Annotated[int, typer.Option(min=1, help="Runs in parallel (processes).")] = 1,
        first_seed: Annotated[Optional[int], typer.Option(min=0, help="First seed: --seeds N runs seeds F..F+N-1 (split "
                              "seeds over machines; the same --out then gathers them with --seeds). Default: "
                              "the design's first_seed, else 0.")] = None,
        share_round0: Annotated[bool, typer.Option(help="Run round 0 once per seed and start every engineer "
                                "from it (it does not depend on the engineer); an engineer that shapes round 0 runs its own.")] = True,
        design: Annotated[Optional[Path], typer.Option(
            help="Design file declared before the run: arms (engineer + overrides), the primary "
                 "comparison, seeds per arm, power thresholds (configs/compare/).")] = None,
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Run nothing: print the design, its power shortfalls and the minimal "
                              "detectable effect of each primary pair.")] = False,
        pilot: Annotated[list[Path], typer.Option(
            help="With --dry-run: a finished compare dir or per-run eval JSON whose variance sizes the "
                 "MDE (default: a stated binomial variance).")] = [],
        report: Annotated[Optional[Path], typer.Option(
            help="Run nothing: render the tables of a finished comparison from its compare.json (a "
                 "compare --out dir, or a committed copy such as docs/results/<name>).")] = None,
        reanalyse: Annotated[bool, typer.Option(
            "--reanalyse", help="With --report: recompute every statistic from the comparison's stored "
                                "per-run outcomes and rewrite its compare.json and table.txt (no run is "
                                "repeated).")] = False,
        finished: Annotated[bool, typer.Option(
            "--finished", help="Run nothing: write compare.json, the tables and plots from the runs "
                               "under --out that have finished (a comparison cut short; the rest are "
                               "reported as unfinished).")] = False,
        verbose: Annotated[bool, typer.Option(
            "--verbose", help="Print the engines' logs and warnings as they come (by default each run "
                              "keeps them in its run dir's engine.log).")] = False,
    ) -> None:
        """Benchmark engineers under identical seeds, budget, eval suites and starting config."""
        from curriculum.compare import (CompareSpec, compare as run_compare, design_summary, design_text,
                                        load_compare_data, load_design, pilot_variance, reanalyse as redo,
                                        results_table, run_configs, runs_text, table_text_of)
        from curriculum.config import ConfigError
        from curriculum.registry import UnknownName

        if reanalyse and report is None:
            fail("--reanalyse rewrites a finished comparison: name it with --report DIR")
        if report is not None:
            try:
                data = redo(report) if reanalyse else load_compare_data(report)
            except (FileNotFoundError, ValueError, ConfigError) as err:
                fail(str(err))
            console.print(table_text_of(data), markup=False, highlight=False, soft_wrap=True, end="")
            return
        try:
            declared = load_design(design) if design is not None else None
        except ConfigError as err:
            fail(str(err))
        if seeds is not None and declared is not None:
            fail("--seeds: a design declares the seeds of each arm (primary_seeds, secondary_seeds, an "
                 "arm's seeds); edit the design file, or shift them with --first-seed")
        if engineers is None and declared is None:
            fail("--engineers is required without --design")
        names = ([e.strip() for e in engineers.split(",") if e.strip()] if engineers is not None
                 else list(declared.arms))
        try:
            spec = CompareSpec(engineers=names, testbed=testbed,
                               seeds=seeds if seeds is not None else CompareSpec.seeds, rounds=rounds, out=out, trainer=trainer, config=config,
                               overrides=list(set_), jobs=jobs, first_seed=first_seed,
                               share_round0=share_round0, design=declared)
        except ConfigError as err:
            fail(str(err))
        if dry_run:
            try:
                configs = run_configs(spec)
                text = design_text(design_summary(spec, configs, pilot_variance(list(pilot))))
                text += "\n" + runs_text(spec, configs)
            except (ConfigError, UnknownName) as err:
                fail(str(err))
            console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        if pilot:
            fail("--pilot sizes the MDE of --dry-run only")
        if finished and not (out / "runs").is_dir():
            fail(f"--finished reports the runs under --out, and {out / 'runs'} does not exist")

        def progress(outcome) -> None:
            extra = f" in {outcome.seconds:.1f}s" if outcome.seconds else ""
            color = {"failed": "red", "unfinished": "yellow"}.get(outcome.status, "green")
            console.print(f"[{color}]{outcome.status}[/] {outcome.engineer} seed {outcome.seed}{extra}",
                          highlight=False)

        try:
            result = run_compare(spec, progress=progress, verbose=verbose, finished_only=finished,
                                 warn=lambda m: console.print(f"[yellow]under-powered[/]: {escape(m)}",
                                                              highlight=False, soft_wrap=True))
        except (ConfigError, UnknownName) as err:
            fail(str(err))
        console.print(results_table(result.data))
        console.print(f"wrote {out / 'compare.json'}, {out / 'table.txt'} and plots:")
        for path in result.plots:
            console.print(f"  {path}", highlight=False, soft_wrap=True)
        if result.failed:
            for o in result.failed:
                console.print(f"[red]failed[/] {o.engineer} seed {o.seed}:\n{o.error}", highlight=False)
            raise typer.Exit(1)

    @app.command(epilog=REPORT_EXAMPLE)
    def report(run_dir: Annotated[Path, typer.Argument(help="A run directory.")]) -> None:
        """Plot a run: eval metrics per round and per bucket, and the training distribution."""
        from curriculum.config import ConfigError
        from curriculum.report import report_run

        try:
            paths = report_run(run_dir)
        except (ConfigError, FileNotFoundError) as err:
            fail(str(err))
        for path in paths:
            console.print(str(path), highlight=False, soft_wrap=True)
