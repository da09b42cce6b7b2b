"""Warm-start examples for SPADE's designer role: design prompts answered with the seed library.

``designer_examples(config, n, seed)`` returns ``n`` supervised examples. Example ``i`` is the
design prompt of the engineer's own format (``prompts.design_messages``: the setting's contract
in the configured design mode, skill ``s.skill``, and the ``i``-th document of a corpus
permutation seeded by ``seed``, separate from the run's own corpus cursor), answered with seed
``s = library[i mod len(library)]`` written as the designer must write it: in ``program`` mode
the program in a ```python fence and ``<hint>``; in ``structured`` mode the parts in their tags
and ``<hint>`` (``testbeds.synthetic.skeleton.format_parts``). ``library`` is the seed library
of the setting restricted to the configured skills (all of it when none matches).

The SPADE trainer's SFT warm start (``trainers/warmstart.py``) trains on these next to the agent
role's examples, when ``engineer.designer_warmstart`` is on and ``trainer.warmstart.steps > 0``.
Not in the paper: the paper's designers (4B-30B) write admissible programs from the start.
"""

from __future__ import annotations

from typing import Any

from engineers.spade.config import SpadeEngineerConfig
from engineers.spade.corpus import build_corpus
from engineers.spade.prompts import design_messages
from testbeds.synthetic.seeds import SeedEnvironment, library_for, seed_library
from testbeds.synthetic.skeleton import format_parts


def seed_design(seed: SeedEnvironment, mode: str) -> str:
    """A library environment as a designer's answer in ``mode`` (module docstring)."""
    if mode == "structured":
        if seed.parts is None:
            raise ValueError(f"seed {seed.name!r} ({seed.setting}) has no structured parts")
        return format_parts(seed.parts)
    return f"```python\n{seed.program.rstrip()}\n```\n<hint>{seed.hint}</hint>"


def designer_examples(config: SpadeEngineerConfig, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` design prompts answered with library environments (module docstring)."""
    library = library_for(config.setting, config.skill_list()) or list(seed_library(config.setting))
    corpus = build_corpus(config.corpus, config.setting, seed)
    out = []
    for i in range(n):
        env = library[i % len(library)]
        doc = corpus.sample() if corpus is not None else None
        messages = design_messages(config.setting, env.skill, doc.text if doc else None, mode=config.design_mode)
        out.append({"prompt": messages,
                    "completion": [{"role": "assistant", "content": seed_design(env, config.design_mode)}]})
    return out
