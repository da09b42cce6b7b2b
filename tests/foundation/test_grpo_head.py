"""GRPO's LM head on completion positions only: the same log-probs and gradients as TRL's
every-position head, which it uses on a CPU."""

from __future__ import annotations

from trainers.lm.models import ModelConfig, load_model


def test_completion_positions_only_gives_the_same_log_probs_and_gradients(tiny_model_dir, monkeypatch):
    import torch
    import trl.trainer.utils as trl_utils
    from trl.trainer.utils import add_fused_lm_head

    head_rows: list[int] = []  # hidden-state rows the head projects, per call
    apply = trl_utils._ChunkedLogProbFunction.apply
    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply",
                        lambda hidden, *rest: (head_rows.append(hidden.shape[0]), apply(hidden, *rest))[1])

    from trainers.grpo.trainer import completion_positions_only

    model, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir)))
    add_fused_lm_head(model)
    torch.manual_seed(0)
    input_ids = torch.randint(5, 200, (3, 14))                      # (B, T): prompt 10 + completion 4
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 12:] = 0                                       # a completion that stopped early
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-4] = -100                                            # as TRL's GRPO scores them
    name = "model.layers.0.mlp.up_proj.weight"

    def run():
        model.zero_grad()
        out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True)
        out.log_probs.sum().backward()
        return out.log_probs.detach(), model.get_parameter(name).grad.clone()

    every, every_grad = run()
    with completion_positions_only():
        compact, compact_grad = run()
    assert head_rows == [3 * 13, 4 + 2 + 4]                           # every position, then the labelled
    assert trl_utils._use_triton(torch.device("cpu")) is False        # restored after the block
    assert (compact[:, :-4] == 0).all() and (compact[1, -2:] == 0).all()
    assert (compact[0, -4:] != 0).all()
    torch.testing.assert_close(compact, every, rtol=1e-5, atol=1e-6)
    scale = float(every_grad.abs().max())
    torch.testing.assert_close(compact_grad, every_grad, rtol=1e-4, atol=1e-5 * scale)
