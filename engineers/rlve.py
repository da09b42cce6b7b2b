"""``rlve``: RLVE-style adaptive difficulty — a sliding difficulty window per environment.

Source: Zeng et al., "RLVE: Scaling Up Reinforcement Learning for Language Models with Adaptive
Verifiable Environments" (2025, arXiv:2511.07317), with the thresholds of the public SPADE code's
``sliding_window`` variant: accuracy threshold τ_acc = 0.9, at least τ_num = 8 samples,
window width d_Δ = 4.

An *environment* is a group of the testbed's buckets, easiest first (``curriculum.core.buckets.groups_of``:
reasoning-gym — one group per task, its buckets are the task's difficulty levels; MAPF-FrozenLake —
one group, the map sizes 3x3 … 10x10 as levels 0 … 7). Each environment e keeps a window
[ℓ_e, h_e] of level indices, starting at [0, 0]. After every round:

1. add the round's training outcomes at level h_e (``bucket/<b>/count`` and ``…/success`` from
   the trainer, ``curriculum/core/bucket_stats.py``) to e's accumulator (n_e, k_e);
2. if n_e ≥ τ_num and k_e / n_e ≥ τ_acc: h_e ← h_e + 1 (up to the top level),
   ℓ_e ← max(ℓ_e, h_e − d_Δ + 1), and the accumulator restarts at (0, 0) — RLVE counts accuracy
   on the new top difficulty afresh.

The next round's budget: every environment gets 1/E (RLVE draws environments uniformly), split
evenly over the levels inside its window; levels outside the window get 0. Knobs are left as they
are. Rounds whose trainer reports no bucket statistics add nothing (the windows then stay).
The windows are recomputed from the history every round (no state), so resume is exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from curriculum.core.buckets import Bucket, bucket_train_stats, groups_of, space_of
from curriculum.core.config import PluginConfig
from curriculum.core.records import Design
from engineers.base import DesignContext, Engineer


class RLVEEngineerConfig(PluginConfig):
    """Thresholds of the sliding window (module docstring; defaults: SPADE's ``sliding_window``)."""

    name: Literal["rlve"]
    """Selects this engineer."""
    accuracy_threshold: float = Field(0.9, gt=0.0, le=1.0)
    """τ_acc: accuracy at the window's top level that slides the window up."""
    min_samples: int = Field(8, ge=1)
    """τ_num: training samples at the top level needed before the accuracy counts."""
    width: int = Field(4, ge=1)
    """d_Δ: largest number of levels inside a window."""


class Window(BaseModel):
    """One environment's difficulty window and its accumulator at the top level."""

    low: int = 0
    """ℓ: easiest level in the window."""
    high: int = 0
    """h: hardest level in the window."""
    samples: float = 0.0
    """n: training samples at level h since h was reached."""
    correct: float = 0.0
    """k: successful samples among them."""


def update_window(window: Window, count: float, success: float, levels: int,
                  config: RLVEEngineerConfig) -> Window:
    """One round of the rule: accumulate (count, success rate) at the top level, maybe slide."""
    w = window.model_copy()
    w.samples += count
    w.correct += count * success
    if w.samples >= config.min_samples and w.correct / w.samples >= config.accuracy_threshold \
            and w.high < levels - 1:
        w.high += 1
        w.low = max(w.low, w.high - config.width + 1)
        w.samples = w.correct = 0.0
    return w


def replay_windows(rounds: Sequence[Mapping[str, Mapping[str, float]]], groups: Mapping[str, Sequence[str]],
                   config: RLVEEngineerConfig) -> dict[str, Window]:
    """The windows after the given rounds' bucket statistics (oldest first), from [0, 0]."""
    windows = {g: Window() for g in groups}
    for stats in rounds:
        for g, levels in groups.items():
            top = stats.get(levels[windows[g].high])
            if top and top.get("count", 0) > 0:
                windows[g] = update_window(windows[g], top["count"], top.get("success", 0.0), len(levels), config)
    return windows


def window_shares(windows: Mapping[str, Window], groups: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """1/E per environment, split evenly over the levels inside its window."""
    shares: dict[str, float] = {}
    for g, levels in groups.items():
        w = windows[g]
        inside = w.high - w.low + 1
        for i, b in enumerate(levels):
            shares[b] = (1.0 / len(groups)) / inside if w.low <= i <= w.high else 0.0
    return shares


class RLVEEngineer(Engineer):
    """Slides each environment's difficulty window up when its top level is mastered."""

    config_class = RLVEEngineerConfig
    fits = ("buckets",)
    description = ("RLVE sliding difficulty window per environment (slides at 90% accuracy over >= "
                   "8 samples, width 4).")


    def design(self, ctx: DesignContext) -> Design:
        space = space_of(ctx.testbed)
        groups = groups_of(ctx.testbed, space)
        current = space.read(ctx.proposal)
        windows = replay_windows([bucket_train_stats(r.train_metrics) for r in ctx.history], groups, self.config)
        shares = window_shares(windows, groups)
        nxt = {b: Bucket(share=shares.get(b, 0.0), knobs=dict(current[b].knobs)) for b in space.buckets}
        return Design(raw=space.write(nxt, ctx.proposal.model_dump(mode="json")),
                      notes={"windows": {g: w.model_dump() for g, w in windows.items()}},
                      diagnostics={"top_levels": {g: groups[g][w.high] for g, w in windows.items()}})
