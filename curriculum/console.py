"""Everything the user sees while a run goes: rich progress bars and per-round summary tables.

The loop talks to a ``Reporter``; ``QuietReporter`` is used by tests and by ``compare``'s
parallel workers. On a terminal each stage is a live rich bar; when output goes to a file or a
pipe (``make demo > log``, a batch job's log, CI) a live bar would print only when its stage ends,
so a 20-minute warm start would show nothing: there each stage prints plain progress lines instead.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from curriculum.core.commands import fail  # noqa: F401 - the controller's commands refuse the same way
from curriculum.core.metrics import MetricKey, parse_metrics
from curriculum.core.records import RoundReport, suite_label
from curriculum.core.reporting import ReportLayout
from curriculum.core.terminal import terminal_safe
from curriculum.core.types import EvalReport
from curriculum.enginelog import LOG_NAME


_SUMMARY_KEYS = ("train/mean_reward", "train/valid_rate", "train/steps", "train/seconds")
"""Training metrics every summary shows; those the run's trainer declares (``Trainer.summary_metrics``,
handed on by ``QuietReporter.plugin_declarations``: a metric's name, or a prefix ending in ``/``)
are added when present. The round's ``train_metrics.json`` and ``metrics.jsonl`` keep them all."""


def declared_metrics(metrics: dict[str, Any], declared: tuple[str, ...]) -> list[str]:
    """The keys of ``metrics`` a trainer's ``summary_metrics`` name, in the declared order: each
    entry is a metric's name, or a prefix ending in ``/`` (then every metric under it, sorted)."""
    keys: list[str] = []
    for entry in declared:
        found = sorted(k for k in metrics if k.startswith(entry)) if entry.endswith("/") else (
            [entry] if entry in metrics else [])
        keys += [k for k in found if k not in keys and k not in _SUMMARY_KEYS]
    return keys


def config_headline(text: str) -> list[str]:
    """The few lines a run prints about its resolved config (``text``, its YAML): the model, the
    engineer, testbed and trainer, the rounds and the seed."""
    import yaml

    data = yaml.safe_load(text) or {}

    def name(section: str) -> str:
        value = data.get(section)
        return str(value.get("name") if isinstance(value, dict) else value)

    model = data.get("model") or {}
    return [f"model: {model.get('name_or_path') if isinstance(model, dict) else model}",
            f"engineer: {name('engineer')}   testbed: {name('testbed')}   trainer: {name('trainer')}",
            f"rounds: {data.get('rounds')}   tasks per round: {data.get('tasks_per_round')}   seed: {data.get('seed')}"]


class QuietReporter:
    """Does nothing; the interface of every reporter."""

    def config(self, text: str, run_dir: str) -> None: ...
    def round_start(self, index: int, total: int, proposal: dict[str, Any]) -> None: ...
    def stage(self, name: str, total: int | None) -> None: ...
    def advance(self, amount: int = 1) -> None: ...
    def stage_end(self) -> None: ...
    def round_end(self, report: RoundReport) -> None: ...
    def message(self, text: str) -> None: ...
    def baseline(self, report: EvalReport) -> None: ...
    def plugin_declarations(self, summary_metrics: tuple[str, ...], layout: ReportLayout | None) -> None: ...


class _LineProgress:
    """A stage's progress as plain lines: its start, the first advance, then at most one line
    every ``interval`` seconds, the last step, and the stage's total time when it ends."""

    def __init__(self, console: Console, name: str, total: int | None, interval: float) -> None:
        self.console, self.name, self.total, self.interval = console, name, total, interval
        self.done = 0
        self.start = self.last = time.monotonic()
        self.printed = False
        # A stage may run minutes before its first advance (an eval decodes its batch at once).
        console.print(f"{name:<10} started", highlight=False, markup=False)

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.start
        self.console.print(f"{self.name:<10} {text}  {_clock(elapsed)}", highlight=False, markup=False)

    def advance(self, amount: int) -> None:
        self.done += amount
        now = time.monotonic()
        if not self.printed or now - self.last >= self.interval or self.done == self.total:
            self._line(f"{self.done}/{self.total if self.total is not None else '?'}")
            self.printed, self.last = True, now

    def stop(self) -> None:
        # Stages that took a moment and never advanced (sampling, committing) print no end line.
        if self.printed or time.monotonic() - self.start >= 1.0:
            self._line(f"done ({self.done})" if self.done else "done")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


class RichReporter(QuietReporter):
    """Progress bars for sampling, training, eval and design; a summary table per round.

    ``line_interval_s``: when the console is not a terminal, the least time between two
    progress lines of one stage. ``verbose``: print the whole resolved config at the start (by
    default a few lines name the model, plugins, rounds and run dir; the whole config is the run
    dir's ``config.yaml``), and let text the engines write to stderr while a bar is live show
    above it (the run shows the engines' logs on the terminal then, ``curriculum.enginelog``)."""

    def __init__(self, console: Console | None = None, *, line_interval_s: float = 15.0,
                 verbose: bool = False) -> None:
        self.console = console or Console()
        self.verbose = verbose
        self._progress: Progress | _LineProgress | None = None
        self._task: Any = None
        self._baseline: EvalReport | None = None
        self._line_interval = line_interval_s
        self._prefixes: tuple[str, ...] = ()
        self._layout: ReportLayout | None = None

    def plugin_declarations(self, summary_metrics: tuple[str, ...], layout: ReportLayout | None) -> None:
        """What the run's plugins declare for its summaries: the prefixes of the training metrics
        every round summary adds (``Trainer.summary_metrics``) and how the eval's rates read
        (``Testbed.report_layout``, for ``headline_table``)."""
        self._prefixes, self._layout = tuple(summary_metrics), layout

    def baseline(self, report: EvalReport) -> None:
        """Remember the starting model's eval: every round summary shows its delta to it."""
        self._baseline = report
        self.stage_end()
        self.console.print(f"baseline (starting model): eval score {report.score:.4f} "
                           f"({suite_label(report)} suite)")

    def config(self, text: str, run_dir: str) -> None:
        self.console.rule("[bold]curriculum run")
        if self.verbose:
            self.console.print(Syntax(text, "yaml", theme="ansi_dark", background_color="default"))
        else:
            for line in config_headline(text):
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        self.console.print(f"run dir: [bold]{escape(run_dir)}[/] (the whole config: config.yaml there; the "
                           f"engines' logs: {LOG_NAME})", highlight=False, soft_wrap=True)

    def round_start(self, index: int, total: int, proposal: dict[str, Any]) -> None:
        self.console.rule(f"round {index + 1}/{total}")

    def stage(self, name: str, total: int | None) -> None:
        self.stage_end()
        if not self.console.is_terminal:
            self._progress = _LineProgress(self.console, name, total, self._line_interval)
            return
        # A quiet run's stderr is the engine log (``curriculum.enginelog``): the bar leaves it there.
        self._progress = Progress(TextColumn(f"[bold]{name:<10}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=self.console, transient=False,
                                  redirect_stderr=self.verbose)
        self._progress.start()
        self._task = self._progress.add_task(name, total=total)

    def advance(self, amount: int = 1) -> None:
        if isinstance(self._progress, _LineProgress):
            self._progress.advance(amount)
        elif self._progress is not None:
            self._progress.advance(self._task, amount)

    def stage_end(self) -> None:
        if self._progress is not None:  # both kinds stop with the same call
            self._progress.stop()
            self._progress = None

    def message(self, text: str) -> None:
        self.stage_end()
        self.console.print(text)

    def round_end(self, report: RoundReport) -> None:
        self.stage_end()
        base = self._baseline
        table = Table(title=f"round {report.round} summary", show_header=True)
        table.add_column("metric")
        table.add_column("value", justify="right")
        if base is not None:
            table.add_column("vs baseline", justify="right")
        shown = [k for k in _SUMMARY_KEYS if k in report.train_metrics]
        shown += declared_metrics(report.train_metrics, self._prefixes)
        for key in shown:
            table.add_row(key, f"{report.train_metrics[key]:.4g}", *([""] if base is not None else []))
        if len(shown) < len(report.train_metrics):
            left = len(report.train_metrics) - len(shown)
            table.caption = f"{left} more training metrics in train_metrics.json"
            table.caption_justify = "left"
        scored = report.scored()  # the test suite's when the round has one
        same = base if base is not None and base.suite == scored.suite else None
        rows = [("score", scored.score, same.score if same is not None else None)]
        rows += [(key, value, same.metrics.get(key) if same is not None else None)
                 for key, value in scored.metrics.items()
                 if key.count("/") == 1]  # aggregate metrics only; per-size ones go in eval_table
        suite = "eval" if scored.suite is None else scored.suite
        if report.test is not None:  # what the engineer read, beside the score that counts
            table.add_row("validation/score", f"{report.eval.score:.4g}", *([""] if base is not None else []))
        for key, value, before in rows:
            delta = [_delta(key, value, before) if before is not None else ""] if base is not None else []
            table.add_row(f"{suite}/{key}", f"{value:.4g}", *delta)
        self.console.print(table)
        headline = headline_table(scored, self._layout)
        if headline is not None:
            self.console.print(headline)
        if report.design is not None:
            proposal = proposal_table(report.design.projected)
            if isinstance(proposal, str):  # a few readings (a pool's sizes): on the engineer's line
                proposal = ", ".join(line.strip() for line in proposal.splitlines())
                self.console.print(f"[bold]engineer[/] {report.design.engineer} → next proposal: "
                                   f"{proposal}")
            else:
                self.console.print(f"[bold]engineer[/] {report.design.engineer} → next proposal:")
                self.console.print(proposal)
            if report.design.changes:
                self.console.print(f"project made {len(report.design.changes)} change(s):")
                for change in report.design.changes[:12]:
                    self.console.print(escape(f"  {change.path}: {_short(change.proposed)} → "
                                              f"{_short(change.applied)} ({change.reason})"))
                if len(report.design.changes) > 12:
                    self.console.print(f"  … {len(report.design.changes) - 12} more in design.json")
            if report.design.diagnostics:
                self.console.print(diagnostics_table(report.design.diagnostics))


DIAGNOSTIC_ROWS = 10
"""At most this many lines of an engineer's diagnostics in a round summary; all are in ``design.json``."""
_KEY_CHARS, _VALUE_CHARS, _NUMBER_CHARS, _LINE_CHARS = 28, 74, 24, 78


def diagnostics_table(diagnostics: dict[str, Any], rows: int = DIAGNOSTIC_ROWS) -> Text:
    """An engineer's per-round diagnostics under a title in at most ``rows`` lines of at most 78
    characters: single readings first, in the engineer's order, short ones (a count, a rate, a
    word) several to a line and long texts one to a line, then lists and mappings one to a line
    as compact JSON, each key and value cut short; a last line counts the ones left out (the
    round's ``design.json`` keeps every one in full). Model text is shown, never read as markup."""
    items = sorted(diagnostics.items(), key=lambda item: isinstance(item[1], (dict, list)))
    lines: list[str] = []
    pack: int | None = None  # the line that takes more short readings
    shown = 0
    for key, value in items:
        entry = f"{_clip(key, _KEY_CHARS)} {_clip(_reading(value), _VALUE_CHARS)}"
        short = not isinstance(value, (dict, list)) and len(_reading(value)) <= _NUMBER_CHARS
        if short and pack is not None and len(lines[pack]) + 3 + len(entry) <= _LINE_CHARS:
            lines[pack] += "   " + entry
        elif len(lines) < rows - (shown + 1 < len(items)):  # room for the count of those left out
            lines.append("  " + _clip(entry, _LINE_CHARS - 2))
            pack = len(lines) - 1 if short else pack
        else:
            break
        shown += 1
    if shown < len(items):
        lines.append(f"  … {len(items) - shown} more in the round's design.json")
    return Text("\n".join(["engineer diagnostics", *lines]), no_wrap=True, overflow="ellipsis")


def _reading(value: Any) -> str:
    """One diagnostic as one line: a text as it is, a number to four digits, anything else as
    compact JSON."""
    import json

    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value, separators=(", ", ": "), default=str)


def _clip(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs as one space, terminal controls shown), at most
    ``limit`` characters."""
    line = terminal_safe(" ".join(text.split()))
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _is_rate(key: str) -> bool:
    """Metrics in [0, 1] whose difference reads as percentage points (the score, ``*_rate``)."""
    name = key.split("/")[0]
    return name == "score" or name.endswith("_rate")


def _delta(key: str, value: float, baseline: float) -> str:
    """Difference to the baseline: in points for rates, plain otherwise (tokens, cost ratios)."""
    diff = value - baseline
    text = f"{100 * diff:+.1f} pts" if _is_rate(key) else f"{diff:+.4g}"
    colour = "white" if diff == 0 else "green" if diff > 0 else "red"
    return f"[{colour}]{text}[/]"


def _short(value: Any, limit: int = 600) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def proposal_table(proposal: dict[str, Any]) -> Table | str:
    """A per-size table for proposals shaped ``{"sizes": {size: {field: value}}}``; other
    proposals (e.g. an environment pool) as one line per key, lists by their length."""
    sizes = proposal.get("sizes") if isinstance(proposal, dict) else None
    if not isinstance(sizes, dict) or not sizes:
        if not isinstance(proposal, dict):
            return escape(terminal_safe(_short(proposal)))
        return escape(terminal_safe("\n".join(f"  {key}: {len(value)} item(s)" if isinstance(value, list)
                                               else f"  {key}: {_short(value)}" for key, value in proposal.items())))
    fields = list(next(iter(sizes.values())).keys())
    table = Table(show_header=True)
    table.add_column("size")
    for field in fields:
        table.add_column(field, justify="right")
    for size, values in sizes.items():
        table.add_row(Text(terminal_safe(str(size))), *(f"{values.get(f, float('nan')):.3f}" for f in fields))
    return table


def headline_table(report: EvalReport, layout: ReportLayout | None = None) -> Table | None:
    """The papers' headline numbers: each rate the testbed's layout declares, per group it names
    (``ReportLayout.group_label``; e.g. per agent count), in percent as papers' tables print them,
    next to the pooled score. ``None`` without a layout, or when the report has no such group."""
    rates = layout.rates if layout is not None else ()
    groups = [key.group for key in parse_metrics(report.metrics)
              if rates and key.metric == rates[0].metric and key.group is not None and key.cell is None
              and layout.group_label(key.group) is not None]
    if not groups:
        return None
    table = Table(title=f"paper-comparable (percent, {suite_label(report)} suite); pooled score {report.score:.4f}")
    table.add_column("suite")
    for rate in rates:
        table.add_column(f"{rate.name} %", justify="right")
    for group in groups:
        values = [report.metrics.get(MetricKey(rate.metric, group).to_str()) for rate in rates]
        table.add_row(group, *("-" if v is None else f"{100 * v:.2f}" for v in values))
    return table


def eval_table(report: EvalReport, title: str = "eval", layout: ReportLayout | None = None) -> Group:
    """Tables from metrics keyed ``metric/suite/part``: metrics that share the same parts (e.g.
    valid and optimal rate per map size; failure rate per check) go in one table, one row per
    (suite, part), plus an ``all`` row per suite from the ``metric/suite`` aggregates; first, with
    the testbed's ``layout``, its ``headline_table``."""
    per_metric: dict[str, dict[tuple[str, str], float]] = {}
    for key, value in parse_metrics(report.metrics).items():
        if key.group is not None and key.cell is not None and "/" not in key.cell:
            per_metric.setdefault(key.metric, {})[(key.group, key.cell)] = value
    groups: dict[tuple, list[str]] = {}
    for name, cells in per_metric.items():
        groups.setdefault(tuple(cells), []).append(name)
    tables: list[Table] = []
    # Tables whose metrics have suite aggregates (the headline rates) come first.
    ordered = sorted(groups.items(), key=lambda item: not any(
        MetricKey(n, suite).to_str() in report.metrics for n in item[1] for suite, _ in item[0]))
    for rows, names in ordered:
        table = Table(title=f"{title} (score {report.score:.4f})" if not tables else None)
        table.add_column("suite")
        table.add_column("")
        for name in names:
            table.add_column(name, justify="right")
        for suite, part in rows:
            table.add_row(suite, part, *(f"{per_metric[n][(suite, part)]:.3f}" for n in names))
        for suite in dict.fromkeys(s for s, _ in rows):
            if any(MetricKey(n, suite).to_str() in report.metrics for n in names):
                table.add_row(suite, "[bold]all",
                              *(f"{report.metrics.get(MetricKey(n, suite).to_str(), float('nan')):.3f}" for n in names))
        tables.append(table)
    headline = headline_table(report, layout)
    return Group(*([headline] if headline is not None else []), *tables)
