"""Warm-start examples for SPADE's designer role: design prompts answered with the seed library.

``designer_examples(config, n, seed)`` returns ``n`` supervised examples. Example ``i`` is the
design prompt of the engineer's own format (``prompts.design_messages``: the setting's contract
in the configured design mode, skill ``s.skill``, and the ``i``-th document of a corpus
permutation seeded by ``seed``, separate from the run's own corpus cursor), answered with seed
``s = library[i mod len(library)]`` written as the designer must write it: in ``program`` mode
the program in a ```python fence and ``<hint>``; in ``structured`` mode the parts in their tags
and ``<hint>`` (``testbeds.spade.synthetic.skeleton.format_parts``). ``library`` is the seed library
of the setting restricted to the configured skills (all of it when none matches) and, with
``warmstart_seeds``, to those names, always without the run's held-out games (``exclude``: the
names in the run directory's ``spade_heldout_games.json``, ``testbeds/spade/heldout/games.py``). A
parametrised game (``testbeds.spade.synthetic.seeds``, "Parametrised games") answers with a variant:
its word lists are the first words of the prompt's document, its choices drawn from a generator
seeded by ``(seed, i)``; so the answer depends on the prompt and two examples of one game differ.
With ``warmstart_skill_line`` each answer starts with a ``# skill: <skill>`` comment
(``seed_design``).

The SPADE trainer's SFT warm start (``trainers/grpo/warmstart.py``) trains on these next to the agent
role's examples, when ``engineer.designer_warmstart`` is on and ``trainer.warmstart.steps > 0``.
Not in the paper: the paper's designers (4B-30B) write admissible programs from the start.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from engineers.spade.config import SpadeEngineerConfig
from engineers.spade.corpus import build_corpus
from engineers.spade.prompts import design_messages
from testbeds.spade.synthetic.seeds import SeedEnvironment, library_for, variant
from testbeds.spade.synthetic.skeleton import format_parts


def seed_design(seed: SeedEnvironment, mode: str, skill_line: bool = False) -> str:
    """A library environment as a designer's answer in ``mode`` (module docstring); with
    ``skill_line`` the program (structured: the ``<reset>`` part) starts with ``# skill: ...``."""
    first = f"# skill: {seed.skill}\n" if skill_line else ""
    if mode == "structured":
        if seed.parts is None:
            raise ValueError(f"seed {seed.name!r} ({seed.setting}) has no structured parts")
        return format_parts(replace(seed.parts, reset=first + seed.parts.reset))
    return f"```python\n{first}{seed.program.rstrip()}\n```\n<hint>{seed.hint}</hint>"


def warmstart_library(config: SpadeEngineerConfig,
                      exclude: frozenset[str] = frozenset()) -> list[SeedEnvironment]:
    """The library environments the warm start answers with (module docstring)."""
    names = config.warmstart_seeds
    if names is not None and not set(names) - exclude:
        raise ValueError(f"every engineer.warmstart_seeds game ({', '.join(names)}) is held out of training "
                         "(trainer.heldout_games): name others")
    for skills, chosen in ((config.skill_list(), names), (None, names), (None, None)):
        library = [s for s in library_for(config.setting, skills, chosen) if s.name not in exclude]
        if library:
            return library
    raise ValueError(f"no {config.setting} seed-library environment left for the designer warm start")


def designer_examples(config: SpadeEngineerConfig, n: int, seed: int,
                      exclude: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """``n`` design prompts answered with library environments (module docstring)."""
    library = warmstart_library(config, exclude)
    corpus = build_corpus(config.corpus, config.setting, seed)
    out = []
    for i in range(n):
        doc = corpus.sample() if corpus is not None else None
        env = variant(library[i % len(library)], random.Random(f"{seed}:{i}"), doc.text if doc else None)
        messages = design_messages(config.setting, env.skill, doc.text if doc else None, mode=config.design_mode)
        out.append({"prompt": messages,
                    "completion": [{"role": "assistant",
                                    "content": seed_design(env, config.design_mode, config.warmstart_skill_line)}]})
    return out
