"""``learnability``: put the next round's budget where p(1 − p) is largest.

Rule (per bucket b of the testbed's bucket space; ``curriculum.core.buckets``):

1. **Estimate** the success rate p̂_b from the history: an exponential moving average of the
   eval's per-bucket success rates over the rounds so far,
   p̂_b ← (1 − α)·p̂_b + α·v_b(round), starting at the first observation (α = ``smoothing``,
   default 0.5; α = 1 uses only the last eval). A bucket the eval does not cover (e.g. a CPU
   eval on small maps only) is observed through its training success rate that round
   (``bucket/<b>/success`` over ``bucket/<b>/count`` ≥ ``min_train_count`` samples), so budget
   spent on it is measured; before the fix the ½ prior stayed forever and such buckets kept
   the largest p(1 − p). A bucket never observed either way gets p̂_b = ``prior`` (½, the most
   learnable value), so unknown buckets are tried.
2. **Score** L_b = p̂_b(1 − p̂_b) ∈ [0, ¼]: the variance of a Bernoulli reward, i.e. the
   expected spread of a GRPO group's rewards (tasks at p ≈ ½ give the largest advantages; at
   p ∈ {0, 1} every answer gets the same reward and the gradient vanishes).
3. **Budget** share_b = (1 − ε)·L_b^{1/T} / Σ_c L_c^{1/T} + ε / B, ε = ``exploration`` (default
   0.1) keeps every bucket sampled, T = ``temperature`` (1: proportional to learnability,
   as in the learnability sampler of Foster & Foerster, "Learning to Reason at the Frontier of
   Learnability", 2025, arXiv:2502.12272; smaller T concentrates on the top buckets). When every
   L_b = 0 the budget is uniform.

Knobs are left as they are: this curriculum only moves budget between buckets. The paper reports
a learnability sampler at 0.418 vs 0.362 uniform on MATH500 (0.6B). Stateless: p̂ is
recomputed from the history every round, so resume is exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from curriculum.core.buckets import Bucket, bucket_scores, bucket_train_stats, normalise, space_of
from curriculum.core.config import PluginConfig
from curriculum.core.records import Design
from engineers.base import DesignContext, Engineer


class LearnabilityEngineerConfig(PluginConfig):
    """Smoothing, exploration floor and temperature of the learnability rule (module docstring)."""

    name: Literal["learnability"]
    """Selects this engineer."""
    smoothing: float = Field(0.5, gt=0.0, le=1.0)
    """α: weight of the newest eval in the moving average of each bucket's success rate."""
    exploration: float = Field(0.1, ge=0.0, le=1.0)
    """ε: share of the budget spread uniformly over all buckets."""
    temperature: float = Field(1.0, gt=0.0)
    """T: learnability is raised to 1/T before normalising (T < 1 sharpens)."""
    prior: float = Field(0.5, ge=0.0, le=1.0)
    """p̂ of a bucket with no eval or training data yet."""
    min_train_count: int = Field(4, ge=1)
    """Training samples a bucket the eval does not cover needs in a round for its training
    success rate to count as that round's observation."""


def round_observations(eval_scores: Mapping[str, float],
                       train_stats: Mapping[str, Mapping[str, float]],
                       min_train_count: int) -> dict[str, float]:
    """One round's success rate per bucket: the eval's where it has the bucket, else the
    training success rate when enough of the round's samples came from it."""
    seen = dict(eval_scores)
    for b, stats in train_stats.items():
        if b not in seen and stats.get("count", 0.0) >= min_train_count and "success" in stats:
            seen[b] = stats["success"]
    return seen


def estimate_success(history: Sequence[Mapping[str, float]], buckets: Sequence[str],
                     smoothing: float, prior: float) -> dict[str, float]:
    """p̂_b: EMA (weight ``smoothing`` on the newer value) of per-round success rates, oldest first."""
    est: dict[str, float] = {}
    for scores in history:
        for b, v in scores.items():
            est[b] = float(v) if b not in est else (1 - smoothing) * est[b] + smoothing * float(v)
    return {b: est.get(b, prior) for b in buckets}


def learnability_shares(p: Mapping[str, float], exploration: float, temperature: float) -> dict[str, float]:
    """share_b = (1 − ε)·L_b^{1/T}/Σ L^{1/T} + ε/B with L_b = p_b(1 − p_b)."""
    score = {b: max(0.0, v * (1.0 - v)) ** (1.0 / temperature) for b, v in p.items()}
    focused = normalise(score)
    return {b: (1 - exploration) * focused[b] + exploration / len(p) for b in p}


class LearnabilityEngineer(Engineer):
    """Budget proportional to p(1 − p) with an exploration floor (module docstring)."""

    config_class = LearnabilityEngineerConfig
    fits = ("buckets",)
    description = ("Budget proportional to p(1-p) per bucket (success rate from the evals), with an "
                   "exploration floor.")


    def design(self, ctx: DesignContext) -> Design:
        space = space_of(ctx.testbed)
        current = space.read(ctx.proposal)
        cfg: LearnabilityEngineerConfig = self.config
        observed = [round_observations(bucket_scores(r.eval), bucket_train_stats(r.train_metrics),
                                       cfg.min_train_count) for r in ctx.history]
        p = estimate_success(observed, space.buckets, cfg.smoothing, cfg.prior)
        shares = learnability_shares(p, cfg.exploration, cfg.temperature)
        nxt = {b: Bucket(share=shares[b], knobs=dict(current[b].knobs)) for b in space.buckets}
        top = max(shares, key=shares.__getitem__)
        return Design(raw=space.write(nxt, ctx.proposal.model_dump(mode="json")),
                      notes={"success_estimate": p, "learnability": {b: v * (1 - v) for b, v in p.items()}},
                      diagnostics={"top_bucket": top, "top_share": shares[top]})
