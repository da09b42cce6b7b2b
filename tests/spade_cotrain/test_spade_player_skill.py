"""The player's skill across rounds: the selfplay trainer plays a fixed set of held-out seed-library
games after every update, unhinted, from the same seeds every round; they never enter training,
and the set survives a resume (``testbeds/spade/heldout/games.py``, ``trainers/selfplay/heldout.py``)."""

from __future__ import annotations

import hashlib
import json

import pytest
from cotrain_fakes import ScriptedTurnModel
from spade_loop_fakes import design_tasks

import trainers.selfplay.trainer as selfplay
from curriculum.config import validate_config
from curriculum.core.pool import DesignSample, design_task, env_task
from testbeds.spade.heldout.games import HELDOUT_FILE, choose, heldout_seed
from trainers.selfplay.play import episode_seeds
from trainers.selfplay.warmstart import solution_moves

HELD = ["sequence_next", "shell_game"]
EPISODES = 4
SKILLS = (0.0, 0.5, 1.0)


def _config(tiny_model_dir, **trainer):
    return validate_config({
        "model": {"name_or_path": str(tiny_model_dir)},
        "trainer": {"name": "selfplay", "learning_rate": 0.05, "beta": 0.0, "designer_delay": 1,
                    "micro_batch_size": 8, "torch_threads": 1,
                    "play": {"episodes_per_condition": 2, "max_turns": 2},
                    "pool": {"envs_per_step": 3, "max_plays": 2}, **trainer},
        "testbed": {"name": "spade_pool", "setting": "games"},
        "seed": 3,
    })


def _draw(text: str) -> float:
    """A fixed uniform number per first observation: the fake player's luck on that episode."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 16**8


class SkilledTurnModel(ScriptedTurnModel):
    """The scripted agent on pool environments; on a held-out game, the right answer to an episode
    whose first observation draws below ``skill`` and a wrong one otherwise (so a higher skill
    wins a superset of the episodes)."""

    def __init__(self, answers: dict[str, tuple[str, str]]) -> None:
        super().__init__()
        self.answers = answers
        """First observation of a held-out episode → (its game's hash, the right answer)."""
        self.skill = 0.0
        self.heldout_prompts: list[str] = []

    def _answer(self, prompt: str) -> str:
        obs = next((o for o in self.answers if o in prompt), None)
        if obs is None:
            return super()._answer(prompt)
        self.heldout_prompts.append(prompt)
        return self.answers[obs][1] if _draw(obs) < self.skill else "\\boxed{none}"


def _answers(trainer) -> dict[str, tuple[str, str]]:
    """First observation → (game hash, the solution's first move), for every held-out episode."""
    out = {}
    for game in trainer.heldout.games:
        for seed in game.reset_seeds:
            with trainer.sandbox().load(game.program) as handle:
                obs = handle.reset(seed).obs
                out[obs] = (game.hash, solution_moves(handle.call("solution"))[0])
    return out


def _expected(answers: dict[str, tuple[str, str]], record, skill: float) -> float:
    """The fake player's mean win rate over the held-out games at ``skill``."""
    per_game = []
    for game in record.games:
        wins = [_draw(obs) < skill for obs, (owner, _) in answers.items() if owner == game.hash]
        per_game.append(sum(wins) / len(wins))
    return sum(per_game) / len(per_game)


def _held_out_tasks(trainer, step: int) -> list:
    """A copy of a held-out game offered for training (as a pool environment and an admitted design)."""
    env = trainer.heldout.environments()[0]
    design = DesignSample(design_id=f"held-{step}", skill=env.skill, completion="copied", admitted=True,
                          reason="ok", env_id=env.hash, messages=[{"role": "user", "content": "Design a game."}])
    return [env_task(env), design_task(design)]


def test_the_curve_follows_the_players_skill_on_fixed_unhinted_episodes(tiny_model_dir, monkeypatch):
    calls = []

    def recording_play(pool, envs, model, config, **kwargs):
        episodes = selfplay_play(pool, envs, model, config, **kwargs)
        calls.append({"envs": [e.hash for e in envs], "conditions": tuple(kwargs["conditions"]),
                      "seed": kwargs["seed"], "episodes": episodes})
        return episodes

    selfplay_play = selfplay.play
    monkeypatch.setattr(selfplay, "play", recording_play)
    trainer = selfplay.SelfPlayTrainer(_config(tiny_model_dir, heldout_games=HELD, heldout_episodes=EPISODES),
                                       testbed=None)
    trainer.setup(None)
    try:
        record = trainer.heldout
        assert record.names() == HELD and record.seed == heldout_seed(3)
        held = record.hashes()
        model = SkilledTurnModel(_answers(trainer))
        trainer.turn_model = model
        rates, logged = [], []
        for step, skill in enumerate(SKILLS):
            model.skill = skill
            calls.clear()
            metrics = trainer.train_round(design_tasks(step) + _held_out_tasks(trainer, step), round_index=step,
                                          seed=100 + step, log=logged.append)
            rates.append([metrics[f"spade/heldout/{name}"] for name in HELD])
            assert metrics["spade/heldout_win_rate"] == pytest.approx(sum(rates[-1]) / len(HELD))
            assert metrics["spade/heldout_episodes"] == len(HELD) * EPISODES
            assert logged[-1]["event"] == "spade_step" and logged[-1]["spade/heldout_win_rate"] == \
                metrics["spade/heldout_win_rate"]
            # never trained on: not admitted, not played for training, no rows
            assert metrics["spade/heldout_excluded"] == 1
            assert not held & set(trainer.pool_envs) and not held & set(trainer.last_env_results)
            assert not held & {r["id"] for r in trainer.last_rows}
            training, heldout = calls[0], calls[-1]
            assert len(calls) == 2 and not held & set(training["envs"]) and training["conditions"] == (False, True)
            # played unhinted, from the recorded seeds, the same every round
            assert heldout["envs"] == [g.hash for g in record.games] and heldout["conditions"] == (False,)
            assert heldout["seed"] == record.seed
            for i, game in enumerate(record.games):
                seeds = [e.seed for e in heldout["episodes"] if e.env_id == game.hash]
                assert seeds == game.reset_seeds == episode_seeds(record.seed, i, EPISODES)
            assert not any(e.hinted for e in heldout["episodes"])
        assert model.heldout_prompts and not any("Hint:" in p for p in model.heldout_prompts)
    finally:
        trainer.close()
    # the curve moves with the player's skill, exactly as the fake's draws say
    expected = [_expected(model.answers, record, skill) for skill in SKILLS]
    assert [sum(r) / len(r) for r in rates] == pytest.approx(expected)
    assert expected[0] == 0.0 < expected[1] < expected[2] == 1.0


def test_the_held_out_set_is_recorded_and_kept_by_a_resume(tiny_model_dir, tmp_path):
    def held_out(run_seed: int, run_dir) -> list[str]:
        run_dir.mkdir(exist_ok=True)
        config = validate_config({**_config(tiny_model_dir, heldout_games=2).model_dump(mode="json"),
                                  "seed": run_seed})
        trainer = selfplay.SelfPlayTrainer(config, testbed=None, run_dir=run_dir)
        trainer.setup(None)
        trainer.close()
        return trainer.heldout.names()

    first = held_out(3, tmp_path / "run")
    assert len(first) == 2 and first == [g.name for g in choose("games", 2, 3)]
    saved = json.loads((tmp_path / "run" / HELDOUT_FILE).read_text())
    assert [g["name"] for g in saved["games"]] == first and saved["episodes"] == 8
    assert all(len(g["reset_seeds"]) == 8 for g in saved["games"])
    other = held_out(4, tmp_path / "elsewhere")
    assert other != first  # another run seed draws another set...
    assert held_out(4, tmp_path / "run") == first  # ...but a run that has a record keeps playing it
    assert held_out(3, tmp_path / "fresh") == first  # and the draw itself is a function of the run seed


def test_a_drawn_set_avoids_the_agent_warm_start_and_the_warm_start_avoids_it(tiny_model_dir, monkeypatch):
    from testbeds.spade.synthetic.seeds import seed_library

    names = [s.name for s in seed_library("games")]
    warm = [n for n in names if n not in ("anagram", "take_away")]
    for seed in range(6):
        assert sorted(g.name for g in choose("games", 2, seed, avoid=warm)) == ["anagram", "take_away"]
    with pytest.raises(ValueError, match="more games seed-library games than the 2"):
        choose("games", 3, 0, avoid=warm)
    seen = {}

    def agent_examples(setting, config, sandbox, n, seed, names=None):
        seen["names"] = names
        return []

    import trainers.selfplay.warmstart as warmstart

    monkeypatch.setattr(warmstart, "agent_examples", agent_examples)
    trainer = selfplay.SelfPlayTrainer(_config(tiny_model_dir, heldout_games=HELD, agent_warmstart=True),
                                       testbed=None)
    trainer.setup(None)
    trainer.warmstart_examples(4, seed=0)
    assert seen["names"] == [n for n in names if n not in HELD]
    trainer.heldout = None
    trainer.warmstart_examples(4, seed=0)
    assert seen["names"] is None  # nothing held out: the whole library, as before
    trainer.close()
