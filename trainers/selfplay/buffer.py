"""The delayed designer buffer (the SPADE paper): designer samples wait k rollout steps, then train once.

A designer sample is generated at rollout step t (its prompt ids, completion ids and the
per-token log-probs of the policy that generated it, i.e. the behaviour policy). Its reward
needs the agent's plays of the environment it wrote (regret, win rate), so it is scored later
(``score``), and it is trained at the first step s >= t + k (``pop_due``), exactly once: a popped
sample leaves the buffer. At training time the trainer weighs its tokens by the truncated
importance ratio min(pi_now / pi_behaviour, cap) (``trainers.selfplay.rewards.truncated_is_weights``).

A sample still unscored ``max_wait`` steps after it fell due is dropped (counted in
``dropped``), so an environment that is never played cannot pin memory forever.

The whole buffer is JSON-able (``state_dict`` / ``load_state_dict``) and is saved with every
step, so a resumed run trains exactly the samples an uninterrupted run would.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class DesignerSample(BaseModel):
    """One designer generation waiting for its reward and its training step."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Unique id (step and index within the step)."""
    step: int
    """Rollout step at which it was generated."""
    skill: str
    """Skill the design prompt asked for (the centring group)."""
    prompt_ids: list[int]
    """Tokenised design prompt."""
    completion_ids: list[int]
    """The designer's generated tokens."""
    behaviour_logprobs: list[float]
    """Per-token log-probs of ``completion_ids`` under the generating policy."""
    env_id: str | None = None
    """Hash of the admitted environment (``None`` when rejected)."""
    admitted: bool = False
    """Whether the design passed admission."""
    reason: str = ""
    """Admission verdict reason (``ok`` or the rejection reason)."""
    reward: float | None = None
    """Designer reward after per-skill centring; ``None`` until scored."""
    parts: dict[str, float] = Field(default_factory=dict)
    """Reward parts (regret, regret term, anchor, win rates; ``penalty`` of a rejected design)."""
    trainable: bool = True
    """``False`` for a frozen designer's output: scored for the logs, never buffered or trained."""


class DelayedDesignerBuffer:
    """FIFO of designer samples, each trained once, ``delay`` steps after generation."""

    def __init__(self, delay: int = 4, max_wait: int = 8) -> None:
        if delay < 0 or max_wait < 0:
            raise ValueError("delay and max_wait must be >= 0")
        self.delay = delay
        self.max_wait = max_wait
        self._samples: dict[str, DesignerSample] = {}
        self.trained: int = 0
        """Samples handed out for training so far."""
        self.dropped: int = 0
        """Samples dropped unscored after ``delay + max_wait`` steps."""

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, samples: list[DesignerSample]) -> None:
        for sample in samples:
            if sample.id in self._samples:
                raise ValueError(f"designer sample {sample.id!r} is already buffered")
            if len(sample.completion_ids) != len(sample.behaviour_logprobs):
                raise ValueError("behaviour_logprobs must have one value per completion token")
            self._samples[sample.id] = sample

    def pending(self) -> list[DesignerSample]:
        """Buffered samples, oldest first."""
        return sorted(self._samples.values(), key=lambda s: (s.step, s.id))

    def score(self, rewards: dict[str, float], parts: dict[str, dict[str, float]] | None = None) -> None:
        """Attach rewards (by sample id) to buffered samples."""
        for sid, value in rewards.items():
            sample = self._samples.get(sid)
            if sample is None:
                raise KeyError(f"no buffered designer sample {sid!r}")
            sample.reward = float(value)
            if parts and sid in parts:
                sample.parts = dict(parts[sid])

    def pop_due(self, step: int) -> list[DesignerSample]:
        """Remove and return the scored samples with ``sample.step + delay <= step`` (oldest first)."""
        due, drop = [], []
        for sample in self.pending():
            if sample.step + self.delay > step:
                continue
            if sample.reward is not None:
                due.append(sample)
            elif sample.step + self.delay + self.max_wait <= step:
                drop.append(sample)
        for sample in due + drop:
            del self._samples[sample.id]
        self.trained += len(due)
        self.dropped += len(drop)
        return due

    # -- persistence ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"delay": self.delay, "max_wait": self.max_wait, "trained": self.trained,
                "dropped": self.dropped, "samples": [s.model_dump(mode="json") for s in self.pending()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.delay = int(state["delay"])
        self.max_wait = int(state["max_wait"])
        self.trained = int(state["trained"])
        self.dropped = int(state["dropped"])
        self._samples = {}
        self.add([DesignerSample.model_validate(s) for s in state["samples"]])

