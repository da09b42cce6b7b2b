"""Solver vs brute-force joint search on random small instances (hypothesis)."""

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mapf_brute import brute_force, random_instance

from testbeds.mapf_frozenlake.generator import compute_needs_wait
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.solver import solve
from testbeds.mapf_frozenlake.validate import validate


@st.composite
def small_instances(draw):
    n = draw(st.integers(2, 4))
    k = draw(st.integers(1, 3 if n <= 3 else 2))
    holes = draw(st.integers(0, max(0, n * n - k - 1)))
    seed = draw(st.integers(0, 2**32 - 1))
    inst = random_instance(np.random.default_rng(seed), n, k, min(holes, n * n // 2))
    if inst is None:
        inst = random_instance(np.random.default_rng(seed), n, 1, 0)
    return inst


def _check_plan(inst, res):
    v = validate(inst, res.plan)
    assert v.valid, v.reasons
    assert v.cost == res.cost


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_solve_matches_brute_force(inst):
    ref = brute_force(inst)
    res = solve(inst)
    if ref is None:
        assert res.status == "unsolvable"
    else:
        assert res.status == "solved"
        assert res.cost == ref
        _check_plan(inst, res)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
# Target reasoning once put a vertex constraint on the resting agent's side of its split, which
# cut off plans where that agent passes its goal at the conflict time and finishes later: cost 12
# here instead of the optimum 11.
@example(Instance(h=3, w=3, holes=frozenset({(0, 0), (2, 0), (2, 2)}), starts=[(2, 1), (0, 1), (1, 0)],
                  goals=[(0, 2), (1, 0), (1, 1)]))
def test_cbs_alone_is_optimal(inst):
    """Force the CBS path (no joint search): when it answers, it is right."""
    ref = brute_force(inst)
    res = solve(inst, joint_first=0, joint_limit=0, node_budget=3000, time_budget_s=2.0)
    if res.status == "solved":
        assert ref is not None and res.cost == ref
        _check_plan(inst, res)
    elif res.status == "unsolvable":
        assert ref is None
    else:
        assert ref is None or res.status == "budget"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_needs_wait_matches_brute_force(inst):
    ref = brute_force(inst)
    if ref is None:
        return
    res = solve(inst)
    ref_wf = brute_force(inst, wait_free=True)
    expected = ref_wf is None or ref_wf > ref
    assert compute_needs_wait(inst, res.plan, res.cost) == expected


def test_known_instances():
    # two agents swapping ends of a 1-wide corridor cannot pass each other
    corridor = Instance(1, 4, frozenset(), [(0, 0), (0, 3)], [(0, 3), (0, 0)])
    assert solve(corridor).status == "unsolvable"
    # a pocket lets one agent step aside: optimal needs a wait or a detour
    t = Instance(2, 3, frozenset({(1, 0), (1, 2)}), [(0, 0), (0, 2)], [(0, 2), (0, 0)])
    r = solve(t)
    assert r.status == "solved" and r.cost == brute_force(t)
    # unreachable goal
    walled = Instance(3, 3, frozenset({(0, 1), (1, 1), (2, 1)}), [(0, 0)], [(0, 2)])
    r = solve(walled)
    assert r.status == "unsolvable" and r.method == "reachability"


def test_budget_status():
    rng = np.random.default_rng(3)
    inst = random_instance(rng, 10, 5, 20)
    r = solve(inst, node_budget=0, joint_limit=0)
    assert r.status in ("solved", "budget")  # solved only if the root has no conflict


def test_medium_instances_agree_between_cbs_and_joint():
    rng = np.random.default_rng(11)
    checked = 0
    while checked < 15:
        inst = random_instance(rng, 5, 3, int(rng.integers(3, 8)))
        a = solve(inst, joint_first=0, joint_limit=0, node_budget=5000)
        b = solve(inst, joint_first=100, node_budget=20000, time_budget_s=10)
        if a.status == "solved" and b.status == "solved":
            assert a.cost == b.cost
            checked += 1


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_cbs_with_eager_merging_is_optimal(inst):
    """Meta-agents (constrained joint search inside CBS) from the first conflict on."""
    ref = brute_force(inst)
    res = solve(inst, joint_first=0, joint_limit=0, node_budget=3000, time_budget_s=2.0,
                merge_threshold=0, merge_after=0, max_group=3)
    if res.status == "solved":
        assert ref is not None and res.cost == ref
        _check_plan(inst, res)
    elif res.status == "unsolvable":
        assert ref is None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_cbs_wait_free_bounded_matches_brute_force(inst):
    ref = brute_force(inst)
    if ref is None:
        return
    ref_wf = brute_force(inst, wait_free=True)
    for kw in ({}, {"merge_threshold": 0, "merge_after": 0, "max_group": 3}):
        res = solve(inst, wait_free=True, cost_bound=ref, joint_first=0, joint_limit=0,
                    node_budget=3000, time_budget_s=2.0, **kw)
        if res.status == "solved":
            assert ref_wf is not None and res.cost == ref_wf == ref
            _check_plan(inst, res)
            assert not any(p[t] == p[t + 1] for p in res.plan for t in range(len(p) - 1))
        elif res.status == "unsolvable":
            assert ref_wf is None or ref_wf > ref


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_reachability_matches_brute_force(inst):
    from testbeds.mapf_frozenlake.solver import _Grid, _reachable

    g = _Grid.of(inst)
    w = inst.w
    reach = _reachable(g, [r * w + c for r, c in inst.starts], [r * w + c for r, c in inst.goals],
                       limit=10**6)
    assert reach == (brute_force(inst) is not None)


def test_rotation_in_a_full_block():
    """Four agents filling a 2x2 block can only rotate: solvable, cost 4."""
    inst = Instance(2, 2, frozenset(), [(0, 0), (0, 1), (1, 1), (1, 0)],
                    [(0, 1), (1, 1), (1, 0), (0, 0)])
    assert brute_force(inst) == 4
    r = solve(inst)
    assert r.status == "solved" and r.cost == 4
    r = solve(inst, joint_first=0, joint_after=0)
    assert r.status == "solved" and r.cost == 4


CHOKEPOINT = ('{"h":10,"w":10,"holes":[[1,1],[1,2],[2,5],[2,8],[3,2],[3,3],[3,4],[3,6],[3,8],[3,9],'
              '[4,0],[4,1],[5,3],[5,8],[6,5],[7,7],[8,8],[9,0],[9,5]],"starts":[[1,6],[6,2],[0,3],'
              '[5,2],[1,8]],"goals":[[9,3],[1,4],[9,7],[0,0],[2,7]]}')


def test_corridor_reasoning_keeps_the_optimum_and_cuts_the_search():
    # two agents cross a one-cell gap (3,7) downwards and two upwards
    inst = Instance.from_json(CHOKEPOINT)
    # A generous time budget: the outcome is decided by the search, not by how loaded the machine is.
    plain = solve(inst, corridor_reasoning=False, time_budget_s=300)
    corridor = solve(inst, time_budget_s=300)
    assert plain.status == corridor.status == "solved" and plain.cost == corridor.cost
    _check_plan(inst, corridor)
    assert corridor.nodes * 4 < plain.nodes


@st.composite
def corridor_instances(draw):
    """Dense 5x5–7x7 maps (many degree-2 chains) with 2–4 agents."""
    n = draw(st.integers(5, 7))
    k = draw(st.integers(2, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    return random_instance(np.random.default_rng(seed), n, k, int(n * n * draw(st.floats(0.2, 0.4))))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corridor_instances())
def test_corridor_reasoning_agrees_with_plain_cbs(inst):
    if inst is None:
        return
    cbs_only = dict(joint_first=0, joint_after=10**9, node_budget=3000, time_budget_s=20)
    plain = solve(inst, corridor_reasoning=False, **cbs_only)
    corridor = solve(inst, **cbs_only)
    if "budget" in (plain.status, corridor.status):
        return
    assert plain.status == corridor.status and plain.cost == corridor.cost
    if corridor.status == "solved":
        _check_plan(inst, corridor)


def test_goals_in_one_dead_end_corridor_are_decided():
    holes = frozenset({(2, 4), (3, 3), (3, 4), (4, 1), (4, 2), (4, 3), (4, 4), (5, 4)})
    goals = [(5, 5), (4, 5), (3, 5), (2, 5)]  # the corridor (2,5)…(5,5) ends in a dead end
    inst = Instance(6, 6, holes, [(0, 0), (0, 1), (0, 2), (0, 3)], goals)
    res = solve(inst)
    assert res.status == "solved"
    _check_plan(inst, res)
    assert res.cost == solve(inst, corridor_reasoning=False, joint_first=0).cost
