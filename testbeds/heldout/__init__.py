"""Held-out evaluation for SPADE (never used for training) and the SPADE pool testbed.

* ``reasoning`` — reasoning-gym maths / algorithmic / cognition items from fixed seeds (games),
  and reasoning-gym datasets as a fixed environment set (the fixed-environment baseline);
* ``tools`` — a fixed suite of stateful ``ToolEnv`` tasks written for this project (tool use);
* ``testbed`` — ``SpadeTestbed`` (``spade_pool``): the pool as proposal, ``env``/``design`` tasks for
  the ``selfplay`` trainer, held-out eval every N rounds and at the end.
"""
