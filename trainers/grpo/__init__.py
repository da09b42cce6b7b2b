"""The GRPO trainer (``grpo``): TRL's ``GRPOTrainer`` as the learner of every round.

* ``trainer`` — ``GRPOTrainerAdapter`` and ``GRPOConfig``, the plugin; the ``selfplay`` trainer
  builds on them, and the ``small`` trainer uses its ``drop_zero_advantage_rows``;
* ``warmstart`` — the optional supervised warm start (TRL's ``SFTTrainer``) before round 0, cached;
* ``plan`` — ``--dry-run``'s numbers for the GRPO trainers (this one and ``selfplay``).

The model it trains and the engines that sample from it are ``trainers.lm``'s.
"""
