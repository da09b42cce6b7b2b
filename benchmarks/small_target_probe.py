"""How much reward signal a target gives the small learner: greedy success and groups without spread.

A curriculum can matter only where training directly on the target gives GRPO little to learn
from: every group of G sampled plans scores alike (no reward spread, zero advantage). For the
warm-started small learner of ``--config`` and each bucket (map size x hole ratio, the config's
``train_agents``), this prints:

* ``greedy``: the valid rate of greedy plans (what the eval scores);
* ``sampled``: the valid rate of plans sampled at the training temperature;
* ``pass@G``: the share of tasks with at least one valid plan among G samples;
* ``no_spread``: the share of groups of G whose rewards are all equal (GRPO learns nothing there).

Each row is measured on ``--tasks`` fresh instances per bucket. ``--set`` overrides the config as
``curriculum run --set`` does. Output: one line per bucket and, with ``--out``, a JSON file.

Run: ``python benchmarks/small_target_probe.py --config configs/mapf_small_learns.yaml
--sizes 5x5,6x6,7x7,8x8 --holes 0.2,0.35``. One process, one torch thread.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]


def probe_bucket(trainer: Any, size: str, hole: float, wait: float, n: int, seed: int) -> dict[str, Any]:
    """Greedy and sampled valid rate, pass@G and the no-spread share on ``n`` fresh tasks."""
    import numpy as np

    from benchmarks.small_learning_curve import proposal
    from trainers.small.trainer import call_generator

    testbed, G = trainer.testbed, trainer.config.num_generations
    tasks = testbed.sample(proposal([size], hole, wait), n, seed=seed)  # all of the budget on one bucket
    greedy = [testbed.score(t, c)[1]["valid"] for t, c in zip(tasks, trainer.policy().generate(tasks, seed=seed))]
    _, _, rewards, scored = trainer._sample_groups(tasks, call_generator(seed, 0x505242), group_offset=0)
    r = np.asarray(rewards).reshape(len(tasks), G)                   # (tasks, G)
    valid = np.asarray([s["valid"] for s in scored]).reshape(len(tasks), G)
    return {"size": size, "hole_ratio": hole, "wait_ratio": wait, "tasks": len(tasks), "greedy": float(np.mean(greedy)),
            "sampled": float(valid.mean()), f"pass@{G}": float(valid.max(axis=1).mean()),
            "no_spread": float((r.max(axis=1) == r.min(axis=1)).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "mapf_small_learns.yaml")
    parser.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    parser.add_argument("--sizes", type=lambda s: s.split(","), default=["3x3", "4x4", "5x5", "6x6", "7x7", "8x8"])
    parser.add_argument("--holes", type=lambda s: [float(x) for x in s.split(",")], default=[0.2])
    parser.add_argument("--waits", type=lambda s: [float(x) for x in s.split(",")], default=[0.0])
    parser.add_argument("--tasks", type=int, default=64, help="fresh instances per bucket")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    from benchmarks.small_learning_curve import build

    torch.set_num_threads(1)
    trainer = build(args.config, args.set, args.seed, vary_init=False)
    rows = []
    for size in args.sizes:
        for hole in args.holes:
            for wait in args.waits:
                rows.append(probe_bucket(trainer, size, hole, wait, args.tasks, seed=30_000 + args.seed))
                print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in rows[-1].items()),
                      flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"config": str(args.config), "set": args.set, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
