"""SPADE's testbed: ``SpadeTestbed`` (``spade_pool``), the environment pool as proposal, and what
runs the pool's programs.

* ``testbed`` — the pool as proposal, ``env``/``design`` tasks for the ``selfplay`` trainer,
  held-out eval (``heldout``) every N rounds and at the end;
* ``sandbox/`` — isolated, killable execution of model-written environment programs
  (``SandboxPool``; ``sandbox/README.md``);
* ``synthetic/`` — the ``ToolEnv`` base and game functions every program runs on (the sandbox's
  prelude), the ``GameEnv`` skeleton of structured designs, and the seed library
  (``synthetic/seeds/``);
* ``heldout/`` — SPADE's held-out evals: reasoning-gym items, the tool suite, held-out
  seed-library games;
* ``saved_pool`` — which file a run keeps its pool in; ``cli_sandbox`` — ``curriculum sandbox``.

The map of the whole method is ``docs/spade.md``.
"""
