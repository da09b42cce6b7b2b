"""Admission of a designed environment: every check runs the program in ``testbeds.spade.sandbox``.

``admit(candidate, pool, config, setting)`` runs, in order, stopping at the first failure:

1. the candidate parsed (else its parse reason: ``parse_error`` / ``missing_hint``);
2. ``compile`` on the host (``syntax_error``) and an AST check that some class defines
   ``solution`` (``missing_solution``);
3. load in a sandboxed instance (import allowlist → ``forbidden_import``; no single ``*Env``
   class → ``bad_program``; a raising constructor → ``instantiate_failed``);
4. ``reset(seeds[0])``, then ``solution()``, turned into actions (a string or number *a* →
   ``["\\boxed{a}"]``; a list → its items, dicts as JSON text), played until the episode ends or
   ``max_steps``: it must end ``terminated`` with a final reward ≥ ``win_reward``
   (``solution_does_not_win``);
5. ``reset(seeds[0])`` and the empty action ``""`` repeated: must end (terminate or truncate)
   within ``max_steps`` (``never_ends``) without a win (``trivial_win``);
6. ``random_actions`` fresh episodes of a random action (a boxed random word, a boxed random
   7-digit number, ...) repeated: none may win (``trivial_win``);
7. ``reset(seeds[1])`` and ``solution()``: the first observation or the solution must differ
   from seed 0's (``constant_task``; hidden-state games show the same text but differ in the
   solution);
8. the hint must not contain ``\\boxed{`` nor the answer of either seed's ``solution()``
   (``hint_leak``; see ``hint_leak``).

Sandbox failures map to reasons by phase: ``exception`` in reset/step/solution →
``reset_failed``/``step_failed``/``solution_failed``; ``bad_return`` → ``bad_return`` (the sandbox
validates the ``(str, dict)`` pair and the 5-tuple's types); ``timeout`` → ``timeout``;
``memory_limit``/``crash`` → ``crash``. A rejected design carries ``penalty`` from
``AdmissionConfig.penalties``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.pool import program_hash
from engineers.spade.config import AdmissionConfig, RejectReason
from testbeds.spade.sandbox import SandboxFailure, SandboxPool
from testbeds.spade.synthetic.games import extract_boxed, normalize_answer


class AdmissionResult(BaseModel):
    """Verdict on one design."""

    model_config = ConfigDict(extra="forbid")

    admitted: bool
    """True when every check passed."""
    reason: RejectReason | None = None
    """The first failing check (None when admitted)."""
    detail: str = ""
    """What exactly failed (sandbox failure detail, observed values)."""
    penalty: float | None = None
    """Designer reward for this rejection (None when admitted: the regret reward applies)."""
    checks_passed: list[str] = Field(default_factory=list)
    """Names of the checks passed, in order."""
    first_observations: list[str] = Field(default_factory=list)
    """First observation for each admission seed reached."""
    answers: list[Any] = Field(default_factory=list)
    """``solution()`` for each admission seed reached."""
    seconds: float = 0.0
    """Wall time of the admission."""


class _Candidate(Protocol):
    program: str | None
    hint: str | None
    parse_reason: RejectReason | None
    parse_detail: str


class _Reject(Exception):
    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def defines_solution(program: str) -> bool:
    """Some class in the program defines a ``solution`` method (assumes it compiles)."""
    tree = ast.parse(program)
    return any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "solution"
               for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for item in node.body)


def solution_actions(value: Any) -> list[str]:
    """Actions that play ``solution()``'s return value (see module docstring)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"solution() returned {value!r}, not an answer or a list of actions")
    if isinstance(value, (str, int, float)):
        return [f"\\boxed{{{value}}}"]
    if isinstance(value, list) and value:
        actions = []
        for item in value:
            if isinstance(item, str):
                actions.append(item)
            elif isinstance(item, dict):
                actions.append(json.dumps(item))
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                actions.append(f"\\boxed{{{item}}}")
            else:
                raise ValueError(f"solution() list holds a {type(item).__name__}")
        return actions
    raise ValueError(f"solution() returned {type(value).__name__} {str(value)[:80]!r}, "
                     "not an answer or a non-empty list of actions")


def final_answer(value: Any) -> str | None:
    """The answer a ``solution()`` value ends with (for the hint-leak check), if any."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list) and value:
        last = value[-1]
        if isinstance(last, dict) and "answer" in last:
            return str(last["answer"])
        if isinstance(last, str):
            boxed = extract_boxed(last)
            if boxed is not None:
                return boxed
            try:
                parsed = json.loads(last)
            except ValueError:
                return None
            if isinstance(parsed, dict) and "answer" in parsed:
                return str(parsed["answer"])
    return None


def hint_leak(hint: str, answers: list[str | None], min_chars: int = 2) -> str | None:
    """Why ``hint`` gives the answer away, or None.

    A leak is a ``\\boxed{`` in the hint, or a normalised answer of at least ``min_chars``
    characters appearing in the normalised hint as a whole token sequence, or a shorter answer
    right after "answer is/:/=".
    """
    if "\\boxed{" in hint:
        return "the hint contains a \\boxed{} answer"
    text = normalize_answer(hint)
    for answer in answers:
        if answer is None:
            continue
        target = normalize_answer(answer)
        if not target:
            continue
        word = re.escape(target)
        if len(target) >= min_chars:
            if re.search(rf"(?<![\w.]){word}(?![\w]|\.\d)", text):
                return f"the hint contains the answer {answer!r}"
        elif re.search(rf"answer\s*(?:is|:|=)\s*['\"]?{word}(?!\w)", text):
            return f"the hint states the answer {answer!r}"
    return None


def random_action(k: int, rng: random.Random) -> str:
    """The k-th random action: a boxed random word, then a boxed random 7-digit number, alternating."""
    if k % 2 == 0:
        return "\\boxed{" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(8)) + "}"
    return "\\boxed{" + str(rng.randrange(1_000_000, 10_000_000)) + "}"


_PHASE_EXCEPTION = {"load": RejectReason.instantiate_failed, "reset": RejectReason.reset_failed,
                    "step": RejectReason.step_failed, "solution": RejectReason.solution_failed}


def failure_reason(kind: str, phase: str) -> RejectReason:
    """Map a sandbox failure kind, raised during ``phase``, to a rejection reason."""
    direct = {"syntax_error": RejectReason.syntax_error,
              "forbidden_import": RejectReason.forbidden_import,
              "bad_program": RejectReason.bad_program, "bad_return": RejectReason.bad_return,
              "timeout": RejectReason.timeout, "memory_limit": RejectReason.crash,
              "crash": RejectReason.crash}
    if kind in direct:
        if kind == "bad_return" and phase == "solution":
            return RejectReason.solution_failed
        return direct[kind]
    return _PHASE_EXCEPTION.get(phase, RejectReason.crash)


def admit(candidate: _Candidate, pool: SandboxPool, config: AdmissionConfig,
          log: Callable[[str], None] | None = None) -> AdmissionResult:
    """Run every admission check (module docstring) on ``candidate`` in ``pool``."""
    start = time.monotonic()
    passed: list[str] = []
    observations: list[str] = []
    answers: list[Any] = []

    def done(reason: RejectReason | None, detail: str = "") -> AdmissionResult:
        return AdmissionResult(
            admitted=reason is None, reason=reason, detail=detail[:2000],
            penalty=None if reason is None else config.penalties[reason], checks_passed=passed,
            first_observations=observations, answers=answers, seconds=time.monotonic() - start)

    if candidate.parse_reason is not None or not candidate.program:
        return done(candidate.parse_reason or RejectReason.parse_error, candidate.parse_detail)
    if not candidate.hint:
        return done(RejectReason.missing_hint, "empty hint")
    program, hint = candidate.program, candidate.hint
    passed.append("parse")
    try:
        compile(program, "<environment>", "exec")
    except SyntaxError as exc:
        return done(RejectReason.syntax_error, f"{exc.msg} (line {exc.lineno})")
    except ValueError as exc:  # null bytes
        return done(RejectReason.syntax_error, str(exc))
    passed.append("syntax")
    if not defines_solution(program):
        return done(RejectReason.missing_solution, "no class defines solution()")
    passed.append("solution_defined")
    try:
        _run_checks(program, hint, pool, config, passed, observations, answers, log)
    except _Reject as rej:
        return done(rej.reason, rej.detail)
    return done(None)


def _run_checks(program: str, hint: str, pool: SandboxPool, config: AdmissionConfig,
                passed: list[str], observations: list[str], answers: list[Any],
                log: Callable[[str], None] | None) -> None:
    """Checks 3–8 (module docstring) in one sandboxed instance; ``_Reject`` on the first failure."""
    try:
        env = pool.load(program)
    except SandboxFailure as exc:
        raise _Reject(failure_reason(exc.failure.kind, "load"), exc.failure.detail) from None
    trial = _Trial(env, config, passed, observations, answers)
    try:
        with env:
            passed.append("load")
            first = trial.call("reset", env.reset, config.seeds[0])
            observations.append(first.obs)
            passed.append("reset")
            trial.solution_wins()
            trial.empty_action_loses()
            trial.random_actions_lose(random.Random(program_hash(program)))
            trial.seeds_differ(first.obs)
            leak = hint_leak(hint, [final_answer(a) for a in answers], config.min_leak_chars)
            if leak:
                raise _Reject(RejectReason.hint_leak, leak)
            passed.append("hint_clean")
    except SandboxFailure as exc:
        failure = exc.failure
        detail = failure.detail + (f"\n{failure.traceback}" if failure.traceback else "")
        raise _Reject(failure_reason(failure.kind, trial.phase), f"{trial.phase}: {detail}") from None
    if log:
        log(f"admitted after checks {passed}")


class _Trial:
    """The sandboxed checks on one loaded instance; ``phase`` is the call in progress (a sandbox
    failure's reason depends on it), ``passed`` / ``observations`` / ``answers`` the records."""

    def __init__(self, env: Any, config: AdmissionConfig, passed: list[str], observations: list[str],
                 answers: list[Any]) -> None:
        self.env, self.config = env, config
        self.passed, self.observations, self.answers = passed, observations, answers
        self.phase = "load"

    def call(self, phase: str, fn: Callable[..., Any], *args: Any) -> Any:
        self.phase = phase
        return fn(*args)

    def play(self, actions: list[str], repeat_last: bool) -> tuple[bool, bool, int, str]:
        """(won, ended, steps, last obs) of one episode from the current reset."""
        obs = ""
        for i in range(self.config.max_steps):
            if i >= len(actions) and not repeat_last:
                return False, False, i, obs
            step = self.call("step", self.env.step, actions[min(i, len(actions) - 1)])
            obs = step.obs
            if step.terminated or step.truncated:
                return step.terminated and step.reward >= self.config.win_reward, True, i + 1, obs
        return False, False, self.config.max_steps, obs

    def solution_wins(self) -> None:
        """Check 4: ``solution()``, played from the current reset, wins."""
        value = self.call("solution", self.env.call, "solution")
        self.answers.append(value)
        try:
            actions = solution_actions(value)
        except ValueError as exc:
            raise _Reject(RejectReason.solution_failed, str(exc)) from None
        won, ended, steps, last = self.play(actions, repeat_last=False)
        if not won:
            raise _Reject(RejectReason.solution_does_not_win,
                          f"playing solution() {actions[:5]!r} did not win "
                          f"(ended={ended}, steps={steps}); last observation: {last[:300]!r}")
        self.passed.append("solution_wins")

    def empty_action_loses(self) -> None:
        """Check 5: the empty action, repeated, ends the episode without a win."""
        config = self.config
        self.call("reset", self.env.reset, config.seeds[0])
        won, ended, _, _ = self.play([""], repeat_last=True)
        if won:
            raise _Reject(RejectReason.trivial_win, "the empty action wins")
        if not ended:
            raise _Reject(RejectReason.never_ends,
                          f"{config.max_steps} empty actions neither terminated nor truncated")
        self.passed.append("empty_action_loses")

    def random_actions_lose(self, rng: random.Random) -> None:
        """Check 6: no random action, repeated, wins."""
        for k in range(self.config.random_actions):
            action = random_action(k, rng)
            self.call("reset", self.env.reset, self.config.seeds[0])
            won, _, _, _ = self.play([action], repeat_last=True)
            if won:
                raise _Reject(RejectReason.trivial_win, f"the random action {action!r} wins")
        self.passed.append("random_action_loses")

    def seeds_differ(self, first_obs: str) -> None:
        """Check 7: the second seed's first observation or solution differs from the first's."""
        config = self.config
        second = self.call("reset", self.env.reset, config.seeds[1])
        self.observations.append(second.obs)
        self.answers.append(self.call("solution", self.env.call, "solution"))
        if second.obs == first_obs and self.answers[1] == self.answers[0]:
            raise _Reject(RejectReason.constant_task,
                          f"seeds {config.seeds[0]} and {config.seeds[1]} give the same task "
                          "(same first observation and same solution)")
        self.passed.append("seeds_differ")
