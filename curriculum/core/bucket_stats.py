"""Per-bucket training statistics a trainer reports, for engineers that score buckets by the
learning signal a round actually produced (``plr``) or by training accuracy (``rlve``).

For completions grouped by prompt (GRPO's groups of G samples), with rewards r and each task's
bucket (``task.features["bucket"]``)::

    bucket/<b>/count   = number of completions of tasks in b
    bucket/<b>/success = share of those completions with r ≥ ½ (the success threshold: a
                         path-planning reward's accuracy term is ≥ 0.3 only when the plan is
                         valid, a reasoning task scores 1 when correct; a valid plan with a long
                         answer can fall below ½)
    bucket/<b>/spread  = mean over b's groups of the population std of the group's rewards
                         (the scale of GRPO's group-relative advantages; 0 when every answer in a
                         group gets the same reward — no gradient)
    zero_spread_share  = share of all groups whose rewards are all equal (std below 1e-9): the
                         groups that give GRPO no gradient, which a curriculum exists to avoid

Read back by ``curriculum.core.buckets.bucket_train_stats``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SUCCESS_THRESHOLD = 0.5
"""Reward at or above which a completion counts as a success."""

ZERO_SPREAD = "zero_spread_share"
"""Train metric: the share of a round's groups without reward spread (module docstring)."""


def bucket_metrics(buckets: Sequence[str], groups: Sequence[int], rewards: Sequence[float]) -> dict[str, float]:
    """The ``bucket/<b>/*`` metrics of the module docstring (one entry per completion)."""
    if not (len(buckets) == len(groups) == len(rewards)):
        raise ValueError("buckets, groups and rewards must have one entry per completion")
    by_group: dict[int, list[float]] = {}
    bucket_of: dict[int, str] = {}
    for b, g, r in zip(buckets, groups, rewards, strict=True):
        by_group.setdefault(int(g), []).append(float(r))
        bucket_of[int(g)] = str(b)
    out: dict[str, float] = {}
    if by_group:
        out[ZERO_SPREAD] = float(np.mean([np.std(v) < 1e-9 for v in by_group.values()]))
    for b in dict.fromkeys(str(x) for x in buckets):
        rs = [float(r) for x, r in zip(buckets, rewards, strict=True) if str(x) == b]
        spreads = [float(np.std(v)) for g, v in by_group.items() if bucket_of[g] == b]
        out[f"bucket/{b}/count"] = float(len(rs))
        out[f"bucket/{b}/success"] = float(np.mean([r >= SUCCESS_THRESHOLD for r in rs]))
        out[f"bucket/{b}/spread"] = float(np.mean(spreads))
    return out
