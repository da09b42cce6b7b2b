"""Plots of runs and engineer comparisons (matplotlib, Agg backend, PNG).

Data extraction is pure (``RunSummary.load`` reads a run dir; ``rates_by_size`` reads flat eval
metrics); the ``plot_*`` functions take plain arrays and write one PNG each, always at
``FIGSIZE`` inches × ``DPI`` (so a figure's pixel size is known in advance).

* ``plot_score_curves`` — eval score per round per engineer: the mean over seeds and its 95%
  percentile-bootstrap interval (``curriculum.stats``) as a band.
* ``plot_final_by_size`` — final valid and optimal rate per map size (mean over the eval suites'
  agent counts, then over seeds, with 95% bootstrap error bars), one bar group per size.
* ``plot_distribution`` — the training distribution chosen per round: the data ratio of every
  size in every round (mean over seeds), one heat map per engineer.
* ``report_run`` — the single-run versions (``curriculum report RUN_DIR``): eval metrics per
  round, valid rate per map size per round, and the training distribution per round.

Every score is on the run's **test** suite (``RunSummary.suite``) when it has one; run dirs
written before runs had two suites load with their one eval suite, labelled
``curriculum.core.records.LEGACY_SUITE`` ("validation = test") wherever a suite is named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curriculum.core.metrics import parse_metrics
from curriculum.stats import bootstrap_mean_ci_columns

FIGSIZE: tuple[float, float] = (10.0, 6.0)
"""Figure size in inches of every plot."""
DPI = 100
"""Dots per inch: every PNG is FIGSIZE × DPI = 1000 × 600 pixels."""

RATE_METRICS = ("valid_rate", "optimal_rate")
"""Per-bucket rate metrics of check-based testbeds (MAPF), keyed ``<kind>_rate/<suite>/<size>``."""
LEVEL_METRIC = "accuracy"
"""The per-bucket metric of levelled bucket spaces (reasoning-gym), keyed ``accuracy/<task>/L<level>``."""


def bucket_order(size: str) -> tuple[int, str, int]:
    """Plot order of buckets: MAPF sizes by side; ``<task>:<level>`` buckets by task, then level."""
    side, x, other = size.partition("x")
    if x and side.isdigit() and other.isdigit():
        return (int(side), "", 0)
    task, _, level = size.rpartition(":")
    return (0, task, int(level)) if level.isdigit() else (0, size, 0)


def _is_size(cell: str | None) -> bool:
    side, x, other = (cell or "").partition("x")
    return bool(x) and side.isdigit() and other.isdigit()


def rates_by_size(metrics: dict[str, float], kind: str = "valid") -> dict[str, float]:
    """Per map size, the mean of ``<kind>_rate/<k>agents/<size>`` over the agent counts present;
    per ``<task>:<level>`` bucket its ``accuracy/<task>/L<level>`` (both kinds: a reasoning-gym
    answer is right or wrong). Keys are read as ``MetricKey``s."""
    acc: dict[str, list[float]] = {}
    for key, value in parse_metrics(metrics).items():
        if key.metric == f"{kind}_rate" and key.metric in RATE_METRICS and _suite_agents(key.group) is not None \
                and _is_size(key.cell):
            acc.setdefault(key.cell, []).append(float(value))
        elif key.metric == LEVEL_METRIC and key.level is not None:
            acc.setdefault(key.bucket, []).append(float(value))
    return {s: float(np.mean(acc[s])) for s in sorted(acc, key=bucket_order)}


def _suite_agents(group: str | None) -> int | None:
    """The agent count of a MAPF suite name ``<k>agents``, else ``None``."""
    count = (group or "").removesuffix("agents")
    return int(count) if group and group.endswith("agents") and count.isdigit() else None


def suite_rates(metrics: dict[str, float], kind: str = "valid") -> dict[int, float]:
    """Agent count → ``<kind>_rate/<k>agents``."""
    out = {}
    for key, value in parse_metrics(metrics).items():
        agents = _suite_agents(key.group)
        if key.metric == f"{kind}_rate" and key.cell is None and agents is not None:
            out[agents] = float(value)
    return dict(sorted(out.items()))


def training_shares(testbed: str, proposal: dict[str, Any]) -> dict[str, float]:
    """Bucket → share of a proposal, in the layout of the testbed's declared bucket space
    (container and share key), in the proposal's bucket order; empty for other spaces (an
    environment pool). The buckets come from the proposal itself: a testbed whose buckets depend
    on its config (reasoning_gym) declares only their kind on the class."""
    from curriculum.core.spaces import BucketSpace
    from curriculum.registry import TESTBEDS

    space = TESTBEDS.get(testbed).load().proposal_space
    buckets = proposal.get(space.container) if isinstance(space, BucketSpace) else None
    if not isinstance(buckets, dict):
        return {}
    try:
        return {str(b): float(v[space.share_key]) for b, v in buckets.items()}
    except (KeyError, TypeError, ValueError):
        return {}


@dataclass
class RunSummary:
    """What the plots and ``compare`` need from one run directory."""

    path: Path
    engineer: str
    seed: int
    rounds_planned: int
    scores: list[float]
    """Score after each completed round on ``suite`` (NaN for a round that did not run it)."""
    metrics: list[dict[str, float]]
    """Flat eval metrics on ``suite`` after each completed round (empty where not run)."""
    data_ratio: list[dict[str, float]]
    """Per completed round: bucket → share of the proposal it trained on (``training_shares``)."""
    baseline_score: float | None = None
    """Eval score of the untrained policy, when the run evaluated it."""
    pre_evals: dict[str, dict[str, float]] = field(default_factory=dict)
    """Evals before round 0 (``baseline``, ``warmstart``): name → score and flat metrics."""
    pre_task_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    """The same evals' per-task outcomes by task id (name → ``EvalReport.task_scores``; absent for
    files that predate per-task results)."""
    simulated: bool = False
    """Whether the learner was the simulated one."""
    config: dict[str, Any] = field(default_factory=dict)
    suite: str = "test"
    """The held-out suite ``scores``, ``metrics`` and the pre-evals are on: ``test`` when the run
    evaluated one (``RoundReport.test``), else the validation eval's label
    (``curriculum.core.records.suite_label``: ``validation``, or the one suite of run dirs
    written before suites were split)."""
    validation_scores: list[float] = field(default_factory=list)
    """Validation-suite score after each completed round (what the engineer read)."""
    zero_spread_share: list[float] = field(default_factory=list)
    """Per completed round: the share of its GRPO groups without reward spread (train metric
    ``zero_spread_share``; NaN where the trainer did not report it)."""
    answers: list[tuple[int, int]] = field(default_factory=list)
    """Per completed round: the engineer model's answers and how many of them were the prompt's
    example (``curriculum.answers.round_answers``; (0, 0) for an engineer that asks no model)."""

    @property
    def complete(self) -> bool:
        return len(self.scores) >= self.rounds_planned

    @classmethod
    def load(cls, path: str | Path) -> RunSummary:
        from curriculum.answers import round_answers
        from curriculum.rundir import RunDir, read_json

        run = RunDir.open(path)
        config = run.saved_config()
        from curriculum.core.records import suite_label

        history = run.history()
        tested = any(r.test is not None for r in history) or (run.path / "baseline_test_eval.json").is_file()
        if tested:
            suite = "test"
            evals = [r.test for r in history]
        else:
            suite = suite_label(history[0].eval) if history else "validation"
            evals = [r.eval for r in history]
        pre, pre_tasks = {}, {}
        for name in ("baseline", "warmstart"):
            path = run.path / (f"{name}_test_eval.json" if tested else f"{name}_eval.json")
            if path.is_file():
                saved = read_json(path)
                pre[name] = {"score": float(saved["score"]), **saved["metrics"]}
                if saved.get("task_scores"):
                    pre_tasks[name] = {str(t): float(v) for t, v in saved["task_scores"].items()}
        baseline = pre["baseline"]["score"] if "baseline" in pre else None
        ratios = [training_shares(config.testbed.name, report.proposal) for report in history]
        return cls(path=run.path, engineer=config.engineer.name, seed=config.seed,
                   rounds_planned=config.rounds,
                   scores=[e.score if e is not None else float("nan") for e in evals],
                   metrics=[dict(e.metrics) if e is not None else {} for e in evals], data_ratio=ratios,
                   baseline_score=baseline, pre_evals=pre, pre_task_scores=pre_tasks, simulated=config.trainer.name == "simulated",
                   config=config.model_dump(mode="json"), suite=suite,
                   validation_scores=[r.eval.score for r in history],
                   zero_spread_share=[float(r.train_metrics.get("zero_spread_share", float("nan"))) for r in history],
                   answers=[round_answers(r.design.diagnostics if r.design else {}) for r in history])


# --------------------------------------------------------------------------------------------
# plotting
# --------------------------------------------------------------------------------------------

def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    _pyplot().close(fig)
    return path


def plot_score_curves(curves: dict[str, np.ndarray], path: Path, *, title: str = "Eval score per round",
                      ylabel: str = "eval score") -> Path:
    """``curves``: engineer → (seeds × rounds) scores (NaN for missing); mean and 95% band."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    for name, matrix in curves.items():
        m = np.atleast_2d(np.asarray(matrix, dtype=float))
        intervals = bootstrap_mean_ci_columns(m)
        x = np.arange(m.shape[1])
        mean = np.array([i.mean for i in intervals])
        line, = ax.plot(x, mean, marker="o", label=f"{name} (n={m.shape[0]})")
        ax.fill_between(x, [i.low for i in intervals], [i.high for i in intervals],
                        color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_final_by_size(final: dict[str, dict[str, np.ndarray]], sizes: Sequence[str], path: Path, *,
                       title: str = "Final valid and optimal rate per map size") -> Path:
    """``final``: engineer → {"valid": (seeds × sizes), "optimal": (seeds × sizes)}."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=FIGSIZE, layout="constrained", sharey=True)
    names = list(final)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(sizes))
    for ax, kind in zip(axes, ("valid", "optimal")):
        for i, name in enumerate(names):
            m = np.atleast_2d(np.asarray(final[name][kind], dtype=float))
            intervals = bootstrap_mean_ci_columns(m)
            mean = np.array([iv.mean for iv in intervals])
            err = np.array([[iv.mean - iv.low for iv in intervals], [iv.high - iv.mean for iv in intervals]])
            ax.bar(x + (i - (len(names) - 1) / 2) * width, mean, width, yerr=err, capsize=2, label=name)
        ax.set_xticks(x, list(sizes), rotation=45)
        ax.set_title(f"{kind} rate")
        ax.set_xlabel("map size")
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("rate (mean over seeds, 95% CI)")
    axes[0].legend()
    fig.suptitle(title)
    return _save(fig, path)


def plot_distribution(dist: dict[str, np.ndarray], sizes: Sequence[str], path: Path, *,
                      title: str = "Training distribution per round (data ratio by map size)") -> Path:
    """``dist``: engineer → (rounds × sizes) data ratios (mean over seeds); one heat map each."""
    plt = _pyplot()
    names = list(dist)
    fig, axes = plt.subplots(1, len(names), figsize=FIGSIZE, layout="constrained", squeeze=False)
    image = None
    for ax, name in zip(axes[0], names):
        m = np.atleast_2d(np.asarray(dist[name], dtype=float))
        if m.size == 0:  # a proposal without buckets (SPADE's environment pool)
            ax.axis("off")
            ax.text(0.5, 0.5, f"{name}: the proposal has no buckets", ha="center", va="center")
            continue
        image = ax.imshow(m, aspect="auto", cmap="viridis", vmin=0.0, vmax=max(0.5, float(np.nanmax(m))))
        ax.set_title(name)
        ax.set_xticks(np.arange(len(sizes)), list(sizes), rotation=90)
        ax.set_yticks(np.arange(m.shape[0]))
        ax.set_xlabel("map size")
    axes[0][0].set_ylabel("round")
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label="data ratio")
    fig.suptitle(title)
    return _save(fig, path)


def plot_run_metrics(summary: RunSummary, path: Path) -> Path:
    """One run: score and per-suite valid/optimal rates per round (left); valid rate per size
    per round as a heat map (right)."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=FIGSIZE, layout="constrained")
    # The evals before round 0 (baseline, warm start) come first on the x axis.
    pre = [summary.pre_evals[n] for n in ("baseline", "warmstart") if n in summary.pre_evals]
    labels = [n for n in ("baseline", "warmstart") if n in summary.pre_evals]
    labels += [str(i) for i in range(len(summary.scores))]
    metrics = [*pre, *summary.metrics]
    x = np.arange(len(metrics))
    left.plot(x, [p["score"] for p in pre] + list(summary.scores), marker="o", linewidth=2.5,
              color="black", label=f"score ({summary.suite})")
    if summary.suite == "test" and summary.validation_scores:  # what the engineer read
        left.plot(x[len(pre):], summary.validation_scores, marker="o", linewidth=1.5, color="grey",
                  label="score (validation)")
    suites = sorted({k for m in metrics for k in suite_rates(m)})
    for kind, style in (("valid", "-"), ("optimal", "--")):
        for k in suites:
            left.plot(x, [suite_rates(m, kind).get(k, np.nan) for m in metrics], style,
                      marker=".", label=f"{kind} {k} agents")
    if summary.baseline_score is not None:
        left.axhline(summary.baseline_score, color="grey", linestyle=":", label="untrained")
    left.set_xticks(x, labels)
    left.set_xlabel("eval before round 0, then after each round")
    left.set_ylabel("rate")
    left.set_ylim(0, 1.05)
    left.grid(alpha=0.3)
    left.legend(fontsize="small")
    left.set_title(f"eval metrics per round, {summary.suite} suite")
    sizes = sorted({s for m in metrics for s in rates_by_size(m)}, key=bucket_order)
    if sizes:
        grid = np.array([[rates_by_size(m).get(s, np.nan) for s in sizes] for m in metrics])
        image = right.imshow(np.atleast_2d(grid), aspect="auto", cmap="magma", vmin=0, vmax=1)
        right.set_xticks(np.arange(len(sizes)), sizes, rotation=90)
        right.set_yticks(x, labels)
        right.set_xlabel("map size")
        right.set_ylabel("eval (before round 0, then round)")
        right.set_title(f"valid rate per map size ({summary.suite} suite)")
        fig.colorbar(image, ax=right)
    else:  # a testbed without map sizes (spade_pool, reasoning_gym): nothing to draw per size
        right.axis("off")
        right.text(0.5, 0.5, "no per-size eval metrics in this run", ha="center", va="center")
    note = " — SIMULATED learner" if summary.simulated else ""
    fig.suptitle(f"{summary.path.name}: {summary.engineer}, seed {summary.seed}{note}")
    return _save(fig, path)


def report_run(run_dir: str | Path) -> list[Path]:
    """``curriculum report``: write the single-run plots into ``RUN_DIR/plots``; return their paths."""
    summary = RunSummary.load(run_dir)
    if not summary.scores:
        raise FileNotFoundError(f"{run_dir} has no completed round yet")
    out = summary.path / "plots"
    sizes = list(dict.fromkeys(b for r in summary.data_ratio for b in r))  # the space's bucket order
    dist = np.array([[r.get(s, 0.0) for s in sizes] for r in summary.data_ratio])
    note = " — SIMULATED learner" if summary.simulated else ""
    return [
        plot_run_metrics(summary, out / "eval_metrics.png"),
        plot_distribution({summary.engineer: dist}, sizes, out / "training_distribution.png",
                          title=f"Training distribution per round{note}"),
    ]
