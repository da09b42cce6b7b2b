"""Optuna's start-up trials are sized to the number of designs a run gives it."""

from __future__ import annotations

import pytest

from engineers.optuna_engineer import OptunaEngineerConfig, make_sampler, startup_trials


@pytest.mark.parametrize(("rounds", "expected"), [(1, 1), (2, 1), (3, 2), (4, 2), (6, 3), (12, 6)])
def test_auto_startup_trials_leave_model_based_designs(rounds, expected):
    config = OptunaEngineerConfig()
    assert config.n_startup_trials == "auto"
    assert startup_trials(config, rounds) == expected
    designs = rounds - 1
    # T_0 is given; of the asked designs at most half are random, and from 3 rounds on at least one
    # is model-based.
    assert startup_trials(config, rounds) - 1 <= designs // 2
    if rounds >= 3:
        assert designs - (startup_trials(config, rounds) - 1) >= 1


def test_a_fixed_number_is_kept_and_reaches_the_sampler():
    assert startup_trials(OptunaEngineerConfig(n_startup_trials=5), 3) == 5
    for sampler in ("tpe", "gp"):
        made = make_sampler(OptunaEngineerConfig(sampler=sampler), seed=0, total_rounds=3)
        assert made._n_startup_trials == 2
    with pytest.raises(ValueError):
        OptunaEngineerConfig(n_startup_trials="sometimes")
    with pytest.raises(ValueError):
        OptunaEngineerConfig(n_startup_trials=-1)
