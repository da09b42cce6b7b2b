"""The name of a flat eval metric (``EvalReport.metrics``), typed: ``MetricKey``.

A flat metric name has up to three ``/``-separated parts, ``<metric>[/<group>[/<cell>]]``:

* ``metric`` — what is measured (``valid_rate``, ``optimal_rate``, ``failure_rate``,
  ``accuracy``, ``mean_tokens``, ``cost_ratio``);
* ``group`` — the eval suite or task it is measured on (a suite of 3-agent instances
  ``"3agents"``; a reasoning_gym task);
* ``cell`` — the part of that group: a bucket (a grid size ``"5x5"``), a level ``L<n>`` of a
  levelled bucket, or another sub-key (a failing check's name).

The string (``to_str``) is the on-disk format of run directories and ``compare.json``;
``parse(key).to_str() == key`` for every key, so old files load unchanged. Producers build keys
with ``MetricKey(...)`` / ``MetricKey.for_bucket``; readers ``parse`` and read fields, never
match the string.

**Levelled buckets.** A bucket id ``<group>:<n>`` (reasoning_gym ``leg_counting:2``, level 2 of
the task) is written as cell ``L<n>`` under its group (``accuracy/leg_counting/L2``); ``bucket``
maps it back. Any other cell is the bucket id itself.
"""

from __future__ import annotations

from dataclasses import dataclass

SEPARATOR = "/"
"""Between the parts of a metric key."""


@dataclass(frozen=True)
class MetricKey:
    """One flat metric name: ``metric``, optionally on ``group``, optionally at ``cell``."""

    metric: str
    """What is measured (``valid_rate``, ``accuracy``, ...)."""
    group: str | None = None
    """The suite or task (``"3agents"``, a reasoning_gym task); ``None``: over the whole eval."""
    cell: str | None = None
    """Part of the group (a bucket, ``L<n>``, a check); ``None``: the group's aggregate."""

    def __post_init__(self) -> None:
        if not self.metric or SEPARATOR in self.metric:
            raise ValueError(f"metric name {self.metric!r} must be non-empty and contain no {SEPARATOR!r}")
        if self.group is not None and (not self.group or SEPARATOR in self.group):
            raise ValueError(f"metric group {self.group!r} must be non-empty and contain no {SEPARATOR!r}")
        if self.cell is not None and (self.group is None or not self.cell):
            raise ValueError(f"metric cell {self.cell!r} needs a group and must be non-empty")

    @classmethod
    def for_bucket(cls, metric: str, group: str, bucket: str) -> MetricKey:
        """The key of ``metric`` on ``group`` at bucket ``bucket`` (a levelled bucket
        ``<group>:<n>`` becomes cell ``L<n>``)."""
        prefix = f"{group}:"
        level = bucket[len(prefix):] if bucket.startswith(prefix) else ""
        return cls(metric, group, f"L{level}" if level.isdigit() else bucket)

    @property
    def level(self) -> int | None:
        """The level of an ``L<n>`` cell, else ``None``."""
        if self.cell and self.cell[0] == "L" and self.cell[1:].isdigit():
            return int(self.cell[1:])
        return None

    @property
    def bucket(self) -> str | None:
        """The bucket id this key is at: ``<group>:<n>`` for an ``L<n>`` cell, else the cell."""
        level = self.level
        return f"{self.group}:{level}" if level is not None else self.cell

    def to_str(self) -> str:
        """The on-disk form, ``<metric>[/<group>[/<cell>]]``."""
        return SEPARATOR.join(p for p in (self.metric, self.group, self.cell) if p is not None)

    @classmethod
    def parse(cls, key: str) -> MetricKey:
        """The key ``to_str`` wrote (a cell may itself contain ``/``: everything after the second
        separator is the cell). A ``ValueError`` names a key with an empty part."""
        parts = key.split(SEPARATOR, 2)
        try:
            return cls(*parts)
        except ValueError as e:
            raise ValueError(f"metric key {key!r}: {e}") from None

    def __str__(self) -> str:
        return self.to_str()


def parse_metrics(metrics: dict[str, float]) -> dict[MetricKey, float]:
    """A flat metrics dict keyed by ``MetricKey`` (keys that do not parse are skipped: a run's
    metrics may hold names from trainers that follow no layout)."""
    out: dict[MetricKey, float] = {}
    for key, value in metrics.items():
        try:
            out[MetricKey.parse(key)] = value
        except ValueError:
            continue
    return out


def dump_metrics(metrics: dict[MetricKey, float]) -> dict[str, float]:
    """The on-disk flat form of a ``MetricKey``-keyed metrics dict."""
    return {k.to_str(): v for k, v in metrics.items()}
