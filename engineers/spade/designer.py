"""The designer: one design round = prompts → generations → parsed candidates → admission →
memory → diversity.

``Designer.propose(round, n, seed, rng)`` builds ``n`` design calls. Call ``k`` (counted over the
whole run) asks for skill ``skills[k % len(skills)]``, reads the next corpus document
(``Corpus.sample``; none under ``corpus: none``), and, when the memory is on and holds seeds,
mutates one with probability ``mutate_probability`` (chosen uniformly among the top
``seeds_in_prompt`` by regret; the candidate's ``parent`` is its hash). Too-easy and too-hard
entries are listed as negatives. All calls go to the policy in one ``generate`` batch; each
output is parsed into a ``DesignCandidate``.

``Designer.admit_all(candidates)`` runs ``admission.admit`` on each in the sandbox pool (one
thread per sandbox worker),
flags near duplicates (embedding cosine ≥ threshold against this round's earlier admitted
designs and the newest ``memory_window`` active memory entries; rejected with ``near_duplicate``
only when configured), records every design in the memory, and returns a ``RoundSummary``:
admitted hashes, rejection counts per reason, Vendi score / n of the admitted environments, the
documents read.

``pool_from_memory`` is the environment pool the next round trains on: the active admitted
entries of the memory, oldest first. ``design_samples`` turns a round's candidates into the
``DesignSample``s the co-training trainer needs to train the designer role (prompt, completion,
verdict, penalty). Both are the kernel's pool types (``curriculum.core.pool``).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.pool import DesignSample, PoolEnvironment, program_hash
from curriculum.core.types import Policy, Task
from engineers.spade.admission import AdmissionResult, admit
from engineers.spade.config import MemoryConfig, RejectReason, SpadeEngineerConfig
from engineers.spade.corpus import Corpus
from engineers.spade.diversity import (Embedder, closest_seed, environment_text, get_embedder,
                                       near_duplicates, vendi_per_n, vendi_score)
from engineers.spade.memory import Memory, MemoryEntry
from engineers.spade.parse import DesignParseError, parse_design, parse_structured
from engineers.spade.prompts import PromptEnv, design_messages
from testbeds.spade.sandbox import SandboxPool

log = logging.getLogger(__name__)


@dataclass
class DesignCandidate:
    """One design call and what came of it."""

    round: int
    """Round the design is for."""
    call: int
    """Index of the design call over the whole run."""
    setting: str
    """``games`` or ``tools``."""
    skill: str
    """Skill the prompt asked for."""
    messages: list[dict[str, str]]
    """The prompt."""
    output: str
    """The model's raw output."""
    num_tokens: int
    """Tokens in the output."""
    corpus_doc_id: str | None
    """Grounding document (None under ``corpus: none``)."""
    parent: str | None
    """Hash of the remembered environment the prompt asked to mutate."""
    program: str | None = None
    """Parsed program (None if parsing failed)."""
    hint: str | None = None
    """Parsed hint."""
    parse_reason: RejectReason | None = None
    """Why parsing failed."""
    parse_detail: str = ""
    """Parser message."""
    admission: AdmissionResult | None = None
    """Set by ``Designer.admit_all``."""
    near_duplicate_of: str | None = None
    """Hash of an environment this one nearly duplicates."""
    closest_seed: tuple[str, float] | None = None
    """Admitted designs: (name, source similarity) of the most similar seed-library environment."""
    rank: int = 0
    """Process that generated and admitted it (multi-process runs shard design calls)."""

    @property
    def hash(self) -> str:
        """Program hash, or a hash of the raw output when no program was parsed."""
        return program_hash(self.program if self.program is not None else "#raw\n" + self.output)

    @property
    def prompt_text(self) -> str:
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)


ROUNDS_LOG = "spade_rounds.jsonl"
"""Per-round ``RoundSummary`` lines in the run directory (the engineer appends one per design round)."""


class RoundSummary(BaseModel):
    """What one design round produced."""

    model_config = ConfigDict(extra="forbid")

    round: int
    """Round the designs are for."""
    designs: int
    """Design calls made."""
    admitted: list[str]
    """Hashes of admitted environments."""
    rejections: dict[str, int]
    """Rejected designs per reason."""
    rejected: list[dict[str, str]] = Field(default_factory=list)
    """One ``{hash, reason, detail}`` per rejected design."""
    vendi_per_n: float | None
    """Vendi score / n over this round's admitted environments (None when fewer than one)."""
    vendi: float | None
    """Vendi score of the same set."""
    vendi_per_n_run: float | None = None
    """Vendi score / n over every environment admitted in the run so far (the whole pool, evicted
    ones included; the paper's collapse, one maze 41 times in a row, shows at this level)."""
    run_pool: int = 0
    """Number of environments that measure covers."""
    embedding: str | None
    """Embedder used for the diversity numbers."""
    near_duplicates: dict[str, str] = Field(default_factory=dict)
    """Flagged repeats: hash → hash of the environment it repeats (its own hash: the same program
    is already in memory, or was written earlier this round)."""
    seed_similarity: dict[str, tuple[str, float]] = Field(default_factory=dict)
    """Designs that passed admission: hash → (closest seed-library environment, source similarity)."""
    seed_copies: list[tuple[str, str]] = Field(default_factory=list)
    """Design calls that passed admission with a similarity at or above
    ``diversity.seed_copy_threshold``: one (hash, seed name) each, in call order (two calls that
    wrote the same copy count twice); rejected as ``near_duplicate`` when ``reject_near_duplicates``
    is on."""
    corpus_docs: list[str | None] = Field(default_factory=list)
    """Document read by each design call."""
    parents: list[str | None] = Field(default_factory=list)
    """Mutated seed of each design call."""
    seconds: dict[str, float] = Field(default_factory=dict)
    """Wall time of generation, admission and diversity."""


def pool_from_memory(memory: Memory) -> list[PoolEnvironment]:
    """The environment pool the next round trains on: the memory's active admitted entries, oldest first."""
    return [PoolEnvironment(hash=e.hash, setting=e.setting, skill=e.skill, hint=e.hint or "", program=e.program or "")
            for e in memory.entries(active_only=True)]


def design_samples(candidates: Sequence[DesignCandidate], *, trainable: bool = True) -> list[DesignSample]:
    """One ``DesignSample`` per design call, for the co-training trainer to train the designer on:
    id ``r<round>-c<call>-<hash[:8]>``, reason ``ok`` when admitted, ``env_id`` when admitted,
    ``penalty`` when rejected, ``trainable`` ``False`` for a frozen designer (its designs are
    played and scored, never trained on)."""
    out = []
    for c in candidates:
        adm = c.admission
        admitted = bool(adm and adm.admitted)
        out.append(DesignSample(
            design_id=f"r{c.round}-c{c.call}-{c.hash[:8]}", skill=c.skill, messages=c.messages,
            completion=c.output, admitted=admitted,
            reason="ok" if admitted else (adm.reason.value if adm and adm.reason else ""),
            env_id=c.hash if admitted else None,
            penalty=None if admitted or adm is None else adm.penalty, trainable=trainable))
    return out


def _prompt_env(entry: MemoryEntry, note: str) -> PromptEnv:
    return PromptEnv(entry.hash, entry.skill, entry.hint or "", entry.program or "", note)


def memory_context(memory: Memory | None,
                   config: MemoryConfig | None) -> tuple[list[MemoryEntry], list[PromptEnv]]:
    """Seeds (entries) and negatives (prompt entries) the memory offers a design call."""
    if memory is None or config is None:
        return [], []
    seeds = memory.seeds(config.seeds_in_prompt, config.seed_min_regret)
    negatives = [_prompt_env(e, f"too easy: solved {e.win_rate_without:.0%} without hint")
                 for e in memory.too_easy(config.negatives_in_prompt, config.too_easy_win_rate)]
    seen = {n.hash for n in negatives}
    negatives += [_prompt_env(e, f"too hard: solved {e.win_rate_with_hint:.0%} even with hint")
                  for e in memory.too_hard(config.negatives_in_prompt, config.too_hard_win_rate)
                  if e.hash not in seen]
    return seeds, negatives


class Designer:
    """Writes, admits and remembers environments (see module docstring)."""

    def __init__(self, config: SpadeEngineerConfig, *, corpus: Corpus | None, memory: Memory,
                 sandbox: SandboxPool, embedder: Embedder | None = None, calls: int = 0,
                 heldout: frozenset[str] = frozenset()) -> None:
        self.config = config
        self.corpus = corpus
        self.memory = memory
        self.sandbox = sandbox
        self.embedder = embedder
        self.calls = calls
        """Design calls made so far in the run (drives the skill cycle)."""
        self.heldout = heldout
        """Seed-library games the run holds out of training (``testbeds/spade/heldout/games.py``): a copy
        of one is rejected."""

    @property
    def memory_config(self) -> MemoryConfig | None:
        return self.config.memory if isinstance(self.config.memory, MemoryConfig) else None

    def requests(self, round: int, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
        """The ``n`` design calls of a round: skill, document, seed to mutate, messages."""
        skills = self.config.skill_list()
        seeds, negatives = memory_context(self.memory, self.memory_config)
        out = []
        for _ in range(n):
            skill = skills[self.calls % len(skills)]
            doc = self.corpus.sample() if self.corpus is not None else None
            parent = None
            mcfg = self.memory_config
            if seeds and mcfg is not None and rng.random() < mcfg.mutate_probability:
                parent = seeds[int(rng.integers(len(seeds)))]
            messages = design_messages(
                self.config.setting, skill, doc.text if doc else None,
                seed=_prompt_env(parent, f"regret {parent.regret:.2f}") if parent else None,
                negatives=negatives,
                max_seed_chars=mcfg.max_seed_chars if mcfg else 3000, mode=self.config.design_mode)
            out.append({"call": self.calls, "skill": skill, "doc_id": doc.id if doc else None,
                        "parent": parent.hash if parent else None, "messages": messages})
            self.calls += 1
        return out

    def propose(self, policy: Policy, round: int, n: int, rng: np.random.Generator, *,
                seed: int, max_new_tokens: int) -> list[DesignCandidate]:
        """Generate ``n`` designs with ``policy`` in one batch and parse them."""
        return self.generate(policy, round, self.requests(round, n, rng), seed=seed, max_new_tokens=max_new_tokens)

    def generate(self, policy: Policy, round: int, requests: Sequence[dict[str, Any]], *,
                 seed: int, max_new_tokens: int) -> list[DesignCandidate]:
        """Generate the given design calls with ``policy`` in one batch and parse them."""
        if not requests:
            return []
        tasks = [Task(id=f"spade-design-r{round}-c{r['call']}", messages=r["messages"]) for r in requests]
        completions = policy.generate(tasks, max_new_tokens=max_new_tokens,
                                      temperature=self.config.temperature, seed=seed)
        return [self.candidate(round, r, c.text, c.num_tokens) for r, c in zip(requests, completions)]

    def candidate(self, round: int, request: dict[str, Any], output: str, num_tokens: int) -> DesignCandidate:
        """Parse one output into a candidate."""
        cand = DesignCandidate(round=round, call=request["call"], setting=self.config.setting,
                               skill=request["skill"], messages=request["messages"], output=output,
                               num_tokens=num_tokens, corpus_doc_id=request["doc_id"],
                               parent=request["parent"])
        try:
            parsed = (parse_structured(output, self.config.structured_max_turns)
                      if self.config.design_mode == "structured" else parse_design(output))
        except DesignParseError as exc:
            cand.parse_reason, cand.parse_detail = exc.reason, str(exc)
            cand.program = _program_or_none(output)
        else:
            cand.program, cand.hint = parsed.program, parsed.hint
        return cand

    def admit_all(self, candidates: Sequence[DesignCandidate], round: int,
                  generation_seconds: float = 0.0) -> RoundSummary:
        """Admit, flag near duplicates, remember, and measure diversity (module docstring)."""
        t0 = time.monotonic()
        self.verdicts(candidates)
        return self.record_all(candidates, round, generation_seconds=generation_seconds,
                               admission_seconds=time.monotonic() - t0)

    def verdicts(self, candidates: Sequence[DesignCandidate]) -> None:
        """Run admission on each candidate in the sandbox pool (one thread per worker)."""
        if not candidates:
            return
        workers = max(1, min(len(candidates), self.sandbox.config.workers))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spade-admit") as executor:
            verdicts = list(executor.map(lambda c: admit(c, self.sandbox, self.config.admission), candidates))
        for cand, verdict in zip(candidates, verdicts):
            cand.admission = verdict

    def record_all(self, candidates: Sequence[DesignCandidate], round: int, *, generation_seconds: float,
                   admission_seconds: float) -> RoundSummary:
        """Flag near duplicates, remember and measure diversity of admitted-or-rejected candidates."""
        t1 = time.monotonic()
        admitted = [c for c in candidates if c.admission and c.admission.admitted]
        vendi = per_n = None
        embedder_name = None
        if admitted:
            vendi, per_n, embedder_name = self._flag_duplicates(admitted)
            if self.config.diversity.reject_near_duplicates:
                self._reject_duplicates(admitted)
            self._reject_heldout_copies(admitted)
        for cand in candidates:
            self.remember(cand)
        run_per_n, run_pool = self._run_diversity()
        t2 = time.monotonic()
        rejected = [c for c in candidates if not (c.admission and c.admission.admitted)]
        summary = RoundSummary(
            round=round, designs=len(candidates),
            admitted=[c.hash for c in candidates if c.admission and c.admission.admitted],
            rejections=dict(Counter(c.admission.reason.value for c in rejected
                                    if c.admission and c.admission.reason)),
            rejected=[{"hash": c.hash,
                       "reason": c.admission.reason.value if c.admission and c.admission.reason else "",
                       "detail": (c.admission.detail if c.admission else "")[:300]} for c in rejected],
            vendi_per_n=per_n, vendi=vendi, vendi_per_n_run=run_per_n, run_pool=run_pool,
            embedding=embedder_name,
            near_duplicates={c.hash: c.near_duplicate_of for c in candidates if c.near_duplicate_of},
            seed_similarity={c.hash: c.closest_seed for c in candidates if c.closest_seed},
            seed_copies=[(c.hash, c.closest_seed[0]) for c in candidates
                         if _seed_copy(c, self.config.diversity.seed_copy_threshold)],
            corpus_docs=[c.corpus_doc_id for c in candidates], parents=[c.parent for c in candidates],
            seconds={"generation": generation_seconds, "admission": admission_seconds, "diversity": t2 - t1})
        log.info("spade round %d: %d/%d admitted (%d copies of seed-library environments), rejections %s, "
                 "vendi/n %s", round, len(summary.admitted), len(candidates), len(summary.seed_copies),
                 summary.rejections, per_n)
        return summary

    def _flag_duplicates(self, admitted: list[DesignCandidate]) -> tuple[float, float, str]:
        """Vendi score and Vendi / n of the admitted candidates, and the embedder's name; sets each
        candidate's ``near_duplicate_of`` (another new one, a recent memory entry, or its own hash
        when the memory already admitted the same program) and ``closest_seed``."""
        if self.embedder is None:  # loaded on first need (MiniLM takes seconds)
            self.embedder = get_embedder(self.config.diversity.embedding)
        embedder = self.embedder
        recent = self.memory.entries(active_only=True)[-self.config.diversity.memory_window:] \
            if self.config.diversity.memory_window else []
        recent = [e for e in recent if e.hash not in {c.hash for c in admitted}]
        texts = [environment_text(c.hint, _first_obs(c), c.program) for c in admitted]
        old_texts = [environment_text(e.hint, e.extra.get("first_observation"), e.program)
                     for e in recent]
        matrix = embedder.embed(texts + old_texts)
        new, old = matrix[:len(texts)], matrix[len(texts):]
        vendi, per_n = vendi_score(new), vendi_per_n(new)
        flags = near_duplicates(new, old, self.config.diversity.near_duplicate_threshold)
        for cand, dup in zip(admitted, flags):
            if dup is not None:
                cand.near_duplicate_of = admitted[dup[1]].hash if dup[0] == "new" else recent[dup[1]].hash
        known = {e.hash for e in self.memory.entries() if e.admitted}
        for cand in admitted:  # the same program again: the memory keeps its first record only
            if cand.near_duplicate_of is None and cand.hash in known:
                cand.near_duplicate_of = cand.hash
        for cand in admitted:
            cand.closest_seed = closest_seed(cand.program or "", cand.setting)
        return vendi, per_n, embedder.name

    def _reject_duplicates(self, admitted: list[DesignCandidate]) -> None:
        """Turn the admission of repeats, near duplicates and seed-library copies into a
        ``near_duplicate`` rejection with its penalty."""
        threshold = self.config.diversity.seed_copy_threshold
        copies = {c.hash: c.closest_seed[0] for c in admitted if _seed_copy(c, threshold)}
        for cand in admitted:
            if cand.near_duplicate_of == cand.hash:
                detail = f"repeats environment {cand.hash}, already in memory"
            elif cand.near_duplicate_of:
                detail = f"near duplicate of {cand.near_duplicate_of}"
            elif cand.hash in copies:
                detail = (f"copy of seed-library environment {copies[cand.hash]} "
                          f"(source similarity {cand.closest_seed[1]:.2f})")
            else:
                continue
            if cand.admission is not None:
                cand.admission = cand.admission.model_copy(update={
                    "admitted": False, "reason": RejectReason.near_duplicate, "detail": detail,
                    "penalty": self.config.admission.penalties[RejectReason.near_duplicate]})

    def _reject_heldout_copies(self, admitted: list[DesignCandidate]) -> None:
        """A design whose closest seed-library game is a held-out one, at the seed-copy similarity
        or above, becomes a ``near_duplicate`` rejection: the run measures the player on that game
        and never trains on it."""
        threshold = self.config.diversity.seed_copy_threshold
        for cand in admitted:
            adm = cand.admission
            held = _seed_copy(cand, threshold) and cand.closest_seed[0] in self.heldout
            if adm is None or not adm.admitted or not held:
                continue
            cand.admission = adm.model_copy(update={
                "admitted": False, "reason": RejectReason.near_duplicate,
                "detail": (f"copy of held-out seed-library game {cand.closest_seed[0]} "
                           f"(source similarity {cand.closest_seed[1]:.2f})"),
                "penalty": self.config.admission.penalties[RejectReason.near_duplicate]})

    def _run_diversity(self) -> tuple[float | None, int]:
        """Vendi / n over every environment admitted in the run so far (embedded together, so a
        per-call TF-IDF sees them all)."""
        pool = [e for e in self.memory.entries() if e.admitted]
        if not pool:
            return None, 0
        if self.embedder is None:
            self.embedder = get_embedder(self.config.diversity.embedding)
        matrix = self.embedder.embed([environment_text(e.hint, e.extra.get("first_observation"), e.program)
                                      for e in pool])
        return vendi_per_n(matrix), len(pool)

    def remember(self, cand: DesignCandidate) -> MemoryEntry:
        """Record a candidate and its verdict in the memory."""
        adm = cand.admission
        return self.memory.record(
            hash=cand.hash, round=cand.round, setting=cand.setting, skill=cand.skill, hint=cand.hint,
            program=cand.program, admitted=bool(adm and adm.admitted),
            reason=adm.reason.value if adm and adm.reason else None,
            detail=adm.detail if adm else None, parent=cand.parent, corpus_doc_id=cand.corpus_doc_id,
            near_duplicate_of=cand.near_duplicate_of,
            extra={"first_observation": _first_obs(cand), "call": cand.call, "rank": cand.rank,
                   **({"closest_seed": cand.closest_seed[0], "seed_similarity": cand.closest_seed[1]}
                      if cand.closest_seed else {}),
                   "num_tokens": cand.num_tokens, "output": cand.output[:20000],
                   "admission_seconds": adm.seconds if adm else None,
                   "checks_passed": adm.checks_passed if adm else []})


def _seed_copy(cand: DesignCandidate, threshold: float) -> bool:
    return cand.closest_seed is not None and cand.closest_seed[1] >= threshold


def _first_obs(cand: DesignCandidate) -> str | None:
    obs = cand.admission.first_observations if cand.admission else []
    return obs[0] if obs else None


def _program_or_none(output: str) -> str | None:
    from engineers.spade.parse import find_program

    return find_program(output)
