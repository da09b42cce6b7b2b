"""How often does a model's SPADE design pass admission? Prints admitted / rejected by reason.

Makes ``--calls`` design calls of a run config's spade engineer (its setting, design mode,
skills, corpus, token budget) with a model checkpoint, at ``--temperature`` (default: the
config's ``engineer.temperature``), and admits them in the sandbox exactly as a run does
(``Designer.propose`` + ``Designer.admit_all``, memory in a scratch directory). Use it to size a
warm start before paying for a whole run, e.g. on the warm-started weights a demo cached:

    python benchmarks/spade_design_probe.py --config configs/spade_games_cpu_demo.yaml \
        --model ~/.cache/curriculum/warmstart/<key> --calls 8

Prints one line per call (skill, reason, detail) and the totals; ``--show`` also prints the
outputs. It measures; it trains nothing.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from curriculum.config import load_config  # noqa: E402
from engineers.spade.engineer import SpadeEngineer  # noqa: E402
from trainers.generation import TransformersPolicy  # noqa: E402
from trainers.models import ModelConfig, load_model, resolve_model_path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="run config with a spade engineer")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: the config's model)")
    parser.add_argument("--calls", type=int, default=8, help="design calls (one generate batch)")
    parser.add_argument("--temperature", type=float, default=None, help="default: engineer.temperature")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", action="store_true", help="print every output")
    args = parser.parse_args()

    config = load_config(args.config)
    if config.engineer.name != "spade":
        parser.error(f"{args.config} has engineer {config.engineer.name!r}, not spade")
    engineer_cfg = config.engineer
    if args.temperature is not None:
        engineer_cfg = engineer_cfg.model_copy(update={"temperature": args.temperature})
    path = args.model or resolve_model_path(config.model.name_or_path)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(path), dtype=config.model.dtype))
    policy = TransformersPolicy(model, tokenizer, config.generation)
    with tempfile.TemporaryDirectory(prefix="spade-probe-") as scratch:
        engineer = SpadeEngineer(engineer_cfg, run_dir=scratch)
        try:
            designer = engineer.designer(args.seed)
            start = time.monotonic()
            candidates = designer.propose(policy, 1, args.calls, np.random.default_rng(args.seed), seed=args.seed,
                                          max_new_tokens=engineer_cfg.max_new_tokens or 2048)
            seconds = time.monotonic() - start
            summary = designer.admit_all(candidates, 1, generation_seconds=seconds)
        finally:
            engineer.close()
    reasons: collections.Counter[str] = collections.Counter()
    for cand in candidates:
        result = cand.admission
        reason = "admitted" if result is not None and result.admitted else (
            result.reason.value if result is not None and result.reason else str(cand.parse_reason))
        reasons[reason] += 1
        detail = (result.detail if result is not None else cand.parse_detail).strip()
        print(f"call {cand.call}  {cand.skill:<24} {reason:<22} {detail.splitlines()[0][:100] if detail else ''}")
        if args.show:
            print(cand.output, "\n" + "-" * 80)
    print(f"model {path}  temperature {engineer_cfg.temperature}  {args.calls} calls in {seconds:.0f} s: "
          f"{len(summary.admitted)} admitted ({len(summary.admitted) / args.calls:.0%}); "
          f"rejected {dict(summary.rejections)}")


if __name__ == "__main__":
    main()
