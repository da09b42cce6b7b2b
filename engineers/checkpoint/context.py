"""The five context modules of the checkpoint engineer, each a pure renderer to plain text.

* F — ``render_failures`` picks the renderer for the testbed's breakdown:
  ``render_failure_breakdown`` (MAPF) — for every eval suite (``3agents``, …) and every map size:
  number of eval instances, valid rate, optimal rate, and the count of responses failing each of
  the eight validity checks (checks with zero failures are omitted, "none" if all are zero).
  Input: ``EvalReport.breakdown`` (the kernel's ``EvalBreakdown``, its ``suites`` section).
  ``render_bucket_failures`` (any other bucket space, e.g. reasoning_gym) — through the declared
  space and its groups (reasoning_gym: task → its levels): per group its mean accuracy, per
  bucket n, accuracy (``EvalReport.bucket_scores``) and the non-zero failure counts of
  ``breakdown.buckets[bucket].failures`` (reasoning_gym: ``partial``, ``wrong``, ``no_answer``).
  A breakdown of neither section lists its ``rates`` groups (``render_rates``).
* ``render_guideline`` (G) — round-independent design heuristics for the testbed, by default the
  ``neutral`` variant of ``GUIDELINE_VARIANTS`` (the task, its fields and checks, none of the
  paper's findings; ``paper_findings`` is the named variant that gives them; a generic line for
  testbeds without their own), plus the meaning and legal range of every field
  of the declared space.
* ``render_history`` (H) — the last ``history_rounds`` rounds as (failure breakdown, config)
  pairs, as the Trainee-to-Trainer paper describes H: per round the config it trained on (per
  bucket, share and knobs), then the failure breakdown of the evaluation that followed, rendered
  as F renders the latest one (per suite and size: n, valid, optimal, failing-check counts). With
  ``include_initial_config=False`` (V4 on) round 0's config reads ``-`` so the random cold start
  is not taken as a recommended baseline; its failure breakdown stays.
* ``render_summary`` (S) — the engineer's own summary of its previous choice, verbatim, or a line
  saying there is none yet.
* ``render_training`` (T) — ``bookkeeping``: rounds done / total, epochs per round, epochs done /
  total (or the per-round step cap when one replaces epochs). ``full`` adds GRPO (group size,
  prompts per update, clip range, KL coefficient, learning rate, rollout temperature, completion
  budget) and the reward: MAPF's adaptive reward with its weight schedule and current weights,
  or, for a testbed without one, a line saying the reward is its verifier's score.

``build_context`` joins the switched-on modules, in the order F, G, H, S, T, under headers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from curriculum.core.breakdown import EvalBreakdown
from curriculum.core.spaces import BucketSpace
from engineers.checkpoint.config import ContextSpec

SECTION_TITLES = {
    "F": "F. Failure breakdown of the latest evaluation",
    "G": "G. Guideline",
    "H": "H. History of earlier rounds (config trained on, and its failure breakdown)",
    "S": "S. Your summary of your previous choice",
    "T": "T. Training details",
}


# -- F ------------------------------------------------------------------------------------------

def render_failure_breakdown(breakdown: EvalBreakdown) -> str:
    """Module F: per suite and size, n, valid %, optimal % and failing-check counts; a breakdown
    without suites lists its rates groups (``render_rates``)."""
    if not breakdown.suites:
        return render_rates(breakdown)
    lines: list[str] = []
    for name, suite in breakdown.suites.items():
        lines.append(f"{name} (n={suite.n}): valid {_pct(suite.valid_rate)}, optimal {_pct(suite.optimal_rate)}")
        for size, row in suite.sizes.items():
            failed = ", ".join(f"{check} {count}" for check, count in row.failures.items() if count)
            lines.append(f"  {size:<6} n={row.n:<3} valid {_pct(row.valid_rate):>6}  "
                         f"optimal {_pct(row.optimal_rate):>6}  failed checks: {failed or 'none'}")
    return "\n".join(lines)


def render_rates(breakdown: EvalBreakdown) -> str:
    """Module F for a breakdown of rates groups (the held-out testbed): per group, each item and
    its value; ``(no evaluation results)`` when the breakdown is empty."""
    if breakdown.is_empty():
        return "(no evaluation results)"
    lines: list[str] = []
    for group, rates in breakdown.rates.items():
        lines.append(f"{group}:")
        lines.extend(f"  {item}: {value:.3f}" for item, value in rates.items())
    return "\n".join(lines) if lines else "(no per-suite or per-group results)"


def render_bucket_failures(breakdown: EvalBreakdown, scores: Mapping[str, float],
                           groups: Mapping[str, Sequence[str]]) -> str:
    """Module F for a bucket space without MAPF suites (reasoning_gym): per group (task), its mean
    accuracy, then per bucket (level) n, accuracy and the non-zero failure counts of
    ``breakdown.buckets[bucket]`` (``OutcomeCounts.failures``)."""
    counts = breakdown.buckets
    if not scores and not counts:
        return "(no evaluation results)"
    width = max(len(b) for bs in groups.values() for b in bs)
    lines: list[str] = []
    for group, buckets in groups.items():
        seen = [b for b in buckets if b in scores]
        mean = sum(scores[b] for b in seen) / len(seen) if seen else None
        lines.append(f"{group}: accuracy {_pct(mean)}")
        for b in buckets:
            row = counts.get(b)
            failed = ", ".join(f"{k} {v}" for k, v in (row.failures if row else {}).items() if v)
            lines.append(f"  {b:<{width}}  n={row.n if row else 0:<3} accuracy {_pct(scores.get(b)):>6}  "
                         f"failures: {failed or 'none'}")
    return "\n".join(lines)


def render_failures(breakdown: EvalBreakdown, scores: Mapping[str, float], space: Any,
                    groups: Mapping[str, Sequence[str]] | None = None) -> str:
    """Module F for any testbed: MAPF suites (``render_failure_breakdown``), else the per-bucket
    table of a bucket space (``render_bucket_failures``), else the rates groups."""
    if breakdown.suites:
        return render_failure_breakdown(breakdown)
    if isinstance(space, BucketSpace):
        return render_bucket_failures(breakdown, scores, groups or {"all": space.buckets})
    return render_rates(breakdown)


def result_rates(breakdown: EvalBreakdown, scores: Mapping[str, float]) -> dict[str, float]:
    """The per-bucket success rate the diagnostics compare: MAPF's valid rate per size (from the
    suites), otherwise the eval's ``bucket_scores``."""
    return next(iter(result_columns(breakdown, scores).values()))


def _pct(x: Any) -> str:
    return f"{100.0 * float(x):.1f}%" if isinstance(x, (int, float)) else "n/a"


def valid_rates_by_size(breakdown: EvalBreakdown) -> dict[str, float]:
    """Valid rate per size averaged over suites, weighted by instance count (sizes with n>0)."""
    return breakdown.rates_by_bucket("valid_rate")


def optimal_rates_by_size(breakdown: EvalBreakdown) -> dict[str, float]:
    """Optimal rate per size averaged over suites, weighted by instance count."""
    return breakdown.rates_by_bucket("optimal_rate")


# -- G ------------------------------------------------------------------------------------------

MAPF_GUIDELINE = """\
You choose the training distribution of the next round; you never write instances yourself.
- Each map size gets a share of the round's training instances (data_ratio); the shares decide
  how the training data is spread over the sizes.
- The other fields set what a size's instances look like: the share of the map that is holes
  (hole_ratio) and the share of instances whose optimal plan needs an agent to wait (wait_ratio).
- An answer is valid when it passes eight checks (parsable, legal moves, no conflicts, goals
  reached, correct starts, the right agents, no holes, on the grid); the failure breakdown
  counts, per size, the answers that failed each one.
- Decide the next distribution from the evaluation results you are shown."""


REASONING_GYM_GUIDELINE = """\
You choose the training distribution of the next round; you never write questions yourself.
Each bucket is one task at one difficulty level (<task>:<level>, level 0 is the easiest); the
levels and their settings come from reasoning-gym's own curricula.
- Each bucket gets a share of the round's training questions; the shares decide how the
  training data is spread over tasks and levels.
- The failure counts say how answers went wrong: "no_answer" (no answer inside \\boxed{}),
  "wrong", "partial".
- Decide the next distribution from the evaluation results you are shown."""

GENERIC_GUIDELINE = ("You choose how the next round's training data is spread over the buckets; decide it "
                     "from the evaluation results you are shown.")

MAPF_FINDINGS_GUIDELINE = """\
You choose the training distribution of the next round; you never write instances yourself.
- Spend most of the data on sizes near your competence frontier: sizes whose valid rate is
  between about 20% and 80%, and the next larger size. That is where training helps most.
- Sizes you already solve (valid rate near 100%) give little learning signal: keep a small data
  share so they are not forgotten, or make them harder (more holes, more waits).
- Sizes you almost never solve give no signal either: give them little data, or make them easier
  (fewer holes, fewer waits) until some attempts succeed.
- Read the failed checks: conflict failures call for more instances that need a wait
  (wait_ratio); hole failures for more holes (hole_ratio) at sizes you can otherwise solve;
  parse or agent-count failures mean the answer format itself is not yet learned: favour small maps.
- Change only what the failure breakdown points at; keep the other sizes as they are.
- The evaluation uses more agents (3, 4, 5) than training (2), on 20%-hole maps."""

REASONING_GYM_FINDINGS_GUIDELINE = """\
You choose the training distribution of the next round; you never write questions yourself.
Each bucket is one task at one difficulty level (<task>:<level>, level 0 is the easiest); the
levels and their settings come from reasoning-gym's own curricula.
- Spend most of the data on buckets whose accuracy is between about 20% and 80%, and on the next
  level of a task whose current level you solve. That is where training helps most.
- Buckets you already solve (accuracy near 100%) give little learning signal: keep a small share
  so they are not forgotten.
- Buckets you never solve give no signal either: give them little data until the level below
  them is solved.
- Read the failures: "no_answer" means the answer was not put inside \\boxed{}: the format is not
  yet learned, so favour the easiest levels; "wrong" and "partial" at a level you otherwise
  solve call for more data at that level.
- Change only what the failure breakdown points at; keep the other buckets as they are."""

GENERIC_FINDINGS_GUIDELINE = ("Move training data towards what the evaluation shows you get partly right; keep "
                              "small shares of what you master; make edits only where the results point.")

GUIDELINE_VARIANTS: dict[str, dict[str, str]] = {
    "neutral": {"mapf_frozenlake": MAPF_GUIDELINE, "reasoning_gym": REASONING_GYM_GUIDELINE,
                "*": GENERIC_GUIDELINE},
    "paper_findings": {"mapf_frozenlake": MAPF_FINDINGS_GUIDELINE,
                       "reasoning_gym": REASONING_GYM_FINDINGS_GUIDELINE, "*": GENERIC_FINDINGS_GUIDELINE},
}
"""Module G's text per variant and testbed (``*``: any other testbed). ``neutral`` (the default,
used by every preset V2-V6) describes the task, the fields and the checks and states none of the
Trainee-to-Trainer paper's findings. ``paper_findings`` also gives the behaviours the paper
reports as emerging under V6 (data at the competence frontier, local edits, the evaluation's
agents and hole ratio): handing them to the engineer from V2 on confounds the V1-V6 comparison,
so it is a named variant for ablations, never a preset's default."""
GUIDELINES = GUIDELINE_VARIANTS["neutral"]
"""Module G's default (neutral) heuristics per testbed."""


def render_guideline(testbed_name: str, bounds: Mapping[str, tuple[float, float]] | None = None,
                     field_docs: Mapping[str, str] | None = None, unit: str = "map size",
                     variant: str = "neutral") -> str:
    """Module G: the ``variant``'s testbed heuristics (``GUIDELINE_VARIANTS``), then each field's
    meaning and legal range (per ``unit``)."""
    if variant not in GUIDELINE_VARIANTS:
        raise ValueError(f"unknown guideline variant {variant!r}; choose one of {', '.join(GUIDELINE_VARIANTS)}")
    texts = GUIDELINE_VARIANTS[variant]
    lines = [texts.get(testbed_name, texts["*"])]
    if bounds:
        lines.append(f"Fields (per {unit}):")
        for field, (lo, hi) in bounds.items():
            doc = (field_docs or {}).get(field, "")
            lines.append(f"- {field} in [{lo:g}, {hi:g}]" + (f": {doc}" if doc else ""))
    return "\n".join(lines)


# -- H ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HistoryEntry:
    """One earlier round as module H shows it."""

    round: int
    """Round index."""
    proposal: Mapping[str, Any]
    """The proposal the round trained on (as dumped JSON)."""
    breakdown: EvalBreakdown = _field(default_factory=EvalBreakdown)
    """The round's validation failure breakdown."""
    scores: Mapping[str, float] = _field(default_factory=dict)
    """The round's validation ``bucket_scores``."""


def render_history(entries: Sequence[HistoryEntry], *, space: BucketSpace, include_initial_config: bool,
                   max_rounds: int) -> str:
    """Module H from ``HistoryEntry``s (oldest first): one (failure breakdown, config) pair per
    round, as the Trainee-to-Trainer paper describes it: the config the round trained on (per
    bucket of the testbed's ``space``, its share and knobs), then the failure breakdown of the
    evaluation after that training, rendered as module F renders the latest one
    (``render_failures``).

    Shows the last ``max_rounds`` entries; round 0's config is hidden unless
    ``include_initial_config`` (its breakdown stays).
    """
    shown = list(entries)[-max_rounds:]
    if not shown:
        return "(no earlier rounds)"
    width = max(6, *(len(b) for b in space.buckets))
    fields = " ".join(f"{n[:5]:>5}" for n in ("share", *(k.name for k in space.knobs)))
    blocks = []
    for entry in shown:
        hide = entry.round == 0 and not include_initial_config
        buckets = _read_or_empty(space, entry.proposal)
        title = f"round {entry.round}" + (" (random start config, not shown)" if hide else "")
        lines = [title, "  config trained on:", f"    {space.unit.split()[-1]:<{width}}{fields}"]
        for name in space.buckets:
            bucket = buckets.get(name)
            values = [None] * (1 + len(space.knobs)) if bucket is None or hide else \
                [bucket.share, *(bucket.knobs[k.name] for k in space.knobs)]
            lines.append(f"    {name:<{width}}" + " ".join("    -" if hide else _num(v) for v in values))
        lines.append("  failure breakdown after training on it:")
        failures = render_failures(entry.breakdown, entry.scores, space)
        lines.extend(f"    {line}" for line in failures.splitlines())
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def result_columns(breakdown: EvalBreakdown, scores: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """H's result columns: ``valid`` and ``optimal`` per size from MAPF suites, else ``accuracy``
    per bucket from the eval's ``bucket_scores``."""
    if breakdown.suites:
        return {"valid": valid_rates_by_size(breakdown), "optimal": optimal_rates_by_size(breakdown)}
    return {"accuracy": {str(b): float(v) for b, v in scores.items()}}


def _read_or_empty(space: BucketSpace, proposal: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return space.read(proposal)
    except (ValueError, KeyError, TypeError):
        return {}


def _num(x: Any) -> str:
    return f"{float(x):5.3f}" if isinstance(x, (int, float)) else "  n/a"


# -- S ------------------------------------------------------------------------------------------

def render_summary(summary: str | None) -> str:
    """Module S: the previous summary verbatim, or a line saying there is none."""
    if summary is None or not summary.strip():
        return "(none: this is your first design, or your previous answer had no summary)"
    return summary.strip()


# -- T ------------------------------------------------------------------------------------------

def render_training(run_info: Mapping[str, Any], *, round_index: int, total_rounds: int,
                    variant: str, reward: Mapping[str, Any] | None = None) -> str:
    """Module T: bookkeeping, or bookkeeping plus the RL details (``variant="full"``)."""
    epochs = run_info.get("epochs_per_round")
    steps = run_info.get("max_steps_per_round")
    done = round_index + 1
    lines = [f"Round {done} of {total_rounds} has finished; the config you write trains round {done + 1}."]
    if steps:
        lines.append(f"Each round is capped at {steps} optimizer updates.")
    elif isinstance(epochs, (int, float)):
        lines.append(f"Each round trains {epochs:g} epochs over its instances: {epochs * done:g} of "
                     f"{epochs * total_rounds:g} total epochs are done.")
    if variant != "full":
        return "\n".join(lines)
    algo = run_info.get("algorithm") or run_info.get("trainer") or "GRPO"
    lines.append(f"Algorithm: {algo}. For each prompt, {run_info.get('num_generations', '?')} answers "
                 f"are sampled (temperature {run_info.get('temperature', '?')}); each answer's "
                 "advantage is its reward minus the group mean (divided by the group's std).")
    lines.append(f"Updates: {run_info.get('prompts_per_step', '?')} prompts per update, learning rate "
                 f"{run_info.get('learning_rate', '?')}, clip range {run_info.get('epsilon', '?')}, "
                 f"KL coefficient {run_info.get('beta', '?')}, at most "
                 f"{run_info.get('max_completion_length', '?')} completion tokens.")
    if not reward or "weights" not in reward:  # a testbed without MAPF's adaptive reward
        lines.append("Reward: the testbed's verifier score of each answer, in [0, 1] (1 = correct).")
        return "\n".join(lines)
    lines.append("Reward = w_acc * accuracy + w_len * length. accuracy is 0 unless all eight checks "
                 "pass; then 1.0 at the optimal cost, falling linearly to 0.3 at a gap of twice the "
                 "optimal cost. length is 0 up to 1500 tokens, falling linearly to -1 at 4096.")
    lines.append("Weights follow an EMA of the share of short answers (<= 1500 tokens): (0.5, 0.5) "
                 "below 0.5, rising linearly to (0.8, 0.2) at 0.9 and above.")
    w_acc, w_len = reward["weights"]
    lines.append(f"Current weights: w_acc={w_acc:.2f}, w_len={w_len:.2f} "
                 f"(EMA of short answers {float(reward.get('ema', 0.0)):.2f}).")
    return "\n".join(lines)


# -- all modules ----------------------------------------------------------------------------------

def build_context(spec: ContextSpec, *, failure: str | None = None, guideline: str | None = None,
                  history: str | None = None, summary: str | None = None,
                  training: str | None = None) -> str:
    """Join the rendered modules that ``spec`` switches on, under their section titles."""
    parts = {"F": (spec.failure, failure), "G": (spec.guideline, guideline),
             "H": (spec.history, history), "S": (spec.summary, summary),
             "T": (spec.training is not None, training)}
    blocks = []
    for letter, (on, text) in parts.items():
        if on:
            if text is None:
                raise ValueError(f"module {letter} is switched on but was not rendered")
            blocks.append(f"## {SECTION_TITLES[letter]}\n{text}")
    return "\n\n".join(blocks)
