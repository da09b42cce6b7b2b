"""TRL's importance-sampling correction (TIS) between the vLLM engine's sampling log-probs and the
trainer's, on the CPU build with a tiny random-init model.

With ``trainer.use_vllm: true`` TRL takes each sampled token's log-prob from the engine
(``sampling_per_token_logps``, temperature-processed), recomputes it with the trainer's model
(``old_per_token_logps``) and multiplies every token's loss by
rho = exp(logp_trainer - logp_engine), per token or as one ratio per completion, clipped at the
cap (``*_truncate``) or zeroed above it (``*_mask``): ``trainer.vllm_importance_sampling``.

On a step that is on policy the trainer takes rho from the loss' own forward pass
(``trainers/grpo/importance.py``) instead of TRL's extra no-grad forward; both ways are checked here,
on what TRL's loss reads (each micro-batch ``_compute_loss`` is given):
* synced engine: the engine's log-probs are finite and equal to the trainer model's own log-probs
  of the same tokens, recomputed here from scratch (within bf16 rounding), so rho stays near 1
  and nothing is masked; TRL's logged ``sampling/importance_sampling_ratio/*`` match;
* stale engine (its weights never synced, the trainer's moved): rho leaves 1; every token ratio
  beyond the cap is clipped to exactly the cap (``token_truncate``), every completion ratio
  outside [floor, cap] is zeroed (``sequence_mask``, the default), the rest equal exp of the
  recomputed differences.
"""

from __future__ import annotations

import gc
import math

import pytest

CAP = 3.0
FLOOR = 0.5
TEMPERATURE = 0.8


def own_logprobs(model, prompt_ids, prompt_mask, completion_ids, completion_mask, temperature: float):
    """The trainer model's log-prob of each kept completion token at ``temperature``, row by row
    without padding (independent of TRL's batched recomputation). (B, C), NaN where masked."""
    import torch

    out = torch.full(completion_ids.shape, float("nan"))
    with torch.no_grad():
        for row in range(completion_ids.shape[0]):
            prompt = prompt_ids[row][prompt_mask[row].bool()]
            kept = int(completion_mask[row].sum())
            completion = completion_ids[row][:kept]
            ids = torch.cat([prompt, completion])[None]
            logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float() / temperature  # (kept, V)
            out[row, :kept] = torch.log_softmax(logits, -1).gather(1, completion[:, None])[:, 0]
    return out


def run_step(vllm_model_dir, tmp_path, monkeypatch, *, mode: str, stale: bool, in_loss: bool = True):
    """One colocated GRPO step; returns (the micro-batches TRL's loss read, concatenated; the
    trainer's own log-probs of their sampled tokens; TRL's logged records; what generation returned).
    ``stale``: the engine is never synced and the trainer's weights are moved before the step, so
    the engine samples from other weights than it is scored by. ``in_loss``: rho from the loss'
    forward (the default) or from TRL's no-grad recomputation."""
    import numpy as np
    import torch
    from trl import GRPOTrainer

    import trainers.grpo.trainer as grpo
    from curriculum.config import load_config
    from curriculum.loop import build_testbed, build_trainer
    from tests.foundation.test_loop import tiny_overrides

    generated: list[dict] = []
    losses: list[dict] = []
    cls = grpo.grpo_trainer_class()
    monkeypatch.setattr(cls, "ratio_from_loss_forward", in_loss)
    original_generate, original_loss = cls._generate_and_score_completions, GRPOTrainer._compute_loss

    def capture_generation(self, inputs):
        out = original_generate(self, inputs)
        generated.append({k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in out.items()})
        return out

    def capture_loss(self, model, inputs):
        loss = original_loss(self, model, inputs)  # the in-loss ratio is written into ``inputs`` first
        losses.append({k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in inputs.items()})
        return loss

    monkeypatch.setattr(cls, "_generate_and_score_completions", capture_generation)
    monkeypatch.setattr(GRPOTrainer, "_compute_loss", capture_loss)
    if stale:
        def never_sync(vllm_generation):
            vllm_generation.sync_weights = lambda: None
            vllm_generation.syncs_through_reload = True
        monkeypatch.setattr(grpo, "sync_colocated_through_reload", never_sync)

    config = load_config(None, tiny_overrides(vllm_model_dir, tmp_path, **{
        "trainer.use_vllm": "true", "trainer.max_steps_per_round": 1, "trainer.temperature": TEMPERATURE,
        "trainer.vllm_importance_sampling": mode, "trainer.vllm_importance_sampling_cap": CAP,
        **({"trainer.vllm_importance_sampling_floor": FLOOR} if mode.startswith("sequence") else {}),
        # Every row through the loss (a random-init model scores 0: all advantages are 0).
        "trainer.skip_zero_advantage": "false",
        "trainer.prompts_per_step": 4, "trainer.num_generations": 4, "generation.vllm_cpu_kv_cache_gib": 1}))
    testbed = build_testbed(config)
    trainer = build_trainer(config, testbed)
    trainer.setup(None)
    logs: list[dict] = []
    try:
        if stale:
            torch.manual_seed(3)
            with torch.no_grad():
                for p in trainer.model.parameters():
                    p.add_(0.05 * torch.randn_like(p))
        tasks = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 4, seed=0)
        trainer.train_round(tasks, round_index=0, seed=0, log=logs.append)
        assert len(generated) == 1, "one generation batch per step"
        assert losses, "the loss ran"
        # The weights the loss' ratios were computed with: the step's optimizer update comes after.
        # (A random-init model scores 0 everywhere, every advantage is 0 and the update leaves the weights.)
        own = [own_logprobs(trainer.model, b["prompt_ids"], b["prompt_mask"], b["completion_ids"],
                            b["completion_mask"], TEMPERATURE) for b in losses]
        width = max(b["completion_ids"].shape[1] for b in losses)

        def rows(tensors: list, fill: float) -> torch.Tensor:  # micro-batches stacked, (B, C)
            return torch.cat([torch.nn.functional.pad(t.float(), (0, width - t.shape[1]), value=fill)
                              if t.shape[1] != 1 else t.float() for t in tensors])

        batch = {name: rows([b[name] for b in losses], 0.0)
                 for name in ("completion_mask", "sampling_per_token_logps", "importance_sampling_ratio")}
        return batch, rows(own, float("nan")), logs, generated[0]
    finally:
        trainer.close()
        trainer._trl = None  # the engine and its cache go with TRL's trainer, before the next test starts one
        gc.collect()


@pytest.mark.parametrize("in_loss", [True, False])
def test_ratio_from_the_loss_forward_skips_trls_recomputation(vllm_model_dir, tmp_path, monkeypatch, in_loss):
    """In the loss: no ``old_per_token_logps`` leave generation (TRL's no-grad forward did not run)
    and every micro-batch's rho is the trainer's own log-probs against the sampler's; TRL's way
    hands its recomputation on. Both ways the loss reads the same ratios."""
    import torch

    batch, own, logs, generated = run_step(vllm_model_dir, tmp_path, monkeypatch, mode="token_truncate",
                                           stale=True, in_loss=in_loss)
    assert ("old_per_token_logps" in generated) is (not in_loss)
    assert ("importance_sampling_ratio" in generated) is (not in_loss)
    mask = batch["completion_mask"].bool()
    assert int(mask.sum()) >= 16
    expected = torch.exp(own[mask] - batch["sampling_per_token_logps"][mask]).clamp(max=CAP)
    assert batch["importance_sampling_ratio"][mask] == pytest.approx(expected, rel=2e-3, abs=1e-4)
    logged = next(r for r in logs if "sampling/importance_sampling_ratio/max" in r)
    ratio = batch["importance_sampling_ratio"][mask]
    assert logged["sampling/importance_sampling_ratio/max"] == pytest.approx(float(ratio.max()), rel=1e-4)
    assert logged["sampling/importance_sampling_ratio/min"] == pytest.approx(float(ratio.min()), rel=1e-3)
    assert logged["sampling/importance_sampling_ratio/mean"] == pytest.approx(float(ratio.mean()), rel=1e-3)


def test_synced_engine_logprobs_equal_the_trainers_and_ratios_stay_near_one(vllm_model_dir, tmp_path, monkeypatch):
    import torch

    batch, own, logs, _ = run_step(vllm_model_dir, tmp_path, monkeypatch, mode="token_truncate", stale=False)
    mask = batch["completion_mask"].bool()
    assert int(mask.sum()) >= 16  # the test sees sampled tokens
    sampling = batch["sampling_per_token_logps"][mask]
    assert torch.isfinite(sampling).all() and (sampling <= 0).all()
    # The engine's (bf16 on a bf16 CPU: TRL starts it at vLLM's `auto` dtype) equal them within rounding.
    tolerance = 2e-3 if batch["sampling_per_token_logps"].dtype == torch.float64 else 5e-2
    diff = (own[mask] - sampling).abs()
    assert float(diff.max()) < tolerance, f"engine vs trainer log-probs differ by up to {float(diff.max()):.3f}"
    ratio = batch["importance_sampling_ratio"][mask]
    assert torch.isfinite(ratio).all()
    assert ratio == pytest.approx(torch.exp(own[mask] - sampling).clamp(max=CAP), abs=1e-3)
    assert float((ratio - 1).abs().max()) < 0.06
    logged = next(r for r in logs if "sampling/importance_sampling_ratio/max" in r)
    assert logged["sampling/importance_sampling_ratio/max"] == pytest.approx(float(ratio.max()), abs=1e-5)
    assert logged["sampling/importance_sampling_ratio/min"] == pytest.approx(float(ratio.min()), abs=1e-5)
    assert logged["sampling/sampling_logp_difference/max"] < tolerance


@pytest.mark.parametrize("mode", ["token_truncate", "sequence_mask"])
def test_stale_engine_moves_ratios_off_one_and_the_cap_bounds_them(vllm_model_dir, tmp_path, monkeypatch, mode):
    import torch

    batch, own, logs, _ = run_step(vllm_model_dir, tmp_path, monkeypatch, mode=mode, stale=True)
    mask = batch["completion_mask"].bool()
    sampling = batch["sampling_per_token_logps"]
    assert torch.isfinite(sampling[mask]).all()
    diff = torch.where(mask, own - sampling, torch.zeros_like(own))  # (B, C), 0 where masked
    assert float(diff[mask].abs().mean()) > 0.1, "the stale engine samples from other weights"
    ratio = batch["importance_sampling_ratio"]
    if mode == "token_truncate":  # sampled tokens the moved trainer likes more than the engine: rho > cap
        raw = torch.exp(diff)
        over = mask & (raw > CAP)
        assert int(over.sum()) > 0, f"no token ratio above the cap (largest {float(raw[mask].max()):.2f})"
        assert (ratio[over] == CAP).all()  # clipped at exactly the cap
        assert ratio[mask & ~over] == pytest.approx(raw[mask & ~over], rel=1e-3)
        assert float(ratio[mask].max()) == CAP
    else:
        # One ratio per completion, the product over its tokens: completions are sampled where the
        # engine puts its mass, so rho falls far below 1 and the floor is the bound that acts.
        raw = torch.exp(diff.sum(dim=1))  # (B,)
        out = (raw > CAP) | (raw < FLOOR)
        assert int(out.sum()) > 0, f"no completion ratio outside [{FLOOR}, {CAP}] ({raw.tolist()})"
        assert (ratio[out, 0] == 0).all()  # masked out of the loss
        assert ratio[~out, 0] == pytest.approx(raw[~out], rel=1e-3)
        assert not math.isnan(float(ratio.sum()))
    logged = next(r for r in logs if "sampling/importance_sampling_ratio/max" in r)
    assert logged["sampling/importance_sampling_ratio/max"] <= CAP
