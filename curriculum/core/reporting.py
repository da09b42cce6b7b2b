"""What a testbed's eval metrics mean to the reports: ``ReportLayout``, declared on the testbed.

``curriculum report``, ``compare`` and ``show`` read a run's flat eval metrics
(``curriculum.core.metrics``) through the layout its testbed declares (``Testbed.report_layout``),
so they never name a testbed's metrics or buckets:

* ``rates`` — the rates the reports summarise, each a ``ReportRate`` (a short name and the flat
  metric it reads): over the whole eval (``<metric>``, a column of ``compare``'s table), per group
  (``<metric>/<group>``, a line per round in a run's plot) and per bucket
  (``<metric>/<group>/<bucket>``, the mean over the groups that cover the bucket: a bar per bucket
  in ``compare``'s plot; the first rate is also drawn per bucket and round in a run's plot);
* ``score`` — what ``EvalReport.score`` is, in words (``compare.json``'s ``score``);
* ``bucket_label`` — what one bucket is, in axis labels (``None``: the unit of the testbed's
  ``BucketSpace``, else ``bucket``);
* ``group_label(group)`` — a group's name in a legend; ``None`` (the default) draws no per-group
  line;
* ``bucket_order(bucket)`` — the order buckets are drawn in (default ``natural_key``: numbers in
  a name compare by value, so a grid size ``3x3`` comes before ``10x10`` and level ``task:2``
  before ``task:10``).

The default layout declares no rates: reports then show the score and the training
distribution only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RUNS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key of ``name`` with its runs of digits compared as numbers (``3x3`` < ``10x10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _RUNS.split(name) if part)


@dataclass(frozen=True)
class ReportRate:
    """One rate the reports summarise (a value in [0, 1])."""

    name: str
    """Short name in columns, legends and ``compare.json`` keys (``final_<name>_rate``,
    ``final_<name>_by_size``)."""
    metric: str
    """The flat metric it reads (``MetricKey.metric``)."""
    label: str = ""
    """Its title in plots (empty: ``<name> rate``)."""
    column: bool = True
    """Whether ``compare``'s table has a ``final <name>`` column for it (``False`` for a rate that
    only repeats the score)."""

    @property
    def title(self) -> str:
        return self.label or f"{self.name} rate"


@dataclass(frozen=True)
class ReportLayout:
    """How reports read a testbed's eval metrics (module docstring); the default declares no rates."""

    rates: tuple[ReportRate, ...] = ()
    """The rates summarised, the one drawn per bucket and round first."""
    score: str = ""
    """What ``EvalReport.score`` is (empty: only that the testbed defines it)."""
    bucket_label: str | None = None
    """What one bucket is (``None``: the unit of the testbed's ``BucketSpace``, else ``bucket``)."""

    def group_label(self, group: str) -> str | None:
        """The legend name of a group's per-round line; ``None``: no line for the group."""
        return None

    def bucket_order(self, bucket: str) -> tuple:
        """Sort key of a bucket in plots and ``compare.json`` (``natural_key``)."""
        return natural_key(bucket)

    @property
    def rates_title(self) -> str:
        """The rates in one title: ``valid and optimal rate`` when each is ``<name> rate``, else
        their titles joined."""
        if not self.rates:
            return "rate"
        if all(not r.label for r in self.rates):
            return f"{_joined([r.name for r in self.rates])} rate"
        return _joined([r.title for r in self.rates])


def _joined(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(words[:-1]), words[-1]]) if len(words) > 1 else "".join(words)
