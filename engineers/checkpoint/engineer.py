"""``CheckpointEngineer``: one design call per round, as in the Trainee-to-Trainer paper.

``design(ctx)``:

1. Resolve the context modules (preset + overrides) and render them from ``ctx``, through the
   testbed's declared ``BucketSpace`` (MAPF: sizes; reasoning_gym: task levels): F from the latest
   round's ``eval.breakdown`` and ``bucket_scores``; G for the testbed; H from every round's
   (proposal, breakdown, bucket scores) in ``ctx.history``; S from the summary carried in this
   engineer's state; T from ``ctx.run_info`` (and the testbed's current reward weights for the full variant).
2. Build the chat prompt (``prompt.build_messages``) and ask the engineer model: ``checkpoint``
   → ``ctx.policy``; ``base`` → ``ctx.base_policy()``; ``endpoint`` → ``EndpointPolicy``. On a vLLM
   policy with ``structured_output`` the answer is decoded under ``prompt.output_schema``. The
   prompt shows no config a model could take over: placeholders under the answer schema, an
   implausible partial example in free text (``prompt`` module docstring).
3. Parse the answer leniently (``parse.parse_answer`` with the space, so its container and bucket
   names mark a proposal); up to ``attempts`` generations until one
   holds a config. ``Design.raw`` is the parsed config (``None`` when nothing usable came back, or
   when the endpoint failed — ``project`` then keeps the previous config and records a ``Change``
   at path ``""``; ``notes["status"]`` says why in words).
4. Run the testbed's ``project`` on a copy to compute diagnostics (``diagnostics`` module) on the
   config that will actually train. The controller runs ``project`` again and stores its changes.

Per round, ``diagnostics`` count the model's ``answers`` (one per attempt) and how many of them
are the prompt's example (``copied_example``); ``curriculum.answers.answer_counts`` sums both
over a run directory.

State (saved each round, restored on resume): the summary to show as module S next round, and the
counts of designs and of designs with a usable config.
"""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import BaseModel

from curriculum.core.breakdown import EvalBreakdown
from curriculum.core.buckets import groups_of
from curriculum.core.endpoint import EndpointError, EndpointPolicy
from curriculum.core.records import Design, Diagnostics
from curriculum.core.spaces import BucketSpace
from curriculum.core.types import Completion, Policy, Task
from engineers.base import DesignContext, Engineer
from engineers.checkpoint import context as ctxmod
from engineers.checkpoint.config import CheckpointEngineerConfig, ContextSpec
from engineers.checkpoint.constrained import (
    ConstrainedStats,
    answer_schema,
    answer_token_budget,
    constrained_generate,
    is_transformers_policy,
)
from engineers.checkpoint.diagnostics import edit_granularity, frontier_movement, summary_consistency
from engineers.checkpoint.parse import ParsedAnswer, looks_like_proposal, parse_answer
from engineers.checkpoint.prompt import build_messages, implausible_example, output_schema, prompt_text, rounded

DEFAULT_MAX_NEW_TOKENS = 512
RETRY_TEMPERATURE = 0.7
_SIZE_KEY = re.compile(r"^\s*(?:size\s*[_-]?\s*)?(\d{1,2})(?:\s*[x×*]\s*(\d{1,2}))?\s*$", re.I)


CONTEXT_TOKENS = 2000
"""Rough prompt length of a V6 context for the dry-run's time estimate (a round figure)."""


class CheckpointEngineer(Engineer):
    """The policy (or the base model, or an endpoint) proposes the next generator config."""

    config_class = CheckpointEngineerConfig
    fits = ("buckets",)
    description = "The policy redesigns its own generator config from a failure report (contexts V1–V6)."

    config: CheckpointEngineerConfig

    def __init__(self, config: CheckpointEngineerConfig, *, run_dir: str | None = None) -> None:
        super().__init__(config, run_dir=run_dir)
        self.summary: str | None = None
        self.designs = 0
        self.usable = 0
        self.last_stats: ConstrainedStats | None = None

    # -- state --------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "designs": self.designs, "usable": self.usable}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.summary = state.get("summary")
        self.designs = int(state.get("designs", 0))
        self.usable = int(state.get("usable", 0))

    # -- the engineer model -------------------------------------------------------------------------
    @classmethod
    def trainer_problem(cls, config: BaseModel, trainer: type) -> str | None:
        if config.model in ("checkpoint", "base") and not getattr(trainer, "writes_text", True):
            return (f"engineer.model={config.model} asks the trained policy for its next config, but the "
                    f"{trainer.__name__} policy does not write text; set engineer.model=local (a frozen chat "
                    "model, default the embedded SmolLM2-135M-Instruct) or engineer.model=endpoint")
        return None

    def engineer_policy(self, ctx: DesignContext) -> Policy:
        """The model that answers, per ``config.model`` (raises ``EndpointError`` for endpoints)."""
        if self.config.model == "checkpoint":
            if ctx.policy is None:
                raise ValueError("engineer.model=checkpoint needs the current policy, but the trainer "
                                 "passed none; use engineer.model=endpoint or a model-based trainer")
            return ctx.policy
        if self.config.model == "base":
            if ctx.base_policy is None:
                raise ValueError("engineer.model=base needs the trainer's base_policy, which is missing")
            return ctx.base_policy()
        if self.config.model == "local":
            if ctx.chat_model is None:
                raise ValueError("engineer.model=local needs the trainer's chat_model loader, which is missing")
            return ctx.chat_model(self.config.local)
        return EndpointPolicy(self.config.endpoint,
                              response_schema=output_schema(ctx.testbed.proposal_model))

    # -- context ----------------------------------------------------------------------------------
    def render_context(self, ctx: DesignContext, spec: ContextSpec) -> str:
        """All switched-on modules rendered from ``ctx`` and this engineer's state."""
        latest = ctx.history[-1] if ctx.history else None
        texts: dict[str, str | None] = {}
        space = ctx.testbed.proposal_space
        if spec.failure:
            texts["failure"] = ctxmod.render_failures(latest.eval.breakdown if latest else EvalBreakdown(),
                                                      latest.eval.bucket_scores if latest else {},
                                                      space, _groups(ctx.testbed))
        if spec.guideline:
            bounds, docs = _field_info(space)
            texts["guideline"] = ctxmod.render_guideline(ctx.testbed.name, bounds, docs,
                                                         unit=getattr(space, "unit", "bucket"))
        if spec.history:
            entries = [ctxmod.HistoryEntry(round=r.round, proposal=r.proposal, breakdown=r.eval.breakdown,
                                           scores=r.eval.bucket_scores) for r in ctx.history]
            texts["history"] = ctxmod.render_history(entries, space=space,
                                                     include_initial_config=spec.history_initial_config,
                                                     max_rounds=self.config.history_rounds)
        if spec.summary:
            texts["summary"] = ctxmod.render_summary(self.summary)
        if spec.training is not None:
            texts["training"] = ctxmod.render_training(ctx.run_info, round_index=ctx.round,
                                                       total_rounds=ctx.total_rounds, variant=spec.training,
                                                       reward=_reward_info(ctx.testbed))
        return ctxmod.build_context(spec, **texts)

    def example(self, ctx: DesignContext) -> dict[str, Any] | None:
        """The example answer the prompt shows: none when the answer schema carries the format
        (``structured_output``), else ``prompt.implausible_example`` (``prompt`` module docstring)."""
        return None if self.config.structured_output else implausible_example(ctx.testbed.proposal_space)

    def messages(self, ctx: DesignContext, spec: ContextSpec) -> list[dict[str, str]]:
        """The full chat prompt for this round."""
        return build_messages(self.render_context(ctx, spec), ctx.testbed.allowed_space(), self.example(ctx))

    # -- design -------------------------------------------------------------------------------------
    @classmethod
    def design_budget(cls, config: BaseModel, engineer_max_new_tokens: int) -> tuple[int, int, int]:
        """Up to ``attempts`` calls of a ~2000-token context (F, G, H, T over eight sizes)."""
        if config.model == "endpoint":
            return 0, 0, 0  # another machine answers
        return config.attempts, CONTEXT_TOKENS, config.max_new_tokens or engineer_max_new_tokens

    def design(self, ctx: DesignContext) -> Design:
        spec = self.config.context_spec()
        messages = self.messages(ctx, spec)
        started = time.perf_counter()
        self.last_stats = None
        outputs, parses, decoding, failure = self._ask(ctx, messages)
        parsed = parses[-1] if parses else None
        found, raw, projected, changes, rejected, usable = self.judge(ctx, parsed)
        summary = parsed.summary[:self.config.summary_max_chars] if parsed and parsed.summary else None
        status = failure or _status(usable, found, rejected, parsed)
        self.designs += 1
        self.usable += int(usable)
        self.summary = summary
        diagnostics = {
            "status": status, "summary": summary, "engineer_model": self.config.model,
            "context": spec.modules(), "training_details": spec.training, "decoding": decoding,
            "attempts": len(outputs), "generation_seconds": round(time.perf_counter() - started, 2),
            "usable_output": usable, "usable_so_far": f"{self.usable}/{self.designs}",
            "parse": ({"method": parsed.method, "repairs": parsed.repairs, "candidates": parsed.candidates,
                       "error": parsed.error} if parsed else None),
            "parsed": found,
            "constrained": decoding.startswith(("llguidance", "vLLM structured")),
            "answers": len(outputs),
            "copied_example": sum(copies_example(p.proposal, self.example(ctx), ctx.testbed.proposal_space)
                                  for p in parses),
            "project_changes": len(changes),
            "project_changed": [f"{c.path}: {c.reason}" for c in changes][:40],
            "answer_tokens": self.last_stats.tokens if self.last_stats else None,
            "mask_seconds": round(self.last_stats.mask_seconds, 3) if self.last_stats else None,
            **self._edit_diagnostics(ctx, raw, projected.model_dump(mode="json"), summary),
        }
        output = outputs[0] if len(outputs) == 1 else "\n".join(
            f"----- attempt {i + 1} -----\n{text}" for i, text in enumerate(outputs))
        return Design(raw=raw, prompt=prompt_text(messages), output=output if outputs else None,
                      notes={"summary": summary, "reasoning": parsed.reasoning[:4000] if parsed else None,
                             "status": status},
                      diagnostics=diagnostics)

    @staticmethod
    def judge(ctx: DesignContext, parsed: ParsedAnswer | None) -> tuple[bool, Any, Any, list, Any, bool]:
        """What a parsed answer is worth: (holds a proposal, that proposal or None, ``project``'s
        config, its changes, the change that rejected the proposal or None, usable = found and
        not rejected). ``project`` keeps the previous config when it rejects one."""
        space = ctx.testbed.proposal_space
        found = parsed is not None and parsed.proposal is not None and looks_like_proposal(parsed.proposal, space)
        raw = parsed.proposal if found and parsed is not None else None
        projected, changes = ctx.testbed.project(raw, ctx.proposal)
        rejected = next((c for c in changes if c.path == ""), None)  # project kept the previous config
        return found, raw, projected, changes, rejected, found and rejected is None

    def _ask(self, ctx: DesignContext,
             messages: list[dict[str, str]]) -> tuple[list[str], list[ParsedAnswer], str, str]:
        """Up to ``attempts`` generations, stopping at the first that parses to a proposal; returns
        (outputs, their parses, the decoding used, a failure status or "")."""
        task = Task(id=f"engineer-round{ctx.round}", messages=messages)
        seed = int(ctx.rng.integers(0, 2**31 - 1))
        outputs: list[str] = []
        parses: list[ParsedAnswer] = []
        decoding = "free text + lenient parsing"
        try:
            policy = self.engineer_policy(ctx)
            space = ctx.testbed.proposal_space
            for attempt in range(self.config.attempts):
                completion, decoding = self._generate(policy, task, ctx, seed + attempt, attempt)
                outputs.append(completion.text)
                parses.append(parse_answer(completion.text, space))
                if parses[-1].proposal is not None and looks_like_proposal(parses[-1].proposal, space):
                    break
        except EndpointError as err:
            return outputs, [], decoding, f"endpoint failed, kept the previous config: {err}"
        return outputs, parses, decoding, ""

    def _edit_diagnostics(self, ctx: DesignContext, raw: Any, projected: dict[str, Any],
                          summary: str | None) -> Diagnostics:
        """The paper's behaviour diagnostics over the declared bucket space: edit granularity
        (proposed and applied), movement of the share mass relative to the competence frontier,
        and whether the summary's claims hold."""
        space = ctx.testbed.proposal_space
        previous = ctx.proposal.model_dump(mode="json")
        latest = ctx.history[-1].eval if ctx.history else None
        rates = ctxmod.result_rates(latest.breakdown, latest.bucket_scores) if latest else {}
        edits = {"tolerance": self.config.edit_tolerance, "local_max_sizes": self.config.local_edit_max_sizes,
                 "container": space.container}
        return {
            "edits_proposed": edit_granularity(previous, _bucket_view(raw, space), **edits),
            "edits_applied": edit_granularity(previous, projected, **edits),
            "frontier": frontier_movement(rates, previous, projected, space, _groups(ctx.testbed)),
            "summary_check": summary_consistency(summary, rates, getattr(ctx.testbed, "bucket_groups", None)),
        }

    def answer_schema(self, ctx: DesignContext) -> dict[str, Any]:
        """The finite answer schema of the part of the proposal space this run may use
        (``Testbed.allowed_space``, ``constrained.answer_schema``): a size outside the run's limits
        cannot be written."""
        return answer_schema(ctx.testbed.allowed_space(), ctx.testbed.proposal_model,
                             reasoning_chars=self.config.answer_reasoning_chars,
                             summary_chars=self.config.answer_summary_chars,
                             decimals=self.config.answer_decimals)

    def max_new_tokens(self, policy: Policy) -> int:
        """The answer's token budget: the engineer's, else the policy's ``engineer_max_new_tokens``."""
        return (self.config.max_new_tokens
                or getattr(getattr(policy, "config", None), "engineer_max_new_tokens", None)
                or DEFAULT_MAX_NEW_TOKENS)

    def constrained_budget(self, policy: Policy, schema: dict[str, Any]) -> int:
        """The budget under ``schema``: never less than its longest complete answer needs."""
        return max(self.max_new_tokens(policy), answer_token_budget(schema) or 0)

    def _generate(self, policy: Policy, task: Task, ctx: DesignContext, seed: int,
                  attempt: int) -> tuple[Completion, str]:
        temperature = self.config.temperature
        if attempt > 0 and temperature == 0.0:
            temperature = RETRY_TEMPERATURE
        max_new = self.max_new_tokens(policy)
        decoding = "free text + lenient parsing"
        if self.config.structured_output and (_is_vllm_policy(policy) or is_transformers_policy(policy)):
            schema = self.answer_schema(ctx)
            budget = self.constrained_budget(policy, schema)
            if _is_vllm_policy(policy):
                try:
                    return (vllm_structured_generate(policy, task, schema, max_new_tokens=budget,
                                                     temperature=temperature, seed=seed),
                            "vLLM structured outputs (JSON schema)")
                except (ImportError, TypeError, AttributeError) as err:  # vLLM API differs: decode freely
                    decoding = f"free text + lenient parsing (vLLM structured outputs unavailable: {err})"
            else:
                completion, stats = constrained_generate(policy, task, schema, max_new_tokens=budget,
                                                         temperature=temperature, seed=seed)
                self.last_stats = stats
                return completion, "llguidance JSON schema (transformers logits processor)"
        elif isinstance(policy, EndpointPolicy) and policy.response_schema is not None:
            decoding = "endpoint response_format json_schema"
        completion = policy.generate([task], max_new_tokens=max_new, temperature=temperature, seed=seed)[0]
        return completion, decoding


# -- helpers ----------------------------------------------------------------------------------------

def _is_vllm_policy(policy: Any) -> bool:
    """A ``trainers.lm.generation.VLLMPolicy`` (or anything exposing a vLLM ``LLM`` as ``.llm``)."""
    return type(policy).__name__ == "VLLMPolicy" and hasattr(policy, "llm")


def vllm_structured_generate(policy: Any, task: Task, schema: dict[str, Any], *, max_new_tokens: int,
                             temperature: float, seed: int) -> Completion:
    """One chat completion from ``policy.llm`` constrained to ``schema`` (vLLM structured outputs):
    ``vllm_structured_generate_many`` of one task."""
    return vllm_structured_generate_many(policy, [task], [schema], max_new_tokens=max_new_tokens,
                                         temperature=temperature, seeds=[seed])[0]


def vllm_structured_generate_many(policy: Any, tasks: list[Task], schemas: list[dict[str, Any]], *,
                                  max_new_tokens: int, temperature: float,
                                  seeds: list[int] | None) -> list[Completion]:
    """One chat completion per task from ``policy.llm``, the i-th constrained to ``schemas[i]``
    and sampled with ``seeds[i]`` (``None``: from the engine's own seeded stream), all in one
    batched engine call (vLLM structured outputs, with the engine's structured-outputs backend:
    ``auto`` picks xgrammar or guidance = llguidance).

    Per-request seeds and a batch whose prompts are prefilled in chunks fail on vLLM's CPU build
    0.32 (``CPU Generator does not use offset``: the engine rewinds a discarded chunk's sample
    through ``Generator.set_offset``); batches there pass ``seeds=None``.

    Uses ``SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))`` (vLLM ≥ 0.10.2)
    and falls back to ``guided_decoding=GuidedDecodingParams(json=schema)`` on older versions.
    """
    from vllm import SamplingParams

    if seeds is None:
        seeds = [None] * len(tasks)
    if not len(tasks) == len(schemas) == len(seeds):
        raise ValueError(f"{len(tasks)} tasks, {len(schemas)} schemas and {len(seeds)} seeds: one of each per task")
    try:
        from vllm.sampling_params import StructuredOutputsParams

        def constraint(schema: dict[str, Any]) -> dict[str, Any]:
            return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        def constraint(schema: dict[str, Any]) -> dict[str, Any]:
            return {"guided_decoding": GuidedDecodingParams(json=schema)}
    top_p = getattr(getattr(policy, "config", None), "top_p", 1.0)
    params = [SamplingParams(max_tokens=max_new_tokens, temperature=temperature,
                             top_p=top_p if temperature > 0 else 1.0, seed=seed, **constraint(schema))
              for schema, seed in zip(schemas, seeds, strict=True)]
    results = policy.llm.chat([task.messages for task in tasks], params, use_tqdm=False)
    return [Completion(text=r.outputs[0].text, num_tokens=len(r.outputs[0].token_ids)) for r in results]


def _bucket_view(raw: Any, space: BucketSpace) -> dict[str, Any] | None:
    """``{container: {...}}`` of the model's own answer, with lenient MAPF size keys (``"5"``,
    ``"size_5"``) normalised to the space's ``"5x5"``; keys naming no bucket are left out."""
    if not isinstance(raw, dict):
        return None
    inner = raw.get(space.container) if isinstance(raw.get(space.container), dict) else raw
    out: dict[str, Any] = {}
    for key, value in inner.items():
        m = _SIZE_KEY.match(str(key))
        name = f"{int(m.group(1))}x{int(m.group(1))}" if m and (m.group(2) in (None, m.group(1))) else str(key)
        if name in space.buckets:
            out[name] = value
    return {space.container: out}


def _groups(testbed: Any) -> dict[str, tuple[str, ...]]:
    """The testbed's environments (reasoning_gym: task → its levels; MAPF: one group of all sizes)."""
    return groups_of(testbed, testbed.proposal_space)


def _status(usable: bool, found: bool, rejected: Any, parsed: ParsedAnswer | None) -> str:
    """What became of the engineer's answer, in words (``design.json``'s ``status``)."""
    if usable:
        return "usable config"
    if found and rejected is not None:
        return f"config rejected by project ({rejected.reason})"
    why = parsed.error if parsed and parsed.error else "no bucket keys"
    return f"no usable config in the output ({why}); kept the previous config"


def _field_info(space: Any) -> tuple[dict[str, tuple[float, float]] | None, dict[str, str] | None]:
    """Legal ranges and meanings of the per-bucket fields, from the testbed's declared space."""
    if isinstance(space, BucketSpace):
        return space.bounds(), space.descriptions()
    return None, None


def copies_example(proposal: Any, example: dict[str, Any] | None, space: BucketSpace) -> bool:
    """Whether an answer's proposal is the prompt's example (``example``; ``None``: the prompt
    showed none): the same buckets with the same fields and values, rounded to 3 decimals, once
    lenient bucket keys are normalised (``_bucket_view``)."""
    if example is None or not isinstance(proposal, dict):
        return False
    return rounded(_bucket_view(proposal, space)) == rounded(example)


def _reward_info(testbed: Any) -> dict[str, Any] | None:
    """Current adaptive-reward weights and EMA, when the testbed has an ``AdaptiveReward``."""
    reward = getattr(testbed, "reward", None)
    weights = getattr(reward, "weights", None)
    if weights is None:
        return None
    return {"weights": list(weights), "ema": float(getattr(reward, "ema", 0.0))}
