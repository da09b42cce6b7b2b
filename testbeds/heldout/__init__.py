"""Held-out evaluation for SPADE (never used for training).

* ``reasoning`` — reasoning-gym maths / algorithmic / cognition items from fixed seeds (games),
  and reasoning-gym datasets as a fixed environment set (``initial_pool: reasoning_gym``);
* ``tools`` — a fixed suite of stateful ``ToolEnv`` tasks written for this project (tool use).

The ``spade_pool`` testbed that runs these evaluations is ``testbeds.spade.testbed``.
"""
