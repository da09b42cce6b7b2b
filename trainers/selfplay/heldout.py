"""The selfplay trainer's held-out games (``testbeds/spade/heldout/games.py``): which, and what they show.

``resolve_record`` gives the run's ``HeldoutRecord``: the one in the run directory when there is
one (a resume, an extension, a run forked from a shared round 0 that copied it), else a new one
from ``trainer.heldout_games`` (written there when the run has a directory). Reset seeds:
``episode_seeds(record.seed, i, episodes)`` for game i, the rule every play uses, so each round
plays game i from the same seeds.

``heldout_metrics`` turns one round's held-out episodes into the round's metrics:

    spade/heldout/<game>      unhinted win rate on that game this round
    spade/heldout_win_rate    mean of the games' win rates (equal episodes: the pooled rate)
    spade/heldout_return      mean episode return
    spade/heldout_episodes    episodes played (games x heldout_episodes)
    spade/heldout_env_failures  episodes ended by a sandbox failure or a non-deterministic replay
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testbeds.spade.heldout.games import (HeldoutRecord, choose, heldout_seed, new_record, read_record,
                                         write_record)
from trainers.selfplay import rewards as R
from trainers.selfplay.play import Episode, episode_seeds, summarise


def resolve_record(config: Any, setting: str, run_seed: int, run_dir: Path | None, *,
                   write: bool) -> HeldoutRecord | None:
    """The run's held-out games (module docstring); ``None`` when ``heldout_games`` is off and
    the run directory holds no record. ``write``: store a new record (the main process)."""
    saved = read_record(run_dir)
    if saved is not None:
        return saved
    spec = config.heldout_games
    if not spec:
        return None
    games = choose(setting, spec, run_seed, avoid=config.agent_warmstart_seeds or ())
    seed = heldout_seed(run_seed)
    episodes = config.heldout_episodes
    record = new_record(setting, games, seed, episodes,
                        [episode_seeds(seed, i, episodes) for i in range(len(games))])
    if write and run_dir is not None:
        write_record(run_dir, record)
    return record


def warmstart_names(library: Sequence[str], named: Sequence[str] | None,
                    record: HeldoutRecord | None) -> list[str] | None:
    """The agent warm start's games: ``named`` (``None``: the whole ``library``) without the
    held-out ones; ``None`` (every game) when nothing is held out."""
    if record is None:
        return list(named) if named is not None else None
    held = set(record.names())
    return [name for name in (named if named is not None else library) if name not in held]


def heldout_metrics(record: HeldoutRecord, episodes: Sequence[Episode]) -> dict[str, Any]:
    """The round's held-out metrics (module docstring)."""
    stats = summarise(record.environments(), episodes)
    rates = {g.name: stats[g.hash]["win_rate"] for g in record.games}
    out: dict[str, Any] = {f"spade/heldout/{name}": rate for name, rate in rates.items()}
    out["spade/heldout_win_rate"] = R.mean(list(rates.values()))
    out["spade/heldout_return"] = R.mean([e.ret for e in episodes])
    out["spade/heldout_episodes"] = float(len(episodes))
    out["spade/heldout_env_failures"] = float(sum(s["env_failures"] for s in stats.values()))
    return out
