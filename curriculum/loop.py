"""The controller: rounds of train → eval → design.

For round r (0-based), with proposal P_r (P_0 from ``testbed.initial_proposal``, or on a fresh
run the projection of ``engineer.initial_design`` when the engineer ``designs_round0``, made after
the warm start):

    tasks_r   = testbed.sample(P_r, tasks_per_round, seed=derive(seed, r, "data"))
    metrics_r = trainer.train_round(tasks_r)
    eval_r    = testbed.evaluate(trainer.policy(), suite="validation")
    test_r    = testbed.evaluate(trainer.policy(), suite="test")   # testbeds with a test suite
    report_r  = RoundReport(P_r, metrics_r, eval_r, trainer.env_outcomes(), test=test_r)
    design_r  = engineer.design(history + [report_r])   # skipped after the last round;
                                                         # sees engineer_view(): no test_r
    P_{r+1}, changes_r = testbed.project(design_r.raw, P_r)
    commit round r atomically (artifacts, checkpoint, RNG, engineer and testbed state)

Every random choice draws from a seed derived from (master seed, round, purpose), so a
resumed run makes the same choices as an uninterrupted one.

The test suite is evaluated after every round (``test_every_round``; otherwise after the last
round only) and, with ``eval_before_training``, before training (``baseline_test_eval.json``,
``warmstart_test_eval.json`` beside the validation ``*_eval.json``). Engineers never receive
it: ``DesignContext`` and ``on_round_end`` get ``RoundReport.engineer_view()``.

Seconds per phase go to ``metrics.jsonl`` (``PhaseTimer``), so every run is a calibration point of
``--dry-run``'s wall-time estimate (``benchmarks/estimate_check.py``): ``setup`` (building the
plugins and loading the model), each eval before round 0 (``baseline_eval`` ...) and the warm
start carry ``seconds`` (a cached warm start's ``warmstart/seconds`` is its cache entry's training
time, ``seconds`` the load), and each round's ``round_committed`` record ``seconds``: ``sample``,
``train``, ``eval``, ``test_eval`` (rounds that test), ``design`` (rounds that design), ``commit``
(state, checkpoint, pruning) and ``round`` (the whole round).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curriculum.config import ConfigError, RunConfig, apply_overrides, dump_config, validate_config
from curriculum.console import QuietReporter
from curriculum.core import distributed
from curriculum.core.records import DesignRecord, RoundReport, suite_label
from curriculum.core.types import EvalReport
from curriculum.enginelog import engine_log
from curriculum.evalcache import cached_eval, eval_key
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS
from curriculum.rundir import RunDir, RunDirError, capture_rng, read_json, restore_rng, write_json
from engineers.base import DesignContext, Engineer
from testbeds.base import Testbed
from trainers.base import Trainer

_PURPOSES = {"initial": 0, "data": 1, "eval": 2, "engineer": 3, "train": 4, "test": 5}


def derive_seed(seed: int, round_index: int, purpose: str) -> int:
    """A 31-bit seed for one (round, purpose); independent streams via NumPy's SeedSequence."""
    sequence = np.random.SeedSequence([seed, round_index + 1, _PURPOSES[purpose]])
    return int(sequence.generate_state(1)[0] & 0x7FFFFFFF)


def build_testbed(config: RunConfig) -> Testbed:
    return TESTBEDS.get(config.testbed.name).load()(config.testbed, seed=config.seed)


def build_engineer(config: RunConfig, run_dir: Path | None) -> Engineer:
    return ENGINEERS.get(config.engineer.name).load()(config.engineer, run_dir=str(run_dir) if run_dir else None)


def build_trainer(config: RunConfig, testbed: Testbed, run_dir: Path | None = None) -> Trainer:
    return TRAINERS.get(config.trainer.name).load()(config, testbed, run_dir)


@dataclass
class PhaseTimer:
    """Wall seconds per phase of one round, or of the work before round 0 (module docstring)."""

    seconds: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = round(self.seconds.get(phase, 0.0) + time.perf_counter() - start, 3)

    def since_start(self) -> float:
        return round(time.perf_counter() - self.started, 3)

    def record(self) -> dict[str, float]:
        """The phases and the whole (``round``), for the round's metrics line."""
        return {**self.seconds, "round": self.since_start()}


@dataclass
class RunResult:
    """What ``run`` returns."""

    run_dir: Path
    history: list[RoundReport]


def run(config: RunConfig, *, resume: Path | None = None, reporter: QuietReporter | None = None,
        final_test: bool = True, claim: bool = False, verbose: bool = False) -> RunResult:
    """Run (or resume) a whole curriculum; returns the run dir and the full history.
    ``final_test=False`` leaves out the test suite after the last round when ``test_every_round``
    is off: for a shared round 0 (``curriculum.stem``), whose runs go on and test their own last
    round. ``claim`` (``compare``'s workers): start the run, or resume it if its directory holds
    one already, decided under the run dir's lock (``RunDir.create``). The engines' own logs and
    warnings go to the run dir's ``engine.log`` (``curriculum.enginelog``); ``verbose`` shows
    them on the terminal too.

    Under ``accelerate launch`` every rank calls this; see ``curriculum.core.distributed`` for who
    does what.
    """
    distributed.init()
    main = distributed.is_main()
    reporter = (reporter or QuietReporter()) if main else QuietReporter()
    # The main process creates or checks the run dir; a refusal must stop every rank.
    opened, error, notes = None, None, []
    if main:
        try:
            opened, notes = _open_run_dir(config, resume, claim)  # keeps the run-dir lock for the whole run
        except ConfigError as err:
            error = str(err)
    path, error = distributed.broadcast((opened.path if opened else None, error))
    if error is not None:
        raise ConfigError(error)
    run_dir = opened or RunDir(path)
    try:
        with engine_log(run_dir.path, verbose=verbose):
            reporter.config(dump_config(config), str(run_dir.path))
            for note in notes:
                reporter.message(note)
            history = _run_rounds(config, run_dir, reporter, final_test)
    finally:
        if opened is not None:
            opened.unlock()
    return RunResult(run_dir=run_dir.path, history=history)


def _run_rounds(config: RunConfig, run_dir: RunDir, reporter: QuietReporter,
                final_test: bool) -> list[RoundReport]:
    """Build the plugins, restore or prepare the run, and run the rounds still to do; returns the
    whole history. The plugins are closed however it ends."""
    main = distributed.is_main()
    setup = PhaseTimer()
    testbed = build_testbed(config)
    engineer = build_engineer(config, run_dir.path)
    trainer = build_trainer(config, testbed, run_dir.path)
    reporter.plugin_declarations(getattr(type(trainer), "summary_metrics", ()),
                                 getattr(testbed, "report_layout", None))
    history = run_dir.history()
    try:
        proposal = _start(config, run_dir, history, testbed, engineer, trainer, reporter, setup)
        for index in range(len(history), config.rounds):
            report, proposal = _one_round(config, index, proposal, history, run_dir,
                                          testbed, engineer, trainer, reporter, final_test)
            history.append(report)
            engineer.on_round_end(report.engineer_view())
            reporter.round_end(report)
            if main:
                _plot(run_dir, reporter)
    finally:
        engineer.close()
        trainer.close()
        testbed.close()
    return history


def _start(config: RunConfig, run_dir: RunDir, history: list[RoundReport], testbed: Testbed, engineer: Engineer,
           trainer: Trainer, reporter: QuietReporter, setup: PhaseTimer | None = None) -> Any:
    """The proposal of the first round to run: after the last committed round (asking a finished
    run's skipped design when extending it), or on a fresh run the testbed's initial proposal,
    after the baseline eval and the warm start, or the engineer's initial design. ``setup``:
    started before the plugins were built; its seconds go to the ``setup`` metrics line."""
    proposal = _restore(config, run_dir, history, testbed, engineer, trainer)
    engineer.on_run_start(testbed, proposal)
    if history and history[-1].design is None and len(history) < config.rounds:
        proposal = _extend(config, run_dir, history, proposal, testbed, engineer, trainer, reporter)
    if distributed.is_main():
        run_dir.truncate_metrics(len(history) - 1)
        run_dir.log({"round": len(history) - 1, "event": "setup",
                     "seconds": (setup or PhaseTimer()).since_start()})
        if not history:
            _prepare(config, run_dir, testbed, engineer, trainer, reporter)
        elif (saved := _saved_baseline(run_dir.path)) is not None:
            reporter.baseline(saved)
    if not history and engineer.designs_round0:
        proposal = _initial_design(config, run_dir, proposal, testbed, engineer, trainer, reporter)
    return proposal


def _open_run_dir(config: RunConfig, resume: Path | None,
                  claim: bool = False) -> tuple[RunDir, list[str]]:
    """Create or reopen the run dir, locked before anything is written; on resume, verify it
    and fall back past damaged rounds. Returns the run dir and what the user must be told."""
    if resume is None:
        run_dir = RunDir.create(config, claim=claim)  # locked
        if run_dir.fresh:
            return run_dir, []
    else:
        run_dir = RunDir.open(resume)
        run_dir.lock()
    try:
        RunDir.open(run_dir.path)  # a claimed directory must hold a run
        problem = run_dir.check_config()
        if problem is not None:
            raise RunDirError(f"cannot resume: {problem}")
        saved_rounds = run_dir.saved_config().rounds
        extending = run_dir.extends_config(config)  # refuses a different config, writes nothing
        run_dir.discard_partial()
        plan = run_dir.plan_resume()
        if not plan.refused and (problem := engineer_resume_problem(run_dir, plan.last)) is not None:
            raise RunDirError(f"cannot resume: {problem}")  # before any move or save
        notes = run_dir.apply_resume_plan(plan)  # refuses before any move
        if (replaced := run_dir.replace_odd_metrics()) is not None:
            notes.append(replaced)
        if extending:  # only once the resume can proceed
            run_dir.save_config(config)
            notes.insert(0, f"extending the run from {saved_rounds} to {config.rounds} rounds")
    except BaseException:
        run_dir.unlock()
        raise
    return run_dir, notes


def engineer_resume_problem(run_dir: RunDir, last: int | None, *, writing: bool = True) -> str | None:
    """What the run's engineer says of its own files before a resume after round ``last``
    (``Engineer.resume_problem``; e.g. the optuna study beside the rounds), or ``None``."""
    config = run_dir.saved_config()
    state = run_dir.load_state(last).get("engineer") if last is not None else None
    engineer_class = ENGINEERS.get(config.engineer.name).load()
    return engineer_class.resume_problem(config.engineer, run_dir.path,
                                         state if isinstance(state, dict) else None, writing=writing)


def _restore(config: RunConfig, run_dir: RunDir, history: list[RoundReport], testbed: Testbed,
             engineer: Engineer, trainer: Trainer) -> Any:
    """Load the state after the last committed round (or the initial state) into the plugins."""
    if not history:
        trainer.setup(None)
        rng = np.random.default_rng(derive_seed(config.seed, 0, "initial"))
        return testbed.initial_proposal(rng)
    last = history[-1].round
    state = run_dir.load_state(last)
    engineer.load_state_dict(state["engineer"])
    testbed.load_state_dict(state["testbed"])
    restore_rng(state["rng"])
    trainer.setup(run_dir.checkpoint(last))
    return testbed.proposal_model.model_validate(state["next_proposal"])


def _prepare(config: RunConfig, run_dir: RunDir, testbed: Testbed, engineer: Engineer, trainer: Trainer,
             reporter: QuietReporter) -> None:
    """Main process, fresh run: baseline eval of the starting model, the trainer's preparation
    (warm start, with the engineer's own examples) and, when both happen, an eval of the prepared
    model before round 0."""
    if config.eval_before_training:
        baseline = _pre_eval(config, run_dir, testbed, trainer, reporter, "baseline")
        reporter.baseline(baseline)
    steps = trainer.prepare_steps()
    if steps:
        started = time.perf_counter()
        metrics = _warm_start(trainer, engineer, reporter)
        write_json(run_dir.path / "warmstart.json", metrics)
        run_dir.log({"round": -1, "event": "warmstart", **metrics,
                     "seconds": round(time.perf_counter() - started, 3)})
        if config.eval_before_training:
            warm = _pre_eval(config, run_dir, testbed, trainer, reporter, "warmstart")
            reporter.message(f"after warm start: eval score {warm.score:.4f} "
                             f"({_signed_points(warm.score - baseline.score)} vs baseline, "
                             f"{suite_label(warm)} suite)")


def _saved_baseline(path: Path) -> EvalReport | None:
    """The starting model's saved eval the reporter compares rounds with: the test suite's when
    saved, else the validation (or, in older run dirs, the one) eval; ``None`` without a baseline."""
    for name in ("baseline_test_eval.json", "baseline_eval.json"):
        if (path / name).is_file():
            return EvalReport.model_validate(read_json(path / name))
    return None


def _warm_start(trainer: Trainer, engineer: Engineer, reporter: QuietReporter) -> dict[str, float]:
    """The trainer's warm start, with the engineer's own examples, under a progress stage."""
    reporter.stage("warm start", trainer.prepare_steps())
    metrics = trainer.prepare(progress=reporter.advance, examples=engineer.warmstart_examples)
    reporter.stage_end()
    return metrics


def _pre_eval(config: RunConfig, run_dir: RunDir, testbed: Testbed, trainer: Trainer,
              reporter: QuietReporter, name: str) -> EvalReport:
    """Evaluate before round 0 on the validation suite into ``<name>_eval.json`` and, when the
    testbed has one, the test suite into ``<name>_test_eval.json`` (same seeds for both
    pre-evals). Returns the test eval when there is one (what the reporter shows), else the
    validation eval."""
    reporter.stage(f"eval {name}", None)
    policy = functools.cache(lambda: _with_progress(trainer.policy(), reporter))
    suites = [("validation", "eval", "")] + ([("test", "test", "_test")] if "test" in testbed.eval_suites else [])
    for suite, purpose, part in suites:
        timer = PhaseTimer()
        report, reused = _held_out(config, testbed, trainer, policy, derive_seed(config.seed, -1, purpose), suite)
        write_json(run_dir.path / f"{name}{part}_eval.json", report.model_dump(mode="json"))
        run_dir.log({"round": -1, "event": f"{name}{part}_eval", "score": report.score, "cached": reused,
                     "seconds": timer.since_start(), **report.metrics})
    reporter.stage_end()
    return report


def _held_out(config: RunConfig, testbed: Testbed, trainer: Trainer, policy: Callable[[], Any], seed: int,
              suite: str) -> tuple[EvalReport, bool]:
    """``testbed.evaluate`` of the trainer's policy on ``suite``, or the same eval from the eval
    cache (``curriculum.evalcache``; ``eval_cache: false`` turns it off); ``policy`` is called
    only when the eval runs; the trainer's identity (a weights digest) only when the suite has one.
    Returns ``(report, reused)``."""
    suite_identity = testbed.eval_identity(suite) if config.eval_cache else None
    key = eval_key(trainer.eval_identity(seed), suite_identity) if suite_identity is not None else None
    return cached_eval(key, lambda: testbed.evaluate(policy(), seed=seed, suite=suite))


def _plot(run_dir: RunDir, reporter: QuietReporter) -> None:
    """Refresh ``RUN/plots`` (eval rates per round, training distribution). The round is already
    committed, so a plotting failure is reported and the run goes on."""
    from curriculum.report import report_run

    try:
        report_run(run_dir.path)
    except Exception as err:  # noqa: BLE001 - a plot must never stop training
        reporter.message(f"could not write plots: {type(err).__name__}: {err}")


def _signed_points(delta: float) -> str:
    return f"{100 * delta:+.1f} points"


def _one_round(config: RunConfig, index: int, proposal: Any, history: list[RoundReport], run_dir: RunDir,
               testbed: Testbed, engineer: Engineer, trainer: Trainer,
               reporter: QuietReporter, final_test: bool = True) -> tuple[RoundReport, Any]:
    main = distributed.is_main()
    proposal_json = proposal.model_dump(mode="json")
    reporter.round_start(index, config.rounds, proposal_json)

    # Every rank samples the same tasks (same proposal, same derived seed); TRL shards them.
    timer = PhaseTimer()
    reporter.stage("sample", None)
    with timer("sample"):
        tasks = testbed.sample(proposal, config.tasks_per_round, derive_seed(config.seed, index, "data"))

    steps = getattr(config.trainer, "max_steps_per_round", None)
    reporter.stage("train", steps)

    def log(record: dict[str, Any]) -> None:
        if main:
            run_dir.log(record)
        if "loss" in record or "reward" in record:
            reporter.advance(1)

    with timer("train"):
        train_metrics = trainer.train_round(tasks, round_index=index, seed=derive_seed(config.seed, index, "train"),
                                            log=log)
    if distributed.world_size() > 1:
        digests = distributed.gather(trainer.weights_digest())
        if main:
            run_dir.log({"round": index, "event": "rank_weight_digests", "digests": digests})

    report, next_proposal = _evaluate_and_design(config, index, proposal, train_metrics, history,
                                                 run_dir, testbed, engineer, trainer, reporter, final_test, timer)
    next_proposal = _commit(config, index, report, next_proposal, run_dir, testbed, engineer, trainer, reporter, timer)
    distributed.barrier()
    if report is None:  # non-main ranks read the committed record, so hooks see the same round
        report = run_dir.load_round(index)
    return report, next_proposal


def _commit(config: RunConfig, index: int, report: RoundReport | None, next_proposal: Any, run_dir: RunDir,
            testbed: Testbed, engineer: Engineer, trainer: Trainer, reporter: QuietReporter,
            timer: PhaseTimer) -> Any:
    """Commit round ``index`` (state, checkpoint, the ``round_committed`` line with the round's
    seconds per phase); the other ranks take the main process's next proposal and reward state
    and join the collective save. Returns the next proposal (the main process's, on every rank)."""
    main = distributed.is_main()
    started = time.perf_counter()
    if main:
        state = {
            "engineer": engineer.state_dict(),
            "testbed": testbed.state_dict(),
            "rng": capture_rng(),
            "next_proposal": next_proposal.model_dump(mode="json"),
        }
        reporter.stage("commit", None)
        run_dir.begin_round(report, state=state)
    # The other ranks follow the main process's decision and reward state.
    next_json, testbed_state = distributed.broadcast(
        (next_proposal.model_dump(mode="json"), testbed.state_dict()))
    if not main:
        next_proposal = testbed.proposal_model.model_validate(next_json)
        testbed.load_state_dict(testbed_state)
    distributed.barrier()
    # Saving may gather sharded weights, so every rank takes part; only the main one writes.
    trainer.save(run_dir.partial_dir(index) / "checkpoint")
    if main:
        run_dir.finish_round(index)
        if config.keep_checkpoints is not None:
            run_dir.prune_checkpoints(config.keep_checkpoints)
        if index + 1 >= config.rounds and not config.keep_final_optimizer_state:
            trainer.drop_resume_state(run_dir.round_dir(index) / "checkpoint")
        timer.seconds["commit"] = round(time.perf_counter() - started, 3)
        scores = {"score": report.eval.score, **({"test_score": report.test.score} if report.test else {})}
        run_dir.log({"round": index, "event": "round_committed", **scores, **report.train_metrics,
                     "seconds": timer.record()})
    return next_proposal


def _evaluate_and_design(config: RunConfig, index: int, proposal: Any, train_metrics: dict[str, float],
                         history: list[RoundReport],
                         run_dir: RunDir, testbed: Testbed, engineer: Engineer, trainer: Trainer,
                         reporter: QuietReporter, final_test: bool = True,
                         timer: PhaseTimer | None = None) -> tuple[RoundReport | None, Any]:
    """Evaluate the new policy and ask the engineer for the next proposal, on the main process;
    an engineer with ``collective_design`` designs on every rank (the main process's design
    counts). Other ranks return ``(None, proposal)``. ``timer`` gets the seconds of ``eval``
    (with the policy's weight push), ``test_eval`` and ``design``."""
    main = distributed.is_main()
    collective = _collective(engineer)
    if not (main or collective):
        return None, proposal
    timer = timer or PhaseTimer()
    with timer("eval"):
        policy = trainer.policy()  # on every rank that designs: pushing weights to vLLM can be collective
    report = (_evaluate(config, index, proposal, train_metrics, run_dir, testbed, trainer, policy, reporter,
                        final_test, timer) if main else None)
    if index + 1 >= config.rounds:
        return report, proposal
    if collective:
        report = distributed.broadcast(report)  # every rank's engineer sees the same history
    with timer("design"):
        next_proposal = _design(config, report, proposal, history, run_dir, testbed, engineer, trainer, policy,
                                reporter)
    return (report if main else None), next_proposal


def _collective(engineer: Engineer) -> bool:
    return distributed.world_size() > 1 and engineer.collective_design


def _evaluate(config: RunConfig, index: int, proposal: Any, train_metrics: dict[str, float], run_dir: RunDir,
              testbed: Testbed, trainer: Trainer, policy: Any, reporter: QuietReporter,
              final_test: bool = True, timer: PhaseTimer | None = None) -> RoundReport:
    """Main process only: the round's policy on the validation suite and, when the testbed has
    one and the round is due (``test_every_round``, or the last round unless ``final_test`` is
    off), the test suite."""
    timer = timer or PhaseTimer()
    reporter.stage("eval", None)
    shown = functools.cache(lambda: _with_progress(policy, reporter))
    with timer("eval"):
        evaluation, reused = _held_out(config, testbed, trainer, shown, derive_seed(config.seed, index, "eval"),
                                       "validation")
    run_dir.log({"round": index, "event": "eval", "score": evaluation.score, "cached": reused, **evaluation.metrics})
    test = None
    if "test" in testbed.eval_suites and (config.test_every_round or (final_test and index + 1 >= config.rounds)):
        with timer("test_eval"):
            test, reused = _held_out(config, testbed, trainer, shown, derive_seed(config.seed, index, "test"), "test")
        run_dir.log({"round": index, "event": "test_eval", "score": test.score, "cached": reused, **test.metrics})
    return RoundReport(round=index, proposal=proposal.model_dump(mode="json"), train_metrics=train_metrics,
                       eval=evaluation, test=test, env_outcomes=trainer.env_outcomes())


def _design(config: RunConfig, report: RoundReport, proposal: Any, history: list[RoundReport],
            run_dir: RunDir, testbed: Testbed, engineer: Engineer, trainer: Trainer, policy: Any,
            reporter: QuietReporter) -> Any:
    """Ask the engineer for the next proposal after ``report``'s round; sets ``report.design``.
    Main process only, or every rank for a ``collective_design`` engineer (the others return
    ``proposal`` unchanged)."""
    index = report.round
    collective = _collective(engineer)
    reporter.stage("design", None)
    ctx = DesignContext(
        round=index, total_rounds=config.rounds, history=[*history, report], proposal=proposal,
        testbed=testbed, rng=np.random.default_rng(derive_seed(config.seed, index, "engineer")),
        policy=policy, base_policy=trainer.base_policy, chat_model=trainer.chat_policy,
        run_info=trainer.run_info(),
        shard=trainer.generation_shard() if collective else (1, 0),
    )
    design = engineer.design(ctx)
    if not distributed.is_main():
        return proposal
    next_proposal, changes = testbed.project(design.raw, proposal)
    report.design = DesignRecord(
        engineer=engineer.name, design=design, projected=next_proposal.model_dump(mode="json"),
        changes=changes, diagnostics=design.diagnostics,
    )
    run_dir.log({"round": index, "event": "design", "changes": len(changes)})
    return next_proposal


def _initial_design(config: RunConfig, run_dir: RunDir, proposal: Any, testbed: Testbed, engineer: Engineer,
                    trainer: Trainer, reporter: QuietReporter) -> Any:
    """Fresh run, before round 0: the engineer's design of round 0's proposal
    (``Engineer.initial_design``), projected like any design; the testbed's initial proposal when
    it returns none. Asked on the main process, or on every rank for a ``collective_design``
    engineer; every rank returns the main process's proposal."""
    main, collective = distributed.is_main(), _collective(engineer)
    first = proposal
    if main or collective:
        reporter.stage("initial design", None)
        ctx = DesignContext(
            round=-1, total_rounds=config.rounds, history=[], proposal=proposal, testbed=testbed,
            rng=np.random.default_rng(derive_seed(config.seed, -1, "engineer")),
            policy=_with_progress(trainer.policy(), reporter), base_policy=trainer.base_policy,
            chat_model=trainer.chat_policy, run_info=trainer.run_info(),
            shard=trainer.generation_shard() if collective else (1, 0),
        )
        design = engineer.initial_design(ctx)
        reporter.stage_end()
        if main and design is not None:
            first, changes = testbed.project(design.raw, proposal)
            run_dir.log({"round": -1, "event": "initial_design", "changes": len(changes)})
    if distributed.world_size() > 1:
        first = testbed.proposal_model.model_validate(distributed.broadcast(first.model_dump(mode="json")))
    return first


def _extend(config: RunConfig, run_dir: RunDir, history: list[RoundReport], proposal: Any,
            testbed: Testbed, engineer: Engineer, trainer: Trainer, reporter: QuietReporter) -> Any:
    """A finished run's last round skipped its design (its proposal would never have been
    used); extending the run asks for it now and re-commits that round with it."""
    report = history[-1]
    next_proposal = proposal
    if distributed.is_main() or _collective(engineer):
        next_proposal = _design(config, report, proposal, history[:-1], run_dir, testbed, engineer,
                                trainer, _with_progress(trainer.policy(), reporter), reporter)
    if distributed.is_main():
        state = {"engineer": engineer.state_dict(), "testbed": testbed.state_dict(),
                 "rng": capture_rng(), "next_proposal": next_proposal.model_dump(mode="json")}
        run_dir.amend_round(report, state=state)
    next_json = distributed.broadcast(next_proposal.model_dump(mode="json"))
    return testbed.proposal_model.model_validate(next_json)


def _with_progress(policy: Any, reporter: QuietReporter) -> Any:
    """Hook the reporter's progress bar into policies that report finished completions."""
    if hasattr(policy, "progress"):
        policy.progress = reporter.advance
    return policy


def evaluate_run(run_dir: Path, *, round_index: int | None = None, start: bool = False,
                 overrides: Sequence[str] = (), reporter: QuietReporter | None = None,
                 suite: str = "validation") -> EvalReport:
    """``curriculum eval``: evaluate a committed round's checkpoint (default: the last one) or, with
    ``start``, the run's starting model (the base model, warm-started when the config has a warm
    start: loaded from the warm-start cache, computed if it is not there). ``overrides`` (``--set``)
    change the saved config for this eval only, e.g. a larger suite:
    ``testbed.eval_instances_per_size=12``. ``suite``: the held-out suite to score
    (``validation`` or ``test``, as the testbed's ``eval_suites``)."""
    run = RunDir.open(run_dir)
    config = run.saved_config()
    if overrides:
        config = validate_config(apply_overrides(config.model_dump(mode="json"), list(overrides)),
                                 source=f"{run.path / 'config.yaml'} with --set {' '.join(overrides)}")
    reporter = reporter or QuietReporter()
    testbed = build_testbed(config)
    testbed.check_suite(suite)
    engineer: Engineer | None = None
    if start:
        index = -1
        trainer = build_trainer(config, testbed)
        trainer.setup(None)
    else:
        index = _kept_round(run, config, round_index)
        testbed.load_state_dict(read_json(run.round_dir(index) / "state.json")["testbed"])
        trainer = build_trainer(config, testbed)
        trainer.setup(run.checkpoint(index))
    try:
        if start and trainer.prepare_steps():
            # The same warm-start examples as the run (the engineer may add its own), so the cache
            # key, and with it the weights, are the run's.
            engineer = build_engineer(config, None)
            _warm_start(trainer, engineer, reporter)
        reporter.stage("eval", None)
        report = testbed.evaluate(_with_progress(trainer.policy(), reporter), suite=suite,
                                  seed=derive_seed(config.seed, index, "eval" if suite == "validation" else "test"))
        reporter.stage_end()
    finally:
        if engineer is not None:
            engineer.close()
        trainer.close()
        testbed.close()
    return report


def _kept_round(run: RunDir, config: RunConfig, round_index: int | None) -> int:
    """The round ``curriculum eval`` evaluates: ``round_index`` or the last, with weights kept."""
    rounds = run.completed_rounds()
    if not rounds:
        raise FileNotFoundError(f"{run.path} has no completed round yet")
    index = rounds[-1] if round_index is None else round_index
    if index not in rounds:
        raise FileNotFoundError(f"round {index} is not completed in {run.path} (completed: {rounds})")
    if run.checkpoint(index) is None:
        kept = [i for i in rounds if run.checkpoint(i) is not None]
        raise FileNotFoundError(f"round {index}'s checkpoint was not kept (keep_checkpoints="
                                f"{config.keep_checkpoints}); rounds with weights: {kept}")
    return index
