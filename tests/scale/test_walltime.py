"""``curriculum.walltime``: the token counts of a round, the warm start and the evals before round 0,
and the seconds they imply (pure functions on configs; no model, no probe but one small copy)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from curriculum.config import load_config
from curriculum.walltime import (DECODE_FILL, PROMPT_TOKENS,
                                 ROUND_OVERHEAD_S, WARMSTART_FILL, Budget, Lane, Lanes, Model, Rates, Work,
                                 central_budget, cpu_lanes, estimate, generate_work, measure_cpu_bandwidth,
                                 measure_cpu_flops, round_budget, train_flops_per_token)

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
    full_s, part_s = (estimate(c, budget, MODEL, rates, gpu=False, central=False).round_seconds - ROUND_OVERHEAD_S
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
    config = _config("rounds=3", "eval_before_training=true", "trainer.warmstart.steps=64")
    rates = Rates(flops=1e9, bandwidth=1e9, gen_utilisation=0.25, train_utilisation=0.5)
    budget = round_budget(config, 36, 128, test=(36, 128))
    e = estimate(config, budget, MODEL, rates, gpu=False)
    outside = sum(e.phases[p] for p in ("setup", "baseline_eval", "baseline_test_eval", "warmstart_eval",
                                        "warmstart_test_eval", "final_test"))
    assert e.total_seconds == pytest.approx(3 * e.round_seconds + outside)
    assert e.total_seconds == pytest.approx(sum(e.phases.values()))
    assert e.phases["overhead"] == pytest.approx(3 * ROUND_OVERHEAD_S)
    # the evals before round 0 and the last test are the suites' evals, each once
    assert e.phases["baseline_eval"] == pytest.approx(e.phases["eval"] / 3)
    assert e.phases["final_test"] > 0 and e.phases["test_eval"] == 0


def test_simulated_learner_gets_the_fixed_round_time():
    config = load_config(ROOT / "configs/mapf_simulated.yaml")
    e = estimate(config, round_budget(config, 36, 128), None, STEPS_ONLY, gpu=False)
    assert e.warmstart_seconds == 0 and e.total_seconds == pytest.approx(e.round_seconds * config.rounds)


def test_bandwidth_probe_is_plausible():
    assert 1e8 < measure_cpu_bandwidth(mib=16, repeats=2) < 1e13


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_matmul_probe_measures_either_precision(dtype):
    assert 1e7 < measure_cpu_flops(size=64, repeats=2, dtype=dtype) < 1e15


# -- precision, engines and the central estimate -----------------------------------------------------------
QUIET = Rates(flops=1e11, bandwidth=math.inf, gen_utilisation=0.25, train_utilisation=0.5, bf16_flops=2e11)
"""No step term; bf16 products at twice the float32 rate."""


@pytest.mark.parametrize("setting, native, expected", [("auto", True, "bf16"), ("auto", False, "fp32"),
                                                       ("true", False, "bf16"), ("false", True, "fp32")])
def test_bf16_autocast_resolves_as_the_trainer_does(setting, native, expected):
    lanes = cpu_lanes(_config(f"trainer.bf16={setting}"), native=native)
    assert lanes.train == expected
    assert lanes.eval == Lane("transformers", expected)  # the eval policy decodes under the same autocast
    assert lanes.rollout == Lane("transformers", expected, sampled=True)  # GRPO samples at T = 0.7


def test_a_bf16_autocast_config_uses_the_bf16_rate():
    config = _config("trainer.bf16=true", "eval_before_training=false", "trainer.warmstart.steps=64")
    budget = round_budget(config, 36, 128)
    lanes = cpu_lanes(config, native=True)
    assert lanes.precisions == {"bf16"}
    bf16 = estimate(config, budget, MODEL, QUIET, gpu=False, lanes=lanes)
    fp32 = estimate(config, budget, MODEL, QUIET, gpu=False, lanes=Lanes(Lane(), Lane(sampled=True), "fp32"))
    for phase in ("train", "eval"):  # every term of both scales with the rate (no step term here)
        assert bf16.phases[phase] == pytest.approx(fp32.phases[phase] / 2)
    assert bf16.warmstart_seconds == pytest.approx(fp32.warmstart_seconds / 2)
    assert "bf16 200 GFLOP/s" in bf16.note and "bf16" not in fp32.note.split(";")[0]


def test_a_bf16_pass_runs_at_its_own_utilisation():
    rates = replace(QUIET, bf16_train_utilisation=0.8, bf16_warm_utilisation=0.4)
    assert rates.pass_rate("bf16") == pytest.approx(0.8 * 2e11)
    assert rates.pass_rate("bf16", warm=True) == pytest.approx(0.4 * 2e11)
    assert rates.pass_rate("fp32") == pytest.approx(0.5 * 1e11)  # float32 keeps the float32 ones
    assert replace(rates, bf16_flops=None).pass_rate("bf16") == pytest.approx(0.5 * 1e11)  # no bf16 probe


def test_vllm_lanes_follow_the_config():
    config = _config("generation.backend=vllm", "trainer.use_vllm=true")
    lanes = cpu_lanes(config, native=True)
    assert lanes.eval == Lane("vllm", "bf16") and lanes.rollout == Lane("vllm", "bf16", sampled=True)
    fp32 = cpu_lanes(_config("generation.backend=vllm", "trainer.use_vllm=true", "trainer.bf16=false"),
                     native=False)
    assert fp32.eval == Lane("vllm", "fp32") and fp32.train == "fp32"
    assert cpu_lanes(_config("trainer.use_vllm=auto"), native=True).rollout.engine == "transformers"


def test_a_vllm_eval_is_one_call_of_every_prompt():
    from curriculum.plan import _budget

    config = _config("generation.backend=vllm", "testbed.test_instances_per_size=24")
    vllm, hf = (_budget(config, cpu_lanes(config, native=True)), _budget(config, Lanes()))
    assert vllm.test_suite.decode_steps == 128 and hf.test_suite.decode_steps == 3 * 128  # 144 rows, batch 48
    assert vllm.test_suite.generated == hf.test_suite.generated


def test_a_vllm_engine_decodes_a_finished_row_no_further():
    config = _config("eval_before_training=true", "trainer.warmstart.steps=64", "generation.backend=vllm",
                     "trainer.use_vllm=true")
    budget = round_budget(config, 36, 128)
    vllm = central_budget(config, budget, cpu_lanes(config, native=True))
    hf = central_budget(config, budget, Lanes(rollout=Lane(sampled=True)))
    assert vllm.eval.generated == round(DECODE_FILL["vllm"] * budget.eval.generated)
    assert hf.eval.generated == budget.eval.generated  # transformers decodes every row to the call's end
    assert vllm.eval.decode_steps == hf.eval.decode_steps == budget.eval.decode_steps
    shipped = central_budget(config, budget, cpu_lanes(config, native=True), as_shipped=True)
    assert shipped.eval.generated == budget.eval.generated  # the model as shipped runs to the limit
    e = estimate(config, budget, MODEL, QUIET, gpu=False, lanes=cpu_lanes(config, native=True))
    assert e.phases["baseline_eval"] > e.phases["warmstart_eval"]


def test_grpo_training_counts_its_padded_and_kept_rows():
    skip, keep = _config("trainer.skip_zero_advantage=true"), _config("trainer.skip_zero_advantage=false")
    budget = round_budget(skip, 0, 0)
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed

    from trainers.grpo.plan import GRPO_KEPT_ROWS, GRPO_LONGEST_COMPLETION

    prompt = MAPFTestbed.prompt_share
    padded = (prompt * PROMPT_TOKENS + GRPO_LONGEST_COMPLETION * 128) / (PROMPT_TOKENS + 128)
    assert 0.55 < padded < 0.65  # the demo's prompts and completions
    assert central_budget(skip, budget, Lanes()).train.trained == round(budget.train.trained * padded * GRPO_KEPT_ROWS)
    assert central_budget(keep, budget, Lanes()).train.trained == round(budget.train.trained * padded)
    # vLLM's samples in bf16: no second pass over them (the correction's log-probs come from training).
    sampled = Lanes(rollout=Lane("vllm", "bf16", True), train="bf16")
    assert central_budget(skip, budget, sampled).train.prefilled == round(budget.train.prefilled * prompt)



def test_self_play_and_its_short_answers_take_their_measured_shares():
    spade = _config(path=SPADE_DEMO)
    counted = round_budget(spade, 16, 48)
    central = central_budget(spade, counted, Lanes())
    from testbeds.spade.testbed import SpadeTestbed
    from trainers.selfplay.trainer import SelfPlayTrainer

    share = SelfPlayTrainer.central_round_share
    assert central.train == Work(round(share * counted.train.generated), round(share * counted.train.decode_steps),
                                 round(share * counted.train.prefilled), round(share * counted.train.trained))
    fill, prompt = SpadeTestbed.eval_answer_fill, SpadeTestbed.prompt_share
    assert central.eval == Work(round(counted.eval.generated * fill), round(counted.eval.decode_steps * fill),
                                round(counted.eval.prefilled * prompt))
    # the model as shipped is counted at its limits, its prompts at their measured length
    shipped = central_budget(spade, counted, Lanes(), as_shipped=True)
    assert shipped.eval == replace(counted.eval, prefilled=round(counted.eval.prefilled * prompt))
    # a testbed without a measured fill keeps its counted decode steps
    mapf = _config()
    mapf_counted = round_budget(mapf, 36, 128)
    assert central_budget(mapf, mapf_counted, Lanes()).eval.decode_steps == mapf_counted.eval.decode_steps


def test_the_central_estimate_lies_below_the_upper_bound():
    for config in (_config(), _config("generation.backend=vllm", "trainer.use_vllm=true"), _config(path=SPADE_DEMO)):
        lanes = cpu_lanes(config, native=True)
        budget = round_budget(config, 36, 128, test=(36, 128))
        central = estimate(config, budget, MODEL, QUIET, gpu=False, lanes=lanes)
        upper = estimate(config, budget, MODEL, QUIET, gpu=False, lanes=lanes, central=False)
        assert central.total_seconds <= upper.total_seconds
        assert central.upper_seconds == pytest.approx(upper.total_seconds)


@pytest.mark.parametrize("knob, values", [("trainer.max_steps_per_round", (1, 2, 4, 8)), ("rounds", (1, 2, 3, 6)),
                                          ("trainer.num_generations", (2, 4, 8)),
                                          ("trainer.max_completion_length", (32, 64, 128, 256)),
                                          ("testbed.eval_instances_per_size", (2, 6, 24))])
@pytest.mark.parametrize("vllm", [False, True])
def test_the_estimate_grows_with_the_work(knob, values, vllm):
    engines = ["generation.backend=vllm", "trainer.use_vllm=true"] if vllm else []
    rates = Rates(flops=1e11, bandwidth=1e10, gen_utilisation=0.25, train_utilisation=0.7, bf16_flops=2e11,
                  step_overhead_s=3e-3)
    totals = []
    for value in values:
        config = _config(f"{knob}={value}", "eval_before_training=true", "test_every_round=true", *engines)
        budget = round_budget(config, 6 * config.testbed.eval_instances_per_size, 128, test=(36, 128))
        totals.append(estimate(config, budget, MODEL, rates, gpu=False, lanes=cpu_lanes(config, native=True))
                      .total_seconds)
    assert totals == sorted(totals) and totals[0] < totals[-1]


def test_the_line_states_the_bound_and_the_engines():
    config = _config("generation.backend=vllm", "trainer.use_vllm=true")
    lanes = cpu_lanes(config, native=True)
    rates = Rates(flops=1e11, bandwidth=1e10, gen_utilisation=0.25, train_utilisation=0.7, bf16_flops=2e11,
                  step_overhead_s=3e-3)
    line = estimate(config, round_budget(config, 36, 128), MODEL, rates, gpu=False, lanes=lanes).line()
    assert "at most" in line and "evals on vllm bf16, rollouts on vllm bf16, training in bf16" in line


def test_the_cpu_estimate_runs_on_the_threads_the_run_will_have(monkeypatch):
    import torch

    from curriculum import plan
    from curriculum.core.sizing import GPUS
    from curriculum.presets import Machine

    monkeypatch.setattr(plan, "measure_cpu_flops", lambda dtype="float32": 1e10 * torch.get_num_threads())
    monkeypatch.setattr(plan, "measure_cpu_bandwidth", lambda: 1e10)
    cpu = Machine("cpu", "test", 2)
    args = (plan.read_strategy(None), GPUS["h100-80gb"], cpu)
    lanes = Lanes(rollout=Lane(sampled=True))
    one = plan.wall_time(_config("trainer.torch_threads=1"), *args, lanes=lanes)
    assert one.note.startswith("measured CPU matmul fp32 10 GFLOP/s")
    assert plan.wall_time(_config(), *args, threads=1, lanes=lanes).total_seconds == pytest.approx(one.total_seconds)
    if torch.get_num_threads() > 1:
        assert plan.wall_time(_config(), *args, lanes=lanes).total_seconds < one.total_seconds


SMALL = ROOT / "configs/mapf_small_learns.yaml"


def _small(*sets: str):
    from curriculum.plan import _budget

    config = _config(*sets, path=SMALL)
    budget = _budget(config, cpu_lanes(config))
    return config, budget, estimate(config, budget, None, STEPS_ONLY, gpu=False)


def test_the_small_learner_is_priced_by_its_own_rates_not_the_fixed_round_time():
    config, budget, e = _small("rounds=4", "eval_before_training=true")
    own = budget.own
    assert own is not None and own.round > 0 and own.eval > 0 and own.test_eval > 0 and own.warmstart > 0
    assert e.phases["train"] == pytest.approx(4 * own.round)
    assert e.phases["eval"] == pytest.approx(4 * own.eval)
    assert e.phases["baseline_eval"] == pytest.approx(own.eval)  # once before round 0
    if budget.test_every_round:
        assert e.phases["test_eval"] == pytest.approx(4 * own.test_eval) and e.phases["final_test"] == 0
    else:
        assert e.phases["final_test"] == pytest.approx(own.test_eval) and e.phases["test_eval"] == 0
    assert e.total_seconds == pytest.approx(sum(e.phases.values()))
    assert e.warmstart_seconds == pytest.approx(own.warmstart)


def test_the_small_learners_round_grows_with_its_steps_maps_and_sampling():
    base = _small("trainer.max_steps_per_round=8", "trainer.dynamic_sampling=false")[1].own.round
    assert _small("trainer.max_steps_per_round=16", "trainer.dynamic_sampling=false")[1].own.round \
        == pytest.approx(2 * base)
    # dynamic sampling may sample max_sampling_batches batches a step: its decode is counted that often
    assert _small("trainer.max_steps_per_round=8", "trainer.dynamic_sampling=true",
                  "trainer.max_sampling_batches=4")[1].own.round > 1.5 * base
    def only(size: str) -> str:
        sizes = ", ".join(f"{s}: {{data_ratio: {1.0 if s == size else 0.0}, hole_ratio: 0.0, wait_ratio: 0.0}}"
                          for s in ("3x3", "4x4", "5x5", "6x6", "7x7", "8x8", "9x9", "10x10"))
        return f"testbed.initial_proposal={{sizes: {{{sizes}}}}}"

    big = (only("10x10"), "testbed.train_agents=4")
    small = (only("4x4"), "testbed.train_agents=2")
    assert _small("trainer.max_steps_per_round=8", *big)[1].own.round \
        > 4 * _small("trainer.max_steps_per_round=8", *small)[1].own.round
