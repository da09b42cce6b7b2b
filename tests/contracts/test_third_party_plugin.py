"""A plugin package from outside this repository: registered by entry point, checked by the shared
contract suites, run by ``curriculum compare``.

The test writes, in a temporary directory, the package ``addition_plugin`` (a testbed of
``a + b`` questions bucketed by digit count, and an engineer that moves budget to the easiest
unsolved bucket) together with its installed metadata (``addition_plugin-0.1.dist-info``: the
``METADATA`` and ``entry_points.txt`` that ``pip install`` would write). The directory goes on
``PYTHONPATH`` of subprocesses only — nothing is installed into this environment and no file
of the repository changes (checked with ``git status``). Each entry point names the plugin
class, which declares what it fits on itself (``curriculum.registry.CLASS_DECLARATIONS``); the
plugin's name is written once, as the entry point's name.

In the subprocesses: the registry lists both plugins with the distribution as their source; the
shared contract suites (``tests/contracts/test_testbeds.py``, ``test_engineers.py``) run on them
(the engineer on every bucket testbed it fits, shipped ones included); ``curriculum compare``
runs the plugin engineer against ``fixed`` on the plugin testbed with the simulated learner, and
the plugin engineer on MAPF-FrozenLake.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TESTBED = '''
"""``addition``: questions ``a + b = ?`` whose operands have d digits; bucket ``d<d>`` (d = 1…4).

Proposal: ``{"buckets": {"d1": {"share": s1}, …}}`` (a bucket space without knobs). Eval suites:
``per_bucket`` questions per bucket from their own seeds; training never draws a held-out question.
Reward 1 for the exact sum as the reply's last integer, else 0.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.buckets import allocate, project_buckets
from curriculum.core.config import PluginConfig
from curriculum.core.spaces import BucketSpace
from curriculum.core.types import Completion, EvalReport, Task
from testbeds.base import Testbed

BUCKETS = ("d1", "d2", "d3", "d4")


class Share(BaseModel):
    model_config = ConfigDict(extra="forbid")
    share: float = Field(ge=0.0, le=1.0)


class AdditionProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    buckets: dict[str, Share]


class AdditionConfig(PluginConfig):
    """Settings of the addition testbed (its name is the entry point's)."""

    per_bucket: int = Field(6, ge=1)
    """Eval questions per bucket and suite."""


class AdditionTestbed(Testbed):
    """Sums of two d-digit numbers, one bucket per d."""

    config_class = AdditionConfig
    task_kinds = ("prompt", "bucketed")
    proposal_model: ClassVar[type[BaseModel]] = AdditionProposal
    proposal_space = BucketSpace(buckets=BUCKETS, unit="digit count")

    def __init__(self, config: AdditionConfig, *, seed: int = 0) -> None:
        self.config = config
        self.seed = seed
        self.seen = 0

    def _proposal(self, shares):
        return AdditionProposal(buckets={b: Share(share=shares[b]) for b in BUCKETS})

    def initial_proposal(self, rng):
        return self._proposal({b: 1 / len(BUCKETS) for b in BUCKETS})

    def random_proposal(self, rng):
        draw = rng.dirichlet(np.ones(len(BUCKETS)))
        return self._proposal({b: float(x / draw.sum()) for b, x in zip(BUCKETS, draw)})

    def project(self, raw, previous):
        buckets, changes = project_buckets(self.proposal_space, raw, self.proposal_space.read(previous))
        return self._proposal({b: v.share for b, v in buckets.items()}), changes

    def _task(self, prefix: str, bucket: str, rng) -> Task:
        d = BUCKETS.index(bucket) + 1
        a, b = (int(x) for x in rng.integers(10 ** (d - 1), 10 ** d, size=2))
        return Task(id=f"{prefix}-{bucket}-{a}-{b}", messages=[{"role": "user", "content": f"{a} + {b} = ?"}],
                    data={"answer": a + b}, features={"bucket": bucket})

    def _suite(self, suite: str) -> list[Task]:
        rng = np.random.default_rng([{"validation": 1, "test": 2}[suite], 7])
        return [self._task(suite, b, rng) for b in BUCKETS for _ in range(self.config.per_bucket)]

    def held_out_keys(self):
        return frozenset(self.canonical(t) for s in self.eval_suites for t in self._suite(s))

    def sample(self, proposal, n, seed):
        held, rng, tasks = self.held_out_keys(), np.random.default_rng([seed, 3]), []
        for bucket, count in allocate({b: v.share for b, v in self.proposal_space.read(proposal).items()}, n).items():
            while count:
                task = self._task(f"train{len(tasks)}", bucket, rng)
                if self.canonical(task) not in held:
                    tasks.append(task)
                    count -= 1
        return tasks

    def score(self, task: Task, completion: Completion) -> tuple[float, dict[str, Any]]:
        numbers = re.findall(r"-?\\d+", completion.text)
        correct = bool(numbers) and int(numbers[-1]) == task.data["answer"]
        return float(correct), {"correct": correct}

    def simulated_answer(self, task: Task, correct: bool, rng) -> str:
        return f"{task.data['answer'] if correct else task.data['answer'] + 1}"

    def evaluate(self, policy, *, seed: int = 0, suite: str = "validation") -> EvalReport:
        tasks = self._suite(self.check_suite(suite))
        rewards = [self.score(t, c)[0] for t, c in zip(tasks, policy.generate(tasks, seed=seed))]
        per = {b: float(np.mean([r for t, r in zip(tasks, rewards) if t.features["bucket"] == b])) for b in BUCKETS}
        score = float(np.mean(rewards))
        return EvalReport(score=score, metrics={"accuracy": score}, bucket_scores=per, suite=suite,
                          task_scores={t.id: r for t, r in zip(tasks, rewards)})

    def observe_training_batch(self, completions):
        self.seen += len(completions)

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = int(state["seen"])
'''

ENGINEER = '''
"""``easiest_unsolved``: most of the budget to the easiest bucket whose success is under a bar."""

from __future__ import annotations

from pydantic import Field

from curriculum.core.buckets import bucket_scores, space_of
from curriculum.core.config import PluginConfig
from curriculum.core.records import Design
from curriculum.core.spaces import Bucket
from engineers.base import Engineer


class EasiestUnsolvedConfig(PluginConfig):
    """Settings of the engineer (its name is the entry point's)."""

    bar: float = Field(0.8, ge=0.0, le=1.0)
    """Success rate at which a bucket counts as solved."""
    focus: float = Field(0.7, ge=0.0, le=1.0)
    """Share the chosen bucket gets; the rest is spread evenly."""


class EasiestUnsolved(Engineer):
    """Focus on the easiest bucket the last eval did not solve."""

    config_class = EasiestUnsolvedConfig
    fits = ("buckets",)

    def design(self, ctx):
        space = space_of(ctx.testbed)
        current = space.read(ctx.proposal)
        success = bucket_scores(ctx.history[-1].eval)
        target = next((b for b in space.buckets if success.get(b, 0.0) < self.config.bar), space.buckets[-1])
        rest = (1 - self.config.focus) / max(1, len(current) - 1)
        new = {b: Bucket(share=self.config.focus if b == target else rest, knobs=v.knobs) for b, v in current.items()}
        return Design(raw=space.write(new, ctx.proposal.model_dump(mode="json")), notes={"target": target})
'''

ENTRY_POINTS = '''
[curriculum.testbeds]
addition = addition_plugin.testbed:AdditionTestbed

[curriculum.engineers]
easiest_unsolved = addition_plugin.engineer:EasiestUnsolved
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A directory holding the package and its installed metadata, as ``pip install`` leaves them."""
    root = tmp_path_factory.mktemp("site")
    package = root / "addition_plugin"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "testbed.py").write_text(TESTBED)
    (package / "engineer.py").write_text(ENGINEER)
    info = root / "addition_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: addition-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS).lstrip())
    return root


def _run(site: Path, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{args}\nstdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    return result


def _git_status() -> str | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout


def test_the_plugin_is_not_importable_here():
    """The package lives only in the temporary site: this process (and the repository) lacks it."""
    from curriculum.registry import ENGINEERS, TESTBEDS

    assert "addition" not in TESTBEDS and "easiest_unsolved" not in ENGINEERS


def test_entry_points_register_both_plugins(site):
    code = textwrap.dedent('''
        import json
        from curriculum.registry import ENGINEERS, TESTBEDS, check_fit, engineers_for
        tb, eng = TESTBEDS.get("addition"), ENGINEERS.get("easiest_unsolved")
        check_fit("easiest_unsolved", "addition", "simulated")
        print(json.dumps({"testbed": [tb.source, tb.offers, list(tb.tasks), tb.load().__name__,
                                      tb.load_config().__name__, tb.description],
                          "engineer": [eng.source, list(eng.fits), eng.load().__name__, eng.description],
                          "for_addition": engineers_for("addition")}))
    ''')
    out = json.loads(_run(site, ["-c", code]).stdout.strip().splitlines()[-1])
    assert out["testbed"] == ["addition-plugin", "buckets", ["prompt", "bucketed"], "AdditionTestbed",
                              "AdditionConfig", "Sums of two d-digit numbers, one bucket per d."]
    assert out["engineer"] == ["addition-plugin", ["buckets"], "EasiestUnsolved",
                               "Focus on the easiest bucket the last eval did not solve."]
    assert {"fixed", "random", "frontier", "easiest_unsolved"} <= set(out["for_addition"])
    listed = _run(site, ["-c", "from curriculum.cli import main; main()", "list"]).stdout
    assert "addition" in listed and "easiest_unsolved" in listed


def test_the_plugins_pass_the_shared_contract_suites(site):
    before = _git_status()
    result = _run(site, ["-m", "pytest", "-v", "-p", "no:cacheprovider", "tests/contracts/test_testbeds.py",
                         "tests/contracts/test_engineers.py", "-k", "addition or easiest_unsolved"], timeout=300)
    passed = {line.split("::")[-1].split(" ")[0] for line in result.stdout.splitlines() if " PASSED" in line}
    expected = {f"{test}[addition]" for test in ("test_sampling_is_deterministic",
                                                 "test_random_proposals_are_fixed_points_of_project",
                                                 "test_score_never_raises_and_state_round_trips")}
    expected |= {f"{test}[{engineer}-{testbed}]" for test in ("test_engineer_contract",
                                                             "test_engineer_same_seed_same_design")
                 for engineer, testbed in [("easiest_unsolved", "addition"), ("easiest_unsolved", "mapf_frozenlake"),
                                           ("easiest_unsolved", "reasoning_gym"), ("fixed", "addition"),
                                           ("frontier", "addition"), ("learnability", "addition")]}
    assert expected <= passed, f"not passed: {sorted(expected - passed)}\n{result.stdout[-3000:]}"
    assert " FAILED" not in result.stdout and " ERROR" not in result.stdout
    assert _git_status() == before


def test_compare_runs_the_plugins(site, tmp_path):
    before = _git_status()
    out = tmp_path / "compare"
    _run(site, ["-c", "from curriculum.cli import main; main()", "compare", "--engineers", "fixed,easiest_unsolved",
                "--testbed", "addition", "--trainer", "simulated", "--seeds", "2", "--rounds", "3",
                "--out", str(out), "--set", "tasks_per_round=48", "--set", "eval_before_training=true"])
    data = json.loads((out / "compare.json").read_text())
    assert (data["testbed"], data["trainer"], data["simulated"]) == ("addition", "simulated", True)
    assert {e: data["summary"][e]["n"] for e in ("fixed", "easiest_unsolved")} == {"fixed": 2, "easiest_unsolved": 2}
    rounds = out / "runs" / "easiest_unsolved-seed0" / "rounds"
    target = json.loads((rounds / "round_000" / "design.json").read_text())["design"]["notes"]["target"]
    shares = {b: v["share"] for b, v in json.loads((rounds / "round_001" / "proposal.json").read_text())["buckets"].items()}
    assert max(shares, key=shares.get) == target and shares[target] == pytest.approx(0.7)
    fixed = json.loads((out / "runs" / "fixed-seed0" / "rounds" / "round_001" / "proposal.json").read_text())
    assert {v["share"] for v in fixed["buckets"].values()} == {0.25}  # fixed kept the uniform start
    state = json.loads((rounds / "round_001" / "checkpoint" / "simulated_state.json").read_text())
    assert sorted(state["competence"]) == ["d1", "d2", "d3", "d4"]  # the learner tracked the plugin's buckets
    assert _git_status() == before


def _point(name: str, load, value: str = "pkg.mod:Thing"):
    from types import SimpleNamespace

    return SimpleNamespace(name=name, value=value, load=load, dist=SimpleNamespace(name="some-dist"))


def _registry_with(monkeypatch, kind: str, point):
    from curriculum import registry as reg

    monkeypatch.setattr(reg.metadata, "entry_points", lambda group: [point] if group == f"curriculum.{kind}s" else [])
    return reg.Registry(kind)


def test_a_class_missing_its_declarations_is_refused_naming_the_entry_point(monkeypatch):
    from curriculum.core.config import PluginConfig
    from curriculum.registry import PluginError
    from engineers.base import Engineer

    class Bare(Engineer):
        config_class = PluginConfig

        def design(self, ctx):  # pragma: no cover - never called
            raise AssertionError

    registry = _registry_with(monkeypatch, "engineer", _point("bare", lambda: Bare))
    with pytest.raises(PluginError, match=r"entry point bare = 'pkg.mod:Thing' \(curriculum.engineers, from "
                                          r"some-dist\): the class must declare fits"):
        registry.names()


def test_an_entry_point_that_cannot_load_names_its_distribution(monkeypatch):
    from curriculum.registry import PluginError

    def broken():
        raise ModuleNotFoundError("No module named 'pkg'")

    registry = _registry_with(monkeypatch, "testbed", _point("gone", broken))
    with pytest.raises(PluginError, match=r"gone = 'pkg.mod:Thing' .*from some-dist\) cannot be loaded: "
                                          r"ModuleNotFoundError"):
        registry.get("gone")


def test_a_declared_class_registers_with_its_docstring_and_checks_its_declarations(monkeypatch):
    from curriculum.core.config import PluginConfig
    from curriculum.registry import PluginError
    from engineers.fixed import FixedEngineer

    class Declared(FixedEngineer):
        """First line is the description.

        More text."""

        config_class = PluginConfig
        fits = "buckets"

    entry = _registry_with(monkeypatch, "engineer", _point("declared", lambda: Declared)).get("declared")
    assert (entry.fits, entry.description, entry.source) == (("buckets",), "First line is the description.", "some-dist")
    Declared.fits = ("tables",)
    with pytest.raises(PluginError, match="must declare fits= some of"):
        _registry_with(monkeypatch, "engineer", _point("declared", lambda: Declared)).names()
