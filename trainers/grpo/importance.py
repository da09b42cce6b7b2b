"""The vLLM sampler's importance-sampling correction, computed from the loss' own forward pass.

TRL corrects the mismatch between the sampler's log-probs and the trainer's by weighting each
token's loss with

    rho_t = exp(logp_trainer(y_t) - logp_sampler(y_t))            # ``token_*`` modes, (B, T)
    rho   = exp(sum_t [logp_trainer(y_t) - logp_sampler(y_t)])    # ``sequence_*`` modes, (B, 1)

truncated into [clip_min, clip_max] (``*_truncate``) or set to 0 outside it (``*_mask``), and
detached: rho is a weight, not a path for gradients. TRL takes logp_trainer from a no-grad forward
over every sampled completion right after generation (``old_per_token_logps``). When the step is
on policy (one optimizer step per generation batch, ``num_iterations == 1``), no weight changes
between that pass and the loss' forward, which computes the same log-probs with gradients: the
no-grad pass is a second forward of the same numbers. ``importance_sampling_ratio`` computes rho
from the loss' forward instead (``RatioFromLossForward``, mixed into
``trainers/grpo/trainer.grpo_trainer_class``), which removes that pass (a quarter of the demo's
GRPO step with vLLM in bf16; docs/results.md) and scores only the rows that train
(``skip_zero_advantage`` drops the rest).
"""

from __future__ import annotations

import math
from typing import Any

IMPORTANCE_SAMPLING_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def loss_mask(batch: dict[str, Any]) -> Any:
    """(B, T) 1 on the completion tokens TRL's loss counts: the completion mask, times the tool
    mask where a batch has one (tokens a tool wrote are not the policy's)."""
    mask = batch["completion_mask"]
    return mask if "tool_mask" not in batch else mask * batch["tool_mask"]


def importance_sampling_ratio(trainer_logps: Any, sampler_logps: Any, mask: Any, mode: str,
                              clip_min: float | None, clip_max: float | None) -> Any:
    """rho of TRL's vLLM correction (module docstring): (B, T) for ``token_*`` modes, (B, 1) for
    ``sequence_*``. ``trainer_logps`` and ``sampler_logps`` are (B, T) log-probs of the sampled
    tokens, ``mask`` (B, T) 1 on completion tokens; a token the sampler could not score (NaN)
    counts as agreement (ratio 1), as in TRL."""
    import torch

    if mode not in IMPORTANCE_SAMPLING_MODES:
        raise ValueError(f"unknown importance-sampling mode {mode!r}; one of {IMPORTANCE_SAMPLING_MODES}")
    diff = torch.nan_to_num((trainer_logps.detach() - sampler_logps) * mask, nan=0.0)  # (B, T)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)  # (B, 1)
    ratio = torch.exp(diff)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    low = clip_min if clip_min is not None else -math.inf
    high = clip_max if clip_max is not None else math.inf
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


class RatioStats:
    """TRL's ``sampling/*`` metrics of one generation batch, gathered over the micro-batches whose
    loss computes rho: mean and largest |logp_trainer - logp_sampler| over the completion tokens the
    sampler scored, and min, mean and max of rho over the completion tokens (``token_*``) or the
    completions (``sequence_*``)."""

    def __init__(self) -> None:
        self.delta_sum, self.delta_count, self.delta_max = 0.0, 0, 0.0
        self.ratio_min, self.ratio_sum, self.ratio_count, self.ratio_max = math.inf, 0.0, 0, -math.inf

    def add(self, trainer_logps: Any, sampler_logps: Any, mask: Any, ratio: Any, mode: str) -> None:
        import torch

        delta = (trainer_logps.detach() - sampler_logps).abs()  # (B, T)
        delta = delta[mask.bool() & ~torch.isnan(delta)]
        if delta.numel():
            self.delta_sum += float(delta.sum())
            self.delta_count += delta.numel()
            self.delta_max = max(self.delta_max, float(delta.max()))
        values = ratio.flatten() if mode.startswith("sequence") else ratio[mask.bool()]
        if values.numel():
            self.ratio_min = min(self.ratio_min, float(values.min()))
            self.ratio_max = max(self.ratio_max, float(values.max()))
            self.ratio_sum += float(values.sum())
            self.ratio_count += values.numel()

    def metrics(self) -> dict[str, float]:
        """The metric values so far (TRL logs 0 where nothing was scored)."""
        seen = self.ratio_count > 0
        return {
            "sampling/sampling_logp_difference/mean": self.delta_sum / max(self.delta_count, 1),
            "sampling/sampling_logp_difference/max": self.delta_max,
            "sampling/importance_sampling_ratio/min": self.ratio_min if seen else 0.0,
            "sampling/importance_sampling_ratio/mean": self.ratio_sum / self.ratio_count if seen else 0.0,
            "sampling/importance_sampling_ratio/max": self.ratio_max if seen else 0.0,
        }


class RatioFromLossForward:
    """Mixed in before ``trl.GRPOTrainer`` (module docstring): on an on-policy step with TRL's vLLM
    correction on, generation skips TRL's no-grad pass and the ratio (``vllm_importance_sampling_
    correction`` is off while it runs), and ``_loss_with_ratio`` writes rho, from the loss forward's
    log-probs, into the micro-batch before TRL's loss reads it. TRL's ``sampling/*`` metrics are
    kept, one value per generation batch as TRL logs them. Written against TRL 1.16's
    ``_generate_and_score_completions``, ``_get_per_token_logps_and_entropies`` and ``_compute_loss``."""

    ratio_from_loss_forward = True
    """Off: TRL's own way (``benchmarks/grpo_step.py --trl-ratio`` times it)."""
    _ratio_inputs: dict[str, Any] | None = None  # the micro-batch whose forward computes rho
    _ratio_stats: RatioStats | None = None  # the current generation batch's

    def _ratio_in_loss(self) -> bool:
        """On policy with TRL's vLLM correction on: no weight moves between sampling and the loss,
        so the loss' forward computes TRL's ``old_per_token_logps`` (TRL's own test of whether it
        needs them, in ``_generate_and_score_completions``)."""
        generate_every = self.args.steps_per_generation * self.num_iterations
        return (self.ratio_from_loss_forward and self.use_vllm and self.loss_type != "vespo"
                and self.args.vllm_importance_sampling_correction
                and self.args.gradient_accumulation_steps % generate_every == 0)

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        if not self._ratio_in_loss():
            return super()._generate_and_score_completions(inputs)
        # TRL then skips its no-grad forward and the ratio; the sampler's log-probs stay in the batch.
        self.vllm_importance_sampling_correction = False
        self._ratio_stats = None
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self.vllm_importance_sampling_correction = True

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        batch, self._ratio_inputs = self._ratio_inputs, None
        if batch is not None:  # the loss' forward: rho from its log-probs, before the loss reads it
            self._set_ratio(batch, out[0])
        return out

    def _loss_with_ratio(self, model: Any, inputs: dict[str, Any]) -> Any:
        """TRL's ``_compute_loss`` on ``inputs``, with rho from its forward where ``_ratio_in_loss``."""
        if self._ratio_in_loss():
            inputs = dict(inputs)  # rho goes into the micro-batch the loss reads, not TRL's buffer
            self._ratio_inputs = inputs
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._ratio_inputs = None

    def _set_ratio(self, batch: dict[str, Any], logps: Any) -> None:
        sampler = batch["sampling_per_token_logps"]  # (B, T)
        mask = loss_mask(batch)
        mode = self.vllm_importance_sampling_mode
        ratio = importance_sampling_ratio(logps, sampler, mask, mode, self.vllm_importance_sampling_clip_min,
                                          self.vllm_importance_sampling_clip_max)
        batch["importance_sampling_ratio"] = ratio
        # One value per generation batch in TRL's metric lists (it logs their mean): the first
        # micro-batch appends, later ones replace it with the batch's running value.
        metrics = self._metrics["train" if self.model.training else "eval"]
        first = self._ratio_stats is None
        if first:
            self._ratio_stats = RatioStats()
        self._ratio_stats.add(logps, sampler, mask, ratio, mode)
        for name, value in self._ratio_stats.metrics().items():
            if first or not metrics[name]:
                metrics[name].append(value)
            else:
                metrics[name][-1] = value
