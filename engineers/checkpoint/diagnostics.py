"""Per-round diagnostics of the checkpoint engineer (stored in ``design.json``). Pure functions.

All configs are dumped MAPF generator configs (``{"sizes": {size: {field: value}}}``); all
breakdowns are dumped ``FailureBreakdown``s. Valid rates per size are averaged over the eval
suites, weighted by instance count (``context.valid_rates_by_size``).

* ``edit_granularity(before, after, tolerance, local_max_sizes)`` — the (size, field) cells whose
  value moved by more than ``tolerance``; the sizes they touch; scope ``none`` (no cell), ``local``
  (at most ``local_max_sizes`` sizes) or ``global``. Computed twice by the engineer: on the model's
  own proposal (missing cells count as unchanged; before renormalisation, so it shows the model's
  intent) and on the projected config (what will actually train; renormalisation can spread a
  one-size data edit over all sizes).
* ``frontier_groups(valid)`` — the competence frontier is where the valid rate crosses 50% between
  neighbouring sizes (smallest to largest). ``at`` = both sizes of every crossing; ``below`` = the
  remaining sizes with valid ≥ 50% (competent: easier side), ``above`` = the remaining sizes with
  valid < 50%. Without a crossing: all ≥ 50% → ``at`` is the largest size; all < 50% → ``at`` is
  the smallest size.
* ``frontier_movement(breakdown, before, after)`` — data-ratio mass below / at / above the frontier
  before and after, and the change; plus ``no_signal`` sizes (valid ≥ 95% or valid = 0, where
  GRPO groups are all-correct or all-wrong) and on which of them hole/wait ratios were lowered.
* ``summary_consistency(summary, breakdown)`` — a keyword heuristic: each sentence of the summary
  that names sizes (``5x5``, ``5×5``, ``size 5``) and claims mastery (mastered, easy, solved,
  strong, good, well, high) or difficulty (hard, difficult, struggle, fail, weak, poor, low, bad)
  is checked against F: a mastery claim contradicts when the size's valid rate is < 50%, a
  difficulty claim when it is ≥ 80%. A negation (not, no, n't, never) within the three words
  before the keyword flips the claim. Reports claims and contradictions as (size, claim[,
  valid_rate]) and ``contradicts``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engineers.checkpoint.context import valid_rates_by_size

FRONTIER_THRESHOLD = 0.5
NO_SIGNAL_HIGH = 0.95
HARD_CLAIM_CONTRADICTS_AT = 0.8


def _cells(config: Mapping[str, Any] | None) -> dict[tuple[str, str], float]:
    sizes = (config or {}).get("sizes") if isinstance(config, Mapping) else None
    out: dict[tuple[str, str], float] = {}
    if not isinstance(sizes, Mapping):
        return out
    for size, params in sizes.items():
        if isinstance(params, Mapping):
            for field, value in params.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[(str(size), str(field))] = float(value)
    return out


def edit_granularity(before: Mapping[str, Any], after: Mapping[str, Any] | None, *,
                     tolerance: float = 0.02, local_max_sizes: int = 3) -> dict[str, Any]:
    """Cells of ``after`` that differ from ``before`` by more than ``tolerance`` (see docstring)."""
    old, new = _cells(before), _cells(after)
    changed = [[size, field] for (size, field), value in new.items()
               if (size, field) in old and abs(value - old[(size, field)]) > tolerance]
    sizes = list(dict.fromkeys(size for size, _ in changed))
    scope = "none" if not changed else ("local" if len(sizes) <= local_max_sizes else "global")
    return {"count": len(changed), "cells": changed, "sizes": sizes, "scope": scope}


def frontier_groups(valid: Mapping[str, float], order: list[str]) -> dict[str, list[str]]:
    """Sizes below / at / above the 50% valid-rate crossing (see module docstring)."""
    sizes = [s for s in order if s in valid]
    if not sizes:
        return {"below": [], "at": [], "above": []}
    ok = [valid[s] >= FRONTIER_THRESHOLD for s in sizes]
    at: set[str] = set()
    for i in range(len(sizes) - 1):
        if ok[i] != ok[i + 1]:
            at.update((sizes[i], sizes[i + 1]))
    if not at:
        at.add(sizes[-1] if all(ok) else sizes[0])
    below = [s for s, good in zip(sizes, ok) if good and s not in at]
    above = [s for s, good in zip(sizes, ok) if not good and s not in at]
    return {"below": below, "at": [s for s in sizes if s in at], "above": above}


def _mass(config: Mapping[str, Any] | None, sizes: list[str]) -> float:
    cells = _cells(config)
    return round(sum(cells.get((s, "data_ratio"), 0.0) for s in sizes), 6)


def frontier_movement(breakdown: Mapping[str, Any], before: Mapping[str, Any],
                      after: Mapping[str, Any], order: list[str]) -> dict[str, Any]:
    """Data-ratio mass relative to the competence frontier, before and after (see docstring)."""
    valid = valid_rates_by_size(breakdown)
    groups = frontier_groups(valid, order)
    mass_before = {g: _mass(before, sizes) for g, sizes in groups.items()}
    mass_after = {g: _mass(after, sizes) for g, sizes in groups.items()}
    no_signal = [s for s in order if s in valid and (valid[s] >= NO_SIGNAL_HIGH or valid[s] == 0.0)]
    old, new = _cells(before), _cells(after)
    lowered = [[s, f] for s in no_signal for f in ("hole_ratio", "wait_ratio")
               if (s, f) in old and (s, f) in new and new[(s, f)] < old[(s, f)] - 1e-9]
    return {
        "valid_rate": {s: round(valid[s], 4) for s in order if s in valid},
        "groups": groups,
        "mass_before": mass_before,
        "mass_after": mass_after,
        "mass_delta": {g: round(mass_after[g] - mass_before[g], 6) for g in groups},
        "no_signal_sizes": no_signal,
        "hole_wait_lowered_on_no_signal": lowered,
    }


_MASTERED = ("mastered", "master", "easy", "easier", "solved", "solve", "strong", "good", "well",
             "high", "perfect", "competent", "confident")
_HARD = ("hard", "harder", "difficult", "struggle", "struggling", "fail", "fails", "failing",
         "weak", "poor", "low", "bad", "unsolved", "trouble")
_NEGATIONS = ("not", "no", "never", "n't", "hardly")
_SIZE_MENTION = re.compile(r"\b(\d{1,2})\s*[x×]\s*(\d{1,2})\b|\bsizes?\s+(\d{1,2})\b", re.I)
_WORD = re.compile(r"[a-z']+")


def summary_claims(summary: str) -> list[dict[str, Any]]:
    """``[{"size", "claim": "mastered"|"hard", "sentence"}]`` from the summary (heuristic)."""
    claims: list[dict[str, Any]] = []
    for sentence in re.split(r"(?<=[.!?;])\s+|\n+", summary or ""):
        sizes = []
        for m in _SIZE_MENTION.finditer(sentence):
            if m.group(1) and m.group(1) != m.group(2):
                continue
            side = int(m.group(1) or m.group(3))
            sizes.append(f"{side}x{side}")
        if not sizes:
            continue
        words = _WORD.findall(sentence.lower().replace("n't", " n't"))
        claim: str | None = None
        for i, word in enumerate(words):
            kind = "mastered" if word in _MASTERED else "hard" if word in _HARD else None
            if kind is None:
                continue
            if any(w in _NEGATIONS for w in words[max(0, i - 3):i]):
                kind = "hard" if kind == "mastered" else "mastered"
            claim = kind
            break
        if claim:
            for size in dict.fromkeys(sizes):
                claims.append({"size": size, "claim": claim, "sentence": sentence.strip()[:200]})
    return claims


def summary_consistency(summary: str | None, breakdown: Mapping[str, Any]) -> dict[str, Any]:
    """Does the summary contradict F? (keyword heuristic of the module docstring)."""
    if not summary:
        return {"checked": False, "reason": "no summary", "claims": [], "contradictions": [],
                "contradicts": False}
    valid = valid_rates_by_size(breakdown)
    # Sentences (model text) stay out of the record; the summary itself is stored next to it.
    claims = [{"size": c["size"], "claim": c["claim"]} for c in summary_claims(summary)]
    contradictions = []
    for c in claims:
        rate = valid.get(c["size"])
        if rate is None:
            continue
        if (c["claim"] == "mastered" and rate < FRONTIER_THRESHOLD) or (
                c["claim"] == "hard" and rate >= HARD_CLAIM_CONTRADICTS_AT):
            contradictions.append({**c, "valid_rate": round(rate, 4)})
    return {"checked": True, "claims": claims, "contradictions": contradictions,
            "contradicts": bool(contradictions)}
