"""The MAPF-FrozenLake generator configuration: the proposal space engineers edit.

For each of the 8 map sizes (``3x3`` … ``10x10``) the configuration holds three numbers:

* ``data_ratio`` — share of a round's training instances drawn at this size; the 8 shares sum
  to 1 (tolerance ``1e-6``).
* ``hole_ratio`` — expected share of the map's cells that are holes.
* ``wait_ratio`` — share of this size's instances that *need a wait*: no conflict-free plan
  without wait actions reaches the optimal sum of costs (see ``generator`` for the exact test).

The legal bounds of every field live in ``BOUNDS`` (data, not code), so ``project``, the random
cold start, the Optuna engineer and the prompts all read one source of truth:

* ``data_ratio`` ∈ [0, 1] — a share.
* ``hole_ratio`` ∈ [0, 0.5] — above one half most small maps admit no solvable instance with
  distinct starts and goals (a 3x3 map with 5 holes keeps 4 free cells), so the generator would
  spend its time rejecting; FrozenLake's own random maps use 0.2 by default.
* ``wait_ratio`` ∈ [0, 1] — a share.

``project(raw, previous)`` forces *any* JSON value into this space and records every edit as a
``testbeds.base.Change``; it never raises.

A run may narrow the space (``ProposalLimits``, the testbed config's ``proposal_limits``): the
sizes that may receive data and tighter hole/wait ranges, so that on a small completion budget
every config an engineer can propose yields instances whose plans fit it. ``ProposalLimits.apply``
moves any share off an excluded size (renormalising the rest; all of it excluded → equal shares
over the allowed sizes) and clips hole/wait ratios into the narrowed ranges, recording each edit;
``ProposalLimits.random`` is the cold start drawn inside the narrowed space.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curriculum.core.spaces import BucketSpace, Knob
from curriculum.core.types import Change

SIZES: tuple[str, ...] = tuple(f"{n}x{n}" for n in range(3, 11))
"""The 8 map sizes, smallest first."""

FIELDS: tuple[str, ...] = ("data_ratio", "hole_ratio", "wait_ratio")
"""The per-size fields, in display order."""

BOUNDS: dict[str, tuple[float, float]] = {
    "data_ratio": (0.0, 1.0),
    "hole_ratio": (0.0, 0.5),
    "wait_ratio": (0.0, 1.0),
}
"""Inclusive legal range of each per-size field (see the module docstring for why)."""

SPACE = BucketSpace(
    buckets=SIZES, container="sizes", share_key="data_ratio", unit="map size",
    knobs=(Knob(name="hole_ratio", low=BOUNDS["hole_ratio"][0], high=BOUNDS["hole_ratio"][1], step=0.1,
                neutral=0.2, description="share of the map's cells that are holes (more holes: harder maps, "
                                         "fewer routes)"),
           Knob(name="wait_ratio", low=BOUNDS["wait_ratio"][0], high=BOUNDS["wait_ratio"][1], step=0.2,
                neutral=0.0, description="share of this size's instances whose optimal plan needs an agent to "
                                         "wait")),
)
"""The generator config as the kernel's bucket space: sizes are buckets (smallest, easiest first),
``data_ratio`` the share; more holes and more needed waits make instances harder."""

SUM_TOLERANCE = 1e-6
"""How far the data ratios may sum from 1 and still be accepted."""


def size_side(size: str) -> int:
    """``"5x5"`` → 5."""
    return int(size.split("x")[0])


class SizeParams(BaseModel):
    """Generator parameters of one map size."""

    model_config = ConfigDict(extra="forbid")

    data_ratio: float = Field(ge=BOUNDS["data_ratio"][0], le=BOUNDS["data_ratio"][1])
    """Share of the round's training instances drawn at this size (the 8 shares sum to 1)."""
    hole_ratio: float = Field(ge=BOUNDS["hole_ratio"][0], le=BOUNDS["hole_ratio"][1])
    """Expected share of the map's cells that are holes (the generator rounds per map)."""
    wait_ratio: float = Field(ge=BOUNDS["wait_ratio"][0], le=BOUNDS["wait_ratio"][1])
    """Share of this size's instances whose optimal cost cannot be reached without a wait."""


class GeneratorConfig(BaseModel):
    """The per-size generator configuration (the proposal an engineer edits)."""

    model_config = ConfigDict(extra="forbid")

    sizes: dict[str, SizeParams]
    """Parameters for each of the 8 sizes, keyed ``"3x3"`` … ``"10x10"``; all 8 are required."""

    @model_validator(mode="after")
    def _check(self) -> GeneratorConfig:
        missing = [s for s in SIZES if s not in self.sizes]
        extra = [s for s in self.sizes if s not in SIZES]
        if missing or extra:
            raise ValueError(
                f"sizes must be exactly {list(SIZES)}; missing {missing}, unknown {extra}"
            )
        total = sum(p.data_ratio for p in self.sizes.values())
        if abs(total - 1.0) > SUM_TOLERANCE:
            raise ValueError(f"data_ratio values must sum to 1 (±{SUM_TOLERANCE}); they sum to {total:.6g}")
        # Canonical order, so that dumps and hashes do not depend on the input order.
        self.sizes = {s: self.sizes[s] for s in SIZES}
        return self

    def table(self) -> str:
        """A compact fixed-width table (for prompts and logs)."""
        lines = ["size   data  holes  wait"]
        for s, p in self.sizes.items():
            lines.append(f"{s:<6} {p.data_ratio:5.3f} {p.hole_ratio:5.3f} {p.wait_ratio:5.3f}")
        return "\n".join(lines)


def uniform_config(hole_ratio: float = 0.2, wait_ratio: float = 0.0) -> GeneratorConfig:
    """Equal data shares and the same hole/wait ratio at every size."""
    return GeneratorConfig(sizes={
        s: SizeParams(data_ratio=1.0 / len(SIZES), hole_ratio=hole_ratio, wait_ratio=wait_ratio)
        for s in SIZES
    })


def random_config(rng: np.random.Generator, limits: ProposalLimits | None = None) -> GeneratorConfig:
    """The paper's cold start: hole and wait ratios uniform over their bounds, data ratios from a
    flat Dirichlet (uniform over the simplex). With ``limits``: the Dirichlet over the allowed
    sizes only (the rest get 0) and the ratios uniform over the narrowed ranges; without, the
    draws are the paper's (the same random stream as before limits existed)."""
    allowed = list(SIZES) if limits is None else limits.sizes
    lo_h, hi_h = BOUNDS["hole_ratio"] if limits is None else limits.hole_ratio
    lo_w, hi_w = BOUNDS["wait_ratio"] if limits is None else limits.wait_ratio
    drawn = rng.dirichlet(np.ones(len(allowed)))
    drawn = drawn / drawn.sum()
    shares = dict(zip(allowed, drawn))
    sizes = {}
    for s in SIZES:
        sizes[s] = SizeParams(
            data_ratio=float(shares.get(s, 0.0)),
            hole_ratio=float(rng.uniform(lo_h, hi_h)),
            wait_ratio=float(rng.uniform(lo_w, hi_w)),
        )
    _fix_sum([sizes[s] for s in SIZES])
    return GeneratorConfig(sizes=sizes)


def _range(name: str, value: tuple[float, float]) -> tuple[float, float]:
    lo, hi = value
    blo, bhi = BOUNDS[name]
    if not blo <= lo <= hi <= bhi:
        raise ValueError(f"{name} range must satisfy {blo} <= low <= high <= {bhi}; got [{lo}, {hi}]")
    return float(lo), float(hi)


class ProposalLimits(BaseModel):
    """A narrowed proposal space (module docstring): what a run's engineers may give data to."""

    model_config = ConfigDict(extra="forbid")

    sizes: list[str] = Field(default_factory=lambda: list(SIZES))
    """Map sizes that may receive training data (a non-empty subset of the 8; the others keep a
    share of 0)."""
    hole_ratio: tuple[float, float] = BOUNDS["hole_ratio"]
    """[low, high] of every size's hole ratio, inside ``BOUNDS["hole_ratio"]``."""
    wait_ratio: tuple[float, float] = BOUNDS["wait_ratio"]
    """[low, high] of every size's wait ratio, inside ``BOUNDS["wait_ratio"]``."""

    @field_validator("sizes")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SIZES]
        if unknown or not value:
            raise ValueError(f"sizes must be a non-empty subset of {list(SIZES)}; unknown: {unknown}")
        return [s for s in SIZES if s in value]

    @field_validator("hole_ratio")
    @classmethod
    def _holes(cls, value: tuple[float, float]) -> tuple[float, float]:
        return _range("hole_ratio", value)

    @field_validator("wait_ratio")
    @classmethod
    def _waits(cls, value: tuple[float, float]) -> tuple[float, float]:
        return _range("wait_ratio", value)

    @property
    def unrestricted(self) -> bool:
        return (self.sizes == list(SIZES) and self.hole_ratio == BOUNDS["hole_ratio"]
                and self.wait_ratio == BOUNDS["wait_ratio"])

    def random(self, rng: np.random.Generator) -> GeneratorConfig:
        """``random_config`` inside these limits (the paper's draws when unrestricted)."""
        return random_config(rng, None if self.unrestricted else self)

    def violations(self, config: GeneratorConfig) -> list[str]:
        """Where ``config`` leaves these limits (empty: inside)."""
        out = []
        for s, p in config.sizes.items():
            if s not in self.sizes and p.data_ratio > 0:
                out.append(f"{s} has data_ratio {p.data_ratio:g} but is not among the allowed sizes {self.sizes}")
            for f in ("hole_ratio", "wait_ratio"):
                lo, hi = getattr(self, f)
                if s in self.sizes and not lo <= getattr(p, f) <= hi:
                    out.append(f"{s} {f} {getattr(p, f):g} is outside [{lo:g}, {hi:g}]")
        return out

    def apply(self, config: GeneratorConfig) -> tuple[GeneratorConfig, list[Change]]:
        """``config`` moved inside these limits, with one ``Change`` per edited field."""
        if self.unrestricted:
            return config, []
        values = {s: config.sizes[s].model_dump() for s in SIZES}
        changes: list[Change] = []
        kept = sum(values[s]["data_ratio"] for s in self.sizes)
        for s in SIZES:
            old = values[s]["data_ratio"]
            if s not in self.sizes:
                new = 0.0
                why = f"size outside the allowed sizes {self.sizes}"
            elif kept <= 0.0:
                new = 1.0 / len(self.sizes)
                why = "every share was on excluded sizes; equal shares over the allowed sizes"
            else:
                new = old / kept
                why = "renormalised after moving shares off excluded sizes"
            if abs(new - old) > 1e-12:
                values[s]["data_ratio"] = new
                changes.append(Change(path=f"sizes.{s}.data_ratio", proposed=old, applied=new, reason=why))
            for f in ("hole_ratio", "wait_ratio"):
                lo, hi = getattr(self, f)
                x = values[s][f]
                if s in self.sizes and not lo <= x <= hi:
                    values[s][f] = min(hi, max(lo, x))
                    changes.append(Change(path=f"sizes.{s}.{f}", proposed=x, applied=values[s][f],
                                          reason=f"clipped into the run's limits [{lo:g}, {hi:g}]"))
        if not changes:
            return config, []
        params = [SizeParams(**values[s]) for s in SIZES]
        _fix_sum(params)
        return GeneratorConfig(sizes=dict(zip(SIZES, params))), changes


def _fix_sum(params: list[SizeParams]) -> None:
    """Push float rounding residue into the largest share so the sum is 1 within 1e-12."""
    total = sum(p.data_ratio for p in params)
    big = max(params, key=lambda p: p.data_ratio)
    big.data_ratio = min(1.0, max(0.0, big.data_ratio + (1.0 - total)))


# --------------------------------------------------------------------------------------------
# project
# --------------------------------------------------------------------------------------------

_SIZE_KEY = re.compile(r"^\s*(?:size\s*[_-]?\s*)?(\d{1,2})(?:\s*[x×*]\s*(\d{1,2}))?\s*$", re.I)


def _size_name(key: Any) -> str | None:
    """Map lenient size keys (``"5x5"``, ``"5"``, ``5``, ``"5×5"``, ``"size_5"``) to ``"5x5"``."""
    if isinstance(key, bool):
        return None
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        if isinstance(key, float) and not key.is_integer():
            return None
        name = f"{int(key)}x{int(key)}"
        return name if name in SIZES else None
    if not isinstance(key, str):
        return None
    m = _SIZE_KEY.match(key)
    if not m:
        return None
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) else a
    if a != b:
        return None
    name = f"{a}x{a}"
    return name if name in SIZES else None


def _number(value: Any) -> float | None:
    """A finite float from a JSON number or numeric string; ``None`` if not usable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        x = float(value)
    elif isinstance(value, str):
        s = value.strip().rstrip("%")
        try:
            x = float(s)
        except ValueError:
            return None
        if value.strip().endswith("%"):
            x /= 100.0
    else:
        return None
    return x if math.isfinite(x) else None


def _decode_text(raw: str) -> Any:
    """A JSON object embedded in text (an engineer's reply), else the text itself."""
    i, j = raw.find("{"), raw.rfind("}")
    if 0 <= i < j:
        try:
            return json.loads(raw[i:j + 1])
        except (ValueError, RecursionError):
            pass
    return raw


def _extract_sizes(raw: Any) -> dict[str, Any] | None:
    """Find the per-size mapping in a raw proposal, or ``None`` if there is none."""
    if isinstance(raw, str):
        raw = _decode_text(raw)
    if not isinstance(raw, dict):
        return None
    inner = raw.get("sizes") if "sizes" in raw else None
    if isinstance(inner, dict):
        candidate = inner
    elif isinstance(inner, list):
        # [{"size": "5x5", "data_ratio": ...}, ...]
        candidate = {}
        for item in inner:
            if isinstance(item, dict) and "size" in item:
                candidate[item["size"]] = item
    else:
        candidate = raw
    out: dict[str, Any] = {}
    for key, value in candidate.items():
        name = _size_name(key)
        if name is not None:
            out[name] = value
    return out or None


def project(raw: Any, previous: GeneratorConfig) -> tuple[GeneratorConfig, list[Change]]:
    """Force ``raw`` (any JSON value) into the legal space. Never raises.

    Rules, in order: find the per-size mapping (``{"sizes": {...}}``, or a top-level mapping of
    sizes, keys ``"5x5"``/``"5"``/``5``; a string is searched for an embedded JSON object); a
    missing size or field, or a non-numeric value (numeric strings and ``"25%"`` are numbers),
    takes the previous value; hole and wait ratios are clipped into ``BOUNDS``; negative data
    ratios become 0 and the data ratios are then renormalised to sum to 1, which keeps their
    proportions (so percentages like 25/25/50 work); all zero → the previous data ratios. Unusable output (not a dict, no size found)
    → the previous config and a single ``Change`` at path ``""`` saying so.

    The returned changes are exactly the fields whose applied value differs from what was
    proposed (a missing field counts as proposed ``None``).
    """
    try:
        return _project(raw, previous)
    except Exception as exc:  # pragma: no cover - defensive: project must never raise
        return previous.model_copy(deep=True), [
            Change(path="", proposed=_jsonable(raw), applied=previous.model_dump(),
                   reason=f"proposal could not be projected ({type(exc).__name__}); kept previous config")
        ]


def _jsonable(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return repr(x)


def _project(raw: Any, previous: GeneratorConfig) -> tuple[GeneratorConfig, list[Change]]:
    sizes = _extract_sizes(raw)
    if sizes is None:
        what = type(raw).__name__ if not isinstance(raw, dict) else "dict without any size key"
        return previous.model_copy(deep=True), [
            Change(path="", proposed=_jsonable(raw), applied=previous.model_dump(),
                   reason=f"unusable proposal ({what}); kept the previous config")
        ]

    proposed: dict[tuple[str, str], Any] = {}   # (size, field) -> raw proposed value (None: missing)
    values: dict[tuple[str, str], float] = {}
    reasons: dict[tuple[str, str], str] = {}
    for s in SIZES:
        entry = sizes.get(s)
        for f in FIELDS:
            proposed[(s, f)], values[(s, f)], reason = _field_value(entry, f, getattr(previous.sizes[s], f))
            if reason is not None:
                reasons[(s, f)] = reason

    total = _renormalise(values, reasons, previous)
    params = {s: SizeParams(**{f: values[(s, f)] for f in FIELDS}) for s in SIZES}
    if abs(total - 1.0) > 1e-9:
        _fix_sum([params[s] for s in SIZES])
    config = GeneratorConfig(sizes=params)

    changes = []
    for s in SIZES:
        for f in FIELDS:
            applied = getattr(config.sizes[s], f)
            p = proposed[(s, f)]
            same = (isinstance(p, (int, float)) and not isinstance(p, bool) and float(p) == applied)
            if not same:
                changes.append(Change(path=f"sizes.{s}.{f}", proposed=p, applied=applied,
                                      reason=reasons.get((s, f), "normalised to a number")))
    return config, changes


def _field_value(entry: Any, f: str, prev: float) -> tuple[Any, float, str | None]:
    """One field of one size: what was proposed (``None``: missing), the value it becomes
    (``prev`` when missing or not a number; ratios clipped into ``BOUNDS``) and why, if it is not
    the proposed number."""
    if not isinstance(entry, dict) or f not in entry:
        return None, prev, "missing; filled from previous config"
    rawv = entry[f]
    x = _number(rawv)
    if x is None:
        return _jsonable(rawv), prev, "not a number; kept previous value"
    lo, hi = BOUNDS[f]
    reason = None
    if f == "data_ratio":
        # Shares only matter relative to each other: clip negatives, and let the
        # renormalisation scale large values (e.g. percentages) proportionally.
        if x < lo:
            reason = f"clipped to {lo}"
            x = lo
    elif x < lo or x > hi:
        reason = f"clipped into [{lo}, {hi}]"
        x = min(hi, max(lo, x))
    return _jsonable(rawv), x, reason


def _renormalise(values: dict[tuple[str, str], float], reasons: dict[tuple[str, str], str],
                 previous: GeneratorConfig) -> float:
    """Scale the data ratios to sum to 1 (all zero: the previous ones); returns their sum before."""
    total = sum(values[(s, "data_ratio")] for s in SIZES)
    if total <= 0.0:
        for s in SIZES:
            values[(s, "data_ratio")] = previous.sizes[s].data_ratio
            reasons[(s, "data_ratio")] = "all data ratios were zero; kept previous data ratios"
    elif abs(total - 1.0) > 1e-9:  # closer than that is float noise: leave the values alone
        for s in SIZES:
            values[(s, "data_ratio")] /= total
            reasons.setdefault((s, "data_ratio"), f"renormalised (data ratios summed to {total:.6g})")
    return total
