"""``curriculum.walltime``: the token counts of a round, the warm start and the evals before round 0,
and the seconds they imply (pure functions on configs; no model, no probe but one small copy)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from curriculum.config import load_config
from curriculum.walltime import (PROMPT_TOKENS, ROUND_OVERHEAD_S, WARMSTART_FILL, Budget, Model, Rates, Work,
                                 estimate, generate_work, measure_cpu_bandwidth, round_budget,
                                 train_flops_per_token)

ROOT = Path(__file__).resolve().parents[2]
MAPF_DEMO = ROOT / "configs/mapf_cpu_demo.yaml"
SPADE_DEMO = ROOT / "configs/spade_games_cpu_demo.yaml"
MODEL = Model(params=1_000, layers=30, weight_bytes=4_000)
STEPS_ONLY = Rates(flops=1e30, bandwidth=1.0, gen_utilisation=1.0, train_utilisation=1.0)
"""Every FLOP free: only the per-step weight read (W / B = 4,000 s a step) costs time."""


def _config(*sets: str, path: Path = MAPF_DEMO):
    return load_config(path, list(sets))


def _grpo(prompts: int, steps: int, *sets: str):
    return _config(f"trainer.prompts_per_step={prompts}", f"trainer.max_steps_per_round={steps}",
                   "trainer.num_generations=4", "trainer.max_completion_length=100", *sets)


def test_generate_work_counts_one_decode_step_per_token_of_each_call():
    assert generate_work(36, 128, 48) == Work(generated=36 * 128, decode_steps=128,
                                              prefilled=36 * PROMPT_TOKENS)
    assert generate_work(36, 128, 18).decode_steps == 256  # two calls of 18 rows
    assert generate_work(37, 128, 18).decode_steps == 3 * 128  # the last call has one row
    assert generate_work(0, 128, 8) == Work()


def test_grpo_rows_of_one_step_decode_together():
    budget = round_budget(_grpo(4, 2), 0, 0)
    assert budget.round.generated == 2 * 16 * 100
    assert budget.round.decode_steps == 2 * 100  # one call of 4 x 4 rows per optimizer step
    assert budget.round.trained == 2 * 16 * (PROMPT_TOKENS + 100)
    assert budget.round.prefilled == 2 * 4 * PROMPT_TOKENS  # each prompt once for its 4 samples


def test_doubling_the_rows_at_fixed_tokens_halves_the_step_term():
    narrow, wide = round_budget(_grpo(4, 2), 0, 0), round_budget(_grpo(8, 1), 0, 0)
    assert narrow.round.generated == wide.round.generated and narrow.round.trained == wide.round.trained
    assert wide.round.decode_steps * 2 == narrow.round.decode_steps
    config = _grpo(4, 2)
    seconds = [estimate(config, Budget(b.round), MODEL, STEPS_ONLY, gpu=False).round_seconds
               - ROUND_OVERHEAD_S for b in (narrow, wide)]
    assert seconds[0] == pytest.approx(200 * 4_000) and seconds[1] == pytest.approx(seconds[0] / 2)
    # without a step term (a GPU: bandwidth infinite) the two cost the same
    gpu = Rates(flops=1.0, bandwidth=math.inf, gen_utilisation=0.5, train_utilisation=0.5)
    a, b = (estimate(config, Budget(x.round), MODEL, gpu, gpu=True).round_seconds for x in (narrow, wide))
    assert a == pytest.approx(b)


def test_eval_rows_decode_in_calls_of_the_generation_batch():
    small = round_budget(_config("generation.batch_size=18"), 36, 128)
    large = round_budget(_config("generation.batch_size=48"), 36, 128)
    assert small.round.decode_steps - large.round.decode_steps == 128  # 2 calls against 1
    assert small.round.generated == large.round.generated


def test_engineer_calls_decode_one_row_each():
    config = _config("rounds=3")
    base = round_budget(config, 0, 0).round
    with_design = round_budget(config, 0, 0, design=(2, 1_000, 300)).round
    assert with_design.decode_steps - base.decode_steps == round(2 / 3 * 2 * 300)  # no call in the last round
    assert with_design.generated - base.generated == round(2 / 3 * 2 * 300)


def test_spade_decode_steps_are_batched_and_conservative():
    config = _config(path=SPADE_DEMO)
    trainer, play = config.trainer, config.trainer.play
    episodes = 2 * play.episodes_per_condition * trainer.pool.envs_per_step
    heldout = trainer.heldout_count() * trainer.heldout_episodes  # played in their own batches
    assert heldout > 0
    designs = config.engineer.designs_per_round
    expected = (math.ceil(designs / config.generation.batch_size) * config.engineer.max_new_tokens
                + (math.ceil(episodes / play.batch_size) + math.ceil(heldout / play.batch_size))
                * play.max_turns * play.max_new_tokens_per_turn)
    assert round_budget(config, 0, 0).round.decode_steps == expected


@pytest.mark.parametrize("k, beta, factor", [(15, 0.0, 4 / 6), (10, 0.0, (2 + 4 / 3) / 6), (30, 0.0, 1.0),
                                             (15, 0.04, 6 / 8)])
def test_trainable_layers_lower_the_training_term(k, beta, factor):
    full = _config("model.trainable_layers=null", f"trainer.beta={beta}")
    part = _config(f"model.trainable_layers={k}", f"trainer.beta={beta}")
    rates = Rates(flops=1.0, bandwidth=math.inf, gen_utilisation=1.0, train_utilisation=0.5)
    budget = Budget(Work(trained=1_000))
    full_s, part_s = (estimate(c, budget, MODEL, rates, gpu=False).round_seconds - ROUND_OVERHEAD_S
                      for c in (full, part))
    assert full_s == pytest.approx((6 + (2 if beta else 0)) * 1_000 * 1_000 / 0.5)
    assert part_s == pytest.approx(full_s * factor)


def test_trainable_layers_of_an_unknown_depth_count_six_n():
    config = _config("model.trainable_layers=15")
    assert train_flops_per_token(config, Model(1_000, None, 4_000)) == 6 * 1_000
    assert train_flops_per_token(config, MODEL) == 4 * 1_000


def test_warm_start_is_a_separate_term_only_when_it_has_steps():
    rates = Rates(flops=1e9, bandwidth=1e9, gen_utilisation=0.25, train_utilisation=0.5)
    off = _config("trainer.warmstart.steps=0", "eval_before_training=false")
    on = _config("trainer.warmstart.steps=64", "trainer.warmstart.batch_size=8", "eval_before_training=false")
    b_off, b_on = round_budget(off, 36, 128), round_budget(on, 36, 128)
    assert b_off.warmstart == Work()
    tokens = round(WARMSTART_FILL * (PROMPT_TOKENS + on.trainer.max_completion_length))
    assert b_on.warmstart == Work(trained=64 * 8 * tokens)
    e_off, e_on = estimate(off, b_off, MODEL, rates, gpu=False), estimate(on, b_on, MODEL, rates, gpu=False)
    assert e_off.warmstart_seconds == 0 and "warm start" not in e_off.line()
    assert e_on.warmstart_seconds == pytest.approx(4 * 1_000 * 64 * 8 * tokens / (0.5 * 1e9))  # k = 15 of 30
    assert e_on.total_seconds == pytest.approx(e_off.total_seconds)  # the run's total leaves it out
    assert "warm start unless cached" in e_on.line()


def test_warm_start_examples_are_cut_at_max_length():
    config = _config("trainer.warmstart.steps=2", "trainer.warmstart.batch_size=4",
                     "trainer.warmstart.max_length=50")
    assert round_budget(config, 0, 0).warmstart == Work(trained=2 * 4 * 50)


@pytest.mark.parametrize("before, steps, evals", [(True, 64, 2), (True, 0, 1), (False, 64, 0)])
def test_evals_before_round_zero(before, steps, evals):
    config = _config(f"eval_before_training={str(before).lower()}", f"trainer.warmstart.steps={steps}",
                     "generation.batch_size=48")
    assert round_budget(config, 36, 128).once == generate_work(36, 128, 48).times(evals)


@pytest.mark.parametrize("every_round", [False, True])
def test_the_test_suite_is_counted_where_the_loop_runs_it(every_round):
    config = _config("eval_before_training=true", "trainer.warmstart.steps=64", "generation.batch_size=48",
                     f"test_every_round={str(every_round).lower()}")
    validation, test = generate_work(36, 128, 48), generate_work(144, 128, 48)
    without, with_test = round_budget(config, 36, 128), round_budget(config, 36, 128, test=(144, 128))
    # Baseline and warm-start evals on both suites; then the test suite after every round, or once at the end.
    assert with_test.once == validation.times(2) + test.times(2) + (Work() if every_round else test)
    assert with_test.round == (without.round + test if every_round else without.round)


def test_run_total_is_rounds_plus_the_evals_before_round_zero():
    config = _config("rounds=3", "eval_before_training=true")
    rates = Rates(flops=1e9, bandwidth=1e9, gen_utilisation=0.25, train_utilisation=0.5)
    e = estimate(config, round_budget(config, 36, 128), MODEL, rates, gpu=False)
    once = estimate(config, Budget(round_budget(config, 36, 128).once), MODEL, rates, gpu=False).round_seconds
    assert e.total_seconds == pytest.approx(3 * e.round_seconds + once - ROUND_OVERHEAD_S)


def test_simulated_learner_gets_the_fixed_round_time():
    config = load_config(ROOT / "configs/mapf_simulated.yaml")
    e = estimate(config, round_budget(config, 36, 128), None, STEPS_ONLY, gpu=False)
    assert e.warmstart_seconds == 0 and e.total_seconds == pytest.approx(e.round_seconds * config.rounds)


def test_bandwidth_probe_is_plausible():
    assert 1e8 < measure_cpu_bandwidth(mib=16, repeats=2) < 1e13
