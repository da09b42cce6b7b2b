"""Helpers over declared bucket proposal spaces (``curriculum.core.spaces.BucketSpace``) shared
by the engineers that edit bucket spaces, the trainers that read a task's bucket and the testbeds
whose proposal is a bucket space.

* ``space_of(testbed)``: the testbed's declared ``BucketSpace`` (a clear error for a pool space).
* ``groups_of(testbed, space)``: environment → its buckets, easiest first — the testbed's
  ``bucket_groups`` (e.g. one group per task, its difficulty levels) or one group of all buckets
  (e.g. map sizes as levels).
* ``bucket_scores(eval)``: success rate per bucket of an eval (``EvalReport.bucket_scores``).
* ``bucket_train_stats(train_metrics)``: what the round's training produced per bucket, from the
  trainer's metrics ``bucket/<b>/count``, ``bucket/<b>/success`` (share of completions with
  reward ≥ ½) and ``bucket/<b>/spread`` (mean within-group reward standard deviation, the size of
  GRPO's advantages) — see ``curriculum/core/bucket_stats.py``.
* ``project_buckets`` / ``allocate``: legalising a raw proposal and turning shares into counts,
  for testbeds whose proposal is nothing but a bucket space.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from curriculum.core.spaces import Bucket, BucketSpace, Knob, normalise
from curriculum.core.types import Change, EvalReport

__all__ = ["Bucket", "BucketSpace", "Knob", "allocate", "bucket_scores", "bucket_train_stats", "groups_of",
           "normalise", "project_buckets", "space_of"]


def space_of(testbed: Any) -> BucketSpace:
    """The testbed's declared bucket space."""
    space = getattr(testbed, "proposal_space", None)
    if not isinstance(space, BucketSpace):
        raise ValueError(f"testbed {getattr(testbed, 'name', testbed)!r} declares no bucket proposal space "
                         f"(it offers {getattr(space, 'kind', None)!r}); bucket engineers cannot edit it")
    return space


def groups_of(testbed: Any, space: BucketSpace) -> dict[str, tuple[str, ...]]:
    """Environment → its buckets, easiest first (``testbed.bucket_groups``; default one group)."""
    groups = getattr(testbed, "bucket_groups", None)
    return {str(g): tuple(b) for g, b in groups.items()} if groups else {"all": space.buckets}


def bucket_scores(report: EvalReport) -> dict[str, float]:
    """Success rate per bucket of an eval."""
    return {str(b): float(v) for b, v in report.bucket_scores.items()}


def bucket_train_stats(train_metrics: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """``{bucket: {"count", "success", "spread"}}`` from ``bucket/<b>/<stat>`` train metrics."""
    out: dict[str, dict[str, float]] = {}
    for key, value in train_metrics.items():
        if key.startswith("bucket/"):
            bucket, _, stat = key[len("bucket/"):].rpartition("/")
            if bucket and stat in ("count", "success", "spread"):
                out.setdefault(bucket, {})[stat] = float(value)
    return out


# -- projection for testbeds whose proposal is a bucket space ------------------------------------

def _decode(raw: Any) -> Any:
    if isinstance(raw, BaseModel):
        return raw.model_dump(mode="json")
    if isinstance(raw, str):
        text = raw.strip()
        fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.S)
        candidate = fenced.group(1) if fenced else text[text.find("{"): text.rfind("}") + 1]
        try:
            return json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            return None
    return raw


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _bucket_value(space: BucketSpace, items: Mapping[str, Any], bucket: str, key: str,
                  old: float, low: float, high: float, changes: list[Change]) -> float:
    path = f"{space.container}.{bucket}.{key}"
    entry = items.get(bucket)
    proposed = entry.get(key) if isinstance(entry, Mapping) else None
    value = _number(proposed)
    if value is None:
        changes.append(Change(path=path, proposed=proposed, applied=old,
                              reason="missing or not a number: kept the previous value"))
        return old
    if not low <= value <= high:
        clipped = min(high, max(low, value))
        changes.append(Change(path=path, proposed=value, applied=clipped, reason=f"clipped into [{low}, {high}]"))
        return clipped
    return value


def project_buckets(space: BucketSpace, raw: Any, previous: Mapping[str, Bucket]
                    ) -> tuple[dict[str, Bucket], list[Change]]:
    """Force ``raw`` (JSON, text with a JSON object, or a model) into ``space``: missing or
    non-numeric values keep ``previous``, values are clipped into bounds, shares renormalised
    to sum 1 (all zero → uniform). Every edit is returned as a ``Change``."""
    changes: list[Change] = []
    data = _decode(raw)
    items = data.get(space.container) if isinstance(data, Mapping) else None
    if not isinstance(items, Mapping):
        changes.append(Change(path=space.container, proposed=raw if isinstance(raw, str) or raw is None else str(raw)[:200],
                              applied="previous proposal", reason="unparsable: kept the previous proposal"))
        return {b: previous[b].model_copy(deep=True) for b in space.buckets}, changes
    items = {str(k): v for k, v in items.items()}
    for extra in sorted(set(items) - set(space.buckets)):
        changes.append(Change(path=f"{space.container}.{extra}", proposed=items[extra], applied=None,
                              reason="unknown bucket: dropped"))
    shares, knobs = {}, {}
    for b in space.buckets:
        shares[b] = _bucket_value(space, items, b, space.share_key, previous[b].share, 0.0, 1.0, changes)
        knobs[b] = {k.name: _bucket_value(space, items, b, k.name, previous[b].knobs[k.name], k.low, k.high, changes)
                    for k in space.knobs}
    total = sum(shares.values())
    fixed = shares
    if abs(total - 1.0) > 1e-9:
        fixed = normalise(shares)
        changes.append(Change(path=f"{space.container}.*.{space.share_key}", proposed=total, applied=1.0,
                              reason="shares renormalised to sum 1" if total > 0 else "all shares zero: uniform"))
    return {b: Bucket(share=fixed[b], knobs=knobs[b]) for b in space.buckets}, changes


def allocate(shares: Mapping[str, float], n: int) -> dict[str, int]:
    """Integer counts summing to ``n``, proportional to ``shares`` (largest remainder, ties by order)."""
    exact = {b: s * n for b, s in normalise(shares).items()}
    counts = {b: int(math.floor(x)) for b, x in exact.items()}
    rest = n - sum(counts.values())
    for b in sorted(exact, key=lambda k: -(exact[k] - counts[k]))[:rest]:
        counts[b] += 1
    return counts
