"""SPADE rewards and stabilisers as pure functions (the SPADE paper).

Every formula the co-training step uses lives here, free of models, sandboxes and state, so
each one is tested against the paper's worked numbers.

Designer reward for one environment e with privileged hint h, from G agent episodes without
the hint and G with it (returns R, win indicators W):

    regret(e)       = max(0, mean(R | h) - mean(R))                           (floored at 0)
    regret_term(e)  = clip(regret(e) / s, 0, 1)                    s = regret_scale = 0.15
    anchor(w)       = 1                                  if lo <= w <= hi        [lo, hi] = [0.4, 0.6]
                    = max(0, 1 - (lo - w) / ramp)        if w < lo               ramp = 0.25
                    = max(0, 1 - (w - hi) / ramp)        if w > hi
    blend(e)        = 0.4 * regret_term(e) + 0.6 * anchor(win_rate(e))
    reward(e)       = blend(e) - mean_{e' same skill in the batch} blend(e')  (mean-centred, no std)

Worked numbers: mean return 0.65 with the hint and 0.30 without → regret 0.35 (regret term 1);
anchor(0.15) = 0, anchor(0.275) = 0.5, anchor(0.4..0.6) = 1, anchor(0.85) = 0.

A design rejected at admission gets the configured penalty for its reason instead of the blend
(it is centred with its skill's other designs like any other reward).

Learning potential (the ablation that replaces regret; the public SPADE code's ``lp`` variant,
``LearningPotential`` / ``LPDifficultyController``): per environment, a fast and a slow
exponential moving average of the agent's mean unhinted return R_n at its n-th play,

    fast_1 = slow_1 = R_1                                        (first play: LP_1 = 0)
    fast_n = fast_{n-1} + a_fast (R_n - fast_{n-1}),   slow_n = slow_{n-1} + a_slow (R_n - slow_{n-1})
    LP_n   = |fast_n - slow_n| / (2 (a_fast - a_slow))           (a_fast > a_slow; 0.35, 0.15)

so LP measures how fast the return *changes* across plays: flat returns give 0 whatever their
level, a step of size D in the return gives LP = D / 2 one play later. The normalisation
1 / (2 (a_fast - a_slow)) is the public code's ``scale``. The ablation swaps only the regret for
LP and keeps the rest of the designer reward (the anchor included):

    reward_LP(e)    = 0.4 * clip(LP(e) / s, 0, 1) + 0.6 * anchor(win_rate(e))

with win_rate(e) the agent's win rate at the environment's latest play (then centred per skill).

Per-role advantages (stabiliser 1): samples of each role are normalised on their own,

    c_i = r_i - mean_{j in group(i)} r_j                 (GRPO group baseline)
    A_i = c_i / (std_{j in role(i)} c_j + eps)           (roles in ``std_roles`` only)
    A_i = c_i                                            (the other roles)

Agent groups are (environment, hint condition); the designer's group is its skill, so its
c_i is exactly the per-skill centred reward above. GRPO normalises by the group mean and std, and
the two roles are normalised separately, so the trainer divides both roles by their own std by
default; the public code's centred-only designer advantage (no std division) is the trainer's
``designer_advantage: centred``.

Truncated importance sampling (stabiliser 2): a designer sample generated k steps before it is
trained carries its behaviour log-probs; the per-token weight is

    w_t = min(exp(logp_now_t - logp_behaviour_t), cap)

and multiplies the token's policy-gradient term (as an advantage factor A_i * w_t, which is
the same thing for w_t >= 0 under PPO's min(ratio*A, clip(ratio)*A)).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Sequence

import numpy as np

REGRET_SCALE = 0.15
"""Regret that earns the full regret term (public code: clip(regret / 0.15, 0, 1))."""
REGRET_WEIGHT = 0.4
"""Weight of the regret term in the blend."""
ANCHOR_WEIGHT = 0.6
"""Weight of the difficulty anchor in the blend."""
ANCHOR_LOW, ANCHOR_HIGH, ANCHOR_RAMP = 0.4, 0.6, 0.25
"""Trapezoid: 1 on [0.4, 0.6], linear to 0 over 0.25 on each side."""


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; 0.0 for an empty sequence (no plays gives no signal)."""
    return float(sum(values) / len(values)) if len(values) else 0.0


def std(values: Sequence[float]) -> float:
    """Population standard deviation; 0.0 for an empty sequence."""
    if not len(values):
        return 0.0
    centre = mean(values)
    return float(math.sqrt(sum((v - centre) ** 2 for v in values) / len(values)))


def regret(returns_with_hint: Sequence[float], returns_without_hint: Sequence[float]) -> float:
    """max(0, mean(R | h) - mean(R))."""
    return max(0.0, mean(returns_with_hint) - mean(returns_without_hint))


def raw_regret(returns_with_hint: Sequence[float], returns_without_hint: Sequence[float]) -> float:
    """mean(R | h) - mean(R), unfloored (logged: at small scale it stays negative for long)."""
    return mean(returns_with_hint) - mean(returns_without_hint)


def regret_term(regret_value: float, scale: float = REGRET_SCALE) -> float:
    """clip(regret / scale, 0, 1)."""
    if scale <= 0:
        raise ValueError("scale must be positive")
    return float(min(1.0, max(0.0, regret_value / scale)))


def anchor(win_rate: float, low: float = ANCHOR_LOW, high: float = ANCHOR_HIGH,
           ramp: float = ANCHOR_RAMP) -> float:
    """Trapezoid on the agent's win rate: 1 on [low, high], linear to 0 over ``ramp`` outside."""
    if not low <= high or ramp <= 0:
        raise ValueError("need low <= high and ramp > 0")
    if win_rate < low:
        return float(max(0.0, 1.0 - (low - win_rate) / ramp))
    if win_rate > high:
        return float(max(0.0, 1.0 - (win_rate - high) / ramp))
    return 1.0


def blend(regret_part: float, anchor_part: float, regret_weight: float = REGRET_WEIGHT,
          anchor_weight: float = ANCHOR_WEIGHT) -> float:
    """regret_weight * regret_term + anchor_weight * anchor."""
    return float(regret_weight * regret_part + anchor_weight * anchor_part)


def designer_reward(returns_with_hint: Sequence[float], returns_without_hint: Sequence[float],
                    win_rate: float, *, scale: float = REGRET_SCALE, regret_weight: float = REGRET_WEIGHT,
                    anchor_weight: float = ANCHOR_WEIGHT, low: float = ANCHOR_LOW,
                    high: float = ANCHOR_HIGH, ramp: float = ANCHOR_RAMP) -> dict[str, float]:
    """The uncentred designer reward of one admitted environment and its parts."""
    r = regret(returns_with_hint, returns_without_hint)
    term = regret_term(r, scale)
    a = anchor(win_rate, low, high, ramp)
    return {"regret": r, "raw_regret": raw_regret(returns_with_hint, returns_without_hint),
            "regret_term": term, "anchor": a, "reward": blend(term, a, regret_weight, anchor_weight)}


def learning_potential_reward(lp: float, win_rate: float, *, scale: float = REGRET_SCALE,
                              regret_weight: float = REGRET_WEIGHT, anchor_weight: float = ANCHOR_WEIGHT,
                              low: float = ANCHOR_LOW, high: float = ANCHOR_HIGH,
                              ramp: float = ANCHOR_RAMP) -> dict[str, float]:
    """The learning-potential ablation's uncentred designer reward and its parts: the blend with
    the learning potential in the regret's place, clip(LP / scale, 0, 1), and the same anchor."""
    term = regret_term(lp, scale)
    a = anchor(win_rate, low, high, ramp)
    return {"learning_potential": float(lp), "lp_term": term, "anchor": a,
            "reward": blend(term, a, regret_weight, anchor_weight)}


def center_by_group(values: Sequence[float], groups: Sequence[Hashable]) -> list[float]:
    """values_i - mean of the values sharing groups_i (per-skill centring; no std division)."""
    if len(values) != len(groups):
        raise ValueError("values and groups differ in length")
    sums: dict[Hashable, list[float]] = {}
    for v, g in zip(values, groups, strict=True):
        sums.setdefault(g, []).append(float(v))
    means = {g: mean(vs) for g, vs in sums.items()}
    return [float(v) - means[g] for v, g in zip(values, groups, strict=True)]


def ema_update(previous: float, value: float, alpha: float) -> float:
    """previous + alpha * (value - previous)."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError("alpha must be in (0, 1]")
    return float(previous + alpha * (value - previous))


def lp_update(previous: Sequence[float] | None, value: float, fast_rate: float,
              slow_rate: float) -> tuple[float, float]:
    """(fast, slow) after one more play with mean return ``value``; both start at the first value."""
    if previous is None:
        return float(value), float(value)
    return ema_update(previous[0], value, fast_rate), ema_update(previous[1], value, slow_rate)


def learning_potential(fast: float, slow: float, fast_rate: float, slow_rate: float) -> float:
    """|fast - slow| / (2 (fast_rate - slow_rate)): how fast the agent's return is still moving."""
    if not fast_rate > slow_rate:
        raise ValueError("fast_rate must be larger than slow_rate")
    return float(abs(fast - slow) / (2.0 * (fast_rate - slow_rate)))


def role_advantages(rewards: Sequence[float], groups: Sequence[Hashable], roles: Sequence[str], *,
                    std_roles: Collection[str] | None = None, eps: float = 1e-4) -> list[float]:
    """Group-centred rewards; those of a role in ``std_roles`` (``None``: every role) are divided
    by the std of that role's centred rewards.

    ``groups`` are compared within a role only (the same key in two roles is two groups).
    """
    if not len(rewards) == len(groups) == len(roles):
        raise ValueError("rewards, groups and roles differ in length")
    centred = center_by_group(rewards, [(role, g) for role, g in zip(roles, groups, strict=True)])
    out = list(centred)
    for role in set(roles) if std_roles is None else set(roles) & set(std_roles):
        idx = [i for i, r in enumerate(roles) if r == role]
        std = float(np.std([centred[i] for i in idx])) if len(idx) > 1 else 0.0
        for i in idx:
            out[i] = centred[i] / (std + eps)
    return out


def truncated_is_weights(logp_now: np.ndarray, logp_behaviour: np.ndarray, cap: float,
                         mask: np.ndarray | None = None) -> np.ndarray:
    """Per-token min(exp(logp_now - logp_behaviour), cap); masked-out tokens get weight 1."""
    if cap <= 0:
        raise ValueError("cap must be positive")
    now = np.asarray(logp_now, dtype=np.float64)
    old = np.asarray(logp_behaviour, dtype=np.float64)
    # Clamp the exponent so a very stale sample cannot overflow before truncation.
    weights = np.minimum(np.exp(np.minimum(now - old, math.log(cap) + 1.0)), cap)
    if mask is not None:
        weights = np.where(np.asarray(mask, dtype=bool), weights, 1.0)
    return weights


def win_rate(wins: Sequence[bool]) -> float:
    """Share of won episodes (0.0 when there are none)."""
    return mean([1.0 if w else 0.0 for w in wins])
