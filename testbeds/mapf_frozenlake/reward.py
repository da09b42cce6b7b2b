"""The adaptive reward of the Trainee-to-Trainer paper: ``reward = w_acc · accuracy + w_len · length``.

* ``accuracy(valid, cost, optimal_cost)``: 0 unless all eight checks pass; with
  ``gap = cost − optimal_cost``: 1.0 at gap ≤ 0, falling linearly to 0.3 at ``gap = 2 ·
  optimal_cost`` (the saturation threshold) and 0.3 beyond; 0.5 when the optimum is unknown.
  (An optimum of 0 has a zero threshold: any positive gap gives 0.3.)
* ``length_reward(num_tokens)``: 0 up to 1500 tokens, linear down to −1 at 4096, −1 beyond.
* ``adaptive_weights(ema_short_fraction)``: (0.5, 0.5) below an EMA of 0.5, linear to (0.8, 0.2)
  at 0.9, (0.8, 0.2) from 0.9 on.

``AdaptiveReward`` keeps the EMA of the per-batch fraction of short responses (≤ the short
threshold): ``ema ← decay · ema + (1 − decay) · fraction``, with ``decay`` 0.9 by default (about
ten batches of memory; the papers give no value). Before the first batch the EMA is 0, i.e. the
cold start weighs brevity as much as correctness — the paper's motivation for the schedule.
"""

from __future__ import annotations

from typing import Any

SHORT_THRESHOLD = 1500
MAX_TOKENS = 4096


def accuracy(valid: bool, cost: int | None, optimal_cost: int | None) -> float:
    """Accuracy term (see module docstring)."""
    if not valid:
        return 0.0
    if optimal_cost is None or cost is None:
        return 0.5
    gap = cost - optimal_cost
    if gap <= 0:
        return 1.0
    threshold = 2 * optimal_cost
    if threshold <= 0 or gap >= threshold:
        return 0.3
    return 1.0 - 0.7 * gap / threshold


def length_reward(num_tokens: int, short_threshold: int = SHORT_THRESHOLD,
                  max_tokens: int = MAX_TOKENS) -> float:
    """Length term: 0 ≤ short_threshold, linear to −1 at max_tokens, −1 beyond."""
    if num_tokens <= short_threshold:
        return 0.0
    if num_tokens >= max_tokens:
        return -1.0
    return -(num_tokens - short_threshold) / (max_tokens - short_threshold)


def adaptive_weights(ema_short_fraction: float) -> tuple[float, float]:
    """(w_acc, w_len) from the EMA of the short-response fraction."""
    e = ema_short_fraction
    if e < 0.5:
        return (0.5, 0.5)
    if e >= 0.9:
        return (0.8, 0.2)
    a = 0.5 + 0.3 * (e - 0.5) / 0.4
    return (a, 1.0 - a)


class AdaptiveReward:
    """Reward with EMA-adapted weights; its state must be saved with the run."""

    def __init__(self, *, short_threshold: int = SHORT_THRESHOLD, max_tokens: int = MAX_TOKENS,
                 decay: float = 0.9, ema: float = 0.0) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError("decay must be in [0, 1)")
        if max_tokens <= short_threshold:
            raise ValueError("max_tokens must exceed short_threshold")
        self.short_threshold = short_threshold
        self.max_tokens = max_tokens
        self.decay = decay
        self.ema = ema
        self.batches = 0

    @property
    def weights(self) -> tuple[float, float]:
        return adaptive_weights(self.ema)

    def update(self, num_tokens_list: list[int]) -> float:
        """Fold one batch's short fraction into the EMA; returns the new EMA."""
        if not num_tokens_list:
            return self.ema
        frac = sum(n <= self.short_threshold for n in num_tokens_list) / len(num_tokens_list)
        self.ema = self.decay * self.ema + (1.0 - self.decay) * frac
        self.batches += 1
        return self.ema

    def __call__(self, verdict: Any, num_tokens: int) -> float:
        """Reward of one response given its ``Verdict`` and length in tokens."""
        w_acc, w_len = self.weights
        acc = accuracy(verdict.valid, verdict.cost, verdict.optimal_cost)
        return w_acc * acc + w_len * length_reward(num_tokens, self.short_threshold, self.max_tokens)

    def state_dict(self) -> dict[str, Any]:
        return {"ema": self.ema, "batches": self.batches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ema = float(state.get("ema", 0.0))
        self.batches = int(state.get("batches", 0))
