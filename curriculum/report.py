"""Plots of runs and engineer comparisons (matplotlib, Agg backend, PNG).

Data extraction is pure (``RunSummary.load`` reads a run dir; ``rates_by_bucket`` and
``group_rates`` read flat eval metrics); the ``plot_*`` functions take plain arrays and write one
PNG each, always at ``FIGSIZE`` inches × ``DPI`` (so a figure's pixel size is known in advance).
Which metrics are rates, how groups are named, what a bucket is and in which order buckets are
drawn is the run's testbed's ``ReportLayout`` (``Testbed.report_layout``, ``layout_of``).

* ``plot_score_curves`` — eval score per round per engineer: the mean over seeds and its 95%
  percentile-bootstrap interval (``curriculum.stats``) as a band.
* ``plot_final_by_size`` — each declared rate's final value per bucket (mean over the eval's
  groups, then over seeds, with 95% bootstrap error bars), one bar group per bucket.
* ``plot_distribution`` — the training distribution chosen per round: the share of every
  bucket in every round (mean over seeds), one heat map per engineer.
* ``report_run`` — the single-run versions (``curriculum report RUN_DIR``): eval metrics per
  round, the first declared rate per bucket per round, and the training distribution per round.

Every score is on the run's **test** suite (``RunSummary.suite``) when it has one; run dirs
written before runs had two suites load with their one eval suite, labelled
``curriculum.core.records.LEGACY_SUITE`` ("validation = test") wherever a suite is named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from curriculum.core.metrics import parse_metrics
from curriculum.core.reporting import ReportLayout, ReportRate, natural_key
from curriculum.stats import bootstrap_mean_ci_columns

FIGSIZE: tuple[float, float] = (10.0, 6.0)
"""Figure size in inches of every plot."""
DPI = 100
"""Dots per inch: every PNG is FIGSIZE × DPI = 1000 × 600 pixels."""
LINE_STYLES = ("-", "--", ":", "-.")
"""Line style of each declared rate's per-group lines, in the layout's order."""


def curve_metrics_of(trainer: str) -> tuple[str, ...]:
    """The training metrics the trainer named ``trainer`` draws per round (``Trainer.curve_metrics``);
    none for a name the registry does not know."""
    from curriculum.registry import TRAINERS

    if trainer not in TRAINERS.names():
        return ()
    return tuple(getattr(TRAINERS.get(trainer).load(), "curve_metrics", ()))


def layout_of(testbed: str | None) -> ReportLayout:
    """The ``ReportLayout`` the testbed named ``testbed`` declares, its ``bucket_label`` filled
    in (from its ``BucketSpace``'s unit, else ``bucket``); the default layout for a name the
    registry does not know (a plugin not installed here)."""
    from curriculum.core.spaces import BucketSpace
    from curriculum.registry import TESTBEDS

    if testbed is None or testbed not in TESTBEDS.names():
        return replace(ReportLayout(), bucket_label="bucket")
    cls = TESTBEDS.get(testbed).load()
    layout = getattr(cls, "report_layout", None) or ReportLayout()
    if layout.bucket_label is None:
        space = getattr(cls, "proposal_space", None)
        layout = replace(layout, bucket_label=space.unit if isinstance(space, BucketSpace) else "bucket")
    return layout


def run_layout(run_dir: str | Path) -> ReportLayout:
    """``layout_of`` the testbed a run directory's config names (the default layout when its
    config cannot be read: the reports then show no rates)."""
    from curriculum.config import ConfigError
    from curriculum.rundir import RunDir

    try:
        return layout_of(RunDir.open(run_dir).saved_config().testbed.name)
    except (ConfigError, OSError, ValueError):
        return layout_of(None)


def rates_by_bucket(metrics: dict[str, float], rate: ReportRate | str,
                    layout: ReportLayout | None = None) -> dict[str, float]:
    """Per bucket, the mean of ``<metric>/<group>/<bucket>`` over the groups present (a levelled
    cell ``L<n>`` is its bucket ``<group>:<n>``), in the layout's bucket order. Keys are read as
    ``MetricKey``s."""
    metric = rate.metric if isinstance(rate, ReportRate) else rate
    acc: dict[str, list[float]] = {}
    for key, value in parse_metrics(metrics).items():
        if key.metric == metric and key.cell is not None:
            acc.setdefault(key.bucket, []).append(float(value))
    order = (layout or ReportLayout()).bucket_order
    return {b: float(np.mean(acc[b])) for b in sorted(acc, key=order)}


def group_rates(metrics: dict[str, float], rate: ReportRate | str) -> dict[str, float]:
    """Group → ``<metric>/<group>``, groups in natural order (``natural_key``)."""
    metric = rate.metric if isinstance(rate, ReportRate) else rate
    out = {key.group: float(value) for key, value in parse_metrics(metrics).items()
           if key.metric == metric and key.group is not None and key.cell is None}
    return {g: out[g] for g in sorted(out, key=natural_key)}


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
    layout: ReportLayout = field(default_factory=lambda: layout_of(None))
    """How its testbed's eval metrics read (``layout_of``)."""
    train_curves: dict[str, list[float]] = field(default_factory=dict)
    """The trainer's ``curve_metrics`` per completed round (NaN where a round lacks one)."""

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
                   answers=[round_answers(r.design.diagnostics if r.design else {}) for r in history],
                   layout=layout_of(config.testbed.name),
                   train_curves={name: [float(r.train_metrics.get(name, float("nan"))) for r in history]
                                 for name in curve_metrics_of(config.trainer.name)})


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
                       layout: ReportLayout, title: str | None = None) -> Path:
    """``final``: engineer → {rate name: (seeds × buckets)}, one panel per rate of ``layout``
    (a layout without rates: one panel saying so)."""
    plt = _pyplot()
    rates = layout.rates
    fig, axes = plt.subplots(1, max(1, len(rates)), figsize=FIGSIZE, layout="constrained", sharey=True,
                             squeeze=False)
    axes = axes[0]
    unit = layout.bucket_label or "bucket"
    fig.suptitle(title or f"Final {layout.rates_title} per {unit}")
    if not rates:
        axes[0].axis("off")
        axes[0].text(0.5, 0.5, "the testbed declares no rates per bucket", ha="center", va="center")
        return _save(fig, path)
    names = list(final)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(sizes))
    for ax, rate in zip(axes, rates):
        for i, name in enumerate(names):
            m = np.atleast_2d(np.asarray(final[name][rate.name], dtype=float))
            intervals = bootstrap_mean_ci_columns(m)
            mean = np.array([iv.mean for iv in intervals])
            err = np.array([[iv.mean - iv.low for iv in intervals], [iv.high - iv.mean for iv in intervals]])
            ax.bar(x + (i - (len(names) - 1) / 2) * width, mean, width, yerr=err, capsize=2, label=name)
        ax.set_xticks(x, list(sizes), rotation=45)
        ax.set_title(rate.title)
        ax.set_xlabel(unit)
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("rate (mean over seeds, 95% CI)")
    axes[0].legend()
    return _save(fig, path)


def plot_distribution(dist: dict[str, np.ndarray], sizes: Sequence[str], path: Path, *,
                      title: str | None = None, bucket_label: str = "bucket") -> Path:
    """``dist``: engineer → (rounds × buckets) shares (mean over seeds); one heat map each."""
    plt = _pyplot()
    names = list(dist)
    fig, axes = plt.subplots(1, len(names), figsize=FIGSIZE, layout="constrained", squeeze=False)
    image = None
    for ax, name in zip(axes[0], names):
        m = np.atleast_2d(np.asarray(dist[name], dtype=float))
        if m.size == 0:  # a proposal without buckets (an environment pool)
            ax.axis("off")
            ax.text(0.5, 0.5, f"{name}: the proposal has no buckets", ha="center", va="center")
            continue
        image = ax.imshow(m, aspect="auto", cmap="viridis", vmin=0.0, vmax=max(0.5, float(np.nanmax(m))))
        ax.set_title(name)
        ax.set_xticks(np.arange(len(sizes)), list(sizes), rotation=90)
        ax.set_yticks(np.arange(m.shape[0]))
        ax.set_xlabel(bucket_label)
    axes[0][0].set_ylabel("round")
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label="data ratio")
    fig.suptitle(title or f"Training distribution per round (data ratio by {bucket_label})")
    return _save(fig, path)


def plot_run_metrics(summary: RunSummary, path: Path) -> Path:
    """One run: score and each declared rate per group per round (left); the first declared rate
    per bucket per round as a heat map (right)."""
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
    _group_lines(left, x, metrics, summary.layout)
    for name, values in summary.train_curves.items():  # the trainer's own per-round rates
        left.plot(x[len(pre):], values, marker="s", linestyle="--", linewidth=1.5, label=name)
    if summary.baseline_score is not None:
        left.axhline(summary.baseline_score, color="grey", linestyle=":", label="untrained")
    left.set_xticks(x, labels)
    left.set_xlabel("eval before round 0, then after each round")
    left.set_ylabel("rate")
    left.set_ylim(0, 1.05)
    left.grid(alpha=0.3)
    left.legend(fontsize="small")
    left.set_title(f"eval metrics per round, {summary.suite} suite")
    _bucket_heatmap(fig, right, x, labels, metrics, summary)
    note = " — SIMULATED learner" if summary.simulated else ""
    fig.suptitle(f"{summary.path.name}: {summary.engineer}, seed {summary.seed}{note}")
    return _save(fig, path)


def _group_lines(ax: Any, x: np.ndarray, metrics: list[dict[str, float]], layout: ReportLayout) -> None:
    """Each declared rate's per-group values per eval, one line per group the layout names."""
    if not layout.rates:
        return
    first = layout.rates[0]
    groups = sorted({g for m in metrics for g in group_rates(m, first) if layout.group_label(g) is not None},
                    key=natural_key)
    for rate, style in zip(layout.rates, LINE_STYLES):
        for group in groups:
            ax.plot(x, [group_rates(m, rate).get(group, np.nan) for m in metrics], style,
                    marker=".", label=f"{rate.name} {layout.group_label(group)}")


def _bucket_heatmap(fig: Any, ax: Any, x: np.ndarray, labels: list[str], metrics: list[dict[str, float]],
                    summary: RunSummary) -> None:
    """The first declared rate per bucket (columns) per eval (rows), or a note when there is none."""
    layout = summary.layout
    unit = layout.bucket_label or "bucket"
    rate = layout.rates[0] if layout.rates else None
    by_bucket = [rates_by_bucket(m, rate, layout) for m in metrics] if rate is not None else []
    sizes = sorted({s for r in by_bucket for s in r}, key=layout.bucket_order)
    if not sizes:  # a testbed without per-bucket rates (an environment pool): nothing to draw
        ax.axis("off")
        ax.text(0.5, 0.5, f"no per-{unit} eval metrics in this run", ha="center", va="center")
        return
    grid = np.array([[r.get(s, np.nan) for s in sizes] for r in by_bucket])
    image = ax.imshow(np.atleast_2d(grid), aspect="auto", cmap="magma", vmin=0, vmax=1)
    ax.set_xticks(np.arange(len(sizes)), sizes, rotation=90)
    ax.set_yticks(x, labels)
    ax.set_xlabel(unit)
    ax.set_ylabel("eval (before round 0, then round)")
    ax.set_title(f"{rate.title} per {unit} ({summary.suite} suite)")
    fig.colorbar(image, ax=ax)


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
                          title=f"Training distribution per round{note}",
                          bucket_label=summary.layout.bucket_label or "bucket"),
    ]
