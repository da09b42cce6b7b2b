"""Schema-constrained decoding of the engineer's answer (llguidance), for transformers policies.

The answer schema (``answer_schema``) is the proposal space's JSON schema made *finite*, so that
every string the constraint admits is a complete answer of bounded length:

* a ``BucketSpace`` (MAPF: sizes ``3x3`` … ``10x10``): an object with exactly the keys
  ``reasoning``, ``summary`` and the space's container, in that order (the model reasons first,
  inside the JSON); the container holds the buckets the answer changes, in the declared order,
  each with the share and the knobs it changes as numbers in their legal ranges with at most
  ``decimals`` decimals (JSON schema ``minimum``/``maximum``/``multipleOf``). Buckets and their
  fields are optional (at least one bucket, each with at least one field: ``minProperties``):
  what the answer leaves out keeps its current value (``project`` fills it from the proposal
  before), as the prompt says;
* ``reasoning`` and ``summary`` are strings of at most ``reasoning_chars`` / ``summary_chars``
  characters from a plain ASCII class (letters, digits, spaces and ``.,;:!?%()+=<>/'-``), so a
  character is never more than one token and never needs an escape;
* no whitespace between JSON tokens (llguidance's compact default).

The longest admitted answer (every optional bucket and field written) therefore has
``max_answer_chars(schema)`` characters, and, every
token being at least one character, at most that many tokens plus the end-of-sequence token:
``answer_token_budget``. Under that budget the decoder cannot run out before the JSON closes.
The shares are not forced to sum to 1 (a JSON schema cannot say so); the testbed's ``project``
renormalises them, which changes no proportion.

A space that is not a ``BucketSpace`` gets the proposal model's own schema plus the two strings
(``prompt.output_schema``), which is valid but may be unbounded.

``SchemaLogitsProcessor`` is a transformers ``LogitsProcessor``: before each step it feeds the
tokens sampled since the last step to one ``llguidance.LLMatcher`` per row and sets the logits of
every token the grammar forbids to ``-inf`` (once the answer is complete only the EOS token is
left). ``constrained_generate`` runs one chat completion of a transformers policy (anything with
``.model`` and ``.tokenizer``) under it; ``constrained_generate_many`` a batch of them in one
``generate`` (the parse-rate benchmark's bulk path on machines without vLLM). vLLM policies use vLLM's own structured outputs with the
same schema (``engineer.vllm_structured_generate``), whose backends (xgrammar, guidance =
llguidance) accept it.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from curriculum.core.spaces import BucketSpace
from curriculum.core.types import Completion, Task

TEXT_CLASS = r"[A-Za-z0-9 .,;:!?%()+=<>/'-]"
"""Characters the constrained ``reasoning`` and ``summary`` strings may use (one token each at most)."""


def answer_schema(space: Any, proposal_model: type[BaseModel], *, reasoning_chars: int = 300,
                  summary_chars: int = 200, decimals: int = 3) -> dict[str, Any]:
    """The finite answer schema of the module docstring (``space`` a ``BucketSpace``), or the
    proposal model's schema plus ``reasoning``/``summary`` for other spaces."""
    if reasoning_chars < 0 or summary_chars < 0:
        raise ValueError("reasoning_chars and summary_chars must be >= 0")
    if not 0 <= decimals <= 6:
        raise ValueError(f"decimals must be in [0, 6], got {decimals}")
    if not isinstance(space, BucketSpace):
        from engineers.checkpoint.prompt import output_schema

        return output_schema(proposal_model)
    step = 10.0 ** -decimals

    def number(low: float, high: float) -> dict[str, Any]:
        return {"type": "number", "minimum": low, "maximum": high, "multipleOf": step}

    fields = {space.share_key: number(0.0, 1.0), **{k.name: number(k.low, k.high) for k in space.knobs}}
    bucket = {"type": "object", "properties": fields, "minProperties": 1, "additionalProperties": False}
    container = {"type": "object", "properties": {b: bucket for b in space.buckets}, "minProperties": 1,
                 "additionalProperties": False}
    return {"type": "object",
            "properties": {"reasoning": _text(reasoning_chars), "summary": _text(summary_chars),
                           space.container: container},
            "required": ["reasoning", "summary", space.container], "additionalProperties": False}


def _text(chars: int) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^{TEXT_CLASS}{{0,{chars}}}$"}


def max_answer_chars(schema: dict[str, Any]) -> int | None:
    """Characters of the longest compact JSON ``schema`` admits, every optional property written
    (``None``: unbounded or not one of ``answer_schema``'s shapes)."""
    def longest(node: dict[str, Any]) -> int | None:
        kind = node.get("type")
        if kind == "object":
            if node.get("additionalProperties", True) is not False:
                return None
            props = node.get("properties", {})
            total = 2 + max(0, len(props) - 1)  # braces and commas
            for key, sub in props.items():
                inner = longest(sub)
                if inner is None:
                    return None
                total += len(json.dumps(key)) + 1 + inner
            return total
        if kind == "string":
            pattern = node.get("pattern", "")
            prefix = f"^{TEXT_CLASS}{{0,"
            if not (pattern.startswith(prefix) and pattern.endswith("}$")):
                return None
            return 2 + int(pattern[len(prefix):-2])
        if kind == "number" and "multipleOf" in node and "minimum" in node and "maximum" in node:
            decimals = max(0, round(-_log10(float(node["multipleOf"]))))
            whole = max(len(str(int(abs(node["minimum"])))), len(str(int(abs(node["maximum"])))))
            sign = 1 if node["minimum"] < 0 else 0
            return sign + whole + (1 + decimals if decimals else 0)
        return None

    return longest(schema)


def _log10(x: float) -> float:
    import math

    return math.log10(x)


def answer_token_budget(schema: dict[str, Any]) -> int | None:
    """Tokens that always suffice for a complete answer (``max_answer_chars`` + EOS), or ``None``."""
    chars = max_answer_chars(schema)
    return None if chars is None else chars + 1


@dataclass
class ConstrainedStats:
    """What one constrained generation cost: tokens, seconds spent computing masks, total seconds."""

    tokens: int = 0
    mask_seconds: float = 0.0
    seconds: float = 0.0
    complete: bool = False


PREFILL_CHUNK = 256
"""Prompt tokens per prefill pass of a batched constrained generation (bounds its attention memory)."""


class _Tokenizers:
    """llguidance tokenizers built once per Hugging Face tokenizer (about a second each)."""

    cache: dict[int, Any] = {}

    @classmethod
    def get(cls, tokenizer: Any, vocab_size: int) -> Any:
        key = (id(tokenizer), vocab_size)
        if key not in cls.cache:
            import llguidance.hf

            cls.cache[key] = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        return cls.cache[key]


COMPACT = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
"""llguidance JSON options: no whitespace anywhere, so the answer's length is the schema's bound."""


def compile_grammar(schema: dict[str, Any]) -> str:
    """The llguidance grammar of ``schema`` (``ValueError`` with llguidance's message if invalid)."""
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=COMPACT)
    message = llguidance.LLMatcher.validate_grammar(grammar)
    if message:
        raise ValueError(f"the answer schema does not compile: {message}")
    return grammar


class SchemaLogitsProcessor:
    """transformers ``LogitsProcessor``: only tokens that keep the output a prefix of a string of
    ``schema`` keep their logits (module docstring). One matcher per batch row."""

    def __init__(self, tokenizer: Any, schema: dict[str, Any], *, vocab_size: int, prompt_length: int,
                 batch_size: int = 1) -> None:
        import llguidance

        self.ll_tokenizer = _Tokenizers.get(tokenizer, vocab_size)
        grammar = compile_grammar(schema)
        self.matchers = [llguidance.LLMatcher(self.ll_tokenizer, grammar) for _ in range(batch_size)]
        self.prompt_length = prompt_length
        self.vocab_size = vocab_size
        self.eos = tokenizer.eos_token_id
        self.fed = 0
        self.mask_seconds = 0.0
        self.steps = 0
        self.errors: list[str] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import llguidance.torch

        started = time.perf_counter()
        new = input_ids[:, self.prompt_length + self.fed:]  # (B, tokens since the last call)
        self.fed += new.shape[1]
        bitmask = llguidance.torch.allocate_token_bitmask(len(self.matchers), self.vocab_size)  # (B, V/32)
        for row, matcher in enumerate(self.matchers):
            for token in new[row].tolist():
                if not matcher.is_stopped() and not matcher.consume_token(token):
                    self.errors.append(matcher.get_error())
            llguidance.torch.fill_next_token_bitmask(matcher, bitmask, row)
        allowed = _unpack(bitmask, scores.shape[-1])  # (B, V) bool
        for row, matcher in enumerate(self.matchers):
            if matcher.is_stopped() or matcher.is_error():  # complete (or broken): end the sequence
                allowed[row] = False
                allowed[row, self.eos] = True
        scores = scores.masked_fill(~allowed.to(scores.device), float("-inf"))
        self.mask_seconds += time.perf_counter() - started
        self.steps += 1
        return scores

    def complete(self, row: int = 0) -> bool:
        """Whether row ``row``'s output so far is a complete string of the schema."""
        return self.matchers[row].is_accepting()


def _unpack(bitmask: Any, vocab: int) -> Any:
    """``(B, ceil(V/32))`` int32 bit masks → ``(B, vocab)`` bool (bit ``i % 32`` of word ``i // 32``)."""
    import numpy as np
    import torch

    words = bitmask.numpy().astype("<i4", copy=False).view(np.uint8)  # (B, 4 W), little-endian bytes
    bits = np.unpackbits(words, axis=1, bitorder="little")[:, :vocab].astype(bool)  # (B, <= vocab)
    if bits.shape[1] < vocab:
        bits = np.pad(bits, ((0, 0), (0, vocab - bits.shape[1])))
    return torch.from_numpy(bits)


def is_transformers_policy(policy: Any) -> bool:
    """A policy exposing a transformers causal LM as ``.model`` and its tokenizer as ``.tokenizer``."""
    return hasattr(getattr(policy, "model", None), "generate") and hasattr(policy, "tokenizer")


def constrained_generate(policy: Any, task: Task, schema: dict[str, Any], *, max_new_tokens: int,
                         temperature: float, seed: int) -> tuple[Completion, ConstrainedStats]:
    """One chat completion of ``policy.model`` under ``schema`` (greedy when ``temperature`` is 0)."""
    (completion, stats), = constrained_generate_many(policy, [task], schema, max_new_tokens=max_new_tokens,
                                                     temperature=temperature, seed=seed)
    return completion, stats


def constrained_generate_many(policy: Any, tasks: list[Task], schema: dict[str, Any], *, max_new_tokens: int,
                              temperature: float, seed: int) -> list[tuple[Completion, ConstrainedStats]]:
    """One chat completion per task, all in one batched ``generate`` of ``policy.model`` (prompts
    left-padded), every row under ``schema`` with a matcher of its own. The rows sample from one
    seeded stream (``seed``), not one seed each, as transformers' ``generate`` draws for the whole
    batch; greedy rows (``temperature`` 0) equal their single-row answers up to batched float
    rounding. Each row's stats carry the batch's mask and wall seconds divided by the rows."""
    import torch

    model, tokenizer = policy.model, policy.tokenizer
    texts = [_chat_text(tokenizer, task) for task in tasks]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # every row continues from the right edge
    try:
        batch = tokenizer(texts, return_tensors="pt", add_special_tokens=False, padding=len(texts) > 1)
    finally:
        tokenizer.padding_side = side
    batch = {k: v.to(model.device) for k, v in batch.items()}  # (B, T_prompt)
    prompt_length = batch["input_ids"].shape[1]
    vocab = int(model.get_output_embeddings().weight.shape[0])
    processor = SchemaLogitsProcessor(tokenizer, schema, vocab_size=vocab, prompt_length=prompt_length,
                                      batch_size=len(tasks))
    top_p = getattr(getattr(policy, "config", None), "top_p", 1.0)
    bf16 = bool(getattr(policy, "bf16", False))
    precision = (torch.autocast(model.device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext())
    was_training = model.training
    model.eval()
    started = time.perf_counter()
    try:
        torch.manual_seed(seed)
        with torch.no_grad(), precision:
            generated = model.generate(
                **batch, max_new_tokens=max_new_tokens, do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                top_p=top_p if temperature > 0 else None, logits_processor=[processor],
                pad_token_id=pad, eos_token_id=tokenizer.eos_token_id,
                # Prefill in chunks: a padded batch's attention otherwise materialises (B, heads,
                # T, T) scores at once, 2 GB per layer at 25 rows of 1,500 tokens (18 GB RSS seen).
                prefill_chunk_size=PREFILL_CHUNK if len(tasks) > 1 else None)  # (B, T_prompt + T_new)
    finally:
        model.train(was_training)
    seconds = time.perf_counter() - started
    out = []
    for row in range(len(tasks)):
        ids = generated[row, prompt_length:].tolist()
        if tokenizer.eos_token_id in ids:
            ids = ids[:ids.index(tokenizer.eos_token_id) + 1]
        # The processor has not yet seen the last sampled token: feed it to know if the answer closed.
        matcher = processor.matchers[row]
        for token in ids[processor.fed:]:
            if not matcher.is_stopped():
                matcher.consume_token(token)
        stats = ConstrainedStats(tokens=len(ids), mask_seconds=processor.mask_seconds / len(tasks),
                                 seconds=seconds / len(tasks), complete=matcher.is_accepting())
        out.append((Completion(text=tokenizer.decode(ids, skip_special_tokens=True), num_tokens=len(ids)), stats))
    return out


def _chat_text(tokenizer: Any, task: Task) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(task.messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(m["content"] for m in task.messages) + "\n"
