"""MAPF-FrozenLake: multi-agent path finding on FrozenLake grids (the Trainee-to-Trainer paper, Method A).

Modules (each docstring states its exact definitions):

* ``config``    — ``SIZES``, ``BOUNDS``, ``SizeParams``, ``GeneratorConfig`` (the proposal an
  engineer edits), ``random_config`` (cold start), ``project`` (any JSON → legal config + changes).
* ``instance``  — ``Instance`` and its JSONL format; ``plan_cost`` (sum of costs).
* ``solver``    — ``solve``: optimal CBS (ICBS + CG heuristic + target reasoning + meta-agent
  merging) with a joint-state A*/reachability fallback that proves unsolvability.
* ``generator`` — ``generate``: seeded, worker-independent instances with optimal plans, hole and
  needs-wait ratios per size, and a requested-vs-achieved report.
* ``parse``     — ``parse_plan`` (lenient, never raises) and ``format_plan`` (canonical answer).
* ``validate``  — ``validate``: the eight checks of the Trainee-to-Trainer paper, cost and optimality.
* ``reward``    — the Trainee-to-Trainer paper: ``accuracy``, ``length_reward``, ``adaptive_weights``,
  ``AdaptiveReward``.
* ``prompts``   — ``render_prompt``: short chat prompt asking for the canonical format.
* ``suites``    — cached eval suites, ``FailureBreakdown`` (module F) and flat metrics.
* ``testbed``   — ``MAPFTestbed`` / ``MAPFTestbedConfig`` (the ``Testbed`` implementation).
* ``env``       — gymnasium ``MAPFFrozenLake-v0`` (registered in ``testbeds/__init__.py``).
* ``batch``     — line-by-line JSONL helpers behind ``curriculum mapf solve|validate``.
"""
