"""Held-out procedural reasoning eval from the PyPI package ``reasoning-gym`` (games setting).

The SPADE paper reports Reasoning-Gym maths, algorithms and cognition. We evaluate a fixed list of
reasoning-gym datasets per category (``DEFAULT_DATASETS``), ``per_dataset`` distinct items each,
generated from fixed seeds ``eval_seed + 1000 * dataset_index`` at each dataset's declared level
(``levels``: the dataset's own config values, e.g. fewer terms and digits; the paper's suites keep
reasoning-gym's defaults, where a 135M model scores 0). Training never sees them: the fixed
reasoning-gym environment set (``training_environments``) draws from ``train_seed`` (default
10_000_000 + ...), a disjoint seed range, an eval item whose question a training item also asks is
replaced by the next one (``exclude``: at an easy level two seeds can draw the same question), and
SPADE trains only on designed environments.

Prompt: the item's question, then "Put your final answer inside \\boxed{}". The answer is the
last ``\\boxed{}`` content (the whole reply when there is none), scored with the dataset's own
``score_answer`` (1.0 correct, partial credit where the dataset defines it).

    accuracy(category) = mean score over the category's items
    score              = mean over categories of accuracy(category)

Install: ``pip install reasoning-gym==0.1.25`` (pure Python; pulls sympy, pycosat, magiccube...).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from curriculum.core.breakdown import EvalBreakdown
from curriculum.core.pool import PoolEnvironment
from curriculum.core.types import Policy, Task
from testbeds.spade.synthetic.games import extract_boxed

DEFAULT_DATASETS: dict[str, list[str]] = {
    "maths": ["basic_arithmetic", "chain_sum", "gcd", "lcm", "fraction_simplification", "simple_equations"],
    "algorithmic": ["number_sorting", "word_sorting", "letter_counting", "spell_backward", "base_conversion",
                    "caesar_cipher"],
    "cognition": ["number_sequence", "needle_haystack", "color_cube_rotation", "rectangle_count"],
}
"""Datasets per category (reasoning-gym modules ``arithmetic``/``algebra``, ``algorithmic``, ``cognition``)."""

INSTRUCTION = "\n\nPut your final answer inside \\boxed{}."


class ReasoningGymEval(BaseModel):
    """The held-out reasoning-gym suite."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    datasets: dict[str, list[str]] = Field(default_factory=lambda: {k: list(v) for k, v in DEFAULT_DATASETS.items()})
    """Category → reasoning-gym dataset names."""
    per_dataset: int = Field(10, ge=1)
    """Items per dataset."""
    levels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Dataset → its reasoning-gym config values (e.g. ``basic_arithmetic: {max_terms: 2,
    max_digits: 1}``); a dataset not named keeps reasoning-gym's defaults. Size a level to the
    learner with ``benchmarks/reasoning_gym_levels.py``."""
    eval_seed: int = Field(20_260_000, ge=0)
    """Base seed of the eval items (fixed; never used for training)."""
    max_new_tokens: int = Field(512, ge=1)
    """Answer budget."""

    @model_validator(mode="after")
    def _levels_name_datasets(self) -> ReasoningGymEval:
        named = {name for names in self.datasets.values() for name in names}
        if unknown := sorted(set(self.levels) - named):
            raise ValueError(f"levels names datasets the eval does not use: {', '.join(unknown)} "
                             f"(datasets: {', '.join(sorted(named))})")
        return self


def _require() -> Any:
    try:
        import reasoning_gym
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the held-out games eval needs the PyPI package reasoning-gym "
                          "(pip install reasoning-gym==0.1.25)") from err
    return reasoning_gym


def create_dataset(name: str, size: int, seed: int, level: dict[str, Any] | None = None) -> Any:
    """``reasoning_gym.create_dataset`` at ``level`` (the dataset's config values); a value the
    dataset does not take is a clear error, not a traceback from inside reasoning-gym."""
    rg = _require()
    try:
        return rg.create_dataset(name, size=size, seed=seed, **(level or {}))
    except (TypeError, ValueError, AssertionError) as err:
        raise ValueError(f"reasoning-gym dataset {name!r} at level {level}: {err}") from err


GENERATION_DEADLINE_S = 60.0
"""Seconds a dataset's item generation may take before its level is refused: some reasoning-gym
generators redraw until a condition holds and never end at a degenerate level (``base_conversion``
with ``min_base == max_base``)."""


@contextlib.contextmanager
def _deadline(seconds: float, what: str) -> Iterator[None]:
    """Raise ``ValueError(what)`` when the block runs longer than ``seconds`` (main thread only:
    elsewhere the block runs unguarded)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(*_: Any) -> None:
        raise ValueError(what)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def build_items(datasets: dict[str, list[str]], per_dataset: int, seed: int, *,
                levels: dict[str, dict[str, Any]] | None = None,
                exclude: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Deterministic items: ``{category, dataset, index, question, answer, entry}``, ``per_dataset``
    distinct questions per dataset, none of them in ``exclude`` (questions the run trains on).
    A level too small to hold that many distinct questions is an error."""
    items = []
    k = 0
    for category, names in datasets.items():
        for name in names:
            level = (levels or {}).get(name)
            pool = 4 * per_dataset + 16  # room for duplicates and excluded questions, drawn once
            data = create_dataset(name, pool, seed + 1000 * k, level)
            seen: set[str] = set()
            for i in range(pool):
                try:
                    with _deadline(GENERATION_DEADLINE_S, f"reasoning-gym dataset {name!r} at level {level} "
                                   f"drew no question in {GENERATION_DEADLINE_S:g} s: a level its generator "
                                   "cannot draw from"):
                        entry = data[i]
                except (TypeError, AssertionError, IndexError) as err:
                    raise ValueError(f"reasoning-gym dataset {name!r} at level {level}: {err}") from err
                question = entry["question"]
                if question in seen or question in exclude:
                    continue
                seen.add(question)
                items.append({"category": category, "dataset": name, "index": len(seen) - 1,
                              "question": question, "answer": str(entry["answer"]), "entry": entry,
                              "scorer": data})
                if len(seen) == per_dataset:
                    break
            if len(seen) < per_dataset:
                raise ValueError(f"reasoning-gym dataset {name!r} at level {level} gave {len(seen)} distinct "
                                 f"held-out questions of {pool} drawn, fewer than per_dataset={per_dataset}: "
                                 "raise its level or lower per_dataset")
            k += 1
    return items


def score_items(policy: Policy, items: list[dict[str, Any]], *, max_new_tokens: int,
                seed: int = 0) -> list[tuple[float, str]]:
    """(score, reply) per item: the dataset's own ``score_answer`` of the reply's last ``\\boxed{}``."""
    tasks = [Task(id=f"rg-{it['dataset']}-{it['index']}", messages=[{"role": "user", "content": it["question"] + INSTRUCTION}])
             for it in items]
    completions = policy.generate(tasks, max_new_tokens=max_new_tokens, seed=seed)
    scored = []
    for it, comp in zip(items, completions, strict=True):
        try:
            score = float(it["scorer"].score_answer(answer_of(comp.text), it["entry"]))
        except Exception:  # noqa: BLE001 - a dataset's scorer must not sink the eval
            score = 0.0
        scored.append((score, comp.text))
    return scored


def answer_of(text: str) -> str:
    """The last ``\\boxed{}`` content, else the stripped reply."""
    boxed = extract_boxed(text)
    return boxed if boxed is not None else text.strip()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def item_key(item: dict[str, Any]) -> str:
    """An item's id in ``EvalReport.task_scores``: ``<dataset>/<digest of its question>``. By
    content, not position, so two runs whose suites differ by an excluded question (each run
    leaves out the questions it trains on) pair item by item on the questions both asked."""
    return f"{item['dataset']}/{_digest(item['question'])}"


def evaluate_items(policy: Policy, config: ReasoningGymEval, *, seed: int = 0, samples: int = 3,
                   exclude: frozenset[str] = frozenset()
                   ) -> tuple[dict[str, float], EvalBreakdown, list[dict[str, Any]], dict[str, float]]:
    """(metrics, breakdown (mean score per dataset: rates group ``reasoning_gym``), a few samples,
    each item's score by ``item_key`` (``EvalReport.task_scores``)). Greedy unless the policy's own
    config says otherwise; ``exclude``: questions the run trains on."""
    items = build_items(config.datasets, config.per_dataset, config.eval_seed, levels=config.levels,
                        exclude=exclude)
    per_cat: dict[str, list[float]] = {}
    per_ds: dict[str, list[float]] = {}
    per_item: dict[str, float] = {}
    out_samples = []
    for it, (score, text) in zip(items, score_items(policy, items, max_new_tokens=config.max_new_tokens,
                                                    seed=seed), strict=True):
        per_cat.setdefault(it["category"], []).append(score)
        per_ds.setdefault(it["dataset"], []).append(score)
        per_item[item_key(it)] = score
        if len(out_samples) < samples:
            out_samples.append({"prompt": it["question"][:500], "response": text[:500],
                                "answer": it["answer"], "score": score})
    metrics = {f"reasoning_gym/{c}": sum(v) / len(v) for c, v in per_cat.items()}
    metrics["reasoning_gym/mean"] = sum(metrics.values()) / max(len(metrics), 1)  # one '/': shown per round
    breakdown = EvalBreakdown(rates={"reasoning_gym": {d: sum(v) / len(v) for d, v in per_ds.items()}})
    return metrics, breakdown, out_samples, per_item


def training_questions(datasets: Sequence[str], per_dataset: int, train_seed: int = 10_000_000, *,
                       levels: dict[str, dict[str, Any]] | None = None) -> frozenset[str]:
    """The questions of the fixed reasoning-gym environment set (``training_environments``)."""
    return frozenset(question for question, _ in _training_pairs(datasets, per_dataset, train_seed, levels=levels))


def training_environments(datasets: Sequence[str], per_dataset: int, train_seed: int = 10_000_000, *,
                          levels: dict[str, dict[str, Any]] | None = None) -> list[PoolEnvironment]:
    """Reasoning-gym datasets as a fixed set of environment programs (``initial_pool: reasoning_gym``).

    Each dataset becomes one game program holding ``per_dataset`` (question, answer) pairs drawn
    from ``train_seed`` (disjoint from the eval seeds) at the dataset's level in ``levels`` (its
    reasoning-gym config values; reasoning-gym's defaults for a dataset not named); ``reset(seed)``
    picks pair ``seed % n``, a
    turn answers in ``\\boxed{}``, an exact (whitespace- and case-normalised) match wins. The
    program runs in the sandbox, where reasoning-gym itself cannot be imported.
    Each is a ``PoolEnvironment`` with id ``rg-<dataset>-<train_seed>`` (``-<digest of the level>``
    added for a named level), the dataset as skill and an empty hint (a fixed set has none).
    """
    envs = []
    groups = _training_pairs(datasets, per_dataset, train_seed, grouped=True, levels=levels)
    for name, pairs in zip(datasets, groups, strict=True):
        source = _FIXED_TEMPLATE.replace("__PAIRS_LITERAL__", repr(json.dumps(pairs))).replace("__NAME__", name)
        level = (levels or {}).get(name)
        suffix = f"-{_digest(json.dumps(level, sort_keys=True))}" if level else ""
        envs.append(PoolEnvironment(hash=f"rg-{name}-{train_seed}{suffix}", setting="games", skill=name, hint="",
                                    program=source))
    return envs


def _training_pairs(datasets: Sequence[str], per_dataset: int, train_seed: int, *, grouped: bool = False,
                    levels: dict[str, dict[str, Any]] | None = None) -> Any:
    """(question, answer) pairs of the fixed training set: flat, or one list per dataset."""
    groups = []
    for k, name in enumerate(datasets):
        data = create_dataset(name, per_dataset, train_seed + 1000 * k, (levels or {}).get(name))
        groups.append([(data[i]["question"], str(data[i]["answer"])) for i in range(per_dataset)])
    return groups if grouped else [pair for group in groups for pair in group]


_FIXED_TEMPLATE = '''
import json
import re

PAIRS = json.loads(__PAIRS_LITERAL__)


def _norm(text):
    return re.sub(r"\\s+", " ", str(text)).strip().lower()


class ReasoningGymEnv:
    """reasoning-gym dataset __NAME__ as a one-answer game (up to 2 tries)."""

    max_turns = 2

    def reset(self, seed=None):
        self.question, self.answer = PAIRS[(seed or 0) % len(PAIRS)]
        self.turns = 0
        return self.question + "\\n\\nPut your final answer inside \\\\boxed{}.", {}

    def step(self, action):
        self.turns += 1
        found = re.findall(r"\\\\boxed\\{(.*)\\}", str(action), re.S)
        given = found[-1] if found else str(action)
        if _norm(given) == _norm(self.answer):
            return "Correct.", 1.0, True, False, {"won": True}
        done = self.turns >= self.max_turns
        return "Incorrect.", 0.0, False, done, {"won": False}

    def solution(self):
        return self.answer
'''
