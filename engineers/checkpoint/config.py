"""The ``engineer`` section of a run config for ``checkpoint``, and the context presets V1–V6.

Presets (the Trainee-to-Trainer paper), each a set of context modules:

====  ==========================================================
V1    F
V2    F + G
V3    F + G + H (H includes the round-0 configuration)
V4    F + G + H, with the round-0 (random) configuration removed from H
V5    V4 + S
V6    V4 + T   (the paper's final method; T defaults to "bookkeeping")
====  ==========================================================

``ContextSpec`` is the resolved set; ``CheckpointEngineerConfig.context_spec()`` applies the
per-module switches in ``modules`` on top of the chosen preset (``None`` = the preset decides),
so ablations such as "V6 without G" or "V5 + full T" are one line of YAML.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from curriculum.core.config import PluginConfig, StrictModel
from curriculum.core.endpoint import EndpointConfig
from curriculum.core.policy import ModelConfig

Preset = Literal["V1", "V2", "V3", "V4", "V5", "V6"]
TrainingVariant = Literal["bookkeeping", "full"]


class ContextSpec(BaseModel):
    """Which modules the engineer's prompt contains (the resolved preset plus overrides)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure: bool
    """F: the latest failure breakdown per map size."""
    guideline: bool
    """G: task-level design heuristics."""
    history: bool
    """H: earlier (failure breakdown, config) pairs."""
    history_initial_config: bool
    """Whether H shows the round-0 config (V3) or omits it (V4 and later)."""
    summary: bool
    """S: the engineer's own summary of its previous choice."""
    training: TrainingVariant | None
    """T: ``None`` (off), ``"bookkeeping"`` or ``"full"``."""

    def modules(self) -> list[str]:
        """Letters of the modules switched on, in prompt order (F, G, H, S, T)."""
        flags = [("F", self.failure), ("G", self.guideline), ("H", self.history),
                 ("S", self.summary), ("T", self.training is not None)]
        return [letter for letter, on in flags if on]


def preset(name: Preset, training: TrainingVariant = "bookkeeping") -> ContextSpec:
    """The module set of preset ``name`` (the Trainee-to-Trainer paper); ``training`` is T's variant in V6."""
    if name not in PRESETS:
        raise ValueError(f"unknown context preset {name!r}; choose one of {', '.join(PRESETS)}")
    spec = PRESETS[name]
    if spec.training is not None:
        spec = spec.model_copy(update={"training": training})
    return spec


_V1 = ContextSpec(failure=True, guideline=False, history=False, history_initial_config=True,
                  summary=False, training=None)
_V2 = _V1.model_copy(update={"guideline": True})
_V3 = _V2.model_copy(update={"history": True})
_V4 = _V3.model_copy(update={"history_initial_config": False})
_V5 = _V4.model_copy(update={"summary": True})
_V6 = _V4.model_copy(update={"training": "bookkeeping"})
PRESETS: dict[str, ContextSpec] = {"V1": _V1, "V2": _V2, "V3": _V3, "V4": _V4, "V5": _V5, "V6": _V6}
"""The Trainee-to-Trainer paper's presets. V6 = V4 + T (it does *not* include S)."""


class ModuleSwitches(StrictModel):
    """Per-module overrides on top of the preset; ``None`` keeps what the preset says."""

    F: bool | None = None
    """Failure breakdown on/off."""
    G: bool | None = None
    """Guideline on/off."""
    H: bool | None = None
    """History on/off."""
    S: bool | None = None
    """Own previous summary on/off."""
    T: bool | None = None
    """Training details on/off (variant from ``training_details``)."""
    history_initial_config: bool | None = None
    """Show the round-0 config inside H (V3 behaviour) or omit it (V4 behaviour)."""


class CheckpointEngineerConfig(PluginConfig):
    """The policy (or a chosen model) redesigns the MAPF generator config each round."""

    name: Literal["checkpoint"]
    """Selects this engineer."""
    context: Preset = "V6"
    """Context preset (Trainee-to-Trainer): V1=F, V2=F+G, V3=F+G+H, V4=V3 without the round-0 config in H,
    V5=V4+S, V6=V4+T (the paper's final method)."""
    training_details: TrainingVariant = "bookkeeping"
    """Variant of module T: ``bookkeeping`` (round index, epochs per round, total epochs; the
    paper's better choice) or ``full`` (plus GRPO, the adaptive reward and hyper-parameters)."""
    modules: ModuleSwitches = Field(default_factory=ModuleSwitches)
    """Explicit per-module switches applied on top of the preset (for ablations)."""
    history_rounds: int = Field(3, ge=1, le=100)
    """H shows at most this many most recent rounds."""
    model: Literal["checkpoint", "base", "local", "endpoint"] = "checkpoint"
    """Who answers: the current policy (the paper's method), the frozen starting model (the
    paper's ablation), a frozen local chat model (``local`` section: for a learner that cannot
    write a proposal, such as the small learner), or an OpenAI-compatible endpoint (``endpoint``
    section)."""
    local: ModelConfig = Field(default_factory=ModelConfig)
    """The model that answers when ``model: local`` (default: the embedded SmolLM2-135M-Instruct as
    shipped); loaded once per process by the trainer layer and never trained."""
    endpoint: EndpointConfig = Field(default_factory=EndpointConfig)
    """Endpoint settings (only read when ``model: endpoint``)."""
    max_new_tokens: int | None = Field(None, ge=16, le=131_072)
    """Completion budget; ``None`` uses ``generation.engineer_max_new_tokens`` of the policy
    (512 when the policy does not say)."""
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    """Sampling temperature of the engineer call (0 = greedy, reproducible)."""
    attempts: int = Field(1, ge=1, le=10)
    """Generations tried until one contains a usable config (each retry uses a new seed and, if
    ``temperature`` is 0, temperature 0.7 so that it can differ)."""
    structured_output: bool = True
    """Decode the answer under the proposal space's finite answer schema (``constrained``
    module): a transformers policy through an llguidance logits processor, a vLLM policy through
    vLLM's structured outputs, an endpoint through ``response_format`` when ``endpoint.json_schema``
    is set. ``false`` is the paper-faithful ablation: free text (reasoning, then a JSON object)
    read by lenient parsing plus ``project``."""
    answer_reasoning_chars: int = Field(300, ge=0, le=20_000)
    """Constrained answers: most characters of the ``reasoning`` field (written first, before
    the config, so the model reasons before it decides)."""
    answer_summary_chars: int = Field(200, ge=0, le=10_000)
    """Constrained answers: most characters of the ``summary`` field."""
    answer_decimals: int = Field(3, ge=0, le=6)
    """Constrained answers: decimals of every share and knob (bounds the answer's length)."""
    summary_max_chars: int = Field(600, ge=0, le=10_000)
    """The carried summary (module S) is cut to this many characters."""
    edit_tolerance: float = Field(0.02, gt=0.0, le=1.0)
    """Diagnostics: a (size, field) counts as edited when it moves by more than this."""
    local_edit_max_sizes: int = Field(3, ge=1)
    """Diagnostics: an edit touching at most this many sizes is ``local``, more is ``global``."""

    def context_spec(self) -> ContextSpec:
        """The preset with the ``modules`` overrides applied."""
        spec = preset(self.context, self.training_details)
        m = self.modules
        update: dict[str, object] = {}
        for field, value in (("failure", m.F), ("guideline", m.G), ("history", m.H), ("summary", m.S),
                             ("history_initial_config", m.history_initial_config)):
            if value is not None:
                update[field] = value
        if m.T is not None:
            update["training"] = self.training_details if m.T else None
        return spec.model_copy(update=update)
