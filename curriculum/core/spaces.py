"""Proposal-space descriptions: what an engineer may edit, as data a testbed declares.

Two kinds (``SPACE_KINDS``):

* ``BucketSpace`` (kind ``buckets``) — a parametric generator: named buckets, listed easiest
  first, each with a **share** of the round's training tasks (the shares lie on the simplex:
  each in [0, 1], summing to 1) and per-bucket **knobs**, each a float with bounds [low, high],
  a direction (``harder``: raising the knob makes tasks harder, ``higher``; or ``lower``; or
  ``none``) and a natural ``step`` for curricula that nudge it. The proposal stores the buckets
  as ``proposal[container][bucket] = {share_key: s, knob: v, ...}``; ``read`` / ``write``
  translate between that layout and ``{bucket: Bucket(share, knobs)}``, so engineers never
  name a testbed's keys. E.g. a grid-world generator: buckets = grid sizes ``3x3`` … ``10x10``
  (unit ``grid size``), share ``data_ratio``, knobs a density of obstacles and a share of
  instances that need waiting; a procedural-task suite: buckets = datasets or their levels, knobs
  = their difficulty attributes.
* ``PoolSpace`` (kind ``environment_pool``) — a pool of environment programs that engineers add
  and retire (``curriculum.core.pool``).

Plugins declare what they fit in the registry by these kinds (``curriculum.registry``); an
engineer that fits ``ANY`` only uses the testbed's own ``initial_proposal`` /
``random_proposal`` (the ``fixed`` and ``random`` baselines).

Task kinds say what a testbed's tasks are, so a trainer can declare what it trains on. The
kernel names the kinds any plugin may rely on (``TASK_KINDS``): ``prompt`` (a single-turn prompt
scored by ``testbed.score``), ``pool`` (the environment and design tasks of an environment pool,
``curriculum.core.pool``), ``bucketed`` (prompts naming their bucket of the testbed's
``BucketSpace`` in ``features["bucket"]``, which the ``simulated`` learner answers: with the
testbed's own ``simulated_answer``, or with plan text for a planning testbed it knows). A testbed may declare a kind of its own besides these (any
``is_task_kind`` name) when its tasks promise more than they do, e.g. a structured instance in
``Task.data`` that a trainer built for that testbed reads; such a trainer declares the same name,
and fits only the testbeds that declare it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SPACE_KINDS = ("buckets", "environment_pool")
"""Every kind of proposal space a testbed can offer."""
ANY = "*"
"""An engineer that fits every proposal space."""
TASK_KINDS = ("prompt", "pool", "bucketed")
"""The task kinds the kernel defines (module docstring); a testbed may add kinds of its own."""
_KIND_NAME = re.compile(r"[a-z][a-z0-9_]*")


def is_task_kind(name: object) -> bool:
    """Whether ``name`` can name a task kind: one of ``TASK_KINDS``, or a kind a plugin declares
    (lower-case letters, digits and ``_``, starting with a letter)."""
    return isinstance(name, str) and _KIND_NAME.fullmatch(name) is not None


class Knob(BaseModel):
    """One per-bucket generator parameter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Key of the knob in a bucket's mapping."""
    low: float
    """Smallest legal value."""
    high: float
    """Largest legal value."""
    harder: Literal["higher", "lower", "none"] = "higher"
    """Which way makes tasks harder."""
    step: float = Field(0.1, gt=0.0)
    """A natural increment for curricula that nudge the knob."""
    description: str = ""
    """What the knob means, for prompts and reports."""
    neutral: float | None = None
    """A neutral value for examples and uniform starts (``None``: ``low``)."""

    @model_validator(mode="after")
    def _bounds(self) -> Knob:
        if self.low > self.high:
            raise ValueError(f"knob {self.name!r}: low ({self.low}) above high ({self.high})")
        if self.neutral is not None and not self.low <= self.neutral <= self.high:
            raise ValueError(f"knob {self.name!r}: neutral {self.neutral} outside [{self.low}, {self.high}]")
        return self

    def clip(self, value: float) -> float:
        return min(self.high, max(self.low, float(value)))

    def harden(self, value: float, amount: float) -> float:
        """``value`` moved ``amount`` toward harder (negative: easier), clipped into bounds."""
        sign = {"higher": 1.0, "lower": -1.0, "none": 0.0}[self.harder]
        return self.clip(value + sign * amount)


class Bucket(BaseModel):
    """One bucket's setting: its share of the training tasks and its knob values."""

    model_config = ConfigDict(extra="forbid")

    share: float
    """Share of the round's training tasks (the shares of all buckets sum to 1)."""
    knobs: dict[str, float] = Field(default_factory=dict)
    """Knob name → value."""


class BucketSpace(BaseModel):
    """A parametric generator's space: buckets with shares on the simplex and bounded knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["buckets"] = "buckets"
    """Discriminator."""
    buckets: tuple[str, ...]
    """Bucket names, easiest first."""
    knobs: tuple[Knob, ...] = ()
    """Per-bucket knobs (the same set in every bucket)."""
    container: str = "buckets"
    """Field of the proposal that maps bucket name → that bucket's mapping."""
    share_key: str = "share"
    """Key of the share inside a bucket's mapping."""
    unit: str = "bucket"
    """What one bucket is, for prompts and reports (e.g. ``grid size``)."""

    @model_validator(mode="after")
    def _valid(self) -> BucketSpace:
        if not self.buckets or len(set(self.buckets)) != len(self.buckets):
            raise ValueError("buckets must be a non-empty list of distinct names")
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names) or self.share_key in names:
            raise ValueError(f"knob names must be distinct and differ from the share key {self.share_key!r}")
        return self

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        raise KeyError(f"no knob {name!r} (knobs: {', '.join(k.name for k in self.knobs)})")

    def read(self, proposal: BaseModel | Mapping[str, Any]) -> dict[str, Bucket]:
        """``{bucket: Bucket}`` of a proposal (a model or its JSON), in the declared bucket order."""
        data = proposal.model_dump(mode="json") if isinstance(proposal, BaseModel) else proposal
        items = {str(k): v for k, v in (data.get(self.container) or {}).items()}
        missing = [b for b in self.buckets if b not in items]
        if missing:
            raise ValueError(f"proposal has no {self.container!r} entry for {missing}")
        return {b: Bucket(share=float(items[b][self.share_key]),
                          knobs={k.name: float(items[b][k.name]) for k in self.knobs})
                for b in self.buckets}

    def uniform(self) -> dict[str, Bucket]:
        """Equal shares, every knob at its neutral value."""
        knobs = {k.name: k.low if k.neutral is None else k.neutral for k in self.knobs}
        return {b: Bucket(share=1.0 / len(self.buckets), knobs=dict(knobs)) for b in self.buckets}

    def bounds(self) -> dict[str, tuple[float, float]]:
        """Legal range of the share and of every knob, by key."""
        return {self.share_key: (0.0, 1.0), **{k.name: (k.low, k.high) for k in self.knobs}}

    def descriptions(self) -> dict[str, str]:
        """What the share and every knob mean, by key."""
        share = f"share of the next round's training tasks per {self.unit} (all {self.unit}s sum to 1)"
        return {self.share_key: share, **{k.name: k.description for k in self.knobs if k.description}}

    def write(self, buckets: Mapping[str, Bucket], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The raw proposal JSON for ``buckets`` (other top-level fields copied from ``base``)."""
        out = dict(base or {})
        out[self.container] = {b: {self.share_key: s.share, **s.knobs} for b, s in buckets.items()}
        return out


class PoolSpace(BaseModel):
    """A pool of environment programs: engineers add and retire environments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["environment_pool"] = "environment_pool"
    """Discriminator."""
    settings: tuple[str, ...] = ("games", "tools")
    """Settings the pool's environments may have."""


ProposalSpace = BucketSpace | PoolSpace
"""What a testbed offers."""


def normalise(weights: Mapping[str, float]) -> dict[str, float]:
    """Non-negative weights → shares summing to 1 (uniform when all are zero)."""
    clean = {k: max(0.0, float(v)) for k, v in weights.items()}
    total = sum(clean.values())
    if total <= 0:
        return {k: 1.0 / len(clean) for k in clean}
    return {k: v / total for k, v in clean.items()}
