"""Held-out evaluation for SPADE (never used for training).

* ``reasoning`` — reasoning-gym maths / algorithmic / cognition items from fixed seeds (games),
  and reasoning-gym datasets as a fixed environment set (``initial_pool: reasoning_gym``);
* ``tools`` — a fixed suite of stateful ``ToolEnv`` tasks written for this project (tool use);
* ``games`` — seed-library games a run holds out of training, which the ``selfplay`` trainer plays
  after every update (the player's skill across rounds): their choice and the run's record.

The ``spade_pool`` testbed that runs the first two evaluations is ``testbeds.spade.testbed``.
"""
