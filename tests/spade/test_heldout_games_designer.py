"""The designer side of the held-out games (``testbeds/spade/heldout/games.py``): the designer warm start
never answers with one, and a design that copies one is rejected."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAST_SANDBOX
from spade_fakes import ScriptedPolicy

from engineers.base import DesignContext
from engineers.spade.config import SpadeEngineerConfig
from engineers.spade.diversity import closest_seed
from engineers.spade.engineer import SpadeEngineer
from engineers.spade.parse import parse_structured
from testbeds.spade.heldout.games import choose, new_record, write_record
from testbeds.spade.synthetic.seeds import library_for, seed_library
from testbeds.spade.synthetic.skeleton import format_parts

HELD = ["sequence_next", "small_knapsack"]  # of the six default skills


def _record(run_dir, names=HELD) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    games = choose("games", names, 0)
    write_record(run_dir, new_record("games", games, 5, 2, [[1, 2]] * len(games)))


def _warm_games(run_dir, **config) -> set[str]:
    """The library games the designer warm start of a run in ``run_dir`` answers with."""
    cfg = SpadeEngineerConfig(setting="games", design_mode="structured", corpus="none", designer_warmstart=True,
                              **config)
    examples = SpadeEngineer(cfg, run_dir=str(run_dir)).warmstart_examples(36, seed=0)
    programs = [parse_structured(e["completion"][0]["content"]).program for e in examples]
    return {closest_seed(p, "games")[0] for p in programs}


def test_designer_warmstart_leaves_the_held_out_games_out(tmp_path):
    everything = {s.name for s in library_for("games", SpadeEngineerConfig(setting="games").skill_list())}
    assert set(HELD) <= everything
    assert _warm_games(tmp_path / "plain") == everything  # without a record: every game, held ones included
    _record(tmp_path / "held")
    assert _warm_games(tmp_path / "held") == everything - set(HELD)
    named = _warm_games(tmp_path / "held", warmstart_seeds=["sequence_next", "key_position"])
    assert named == {"key_position"}  # a named held-out game is dropped too
    with pytest.raises(ValueError, match="every engineer.warmstart_seeds game .* is held out"):
        _warm_games(tmp_path / "held", warmstart_seeds=["sequence_next"])


def test_a_copy_of_a_held_out_game_is_rejected(tmp_path):
    outputs = [format_parts(s.parts) for s in seed_library("games") if s.name in ("sequence_next", "robot_walk")]
    config = SpadeEngineerConfig.model_validate({
        "name": "spade", "design_mode": "structured", "designs_per_round": 2, "corpus": "none",
        "diversity": {"embedding": "tfidf"}, "sandbox": FAST_SANDBOX})
    summaries = {}
    for name, held in (("plain", False), ("held", True)):
        if held:
            _record(tmp_path / name)
        engineer = SpadeEngineer(config, run_dir=str(tmp_path / name))
        try:
            design = engineer.design(DesignContext(round=0, total_rounds=2, history=[], proposal=None, testbed=None,
                                                   rng=np.random.default_rng(0), policy=ScriptedPolicy(outputs)))
        finally:
            engineer.close()
        summaries[name] = design.notes["spade"]
    assert len(summaries["plain"]["admitted"]) == 2  # a seed copy is only flagged when it is not held out
    held = summaries["held"]
    assert held["rejections"] == {"near_duplicate": 1} and len(held["admitted"]) == 1
    assert "copy of held-out seed-library game sequence_next" in held["rejected"][0]["detail"]
