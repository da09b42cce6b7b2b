"""``simulated``: a parametric model of learning dynamics, for fast controlled engineer benchmarks.

**This is a simulation, not a language model.** It exists so that engineers can be compared in
seconds on a CPU, under learning dynamics whose shape is known and documented. Numbers produced
with it are never model results; ``curriculum compare`` says so in its table title and JSON.
The equations are documented in ``docs/simulated_learner.md``; in short:

State: a competence c_b for each bucket b of the testbed's bucket proposal space
(``curriculum.core.buckets``; MAPF-FrozenLake: the map sizes ``3x3`` … ``10x10``; reasoning-gym: each
task × difficulty level), starting at c_0. Buckets are grouped into environments, easiest first
(``groups_of``); r_b is b's rank in its group (MAPF: one group, r = n − 3 for side n;
reasoning-gym: the difficulty level).

Difficulty of a task in bucket b with k agents, hole ratio h and needs-wait flag w ∈ {0, 1}
(the last three only where the task has them; otherwise k = 2, h = 0, w = 0)::

    d(task) = β_n·r_b + β_k·(k − 2) + β_h·h + β_w·w

Success probabilities (logistic in the competence gap, slope a; optimality needs a margin m)::

    p_valid   = σ(a·(c_s − d))          p_optimal = σ(a·(c_s − d − m)) ≤ p_valid

Training on a round's N tasks runs in S equal steps. In each step, for every size j::

    K(t, j) = τ^{|r_t − r_j|} in the same group, γ·τ^{|r_t − r_j|} across groups (γ = group_transfer)
    g_j = (η / N) · Σ_{t in step} 4·p_t(1 − p_t) · K(t, j)             (learning; peaks at p = ½)
    e_j = (1 / N) · Σ_{t in step} K(t, j) · S                           (exposure, transfer included)
    f_j = φ/S · max(0, 1 − e_j / e_min) · (c_j − c_floor)               (forgetting toward the floor)
    c_j ← c_j + g_j · exp(σ_ξ·ξ_j − σ_ξ²/2) − f_j,   ξ_j ~ N(0, 1)     (multiplicative noise)

so far-too-easy (p ≈ 1) and far-too-hard (p ≈ 0) instances teach little, training at one level
transfers to neighbouring levels with factor τ per step, and buckets the round barely touches
drift back toward c_floor.

Training metrics include, per bucket, the statistics of ``curriculum/core/bucket_stats.py`` over
G = ``group_size`` simulated answers per training task (their rewards from the testbed's real
``score``), as a GRPO round would report them.

Answers: for every task the policy draws u ~ U(0, 1) from a stream seeded by (policy seed, call
seed, task id). A testbed with a ``simulated_answer(task, correct, rng)`` method (reasoning-gym)
turns u < p_valid into its text (a correct answer, else a wrong or unformatted one). On
MAPF-FrozenLake the policy returns **plan text in the canonical format** (``Agent i: (r,c) ...``):
the instance's stored optimal plan if u < p_optimal; a valid plan one wait longer if
p_optimal ≤ u < p_valid (the first single-wait insertion the real validator accepts; the optimal
plan if none exists); otherwise a plan with one plausible defect — a truncated path
(goal_reached), a skipped cell (legal_move), a missing agent (agent_count), a conflict from
dropping a needed wait or moving into another agent (conflict_free), or unparsable text. The
testbed scores these texts with its real validator, so eval metrics mean what they mean for a
model. Everything is deterministic given the seeds; ``save`` writes the state as JSON and
``setup`` restores it.
"""

from __future__ import annotations

import hashlib
import json
import math
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from curriculum.core.bucket_stats import bucket_metrics
from curriculum.core.buckets import groups_of, space_of
from curriculum.core.config import PluginConfig
from curriculum.core.run import RunSettings
from curriculum.core.types import Completion, Task
from testbeds.base import Testbed
from trainers.base import LogFn, Trainer

STATE_FILE = "simulated_state.json"
"""File written by ``save`` inside the checkpoint directory."""

SIZES: tuple[str, ...] = tuple(f"{n}x{n}" for n in range(3, 11))
"""The sizes whose competence the learner tracks (MAPF-FrozenLake's eight)."""

FAILURE_MODES: tuple[str, ...] = ("truncate", "skip", "drop_agent", "conflict", "garbled")
"""Defects of a failed answer, each aimed at one check (see ``failed_plan``)."""


class SimulatedConfig(PluginConfig):
    """Parameters of the simulated learner (equations in the module docstring)."""

    name: Literal["simulated"]
    """Selects this trainer."""
    initial_competence: float = 1.5
    """c_0: competence of every size before training."""
    competence_floor: float | None = None
    """c_floor: level that forgetting decays toward (``None``: c_0)."""
    slope: float = Field(2.0, gt=0.0)
    """a: slope of the logistic success probability."""
    size_difficulty: float = Field(0.6, ge=0.0)
    """β_n: difficulty added per step of map side above 3."""
    agent_difficulty: float = Field(1.0, ge=0.0)
    """β_k: difficulty added per agent above 2 (eval suites have 3–5 agents, training 2)."""
    hole_difficulty: float = Field(3.0, ge=0.0)
    """β_h: difficulty per unit of hole ratio (0.5 holes → +1.5 at the default)."""
    wait_difficulty: float = Field(1.0, ge=0.0)
    """β_w: difficulty added when the instance needs a wait."""
    optimal_margin: float = Field(0.75, ge=0.0)
    """m: extra competence an optimal (not just valid) plan needs."""
    learning_rate: float = Field(0.8, ge=0.0)
    """η: competence gained per round when every task sits exactly at the frontier (p = ½)."""
    transfer: float = Field(0.5, ge=0.0, le=1.0)
    """τ: share of a bucket's learning (and exposure) that reaches a bucket one level away."""
    group_transfer: float = Field(0.0, ge=0.0, le=1.0)
    """γ: extra factor on transfer between buckets of different groups (environments)."""
    group_size: int = Field(4, ge=1)
    """G: simulated answers per training task behind the per-bucket reward statistics."""
    forgetting: float = Field(0.3, ge=0.0, le=1.0)
    """φ: share of the gap to the floor lost per round by a size with no exposure."""
    min_exposure: float = Field(0.1, gt=0.0)
    """e_min: exposure (share of the round's tasks, transfer included) that stops forgetting."""
    noise: float = Field(0.2, ge=0.0)
    """σ_ξ: log-normal noise on each size's gain per step (0: deterministic dynamics)."""
    steps_per_round: int = Field(4, ge=1)
    """S: competence updates per round (each over 1/S of the tasks)."""
    suboptimal_valid_share: float = Field(1.0, ge=0.0, le=1.0)
    """Share of valid-but-not-optimal answers that carry an extra wait (others fall back to the
    optimal plan, as a model that sometimes gets lucky)."""


# --------------------------------------------------------------------------------------------
# pure functions
# --------------------------------------------------------------------------------------------

def sigmoid(x: float) -> float:
    """Numerically safe logistic function."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def side_of(size: str) -> int:
    """``"5x5"`` → 5."""
    return int(str(size).split("x")[0])


Layout = dict[str, tuple[str, int]]
"""Bucket → (group, rank in the group)."""

MAPF_LAYOUT: Layout = {s: ("all", side_of(s) - 3) for s in SIZES}
"""MAPF-FrozenLake's layout: one group, rank n − 3 for side n."""


def layout_of(testbed: Testbed) -> Layout:
    """The (group, rank) of every bucket of the testbed's bucket space."""
    space = space_of(testbed)
    return {b: (g, i) for g, levels in groups_of(testbed, space).items() for i, b in enumerate(levels)}


def bucket_of(features: dict[str, Any]) -> str:
    """A task's bucket (``features["bucket"]``; MAPF feature dicts without it: their size)."""
    return str(features["bucket"] if "bucket" in features else features["size"])


def difficulty(features: dict[str, Any], config: SimulatedConfig, layout: Layout = MAPF_LAYOUT) -> float:
    """d(task) = β_n·r_b + β_k·(k − 2) + β_h·h + β_w·w."""
    r = layout[bucket_of(features)][1]
    k = int(features.get("agents", 2))
    h = float(features.get("hole_ratio", 0.0))
    w = 1.0 if features.get("needs_wait") else 0.0
    return (config.size_difficulty * r + config.agent_difficulty * (k - 2)
            + config.hole_difficulty * h + config.wait_difficulty * w)


def success_probabilities(competence: float, d: float, config: SimulatedConfig) -> tuple[float, float]:
    """(p_valid, p_optimal) = (σ(a(c − d)), σ(a(c − d − m)))."""
    a = config.slope
    return sigmoid(a * (competence - d)), sigmoid(a * (competence - d - config.optimal_margin))


def transfer_kernel(n_from: int, n_to: int, tau: float) -> float:
    """τ^{|n_from − n_to|} (1 at the trained size)."""
    return tau ** abs(n_from - n_to)


def bucket_kernel(a: tuple[str, int], b: tuple[str, int], config: SimulatedConfig) -> float:
    """K: τ^{|r_a − r_b|}, times γ across groups."""
    k = transfer_kernel(a[1], b[1], config.transfer)
    return k if a[0] == b[0] else config.group_transfer * k


def update_competence(competence: dict[str, float], features: Sequence[dict[str, Any]],
                      config: SimulatedConfig, *, total_tasks: int, rng: np.random.Generator,
                      layout: Layout = MAPF_LAYOUT) -> tuple[dict[str, float], dict[str, float]]:
    """One training step over ``features`` (a 1/S slice of the round's ``total_tasks`` tasks).

    Returns the new competence and the step's per-size gains g_j (before noise).
    """
    S = config.steps_per_round
    floor = config.initial_competence if config.competence_floor is None else config.competence_floor
    gains = {s: 0.0 for s in competence}
    exposure = {s: 0.0 for s in competence}
    for f in features:
        b_t = bucket_of(f)
        p, _ = success_probabilities(competence[b_t], difficulty(f, config, layout), config)
        signal = 4.0 * p * (1.0 - p)
        for s in competence:
            k = bucket_kernel(layout[b_t], layout[s], config)
            gains[s] += config.learning_rate / total_tasks * signal * k
            exposure[s] += k * S / total_tasks
    new = {}
    for s, c in competence.items():
        xi = float(rng.standard_normal())
        noisy = gains[s] * math.exp(config.noise * xi - config.noise ** 2 / 2)
        forget = config.forgetting / S * max(0.0, 1.0 - exposure[s] / config.min_exposure) * (c - floor)
        new[s] = c + noisy - forget
    return new, gains


def render_plan(paths: Sequence[Sequence[Sequence[int]]]) -> str:
    """The canonical plan text of ``testbeds.mapf_frozenlake.parse``: ``Agent i: (r,c) (r,c) ...``."""
    return "\n".join(f"Agent {i + 1}: " + " ".join(f"({int(r)},{int(c)})" for r, c in path)
                     for i, path in enumerate(paths))


def _valid(instance: Any, paths: list[list[tuple[int, int]]]) -> Any:
    from testbeds.mapf_frozenlake.validate import validate

    return validate(instance, paths)


def suboptimal_plan(instance: Any, rng: np.random.Generator) -> list[list[tuple[int, int]]]:
    """A valid plan costing more than the optimum: the optimal plan with one wait inserted.

    Candidates (agent, time) are tried in a random order; the real validator decides. If no
    single-wait insertion is valid, the optimal plan itself is returned.
    """
    plan = [list(map(tuple, p)) for p in instance.optimal_plan]
    candidates = [(i, t) for i, p in enumerate(plan) for t in range(len(p) - 1)]
    for j in rng.permutation(len(candidates)):
        i, t = candidates[int(j)]
        trial = [list(p) for p in plan]
        trial[i] = trial[i][:t + 1] + [trial[i][t]] + trial[i][t + 1:]
        verdict = _valid(instance, trial)
        if verdict.valid and not verdict.optimal:
            return trial
    return plan


def failed_plan(instance: Any, mode: str, rng: np.random.Generator) -> str:
    """Answer text with one defect (``mode`` in ``FAILURE_MODES``); falls back to ``truncate``
    when the instance cannot show the requested defect, and to ``garbled`` when even that
    validates."""
    plan = [list(map(tuple, p)) for p in instance.optimal_plan]
    k = len(plan)
    trial: list[list[tuple[int, int]]] | None = None
    if mode == "garbled":
        return "I think the agents should go around the holes and meet at the middle."
    if mode == "drop_agent" and k >= 2:
        trial = plan[:-1]
    elif mode == "skip":
        i = int(np.argmax([len(p) for p in plan]))
        if len(plan[i]) >= 3:
            t = int(rng.integers(1, len(plan[i]) - 1))
            trial = [list(p) for p in plan]
            trial[i] = plan[i][:t] + plan[i][t + 1:]
    elif mode == "conflict" and k >= 2:
        trial = _conflicting(plan)
    if trial is None or _valid(instance, trial).valid:
        i = int(rng.integers(k))
        trial = [list(p) for p in plan]
        trial[i] = plan[i][:-1] if len(plan[i]) >= 2 else plan[i]
    if _valid(instance, trial).valid:
        return "I think the agents should go around the holes and meet at the middle."
    return render_plan(trial)


def _conflicting(plan: list[list[tuple[int, int]]]) -> list[list[tuple[int, int]]] | None:
    """Drop every wait (repeated cell) — the classic error on needs-wait instances; if the plan
    has no wait, send agent 2 onto agent 1's cell at time 1 when it is adjacent."""
    nowait = [[c for t, c in enumerate(p) if t == 0 or c != p[t - 1]] for p in plan]
    if nowait != plan:
        return nowait
    a, b = plan[0], plan[1]
    target = a[1] if len(a) > 1 else a[0]
    if abs(target[0] - b[0][0]) + abs(target[1] - b[0][1]) == 1:
        return [a, [b[0], target, *b[1:]]] + [list(p) for p in plan[2:]]
    return None


def task_stream(policy_seed: int, call_seed: int, task_id: str) -> np.random.Generator:
    """The random stream of one answer: seeded by (policy seed, call seed, crc32(task id))."""
    return np.random.default_rng([policy_seed & 0xFFFFFFFF, call_seed & 0xFFFFFFFF,
                                  zlib.crc32(task_id.encode())])


def answer(task: Task, competence: dict[str, float], config: SimulatedConfig,
           rng: np.random.Generator) -> tuple[str, str]:
    """(plan text, outcome) for one task; outcome ∈ {"optimal", "valid", "failed:<mode>"}."""
    from testbeds.mapf_frozenlake.instance import Instance

    instance = Instance.from_dict(task.data)
    size = task.features["size"]
    c = competence.get(size, config.initial_competence)
    p_valid, p_opt = success_probabilities(c, difficulty(task.features, config), config)
    u = float(rng.random())
    if u < p_opt:
        return render_plan(instance.optimal_plan), "optimal"
    if u < p_valid:
        if rng.random() < config.suboptimal_valid_share:
            return render_plan(suboptimal_plan(instance, rng)), "valid"
        return render_plan(instance.optimal_plan), "optimal"
    weights = np.array([0.3, 0.2, 0.15, 0.25, 0.1])
    if task.features.get("needs_wait"):
        weights[FAILURE_MODES.index("conflict")] *= 3.0
    mode = FAILURE_MODES[int(rng.choice(len(FAILURE_MODES), p=weights / weights.sum()))]
    return failed_plan(instance, mode, rng), f"failed:{mode}"


def approx_tokens(text: str) -> int:
    """Token count used for length metrics: about one token per 3 characters."""
    return max(1, math.ceil(len(text) / 3))


# --------------------------------------------------------------------------------------------
# trainer and policy
# --------------------------------------------------------------------------------------------

class SimulatedPolicy:
    """Answers tasks from a frozen copy of the competence (see ``answer``)."""

    def __init__(self, competence: dict[str, float], config: SimulatedConfig, policy_seed: int,
                 testbed: Testbed | None = None, layout: Layout = MAPF_LAYOUT) -> None:
        self.competence = dict(competence)
        self.config = config
        self.policy_seed = policy_seed
        self.layout = layout
        self.render = getattr(testbed, "simulated_answer", None)
        """The testbed's own answer renderer (module docstring), or ``None`` for MAPF plans."""
        self.progress = None

    def answer_text(self, task: Task, seed: int) -> str:
        rng = task_stream(self.policy_seed, seed, task.id)
        if self.render is None:
            return answer(task, self.competence, self.config, rng)[0]
        c = self.competence.get(bucket_of(task.features), self.config.initial_competence)
        p_valid, _ = success_probabilities(c, difficulty(task.features, self.config, self.layout), self.config)
        return self.render(task, bool(rng.random() < p_valid), rng)

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        out = []
        for task in tasks:
            text = self.answer_text(task, seed)
            out.append(Completion(text=text, num_tokens=approx_tokens(text)))
            if self.progress is not None:
                self.progress(1)
        return out


class SimulatedTrainer(Trainer[SimulatedConfig]):
    """A simulated learner with the dynamics of the module docstring (not a model)."""

    writes_text = False  # simulated answers to its tasks, no text

    config_class = SimulatedConfig
    trains_on = "bucketed"
    description = "A documented parametric learning-dynamics simulation (not a model) for fast benchmarks."

    def __init__(self, run_config: RunSettings, testbed: Testbed, run_dir: Path | None = None) -> None:
        super().__init__(run_config, testbed, run_dir)
        self.layout = layout_of(testbed)
        self.competence: dict[str, float] = {}
        self.policy_seed = 0
        self.rounds_trained = 0

    def setup(self, checkpoint: Path | None) -> None:
        if checkpoint is None:
            self.competence = {b: self.config.initial_competence for b in self.layout}
            self.policy_seed = 0
            self.rounds_trained = 0
            return
        state = json.loads((Path(checkpoint) / STATE_FILE).read_text())
        missing = [b for b in self.layout if b not in state["competence"]]
        if missing:
            raise ValueError(f"{checkpoint}: the saved simulated learner has no competence for buckets "
                             f"{missing[:5]} of this testbed (was it saved for another testbed?)")
        self.competence = {b: float(state["competence"][b]) for b in self.layout}
        self.policy_seed = int(state["policy_seed"])
        self.rounds_trained = int(state["rounds_trained"])

    def train_round(self, tasks: Sequence[Task], *, round_index: int, seed: int,
                    log: LogFn | None = None) -> dict[str, float]:
        if not tasks:
            raise ValueError("the simulated learner needs at least one training task")
        rng = np.random.default_rng([seed, 0x53494D])
        S = self.config.steps_per_round
        features = [t.features for t in tasks]
        before = [success_probabilities(self.competence[bucket_of(f)], difficulty(f, self.config, self.layout),
                                        self.config)[0] for f in features]
        for step in range(S):
            chunk = features[step::S]
            self.competence, gains = update_competence(self.competence, chunk, self.config,
                                                       total_tasks=len(tasks), rng=rng, layout=self.layout)
            if log is not None:
                log({"round": round_index, "step": step + 1,
                     "reward": float(np.mean([before[i] for i in range(step, len(features), S)]))
                     if chunk else 0.0,
                     "gain": float(sum(gains.values()))})
        self.policy_seed = seed
        self.rounds_trained += 1
        p = np.array(before)
        metrics = {
            "expected_success": float(p.mean()),
            "learning_signal": float((4 * p * (1 - p)).mean()),
            **self._scored_groups(tasks, seed),
            "tasks": float(len(tasks)),
            "simulated": 1.0,
        }
        metrics.update({f"competence/{s}": float(c) for s, c in self.competence.items()})
        return metrics

    def _scored_groups(self, tasks: Sequence[Task], seed: int) -> dict[str, float]:
        """Mean reward of G simulated answers per training task, scored by the testbed's real
        reward, and the per-bucket statistics of ``curriculum/core/bucket_stats.py``."""
        policy = self.policy()
        buckets, groups, rewards = [], [], []
        for g in range(self.config.group_size):
            completions = policy.generate(tasks, seed=seed + 7919 * g)
            for i, (t, c) in enumerate(zip(tasks, completions, strict=True)):
                buckets.append(bucket_of(t.features))
                groups.append(i)
                rewards.append(self.testbed.score(t, c)[0])
        return {"reward": float(np.mean(rewards)), **bucket_metrics(buckets, groups, rewards)}

    def policy(self) -> SimulatedPolicy:
        return SimulatedPolicy(self.competence, self.config, self.policy_seed, self.testbed, self.layout)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / STATE_FILE).write_text(json.dumps({
            "competence": self.competence, "policy_seed": self.policy_seed,
            "rounds_trained": self.rounds_trained, "simulated": True,
        }, indent=2) + "\n")

    def weights_digest(self) -> str:
        """What weights are to a model: a hash of the state ``save`` writes (competences, policy seed,
        rounds trained)."""
        state = {"competence": self.competence, "policy_seed": self.policy_seed, "rounds_trained": self.rounds_trained}
        return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]

    def run_info(self) -> dict[str, Any]:
        return {"trainer": self.name, "simulated": True, "rounds_trained": self.rounds_trained,
                **self.config.model_dump(mode="json")}
