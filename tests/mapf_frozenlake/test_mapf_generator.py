"""Generator: counts, determinism (any worker count), solvable instances with optimal plans,
needs-wait flags, requested vs achieved ratios, and termination on infeasible requests."""

import numpy as np
import pytest
from mapf_brute import brute_force

from testbeds.mapf_frozenlake.config import SIZES, GeneratorConfig, SizeParams, random_config, uniform_config
from testbeds.mapf_frozenlake.generator import generate, largest_remainder
from testbeds.mapf_frozenlake.validate import validate


def test_largest_remainder():
    assert largest_remainder([0.5, 0.25, 0.25], 10) == [5, 3, 2]
    assert sum(largest_remainder([0.1] * 8 + [0.2], 37)) == 37
    assert largest_remainder([1 / 3] * 3, 4) == [2, 1, 1]
    assert largest_remainder([0.0, 1.0], 5) == [0, 5]


def test_counts_follow_data_ratios():
    cfg = random_config(np.random.default_rng(4))
    res = generate(cfg, 100, agents=2, seed=0, workers=1)
    counts = largest_remainder([cfg.sizes[s].data_ratio for s in SIZES], 100)
    assert [res.report[s].n for s in SIZES] == counts
    got = {s: sum(i.size == s for i in res.instances) for s in SIZES}
    assert [got[s] for s in SIZES] == counts
    assert len({i.id for i in res.instances}) == 100


def test_deterministic_and_worker_independent():
    cfg = random_config(np.random.default_rng(9))
    a = generate(cfg, 48, agents=2, seed=3, workers=1)
    b = generate(cfg, 48, agents=2, seed=3, workers=2)
    c = generate(cfg, 48, agents=2, seed=4, workers=1)
    ja = [i.to_json() for i in a.instances]
    assert ja == [i.to_json() for i in b.instances]
    assert ja != [i.to_json() for i in c.instances]


def test_instances_valid_optimal_and_flagged():
    cfg = uniform_config(0.3, 0.5)
    res = generate(cfg, 40, agents=2, seed=1, workers=1)
    for inst in res.instances:
        assert not inst.check()
        v = validate(inst, inst.optimal_plan)
        assert v.valid and v.cost == inst.optimal_cost
        if inst.h <= 4:   # brute force is affordable on small maps
            assert brute_force(inst) == inst.optimal_cost
            wf = brute_force(inst, wait_free=True)
            assert inst.needs_wait == (wf is None or wf > inst.optimal_cost)


@pytest.mark.parametrize("wait", [0.0, 1.0])
def test_wait_ratio_achieved(wait):
    res = generate(uniform_config(0.2, wait), 64, agents=2, seed=2, workers=1)
    for s in SIZES:
        r = res.report[s]
        assert r.wait_ratio_achieved == pytest.approx(wait) or r.warnings
    assert sum(i.needs_wait for i in res.instances) == pytest.approx(64 * wait, abs=3)


def test_hole_ratio_achieved_in_expectation():
    res = generate(uniform_config(0.3, 0.0), 400, agents=2, seed=0, workers=2)
    for s in SIZES:
        r = res.report[s]
        assert abs(r.hole_ratio_achieved - 0.3) < 0.06, (s, r)


def test_infeasible_request_terminates_with_warning():
    sizes = {s: SizeParams(data_ratio=1.0 if s == "3x3" else 0.0, hole_ratio=0.5, wait_ratio=1.0)
             for s in SIZES}
    res = generate(GeneratorConfig(sizes=sizes), 12, agents=2, seed=0, workers=1)
    assert len(res.instances) == 12
    r = res.report["3x3"]
    assert r.hole_ratio_requested == 0.5 and r.wait_ratio_requested == 1.0
    assert 0 <= r.wait_ratio_achieved <= 1
    if r.wait_ratio_achieved < 1.0 or r.hole_ratio_achieved < 0.5 - 0.12:
        assert r.warnings
    # five agents on 3x3 at 50% holes cannot fit (9 cells): holes are removed, with a warning
    res = generate(GeneratorConfig(sizes=sizes), 3, agents=5, seed=0, workers=1)
    assert len(res.instances) == 3 and all(len(i.holes) <= 3 for i in res.instances)
    assert res.report["3x3"].warnings


def test_too_many_agents_is_a_clear_error():
    with pytest.raises(ValueError, match="do not fit"):
        generate(uniform_config(), 8, agents=9, seed=0, workers=1)


@pytest.mark.slow
def test_solver_never_exhausts_its_budget_on_random_10x10_five_agents():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.mapf import random_instance
    from testbeds.mapf_frozenlake.solver import solve

    rng = np.random.default_rng(2024)
    for _ in range(150):
        inst = random_instance(rng, 10, 5, float(rng.uniform(0.15, 0.25)))
        r = solve(inst, time_budget_s=60, node_budget=20_000)
        assert r.status in ("solved", "unsolvable")
        if r.status == "solved":
            assert validate(inst, r.plan).valid
