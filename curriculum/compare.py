"""Controlled engineer benchmarks: every engineer, identical seeds, budget, eval suites and start.

For engineers E and seeds 0..N−1, run (e, s) is ``curriculum run`` with one shared base config
(the ``--config`` file, or ``DEFAULT_CONFIGS``' file for the trainer: ``configs/mapf_simulated.yaml``
for the simulated trainer, ``configs/mapf_small.yaml`` for the small one; plus the
``--set`` overrides) in which only ``engineer`` differs. Seed s fixes the round-0 proposal, every
round's training data and eval seed, and the trainer's randomness, so engineers differ only in
what they choose. Runs live in ``OUT/runs/<engineer>-seed<s>`` and execute in up to ``jobs``
processes. A rerun of ``compare`` reuses finished runs, resumes unfinished ones (the loop's
atomic round commits make that exact) and starts missing ones; a run dir whose saved config
differs from the requested one is an error, not silently reused.

Per engineer, the final score (the **test** suite's score after the last round; engineers never
saw it; ``compare.json``'s ``suite`` names it, and run dirs written before runs had two suites
are scored on their one eval suite, labelled so) is summarised over seeds by its
mean and 95% percentile-bootstrap interval; for every pair (a, b) the paired difference
mean_s(final_a(s) − final_b(s)) gets a bootstrap interval too (``curriculum.stats``). Results go
to ``OUT/compare.json``, a rich table (also saved as ``OUT/table.txt``) and PNG plots in
``OUT/plots`` (``curriculum.report``). With the simulated trainer every output says that the
numbers come from a simulation, not from a model.

Per-engineer options: ``--set engineers.<name>.<key>=<value>`` applies only to that engineer's
runs (e.g. ``engineers.optuna.sampler=random``); any other ``--set`` applies to all runs.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from curriculum.config import ConfigError, RunConfig, apply_overrides, read_config_file, validate_config
from curriculum.registry import ENGINEERS
from curriculum.core.records import LEGACY_SUITE
from curriculum.report import (RunSummary, plot_distribution, plot_final_by_size, plot_score_curves,
                               bucket_order, rates_by_size)

from curriculum.rundir import RunDir, run_path, write_json
from curriculum.stem import fork_member, plan_stems
from curriculum.stats import bootstrap_mean_ci, bootstrap_mean_ci_columns, pairwise_differences

SIMULATED_NOTICE = ("SIMULATED LEARNER: these numbers come from trainers/simulated.py, a documented "
                    "model of learning dynamics (docs/simulated_learner.md). They compare engineers "
                    "under that model and are not results of any language model.")
"""Stated in the table title and ``compare.json`` whenever the trainer is ``simulated``."""

_CONFIGS = Path(__file__).resolve().parents[1] / "configs"
DEFAULT_CONFIGS = {
    ("simulated", "mapf_frozenlake"): _CONFIGS / "mapf_simulated.yaml",
    ("simulated", "reasoning_gym"): _CONFIGS / "reasoning_gym_simulated.yaml",
    ("grpo", "mapf_frozenlake"): _CONFIGS / "mapf_compare_cpu.yaml",
    ("small", "mapf_frozenlake"): _CONFIGS / "mapf_small.yaml",
}
"""Base config used when ``--config`` is not given, per (trainer, testbed; default MAPF)."""


@dataclass
class CompareSpec:
    """One comparison: what ``curriculum compare`` parses its arguments into."""

    engineers: list[str]
    testbed: str | None = None
    """``None``: the config's testbed (``DEFAULT_CONFIGS``: MAPF-FrozenLake)."""
    seeds: int = 3
    rounds: int | None = None
    out: Path = Path("runs/compare")
    trainer: str | None = None
    config: Path | None = None
    overrides: list[str] = field(default_factory=list)
    jobs: int = 1
    first_seed: int = 0
    share_round0: bool = True
    """Run round 0 once per seed and start every engineer's run from it (``curriculum.stem``);
    engineers that shape round 0 (SPADE) and runs already started run their own."""

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))


@dataclass
class RunOutcome:
    """How one (engineer, seed) run was obtained."""

    engineer: str
    seed: int
    path: Path
    status: str
    """``reused`` (already complete), ``resumed``, ``new`` or ``failed``."""
    seconds: float = 0.0
    error: str | None = None


@dataclass
class CompareResult:
    """What ``compare`` returns (the same content as ``compare.json``)."""

    data: dict[str, Any]
    outcomes: list[RunOutcome]
    table_text: str
    plots: list[Path]

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------

def split_overrides(overrides: list[str], engineers: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``engineers.<name>.<key>=v`` → per-engineer ``engineer.<key>=v``; the rest apply to all."""
    common: list[str] = []
    per: dict[str, list[str]] = {e: [] for e in engineers}
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key.startswith("engineers."):
            parts = key.split(".")
            if len(parts) < 3:
                raise ConfigError(f"override {item!r} must look like engineers.<name>.<key>=<value>")
            if parts[1] not in per:
                raise ConfigError(f"override {item!r} names engineer {parts[1]!r}, which is not being "
                                  f"compared ({', '.join(engineers)})")
            per[parts[1]].append("engineer." + item.partition(".")[2].partition(".")[2])
        else:
            common.append(item)
    return common, per


def _base_data(spec: CompareSpec) -> dict[str, Any]:
    path = spec.config
    default = DEFAULT_CONFIGS.get((spec.trainer or "", spec.testbed or "mapf_frozenlake"))
    if path is None and default is not None and default.is_file():
        path = default
    if path is None:
        return {}
    return read_config_file(path)


def _section(data: dict[str, Any], key: str, name: str | None) -> None:
    """Switch a plugin section to ``name`` (dropping the file's options for another plugin)."""
    if name is None:
        return
    current = data.get(key)
    current_name = current.get("name") if isinstance(current, dict) else current
    if current_name != name:
        data[key] = {"name": name}


def run_configs(spec: CompareSpec) -> dict[tuple[str, int], RunConfig]:
    """The validated config of every (engineer, seed) run, in engineer then seed order."""
    if not spec.engineers:
        raise ConfigError("--engineers needs at least one engineer name")
    if len(set(spec.engineers)) != len(spec.engineers):
        raise ConfigError(f"--engineers lists a name twice: {','.join(spec.engineers)}")
    for e in spec.engineers:
        ENGINEERS.get(e)  # UnknownName lists the registered ones
    common, per = split_overrides(spec.overrides, spec.engineers)
    base = _base_data(spec)
    runs_dir = (Path(spec.out) / "runs").resolve()
    out: dict[tuple[str, int], RunConfig] = {}
    for e in spec.engineers:
        for s in spec.seed_list:
            data = yaml.safe_load(yaml.safe_dump(base))  # deep copy
            _section(data, "engineer", e)
            _section(data, "testbed", spec.testbed)
            _section(data, "trainer", spec.trainer)
            sets = [f"seed={s}", f"output_dir={runs_dir}", f"run_name={e}-seed{s}"]
            if spec.rounds is not None:
                sets.append(f"rounds={spec.rounds}")
            data = apply_overrides(data, common + per[e] + sets)
            out[(e, s)] = validate_config(data, source=f"config of {e}-seed{s}")
    return out


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------

def run_status(config: RunConfig) -> str:
    """``new``, ``resume`` or ``done`` for a run's directory; raises ConfigError on a mismatch."""
    path = run_path(config)
    if not (path / "config.yaml").is_file():
        return "new"
    run = RunDir.open(path)
    try:
        run.check_same_config(config)
    except ConfigError as err:
        raise ConfigError(f"{path} holds a run with a different config; choose another --out or "
                          f"delete it.\n{err}") from None
    return "done" if len(run.completed_rounds()) >= config.rounds else "resume"


def _registry_snapshot() -> dict[str, list[Any]]:
    """Every registered plugin, so that spawned workers know plugins registered at runtime."""
    from curriculum.registry import TESTBEDS, TRAINERS

    return {"engineer": ENGINEERS.entries(), "testbed": TESTBEDS.entries(), "trainer": TRAINERS.entries()}


def _ensure_registered(snapshot: dict[str, list[Any]] | None) -> None:
    from curriculum.registry import TESTBEDS, TRAINERS

    registries = {"engineer": ENGINEERS, "testbed": TESTBEDS, "trainer": TRAINERS}
    for kind, entries in (snapshot or {}).items():
        for entry in entries:
            if entry.name not in registries[kind]:
                registries[kind].register(entry.name, entry.target, entry.config, entry.description,
                                          offers=entry.offers, tasks=entry.tasks, fits=entry.fits,
                                          trains_on=entry.trains_on, source=entry.source)


def _run_one(config_data: dict[str, Any], status: str,
             registry: dict[str, list[Any]] | None = None) -> tuple[str, float]:
    """Worker: run or resume one config; returns (run dir, seconds)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _ensure_registered(registry)
    from curriculum.loop import run

    config = validate_config(config_data)
    path = run_path(config)
    start = time.perf_counter()
    if status == "new" and path.exists():
        shutil.rmtree(path)  # created but never got its config.yaml: nothing committed
    run(config, resume=path if status == "resume" else None)
    return str(path), time.perf_counter() - start


def _executor(jobs: int) -> ProcessPoolExecutor:
    import multiprocessing as mp
    import sys

    # fork: workers inherit imported modules and plugins registered at runtime; but never fork a
    # process whose torch may already run threads (a forked OpenMP pool can deadlock).
    method = "fork" if "fork" in mp.get_all_start_methods() and "torch" not in sys.modules else "spawn"
    # Share the cores among the workers instead of running jobs x cores threads (which thrash);
    # an explicit trainer.torch_threads still wins.
    threads = max(1, (os.cpu_count() or 1) // jobs)
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context(method),
                               initializer=_set_worker_threads, initargs=(threads,))


def _set_worker_threads(threads: int) -> None:
    """Worker initializer (module level, so that spawned workers can unpickle it)."""
    os.environ["CURRICULUM_TORCH_THREADS"] = str(threads)


def execute(configs: dict[tuple[str, int], RunConfig], jobs: int = 1,
            progress: Any = None, stems_dir: Path | None = None) -> list[RunOutcome]:
    """Run every config that is not complete yet, ``jobs`` at a time (``jobs=1``: in-process).
    With ``stems_dir``, new runs that can share round 0 start from one stem run per seed
    (``curriculum.stem``) kept there."""
    outcomes: dict[tuple[str, int], RunOutcome] = {}
    todo: list[tuple[tuple[str, int], str]] = []
    for key, config in configs.items():
        path = run_path(config)
        status = run_status(config)
        if status == "done":
            outcomes[key] = RunOutcome(key[0], key[1], path, "reused")
            _notify(progress, outcomes[key])
        else:
            todo.append((key, status))
    # Seed-major order: a comparison cut short still has every engineer on the first seeds.
    todo.sort(key=lambda item: item[0][1])
    # Runs with no committed round yet may start from a stem (a cut comparison's too).
    unstarted = {k for k, s in todo if s == "new" or not RunDir(run_path(configs[k])).completed_rounds()}
    stems = plan_stems(configs, unstarted, stems_dir) if stems_dir else {}
    member_of = {key: name for name, stem in stems.items() for key in stem.members}
    stem_status = {name: run_status(stem.config) for name, stem in stems.items()}
    stems_done = {name for name, status in stem_status.items() if status == "done"}

    def finish(key: Any, status: str, result: Any, error: str | None) -> None:
        if isinstance(key, str):  # a stem: its members start from it once it is done
            stem = stems[key]
            if error is None:
                stems_done.add(key)
            _notify(progress, RunOutcome(f"round 0 shared by {','.join(e for e, _ in stem.members)}",
                                         stem.config.seed, stem.path, "failed" if error else status,
                                         seconds=result[1] if result else 0.0, error=error))
            return
        path = run_path(configs[key])
        if error is None:
            outcomes[key] = RunOutcome(key[0], key[1], path, "resumed" if status == "resume" else "new",
                                       seconds=result[1])
        else:
            outcomes[key] = RunOutcome(key[0], key[1], path, "failed", error=error)
        _notify(progress, outcomes[key])

    # First the stems and every run that needs none, by seed; then the stems' members, which
    # resume after the stem's round 0 (reported as new). A member of a failed stem runs its own.
    first: list[tuple[Any, RunConfig, str, str]] = [
        (name, stem.config, stem_status[name], stem_status[name]) for name, stem in stems.items()
        if name not in stems_done]
    first += [(key, configs[key], status, status) for key, status in todo if key not in member_of]
    first.sort(key=lambda item: (item[1].seed, not isinstance(item[0], str)))
    _run_all(first, jobs, finish)
    second: list[tuple[Any, RunConfig, str, str]] = []
    for key, status in todo:
        if key not in member_of:
            continue
        stem = stems[member_of[key]]
        if member_of[key] not in stems_done:
            second.append((key, configs[key], status, status))
            continue
        try:
            if run_path(configs[key]).exists():  # started before, nothing committed
                shutil.rmtree(run_path(configs[key]))
            fork_member(stem, configs[key])
        except Exception:  # noqa: BLE001 - reported per run; a rerun forks it again
            finish(key, status, None, f"starting the run from the shared round 0 {stem.path} failed:\n"
                   + traceback.format_exc())
            continue
        second.append((key, configs[key], "resume", "new"))
    _run_all(second, jobs, finish)
    return [outcomes[key] for key in configs]


def _run_all(items: list[tuple[Any, RunConfig, str, str]], jobs: int,
             finish: Callable[[Any, str, Any, str | None], None]) -> None:
    """Run ``(key, config, run status, reported status)`` items, ``jobs`` at a time; ``finish(key,
    reported status, (path, seconds) or None, error or None)`` after each."""
    if jobs <= 1 or len(items) <= 1:
        for key, config, status, reported in items:
            try:
                finish(key, reported, _run_one(config.model_dump(mode="json"), status), None)
            except Exception:  # noqa: BLE001 - one failed run must not sink the comparison
                finish(key, reported, None, traceback.format_exc())
        return
    snapshot = _registry_snapshot()
    with _executor(min(jobs, len(items))) as pool:
        futures: dict[Future, tuple[Any, str]] = {
            pool.submit(_run_one, config.model_dump(mode="json"), status, snapshot): (key, reported)
            for key, config, status, reported in items
        }
        for future in as_completed(futures):
            key, reported = futures[future]
            try:
                finish(key, reported, future.result(), None)
            except BrokenProcessPool:
                # One worker was killed (by the OS, e.g. out of memory): the pool cannot run
                # anything else. Committed rounds are safe; the same command resumes.
                finish(key, reported, None, WORKER_DIED)
            except Exception:  # noqa: BLE001
                finish(key, reported, None, traceback.format_exc())


WORKER_DIED = ("a compare worker process died (killed by the operating system, often for lack of "
               "memory; see `dmesg`), so this run was cut or never started. Its committed rounds "
               "are kept: rerun the same command to resume, with fewer --jobs if memory is short.")


def _notify(progress: Any, outcome: RunOutcome) -> None:
    if progress is not None:
        progress(outcome)


# --------------------------------------------------------------------------------------------
# summarising
# --------------------------------------------------------------------------------------------

def _matrix(rows: list[list[float]], width: int) -> np.ndarray:
    m = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        m[i, :min(width, len(row))] = row[:width]
    return m


def summarize(spec: CompareSpec, summaries: dict[tuple[str, int], RunSummary],
              outcomes: list[RunOutcome], rounds: int) -> dict[str, Any]:
    """The content of ``compare.json`` (plots are added by ``compare``)."""
    simulated = any(s.simulated for s in summaries.values())
    sizes = sorted({k for s in summaries.values() for m in s.metrics for k in rates_by_size(m)}, key=bucket_order)
    runs = []
    finals: dict[str, dict[int, float]] = {e: {} for e in spec.engineers}
    per_engineer: dict[str, Any] = {}
    for o in outcomes:
        s = summaries.get((o.engineer, o.seed))
        row: dict[str, Any] = {"engineer": o.engineer, "seed": o.seed, "run_dir": str(o.path),
                               "status": o.status, "seconds": round(o.seconds, 2)}
        if o.error:
            row["error"] = o.error.strip().splitlines()[-1]
        if (o.path / "forked_from.json").is_file():  # round 0 came from a shared stem run
            row["round0_from"] = json.loads((o.path / "forked_from.json").read_text())["stem"]
        if s is not None:
            row.update(scores=s.scores, baseline_score=s.baseline_score, complete=s.complete,
                       final_score=s.scores[-1] if s.scores else None,
                       final_metrics={k: v for k, v in (s.metrics[-1] if s.metrics else {}).items()
                                      if k.startswith(("valid_rate", "optimal_rate"))},
                       data_ratio=[[r.get(z, 0.0) for z in sizes] for r in s.data_ratio])
            if s.complete and s.scores:
                finals[o.engineer][o.seed] = s.scores[-1]
        runs.append(row)
    for e in spec.engineers:
        done = [summaries[(e, sd)] for sd in spec.seed_list if (e, sd) in summaries and summaries[(e, sd)].complete]
        if not done:
            per_engineer[e] = {"n": 0}
            continue
        curve = _matrix([d.scores for d in done], rounds)
        last = [d.metrics[-1] for d in done]
        per_engineer[e] = {
            "n": len(done),
            "final_score": bootstrap_mean_ci([d.scores[-1] for d in done]).to_dict(),
            "mean_score_over_rounds": float(np.nanmean(curve)),
            "per_round": [iv.to_dict() for iv in bootstrap_mean_ci_columns(curve)],
            "final_valid_rate": float(np.mean([m.get("valid_rate", np.nan) for m in last])),
            "final_optimal_rate": float(np.mean([m.get("optimal_rate", np.nan) for m in last])),
            "final_valid_by_size": {z: float(np.mean([rates_by_size(m, "valid").get(z, np.nan) for m in last]))
                                    for z in sizes},
            "final_optimal_by_size": {z: float(np.mean([rates_by_size(m, "optimal").get(z, np.nan)
                                                        for m in last])) for z in sizes},
        }
    return {
        "simulated": simulated,
        "notice": SIMULATED_NOTICE if simulated else "",
        "testbed": next((s.config["testbed"]["name"] for s in summaries.values()), spec.testbed),
        "trainer": next((s.config["trainer"]["name"] for s in summaries.values()), spec.trainer),
        "engineers": spec.engineers,
        "seeds": spec.seed_list,
        "rounds": rounds,
        "score": "EvalReport.score after the last round (testbed-defined; MAPF: valid rate over all "
                 "instances of the suite)",
        "suite": _suite_of(summaries.values()),
        "sizes": sizes,
        "summary": per_engineer,
        "pairwise": pairwise_differences({e: v for e, v in finals.items() if v}),
        "runs": runs,
    }


def _suite_of(summaries: Any) -> str:
    """The held-out suite the runs' scores are on (``RunSummary.suite``); several are named."""
    suites = sorted({s.suite for s in summaries})
    return " + ".join(suites) if suites else "test"


def _measured(value: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def results_table(data: dict[str, Any]) -> Any:
    """Rich tables: per engineer, then pairwise differences (as one renderable group)."""
    from rich.console import Group
    from rich.table import Table

    title = "Engineers on {}, {} seeds × {} rounds, scored on the {} suite".format(
        data["testbed"], len(data["seeds"]), data["rounds"], data.get("suite") or LEGACY_SUITE)
    if data["simulated"]:
        title = "SIMULATED LEARNER, not model results — " + title
    main = Table(title=title, title_justify="left")
    # MAPF's valid/optimal columns only where some run measured them (reasoning_gym has neither).
    rates = [(label, key) for label, key in (("final valid", "final_valid_rate"), ("final optimal", "final_optimal_rate"))
             if any(s.get("n") and _measured(s.get(key)) for s in data["summary"].values())]
    for col in ("engineer", "runs", "final score [95% CI]", "mean over rounds", *(label for label, _ in rates)):
        main.add_column(col, justify="left" if col == "engineer" else "right")
    for e in data["engineers"]:
        s = data["summary"][e]
        if not s.get("n"):
            main.add_row(e, "0", "—", "—", *("—" for _ in rates))
            continue
        f = s["final_score"]
        main.add_row(e, str(s["n"]), f"{f['mean']:.3f} [{f['low']:.3f}, {f['high']:.3f}]",
                     f"{s['mean_score_over_rounds']:.3f}", *(f"{s[key]:.3f}" for _, key in rates))
    pair = Table(title="Paired differences of the final score (a − b, same seeds; bootstrap 95% CI)",
                 title_justify="left")
    for col in ("a − b", "mean diff", "95% CI", "n"):
        pair.add_column(col, justify="left" if col == "a − b" else "right")
    for p in data["pairwise"]:
        pair.add_row(f"{p['a']} − {p['b']}", f"{p['mean_diff']:+.3f}",
                     f"[{p['ci95_low']:+.3f}, {p['ci95_high']:+.3f}]", str(p["n"]))
    parts = [main, pair]
    if data["simulated"]:
        parts.append(data["notice"])
    return Group(*parts)


def draw_plots(data: dict[str, Any], summaries: dict[tuple[str, int], RunSummary], out: Path) -> list[Path]:
    """The three comparison plots into ``out``."""
    note = " — SIMULATED learner" if data["simulated"] else ""
    suite = data.get("suite") or LEGACY_SUITE
    sizes = data["sizes"]
    curves, final, dist = {}, {}, {}
    for e in data["engineers"]:
        done = [summaries[(e, s)] for s in data["seeds"] if (e, s) in summaries and summaries[(e, s)].complete]
        if not done:
            continue
        curves[e] = _matrix([d.scores for d in done], data["rounds"])
        final[e] = {kind: np.array([[rates_by_size(d.metrics[-1], kind).get(z, np.nan) for z in sizes]
                                    for d in done]) for kind in ("valid", "optimal")}
        dist[e] = np.nanmean(np.stack([_matrix([[r.get(z, 0.0) for z in sizes] for r in d.data_ratio],
                                               len(sizes))[:data["rounds"]] for d in done]), axis=0)
    if not curves:
        return []
    return [
        plot_score_curves(curves, out / "score_per_round.png",
                          title=f"{suite.capitalize()}-suite score per round (mean, 95% bootstrap CI over seeds){note}"),
        plot_final_by_size(final, sizes, out / "final_by_size.png",
                           title=f"Final valid and optimal rate per map size, {suite} suite{note}"),
        plot_distribution(dist, sizes, out / "training_distribution.png",
                          title=f"Training distribution per round, mean over seeds{note}"),
    ]


def compare(spec: CompareSpec, progress: Any = None) -> CompareResult:
    """Run (or reuse) every run of ``spec`` and write ``compare.json``, the table and the plots."""
    start = time.perf_counter()
    configs = run_configs(spec)
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    outcomes = execute(configs, jobs=spec.jobs, progress=progress,
                       stems_dir=out / "shared_round0" if spec.share_round0 else None)
    summaries = {}
    for o in outcomes:
        path = o.path
        if (path / "config.yaml").is_file():
            summaries[(o.engineer, o.seed)] = RunSummary.load(path)
    rounds = next(iter(configs.values())).rounds
    data = summarize(spec, summaries, outcomes, rounds)
    plots = draw_plots(data, summaries, out / "plots")
    data["plots"] = [str(p) for p in plots]
    data["wall_s"] = round(time.perf_counter() - start, 2)
    write_json(out / "compare.json", data)
    from rich.console import Console

    recorder = Console(record=True, width=120, file=io.StringIO())
    recorder.print(results_table(data))
    table_text = recorder.export_text()
    (out / "table.txt").write_text(table_text)
    return CompareResult(data=data, outcomes=outcomes, table_text=table_text, plots=plots)
