"""Warm-start examples for SPADE's agent role: the seed library's solutions, played turn by turn.

``agent_examples(setting, play_config, sandbox, n, seed)`` plays library environments in the
sandbox and turns every move of their ``solution()`` into one supervised example, until there
are ``n``. Environment ``library[j mod len(library)]`` is reset with seed ``seed * 1000 + j``
(j = 0, 1, ...); its first messages are exactly the agent's (``play.first_messages``: the
setting's instruction and the first observation, with the hint on odd ``j`` so both play
conditions are seen); ``solution()`` becomes actions as admission plays them (a string or
number ``a`` → ``\\boxed{a}``; a list → its items, a final ``{"answer": a}`` → ``\\boxed{a}``,
other dicts as JSON); example ``t`` of an episode is the conversation up to move ``t`` (earlier
moves as assistant turns, the environment's replies as user turns) answered with move ``t``.
Playing stops at the first terminated or truncated step. ``names`` restricts the library to those
environments; a parametrised game is played as a fresh variant per episode (its choices and
words drawn from a generator seeded by ``(seed, j)``, ``testbeds.spade.synthetic.seeds.variant``).

The SPADE trainer's SFT warm start trains on these when ``trainer.agent_warmstart`` is on and
``trainer.warmstart.steps > 0``. Not in the paper: its agents (4B-30B) play from the start.
"""

from __future__ import annotations

import json
import random
from typing import Any

from curriculum.core.pool import PoolEnvironment, program_hash
from testbeds.spade.sandbox import SandboxPool
from testbeds.spade.synthetic.seeds import library_for, variant
from trainers.selfplay.play import PlayConfig, first_messages


def solution_moves(value: Any) -> list[str]:
    """``solution()``'s value as the agent's moves (module docstring)."""
    items = value if isinstance(value, list) else [value]
    moves = []
    for item in items:
        if isinstance(item, dict) and set(item) == {"answer"}:
            moves.append(f"\\boxed{{{item['answer']}}}")
        elif isinstance(item, dict):
            moves.append(json.dumps(item))
        else:
            moves.append(f"\\boxed{{{item}}}")
    return moves


def episode_examples(env: PoolEnvironment, handle: Any, env_seed: int, hinted: bool,
                     config: PlayConfig) -> list[dict[str, Any]]:
    """One example per move of the solution of ``env`` reset with ``env_seed``."""
    first = handle.reset(env_seed)
    messages = first_messages(env, first.obs, first.info, hinted, config)
    out = []
    for move in solution_moves(handle.call("solution")):
        out.append({"prompt": list(messages), "completion": [{"role": "assistant", "content": move}]})
        step = handle.step(move)
        if step.terminated or step.truncated:
            break
        messages += [{"role": "assistant", "content": move}, {"role": "user", "content": step.obs}]
    return out


def agent_examples(setting: str, config: PlayConfig, sandbox: SandboxPool, n: int,
                   seed: int, names: list[str] | None = None) -> list[dict[str, Any]]:
    """``n`` agent examples from the seed library of ``setting`` (module docstring)."""
    library = library_for(setting, None, names)
    if not library:
        raise ValueError(f"no {setting} seed-library environment to warm-start the agent on")
    out: list[dict[str, Any]] = []
    j = 0
    while len(out) < n:
        seed_env = variant(library[j % len(library)], random.Random(f"{seed}:{j}"))
        env = PoolEnvironment(hash=program_hash(seed_env.program), setting=setting, skill=seed_env.skill,
                              hint=seed_env.hint, program=seed_env.program)
        with sandbox.load(seed_env.program) as handle:
            out += episode_examples(env, handle, seed * 1000 + j, hinted=j % 2 == 1, config=config)
        j += 1
    return out[:n]
