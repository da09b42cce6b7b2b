"""``frontier``: a transparent rule-based curriculum baseline over any bucket space.

It reads the testbed's declared ``BucketSpace`` (``curriculum.core.spaces``: buckets listed
easiest first, each with a share and bounded knobs) and the last eval's success rate v_b per
bucket (``EvalReport.bucket_scores``; MAPF-FrozenLake: the valid rate per map size, averaged over
the eval suites' agent counts). With the band [lo, hi] (default [0.2, 0.8]) the rules are:

1. **Budget.** Weight w_b = 1 for buckets in the band (the competence frontier); the easiest
   bucket below the band (the next frontier) gets ``next_weight`` (0.5), or 1 when no bucket is
   in the band; every other bucket keeps ``floor_weight`` (0.02) so mastered buckets are not
   forgotten. share_b = w_b / Σ w.
2. **Harder where mastered.** v_b > hi: every knob moves ``step_scale`` × its declared step toward
   harder (MAPF: hole_ratio += 0.1, wait_ratio += 0.2), so a mastered bucket again yields
   learning signal.
3. **Easier where hopeless.** v_b < lo: every knob moves half that toward easier. Buckets in the
   band keep their knobs.

Knobs are clipped into their bounds (the testbed's ``project`` checks again). Buckets without eval
data keep their knobs. No state: every decision derives from the last round's report and proposal.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from curriculum.core.config import PluginConfig
from curriculum.core.records import Design
from curriculum.core.spaces import Bucket, BucketSpace, normalise
from engineers.base import DesignContext, Engineer


class FrontierEngineerConfig(PluginConfig):
    """Thresholds and step sizes of the frontier rules (see the module docstring)."""

    name: Literal["frontier"]
    """Selects this engineer."""
    low: float = Field(0.2, ge=0.0, le=1.0)
    """Lower edge of the frontier band of success rates."""
    high: float = Field(0.8, ge=0.0, le=1.0)
    """Upper edge of the frontier band; above it a bucket counts as mastered."""
    next_weight: float = Field(0.5, ge=0.0)
    """Budget weight of the easiest bucket below the band (frontier buckets weigh 1)."""
    floor_weight: float = Field(0.02, ge=0.0)
    """Budget weight of every other bucket (keeps a trickle of data against forgetting)."""
    step_scale: float = Field(1.0, ge=0.0, le=5.0)
    """Multiplier of each knob's declared step on mastered buckets (half of it on hopeless ones)."""

    @model_validator(mode="after")
    def _band(self) -> FrontierEngineerConfig:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self


def frontier_rules(space: BucketSpace, rates: dict[str, float],
                   config: FrontierEngineerConfig) -> tuple[dict[str, float], dict[str, str]]:
    """Budget weight and the rule that fired (``frontier``/``next``/``mastered``/``hopeless``/
    ``no data``) per bucket."""
    band = [b for b in space.buckets if b in rates and config.low <= rates[b] <= config.high]
    below = [b for b in space.buckets if b in rates and rates[b] < config.low]
    nxt = below[0] if below else None
    rule: dict[str, str] = {}
    weights: dict[str, float] = {}
    for b in space.buckets:
        if b not in rates:
            rule[b], weights[b] = "no data", config.floor_weight
        elif b in band:
            rule[b], weights[b] = "frontier", 1.0
        elif b == nxt:
            rule[b], weights[b] = "next", config.next_weight if band else 1.0
        else:
            rule[b] = "mastered" if rates[b] > config.high else "hopeless"
            weights[b] = config.floor_weight
    return weights, rule


def frontier_proposal(space: BucketSpace, current: dict[str, Bucket], rates: dict[str, float],
                      config: FrontierEngineerConfig) -> tuple[dict[str, Bucket], dict[str, str]]:
    """Apply the rules (module docstring) to the current buckets; returns the next buckets and,
    per bucket, the rule that fired."""
    weights, rule = frontier_rules(space, rates, config)
    shares = normalise(weights)
    out: dict[str, Bucket] = {}
    for b in space.buckets:
        knobs = dict(current[b].knobs)
        if rule[b] == "mastered":
            amount = config.step_scale
        elif rule[b] in ("hopeless", "next") and rates.get(b, 1.0) < config.low:
            amount = -config.step_scale / 2
        else:
            amount = 0.0
        if amount:
            knobs = {k.name: k.harden(knobs[k.name], amount * k.step) for k in space.knobs}
        out[b] = Bucket(share=shares[b], knobs=knobs)
    return out, rule


class FrontierEngineer(Engineer):
    """Moves budget to the competence frontier (see the module docstring)."""

    config_class = FrontierEngineerConfig
    fits = ("buckets",)
    description = ("Rule-based baseline: budget to buckets with success rate in [20%, 80%], harder "
                   "where mastered.")

    def design(self, ctx: DesignContext) -> Design:
        space = ctx.testbed.proposal_space
        rates = dict(ctx.history[-1].eval.bucket_scores)
        proposal = ctx.proposal.model_dump(mode="json")
        buckets, rule = frontier_proposal(space, space.read(proposal), rates, self.config)
        return Design(raw=space.write(buckets, proposal),
                      notes={"bucket_scores": rates, "rule": rule},
                      diagnostics={"frontier_buckets": [b for b, r in rule.items() if r == "frontier"]})
