"""The checkpoint engineer runs under ``curriculum compare`` (scripted model, simulated learner)."""

from __future__ import annotations

import json

from curriculum.compare import CompareSpec, compare
from curriculum.rundir import RunDir


def test_checkpoint_engineer_under_compare(tmp_path):
    spec = CompareSpec(engineers=["checkpoint_scripted", "random"], testbed="mapf_frozenlake", seeds=1,
                       rounds=3, out=tmp_path, trainer="simulated", jobs=1,
                       overrides=["testbed.eval_agents=[3]", "testbed.eval_instances_per_size=4",
                                  "tasks_per_round=32"])
    result = compare(spec)
    assert {o.status for o in result.outcomes} == {"new"}
    run = RunDir.open(tmp_path / "runs" / "checkpoint_scripted-seed0")
    assert run.completed_rounds() == [0, 1, 2]
    # The scripted answer moves budget to 5x5 (data 0.4 before renormalisation); project applies it.
    design = json.loads((run.round_dir(0) / "design.json").read_text())
    assert design["design"]["raw"]["sizes"]["5x5"]["hole_ratio"] == 0.1
    assert design["projected"]["sizes"]["5x5"]["hole_ratio"] == 0.1
    assert json.loads((run.round_dir(1) / "proposal.json").read_text()) == design["projected"]
    engineers = {r["engineer"] for r in result.data["runs"]}
    assert engineers == {"checkpoint_scripted", "random"}
