import pytest

from testbeds.mapf_frozenlake.reward import (AdaptiveReward, accuracy, adaptive_weights,
                                             length_reward)
from testbeds.mapf_frozenlake.validate import Verdict


def test_accuracy_spec_points():
    assert accuracy(True, 10, 10) == 1.0
    assert accuracy(True, 30, 10) == pytest.approx(0.3)      # gap = 2 x optimum
    assert accuracy(True, 50, 10) == pytest.approx(0.3)      # beyond saturation
    assert accuracy(True, 20, 10) == pytest.approx(0.65)     # halfway: linear
    assert accuracy(True, 17, None) == 0.5                   # optimum unknown
    assert accuracy(False, 10, 10) == 0.0                    # any failed check


def test_length_spec_points():
    assert length_reward(1500) == 0.0
    assert length_reward(100) == 0.0
    assert length_reward(2798) == pytest.approx(-0.5)
    assert length_reward(4096) == -1.0
    assert length_reward(5000) == -1.0


@pytest.mark.parametrize("ema,expected", [(0.3, (0.5, 0.5)), (0.5, (0.5, 0.5)),
                                          (0.7, (0.65, 0.35)), (0.9, (0.8, 0.2)),
                                          (1.0, (0.8, 0.2))])
def test_adaptive_weights(ema, expected):
    assert adaptive_weights(ema) == pytest.approx(expected)


def test_adaptive_reward_ema_and_state():
    # decay 0.8, not 0.5: at 0.5 ``decay`` and ``1 - decay`` are equal, so a swap could not show
    r = AdaptiveReward(decay=0.8)
    assert r.weights == (0.5, 0.5)
    r.update([100, 100, 100, 3000])       # 0.75 short: 0.8 * 0 + 0.2 * 0.75
    assert r.ema == pytest.approx(0.15)
    r.update([10] * 4)                    # 0.8 * 0.15 + 0.2 * 1.0
    assert r.ema == pytest.approx(0.32)
    warm = AdaptiveReward(decay=0.8, ema=0.6)
    warm.update([10] * 4)                 # 0.8 * 0.6 + 0.2 * 1.0 = 0.68 (swapped: 0.92)
    assert warm.ema == pytest.approx(0.68)
    assert warm.weights == pytest.approx((0.5 + 0.3 * 0.18 / 0.4, 0.5 - 0.3 * 0.18 / 0.4))
    v = Verdict(True, {}, cost=12, optimal_cost=12, optimal=True)
    w_acc, w_len = warm.weights
    assert warm(v, 2798) == pytest.approx(w_acc * 1.0 + w_len * -0.5)
    s = warm.state_dict()
    r2 = AdaptiveReward(decay=0.8)
    r2.load_state_dict(s)
    assert r2.ema == warm.ema and r2(v, 100) == warm(v, 100)
    bad = Verdict(False, {}, optimal_cost=12)
    assert warm(bad, 100) == 0.0


def test_testbed_reward_uses_the_configured_decay():
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed, MAPFTestbedConfig

    testbed = MAPFTestbed(MAPFTestbedConfig(ema_decay=0.7))
    testbed.reward.update([10] * 4)
    assert testbed.reward.ema == pytest.approx(0.3)
