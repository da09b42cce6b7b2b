"""``engineer.designs_per_round: 0``: the spade engineer with its designer off hands the starting pool
on unchanged every round, as the ``fixed`` engineer does, and still supplies the designer warm-start
examples, so a fixed-environment run starts from the same warm-started model as a SPADE run."""

from __future__ import annotations

import numpy as np

from curriculum.core.pool import PoolEnvironment
from engineers.base import DesignContext
from engineers.spade.config import SpadeEngineerConfig
from engineers.spade.engineer import SpadeEngineer
from testbeds.spade.testbed import SpadeProposal


class RefusingPolicy:
    """A designer that must not be asked."""

    def generate(self, tasks, **_):
        raise AssertionError("the designer was asked with designs_per_round 0")


def _engineer(run_dir, **changes) -> SpadeEngineer:
    config = SpadeEngineerConfig.model_validate(
        {"name": "spade", "corpus": "none", "diversity": {"embedding": "tfidf"}, "design_mode": "structured",
         "designer_warmstart": True, "designer_warmstart_examples": 6,
         "warmstart_seeds": ["key_position", "secret_suffix", "number_code"]} | changes)
    return SpadeEngineer(config, run_dir=str(run_dir))


def test_designer_off_hands_the_starting_pool_on_with_the_same_warm_start(tmp_path):
    start = SpadeProposal(environments=[PoolEnvironment(hash=f"rg-{n}", setting="games", skill=n, hint="",
                                                        program="class E: pass") for n in ("gcd", "lcm")])
    off, on = _engineer(tmp_path / "off", designs_per_round=0), _engineer(tmp_path / "on")
    try:
        assert not off.designs_round0  # round 0 trains on the testbed's starting pool
        proposal = start
        for r in range(3):
            design = off.design(DesignContext(round=r, total_rounds=4, history=[], testbed=None, proposal=proposal,
                                              rng=np.random.default_rng(r), policy=RefusingPolicy()))
            assert design.raw == {"environments": [e.model_dump(mode="json") for e in start.environments],
                                  "designs": []}
            proposal = SpadeProposal.model_validate(design.raw)
        assert off.memory.entries() == []
        examples = off.warmstart_examples(6, 0)
        assert len(examples) == 6 and examples == on.warmstart_examples(6, 0)
    finally:
        off.close()
        on.close()
