"""Held-out seed-library games: the player's skill on one fixed set of games, every round.

SPADE's own win rate (``spade/win_rate``) is measured on each round's play set, the new designs
and the least-played pool environments, so its values of two rounds are rates on different games
and cannot be compared. With ``trainer.heldout_games`` the ``selfplay`` trainer also plays a fixed
set of games of the setting's seed library (``testbeds/spade/synthetic/seeds``) after every round's
update: unhinted, ``trainer.heldout_episodes`` episodes per game, from the same reset seeds and the
same generation seeds every round. Its win rate per round (``spade/heldout_win_rate``, and
``spade/heldout/<game>`` per game) is one curve of the player's skill across rounds.

Choice (``choose``): a list names the games; a number n draws n games of the library with a
generator seeded by the run seed, among the games the agent warm start does not name (so runs of
one seed compare on one set, whatever their engineer). A game is the library file's own program
(for a parametrised game, its file's values).

Record (``HELDOUT_FILE`` in the run directory, ``HeldoutRecord``): the games with their programs,
the seed and each game's reset seeds. The trainer writes it when a run starts and every later
start (a resume, an extension) reads it back, so the run keeps playing the same programs from the
same seeds even if the library or the choice rule changes in between.

Never trained on, in that run: the trainer's pool never admits a program of the set (nor plays it
for training), the agent warm start leaves the games out, the designer warm start
(``engineers/spade/warmstart.py``) reads the record and leaves them out too, and the designer's
admission rejects a design whose closest seed-library game is a held-out one at the seed-copy
similarity (``engineer.diversity.seed_copy_threshold``) as ``near_duplicate``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.pool import PoolEnvironment, program_hash
from testbeds.spade.synthetic.seeds import SeedEnvironment, library_for, seed_library

HELDOUT_FILE = "spade_heldout_games.json"
"""The run's held-out games, in its run directory (``HeldoutRecord``)."""

STREAM = 0x4E1D_6A3E
"""Tags the held-out generator's stream of the run seed (apart from every other use of it)."""


class HeldoutGame(BaseModel):
    """One held-out game as the run plays it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Seed-library file stem."""
    skill: str
    """Its skill tag."""
    hash: str
    """Program hash (``program_hash``), the environment's id."""
    program: str
    """The program played."""
    hint: str = ""
    """Its privileged hint (recorded; held-out episodes never show it)."""
    reset_seeds: list[int] = Field(default_factory=list)
    """The reset seeds of its episodes, the same every round."""


class HeldoutRecord(BaseModel):
    """A run's held-out games (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    setting: str
    """``games`` or ``tools``."""
    seed: int
    """Seed of every round's held-out play: reset seeds and agent sampling."""
    episodes: int
    """Unhinted episodes per game per round."""
    games: list[HeldoutGame]
    """The games, in play order."""

    def names(self) -> list[str]:
        return [g.name for g in self.games]

    def hashes(self) -> frozenset[str]:
        return frozenset(g.hash for g in self.games)

    def environments(self) -> list[PoolEnvironment]:
        """The games as the pool's environments (what the trainer's play takes)."""
        return [PoolEnvironment(hash=g.hash, setting=self.setting, skill=g.skill, hint=g.hint,
                                program=g.program) for g in self.games]


def heldout_seed(run_seed: int) -> int:
    """The seed of a run's held-out play, from its run seed (below 2**31)."""
    return int(np.random.SeedSequence([run_seed, STREAM]).generate_state(1)[0] % (2**31 - 1))


def choose(setting: str, spec: Sequence[str] | int, run_seed: int,
           avoid: Iterable[str] = ()) -> list[SeedEnvironment]:
    """The held-out games named by ``spec`` (module docstring); ``avoid``: names the run trains
    on (a named game among them is a ValueError, a drawn one is never among them)."""
    avoid = set(avoid)
    if not isinstance(spec, int):
        clash = sorted(set(spec) & avoid)
        if clash:
            raise ValueError(f"held-out games {', '.join(clash)} are also warm-start games: "
                             "a held-out game must not be trained on")
        chosen = {s.name: s for s in library_for(setting, None, list(spec))}
        return [chosen[name] for name in spec]
    pool = [s for s in seed_library(setting) if s.name not in avoid]
    if spec > len(pool):
        raise ValueError(f"heldout_games: {spec} asks for more {setting} seed-library games than the "
                         f"{len(pool)} the run does not train on")
    rng = np.random.default_rng(np.random.SeedSequence([run_seed, STREAM]))
    return [pool[i] for i in sorted(rng.choice(len(pool), size=spec, replace=False))]


def new_record(setting: str, games: Sequence[SeedEnvironment], seed: int, episodes: int,
               reset_seeds: Sequence[Sequence[int]]) -> HeldoutRecord:
    """The record of ``games`` played ``episodes`` times a round from ``seed``."""
    return HeldoutRecord(setting=setting, seed=seed, episodes=episodes, games=[
        HeldoutGame(name=g.name, skill=g.skill, hash=program_hash(g.program), program=g.program, hint=g.hint,
                    reset_seeds=list(s)) for g, s in zip(games, reset_seeds, strict=True)])


def read_record(run_dir: str | Path | None) -> HeldoutRecord | None:
    """The run's record, or ``None`` when it has none (no held-out games, or not written yet)."""
    path = Path(run_dir) / HELDOUT_FILE if run_dir is not None else None
    if path is None or not path.is_file():
        return None
    return HeldoutRecord.model_validate_json(path.read_text())


def write_record(run_dir: str | Path, record: HeldoutRecord) -> None:
    path = Path(run_dir) / HELDOUT_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record.model_dump(mode="json"), indent=1) + "\n")
    tmp.replace(path)


def heldout_names(run_dir: str | Path | None) -> frozenset[str]:
    """Names of the run's held-out games (empty without a record)."""
    record = read_record(run_dir)
    return frozenset(record.names()) if record is not None else frozenset()
