"""``compare`` runs round 0 once per seed and starts every engineer from it (``curriculum.stem``):
the results must equal a comparison in which every run computes its own round 0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from curriculum.compare import CompareSpec, compare, run_configs
from curriculum.config import ConfigError, load_config
from curriculum.loop import run
from curriculum.rundir import RunDir, RunDirError
from curriculum.stem import plan_stems, round0_key, shares_round0
from engineers.base import Engineer
from engineers.frontier import FrontierEngineer
from engineers.spade.engineer import SpadeEngineer
from tests.bench.test_bench_compare import FAST
from tests.foundation.test_loop import empty_config, tiny_overrides


def _outcome(data: dict[str, Any]) -> dict[tuple[str, int], Any]:
    """Per run: its scores, what it trained on every round, and its final metrics."""
    return {(r["engineer"], r["seed"]): (r["scores"], r["data_ratio"], r["final_metrics"]) for r in data["runs"]}


def _untimed(metrics: dict[str, float]) -> dict[str, float]:
    """Training metrics without wall-clock times (which differ from run to run)."""
    return {k: v for k, v in metrics.items() if not k.endswith(("seconds", "runtime", "per_second"))}


def _histories(out: Path, engineers: list[str], seeds: list[int]) -> dict[tuple[str, int], list[Any]]:
    found = {}
    for e in engineers:
        for s in seeds:
            history = RunDir.open(out / "runs" / f"{e}-seed{s}").history()
            found[(e, s)] = [(h.proposal, _untimed(h.train_metrics), h.eval.score, h.eval.task_scores,
                              h.design.projected if h.design else None) for h in history]
    return found


def test_shared_round0_gives_the_same_comparison_as_unshared(tmp_path):
    engineers = ["fixed", "random", "frontier", "optuna"]

    def spec(out: Path, share: bool) -> CompareSpec:
        return CompareSpec(engineers=engineers, testbed="mapf_frozenlake", seeds=2, rounds=3, out=out,
                           trainer="simulated", overrides=FAST, share_round0=share)

    own = compare(spec(tmp_path / "own", False))
    shared = compare(spec(tmp_path / "shared", True))
    assert not own.failed and not shared.failed
    assert _outcome(shared.data) == _outcome(own.data)
    assert _histories(tmp_path / "shared", engineers, [0, 1]) == _histories(tmp_path / "own", engineers, [0, 1])
    assert shared.data["summary"] == own.data["summary"]
    # One stem per seed; every run says where its round 0 came from; the stem is intact.
    stems = sorted((tmp_path / "shared" / "shared_round0").iterdir())
    assert [p.name.split("-")[0] for p in stems] == ["seed0", "seed1"]
    for row in shared.data["runs"]:
        assert Path(row["round0_from"]).name.startswith(f"seed{row['seed']}-")
        assert row["status"] == "new"
    assert all("round0_from" not in row for row in own.data["runs"])
    for stem in stems:
        health = RunDir.open(stem).check_round(0)
        assert not health.damaged and health.verified
        assert RunDir.open(stem).load_round(0).design is None
    # A rerun reuses everything, stems included; a run that never started or never committed a
    # round (a cut comparison) starts from its seed's existing stem, alone.
    mtimes = {p: (p / "rounds").stat().st_mtime_ns for p in stems}
    shutil.rmtree(tmp_path / "shared" / "runs" / "optuna-seed1")
    for committed in (tmp_path / "shared" / "runs" / "random-seed0" / "rounds").iterdir():
        shutil.rmtree(committed)  # started, killed before its first commit
    again = compare(spec(tmp_path / "shared", True))
    assert {(o.engineer, o.seed): o.status for o in again.outcomes if o.status != "reused"} == \
        {("optuna", 1): "new", ("random", 0): "new"}
    assert {p: (p / "rounds").stat().st_mtime_ns for p in stems} == mtimes
    assert _outcome(again.data) == _outcome(own.data)
    assert [r["round0_from"] for r in again.data["runs"]] == [r["round0_from"] for r in shared.data["runs"]]


def test_a_stem_leaves_the_test_suite_to_its_runs(tmp_path):
    # With the test suite after the last round only, a stem's one round is not its runs' last:
    # it skips the test eval, and its runs' round 0 has none, as an unshared run's has not.
    def spec(out: Path, share: bool) -> CompareSpec:
        return CompareSpec(engineers=["fixed", "random"], testbed="mapf_frozenlake", seeds=1, rounds=2, out=out,
                           trainer="simulated", overrides=[*FAST, "test_every_round=false"], share_round0=share)

    own, shared = compare(spec(tmp_path / "own", False)), compare(spec(tmp_path / "shared", True))
    assert not own.failed and not shared.failed
    (stem,) = (tmp_path / "shared" / "shared_round0").iterdir()
    assert RunDir.open(stem).load_round(0).test is None
    for engineer in ("fixed", "random"):
        tests = [[h.test is not None for h in RunDir.open(out / "runs" / f"{engineer}-seed0").history()]
                 for out in (tmp_path / "own", tmp_path / "shared")]
        assert tests == [[False, True], [False, True]]
    assert repr(_outcome(shared.data)) == repr(_outcome(own.data))  # round 0's test score is NaN in both


def test_shared_round0_equals_unshared_on_the_real_learner(tiny_model_dir, tmp_path):
    # Real GRPO steps and greedy evals on a tiny model; `checkpoint` asks the policy restored from
    # the stem's weights for its design.
    engineers = ["fixed", "random", "checkpoint"]

    def spec(out: Path, share: bool) -> CompareSpec:
        return CompareSpec(engineers=engineers, testbed="mapf_frozenlake", seeds=1, rounds=2, out=out,
                           trainer="grpo", config=empty_config(out), share_round0=share,
                           overrides=tiny_overrides(tiny_model_dir, out, **{"generation.engineer_max_new_tokens": 16}))

    own = compare(spec(tmp_path / "own", False))
    shared = compare(spec(tmp_path / "shared", True))
    assert not own.failed and not shared.failed
    assert _histories(tmp_path / "shared", engineers, [0]) == _histories(tmp_path / "own", engineers, [0])
    assert len(list((tmp_path / "shared" / "shared_round0").iterdir())) == 1


def test_which_runs_share_a_stem(tmp_path):
    class WithExamples(Engineer):
        def design(self, ctx):  # pragma: no cover - never called
            raise NotImplementedError

        def warmstart_examples(self, n, seed):  # pragma: no cover
            return []

    class DesignsRound0(Engineer):
        def design(self, ctx):  # pragma: no cover - never called
            raise NotImplementedError

        def initial_design(self, ctx):  # pragma: no cover
            return None

    assert shares_round0(FrontierEngineer)
    assert not shares_round0(SpadeEngineer)  # declares shapes_round0
    assert not shares_round0(WithExamples)   # adds warm-start examples
    assert not shares_round0(DesignsRound0)  # may design round 0's proposal

    spec = CompareSpec(engineers=["fixed", "random", "optuna"], testbed="mapf_frozenlake", seeds=2, rounds=3,
                       out=tmp_path, trainer="simulated", overrides=[*FAST, "engineers.optuna.sampler=random"])
    configs = run_configs(spec)
    # The engineer section (options included), name and rounds do not change round 0; the rest does.
    assert len({round0_key(c) for c in configs.values()}) == 2
    stems = plan_stems(configs, set(configs), tmp_path / "stems")
    assert sorted(len(s.members) for s in stems.values()) == [3, 3]
    assert {s.config.rounds for s in stems.values()} == {1}
    # A run that has started already, or that would be alone, gets no stem.
    stems = plan_stems(configs, {("fixed", 0), ("random", 0), ("optuna", 1)}, tmp_path / "stems")
    assert [s.members for s in stems.values()] == [[("fixed", 0), ("random", 0)]]
    one_round = run_configs(CompareSpec(engineers=["fixed", "random"], testbed="mapf_frozenlake", seeds=1,
                                        rounds=1, out=tmp_path, trainer="simulated", overrides=FAST))
    assert plan_stems(one_round, set(one_round), tmp_path / "stems") == {}


def test_fork_refuses_what_is_not_a_stem(tmp_path):
    def config(name: str, rounds: int, engineer: str = "fixed"):
        return load_config(None, [*FAST, "trainer.name=simulated", f"engineer.name={engineer}",
                                  f"rounds={rounds}", f"output_dir={tmp_path}", f"run_name={name}"])

    two = RunDir(run(config("two", 2)).run_dir)
    with pytest.raises(RunDirError, match="not a finished one-round run"):
        RunDir.fork(two, config("x", 3, "random"), engineer_state={})
    stem = RunDir(run(config("stem", 1)).run_dir)
    forked = RunDir.fork(stem, config("member", 3, "random"), engineer_state={"mine": 1})
    assert forked.load_state(0)["engineer"] == {"mine": 1}
    assert stem.load_state(0)["engineer"] == {}  # the stem's own file is not the fork's
    assert json.loads((forked.path / "forked_from.json").read_text())["stem"] == str(stem.path.resolve())
    assert forked.check_config() is None and not forked.check_round(0).damaged
    with pytest.raises(ConfigError, match="already exists"):
        RunDir.fork(stem, config("member", 3, "random"), engineer_state={})
    # The member resumes after the stem's round 0 with its own design, and the stem stays intact.
    result = run(forked.saved_config(), resume=forked.path)
    assert [h.round for h in result.history] == [0, 1, 2]
    assert result.history[0].design is not None and result.history[0].design.engineer == "random"
    assert not stem.check_round(0).damaged and stem.load_round(0).design is None
