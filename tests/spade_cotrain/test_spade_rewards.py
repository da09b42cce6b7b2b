"""SPADE reward formulas against the paper's worked numbers (the SPADE paper)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainers.selfplay import rewards as R


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


def test_ema_update():
    assert R.ema_update(0.2, 1.0, 0.35) == pytest.approx(0.2 + 0.35 * 0.8)
    assert R.ema_update(0.2, 1.0, 1.0) == 1.0


def _lp_series(returns, fast=0.35, slow=0.15):
    state, out = None, []
    for value in returns:
        state = R.lp_update(state, value, fast, slow)
        out.append(R.learning_potential(*state, fast, slow))
    return out


def test_learning_potential_is_zero_on_first_play_and_for_flat_returns():
    """Both EMAs start at the first return (public code): a first play, or any flat sequence of
    returns, has no learning potential whatever its level (an easy environment earns nothing)."""
    assert _lp_series([0.9]) == [0.0]
    assert _lp_series([0.9] * 6) == pytest.approx([0.0] * 6)
    assert _lp_series([0.1] * 6) == pytest.approx([0.0] * 6)


def test_learning_potential_rises_with_rising_returns():
    # step of D = 0.6 after the first play: gap (0.35 - 0.15) * 0.6 = 0.12, scaled by 1/(2*0.2) -> 0.3 = D/2
    assert _lp_series([0.2, 0.8]) == pytest.approx([0.0, 0.3])
    rising = _lp_series([0.0, 0.25, 0.5, 0.75])
    assert rising[0] == 0.0 and all(v > 0.05 for v in rising[1:])
    # hand-computed third value: fast 0.0875 -> 0.231875, slow 0.0375 -> 0.106875
    assert rising[2] == pytest.approx((0.231875 - 0.106875) / 0.4)
    assert _lp_series([0.8, 0.2]) == pytest.approx([0.0, 0.3])  # falling returns move too (|.|)
    with pytest.raises(ValueError):
        R.learning_potential(0.5, 0.1, 0.1, 0.5)


def test_role_advantages_normalised_separately():
    """Two groups per role with different spreads, so a per-group std (or a pooled std) differs
    from the per-role std the formula asks for."""
    rewards = [1.0, 0.0, 0.2, 0.2, 0.8, 0.8, 2.0, 0.0, 5.0, 5.0, 5.5]
    groups = ["a", "a", "b", "b", "b", "b", "x", "x", "y", "y", "y"]
    roles = ["agent"] * 6 + ["designer"] * 5
    # centred by hand: a -> +-0.5; b -> -+0.3; x -> +-1; y -> -1/6, -1/6, +1/3
    agent_c = [0.5, -0.5, -0.3, -0.3, 0.3, 0.3]
    designer_c = [1.0, -1.0, -1 / 6, -1 / 6, 1 / 3]
    agent_std = math.sqrt((0.25 * 2 + 0.09 * 4) / 6)
    designer_std = math.sqrt((1 + 1 + 1 / 36 + 1 / 36 + 1 / 9) / 5)
    adv = R.role_advantages(rewards, groups, roles, eps=0.0)
    assert adv == pytest.approx([c / agent_std for c in agent_c] + [c / designer_std for c in designer_c])
    only_agent = R.role_advantages(rewards, groups, roles, std_roles=["agent"], eps=0.0)
    assert only_agent == pytest.approx([c / agent_std for c in agent_c] + designer_c)
    assert R.role_advantages(rewards, groups, roles, std_roles=[]) == pytest.approx(agent_c + designer_c)
    # same group key in two roles is two groups
    adv2 = R.role_advantages([1.0, 0.0], ["g", "g"], ["agent", "designer"], std_roles=[])
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


def test_learning_potential_reward_keeps_the_anchor():
    """The LP ablation swaps only the regret: 0.4 clip(LP / 0.15) + 0.6 anchor(win rate)."""
    flat = R.learning_potential_reward(0.0, 0.5)
    assert flat["reward"] == pytest.approx(0.6) and flat["anchor"] == 1.0 and flat["lp_term"] == 0.0
    moving = R.learning_potential_reward(0.075, 0.275)
    assert moving["lp_term"] == pytest.approx(0.5) and moving["reward"] == pytest.approx(0.4 * 0.5 + 0.6 * 0.5)
    assert R.learning_potential_reward(1.0, 0.95)["reward"] == pytest.approx(0.4)


def test_default_role_advantages_put_both_roles_on_a_unit_scale():
    """std_roles=None divides every role by its own std: the designer's tiny centred rewards
    and the agent's 0/1 returns both end up with std 1 (each role normalised separately)."""
    rewards = [1.0, 0.0, 1.0, 0.0, 0.02, -0.02, 0.01, -0.01]
    groups = ["e", "e", "f", "f", "s1", "s1", "s2", "s2"]
    roles = ["agent"] * 4 + ["designer"] * 4
    adv = R.role_advantages(rewards, groups, roles, eps=0.0)
    assert np.std(adv[:4]) == pytest.approx(1.0) and np.std(adv[4:]) == pytest.approx(1.0)
    assert adv[4] == pytest.approx(0.02 / np.std([0.02, -0.02, 0.01, -0.01]))
