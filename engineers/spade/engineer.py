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

With ``frozen_pool`` (the fixed-environment GRPO baseline) the designer works once:
``initial_design``, asked by the controller before round 0 of a fresh run, makes design calls in
batches until ``frozen_pool.size`` designs are admitted (through the same admission, duplicate
checks and memory as every design) or ``frozen_pool.max_calls`` calls are spent
(``FrozenPoolTooSmall``, naming the rejections), saves the pool to ``<run_dir>/spade_pool.jsonl``
(what ``testbed.initial_pool: memory:<run dir>`` reads) and returns it as round 0's proposal, with
no designs; a restart before round 0 is committed rereads that file. Every later ``design``
hands the same pool on without a design call, so only the agent role trains. With
``designs_per_round: 0`` every ``design`` hands the starting pool on the same way (the designer
off; its warm-start examples still train the starting model).

State saved per round: the corpus seed and cursor and the design-call counter (the memory is its own
SQLite file in the run directory). The sandbox pool is started on first use and closed by
``close``. Rewards, agent play and co-training live with the ``selfplay`` trainer (``trainers.selfplay``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from curriculum.core import distributed
from curriculum.core.config import ConfigError
from curriculum.core.pool import PoolEnvironment
from curriculum.core.records import Design, RoundReport
from curriculum.core.types import Policy
from engineers.base import DesignContext, Engineer
from engineers.spade.config import DEFAULT_CAPACITY, FrozenPoolConfig, MemoryConfig, SpadeEngineerConfig
from engineers.spade.corpus import Corpus, build_corpus
from engineers.spade.designer import (ROUNDS_LOG, Designer, DesignCandidate, RoundSummary, design_samples,
                                      pool_from_memory)
from engineers.spade.memory import Memory
from testbeds.spade.heldout.games import heldout_names
from testbeds.spade.sandbox import SandboxPool
from testbeds.spade.saved_pool import POOL_FILE, load_pool, save_pool
from testbeds.spade.synthetic import prelude_source

DEFAULT_MAX_NEW_TOKENS = 2048
"""Design budget when neither the config nor the policy's generation config sets one."""


class FrozenPoolTooSmall(ConfigError):
    """The frozen designer admitted fewer environments than ``frozen_pool.size`` within
    ``frozen_pool.max_calls`` design calls (the message names the shortfall and the rejections)."""


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
        """Which documents the design calls will read (``corpus_plan``), and a frozen pool's
        design calls before round 0 (not in the per-round estimate)."""
        from engineers.spade.corpus import corpus_plan

        lines = [f"  corpus: {corpus_plan(config.corpus, config.setting)}"]
        if (frozen := config.frozen_pool) is not None:
            lines.append(f"  frozen pool: {frozen.size} admitted environments designed once before round 0, "
                         f"in batches of {frozen.batch} design calls, at most {frozen.max_calls} calls")
        return lines

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
        capacity = config.memory.capacity if isinstance(config.memory, MemoryConfig) else DEFAULT_CAPACITY
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
                                      sandbox=self._sandbox, calls=self._calls,
                                      heldout=heldout_names(self.dir))
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
        an empty design the controller ignores. With ``frozen_pool`` the pool designed before
        round 0 is handed on unchanged, without design calls."""
        if self.config.frozen_pool is not None or self.config.designs_per_round == 0:
            why = ("frozen pool: designed before round 0, no design calls" if self.config.frozen_pool is not None
                   else "designs_per_round 0: the starting pool, no design calls")
            return Design(raw={"environments": [e.model_dump(mode="json") for e in ctx.proposal.environments],
                               "designs": []},
                          notes={"spade": why})
        if distributed.is_main():
            self._remember_outcomes(ctx)
        made = self._design_calls(ctx, ctx.round + 1, self.config.designs_per_round)
        if made is None:
            return Design(raw=None, notes={"spade": "recorded by the main process"})
        return self._finish(*made)

    def _design_calls(self, ctx: DesignContext, round_index: int,
                      n: int) -> tuple[list[DesignCandidate], RoundSummary] | None:
        """``n`` design calls for ``round_index``, generated and admitted on every rank's share
        (``design``), remembered by the main process, which returns the candidates in call order
        and their summary; the other ranks return ``None``."""
        main = distributed.is_main()
        seed = requests = None
        if main:
            seed = int(ctx.rng.integers(2**31))
            requests = self.designer(seed).requests(round_index, n, ctx.rng)
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
        parts = distributed.gather((mine, generated - start, time.monotonic() - generated))
        if not main:
            return None
        by_call: dict[int, DesignCandidate] = {}
        for part, _, _ in parts:  # ranks of one generation group made the same calls: keep the first
            for cand in part:
                by_call.setdefault(cand.call, cand)
        candidates = [by_call[k] for k in sorted(by_call)]
        summary = designer.record_all(candidates, round_index, generation_seconds=max(p[1] for p in parts),
                                      admission_seconds=max(p[2] for p in parts))
        return candidates, summary

    # -- a pool designed once (``frozen_pool``) ---------------------------------------------------
    @property
    def designs_round0(self) -> bool:
        """With ``frozen_pool``: round 0 trains on the pool ``initial_design`` makes."""
        return self.config.frozen_pool is not None

    def initial_design(self, ctx: DesignContext) -> Design | None:
        """The frozen pool: design calls in batches of ``frozen_pool.batch`` until the memory holds
        ``frozen_pool.size`` admitted environments (``FrozenPoolTooSmall`` after ``max_calls``
        calls with fewer), the first ``size`` of them saved as ``<run_dir>/spade_pool.jsonl``. A
        run that restarts before round 0 is committed reads that file instead of designing again."""
        frozen = self.config.frozen_pool
        if frozen is None:
            return None
        if ctx.proposal.environments:
            raise ConfigError(f"engineer.frozen_pool designs the whole starting pool, but the testbed's "
                              f"initial pool holds {len(ctx.proposal.environments)} environments: "
                              "set testbed.initial_pool: none")
        main = distributed.is_main()
        saved = main and (self.dir / POOL_FILE).is_file()
        pool = load_pool(self.dir) if saved else None
        if not distributed.broadcast(saved):
            pool = self._fill_frozen_pool(ctx, frozen)
            if main:
                save_pool(self.dir, pool)
        if not main:
            return Design(raw=None, notes={"spade": "recorded by the main process"})
        return Design(raw={"environments": [e.model_dump(mode="json") for e in pool], "designs": []},
                      notes={"frozen_pool": {"environments": len(pool), "reread": bool(saved)}},
                      diagnostics={"environments": len(pool), "reread": bool(saved)})

    def _fill_frozen_pool(self, ctx: DesignContext, frozen: FrozenPoolConfig) -> list[PoolEnvironment]:
        """Batches of design calls for round 0 until the pool is full (``initial_design``); the
        main process returns the first ``size`` admitted environments, the other ranks ``[]``.
        Every rank raises ``FrozenPoolTooSmall`` when the calls run out first."""
        main = distributed.is_main()
        calls, status, message = 0, "more", ""
        while status == "more":
            n = min(frozen.batch, frozen.max_calls - calls)
            made = self._design_calls(ctx, 0, n)
            calls += n
            if made is not None:
                self._log_summary(*made)
                admitted = len(pool_from_memory(self.memory))
                status = "full" if admitted >= frozen.size else "more" if calls < frozen.max_calls else "short"
                message = self._shortfall(frozen, admitted, calls) if status == "short" else ""
            status, message = distributed.broadcast((status, message))
        if status == "short":
            raise FrozenPoolTooSmall(message)
        return pool_from_memory(self.memory)[:frozen.size] if main else []

    def _shortfall(self, frozen: FrozenPoolConfig, admitted: int, calls: int) -> str:
        rejected: Counter[str] = Counter()
        for summary in self.summaries:  # per call: the memory keeps one row per program
            rejected.update(summary.rejections)
        reasons = ", ".join(f"{reason} {count}" for reason, count in rejected.most_common()) or "none"
        return (f"the frozen designer admitted {admitted} of the {frozen.size} environments "
                f"engineer.frozen_pool.size asks for in {calls} design calls (engineer.frozen_pool.max_calls); "
                f"rejected designs by reason: {reasons}. Raise max_calls, lower size, or give the designer "
                f"more tokens (engineer.max_new_tokens) or a stronger model (engineer.designer); "
                f"`curriculum show {self.dir} --envs` lists every design")

    def _log_summary(self, candidates: list[DesignCandidate], summary: RoundSummary) -> None:
        """Keep the call's candidates and append its summary to ``ROUNDS_LOG``."""
        self.last_candidates = candidates
        self.summaries.append(summary)
        with (self.dir / ROUNDS_LOG).open("a") as handle:
            handle.write(json.dumps(summary.model_dump(mode="json")) + "\n")

    def _finish(self, candidates: list[DesignCandidate], summary: RoundSummary) -> Design:
        self._log_summary(candidates, summary)
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
        """The designer role's warm start on the seed library (``designer_warmstart``), without the
        run's held-out games (the trainer's record in the run directory)."""
        if not self.config.designer_warmstart:
            return []
        from engineers.spade.warmstart import designer_examples

        return designer_examples(self.config, self.config.designer_warmstart_examples or n, seed,
                                 exclude=heldout_names(self.dir))

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
