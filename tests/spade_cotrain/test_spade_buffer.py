"""The delayed designer buffer: k steps late, exactly once, exact round-trip."""

import json

import pytest

from trainers.selfplay.buffer import DelayedDesignerBuffer, DesignerSample


def _sample(step: int, i: int, reward: float | None = None) -> DesignerSample:
    return DesignerSample(id=f"{step}-{i}", step=step, skill="logic", prompt_ids=[1, 2],
                          completion_ids=[3, 4, 5], behaviour_logprobs=[-0.1, -0.2, -0.3], reward=reward)


def test_delayed_k_steps_trained_exactly_once():
    buf = DelayedDesignerBuffer(delay=4)
    trained: dict[str, list[int]] = {}
    for step in range(12):
        buf.add([_sample(step, 0), _sample(step, 1)])
        buf.score({f"{step}-0": 0.5, f"{step}-1": -0.5})
        for sample in buf.pop_due(step):
            trained.setdefault(sample.id, []).append(step)
    # generated at s, trained at s + 4, once
    assert trained == {f"{s}-{i}": [s + 4] for s in range(8) for i in range(2)}
    assert buf.trained == 16 and len(buf) == 8


def test_delay_zero_trains_same_step():
    buf = DelayedDesignerBuffer(delay=0)
    buf.add([_sample(3, 0, reward=1.0)])
    assert [s.id for s in buf.pop_due(3)] == ["3-0"]
    assert buf.pop_due(4) == []


def test_unscored_samples_wait_then_drop():
    buf = DelayedDesignerBuffer(delay=2, max_wait=1)
    buf.add([_sample(0, 0)])
    assert buf.pop_due(2) == []          # due but unscored: waits
    assert len(buf) == 1
    assert buf.pop_due(3) == [] and len(buf) == 0 and buf.dropped == 1


def test_state_round_trip_is_exact():
    buf = DelayedDesignerBuffer(delay=4)
    for step in range(3):
        buf.add([_sample(step, 0)])
    buf.score({"0-0": 0.25})
    state = json.loads(json.dumps(buf.state_dict()))
    other = DelayedDesignerBuffer(delay=1)
    other.load_state_dict(state)
    assert other.state_dict() == buf.state_dict()
    assert [s.id for s in other.pop_due(4)] == [s.id for s in buf.pop_due(4)] == ["0-0"]


def test_rejects_mismatched_logprobs_and_duplicates():
    buf = DelayedDesignerBuffer()
    with pytest.raises(ValueError):
        buf.add([DesignerSample(id="x", step=0, skill="s", prompt_ids=[1], completion_ids=[1, 2],
                                behaviour_logprobs=[0.0])])
    buf.add([_sample(0, 0)])
    with pytest.raises(ValueError):
        buf.add([_sample(0, 0)])

