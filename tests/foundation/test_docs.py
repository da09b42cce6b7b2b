"""The repository speaks of the product, and its documents agree with each other.

* No tracked text file tells how the project was made: working periods, who ran what beside
  whom, issue numbers, hand-over notes, or paths and documents outside the repository. The word
  list is ``HISTORY``, here in the test; ``history_problems`` is the checker.
* Every figure in README.md appears, with the same value, on the results page
  (``scripts/check_readme_figures.py``).
* The tutorial ``docs/tutorial_engineer.md``'s code block runs: it registers a toy engineer and
  runs it for a short simulated-trainer run.
* ``docs/index.md`` names every document under ``docs/``.
* ``docs/architecture.md``'s table "What fits what" names every registered testbed, engineer and
  trainer in its kind's row.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each pattern is a way the development history leaks into the product (case-insensitive).
# Kept narrow enough that product words ("a pytest session fixture", "--new-session", "a session
# token", "game helpers") pass: see test_product_words_pass.
HISTORY: dict[str, str] = {
    r"\bsessions? \d": "a numbered working period",
    r"\b(this|that|previous|next|last|each|a later|the) session\b(?![ -]token)": "a working period",
    r"\bworking periods?\b": "a working period",
    r"\bissues? ?#?\d+": "an issue number",
    r"\b(the|this|that) issue\b": "an issue",
    r"\bhelper agents?\b": "who ran what",
    r"\bthe (SPADE|other|lead's) helper\b": "who ran what",
    r"\bhelper's\b|\bhelpers'": "who ran what",
    r"\bhelpers (ran|were)\b": "who ran what",
    r"\bthe lead\b|\blead's\b": "who ran what",
    r"\bI (stopped|measured|turned|killed|copied)\b": "who ran what",
    r"\bmy (unit )?tests\b": "who ran what",
    r"\b(stop|closing|hand-?over) note\b": "a hand-over note",
    r"\bdev(elopment)? machine\b": "the machine the project was developed on",
    r"\.\./shared\b": "a path outside the repository",
    r"(?<![\w.])/work/": "a path outside the repository",
    r"\bSPEC\.md\b|\bSPEC §": "a document outside the repository",
}
_HISTORY = [(re.compile(p, re.IGNORECASE), why) for p, why in HISTORY.items()]

# Lines quoted as history in the review that led to this test, verbatim from the files they
# were in; each must be caught.
QUOTED = [
    "`make test` runs the test suite (946 tests, 17 min on the quiet slow machine of sessions "
    "7–10, 20 min there beside one training run; 12 minutes on the quiet 2-core dev machine of "
    "session 6, 16 on the slower one of session 7, 18 there beside a one-thread training run;",
    "Measured on the 2-core machine (`docs/results.md`, \"SPADE on the CPU\", session 5): 13:23 for a",
    "    steps: 64                     # 48 steps: 13.9% (fp32, session 5); 64 steps in bf16: 22.2% "
    "(session 6)",
    "    call of a run wrote the same library game whatever its skill (docs/results.md, session 5).\"\"\"",
    "docs/results.md's session 4 warm start), 364 / (400 + 512) = 0.40.\"\"\"",
    "#     (../shared/SPEC.md 1.8 note); the demo instead starts on the small maps;",
    "**Load:** four helper agents ran test suites at nice 19 the whole time (load average 6–11), so",
    "  run by the lead on main at f822e43, i.e. *with* the completion-only SFT head, fresh warm-start",
    "## 2c. Session 4: page faults, and a recipe that did worse, measured 2026-12-01 14:43–17:12",
    "once budget moves to the sizes the model can solve). But the targets of issue 12 are **not met**:",
    "real warm-start steps (`/work/exp/wsbench.py`: the demo's examples, passes of 2), quiet machine",
    "for its last 8 minutes the test suite ran beside it at nice 19; the SPADE helper's runs shared",
    "The paper's MAPF-FrozenLake set-up (SPEC §1.7): Qwen3-4B, GRPO with 128 prompts x 8 samples",
    "which development machine, in which working period, beside which other job",
]

# Product text that must not be flagged.
PRODUCT = [
    '@pytest.fixture(scope="session")',
    "`--unshare-all --unshare-user --disable-userns --die-with-parent --new-session`",
    "Renew the session token.",
    "kill the instance's session.",
    '"""Helpers shared by the sandbox tests."""',
    "helpers for single-player text games (``extract_boxed``, ``normalize_answer``).",
    "The eight checks, in the order of the Trainee-to-Trainer paper.",
    "Measured on AMD EPYC, 2 cores, 69 GFLOP/s: 35:14 fresh.",
    "left wall. Unfortunately I ran out of space to write the code.",  # a model's answer (fixture)
]

# This file holds the word list and the quoted lines, so it is the one file the scan skips.
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()


def history_problems(text: str) -> list[str]:
    """Every ``line N: 'match' (reason)`` in ``text`` that tells how the project was made."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, why in _HISTORY:
            for match in pattern.finditer(line):
                found.append(f"line {number}: {match.group(0)!r} ({why})")
    return found


def tracked_text_files() -> list[Path]:
    """The repository's tracked files that decode as UTF-8 text (binary files are skipped)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    paths = []
    for name in listed.stdout.decode().split("\0"):
        path = ROOT / name
        if not name or name == SELF or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        paths.append(path)
    return paths


@pytest.mark.parametrize("line", QUOTED)
def test_history_lines_are_caught(line):
    assert history_problems(line), f"not caught: {line!r}"


@pytest.mark.parametrize("line", PRODUCT)
def test_product_words_pass(line):
    assert history_problems(line) == []


def test_no_tracked_file_tells_the_history():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    problems = []
    files = tracked_text_files()
    assert len(files) > 100, "git ls-files found too few files to be this repository"
    for path in files:
        for problem in history_problems(path.read_text(encoding="utf-8")):
            problems.append(f"{path.relative_to(ROOT)} {problem}")
    assert not problems, "development history in the product:\n" + "\n".join(problems)


def _figures_module():
    spec = importlib.util.spec_from_file_location("check_readme_figures",
                                                  ROOT / "scripts" / "check_readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_figures_are_on_the_results_page():
    script = ROOT / "scripts" / "check_readme_figures.py"
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_figure_check_fails_when_a_readme_number_changes(tmp_path):
    check = _figures_module()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    results = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert check.missing_figures(readme, results) == []
    figures = check.figures(readme)
    assert len(figures) >= 10, "the README should state the demo's measured numbers"
    # Change each kind of figure once: a percentage, a wall time, a rate.
    for old in [f for f in ("22.2 %", "13.9 %", "25:49", "35:14", "69 GFLOP/s") if f in readme]:
        changed = readme.replace(old, _bump(old, check.figures(results, code=True), check.figures), 1)
        assert changed != readme
        assert check.missing_figures(changed, results), f"changing {old!r} went unnoticed"
    # And end to end: the script exits 1 on a README whose number differs.
    (tmp_path / "docs").mkdir()
    wall = next(f for f in sorted(figures) if ":" in f)  # a wall time the README states
    bumped = _bump(wall, check.figures(results, code=True), check.figures)
    (tmp_path / "README.md").write_text(readme.replace(wall, bumped, 1), encoding="utf-8")
    (tmp_path / "docs" / "results.md").write_text(results, encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_readme_figures.py"),
                           "--root", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1 and bumped in done.stdout


def _bump(figure: str, taken: set[str], figures) -> str:
    """``figure`` with its last digit changed to a value the results page does not state
    (``"22.2 %"`` → ``"22.3 %"``; ``"69 GFLOP/s"`` skips ``"60"`` and ``"70"``, which it does)."""
    i = max(i for i, c in enumerate(figure) if c.isdigit())
    for step in range(1, 10):
        new = figure[:i] + str((int(figure[i]) + step) % 10) + figure[i + 1:]
        if not figures(new) & taken:
            return new
    raise AssertionError(f"every neighbour of {figure!r} is on the results page")


def test_figures_are_read_as_figures():
    check = _figures_module()
    text = ("0 % valid → 16.7 % after 20:47, 1:36:34 in all; 69 GFLOP/s, 518 MB, 3.8 GB, 2.52x, "
            "−27 %, 0.185 [0.167, 0.194]; not: 3x3 maps, 64 steps, `--seeds 3`, SmolLM2-135M\n"
            "```bash\nmake demo  # 99.9 %\n```\n")
    assert check.figures(text) == {"0%", "16.7%", "20:47", "1:36:34", "69 GFLOP/s", "518 MB",
                                   "3.8 GB", "2.52x", "27%", "0.185", "0.167", "0.194"}


def test_docs_index_names_every_document():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for doc in sorted((ROOT / "docs").glob("*.md")):
        if doc.name != "index.md":
            assert f"({doc.name})" in index, f"docs/index.md does not list {doc.name}"


def fits_table_rows(text: str) -> dict[str, str]:
    """Kind → its row of the "What fits what" table of ``docs/architecture.md``."""
    section = text.split("## What fits what", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return {line.split("|")[1].strip(): line for line in rows}


def test_architecture_names_every_registered_plugin():
    from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS, shipped

    rows = fits_table_rows((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    for registry in (TESTBEDS, ENGINEERS, TRAINERS):
        plugins = [e.name for e in registry.entries() if e.name in shipped()[registry.kind] or e.source != "curriculum"]
        missing = [name for name in plugins if f"`{name}`" not in rows.get(registry.kind, "")]
        assert not missing, (f"docs/architecture.md, 'What fits what': the {registry.kind} row does not name "
                             f"{', '.join(missing)} (with what each declares)")


def _tutorial_code() -> str:
    text = (ROOT / "docs" / "tutorial_engineer.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1, "the tutorial has exactly one python block: the whole engineer file"
    return blocks[0]


def test_tutorial_engineer_runs(tmp_path):
    """The tutorial's file, saved as my_engineer.py and run as a script, as the reader would."""
    (tmp_path / "my_engineer.py").write_text(_tutorial_code(), encoding="utf-8")
    done = subprocess.run([sys.executable, "my_engineer.py", str(tmp_path / "runs")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**_env(), "PYTHONPATH": f"{ROOT}"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hardest_first" in done.stdout and "final score" in done.stdout, done.stdout


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
