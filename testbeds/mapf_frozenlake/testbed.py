"""The MAPF-FrozenLake testbed (Trainee-to-Trainer paper): proposal space, sampling, reward and evaluation.

* Proposal: ``GeneratorConfig`` (per size: data, hole and wait ratios); ``project`` legalises any
  JSON value and records each edit.
* ``sample``: ``n`` training instances with ``train_agents`` (2) agents from the generator,
  deterministic in (proposal, n, seed). A draw whose map, starts and goals equal a held-out
  instance's (validation or test suite) is replaced by a redraw of its size (``_fresh``); so is
  one in ``warmstart_tasks``.
* ``score``: the adaptive reward of the Trainee-to-Trainer paper with the completion's token count.
* ``evaluate(suite=...)``: one ``policy.generate`` call over the fixed ``validation`` suites
  (seed ``eval_seed``) or ``test`` suites (seed ``test_seed``, disjoint by content from
  validation), each over ``eval_agents`` (3, 4, 5) × ``eval_sizes`` (8).
  ``EvalReport.score`` is the **valid rate over all eval instances** (all suites pooled): it is
  the paper's headline metric, lies in [0, 1] and, unlike the optimal rate, still moves when a
  weak policy starts producing correct but suboptimal plans. Optimal rates are in ``metrics``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator

from curriculum.core.config import PluginConfig
from curriculum.core.presets import Preset
from curriculum.core.reporting import ReportLayout, ReportRate
from curriculum.core.spaces import BucketSpace
from curriculum.core.types import Change, Completion, EvalReport, Policy, Task
from testbeds.base import Testbed
from testbeds.mapf_frozenlake.config import SIZES, SPACE, GeneratorConfig, ProposalLimits, SizeParams
from testbeds.mapf_frozenlake.config import project as project_config
from testbeds.mapf_frozenlake.generator import GenerationResult, generate, largest_remainder, merge_reports
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.prompts import AnswerFormat, PromptStyle, render_prompt
from testbeds.mapf_frozenlake.reward import AdaptiveReward, accuracy, length_reward
from testbeds.mapf_frozenlake.suites import bucket_scores, build_suite, content_key, flat_metrics, summarize
from testbeds.mapf_frozenlake.validate import validate


AgentCount = Annotated[int, Field(ge=1, le=8)]


class MAPFTestbedConfig(PluginConfig):
    """Settings of the MAPF-FrozenLake testbed (the ``testbed`` section of a run config)."""

    name: Literal["mapf_frozenlake"]
    """Registry name."""
    train_agents: AgentCount | Annotated[list[AgentCount], Field(min_length=1)] = 2
    """Agents per training instance (the paper trains on 2), or a list of agent counts that
    share every round's instances equally (each count gets the proposal's size mix)."""
    eval_agents: list[int] = Field(default_factory=lambda: [3, 4, 5])
    """Agent counts of the eval suites (the paper evaluates 3, 4 and 5)."""
    eval_instances_per_size: int = Field(10, ge=1)
    """Eval instances per map size and suite (8 sizes; keep small for CPU demos)."""
    eval_sizes: list[str] = Field(default_factory=lambda: list(SIZES))
    """Map sizes of the eval suites (the paper: all 8). CPU demos use small maps, where a 135M
    model's valid rate can move within minutes."""
    prompt_style: PromptStyle = "paper"
    """``paper``: the full-sentence prompt; ``compact``: the same instance information and rules
    in terse notation (~25-40% fewer prompt tokens); ``holes``: ``compact`` with the map given as
    the list of hole cells instead of a drawing; ``coords``: ``compact`` with every walkable cell
    of the drawing written as ``(row,col)`` (``prompts.py``). Paper configs keep ``paper``."""
    answer_format: AnswerFormat = "cells"
    """What the prompt asks for and the warm start's reference answers are written in:
    ``cells`` (the paper: each agent's cell at every step) or ``moves`` (``Agent 1: R D W``, each
    agent's moves from its start: ~4x fewer answer tokens to generate and train on). The parser
    reads both and the eight checks are the same (``prompts.py``)."""
    warmstart_sizes: list[str] = Field(default_factory=lambda: ["3x3", "4x4", "5x5"])
    """Map sizes of the supervised warm start's examples (equal shares, 20% holes, the natural
    wait mix); used only when the trainer's warm start is on."""
    warmstart_agents: list[int] = Field(default_factory=lambda: [2], min_length=1)
    """Agent counts of the warm start's examples (equal shares). Adding 3 teaches a small model
    the answer format for more agents than GRPO trains on (``train_agents``)."""
    eval_seed: int = 1234
    """Seed of the validation suites (what engineers read); fixed so every round and engineer
    sees the same instances."""
    test_seed: int = 4321
    """Seed of the test suites (what reports and ``compare`` score on; engineers never see their
    results). Instances equal to a validation instance are skipped; must differ from ``eval_seed``."""
    test_instances_per_size: int | None = Field(None, ge=1)
    """Test instances per map size and agent count (``None``: ``eval_instances_per_size``)."""
    eval_hole_ratio: float = Field(0.2, ge=0.0, le=0.5)
    """Hole ratio of eval maps (FrozenLake's default density)."""
    eval_wait_ratio: float | None = Field(None, ge=0.0, le=1.0)
    """Share of each size's held-out instances that need a wait action (no conflict-free plan
    without a wait reaches the optimal cost); ``None``: the generator's natural mix, as the paper's
    eval. A target of instances that need waits is one the warm start cannot reach."""
    eval_max_new_tokens: int | None = None
    """Generation length cap passed to the policy at eval (``None``: the policy's default)."""
    eval_samples: int = Field(6, ge=0)
    """Examples kept in ``EvalReport.samples`` (half valid, half failing when possible)."""
    initial_proposal: Literal["random"] | GeneratorConfig = "random"
    """Round-0 config: ``"random"`` (the paper's cold start) or an explicit ``GeneratorConfig``."""
    proposal_limits: ProposalLimits = Field(default_factory=ProposalLimits)
    """The part of the proposal space this run may use (``config.ProposalLimits``): allowed
    sizes and hole/wait ranges. The random cold start draws inside it and ``project`` moves every
    proposal into it. Default: the whole space (the paper's). CPU configs narrow it so that every
    proposable instance's plan fits the completion budget (tests/compare/test_mapf_cpu_space.py)."""
    solver_time_budget_s: float = Field(30.0, gt=0)
    """Per-draw solver wall-clock safety net when generating training data. Keep it generous:
    draws cut by the clock depend on machine load, which would make ``sample`` irreproducible."""
    solver_node_budget: int = Field(5000, ge=1)
    """Per-draw CBS node budget when generating training data (the joint search gets 20x as
    many states); over-budget draws are rejected and redrawn, deterministically."""
    short_threshold: int = Field(1500, ge=1)
    """Responses of at most this many tokens are 'short' (zero length penalty)."""
    max_tokens: int = Field(4096, ge=2)
    """Length at which the length penalty reaches −1."""
    ema_decay: float = Field(0.9, ge=0.0, lt=1.0)
    """Decay of the EMA of the short-response fraction driving the adaptive weights."""
    workers: int | None = None
    """Generation processes (``None``: up to 2 for large batches)."""

    @model_validator(mode="after")
    def _distinct_seeds(self) -> MAPFTestbedConfig:
        if self.test_seed == self.eval_seed:
            raise ValueError(f"test_seed and eval_seed are both {self.eval_seed}: the test suite "
                             "must be drawn from its own seed")
        return self

    def instances_per_size(self, suite: str) -> int:
        """Instances per map size and agent count of a held-out suite."""
        return (self.test_instances_per_size if suite == "test" else None) or self.eval_instances_per_size

    @field_validator("eval_sizes", "warmstart_sizes")
    @classmethod
    def _known_sizes(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SIZES]
        if unknown or not value:
            raise ValueError(f"sizes must be a non-empty subset of {list(SIZES)}; unknown: {unknown}")
        return [s for s in SIZES if s in value]  # canonical order, no duplicates

    @model_validator(mode="after")
    def _initial_inside_limits(self) -> MAPFTestbedConfig:
        if isinstance(self.initial_proposal, GeneratorConfig):
            outside = self.proposal_limits.violations(self.initial_proposal)
            if outside:
                raise ValueError("initial_proposal lies outside proposal_limits: " + "; ".join(outside))
        return self


class AgentSuitesLayout(ReportLayout):
    """How reports read this testbed's metrics: valid and optimal rate, per eval suite (one per
    agent count, ``<k>agents``) and per map size (``suites.flat_metrics``)."""

    def group_label(self, group: str) -> str | None:
        count = group.removesuffix("agents")
        return f"{count} agents" if count != group and count.isdigit() else None


REPORT_LAYOUT = AgentSuitesLayout(
    rates=(ReportRate("valid", "valid_rate"), ReportRate("optimal", "optimal_rate")),
    score="valid rate over all instances of the suite")
"""What ``curriculum report`` and ``compare`` draw and tabulate; buckets are map sizes
(``SPACE.unit``), drawn smallest first."""


class MAPFTestbed(Testbed):
    """Multi-agent path finding on FrozenLake grids."""

    config_class = MAPFTestbedConfig
    task_kinds = ("prompt", "mapf", "bucketed")
    """``mapf`` is this testbed's own kind: prompts whose ``Task.data`` carries the instance (the
    ``small`` trainer, built for this testbed, reads it)."""
    default_trainer = "grpo"
    prompt_share = 0.5
    """A batch is padded to its longest prompt; the path-finding CPU configs' prompts (2-3 agents,
    3x3-5x5 maps, compact style, the SmolLM2 tokenizer with its chat template) are 161-195 tokens
    long, 178 on average, in the demo's validation, test and training suites (TRL's ``num_tokens``
    of its GRPO steps less their completions: 173-184 a row): 195 / 400 = 0.49. Larger maps have
    longer prompts. The plans run to the limit (``eval_answer_fill`` 1)."""
    description = ("Multi-agent path finding on FrozenLake grids; the engineer edits per-size "
                   "generator ratios.")
    commands: ClassVar[dict[str, str]] = {"mapf": "testbeds.mapf_frozenlake.cli:commands"}

    proposal_model: ClassVar[type[BaseModel]] = GeneratorConfig
    proposal_space: ClassVar[BucketSpace] = SPACE
    report_layout: ClassVar[ReportLayout] = REPORT_LAYOUT

    def allowed_space(self) -> BucketSpace:
        """``SPACE`` narrowed to ``proposal_limits``: its sizes and its hole and wait ranges."""
        limits = self.config.proposal_limits
        ranges = {"hole_ratio": limits.hole_ratio, "wait_ratio": limits.wait_ratio}
        knobs = tuple(k.model_copy(update={"low": ranges[k.name][0], "high": ranges[k.name][1]})
                      if k.name in ranges else k for k in SPACE.knobs)
        return SPACE.model_copy(update={"buckets": tuple(limits.sizes), "knobs": knobs})

    def __init__(self, config: MAPFTestbedConfig | None = None, *, seed: int = 0) -> None:
        self.config = config or MAPFTestbedConfig()
        self.seed = seed
        self.reward = AdaptiveReward(short_threshold=self.config.short_threshold,
                                     max_tokens=self.config.max_tokens,
                                     decay=self.config.ema_decay)
        self._suites: dict[str, list[Instance]] = {}
        self._held_out: frozenset[str] | None = None
        self.last_generation_report: dict[str, Any] = {}
        """Per-size requested vs achieved ratios of the latest ``sample`` call."""

    # -- proposal space -----------------------------------------------------------------------
    def initial_proposal(self, rng: np.random.Generator) -> GeneratorConfig:
        if isinstance(self.config.initial_proposal, GeneratorConfig):
            return self.config.initial_proposal.model_copy(deep=True)
        return self.config.proposal_limits.random(rng)

    def random_proposal(self, rng: np.random.Generator) -> GeneratorConfig:
        return self.config.proposal_limits.random(rng)

    def project(self, raw: Any, previous: BaseModel) -> tuple[GeneratorConfig, list[Change]]:
        if not isinstance(previous, GeneratorConfig):
            previous = GeneratorConfig.model_validate(
                previous.model_dump() if isinstance(previous, BaseModel) else previous)
        config, changes = project_config(raw, previous)
        config, limited = self.config.proposal_limits.apply(config)
        if not limited:
            return config, changes
        # One change per field: the engineer's proposed value, the finally applied one.
        merged = {c.path: c for c in changes}
        for c in limited:
            first = merged.get(c.path)
            merged[c.path] = c if first is None else first.model_copy(
                update={"applied": c.applied, "reason": f"{first.reason}; {c.reason}"})
        return config, list(merged.values())

    # -- data and scoring ---------------------------------------------------------------------
    def generate(self, proposal: GeneratorConfig, n: int, seed: int):
        """The raw ``GenerationResult`` behind ``sample`` (with the per-size report)."""
        if not isinstance(proposal, GeneratorConfig):
            proposal = GeneratorConfig.model_validate(proposal.model_dump())
        agents = self.config.train_agents
        counts = [agents] if isinstance(agents, int) else agents
        parts = [self._fresh(proposal, share, agents=k, seed=seed)
                 for k, share in zip(counts, largest_remainder([1.0] * len(counts), n)) if share]
        if len(parts) == 1:
            return parts[0]
        # Interleave agent counts (seeded) so every GRPO step sees each of them.
        instances = [inst for part in parts for inst in part.instances]
        order = np.random.default_rng([seed, 0x7A61]).permutation(len(instances))
        return GenerationResult(instances=[instances[i] for i in order],
                                report=merge_reports([part.report for part in parts]),
                                elapsed_s=sum(part.elapsed_s for part in parts))

    def held_out_keys(self) -> frozenset[str]:
        """Contents (``content_key``) of every validation and test instance: what training and
        warm-start draws must avoid."""
        if self._held_out is None:
            self._held_out = frozenset(content_key(i) for suite in self.eval_suites
                                       for i in self.eval_instances(suite))
        return self._held_out

    def canonical(self, task: Task) -> str:
        return content_key(Instance.from_dict(task.data))

    def _fresh(self, proposal: GeneratorConfig, n: int, *, agents: int, seed: int,
               **options: Any) -> GenerationResult:
        """``generate``, with every draw whose content is held out replaced, in place, by a draw
        of the same size from a seed derived from (``seed``, attempt); deterministic."""
        common = dict(agents=agents, workers=self.config.workers, node_budget=self.config.solver_node_budget,
                      time_budget_s=self.config.solver_time_budget_s, **options)
        res = generate(proposal, n, seed=seed, **common)
        held = self.held_out_keys()
        for attempt in range(1, 21):
            bad = [i for i, inst in enumerate(res.instances) if content_key(inst) in held]
            if not bad:
                return res
            need = {s: sum(res.instances[i].size == s for i in bad) for s in SIZES}
            redraw_seed = int(np.random.SeedSequence([seed, attempt, 0x4845]).generate_state(1)[0] & 0x7FFFFFFF)
            redraw = generate(proposal, len(bad), seed=redraw_seed, counts=[need[s] for s in SIZES], **common)
            pool = {s: [i for i in redraw.instances if i.size == s] for s in SIZES}
            for i in bad:
                res.instances[i] = pool[res.instances[i].size].pop(0)
        raise ValueError(f"{agents}-agent draws of this proposal keep repeating held-out eval instances "
                         "(20 redraws): its maps are too small to hold instances outside the eval suites")

    def sample(self, proposal: BaseModel, n: int, seed: int) -> list[Task]:
        res = self.generate(proposal, n, seed)  # type: ignore[arg-type]
        self.last_generation_report = res.report_dict()
        return [self.task_of(inst) for inst in res.instances]

    def warmstart_tasks(self, n: int, seed: int) -> list[Task]:
        """``n`` instances spread evenly over ``warmstart_sizes`` (20% holes, natural wait mix),
        independent of any engineer's proposal, so every run shares one warm start."""
        share = 1.0 / len(self.config.warmstart_sizes)
        proposal = GeneratorConfig(sizes={
            s: SizeParams(data_ratio=share if s in self.config.warmstart_sizes else 0.0,
                          hole_ratio=0.2, wait_ratio=0.0) for s in SIZES})
        agents = self.config.warmstart_agents
        counts = largest_remainder([1.0] * len(agents), n)  # equal shares, as ``generate``
        tasks: list[Task] = []
        for k, count in zip(agents, counts):
            res = self._fresh(proposal, count, agents=k, seed=seed, wait_ratio_override=None)
            tasks.extend(self.task_of(inst) for inst in res.instances)
        # Interleave agent counts so every SFT batch sees each of them.
        order = np.random.default_rng([seed, 0x5753]).permutation(len(tasks))
        return [tasks[i] for i in order]

    def task_of(self, inst: Instance) -> Task:
        return Task(
            id=inst.id or "",
            messages=render_prompt(inst, self.config.prompt_style, self.config.answer_format),
            data=inst.to_dict(),
            features={"bucket": inst.size, "size": inst.size, "agents": inst.num_agents,
                      "hole_ratio": inst.hole_ratio, "needs_wait": bool(inst.needs_wait),
                      "optimal_cost": inst.optimal_cost},
        )

    def score(self, task: Task, completion: Completion) -> tuple[float, dict[str, Any]]:
        inst = Instance.from_dict(task.data)
        verdict = validate(inst, completion.text)
        r = self.reward(verdict, completion.num_tokens)
        info = verdict.to_dict()
        info.update(reward=r,
                    accuracy=accuracy(verdict.valid, verdict.cost, verdict.optimal_cost),
                    length=length_reward(completion.num_tokens, self.config.short_threshold,
                                         self.config.max_tokens),
                    weights=list(self.reward.weights), num_tokens=completion.num_tokens)
        return r, info

    def reference_answer(self, task: Task) -> str | None:
        """The stored optimal plan in the canonical format (used by the SFT warm start)."""
        plan = task.data.get("optimal_plan")
        if not plan:
            return None
        from testbeds.mapf_frozenlake.parse import format_moves, format_plan

        paths = [[tuple(c) for c in path] for path in plan]
        return format_plan(paths) if self.config.answer_format == "cells" else format_moves(paths)

    def observe_training_batch(self, completions: Sequence[Completion]) -> None:
        self.reward.update([c.num_tokens for c in completions])

    # -- evaluation ---------------------------------------------------------------------------
    def eval_instances(self, suite: str = "validation") -> list[Instance]:
        """One held-out suite's instances, agent count then size order (cached on disk and in
        memory); the test suite excludes the validation suite's contents."""
        self.check_suite(suite)
        if suite not in self._suites:
            cfg = self.config
            per_size, seed, exclude = cfg.instances_per_size(suite), cfg.eval_seed, frozenset()
            if suite == "test":
                seed = cfg.test_seed
                exclude = frozenset(content_key(i) for i in self.eval_instances("validation"))
            insts: list[Instance] = []
            for k in cfg.eval_agents:
                part = build_suite(k, per_size, seed, cfg.eval_hole_ratio, workers=cfg.workers,
                                   sizes=cfg.eval_sizes, exclude=exclude, wait_ratio=cfg.eval_wait_ratio)
                if suite == "test":  # ids say which suite (validation keeps the ids it always had)
                    for inst in part:
                        inst.id = f"test-{inst.id.removeprefix('eval-')}"
                insts.extend(part)
            self._suites[suite] = insts
        return self._suites[suite]

    def eval_tasks(self, suite: str = "validation") -> list[Task]:
        return [self.task_of(i) for i in self.eval_instances(suite)]

    def eval_identity(self, suite: str) -> str | None:
        # The prompts (which carry the prompt style and answer format) and ids of the suite's tasks,
        # plus what ``evaluate`` reads from the config: the token budget and the samples it keeps.
        tasks = [[t.id, self.canonical(t)] for t in self.eval_tasks(suite)]
        return json.dumps({"testbed": self.name, "suite": suite, "tasks": tasks,
                           "eval_max_new_tokens": self.config.eval_max_new_tokens,
                           "eval_samples": self.config.eval_samples}, sort_keys=True)

    presets: ClassVar[tuple[Preset, ...]] = (
        Preset("mapf_checkpoint_cpu_demo.yaml", "cpu", trainer="grpo", engineer="checkpoint",
               summary="embedded 135M model, the demo's learning recipe (cached warm start, GRPO), the policy as its "
                       "engineer (context V6, schema-constrained answers)"),
        Preset("mapf_qwen3_4b.yaml", "gpu", trainer="grpo", engineer="checkpoint",
               summary="the paper's method: Qwen3-4B, 3 epochs per round, context V6"),
        Preset("mapf_simulated.yaml", "any", trainer="simulated",
               summary="the simulated learner: engineer benchmarks in seconds (not a model)"),
        Preset("mapf_cpu_demo.yaml", "cpu", trainer="grpo",
               summary="embedded 135M model, cached SFT warm start, then GRPO"),
        Preset("mapf_qwen3_4b_baseline.yaml", "gpu", trainer="grpo",
               summary="the paper's set-up: Qwen3-4B, 3 epochs per round"),
    )

    compare_configs: ClassVar[dict[str, str]] = {
        "simulated": "configs/mapf_simulated.yaml", "grpo": "configs/mapf_compare_cpu.yaml",
        "small": "configs/mapf_small.yaml"}

    @classmethod
    def eval_budget(cls, config: BaseModel, default_max_new_tokens: int,
                    suite: str = "validation") -> tuple[int, int]:
        prompts = len(config.eval_agents) * config.instances_per_size(suite) * len(config.eval_sizes)
        return prompts, config.eval_max_new_tokens or default_max_new_tokens

    def evaluate(self, policy: Policy, *, seed: int = 0, suite: str = "validation") -> EvalReport:
        insts = self.eval_instances(suite)
        tasks = [self.task_of(i) for i in insts]
        comps = policy.generate(tasks, max_new_tokens=self.config.eval_max_new_tokens, seed=seed)
        if len(comps) != len(tasks):
            raise ValueError(f"policy returned {len(comps)} completions for {len(tasks)} tasks")
        verdicts = [validate(i, c.text) for i, c in zip(insts, comps)]
        tokens = [c.num_tokens for c in comps]
        breakdown = summarize(insts, verdicts, tokens)
        metrics = flat_metrics(breakdown)
        samples = self._samples(tasks, comps, verdicts)
        return EvalReport(score=metrics["valid_rate"], metrics=metrics, breakdown=breakdown,
                          bucket_scores=bucket_scores(breakdown), samples=samples, suite=suite,
                          task_scores={t.id: float(v.valid) for t, v in zip(tasks, verdicts)})

    def _samples(self, tasks, comps, verdicts) -> list[dict[str, Any]]:
        m = self.config.eval_samples
        good = [i for i, v in enumerate(verdicts) if v.valid]
        bad = [i for i, v in enumerate(verdicts) if not v.valid]
        pick = good[: m // 2] + bad[: m - min(len(good), m // 2)]
        pick = (pick + good[m // 2:])[:m]
        return [{"id": tasks[i].id, "prompt": tasks[i].messages[-1]["content"],
                 "response": comps[i].text, "verdict": verdicts[i].to_dict()}
                for i in sorted(pick)]

    # -- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"reward": self.reward.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "reward" in state:
            self.reward.load_state_dict(state["reward"])
