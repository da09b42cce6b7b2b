"""One suite every registered trainer passes, on every registered testbed it declares it fits
(``trains_on`` against the testbed's ``task_kinds``): a new trainer gets these tests for free.

The trainers come from the registry (every shipped one and every one an installed package
registers through an entry point; test doubles that other suites register are not plugins), each
with a tiny setup: a 2-layer random-init model where one is loaded, one optimizer step, a few tasks.
The contract:

* what it fits is declared, some registered testbed fits it, and a pair it does not fit is refused
  with a message naming both, at config time (``check_fit``) and when the class is built with
  such a testbed (``Trainer.__init__``);
* a trainer that trains (``trains``) runs a round on a few of the testbed's tasks, scored so that
  samples differ in reward (``_with_signal``), returns finite metrics and moves its weights digest
  (or its own equivalent, e.g. the simulated learner's state), and resumes identically: a fresh trainer set up from what ``save`` wrote has the same
  digest, and the next round trains both to the same digest and metrics;
* a trainer that only evaluates (``trains = False``: an external endpoint) refuses a run with
  rounds, refuses to train, saves and restores, and its policy answers the testbed's tasks (here
  from a stub OpenAI-compatible server on 127.0.0.1, the cheapest endpoint there is).

The run config a trainer receives is the kernel's ``RunSettings``: the controller's ``RunConfig``
must provide every field of it with the same type.
"""

from __future__ import annotations

import json
import math
import typing
import zlib
from pathlib import Path

import numpy as np
import pytest
from chat_stub import ChatStub, chat_reply

from curriculum.config import ConfigError, RunConfig, load_config
from curriculum.core.run import RunSettings
from curriculum.core.spaces import TASK_KINDS, is_task_kind
from curriculum.loop import build_testbed, build_trainer
from curriculum.registry import TESTBEDS, TRAINERS, shipped, trainer_fits, trainers_for


def _plugins(registry, kind: str) -> list[str]:
    """Shipped plugins and those other distributions register (not the doubles of other tests)."""
    return [e.name for e in registry.entries() if e.name in shipped()[kind] or e.source != "curriculum"]


TRAINER_NAMES = _plugins(TRAINERS, "trainer")
TESTBED_NAMES = _plugins(TESTBEDS, "testbed")
FITS = [(tr, tb) for tr in TRAINER_NAMES for tb in TESTBED_NAMES if trainer_fits(TRAINERS.get(tr), TESTBEDS.get(tb))]
MISFITS = [(tr, tb) for tr in TRAINER_NAMES for tb in TESTBED_NAMES if (tr, tb) not in FITS]

FAST_SANDBOX = {"workers": 1, "call_deadline_s": 2.0, "load_deadline_s": 4.0, "supervisor_grace_s": 1.0,
                "memory_mb": 256}
# Settings that keep one round tiny (one optimizer step on a couple of samples, short answers);
# a trainer not listed runs with its defaults.
TRAINER_SETTINGS: dict[str, dict] = {
    "grpo": {"prompts_per_step": 2, "num_generations": 2, "max_steps_per_round": 1, "max_completion_length": 8,
             "beta": 0.0, "learning_rate": 0.01, "torch_threads": 1},
    "selfplay": {"num_generations": 2, "max_completion_length": 8, "beta": 0.0, "learning_rate": 0.01,
                 "torch_threads": 1, "designer_delay": 0, "micro_batch_size": 4, "sandbox": FAST_SANDBOX,
                 "play": {"episodes_per_condition": 2, "max_turns": 1, "max_new_tokens_per_turn": 8},
                 "pool": {"envs_per_step": 1, "max_plays": 2}},
    "small": {"d_model": 16, "layers": 1, "heads": 2, "prompts_per_step": 2, "num_generations": 2,
              "max_steps_per_round": 1, "generation_batch": 8, "warmstart": {"steps": 0}},
    "simulated": {"steps_per_round": 2},
}
TESTBED_SETTINGS: dict[str, dict] = {
    "mapf_frozenlake": {"eval_agents": [3], "eval_instances_per_size": 1},
    "reasoning_gym": {"eval_per_bucket": 1},
    "spade_pool": {"initial_pool": "programs:{programs}", "sandbox": FAST_SANDBOX},
}
"""``{programs}``: a folder holding ``COIN_GAME``, for testbeds whose tasks are played programs."""
COIN_GAME = '''
import random

class CoinEnv:
    """Won or lost by the episode's seed, whatever the answer: rewards that differ within a group."""

    def reset(self, seed=None):
        self.won = random.Random(seed).random() < 0.5
        return "Call the coin: heads or tails?", {}

    def step(self, action):
        return "done", 1.0 if self.won else 0.0, True, False, {"won": self.won}

    def solution(self):
        return ["heads"]
'''
TASKS = 4
VOLATILE = ("seconds", "runtime", "per_second", "time", "wall")
"""Metrics that measure the clock, not the training."""


def _testbed_settings(testbed: str, out: Path) -> dict:
    programs = out / "programs"
    programs.mkdir(parents=True, exist_ok=True)
    (programs / "coin.py").write_text(COIN_GAME)
    settings = json.dumps(TESTBED_SETTINGS.get(testbed, {})).replace("{programs}", str(programs))
    return json.loads(settings)


def _config(trainer: str, testbed: str, model_dir: Path, out: Path) -> RunConfig:
    trains = TRAINERS.get(trainer).load().trains
    return RunConfig.model_validate({
        "model": {"name_or_path": str(model_dir)},
        "trainer": {"name": trainer, **TRAINER_SETTINGS.get(trainer, {})},
        "testbed": {"name": testbed, **_testbed_settings(testbed, out)},
        "generation": {"max_new_tokens": 8, "batch_size": 4},
        "rounds": 2 if trains else 0, "eval_before_training": not trains, "tasks_per_round": TASKS,
        "output_dir": str(out)})


def _tasks(testbed, seed: int) -> list:
    return testbed.sample(testbed.initial_proposal(np.random.default_rng(seed)), TASKS, seed=seed)[:TASKS]


def _with_signal(testbed):
    """``testbed`` scoring each answer by its text (0, 0.25, ... 1), so a tiny random model's samples
    differ in reward and one step moves its weights (the testbed's own reward gives such a model 0
    everywhere); a testbed whose tasks are played programs gets its reward from ``COIN_GAME``."""
    def score(task, completion):
        return (zlib.crc32(completion.text.encode()) % 5) / 4, {"valid": True}

    testbed.score = score
    return testbed


def _training_pairs() -> list:
    """The pairs of ``FITS``; those whose trainer only evaluates skipped, saying so."""
    return [(trainer, testbed) if TRAINERS.get(trainer).load().trains else pytest.param(
        trainer, testbed, marks=pytest.mark.skip(reason="declares trains = False: it only evaluates, there "
                                                         "is nothing to train or resume"))
            for trainer, testbed in FITS]


def test_every_shipped_trainer_is_in_the_suite_and_fits_some_testbed():
    assert set(TRAINER_NAMES) >= set(shipped()["trainer"])
    assert {tr for tr, _ in FITS} == set(TRAINER_NAMES)


@pytest.mark.parametrize("name", TRAINER_NAMES)
def test_trainer_declares_what_it_fits(name):
    entry, cls = TRAINERS.get(name), TRAINERS.get(name).load()
    assert cls.trains_on == entry.trains_on and is_task_kind(entry.trains_on)
    # a kernel kind, or one a registered testbed declares (its own: a trainer built for it)
    assert entry.trains_on in TASK_KINDS or any(entry.trains_on in TESTBEDS.get(t).tasks for t in TESTBED_NAMES)
    assert isinstance(cls.trains, bool) and isinstance(entry.chosen_by_default, bool)
    assert entry.config == f"{cls.config_class.__module__}:{cls.config_class.__qualname__}"
    for testbed in TESTBED_NAMES:
        assert (name in trainers_for(testbed)) == (entry.trains_on in TESTBEDS.get(testbed).tasks)


@pytest.mark.parametrize(("name", "testbed_name"), MISFITS or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="every registered trainer fits every registered testbed"))])
def test_a_pair_that_does_not_fit_is_refused_naming_both(name, testbed_name, tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError) as err:  # the run's engineer: the default, which fits any testbed
        load_config(None, [f"testbed.name={testbed_name}", f"trainer.name={name}"])
    assert f"trainer {name!r}" in str(err.value) and f"does not fit testbed {testbed_name!r}" in str(err.value)
    assert f"Trainers for {testbed_name}: {', '.join(trainers_for(testbed_name)) or 'none'}" in str(err.value)
    fitting = next(tb for tr, tb in FITS if tr == name)
    misfit = build_testbed(_config(trainers_for(testbed_name)[0], testbed_name, tiny_model_dir, tmp_path))
    try:
        with pytest.raises(ValueError, match=f"trainer {name!r} trains on .* testbed {testbed_name!r} does not sample"):
            build_trainer(_config(name, fitting, tiny_model_dir, tmp_path), misfit)
    finally:
        misfit.close()


def _finite_metrics(metrics) -> dict[str, float]:
    assert isinstance(metrics, dict) and metrics, "train_round returns its metrics"
    assert all(isinstance(k, str) and isinstance(v, (int, float)) for k, v in metrics.items()), metrics
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    return {k: float(v) for k, v in metrics.items() if not any(word in k for word in VOLATILE)}


@pytest.mark.parametrize(("name", "testbed_name"), _training_pairs())
def test_a_round_trains_and_a_saved_trainer_resumes_identically(name, testbed_name, tiny_model_dir, tmp_path):
    config = _config(name, testbed_name, tiny_model_dir, tmp_path)
    testbed = _with_signal(build_testbed(config))
    first, resumed = build_trainer(config, testbed), build_trainer(config, testbed)
    try:
        first.setup(None)
        start = first.weights_digest()
        assert start is not None, "a trainer that trains states a digest of what it learned"
        logged: list[dict] = []
        _finite_metrics(first.train_round(_tasks(testbed, 0), round_index=0, seed=11, log=logged.append))
        assert all(isinstance(record, dict) for record in logged)
        assert first.weights_digest() != start, "a round with a reward signal moves what the trainer learned"
        first.save(tmp_path / "round0")
        resumed.setup(tmp_path / "round0")
        assert resumed.weights_digest() == first.weights_digest()
        tasks = _tasks(testbed, 1)
        after = [_finite_metrics(t.train_round(tasks, round_index=1, seed=12)) for t in (first, resumed)]
        assert after[0] == after[1]
        assert resumed.weights_digest() == first.weights_digest()
        prompts = [t for t in tasks if t.messages][:1]  # pool tasks are played, not prompted
        answers = first.policy().generate(prompts, max_new_tokens=4, seed=0)
        assert len(answers) == len(prompts) and all(isinstance(a.text, str) for a in answers)
    finally:
        first.close()
        resumed.close()
        testbed.close()


@pytest.mark.parametrize(("name", "testbed_name"), [(tr, tb) for tr, tb in FITS if not TRAINERS.get(tr).load().trains])
def test_an_evaluate_only_trainer_refuses_to_train_and_answers(name, testbed_name, tiny_model_dir, tmp_path,
                                                               monkeypatch):
    stub = ChatStub([chat_reply("an answer", tokens=3)]).start()
    monkeypatch.setenv("CURRICULUM_ENDPOINT_URL", stub.url)
    config = _config(name, testbed_name, tiny_model_dir, tmp_path)
    testbed = build_testbed(config)
    with pytest.raises(ValueError, match="only evaluates: set rounds: 0"):
        build_trainer(config.model_copy(update={"rounds": 1}), testbed)
    trainer = build_trainer(config, testbed)
    try:
        trainer.setup(None)
        tasks = _tasks(testbed, 0)
        with pytest.raises(RuntimeError):
            trainer.train_round(tasks, round_index=0, seed=0)
        trainer.save(tmp_path / "saved")
        digest = trainer.weights_digest()
        trainer.setup(tmp_path / "saved")
        assert trainer.weights_digest() == digest
        answers = trainer.policy().generate(tasks[:2], max_new_tokens=4)
        assert [a.text for a in answers] == ["an answer"] * 2 and len(stub.requests) == 2
    finally:
        trainer.close()
        testbed.close()
        stub.close()


def test_the_run_config_provides_what_trainers_are_typed_with():
    hints = typing.get_type_hints(RunSettings)
    fields = RunConfig.model_fields
    assert hints and set(hints) <= set(fields), set(hints) - set(fields)
    for name, annotation in hints.items():
        assert fields[name].annotation is annotation, (name, fields[name].annotation, annotation)
    assert isinstance(load_config(None, []), RunSettings)
