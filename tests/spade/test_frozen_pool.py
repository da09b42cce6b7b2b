"""``engineer.frozen_pool``: the fixed-environment GRPO baseline's pool, written once by a frozen
designer before round 0, admitted like every design, saved in the run directory and kept.

The designer here is a scripted model answering with the admission fixtures; the sandbox is real."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAST_SANDBOX, FIXTURES
from pydantic import ValidationError
from spade_fakes import ScriptedPolicy

from curriculum.core.config import ConfigError
from curriculum.core.pool import program_hash
from testbeds.spade.saved_pool import POOL_FILE, load_pool
from engineers.base import DesignContext
from engineers.spade.config import SpadeEngineerConfig
from engineers.spade.engineer import ROUNDS_LOG, FrozenPoolTooSmall, SpadeEngineer
from testbeds.spade.testbed import SpadeProposal


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def env_hash(name: str) -> str:
    from engineers.spade.parse import parse_design

    return program_hash(parse_design(fixture(name)).program)


def make_engineer(run_dir, **frozen) -> SpadeEngineer:
    config = SpadeEngineerConfig.model_validate({
        "name": "spade", "corpus": "none", "diversity": {"embedding": "tfidf"}, "sandbox": FAST_SANDBOX,
        "frozen_pool": {"size": 2, "max_calls": 8, "batch": 2} | frozen})
    return SpadeEngineer(config, run_dir=str(run_dir))


def initial_context(policy, proposal: SpadeProposal | None = None) -> DesignContext:
    return DesignContext(round=-1, total_rounds=3, history=[], proposal=proposal or SpadeProposal(), testbed=None,
                         rng=np.random.default_rng(0), policy=policy)


class RefusingPolicy:
    """A designer that must not be asked."""

    def generate(self, tasks, **_):
        raise AssertionError("the frozen pool was designed again")


def test_pool_is_designed_once_from_admitted_designs_only(tmp_path):
    """Batches of two calls until two designs are admitted: the syntax error and the hint leak are
    rejected and stay out of the pool; later rounds hand the same pool on without a design call."""
    policy = ScriptedPolicy([fixture("games_guess_ok.out"), fixture("bad_syntax.out"),
                             fixture("bad_hint_leak.out"), fixture("games_modarith_ok.out"),
                             fixture("games_sortwords_ok.out")])
    engineer = make_engineer(tmp_path / "run")
    try:
        assert engineer.designs_round0
        design = engineer.initial_design(initial_context(policy))
        assert len(policy.seen) == 4  # two batches of two; the fifth output is never asked for
        pool = [e["hash"] for e in design.raw["environments"]]
        assert pool == [env_hash("games_guess_ok.out"), env_hash("games_modarith_ok.out")]
        assert design.raw["designs"] == []  # nothing for the designer role to train on
        entries = engineer.memory.entries()
        assert [(e.admitted, e.reason) for e in entries] == [
            (True, None), (False, "syntax_error"), (False, "hint_leak"), (True, None)]
        assert not {e.hash for e in entries if not e.admitted} & set(pool)
        # every later round: the same pool, no design call
        later = engineer.design(DesignContext(round=0, total_rounds=3, history=[], testbed=None,
                                              proposal=SpadeProposal.model_validate(design.raw),
                                              rng=np.random.default_rng(1), policy=RefusingPolicy()))
        assert later.raw == design.raw
    finally:
        engineer.close()
    assert [e.hash for e in load_pool(tmp_path / "run")] == pool  # what initial_pool: memory:<run dir> reads
    assert len((tmp_path / "run" / ROUNDS_LOG).read_text().splitlines()) == 2


def test_pool_is_trimmed_to_its_size(tmp_path):
    policy = ScriptedPolicy([fixture("games_guess_ok.out"), fixture("games_modarith_ok.out"),
                             fixture("games_sortwords_ok.out")])
    engineer = make_engineer(tmp_path / "run", size=2, batch=3)
    try:
        design = engineer.initial_design(initial_context(policy))
    finally:
        engineer.close()
    assert [e["hash"] for e in design.raw["environments"]] == [env_hash("games_guess_ok.out"),
                                                              env_hash("games_modarith_ok.out")]


def test_a_restart_before_round0_rereads_the_saved_pool(tmp_path):
    first = make_engineer(tmp_path / "run")
    try:
        made = first.initial_design(initial_context(ScriptedPolicy([fixture("games_guess_ok.out"),
                                                                    fixture("games_modarith_ok.out")])))
    finally:
        first.close()
    again = make_engineer(tmp_path / "run")
    try:
        reread = again.initial_design(initial_context(RefusingPolicy()))
    finally:
        again.close()
    assert reread.raw == made.raw and reread.diagnostics["reread"] is True
    assert made.diagnostics["reread"] is False


def test_too_few_admitted_is_a_clear_error(tmp_path):
    """One admissible design in four calls for a pool of two: the run stops, naming the shortfall
    and the rejections, and saves no pool."""
    policy = ScriptedPolicy([fixture("games_guess_ok.out"), fixture("bad_syntax.out"), fixture("bad_syntax.out"),
                             fixture("bad_no_hint.out")])
    engineer = make_engineer(tmp_path / "run", max_calls=4)
    try:
        with pytest.raises(FrozenPoolTooSmall, match=r"admitted 1 of the 2 environments .* in 4 design calls") as err:
            engineer.initial_design(initial_context(policy))
    finally:
        engineer.close()
    assert "syntax_error 2" in str(err.value) and "missing_hint 1" in str(err.value)
    assert isinstance(err.value, ConfigError)  # the CLI prints it as one line, exit status 2
    assert not (tmp_path / "run" / POOL_FILE).exists()


def test_a_starting_pool_beside_a_frozen_pool_is_refused(tmp_path):
    from curriculum.core.pool import PoolEnvironment

    starting = SpadeProposal(environments=[PoolEnvironment(hash="x", program="class XEnv: pass")])
    engineer = make_engineer(tmp_path / "run")
    try:
        with pytest.raises(ConfigError, match="testbed.initial_pool: none"):
            engineer.initial_design(initial_context(RefusingPolicy(), starting))
    finally:
        engineer.close()


def test_without_frozen_pool_round0_is_the_testbeds(tmp_path):
    engineer = SpadeEngineer(SpadeEngineerConfig(name="spade"), run_dir=str(tmp_path / "run"))
    try:
        assert not engineer.designs_round0
        assert engineer.initial_design(initial_context(RefusingPolicy())) is None
    finally:
        engineer.close()


@pytest.mark.parametrize("frozen,memory,match", [
    ({"size": 3, "max_calls": 2}, {}, "at least frozen_pool.size"),
    ({"size": 201}, {}, "exceeds the memory's capacity"),
    ({"size": 20}, {"capacity": 10}, "exceeds the memory's capacity"),
    ({"size": 2, "batches": 1}, {}, "Extra inputs"),
])
def test_frozen_pool_config_is_checked(frozen, memory, match):
    with pytest.raises(ValidationError, match=match):
        SpadeEngineerConfig.model_validate({"name": "spade", "frozen_pool": frozen, "memory": memory})
    assert SpadeEngineerConfig.model_validate({"name": "spade", "frozen_pool": {"size": 5}}).frozen_pool.max_calls == 20
