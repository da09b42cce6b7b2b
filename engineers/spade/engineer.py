"""The ``spade`` engineer: each round, the policy designs environments that are admitted in the
sandbox, remembered and measured for diversity; the proposal is the resulting environment pool.

``design(ctx)`` first stores the last round's ``env_outcomes`` (regret, win rates measured by the
trainer's plays) in the memory, then makes ``designs_per_round`` design calls
(``Designer.propose``) with the policy (``designer: policy``) or the frozen base model
(``designer: base``, the frozen-designer ablation) or an external model (``designer: endpoint``,
``curriculum.core.endpoint.EndpointPolicy``: the frozen external designer); the designs of
both frozen designers are marked ``trainable: false``,
so the trainer plays and scores them but never trains the shared policy on them), admits them (``Designer.admit_all``), appends the round's ``RoundSummary``
to ``<run_dir>/spade_rounds.jsonl``, saves the pool to ``<run_dir>/spade_pool.jsonl``, and
returns ``Design(raw={"environments": [...], "designs": [...]})`` — the active admitted
environments of the memory (``PoolEnvironment``) and this round's ``DesignSample``s — with the
summary under ``notes["spade"]`` and ``Design.diagnostics`` (admitted count, rejections per
reason, how many admitted designs copy a seed-library environment and each one's closest seed,
Vendi score / n).

State saved per round: the corpus seed and cursor and the design-call counter (the memory is its own
SQLite file in the run directory). The sandbox pool is started on first use and closed by
``close``. Rewards, agent play and co-training live with the ``selfplay`` trainer (``trainers.spade``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from curriculum.core import distributed
from curriculum.core.pool import save_pool
from curriculum.core.records import Design, RoundReport
from curriculum.core.types import Policy
from engineers.base import DesignContext, Engineer
from engineers.spade.config import MemoryConfig, SpadeEngineerConfig
from engineers.spade.corpus import Corpus, build_corpus
from engineers.spade.designer import Designer, DesignCandidate, RoundSummary, design_samples, pool_from_memory
from engineers.spade.memory import Memory
from testbeds.sandbox import SandboxPool
from testbeds.synthetic import prelude_source

DEFAULT_MAX_NEW_TOKENS = 2048
"""Design budget when neither the config nor the policy's generation config sets one."""

ROUNDS_LOG = "spade_rounds.jsonl"
"""Per-round summaries in the run directory."""


def sandbox_config(config: SpadeEngineerConfig):
    """The configured sandbox with the synthetic-environment prelude (``ToolEnv``...) added."""
    prelude = prelude_source()
    extra = config.sandbox.prelude_source
    return config.sandbox.model_copy(update={"prelude_source": prelude + ("\n" + extra if extra else "")})


class SpadeEngineer(Engineer):
    """SPADE's environment designer (part 1)."""

    config_class = SpadeEngineerConfig
    fits = ("environment_pool",)
    description = "SPADE: the policy writes environment programs, admitted in the sandbox and remembered."
    commands: ClassVar[dict[str, str]] = {"spade": "engineers.spade.cli:commands"}

    collective_design = True
    """Under several processes the controller calls ``design`` on every rank (design calls are sharded)."""
    shapes_round0 = True
    """The designer's warm-start examples make round 0 SPADE's own."""

    @classmethod
    def plan_lines(cls, config: SpadeEngineerConfig) -> list[str]:  # type: ignore[override]
        """Which documents the design calls will read (``corpus_plan``)."""
        from engineers.spade.corpus import corpus_plan

        return [f"  corpus: {corpus_plan(config.corpus, config.setting)}"]

    @classmethod
    def run_view(cls, run_dir: Path, item: str | None = None) -> Any:
        """The environments this run designed (``item`` ``None``), or one with its code."""
        from engineers.spade.cli import env_panel, envs_table, list_envs, show_env

        return env_panel(show_env(run_dir, item)) if item is not None else envs_table(list_envs(run_dir))

    def __init__(self, config: SpadeEngineerConfig, *, run_dir: str | None = None) -> None:
        super().__init__(config, run_dir=run_dir)
        self.config: SpadeEngineerConfig = config
        if run_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="spade-")
            run_dir = self._tmp.name
        self.dir = Path(run_dir)
        capacity = config.memory.capacity if isinstance(config.memory, MemoryConfig) else 200
        self.memory = Memory.in_run_dir(self.dir, capacity)
        self._corpus: Corpus | None = None
        self._corpus_cursor = 0
        self._corpus_seed: int | None = None
        self._calls = 0
        self._sandbox: SandboxPool | None = None
        self._designer: Designer | None = None
        self._endpoint: Policy | None = None
        self.last_candidates: list[DesignCandidate] = []
        self.summaries: list[RoundSummary] = []

    def on_run_start(self, testbed: Any, initial_proposal: Any) -> None:
        """Before round 0: say which documents the design calls read (the built-in corpus in
        place of unreachable Hub sources), and stop here when a source with
        ``on_unavailable: error`` cannot be reached."""
        from engineers.spade.corpus import CorpusUnavailable, corpus_plan

        line = corpus_plan(self.config.corpus, self.config.setting)
        if line.startswith("UNAVAILABLE"):
            raise CorpusUnavailable(line.split(": ", 1)[1])
        if distributed.is_main():
            print(f"spade corpus: {line}", file=sys.stderr, flush=True)

    # -- parts, built on first use --------------------------------------------------------------
    def designer(self, seed: int) -> Designer:
        if self._designer is None:
            if self._corpus_seed is None:
                self._corpus_seed = seed
            self._corpus = build_corpus(self.config.corpus, self.config.setting, self._corpus_seed,
                                        self._corpus_cursor)
            self._sandbox = SandboxPool(sandbox_config(self.config))
            self._sandbox.start()
            self._designer = Designer(self.config, corpus=self._corpus, memory=self.memory,
                                      sandbox=self._sandbox, calls=self._calls)
        return self._designer

    def _policy(self, ctx: DesignContext) -> Policy:
        if self.config.designer == "endpoint":
            if self._endpoint is None:
                from curriculum.core.endpoint import EndpointPolicy

                self._endpoint = EndpointPolicy(self.config.endpoint)
            return self._endpoint
        if self.config.designer == "base":
            if ctx.base_policy is None:
                raise ValueError("engineer.designer=base needs the trainer's base_policy, which is missing")
            return ctx.base_policy()
        if ctx.policy is None:
            raise ValueError("the spade engineer needs the policy in its DesignContext")
        return ctx.policy

    # -- the engineer interface -----------------------------------------------------------------
    def _remember_outcomes(self, ctx: DesignContext) -> None:
        """Store what the agent's plays measured (regret, win rates; the last round's
        ``env_outcomes``) for remembered environments, so high-regret seeds and too-easy/too-hard
        negatives reach the next design prompt."""
        self._store_outcomes(ctx.history[-1] if ctx.history else None)

    def on_round_end(self, report: RoundReport) -> None:
        """Store the round's outcomes at once: the last round makes no design call, and without
        this its plays would never reach the memory (``curriculum show RUN --envs``)."""
        if distributed.is_main():
            self._store_outcomes(report)

    def _store_outcomes(self, report: RoundReport | None) -> None:
        for outcome in report.env_outcomes if report is not None else []:
            try:
                self.memory.update_outcome(outcome.env_id, outcome.regret, outcome.win_rate_hint,
                                           outcome.win_rate)
            except KeyError:  # a starting-pool environment (e.g. reasoning-gym) is not in memory
                continue

    def design(self, ctx: DesignContext) -> Design:
        """Under several processes every rank calls this (``collective_design``): the main process
        draws the round's design calls (skills, documents, memory seeds), each generation group g of
        G (``ctx.shard``; a rank, or the ranks of one tensor-parallel vLLM engine) generates calls g,
        g+G, ... and admits them in each rank's own sandbox pool, and the main process gathers the
        candidates in call order, remembers them and returns the design; the other ranks return
        an empty design the controller ignores."""
        main = distributed.is_main()
        round_index = ctx.round + 1
        seed = requests = None
        if main:
            self._remember_outcomes(ctx)
            seed = int(ctx.rng.integers(2**31))
            requests = self.designer(seed).requests(round_index, self.config.designs_per_round, ctx.rng)
        seed, requests = distributed.broadcast((seed, requests))
        designer = self.designer(seed)
        policy = self._policy(ctx)
        max_new = (self.config.max_new_tokens
                   or getattr(getattr(policy, "config", None), "engineer_max_new_tokens", None)
                   or DEFAULT_MAX_NEW_TOKENS)
        start = time.monotonic()
        groups, group = ctx.shard
        mine = designer.generate(policy, round_index, requests[group::groups], seed=seed, max_new_tokens=max_new)
        generated = time.monotonic()
        for cand in mine:
            cand.rank = distributed.rank()
        designer.verdicts(mine)
        timed = (mine, generated - start, time.monotonic() - generated)
        parts = distributed.gather(timed)
        if not main:
            return Design(raw=None, notes={"spade": "recorded by the main process"})
        by_call: dict[int, DesignCandidate] = {}
        for part, _, _ in parts:  # ranks of one generation group made the same calls: keep the first
            for cand in part:
                by_call.setdefault(cand.call, cand)
        candidates = [by_call[k] for k in sorted(by_call)]
        summary = designer.record_all(candidates, round_index, generation_seconds=max(p[1] for p in parts),
                                      admission_seconds=max(p[2] for p in parts))
        return self._finish(candidates, summary)

    def _finish(self, candidates: list[DesignCandidate], summary: RoundSummary) -> Design:
        self.last_candidates = candidates
        self.summaries.append(summary)
        with (self.dir / ROUNDS_LOG).open("a") as handle:
            handle.write(json.dumps(summary.model_dump(mode="json")) + "\n")
        pool = pool_from_memory(self.memory)
        save_pool(self.dir, pool)
        first = candidates[0] if candidates else None
        return Design(
            raw={"environments": [e.model_dump(mode="json") for e in pool],
                 "designs": [d.model_dump(mode="json")
                             for d in design_samples(candidates, trainable=self.config.designer == "policy")]},
            prompt=first.prompt_text if first else None,
            output=first.output if first else None,
            notes={"spade": summary.model_dump(mode="json"),
                   "pool_size": len(pool),
                   "corpus": self._corpus.info.__dict__ if self._corpus else None},
            diagnostics={"admitted": len(summary.admitted), "designs": summary.designs,
                         "rejections": summary.rejections,
                         "seed_copies": len(summary.seed_copies),
                         "closest_seed": [f"{h[:8]} {summary.seed_similarity[h][0]} "
                                          f"{summary.seed_similarity[h][1]:.2f}"
                                          for h in summary.admitted if h in summary.seed_similarity],
                         "vendi_per_n": summary.vendi_per_n,
                         "vendi_per_n_run": summary.vendi_per_n_run})

    def warmstart_examples(self, n: int, seed: int) -> list[dict[str, Any]]:
        """The designer role's warm start on the seed library (``designer_warmstart``)."""
        if not self.config.designer_warmstart:
            return []
        from engineers.spade.warmstart import designer_examples

        return designer_examples(self.config, self.config.designer_warmstart_examples or n, seed)

    def state_dict(self) -> dict[str, Any]:
        return {"corpus_seed": self._corpus_seed,
                "corpus_cursor": self._corpus.cursor if self._corpus else self._corpus_cursor,
                "calls": self._designer.calls if self._designer else self._calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._corpus_cursor = int(state.get("corpus_cursor", 0))
        self._corpus_seed = state.get("corpus_seed")
        self._calls = int(state.get("calls", 0))
        if self._corpus is not None:
            self._corpus.cursor = self._corpus_cursor
        if self._designer is not None:
            self._designer.calls = self._calls

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
            self._designer = None
        self.memory.close()
        if getattr(self, "_tmp", None) is not None:
            self._tmp.cleanup()
