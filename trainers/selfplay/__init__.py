"""The ``selfplay`` trainer: SPADE co-training (the SPADE paper), one policy in two roles.

* ``trainer`` — ``SelfPlayTrainer``, the plugin: the rollout step and one GRPO update of both
  roles through TRL (it builds on ``trainers.grpo``);
* ``play`` — multi-turn agent episodes in admitted environments, in the sandbox;
* ``rewards`` — regret, anchor, blend, per-skill centring, per-role advantages, truncated
  importance weights, EMA learning potential: pure functions;
* ``buffer`` — the delayed designer buffer;
* ``warmstart`` — the agent role's warm-start examples from the seed library;
* ``heldout`` — the held-out seed-library games played after every update: the player's skill
  across rounds.

The designer side (prompts, admission, corpus, memory) is the ``spade`` engineer's
(``engineers.spade``); the two share only the kernel's pool types (``curriculum.core.pool``).
"""
