"""Round 0 shared by the engineers of a comparison.

In a controlled comparison the runs of one seed differ only in ``engineer``, and round 0 does not
depend on the engineer: the round-0 proposal comes from ``testbed.initial_proposal`` with the
seed's derived stream, training and eval draw from (seed, round, purpose) streams, and the first
design happens after round 0's eval. So every engineer of a seed computes the same round 0.
``compare`` therefore runs it once per seed, as a one-round *stem* run (its design skipped, like
any last round), and starts each engineer's run from the stem's committed round 0
(``RunDir.fork``); that run's first step is its own design for round 1 (``loop._extend``). A
stem's one round is not its runs' last, so it runs no test-suite eval after it unless the runs
test every round (``test_every_round``; ``loop.run(final_test=False)``).
A stem is the resume of a run interrupted after round 0, so a forked run equals an unshared one
as exactly as a resumed run equals an uninterrupted one (``tests/bench/test_bench_stem.py``
checks both give the same compare). With R rounds this saves (E − 1)/E of round 0 for E engineers:
a third of the compute of a three-round comparison, and the warm start and pre-training evals of
every run but one.

An engineer that can change round 0 (one that adds warm-start examples of its own) declares
``Engineer.shapes_round0`` and runs its own round 0; so does one that overrides
``Engineer.initial_design`` (it may design round 0's proposal).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from curriculum.config import RunConfig, validate_config
from curriculum.registry import ENGINEERS
from curriculum.rundir import RunDir, run_path
from engineers.base import Engineer


def shares_round0(cls: type[Engineer]) -> bool:
    """Whether runs with this engineer class may start from a shared round 0."""
    return (not cls.shapes_round0 and cls.warmstart_examples is Engineer.warmstart_examples
            and cls.initial_design is Engineer.initial_design)


def round0_key(config: RunConfig) -> str:
    """Hash of everything round 0 depends on: the whole config but the engineer, the run's name
    and its round count."""
    data = config.model_dump(mode="json")
    for name in ("engineer", "run_name", "rounds", "output_dir"):
        data.pop(name, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass
class Stem:
    """One shared round 0 and the runs that start from it."""

    config: RunConfig
    """The stem run's config: the first member's, with one round and the stem's name."""
    members: list[tuple[str, int]] = field(default_factory=list)
    """(engineer, seed) keys of the runs forked from it."""

    @property
    def path(self) -> Path:
        return run_path(self.config)


def plan_stems(configs: dict[tuple[str, int], RunConfig], new: set[tuple[str, int]],
               stems_dir: Path) -> dict[str, Stem]:
    """Stems for the ``new`` runs (not started yet) that can share round 0: grouped by
    ``round0_key``, one stem per group of at least two runs (a single run gains nothing) or
    whose stem exists already (a comparison cut before all its runs started)."""
    groups: dict[str, list[tuple[str, int]]] = {}
    order = {key: i for i, key in enumerate(configs)}
    for key in sorted(new, key=lambda k: (k[1], order[k])):
        if configs[key].rounds > 1 and shares_round0(ENGINEERS.get(configs[key].engineer.name).load()):
            groups.setdefault(round0_key(configs[key]), []).append(key)
    stems = {}
    for digest, members in groups.items():
        first = configs[members[0]]
        name = f"seed{first.seed}-{digest}"
        if len(members) < 2 and not (Path(stems_dir) / name / "config.yaml").is_file():
            continue  # alone, and no stem from an earlier (cut) comparison to start from
        config = validate_config({**first.model_dump(mode="json"), "rounds": 1, "run_name": name,
                                  "keep_final_optimizer_state": True,
                                  "output_dir": str(Path(stems_dir).resolve())}, source=f"stem {name}")
        stems[name] = Stem(config=_saved_or(config), members=members)
    return stems


def _saved_or(config: RunConfig) -> RunConfig:
    """An existing stem keeps the config it was started with (its engineer may be another
    member's: any member computes the same round 0)."""
    if (run_path(config) / "config.yaml").is_file():
        return RunDir.open(run_path(config)).saved_config()
    return config


def fork_member(stem: Stem, config: RunConfig) -> RunDir:
    """Start ``config``'s run from the finished ``stem``: its round 0 with this engineer's own
    initial state."""
    from curriculum.loop import build_engineer

    engineer = build_engineer(config, None)
    try:
        state = engineer.state_dict()
    finally:
        engineer.close()
    return RunDir.fork(RunDir.open(stem.path), config, engineer_state=state)
