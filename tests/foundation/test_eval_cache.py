"""Held-out evals computed once (``curriculum.evalcache``): a second run of the same starting
model reuses its evals; changed weights, a changed suite or ``eval_cache: false`` recompute."""

from __future__ import annotations

import json

from curriculum.config import load_config
from curriculum.core.types import EvalReport
from curriculum.evalcache import cached_eval, eval_key
from curriculum.loop import run
from curriculum.rundir import read_json

SMALL = ["trainer.name=small", "testbed.name=mapf_frozenlake", "engineer.name=fixed", "rounds=1",
         "eval_before_training=true", "tasks_per_round=8", "trainer.max_steps_per_round=1",
         "trainer.prompts_per_step=4", "trainer.num_generations=2", "testbed.train_agents=2",
         "testbed.eval_agents=[2]", "testbed.eval_sizes=[3x3]", "testbed.eval_instances_per_size=3",
         "testbed.warmstart_sizes=[3x3]", "testbed.warmstart_agents=[2]", "trainer.warmstart.steps=2",
         "trainer.warmstart.cache=false"]


def _run(tmp_path, name, *sets):
    config = load_config(None, [*SMALL, f"output_dir={tmp_path}", f"run_name={name}", *sets])
    run(config)
    records = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    return {r["event"]: r for r in records if r.get("event", "").endswith("eval")}


def test_a_second_seed_reuses_the_starting_models_evals_and_new_weights_do_not(tmp_path):
    first = _run(tmp_path, "a", "seed=0")
    second = _run(tmp_path, "b", "seed=1")
    # Same shipped weights and warm start (its data does not depend on the run seed), same suites.
    for event in ("baseline_eval", "baseline_test_eval", "warmstart_eval", "warmstart_test_eval"):
        assert first[event]["cached"] is False and second[event]["cached"] is True, event
        assert second[event]["score"] == first[event]["score"]
    assert read_json(tmp_path / "b" / "baseline_test_eval.json") == read_json(tmp_path / "a" / "baseline_test_eval.json")
    # A changed warm start (other weights) recomputes; the untouched base model still reuses.
    third = _run(tmp_path, "c", "seed=2", "trainer.warmstart.steps=3")
    assert third["baseline_eval"]["cached"] is True and third["warmstart_eval"]["cached"] is False
    # A changed suite recomputes; eval_cache: false never reads the cache.
    assert _run(tmp_path, "d", "testbed.eval_instances_per_size=4")["baseline_eval"]["cached"] is False
    assert _run(tmp_path, "e", "eval_cache=false")["baseline_eval"]["cached"] is False


def test_unknown_identities_are_not_cached_and_a_broken_entry_is_recomputed(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return EvalReport(score=0.5, metrics={"valid_rate": 0.5})

    assert eval_key(None, "suite") is None and eval_key("policy", None) is None
    assert cached_eval(None, compute, root=tmp_path) == (compute(), False) and not list(tmp_path.iterdir())
    calls.clear()
    key = eval_key("policy", "suite")
    assert key != eval_key("policy'", "suite") and key != eval_key("policy", "suite'")
    assert cached_eval(key, compute, root=tmp_path)[1] is False
    assert cached_eval(key, compute, root=tmp_path)[1] is True and len(calls) == 1
    (tmp_path / f"{key}.json").write_text("{not json")
    report, reused = cached_eval(key, compute, root=tmp_path)
    assert not reused and report.score == 0.5 and len(calls) == 2
    assert EvalReport.model_validate_json((tmp_path / f"{key}.json").read_text()).score == 0.5


def _count_digests(monkeypatch, trainer_class) -> list[str]:
    """Every weights digest ``trainer_class`` computes (not remembers), in order."""
    computed: list[str] = []
    original = trainer_class._hash_weights

    def counting(self):
        computed.append(original(self))
        return computed[-1]

    monkeypatch.setattr(trainer_class, "_hash_weights", counting)
    return computed


def test_each_distinct_weights_are_hashed_once_per_run(tmp_path, monkeypatch):
    from trainers.small.trainer import SmallTrainer

    computed = _count_digests(monkeypatch, SmallTrainer)
    # baseline, warm start, round 0: each eval site reads the validation and the test suite
    events = _run(tmp_path, "a", "seed=0", "test_every_round=true")
    assert {"baseline_test_eval", "warmstart_test_eval", "test_eval"} <= set(events)
    # once per eval site (twice each before: one per suite); a round may leave the weights as
    # they were (no reward spread), so the last two digests may be equal
    assert len(computed) == 3 and computed[0] != computed[1], computed


def test_the_grpo_trainer_hashes_its_weights_once_per_distinct_weights(tiny_model_dir, tmp_path, monkeypatch):
    """The starting weights are hashed once for the baseline's two suites and the warm start's
    cache key; the warm-started and the trained weights once each for their two suites."""
    from tests.foundation.test_loop import tiny_overrides
    from trainers.grpo.trainer import GRPOTrainerAdapter

    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    computed = _count_digests(monkeypatch, GRPOTrainerAdapter)
    sets = tiny_overrides(tiny_model_dir, tmp_path, rounds=1, eval_before_training="true",
                          test_every_round="true", **{"trainer.max_steps_per_round": 1,
                                                      "trainer.warmstart.steps": 1,
                                                      "trainer.warmstart.batch_size": 2})
    run(load_config(None, sets))
    assert len(computed) == 3 and computed[0] != computed[1], computed  # seven before


def test_the_digest_memo_lapses_when_the_weights_change():
    import torch

    from trainers.base import DigestMemo

    model = torch.nn.Linear(3, 2)
    memo = DigestMemo()

    def digest():
        return str(hash(tuple(model.weight.detach().flatten().tolist())))

    first = memo.get(model, digest)
    assert memo.get(model, digest) == first and memo.computed == 1
    with torch.no_grad():
        model.weight.add_(1.0)  # in place, where autograd's version counter sees it
    assert memo.get(model, digest) != first and memo.computed == 2
    memo.get(model, digest)
    model.weight.data.add_(1.0)  # unseen by the version counter: the trainer's forget() covers it
    memo.forget()
    assert memo.get(model, digest) == digest() and memo.computed == 3
    model = torch.nn.Linear(3, 2)  # another module: other tensors
    memo.get(model, digest)
    assert memo.computed == 4
