"""The co-training trainer on a tiny real model with a scripted agent: regret from actual plays,
expected per-role advantages, delayed designer rows trained once with capped IS weights."""

import random

import numpy as np
import pytest
from cotrain_fakes import ScriptedTurnModel
from spade_loop_fakes import design_tasks

from curriculum.config import validate_config
from engineers.spade import rewards as R
from engineers.spade.play import episode_seeds

G = 4
DELAY = 2


@pytest.fixture(scope="module")
def run_config(tiny_model_dir):
    from curriculum.registry import TRAINERS

    if "selfplay" not in TRAINERS:
        TRAINERS.register("selfplay", "trainers.selfplay:SelfPlayTrainer", "trainers.selfplay:SelfPlayConfig",
                          "SPADE co-training")
    return validate_config({
        "model": {"name_or_path": str(tiny_model_dir)},
        "trainer": {"name": "selfplay", "learning_rate": 0.05, "beta": 0.0, "designer_delay": DELAY,
                    "is_cap": 1.5, "micro_batch_size": 8, "torch_threads": 1,
                    "play": {"episodes_per_condition": G, "max_turns": 2},
                    "pool": {"envs_per_step": 3, "max_plays": 2}},
        "seed": 3,
    })


def _expected_guess_wins(seed: int, env_index: int) -> list[bool]:
    # unhinted, the scripted agent always answers 1: it wins iff the target is 1
    return [random.Random(s).randint(1, 9) == 1 for s in episode_seeds(seed, env_index, G)]


def test_four_steps(run_config):
    from trainers.selfplay import SelfPlayTrainer

    trainer = SelfPlayTrainer(run_config, testbed=None)
    trainer.setup(None)
    trainer.turn_model = ScriptedTurnModel()
    trained_designs: dict[str, list[int]] = {}
    try:
        for step in range(4):
            seed = 100 + step
            metrics = trainer.train_round(design_tasks(step), round_index=step, seed=seed)
            stats = trainer.last_env_results
            # regret from actual plays: the hint reveals the target, so hinted episodes all win
            wins = _expected_guess_wins(seed, 0)
            guess = stats[f"guess-{step}"]
            assert guess["win_rate_hint"] == 1.0
            assert guess["win_rate"] == pytest.approx(np.mean(wins))
            assert guess["regret"] == pytest.approx(1.0 - np.mean(wins))
            assert stats[f"easy-{step}"]["win_rate"] == 1.0 and stats[f"easy-{step}"]["regret"] == 0.0
            # this step's designs are scored: uncentred rewards, then centred per skill
            p1 = float(np.mean(wins))
            guess_reward = R.blend(R.regret_term(1.0 - p1), R.anchor(p1))
            p2 = float(np.mean(_expected_guess_wins(seed, 2)))
            guess2_reward = R.blend(R.regret_term(1.0 - p2), R.anchor(p2))
            expected = {f"{step}-0": guess_reward - guess_reward / 2, f"{step}-1": 0.0 - guess_reward / 2,
                        f"{step}-2": -1.0 - (-1.0 + guess2_reward) / 2,
                        f"{step}-3": guess2_reward - (-1.0 + guess2_reward) / 2}
            buffered = {s.id: s.reward for s in trainer.buffer.pending() if s.step == step}
            if DELAY > 0:
                assert buffered == pytest.approx(expected)
            # the update's rows: agent rows are this step's unhinted episodes that produced tokens
            rows = trainer.last_rows
            agent = [r for r in rows if r["role"] == "agent"]
            designer = [r for r in rows if r["role"] == "designer"]
            assert len(agent) == 3 * G
            assert all(r["group"].endswith("|plain") for r in agent)
            assert [r["reward"] for r in agent if r["group"] == f"guess-{step}|plain"] == [float(w) for w in wins]
            # designer rows: generated exactly DELAY steps ago
            assert all(r["generated_step"] == step - DELAY for r in designer)
            assert len(designer) == (4 if step >= DELAY else 0)
            for r in designer:
                trained_designs.setdefault(r["id"], []).append(step)
                assert all(0.0 <= w <= 1.5 + 1e-9 for w in r["is_weights"])
            # expected per-role advantages, recomputed independently
            exp_adv = R.role_advantages([r["reward"] for r in rows], [r["group"] for r in rows],
                                        [r["role"] for r in rows])
            assert [r["advantage"] for r in rows] == pytest.approx(exp_adv)
            if designer:
                d_adv = np.array([r["advantage"] for r in designer])
                assert np.std(d_adv) == pytest.approx(1.0, abs=1e-3)
            assert metrics["train/steps"] == 1.0
            assert np.isfinite(metrics["train/loss"])
            assert metrics["spade/admission_rate"] == 0.75
            assert metrics["spade/rejected/syntax_error"] == 0.25
        # every design generated at steps 0..1 trained once, at step + DELAY
        assert trained_designs == {f"{s}-{i}": [s + DELAY] for s in range(4 - DELAY) for i in range(4)}
        # mastered easy games retire; a guessing game retires after max_plays
        assert not any(e.startswith("easy-") for e in trainer.pool_envs)
    finally:
        trainer.close()


def test_is_weights_bite_after_updates(run_config):
    """After updates with a large learning rate, delayed designer rows' weights differ from 1."""
    from trainers.selfplay import SelfPlayTrainer

    trainer = SelfPlayTrainer(run_config, testbed=None)
    trainer.setup(None)
    trainer.turn_model = ScriptedTurnModel()
    try:
        for step in range(DELAY + 1):
            trainer.train_round(design_tasks(step), round_index=step, seed=7 + step)
        weights = [w for r in trainer.last_rows if r["role"] == "designer" for w in r["is_weights"]]
        assert weights and max(abs(w - 1.0) for w in weights) > 1e-4
        assert max(weights) <= 1.5 + 1e-9
    finally:
        trainer.close()


def test_designer_signal_switch(run_config):
    """regret+anchor by default; |EMA_fast - EMA_slow| when switched; penalties for rejections."""
    from engineers.spade.buffer import DesignerSample
    from trainers.selfplay import SelfPlayTrainer

    def sample(i, admitted, skill):
        return DesignerSample(id=str(i), step=0, skill=skill, prompt_ids=[1], completion_ids=[2],
                              behaviour_logprobs=[-1.0], env_id=f"e{i}" if admitted else None, admitted=admitted)

    designs = [sample(0, True, "a"), sample(1, False, "a"), sample(2, True, "b")]
    stats = {"e0": {"returns": [0.3] * 10, "returns_hint": [0.65] * 10, "win_rate": 0.275, "win_rate_hint": 0.7,
                    "learning_potential": 0.2},
             "e2": {"returns": [1.0], "returns_hint": [1.0], "win_rate": 1.0, "win_rate_hint": 1.0,
                    "learning_potential": 0.05}}
    trainer = SelfPlayTrainer(run_config, testbed=None)
    rewards, parts = trainer._designer_rewards(designs, stats, {"1": -0.5})
    blend0 = 0.4 * 1.0 + 0.6 * 0.5
    assert parts["0"]["regret"] == pytest.approx(0.35) and parts["0"]["uncentred"] == pytest.approx(blend0)
    assert rewards["0"] == pytest.approx(blend0 - (blend0 - 0.5) / 2)
    assert rewards["1"] == pytest.approx(-0.5 - (blend0 - 0.5) / 2)
    assert rewards["2"] == 0.0  # alone in its skill
    lp = validate_config({**run_config.model_dump(mode="json"),
                          "trainer": {**run_config.trainer.model_dump(mode="json"), "designer_signal": "learning_potential"}})
    rewards, parts = SelfPlayTrainer(lp, testbed=None)._designer_rewards(designs, stats, {"1": -0.5})
    assert parts["0"]["uncentred"] == pytest.approx(0.2)
    assert rewards["0"] == pytest.approx(0.2 - (0.2 - 0.5) / 2)


def test_frozen_pool_retires_mastered_for_good(run_config):
    """A fixed pool handed over every step (the fixed-pool baseline): mastered environments leave
    and are not re-admitted; only ``envs_per_step`` are played per step."""
    from cotrain_fakes import EASY_ENV, GUESS_ENV, HINT

    from testbeds.base import Task
    from trainers.selfplay import SelfPlayTrainer

    def env_task(env_id, source, hint):
        return Task(id=env_id, messages=[], data={"kind": "env", "env_id": env_id, "source": source, "hint": hint,
                                                  "skill": "s", "setting": "games"})

    pool = [env_task("easy", EASY_ENV, "say yes")] + [env_task(f"guess{i}", GUESS_ENV, HINT) for i in range(3)]
    trainer = SelfPlayTrainer(run_config, testbed=None)
    trainer.setup(None)
    trainer.turn_model = ScriptedTurnModel()
    try:
        played = []
        for step in range(3):
            metrics = trainer.train_round(pool, round_index=step, seed=step)
            played.append(set(trainer.last_env_results))
            assert metrics["spade/episodes"] <= 3 * 2 * G
        assert trainer.retired.get("easy") == "mastered"
        assert "easy" not in trainer.pool_envs
        assert sum("easy" in p for p in played) == 1  # played once, mastered, never again
        assert all(len(p) <= 3 for p in played)
    finally:
        trainer.close()
