"""GRPO's objective as pure tensor functions: group-relative advantages and the clipped loss.

For one prompt with G sampled completions scored r_1..r_G (TRL's ``GRPOTrainer`` formulas)::

    A_i = (r_i - mean(r_1..G)) / (std(r_1..G) + 1e-4)        scale_rewards="group"
    A_i = (r_i - mean(r_1..G)) / (std(all rewards) + 1e-4)   scale_rewards="batch"
    A_i =  r_i - mean(r_1..G)                                scale_rewards="none"

(std with Bessel's correction, as ``torch.std``), and per completion token t of completion i,
with rho_t = exp(log pi(y_t) - log pi_old(y_t))::

    l_{i,t} = -min(rho_t A_i, clip(rho_t, 1 - eps, 1 + eps) A_i)

aggregated by ``loss_type``: ``grpo`` (mean over each completion's tokens, then over
completions), ``bnpo`` / ``dapo`` (mean over all completion tokens of the batch), ``dr_grpo``
(sum over tokens / (completions x max completion length)). No KL term: the trainers that use
these functions run with beta = 0 (the CPU configs' setting).

``trainers/grpo/trainer.py`` gets the same objective from TRL itself; ``trainers/small`` computes it
with these functions, so the two optimise one formula (``tests/small/test_objective_matches_trl.py``
checks the loss against ``GRPOTrainer._compute_loss`` on one batch, for each loss type).
"""

from __future__ import annotations

from typing import Any, Literal

LossType = Literal["grpo", "dapo", "dr_grpo", "bnpo"]
ScaleRewards = Literal["group", "batch", "none"]

STD_EPS = 1e-4
"""Added to the std before dividing (TRL's constant)."""


def group_advantages(rewards: Any, group_size: int, scale: ScaleRewards = "group") -> Any:
    """Advantages (N,) of rewards (N,) laid out as N / G consecutive groups of ``group_size``."""
    import torch

    r = torch.as_tensor(rewards, dtype=torch.float32)
    if r.dim() != 1 or r.numel() % group_size:
        raise ValueError(f"rewards must be 1-D with a multiple of group_size={group_size} entries "
                         f"(got shape {tuple(r.shape)})")
    grouped = r.view(-1, group_size)                                     # (N/G, G)
    centred = (grouped - grouped.mean(dim=1, keepdim=True)).flatten()   # (N,)
    if scale == "none":
        return centred
    if scale == "group":
        std = grouped.std(dim=1).repeat_interleave(group_size) if group_size > 1 else torch.zeros_like(r)
    else:
        std = r.std().expand_as(r) if r.numel() > 1 else torch.zeros_like(r)
    return centred / (std + STD_EPS)


def clipped_token_loss(logp: Any, old_logp: Any, advantages: Any, epsilon: float) -> Any:
    """l_{i,t} (B, T) from log-probs (B, T) under the current and the sampling policy and A (B,)."""
    import torch

    ratio = torch.exp(logp - old_logp)                                  # (B, T)
    adv = advantages.unsqueeze(1)                                       # (B, 1)
    return -torch.min(ratio * adv, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * adv)


def aggregate(token_loss: Any, mask: Any, loss_type: LossType, max_completion_length: int) -> Any:
    """The scalar loss from per-token losses (B, T) over the completion-token mask (B, T)."""
    mask = mask.to(token_loss.dtype)
    summed = token_loss * mask
    if loss_type == "grpo":
        return (summed.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).mean()
    if loss_type in ("bnpo", "dapo"):
        return summed.sum() / mask.sum().clamp(min=1.0)
    return summed.sum() / (token_loss.shape[0] * max_completion_length)


def clip_fraction(logp: Any, old_logp: Any, advantages: Any, mask: Any, epsilon: float) -> float:
    """Share of completion tokens whose ratio the clip bounds (the gradient is cut there)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(1)
    clipped = ((ratio < 1 - epsilon) & (adv < 0)) | ((ratio > 1 + epsilon) & (adv > 0))
    m = mask.bool()
    return float(clipped[m].float().mean()) if m.any() else 0.0
