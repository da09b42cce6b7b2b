"""SPADE's testbed: ``SpadeTestbed`` (``spade_pool``), the environment pool as proposal.

* ``testbed`` — the pool as proposal, ``env``/``design`` tasks for the ``selfplay`` trainer,
  held-out eval (``testbeds.heldout``) every N rounds and at the end.

The programs in the pool run in ``testbeds.sandbox`` on the prelude of ``testbeds.synthetic``;
the map of the whole method is ``docs/spade.md``.
"""
