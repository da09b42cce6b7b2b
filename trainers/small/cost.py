"""What the small learner's run costs in seconds, from the config alone (``--dry-run``'s estimate).

``curriculum.walltime`` prices a language model by its FLOPs and weight bytes. The small learner's
few hundred thousand parameters make both negligible: a decode step is bound by its per-call
overhead and the Python that builds each row's next token (``model._Row.next``), a training pass by
per-token work that grows with the sequence. So this module prices the small learner's own parts,
with rates measured on one CPU thread (``python benchmarks/small_learner.py --rates``; the
measurement is in docs/scaling.md, "Wall-time estimate"):

    decode  (one call of R rows, S steps) = S · (DECODE_CALL_S + R · (DECODE_ROW_S + DECODE_CTX_S · c))
                                            c = prompt + S / 2, the mean context of a step
    train   (K rows of T tokens)          = K · T · (FORWARD_S(T) + μ · FORWARD_BACKWARD_S(T))
                                            the old log-probs once, then μ = num_iterations updates
    GRPO step                             = decode of P · G rows (dynamic sampling: its batches)
                                            + train of every sampled row (an upper bound: rows of
                                            groups without spread are dropped)
    eval                                  = decode of the suite's prompts, generation_batch rows a call,
                                            each call EVAL_FILL of the cap long
    warm start                            = steps · batch_size · train of one row (μ = 1, no old pass)

A map of side n with k agents has a prompt of n² + 3k + 3 tokens (``codec.encode_prompt``) and a
plan of at most k · (max_path + 3): each agent's label, start and ``|`` written by the decoder, its
moves up to ``ceil(max_path_factor · n)`` and ``SEP``. Decoding goes on until the call's longest
plan ends; measured, the longest sampled plan of a 64-row call is DECODE_FILL of that cap, and a
plan PLAN_FILL of it on average. Each part is averaged over the sizes the training draws from
(the testbed's initial proposal, weighted by its data ratios; its eval sizes where it has none),
at the largest agent count.
"""

from __future__ import annotations

import math
from typing import Any

DECODE_CALL_S = 0.45e-3
"""Per decode step of a call, whatever its rows: the forward's kernel launches (0.36-0.48 ms measured)."""
DECODE_ROW_S = 17e-6
"""Per row and decode step: the row's next token in Python and its share of the forward."""
DECODE_CTX_S = 0.29e-6
"""Per row, decode step and token of context (attention over the key/value cache):
28, 35, 50 and 59 µs per row-step at mean contexts of about 36, 67, 108 and 145 tokens."""
FORWARD_ROW_TOKEN_S = (6e-6, 0.016e-6)
"""(a, b) of a forward pass without gradients per row-token at T tokens: a + b · T
(6.8, 6.8, 7.9, 9.2 µs at T = 47, 84, 147, 199)."""
FORWARD_BACKWARD_ROW_TOKEN_S = (19e-6, 0.036e-6)
"""(a, b) of a forward and backward pass per row-token at T tokens: a + b · T
(21.2, 20.8, 25.1, 26.3 µs at T = 47, 84, 147, 199)."""
ROUND_OVERHEAD_S = 1.5
"""Per round besides training and evals: drawing and solving the round's tasks (the testbed's CBS
solver; 64 tasks of 4 agents on 10x10 with waits take the longest), committing the round."""
SETUP_S = 5.0
"""Once per run: importing torch and the plugins, building the testbed's suites and the model."""
DECODE_FILL = 0.6
"""Decode steps of a 64-row call over the cap (0.52-0.69 measured on 4x4-10x10 with 2-4 agents)."""
EVAL_FILL = 1.0
"""Decode steps of an eval call over the cap: a call holds a whole suite (up to ``generation_batch``
rows), whose longest greedy plan runs to the cap (measured: 2-3 s per 144-task eval of 4 agents on
10x10, against 1.5 s at DECODE_FILL)."""
PLAN_FILL = 0.35
"""A plan's mean tokens over the cap (28 of 124 on 10x10 with 4 agents sampled at temperature 1,
about half of the cap on 4x4 with 2: 0.35 errs long on the large maps that dominate the cost)."""


def prompt_tokens(side: int, agents: int) -> int:
    """``codec.encode_prompt``: BOS, size, n² cells, three tokens per agent, PLAN."""
    return side * side + 3 * agents + 3


def plan_cap(side: int, agents: int, max_path_factor: float) -> int:
    """The most tokens a plan can take: per agent its label, start, ``|``, moves and ``SEP``."""
    return agents * (math.ceil(max_path_factor * side) + 4)


def decode_seconds(rows: int, side: int, agents: int, max_path_factor: float, batch: int,
                   fill: float = DECODE_FILL) -> float:
    """Decoding ``rows`` plans of one map shape in calls of up to ``batch`` rows, each call
    ``fill`` of the plan cap long."""
    if rows <= 0:
        return 0.0
    steps = fill * plan_cap(side, agents, max_path_factor)
    context = prompt_tokens(side, agents) + steps / 2
    calls = math.ceil(rows / batch)
    return steps * (calls * DECODE_CALL_S + rows * (DECODE_ROW_S + DECODE_CTX_S * context))


def train_seconds(rows: int, tokens: float, iterations: int, old_pass: bool = True) -> float:
    """``iterations`` forward-backward passes (and one forward without gradients) over ``rows`` rows."""
    fwd = FORWARD_ROW_TOKEN_S[0] + FORWARD_ROW_TOKEN_S[1] * tokens
    fb = FORWARD_BACKWARD_ROW_TOKEN_S[0] + FORWARD_BACKWARD_ROW_TOKEN_S[1] * tokens
    return rows * tokens * ((fwd if old_pass else 0.0) + iterations * fb)


def _side(size: str) -> int:
    return int(size.split("x")[0])


def training_sizes(testbed: Any) -> dict[int, float]:
    """Map side → share of the training draw: the initial proposal's data ratios, else the eval sizes."""
    proposal = getattr(testbed, "initial_proposal", "random")
    if not isinstance(proposal, str):
        shares = {_side(s): p.data_ratio for s, p in proposal.sizes.items() if p.data_ratio > 0}
        total = sum(shares.values())
        if total > 0:
            return {side: share / total for side, share in shares.items()}
    sides = [_side(s) for s in testbed.eval_sizes]
    return {side: 1.0 / len(sides) for side in sides}


def step_seconds(config: Any, testbed: Any) -> float:
    """One GRPO step of ``config`` (the small trainer's section) on ``testbed``'s training sizes."""
    agents = max(testbed.train_agents) if isinstance(testbed.train_agents, list) else testbed.train_agents
    rows = config.prompts_per_step * config.num_generations
    batches = config.max_sampling_batches if config.dynamic_sampling else 1
    seconds = 0.0
    for side, share in training_sizes(testbed).items():
        tokens = prompt_tokens(side, agents) + PLAN_FILL * plan_cap(side, agents, config.max_path_factor)
        sample = batches * decode_seconds(rows, side, agents, config.max_path_factor, rows)
        seconds += share * (sample + train_seconds(rows, tokens, config.num_iterations))
    return seconds


def eval_seconds(config: Any, testbed: Any, suite: str) -> float:
    """One greedy eval of ``suite``: every eval size, each agent count."""
    per_size = testbed.instances_per_size(suite)
    return sum(decode_seconds(per_size, _side(size), agents, config.max_path_factor, config.generation_batch,
                              EVAL_FILL)
               for size in testbed.eval_sizes for agents in testbed.eval_agents)


def warmstart_seconds(config: Any, testbed: Any) -> float:
    """The supervised warm start: ``steps`` batches of solved plans on ``warmstart_sizes`` (one pass each)."""
    settings = config.warmstart
    agents = max(testbed.warmstart_agents)
    sides = [_side(s) for s in testbed.warmstart_sizes]
    tokens = sum(prompt_tokens(n, agents) + PLAN_FILL * plan_cap(n, agents, config.max_path_factor)
                 for n in sides) / len(sides)
    return settings.steps * train_seconds(settings.batch_size, tokens, 1, old_pass=False)
