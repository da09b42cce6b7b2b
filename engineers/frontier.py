"""``frontier``: a transparent rule-based curriculum baseline.

It reads the latest eval report and, per map size s, the valid rate v_s (averaged over the eval
suites' agent counts, from the metrics ``valid_rate/<k>agents/<s>``). With the band [lo, hi]
(default [0.2, 0.8]) the rules are:

1. **Budget.** Weight w_s = 1 for sizes in the band (the competence frontier); the smallest size
   below the band (the next frontier) gets ``next_weight`` (0.5), or 1 when no size is in the
   band; every other size keeps ``floor_weight`` (0.02) so mastered sizes are not forgotten.
   data_ratio_s = w_s / Σ w.
2. **Harder maps where mastered.** v_s > hi: hole_ratio += ``hole_step`` (0.1) and
   wait_ratio += ``wait_step`` (0.2), so a mastered size again yields learning signal.
3. **Easier maps where hopeless.** v_s < lo: hole_ratio −= ``hole_step`` / 2 and
   wait_ratio −= ``wait_step`` / 2. Sizes in the band keep their ratios.

Values are clipped by the testbed's ``project``. Sizes without eval data keep their settings.
No state: every decision derives from the last round's report and proposal.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from curriculum.core.config import PluginConfig
from curriculum.core.records import Design
from engineers.base import DesignContext, Engineer

_SIZE_METRIC = re.compile(r"^valid_rate/(\d+)agents/(\d+x\d+)$")


class FrontierEngineerConfig(PluginConfig):
    """Thresholds and step sizes of the frontier rules (see the module docstring)."""

    name: Literal["frontier"] = "frontier"
    """Selects this engineer."""
    low: float = Field(0.2, ge=0.0, le=1.0)
    """Lower edge of the frontier band of valid rates."""
    high: float = Field(0.8, ge=0.0, le=1.0)
    """Upper edge of the frontier band; above it a size counts as mastered."""
    next_weight: float = Field(0.5, ge=0.0)
    """Budget weight of the smallest size below the band (frontier sizes weigh 1)."""
    floor_weight: float = Field(0.02, ge=0.0)
    """Budget weight of every other size (keeps a trickle of data against forgetting)."""
    hole_step: float = Field(0.1, ge=0.0, le=0.5)
    """Hole-ratio increase on mastered sizes (half of it is the decrease on hopeless sizes)."""
    wait_step: float = Field(0.2, ge=0.0, le=1.0)
    """Wait-ratio increase on mastered sizes (half of it is the decrease on hopeless sizes)."""

    @model_validator(mode="after")
    def _band(self) -> FrontierEngineerConfig:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self


def valid_rate_by_size(metrics: dict[str, float]) -> dict[str, float]:
    """Per size, the mean of ``valid_rate/<k>agents/<size>`` over the agent counts present."""
    acc: dict[str, list[float]] = {}
    for key, value in metrics.items():
        m = _SIZE_METRIC.match(key)
        if m:
            acc.setdefault(m.group(2), []).append(float(value))
    return {size: sum(v) / len(v) for size, v in acc.items()}


def frontier_proposal(proposal: dict[str, Any], rates: dict[str, float],
                      config: FrontierEngineerConfig) -> tuple[dict[str, Any], dict[str, str]]:
    """Apply the rules to a ``{"sizes": {size: {data_ratio, hole_ratio, wait_ratio}}}`` proposal.

    Returns the raw next proposal and, per size, the rule that fired
    (``frontier``/``next``/``mastered``/``hopeless``/``no data``).
    """
    sizes = proposal["sizes"]
    order = sorted(sizes, key=lambda s: int(s.split("x")[0]))
    band = [s for s in order if s in rates and config.low <= rates[s] <= config.high]
    below = [s for s in order if s in rates and rates[s] < config.low]
    nxt = below[0] if below else None
    rule: dict[str, str] = {}
    weights: dict[str, float] = {}
    for s in order:
        if s not in rates:
            rule[s] = "no data"
            weights[s] = config.floor_weight
        elif s in band:
            rule[s] = "frontier"
            weights[s] = 1.0
        elif s == nxt:
            rule[s] = "next"
            weights[s] = config.next_weight if band else 1.0
        else:
            rule[s] = "mastered" if rates[s] > config.high else "hopeless"
            weights[s] = config.floor_weight
    total = sum(weights.values())
    out: dict[str, Any] = {"sizes": {}}
    for s in order:
        old = sizes[s]
        hole, wait = float(old["hole_ratio"]), float(old["wait_ratio"])
        if rule[s] == "mastered":
            hole, wait = hole + config.hole_step, wait + config.wait_step
        elif rule[s] in ("hopeless", "next") and rates.get(s, 1.0) < config.low:
            hole, wait = hole - config.hole_step / 2, wait - config.wait_step / 2
        out["sizes"][s] = {
            "data_ratio": weights[s] / total if total > 0 else 1.0 / len(order),
            "hole_ratio": max(0.0, hole),
            "wait_ratio": max(0.0, wait),
        }
    return out, rule


class FrontierEngineer(Engineer):
    """Moves budget to the competence frontier (see the module docstring)."""

    def design(self, ctx: DesignContext) -> Design:
        rates = valid_rate_by_size(ctx.history[-1].eval.metrics)
        raw, rule = frontier_proposal(ctx.proposal.model_dump(mode="json"), rates, self.config)
        return Design(raw=raw, notes={"valid_rate_by_size": rates, "rule": rule,
                                      "diagnostics": {"frontier_sizes": [s for s, r in rule.items()
                                                                         if r == "frontier"]}})
