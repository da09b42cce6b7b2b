"""``plr``: prioritized level replay over generator buckets, with ACCEL-style mutation.

Sources: Jiang, Grefenstette & Rocktäschel, "Prioritized Level Replay" (ICML 2021,
arXiv:2010.03934) for the replay distribution; Parker-Holder et al., "Evolving Curricula with
Regret-Based Environment Design" (ACCEL, ICML 2022, arXiv:2203.01302) for mutating the best
levels; the JAX reference implementation is jaxued's ``LevelSampler``. A *level* here is a bucket
of the testbed's bucket space (``curriculum.core.buckets``).

1. **Score** S_b: the learning signal the last round that trained on b actually produced — the
   mean within-group reward standard deviation ``bucket/<b>/spread`` (``curriculum/core/bucket_stats.py``),
   the scale of GRPO's group-relative advantages and our stand-in for PLR's value-loss / regret
   scores (a group whose answers all get the same reward yields no gradient). When a round's
   trainer reports no bucket statistics, the eval's Bernoulli std √(v_b(1 − v_b)) is the proxy.
   C_b: the round that last scored b. Buckets never scored are *unseen*.
2. **Replay distribution** over the seen buckets (rank prioritisation with staleness, PLR eq. 1–3):
       P_S(b) = h(rank_b)^{1/β} / Σ_c h(rank_c)^{1/β},   h(r) = 1/r, rank 1 = highest score
       P_C(b) = (c − C_b) / Σ_c (c − C_c),                c = number of rounds so far
       P(b)   = (1 − ρ)·P_S(b) + ρ·P_C(b)
   with temperature β = ``temperature`` (0.1) and staleness coefficient ρ = ``staleness`` (0.1),
   PLR's Procgen defaults.
3. **New levels**: as in PLR, the share of the budget that goes to replay is the fraction of
   buckets seen so far, |seen| / B; the rest is spread evenly over the unseen buckets.
4. **Mutation (ACCEL)**: the ``mutate_top`` highest-scoring buckets are edited. With knobs, each
   knob moves by ``mutation_scale`` × its step, toward harder with probability ``harder_prob``
   (0.5: ACCEL's undirected random edits), easier otherwise, clipped into bounds. Without knobs
   (levels are buckets, e.g. reasoning-gym's task × difficulty), ``mutation_share`` of the
   bucket's budget moves to its harder neighbour in its group (easier neighbour with probability
   1 − ``harder_prob``), which thereby enters the replay set.

Everything derives from the history and the seeded per-round RNG, so resume is exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from curriculum.core.buckets import Bucket, BucketSpace, bucket_scores, bucket_train_stats, groups_of, space_of
from curriculum.core.config import PluginConfig
from curriculum.core.records import Design, RoundReport
from engineers.base import DesignContext, Engineer


class PLREngineerConfig(PluginConfig):
    """Prioritisation, staleness and mutation settings (module docstring)."""

    name: Literal["plr"]
    """Selects this engineer."""
    temperature: float = Field(0.1, gt=0.0)
    """β: temperature of the rank prioritisation h(rank)^{1/β}."""
    staleness: float = Field(0.1, ge=0.0, le=1.0)
    """ρ: weight of the staleness distribution in the replay mixture."""
    mutate_top: int = Field(2, ge=0)
    """How many of the highest-scoring buckets ACCEL mutates each round (0: plain PLR)."""
    mutation_scale: float = Field(1.0, ge=0.0)
    """Knob edit size, in units of each knob's declared step."""
    mutation_share: float = Field(0.5, ge=0.0, le=1.0)
    """Without knobs: share of a mutated bucket's budget moved to its neighbour level."""
    harder_prob: float = Field(0.5, ge=0.0, le=1.0)
    """Probability that a mutation makes the level harder (else easier)."""


def bucket_learning_signal(report: RoundReport) -> dict[str, float]:
    """S_b of one round: train spread where trained, else the eval's Bernoulli std (docstring)."""
    stats = bucket_train_stats(report.train_metrics)
    if stats:
        return {b: s["spread"] for b, s in stats.items() if s.get("count", 0) > 0 and "spread" in s}
    return {b: math.sqrt(max(0.0, v * (1.0 - v))) for b, v in bucket_scores(report.eval).items()}


def scores_and_staleness(history: Sequence[RoundReport]) -> tuple[dict[str, float], dict[str, int]]:
    """Latest S_b and the round C_b that produced it, per scored bucket."""
    scores: dict[str, float] = {}
    last: dict[str, int] = {}
    for report in history:
        for b, s in bucket_learning_signal(report).items():
            scores[b], last[b] = float(s), report.round
    return scores, last


def replay_distribution(scores: Mapping[str, float], last: Mapping[str, int], now: int,
                        temperature: float, staleness: float) -> dict[str, float]:
    """P = (1 − ρ)·P_S + ρ·P_C over the scored buckets (PLR eq. 1–3; ties ranked by order)."""
    order = sorted(scores, key=lambda b: -scores[b])
    h = {b: (1.0 / (i + 1)) ** (1.0 / temperature) for i, b in enumerate(order)}
    total_h = sum(h.values())
    stale = {b: float(now - last[b]) for b in scores}
    total_c = sum(stale.values())
    return {b: (1 - staleness) * h[b] / total_h
            + staleness * (stale[b] / total_c if total_c > 0 else 1.0 / len(scores)) for b in scores}


def plr_shares(space: BucketSpace, scores: Mapping[str, float], last: Mapping[str, int], now: int,
               config: PLREngineerConfig) -> dict[str, float]:
    """Replay share |seen|/B by P over seen buckets, the rest evenly over unseen ones."""
    seen = [b for b in space.buckets if b in scores]
    unseen = [b for b in space.buckets if b not in scores]
    if not seen:
        return {b: 1.0 / len(space.buckets) for b in space.buckets}
    p_replay = len(seen) / len(space.buckets)
    replay = replay_distribution({b: scores[b] for b in seen}, last, now, config.temperature, config.staleness)
    shares = {b: p_replay * replay[b] for b in seen}
    shares.update({b: (1 - p_replay) / len(unseen) for b in unseen})
    return {b: shares[b] for b in space.buckets}


def _neighbour(levels: Sequence[str], bucket: str, harder: bool) -> str | None:
    i = list(levels).index(bucket)
    j = i + 1 if harder else i - 1
    if not 0 <= j < len(levels):
        j = i - 1 if harder else i + 1
    return levels[j] if 0 <= j < len(levels) else None


def mutate(space: BucketSpace, groups: Mapping[str, Sequence[str]], buckets: dict[str, Bucket],
           parents: Sequence[str], config: PLREngineerConfig, rng: np.random.Generator) -> dict[str, str]:
    """ACCEL edits of ``parents`` in place (docstring step 4); returns what each edit did."""
    edits: dict[str, str] = {}
    group_of = {b: g for g, levels in groups.items() for b in levels}
    for parent in parents:
        harder = bool(rng.random() < config.harder_prob)
        if space.knobs:
            amount = config.mutation_scale if harder else -config.mutation_scale
            buckets[parent].knobs = {k.name: k.harden(buckets[parent].knobs[k.name], amount * k.step)
                                     for k in space.knobs}
            edits[parent] = "knobs harder" if harder else "knobs easier"
            continue
        child = _neighbour(groups[group_of[parent]], parent, harder) if parent in group_of else None
        if child is not None:
            moved = config.mutation_share * buckets[parent].share
            buckets[parent].share -= moved
            buckets[child].share += moved
            edits[parent] = f"share {moved:.4f} to {child}"
    return edits


class PLREngineer(Engineer):
    """Prioritized level replay with staleness and ACCEL mutation over buckets (docstring)."""

    config_class = PLREngineerConfig
    fits = ("buckets",)
    description = ("Prioritized level replay over buckets (rank + staleness on GRPO reward spread), "
                   "ACCEL mutation.")


    def design(self, ctx: DesignContext) -> Design:
        cfg: PLREngineerConfig = self.config
        space = space_of(ctx.testbed)
        current = space.read(ctx.proposal)
        scores, last = scores_and_staleness(ctx.history)
        shares = plr_shares(space, scores, last, len(ctx.history), cfg)
        nxt = {b: Bucket(share=shares[b], knobs=dict(current[b].knobs)) for b in space.buckets}
        parents = sorted(scores, key=lambda b: -scores[b])[:cfg.mutate_top]
        edits = mutate(space, groups_of(ctx.testbed, space), nxt, parents, cfg, ctx.rng)
        return Design(raw=space.write(nxt, ctx.proposal.model_dump(mode="json")),
                      notes={"scores": scores, "last_scored": last, "mutations": edits},
                      diagnostics={"seen": len(scores), "buckets": len(space.buckets)})
