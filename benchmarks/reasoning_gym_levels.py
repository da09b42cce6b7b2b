"""At which reasoning-gym level does a model score between 10 % and 60 %? Prints the greedy score per
dataset and level, so a held-out suite can be sized to the learner (``reasoning_gym.levels``).

For every dataset of a run config's held-out reasoning-gym suite (``testbed.reasoning_gym``), scores
the model on ``--items`` distinct held-out questions at each candidate level in ``LEVELS`` (easiest
first, then reasoning-gym's defaults), exactly as the run's eval does (same prompt, seeds, answer
extraction and the dataset's own scorer, ``testbeds/spade/heldout/reasoning.py``), greedy, with the suite's
answer budget. Use the weights the run starts from, e.g. the warm start a run cached:

    python benchmarks/reasoning_gym_levels.py --config configs/spade_games_cpu_demo.yaml \\
        --model ~/.cache/curriculum/warmstart/<key> --items 16 --out levels.json

Prints one line per (dataset, level): the score, how many items scored > 0 and the level; marks with
``*`` the levels inside the band (``--low``, ``--high``). It measures; it trains nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curriculum.config import load_config  # noqa: E402
from testbeds.spade.heldout.reasoning import build_items, score_items  # noqa: E402
from trainers.lm.generation import TransformersPolicy  # noqa: E402
from trainers.lm.models import ModelConfig, load_model, resolve_model_path  # noqa: E402

LEVELS: dict[str, list[dict[str, Any]]] = {
    "basic_arithmetic": [
        {"min_terms": 2, "max_terms": 2, "max_digits": 1, "operators": ["+"], "allow_parentheses": False,
         "allow_negation": False},
        {"min_terms": 2, "max_terms": 2, "max_digits": 1, "operators": ["+", "-"], "allow_parentheses": False,
         "allow_negation": False},
        {"min_terms": 2, "max_terms": 3, "max_digits": 2, "operators": ["+", "-"], "allow_parentheses": False,
         "allow_negation": False},
    ],
    "chain_sum": [{"min_terms": 2, "max_terms": 2, "max_digits": 1}, {"min_terms": 2, "max_terms": 3, "max_digits": 2}],
    "gcd": [{"min_value": 1, "max_value": 12}, {"min_value": 1, "max_value": 50}],
    "lcm": [{"min_value": 1, "max_value": 6}, {"min_value": 1, "max_value": 12}],
    "fraction_simplification": [{"min_value": 1, "max_value": 9, "min_factor": 2, "max_factor": 3, "styles": ["plain"]},
                                {"min_value": 1, "max_value": 20, "min_factor": 2, "max_factor": 9, "styles": ["plain"]}],
    "simple_equations": [{"min_terms": 2, "max_terms": 2, "min_value": 1, "max_value": 9, "operators": ["+"],
                          "operators_weights": [1.0]},
                         {"min_terms": 2, "max_terms": 2, "min_value": 1, "max_value": 20, "operators": ["+", "-"],
                          "operators_weights": [0.5, 0.5]}],
    "number_sorting": [{"min_numbers": 3, "max_numbers": 3, "min_decimals": 0, "max_decimals": 0,
                        "min_value": 0, "max_value": 20},
                       {"min_numbers": 3, "max_numbers": 5, "min_decimals": 0, "max_decimals": 0,
                        "min_value": -50, "max_value": 50}],
    "word_sorting": [{"min_words": 3, "max_words": 3, "min_word_length": 3, "max_word_length": 5},
                     {"min_words": 3, "max_words": 5, "min_word_length": 3, "max_word_length": 8}],
    "letter_counting": [{"min_words": 1, "max_words": 3}, {"min_words": 3, "max_words": 6}],
    "spell_backward": [{"min_word_len": 3, "max_word_len": 3}, {"min_word_len": 3, "max_word_len": 5}],
    # two bases at least: reasoning-gym draws a target base until it differs from the source base
    "base_conversion": [{"min_base": 2, "max_base": 10, "min_value": 0, "max_value": 15},
                        {"min_base": 2, "max_base": 10, "min_value": 0, "max_value": 100}],
    "caesar_cipher": [{"min_words": 1, "max_words": 1, "min_rotation": 1, "max_rotation": 1},
                      {"min_words": 1, "max_words": 3, "min_rotation": 1, "max_rotation": 3}],
    "number_sequence": [{"min_terms": 4, "max_terms": 5, "min_value": 0, "max_value": 10, "max_complexity": 1},
                        {"min_terms": 4, "max_terms": 6, "min_value": -20, "max_value": 20, "max_complexity": 2}],
    "needle_haystack": [{"min_num_statements": 2, "max_num_statements": 3},
                        {"min_num_statements": 5, "max_num_statements": 10}],
    "color_cube_rotation": [{"min_rotations": 1, "max_rotations": 1}],
    "rectangle_count": [{"max_rectangles": 1, "width": 10, "height": 10},
                        {"max_rectangles": 2, "width": 15, "height": 15}],
}
"""Candidate levels per dataset, easiest first (each ends with reasoning-gym's defaults, ``{}``)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="run config with a reasoning-gym held-out suite")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: the config's model)")
    parser.add_argument("--items", type=int, default=16, help="held-out questions per dataset and level")
    parser.add_argument("--datasets", default=None, help="comma-separated subset of the suite's datasets")
    parser.add_argument("--no-defaults", action="store_true", help="skip reasoning-gym's default level")
    parser.add_argument("--low", type=float, default=0.10)
    parser.add_argument("--high", type=float, default=0.60)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, default=None, help="write every score as JSON here")
    args = parser.parse_args()

    config = load_config(args.config, args.overrides)
    suite = getattr(config.testbed, "reasoning_gym", None)
    if suite is None:
        parser.error(f"{args.config}: its testbed has no reasoning_gym suite")
    wanted = set(args.datasets.split(",")) if args.datasets else None
    path = args.model or resolve_model_path(config.model.name_or_path)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(Path(path).expanduser()), dtype=config.model.dtype))
    policy = TransformersPolicy(model, tokenizer, config.generation.model_copy(update={"temperature": 0.0}))
    print(f"model {path}; {args.items} items per level; answer budget {suite.max_new_tokens} tokens", flush=True)
    results = []
    for category, names in suite.datasets.items():
        for name in names:
            if wanted is not None and name not in wanted:
                continue
            levels = LEVELS.get(name, []) + ([] if args.no_defaults else [{}])
            for level in levels:
                start = time.perf_counter()
                items = build_items({category: [name]}, args.items, suite.eval_seed, levels={name: level})
                scored = score_items(policy, items, max_new_tokens=suite.max_new_tokens)
                score = sum(s for s, _ in scored) / len(scored)
                hits = sum(s > 0 for s, _ in scored)
                mark = "*" if args.low <= score <= args.high else " "
                print(f"{mark} {name:24s} {score:5.2f} ({hits:2d}/{len(scored)})  {time.perf_counter() - start:5.1f}s  "
                      f"{json.dumps(level) if level else 'defaults'}", flush=True)
                results.append({"dataset": name, "category": category, "level": level, "score": score,
                                "hits": hits, "items": len(scored),
                                "replies": [text[:120] for _, text in scored[:3]]})
    if args.out is not None:
        args.out.write_text(json.dumps({"model": str(path), "items": args.items, "results": results}, indent=1))


if __name__ == "__main__":
    main()
