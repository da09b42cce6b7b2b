"""How often does a model's SPADE design pass admission? Prints admitted / rejected by reason.

Makes ``--calls`` design calls of a run config's spade engineer (its setting, design mode,
skills, corpus, token budget; ``--set`` overrides as in ``curriculum run``) with a model
checkpoint, at each of ``--temperature`` (comma-separated; default: the config's
``engineer.temperature``), and admits them in the sandbox exactly as a run does
(``Designer.propose`` + ``Designer.admit_all``, a fresh scratch memory per temperature, the same
prompts at every temperature). Use it to size a warm start before paying for a whole run, e.g. on
the warm-started weights a demo cached:

    python benchmarks/spade_design_probe.py --config configs/spade_games_cpu_demo.yaml \
        --model ~/.cache/curriculum/warmstart/<key> --calls 8 --temperature 0.3,0.7,1.0

Prints one line per call (skill, reason, detail; for admitted designs the closest seed-library
environment and the source similarity, ``diversity.closest_seed``) and per temperature the
totals, how many admitted designs copy a seed game (similarity >= the config's
``diversity.seed_copy_threshold``) and the Vendi score / n; ``--show`` also prints the outputs.
It measures; it trains nothing.
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
from trainers.lm.generation import TransformersPolicy  # noqa: E402
from trainers.lm.models import ModelConfig, load_model, resolve_model_path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="run config with a spade engineer")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: the config's model)")
    parser.add_argument("--calls", type=int, default=8, help="design calls (one generate batch)")
    parser.add_argument("--temperature", default=None,
                        help="comma-separated temperatures (default: engineer.temperature)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override, as in `curriculum run --set` (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", action="store_true", help="print every output")
    args = parser.parse_args()

    config = load_config(args.config, args.overrides)
    if config.engineer.name != "spade":
        parser.error(f"{args.config} has engineer {config.engineer.name!r}, not spade")
    temperatures = ([float(t) for t in args.temperature.split(",")] if args.temperature
                    else [config.engineer.temperature])
    path = args.model or resolve_model_path(config.model.name_or_path)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(path), dtype=config.model.dtype))
    policy = TransformersPolicy(model, tokenizer, config.generation)
    totals = []
    for temperature in temperatures:
        engineer_cfg = config.engineer.model_copy(update={"temperature": temperature})
        with tempfile.TemporaryDirectory(prefix="spade-probe-") as scratch:
            engineer = SpadeEngineer(engineer_cfg, run_dir=scratch)
            try:
                designer = engineer.designer(args.seed)
                start = time.monotonic()
                candidates = designer.propose(policy, 1, args.calls, np.random.default_rng(args.seed),
                                              seed=args.seed, max_new_tokens=engineer_cfg.max_new_tokens or 2048)
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
            if reason == "admitted" and cand.closest_seed:
                detail = f"closest seed {cand.closest_seed[0]} {cand.closest_seed[1]:.2f}"
            print(f"T {temperature}  call {cand.call}  {cand.skill:<24} {reason:<22} "
                  f"{detail.splitlines()[0][:100] if detail else ''}")
            if args.show:
                print(cand.output, "\n" + "-" * 80)
        sims = sorted(c.closest_seed[1] for c in candidates
                      if c.closest_seed and c.admission is not None and c.admission.admitted)
        line = (f"model {path}  temperature {temperature}  {args.calls} calls in {seconds:.0f} s: "
                f"{len(summary.admitted)} admitted ({len(summary.admitted) / args.calls:.0%}), "
                f"{len(summary.seed_copies)} of them seed copies (similarities {[round(s, 2) for s in sims]}), "
                f"vendi/n {summary.vendi_per_n if summary.vendi_per_n is None else round(summary.vendi_per_n, 3)}; "
                f"rejected {dict(summary.rejections)}")
        print(line, flush=True)
        totals.append(line)
    print("\n".join(totals))

if __name__ == "__main__":
    main()
