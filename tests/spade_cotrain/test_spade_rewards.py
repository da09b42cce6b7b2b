"""SPADE reward formulas against the paper's worked numbers (SPEC §2.1–2.2)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engineers.spade import rewards as R


def test_regret_worked_example():
    with_hint = [1.0] * 13 + [0.0] * 7          # mean 0.65
    without = [1.0] * 6 + [0.0] * 14            # mean 0.30
    assert R.regret(with_hint, without) == pytest.approx(0.35)
    assert R.regret_term(0.35) == 1.0
    assert R.regret_term(0.075) == pytest.approx(0.5)


def test_regret_floored_at_zero_but_raw_kept():
    assert R.regret([0.2], [0.5]) == 0.0
    assert R.raw_regret([0.2], [0.5]) == pytest.approx(-0.3)


@pytest.mark.parametrize("rate,expected", [(0.15, 0.0), (0.4, 1.0), (0.5, 1.0), (0.6, 1.0),
                                           (0.85, 0.0), (0.275, 0.5), (0.725, 0.5), (0.0, 0.0), (1.0, 0.0)])
def test_anchor_trapezoid(rate, expected):
    assert R.anchor(rate) == pytest.approx(expected)


def test_blend():
    assert R.blend(1.0, 0.0) == pytest.approx(0.4)
    assert R.blend(0.0, 1.0) == pytest.approx(0.6)
    assert R.blend(0.5, 0.5) == pytest.approx(0.5)
    parts = R.designer_reward([0.65], [0.30], win_rate=0.275)
    assert parts["regret"] == pytest.approx(0.35)
    assert parts["reward"] == pytest.approx(0.4 * 1.0 + 0.6 * 0.5)


def test_per_skill_centring_without_std():
    values = [1.0, 0.0, 0.5, 0.9, 0.1]
    skills = ["logic", "logic", "maths", "maths", "logic"]
    out = R.center_by_group(values, skills)
    logic_mean = (1.0 + 0.0 + 0.1) / 3
    assert out[0] == pytest.approx(1.0 - logic_mean)
    assert out[2] == pytest.approx(-0.2) and out[3] == pytest.approx(0.2)
    assert sum(out) == pytest.approx(0.0)


def test_ema_learning_potential():
    fast = R.ema_update(0.0, 1.0, 0.5)
    slow = R.ema_update(0.0, 1.0, 0.1)
    assert (fast, slow) == (0.5, pytest.approx(0.1))
    assert R.learning_potential(fast, slow) == pytest.approx(0.4)
    assert R.learning_potential(0.3, 0.3) == 0.0


def test_role_advantages_normalised_separately():
    rewards = [1.0, 0.0, 1.0, 0.0, 10.0, -10.0]
    groups = ["e", "e", "e", "e", "s", "s"]
    roles = ["agent"] * 4 + ["designer"] * 2
    adv = R.role_advantages(rewards, groups, roles, eps=0.0)
    # each role ends with unit std regardless of the other role's scale
    assert np.std(adv[:4]) == pytest.approx(1.0)
    assert np.std(adv[4:]) == pytest.approx(1.0)
    assert adv[0] == pytest.approx(1.0) and adv[5] == pytest.approx(-1.0)
    # same group key in two roles is two groups
    adv2 = R.role_advantages([1.0, 0.0], ["g", "g"], ["agent", "designer"], scale_by_role_std=False)
    assert adv2 == [0.0, 0.0]


def test_truncated_is_weights_clipped_at_cap():
    now = np.array([0.0, math.log(3.0), -1.0, 50.0])
    old = np.zeros(4)
    w = R.truncated_is_weights(now, old, cap=2.0)
    assert w[0] == pytest.approx(1.0)
    assert w[1] == pytest.approx(2.0)          # 3.0 truncated at the cap
    assert w[2] == pytest.approx(math.exp(-1.0))
    assert w[3] == pytest.approx(2.0) and np.isfinite(w).all()
    masked = R.truncated_is_weights(now, old, cap=2.0, mask=np.array([1, 1, 0, 0]))
    assert masked[2] == 1.0 and masked[3] == 1.0


@given(st.floats(-5, 5), st.floats(-5, 5), st.floats(0.1, 10))
def test_is_weights_bounded(a, b, cap):
    w = R.truncated_is_weights(np.array([a]), np.array([b]), cap)
    assert 0.0 <= w[0] <= cap + 1e-12


@given(st.floats(0, 1))
def test_anchor_in_unit_interval(rate):
    assert 0.0 <= R.anchor(rate) <= 1.0
