"""The co-training trainer on a tiny real model with a scripted agent: regret from actual plays,
expected per-role advantages, delayed designer rows trained once with capped IS weights."""

import random

import numpy as np
import pytest
from cotrain_fakes import ScriptedTurnModel
from spade_loop_fakes import design_tasks

from curriculum.config import validate_config
from trainers.selfplay import rewards as R
from trainers.selfplay.play import episode_seeds

G = 4
DELAY = 2


@pytest.fixture(scope="module")
def run_config(tiny_model_dir):
    return validate_config({
        "model": {"name_or_path": str(tiny_model_dir)},
        "trainer": {"name": "selfplay", "learning_rate": 0.05, "beta": 0.0, "designer_delay": DELAY,
                    "is_cap": 1.5, "micro_batch_size": 8, "torch_threads": 1,
                    "play": {"episodes_per_condition": G, "max_turns": 2},
                    "pool": {"envs_per_step": 3, "max_plays": 2}},
        "seed": 3,
    })


def _variant(run_config, **trainer):
    """The module's run config with some trainer fields changed."""
    return validate_config({**run_config.model_dump(mode="json"),
                            "trainer": {**run_config.trainer.model_dump(mode="json"), **trainer}})


def _expected_advantages(rows, std_roles=("agent", "designer")) -> list[float]:
    """By hand: centre each reward on its (role, group) mean; divide the centred values of each
    role in ``std_roles`` by that role's own std (population std, eps 1e-4)."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((r["role"], r["group"]), []).append(r["reward"])
    centred = [r["reward"] - sum(groups[(r["role"], r["group"])]) / len(groups[(r["role"], r["group"])])
               for r in rows]
    stds = {}
    for role in std_roles:
        vals = [c for c, r in zip(centred, rows) if r["role"] == role]
        stds[role] = (sum((c - sum(vals) / len(vals)) ** 2 for c in vals) / len(vals)) ** 0.5 if len(vals) > 1 else 0.0
    return [c / (stds[r["role"]] + 1e-4) if r["role"] in stds else c for c, r in zip(centred, rows)]


def _expected_guess_wins(seed: int, env_index: int) -> list[bool]:
    # unhinted, the scripted agent always answers 1: it wins iff the target is 1
    return [random.Random(s).randint(1, 9) == 1 for s in episode_seeds(seed, env_index, G)]


@pytest.mark.parametrize("designer_advantage", ["role_std", "centred"])
def test_four_steps(run_config, designer_advantage):
    from trainers.selfplay.trainer import SelfPlayTrainer

    if designer_advantage == "role_std":
        assert run_config.trainer.designer_advantage == "role_std"  # the default
    trainer = SelfPlayTrainer(_variant(run_config, designer_advantage=designer_advantage), testbed=None)
    trainer.setup(None)
    trainer.turn_model = ScriptedTurnModel()
    trained_designs: dict[str, list[int]] = {}
    expected_by_id: dict[str, float] = {}
    try:
        for step in range(4):
            seed = 100 + step
            metrics = trainer.train_round(design_tasks(step), round_index=step, seed=seed)
            stats = trainer.last_env_results
            # regret from actual plays: the hint reveals the target, so hinted episodes all win
            wins = _expected_guess_wins(seed, 0)
            guess = stats[f"guess-{step}"]
            assert guess.win_rate_hint == 1.0
            assert guess.win_rate == pytest.approx(np.mean(wins))
            assert guess.regret == pytest.approx(1.0 - np.mean(wins))
            assert stats[f"easy-{step}"].win_rate == 1.0 and stats[f"easy-{step}"].regret == 0.0
            assert trainer.env_outcomes() == list(stats.values())
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
            expected_by_id.update(expected)
            # the spread of the uncentred designer rewards, rejected design included
            uncentred = [guess_reward, 0.0, -1.0, guess2_reward]
            assert metrics["spade/designer/reward_std_all"] == pytest.approx(np.std(uncentred))
            assert metrics["spade/designer/reward_min_all"] == -1.0
            assert metrics["spade/designer/reward_max_all"] == pytest.approx(max(uncentred))
            regrets = [s.regret for s in stats.values()]
            assert metrics["spade/regret_played_max"] == pytest.approx(max(regrets))
            assert metrics["spade/regret_positive_envs"] == sum(r > 0 for r in regrets)
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
            # per-role advantages, computed by hand (not with the function under test)
            std_roles = ("agent", "designer") if designer_advantage == "role_std" else ("agent",)
            assert [r["advantage"] for r in rows] == pytest.approx(_expected_advantages(rows, std_roles))
            # designer advantage = its per-skill centred reward, divided by the designer role's own
            # std by default (unit scale, like the agent's); only centred with ``centred``
            centred = {r["id"]: expected_by_id[r["id"]] for r in designer}
            scale = float(np.std(list(centred.values()))) + 1e-4 if designer_advantage == "role_std" and centred else 1.0
            assert {r["id"]: r["advantage"] for r in designer} == \
                pytest.approx({k: v / scale for k, v in centred.items()})
            if designer:
                unit = np.std([r["advantage"] for r in designer]) == pytest.approx(1.0, abs=1e-2)
                assert unit == (designer_advantage == "role_std")
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
    from trainers.selfplay.trainer import SelfPlayTrainer

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


def test_designer_signal_regret_and_penalties(run_config):
    """regret + anchor by default, centred per skill with the rejected designs' penalties."""
    from trainers.selfplay.buffer import DesignerSample
    from trainers.selfplay.trainer import SelfPlayTrainer

    def sample(i, admitted, skill):
        return DesignerSample(id=str(i), step=0, skill=skill, prompt_ids=[1], completion_ids=[2],
                              behaviour_logprobs=[-1.0], env_id=f"e{i}" if admitted else None, admitted=admitted,
                              parts={} if admitted else {"penalty": -0.5})

    designs = [sample(0, True, "a"), sample(1, False, "a"), sample(2, True, "b")]
    stats = {"e0": {"returns": [0.3] * 10, "returns_hint": [0.65] * 10, "win_rate": 0.275, "win_rate_hint": 0.7,
                    "learning_potential": 0.0},
             "e2": {"returns": [1.0], "returns_hint": [1.0], "win_rate": 1.0, "win_rate_hint": 1.0,
                    "learning_potential": 0.0}}
    trainer = SelfPlayTrainer(run_config, testbed=None)
    rewards, parts = trainer._designer_rewards(designs, stats)
    blend0 = 0.4 * 1.0 + 0.6 * 0.5
    assert parts["0"]["regret"] == pytest.approx(0.35) and parts["0"]["uncentred"] == pytest.approx(blend0)
    assert rewards["0"] == pytest.approx(blend0 - (blend0 - 0.5) / 2)
    assert rewards["1"] == pytest.approx(-0.5 - (blend0 - 0.5) / 2)
    assert rewards["2"] == 0.0  # alone in its skill


class LearningTurnModel:
    """The scripted agent, but unhinted it answers the right number when the target is at most
    ``level`` (it recovers the target from the observation): raising ``level`` between steps makes
    the agent's return on a guessing game rise, keeping it makes the return flat."""

    def __new__(cls, level: int):
        from cotrain_fakes import ScriptedTurnModel

        class _Model(ScriptedTurnModel):
            def _answer(self, prompt: str) -> str:
                if "Hint:" in prompt or "Say yes" in prompt:
                    return super()._answer(prompt)
                target = int(prompt.split("(id ")[1].split(")")[0]) * 3 % 10
                return f"\\boxed{{{target if target <= self.level else 1}}}"

        model = _Model()
        model.level = level
        return model


def _lp_by_hand(returns, fast=0.35, slow=0.15) -> float:
    f = s = returns[0]
    for r in returns[1:]:
        f, s = f + fast * (r - f), s + slow * (r - s)
    return abs(f - s) / (2 * (fast - slow))


@pytest.mark.parametrize("levels", [(5, 5, 5), (0, 5, 9)], ids=["flat", "rising"])
def test_learning_potential_from_successive_plays(run_config, levels):
    """``designer_signal: learning_potential``: a design is scored at its training step (k = 2 steps
    later) from its environment's returns over the k + 1 plays in between. Flat returns give 0
    (the old first-play score gave 0.2 x the mean return); rising returns a positive value."""
    from trainers.selfplay.trainer import SelfPlayTrainer

    trainer = SelfPlayTrainer(_variant(run_config, designer_signal="learning_potential"), testbed=None)
    trainer.setup(None)
    try:
        returns = []
        for step, level in enumerate(levels):
            trainer.turn_model = LearningTurnModel(level)
            # same seed every step: same episode seeds, so only the agent's level changes the return
            metrics = trainer.train_round(design_tasks(0) if step == 0 else [], round_index=step, seed=11)
            returns.append(trainer.last_env_results["guess-0"].mean_return)
            designer = {r["id"]: r["reward"] for r in trainer.last_rows if r["role"] == "designer"}
            if step < DELAY:
                assert designer == {} and metrics["spade/designer_rows"] == 0.0
        assert len(returns) == DELAY + 1  # the environment was replayed until its design was scored
        lp = _lp_by_hand(returns)
        if levels[0] == levels[-1]:
            assert returns[0] == returns[-1] and lp == 0.0
        else:
            assert returns[0] < returns[1] < returns[2] and lp > 0.1
        # the LP takes the regret's place in the blend; the anchor stays (at the latest win rate)
        win = trainer.last_env_results["guess-0"].win_rate
        guess = R.blend(R.regret_term(lp), R.anchor(win))
        easy = R.blend(R.regret_term(0.0), R.anchor(1.0))  # mastered at step 0: one play, LP 0
        if levels[0] == levels[-1]:
            assert guess == pytest.approx(0.6 * R.anchor(win)) and R.anchor(win) > 0  # anchor, not 0
        # logic skill: guess-0 and easy-0, centred per skill
        assert designer["0-0"] == pytest.approx(guess - (guess + easy) / 2)
        assert designer["0-1"] == pytest.approx(easy - (guess + easy) / 2)
    finally:
        trainer.close()


def test_learning_potential_needs_a_delay(run_config):
    from curriculum.config import ConfigError

    with pytest.raises(ConfigError, match="designer_delay >= 1"):
        _variant(run_config, designer_signal="learning_potential", designer_delay=0)
    with pytest.raises(ConfigError, match="ema_fast"):
        _variant(run_config, ema_fast=0.1, ema_slow=0.2)


def _untrainable(tasks):
    from curriculum.core.types import Task

    return [Task(id=t.id, messages=t.messages,
                 data={**t.data, "design": {**t.data["design"], "trainable": False}})
            if t.data["kind"] == "design" else t for t in tasks]


@pytest.mark.parametrize("how", ["frozen_designs", "train_designer_false"])
def test_frozen_designer_is_never_trained(run_config, how, monkeypatch):
    """A frozen designer's designs are played and scored, but never become designer rows (no
    log-probs are even computed for them)."""
    from trainers.selfplay.trainer import SelfPlayTrainer

    # delay 0: a trainable design would become a designer row in this very step
    config = _variant(run_config, designer_delay=0, **({"train_designer": False} if how == "train_designer_false"
                                                      else {}))
    trainer = SelfPlayTrainer(config, testbed=None)
    trainer.setup(None)
    trainer.turn_model = ScriptedTurnModel()
    monkeypatch.setattr(trainer, "sequence_logprobs", lambda *a: pytest.fail("log-probs of a frozen design"))
    try:
        tasks = _untrainable(design_tasks(0)) if how == "frozen_designs" else design_tasks(0)
        metrics = trainer.train_round(tasks, round_index=0, seed=5)
        assert metrics["spade/designer_rows"] == 0.0 and metrics["spade/designer_frozen"] == 4.0
        assert metrics["spade/designer/regret"] > 0.0  # still scored for the logs
        assert all(r["role"] == "agent" for r in trainer.last_rows) and len(trainer.buffer) == 0
    finally:
        trainer.close()


def test_kl_term_uses_a_reference_model(run_config):
    """``beta > 0`` (the SPADE tool-use and 8B configs): TRL keeps a reference model and the loss
    carries the KL term."""
    from trainers.selfplay.trainer import SelfPlayTrainer

    trainer = SelfPlayTrainer(_variant(run_config, beta=0.04), testbed=None)
    trainer.setup(None)
    trainer.turn_model = ScriptedTurnModel()
    logged: list[dict] = []
    try:
        metrics = trainer.train_round(design_tasks(0), round_index=0, seed=1, log=logged.append)
        assert trainer._trl.ref_model is not None and np.isfinite(metrics["train/loss"])
        assert any("train/kl" in record or "kl" in record for record in logged)
    finally:
        trainer.close()


def test_frozen_pool_retires_mastered_for_good(run_config):
    """A fixed pool handed over every step (the fixed-pool baseline): mastered environments leave
    and are not re-admitted; only ``envs_per_step`` are played per step."""
    from cotrain_fakes import EASY_ENV, GUESS_ENV, HINT

    from curriculum.core.pool import PoolEnvironment, env_task
    from trainers.selfplay.trainer import SelfPlayTrainer

    def task(env_id, program, hint):
        return env_task(PoolEnvironment(hash=env_id, program=program, hint=hint, skill="s"))

    pool = [task("easy", EASY_ENV, "say yes")] + [task(f"guess{i}", GUESS_ENV, HINT) for i in range(3)]
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


def test_agent_warmstart_example_count(run_config):
    from trainers.selfplay.trainer import SelfPlayTrainer

    def examples(**trainer):
        config = validate_config({**run_config.model_dump(mode="json"),
                                  "testbed": {"name": "spade_pool", "setting": "games"},
                                  "trainer": {**run_config.trainer.model_dump(mode="json"), "agent_warmstart": True,
                                              "sandbox": {"workers": 1}, **trainer}})
        trainer = SelfPlayTrainer(config, testbed=None)
        try:
            return trainer.warmstart_examples(6, seed=0)
        finally:
            trainer.close()

    assert len(examples()) == 6
    few = examples(agent_warmstart_examples=2)
    assert len(few) == 2 and all(e["completion"][0]["content"].startswith("\\boxed{") for e in few)
    named = examples(agent_warmstart_examples=3, agent_warmstart_seeds=["secret_suffix"])
    assert all("secret form of" in e["prompt"][1]["content"] for e in named)


def test_play_generates_in_batches_of_its_own_size(run_config):
    from trainers.selfplay.trainer import SelfPlayTrainer

    def batch(**play):
        trainer = SelfPlayTrainer(_variant(run_config, micro_batch_size=1,
                                           play={**run_config.trainer.play.model_dump(mode="json"), **play}),
                                  testbed=None)
        trainer.setup(None)
        try:
            return trainer._turn_model().batch_size
        finally:
            trainer.close()

    assert batch() == 1  # the micro batch of the update, as before
    assert batch(batch_size=16) == 16


def test_a_micro_batch_is_trimmed_to_its_own_width(tiny_model_dir):
    """Short agent rows are not run at the width of the step's longest design row, and the
    trimmed micro batch gives the same completion log-probs as the padded one."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainers.selfplay.trainer import trim_padding

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    pad = 0
    # one row of a step padded to 9 prompt and 8 completion columns; its own prompt is 3 tokens
    # (left padded), its completion 4 tokens, the third of them an environment token
    prompt_ids = torch.tensor([[pad] * 6 + [11, 12, 13]])
    prompt_mask = torch.tensor([[0] * 6 + [1, 1, 1]])
    completion_ids = torch.tensor([[21, 22, 23, 24] + [pad] * 4])
    completion_mask = torch.tensor([[1, 1, 1, 1] + [0] * 4])
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
              "completion_mask": completion_mask, "tool_mask": torch.tensor([[1, 1, 0, 1] + [1] * 4]),
              "advantages": torch.full((1, 8), 0.5), "num_items_in_batch": torch.tensor(3)}
    trimmed = trim_padding(inputs)
    assert trimmed["prompt_ids"].tolist() == [[11, 12, 13]] and trimmed["prompt_mask"].tolist() == [[1, 1, 1]]
    assert trimmed["completion_ids"].tolist() == [[21, 22, 23, 24]]
    assert trimmed["tool_mask"].tolist() == [[1, 1, 0, 1]] and trimmed["advantages"].shape == (1, 4)
    assert trimmed["num_items_in_batch"] is inputs["num_items_in_batch"]

    def completion_logps(batch):
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits
        width = batch["completion_ids"].size(1)
        logp = torch.log_softmax(logits[:, -width - 1:-1], dim=-1)
        return logp.gather(2, batch["completion_ids"][:, :, None])[0, :4, 0]

    assert torch.allclose(completion_logps(inputs), completion_logps(trimmed), atol=1e-5)
    # two rows: the columns either row uses stay
    both = trim_padding({**inputs, "prompt_mask": torch.tensor([[0] * 6 + [1] * 3, [0] * 4 + [1] * 5]),
                         "prompt_ids": prompt_ids.repeat(2, 1), "completion_ids": completion_ids.repeat(2, 1),
                         "completion_mask": torch.tensor([[1] * 4 + [0] * 4, [1] * 6 + [0] * 2]),
                         "tool_mask": torch.ones(2, 8), "advantages": torch.ones(2, 8)})
    assert both["prompt_ids"].shape == (2, 5) and both["completion_ids"].shape == (2, 6)
