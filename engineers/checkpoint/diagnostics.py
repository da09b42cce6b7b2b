"""Per-round diagnostics of the checkpoint engineer (stored in ``design.json``). Pure functions.

All configs are dumped proposals of a declared ``BucketSpace`` (MAPF: ``{"sizes": {size:
{data_ratio, hole_ratio, wait_ratio}}}``; reasoning_gym: ``{"buckets": {"<task>:<level>":
{share}}}``); ``container`` names the field holding the buckets. ``rates`` is the success rate per
bucket the round's eval produced (``context.result_rates``: MAPF's valid rate per size averaged
over the eval suites, weighted by instance count; otherwise the eval's ``bucket_scores``).
``groups`` are the space's environments, each a list of buckets easiest first (MAPF: one group of
all sizes; reasoning_gym: one group per task, its levels).

* ``edit_granularity(before, after, tolerance, local_max_sizes, container)`` — the (bucket, field)
  cells whose value moved by more than ``tolerance``; the buckets they touch; scope ``none`` (no
  cell), ``local`` (at most ``local_max_sizes`` buckets) or ``global``. Computed twice by the
  engineer: on the model's own proposal (missing cells count as unchanged; before
  renormalisation, so it shows the model's intent) and on the projected config (what will actually
  train; renormalisation can spread a one-bucket data edit over all buckets).
* ``frontier_groups(valid, order)`` — the competence frontier of one group is where the rate
  crosses 50% between neighbouring buckets (easiest to hardest). ``at`` = both buckets of every
  crossing; ``below`` = the remaining buckets with rate ≥ 50% (competent: easier side), ``above``
  = the remaining buckets with rate < 50%. Without a crossing: all ≥ 50% → ``at`` is the hardest
  bucket; all < 50% → ``at`` is the easiest. ``frontier_groups_of(rates, groups)`` joins the
  groups' results.
* ``frontier_movement(rates, before, after, space, groups)`` — share mass below / at / above the
  frontier before and after, and the change; plus ``no_signal`` buckets (rate ≥ 95% or rate = 0,
  where GRPO groups are all-correct or all-wrong) and on which of them a knob was moved toward
  easier (``eased_on_no_signal``; MAPF: hole or wait ratio lowered).
* ``summary_consistency(summary, rates, groups)`` — a keyword heuristic: each sentence of the
  summary that names buckets (MAPF sizes ``5x5``, ``5×5``, ``size 5``; any space's bucket names
  such as ``gcd:1``; a group's name such as ``gcd``, which stands for the mean rate of its buckets)
  and claims mastery (mastered, easy, solved, strong, good, well, high) or difficulty (hard,
  difficult, struggle, fail, weak, poor, low, bad) is checked against F: a mastery claim
  contradicts when the rate is < 50%, a difficulty claim when it is ≥ 80%. A negation (not, no,
  n't, never) within the three words before the keyword flips the claim. Reports claims and
  contradictions as (bucket, claim[, rate]) and ``contradicts``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from curriculum.core.records import Diagnostics
from curriculum.core.spaces import BucketSpace

FRONTIER_THRESHOLD = 0.5
NO_SIGNAL_HIGH = 0.95
HARD_CLAIM_CONTRADICTS_AT = 0.8


def _cells(config: Mapping[str, Any] | None, container: str) -> dict[tuple[str, str], float]:
    buckets = (config or {}).get(container) if isinstance(config, Mapping) else None
    out: dict[tuple[str, str], float] = {}
    if not isinstance(buckets, Mapping):
        return out
    for bucket, params in buckets.items():
        if isinstance(params, Mapping):
            for field, value in params.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[(str(bucket), str(field))] = float(value)
    return out


def edit_granularity(before: Mapping[str, Any], after: Mapping[str, Any] | None, *,
                     tolerance: float = 0.02, local_max_sizes: int = 3, container: str = "sizes") -> Diagnostics:
    """Cells of ``after`` that differ from ``before`` by more than ``tolerance`` (see docstring)."""
    old, new = _cells(before, container), _cells(after, container)
    changed = [[bucket, field] for (bucket, field), value in new.items()
               if (bucket, field) in old and abs(value - old[(bucket, field)]) > tolerance]
    buckets = list(dict.fromkeys(bucket for bucket, _ in changed))
    scope = "none" if not changed else ("local" if len(buckets) <= local_max_sizes else "global")
    return {"count": len(changed), "cells": changed, "buckets": buckets, "scope": scope}


def frontier_groups(valid: Mapping[str, float], order: Sequence[str]) -> dict[str, list[str]]:
    """Buckets of one group below / at / above the 50% crossing (see module docstring)."""
    buckets = [s for s in order if s in valid]
    if not buckets:
        return {"below": [], "at": [], "above": []}
    ok = [valid[s] >= FRONTIER_THRESHOLD for s in buckets]
    at: set[str] = set()
    for i in range(len(buckets) - 1):
        if ok[i] != ok[i + 1]:
            at.update((buckets[i], buckets[i + 1]))
    if not at:
        at.add(buckets[-1] if all(ok) else buckets[0])
    below = [s for s, good in zip(buckets, ok) if good and s not in at]
    above = [s for s, good in zip(buckets, ok) if not good and s not in at]
    return {"below": below, "at": [s for s in buckets if s in at], "above": above}


def frontier_groups_of(rates: Mapping[str, float], groups: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """``frontier_groups`` of every group, joined (group order, then easiest first)."""
    joined: dict[str, list[str]] = {"below": [], "at": [], "above": []}
    for order in groups.values():
        for side, buckets in frontier_groups(rates, order).items():
            joined[side] += buckets
    return joined


def frontier_movement(rates: Mapping[str, float], before: Mapping[str, Any], after: Mapping[str, Any],
                      space: BucketSpace, groups: Mapping[str, Sequence[str]] | None = None) -> Diagnostics:
    """Share mass relative to the competence frontier, before and after (see docstring)."""
    groups = groups or {"all": space.buckets}
    sides = frontier_groups_of(rates, groups)
    old, new = _cells(before, space.container), _cells(after, space.container)

    def mass(cells: dict[tuple[str, str], float], buckets: list[str]) -> float:
        return round(sum(cells.get((b, space.share_key), 0.0) for b in buckets), 6)

    mass_before = {g: mass(old, buckets) for g, buckets in sides.items()}
    mass_after = {g: mass(new, buckets) for g, buckets in sides.items()}
    order = [b for b in space.buckets if b in rates]
    no_signal = [b for b in order if rates[b] >= NO_SIGNAL_HIGH or rates[b] == 0.0]
    harder = {"higher": 1.0, "lower": -1.0, "none": 0.0}
    eased = [[b, k.name] for b in no_signal for k in space.knobs
             if (b, k.name) in old and (b, k.name) in new
             and (new[(b, k.name)] - old[(b, k.name)]) * harder[k.harder] < -1e-9]
    return {
        "rate": {b: round(rates[b], 4) for b in order},
        "groups": sides,
        "mass_before": mass_before,
        "mass_after": mass_after,
        "mass_delta": {g: round(mass_after[g] - mass_before[g], 6) for g in sides},
        "no_signal_buckets": no_signal,
        "eased_on_no_signal": eased,
    }


_MASTERED = ("mastered", "master", "easy", "easier", "solved", "solve", "strong", "good", "well",
             "high", "perfect", "competent", "confident")
_HARD = ("hard", "harder", "difficult", "struggle", "struggling", "fail", "fails", "failing",
         "weak", "poor", "low", "bad", "unsolved", "trouble")
_NEGATIONS = ("not", "no", "never", "n't", "hardly")
_SIZE_MENTION = re.compile(r"\b(\d{1,2})\s*[x×]\s*(\d{1,2})\b|\bsizes?\s+(\d{1,2})\b", re.I)
_WORD = re.compile(r"[a-z']+")


def _mentions(sentence: str, names: Sequence[str]) -> list[str]:
    """MAPF sizes (normalised to ``NxN``) and the given bucket or group names the sentence names."""
    found = []
    for m in _SIZE_MENTION.finditer(sentence):
        if m.group(1) and m.group(1) != m.group(2):
            continue
        side = int(m.group(1) or m.group(3))
        found.append(f"{side}x{side}")
    lowered = sentence.lower()
    for name in sorted(names, key=len, reverse=True):  # "gcd:1" before "gcd"
        pattern = rf"(?<![\w:]){re.escape(name.lower())}(?![\w:])"
        if re.search(pattern, lowered):
            found.append(name)
            lowered = re.sub(pattern, " ", lowered)
    return list(dict.fromkeys(found))


def summary_claims(summary: str, names: Sequence[str] = ()) -> list[dict[str, Any]]:
    """``[{"bucket", "claim": "mastered"|"hard", "sentence"}]`` from the summary (heuristic)."""
    claims: list[dict[str, Any]] = []
    for sentence in re.split(r"(?<=[.!?;])\s+|\n+", summary or ""):
        buckets = _mentions(sentence, names)
        if not buckets:
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
            for bucket in buckets:
                claims.append({"bucket": bucket, "claim": claim, "sentence": sentence.strip()[:200]})
    return claims


def summary_consistency(summary: str | None, rates: Mapping[str, float],
                        groups: Mapping[str, Sequence[str]] | None = None) -> Diagnostics:
    """Does the summary contradict F? (keyword heuristic of the module docstring)."""
    if not summary:
        return {"checked": False, "reason": "no summary", "claims": [], "contradictions": [],
                "contradicts": False}
    known = dict(rates)
    for group, buckets in (groups or {}).items():
        seen = [rates[b] for b in buckets if b in rates]
        if seen and group not in known:
            known[group] = sum(seen) / len(seen)
    names = [n for n in known if not _SIZE_MENTION.fullmatch(n)]
    # Sentences (model text) stay out of the record; the summary itself is stored next to it.
    claims = [{"bucket": c["bucket"], "claim": c["claim"]} for c in summary_claims(summary, names)]
    contradictions = []
    for c in claims:
        rate = known.get(c["bucket"])
        if rate is None:
            continue
        if (c["claim"] == "mastered" and rate < FRONTIER_THRESHOLD) or (
                c["claim"] == "hard" and rate >= HARD_CLAIM_CONTRADICTS_AT):
            contradictions.append({**c, "rate": round(rate, 4)})
    return {"checked": True, "claims": claims, "contradictions": contradictions,
            "contradicts": bool(contradictions)}
